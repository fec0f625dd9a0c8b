import Foundation
import Testing
import LnoteModel
@testable import LnoteReplication

/// merge-semantics.md §6: cuts, moments and the states they name ([MERGE-80] – [MERGE-84]).
/// Random histories of three replicas editing one page, every state each replica went
/// through recorded as it happened; time travel must give each of them back.
@Suite struct TimeTravelTests {
    static let page = PageID(UUID(uuidString: "00000000-0000-0000-0000-0000000000AA")!)
    static let replicas = [ReplicaID(0xA1), ReplicaID(0xB2), ReplicaID(0xC3)]

    struct Recorded {
        var log: [Op] = []                          // every operation, in the order made
        var states: [(clock: VectorClock, json: String)] = []
        var made: [OpID: String] = [:]              // the author's state right after each op
        var skewedWall: [OpID: Int64] = [:]
    }

    /// Three replicas making adds, erases, partial erases, moves and reorders, exchanging
    /// random subsets of what they hold in random order; wall clocks skewed per replica.
    static func history(seed: UInt64, steps: Int) throws -> Recorded {
        var rng = SplitMix64(seed: seed)
        var r = replicas.map { _ in PageReplica(page: page) }
        var held = replicas.map { _ in [Op]() }
        let skew: [Int64] = [0, -5_000, 7_000]
        var out = Recorded()
        for step in 0..<steps {
            let i = Int(rng.next() % 3)
            let wall = 1_000_000 + Int64(step) * 1_000 + skew[i]
            if rng.next() % 3 == 0 {
                // Deliver a random subset of another replica's operations, shuffled.
                let j = (i + 1 + Int(rng.next() % 2)) % 3
                var batch = held[j].filter { _ in rng.next() % 3 != 0 }
                batch.shuffle(using: &rng)
                let applied = try r[i].receive(batch)
                held[i] += batch.filter { b in !held[i].contains { $0.id == b.id } }
                if !applied.isEmpty { out.states.append((r[i].clock, r[i].state.canonicalJSON())) }
                continue
            }
            let live = r[i].elements.map(\.id)
            let body: Op.Body
            switch (rng.next() % 5, live.randomElement(using: &rng)) {
            case (1, let e?): body = .erase([e])
            case (2, let e?): body = .eraseRange(e, [PointRange(UInt32(rng.next() % 2), 2)])
            case (3, let e?): body = .move([ElementTransform(e, try Transform.identity.translated(by: Int32(rng.next() % 50), 3))])
            default:
                let n = 2 + Int(rng.next() % 5)
                let x = Int32(rng.next() % 1000)
                body = .add(.stroke(Stroke(points: (0..<n).map { StrokePoint(x: x + Int32($0) * 10, y: 5, t: UInt32($0 * 4)) })),
                            z: ZKey(layer: Int64(r[i].clock.total + 1)))
            }
            let op = try r[i].make(body, by: replicas[i], wallTime: wall)
            held[i].append(op)
            out.log.append(op)
            out.made[op.id] = r[i].state.canonicalJSON()
            out.states.append((r[i].clock, r[i].state.canonicalJSON()))
        }
        // Everyone gets everything: the log of a replica holding the whole history.
        return out
    }

    /// The whole history applied, as the log replica holding all of it.
    static func full(_ h: Recorded) throws -> PageReplica {
        var all = PageReplica(page: page)
        try all.receive(h.log)
        return all
    }

    @Test("[MERGE-80] [MERGE-81] every state a replica went through comes back from its clock and from the operation that made it")
    func everyRecordedStateComesBack() throws {
        for seed in UInt64(1)...25 {
            let h = try Self.history(seed: seed, steps: 60)
            let applied = try Self.full(h).clock
            // The log in a shuffled order: the answer must not depend on it.
            var rng = SplitMix64(seed: seed ^ 0x5EED)
            var ops = h.log
            ops.shuffle(using: &rng)
            for (clock, json) in h.states {
                let got = try History.pageState(Self.page, at: .clock(clock), ops: ops, applied: applied)
                #expect(got.canonicalJSON() == json, "seed \(seed): state at \(clock)")
            }
            for op in h.log {
                let got = try History.pageState(Self.page, at: .operation(op.id), ops: ops, applied: applied)
                #expect(got.canonicalJSON() == h.made[op.id], "seed \(seed): state made by \(op.id)")
            }
        }
    }

    @Test("[MERGE-80] the cut is the greatest closed clock below: the join of the clocks of the operations under it")
    func cutAgainstJoinOfOperationClocks() throws {
        for seed in UInt64(100)...160 {
            let h = try Self.history(seed: seed, steps: 50)
            let applied = try Self.full(h).clock
            var rng = SplitMix64(seed: seed)
            for _ in 0..<30 {
                // A random clock, partly above what was applied, partly unknown replicas.
                var c = VectorClock()
                for r in Self.replicas + [ReplicaID(0xFF)] where rng.next() % 4 != 0 {
                    c[r] = rng.next() % (applied[r] + 3)
                }
                var expected = VectorClock()
                for op in h.log where c.covers(op.clock) { expected.merge(op.clock) }
                let cut = History.cut(c, in: h.log.shuffled(using: &rng), applied: applied)
                #expect(cut == expected, "seed \(seed): cut of \(c)")
                // Closed: every operation it covers has its context covered.
                for op in h.log where cut.covers(op.id) { #expect(cut.covers(op.context), "seed \(seed)") }
            }
        }
    }

    @Test("[MERGE-81] a wall time takes what was stamped at or before it, and what those operations had seen")
    func wallTimeIsClosedCausally() throws {
        for seed in UInt64(200)...230 {
            let h = try Self.history(seed: seed, steps: 50)
            let applied = try Self.full(h).clock
            let times = Set(h.log.map(\.wallTime)).sorted()
            for t in [times.first! - 1] + times + [times.last! + 1] {
                let c = try History.clock(of: .wallTime(t), in: h.log, applied: applied)
                var expected = VectorClock()
                for op in h.log where op.wallTime <= t { expected.merge(op.clock) }
                #expect(c == expected, "seed \(seed) t \(t)")
                #expect(History.cut(c, in: h.log, applied: applied) == c, "seed \(seed): a wall time's clock is already closed")
                // Everything stamped at or before t is in; anything more is in the past of one of those.
                for op in h.log {
                    if op.wallTime <= t { #expect(c.covers(op.id)) }
                    else if c.covers(op.id) {
                        #expect(h.log.contains { $0.wallTime <= t && $0.context.covers(op.id) }, "seed \(seed)")
                    }
                }
            }
        }
    }

    @Test("[MERGE-81] clock skew: an operation stamped later is included when one stamped earlier had seen it")
    func skewedStampFollowsCausality() throws {
        let a = ReplicaID(1), b = ReplicaID(2)
        var ra = PageReplica(page: Self.page), rb = PageReplica(page: Self.page)
        let first = try ra.add(.stroke(Stroke(points: [StrokePoint(x: 0, y: 0), StrokePoint(x: 9, y: 9, t: 4)])), by: a, wallTime: 9_000)
        try rb.receive([first])
        let second = try rb.add(.stroke(Stroke(points: [StrokePoint(x: 50, y: 0), StrokePoint(x: 59, y: 9, t: 4)])), by: b, wallTime: 2_000)
        var all = PageReplica(page: Self.page)
        try all.receive([first, second])
        let ops = [first, second]
        let at5 = try History.pageState(Self.page, at: .wallTime(5_000), ops: ops, applied: all.clock)
        #expect(at5.elements.map(\.id) == [first.id, second.id])
        #expect(at5.clock == all.clock)
        let at1 = try History.pageState(Self.page, at: .wallTime(1_999), ops: ops, applied: all.clock)
        #expect(at1.elements.isEmpty && at1.clock.isEmpty)
        // By the clock alone, b's op without a's is not a state anyone saw: the cut drops it.
        let cut = History.cut(VectorClock([(b, UInt64(1))]), in: ops, applied: all.clock)
        #expect(cut.isEmpty)
    }

    @Test("[MERGE-82] moments a log cannot rebuild are refused: before the base, lost operations, unknown or waiting ids")
    func unrebuildableMomentsAreRefused() throws {
        let h = try Self.history(seed: 7, steps: 40)
        let all = try Self.full(h)
        let applied = all.clock
        let mid = h.log[h.log.count / 2]
        // A checkpoint base at `mid`'s moment, and the log above it.
        let base = try History.pageState(Self.page, at: .operation(mid.id), ops: h.log, applied: applied)
        let above = h.log.filter { !base.clock.covers($0.id) }
        let whole = try History.pageState(Self.page, at: .clock(applied), ops: above, applied: applied, base: base)
        #expect(whole.canonicalJSON() == all.state.canonicalJSON())
        let first = h.log[0]
        try #require(!first.clock.covers(base.clock))
        #expect(throws: LnoteError.self) {
            try History.pageState(Self.page, at: .operation(first.id), ops: h.log, applied: applied, base: base)
        }
        let refused = #expect(throws: LnoteError.self) {
            try History.pageState(Self.page, at: .clock(VectorClock()), ops: above, applied: applied, base: base)
        }
        #expect(refused?.code == .invalidState)
        // Duplicates do not hide a hole: one of the lost operation's author counted twice.
        let sameAuthor = try #require(h.log.first { $0.id.replica == h.log.last!.id.replica && $0.id != h.log.last!.id })
        let refusedDup = #expect(throws: LnoteError.self) {
            try History.pageState(Self.page, at: .clock(applied), ops: Array(h.log.dropLast()) + [sameAuthor], applied: applied)
        }
        #expect(refusedDup?.message.contains(h.log.last!.id.description) == true)
        // A lost operation (held by the state, not by the log).
        let lost = h.log.last!
        let refusedLost = #expect(throws: LnoteError.self) {
            try History.pageState(Self.page, at: .clock(applied), ops: h.log.filter { $0.id != lost.id }, applied: applied)
        }
        #expect(refusedLost?.code == .invalidState)
        #expect(refusedLost?.message.contains(lost.id.description) == true)
        // A moment before the lost operation is still fine.
        let before = try History.pageState(Self.page, at: .clock(lost.context), ops: h.log.filter { $0.id != lost.id }, applied: applied)
        #expect(!before.clock.covers(lost.id))
        // An id the log does not hold; one it holds but has not applied.
        let unknown = #expect(throws: LnoteError.self) {
            try History.pageState(Self.page, at: .operation(OpID(replica: ReplicaID(0xEE), counter: 1)), ops: h.log, applied: applied)
        }
        #expect(unknown?.code == .notFound)
        let waiting = #expect(throws: LnoteError.self) {
            try History.pageState(Self.page, at: .operation(lost.id), ops: h.log, applied: lost.context)
        }
        #expect(waiting?.code == .notFound)
    }

    @Test("[MERGE-83] a document log's moments, and [MERGE-84] the steps of a log")
    func documentMomentsAndSteps() throws {
        let a = ReplicaID(1)
        let doc = DocumentID(UUID(uuidString: "00000000-0000-0000-0000-0000000000DD")!)
        var d = DocumentReplica(id: doc)
        let create = try d.make(.createDocument(title: "first"), by: a, wallTime: 100)
        let p = PageID(UUID(uuidString: "00000000-0000-0000-0000-0000000000A1")!)
        let add = try d.make(.addPage(p, position: ZKey(layer: 1), canvas: CanvasSize(width: 5953, height: 8419)), by: a, wallTime: 200)
        let title = try d.make(.setTitle("second"), by: a, wallTime: 300)
        let ops = [create, add, title]
        let at = try History.documentState(doc, at: .wallTime(250), ops: ops, applied: d.state.clock)
        #expect(at.title.value == "first")
        #expect(at.pages.map(\.id) == [p])
        let now = try History.documentState(doc, at: .operation(title.id), ops: ops, applied: d.state.clock)
        #expect(now == d.state)

        let steps = History.steps(ops, applied: VectorClock([(a, UInt64(2))]))
        #expect(steps.map(\.kind) == ["createDocument", "addPage", "setTitle"])
        #expect(steps.map(\.pending) == [false, false, true])
        #expect(steps[1].pages == [p])
        #expect(steps.map(\.moment) == ops.map(\.clock))

        var r = PageReplica(page: Self.page)
        let stroke = try r.add(.stroke(Stroke(points: (0..<5).map { StrokePoint(x: Int32($0) * 10, y: 0, t: UInt32($0)) })),
                               by: a, wallTime: 1)
        let cut = try r.make(.eraseRange(stroke.id, [PointRange(0, 2), PointRange(1, 3)]), by: a, wallTime: 2)
        let s = History.steps([stroke, cut], applied: r.clock)
        #expect(s.map(\.points) == [5, 3])
        #expect(s.map(\.elements) == [[stroke.id], [stroke.id]])
    }

    @Test("[MERGE-81] the forms of a moment people type")
    func parsing() {
        #expect(HistoryPoint(parsing: "a1.17") == .operation(OpID(replica: ReplicaID(0xA1), counter: 17)))
        #expect(HistoryPoint(parsing: "{a1:17, b2:3}") == .clock(VectorClock([(ReplicaID(0xA1), UInt64(17)), (ReplicaID(0xB2), UInt64(3))])))
        #expect(HistoryPoint(parsing: "{}") == .clock(VectorClock()))
        #expect(HistoryPoint(parsing: "@1764669600000") == .wallTime(1_764_669_600_000))
        #expect(HistoryPoint(parsing: "2025-12-02T10:00:00Z") == .wallTime(1_764_669_600_000))
        #expect(HistoryPoint(parsing: "2025-12-02T11:00:00.250+01:00") == .wallTime(1_764_669_600_250))
        #expect(HistoryPoint(parsing: "2025-12-02") == .wallTime(1_764_633_600_000))
        #expect(HistoryPoint(parsing: "2024-02-29") == .wallTime(1_709_164_800_000))
        #expect(HistoryPoint(parsing: "2000-02-29T00:00:00Z") == .wallTime(951_782_400_000))
        for bad in ["", "a1", "a1.0", "{a1:0}", "{a1:1, a1:2}", "{a1:1", "2025-12-02T10:00:00", "@x", "yesterday", "zz.1",
                    // Days that do not exist (formatters roll them over into the next month).
                    "2026-02-30T00:00:00Z", "2025-02-29", "2100-02-29T00:00:00Z", "2026-04-31", "2026-13-01", "2026-00-10"] {
            #expect(HistoryPoint(parsing: bad) == nil, "\(bad)")
        }
        // What `description` prints parses back.
        for p: HistoryPoint in [.operation(OpID(replica: ReplicaID(7), counter: 3)), .clock(VectorClock([(ReplicaID(7), UInt64(3))])), .wallTime(-5)] {
            #expect(HistoryPoint(parsing: p.description) == p)
        }
    }
}
