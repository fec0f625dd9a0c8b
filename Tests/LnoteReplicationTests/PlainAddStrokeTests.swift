import Foundation
import Testing
import LnoteModel
@testable import LnoteReplication

/// Plain adds applied straight from their frames (`Protocol/operation-log.md` [LOG-28]):
/// `OperationCodec.plainAddStroke` accepts exactly the plain adds the full decoder accepts,
/// with the same fields, and `PageReplica.applyPlainAdd` leaves the replica as `receive` of
/// the decoded operation does.
@Suite struct PlainAddStrokeTests {
    /// The operation the full decoder gives for a frame, points deferred as at replay.
    static func decoded(_ f: Frame, base: Int) -> Op? {
        try? OperationCodec.decode(f, base: base, path: "p.log", deferringPoints: true)
    }

    /// True for an operation that is a plain add by its fields: an add of a stroke, written as
    /// `addStroke3`, `addStroke2` or `addStroke`, a context naming its author alone, the implied z key.
    static func isPlain(_ op: Op, type: UInt8) -> Bool {
        guard OperationCodec.isCompactStroke(type), case .add(.stroke, let z) = op.body else { return false }
        return op.context.entries.allSatisfy { $0.replica == op.id.replica } && z == OperationCodec.impliedZ(lamport: op.lamport)
    }

    /// The plain add and the decoded operation say the same.
    static func same(_ a: PlainAddStroke, _ op: Op) throws -> Bool {
        guard case .add(.stroke(let s), let z) = op.body else { return false }
        var own = VectorClock()
        own[op.id.replica] = op.id.counter - 1
        return a.id == op.id && a.lamport == op.lamport && a.wallTime == op.wallTime && op.context == own && a.z == z
            && a.stroke.style == s.style && a.stroke.pointCount == s.pointCount
            && (try? a.stroke.resolved()) == (try? s.resolved())
    }

    /// [LOG-28] Every byte of addStroke frames (plain, with contexts, with explicit keys)
    /// xor-ed four ways and every cut: a plain add is read only from a frame the full decoder
    /// accepts, with the same fields; every frame that decodes to a plain add is read as one.
    @Test("[LOG-28] a plain add is read exactly when the full decoder gives one, with the same fields")
    func mutatedFramesAgree() throws {
        let seed: UInt64 = 28
        var rng = SeededRNG(seed: seed)
        let strokes = AddStrokeFormTests.pen(16, seed: seed) + Array(HandwritingGenerator.strokes(seed: seed, count: 4))
            + AddStrokeFormTests.adversarialStrokes().filter { $0.points.count <= 3 }.prefix(6)
        let ops = try AddStrokeFormTests.ops(strokes, seed: seed)
        var cases = 0, plain = 0, notPlain = 0
        func check(_ f: Frame, _ what: String) throws {
            cases += 1
            let base = 1000
            let a = OperationCodec.plainAddStroke(f, base: base, path: "p.log")
            let op = Self.decoded(f, base: base)
            if let a {
                plain += 1
                guard let op else { Issue.record("seed \(seed): \(what): read as a plain add, refused by the decoder"); return }
                #expect(try Self.same(a, op), "seed \(seed): \(what): fields differ")
            } else {
                notPlain += 1
                if let op { #expect(!Self.isPlain(op, type: f.type), "seed \(seed): \(what): a plain add not read as one") }
            }
        }
        for (n, op) in ops.enumerated() {
            // The operations in turn in the written form and the two lnote wrote before it
            // ([LOG-32], [LOG-29], [LOG-24]).
            let f = OperationCodec.frame(op, form: [OperationCodec.Form.written, .writtenV2, .writtenV1][n % 3])
            try check(f, "\(op.id) as written (type \(f.type))")
            try check(OperationCodec.frame(op, form: .hash), "\(op.id) in hash form")
            for i in f.payload.indices {
                for x in [UInt8(1), 0x80, 0xFF, UInt8.random(in: 1...255, using: &rng)] {
                    var m = f.payload
                    m[i] ^= x
                    try check(Frame(type: f.type, payload: m), "\(op.id) byte \(i) ^ \(x)")
                }
            }
            for cut in 0..<f.payload.count { try check(Frame(type: f.type, payload: Array(f.payload[..<cut])), "\(op.id) cut at \(cut)") }
            try check(Frame(type: f.type, payload: f.payload + [0]), "\(op.id) with a trailing byte")
        }
        #expect(plain > 20 && notPlain > 1000, "seed \(seed): \(plain) plain, \(notPlain) not, of \(cases)")
    }

    /// A page log's frames replayed three ways onto the same starting state: every frame
    /// decoded and received at once (the reference); the leading plain adds applied from their
    /// bytes, the rest received (what a listing open does); each frame applied from its bytes
    /// when it can be, else received alone. States (contexts, tombstones, frontiers), pending
    /// operations and points after `resolve()` are equal.
    static func replayThreeWays(_ frames: [Frame], onto base: PageReplica, seed: UInt64, what: String) throws -> Int {
        let decodedOps = frames.enumerated().compactMap { decoded($0.element, base: 100 + $0.offset) }
        // As the store's replay does: all at once, or one by one when the engine refuses one.
        func receive(_ ops: [Op], into r: inout PageReplica) {
            if (try? r.receive(ops, allowingDeferred: true)) == nil {
                for op in ops { _ = try? r.receive([op], allowingDeferred: true) }
            }
        }
        var reference = base
        receive(decodedOps, into: &reference)

        var leading = base, direct = 0
        let plain = frames.enumerated().map { OperationCodec.plainAddStroke($0.element, base: 100 + $0.offset, path: "p.log") }
        for a in plain {
            guard let a, leading.applyPlainAdd(a) else { break }
            direct += 1
        }
        let rest = frames.enumerated().dropFirst(direct).compactMap { decoded($0.element, base: 100 + $0.offset) }
        receive(rest, into: &leading)

        // The leading plain adds handed over in one batch, as the store's open does: runs of
        // one author's next counters are taken whole.
        var batch = base
        var leadingAdds = Array(plain.prefix { $0 != nil }.map { $0! })
        let batched = batch.applyPlainAdds(taking: &leadingAdds)
        let afterBatch = frames.enumerated().dropFirst(batched).compactMap { decoded($0.element, base: 100 + $0.offset) }
        receive(afterBatch, into: &batch)

        var each = base, applied = 0
        for (i, f) in frames.enumerated() {
            if let a = plain[i], each.applyPlainAdd(a) {
                applied += 1
                continue
            }
            if let op = decoded(f, base: 100 + i) { _ = try? each.receive([op], allowingDeferred: true) }
        }
        try reference.resolve()
        try leading.resolve()
        try each.resolve()
        try batch.resolve()
        #expect(leading.state == reference.state, "seed \(seed) \(what): leading plain adds differ")
        #expect(batch.state == reference.state, "seed \(seed) \(what): leading plain adds applied in one batch differ")
        #expect(batched == direct, "seed \(seed) \(what): \(batched) applied in one batch, \(direct) one by one")
        #expect(batch.pending == reference.pending, "seed \(seed) \(what): pending after the batch")
        #expect(each.state == reference.state, "seed \(seed) \(what): plain adds applied one by one differ")
        #expect(leading.pending == reference.pending && each.pending == reference.pending, "seed \(seed) \(what): pending")
        #expect(leading.elementIDs == reference.elementIDs, "seed \(seed) \(what)")
        #expect(direct <= applied, "seed \(seed) \(what)")
        return applied
    }

    /// [LOG-28] [MERGE-40] [MERGE-43] Simulated replicas (some hostile) write and exchange
    /// operations; each replica's page logs are replayed from a random split point onto the
    /// state before it, three ways, with the same outcome. Plus one writer's own page (every
    /// add plain), with erases, partial erases, moves and reorders in between.
    @Test("[LOG-28] plain adds applied from their bytes replay like received operations", arguments: [1, 2, 3, 4, 5, 6] as [UInt64])
    func replayAgrees(seed: UInt64) throws {
        var rng = SeededRNG(seed: seed)
        var sim = Simulation(replicaCount: 3, seed: seed &* 977, lateJoiners: 1)
        sim.hostile = seed % 2 == 0
        for step in 0..<90 {
            sim.step = step
            let a = Int.random(in: 0..<3, using: &rng)
            let roll = Int.random(in: 0..<100, using: &rng)
            if roll < 70 {
                if sim.hostile && a == 1 && Bool.random(using: &rng) { try sim.hostilePageEdit(at: a) } else { try sim.localPageEdit(at: a) }
            } else {
                let b = (a + 1 + Int.random(in: 0..<2, using: &rng)) % 3
                try sim.deliver(from: a, to: b, order: [.inOrder, .shuffled][Int.random(in: 0..<2, using: &rng)],
                                duplicate: Bool.random(using: &rng), only: nil)
            }
        }
        var direct = 0
        for r in sim.replicas {
            for (p, log) in r.pageLogs {
                let frames = log.map { OperationCodec.frame($0) }
                let split = Int.random(in: 0...frames.count, using: &rng)
                var base = PageReplica(page: p)
                _ = try? base.receive(Array(log[..<split]))
                direct += try Self.replayThreeWays(Array(frames[split...]), onto: base, seed: seed, what: "replica \(r.id) page \(p)")
                // With duplicates and the tail shuffled: nothing applied out of causal order.
                var shuffled = Array(frames[split...]) + frames.prefix(3)
                shuffled.shuffle(using: &rng)
                _ = try Self.replayThreeWays(shuffled, onto: base, seed: seed, what: "replica \(r.id) page \(p), shuffled")
            }
        }

        // One writer: its adds are plain, mixed with every other page edit.
        let me = ReplicaID(0xB0 + seed)
        var page = PageReplica(page: PageID())
        var ops: [Op] = []
        let strokes = AddStrokeFormTests.pen(60, seed: seed)
        for (i, s) in strokes.enumerated() {
            ops.append(try page.add(.stroke(s), by: me, wallTime: 1_700_000_000_000 + Int64(i)))
            let ids = page.elementIDs
            guard ids.count > 2 else { continue }
            let target = ids[Int.random(in: 0..<ids.count, using: &rng)]
            switch Int.random(in: 0..<8, using: &rng) {
            case 0: ops.append(try page.make(.erase([target]), by: me, wallTime: 1))
            case 1: ops.append(try page.make(.eraseRange(target, [PointRange(0, 1)]), by: me, wallTime: 2))
            case 2: ops.append(try page.move([target], dx: 5, dy: -3, by: me, wallTime: 3))
            case 3: ops.append(try page.sendToBack([target], by: me, wallTime: 4))
            default: break
            }
        }
        let frames = ops.map { OperationCodec.frame($0) }
        for split in [0, frames.count / 3, frames.count - 1] {
            var base = PageReplica(page: page.page)
            _ = try base.receive(Array(ops[..<split]))
            let n = try Self.replayThreeWays(Array(frames[split...]), onto: base, seed: seed, what: "one writer, split \(split)")
            direct += n
        }
        #expect(direct > 20, "seed \(seed): only \(direct) plain adds applied from their bytes")
    }
}
