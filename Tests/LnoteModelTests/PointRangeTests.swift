import Testing
import LnoteModel

/// The range arithmetic partial erases and range restores use ([MERGE-20], [MERGE-71]):
/// the linear forms give what the obvious ones give, on lists of any shape.
@Suite("Point range arithmetic")
struct PointRangeTests {
    /// Ranges as sets of points, the reference.
    static func points(_ ranges: [PointRange]) -> Set<UInt32> {
        var s = Set<UInt32>()
        for r in ranges where !r.isEmpty { for p in r.from..<r.to { s.insert(p) } }
        return s
    }

    /// A list of up to `n` ranges within 0..<span: sorted or not, overlapping, adjacent or empty.
    static func ranges(_ g: inout SplitMix64, max n: Int, span: UInt32) -> [PointRange] {
        (0..<Int.random(in: 0...n, using: &g)).map { _ in
            let a = UInt32.random(in: 0...span, using: &g)
            let b = Bool.random(using: &g) ? min(span, a + UInt32.random(in: 0...4, using: &g)) : UInt32.random(in: 0...span, using: &g)
            return PointRange(a, b)
        }
    }

    @Test("[MERGE-20] [MERGE-71] subtracting, unionNormalized and union(of:) equal the set arithmetic, normalized, on random lists")
    func agreeWithSets() {
        for seed in testSeeds(0x9A2E, count: 400) {
            var g = SplitMix64(seed: seed)
            let span = UInt32.random(in: 1...200, using: &g)
            let a = Self.ranges(&g, max: 30, span: span), b = Self.ranges(&g, max: 30, span: span)
            let na = a.normalizedUnion(), nb = b.normalizedUnion()
            #expect(na.isNormalized && Self.points(na) == Self.points(a), "seed \(seed)")

            let minus = a.subtracting(b)
            #expect(minus.isNormalized, "seed \(seed): \(minus)")
            #expect(Self.points(minus) == Self.points(a).subtracting(Self.points(b)), "seed \(seed): \(a) − \(b) = \(minus)")
            #expect(na.subtractingNormalized(nb) == minus, "seed \(seed)")

            let union = na.unionNormalized(nb)
            #expect(union == (a + b).normalizedUnion(), "seed \(seed): \(na) ∪ \(nb) = \(union)")

            let lists = (0..<Int.random(in: 0...7, using: &g)).map { _ in Self.ranges(&g, max: 12, span: span) }
            #expect(PointRange.union(of: lists) == lists.flatMap { $0 }.normalizedUnion(), "seed \(seed): \(lists)")
        }
    }

    /// A restore of 100,000 one-point gaps over an erase of the 100,000 points between them:
    /// one walk, where a rescan of the restore's ranges for each erased range was 10^10 steps.
    @Test("[MERGE-71] 100,000 ranges minus 100,000 interleaved ones: every range kept, in one walk")
    func interleavedSubtraction() {
        var erased: [PointRange] = [], gaps: [PointRange] = []
        for i in UInt32(0)..<100_000 {
            erased.append(PointRange(2 * i, 2 * i + 1))
            gaps.append(PointRange(2 * i + 1, 2 * i + 2))
        }
        #expect(erased.subtractingNormalized(gaps) == erased)
        #expect(erased.subtracting(erased).isEmpty)
        #expect(erased.unionNormalized(gaps) == [PointRange(0, 200_000)])
    }
}
