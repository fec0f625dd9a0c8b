import Foundation
import Testing
import LnoteModel
@testable import LnoteReplication

/// Restores: `restore` and `restoreRange` (merge-semantics.md [MERGE-70] … [MERGE-72], with
/// [MERGE-21], [MERGE-30] and [MERGE-42] as restores change them). Each case is checked on
/// the replicas that made it and on fresh replicas fed the same operations in every order (or
/// many seeded random orders, one operation at a time, so that some wait for others): the
/// state must be the same whatever the order ([MERGE-1]).
@Suite struct RestoreRuleTests {
    typealias Page = MergeRuleTests.Page
    static let a = MergeRuleTests.a, b = MergeRuleTests.b, c = MergeRuleTests.c
    /// A replica outside the page's three, whose hand-built operations no correct replica makes.
    static let h = ReplicaID(9)
    static let page = MergeRuleTests.page

    static func stroke(_ n: Int = 4, x: Int32 = 0) -> ElementContent { MergeRuleTests.stroke(n, x: x) }

    // MARK: - Helpers

    /// Every order of `ops` (at most 6 of them).
    static func permutations(_ ops: [Op]) -> [[Op]] {
        precondition(ops.count <= 6)
        guard ops.count > 1 else { return [ops] }
        var out: [[Op]] = []
        for i in ops.indices {
            var rest = ops
            let first = rest.remove(at: i)
            for p in permutations(rest) { out.append([first] + p) }
        }
        return out
    }

    /// A fresh replica fed `prefix` in one batch, then `ops` one at a time.
    static func fed(_ ops: [Op], after prefix: [Op] = []) throws -> PageReplica {
        var r = PageReplica(page: page)
        try r.receive(prefix)
        for op in ops { try r.receive([op]) }
        return r
    }

    /// Fresh replicas fed `ops` in `count` seeded random orders, one at a time, and in
    /// random batches: each must equal `expected` (state and canonical JSON), and `check` must
    /// hold on it. Returns how many orders were tried.
    @discardableResult
    static func everyOrder(_ ops: [Op], expected: PageState, seed: UInt64, count: Int = 60,
                           _ check: (PageReplica, String) throws -> Void = { _, _ in }) throws -> Int {
        var rng = SplitMix64(seed: seed)
        let json = expected.canonicalJSON()
        for k in 0..<count {
            let order = ops.shuffled(using: &rng)
            var r = PageReplica(page: page)
            if k % 2 == 0 {
                for op in order { try r.receive([op]) }
            } else {
                var rest = order[...]
                while !rest.isEmpty {
                    let n = Int.random(in: 1...rest.count, using: &rng)
                    try r.receive(Array(rest.prefix(n)))
                    rest = rest.dropFirst(n)
                }
            }
            let what = "seed \(seed), order \(k): \(order.map(\.id.description))"
            #expect(r.pending.isEmpty, "\(what)")
            #expect(r.state == expected, "\(what)")
            #expect(r.state.canonicalJSON() == json, "\(what)")
            try check(r, what)
        }
        return count
    }

    /// A hand-built operation by replica `h` with the context given (its own previous
    /// operations included by the caller): well formed, but no correct replica makes it.
    static func hostile(_ counter: UInt64, context: VectorClock, _ body: Op.Body) -> Op {
        var ctx = context
        ctx[h] = counter - 1
        let id = OpID(replica: h, counter: counter)
        let op = Op(id: id, lamport: OpValidator.lamport(id: id, context: ctx)!, context: ctx, wallTime: 5_000 + Int64(counter), body: body)
        precondition(OpValidator.violation(of: op) == nil)
        return op
    }

    /// Every operation the page's replicas hold, each once.
    static func all(_ p: Page) -> [Op] {
        var seen = Set<OpID>()
        var out: [Op] = []
        for who in [a, b, c] { for op in p.held[who]! where seen.insert(op.id).inserted { out.append(op) } }
        return out
    }

    static func expectRefused(_ code: LnoteError.Code, _ r: inout PageReplica, _ body: Op.Body, by who: ReplicaID,
                              sourceLocation: SourceLocation = #_sourceLocation) {
        let before = r.state
        do {
            _ = try r.make(body, by: who, wallTime: 77)
            Issue.record("\(body.name) was not refused", sourceLocation: sourceLocation)
        } catch let e as LnoteError {
            #expect(e.code == code, "\(body.name): \(e)", sourceLocation: sourceLocation)
        } catch {
            Issue.record("\(error)", sourceLocation: sourceLocation)
        }
        #expect(r.state == before, "a refused \(body.name) changed the state", sourceLocation: sourceLocation)
    }

    // MARK: - (a) Erase, then restore

    @Test("[MERGE-70] [MERGE-21] [MERGE-30] erase then restore brings the element back whole, at its position, with a move made while it was erased, in every order")
    func eraseThenRestore() throws {
        var p = Page()
        let below = try p.add(Self.a), s = try p.add(Self.a, Self.stroke(8)), above = try p.add(Self.a)
        let cut = try p.make(Self.a, .eraseRange(s.id, [PointRange(2, 5)]))
        try p.syncAll()
        let before = try #require(p.r[Self.a]!.element(s.id))
        // b erases s; c, which has not seen the erase, moves it; b, which has not seen c's move, restores it.
        let erase = try p.make(Self.b, .erase([s.id]))
        var kept = before
        kept.frontier = []
        #expect(p.r[Self.b]!.isRestorable(s.id) && p.r[Self.b]!.tombstone(s.id)?.record == kept,
                "the tombstone keeps the element whole, its frontier with the tombstone")
        #expect(p.r[Self.b]!.tombstone(s.id)?.frontier == before.frontier)
        let move = try p.edit(Self.c) { try $0.move([s.id], dx: 7, dy: -3, by: Self.c, wallTime: $1) }
        let restore = try p.make(Self.b, .restore([s.id]))
        #expect(restore.context.covers(erase.id) && !restore.context.covers(move.id))
        #expect(p.r[Self.b]!.element(s.id) == before, "restored at b before it saw the move: as it was")
        try p.syncAll()

        func check(_ r: PageReplica, _ what: String) {
            #expect(r.elementIDs == [below.id, s.id, above.id], "at its z position: \(what)")
            guard let e = r.element(s.id) else { Issue.record("not restored: \(what)"); return }
            #expect(e.content == before.content && e.z == before.z && e.lamport == before.lamport && e.wallTime == before.wallTime, "\(what)")
            #expect(e.erased == [PointRange(2, 5)] && e.keptRangeErasures == [RangeErasure(ref: cut.ref, ranges: [PointRange(2, 5)])], "\(what)")
            #expect(e.transform == LWWRegister(.translation(7, -3), frontier: [move.ref]), "the move made while erased applies: \(what)")
            #expect(e.frontier == [move.ref], "a restore is not an edit: \(what)")
            let t = r.tombstone(s.id)
            #expect(t == Tombstone(id: s.id, erasures: [Erasure(ref: erase.ref, clock: erase.context, cancelledBy: [restore.id])]),
                    "the tombstone stays, taken back, with no frontier and no record: \(what)")
            #expect(t?.isErased == false && !r.isRestorable(s.id), "\(what)")
            #expect(r.conflicts().isEmpty, "[MERGE-72] a taken-back erase makes no conflict: \(what)")
        }
        for who in [Self.a, Self.b, Self.c] { check(p.r[who]!, "replica \(who)") }
        let expected = p.r[Self.a]!.state
        #expect(p.r[Self.b]!.state == expected && p.r[Self.c]!.state == expected)
        let base = [below, s, above, cut]
        for order in Self.permutations([erase, move, restore]) {
            let r = try Self.fed(order, after: base)
            #expect(r.state == expected, "order \(order.map(\.summary))")
            check(r, "order \(order.map(\.summary))")
        }
        try Self.everyOrder(base + [erase, move, restore], expected: expected, seed: 0xA1, check)
    }

    // MARK: - (b) A restore against a concurrent erase

    @Test("[MERGE-70] [MERGE-21] a restore concurrent with another erase leaves the element erased; a restore that saw both brings it back")
    func restoreConcurrentWithErase() throws {
        var p = Page()
        let s = try p.add(Self.a, Self.stroke(5))
        try p.syncAll()
        let e1 = try p.make(Self.a, .erase([s.id]))
        try p.send(Self.a, Self.b)
        let r1 = try p.make(Self.b, .restore([s.id]))
        #expect(p.r[Self.b]!.element(s.id) != nil, "restored where it was made")
        // c erases s without having seen a's erase nor b's restore.
        let e2 = try p.make(Self.c, .erase([s.id]))
        try p.syncAll()
        let held = [
            Erasure(ref: e1.ref, clock: e1.context, cancelledBy: [r1.id]),
            Erasure(ref: e2.ref, clock: e2.context),
        ].sorted { $0.ref < $1.ref }
        func erased(_ r: PageReplica, _ what: String) {
            #expect(r.element(s.id) == nil && r.elementIDs.isEmpty, "erase wins over the restore that did not see it: \(what)")
            let t = r.tombstone(s.id)
            #expect(t?.erasures == held && t?.isErased == true && t?.record?.id == s.id && r.isRestorable(s.id), "\(what)")
            #expect(r.conflicts().isEmpty, "a restore is never the loser of an erase conflict: \(what)")
        }
        for who in [Self.a, Self.b, Self.c] { erased(p.r[who]!, "replica \(who)") }
        let expected = p.r[Self.c]!.state
        for order in Self.permutations([e1, r1, e2]) {
            let r = try Self.fed(order, after: [s])
            #expect(r.state == expected)
            erased(r, "order \(order.map(\.summary))")
        }

        // A restore by a replica that has seen both erases takes both back.
        let r2 = try p.make(Self.a, .restore([s.id]))
        try p.syncAll()
        let both = [
            Erasure(ref: e1.ref, clock: e1.context, cancelledBy: [r1.id, r2.id].sorted()),
            Erasure(ref: e2.ref, clock: e2.context, cancelledBy: [r2.id]),
        ].sorted { $0.ref < $1.ref }
        func live(_ r: PageReplica, _ what: String) {
            #expect(r.element(s.id)?.content == Self.stroke(5), "\(what)")
            #expect(r.tombstone(s.id) == Tombstone(id: s.id, erasures: both), "\(what)")
            #expect(r.conflicts().isEmpty, "\(what)")
        }
        for who in [Self.a, Self.b, Self.c] { live(p.r[who]!, "replica \(who)") }
        let final = p.r[Self.a]!.state
        for order in Self.permutations([e1, r1, e2, r2]) {
            let r = try Self.fed(order, after: [s])
            #expect(r.state == final)
            live(r, "order \(order.map(\.summary))")
        }
    }

    // MARK: - (c) [MERGE-42] with restores

    @Test("[MERGE-42] [MERGE-70] an edit by an author who saw the element erased and not restored is ignored; after the restore edits apply and an erase erases again")
    func editsAroundARestore() throws {
        var p = Page()
        let s = try p.add(Self.a, Self.stroke(6))
        try p.syncAll()
        let erase = try p.make(Self.a, .erase([s.id]))
        try p.syncAll()
        // Correct replicas refuse to edit what they see erased.
        var rb = p.r[Self.b]!
        Self.expectRefused(.invalidArgument, &rb, .move([ElementTransform(s.id, .translation(1, 1))]), by: Self.b)
        Self.expectRefused(.invalidArgument, &rb, .eraseRange(s.id, [PointRange(0, 1)]), by: Self.b)
        Self.expectRefused(.invalidArgument, &rb, .restoreRange(s.id, [PointRange(0, 1)]), by: Self.b)
        Self.expectRefused(.invalidArgument, &rb, .erase([s.id]), by: Self.b)
        Self.expectRefused(.invalidArgument, &rb, .reorder([ElementZ(s.id, ZKey(layer: 9))]), by: Self.b)
        // A hostile replica that saw the erase, and not the restore to come, edits and erases anyway.
        let seen = erase.clock
        let h1 = Self.hostile(1, context: seen, .move([ElementTransform(s.id, .translation(50, 50))]))
        let h2 = Self.hostile(2, context: seen, .eraseRange(s.id, [PointRange(0, 2)]))
        let h3 = Self.hostile(3, context: seen, .erase([s.id]))
        let h4 = Self.hostile(4, context: seen, .restoreRange(s.id, [PointRange(0, 6)]))
        let h5 = Self.hostile(5, context: seen, .reorder([ElementZ(s.id, ZKey(layer: 1))]))
        let blind = [h1, h2, h3, h4, h5]

        let restore = try p.make(Self.b, .restore([s.id]))
        try p.syncAll()
        // c, having seen the restore, moves it: that applies.
        let move = try p.edit(Self.c) { try $0.move([s.id], dx: 4, dy: 0, by: Self.c, wallTime: $1) }
        try p.syncAll()
        let restored = p.r[Self.a]!.state
        let ops = Self.all(p)
        func checkRestored(_ r: PageReplica, _ what: String) {
            guard let e = r.element(s.id) else { Issue.record("not restored: \(what)"); return }
            #expect(e.transform == LWWRegister(.translation(4, 0), frontier: [move.ref]) && e.frontier == [move.ref], "\(what)")
            #expect(e.erased.isEmpty && e.keptRangeErasures.isEmpty && e.z.frontier.isEmpty, "the blind edits changed nothing: \(what)")
            #expect(r.tombstone(s.id)?.erasures == [Erasure(ref: erase.ref, clock: erase.context, cancelledBy: [restore.id])],
                    "the blind erase added no erasure: \(what)")
        }
        checkRestored(p.r[Self.a]!, "replica a")
        // The blind operations change nothing, whenever they arrive (before or after the restore).
        try Self.everyOrder(ops + blind, expected: Self.fed(ops + blind).state, seed: 0xC1, count: 40) { r, what in
            checkRestored(r, what)
        }
        var withBlind = try Self.fed(blind, after: ops)
        #expect(withBlind.elements == restored.elements && withBlind.state.tombstones == restored.tombstones)

        // An erase made after seeing the restore erases it again: a second erasure, which holds.
        let again = try p.make(Self.a, .erase([s.id]))
        try p.syncAll()
        try withBlind.receive([again])
        for r in [p.r[Self.a]!, p.r[Self.b]!, p.r[Self.c]!, withBlind] {
            #expect(r.element(s.id) == nil)
            let t = try #require(r.tombstone(s.id))
            #expect(t.erasures == [Erasure(ref: erase.ref, clock: erase.context, cancelledBy: [restore.id]),
                                   Erasure(ref: again.ref, clock: again.context)])
            #expect(t.isErased && t.frontier == [move.ref] && t.record?.transform.value == .translation(4, 0))
            #expect(t.concurrent.isEmpty && r.conflicts().isEmpty, "the second erase saw the move")
        }
        #expect(p.r[Self.b]!.state == p.r[Self.a]!.state)
        try Self.everyOrder(Self.all(p) + blind, expected: withBlind.state, seed: 0xC2, count: 40)
    }

    // MARK: - (d) Range restores

    @Test("[MERGE-71] [MERGE-20] a range restore takes back only the partial erases its author saw; a concurrent partial erase keeps all its ranges")
    func rangeRestore() throws {
        var p = Page()
        let s = try p.add(Self.a, Self.stroke(10))
        try p.syncAll()
        let p1 = try p.make(Self.a, .eraseRange(s.id, [PointRange(0, 4)]))
        let p2 = try p.make(Self.a, .eraseRange(s.id, [PointRange(6, 8)]))
        try p.syncAll()
        // c takes back [1, 7) of what it saw; b concurrently erases [2, 3) and [5, 7).
        let rr = try p.make(Self.c, .restoreRange(s.id, [PointRange(1, 7)]))
        #expect(p.r[Self.c]!.element(s.id)?.erased == [PointRange(0, 1), PointRange(7, 8)])
        let p3 = try p.make(Self.b, .eraseRange(s.id, [PointRange(2, 3), PointRange(5, 7)]))
        try p.syncAll()
        let kept = [
            RangeErasure(ref: p1.ref, ranges: [PointRange(0, 1)]),
            RangeErasure(ref: p2.ref, ranges: [PointRange(7, 8)]),
            RangeErasure(ref: p3.ref, ranges: [PointRange(2, 3), PointRange(5, 7)]),
        ].sorted { $0.ref < $1.ref }
        func check(_ r: PageReplica, _ what: String) {
            let e = r.element(s.id)
            #expect(e?.keptRangeErasures == kept, "\(what)")
            #expect(e?.erased == [PointRange(0, 1), PointRange(2, 3), PointRange(5, 8)], "\(what)")
            #expect(e?.visibleRanges == [PointRange(1, 2), PointRange(3, 5), PointRange(8, 10)], "\(what)")
            #expect(e?.frontier == [rr.ref, p3.ref].sorted(), "a range restore is an edit: \(what)")
            #expect(r.conflicts().isEmpty, "\(what)")
        }
        for who in [Self.a, Self.b, Self.c] { check(p.r[who]!, "replica \(who)") }
        try Self.everyOrder(Self.all(p), expected: p.r[Self.a]!.state, seed: 0xD1, check)

        // Points not erased, or of partial erases not seen, take nothing back; the frontier advances.
        let none = try p.make(Self.c, .restoreRange(s.id, [PointRange(3, 5), PointRange(9, 10)]))
        #expect(p.r[Self.c]!.element(s.id)?.keptRangeErasures == kept && p.r[Self.c]!.element(s.id)?.frontier == [none.ref])
        // A partial erase taken back whole is dropped.
        try p.syncAll()
        let rr2 = try p.make(Self.b, .restoreRange(s.id, [PointRange(0, 3)]))
        try p.syncAll()
        let e = try #require(p.r[Self.a]!.element(s.id))
        #expect(e.keptRangeErasures == [RangeErasure(ref: p2.ref, ranges: [PointRange(7, 8)]),
                                    RangeErasure(ref: p3.ref, ranges: [PointRange(5, 7)])].sorted { $0.ref < $1.ref })
        #expect(e.erased == [PointRange(5, 8)] && e.frontier == [rr2.ref])
        try Self.everyOrder(Self.all(p), expected: p.r[Self.a]!.state, seed: 0xD2, count: 30)
    }

    @Test("[MERGE-71] [MERGE-42] [MERGE-21] on an erased stroke: a range restore by an author who saw it erased is ignored; a concurrent one applies to the kept record and loses to the erase")
    func rangeRestoreOfErasedStroke() throws {
        var p = Page()
        let s = try p.add(Self.a, Self.stroke(8))
        let cut = try p.make(Self.a, .eraseRange(s.id, [PointRange(0, 6)]))
        try p.syncAll()
        // b takes back [0, 2) while a, concurrently, erases the stroke whole.
        let rrB = try p.make(Self.b, .restoreRange(s.id, [PointRange(0, 2)]))
        let erase = try p.make(Self.a, .erase([s.id]))
        try p.syncAll()
        // A hostile range restore after seeing the erase: ignored.
        let blind = Self.hostile(1, context: p.r[Self.a]!.clock, .restoreRange(s.id, [PointRange(0, 8)]))
        var r = p.r[Self.c]!
        try r.receive([blind])
        func checkErased(_ r: PageReplica, _ what: String) throws {
            #expect(r.element(s.id) == nil, "\(what)")
            let t = try #require(r.tombstone(s.id))
            #expect(t.record?.keptRangeErasures == [RangeErasure(ref: cut.ref, ranges: [PointRange(2, 6)])], "\(what)")
            #expect(t.record?.erased == [PointRange(2, 6)], "the concurrent range restore applies to the kept record: \(what)")
            #expect(t.frontier == [rrB.ref] && t.concurrent == [rrB.ref], "\(what)")
            let conflicts = r.conflicts()
            #expect(conflicts.map(\.kind) == [.erase] && conflicts.first?.ops == [erase.ref, rrB.ref].sorted()
                    && conflicts.first?.winner == erase.ref, "[MERGE-50] the erase won against the range restore: \(what)")
        }
        try checkErased(r, "with the blind range restore")
        for who in [Self.a, Self.b, Self.c] { try checkErased(p.r[who]!, "replica \(who)") }
        try Self.everyOrder(Self.all(p) + [blind], expected: r.state, seed: 0xD3, count: 40) { r, what in try checkErased(r, what) }

        // The restore brings the stroke back with what the range restore did, and no conflict ([MERGE-72]).
        let restore = try p.make(Self.c, .restore([s.id]))
        try r.receive([restore])
        try p.syncAll()
        for x in [r, p.r[Self.a]!] {
            let e = try #require(x.element(s.id))
            #expect(e.erased == [PointRange(2, 6)] && e.frontier == [rrB.ref] && x.conflicts().isEmpty)
            #expect(x.tombstone(s.id)?.concurrent == [])
        }
        #expect(r.elements == p.r[Self.a]!.elements)
    }

    // MARK: - (e) [MERGE-72]

    @Test("[MERGE-72] [MERGE-50] only holding erasures make erase conflicts; a tombstone whose erasures are all taken back reports none")
    func conflictsWithRestores() throws {
        var p = Page()
        let s = try p.add(Self.a)
        try p.syncAll()
        // Three concurrent operations: c erases, b moves, a erases (c's erase has the greatest ref).
        let ec = try p.make(Self.c, .erase([s.id]))
        let mb = try p.edit(Self.b) { try $0.move([s.id], dx: 1, dy: 2, by: Self.b, wallTime: $1) }
        let ea = try p.make(Self.a, .erase([s.id]))
        #expect(ec.ref > ea.ref && ec.ref > mb.ref)
        // c takes back its own erase, before seeing anything else.
        let rc = try p.make(Self.c, .restore([s.id]))
        try p.syncAll()
        func check(_ r: PageReplica, _ what: String) {
            let t = r.tombstone(s.id)
            #expect(t?.isErased == true && t?.erasures.first { $0.ref == ec.ref }?.holds == false, "\(what)")
            #expect(t?.concurrent == [mb.ref], "\(what)")
            let conflicts = r.conflicts()
            #expect(conflicts.count == 1, "\(what)")
            #expect(conflicts.first?.kind == .erase && conflicts.first?.ops == [ea.ref, mb.ref].sorted(),
                    "the taken-back erase is not among the conflict's operations: \(what)")
            #expect(conflicts.first?.winner == ea.ref, "the winner is the greatest holding erasure, not c's: \(what)")
            #expect(t?.record?.transform.value == .translation(1, 2), "\(what)")
        }
        for who in [Self.a, Self.b, Self.c] { check(p.r[who]!, "replica \(who)") }
        try Self.everyOrder(Self.all(p), expected: p.r[Self.a]!.state, seed: 0xE1, check)

        // The canonical JSON lists the restore under the erasure it took back, and the move as concurrent.
        let json = p.r[Self.a]!.state.canonicalJSON()
        #expect(json.contains("\"restoredBy\"") && json.contains(rc.id.description))

        // A restore that saw everything: live, no conflict, an empty concurrent list.
        let r2 = try p.make(Self.b, .restore([s.id]))
        try p.syncAll()
        for who in [Self.a, Self.b, Self.c] {
            let r = p.r[who]!
            #expect(r.element(s.id)?.transform.value == .translation(1, 2))
            #expect(r.conflicts().isEmpty && r.tombstone(s.id)?.concurrent == [] && r.state.conflicts.isEmpty)
            #expect(r.tombstone(s.id)?.erasures.allSatisfy { $0.cancelledBy.contains(r2.id) } == true)
        }
        try Self.everyOrder(Self.all(p), expected: p.r[Self.a]!.state, seed: 0xE2, count: 30) { r, what in
            #expect(r.conflicts().isEmpty, "\(what)")
        }
    }

    // MARK: - (f) Local validation, and restores that change nothing

    @Test("[MERGE-70] [MERGE-2] a restore of a live or unknown element is refused locally; received, it changes nothing")
    func restoreValidation() throws {
        var p = Page()
        let s = try p.add(Self.a, Self.stroke(4))
        let img = try p.add(Self.a, .image(ImageElement(asset: AssetID.of([1]), frame: QRect(x: 0, y: 0, width: 10, height: 10))))
        var r = p.r[Self.a]!
        let unknown = OpID(replica: Self.b, counter: 7)
        Self.expectRefused(.invalidArgument, &r, .restore([s.id]), by: Self.a)
        Self.expectRefused(.invalidArgument, &r, .restore([unknown]), by: Self.a)
        Self.expectRefused(.invalidArgument, &r, .restore([]), by: Self.a)
        Self.expectRefused(.invalidArgument, &r, .restoreRange(s.id, []), by: Self.a)
        Self.expectRefused(.invalidArgument, &r, .restoreRange(s.id, [PointRange(2, 5)]), by: Self.a)
        Self.expectRefused(.invalidArgument, &r, .restoreRange(s.id, [PointRange(2, 2)]), by: Self.a)
        Self.expectRefused(.invalidArgument, &r, .restoreRange(img.id, [PointRange(0, 1)]), by: Self.a)
        Self.expectRefused(.invalidArgument, &r, .restoreRange(unknown, [PointRange(0, 1)]), by: Self.a)
        // Erased and restored: live again, so a second restore is refused too; one of several ids live refuses the whole.
        _ = try r.make(.erase([s.id, img.id]), by: Self.a, wallTime: 1)
        _ = try r.make(.restore([s.id]), by: Self.a, wallTime: 2)
        Self.expectRefused(.invalidArgument, &r, .restore([s.id]), by: Self.a)
        Self.expectRefused(.invalidArgument, &r, .restore([img.id, s.id]), by: Self.a)
        _ = try r.make(.restore([img.id, img.id]), by: Self.a, wallTime: 3)
        #expect(r.elementIDs == [s.id, img.id])

        // Received: a restore of an element never erased, or whose add its author had not seen, changes nothing.
        var q = PageReplica(page: Self.page)
        try q.receive([s, img])
        let onLive = Self.hostile(1, context: q.clock, .restore([s.id, img.id]))
        let unseen = Self.hostile(2, context: VectorClock(), .restore([s.id]))
        let never = Self.hostile(3, context: q.clock, .restore([unknown]))
        let before = q.state
        try q.receive([onLive, unseen, never])
        #expect(q.elements == before.elements && q.state.tombstones.isEmpty && q.clock.total == 5)
        // A restore whose author had not seen the add takes nothing back even once the element is erased.
        var q2 = PageReplica(page: Self.page)
        let erase = Self.hostile(4, context: q.clock, .erase([s.id]))
        let blindRestore = Op(id: OpID(replica: Self.c, counter: 1), lamport: 1, context: VectorClock(), wallTime: 9, body: .restore([s.id]))
        try q2.receive([s, img, onLive, unseen, never, erase, blindRestore])
        #expect(q2.element(s.id) == nil && q2.tombstone(s.id)?.erasures.first?.holds == true)
    }

    @Test("[MERGE-30] [MERGE-70] an erased element whose content is gone: a local restore is refused with notFound; a received one takes the erase back and draws nothing")
    func restoreWithoutRecord() throws {
        var p = Page()
        let s = try p.add(Self.a)
        try p.syncAll()
        let erase = try p.make(Self.a, .erase([s.id]))
        try p.syncAll()
        let restore = try p.make(Self.b, .restore([s.id]))
        // What a replica holds from a format-2 checkpoint of before restores: a tombstone without a record.
        var legacy = p.r[Self.a]!.state
        legacy.tombstones[0].record = nil
        var r = PageReplica(state: legacy)
        #expect(r.tombstone(s.id)?.isErased == true && !r.isRestorable(s.id))
        Self.expectRefused(.notFound, &r, .restore([s.id]), by: Self.a)
        try r.receive([restore])
        #expect(r.element(s.id) == nil && r.elementIDs.isEmpty)
        #expect(r.tombstone(s.id) == Tombstone(id: s.id, erasures: [Erasure(ref: erase.ref, clock: erase.context, cancelledBy: [restore.id])]))
        // Its snapshot round-trips: a restored tombstone whose content was never held is not live.
        let bytes = PageSnapshot.encode(r.state, coveredLogOffset: 0, logIncarnation: 0)
        #expect(try PageSnapshot.decode(bytes).state == r.state)
    }

    @Test("[MERGE-30] [MERGE-70] [SNAP-15] an erased element whose content is gone, with an edit concurrent with its erase: restored, its tombstone keeps no frontier and still snapshots")
    func restoreWithoutRecordAfterConcurrentEdit() throws {
        var p = Page()
        let s = try p.add(Self.a)
        try p.syncAll()
        // b moves s while a erases it: the tombstone's edit frontier holds the move.
        let move = try p.edit(Self.b) { try $0.move([s.id], dx: 1, dy: 0, by: Self.b, wallTime: $1) }
        let erase = try p.make(Self.a, .erase([s.id]))
        try p.syncAll()
        let restore = try p.make(Self.c, .restore([s.id]))
        try p.syncAll()
        // Live again everywhere its content is held; c moves it.
        let after = try p.edit(Self.c) { try $0.move([s.id], dx: 0, dy: 1, by: Self.c, wallTime: $1) }
        try p.syncAll()
        #expect(p.r[Self.a]!.element(s.id)?.transform.value == .translation(1, 1))

        // A replica that holds the page from a format-2 checkpoint of before restores.
        var legacy = try Self.fed([s, move, erase]).state
        #expect(legacy.tombstones[0].frontier == [move.ref])
        legacy.tombstones[0].record = nil
        var r = PageReplica(state: legacy)
        try r.receive([restore])
        let t = try #require(r.tombstone(s.id))
        #expect(!t.isErased && r.element(s.id) == nil)
        #expect(t.frontier.isEmpty, "[SNAP-15] a restored tombstone's edit frontier is empty: \(t.frontier)")
        #expect(throws: Never.self, "the state is not one a snapshot holds") { try PageSnapshot.validate(r.state) }
        let bytes = PageSnapshot.encode(r.state, coveredLogOffset: 0, logIncarnation: 0)
        #expect(throws: Never.self, "its snapshot does not decode") { _ = try PageSnapshot.decode(bytes) }
        // A later edit of the element, by an author who saw it live again.
        try r.receive([after])
        #expect(r.tombstone(s.id)?.frontier.isEmpty == true, "an edit of the restored element joined its tombstone's frontier")
        #expect(throws: Never.self, "the state is not one a snapshot holds") { try PageSnapshot.validate(r.state) }
    }

    @Test("[MERGE-30] [SNAP-38] an element erased while its points were deferred: a replica started from that state resolves them")
    func deferredKeptRecord() throws {
        var p = Page()
        let s = try p.add(Self.a, Self.stroke(40)), t = try p.add(Self.a, Self.stroke(9, x: 500))
        try p.syncAll()
        let bytes = PageSnapshot.encode(p.r[Self.a]!.state, coveredLogOffset: 0, logIncarnation: 0, version: 2)
        let lazy = try PageSnapshot.decode(bytes, deferringPoints: true)
        var r = PageReplica(state: lazy.state)
        try #require(!r.isResolved, "the snapshot's points are deferred")
        _ = try r.make(.erase([s.id, t.id]), by: Self.a, wallTime: 9)
        // The tombstones keep s and t with their points still deferred, and nothing live is
        // deferred: a replica started from this state (a time-travel base, a copy) must still
        // know it has points to resolve.
        var copy = PageReplica(state: r.state)
        #expect(!copy.isResolved || copy.state.isResolved, "isResolved says true while the kept record's points are deferred")
        try copy.resolve()
        #expect(copy.state.isResolved, "resolve() left the kept record's points deferred")
        try r.resolve()
        #expect(r.state.isResolved)
        #expect(r.tombstone(s.id)?.record?.content == Self.stroke(40))
        // Restored, it comes back with its points.
        _ = try r.make(.restore([s.id, t.id]), by: Self.a, wallTime: 10)
        #expect(r.element(s.id)?.content == Self.stroke(40) && r.elementIDs == [s.id, t.id])
        #expect(r.elements.map(\.content) == p.r[Self.a]!.elements.map(\.content), "as if never deferred")
    }

    @Test("[MERGE-70] [SNAP-40] erased and restored by turns: each erasure keeps the first restore of each replica, the snapshot grows linearly, and a snapshot holding every restore reads as the same state")
    func eraseRestoreCycles() throws {
        var p = Page()
        let s = try p.add(Self.a, Self.stroke(6))
        try p.syncAll()
        let n = 300
        var restores: [Op] = []
        for k in 0..<n {
            // a erases and takes it back; every fifth time b, which saw it all, takes back too (a
            // restore of an element it sees live is refused, so b's comes while a's erase holds).
            _ = try p.make(Self.a, .erase([s.id]))
            if k % 5 == 4 {
                try p.syncAll()
                restores.append(try p.make(Self.b, .restore([s.id])))
                try p.syncAll()
            } else {
                restores.append(try p.make(Self.a, .restore([s.id])))
            }
        }
        try p.syncAll()
        let state = p.r[Self.a]!.state
        #expect(p.r[Self.b]!.state == state && p.r[Self.c]!.state == state)
        let t = try #require(state.tombstones.first { $0.id == s.id })
        #expect(t.erasures.count == n && !t.isErased && p.r[Self.a]!.element(s.id) != nil)
        // Erasure k was taken back by a's restore k (or b's) and by every later one of both
        // replicas: kept, the first of each.
        for (k, e) in t.erasures.enumerated() {
            let firsts = Erasure.firstRestores(restores[k...].map(\.id))
            #expect(e.cancelledBy == firsts, "erasure \(k): \(e.cancelledBy)")
            #expect(e.cancelledBy.count <= 2)
        }
        let bytes = PageSnapshot.encode(state, coveredLogOffset: 0, logIncarnation: 0)
        #expect(bytes.count < 80 * n, "snapshot of \(n) erase and restore cycles: \(bytes.count) bytes")
        // What lnote wrote before the rule: every restore that took the erasure back.
        var old = state
        let i = try #require(old.tombstones.firstIndex { $0.id == s.id })
        old.tombstones[i].erasures = t.erasures.enumerated().map { k, e in
            Erasure(ref: e.ref, clock: e.clock, cancelledBy: restores[k...].map(\.id).sorted())
        }
        let oldBytes = PageSnapshot.encode(old, coveredLogOffset: 0, logIncarnation: 0, version: PageSnapshot.version, everyRestore: true)
        #expect(oldBytes.count > 4 * bytes.count, "every restore listed: \(oldBytes.count) bytes")
        let read = try PageSnapshot.decode(oldBytes).state
        #expect(read == state && read.canonicalJSON() == state.canonicalJSON())
        #expect(PageSnapshot.encode(read, coveredLogOffset: 0, logIncarnation: 0) == bytes)
        // A replica started from it goes on as the others: one more cycle.
        var r = PageReplica(state: read)
        let more = try p.make(Self.a, .erase([s.id]))
        let back = try p.make(Self.a, .restore([s.id]))
        try r.receive([more, back])
        #expect(r.state == p.r[Self.a]!.state)
    }

    // MARK: - (g) Deterministic snapshots

    /// A page with every kind of erase history: live strokes with partial erases (some taken
    /// back), an element erased and kept, one restored, one erased again after a restore, one
    /// erased against a concurrent edit, a restore that lost to a concurrent erase.
    static func richPage() throws -> Page {
        var p = Page()
        let x = try p.add(Self.a, Self.stroke(12)), y = try p.add(Self.b, Self.stroke(6, x: 100)), z = try p.add(Self.c, Self.stroke(5, x: 200))
        let w = try p.add(Self.a, Self.stroke(3, x: 300)), v = try p.add(Self.b, Self.stroke(7, x: 400))
        try p.syncAll()
        try p.make(Self.a, .eraseRange(x.id, [PointRange(0, 3), PointRange(8, 11)]))
        try p.make(Self.b, .eraseRange(x.id, [PointRange(2, 6)]))
        try p.make(Self.c, .erase([y.id]))
        try p.edit(Self.b) { try $0.move([y.id], dx: 3, dy: 3, by: Self.b, wallTime: $1) }
        try p.make(Self.a, .eraseRange(v.id, [PointRange(1, 4)]))
        try p.syncAll()
        try p.make(Self.c, .restoreRange(x.id, [PointRange(1, 9)]))
        try p.make(Self.a, .eraseRange(x.id, [PointRange(4, 5)]))
        try p.make(Self.a, .restore([y.id]))
        try p.make(Self.b, .erase([z.id, v.id]))
        try p.edit(Self.c) { try $0.bringToFront([z.id], by: Self.c, wallTime: $1) }
        try p.syncAll()
        // a restores z, which b then erases again; c erases w, a restores it, and b, which had
        // seen neither, erases it too: that erase holds.
        try p.make(Self.a, .restore([z.id]))
        try p.make(Self.c, .erase([w.id]))
        try p.send(Self.a, Self.b)
        try p.send(Self.c, Self.a)
        try p.make(Self.b, .erase([z.id]))
        try p.make(Self.a, .restore([w.id]))
        try p.make(Self.b, .erase([w.id]))
        try p.syncAll()
        return p
    }

    /// The section tags of a snapshot, in order.
    static func sectionTags(_ bytes: [UInt8]) -> [UInt16] {
        var at = PageSnapshot.headerSize, tags: [UInt16] = []
        while at + 6 <= bytes.count - PageSnapshot.trailerSize {
            tags.append(UInt16(bytes[at]) | UInt16(bytes[at + 1]) << 8)
            let len = (0..<4).reduce(0) { $0 | Int(bytes[at + 2 + $1]) << (8 * $1) }
            at += 6 + len
        }
        return tags
    }

    @Test("[MERGE-1] [SNAP-40] replicas that applied the same restores in different orders write identical snapshot bytes, which decode to the same state")
    func deterministicSnapshots() throws {
        let p = try Self.richPage()
        let ops = Self.all(p)
        let reference = p.r[Self.a]!.state
        // The page holds what the section is for.
        #expect(reference.tombstones.contains { $0.isErased && $0.record != nil })
        #expect(reference.tombstones.contains { !$0.isErased })
        #expect(reference.tombstones.contains { $0.isErased && $0.erasures.contains { !$0.holds } })
        #expect(reference.elements.contains { !$0.rangeErasures.isEmpty })
        #expect(reference.tombstones.contains { $0.record.map { !$0.rangeErasures.isEmpty } ?? false })
        #expect(reference.elements.contains { !$0.rangeRestores.isEmpty })
        for version: UInt16 in [1, 2] {
            let bytes = PageSnapshot.encode(reference, coveredLogOffset: 10, logIncarnation: 20, version: version)
            // The erase history, then the range restores beside it ([SNAP-44]).
            #expect(Self.sectionTags(bytes).suffix(2) == [PageSnapshot.Section.eraseHistory.rawValue,
                                                          PageSnapshot.Section.rangeRestores.rawValue])
            let decoded = try PageSnapshot.decode(bytes)
            #expect(decoded.state == reference && !decoded.lacksEraseHistory)
            var rng = SplitMix64(seed: 0x6000 + UInt64(version))
            for k in 0..<40 {
                var r = PageReplica(page: Self.page)
                for op in ops.shuffled(using: &rng) { try r.receive([op]) }
                let mine = PageSnapshot.encode(r.state, coveredLogOffset: 10, logIncarnation: 20, version: version)
                #expect(mine == bytes, "version \(version), order \(k): snapshot bytes differ")
                // Decoded, the replica carries on as one that never stopped.
                let back = PageReplica(state: try PageSnapshot.decode(mine).state)
                #expect(back.state == r.state && back.state.canonicalJSON() == r.state.canonicalJSON())
            }
        }
        for who in [Self.b, Self.c] {
            #expect(PageSnapshot.encode(p.r[who]!.state, coveredLogOffset: 0, logIncarnation: 0)
                    == PageSnapshot.encode(reference, coveredLogOffset: 0, logIncarnation: 0))
        }
    }

    @Test("[MERGE-1] [MERGE-70] [MERGE-71] reloaded from its snapshot mid-way, a replica ends like one that received everything")
    func reloadMidway() throws {
        let p = try Self.richPage()
        let ops = Self.all(p)
        let expected = try Self.fed(ops).state
        var rng = SplitMix64(seed: 0x7000)
        for k in 0..<60 {
            let order = ops.shuffled(using: &rng)
            let cut = Int.random(in: 0...order.count, using: &rng)
            var r = PageReplica(page: Self.page)
            try r.receive(Array(order[..<cut]))
            let bytes = PageSnapshot.encode(r.state, coveredLogOffset: 0, logIncarnation: 0,
                                            version: Bool.random(using: &rng) ? 1 : 2)
            var reloaded = PageReplica(state: try PageSnapshot.decode(bytes).state, pending: r.pending)
            #expect(reloaded.state == r.state, "order \(k), cut \(cut)")
            for op in order[cut...] { try reloaded.receive([op]) }
            #expect(reloaded.state == expected, "order \(k), cut \(cut)")
            #expect(reloaded.pending.isEmpty)
        }
    }

    // MARK: - Old checkpoints

    @Test("[SNAP-41] [MERGE-71] a stroke whose partial erases are unknown (an old checkpoint) takes a new partial erase and still snapshots")
    func partialEraseOfUnknownRanges() throws {
        var p = Page()
        let s = try p.add(Self.a, Self.stroke(10))
        try p.syncAll()
        try p.make(Self.a, .eraseRange(s.id, [PointRange(0, 3)]))
        try p.syncAll()
        // What a replica installed from a format-2 checkpoint of before restores holds:
        // erased ranges, and no partial erases.
        var legacy = p.r[Self.b]!.state
        legacy.elements[0].rangeErasures = []
        let old = PageSnapshot.encode(legacy, coveredLogOffset: 0, logIncarnation: 0)
        let contents = try PageSnapshot.decode(old)
        #expect(contents.lacksEraseHistory && contents.state.elements[0].erased == [PointRange(0, 3)])
        var r = PageReplica(state: contents.state)
        // A new partial erase on it: the unknown ranges become one partial erase under the
        // add's ref ([SNAP-41]), the erased ranges grow, and the state still snapshots.
        _ = try r.make(.eraseRange(s.id, [PointRange(6, 8)]), by: Self.b, wallTime: 2)
        #expect(r.element(s.id)?.erased == [PointRange(0, 3), PointRange(6, 8)], "no erased ink comes back")
        #expect(r.element(s.id)?.rangeErasures.first?.ref == s.ref)
        #expect(throws: Never.self, "the state breaks [SNAP-41]") { try PageSnapshot.validate(r.state) }
        let bytes = PageSnapshot.encode(r.state, coveredLogOffset: 0, logIncarnation: 0)
        #expect(throws: Never.self, "its snapshot does not decode") { _ = try PageSnapshot.decode(bytes) }
        // A range restore has seen that add, so it takes back the unknown ranges too.
        _ = try r.make(.restoreRange(s.id, [PointRange(0, 7)]), by: Self.b, wallTime: 3)
        let erased = try #require(r.element(s.id)).erased
        #expect(erased == [PointRange(7, 8)], "erased \(erased)")
        #expect(throws: Never.self) { try PageSnapshot.validate(r.state) }
    }
}
