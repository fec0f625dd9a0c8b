/// One input sample as an app or an import file gives it: points, not yet quantized.
public struct InputSample: Sendable, Equatable {
    /// Points, y down.
    public var x: Double
    public var y: Double
    /// Milliseconds from any origin; nil where unknown.
    public var t: Double?
    /// 0...1; nil where unknown.
    public var pressure: Double?
    public init(x: Double, y: Double, t: Double? = nil, pressure: Double? = nil) {
        self.x = x; self.y = y; self.t = t; self.pressure = pressure
    }
}

extension Stroke {
    /// Nominal sampling interval used when no sample of a stroke has a time: 240 Hz.
    public static let nominalIntervalMS = 4.0

    /// Builds a quantized stroke from input samples (the rules are in `Protocol/import-jsonl.md`):
    /// - time is made relative to the first sample; unknown times are interpolated between
    ///   known neighbours (or spaced 4 ms apart when none is known); times never decrease;
    /// - unknown pressures are interpolated between known neighbours, 0.5 when none is known;
    /// - the radius is `width / 2 × (0.5 + pressure)`.
    /// - Throws: `.invalidArgument` for no samples, too many, or coordinates out of range.
    public init(samples: [InputSample], style: InkStyle = InkStyle()) throws {
        guard !samples.isEmpty else { throw LnoteError(.invalidArgument, "a stroke needs at least one point") }
        guard samples.count <= Stroke.maxPoints else {
            throw LnoteError(.limitExceeded, "a stroke has at most \(Stroke.maxPoints) points, got \(samples.count)")
        }
        let times = Stroke.fill(samples.map(\.t), default: nil)
        let pressures = Stroke.fill(samples.map { $0.pressure.map { min(max($0, 0), 1) } }, default: 0.5)
        var points: [StrokePoint] = []
        points.reserveCapacity(samples.count)
        var t0: Int64? = nil
        var last: Int64 = 0
        for (i, s) in samples.enumerated() {
            let ms: Int64
            if let t = times[i] {
                let q = try Quantization.milliseconds(t)
                if t0 == nil { t0 = q }
                ms = max(last, q - t0!)
            } else {
                ms = Int64((Double(i) * Stroke.nominalIntervalMS).rounded())
            }
            guard ms <= Int64(UInt32.max) else {
                throw LnoteError(.invalidArgument, "stroke lasts longer than \(UInt32.max) ms", index: i)
            }
            last = ms
            let p = try Quantization.pressure(pressures[i] ?? 0.5)
            let radius = Int32((Double(style.width) / 2 * (0.5 + Double(p) / 1000)).rounded())
            do {
                points.append(StrokePoint(x: try Quantization.coordinate(s.x), y: try Quantization.coordinate(s.y),
                                          pressure: p, radius: radius, t: UInt32(ms)))
            } catch var e as LnoteError {
                e.index = i
                throw e
            }
        }
        self.init(style: style, points: points)
    }

    /// Fills nil entries by linear interpolation between known neighbours, extending the
    /// first and last known values outward; all-nil stays all-nil unless `default` is given.
    static func fill(_ values: [Double?], default d: Double?) -> [Double?] {
        let known = values.indices.filter { values[$0] != nil }
        guard let first = known.first, let lastK = known.last else { return values.map { _ in d } }
        var out = values
        for i in 0..<first { out[i] = values[first] }
        for i in (lastK + 1)..<max(lastK + 1, values.count) { out[i] = values[lastK] }
        for (a, b) in zip(known, known.dropFirst()) where b > a + 1 {
            let va = values[a]!, vb = values[b]!
            for i in (a + 1)..<b { out[i] = va + (vb - va) * Double(i - a) / Double(b - a) }
        }
        return out
    }
}
