import LnoteModel

/// The `points` and `radii` BLOBs of the `strokes` table ([EXP-20] … [EXP-24]).
///
/// `points`: 16 bytes per sample, little-endian IEEE 754 binary32:
/// `x` (pt), `y` (pt), `pressure` (0…1), `t` (ms since the stroke's first point).
/// `radii`: 4 bytes per sample, binary32, the drawn radius in pt.
///
/// The quantized integers of the store convert to these floats by one division each, and a
/// writer refuses any value whose float does not convert back to the same integer
/// ([EXP-23]), so the BLOBs lose nothing.
public enum PointBlob {
    /// Bytes per sample in `points`.
    public static let pointSize = 16
    /// Bytes per sample in `radii`.
    public static let radiusSize = 4

    /// One decoded sample, as the BLOB stores it.
    public struct Sample: Hashable, Sendable {
        public var x: Float
        public var y: Float
        public var pressure: Float
        public var t: Float
        public init(x: Float, y: Float, pressure: Float, t: Float) {
            self.x = x; self.y = y; self.pressure = pressure; self.t = t
        }
    }

    /// The float a quantized coordinate or radius (tenths of a point) is stored as.
    static func float(tenths q: Int32) -> Float { Float(Double(q) / 10) }
    static func float(pressure q: UInt16) -> Float { Float(Double(q) / 1000) }
    static func float(ms q: UInt32) -> Float { Float(q) }

    static func tenths(_ f: Float) -> Int64? {
        let d = (Double(f) * 10).rounded(.toNearestOrAwayFromZero)
        guard d.isFinite, abs(d) <= Double(Int32.max) else { return nil }
        return Int64(d)
    }

    /// Encodes a stroke's points and radii.
    ///
    /// - Throws: `limitExceeded` ([EXP-23]) naming the point when a value would not survive
    ///   the conversion to binary32 (a coordinate or radius of 1,048,576 pt or more, a time beyond
    ///   2^24 ms): the export refuses rather than lose it.
    public static func encode(_ points: [StrokePoint], element: String = "") throws -> (points: [UInt8], radii: [UInt8]) {
        var p: [UInt8] = []
        var r: [UInt8] = []
        p.reserveCapacity(points.count * pointSize)
        r.reserveCapacity(points.count * radiusSize)
        for (i, s) in points.enumerated() {
            let sample = Sample(x: float(tenths: s.x), y: float(tenths: s.y), pressure: float(pressure: s.pressure), t: float(ms: s.t))
            let radius = float(tenths: s.radius)
            guard quantized(sample, radius: radius) == s else {
                throw LnoteError(.limitExceeded,
                                 "stroke \(element): point \(i) (x \(s.x), y \(s.y), radius \(s.radius) tenths of a pt, t \(s.t) ms) does not fit 32-bit floats exactly",
                                 index: i)
            }
            for f in [sample.x, sample.y, sample.pressure, sample.t] { append(f, to: &p) }
            append(radius, to: &r)
        }
        return (p, r)
    }

    /// Decodes a `points` BLOB.
    ///
    /// - Throws: `corrupt` when its length is not a multiple of 16.
    public static func decodePoints(_ bytes: [UInt8]) throws -> [Sample] {
        guard bytes.count % pointSize == 0 else {
            throw LnoteError(.corrupt, "points BLOB of \(bytes.count) bytes is not a multiple of \(pointSize)",
                             offset: bytes.count - bytes.count % pointSize)
        }
        var out: [Sample] = []
        out.reserveCapacity(bytes.count / pointSize)
        var at = 0
        while at < bytes.count {
            out.append(Sample(x: float(bytes, at), y: float(bytes, at + 4), pressure: float(bytes, at + 8), t: float(bytes, at + 12)))
            at += pointSize
        }
        return out
    }

    /// Decodes a `radii` BLOB (pt).
    ///
    /// - Throws: `corrupt` when its length is not a multiple of 4.
    public static func decodeRadii(_ bytes: [UInt8]) throws -> [Float] {
        guard bytes.count % radiusSize == 0 else {
            throw LnoteError(.corrupt, "radii BLOB of \(bytes.count) bytes is not a multiple of \(radiusSize)",
                             offset: bytes.count - bytes.count % radiusSize)
        }
        return stride(from: 0, to: bytes.count, by: radiusSize).map { float(bytes, $0) }
    }

    /// The store's quantized point a decoded sample and radius stand for, or nil when a value
    /// is not one a writer could have produced (out of range, not finite, not on the grid
    /// within float precision).
    public static func quantized(_ s: Sample, radius: Float) -> StrokePoint? {
        guard let x = tenths(s.x), let y = tenths(s.y), let r = tenths(radius),
              s.pressure.isFinite, s.t.isFinite, s.pressure >= 0, s.pressure <= 1, s.t >= 0, s.t <= Float(UInt32.max),
              s.t == s.t.rounded() else { return nil }
        let p = (Double(s.pressure) * 1000).rounded(.toNearestOrAwayFromZero)
        let q = StrokePoint(x: Int32(x), y: Int32(y), pressure: UInt16(p), radius: Int32(r), t: UInt32(s.t))
        // On the grid: converting back gives the very same floats.
        guard float(tenths: q.x) == s.x, float(tenths: q.y) == s.y, float(tenths: q.radius) == radius,
              float(pressure: q.pressure) == s.pressure, float(ms: q.t) == s.t else { return nil }
        return q
    }

    private static func append(_ f: Float, to out: inout [UInt8]) {
        let v = f.bitPattern
        out.append(UInt8(truncatingIfNeeded: v))
        out.append(UInt8(truncatingIfNeeded: v >> 8))
        out.append(UInt8(truncatingIfNeeded: v >> 16))
        out.append(UInt8(truncatingIfNeeded: v >> 24))
    }

    /// The binary32 at `at`; the caller has checked `at + 4 <= bytes.count`.
    private static func float(_ b: [UInt8], _ at: Int) -> Float {
        Float(bitPattern: UInt32(b[at]) | UInt32(b[at + 1]) << 8 | UInt32(b[at + 2]) << 16 | UInt32(b[at + 3]) << 24)
    }
}
