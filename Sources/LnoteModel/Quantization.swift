/// The quantized integer encoding of ink, as the article's app stores it:
/// coordinates and radii in tenths of a point, pressure in thousandths (0...1000),
/// time in milliseconds relative to the stroke's first point.
///
/// `quantize(dequantize(q)) == q` for every representable `q`, and
/// `|dequantize(quantize(p)) - p| <= step / 2` for every `p` in range.
public enum Quantization {
    /// Coordinate and radius step, in points.
    public static let coordinateStep = 0.1
    /// Pressure step (pressure is 0...1).
    public static let pressureStep = 0.001
    /// Largest pressure value.
    public static let pressureMax: UInt16 = 1000
    /// Coordinates are limited to ±10,000,000 pt (about 3.5 km), far beyond any canvas,
    /// so that deltas and transforms never overflow 32 bits.
    public static let coordinateLimit: Int32 = 100_000_000

    /// Points to tenths of a point: `points × 10` (one binary64 multiplication, rounded to
    /// nearest even as IEEE 754 says), then rounded half away from zero; throws when the
    /// result's magnitude exceeds `coordinateLimit`, and for NaN and infinities
    /// (import-jsonl.md [IMP-3]).
    public static func coordinate(_ points: Double) throws -> Int32 {
        let q = (points * 10).rounded(.toNearestOrAwayFromZero)
        guard q.isFinite, abs(q) <= Double(coordinateLimit) else {
            throw LnoteError(.invalidArgument, "coordinate \(points) pt is out of range")
        }
        return Int32(q)
    }

    public static func points(_ q: Int32) -> Double { Double(q) / 10 }

    /// Pressure 0...1 to thousandths: clamped to 0...1, `× 1000` (binary64), rounded half away
    /// from zero; NaN and infinities are rejected (import-jsonl.md [IMP-3]).
    public static func pressure(_ p: Double) throws -> UInt16 {
        guard p.isFinite else { throw LnoteError(.invalidArgument, "pressure \(p) is not a number") }
        let q = (min(max(p, 0), 1) * 1000).rounded(.toNearestOrAwayFromZero)
        return UInt16(q)
    }

    public static func pressure(_ q: UInt16) -> Double { Double(q) / 1000 }

    /// Milliseconds rounded half away from zero to a whole number; throws for NaN,
    /// infinities and magnitudes of 9 × 10¹⁵ ms or more (import-jsonl.md [IMP-3]). The
    /// builder then checks that relative times fit in 32 bits.
    public static func milliseconds(_ t: Double) throws -> Int64 {
        let q = t.rounded(.toNearestOrAwayFromZero)
        guard q.isFinite, abs(q) < 9e15 else { throw LnoteError(.invalidArgument, "time \(t) ms is out of range") }
        return Int64(q)
    }
}
