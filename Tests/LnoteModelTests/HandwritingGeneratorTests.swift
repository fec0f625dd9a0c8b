import Foundation
import Testing
import LnoteModel

/// `HandwritingGenerator`'s two profiles: the smooth one must keep producing what it always
/// did for a seed (tests and benchmarks depend on it), and the pen one must keep the
/// statistics issue 15 gives for real pen recordings, so that figures measured on it cannot
/// drift towards what a codec finds easy.
@Suite("Handwriting generator")
struct HandwritingGeneratorTests {
    /// FNV-1a over every style and quantized point of `strokes`.
    static func fingerprint(_ strokes: [Stroke]) -> UInt64 {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        func mix(_ v: UInt64) {
            for k in 0..<8 {
                h ^= (v >> (8 * UInt64(k))) & 0xff
                h = h &* 0x100_0000_01b3
            }
        }
        for s in strokes {
            mix(UInt64(s.style.tool.rawValue))
            mix(UInt64(s.style.color.packed))
            mix(UInt64(bitPattern: Int64(s.style.width)))
            mix(UInt64(s.points.count))
            for p in s.points {
                mix(UInt64(UInt32(bitPattern: p.x)))
                mix(UInt64(UInt32(bitPattern: p.y)))
                mix(UInt64(p.pressure))
                mix(UInt64(UInt32(bitPattern: p.radius)))
                mix(UInt64(p.t))
            }
        }
        return h
    }

    /// The smooth profile is still the default and gives, for two seeds, exactly the strokes
    /// the generator gave before the pen profile existed (fingerprints taken from that code).
    @Test func smoothProfileUnchanged() {
        #expect(HandwritingGenerator.Options().profile == .smooth)
        #expect(Self.fingerprint(HandwritingGenerator.strokes(seed: 1, count: 300)) == 0xE29C_E49E_57B5_8E35)
        #expect(Self.fingerprint(HandwritingGenerator.strokes(seed: 0x1A0E_2024, count: 100)) == 0x241C_7C56_AFD2_D987)
    }

    static var pen: HandwritingGenerator.Options {
        var o = HandwritingGenerator.Options()
        o.profile = .pen
        return o
    }

    /// The same seed gives the same recording and strokes; another seed other ones.
    @Test func penProfileIsDeterministic() {
        let a = HandwritingGenerator.strokes(seed: 77, count: 200, options: Self.pen)
        let b = HandwritingGenerator.strokes(seed: 77, count: 200, options: Self.pen)
        let c = HandwritingGenerator.strokes(seed: 78, count: 200, options: Self.pen)
        #expect(a == b)
        #expect(a != c)
        #expect(HandwritingGenerator(seed: 77, options: Self.pen).recording
                == HandwritingGenerator(seed: 77, options: Self.pen).recording)
    }

    /// What one seed's 1,500 strokes look like, samples and quantized strokes side by side.
    struct Statistics {
        var recording: PenRecording
        var lengths: [Int] = []
        /// Distances between successive quantized points of strokes of 9 points or more, pt.
        var spacings: [Double] = []
        var withoutTime = 0, withoutPressure = 0, withoutEither = 0
        var xResidues = Set<Int32>(), yResidues = Set<Int32>()
        var pressuresOffStep = 0
        /// Median difference of successive times of the strokes that have times, ms.
        var timeSteps: [Int64] = []
        var absentChannelsFilled = true
        var strokes: Int { lengths.count }
        func share(_ n: Int) -> Double { Double(n) / Double(strokes) }
        static func median<T: Comparable>(_ xs: [T]) -> T { xs.sorted()[xs.count / 2] }

        init(seed: UInt64, count: Int) throws {
            var g = HandwritingGenerator(seed: seed, options: HandwritingGeneratorTests.pen)
            recording = try #require(g.recording)
            // In tenths: two grid steps are a whole number of tenths for every step used
            // (0.25 pt: 5, 0.5 pt: 10, 0.75 pt: 15), and the grid has at most two residues
            // modulo that period.
            let period = Int32((20 * recording.gridStep).rounded())
            for _ in 0..<count {
                let (style, samples) = g.nextPenSamples()
                let stroke = try Stroke(samples: samples, style: style)
                let pts = stroke.points
                lengths.append(pts.count)
                let noTime = samples.allSatisfy { $0.t == nil }, noPressure = samples.allSatisfy { $0.pressure == nil }
                // A channel is present in all of a stroke's samples or in none.
                #expect(noTime || samples.allSatisfy { $0.t != nil }, "seed \(seed)")
                #expect(noPressure || samples.allSatisfy { $0.pressure != nil }, "seed \(seed)")
                if noTime {
                    withoutTime += 1
                    // [IMP-4]: an import makes them 4 ms apart.
                    if pts.enumerated().contains(where: { $0.element.t != UInt32(4 * $0.offset) }) { absentChannelsFilled = false }
                } else if pts.count > 1 {
                    for i in 1..<pts.count { timeSteps.append(Int64(pts[i].t) - Int64(pts[i - 1].t)) }
                }
                if noPressure {
                    withoutPressure += 1
                    // [IMP-5]: pressure 500 throughout.
                    if pts.contains(where: { $0.pressure != 500 }) { absentChannelsFilled = false }
                } else {
                    pressuresOffStep += pts.filter { $0.pressure % 10 != 0 }.count
                }
                if noTime || noPressure { withoutEither += 1 }
                for p in pts {
                    xResidues.insert(((p.x % period) + period) % period)
                    yResidues.insert(((p.y % period) + period) % period)
                }
                if pts.count >= 9 {
                    for i in 1..<pts.count {
                        spacings.append(hypot(Double(pts[i].x - pts[i - 1].x), Double(pts[i].y - pts[i - 1].y)) / 10)
                    }
                }
            }
        }
    }

    /// Issue 15's statistics of real ink, on the quantized strokes of several seeds (each
    /// seed is one recording: its own rate, grid and shares of missing channels).
    @Test func penProfileHasTheStatisticsOfRealInk() throws {
        for seed in testSeeds(0x1_0015, count: 4) {
            let s = try Statistics(seed: seed, count: 1500)
            let r = s.recording
            let context = "seed \(seed) (LNOTE_SEED=\(seed) to replay): \(r)"
            // Sample rate and grid as the recording says.
            #expect((60...240).contains(r.sampleRate), "\(context)")
            #expect([0.25, 0.5, 0.75].contains(r.gridStep), "\(context)")

            // Short strokes: median 10 to 20 points, many of 2 to 8, a tail to hundreds.
            let median = Statistics.median(s.lengths)
            #expect((10...20).contains(median), "median \(median) points: \(context)")
            let short = s.share(s.lengths.filter { $0 <= 8 }.count)
            #expect((0.2...0.45).contains(short), "share of strokes of 8 points or fewer \(short): \(context)")
            #expect(s.lengths.min()! >= 2 && s.lengths.max()! <= 500, "\(context)")
            #expect(s.lengths.max()! >= 150, "longest stroke \(s.lengths.max()!): \(context)")

            // Successive points 1 to 5 pt apart, mostly.
            let spacing = Statistics.median(s.spacings)
            #expect((1.5...3.5).contains(spacing), "median spacing \(spacing) pt: \(context)")
            let within = Double(s.spacings.filter { (1...5).contains($0) }.count) / Double(s.spacings.count)
            #expect(within >= 0.7, "\(within) of the spacings in 1...5 pt: \(context)")

            // The digitizer's grid survives quantization: x and y take two residues (one
            // for a 0.5 pt step) modulo two grid steps, out of 5, 10 or 15 possible.
            #expect(s.xResidues.count <= 2 && s.yResidues.count <= 2,
                    "residues x \(s.xResidues.sorted()) y \(s.yResidues.sorted()): \(context)")
            // Pressure in steps of 0.01 (10 thousandths).
            #expect(s.pressuresOffStep == 0, "\(s.pressuresOffStep) pressures off the 0.01 grid: \(context)")
            // Times one sample period apart, in whole ms after quantization.
            let period = 1000 / r.sampleRate
            let step = Double(Statistics.median(s.timeSteps))
            #expect(abs(step - period) <= 1, "median time step \(step) ms, period \(period) ms: \(context)")
            #expect(Set(s.timeSteps).count >= 2, "times without jitter: \(context)")

            // A large share of strokes without time or pressure at all, filled as an
            // import fills them.
            #expect((0.12...0.4).contains(s.share(s.withoutTime)), "without time \(s.share(s.withoutTime)): \(context)")
            #expect((0.12...0.4).contains(s.share(s.withoutPressure)),
                    "without pressure \(s.share(s.withoutPressure)): \(context)")
            #expect((0.28...0.6).contains(s.share(s.withoutEither)),
                    "without time or pressure \(s.share(s.withoutEither)): \(context)")
            #expect(s.absentChannelsFilled, "\(context)")
        }
    }

    /// Every recording setting occurs over a few dozen seeds (no rate or grid is dead code).
    @Test func penRecordingsVary() {
        var rates = Set<Double>(), steps = Set<Double>(), fractional = Set<Bool>()
        for seed in 0..<60 as Range<UInt64> {
            let r = HandwritingGenerator(seed: seed, options: Self.pen).recording!
            rates.insert(r.sampleRate)
            steps.insert(r.gridStep)
            fractional.insert(r.fractionalTimes)
            // The offset is on the hundredths and never a multiple of 0.05 pt.
            for off in [r.gridOffsetX, r.gridOffsetY] {
                let m = Int((off * 100).rounded())
                #expect(off >= 0 && off < r.gridStep && m % 5 != 0, "seed \(seed): offset \(off)")
            }
        }
        #expect(rates == Set(PenRecording.sampleRates))
        #expect(steps == Set(PenRecording.gridSteps))
        #expect(fractional == [true, false])
    }
}
