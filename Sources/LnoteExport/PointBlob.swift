import LnoteModel

/// The `points`, `radii` and `exact` BLOBs of the `strokes` table ([EXP-20] … [EXP-29]).
///
/// `points`: 16 bytes per sample, little-endian IEEE 754 binary32:
/// `x` (pt), `y` (pt), `pressure` (0…1), `t` (ms since the stroke's first point).
/// `radii`: 4 bytes per sample, binary32, the drawn radius in pt.
/// `exact`: 20 bytes per sample, the store's quantized integers, written only for a stroke
/// with a value that binary32 cannot hold exactly ([EXP-27], [EXP-28]).
///
/// The quantized integers of the store convert to these floats by one division each. Most
/// strokes convert back exactly; one that does not (a coordinate beyond 2^20 pt, a time
/// beyond 2^24 ms) gets the `exact` BLOB beside its nearest floats, so the export loses
/// nothing and a float-only reader still sees an approximation.
public enum PointBlob {
    /// Bytes per sample in `points`.
    public static let pointSize = 16
    /// Bytes per sample in `radii`.
    public static let radiusSize = 4
    /// Bytes per sample in `exact` ([EXP-27]).
    public static let exactSize = 20

    /// One decoded sample, as the `points` BLOB stores it.
    public struct Sample: Hashable, Sendable {
        public var x: Float
        public var y: Float
        public var pressure: Float
        public var t: Float
        public init(x: Float, y: Float, pressure: Float, t: Float) {
            self.x = x; self.y = y; self.pressure = pressure; self.t = t
        }
    }

    /// A stroke's BLOBs as the exporter writes them.
    public struct Encoded: Hashable, Sendable {
        public var points: [UInt8]
        public var radii: [UInt8]
        /// nil when every value of every sample converts back from its float exactly ([EXP-28]).
        public var exact: [UInt8]?
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

    /// The floats a quantized point is written as in `points` and `radii` ([EXP-21]).
    static func floats(_ p: StrokePoint) -> (sample: Sample, radius: Float) {
        (Sample(x: float(tenths: p.x), y: float(tenths: p.y), pressure: float(pressure: p.pressure), t: float(ms: p.t)),
         float(tenths: p.radius))
    }

    /// True when the floats of `p` convert back to `p` ([EXP-23]): no `exact` record needed.
    public static func floatsAreExact(_ p: StrokePoint) -> Bool {
        let f = floats(p)
        return quantized(f.sample, radius: f.radius) == p
    }

    /// Encodes a stroke's points: `points` and `radii` always (nearest floats, [EXP-21]),
    /// `exact` only when some value's float does not convert back to it ([EXP-28]).
    public static func encode(_ points: [StrokePoint]) -> Encoded {
        var p: [UInt8] = []
        var r: [UInt8] = []
        p.reserveCapacity(points.count * pointSize)
        r.reserveCapacity(points.count * radiusSize)
        var allExact = true
        for s in points {
            let (sample, radius) = floats(s)
            if allExact && quantized(sample, radius: radius) != s { allExact = false }
            for f in [sample.x, sample.y, sample.pressure, sample.t] { append(f.bitPattern, to: &p) }
            append(radius.bitPattern, to: &r)
        }
        guard !allExact else { return Encoded(points: p, radii: r, exact: nil) }
        var e: [UInt8] = []
        e.reserveCapacity(points.count * exactSize)
        for s in points {
            // [EXP-27] x, y, pressure, t, radius: 32-bit little-endian integers.
            for v in [UInt32(bitPattern: s.x), UInt32(bitPattern: s.y), UInt32(s.pressure), s.t, UInt32(bitPattern: s.radius)] {
                append(v, to: &e)
            }
        }
        return Encoded(points: p, radii: r, exact: e)
    }

    /// Decodes a stroke's BLOBs as a reader of the export must ([EXP-24], [EXP-29]): the
    /// store's quantized points, from `exact` when present, else from `points` and `radii`.
    ///
    /// - Throws: `corrupt` with the byte offset in the BLOB it names when a length is not a
    ///   multiple of its record size or disagrees with `pointCount`; when a float sample is
    ///   off the store's grid (no `exact`); when an `exact` record holds a pressure above
    ///   1000; or when a `points` or `radii` record is not the nearest float of its `exact`
    ///   record. `index` is the sample's index when one sample is at fault.
    public static func decode(points: [UInt8], radii: [UInt8], exact: [UInt8]?, pointCount: Int) throws -> [StrokePoint] {
        let samples = try decodePoints(points)
        let rads = try decodeRadii(radii)
        guard samples.count == pointCount else {
            throw LnoteError(.corrupt, "points BLOB holds \(samples.count) samples, point_count is \(pointCount)",
                             offset: pointSize * min(samples.count, pointCount))
        }
        guard rads.count == pointCount else {
            throw LnoteError(.corrupt, "radii BLOB holds \(rads.count) radii, point_count is \(pointCount)",
                             offset: radiusSize * min(rads.count, pointCount))
        }
        guard let exact else {
            return try samples.indices.map { i in
                guard let q = quantized(samples[i], radius: rads[i]) else {
                    throw LnoteError(.corrupt, "points record \(i) (\(samples[i]), radius \(rads[i])) is not a value of the store",
                                     offset: pointSize * i, index: i)
                }
                return q
            }
        }
        let out = try decodeExact(exact)
        guard out.count == pointCount else {
            throw LnoteError(.corrupt, "exact BLOB holds \(out.count) records, point_count is \(pointCount)",
                             offset: exactSize * min(out.count, pointCount))
        }
        // [EXP-29] `points` and `radii` are the nearest floats of the exact values: a float-only
        // reader must not see something else.
        for (i, q) in out.enumerated() {
            let (s, r) = floats(q)
            let fields = [s.x, s.y, s.pressure, s.t]
            let got = [samples[i].x, samples[i].y, samples[i].pressure, samples[i].t]
            if let k = (0..<4).first(where: { fields[$0].bitPattern != got[$0].bitPattern }) {
                throw LnoteError(.corrupt, "points record \(i) is not the nearest binary32 of exact record \(i) (\(q))",
                                 offset: pointSize * i + 4 * k, index: i)
            }
            guard r.bitPattern == rads[i].bitPattern else {
                throw LnoteError(.corrupt, "radii record \(i) is not the nearest binary32 of exact record \(i) (\(q))",
                                 offset: radiusSize * i, index: i)
            }
        }
        return out
    }

    /// Throws `corrupt`, with the offset of the partial record, when a BLOB's length is not
    /// a whole number of records ([EXP-24], [EXP-29]).
    private static func requireWholeRecords(_ bytes: [UInt8], of size: Int, in column: String) throws {
        guard bytes.count % size == 0 else {
            throw LnoteError(.corrupt, "\(column) BLOB of \(bytes.count) bytes is not a multiple of \(size)",
                             offset: bytes.count - bytes.count % size)
        }
    }

    /// Decodes a `points` BLOB.
    ///
    /// - Throws: `corrupt` when its length is not a multiple of 16.
    public static func decodePoints(_ bytes: [UInt8]) throws -> [Sample] {
        try requireWholeRecords(bytes, of: pointSize, in: "points")
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
        try requireWholeRecords(bytes, of: radiusSize, in: "radii")
        return stride(from: 0, to: bytes.count, by: radiusSize).map { float(bytes, $0) }
    }

    /// Decodes an `exact` BLOB ([EXP-27]).
    ///
    /// - Throws: `corrupt` when its length is not a multiple of 20 (offset: the start of the
    ///   partial record), or a pressure is above 1000 (offset: that field).
    public static func decodeExact(_ bytes: [UInt8]) throws -> [StrokePoint] {
        try requireWholeRecords(bytes, of: exactSize, in: "exact")
        var out: [StrokePoint] = []
        out.reserveCapacity(bytes.count / exactSize)
        var at = 0
        while at < bytes.count {
            let pressure = u32(bytes, at + 8)
            guard pressure <= 1000 else {
                throw LnoteError(.corrupt, "exact record \(out.count) has pressure \(pressure) (at most 1000)",
                                 offset: at + 8, index: out.count)
            }
            out.append(StrokePoint(x: Int32(bitPattern: u32(bytes, at)), y: Int32(bitPattern: u32(bytes, at + 4)),
                                   pressure: UInt16(pressure), radius: Int32(bitPattern: u32(bytes, at + 16)),
                                   t: u32(bytes, at + 12)))
            at += exactSize
        }
        return out
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

    private static func append(_ v: UInt32, to out: inout [UInt8]) {
        out.append(UInt8(truncatingIfNeeded: v))
        out.append(UInt8(truncatingIfNeeded: v >> 8))
        out.append(UInt8(truncatingIfNeeded: v >> 16))
        out.append(UInt8(truncatingIfNeeded: v >> 24))
    }

    /// The little-endian 32-bit word at `at`; the caller has checked `at + 4 <= bytes.count`.
    private static func u32(_ b: [UInt8], _ at: Int) -> UInt32 {
        UInt32(b[at]) | UInt32(b[at + 1]) << 8 | UInt32(b[at + 2]) << 16 | UInt32(b[at + 3]) << 24
    }

    /// The binary32 at `at`; the caller has checked `at + 4 <= bytes.count`.
    private static func float(_ b: [UInt8], _ at: Int) -> Float { Float(bitPattern: u32(b, at)) }
}
