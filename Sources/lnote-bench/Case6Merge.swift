import Foundation
import LnoteModel
import LnoteReplication

/// A seeded stream of everyday page edits made by one replica: adds of short strokes,
/// moves, reorders, partial erases and whole erases of what that replica sees.
struct OpMix {
    var rng: SplitMix64
    private var live: [ElementID] = []
    private var index: [ElementID: Int] = [:]
    private var points: [ElementID: Int] = [:]
    let pool: [Stroke]
    private var poolNext = 0

    init(seed: UInt64, base: PageReplica, pool: [Stroke]) {
        rng = SplitMix64(seed: seed)
        self.pool = pool
        for e in base.elements { track(e.id, e.content.pointCount) }
    }

    private mutating func track(_ id: ElementID, _ n: Int) {
        index[id] = live.count
        live.append(id)
        points[id] = n
    }

    private mutating func untrack(_ id: ElementID) {
        guard let i = index.removeValue(forKey: id) else { return }
        let last = live.removeLast()
        if last != id {
            live[i] = last
            index[last] = i
        }
        points[id] = nil
    }

    private mutating func pick() -> ElementID { live[Int(rng.below(UInt64(live.count)))] }

    /// Makes the next operation on `r` (applied there) and returns it.
    mutating func next(_ r: inout PageReplica, by me: ReplicaID, wallTime: Int64) throws -> Op {
        let roll = live.count < 4 ? 0 : rng.unit()
        if roll < 0.40 {
            let s = pool[poolNext % pool.count]
            poolNext += 1
            let op = try r.add(.stroke(s), by: me, wallTime: wallTime)
            track(op.id, s.points.count)
            return op
        }
        if roll < 0.65 {
            let ids = (0..<rng.int(in: 1...3)).map { _ in pick() }
            return try r.move(ids, dx: Int32(rng.int(in: -50...50)), dy: Int32(rng.int(in: -50...50)), by: me, wallTime: wallTime)
        }
        if roll < 0.75 {
            let ids = (0..<rng.int(in: 1...2)).map { _ in pick() }
            return rng.chance(0.5) ? try r.bringToFront(ids, by: me, wallTime: wallTime)
                                   : try r.sendToBack(ids, by: me, wallTime: wallTime)
        }
        let id = pick()
        if roll < 0.90, let n = points[id], n >= 2 {
            let from = rng.int(in: 0...(n - 2))
            let to = from + rng.int(in: 1...min(20, n - from))
            return try r.make(.eraseRange(id, [PointRange(UInt32(from), UInt32(to))]), by: me, wallTime: wallTime)
        }
        untrack(id)
        return try r.make(.erase([id]), by: me, wallTime: wallTime)
    }

    /// `count` operations by `me` starting from `base`; returns them and the author's replica after them.
    static func author(_ count: Int, from base: PageReplica, by me: ReplicaID, seed: UInt64,
                       pool: [Stroke]) throws -> (ops: [Op], replica: PageReplica) {
        var r = base
        var mix = OpMix(seed: seed, base: base, pool: pool)
        var ops: [Op] = []
        ops.reserveCapacity(count)
        for i in 0..<count { ops.append(try mix.next(&r, by: me, wallTime: 1_700_000_000_000 + Int64(i) * 250)) }
        return (ops, r)
    }
}

extension Bench {
    /// 6. Merge: two replicas diverged by 500 operations each on a 1,000-stroke page, then
    /// merged; and 100,000 remote operations merged into a page. The baseline is the
    /// authors applying the same operations locally (`PageReplica.make` with the same
    /// bodies, from the same starting state).
    func caseMerge() async throws {
        let pageStrokes = options.size(1000, quick: 300)
        let diverged = options.size(500, quick: 200)
        let stream = options.size(100_000, quick: 10_000)
        let pool = source.generated(512, pointRange: 20...80, stream: 66)
        let (X, A, B, R) = (ReplicaID(0xA0), ReplicaID(0xA1), ReplicaID(0xA2), ReplicaID(0xA3))
        var base = PageReplica(page: PageID())
        for (i, s) in source.handwriting(pageStrokes, stream: 6).enumerated() {
            _ = try base.add(.stroke(s), by: X, wallTime: 1_690_000_000_000 + Int64(i))
        }

        // Two replicas diverged, then merged both ways.
        let (opsA, afterA) = try OpMix.author(diverged, from: base, by: A, seed: source.seed &+ 61, pool: pool)
        let (opsB, afterB) = try OpMix.author(diverged, from: base, by: B, seed: source.seed &+ 62, pool: pool)
        var mergedA = afterA, mergedB = afterB
        let merge = Variant(name: "merge", setup: {
            mergedA = afterA
            mergedB = afterB
        }, body: {
            try mergedA.receive(opsB)
            try mergedB.receive(opsA)
        })
        var localA = base, localB = base
        let local = Variant(name: "local", setup: {
            localA = base
            localB = base
        }, body: {
            for op in opsA { _ = try localA.make(op.body, by: A, wallTime: op.wallTime) }
            for op in opsB { _ = try localB.make(op.body, by: B, wallTime: op.wallTime) }
        })
        let t1 = try await measure([merge, local], runs: options.runs)
        let converged = mergedA.state == mergedB.state && mergedA.clock.total == UInt64(pageStrokes + 2 * diverged)
        let conflicts = mergedA.conflicts().count
        let ops1 = Double(2 * diverged)
        results.rows.append(Row(6, "merge 2 × \(diverged) concurrent ops, \(formatCount(pageStrokes))-stroke page", measured: t1[0].median,
                                unit: .seconds, baselineName: "authors applying them locally", baseline: t1[1].median,
                                target: .condition("ratio ≤ 2, replicas converge", t1[0].median <= 2 * t1[1].median && converged),
                                note: "each replica receives the other's \(diverged) operations in one batch (both directions timed); "
                                    + (converged ? "both replicas end in equal states" : "REPLICAS DID NOT CONVERGE")
                                    + ", \(conflicts) conflicts reported; op mix: 40% stroke adds, 25% moves, 10% reorders, "
                                    + "15% partial erases, 10% erases",
                                measuredRuns: t1[0].runs, baselineRuns: t1[1].runs))
        results.rows.append(Row(6, "merge throughput, diverged replicas", measured: ops1 / t1[0].median, unit: .opsPerSecond,
                                baselineName: "local", baseline: ops1 / t1[1].median, target: .report))

        // A long stream of remote operations into a page.
        let (opsR, afterR) = try OpMix.author(stream, from: base, by: R, seed: source.seed &+ 63, pool: pool)
        var receiver = base
        let remote = Variant(name: "merge", setup: { receiver = base }, body: { try receiver.receive(opsR) })
        var author = base
        let authorLocal = Variant(name: "local", setup: { author = base }, body: {
            for op in opsR { _ = try author.make(op.body, by: R, wallTime: op.wallTime) }
        })
        let t2 = try await measure([remote, authorLocal], runs: options.runs)
        let same = receiver.state == afterR.state
        results.rows.append(Row(6, "merge \(formatCount(stream)) remote ops into a \(formatCount(pageStrokes))-stroke page",
                                measured: t2[0].median, unit: .seconds, baselineName: "author applying them locally",
                                baseline: t2[1].median,
                                target: .condition("ratio ≤ 2, same state", t2[0].median <= 2 * t2[1].median && same),
                                note: "one `receive` of all \(formatCount(stream)) operations; "
                                    + (same ? "the receiver ends in the author's state" : "RECEIVER STATE DIFFERS FROM THE AUTHOR'S"),
                                measuredRuns: t2[0].runs, baselineRuns: t2[1].runs))
        results.rows.append(Row(6, "merge throughput, remote stream", measured: Double(stream) / t2[0].median, unit: .opsPerSecond,
                                baselineName: "local", baseline: Double(stream) / t2[1].median, target: .report))

        try await caseMergeWide(pool: pool)
        try await caseConcurrentWriters()
        try await caseConcurrentPageMoves()
        try await caseRangeRestoreGrowth()
    }

    /// K partial erases of a whole stroke, each from its own replica, then one range restore of
    /// m one-point gaps that had seen them all (a hostile push of about 30·K + 4·m bytes), then
    /// the page written and read back; against K/4. Subtracted from each erase, the restore
    /// left K · (m + 1) ranges; kept beside them ([MERGE-71], [SNAP-44]), K + m. Two more
    /// shapes: each replica then erases one more point (the restore has not seen all of any
    /// replica's erases any more), and one replica's K small erases each taken back by a
    /// restore of its own after the big one (the big restore deepest in the trie).
    func caseRangeRestoreGrowth() async throws {
        let k = options.size(400, quick: 100), m = options.size(100_000, quick: 20_000)
        let n = 2 * m + 1
        let me = ReplicaID(0xA4)
        var author = PageReplica(page: PageID())
        let add = try author.add(.stroke(Stroke(points: (0..<n).map { StrokePoint(x: Int32($0 % 4000), y: Int32($0 / 4000)) })),
                                 by: me, wallTime: 1_700_000_000_000)
        var rng = SplitMix64(seed: source.seed &+ 68)
        let gaps = (0..<UInt32(m)).map { (i: UInt32) -> PointRange in PointRange(2 * i + 1, 2 * i + 2) }
        let wall: Int64 = 1_700_000_000_001
        /// An operation whose Lamport timestamp is its counter plus its context's other entries ([LOG-4]).
        func op(_ id: OpID, _ context: VectorClock, _ body: Op.Body) -> Op {
            Op(id: id, lamport: id.counter + context.total - context[id.replica], context: context, wallTime: wall, body: body)
        }
        enum Shape: String, CaseIterable { case whole = "", again = ", each replica then erasing one more point",
                                                chain = ", one replica's small erases each then restored alone",
                                                pairs = ", one replica's small erases each restored alone, no big restore" }
        func ops(_ count: Int, _ shape: Shape) -> [Op] {
            var out = [add]
            if shape == .chain || shape == .pairs {
                // One replica: a whole erase and the big restore (not for `pairs`), then `count`
                // pairs of a small erase and a restore of it alone (each restore has seen one
                // more erase).
                let r = ReplicaID(rng.next() | 1)
                var clock = VectorClock([(me, UInt64(1))])
                func make(_ who: ReplicaID, _ body: Op.Body) {
                    let id = OpID(replica: who, counter: clock[who] + 1)
                    out.append(op(id, clock, body))
                    clock = clock.merged(VectorClock([(who, id.counter)]))
                }
                if shape == .chain {
                    make(r, .eraseRange(add.id, [PointRange(0, UInt32(n))]))
                    make(me, .restoreRange(add.id, gaps))
                }
                for i in 0..<count {
                    let at = UInt32(2 * (i % m))
                    make(r, .eraseRange(add.id, [PointRange(at, at + 1)]))
                    make(me, .restoreRange(add.id, [PointRange(at, at + 1)]))
                }
                return out
            }
            let erasers = (0..<count).map { _ in ReplicaID(rng.next() | 1) }
            for r in erasers {
                out.append(op(OpID(replica: r, counter: 1), VectorClock([(me, UInt64(1))]), .eraseRange(add.id, [PointRange(0, UInt32(n))])))
            }
            let seen = VectorClock(erasers.map { ($0, UInt64(1)) } + [(me, UInt64(1))])
            out.append(op(OpID(replica: me, counter: 2), seen, .restoreRange(add.id, gaps)))
            if shape == .again {
                let after = seen.merged(VectorClock([(me, UInt64(2))]))
                for r in erasers { out.append(op(OpID(replica: r, counter: 2), after, .eraseRange(add.id, [PointRange(0, 1)]))) }
            }
            return out
        }
        for shape in Shape.allCases {
            // `pairs` alone: ten times as many, the history's growth then outweighs the stroke's size.
            let count = shape == .pairs ? 10 * k : k
            let many = ops(count, shape), quarter = ops(count / 4, shape)
            var a = PageReplica(page: PageID()), c = a
            var bytes: [UInt8] = []
            func run(_ r: inout PageReplica, _ ops: [Op]) throws -> [UInt8] {
                r = PageReplica(page: PageID())
                try r.receive(ops)
                let b = PageSnapshot.encode(r.state, coveredLogOffset: 0, logIncarnation: 0)
                _ = try PageSnapshot.decode(b)
                return b
            }
            let t = try await measure([
                Variant(name: "K erases", setup: {}, body: { bytes = try run(&a, many) }),
                Variant(name: "K/4 erases", setup: {}, body: { _ = try run(&c, quarter) }),
            ], runs: options.runs)
            let e = a.elements.first
            let kept = (e?.rangeErasures.reduce(0) { $0 + $1.ranges.count } ?? 0) + (e?.rangeRestores.reduce(0) { $0 + $1.ranges.count } ?? 0)
            var expected = [PointRange(0, UInt32(n))].subtracting(gaps)
            if shape == .again { expected = expected.unionNormalized([PointRange(0, 1)]) }
            if shape == .chain { expected = expected.subtracting((0..<UInt32(k)).map { PointRange(2 * $0, 2 * $0 + 1) }) }
            if shape == .pairs { expected = [] }
            let right = a.pending.isEmpty && e?.erased == expected
            let what = shape == .pairs ? "\(formatCount(count)) one-point erases of a \(formatCount(n))-point stroke by one replica, each restored alone"
                : shape == .chain ? "1 partial erase of a \(formatCount(n))-point stroke, a restore of \(formatCount(m)) gaps, then \(formatCount(k)) small erases each restored alone"
                : "\(formatCount(k)) partial erases of a \(formatCount(n))-point stroke, each from its own replica, then a restore of \(formatCount(m)) gaps\(shape.rawValue)"
            results.rows.append(Row(6, what + ": receive, write, read (a hostile push)",
                                    measured: t[0].median, unit: .seconds,
                                    baselineName: "\(formatCount(count / 4)) such erases", baseline: t[1].median,
                                    target: .condition("ratio ≤ 6, ranges kept ≤ 2 (K + m)", t[0].median <= 6 * t[1].median && kept <= 2 * (count + m) && right),
                                    note: "\(formatCount(kept)) ranges kept"
                                        + (shape == .chain || shape == .pairs ? "" : " (each erase's remainder: \(formatCount(k * (m + 1))))")
                                        + ", snapshot \(formatCount(bytes.count)) bytes" + (right ? "" : "; ERASED RANGES WRONG"),
                                    measuredRuns: t[0].runs, baselineRuns: t[1].runs))
        }
    }

    /// One element written by N replicas at once (a hostile push: each operation valid, each
    /// from a replica of its own, none having seen another), received in one batch; against
    /// N/4. Every such write is kept ([MERGE-25]: a register's frontier; [MERGE-52]: concurrent
    /// erases; [MERGE-20]: partial erases), so the cost per write must not grow with the
    /// writes already kept: 4 × is linear, 16 × quadratic.
    func caseConcurrentWriters() async throws {
        let n = options.size(10_000, quick: 4_000)
        let me = ReplicaID(0xA4)
        var author = PageReplica(page: PageID())
        let add = try author.add(.stroke(Stroke(points: (0..<64).map { StrokePoint(x: Int32($0) * 10, y: 10) })),
                                 by: me, wallTime: 1_700_000_000_000)
        let erase = try author.make(.erase([add.id]), by: me, wallTime: 1_700_000_000_000)
        var rng = SplitMix64(seed: source.seed &+ 66)
        struct Shape: Sendable {
            var name: String
            var prefix: [Op]
            var body: @Sendable (Int) -> Op.Body
            /// What the state keeps of the writes, to check that every one was applied.
            var kept: @Sendable (PageReplica) -> Int
        }
        let shapes = [
            Shape(name: "moves of one element", prefix: [add],
                  body: { .move([ElementTransform(add.id, .translation(Int32($0 % 1000), 0))]) },
                  kept: { $0.elements.first?.transform.frontier.count ?? 0 }),
            Shape(name: "whole erases of one element", prefix: [add], body: { _ in .erase([add.id]) },
                  kept: { $0.state.tombstones.first?.erasures.count ?? 0 }),
            Shape(name: "partial erases of one stroke", prefix: [add],
                  body: { .eraseRange(add.id, [PointRange(UInt32($0 % 60), UInt32($0 % 60 + 2))]) },
                  kept: { $0.elements.first?.rangeErasures.count ?? 0 }),
            Shape(name: "moves of an element erased concurrently", prefix: [add, erase],
                  body: { .move([ElementTransform(add.id, .translation(Int32($0 % 1000), 0))]) },
                  kept: { $0.state.tombstones.first?.frontier.count ?? 0 }),
        ]
        for shape in shapes {
            func writes(_ count: Int) -> [Op] {
                shape.prefix + (0..<count).map { i in
                    Op(id: OpID(replica: ReplicaID(rng.next() | 1), counter: 1), lamport: 2,
                       context: VectorClock([(me, UInt64(1))]), wallTime: 1_700_000_000_001, body: shape.body(i))
                }
            }
            let many = writes(n), quarter = writes(n / 4)
            var a = PageReplica(page: PageID()), c = a
            let t = try await measure([
                Variant(name: "N writers", setup: { a = PageReplica(page: PageID()) }, body: { try a.receive(many) }),
                Variant(name: "N/4 writers", setup: { c = PageReplica(page: PageID()) }, body: { try c.receive(quarter) }),
            ], runs: options.runs)
            writerRow(what: shape.name, n: n, timings: t, kept: shape.kept(a), by: "the state")
        }
    }

    /// One page of a document moved by N replicas at once (a hostile push, as above): the
    /// page's position register keeps every concurrent write ([MERGE-64]); against N/4.
    func caseConcurrentPageMoves() async throws {
        let n = options.size(10_000, quick: 4_000)
        let me = ReplicaID(0xA4)
        var author = DocumentReplica(id: DocumentID())
        let page = PageID()
        let add = try author.make(.addPage(page, position: ZKey(layer: 1), canvas: .a4), by: me, wallTime: 1_700_000_000_000)
        var rng = SplitMix64(seed: source.seed &+ 67)
        func moves(_ count: Int) -> [Op] {
            [add] + (0..<count).map { _ in
                Op(id: OpID(replica: ReplicaID(rng.next() | 1), counter: 1), lamport: 2, context: VectorClock([(me, add.id.counter)]),
                   wallTime: 1_700_000_000_001, body: .movePage(page, position: ZKey(layer: 2)))
            }
        }
        let many = moves(n), quarter = moves(n / 4)
        var a = DocumentReplica(id: DocumentID()), c = a
        let t = try await measure([
            Variant(name: "N writers", setup: { a = DocumentReplica(id: DocumentID()) }, body: { try a.receive(many) }),
            Variant(name: "N/4 writers", setup: { c = DocumentReplica(id: DocumentID()) }, body: { try c.receive(quarter) }),
        ], runs: options.runs)
        writerRow(what: "moves of one page", n: n, timings: t, kept: a.state.pages.first?.position.frontier.count ?? 0,
                  by: "the document's page-order register")
    }

    /// The row of one many-writers push: N against N/4, and all N writes kept.
    func writerRow(what: String, n: Int, timings t: [Timing], kept: Int, by keeper: String) {
        results.rows.append(Row(6, "\(formatCount(n)) concurrent \(what), each from its own replica (a hostile push)",
                                measured: t[0].median, unit: .seconds,
                                baselineName: "\(formatCount(n / 4)) such writes", baseline: t[1].median,
                                target: .condition("ratio ≤ 6 (4 is linear, 16 quadratic)", t[0].median <= 6 * t[1].median && kept == n),
                                note: "one `receive`; \(keeper) keeps all \(formatCount(kept)) concurrent writes"
                                    + (kept == n ? "" : " (EXPECTED \(formatCount(n)))"),
                                measuredRuns: t[0].runs, baselineRuns: t[1].runs))
    }

    /// A push from many replicas (a hostile one: each operation valid, each from a replica
    /// of its own, [MERGE-5]): one add from each of N replicas, with keys that put them at
    /// scattered positions, received in one batch; against N adds from one replica. And the
    /// same at N/4: a cost per operation that grows with N (entries inserted into sorted
    /// arrays one by one) shows as a ratio well above 4.
    func caseMergeWide(pool: [Stroke]) async throws {
        let n = options.size(100_000, quick: 20_000)
        var rng = SplitMix64(seed: source.seed &+ 64)
        func wide(_ count: Int) -> [Op] {
            (0..<count).map { i in
                Op(id: OpID(replica: ReplicaID(rng.next() | 1), counter: 1), lamport: 1, context: VectorClock(),
                   wallTime: 1_700_000_000_000, body: .add(.stroke(pool[i % pool.count]), z: ZKey(layer: 1)))
            }
        }
        let many = wide(n), quarter = wide(n / 4)
        let one = ReplicaID(0xA4)
        var author = PageReplica(page: PageID())
        var single: [Op] = []
        single.reserveCapacity(n)
        for i in 0..<n { single.append(try author.add(.stroke(pool[i % pool.count]), by: one, wallTime: 1_700_000_000_000)) }
        var a = PageReplica(page: PageID()), b = a, c = a
        let variants = [
            Variant(name: "wide", setup: { a = PageReplica(page: PageID()) }, body: { try a.receive(many) }),
            Variant(name: "one replica", setup: { b = PageReplica(page: PageID()) }, body: { try b.receive(single) }),
            Variant(name: "wide, N/4", setup: { c = PageReplica(page: PageID()) }, body: { try c.receive(quarter) }),
        ]
        let t = try await measure(variants, runs: options.runs)
        let complete = a.clock.entries.count == n && a.elements.count == n && b.elements.count == n
        results.rows.append(Row(6, "merge \(formatCount(n)) adds from as many replicas (a hostile push)", measured: t[0].median,
                                unit: .seconds, baselineName: "\(formatCount(n)) adds from one replica", baseline: t[1].median,
                                target: .report,
                                note: "one `receive`; the wide adds all at layer 1, so at scattered positions (the one replica's on top); "
                                    + (complete ? "every add applied" : "NOT EVERY ADD APPLIED"),
                                measuredRuns: t[0].runs, baselineRuns: t[1].runs))
        results.rows.append(Row(6, "the same push at N and at N/4", measured: t[0].median, unit: .seconds,
                                baselineName: "\(formatCount(n / 4)) adds from as many replicas", baseline: t[2].median,
                                target: .condition("ratio ≤ 6 (4 is linear, 16 quadratic)", t[0].median <= 6 * t[2].median && complete),
                                note: "replicas new to the log are merged into its clock and contexts once per batch, and elements "
                                    + "added below the top placed in the z order once (before: 32,000 replicas took 91 s, debug build)",
                                measuredRuns: t[0].runs, baselineRuns: t[2].runs))
    }
}
