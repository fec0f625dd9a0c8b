import Testing
@testable import LnoteModel

/// `OpIDTable` against `Dictionary` under seeded random inserts, updates, removals and
/// lookups: the table is only a faster dictionary, so any difference is a bug.
@Suite("Operation id table")
struct OpIDTableTests {
    @Test("agrees with Dictionary under random sets, inserts, removals and lookups")
    func agreesWithDictionary() {
        for seed in testSeeds(0x1D7A_B1E0, count: 60) {
            var g = SplitMix64(seed: seed)
            // Few replicas and counters, so that removals hit long probe runs and keys come back.
            let replicas = Int(g.next() % 6) + 1
            let counters = UInt64(g.next() % 400) + 1
            func key() -> OpID {
                OpID(replica: ReplicaID(UInt64(Int(g.next() % UInt64(replicas)) + 1) &* 0x9E37_79B9), counter: g.next() % counters + 1)
            }
            var table = OpIDTable(minimumCapacity: Int(g.next() % 50))
            var model: [OpID: Int32] = [:]
            for step in 0..<3_000 {
                let k = key()
                switch g.next() % 8 {
                case 0, 1, 2:
                    let v = Int32(g.next() % 1_000_000)
                    table.set(k, v)
                    model[k] = v
                case 3:
                    let inserted = table.insert(k)
                    #expect(inserted == (model[k] == nil), "seed \(seed) step \(step): insert \(k)")
                    if model[k] == nil { model[k] = 0 }
                case 4, 5:
                    #expect(table.removeValue(forKey: k) == model.removeValue(forKey: k), "seed \(seed) step \(step): remove \(k)")
                default:
                    #expect(table[k] == model[k] && table.contains(k) == (model[k] != nil), "seed \(seed) step \(step): lookup \(k)")
                }
                #expect(table.count == model.count, "seed \(seed) step \(step): count")
            }
            // Every key of the space, present or not, answers as the dictionary does.
            for r in 1...replicas {
                for c in 1...counters {
                    let k = OpID(replica: ReplicaID(UInt64(r) &* 0x9E37_79B9), counter: c)
                    #expect(table[k] == model[k], "seed \(seed): final lookup \(k)")
                }
            }
        }
    }

    @Test("grows from empty to many ids and empties again")
    func growsAndEmpties() {
        var table = OpIDTable()
        let ids = (1...20_000).map { OpID(replica: ReplicaID(UInt64($0 % 7) + 1), counter: UInt64($0)) }
        for (i, id) in ids.enumerated() { table.set(id, Int32(i)) }
        #expect(table.count == ids.count)
        #expect(ids.enumerated().allSatisfy { table[$0.element] == Int32($0.offset) })
        for id in ids.reversed() { #expect(table.removeValue(forKey: id) != nil) }
        #expect(table.count == 0)
        #expect(ids.allSatisfy { !table.contains($0) })
    }

    /// Ids a hostile peer could choose: counters that differ only in high bits (which a hash
    /// whose slot comes from a product's low bits maps to one slot whatever its seed), in low
    /// bits, replicas that differ only in high bits. The longest run of occupied slots stays
    /// short: no family piles up in one place.
    @Test("ids differing only in high or low bits spread over the table",
          arguments: [48, 40, 32, 20, 0])
    func hostileFamiliesSpread(bit: Int) {
        let n = 20_000
        var byCounter = OpIDTable(), byReplica = OpIDTable()
        for i in 1...n {
            byCounter.set(OpID(replica: ReplicaID(0xA1), counter: UInt64(i) << UInt64(bit) | 1 << 63), Int32(i))
            byReplica.set(OpID(replica: ReplicaID(UInt64(i) << UInt64(bit) | 1 << 63), counter: 1), Int32(i))
        }
        #expect(byCounter.count == n && byReplica.count == n)
        // At most 70 % full, well mixed: runs of a few hundred at most (one run of 20,000
        // when the family shares a slot).
        #expect(byCounter.longestRun < 600, "counters i << \(bit): longest run \(byCounter.longestRun)")
        #expect(byReplica.longestRun < 600, "replicas i << \(bit): longest run \(byReplica.longestRun)")
    }
}
