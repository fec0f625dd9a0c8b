import Testing
import LnoteModel

@Suite("VectorClock")
struct VectorClockTests {
    static func random(_ g: inout SplitMix64) -> VectorClock {
        VectorClock((0..<Int(g.below(6))).map { _ in (ReplicaID(1 + g.below(5)), g.below(4)) })
    }

    @Test func algebra() {
        for seed in testSeeds(0xC10C_0001, count: 2000) {
            var g = SplitMix64(seed: seed)
            let a = Self.random(&g), b = Self.random(&g), c = Self.random(&g)
            let ctx = "seed \(seed): \(a) \(b) \(c)"
            // Entries sorted, non-zero.
            for x in [a, b, c] {
                #expect(x.entries.allSatisfy { $0.counter > 0 }, "\(ctx)")
                #expect(zip(x.entries, x.entries.dropFirst()).allSatisfy { $0.replica < $1.replica }, "\(ctx)")
            }
            // Merge: commutative, associative, idempotent, an upper bound.
            #expect(a.merged(b) == b.merged(a), "\(ctx)")
            #expect(a.merged(b).merged(c) == a.merged(b.merged(c)), "\(ctx)")
            #expect(a.merged(a) == a, "\(ctx)")
            #expect(a.merged(b).covers(a) && a.merged(b).covers(b), "\(ctx)")
            // Meet: a lower bound, commutative up to equality.
            #expect(a.covers(a.meet(b)) && b.covers(a.meet(b)), "\(ctx)")
            #expect(a.meet(b) == b.meet(a), "\(ctx)")
            // compare agrees with covers.
            switch a.compare(b) {
            case .equal: #expect(a == b && a.hashValue == b.hashValue, "\(ctx)")
            case .after: #expect(a.covers(b) && !b.covers(a), "\(ctx)")
            case .before: #expect(b.covers(a) && !a.covers(b), "\(ctx)")
            case .concurrent: #expect(!a.covers(b) && !b.covers(a), "\(ctx)")
            }
            #expect(a.merged(b).total >= max(a.total, b.total), "\(ctx)")
            // Covering an op id is the same as covering its one-entry clock.
            let id = OpID(replica: ReplicaID(1 + g.below(5)), counter: 1 + g.below(4))
            #expect(a.covers(id) == a.covers(VectorClock([(id.replica, id.counter)])), "\(ctx)")
            var inc = a
            inc.include(id)
            #expect(inc.covers(id) && inc.covers(a), "\(ctx)")
        }
    }

    @Test func construction() {
        let c = vc((ReplicaID(3), 5), (ReplicaID(1), 0), (ReplicaID(3), 2), (ReplicaID(2), 7))
        #expect(c.entries.map(\.replica) == [ReplicaID(2), ReplicaID(3)])
        #expect(c[ReplicaID(3)] == 5 && c[ReplicaID(1)] == 0)
        var d = c
        d[ReplicaID(2)] = 0
        #expect(d.replicas == [ReplicaID(3)])
        d[ReplicaID(1)] = 4
        #expect(d.replicas == [ReplicaID(1), ReplicaID(3)])
        #expect(c.description == "{0000000000000002:7, 0000000000000003:5}")
        #expect(VectorClock() == vc((ReplicaID(9), 0)))
    }
}
