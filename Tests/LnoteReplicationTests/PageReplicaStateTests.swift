import Foundation
import Testing
import LnoteModel
@testable import LnoteReplication

/// `PageReplica(state:)` consumes its state, moving the records in when it holds the only
/// reference to them: whether the caller hands the state over or keeps it, the replica is
/// the same, and a state the caller keeps is left as it was.
@Suite struct PageReplicaStateTests {
    static let page = PageID(UUID(uuidString: "00000000-0000-0000-0000-0000000000AB")!)

    /// A page with live strokes (one moved, one partly erased) and tombstones, from `seed`.
    static func sample(seed: UInt64) throws -> PageReplica {
        var rng = SplitMix64(seed: seed)
        var r = PageReplica(page: page)
        let me = ReplicaID(7)
        var ids: [ElementID] = []
        for i in 0..<40 {
            let n = Int(rng.next() % 30) + 2
            let points = (0..<n).map { StrokePoint(x: Int32(i * 100 + $0 * 7), y: Int32(rng.next() % 1000), t: UInt32($0 * 4)) }
            ids.append(try r.add(.stroke(Stroke(points: points)), by: me, wallTime: Int64(1_000 + i)).id)
        }
        _ = try r.make(.move([ElementTransform(ids[3], .translation(50, -20))]), by: me, wallTime: 2_000)
        _ = try r.make(.eraseRange(ids[5], [PointRange(0, 1)]), by: me, wallTime: 2_001)
        _ = try r.make(.erase([ids[1], ids[Int(rng.next() % 20) + 10]]), by: me, wallTime: 2_002)
        return r
    }

    @Test("a replica built from a state the caller keeps, or hands over, holds that state; the kept one is unchanged")
    func builtFromKeptOrHandedOverState() throws {
        for seed: UInt64 in [1, 2, 3] {
            let original = try Self.sample(seed: seed)
            let kept = original.state
            #expect(!kept.tombstones.isEmpty && kept.elements.count > 30, "seed \(seed)")
            let fromKept = PageReplica(state: kept)
            #expect(kept == original.state, "seed \(seed): the caller's state changed")
            #expect(fromKept.state == kept, "seed \(seed)")
            // A fresh state, whose arrays only `handed` holds: its records move.
            let handed = original.state
            let fromHanded = PageReplica(state: consume handed)
            #expect(fromHanded.state == kept, "seed \(seed)")
            #expect(fromHanded.elements.map(\.id) == original.elements.map(\.id), "seed \(seed)")
            // Both go on like the original.
            var a = fromKept, b = fromHanded, c = original
            let op = try c.add(.stroke(Stroke(points: [StrokePoint(x: 1, y: 2, t: 0)])), by: ReplicaID(9), wallTime: 3_000)
            try a.receive([op])
            try b.receive([op])
            #expect(a.state == c.state && b.state == c.state, "seed \(seed)")
        }
    }
}
