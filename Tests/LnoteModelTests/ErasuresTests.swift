import Testing
import LnoteModel

/// `Erasures` against the sorted list of erases it replaces ([MERGE-52], [MERGE-70]): after
/// every erase appended and every restore, the same list (each erase's restores reduced to
/// the first of each replica: the list keeps every restore), the same count of those that
/// hold, and the same answer to "had this context seen the element erased", for contexts no
/// correct replica would send too; indexed or not, rebuilt from its list (as a snapshot's
/// reader does) or not, erases of an author appended out of counter order or not.
@Suite("Erasures: the sorted list, indexed by author when large")
struct ErasuresTests {
    @Test func matchesTheSortedList() {
        var indexedChecks = 0, outOfOrder = 0, restoresKept = 0, restoresListed = 0
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
            /// Counters skipped, used later: erases of an author that come out of counter order.
            var skipped: [OpID] = []
            func reduced(_ l: [Erasure]) -> [Erasure] {
                l.map { Erasure(ref: $0.ref, clock: $0.clock, cancelledBy: Erasure.firstRestores($0.cancelledBy)) }
            }
            for step in 0..<400 {
                let r = replicas[Int(g.next() % UInt64(replicas.count))]
                let context = randomContext()
                switch g.next() % 3 {
                case 0, 1:
                    var id = next(r)
                    if g.next() % 16 == 0 {
                        skipped.append(id)
                        id = next(r)
                    } else if !skipped.isEmpty && g.next() % 4 == 0 {
                        id = skipped.removeFirst()
                        outOfOrder += 1
                    }
                    let e = Erasure(ref: OpRef(id: id, lamport: context.total + 1), clock: context)
                    table.append(e)
                    list.insert(e, at: list.firstIndex { $0.ref > e.ref } ?? list.count)
                default:
                    let id = next(r)
                    var changed = false
                    for k in list.indices where context.covers(list[k].ref.id) {
                        if !list[k].cancelledBy.contains(where: { $0.replica == id.replica }) { changed = true }
                        list[k].cancelledBy.append(id)
                        list[k].cancelledBy.sort()
                    }
                    let tookBack = table.takeBack(seenBy: context, restore: id)
                    #expect(tookBack == changed, "seed \(seed) step \(step)")
                }
                let probe = randomContext()
                let seen = list.contains { e in probe.covers(e.ref.id) && !e.cancelledBy.contains { probe.covers($0) } }
                #expect(table.seenHolding(by: probe) == seen, "seed \(seed) step \(step)")
                #expect(table.sorted == reduced(list), "seed \(seed) step \(step)")
                #expect(table.holding == list.filter(\.holds).count, "seed \(seed) step \(step)")
                if step % 10 == 0 {
                    let rebuilt = Erasures(reduced(list))
                    #expect(table == rebuilt && table.hashValue == rebuilt.hashValue, "seed \(seed) step \(step)")
                }
                if step % 50 == 49 { table = Erasures(table.sorted) }
                if table.count > 32 { indexedChecks += 1 }
                restoresKept += table.sorted.reduce(0) { $0 + $1.cancelledBy.count }
                restoresListed += list.reduce(0) { $0 + $1.cancelledBy.count }
            }
        }
        #expect(indexedChecks > 500, "checks past the index bound: \(indexedChecks)")
        #expect(outOfOrder > 20, "erases appended out of their author's counter order: \(outOfOrder)")
        #expect(restoresKept < restoresListed, "restores kept \(restoresKept), listed \(restoresListed)")
    }

    /// [MERGE-70] One element erased and restored by turns, n times, by one replica: each erase
    /// keeps one restore (the first that had seen it), and the work of every restore together
    /// grows as n, not n² (`takeBack` visits only the erases a restorer had not yet taken back).
    @Test func eraseRestoreCyclesStayLinear() {
        let a = ReplicaID(0xA1), b = ReplicaID(0xB2)
        for n in [10, 100, 3_000] {
            var table = Erasures()
            var clock = VectorClock()
            var counter: UInt64 = 0
            for _ in 0..<n {
                counter += 1
                let erase = OpID(replica: a, counter: counter)
                table.append(Erasure(ref: OpRef(id: erase, lamport: counter), clock: clock))
                clock.include(erase)
                counter += 1
                let restore = OpID(replica: a, counter: counter)
                let tookBack = table.takeBack(seenBy: clock, restore: restore)
                #expect(tookBack)
                clock.include(restore)
                #expect(table.holding == 0)
            }
            let kept = table.sorted.map(\.cancelledBy)
            #expect(kept == (0..<n).map { (i: Int) -> [OpID] in [OpID(replica: a, counter: UInt64(2 * i + 2))] }, "n \(n)")
            // A restore by another replica that saw everything: one more entry an erase.
            let byB = table.takeBack(seenBy: clock, restore: OpID(replica: b, counter: 1))
            #expect(byB)
            #expect(table.sorted.allSatisfy { $0.cancelledBy.count == 2 })
            #expect(!table.seenHolding(by: clock) && table.seenHolding(by: VectorClock([(a, UInt64(1))])))
            // "Had this context seen it erased", asked by every operation on the element: a
            // binary search per restorer, not a look at each erase.
            let asked = table.seenHoldingCounting(by: clock)
            #expect(!asked.seen && (n <= 32 || asked.visits <= 4), "n \(n): \(asked.visits) looked at")
            // Seen up to a's k-th operation: an erase (odd k) not yet taken back, or a restore.
            for k in [1, 2, n - 1, n, n + 1, 2 * n - 1, 2 * n] {
                let midway = table.seenHoldingCounting(by: VectorClock([(a, UInt64(k))]))
                #expect(midway.seen == (k % 2 == 1) && (n <= 32 || midway.visits <= 4), "n \(n), k \(k): \(midway)")
            }
            #expect(table.takeBackVisits <= 2 * n + 600, "n \(n): \(table.takeBackVisits) erases visited")
        }
    }
}
