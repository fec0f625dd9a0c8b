/// What one import may add, whatever its format (import-jsonl.md [IMP-11], interchange.md
/// [XCH-12]): a small compressed file can describe millions of pages, strokes or points, and
/// every one would be held in memory and then written.
public struct ImportBudget: Sendable {
    /// Pages one import may fill or create (the largest `"page"` position of [IMP-10]).
    public static let maxPages = 10_000
    /// Strokes one import may add.
    public static let maxStrokes = 1 << 20
    /// Points, over all its strokes, one import may add.
    public static let maxPoints = 1 << 24

    /// The limits this budget applies (the constants above; tests give smaller ones).
    public let strokeLimit: Int
    public let pointLimit: Int
    public private(set) var strokes = 0
    public private(set) var points = 0

    public init(strokeLimit: Int = ImportBudget.maxStrokes, pointLimit: Int = ImportBudget.maxPoints) {
        self.strokeLimit = strokeLimit
        self.pointLimit = pointLimit
    }

    /// Counts one more stroke of `pointCount` points; the problem when that passes the budget
    /// (the counts are then unchanged).
    public mutating func add(pointCount: Int) -> String? {
        guard strokes < strokeLimit else { return "more than \(strokeLimit) strokes in one import" }
        guard pointCount <= pointLimit - points else { return "more than \(pointLimit) points in one import" }
        strokes += 1
        points += pointCount
        return nil
    }
}
