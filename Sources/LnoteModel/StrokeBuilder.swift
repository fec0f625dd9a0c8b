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
    /// Nominal sampling interval used where a time is not known and cannot be interpolated:
    /// 240 Hz.
    public static let nominalIntervalMS: Int64 = 4

    /// Builds a quantized stroke from input samples, exactly as `Protocol/import-jsonl.md`
    /// [IMP-3] to [IMP-6] say. Every value is quantized first; unknown values are then filled
    /// from the quantized known ones in exact integer arithmetic, so that any implementation
    /// of the spec gets the same integers:
    /// - coordinates: `x × 10` (one binary64 multiplication) rounded half away from zero;
    /// - time: known times rounded half away from zero to whole ms; unknown ones interpolated
    ///   between the nearest known times, extrapolated 4 ms a point outside them (4 ms apart
    ///   when none is known); made relative to the first point; then never decreasing;
    /// - pressure: clamped to 0...1, `p × 1000` rounded half away from zero; unknown ones
    ///   interpolated, held outside the known ones, 500 when none is known;
    /// - radius: `width × (500 + pressure) / 2000` tenths, rounded half away from zero.
    /// - Throws: `.invalidArgument` for no samples, NaN or infinite values, coordinates or
    ///   times out of range, or a stroke longer than `ContentBounds.maxStrokeDuration`
    ///   (24 h, [LOG-23]); `.limitExceeded` for
    ///   more than `Stroke.maxPoints` samples.
    public init(samples: [InputSample], style: InkStyle = InkStyle()) throws {
        guard !samples.isEmpty else { throw LnoteError(.invalidArgument, "a stroke needs at least one point") }
        guard samples.count <= Stroke.maxPoints else {
            throw LnoteError(.limitExceeded, "a stroke has at most \(Stroke.maxPoints) points, got \(samples.count)")
        }
        func atPoint<T>(_ i: Int, _ body: () throws -> T) throws -> T {
            do { return try body() } catch var e as LnoteError {
                e.index = i
                e.message = "point \(i): \(e.message)"
                throw e
            }
        }
        // [IMP-3] Quantize every known value.
        var knownTimes: [Int64?] = []
        var knownPressures: [Int64?] = []
        var xs: [Int32] = [], ys: [Int32] = []
        knownTimes.reserveCapacity(samples.count)
        knownPressures.reserveCapacity(samples.count)
        xs.reserveCapacity(samples.count)
        ys.reserveCapacity(samples.count)
        for (i, s) in samples.enumerated() {
            try atPoint(i) {
                xs.append(try Quantization.coordinate(s.x))
                ys.append(try Quantization.coordinate(s.y))
                knownTimes.append(try s.t.map(Quantization.milliseconds))
                knownPressures.append(try s.pressure.map { Int64(try Quantization.pressure($0)) })
            }
        }
        // [IMP-4] Times: fill, make relative to the first point, never decrease.
        let absolute = Stroke.fill(knownTimes, outside: .extrapolate(Stroke.nominalIntervalMS), none: 0)
        // [IMP-5] Pressures: fill, holding the first and last known values outward.
        let pressures = Stroke.fill(knownPressures, outside: .hold, none: 500)
        var points: [StrokePoint] = []
        points.reserveCapacity(samples.count)
        var previous: Int64 = 0
        for i in samples.indices {
            let ms = max(previous, absolute[i] - absolute[0])
            // [IMP-4] The longest stroke an operation may carry ([LOG-23]): a longer one would
            // be refused by every door after the import accepted it.
            guard ms <= Int64(ContentBounds.maxStrokeDuration) else {
                throw LnoteError(.invalidArgument,
                                 "point \(i): the stroke lasts \(ms) ms, longer than \(ContentBounds.maxStrokeDuration) ms (24 h)", index: i)
            }
            previous = ms
            let p = UInt16(pressures[i])
            points.append(StrokePoint(x: xs[i], y: ys[i], pressure: p, radius: Stroke.radius(width: style.width, pressure: p),
                                      t: UInt32(ms)))
        }
        self.init(style: style, points: points)
    }

    /// [IMP-6] The radius of a point, in tenths of a point, for an ink `width` (tenths) and a
    /// quantized `pressure` (thousandths): `width / 2 × (0.5 + pressure / 1000)`, that is
    /// `width × (500 + pressure) / 2000`, rounded half away from zero, computed exactly.
    public static func radius(width: Int32, pressure: UInt16) -> Int32 {
        let r = roundedDivision(Int64(width) * (500 + Int64(pressure)), by: 2000)
        return Int32(clamping: r)
    }

    /// `n / d` rounded half away from zero, exactly (`d > 0`).
    static func roundedDivision(_ n: Int64, by d: Int64) -> Int64 {
        let q = n / d, r = n % d  // r has the sign of n
        return 2 * r.magnitude >= d.magnitude ? q + (n < 0 ? -1 : 1) : q
    }

    /// What unknown values before the first known one and after the last one become.
    enum Outside {
        /// The nearest known value.
        case hold
        /// The nearest known value, minus (before) or plus (after) this step per point.
        case extrapolate(Int64)
    }

    /// Fills the nil entries of `values`: between two known values, the one before plus the
    /// difference times `k / n` (k points after it, n points between the two), the product
    /// rounded half away from zero and computed exactly; outside the known values as
    /// `outside` says; when nothing is known, `none` at the first point, then `outside`'s
    /// step (0 for `.hold`) per point.
    static func fill(_ values: [Int64?], outside: Outside, none: Int64) -> [Int64] {
        let step: Int64
        switch outside {
        case .hold: step = 0
        case .extrapolate(let s): step = s
        }
        guard let first = values.firstIndex(where: { $0 != nil }), let last = values.lastIndex(where: { $0 != nil }) else {
            return values.indices.map { none + Int64($0) * step }
        }
        var out = [Int64](repeating: 0, count: values.count)
        let vf = values[first]!, vl = values[last]!
        for i in 0..<first { out[i] = vf - Int64(first - i) * step }
        for i in (last + 1)..<values.count { out[i] = vl + Int64(i - last) * step }
        var a = first
        out[a] = vf
        while a < last {
            var b = a + 1
            while values[b] == nil { b += 1 }
            let va = values[a]!, vb = values[b]!
            out[b] = vb
            let n = Int64(b - a), d = vb - va
            // d·k/n without overflow: q·k + r·k/n, where q and r (|r| < n) share d's sign,
            // so rounding the second part alone rounds the sum.
            let q = d / n, r = d % n
            for i in (a + 1)..<b {
                let k = Int64(i - a)
                out[i] = va + q * k + roundedDivision(r * k, by: n)
            }
            a = b
        }
        return out
    }
}
