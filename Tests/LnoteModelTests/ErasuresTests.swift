import Testing
import LnoteModel

/// `Erasures` against the sorted list of erases it replaces ([MERGE-52], [MERGE-70]): after
/// every erase appended and every restore, the same list, the same count of those that hold,
/// and the same answer to "had this context seen the element erased"; indexed or not.
@Suite("Erasures: the sorted list, indexed by author when large")
struct ErasuresTests {
    @Test func matchesTheSortedList() {
        var indexedChecks = 0
        for seed in testSeeds(0xE2A_0001, count: 12) {
            var g = SplitMix64(seed: seed)
            let replicas = (0..<Int(g.next() % 200 + 2)).map { _ in ReplicaID(g.next() % 10_000 + 1) }
            var counters: [ReplicaID: UInt64] = [:]
            var table = Erasures(), list: [Erasure] = []
            func randomContext() -> VectorClock {
                var pairs: [(ReplicaID, UInt64)] = []
                let dense = g.next() % 4 == 0
                for (r, n) in counters where dense || g.next() % 30 == 0 { pairs.append((r, g.next() % (n + 1))) }
                return VectorClock(pairs)
            }
            func next(_ r: ReplicaID) -> OpID {
                counters[r, default: 0] += 1
                return OpID(replica: r, counter: counters[r]!)
            }
            for step in 0..<400 {
                let r = replicas[Int(g.next() % UInt64(replicas.count))]
                let context = randomContext()
                switch g.next() % 3 {
                case 0, 1:
                    let id = next(r)
                    let e = Erasure(ref: OpRef(id: id, lamport: context.total + 1), clock: context)
                    table.append(e)
                    list.insert(e, at: list.firstIndex { $0.ref > e.ref } ?? list.count)
                default:
                    let id = next(r)
                    var changed = false
                    for k in list.indices where context.covers(list[k].ref.id) {
                        let i = list[k].cancelledBy.firstIndex { $0 >= id } ?? list[k].cancelledBy.count
                        guard i == list[k].cancelledBy.count || list[k].cancelledBy[i] != id else { continue }
                        list[k].cancelledBy.insert(id, at: i)
                        changed = true
                    }
                    #expect(table.takeBack(seenBy: context, restore: id) == changed, "seed \(seed) step \(step)")
                }
                let probe = randomContext()
                let seen = list.contains { e in probe.covers(e.ref.id) && !e.cancelledBy.contains { probe.covers($0) } }
                #expect(table.seenHolding(by: probe) == seen, "seed \(seed) step \(step)")
                #expect(table.sorted == list, "seed \(seed) step \(step)")
                #expect(table.holding == list.filter(\.holds).count, "seed \(seed) step \(step)")
                if step % 10 == 0 {
                    #expect(table == Erasures(list) && table.hashValue == Erasures(list).hashValue, "seed \(seed) step \(step)")
                }
                if table.count > 32 { indexedChecks += 1 }
            }
        }
        #expect(indexedChecks > 500, "checks past the index bound: \(indexedChecks)")
    }
}
