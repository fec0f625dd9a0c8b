import Foundation
import Testing
import LnoteModel
@testable import LnoteReplication

/// [MERGE-5] Logs written by more replicas than a context may name ([LOG-23], 4096).
///
/// 4,097 operations from as many replicas are each valid on their own; before [MERGE-5],
/// a page or document that received them refused every later local edit, on every replica.
/// These tests make such logs, edit them, and check that the edits are valid operations that
/// have their effect, and that replicas receiving the same operations in other orders
/// converge.
@Suite("[MERGE-5] wide logs stay editable")
struct WideLogTests {
    static let page = PageID(UUID(uuidString: "00000000-0000-0000-0000-0000000000AB")!)
    static let doc = DocumentID(UUID(uuidString: "00000000-0000-0000-0000-0000000000DC")!)
    static let me = ReplicaID(0x7000_0000_0000_0001)
    static let limit = OpValidator.maxClockEntries

    static func stroke(_ n: Int = 6, x: Int32 = 0) -> ElementContent {
        .stroke(Stroke(points: (0..<n).map { StrokePoint(x: x + Int32($0) * 10, y: Int32($0), t: UInt32($0 * 4)) }))
    }

    /// One add from each of `count` replicas (ids 1…count), each having seen nothing.
    static func foreignAdds(_ count: Int) -> [Op] {
        (1...count).map { i in
            Op(id: OpID(replica: ReplicaID(UInt64(i)), counter: 1), lamport: 1, context: VectorClock(),
               wallTime: 1_000, body: .add(stroke(4, x: Int32(i % 500)), z: ZKey(layer: 1)))
        }
    }

    /// A local operation as every other replica judges it: valid, and not one [MERGE-43]
    /// ignores (which a replica that has applied its context's operations tells).
    static func checkValid(_ op: Op) throws {
        #expect(OpValidator.violation(of: op) == nil, "\(op.id): \(String(describing: OpValidator.violation(of: op)))")
        let named = op.context.entries.count - (op.context[op.id.replica] > 0 ? 1 : 0)
        #expect(named <= limit)
        // Its encoding decodes to itself: the context the wire carries passes the reader too.
        let frames = try Frame.decodeAll(OperationCodec.encode(op))
        let back = try OperationCodec.decode(try #require(frames.first))
        #expect(back == op)
    }

    @Test("[LOG-23] a context counts the replicas it names besides its author's implicit entry")
    func contextBoundLeavesOutTheAuthor() throws {
        let others = (1...UInt64(Self.limit)).map { (ReplicaID($0), UInt64(1)) }
        var context = VectorClock(others)
        context[Self.me] = 1  // the author's own entry: counter 2
        let at = Op(id: OpID(replica: Self.me, counter: 2), lamport: UInt64(Self.limit) + 2, context: context,
                    wallTime: 0, body: .add(Self.stroke(), z: ZKey(layer: 1)))
        #expect(OpValidator.violation(of: at) == nil)
        context[ReplicaID(UInt64(Self.limit) + 1)] = 1
        let over = Op(id: OpID(replica: Self.me, counter: 2), lamport: UInt64(Self.limit) + 3, context: context,
                      wallTime: 0, body: .add(Self.stroke(), z: ZKey(layer: 1)))
        let v = try #require(OpValidator.violation(of: over))
        #expect(v.rule == .log23)
        #expect(v.message.contains("\(Self.limit + 1) entries"))
    }

    @Test("[MERGE-5] a page log of 4,097 replicas: every kind of local edit is made, has its effect, and converges")
    func widePageStaysEditable() throws {
        let seed = UInt64.random(in: 1...UInt64.max)
        var rng = SeededRNG(seed: seed)
        let foreign = Self.foreignAdds(Self.limit + 1)
        var x = PageReplica(page: Self.page)
        try x.receive(foreign.shuffled(using: &rng))
        #expect(x.clock.entries.count == Self.limit + 1, "seed \(seed)")
        var mine: [Op] = []
        func make(_ f: (inout PageReplica) throws -> Op) throws -> Op {
            let op = try f(&x)
            try Self.checkValid(op)
            mine.append(op)
            return op
        }
        // A stroke on top, above every foreign one.
        let added = try make { try $0.add(Self.stroke(8), by: Self.me, wallTime: 2_000) }
        #expect(x.elements.last?.id == added.id, "seed \(seed)")
        #expect(added.context.entries.count <= Self.limit)
        let targets = Array(foreign.map(\.id).shuffled(using: &rng).prefix(4))
        // Erase, move, partial erase, bring to front, range restore, restore: each names a foreign element.
        _ = try make { try $0.make(.erase([targets[0]]), by: Self.me, wallTime: 2_001) }
        #expect(!x.isLive(targets[0]), "seed \(seed)")
        _ = try make { try $0.move([targets[1]], dx: 50, dy: -20, by: Self.me, wallTime: 2_002) }
        #expect(x.element(targets[1])?.transform.value == (try Transform.identity.translated(by: 50, -20)), "seed \(seed)")
        _ = try make { try $0.make(.eraseRange(targets[2], [PointRange(1, 3)]), by: Self.me, wallTime: 2_003) }
        #expect(x.element(targets[2])?.erased == [PointRange(1, 3)], "seed \(seed)")
        _ = try make { try $0.bringToFront([targets[3]], by: Self.me, wallTime: 2_004) }
        #expect(x.elements.last?.id == targets[3], "seed \(seed)")
        _ = try make { try $0.make(.restoreRange(targets[2], [PointRange(1, 3)]), by: Self.me, wallTime: 2_005) }
        #expect(x.element(targets[2])?.erased == [], "seed \(seed)")
        _ = try make { try $0.make(.restore([targets[0]]), by: Self.me, wallTime: 2_006) }
        #expect(x.isLive(targets[0]), "seed \(seed)")
        // A second erase of the element it restored: its context covers the restore.
        _ = try make { try $0.make(.erase([targets[0], added.id]), by: Self.me, wallTime: 2_007) }
        #expect(!x.isLive(targets[0]) && !x.isLive(added.id), "seed \(seed)")
        #expect(x.pending.isEmpty)

        // Other replicas get the same operations in other orders, mine before or among the
        // foreign ones (then waiting for what their contexts name), in several batches.
        for trial in 0..<3 {
            var y = PageReplica(page: Self.page)
            var all = foreign + mine
            all.shuffle(using: &rng)
            if trial == 1 { all = mine.reversed() + foreign }
            var i = 0
            while i < all.count {
                let n = Int.random(in: 1...1_500, using: &rng)
                try y.receive(Array(all[i..<min(all.count, i + n)]))
                i += n
            }
            #expect(y.pending.isEmpty, "seed \(seed), trial \(trial)")
            #expect(y.state == x.state, "seed \(seed), trial \(trial)")
        }
    }

    @Test("[MERGE-5] an element no context can cover is refused by name; the rest of the page stays editable")
    func elementBeyondReachIsRefused() throws {
        // 4,096 independent adds, then one whose context names all of them: covering it
        // would take 4,097 replicas besides the author.
        let base = Self.foreignAdds(Self.limit)
        let all = VectorClock(base.map { ($0.id.replica, UInt64(1)) })
        let far = Op(id: OpID(replica: ReplicaID(UInt64(Self.limit) + 1), counter: 1), lamport: UInt64(Self.limit) + 1,
                     context: all, wallTime: 1_000, body: .add(Self.stroke(), z: ZKey(layer: Int64(Self.limit) + 1)))
        #expect(OpValidator.violation(of: far) == nil)
        var x = PageReplica(page: Self.page)
        try x.receive(base + [far])
        #expect(x.elements.last?.id == far.id)
        let before = x.state
        #expect(throws: LnoteError.self) { try x.make(.erase([far.id]), by: Self.me, wallTime: 2_000) }
        do {
            _ = try x.make(.erase([far.id]), by: Self.me, wallTime: 2_000)
        } catch let e as LnoteError {
            #expect(e.code == .limitExceeded)
            #expect(e.message.contains("LOG-23") && e.message.contains("4097"))
        }
        #expect(x.state == before, "a refused edit changes nothing")
        // Adds and edits of other elements still work; a new stroke cannot go above `far`
        // (no context within the bound reaches its layer) and goes just below it.
        let added = try x.add(Self.stroke(), by: Self.me, wallTime: 2_001)
        try Self.checkValid(added)
        #expect(x.isLive(added.id))
        let erase = try x.make(.erase([base[7].id]), by: Self.me, wallTime: 2_002)
        try Self.checkValid(erase)
        #expect(!x.isLive(base[7].id))
        var y = PageReplica(page: Self.page)
        try y.receive([erase, added, far] + base.reversed())
        #expect(y.state == x.state)
    }

    @Test("[MERGE-5] [MERGE-63] a document log of 4,097 replicas, and the delete of a wide page")
    func wideDocumentStaysEditable() throws {
        let seed = UInt64.random(in: 1...UInt64.max)
        var rng = SeededRNG(seed: seed)
        let author = ReplicaID(0x6000_0000_0000_0001)
        var origin = DocumentReplica(id: Self.doc)
        let create = try origin.make(.createDocument(title: "T"), by: author, wallTime: 1)
        let p = Self.page
        let addPage = try origin.make(.addPage(p, position: origin.endPosition, canvas: .a4), by: author, wallTime: 2)
        // Each of 4,097 replicas, having seen the document made, sets the title once.
        let seen = VectorClock([(author, UInt64(2))])
        let titles = (1...(Self.limit + 1)).map { i in
            Op(id: OpID(replica: ReplicaID(UInt64(i)), counter: 1), lamport: 3, context: seen, wallTime: 10,
               body: .setTitle("t\(i)"))
        }
        var x = DocumentReplica(id: Self.doc)
        try x.receive([create, addPage] + titles.shuffled(using: &rng))
        var mine: [Op] = []
        func make(_ body: Op.Body) throws {
            let op = try x.make(body, by: Self.me, wallTime: 20)
            try Self.checkValid(op)
            mine.append(op)
        }
        try make(.setTitle("mine"))
        #expect(x.state.title.value == "mine", "the title written after seeing every other write wins")
        let second = PageID(UUID(uuidString: "00000000-0000-0000-0000-0000000000AC")!)
        try make(.addPage(second, position: x.endPosition, canvas: .a4))
        try make(.movePage(second, position: try x.position(after: nil, moving: second, by: Self.me)))
        #expect(x.livePages.map(\.id) == [second, p])

        // The page itself is wide: its delete carries a clock within the bound.
        var page = PageReplica(page: p)
        try page.receive(Self.foreignAdds(Self.limit + 1))
        let pageSeen = page.clockSeen(by: Self.me)
        #expect(pageSeen.entries.count <= Self.limit)
        try make(.deletePage(p, seen: pageSeen))
        #expect(x.page(p)?.deleted.value == true)
        // What the delete's clock leaves out counts as concurrent: reported, nothing lost.
        let conflicts = x.conflicts(pageClocks: [p: page.clock])
        #expect(conflicts.contains { $0.kind == .pageDelete }, "\(conflicts)")

        var y = DocumentReplica(id: Self.doc)
        try y.receive((mine + titles + [addPage, create]).shuffled(using: &rng))
        #expect(y.pending.isEmpty, "seed \(seed)")
        #expect(y.state == x.state, "seed \(seed)")
    }

    @Test("[MERGE-2] a log within the bound: the context is still the whole clock")
    func narrowLogKeepsTheWholeClock() throws {
        var x = PageReplica(page: Self.page)
        try x.receive(Self.foreignAdds(Self.limit))
        let op = try x.add(Self.stroke(), by: Self.me, wallTime: 5)
        var clock = x.clock
        clock[Self.me] = 0
        #expect(op.context == clock)
        #expect(op.lamport == UInt64(Self.limit) + 1)
    }
}
