import Testing
import LnoteModel

@Suite("OpRef order")
struct OpRefOrderTests {
    /// [SHR-4] [LOG-5] OpRefs are ordered by Lamport timestamp, then replica id as an
    /// unsigned 64-bit integer (ids with the high bit set are the greatest), then counter; the
    /// order is total, and two refs of distinct operations never compare equal.
    @Test func lamportThenReplicaThenCounter() {
        for seed in testSeeds(0x0F_0001, count: 10) {
            var g = SplitMix64(seed: seed)
            func replica() -> ReplicaID {
                switch g.int(in: 0...3) {
                case 0: ReplicaID(UInt64(g.int(in: 1...4)))
                case 1: ReplicaID(UInt64.max - UInt64(g.int(in: 0...3)))
                case 2: ReplicaID(1 << 63 | UInt64(g.int(in: 0...3)))
                default: ReplicaID(g.next() | 1)
                }
            }
            var refs: [OpRef] = []
            for _ in 0..<200 {
                refs.append(OpRef(id: OpID(replica: replica(), counter: UInt64(g.int(in: 1...5))), lamport: UInt64(g.int(in: 1...6))))
            }
            let key = { (r: OpRef) in [r.lamport, r.id.replica.rawValue, r.id.counter] }
            for a in refs {
                for b in refs.prefix(50) {
                    let reference = key(a).lexicographicallyPrecedes(key(b))
                    #expect((a < b) == reference, "seed \(seed): \(a) < \(b)")
                    #expect([a < b, b < a, a == b].filter { $0 }.count == 1, "seed \(seed): \(a), \(b) not totally ordered")
                    if a.id != b.id { #expect(a != b, "seed \(seed)") }
                }
            }
            #expect(refs.sorted().map(key) == refs.map(key).sorted { $0.lexicographicallyPrecedes($1) }, "seed \(seed)")
        }
        // The high bit is not a sign.
        let low = OpRef(id: OpID(replica: ReplicaID(1), counter: 9), lamport: 3)
        let high = OpRef(id: OpID(replica: ReplicaID(1 << 63), counter: 1), lamport: 3)
        #expect(low < high && OpRef(id: high.id, lamport: 2) < low)
    }
}
