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

    /// The definitions, on a plain list: what every path of `Erasures` must answer.
    struct Reference {
        var list: [Erasure]
        func seenHolding(_ c: VectorClock) -> Bool {
            list.contains { e in c.covers(e.ref.id) && !e.cancelledBy.contains { c.covers($0) } }
        }
        mutating func takeBack(_ c: VectorClock, _ id: OpID) -> Bool {
            var changed = false
            for k in list.indices where c.covers(list[k].ref.id) && !list[k].cancelledBy.contains(where: { $0.replica == id.replica }) {
                list[k].cancelledBy.append(id)
                list[k].cancelledBy.sort()
                changed = true
            }
            return changed
        }
    }

    /// Histories no causal delivery makes, which a snapshot built elsewhere or a hostile replica
    /// can: each must still answer as the definitions do.
    @Test func unusualHistoriesAnswerAsTheDefinitions() {
        let a = ReplicaID(0xA), r = ReplicaID(0xB), q = ReplicaID(0xC)
        func vc(_ p: [(ReplicaID, UInt64)]) -> VectorClock { VectorClock(p) }
        func erase(_ n: UInt64, by: [OpID] = []) -> Erasure {
            Erasure(ref: OpRef(id: OpID(replica: a, counter: n), lamport: n), clock: VectorClock(), cancelledBy: by)
        }
        func probes(_ t: Erasures, _ ref: Reference, _ what: String) {
            #expect(t.sorted.map { Erasure.firstRestores($0.cancelledBy) } == ref.list.map { Erasure.firstRestores($0.cancelledBy) },
                    "\(what)")
            #expect(t.holding == ref.list.filter(\.holds).count, "\(what)")
            for ca in [0, 1, 5, 19, 20, 21, 30, 40, 100] as [UInt64] {
                for cr in [0, 1, 4, 5, 9, 10, 11] as [UInt64] {
                    for cq in [0, 3] as [UInt64] {
                        let c = VectorClock([(a, ca), (r, cr), (q, cq)].filter { $0.1 > 0 })
                        #expect(t.seenHolding(by: c) == ref.seenHolding(c), "\(what): a \(ca), r \(cr), q \(cq)")
                    }
                }
            }
        }
        // 1. A restore whose counter is below its restorer's run (a hostile replica's order).
        var t = Erasures((1...40).map { erase($0) })
        var ref = Reference(list: (1...40).map { erase($0) })
        for (c, id) in [(vc([(a, 10)]), OpID(replica: r, counter: 9)),
                        (vc([(a, 40)]), OpID(replica: r, counter: 1)),
                        (vc([(a, 35)]), OpID(replica: q, counter: 3))] {
            let mine = t.takeBack(seenBy: c, restore: id)
            #expect(mine == ref.takeBack(c, id))
            probes(t, ref, "after \(id)")
        }
        // 2. Erases already taken back appended: the 33rd, and one after the index exists.
        t = Erasures((1...32).map { erase($0) })
        ref = Reference(list: (1...32).map { erase($0) })
        for (n, by) in [(UInt64(33), [OpID(replica: r, counter: 9)]), (34, []), (35, [OpID(replica: q, counter: 3)])] {
            t.append(erase(n, by: by))
            ref.list.append(erase(n, by: by))
            probes(t, ref, "after appending \(n)")
        }
        let mine = t.takeBack(seenBy: vc([(a, 36)]), restore: OpID(replica: r, counter: 11))
        #expect(mine == ref.takeBack(vc([(a, 36)]), OpID(replica: r, counter: 11)))
        probes(t, ref, "after a restore over them")
        // 3. Lists given whole: a restorer twice (sorted, as snapshots before the rule wrote
        // them), and out of order.
        let given = (UInt64(1)...40).map { n -> Erasure in
            switch n % 4 {
            case 0: erase(n, by: [OpID(replica: r, counter: 2), OpID(replica: r, counter: 10)])
            case 1: erase(n, by: [OpID(replica: r, counter: 10), OpID(replica: r, counter: 2)])
            case 2: erase(n, by: [OpID(replica: q, counter: 3)])
            default: erase(n)
            }
        }
        let sortedLists = given.map { Erasure(ref: $0.ref, clock: $0.clock, cancelledBy: $0.cancelledBy.sorted()) }
        probes(Erasures(sortedLists), Reference(list: sortedLists), "given with a restorer twice")
        let unsorted = (UInt64(1)...40).map { erase($0, by: [OpID(replica: r, counter: 10), OpID(replica: r, counter: 2)]) }
        probes(Erasures(unsorted), Reference(list: unsorted), "given with each list out of order")
        #expect(Erasures(given).seenHolding(by: vc([(a, 40), (r, 3)])) == Reference(list: given).seenHolding(vc([(a, 40), (r, 3)])),
                "given out of order")
    }
}
