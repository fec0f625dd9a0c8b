import Testing
import LnoteModel

/// `Frontier` against the sorted list it replaces: after every write the same members, in
/// the same order, the same greatest; equal (and hashed alike) to the list built directly,
/// whether it is kept as a list or indexed by replica.
@Suite("Frontier: the sorted list, indexed when large")
struct FrontierTests {
    /// The rule as a sorted list, as it was written before `Frontier`.
    static func reference(_ list: inout [OpRef], _ ref: OpRef, _ context: VectorClock) {
        list.removeAll { context.covers($0.id) }
        let i = list.firstIndex { $0 > ref } ?? list.count
        list.insert(ref, at: i)
    }

    static func check(_ f: Frontier, _ list: [OpRef], _ what: String) {
        #expect(f.refs == list, "\(what)")
        #expect(f.count == list.count, "\(what)")
        #expect(f.last == list.last, "\(what)")
        #expect(f == Frontier(list), "\(what)")
        #expect(f.hashValue == Frontier(list).hashValue, "\(what)")
    }

    /// Operations issued by many replicas in causal order, each having seen a random part of
    /// what was issued before (its own operations always, [LOG-3]); some see almost
    /// everything, so the frontier grows past the index bound and shrinks below it again.
    @Test func matchesTheSortedListUnderCausalDelivery() {
        var indexedSeen = 0, listAfterIndexed = 0
        for seed in testSeeds(0xF20_0001, count: 40) {
            var g = SplitMix64(seed: seed)
            let replicas = (0..<Int(g.next() % 300 + 2)).map { _ in ReplicaID(g.next() % 5_000 + 1) }
            var issued: [ReplicaID: UInt64] = [:]  // counters issued per replica
            var f = Frontier(), list: [OpRef] = [], wasIndexed = false
            for step in 0..<600 {
                let author = replicas[Int(g.next() % UInt64(replicas.count))]
                let counter = (issued[author] ?? 0) + 1
                // What the author had seen: its own operations, then of each other replica
                // a prefix, all of it, none, or a random part (mostly little: concurrency).
                let mode = g.next() % 100
                var pairs: [(ReplicaID, UInt64)] = [(author, counter - 1)]
                for (r, n) in issued where r != author {
                    switch mode {
                    case 0: pairs.append((r, n))
                    case 1...3: pairs.append((r, g.next() % (n + 1)))
                    default: if g.next() % 100 == 0 { pairs.append((r, g.next() % (n + 1))) }
                    }
                }
                let context = VectorClock(pairs)
                issued[author] = counter
                let ref = OpRef(id: OpID(replica: author, counter: counter), lamport: context.total + 1)
                f.advance(ref, context: context)
                Self.reference(&list, ref, context)
                Self.check(f, list, "seed \(seed) step \(step)")
                if f.isIndexed { wasIndexed = true } else if wasIndexed { listAfterIndexed += 1; wasIndexed = false }
                if f.isIndexed { indexedSeen += 1 }
            }
        }
        // The property must have crossed both forms, or it proved nothing about the index.
        #expect(indexedSeen > 1_000, "indexed frontiers seen: \(indexedSeen)")
        #expect(listAfterIndexed > 10, "shrunk back to a list: \(listAfterIndexed)")
    }

    /// Copies are values: writing one leaves the other as it was, in either form.
    @Test func copiesAreIndependent() {
        var f = Frontier()
        let base = VectorClock()
        for i in 1...100 { f.advance(OpRef(id: OpID(replica: ReplicaID(UInt64(i)), counter: 1), lamport: 1), context: base) }
        #expect(f.isIndexed)
        let before = f.refs
        var g = f
        g.advance(OpRef(id: OpID(replica: ReplicaID(7), counter: 2), lamport: 200),
                  context: VectorClock((1...100).map { (ReplicaID(UInt64($0)), UInt64(1)) }))
        #expect(f.refs == before)
        #expect(g.count == 1 && g.last?.id == OpID(replica: ReplicaID(7), counter: 2))
        #expect(f != g)
    }

    /// A list with two members of one replica (no valid operations make one; a damaged
    /// snapshot could) is never indexed, and writes to it still follow the list rule.
    @Test func twoMembersOfOneReplicaStayAList() {
        var list = (1...40).map { OpRef(id: OpID(replica: ReplicaID(UInt64($0 % 20 + 1)), counter: UInt64($0)), lamport: UInt64($0)) }
        list.sort()
        var f = Frontier(list)
        let ref = OpRef(id: OpID(replica: ReplicaID(99), counter: 1), lamport: 50)
        let context = VectorClock([(ReplicaID(3), UInt64(22))])
        f.advance(ref, context: context)
        Self.reference(&list, ref, context)
        #expect(!f.isIndexed)
        Self.check(f, list, "duplicate replicas")
    }

    /// Kept in the space of the list it replaces: records carry three.
    @Test func sizeOfAList() {
        #expect(MemoryLayout<Frontier>.size == MemoryLayout<[OpRef]>.size)
    }
}
