import Foundation
import Testing
import LnoteModel
@testable import LnoteReplication

/// One test per rule of `Protocol/merge-semantics.md`, each named by its id: small, exact
/// cases that say what the rule means. The property test (`ConvergenceTests`) checks that
/// the rules together converge; these check that each rule does what the spec says.
@Suite struct MergeRuleTests {
    static let a = ReplicaID(1), b = ReplicaID(2), c = ReplicaID(3)
    static let page = PageID(UUID(uuidString: "00000000-0000-0000-0000-0000000000AA")!)
    static let docID = DocumentID(UUID(uuidString: "00000000-0000-0000-0000-0000000000DD")!)

    static func stroke(_ n: Int = 4, x: Int32 = 0) -> ElementContent {
        .stroke(Stroke(points: (0..<n).map { StrokePoint(x: x + Int32($0) * 10, y: 0, t: UInt32($0 * 4)) }))
    }

    /// Page replicas that exchange everything they hold.
    struct Page {
        var r: [ReplicaID: PageReplica] = [a: PageReplica(page: page), b: PageReplica(page: page), c: PageReplica(page: page)]
        var held: [ReplicaID: [Op]] = [a: [], b: [], c: []]
        var wall: Int64 = 1_000

        @discardableResult
        mutating func edit(_ who: ReplicaID, _ f: (inout PageReplica, Int64) throws -> Op) throws -> Op {
            wall += 1
            let op = try f(&r[who]!, wall)
            held[who]!.append(op)
            return op
        }
        @discardableResult
        mutating func add(_ who: ReplicaID, _ content: ElementContent = stroke(), above: ElementID? = nil,
                          below: ElementID? = nil) throws -> Op {
            try edit(who) { try $0.add(content, by: who, wallTime: $1, above: above, below: below) }
        }
        @discardableResult
        mutating func make(_ who: ReplicaID, _ body: Op.Body) throws -> Op {
            try edit(who) { try $0.make(body, by: who, wallTime: $1) }
        }
        /// `to` receives everything `from` holds.
        mutating func send(_ from: ReplicaID, _ to: ReplicaID) throws {
            let ops = held[from]!.filter { !r[to]!.contains($0.id) }
            try r[to]!.receive(ops)
            held[to]! += ops
        }
        mutating func syncAll() throws {
            for x in [a, b, c] { for y in [a, b, c] where x != y { try send(x, y) } }
        }
        func ids(_ who: ReplicaID) -> [ElementID] { r[who]!.elements.map(\.id) }
    }

    // MARK: - Delivery

    @Test("[MERGE-2] a local operation: next counter, context the clock, Lamport the operations applied plus one")
    func localOperation() throws {
        var p = Page()
        let s1 = try p.add(Self.a)
        try p.add(Self.b)
        try p.send(Self.b, Self.a)
        let s2 = try p.add(Self.a)
        #expect(s1.id == OpID(replica: Self.a, counter: 1) && s1.lamport == 1 && s1.context.isEmpty)
        #expect(s2.id == OpID(replica: Self.a, counter: 2))
        #expect(s2.context == VectorClock([(Self.a, UInt64(1)), (Self.b, UInt64(1))]))
        #expect(s2.lamport == 3)
        #expect(p.r[Self.a]!.clock.total == 3 && p.r[Self.a]!.maxLamport == 3)
    }

    @Test("[MERGE-3] the initial states of a page and of a document")
    func initialStates() {
        let s = PageReplica(page: Self.page).state
        #expect(s == PageState(page: Self.page) && s.clock.isEmpty && s.maxLamport == 0 && s.modified == 0)
        let d = DocumentReplica(id: Self.docID).state
        #expect(d.title.value == "" && d.title.frontier.isEmpty && d.deleted.value == false && d.deleted.frontier.isEmpty)
        #expect(d.pages.isEmpty && d.created == 0 && d.modified == 0 && d.maxLamport == 0 && d.clock.isEmpty)
        // modified: the greatest of 0 and the wall times (one before 1970 leaves it at 0).
        var r = PageReplica(page: Self.page)
        _ = try? r.add(Self.stroke(), by: Self.a, wallTime: -86_400_000)
        #expect(r.state.modified == 0 && r.clock.total == 1)
        _ = try? r.add(Self.stroke(), by: Self.a, wallTime: 7)
        #expect(r.state.modified == 7)
    }

    @Test("[MERGE-40] an operation waits for its dependencies, then applies; never dropped")
    func causalWaiting() throws {
        var p = Page()
        let s1 = try p.add(Self.a)
        let mv = try p.edit(Self.a) { try $0.move([s1.id], dx: 5, dy: 0, by: Self.a, wallTime: $1) }
        var fresh = PageReplica(page: Self.page)
        #expect(try fresh.receive([mv]).isEmpty)
        #expect(fresh.pending == [mv] && fresh.elements.isEmpty)
        #expect(try fresh.receive([s1]) == [s1, mv])
        #expect(fresh.element(s1.id)?.transform.value == .translation(5, 0) && fresh.pending.isEmpty)
    }

    @Test("[MERGE-41] a duplicate, applied or waiting, changes nothing")
    func duplicates() throws {
        var p = Page()
        let s1 = try p.add(Self.a)
        let s2 = try p.add(Self.a)
        var fresh = PageReplica(page: Self.page)
        try fresh.receive([s2, s2])
        #expect(fresh.pending == [s2])
        try fresh.receive([s1, s1, s2])
        let once = fresh.state
        #expect(try fresh.receive([s1, s2]).isEmpty && fresh.state == once)
    }

    @Test("[MERGE-42] edits of an element the author could not have seen, or had seen erased, are ignored")
    func editsNobodyCorrectMakes() throws {
        var p = Page()
        let s1 = try p.add(Self.a)
        try p.send(Self.a, Self.b)
        let erase = try p.make(Self.b, .erase([s1.id]))
        // A move by a replica that had seen the erase (hostile: a correct one cannot make it).
        let seenErased = Op(id: OpID(replica: Self.c, counter: 1), lamport: 3, context: erase.clock, wallTime: 9,
                            body: .move([ElementTransform(s1.id, .translation(1, 1))]))
        // A move naming an element its author had not seen.
        let unseen = Op(id: OpID(replica: Self.c, counter: 1), lamport: 1, context: VectorClock(), wallTime: 9,
                        body: .move([ElementTransform(s1.id, .translation(1, 1))]))
        for order in [[s1, erase, seenErased], [seenErased, erase, s1]] {
            var r = PageReplica(page: Self.page)
            try r.receive(order)
            #expect(r.state.tombstones.first?.frontier == [], "an edit after seeing the erase joined the tombstone")
        }
        var r = PageReplica(page: Self.page)
        try r.receive([unseen, s1])
        #expect(r.element(s1.id)?.transform.value == .identity && r.element(s1.id)?.frontier == [])
        // Pages: an op whose context covers no addPage of the page is ignored.
        var d = DocumentReplica(id: Self.docID)
        let create = try d.make(.createDocument(title: "t"), by: Self.a, wallTime: 1)
        let pid = PageID()
        let add = try d.make(.addPage(pid, position: d.endPosition, canvas: .a4), by: Self.a, wallTime: 2)
        let blind = Op(id: OpID(replica: Self.b, counter: 1), lamport: 2, context: create.clock, wallTime: 3, body: .deletePage(pid, seen: VectorClock()))
        var other = DocumentReplica(id: Self.docID)
        try other.receive([create, blind, add])
        #expect(other.page(pid)?.deleted.value == false)
    }

    @Test("[MERGE-43] an operation whose context forgets part of what it covers is counted, without effect")
    func contextThatForgets() throws {
        var p = Page()
        let s = try p.add(Self.a)
        try p.add(Self.b)
        try p.send(Self.b, Self.a)
        let move = try p.edit(Self.a) { try $0.move([s.id], dx: 5, dy: 0, by: Self.a, wallTime: $1) }
        #expect(move.lamport == 3 && move.context.covers(OpID(replica: Self.b, counter: 1)))
        // c claims to have seen a's move but not b's stroke, which that move had seen: its
        // Lamport timestamp (1 + 2) is not above the move's.
        let forgetful = Op(id: OpID(replica: Self.c, counter: 1), lamport: 3, context: VectorClock([(Self.a, UInt64(2))]),
                           wallTime: 9, body: .move([ElementTransform(s.id, .translation(99, 99))]))
        #expect(OpValidator.violation(of: forgetful) == nil)
        for order in [p.held[Self.a]! + [forgetful], [forgetful] + p.held[Self.a]!.reversed()] {
            var r = PageReplica(page: Self.page)
            try r.receive(order)
            #expect(r.clock.covers(forgetful.id) && r.pending.isEmpty)
            #expect(r.element(s.id)?.transform.value == .translation(5, 0) && r.element(s.id)?.transform.frontier == [move.ref])
            #expect(r.state.contexts.first { $0.replica == Self.c }?.lamport(of: 1) == 3)
        }
    }

    @Test("[MERGE-43] [SNAP-16] a forgetful operation cannot lower the bar: the runs keep each author's greatest timestamp so far")
    func forgetfulOperationKeepsTheBar() throws {
        var p = Page()
        let adds = try (0..<5).map { _ in try p.add(Self.a) }  // a.1 … a.5, Lamport 1 … 5
        let s = adds[0].id
        let h = Self.b, y = Self.c, w = ReplicaID(4)
        func move(_ id: OpID, _ lamport: UInt64, _ context: [(ReplicaID, UInt64)], _ dx: Int32) -> Op {
            Op(id: id, lamport: lamport, context: VectorClock(context), wallTime: 10,
               body: .move([ElementTransform(s, .translation(dx, 0))]))
        }
        // h.1 saw all five adds (Lamport 6); h.2 forgets them (Lamport 2, below h.1's: ignored).
        let h1 = move(OpID(replica: h, counter: 1), 6, [(Self.a, 5)], 1)
        let h2 = move(OpID(replica: h, counter: 2), 2, [(h, 1)], 2)
        // y.1 covers h.2, so h.1 (Lamport 6) too, with Lamport 4: it forgets part of what it
        // covers and must be ignored. Measured against h.2's own timestamp (2) it would pass,
        // and as h.1's causal successor with a smaller OpRef its effect on the register would
        // depend on whether w.1 (concurrent, Lamport 5) arrived before it.
        let y1 = move(OpID(replica: y, counter: 1), 4, [(Self.a, 1), (h, 2)], 3)
        let w1 = move(OpID(replica: w, counter: 1), 5, [(Self.a, 4)], 4)
        for op in [h1, h2, y1, w1] { #expect(OpValidator.violation(of: op) == nil) }
        var states: [PageState] = []
        let parts: [[Op]] = [adds, [h1], [h2], [y1], [w1]]
        func permutations(_ xs: [[Op]]) -> [[[Op]]] {
            xs.count <= 1 ? [xs] : xs.indices.flatMap { i in
                permutations(Array(xs[..<i] + xs[(i + 1)...])).map { [xs[i]] + $0 }
            }
        }
        for order in permutations(parts) {
            var r = PageReplica(page: Self.page)
            for batch in order { try r.receive(batch) }
            #expect(r.pending.isEmpty)
            #expect(r.state.contexts.first { $0.replica == h }?.lamport(of: 2) == 6)
            #expect(r.element(s)?.transform.frontier == [w1.ref, h1.ref].sorted())
            #expect(r.element(s)?.transform.value == .translation(1, 0))
            states.append(r.state)
        }
        #expect(Set(states).count == 1)
        // The runs survive a snapshot round trip, and a snapshot whose runs decrease is refused.
        let state = states[0]
        #expect(try PageSnapshot.decode(PageSnapshot.encode(state, coveredLogOffset: 0, logIncarnation: 0)).state == state)
        var lowered = state
        let hi = lowered.contexts.firstIndex { $0.replica == h }!
        #expect(lowered.contexts[hi].lamports == [LamportRun(from: 1, offset: 5), LamportRun(from: 2, offset: 4)])
        lowered.contexts[hi].lamports = [LamportRun(from: 1, offset: 5), LamportRun(from: 2, offset: 0)]
        #expect(throws: LnoteError(.corrupt)) {
            try PageSnapshot.decode(PageSnapshot.encode(lowered, coveredLogOffset: 0, logIncarnation: 0))
        }
        #expect(throws: LnoteError(.invalidArgument)) { try PageSnapshot.validate(lowered) }
        lowered.contexts[hi].lamports = [LamportRun(from: 1, offset: state.maxLamport)]
        #expect(throws: LnoteError(.corrupt)) {
            try PageSnapshot.decode(PageSnapshot.encode(lowered, coveredLogOffset: 0, logIncarnation: 0))
        }
    }

    @Test("[MERGE-12] an operation the validator refuses is not applied, nor anything of its batch")
    func validationRefusesBatch() throws {
        var p = Page()
        let s1 = try p.add(Self.a)
        var bad = try p.add(Self.a)
        bad.lamport += 1
        var r = PageReplica(page: Self.page)
        #expect(throws: LnoteError(.corrupt)) { try r.receive([s1, bad]) }
        #expect(r.state == PageState(page: Self.page) && r.pending.isEmpty)
        var tooHigh = s1
        tooHigh.body = .add(Self.stroke(), z: ZKey(layer: 2))
        #expect(throws: LnoteError(.corrupt)) { try r.receive([tooHigh]) }
    }

    // MARK: - Elements

    @Test("[MERGE-10] an add on top lands above everything its author saw; concurrent adds are all kept")
    func addOnTop() throws {
        var p = Page()
        let a1 = try p.add(Self.a)
        let b1 = try p.add(Self.b)
        try p.syncAll()
        let a2 = try p.add(Self.a)
        #expect(p.ids(Self.a).last == a2.id)
        try p.syncAll()
        #expect(Set(p.ids(Self.c)) == Set([a1.id, b1.id, a2.id]) && p.ids(Self.c).last == a2.id)
    }

    @Test("[MERGE-11] z order is by position (key, then the element's id as the last tag): total and the same everywhere")
    func zOrderByPosition() throws {
        var p = Page()
        let a1 = try p.add(Self.a), b1 = try p.add(Self.b), c1 = try p.add(Self.c)
        #expect(a1.addedKey == b1.addedKey && b1.addedKey == c1.addedKey)
        try p.syncAll()
        for who in [Self.a, Self.b, Self.c] { #expect(p.ids(who) == [a1.id, b1.id, c1.id]) }
    }

    @Test("[MERGE-13] adds above and below land exactly there, between keys that tie too")
    func addBetweenTies() throws {
        var p = Page()
        let a1 = try p.add(Self.a), b1 = try p.add(Self.b)
        try p.syncAll()
        // a1 and b1 share key 1; an add below the upper one must land between them.
        let below = try p.add(Self.c, below: b1.id)
        #expect(p.ids(Self.c) == [a1.id, below.id, b1.id])
        let above = try p.add(Self.a, above: a1.id)
        #expect(p.ids(Self.a) == [a1.id, above.id, b1.id])
        try p.syncAll()
        // Both went between a1 and b1; concurrent, so they order between themselves by position.
        let order = p.ids(Self.b)
        #expect(order.first == a1.id && order.last == b1.id && Set(order) == Set([a1.id, b1.id, below.id, above.id]))
        for who in [Self.a, Self.c] { #expect(p.ids(who) == order) }
    }

    @Test("[MERGE-14] equal keys order by element id: the greater id on top")
    func tiesByElementID() throws {
        var p = Page()
        let x = try p.add(Self.a), y = try p.add(Self.a)
        try p.syncAll()
        // Concurrent bring-to-front (b) and add on top (c), both with Lamport timestamp 3.
        let front = try p.edit(Self.b) { try $0.bringToFront([x.id], by: Self.b, wallTime: $1) }
        let top = try p.add(Self.c)
        #expect(front.lamport == top.lamport)
        try p.syncAll()
        // Key 3 for both x and the new element: the greater id (c.1 > a.1) on top.
        #expect(p.ids(Self.a) == [y.id, x.id, top.id])
    }

    @Test("[MERGE-15] reorders: last writer wins per element, a selection keeps its order with fractions [], 80, 81")
    func reorders() throws {
        var p = Page()
        let e = try (0..<4).map { _ in try p.add(Self.a) }
        try p.syncAll()
        let front = try p.edit(Self.a) { try $0.bringToFront([e[2].id, e[0].id, e[1].id], by: Self.a, wallTime: $1) }
        guard case .reorder(let zs) = front.body else { Issue.record("not a reorder"); return }
        #expect(zs.map(\.element) == [e[0].id, e[1].id, e[2].id])
        #expect(zs.map(\.z) == [ZKey(layer: 5), ZKey(layer: 5, fraction: [0x80]), ZKey(layer: 5, fraction: [0x81])])
        #expect(p.ids(Self.a) == [e[3].id, e[0].id, e[1].id, e[2].id])
        // Concurrent reorders of one element: greater OpRef wins, conflict reported. (Its key,
        // layer 5 with an empty fraction, then ties with e0's from a's concurrent reorder:
        // [MERGE-14] puts e0 (a.1) below e3 (a.4), and e1, e2 stay above with greater fractions.)
        let back = try p.edit(Self.b) { try $0.sendToBack([e[3].id], by: Self.b, wallTime: $1) }
        let frontC = try p.edit(Self.c) { try $0.bringToFront([e[3].id], by: Self.c, wallTime: $1) }
        try p.syncAll()
        #expect(back.lamport == frontC.lamport)
        #expect(p.r[Self.b]!.element(e[3].id)?.z.winner == frontC.ref, "c's reorder has the greater OpRef (same Lamport, greater replica)")
        for who in [Self.a, Self.b, Self.c] { #expect(p.ids(who) == [e[0].id, e[3].id, e[1].id, e[2].id]) }
        #expect(p.r[Self.b]!.conflicts().map(\.kind) == [.reorder])
    }

    @Test("[MERGE-20] partial erases: union of clamped ranges; on an image nothing is drawn but the edit frontier advances")
    func partialErases() throws {
        var p = Page()
        let s = try p.add(Self.a, Self.stroke(6))
        let img = try p.add(Self.a, .image(ImageElement(asset: AssetID.of([1]), frame: QRect(x: 0, y: 0, width: 10, height: 10))))
        try p.syncAll()
        try p.make(Self.a, .eraseRange(s.id, [PointRange(0, 2)]))
        try p.make(Self.b, .eraseRange(s.id, [PointRange(1, 3)]))
        // A hostile range beyond the stroke, and a partial erase of the image.
        let range = Op(id: OpID(replica: Self.c, counter: 1), lamport: 3, context: p.r[Self.c]!.clock, wallTime: 5,
                       body: .eraseRange(s.id, [PointRange(5, 900)]))
        let onImage = Op(id: OpID(replica: Self.c, counter: 2), lamport: 4, context: range.clock, wallTime: 6,
                         body: .eraseRange(img.id, [PointRange(0, 1)]))
        try p.r[Self.c]!.receive([range, onImage])
        p.held[Self.c]! += [range, onImage]
        try p.syncAll()
        let e = try #require(p.r[Self.a]!.element(s.id))
        #expect(e.erased == [PointRange(0, 3), PointRange(5, 6)] && e.visibleRanges == [PointRange(3, 5)])
        let i = try #require(p.r[Self.a]!.element(img.id))
        #expect(i.erased.isEmpty && i.frontier == [onImage.ref])
    }

    @Test("[MERGE-21] erase wins over concurrent edits, which still advance the tombstone's edit frontier")
    func eraseWins() throws {
        var p = Page()
        let s = try p.add(Self.a)
        try p.syncAll()
        let erase = try p.make(Self.a, .erase([s.id]))
        let move = try p.edit(Self.b) { try $0.move([s.id], dx: 3, dy: 0, by: Self.b, wallTime: $1) }
        try p.syncAll()
        for who in [Self.a, Self.b, Self.c] {
            let st = p.r[who]!.state
            #expect(st.elements.isEmpty)
            // [MERGE-30] The element is kept whole, the concurrent move applied to it.
            var kept = try #require(p.r[Self.a]!.state.tombstones.first?.record)
            kept.frontier = []
            #expect(kept.transform.value == Transform.translation(3, 0))
            #expect(st.tombstones == [Tombstone(id: s.id, erasures: [Erasure(ref: erase.ref, clock: erase.context)], frontier: [move.ref],
                                                record: kept)])
            #expect(st.tombstones[0].concurrent == [move.ref])
        }
    }

    @Test("[MERGE-22] concurrent erases of one element are all kept, by ref, and are not a conflict")
    func concurrentErases() throws {
        var p = Page()
        let s = try p.add(Self.a)
        try p.syncAll()
        let e1 = try p.make(Self.a, .erase([s.id])), e2 = try p.make(Self.b, .erase([s.id]))
        try p.syncAll()
        let t = try #require(p.r[Self.c]!.state.tombstones.first)
        #expect(t.erasures.map(\.ref) == [e1.ref, e2.ref].sorted())
        #expect(p.r[Self.c]!.conflicts().isEmpty)
    }

    @Test("[MERGE-25] moves: last writer wins per element; relative to what the author saw; independent of erased ranges")
    func moves() throws {
        var p = Page()
        let s = try p.add(Self.a, Self.stroke(5))
        try p.syncAll()
        let m1 = try p.edit(Self.a) { try $0.move([s.id], dx: 10, dy: 0, by: Self.a, wallTime: $1) }
        let m2 = try p.edit(Self.b) { try $0.move([s.id], dx: 0, dy: 7, by: Self.b, wallTime: $1) }
        try p.make(Self.c, .eraseRange(s.id, [PointRange(0, 2)]))
        try p.syncAll()
        let e = try #require(p.r[Self.c]!.element(s.id))
        #expect(m1.lamport == m2.lamport && e.transform.value == .translation(0, 7), "b's move wins (greater replica)")
        #expect(e.transform.frontier == [m1.ref, m2.ref] && e.erased == [PointRange(0, 2)])
        let m3 = try p.edit(Self.a) { try $0.move([s.id], dx: 1, dy: 1, by: Self.a, wallTime: $1) }
        #expect(p.r[Self.a]!.element(s.id)?.transform.value == .translation(1, 8) && m3.context.covers(m2.id))
    }

    @Test("[MERGE-26] an operation naming an element twice: the first item counts, in every order of arrival")
    func elementNamedTwice() throws {
        var p = Page()
        let s = try p.add(Self.a), t = try p.add(Self.a)
        try p.syncAll()
        // Built as received: the validator accepts such an operation, and so must the merge.
        let move = try p.make(Self.a, .move([ElementTransform(s.id, .translation(10, 0)), ElementTransform(s.id, .translation(20, 0))]))
        let layer = Int64(move.lamport + 1)
        let reorder = try p.make(Self.a, .reorder([ElementZ(t.id, ZKey(layer: layer)), ElementZ(t.id, ZKey(layer: -layer))]))
        let erase = try p.make(Self.a, .erase([s.id, s.id]))
        let before = p.held[Self.a]!.filter { ![move.id, reorder.id, erase.id].contains($0.id) }
        for order in [[move, reorder, erase], [erase, reorder, move]] {
            var fresh = PageReplica(page: Self.page)
            try fresh.receive(before + order)
            #expect(fresh.state == p.r[Self.a]!.state)
        }
        try p.syncAll()
        for who in [Self.a, Self.b, Self.c] {
            let st = p.r[who]!.state
            #expect(st.tombstones.first?.record?.transform.value == .translation(10, 0), "the first item's transform")
            #expect(p.r[who]!.element(t.id)?.z.value == ZKey(layer: layer), "the first item's key")
            #expect(st.tombstones.map(\.id) == [s.id] && st.tombstones[0].erasures.map(\.ref) == [erase.ref], "one erasure")
            #expect(st == p.r[Self.a]!.state)
        }
        // A restore naming it twice takes the erasure back once.
        let restore = try p.make(Self.b, .restore([s.id, s.id]))
        try p.syncAll()
        for who in [Self.a, Self.b, Self.c] {
            #expect(p.r[who]!.element(s.id) != nil)
            #expect(p.r[who]!.state.tombstones.first?.erasures.first?.cancelledBy == [restore.id])
        }
    }

    @Test("[MERGE-30] tombstones are never dropped: a late concurrent edit resolves and is reported as on a replica that had it first")
    func tombstonesKept() throws {
        var p = Page()
        let s = try p.add(Self.a)
        try p.syncAll()
        // c goes offline and moves s; a erases it; a and b keep writing for a long time.
        let late = try p.edit(Self.c) { try $0.move([s.id], dx: 1, dy: 0, by: Self.c, wallTime: $1) }
        try p.make(Self.a, .erase([s.id]))
        for _ in 0..<20 { try p.add(Self.a); try p.add(Self.b); try p.send(Self.a, Self.b); try p.send(Self.b, Self.a) }
        // A replica reloaded from its snapshot, then given c's move.
        let bytes = PageSnapshot.encode(p.r[Self.a]!.state, coveredLogOffset: 0, logIncarnation: 0)
        var reloaded = PageReplica(state: try PageSnapshot.decode(bytes).state)
        #expect(reloaded.state.tombstones.map(\.id) == [s.id])
        try reloaded.receive([late])
        var fresh = PageReplica(page: Self.page)
        try fresh.receive(p.held[Self.a]! + [late])
        #expect(reloaded.state == fresh.state)
        #expect(reloaded.conflicts() == fresh.conflicts() && reloaded.conflicts().map(\.kind) == [.erase])
    }

    // MARK: - Conflicts

    @Test("[MERGE-50] conflicts: concurrent moves and reorders on live elements, erase against concurrent edits")
    func conflictKinds() throws {
        var p = Page()
        let x = try p.add(Self.a), y = try p.add(Self.a), z = try p.add(Self.a)
        try p.syncAll()
        let mx1 = try p.edit(Self.a) { try $0.move([x.id], dx: 1, dy: 0, by: Self.a, wallTime: $1) }
        let mx2 = try p.edit(Self.b) { try $0.move([x.id], dx: 2, dy: 0, by: Self.b, wallTime: $1) }
        let ry1 = try p.edit(Self.a) { try $0.bringToFront([y.id], by: Self.a, wallTime: $1) }
        let ry2 = try p.edit(Self.b) { try $0.sendToBack([y.id], by: Self.b, wallTime: $1) }
        let ez = try p.make(Self.a, .erase([z.id]))
        let mz = try p.edit(Self.b) { try $0.move([z.id], dx: 1, dy: 0, by: Self.b, wallTime: $1) }
        try p.syncAll()
        let conflicts = p.r[Self.c]!.conflicts()
        #expect(conflicts.map(\.kind) == [.reorder, .move, .erase])
        #expect(conflicts[0].element == y.id && conflicts[0].ops == [ry1.ref, ry2.ref].sorted() && conflicts[0].winner == max(ry1.ref, ry2.ref))
        #expect(conflicts[1].element == x.id && conflicts[1].winner == max(mx1.ref, mx2.ref))
        #expect(conflicts[2].element == z.id && conflicts[2].ops == [ez.ref, mz.ref].sorted() && conflicts[2].winner == ez.ref)
    }

    @Test("[MERGE-51] a register conflict stays until an operation that saw all of it supersedes it")
    func conflictSuperseded() throws {
        var p = Page()
        let x = try p.add(Self.a)
        try p.syncAll()
        try p.edit(Self.a) { try $0.move([x.id], dx: 1, dy: 0, by: Self.a, wallTime: $1) }
        try p.edit(Self.b) { try $0.move([x.id], dx: 2, dy: 0, by: Self.b, wallTime: $1) }
        try p.syncAll()
        #expect(p.r[Self.c]!.conflicts().count == 1)
        try p.edit(Self.c) { try $0.move([x.id], dx: 0, dy: 1, by: Self.c, wallTime: $1) }
        try p.syncAll()
        for who in [Self.a, Self.b, Self.c] { #expect(p.r[who]!.conflicts().isEmpty) }
    }

    @Test("[MERGE-52] concurrent adds, partial erases and whole erases are not conflicts")
    func notConflicts() throws {
        var p = Page()
        let x = try p.add(Self.a, Self.stroke(6)), y = try p.add(Self.a)
        try p.syncAll()
        try p.add(Self.a); try p.add(Self.b)
        try p.make(Self.a, .eraseRange(x.id, [PointRange(0, 2)])); try p.make(Self.b, .eraseRange(x.id, [PointRange(3, 4)]))
        try p.make(Self.a, .erase([y.id])); try p.make(Self.b, .erase([y.id]))
        try p.syncAll()
        #expect(p.r[Self.c]!.conflicts().isEmpty)
    }

    @Test("[MERGE-53] an erase conflict clears once every replica whose edit lost wrote again after seeing it all")
    func eraseConflictAcknowledged() throws {
        var p = Page()
        let s = try p.add(Self.a)
        try p.syncAll()
        try p.make(Self.a, .erase([s.id]))
        try p.edit(Self.b) { try $0.move([s.id], dx: 1, dy: 0, by: Self.b, wallTime: $1) }
        try p.edit(Self.c) { try $0.move([s.id], dx: 2, dy: 0, by: Self.c, wallTime: $1) }
        try p.syncAll()
        #expect(p.r[Self.a]!.conflicts().count == 1)
        // The eraser writing again clears nothing; one loser writing again neither.
        try p.add(Self.a); try p.add(Self.b); try p.syncAll()
        #expect(p.r[Self.a]!.conflicts().count == 1)
        // Once the other loser writes after seeing everything, the conflict clears; the tombstone stays.
        try p.add(Self.c); try p.syncAll()
        for who in [Self.a, Self.b, Self.c] {
            #expect(p.r[who]!.conflicts().isEmpty)
            #expect(p.r[who]!.state.tombstones.map(\.id) == [s.id] && p.r[who]!.state.tombstones[0].concurrent.count == 2)
        }
    }

    // MARK: - Document log

    struct Doc {
        var r: [ReplicaID: DocumentReplica] = [a: DocumentReplica(id: docID), b: DocumentReplica(id: docID)]
        var held: [ReplicaID: [Op]] = [a: [], b: []]
        var wall: Int64 = 100
        @discardableResult
        mutating func make(_ who: ReplicaID, _ body: (DocumentReplica) throws -> Op.Body) throws -> Op {
            wall += 1
            let op = try r[who]!.make(try body(r[who]!), by: who, wallTime: wall)
            held[who]!.append(op)
            return op
        }
        mutating func sync() throws {
            for (x, y) in [(a, b), (b, a)] {
                let ops = held[x]!.filter { !r[y]!.contains($0.id) }
                try r[y]!.receive(ops)
                held[y]! += ops
            }
        }
    }

    @Test("[MERGE-60] [MERGE-61] createDocument names the document; the title is last writer wins")
    func titles() throws {
        var d = Doc()
        let create = try d.make(Self.a) { _ in .createDocument(title: "first") }
        try d.sync()
        #expect(d.r[Self.b]!.state.title.value == "first" && d.r[Self.b]!.state.created == create.wallTime)
        let t1 = try d.make(Self.a) { _ in .setTitle("from a") }
        let t2 = try d.make(Self.b) { _ in .setTitle("from b") }
        try d.sync()
        #expect(t1.lamport == t2.lamport && d.r[Self.a]!.state.title.value == "from b")
        #expect(d.r[Self.a]!.conflicts().map(\.kind) == [.title])
        // Two creates (the second hostile), one at wall time 0 or both: `created` is the
        // greatest, whatever the order they arrive in, one at a time.
        func creation(_ r: ReplicaID, _ wall: Int64, _ title: String) -> Op {
            Op(id: OpID(replica: r, counter: 1), lamport: 1, context: VectorClock(), wallTime: wall, body: .createDocument(title: title))
        }
        for (w1, w2): (Int64, Int64) in [(0, 7), (7, 0), (0, 0), (3, 9)] {
            let ops = [creation(Self.b, w1, "one"), creation(Self.c, w2, "two")]
            var x = DocumentReplica(id: Self.docID), y = DocumentReplica(id: Self.docID)
            for op in ops { try x.receive([op]) }
            for op in ops.reversed() { try y.receive([op]) }
            #expect(x.state == y.state, "wall times \(w1), \(w2)")
            #expect(x.state.created == max(w1, w2), "wall times \(w1), \(w2)")
        }
    }

    @Test("[MERGE-62] pages: concurrent adds all kept, ordered by position with the add's id as tag; a page id added twice keeps both adds")
    func pages() throws {
        var d = Doc()
        try d.make(Self.a) { _ in .createDocument(title: "t") }
        try d.sync()
        let p1 = PageID(), p2 = PageID()
        let add1 = try d.make(Self.a) { try .addPage(p1, position: $0.position(after: nil, by: Self.a), canvas: .a4) }
        let add2 = try d.make(Self.b) { try .addPage(p2, position: $0.position(after: nil, by: Self.b), canvas: .a4) }
        try d.sync()
        #expect(add1.lamport == add2.lamport)
        #expect(d.r[Self.a]!.state.pages.map(\.id) == [p1, p2] && d.r[Self.b]!.state.pages.map(\.id) == [p1, p2])
        #expect(d.r[Self.a]!.page(p1)?.position.frontier == [add1.ref])
        // A page between two whose keys tie lands between them.
        let p3 = PageID()
        try d.make(Self.a) { try .addPage(p3, position: $0.position(after: p1, by: Self.a), canvas: .a4) }
        #expect(d.r[Self.a]!.state.pages.map(\.id) == [p1, p3, p2])
        // The same page id added twice (hostile): both adds kept, whatever the order.
        let dupA = Op(id: OpID(replica: Self.c, counter: 1), lamport: 2, context: VectorClock([(Self.a, UInt64(1))]), wallTime: 50,
                      body: .addPage(p1, position: ZKey(layer: -2), canvas: CanvasSize(width: 10, height: 10)))
        var x = DocumentReplica(id: Self.docID), y = DocumentReplica(id: Self.docID)
        try x.receive(d.held[Self.a]! + [dupA])
        try y.receive([dupA] + d.held[Self.a]!.reversed())
        #expect(x.state == y.state)
        #expect(x.page(p1)?.adds == [add1.ref, dupA.ref].sorted() && x.page(p1)?.created == 50)
    }

    @Test("[MERGE-63] a delete concurrent with edits keeps the page deleted, the ink kept, and reports it; restore brings it back")
    func deleteAndRestore() throws {
        var d = Doc()
        try d.make(Self.a) { _ in .createDocument(title: "t") }
        let pid = PageID()
        try d.make(Self.a) { try .addPage(pid, position: $0.position(after: nil, by: Self.a), canvas: .a4) }
        try d.sync()
        var pageA = PageReplica(page: pid), pageB = PageReplica(page: pid)
        let ink = try pageB.add(Self.stroke(), by: Self.b, wallTime: 1)
        let del = try d.make(Self.a) { _ in .deletePage(pid, seen: pageA.clock) }
        try d.sync()
        try pageA.receive([ink])
        let st = d.r[Self.a]!.state
        #expect(st.pages[0].deleted.value && st.pages[0].deletedSeen == VectorClock())
        #expect(d.r[Self.a]!.conflicts(pageClocks: [pid: pageA.clock]).map(\.kind) == [.pageDelete])
        #expect(d.r[Self.a]!.conflicts(pageClocks: [pid: pageA.clock]).first?.winner == del.ref)
        #expect(pageA.elements.map(\.id) == [ink.id])
        try d.make(Self.b) { _ in .restorePage(pid) }
        try d.sync()
        #expect(d.r[Self.a]!.page(pid)?.deleted.value == false && d.r[Self.a]!.page(pid)?.deletedSeen == nil)
        #expect(d.r[Self.a]!.conflicts(pageClocks: [pid: pageA.clock]).isEmpty)
    }

    /// [MERGE-2] [MERGE-63] A local delete names a live page and a local restore a deleted
    /// one. Before, a second delete was made: it had seen the concurrent edit, won the flag,
    /// and the conflict of the first delete with that edit vanished with no one having
    /// looked at the page; a restore of a live page beat a concurrent delete the same way.
    /// Received operations are not refused (a remote's second delete is merged as before).
    @Test("[MERGE-2] deleting a deleted page or restoring a live one is refused locally; the conflict stays")
    func pageDeleteAndRestoreNameTheRightState() throws {
        var d = Doc()
        try d.make(Self.a) { _ in .createDocument(title: "t") }
        let pid = PageID()
        try d.make(Self.a) { try .addPage(pid, position: $0.position(after: nil, by: Self.a), canvas: .a4) }
        try d.sync()
        var pageA = PageReplica(page: pid), pageB = PageReplica(page: pid)
        let ink = try pageB.add(Self.stroke(), by: Self.b, wallTime: 1)
        _ = try d.make(Self.a) { _ in .deletePage(pid, seen: pageA.clock) }
        try d.sync()
        try pageA.receive([ink])
        #expect(d.r[Self.a]!.conflicts(pageClocks: [pid: pageA.clock]).map(\.kind) == [.pageDelete])
        let clock = d.r[Self.a]!.clock
        let again = #expect(throws: LnoteError.self) { _ = try d.make(Self.a) { _ in .deletePage(pid, seen: pageA.clock) } }
        #expect(again?.code == .invalidState && again?.message.contains("already deleted") == true, "\(String(describing: again))")
        #expect(d.r[Self.a]!.clock == clock, "nothing was made")
        #expect(d.r[Self.a]!.conflicts(pageClocks: [pid: pageA.clock]).map(\.kind) == [.pageDelete])
        // A live page is not restored.
        let other = PageID()
        try d.make(Self.a) { try .addPage(other, position: $0.position(after: nil, by: Self.a), canvas: .a4) }
        let live = #expect(throws: LnoteError.self) { _ = try d.make(Self.a) { _ in .restorePage(other) } }
        #expect(live?.code == .invalidState && live?.message.contains("not deleted") == true, "\(String(describing: live))")
        // Received, a second delete is merged as it always was.
        var remote = DocumentReplica(id: Self.docID)
        try remote.receive(d.held[Self.a]!)
        let second = Op(id: OpID(replica: Self.b, counter: remote.clock[Self.b] + 1), lamport: remote.clock.total + 1,
                        context: remote.clock, wallTime: 9, body: .deletePage(pid, seen: pageA.clock))
        try remote.receive([second])
        #expect(remote.page(pid)?.deleted.value == true && remote.page(pid)?.deletedSeen == pageA.clock)
    }

    @Test("[MERGE-64] page order: movePage writes the position, last writer wins; the page moved is left out of its neighbours")
    func movePages() throws {
        var d = Doc()
        try d.make(Self.a) { _ in .createDocument(title: "t") }
        let ps = [PageID(), PageID(), PageID()]
        for p in ps { try d.make(Self.a) { try .addPage(p, position: $0.position(after: $0.state.pages.last?.id, by: Self.a), canvas: .a4) } }
        try d.sync()
        try d.make(Self.a) { try .movePage(ps[2], position: $0.position(after: nil, moving: ps[2], by: Self.a)) }
        try d.make(Self.b) { try .movePage(ps[2], position: $0.position(after: ps[0], moving: ps[2], by: Self.b)) }
        try d.sync()
        #expect(d.r[Self.a]!.state.pages.map(\.id) == [ps[0], ps[2], ps[1]], "b's move wins (same Lamport, greater replica)")
        #expect(d.r[Self.a]!.conflicts().map(\.kind) == [.pageOrder])
    }

    @Test("[MERGE-66] canvas and document deletion: last writer wins")
    func canvasAndDocumentDeletion() throws {
        var d = Doc()
        try d.make(Self.a) { _ in .createDocument(title: "t") }
        let pid = PageID()
        try d.make(Self.a) { try .addPage(pid, position: $0.position(after: nil, by: Self.a), canvas: .a4) }
        try d.sync()
        try d.make(Self.a) { _ in .setCanvas(pid, CanvasSize(width: 100, height: 100)) }
        try d.make(Self.b) { _ in .setCanvas(pid, CanvasSize(width: 200, height: 200)) }
        try d.make(Self.a) { _ in .deleteDocument }
        try d.sync()
        #expect(d.r[Self.a]!.page(pid)?.canvas.value == CanvasSize(width: 200, height: 200))
        #expect(d.r[Self.b]!.state.deleted.value)
        try d.make(Self.b) { _ in .restoreDocument }
        try d.sync()
        #expect(!d.r[Self.a]!.state.deleted.value)
    }
}

extension Op {
    /// The z key of an `add`.
    var addedKey: ZKey? {
        if case .add(_, let z) = body { return z }
        return nil
    }
}
