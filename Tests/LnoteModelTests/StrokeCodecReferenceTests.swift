import Testing
@testable import LnoteModel

/// The point codec against `ReferenceStrokeCodec` (at the end of this file), a second
/// implementation of `Protocol/page-snapshot.md` section 3 written from the spec alone: the
/// same bytes for every point list, and for every input the same points with the reader at
/// the same offset, or the same error code, offset and path. Error messages are not
/// compared: the spec does not fix them.
///
/// The first three tests check the reference on its own (the spec's example, hand-built
/// streams, round trips); the others compare the production codec with it.
@Suite("Point codec against a reference written from the spec")
struct StrokeCodecReferenceTests {
    enum Outcome: Equatable, CustomStringConvertible {
        case points([StrokePoint], end: Int)
        case failure(LnoteError.Code, offset: Int?, path: String?)

        var description: String {
            switch self {
            case let .points(p, end): "\(p.count) points, reader at \(end)"
            case let .failure(c, o, path): "\(c) at \(o.map(String.init) ?? "nil") in \(path ?? "-")"
            }
        }
    }

    /// Records the differences of one test: the first ones in full (each names its seed or
    /// case), the others only counted, so that a codec that differs everywhere does not
    /// bury the log.
    final class Differences {
        let test: String
        private(set) var count = 0
        init(_ test: String) { self.test = test }

        func record(_ message: @autoclosure () -> String) {
            count += 1
            if count <= 20 { Issue.record("\(test): \(message())") }
        }

        /// Reports how many differences were not shown.
        func finish() {
            if count > 20 { Issue.record("\(test): \(count - 20) more differences not shown (\(count) in all)") }
        }
    }

    static func outcome(_ bytes: [UInt8], range: Range<Int>? = nil, base: Int = 0, path: String? = nil,
                        reference: Bool) -> (Outcome, message: String) {
        var r = ByteReader(bytes, range: range ?? 0..<bytes.count, base: base, path: path)
        do {
            let p = reference ? try ReferenceStrokeCodec.decodePoints(&r) : try StrokeCodec.decodePoints(&r)
            return (.points(p, end: r.offset), "")
        } catch let e as LnoteError {
            return (.failure(e.code, offset: e.offset, path: e.path), e.message)
        } catch {
            return (.failure(.invalidState, offset: nil, path: nil), "\(error)")
        }
    }

    /// Decodes with both codecs and records a difference. Returns the reference's outcome
    /// and its message (which names the rule it applied).
    @discardableResult
    static func sameDecoding(_ bytes: [UInt8], range: Range<Int>? = nil, base: Int = 0, path: String? = nil,
                             _ log: Differences, _ context: @autoclosure () -> String) -> (Outcome, message: String) {
        let actual = outcome(bytes, range: range, base: base, path: path, reference: false)
        let expected = outcome(bytes, range: range, base: base, path: path, reference: true)
        if actual.0 != expected.0 {
            log.record("decoders differ: production \(actual.0) (\(actual.message)), reference \(expected.0) (\(expected.message)): \(context())")
        }
        return expected
    }

    /// Encodes with both codecs and records a difference; `encodePoints(into:)` appending
    /// to a writer that already holds bytes must give the same suffix. Returns the
    /// reference's bytes.
    @discardableResult
    static func sameEncoding(_ points: [StrokePoint], _ log: Differences, _ context: @autoclosure () -> String) -> [UInt8] {
        let actual = StrokeCodec.encodedPoints(points)
        let expected = ReferenceStrokeCodec.encodedPoints(points)
        if actual != expected {
            let at = (0..<min(actual.count, expected.count)).first { actual[$0] != expected[$0] }
                ?? min(actual.count, expected.count)
            log.record("encoders differ at byte \(at) (\(actual.count) vs \(expected.count) bytes): \(context())")
        }
        var w = ByteWriter()
        w.append([0xAB, 0xCD, 0xEF])
        StrokeCodec.encodePoints(points, into: &w)
        if Array(w.bytes.prefix(3)) != [0xAB, 0xCD, 0xEF] || Array(w.bytes.dropFirst(3)) != expected {
            log.record("encodePoints(into:) after 3 bytes differs from the reference: \(context())")
        }
        return expected
    }

    // MARK: Inputs

    /// Second differences (zigzagged, the `u` of [PTS-5]) that need exactly width code
    /// `code`: all 0 for code 0, else values whose largest has a bit length in
    /// `W(code − 1) + 1 … W(code)`, the largest at a random place in the block.
    static func values(needing code: Int, count r: Int, _ g: inout SplitMix64) -> [UInt32] {
        guard code > 0 else { return Array(repeating: 0, count: r) }
        let w = ReferenceStrokeCodec.widthOfCode
        let length = g.int(in: (w[code - 1] + 1)...w[code])
        var out: [UInt32] = []
        for _ in 0..<r {
            let bits = g.chance(0.3) ? 0 : g.int(in: 0...length)
            out.append(bits == 0 ? 0 : UInt32(truncatingIfNeeded: g.next() >> UInt64(64 - bits)))
        }
        let low = length == 1 ? 0 : UInt32(truncatingIfNeeded: g.next() >> UInt64(65 - length))
        out[Int(g.below(UInt64(r)))] = UInt32(1) << UInt32(length - 1) | low
        return out
    }

    /// A word that is often extreme: 0, ±1, `Int32.min`, `Int32.max`, `UInt32.max`, or random.
    static func word(_ g: inout SplitMix64) -> UInt32 {
        switch g.below(4) {
        case 0: [0, 1, UInt32.max, 0x8000_0000, 0x7FFF_FFFF, 0x8000_0001][Int(g.below(6))]
        case 1: UInt32(truncatingIfNeeded: g.next())
        default: UInt32(truncatingIfNeeded: g.next() >> (32 + g.below(32)))
        }
    }

    /// `n` points as channel words (x, y, pressure, radius, t as in [PTS-5]) whose blocks
    /// need chosen width codes on every channel: from one block to the next a channel's
    /// code stays, goes one up or down (the short cases of [PTS-7]) or jumps anywhere in
    /// 0 … 15, so every code and every case of the width stream appears, with the
    /// largest value at every place in a block. Pressure is a channel like the others here
    /// (any 32-bit word), so these lists reach pressure codes no `StrokePoint` can.
    static func adversarialWords(count n: Int, _ g: inout SplitMix64) -> [[UInt32]] {
        guard n > 0 else { return [] }
        var current = (0..<5).map { _ in word(&g) }
        var out = [current]
        guard n > 1 else { return out }
        var step = (0..<5).map { _ in word(&g) }
        for c in 0..<5 { current[c] = current[c] &+ step[c] }
        out.append(current)
        var code = (0..<5).map { _ in Int(g.below(16)) }
        for first in stride(from: 2, to: n, by: 8) {
            let r = min(8, n - first)
            var u: [[UInt32]] = []
            for c in 0..<5 {
                switch g.below(8) {
                case 0, 1: break
                case 2, 3: code[c] = min(15, code[c] + 1)
                case 4, 5: code[c] = max(0, code[c] - 1)
                default: code[c] = Int(g.below(16))
                }
                u.append(values(needing: code[c], count: r, &g))
            }
            for k in 0..<r {
                for c in 0..<5 {
                    step[c] = step[c] &+ ReferenceStrokeCodec.unzigzag32(u[c][k])
                    current[c] = current[c] &+ step[c]
                }
                out.append(current)
            }
        }
        return out
    }

    /// Adversarial point lists: the channels of `adversarialWords`, with a pressure that is
    /// valid and smooth, valid and jumping (0 ↔ 1000), random in 0 … 1000 (sometimes but for
    /// one point at 1001), or any `UInt16` (above 1000: it encodes, and the decoders must
    /// reject it alike).
    static func adversarialPoints(_ g: inout SplitMix64) -> [StrokePoint] {
        let n: Int
        switch g.below(50) {
        case 0..<5: n = Int(g.below(4))
        case 5: n = 500 + Int(g.below(2500))
        default: n = 3 + Int(g.below(120))
        }
        let words = adversarialWords(count: n, &g)
        var pressure = Int(g.below(1001))
        var spread = 0
        let mode = g.below(4)
        var points: [StrokePoint] = []
        for (i, v) in words.enumerated() {
            var p = ReferenceStrokeCodec.point(v, pressure: 0)
            switch mode {
            case 0:
                if i % 8 == 2 { spread = [0, 0, 1, 3, 40, 1000][Int(g.below(6))] }
                pressure = min(1000, max(0, pressure + g.int(in: -spread...spread)))
                p.pressure = UInt16(pressure)
            case 1: p.pressure = g.chance(0.5) ? 0 : 1000
            case 2: p.pressure = UInt16(truncatingIfNeeded: v[2])
            default: p.pressure = UInt16(truncatingIfNeeded: v[2] % 1001)
            }
            points.append(p)
        }
        if mode == 3, !points.isEmpty, g.chance(0.5) { points[Int(g.below(UInt64(points.count)))].pressure = 1001 }
        return points
    }

    /// Every kind of input: the tests' random model, adversarial lists, and handwriting
    /// (sometimes with one point's pressure at 1001).
    static func anyPoints(_ seed: UInt64) -> [StrokePoint] {
        var g = SplitMix64(seed: seed)
        switch g.below(4) {
        case 0:
            var m = RandomModel(seed: seed)
            return m.points()
        case 1, 2:
            return adversarialPoints(&g)
        default:
            var h = HandwritingGenerator(seed: seed)
            var points = h.nextStroke().points
            if g.chance(0.2) { points[Int(g.below(UInt64(points.count)))].pressure = 1001 }
            return points
        }
    }

    /// A smooth handwriting stroke of `n` points.
    static func smoothStroke(_ n: Int, seed: UInt64) -> [StrokePoint] {
        var g = HandwritingGenerator(seed: seed)
        var points: [StrokePoint] = []
        while points.count < n { points += g.nextStroke().points }
        return Array(points.prefix(n))
    }

    /// The case of [PTS-7] that codes `c` after `p`.
    static func widthCase(_ c: Int, after p: Int) -> String {
        switch c - p {
        case 0: "same"
        case 1: c == 15 ? "up to 15" : "up"
        case -1: c == 0 ? "down to 0" : "down"
        default: "other"
        }
    }

    // MARK: The reference on its own

    /// [PTS-4] … [PTS-7] The reference writes the spec's example `points-3` (three points,
    /// one block) byte for byte and reads it back.
    @Test func referenceWritesTheSpecExample() throws {
        let fromSpec = try #require(parseHexDump(try specVector("points-3")))
        #expect(ReferenceStrokeCodec.encodedPoints(TinyPage.points) == fromSpec,
                "reference: \(hexDump(ReferenceStrokeCodec.encodedPoints(TinyPage.points)))")
        var r = ByteReader(fromSpec)
        #expect(try ReferenceStrokeCodec.decodePoints(&r) == TinyPage.points)
        #expect(r.isAtEnd)
        #expect(ReferenceStrokeCodec.codes(ofWords: TinyPage.points.map(ReferenceStrokeCodec.words)) == [[2, 1, 0, 2, 0]])
        // The spec's limits are the model's.
        #expect(ReferenceStrokeCodec.maxCount == UInt64(Stroke.maxPoints))
        #expect(ReferenceStrokeCodec.maxPressure == UInt32(Quantization.pressureMax))
    }

    /// [PTS-1] … [PTS-8] The reference agrees with every stream built by hand in
    /// `StrokeCodecTests.handBuiltStreams` (same error code and offset, or the same points,
    /// which it also encodes to those very bytes): the hand computations and the reference
    /// check each other.
    @Test(arguments: StrokeCodecTests.handBuiltStreams)
    func referenceAgreesWithHandBuiltStreams(_ stream: StrokeCodecTests.HandBuiltStream) {
        for (bytes, range, base) in stream.placements {
            let (got, message) = Self.outcome(bytes, range: range, base: base, path: "hand", reference: true)
            switch stream.expected {
            case let .rejected(code, offset):
                #expect(got == .failure(code, offset: base + range.lowerBound + offset, path: "hand"),
                        "\(stream.name): \(got) (\(message))")
            case let .accepted(points):
                #expect(got == .points(points, end: base + range.upperBound), "\(stream.name): \(got) (\(message))")
            }
        }
        if case let .accepted(points) = stream.expected {
            #expect(ReferenceStrokeCodec.encodedPoints(points) == stream.bytes, "\(stream.name)")
        }
    }

    /// [PTS-9] [PTS-10] The reference alone: every point list round-trips (points, reader at
    /// the end, the same bytes again), a pressure above 1000 is rejected as `corrupt`, and
    /// whatever a mutated stream decodes to re-encodes to exactly the bytes consumed.
    @Test func referenceRoundTripsAndIsCanonical() {
        var decodedMutations = 0
        for seed in testSeeds(0x5EED_0201, count: 800) {
            let points = Self.anyPoints(seed)
            let bytes = ReferenceStrokeCodec.encodedPoints(points)
            var r = ByteReader(bytes + [0x55], range: 0..<(bytes.count + 1), base: 9)
            do {
                let back = try ReferenceStrokeCodec.decodePoints(&r)
                #expect(back == points, "seed \(seed)")
                #expect(r.offset == 9 + bytes.count, "seed \(seed)")
                #expect(points.allSatisfy { $0.pressure <= 1000 }, "seed \(seed): accepted a pressure above 1000")
            } catch let e as LnoteError {
                #expect(e.code == .corrupt && points.contains { $0.pressure > 1000 }, "seed \(seed): \(e)")
            } catch {
                Issue.record("seed \(seed): \(error)")
            }
            var g = SplitMix64(seed: seed)
            var mutated = bytes
            guard !mutated.isEmpty else { continue }
            for _ in 0..<(1 + Int(g.below(3))) {
                let i = Int(g.below(UInt64(mutated.count)))
                mutated[i] ^= g.chance(0.6) ? 1 << UInt8(g.below(8)) : UInt8(truncatingIfNeeded: g.next())
            }
            var m = ByteReader(mutated)
            if let back = try? ReferenceStrokeCodec.decodePoints(&m) {
                decodedMutations += 1
                #expect(ReferenceStrokeCodec.encodedPoints(back) == Array(mutated[0..<m.offset]), "seed \(seed): not canonical")
            }
        }
        #expect(decodedMutations > 0)
    }

    // MARK: Production against the reference

    /// [PTS-4] … [PTS-7] The same bytes as the reference for every point list, and
    /// `encodePoints(into:)` appends them. The inputs reach every width code on every
    /// channel (pressure up to 14: a `UInt16` cannot need 32 bits) and every case of the
    /// width stream, including `p + 1` into 15 and `p − 1` into 0 (checked here, so that a
    /// change of the generators cannot silently narrow the test).
    @Test func encoderMatchesReference() {
        let log = Differences("encoder")
        var codesSeen = Array(repeating: Set<Int>(), count: 5)
        var casesSeen = Array(repeating: Set<String>(), count: 5)
        func cover(_ points: [StrokePoint]) {
            var previous = [0, 0, 0, 0, 0]
            for block in ReferenceStrokeCodec.codes(ofWords: points.map(ReferenceStrokeCodec.words)) {
                for c in 0..<5 {
                    let (p, code) = (previous[c], block[c])
                    codesSeen[c].insert(code)
                    casesSeen[c].insert(Self.widthCase(code, after: p))
                    previous[c] = code
                }
            }
        }
        for seed in testSeeds(0x5EED_0202, count: 1500) {
            let points = Self.anyPoints(seed)
            cover(points)
            Self.sameEncoding(points, log, "seed \(seed)")
        }
        for (i, s) in HandwritingGenerator.strokes(seed: 0x5EED_0203, count: 60).enumerated() {
            Self.sameEncoding(s.points, log, "handwriting stroke \(i) of seed 0x5EED_0203")
        }
        log.finish()
        for c in 0..<5 {
            let all = Set(0...(c == 2 ? 14 : 15))
            #expect(codesSeen[c] == all, "channel \(c): codes \(all.subtracting(codesSeen[c]).sorted()) not reached")
            let cases: Set<String> = c == 2 ? ["same", "up", "down", "down to 0", "other"]
                                            : ["same", "up", "up to 15", "down", "down to 0", "other"]
            #expect(casesSeen[c] == cases, "channel \(c): width stream cases \(casesSeen[c].sorted())")
        }
    }

    /// [PTS-5] The encoder loads x to radius of a point as one 16-byte word and masks the
    /// two padding bytes after the pressure: whatever those bytes hold, the bytes are the
    /// reference's (here they are set to 0xFF, then to random bytes, in place in the array).
    @Test func encoderIgnoresPaddingBytes() {
        let log = Differences("padding bytes")
        let offset = MemoryLayout<StrokePoint>.offset(of: \.pressure)! + MemoryLayout<UInt16>.size
        let stride = MemoryLayout<StrokePoint>.stride
        guard MemoryLayout<StrokePoint>.offset(of: \.radius)! >= offset + 2 else { return }  // no padding there
        for seed in testSeeds(0x5EED_0210, count: 200) {
            var points = Self.anyPoints(seed)
            let expected = ReferenceStrokeCodec.encodedPoints(points)
            var g = SplitMix64(seed: seed)
            for fill in [UInt16.max, 0] {
                let n = points.count
                points.withUnsafeMutableBytes { raw in
                    for i in 0..<n {
                        let value = fill == 0 ? UInt16(truncatingIfNeeded: g.next()) : fill
                        raw.storeBytes(of: value, toByteOffset: i * stride + offset, as: UInt16.self)
                    }
                }
                let got = StrokeCodec.encodedPoints(points)
                if got != expected { log.record("seed \(seed), padding \(fill == 0 ? "random" : "0xFFFF"): the encoding differs") }
            }
        }
        log.finish()
    }

    /// [PTS-1] … [PTS-8] Valid streams (and streams whose pressure is above 1000, which
    /// both must reject at the same place) decode alike, with a base offset and a path, the
    /// reader ending at the same offset; so do streams written from channel words that need
    /// every width code, pressure up to 32 bits included.
    @Test func decoderMatchesReferenceOnValidStreams() {
        let log = Differences("valid streams")
        for seed in testSeeds(0x5EED_0204, count: 1200) {
            let bytes = ReferenceStrokeCodec.encodedPoints(Self.anyPoints(seed))
            Self.sameDecoding(bytes, base: Int(seed % 5000), path: "p\(seed % 7)", log, "seed \(seed)")
        }
        var pressureCodes = Set<Int>()
        for seed in testSeeds(0x5EED_0205, count: 400) {
            var g = SplitMix64(seed: seed)
            let words = Self.adversarialWords(count: Int(g.below(60)), &g)
            for block in ReferenceStrokeCodec.codes(ofWords: words) { pressureCodes.insert(block[2]) }
            let bytes = ReferenceStrokeCodec.encoded(words: words)
            Self.sameDecoding(bytes + [0, 1], range: 0..<bytes.count, base: 3, path: "w", log, "words of seed \(seed)")
        }
        log.finish()
        #expect(pressureCodes == Set(0...15), "pressure codes reached: \(pressureCodes.sorted())")
    }

    /// [PTS-2] [PTS-3] [PTS-8] Every truncation (cutting the array, and a reader range with
    /// bytes after it, at the start and in the middle of a buffer) and every single-bit
    /// flip of some streams: the same outcome, offsets counted from a base, with a path.
    @Test func decoderMatchesReferenceOnEveryCutAndFlip() {
        let log = Differences("cuts and flips")
        var failures = 0, successes = 0
        for seed in testSeeds(0x5EED_0206, count: 40) {
            var points = Self.anyPoints(seed)
            if points.count > 60 { points.removeLast(points.count - 60) }
            let bytes = ReferenceStrokeCodec.encodedPoints(points)
            var g = SplitMix64(seed: seed)
            let tail = (0..<16).map { _ in UInt8(truncatingIfNeeded: g.next()) }
            let base = Int(seed % 1000)
            for cut in 0...bytes.count {
                Self.sameDecoding(Array(bytes[0..<cut]), base: base, path: "cut", log, "seed \(seed), cut at \(cut)")
                Self.sameDecoding(bytes + tail, range: 0..<cut, base: base, path: "range", log,
                                  "seed \(seed), range cut at \(cut)")
                Self.sameDecoding(tail + bytes + tail, range: 16..<(16 + cut), base: base, log,
                                  "seed \(seed), embedded, cut at \(cut)")
            }
            // Every bit flip of one stream in four (of at most 250 bytes).
            guard bytes.count <= 250 && seed % 4 == 0 else { continue }
            for bit in 0..<(bytes.count * 8) {
                var flipped = bytes
                flipped[bit / 8] ^= 1 << UInt8(bit % 8)
                switch Self.sameDecoding(flipped + tail, range: 0..<bytes.count, base: base, path: "flip", log,
                                         "seed \(seed), bit \(bit) flipped").0 {
                case .points: successes += 1
                case .failure: failures += 1
                }
            }
        }
        log.finish()
        #expect(failures > 0 && successes > 0, "\(failures) failures, \(successes) successes")
    }

    /// [PTS-5] [PTS-6] [PTS-9] A jump of every size (0 to 2³² − 1, both signs) on each
    /// channel, as a step (the stroke moves for good) and as a spike (one point moves),
    /// at the first step, at every place of the first block and at the first of the next
    /// (so that its second differences straddle the block boundary); smooth and adversarial
    /// strokes of every length from 0 to 40 (the last block at every length); jumps between
    /// `Int32.min` and `Int32.max`, and a time that goes back.
    @Test func jumpsOfEverySizeAtEveryPlace() {
        let log = Differences("jumps")
        let smooth = Self.smoothStroke(20, seed: 0x5EED_0207)
        for n in 0...40 {
            let s = Self.smoothStroke(n, seed: 0x5EED_0208 &+ UInt64(n))
            Self.sameDecoding(Self.sameEncoding(s, log, "smooth stroke of \(n) points"), log, "smooth stroke of \(n) points")
            var g = SplitMix64(seed: 0x5EED_0209 &+ UInt64(n))
            let words = Self.adversarialWords(count: n, &g)
            let points = words.map { ReferenceStrokeCodec.point($0, pressure: UInt16(truncatingIfNeeded: $0[2] % 1001)) }
            Self.sameDecoding(Self.sameEncoding(points, log, "adversarial, \(n) points"), log, "adversarial, \(n) points")
        }
        func moved(_ p: StrokePoint, _ channel: Int, by jump: UInt32) -> StrokePoint {
            var v = ReferenceStrokeCodec.words(p)
            v[channel] = v[channel] &+ jump
            return ReferenceStrokeCodec.point(v, pressure: UInt16(truncatingIfNeeded: v[2]))
        }
        for position in 1...10 {
            for size in 0...32 {
                for negative in [false, true] {
                    let magnitude = size == 32 ? UInt32.max : (UInt32(1) << UInt32(size)) &- 1
                    let jump = negative ? 0 &- magnitude : magnitude
                    for channel in 0..<5 {
                        for spike in [false, true] {
                            var points = smooth
                            for i in position..<(spike ? position + 1 : points.count) {
                                points[i] = moved(points[i], channel, by: jump)
                            }
                            let context = "\(spike ? "spike" : "step") of \(negative ? "-" : "+")\(magnitude) on channel \(channel) at point \(position)"
                            Self.sameDecoding(Self.sameEncoding(points, log, context), base: 5, log, context)
                        }
                    }
                }
            }
        }
        // Int32.min ↔ Int32.max on x, y, radius, t 0 ↔ UInt32.max; then 0 ↔ Int32.min, pressure
        // 0 ↔ 1000, a time going back 50 ms a point.
        var extremes: [[StrokePoint]] = [[], []]
        for i in 0..<20 {
            let even = i % 2 == 0
            extremes[0].append(StrokePoint(x: even ? .min : .max, y: i % 3 == 0 ? .max : .min, pressure: 1000,
                                           radius: even ? .max : .min, t: even ? .max : 0))
            extremes[1].append(StrokePoint(x: even ? 0 : .min, y: i % 4 < 2 ? .max : -1, pressure: even ? 0 : 1000,
                                           radius: 0, t: UInt32(1000 - 50 * i)))
        }
        for (i, points) in extremes.enumerated() {
            Self.sameDecoding(Self.sameEncoding(points, log, "extremes \(i)"), log, "extremes \(i)")
        }
        log.finish()
    }

    /// [PTS-2] [PTS-6] Long strokes of several thousand points: realistic handwriting and
    /// adversarial lists, and a cut of each at a few places.
    @Test func longStrokes() {
        let log = Differences("long strokes")
        var options = HandwritingGenerator.Options()
        options.pointsPerStroke = 2000...8000
        var long = HandwritingGenerator.strokes(seed: 0x5EED_020A, count: 4, options: options).map(\.points)
        var g = SplitMix64(seed: 0x5EED_020B)
        for _ in 0..<3 {
            long.append(Self.adversarialWords(count: 2000 + Int(g.below(4000)), &g).map {
                ReferenceStrokeCodec.point($0, pressure: UInt16(truncatingIfNeeded: $0[2] % 1001))
            })
        }
        for (i, points) in long.enumerated() {
            let bytes = Self.sameEncoding(points, log, "long stroke \(i) of \(points.count) points")
            Self.sameDecoding(bytes, base: 11, path: "long", log, "long stroke \(i)")
            for _ in 0..<4 {
                let cut = Int(g.below(UInt64(bytes.count)))
                Self.sameDecoding(bytes, range: 0..<cut, base: 11, log, "long stroke \(i) cut at \(cut)")
            }
        }
        log.finish()
    }

    /// [PTS-1] … [PTS-3] [PTS-8] [PTS-10] Random multi-byte mutations of valid streams,
    /// random bytes, and random bytes behind a plausible header (a small count, zero point 0
    /// and first step, `H` and `G` that fit). Checked here too: the reference meets every
    /// rule of [PTS-1] … [PTS-3] and [PTS-8] on these inputs, so each is compared at least once.
    @Test func decoderMatchesReferenceOnMutationsAndNoise() {
        let log = Differences("mutations and noise")
        var rules = Set<String>()
        func note(_ result: (Outcome, message: String)) {
            if case .failure = result.0, let end = result.message.firstIndex(of: ":") {
                rules.insert(String(result.message[..<end]))
            }
        }
        for seed in testSeeds(0x5EED_020C, count: 1500) {
            var g = SplitMix64(seed: seed)
            var bytes = ReferenceStrokeCodec.encodedPoints(Self.anyPoints(seed))
            if bytes.count > 1 {
                for _ in 0..<(1 + Int(g.below(4))) {
                    // Mostly in the streams at the end, where most of the rules are.
                    let i = g.chance(0.7) ? bytes.count - 1 - Int(g.below(UInt64(min(bytes.count, 24))))
                                          : Int(g.below(UInt64(bytes.count)))
                    if g.chance(0.5) { bytes[i] ^= 1 << UInt8(g.below(8)) } else { bytes[i] = UInt8(truncatingIfNeeded: g.next()) }
                }
            }
            note(Self.sameDecoding(bytes, base: 7, path: "m", log, "seed \(seed), mutated"))
            let noise = (0..<Int(g.below(80))).map { _ in UInt8(truncatingIfNeeded: g.next()) }
            note(Self.sameDecoding(noise, path: "n", log, "seed \(seed), noise"))
            // Noise behind a plausible header: the width stream biased towards short codes.
            let n = 3 + Int(g.below(40))
            var widths = (0..<Int(g.below(12))).map { _ in UInt8(truncatingIfNeeded: g.next() & g.next() & g.next()) }
            if g.chance(0.5), !widths.isEmpty { widths[widths.count - 1] &= 0x0F }
            let packed = (0..<Int(g.below(40))).map { _ in UInt8(truncatingIfNeeded: g.next() & g.next()) }
            var w = ByteWriter()
            w.varint(UInt64(n)); w.append([0, 0]); w.varint(g.chance(0.5) ? 1000 : 0); w.append([0, 0, 0, 0, 0, 0, 0])
            w.varint(UInt64(widths.count)); w.varint(UInt64(packed.count)); w.append(widths); w.append(packed)
            note(Self.sameDecoding(w.bytes, base: 3, log, "seed \(seed), plausible header and noise"))
        }
        // The hand-built streams too (their rules include some noise rarely meets).
        for stream in StrokeCodecTests.handBuiltStreams {
            for (bytes, range, base) in stream.placements {
                note(Self.sameDecoding(bytes, range: range, base: base, path: "hand", log, stream.name))
            }
        }
        log.finish()
        let expected: Set<String> = [
            "varint cut", "varint too long", "varint not shortest", "[PTS-1] count", "[PTS-1] point 0",
            "[PTS-1] first step", "[PTS-1] point 1 pressure", "[PTS-2]", "[PTS-3] truncated", "[PTS-3] corrupt",
            "[PTS-8] 1", "[PTS-8] 2", "[PTS-8] 3", "[PTS-8] 4", "[PTS-8] 5", "[PTS-8] 6",
            "[PTS-8] 7 width byte", "[PTS-8] 7 width padding", "[PTS-8] 7 packed byte",
        ]
        #expect(rules == expected, "rules never met: \(expected.subtracting(rules).sorted()); unknown: \(rules.subtracting(expected).sorted())")
    }
}

// MARK: - The reference

/// A second implementation of the point stream, written from `Protocol/page-snapshot.md`
/// section 3 alone, as the oracle of `StrokeCodecReferenceTests`.
///
/// It is meant to be obviously correct, not fast: it handles one value and one bit at a
/// time, keeps the bits it writes in `[Bool]`, and makes the checks of [PTS-1] … [PTS-3]
/// and [PTS-8] one by one in the order the spec gives, so that its first fault and offset
/// are the ones a conforming reader reports. Do not optimize it; change it only where it
/// departs from the spec, and say where in the spec's terms.
///
/// Where the spec names no offset, it reports the start of the field at fault: a varint
/// that is cut off, longer than 10 bytes, overflowing 64 bits or not in its shortest form
/// (section 1, [SHR-1], [PTS-10]) at its first byte, and likewise a point-0 field or a
/// first-step svarint out of range, and a count above the maximum. Point 0's fields and
/// the first step are each checked as soon as they are read; the pressure of point 1 once
/// the whole first step is read. Its messages start with the rule they apply (`[PTS-8] 4:`),
/// which the tests use to see that their inputs meet every rule.
enum ReferenceStrokeCodec {
    /// [PTS-6] The width of each code 0 … 15.
    static let widthOfCode = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 16, 24, 32]
    /// [PTS-1] The largest point count, and the largest pressure.
    static let maxCount: UInt64 = 1_048_576
    static let maxPressure: UInt32 = 1000

    /// A point's channels as 32-bit words, in the order x, y, pressure, radius, t: x, y and
    /// radius by their two's-complement bit pattern, pressure and t by value (section 3.1).
    static func words(_ p: StrokePoint) -> [UInt32] {
        [UInt32(bitPattern: p.x), UInt32(bitPattern: p.y), UInt32(p.pressure), UInt32(bitPattern: p.radius), p.t]
    }

    /// The point of `words`, with the given pressure (a `UInt16` cannot hold every word).
    static func point(_ v: [UInt32], pressure: UInt16) -> StrokePoint {
        StrokePoint(x: Int32(bitPattern: v[0]), y: Int32(bitPattern: v[1]), pressure: pressure,
                    radius: Int32(bitPattern: v[3]), t: v[4])
    }

    /// [PTS-5] `zigzag32(dd) = (s << 1) ^ (s >> 31)` for `s = Int32(bitPattern: dd)`.
    static func zigzag32(_ dd: UInt32) -> UInt32 {
        let s = Int32(bitPattern: dd)
        return UInt32(bitPattern: (s << 1) ^ (s >> 31))
    }

    /// The inverse of `zigzag32`: 0 → 0, 1 → −1, 2 → 1, 3 → −2 … (as 32-bit words).
    static func unzigzag32(_ u: UInt32) -> UInt32 {
        u & 1 == 0 ? u >> 1 : ~(u >> 1)
    }

    // MARK: Writing

    static func encodedPoints(_ points: [StrokePoint]) -> [UInt8] { encoded(words: points.map(words)) }

    static func encodePoints(_ points: [StrokePoint], into w: inout ByteWriter) { w.append(encodedPoints(points)) }

    /// Section 1: unsigned LEB128, shortest form.
    static func appendVarint(_ value: UInt64, to out: inout [UInt8]) {
        var v = value
        while v >= 0x80 {
            out.append(UInt8(v & 0x7F) | 0x80)
            v >>= 7
        }
        out.append(UInt8(v))
    }

    /// Section 1: the varint of `zigzag(v) = (v << 1) ^ (v >> 63)`.
    static func appendSvarint(_ v: Int64, to out: inout [UInt8]) {
        appendVarint(UInt64(bitPattern: (v << 1) ^ (v >> 63)), to: &out)
    }

    /// [PTS-4] Bits written one at a time in stream order, least significant bit of each
    /// byte first; the last byte is padded with zero bits.
    struct BitWriter {
        private(set) var bytes: [UInt8] = []
        private(set) var count = 0

        mutating func write(_ bit: Bool) {
            if count % 8 == 0 { bytes.append(0) }
            if bit { bytes[count / 8] |= UInt8(1) << UInt8(count % 8) }
            count += 1
        }

        /// The `width` low bits of `value`, least significant first.
        mutating func write(_ value: UInt32, width: Int) {
            for j in 0..<width { write((value >> UInt32(j)) & 1 == 1) }
        }
    }

    /// The blocks of points 2 to n − 1: ranges of 8 point indices, the last 1 to 8.
    static func blocks(_ n: Int) -> [Range<Int>] {
        stride(from: 2, to: n, by: 8).map { $0..<min($0 + 8, n) }
    }

    /// [PTS-5] `u` for every point from 2 on (indices 0 and 1 hold nothing) and channel.
    static func secondDifferences(_ v: [[UInt32]]) -> [[UInt32]] {
        var u = Array(repeating: [UInt32](repeating: 0, count: 5), count: v.count)
        for i in 2..<v.count {
            for c in 0..<5 {
                let d = v[i][c] &- v[i - 1][c]
                let previous = v[i - 1][c] &- v[i - 2][c]
                u[i][c] = zigzag32(d &- previous)
            }
        }
        return u
    }

    /// [PTS-6] The code of a channel in a block: the smallest whose width holds the largest
    /// value (`u < 2^W`).
    static func code(largest: UInt32) -> Int {
        var code = 0
        while UInt64(largest) >= UInt64(1) << UInt64(widthOfCode[code]) { code += 1 }
        return code
    }

    /// The width codes of each block, channel by channel, given the `u` values.
    static func codes(_ u: [[UInt32]]) -> [[Int]] {
        blocks(u.count).map { block in
            (0..<5).map { c in
                var largest: UInt32 = 0
                for i in block { largest = max(largest, u[i][c]) }
                return code(largest: largest)
            }
        }
    }

    /// The width codes of each block of points given as channel words.
    static func codes(ofWords v: [[UInt32]]) -> [[Int]] {
        v.count >= 3 ? codes(secondDifferences(v)) : []
    }

    /// [PTS-7] Writes code `c` after `p`, in the shortest case that applies.
    static func writeCode(_ c: Int, after p: Int, to w: inout BitWriter) {
        if c == p {
            w.write(false)
        } else if c == p + 1 {
            w.write(true); w.write(false)
        } else if c == p - 1 {
            w.write(true); w.write(true); w.write(false)
        } else {
            w.write(true); w.write(true); w.write(true)
            w.write(UInt32(c), width: 4)
        }
    }

    /// The encoding of points given as channel words (section 3.1). The pressure word may
    /// be anything, so that tests can write streams that no `StrokePoint` list gives.
    static func encoded(words v: [[UInt32]]) -> [UInt8] {
        var out: [UInt8] = []
        let n = v.count
        appendVarint(UInt64(n), to: &out)
        guard n >= 1 else { return out }
        appendSvarint(Int64(Int32(bitPattern: v[0][0])), to: &out)
        appendSvarint(Int64(Int32(bitPattern: v[0][1])), to: &out)
        appendVarint(UInt64(v[0][2]), to: &out)
        appendSvarint(Int64(Int32(bitPattern: v[0][3])), to: &out)
        appendVarint(UInt64(v[0][4]), to: &out)
        guard n >= 2 else { return out }
        for c in 0..<5 { appendSvarint(Int64(Int32(bitPattern: v[1][c] &- v[0][c])), to: &out) }
        guard n >= 3 else { return out }

        let u = secondDifferences(v)
        let codes = codes(u)
        var widthStream = BitWriter()
        var packed: [UInt8] = []
        var previous = [0, 0, 0, 0, 0]
        for (b, block) in blocks(n).enumerated() {
            for c in 0..<5 {
                writeCode(codes[b][c], after: previous[c], to: &widthStream)
                previous[c] = codes[b][c]
            }
            for c in 0..<5 {
                var group = BitWriter()
                for i in block { group.write(u[i][c], width: widthOfCode[codes[b][c]]) }
                packed += group.bytes
            }
        }
        appendVarint(UInt64(widthStream.bytes.count), to: &out)
        appendVarint(UInt64(packed.count), to: &out)
        return out + widthStream.bytes + packed
    }

    // MARK: Reading

    /// Reads a point stream from `r`, leaving it after the stream.
    /// - Throws: `LnoteError` (`truncated` or `corrupt`) at the absolute offset the spec
    ///   gives, with `r`'s path.
    static func decodePoints(_ r: inout ByteReader) throws -> [StrokePoint] {
        var source = Source(bytes: r.bytes, base: r.base, path: r.path, position: r.position, end: r.end)
        let points = try source.points()
        _ = try r.skip(source.position - r.position)
        return points
    }

    /// The bytes of a reader's range, read one at a time.
    struct Source {
        let bytes: [UInt8]
        let base: Int
        let path: String?
        var position: Int
        let end: Int

        var offset: Int { base + position }

        func fault(_ code: LnoteError.Code, _ message: String, at offset: Int) -> LnoteError {
            LnoteError(code, message, path: path, offset: offset)
        }

        /// Section 1, [SHR-1], [PTS-10]: a varint of 1 to 10 bytes, at most 64 bits, in its
        /// shortest form (no final 0x00 byte after the first).
        mutating func varint(_ what: String) throws -> UInt64 {
            let start = offset
            var value: UInt64 = 0
            var length = 0
            while true {
                guard position < end else { throw fault(.truncated, "varint cut: \(what)", at: start) }
                let byte = bytes[position]
                position += 1
                length += 1
                if length == 10 && byte > 1 {
                    throw fault(.corrupt, "varint too long: \(what) is longer than 10 bytes or overflows 64 bits", at: start)
                }
                value |= UInt64(byte & 0x7F) << UInt64(7 * (length - 1))
                if byte & 0x80 == 0 {
                    guard length == 1 || byte != 0 else { throw fault(.corrupt, "varint not shortest: \(what)", at: start) }
                    return value
                }
            }
        }

        /// Section 1: an svarint whose value lies in the `Int32` range; `rule` names the
        /// check that an out-of-range value breaks.
        mutating func int32(_ what: String, rule: String) throws -> Int32 {
            let start = offset
            let z = try varint(what)
            let v = Int64(bitPattern: z >> 1) ^ -Int64(bitPattern: z & 1)
            guard let i = Int32(exactly: v) else { throw fault(.corrupt, "\(rule): \(what) \(v) does not fit Int32", at: start) }
            return i
        }

        func bit(_ index: Int, from byteStart: Int) -> Bool {
            (bytes[byteStart + index / 8] >> UInt8(index % 8)) & 1 == 1
        }

        mutating func points() throws -> [StrokePoint] {
            // [PTS-1] [PTS-2] The count, checked against what remains before anything else.
            let countAt = offset
            let count = try varint("point count")
            guard count <= maxCount else {
                throw fault(.corrupt, "[PTS-1] count: \(count) points is above \(maxCount)", at: countAt)
            }
            let n = Int(count)
            let blockCount = n >= 3 ? (n - 2 + 7) / 8 : 0
            if n >= 3 {
                guard 5 * blockCount <= 8 * (end - position - 12) else {
                    throw fault(.truncated, "[PTS-2]: \(n) points cannot fit in \(end - position) bytes", at: countAt)
                }
            }
            guard n >= 1 else { return [] }

            // [PTS-1] Point 0.
            var v = [UInt32](repeating: 0, count: 5)
            v[0] = UInt32(bitPattern: try int32("x of point 0", rule: "[PTS-1] point 0"))
            v[1] = UInt32(bitPattern: try int32("y of point 0", rule: "[PTS-1] point 0"))
            let pressureAt = offset
            let pressure = try varint("pressure of point 0")
            guard pressure <= UInt64(maxPressure) else {
                throw fault(.corrupt, "[PTS-1] point 0: pressure \(pressure) is above 1000", at: pressureAt)
            }
            v[2] = UInt32(pressure)
            v[3] = UInt32(bitPattern: try int32("radius of point 0", rule: "[PTS-1] point 0"))
            let tAt = offset
            let t = try varint("t of point 0")
            guard let t32 = UInt32(exactly: t) else { throw fault(.corrupt, "[PTS-1] point 0: t \(t) does not fit UInt32", at: tAt) }
            v[4] = t32
            var points = [point(v, pressure: UInt16(v[2]))]
            guard n >= 2 else { return points }

            // [PTS-1] [PTS-11] The first step, then the pressure of point 1.
            let stepAt = offset
            var d = [UInt32](repeating: 0, count: 5)
            for (c, name) in ["x", "y", "pressure", "radius", "t"].enumerated() {
                d[c] = UInt32(bitPattern: try int32("first step of \(name)", rule: "[PTS-1] first step"))
            }
            for c in 0..<5 { v[c] = v[c] &+ d[c] }
            guard v[2] <= maxPressure else {
                throw fault(.corrupt, "[PTS-1] point 1 pressure: \(v[2]) is above 1000", at: stepAt)
            }
            points.append(point(v, pressure: UInt16(v[2])))
            guard n >= 3 else { return points }

            // [PTS-3] H and G.
            let hAt = offset
            let h = try varint("width stream length H")
            let g = try varint("packed values length G")
            let remaining = UInt64(end - position)
            guard h <= remaining, g <= remaining - h else {
                throw fault(.truncated, "[PTS-3] truncated: H \(h) + G \(g) bytes, \(remaining) left", at: hAt)
            }
            guard 5 * UInt64(blockCount) <= 8 * h else {
                throw fault(.corrupt, "[PTS-3] corrupt: \(h) bytes of width stream for \(blockCount) blocks", at: hAt)
            }
            let widthStart = position, widthEnd = position + Int(h)
            let packedStart = widthEnd, packedEnd = packedStart + Int(g)
            var nextWidthBit = 0 // bits of the width stream read
            var packedUsed = 0   // bytes of packed values read

            /// The next bit of the width stream; [PTS-8] 2.
            func readWidthBit() throws -> Bool {
                guard nextWidthBit < 8 * Int(h) else {
                    throw fault(.corrupt, "[PTS-8] 2: the width stream ends inside a code", at: base + widthEnd)
                }
                defer { nextWidthBit += 1 }
                return bit(nextWidthBit, from: widthStart)
            }

            var previous = [0, 0, 0, 0, 0]
            for b in 0..<blockCount {
                let r = b < blockCount - 1 ? 8 : n - 2 - 8 * (blockCount - 1)

                // [PTS-7] The five codes; [PTS-8] 1 and 2.
                var codes: [Int] = []
                for c in 0..<5 {
                    let codeAt = base + widthStart + nextWidthBit / 8
                    let p = previous[c]
                    let code: Int
                    if !(try readWidthBit()) {
                        code = p
                    } else if !(try readWidthBit()) {
                        guard p < 15 else { throw fault(.corrupt, "[PTS-8] 1: code 16 (p + 1 after 15)", at: codeAt) }
                        code = p + 1
                    } else if !(try readWidthBit()) {
                        guard p > 0 else { throw fault(.corrupt, "[PTS-8] 1: code −1 (p − 1 after 0)", at: codeAt) }
                        code = p - 1
                    } else {
                        var explicit = 0
                        for k in 0..<4 {
                            if try readWidthBit() { explicit |= 1 << k }
                        }
                        guard abs(explicit - p) > 1 else {
                            throw fault(.corrupt, "[PTS-8] 1: explicit code \(explicit) after \(p)", at: codeAt)
                        }
                        code = explicit
                    }
                    codes.append(code)
                    previous[c] = code
                }

                // [PTS-6] The five groups; [PTS-8] 3 to 5 on each.
                var values: [[UInt32]] = []
                var pressureGroupAt = 0
                for c in 0..<5 {
                    let width = widthOfCode[codes[c]]
                    let size = (r * width + 7) / 8
                    let groupAt = packedStart + packedUsed
                    guard packedUsed + size <= Int(g) else {
                        throw fault(.corrupt, "[PTS-8] 3: group \(c) of block \(b) ends past the packed values",
                                    at: base + packedEnd)
                    }
                    var group: [UInt32] = []
                    for k in 0..<r {
                        var value: UInt32 = 0
                        for j in 0..<width where bit(k * width + j, from: groupAt) { value |= UInt32(1) << UInt32(j) }
                        group.append(value)
                    }
                    if codes[c] > 0 {
                        let narrower = UInt64(1) << UInt64(widthOfCode[codes[c] - 1])
                        guard group.contains(where: { UInt64($0) >= narrower }) else {
                            throw fault(.corrupt, "[PTS-8] 4: code \(codes[c]) for \(group)", at: base + groupAt)
                        }
                    }
                    for j in (r * width)..<(8 * size) where bit(j, from: groupAt) {
                        throw fault(.corrupt, "[PTS-8] 5: padding bit \(j) of group \(c) is set", at: base + groupAt + size - 1)
                    }
                    if c == 2 { pressureGroupAt = base + groupAt }
                    values.append(group)
                    packedUsed += size
                }

                // [PTS-5] The block's points; [PTS-8] 6.
                for k in 0..<r {
                    for c in 0..<5 {
                        d[c] = d[c] &+ unzigzag32(values[c][k])
                        v[c] = v[c] &+ d[c]
                    }
                    guard v[2] <= maxPressure else {
                        throw fault(.corrupt, "[PTS-8] 6: pressure \(v[2]) at point \(points.count)", at: pressureGroupAt)
                    }
                    points.append(point(v, pressure: UInt16(v[2])))
                }
            }

            // [PTS-8] 7.
            let widthBytesUsed = (nextWidthBit + 7) / 8
            guard widthBytesUsed == Int(h) else {
                throw fault(.corrupt, "[PTS-8] 7 width byte: \(Int(h) - widthBytesUsed) unused", at: base + widthStart + widthBytesUsed)
            }
            for j in nextWidthBit..<(8 * Int(h)) where bit(j, from: widthStart) {
                throw fault(.corrupt, "[PTS-8] 7 width padding: bit \(j) is set", at: base + widthEnd - 1)
            }
            guard packedUsed == Int(g) else {
                throw fault(.corrupt, "[PTS-8] 7 packed byte: \(Int(g) - packedUsed) unused", at: base + packedStart + packedUsed)
            }
            position = packedEnd
            return points
        }
    }
}
