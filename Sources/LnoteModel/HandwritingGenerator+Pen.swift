import Foundation

/// The device of one pen recording in the `.pen` profile of `HandwritingGenerator`: its
/// sample rate, its digitizer grid, how its exporter writes times, and how often one of its
/// strokes has no time or no pressure at all. Chosen from the seed when the generator is
/// made; constant for all the strokes it then produces.
public struct PenRecording: Sendable, Hashable {
    /// Samples per second: 60, 90, 120, 133⅓ or 240.
    public var sampleRate: Double
    /// The digitizer's grid in points: every x is `gridOffsetX + k × gridStep` before
    /// quantization (0.25, 0.5 or 0.75 pt), every y `gridOffsetY + k × gridStep`.
    public var gridStep: Double
    public var gridOffsetX: Double
    public var gridOffsetY: Double
    /// Times written with three decimals (microseconds) rather than in whole milliseconds.
    public var fractionalTimes: Bool
    /// The probability that a stroke has no time channel (every `t` nil), and no pressure
    /// channel (every `pressure` nil), drawn independently.
    public var noTimeShare: Double
    public var noPressureShare: Double

    public static let sampleRates: [Double] = [60, 90, 120, 1000 / 7.5, 240]
    public static let gridSteps: [Double] = [0.25, 0.5, 0.75]

    init(_ rng: inout SplitMix64) {
        sampleRate = PenRecording.sampleRates[Int(rng.below(UInt64(PenRecording.sampleRates.count)))]
        gridStep = PenRecording.gridSteps[Int(rng.below(UInt64(PenRecording.gridSteps.count)))]
        // Offsets in hundredths of a point, never a multiple of 0.05 pt: then x × 10 is at
        // least 0.1 away from a tie for every point of the grid (its fraction is that of
        // 10 × offset, or that plus one half), so quantization maps the grid one to one and
        // no rounding of binary64 arithmetic can change which way a value goes.
        let hundredths = UInt64((gridStep * 100).rounded())
        func offset(_ rng: inout SplitMix64) -> Double {
            while true {
                let m = rng.below(hundredths)
                if m % 5 != 0 { return Double(m) / 100 }
            }
        }
        gridOffsetX = offset(&rng)
        gridOffsetY = offset(&rng)
        fractionalTimes = rng.chance(0.5)
        noTimeShare = rng.double(0.18, 0.32)
        noPressureShare = rng.double(0.18, 0.32)
    }

    /// `v` on this recording's grid (`offset + k × gridStep`, the nearest one).
    func snap(_ v: Double, offset: Double) -> Double {
        offset + gridStep * ((v - offset) / gridStep).rounded()
    }
}

extension HandwritingGenerator {
    /// The next stroke of the `.pen` profile: `nextPenSamples()` through the import's
    /// quantization (`Stroke(samples:style:)`, import-jsonl.md [IMP-3] to [IMP-6]), so an
    /// absent channel is what an import of the recording makes of it: times 4 ms apart,
    /// pressure 500 and a constant radius.
    mutating func nextPenStroke() -> Stroke {
        let (style, samples) = nextPenSamples()
        do {
            return try Stroke(samples: samples, style: style)
        } catch {
            // The generator keeps its coordinates on the page and its strokes under a minute.
            preconditionFailure("HandwritingGenerator made samples the import refuses: \(error)")
        }
    }

    /// The samples of the next stroke of the `.pen` profile, as a tablet's exporter writes
    /// them (before quantization), with its ink.
    ///
    /// The statistics are those issue 15 gives for real recordings:
    /// - the recording's sample rate (60–240 Hz) and a pen speed chosen so that successive
    ///   points are mostly 1 to 5 pt apart (a log-normal spacing, median 2.3 pt);
    /// - x and y on the recording's digitizer grid (`PenRecording.gridStep`, a constant
    ///   offset), with a little digitizer noise before snapping; pressure in steps of 0.01;
    ///   times in whole ms or with three decimals, with 0.5 ms of jitter and, now and then,
    ///   a dropped sample;
    /// - the previous stroke's ink 9 times in 10, else a new one as the smooth profile draws it;
    /// - short strokes: 30 % have 2 to 8 points (dots and dashes, accents), the others
    ///   9 + a log-normal (median 11, σ 1.1) up to 500 points: a median of about 15 points
    ///   a stroke, a tail to a few hundred;
    /// - each stroke lacks its time channel with probability `noTimeShare` and its pressure
    ///   channel with probability `noPressureShare` (18–32 % each, so 33–54 % of the strokes lack one or both): every value of the
    ///   channel is nil.
    ///
    /// Requires `options.profile == .pen`.
    public mutating func nextPenSamples() -> (style: InkStyle, samples: [InputSample]) {
        guard let rec = recording else { preconditionFailure("nextPenSamples() needs the .pen profile") }
        let o = options
        // A hand keeps its pen: the previous stroke's ink 9 times in 10.
        let style: InkStyle
        if let last = penStyle, rng.chance(0.9) { style = last } else { style = nextStyle() }
        penStyle = style
        let n = nextPenStrokeLength()
        let hasTime = !rng.chance(rec.noTimeShare)
        let hasPressure = !rng.chance(rec.noPressureShare)
        let rate = rec.sampleRate
        let dt = 1 / rate
        // The distance between successive samples the hand's speed gives, in points.
        let spacing = min(5.5, max(0.8, exp(log(2.3) + 0.4 * rng.gaussian())))
        let speed = spacing * rate

        var xs: [Double] = [], ys: [Double] = []
        xs.reserveCapacity(n)
        ys.reserveCapacity(n)
        let x0 = penX, y0 = penY + rng.double(-2, 2)
        var advance: Double
        if n <= 4 {
            // A dot (of an i, a full stop): the pen lands, wobbles a little, lifts.
            var x = x0 - rng.double(0, 8), y = y0 - rng.double(0, 10)
            for _ in 0..<n {
                xs.append(x)
                ys.append(y)
                x += rng.gaussian() * 0.5
                y += rng.gaussian() * 0.5
            }
            advance = rng.double(1, 4)
        } else if n <= 8 {
            // A dash, a bar or an accent: a short, slightly curved line.
            let angle = rng.chance(0.6) ? rng.double(-0.2, 0.2) : rng.double(-1.3, -0.7)
            let bend = rng.double(-0.08, 0.08)
            var x = x0 - rng.double(0, 10), y = y0 - rng.double(0, 8)
            var heading = angle
            for _ in 0..<n {
                xs.append(x)
                ys.append(y)
                let step = spacing * (1 + 0.15 * rng.gaussian())
                x += step * cos(heading)
                y += step * sin(heading)
                heading += bend
            }
            advance = rng.double(1, 5)
        } else {
            // Cursive: the oscillation model of the smooth profile, at this stroke's speed.
            // A sinusoid of amplitude A and frequency f covers 4·A·f points a second per
            // axis; the drift along the line carries a fifth of the speed.
            var freq = rng.double(3, 5.5)
            var amp = speed / (4 * freq * 1.3)
            if amp > 9 {
                // Letters no taller than 18 pt: write faster instead.
                freq = min(9, freq * amp / 9)
                amp = 9
            }
            amp = max(amp, 1)
            let ampY = amp, ampX = amp * rng.double(0.5, 0.9)
            let freqY = freq, freqX = freq * rng.double(0.6, 1.05)
            let drift = 0.2 * speed
            let slant = rng.double(0.1, 0.35)
            let phaseX = rng.double(0, 2 * .pi), phaseY = rng.double(0, 2 * .pi)
            // Letters are not ellipses: a harmonic at two to three times the frequency makes
            // their loops, cusps and turns.
            let harmonic = rng.double(2, 3), harmonicAmp = rng.double(0.15, 0.35) * amp
            let harmonicPhase = rng.double(0, 2 * .pi)
            for i in 0..<n {
                let s = Double(i) * dt
                let wy = ampY * sin(2 * .pi * freqY * s + phaseY)
                    + harmonicAmp * sin(2 * .pi * freqY * harmonic * s + harmonicPhase)
                xs.append(x0 + drift * s + ampX * sin(2 * .pi * freqX * s + phaseX) - slant * wy)
                ys.append(y0 - wy)
            }
            advance = drift * Double(n - 1) * dt + rng.double(3, 12)
        }

        // Pressure: a plateau with a slow swing, ramps over the first and last samples.
        let plateau = rng.double(0.25, 0.8)
        let swing = rng.double(0.02, 0.1)
        let swingPhase = rng.double(0, 2 * .pi)
        let ramp = max(1, Double(n) / 6)

        // Times: the recording's clock, one sample period apart, jitter, dropped samples.
        clock += rng.double(80, 700)
        let start = clock
        var late = 0.0
        var samples: [InputSample] = []
        samples.reserveCapacity(n)
        for i in 0..<n {
            if i > 0 && rng.chance(0.01) { late += 1000 * dt }
            var t = start + late + Double(i) * 1000 * dt + 0.5 * rng.gaussian()
            t = rec.fractionalTimes ? (t * 1000).rounded() / 1000 : t.rounded()
            var p = plateau + swing * sin(Double(i) * 0.3 + swingPhase)
            p *= min(1, Double(i + 1) / ramp) * min(1, Double(n - i) / ramp)
            p += rng.gaussian() * 0.005
            p = (min(1, max(0, p)) * 100).rounded() / 100
            let x = rec.snap(xs[i] + rng.gaussian() * 0.12, offset: rec.gridOffsetX)
            let y = rec.snap(ys[i] + rng.gaussian() * 0.12, offset: rec.gridOffsetY)
            samples.append(InputSample(x: x, y: y, t: hasTime ? t : nil, pressure: hasPressure ? p : nil))
        }
        clock = (samples.last.flatMap(\.t) ?? start + late + Double(n) * 1000 * dt)

        // The next stroke starts a little to the right, or on the next line.
        penX = x0 + advance
        if penX > o.pageWidth - 60 {
            penX = rng.double(30, 50)
            penY += o.lineSpacing
            if penY > o.pageHeight - 40 { penY = 60 }
        }
        return (style, samples)
    }

    /// Points in the next pen stroke: 30 % dots and dashes (2–8), else 9 + a log-normal
    /// with median 11 and σ 1.1, at most 500.
    mutating func nextPenStrokeLength() -> Int {
        if rng.chance(0.3) { return rng.int(in: 2...8) }
        let tail = exp(log(11.0) + 1.1 * rng.gaussian())
        return 9 + Int(min(491, tail).rounded(.down))
    }
}
