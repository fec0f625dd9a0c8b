import Foundation

/// A small, fast, seeded random number generator (SplitMix64, Steele, Lea and Flood 2014).
///
/// Its helpers (`below`, `unit`, `gaussian`) are defined here rather than through the
/// standard library's `random(in:using:)`, whose algorithm may change between toolchains:
/// a given seed must produce the same data everywhere, forever.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    public private(set) var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A uniform integer in `0..<n` (`n > 0`), by rejection so there is no modulo bias.
    public mutating func below(_ n: UInt64) -> UInt64 {
        precondition(n > 0, "below(0)")
        let limit = UInt64.max - UInt64.max % n
        while true {
            let v = next()
            if v < limit { return v % n }
        }
    }

    /// A uniform integer in `range`.
    public mutating func int(in range: ClosedRange<Int>) -> Int {
        let span = UInt64(bitPattern: Int64(range.upperBound) &- Int64(range.lowerBound)) &+ 1
        if span == 0 { return Int(truncatingIfNeeded: next()) }
        return Int(truncatingIfNeeded: Int64(range.lowerBound) &+ Int64(bitPattern: below(span)))
    }

    /// A uniform double in `[0, 1)` with 53 random bits.
    public mutating func unit() -> Double { Double(next() >> 11) * 0x1p-53 }

    /// A uniform double in `[lo, hi)`.
    public mutating func double(_ lo: Double, _ hi: Double) -> Double { lo + (hi - lo) * unit() }

    /// True with probability `p`.
    public mutating func chance(_ p: Double) -> Bool { unit() < p }

    /// A standard normal deviate (Box–Muller; one of the pair is discarded for simplicity).
    public mutating func gaussian() -> Double {
        let u1 = max(unit(), 0x1p-60)
        let u2 = unit()
        return (-2 * log(u1)).squareRoot() * cos(2 * Double.pi * u2)
    }
}

/// Produces handwriting for tests and benchmarks, deterministically from a seed, in one of
/// two profiles (`Options.profile`):
///
/// - `.smooth` (the default, and what every existing seed produces): smooth cursive, see below.
/// - `.pen`: ink with the statistics of real pen recordings (issue 15), see `nextPenSamples()`.
///
/// In the smooth profile, each stroke is a pen-down of cursive writing sampled at 240 Hz (like an Apple Pencil):
/// the pen drifts along a text line at 20–60 pt/s while oscillating at 3.5–6 Hz with a few
/// points of amplitude (the Hollerbach oscillation model of handwriting), frequency and
/// amplitude wander slowly, and a little digitizer noise is added. Pressure ramps in over
/// the first ~25 ms and out over the last ~25 ms around a slowly varying plateau; the radius
/// follows pressure and the style's width; times are integral milliseconds of the sample
/// clock. Strokes advance along lines of an A4 page and wrap to the next line and page.
/// Everything is quantized with `Quantization`'s steps.
///
/// The same seed and options always yield the same strokes (the arithmetic is IEEE double,
/// with `sin`, `cos`, `log` from the platform's math library: bit-identical on one platform,
/// and in practice across the platforms lnote builds on).
public struct HandwritingGenerator: Sendable {
    /// What kind of ink to produce.
    public enum Profile: String, Sendable, Hashable, CaseIterable {
        /// Smooth cursive at 240 Hz, 20–400 points a stroke, every channel present.
        case smooth
        /// Pen recordings as they are exported: 60–240 Hz, coordinates on a digitizer grid,
        /// short strokes, channels missing (`nextPenSamples()`).
        case pen
    }

    public struct Options: Sendable, Hashable {
        /// `.smooth` (the default) or `.pen`. The other options below apply to `.smooth`
        /// only, but for the page size and line spacing, which both use.
        public var profile: Profile = .smooth
        /// Samples per second.
        public var sampleRate: Double = 240
        /// Points per stroke, chosen uniformly in this range.
        public var pointsPerStroke: ClosedRange<Int> = 20...400
        /// Standard deviation of the digitizer noise added to x and y, in points.
        public var positionNoise: Double = 0.03
        /// Standard deviation of the noise added to pressure (0...1 scale).
        public var pressureNoise: Double = 0.001
        /// Page size in points (A4 by default) and line spacing.
        public var pageWidth: Double = 595.3
        public var pageHeight: Double = 841.9
        public var lineSpacing: Double = 28
        public init() {}
    }

    public let options: Options
    public internal(set) var rng: SplitMix64
    /// Where the next stroke starts.
    var penX: Double
    var penY: Double

    /// The recording's device, for the `.pen` profile (nil for `.smooth`).
    public let recording: PenRecording?
    /// The pen profile's clock, in ms since the recording started.
    var clock: Double = 0
    /// The pen profile's current ink.
    var penStyle: InkStyle? = nil

    public init(seed: UInt64, options: Options = Options()) {
        self.options = options
        self.rng = SplitMix64(seed: seed)
        penX = 40
        penY = 60
        if options.profile == .pen {
            recording = PenRecording(&rng)
        } else {
            recording = nil
        }
    }

    /// `count` strokes from `seed`.
    public static func strokes(seed: UInt64, count: Int, options: Options = Options()) -> [Stroke] {
        var g = HandwritingGenerator(seed: seed, options: options)
        return g.strokes(count)
    }

    public mutating func strokes(_ count: Int) -> [Stroke] {
        var out: [Stroke] = []
        out.reserveCapacity(count)
        for _ in 0..<count { out.append(nextStroke()) }
        return out
    }

    public mutating func nextStroke() -> Stroke {
        if options.profile == .pen { return nextPenStroke() }
        let o = options
        let style = nextStyle()
        let n = rng.int(in: o.pointsPerStroke)
        let dt = 1 / o.sampleRate

        // Motion parameters, each wandering slowly during the stroke.
        let drift = rng.double(20, 60)             // pt/s along the line
        var freqX = rng.double(3.5, 6), freqY = freqX * rng.double(0.95, 1.6)
        var ampX = rng.double(1.5, 4), ampY = rng.double(2.5, 5.5)
        let phaseX = rng.double(0, 2 * .pi), phaseY = rng.double(0, 2 * .pi)
        let slant = rng.double(0.1, 0.35)          // x shear from y motion (italic slant)
        let baseline = rng.double(-0.8, 0.8)       // pt/s vertical drift
        var angleX = phaseX, angleY = phaseY

        // Pressure.
        let plateau = rng.double(0.3, 0.75)
        let swing = rng.double(0.03, 0.15)
        let swingFreq = rng.double(0.8, 2.5), swingPhase = rng.double(0, 2 * .pi)
        let rampIn = rng.double(0.015, 0.035), rampOut = rng.double(0.015, 0.035)
        let duration = Double(n - 1) * dt
        // The sample clock's phase: where between milliseconds the first sample fell.
        let clockPhase = rng.unit()

        let x0 = penX, y0 = penY
        var points: [StrokePoint] = []
        points.reserveCapacity(n)
        for i in 0..<n {
            let s = Double(i) * dt
            // Let frequency and amplitude wander (a slow random walk).
            freqX = min(7, max(3, freqX + rng.gaussian() * 0.02))
            freqY = min(9, max(3, freqY + rng.gaussian() * 0.02))
            ampX = min(5, max(1, ampX + rng.gaussian() * 0.01))
            ampY = min(7, max(1.5, ampY + rng.gaussian() * 0.01))
            angleX += 2 * .pi * freqX * dt
            angleY += 2 * .pi * freqY * dt
            let wy = ampY * sin(angleY)
            let x = x0 + drift * s + ampX * sin(angleX) - slant * wy + rng.gaussian() * o.positionNoise
            let y = y0 + baseline * s - wy + rng.gaussian() * o.positionNoise

            var p = plateau + swing * sin(2 * .pi * swingFreq * s + swingPhase)
            p *= min(1, (s + dt) / rampIn) * min(1, (duration - s + dt) / rampOut)
            p += rng.gaussian() * o.pressureNoise
            let pq = (try? Quantization.pressure(p)) ?? 0
            let radius = Double(style.width) / 20 * (0.5 + Quantization.pressure(pq))

            let ms = ((clockPhase + Double(i)) * 1000 / o.sampleRate).rounded(.down)
                - (clockPhase * 1000 / o.sampleRate).rounded(.down)
            points.append(StrokePoint(
                x: (try? Quantization.coordinate(x)) ?? 0,
                y: (try? Quantization.coordinate(y)) ?? 0,
                pressure: pq,
                radius: (try? Quantization.coordinate(radius)) ?? 0,
                t: UInt32(ms)))
        }

        // The next stroke starts a little to the right: a gap between words, or a new line.
        penX = x0 + drift * duration + rng.double(4, 14)
        if penX > o.pageWidth - 60 {
            penX = rng.double(30, 50)
            penY += o.lineSpacing
            if penY > o.pageHeight - 40 { penY = 60 }
        }
        return Stroke(style: style, points: points)
    }

    mutating func nextStyle() -> InkStyle {
        // Mostly a black pen; sometimes another tool or colour.
        let roll = rng.unit()
        if roll < 0.7 { return InkStyle(tool: .pen, color: .black, width: Int32(rng.int(in: 12...24))) }
        if roll < 0.85 {
            return InkStyle(tool: .pen, color: RGBA(r: 0x1f, g: 0x4e, b: 0xd8), width: Int32(rng.int(in: 12...24)))
        }
        if roll < 0.95 { return InkStyle(tool: .pencil, color: RGBA(r: 0x40, g: 0x40, b: 0x40), width: Int32(rng.int(in: 8...16))) }
        return InkStyle(tool: .highlighter, color: RGBA(r: 0xff, g: 0xe0, b: 0x30, a: 0x80), width: Int32(rng.int(in: 80...140)))
    }
}
