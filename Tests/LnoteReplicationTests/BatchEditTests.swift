import Foundation
import Testing
import LnoteModel
@testable import LnoteReplication

/// An erase or a reorder of many elements takes them out of the live set together
/// (`ElementTable.remove(all:)`) instead of one pass over the z order each. What each element
/// ends as must still be what its own rule says ([MERGE-15], [MERGE-21], [MERGE-30]), in any
/// order of arrival.
@Suite struct BatchEditTests {
    typealias Page = MergeRuleTests.Page
    static let a = MergeRuleTests.a, b = MergeRuleTests.b, c = MergeRuleTests.c

    @Test("[MERGE-15] [MERGE-21] [MERGE-30] a reorder and a concurrent erase of many elements at once leave each element where its own rule puts it, in every order of arrival")
    func manyAtOnce() throws {
        for seed in (UInt64(0xBA7C_0001) ..< 0xBA7C_0007) {
            var g = SplitMix64(seed: seed)
            var p = Page()
            var ids: [ElementID] = []
            for k in 0..<60 { ids.append(try p.add(Self.a, MergeRuleTests.stroke(3, x: Int32(k))).id) }
            try p.syncAll()
            let before = p.r[Self.b]!.state
            func oldKey(_ id: ElementID) -> ZKey { before.elements.first { $0.id == id }!.z.value }
            // b moves 30 of them; c, concurrently, erases 20 (some of those b moves).
            let moved = Array(ids.shuffled(using: &g).prefix(30))
            var newKey: [ElementID: ZKey] = [:]
            for id in moved {
                newKey[id] = ZKey(layer: Int64(g.next() % 40) - 20, fraction: g.next() % 2 == 0 ? [] : [UInt8(1 + g.next() % 200)])
            }
            _ = try p.make(Self.b, .reorder(moved.map { ElementZ($0, newKey[$0]!) }))
            let erased = Array(ids.shuffled(using: &g).prefix(20))
            _ = try p.make(Self.c, .erase(erased))
            try p.syncAll()
            let key = { (id: ElementID) in newKey[id] ?? oldKey(id) }
            let expected = ids.filter { !erased.contains($0) }.sorted { ZKey.positionLess(key($0), $0, key($1), $1) }
            let what = "seed \(seed)"
            for who in [Self.a, Self.b, Self.c] {
                let r = p.r[who]!
                #expect(r.elementIDs == expected, "\(what), replica \(who)")
                for id in expected { #expect(r.element(id)?.z.value == key(id), "\(what): \(id)") }
                for id in erased {
                    // Erase wins; the kept record took the concurrent reorder ([MERGE-30]).
                    let t = r.tombstone(id)
                    #expect(t?.isErased == true && t?.record?.z.value == key(id), "\(what): \(id)")
                }
                #expect(r.state == p.r[Self.a]!.state, "\(what), replica \(who)")
            }
            try RestoreRuleTests.everyOrder(RestoreRuleTests.all(p), expected: p.r[Self.a]!.state, seed: seed, count: 8)
            // Restored together, they come back where their keys put them.
            _ = try p.make(Self.a, .restore(erased))
            try p.syncAll()
            #expect(p.r[Self.c]!.elementIDs == ids.sorted { ZKey.positionLess(key($0), $0, key($1), $1) }, "\(what): restored")
        }
    }
}
