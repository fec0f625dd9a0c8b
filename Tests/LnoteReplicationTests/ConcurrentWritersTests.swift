import Foundation
import Testing
import LnoteModel
@testable import LnoteReplication

/// One element written by many replicas at once, so that its registers and its edit frontier
/// hold far more concurrent writes than a list is kept for (`Frontier` indexes them by
/// replica): the state must not depend on the order of arrival ([MERGE-1]), and must be
/// what the rules say, computed here from the operations alone: a register's frontier is the
/// writes no other write had seen, its value that of the greatest write ([MERGE-25]).
@Suite struct ConcurrentWritersTests {
    static let page = MergeRuleTests.page
    static let author = ReplicaID(0xA0)

    /// 12 seeds from `base`, or the one in LNOTE_SEED (printed with every failure).
    static func seeds(_ base: UInt64) -> [UInt64] {
        if let s = ProcessInfo.processInfo.environment["LNOTE_SEED"], let v = UInt64(s) { return [v] }
        var g = SplitMix64(seed: base)
        return (0..<12).map { _ in g.next() }
    }

    struct Scenario {
        var ops: [Op]
        var moves: [Op] = []
        var reorders: [Op] = []
        var rangeErases: [Op] = []
        var edits: [Op] { moves + reorders + rangeErases }
    }

    /// An add, then writers on it, each from one of `writers` replicas, in causal order: each
    /// has seen its author's earlier operations, the add and, of every other replica, all, none
    /// or a prefix (mostly none: concurrency). Contexts are closed (the clock after the
    /// operations seen), so every operation is one a correct replica makes.
    static func scenario(seed: UInt64, writers: Int, steps: Int, erases: Bool) throws -> Scenario {
        var g = SplitMix64(seed: seed)
        var me = PageReplica(page: page)
        let add = try me.add(MergeRuleTests.stroke(12), by: author, wallTime: 1_700_000_000_000)
        var s = Scenario(ops: [add])
        // The clock after each replica's latest operation, to close the contexts.
        var after: [ReplicaID: VectorClock] = [author: VectorClock([(author, UInt64(1))])]
        var issued: [ReplicaID: [VectorClock]] = [author: [VectorClock([(author, UInt64(1))])]]
        let replicas = (0..<writers).map { _ in ReplicaID(g.next() % 1_000_000 + 0x100) }
        for _ in 0..<steps {
            let r = replicas[Int(g.next() % UInt64(replicas.count))]
            var context = after[r] ?? VectorClock([(author, UInt64(1))])
            context.merge(VectorClock([(author, UInt64(1))]))
            let wide = g.next() % 60 == 0
            for (other, clocks) in issued where other != r && (wide || g.next() % 300 == 0) {
                context.merge(clocks[Int(g.next() % UInt64(clocks.count))])
            }
            let counter = context[r] + 1
            let id = OpID(replica: r, counter: counter)
            let body: Op.Body
            switch g.next() % (erases ? 10 : 8) {
            case 0...4: body = .move([ElementTransform(add.id, .translation(Int32(g.next() % 500), Int32(g.next() % 500)))])
            case 5...6: body = .reorder([ElementZ(add.id, ZKey(layer: Int64(g.next() % (context.total + 1))))])
            case 7: body = .eraseRange(add.id, [PointRange(UInt32(g.next() % 6), UInt32(g.next() % 6 + 6))])
            case 8: body = .erase([add.id])
            default: body = .restore([add.id])
            }
            let op = Op(id: id, lamport: context.total + 1, context: context, wallTime: 1_700_000_000_001, body: body)
            try OpValidator.validate(op)
            s.ops.append(op)
            if case .move = body { s.moves.append(op) }
            if case .reorder = body { s.reorders.append(op) }
            if case .eraseRange = body { s.rangeErases.append(op) }
            var clock = context
            clock[r] = counter
            after[r] = clock
            issued[r, default: []].append(clock)
        }
        return s
    }

    /// The writes among `writes` that no other write in it had seen, ascending.
    static func maximal(_ writes: [Op]) -> [OpRef] {
        writes.filter { w in !writes.contains { $0.id != w.id && $0.context.covers(w.id) } }.map(\.ref).sorted()
    }

    /// Received in seeded random orders and batches: one state, whatever the order.
    static func states(of ops: [Op], seed: UInt64, orders: Int) throws -> [PageReplica] {
        var g = SplitMix64(seed: seed ^ 0x5EED)
        var out: [PageReplica] = []
        for k in 0..<orders {
            var r = PageReplica(page: page)
            if k == 0 {
                try r.receive(ops)
            } else {
                var rest = ops.shuffled(using: &g)[...]
                while !rest.isEmpty {
                    let n = Int(g.next() % UInt64(k % 2 == 0 ? rest.count : 8)) + 1
                    try r.receive(Array(rest.prefix(n)))
                    rest = rest.dropFirst(n)
                }
            }
            out.append(r)
        }
        return out
    }

    @Test func movesAndReordersByManyReplicasGiveTheRulesState() throws {
        var largest = 0
        for seed in Self.seeds(0xC0C_0001) {
            let s = try Self.scenario(seed: seed, writers: Int(seed % 150) + 60, steps: 300, erases: false)
            let replicas = try Self.states(of: s.ops, seed: seed, orders: 4)
            let json = replicas[0].state.canonicalJSON()
            for (k, r) in replicas.enumerated() {
                #expect(r.state == replicas[0].state && r.state.canonicalJSON() == json, "seed \(seed): order \(k) differs")
            }
            let e = try #require(replicas[0].elements.first, "seed \(seed)")
            #expect(e.transform.frontier == Self.maximal(s.moves), "seed \(seed): transform frontier")
            #expect(e.z.frontier == Self.maximal(s.reorders), "seed \(seed): z frontier")
            #expect(e.frontier == Self.maximal(s.edits), "seed \(seed): edit frontier")
            if case .move(let ts) = s.moves.max(by: { $0.ref < $1.ref })?.body {
                #expect(e.transform.value == ts[0].transform, "seed \(seed): transform value")
            }
            largest = max(largest, e.frontier.count)
        }
        // Far past the bound where a frontier is indexed, or this proved nothing about it.
        #expect(largest > 64, "largest edit frontier: \(largest)")
    }

    @Test func erasesAndRestoresAmongManyWritersConverge() throws {
        for seed in Self.seeds(0xC0C_1001) {
            let s = try Self.scenario(seed: seed, writers: Int(seed % 100) + 50, steps: 250, erases: true)
            let replicas = try Self.states(of: s.ops, seed: seed, orders: 5)
            let json = replicas[0].state.canonicalJSON()
            for (k, r) in replicas.enumerated() {
                #expect(r.state == replicas[0].state && r.state.canonicalJSON() == json, "seed \(seed): order \(k) differs")
            }
            // The same state round-trips through a snapshot, indexed frontiers written as lists.
            let snap = try PageSnapshot.decode(PageSnapshot.encode(replicas[0].state, coveredLogOffset: 0, logIncarnation: 1)).state
            #expect(snap == replicas[0].state, "seed \(seed): snapshot round trip")
        }
    }

    /// A page moved by many replicas at once, some having seen others: the document's page
    /// register ends as the rules say whatever the order of arrival.
    @Test func pageMovesByManyReplicasGiveTheRulesState() throws {
        for seed in Self.seeds(0xC0C_2001).prefix(4) {
            var g = SplitMix64(seed: seed)
            var author = DocumentReplica(id: MergeRuleTests.docID)
            let page = PageID()
            let add = try author.make(.addPage(page, position: ZKey(layer: 1), canvas: .a4), by: Self.author, wallTime: 1)
            var moves: [Op] = []
            for _ in 0..<200 {
                var context = VectorClock([(Self.author, add.id.counter)])
                // Some have seen a few earlier moves (and what those had seen).
                if !moves.isEmpty && g.next() % 4 == 0 {
                    let seen = moves[Int(g.next() % UInt64(moves.count))]
                    context.merge(seen.context)
                    context.include(seen.id)
                }
                let id = OpID(replica: ReplicaID(g.next() % 1_000_000 + 0x100), counter: 1)
                guard context[id.replica] == 0 else { continue }
                let lamport = context.total + 1
                moves.append(Op(id: id, lamport: lamport, context: context, wallTime: 2,
                                body: .movePage(page, position: ZKey(layer: Int64(g.next() % lamport)))))
            }
            var states: [DocumentState] = []
            for k in 0..<4 {
                var r = DocumentReplica(id: MergeRuleTests.docID)
                let ops = [add] + (k == 0 ? moves : moves.shuffled(using: &g))
                if k % 2 == 0 { try r.receive(ops) } else { for op in ops { try r.receive([op]) } }
                states.append(r.state)
            }
            #expect(states.allSatisfy { $0 == states[0] }, "seed \(seed): orders differ")
            let p = try #require(states[0].pages.first, "seed \(seed)")
            #expect(p.position.frontier == Self.maximal(moves + [add]), "seed \(seed): position frontier")
            if case .movePage(_, let z) = moves.max(by: { $0.ref < $1.ref })?.body {
                #expect(p.position.value == z, "seed \(seed): position value")
            }
            #expect(p.position.frontier.count > 100, "seed \(seed): \(p.position.frontier.count) concurrent moves kept")
        }
    }
}
