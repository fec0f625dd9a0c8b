import Testing
import LnoteModel

@Suite("Array.uniqued")
struct UniquedTests {
    @Test("keeps the first of equal elements, in order, on both sides of the pairwise/set cut", arguments: testSeeds(0x5EED_0ACE, count: 20))
    func agreesWithSetFilter(seed: UInt64) {
        var g = SplitMix64(seed: seed)
        for _ in 0..<200 {
            let n = Int(g.next() % 41)  // 0...40: the pairwise path (≤ 16) and the set path
            let range = 1 + g.next() % 24
            let a = (0..<n).map { _ in g.next() % range }
            var seen = Set<UInt64>()
            let expected = a.filter { seen.insert($0).inserted }
            #expect(a.uniqued() == expected, "seed \(seed): \(a)")
        }
    }
}
