import Testing
@testable import LnoteModel

/// The fast point codec against a frozen copy of the codec it replaced
/// (`ReferenceStrokeCodec`, at the end of this file): the same bytes for every point list,
/// and for every input the same points, or the same error code, offset and message.
@Suite("Point codec speed work is invisible")
struct StrokeCodecSpeedSafetyTests {
    enum Outcome: Equatable, CustomStringConvertible {
        case points([StrokePoint], end: Int)
        case failure(LnoteError.Code, offset: Int?, message: String, path: String?)

        var description: String {
            switch self {
            case let .points(p, end): "\(p.count) points, reader at \(end)"
            case let .failure(c, o, m, path): "\(c) at \(o.map(String.init) ?? "nil") in \(path ?? "-"): \(m)"
            }
        }
    }

    static func outcome(_ bytes: [UInt8], range: Range<Int>? = nil, base: Int = 0, path: String? = nil,
                        reference: Bool) -> Outcome {
        var r = ByteReader(bytes, range: range ?? 0..<bytes.count, base: base, path: path)
        do {
            let p = reference ? try ReferenceStrokeCodec.decodePoints(&r) : try StrokeCodec.decodePoints(&r)
            return .points(p, end: r.offset)
        } catch let e as LnoteError {
            return .failure(e.code, offset: e.offset, message: e.message, path: e.path)
        } catch {
            return .failure(.invalidState, offset: nil, message: "\(error)", path: nil)
        }
    }

    /// Decodes with both codecs and records a difference. Returns the outcome.
    @discardableResult
    static func sameDecoding(_ bytes: [UInt8], range: Range<Int>? = nil, base: Int = 0, path: String? = nil,
                             _ context: @autoclosure () -> String) -> Outcome {
        let new = outcome(bytes, range: range, base: base, path: path, reference: false)
        let old = outcome(bytes, range: range, base: base, path: path, reference: true)
        if new != old { Issue.record("decoders differ: new \(new), old \(old): \(context())") }
        return new
    }

    static func sameEncoding(_ points: [StrokePoint], _ context: @autoclosure () -> String) -> [UInt8] {
        let new = StrokeCodec.encodedPoints(points)
        let old = ReferenceStrokeCodec.encodedPoints(points)
        if new != old {
            let at = (0..<min(new.count, old.count)).first { new[$0] != old[$0] } ?? min(new.count, old.count)
            Issue.record("encoders differ at byte \(at) (\(new.count) vs \(old.count) bytes): \(context())")
        }
        // Appending to a writer that already holds bytes gives the same suffix.
        var w = ByteWriter()
        w.append([0xAB, 0xCD, 0xEF])
        StrokeCodec.encodePoints(points, into: &w)
        let appended = Array(w.bytes.dropFirst(3)) == old
        #expect(appended, "encodePoints(into:) differs: \(context())")
        return new
    }

    /// Points that push the adaptive coder everywhere: parameters from 0 to 31, escapes
    /// just above and below the threshold, sudden switches between tiny and huge steps,
    /// pressures above 1000 (which encode, and which the decoders must reject alike), long
    /// strokes that make the bit writer grow.
    static func adversarialPoints(_ g: inout SplitMix64) -> [StrokePoint] {
        let n: Int
        switch g.below(10) {
        case 0: n = Int(g.below(4))
        case 1: n = 500 + Int(g.below(3000))
        default: n = 3 + Int(g.below(120))
        }
        var scale = [UInt32](repeating: 0, count: 5)
        func reshuffle(_ g: inout SplitMix64) { for c in 0..<5 { scale[c] = UInt32(g.below(33)) } }
        reshuffle(&g)
        var cur: [UInt32] = (0..<5).map { _ in UInt32(truncatingIfNeeded: g.next()) }
        var step = [UInt32](repeating: 0, count: 5)
        let pressureCap: UInt64 = g.chance(0.7) ? 1001 : 65536
        var out: [StrokePoint] = []
        out.reserveCapacity(n)
        for _ in 0..<n {
            if g.chance(0.05) { reshuffle(&g) }
            for c in 0..<5 {
                let s = scale[c]
                var dd: UInt32
                switch g.below(8) {
                case 0:
                    // Around the escape threshold for some parameter: 24 << k, ± a little.
                    let k = UInt32(g.below(9))
                    let base = UInt32(24) << k
                    let u = base &+ UInt32(truncatingIfNeeded: Int32(g.int(in: -2...2)))
                    dd = unzigzag32(u)
                case 1:
                    dd = UInt32(truncatingIfNeeded: g.next())
                default:
                    let mag: UInt64 = s == 0 ? 0 : (s >= 32 ? g.next() : g.below(UInt64(1) << UInt64(s)))
                    dd = UInt32(truncatingIfNeeded: mag)
                    if g.chance(0.5) { dd = 0 &- dd }
                }
                step[c] = step[c] &+ dd
                cur[c] = cur[c] &+ step[c]
            }
            out.append(StrokePoint(x: Int32(bitPattern: cur[0]), y: Int32(bitPattern: cur[1]),
                                   pressure: UInt16(truncatingIfNeeded: UInt64(cur[2]) % pressureCap),
                                   radius: Int32(bitPattern: cur[3]), t: cur[4]))
        }
        return out
    }

    /// Every strategy of the tests' random model, adversarial lists, and long handwriting.
    static func anyPoints(_ seed: UInt64) -> [StrokePoint] {
        var g = SplitMix64(seed: seed)
        switch g.below(3) {
        case 0:
            var m = RandomModel(seed: seed)
            return m.points()
        case 1:
            return adversarialPoints(&g)
        default:
            var h = HandwritingGenerator(seed: seed)
            return h.nextStroke().points
        }
    }

    /// [PTS-7] The loop-free parameter (table and computation) is the loop's, for every
    /// count the coder can hold.
    @Test func parameterMatchesTheLoop() {
        func loop(_ sum: UInt64, _ count: UInt64) -> UInt64 {
            var k: UInt64 = 0
            while k < 31 && (count << (k + 1)) < sum { k += 1 }
            return k
        }
        var sums: [UInt64] = Array(0...5000)
        for b in 0..<40 { for d in -3...3 { sums.append(UInt64(max(0, Int64(1) << Int64(b) + Int64(d)))) } }
        var g = SplitMix64(seed: 0x5EED_0101)
        for _ in 0..<20_000 { sums.append(g.next() >> (26 + g.below(38))) }
        for count in UInt64(1)...7 {
            for sum in sums {
                let k = RiceCount(count: count).parameter(sum)
                if k != loop(sum, count) { Issue.record("sum \(sum) count \(count): \(k) vs \(loop(sum, count))") }
                let computed = RiceCount.computedParameter(sum: sum, count: count)
                if computed != loop(sum, count) { Issue.record("sum \(sum) count \(count): computed \(computed)") }
            }
        }
    }

    /// [PTS-4] … [PTS-7] The same bytes as the old encoder, byte for byte.
    @Test func encoderMatchesReference() {
        for seed in testSeeds(0x5EED_0102, count: 4000) {
            _ = Self.sameEncoding(Self.anyPoints(seed), "seed \(seed)")
        }
        // Whole handwriting strokes (20-400 points).
        for s in HandwritingGenerator.strokes(seed: 0x5EED_0103, count: 200) {
            _ = Self.sameEncoding(s.points, "handwriting stroke of \(s.points.count) points")
        }
        // Constant runs, then an escape on every channel, on every bit alignment.
        for lead in 0..<70 {
            var pts = Array(repeating: StrokePoint(x: 5, y: 5, pressure: 500, radius: 10, t: 0), count: 2 + lead)
            pts.append(StrokePoint(x: .min, y: .max, pressure: 0, radius: .min, t: .max))
            pts += Array(repeating: StrokePoint(x: 5, y: 5, pressure: 500, radius: 10, t: 0), count: 9)
            _ = Self.sameEncoding(pts, "escape after \(lead) constant points")
        }
    }

    /// [PTS-5] The encoder loads x, y, pressure, radius as one 16-byte word and masks the 2
    /// padding bytes after the pressure: whatever those bytes hold, the encoding is the
    /// reference's, and the same both ways the encoder reads points (one word or field by
    /// field).
    @Test func encoderIgnoresPaddingBytes() {
        #expect(StrokeCodec.pointLayoutIsPacked)
        let pressureEnd = MemoryLayout<StrokePoint>.offset(of: \.pressure)! + 2
        let radiusAt = MemoryLayout<StrokePoint>.offset(of: \.radius)!
        let stride = MemoryLayout<StrokePoint>.stride
        for seed in testSeeds(0x5EED_0109, count: 600) {
            var pts = Self.anyPoints(seed)
            guard pts.count >= 3 else { continue }
            var g = SplitMix64(seed: seed ^ 0xFFFF)
            pts.withUnsafeMutableBytes { raw in
                for i in 0..<(raw.count / stride) {
                    for b in pressureEnd..<radiusAt { raw[i * stride + b] = UInt8(truncatingIfNeeded: g.next()) | 0x80 }
                }
            }
            let bytes = Self.sameEncoding(pts, "seed \(seed) with padding set")
            // `encodeStream` writes L and the bit stream: the encoding after its header.
            let stream = Array(bytes.dropFirst(headerLength(bytes)))
            for packed in [true, false] {
                var w = ByteWriter()
                pts.withUnsafeBufferPointer { StrokeCodec.encodeStream($0, packed: packed, into: &w) }
                #expect(w.bytes == stream, "seed \(seed), packed \(packed)")
            }
        }
    }

    /// The bytes before `L` in an encoding of 3 points or more: n, point 0, the first step.
    func headerLength(_ bytes: [UInt8]) -> Int {
        var r = ByteReader(bytes)
        for _ in 0..<11 { _ = try? r.varint("header") }
        return r.offset
    }

    /// Valid streams decode to the same points, with the reader at the same offset, and
    /// with a base offset and a path.
    @Test func decoderMatchesReferenceOnValidStreams() {
        for seed in testSeeds(0x5EED_0104, count: 3000) {
            let bytes = StrokeCodec.encodedPoints(Self.anyPoints(seed))
            Self.sameDecoding(bytes, base: Int(seed % 5000), path: "p\(seed % 7)", "seed \(seed)")
        }
    }

    /// Every truncation (by cutting the array, and by a reader range with more bytes after
    /// it) and every single-bit flip of some streams: the same error code, offset and message.
    @Test func decoderMatchesReferenceOnEveryCutAndFlip() {
        var failures = 0, successes = 0
        for seed in testSeeds(0x5EED_0105, count: 40) {
            var pts = Self.anyPoints(seed)
            if pts.count > 150 { pts.removeLast(pts.count - 150) }
            let bytes = StrokeCodec.encodedPoints(pts)
            var g = SplitMix64(seed: seed)
            let tail = (0..<16).map { _ in UInt8(truncatingIfNeeded: g.next()) }
            let base = Int(seed % 1000)
            for cut in 0...bytes.count {
                Self.sameDecoding(Array(bytes[0..<cut]), base: base, "seed \(seed), cut at \(cut)")
                Self.sameDecoding(bytes + tail, range: 0..<cut, base: base, "seed \(seed), range cut at \(cut)")
                // The stream in the middle of a buffer.
                Self.sameDecoding(tail + bytes + tail, range: 16..<(16 + cut), base: base,
                                  "seed \(seed), embedded, cut at \(cut)")
            }
            for bit in 0..<(bytes.count * 8) {
                var flipped = bytes
                flipped[bit / 8] ^= 1 << UInt8(bit % 8)
                switch Self.sameDecoding(flipped + tail, range: 0..<bytes.count, base: base,
                                         "seed \(seed), bit \(bit) flipped") {
                case .points: successes += 1
                case .failure: failures += 1
                }
            }
        }
        #expect(failures > 0 && successes > 0, "\(failures) failures, \(successes) successes")
    }

    /// The quick paths of the encoder and decoder hand over to the per-value ones on a large
    /// sum, a quotient or unary run of 16 or more, an escape, codes over 56 bits, the last 8
    /// bytes of the stream and a pressure above 1000: one jump of every size, on each
    /// channel, at each phase of the shared count (points 2 to 13), in a smooth stroke; and
    /// smooth strokes of every length from 3 to 40 points (the end at every phase).
    @Test func quickPathsHandOverAtEveryPhase() {
        var g = HandwritingGenerator(seed: 0x5EED_0107)
        var smooth = g.nextStroke().points
        while smooth.count < 48 { smooth += g.nextStroke().points }
        smooth.removeLast(smooth.count - 48)
        for n in 3...40 {
            let bytes = Self.sameEncoding(Array(smooth[0..<n]), "smooth stroke of \(n) points")
            Self.sameDecoding(bytes, "smooth stroke of \(n) points")
        }
        for position in 2..<14 {
            for size in 0..<33 {
                for negative in [false, true] {
                    let magnitude = size == 32 ? UInt32.max : (UInt32(1) << UInt32(size)) &- 1
                    let jump = negative ? 0 &- magnitude : magnitude
                    for channel in 0..<5 {
                        var pts = smooth
                        for i in position..<pts.count {
                            switch channel {
                            case 0: pts[i].x = Int32(bitPattern: UInt32(bitPattern: pts[i].x) &+ jump)
                            case 1: pts[i].y = Int32(bitPattern: UInt32(bitPattern: pts[i].y) &+ jump)
                            case 2: pts[i].pressure = UInt16(truncatingIfNeeded: UInt32(pts[i].pressure) &+ jump)
                            case 3: pts[i].radius = Int32(bitPattern: UInt32(bitPattern: pts[i].radius) &+ jump)
                            default: pts[i].t = pts[i].t &+ jump
                            }
                        }
                        let context = "jump of \(negative ? "-" : "+")\(magnitude) on channel \(channel) at point \(position)"
                        let bytes = Self.sameEncoding(pts, context)
                        Self.sameDecoding(bytes, context)
                    }
                }
            }
        }
    }

    /// [PTS-6] The quick decoder's own checks, which a wrong read would rarely reveal
    /// otherwise (the exact decoder, run again after any failure, gives the same points):
    /// it refuses a point with a unary run of 16 or more (an escape among them) and a point
    /// longer than the bits it counts, and reads the longest run it accepts.
    @Test func quickDecoderRefusesWhatItDoesNotCheck() {
        /// Codes with k = 0 (count 1, sums 2): `run` one-bits and a zero for each value.
        func read(_ runs: [Int]) -> [UInt32]? {
            var bits: [Bool] = []
            for r in runs { bits += Array(repeating: true, count: r) + [false] }
            var bytes = [UInt8](repeating: 0, count: 32)
            for (i, b) in bits.enumerated() where b { bytes[i / 8] |= 1 << UInt8(i % 8) }
            return bytes.withUnsafeBytes { raw -> [UInt32]? in
                var cursor = BitReader(raw.baseAddress!, range: 0..<raw.count).quickCursor
                var sums = RiceSums()
                var values = [UInt32](repeating: 0, count: 5)
                let ok = values.withUnsafeMutableBufferPointer {
                    StrokeCodec.decodeValuesQuickly($0.baseAddress!, count: 1, riceParameterTable, &sums, &cursor)
                }
                return ok ? values : nil
            }
        }
        #expect(read([15, 0, 3, 0, 1]) == [15, 0, 3, 0, 1])
        #expect(read([16, 0, 0, 0, 0]) == nil)
        #expect(read([0, 0, 0, 0, 24]) == nil)
        #expect(read([0, 30, 0, 0, 0]) == nil)
        // A first refill counts 56 bits: 57 bits of codes are too many, 56 are not.
        #expect(read([10, 10, 10, 10, 12]) == nil)
        #expect(read([10, 10, 10, 10, 11]) == [10, 10, 10, 10, 11])
    }

    /// The decoder's second pass gives the same points and the same pressure verdict whether
    /// it stores a point's first four channels as one 16-byte word (the layout of this
    /// platform, checked here) or field by field.
    @Test func integrateStoresTheSamePointsEitherWay() {
        #expect(StrokeCodec.pointLayoutIsPacked)
        var valid = 0, rejected = 0
        for seed in testSeeds(0x5EED_0108, count: 300) {
            var g = SplitMix64(seed: seed)
            let n = 2 + Int(g.below(60))
            func start() -> [StrokePoint] {
                var h = SplitMix64(seed: seed)
                let scale = UInt64(1) << h.below(33)
                var pts = [StrokePoint(x: 5, y: -7, pressure: UInt16(h.below(1001)), radius: 3, t: 9),
                           StrokePoint(x: 8, y: -9, pressure: UInt16(h.below(1001)), radius: 4, t: 13)]
                // The values of the points to come, five 32-bit words each.
                for _ in 2..<n {
                    var p = StrokePoint(x: 0, y: 0)
                    withUnsafeMutableBytes(of: &p) { raw in
                        for c in 0..<5 {
                            raw.storeBytes(of: UInt32(truncatingIfNeeded: h.below(scale)), toByteOffset: 4 * c, as: UInt32.self)
                        }
                    }
                    pts.append(p)
                }
                return pts
            }
            var packed = start(), fields = start()
            let a = packed.withUnsafeMutableBufferPointer { StrokeCodec.integrate($0.baseAddress!, count: n, packed: true) }
            let b = fields.withUnsafeMutableBufferPointer { StrokeCodec.integrate($0.baseAddress!, count: n, packed: false) }
            #expect(a == b, "seed \(seed)")
            if a { #expect(packed == fields, "seed \(seed)") }
            if a { valid += 1 } else { rejected += 1 }
        }
        #expect(valid > 0 && rejected > 0, "\(valid) valid, \(rejected) rejected")
    }

    /// Random multi-byte mutations and random bytes.
    @Test func decoderMatchesReferenceOnMutationsAndNoise() {
        for seed in testSeeds(0x5EED_0106, count: 3000) {
            var g = SplitMix64(seed: seed)
            var bytes = StrokeCodec.encodedPoints(Self.anyPoints(seed))
            if !bytes.isEmpty {
                for _ in 0..<(1 + Int(g.below(4))) {
                    let i = Int(g.below(UInt64(bytes.count)))
                    if g.chance(0.5) { bytes[i] ^= 1 << UInt8(g.below(8)) } else { bytes[i] = UInt8(truncatingIfNeeded: g.next()) }
                }
            }
            Self.sameDecoding(bytes, base: 7, path: "m", "seed \(seed), mutated")
            let noise = (0..<Int(g.below(80))).map { _ in UInt8(truncatingIfNeeded: g.next()) }
            Self.sameDecoding(noise, "seed \(seed), noise")
            // Noise after a plausible header: 3 points, zero first point and step, a length.
            var w = ByteWriter()
            w.varint(UInt64(3 + g.below(40))); w.append([0, 0, 0, 0, 0, 0, 0, 0, 0, 0])
            w.varint(UInt64(noise.count)); w.append(noise)
            Self.sameDecoding(w.bytes, base: 3, "seed \(seed), noise stream")
        }
    }
}

// A frozen copy of the point codec as it was before the speed work (commit ec1c987), kept
// only as the oracle of the differential tests in StrokeCodecSpeedSafetyTests.swift.
// Do not optimize or "fix" it: its bytes, error codes and offsets define the expected ones.


// Encodes a stroke's point stream compactly and losslessly.
///
/// The layout is specified byte by byte in `Protocol/page-snapshot.md` ("Point stream",
/// [PTS-1] … [PTS-11]). In short:
///
/// - a varint point count `n`;
/// - the first point in plain varints;
/// - for `n ≥ 2`, the first step (point 1 minus point 0) per channel in zigzag varints;
/// - for `n ≥ 3`, a varint byte length and a bit stream holding, for every later point and
///   each of the five channels (x, y, pressure, radius, t), the second difference of the
///   channel (delta-of-delta, modulo 2³²), zigzag-mapped and written as an adaptive
///   Golomb-Rice code whose parameter follows a running mean of the channel's recent values.
///
/// Smooth handwriting sampled at 240 Hz has second differences of a few tenths of a point,
/// so most values cost one to four bits: about 1.5 to 2 bytes per point in total.
///
/// The encoding is canonical: every point list has exactly one encoding, and the decoder
/// rejects every other byte string (a longer-than-needed varint, non-zero padding, a
/// needless escape, a stream longer than its values), so `encode(decode(b)) == b` whenever
/// `decode(b)` succeeds. Arithmetic is modulo 2³², so any `Int32`/`UInt32` values
/// round-trip, including jumps from `Int32.min` to `Int32.max` and decreasing times ([PTS-9]).
enum ReferenceStrokeCodec {
    /// Unary quotients at least this long are escaped: the value follows in 32 raw bits ([PTS-6]).
    static let escapeLength: UInt32 = 24
    /// The adaptive state halves when this many values have been counted ([PTS-7]).
    static let resetCount: UInt64 = 8
    /// Initial sum of the adaptive state (with a count of 1) ([PTS-7]).
    static let initialSum: UInt64 = 2

    typealias Channels = (UInt32, UInt32, UInt32, UInt32, UInt32)

    /// Appends the encoding of `points` to `w`. A deterministic function of the points.
    static func encodePoints(_ points: [StrokePoint], into w: inout ByteWriter) {
        w.varint(UInt64(points.count))
        guard let first = points.first else { return }
        w.svarint(Int64(first.x))
        w.svarint(Int64(first.y))
        w.varint(UInt64(first.pressure))
        w.svarint(Int64(first.radius))
        w.varint(UInt64(first.t))
        guard points.count > 1 else { return }

        var prev = channelValues(first)
        let second = channelValues(points[1])
        var delta: Channels = (second.0 &- prev.0, second.1 &- prev.1, second.2 &- prev.2,
                               second.3 &- prev.3, second.4 &- prev.4)
        for d in [delta.0, delta.1, delta.2, delta.3, delta.4] { w.svarint(Int64(Int32(bitPattern: d))) }
        guard points.count > 2 else { return }
        prev = second

        var bits = RefBitWriter(capacity: points.count * 2)
        var model = RefRiceModel()
        for i in 2..<points.count {
            let cur = channelValues(points[i])
            var d = cur.0 &- prev.0; model.encode(refZigzag32(d &- delta.0), channel: 0, into: &bits); delta.0 = d
            d = cur.1 &- prev.1; model.encode(refZigzag32(d &- delta.1), channel: 1, into: &bits); delta.1 = d
            d = cur.2 &- prev.2; model.encode(refZigzag32(d &- delta.2), channel: 2, into: &bits); delta.2 = d
            d = cur.3 &- prev.3; model.encode(refZigzag32(d &- delta.3), channel: 3, into: &bits); delta.3 = d
            d = cur.4 &- prev.4; model.encode(refZigzag32(d &- delta.4), channel: 4, into: &bits); delta.4 = d
            prev = cur
        }
        let stream = bits.finish()
        w.varint(UInt64(stream.count))
        w.append(stream)
    }

    /// The encoding of `points` alone.
    static func encodedPoints(_ points: [StrokePoint]) -> [UInt8] {
        var w = ByteWriter(capacity: 16 + points.count * 2)
        encodePoints(points, into: &w)
        return w.bytes
    }

    /// Reads a point stream written by `encodePoints`.
    ///
    /// Never allocates more than the remaining bytes can justify.
    /// - Throws: `LnoteError` with the absolute offset: `truncated` when the bytes end
    ///   inside the stream (or the count cannot fit in what remains), `corrupt` for anything
    ///   that is not the canonical encoding of a valid point list.
    static func decodePoints(_ r: inout ByteReader) throws -> [StrokePoint] {
        let countAt = r.offset
        let count = try minimalVarint(&r, "point count")
        guard let n = Int(exactly: count), n <= Stroke.maxPoints else {
            throw r.error(.corrupt, "point count \(count) exceeds \(Stroke.maxPoints)", at: countAt)
        }
        // [PTS-2] The first point and the first step take at least 5 bytes each, the
        // stream length 1, and each later point at least 5 bits: a count the remaining
        // bytes cannot hold is cut off.
        guard n <= 2 || (n - 2) * 5 <= max(0, r.remaining - 11) * 8 else {
            throw r.error(.truncated, "\(n) points cannot fit in the \(r.remaining) bytes left", at: countAt)
        }
        guard n > 0 else { return [] }
        let x0 = try minimalInt32(&r, "first x")
        let y0 = try minimalInt32(&r, "first y")
        let pAt = r.offset
        let p0 = try minimalVarint(&r, "first pressure")
        guard p0 <= UInt64(Quantization.pressureMax) else {
            throw r.error(.corrupt, "pressure \(p0) exceeds \(Quantization.pressureMax)", at: pAt)
        }
        let r0 = try minimalInt32(&r, "first radius")
        let tAt = r.offset
        let t0v = try minimalVarint(&r, "first t")
        guard let t0 = UInt32(exactly: t0v) else { throw r.error(.corrupt, "t \(t0v) does not fit 32 bits", at: tAt) }
        let first = StrokePoint(x: x0, y: y0, pressure: UInt16(p0), radius: r0, t: t0)
        guard n > 1 else { return [first] }

        var out: [StrokePoint] = []
        out.reserveCapacity(n)
        out.append(first)
        let stepAt = r.offset
        var delta: Channels = (UInt32(bitPattern: try minimalInt32(&r, "first step x")),
                               UInt32(bitPattern: try minimalInt32(&r, "first step y")),
                               UInt32(bitPattern: try minimalInt32(&r, "first step pressure")),
                               UInt32(bitPattern: try minimalInt32(&r, "first step radius")),
                               UInt32(bitPattern: try minimalInt32(&r, "first step t")))
        var prev = channelValues(first)
        prev = (prev.0 &+ delta.0, prev.1 &+ delta.1, prev.2 &+ delta.2, prev.3 &+ delta.3, prev.4 &+ delta.4)
        try append(prev, to: &out, at: stepAt, path: r.path)
        guard n > 2 else { return out }

        let lengthAt = r.offset
        let lengthValue = try minimalVarint(&r, "point bit stream length")
        guard let length = Int(exactly: lengthValue), length <= r.remaining else {
            throw r.error(.truncated, "point bit stream of \(lengthValue) bytes, \(r.remaining) left", at: lengthAt)
        }
        // [PTS-3] Five values of at least one bit per point.
        guard (n - 2) * 5 <= length * 8 else {
            throw r.error(.corrupt, "bit stream of \(length) bytes cannot hold \(n - 2) points", at: lengthAt)
        }
        let range = try r.skip(length, "point bit stream")
        var bits = RefBitReader(r.bytes, range: range, base: r.base, path: r.path)
        var model = RefRiceModel()
        for _ in 2..<n {
            let at = bits.byteOffset
            delta.0 = delta.0 &+ refUnzigzag32(try model.decode(channel: 0, from: &bits))
            delta.1 = delta.1 &+ refUnzigzag32(try model.decode(channel: 1, from: &bits))
            delta.2 = delta.2 &+ refUnzigzag32(try model.decode(channel: 2, from: &bits))
            delta.3 = delta.3 &+ refUnzigzag32(try model.decode(channel: 3, from: &bits))
            delta.4 = delta.4 &+ refUnzigzag32(try model.decode(channel: 4, from: &bits))
            prev = (prev.0 &+ delta.0, prev.1 &+ delta.1, prev.2 &+ delta.2, prev.3 &+ delta.3, prev.4 &+ delta.4)
            try append(prev, to: &out, at: at, path: r.path)
        }
        try bits.finish()
        return out
    }

    /// [PTS-8] Appends a reconstructed point, rejecting pressure above 1000.
    @inline(__always)
    static func append(_ v: Channels, to out: inout [StrokePoint], at offset: Int, path: String?) throws {
        guard v.2 <= UInt32(Quantization.pressureMax) else {
            throw LnoteError(.corrupt, "pressure \(v.2) exceeds \(Quantization.pressureMax) at point \(out.count)",
                             path: path, offset: offset)
        }
        out.append(StrokePoint(x: Int32(bitPattern: v.0), y: Int32(bitPattern: v.1),
                               pressure: UInt16(v.2), radius: Int32(bitPattern: v.3), t: v.4))
    }

    /// A varint in its shortest form ([PTS-10]: the encoding is canonical).
    static func minimalVarint(_ r: inout ByteReader, _ what: String) throws -> UInt64 {
        let at = r.offset
        let v = try r.varint(what)
        let minimal = v == 0 ? 1 : (64 - v.leadingZeroBitCount + 6) / 7
        guard r.offset - at == minimal else {
            throw r.error(.corrupt, "\(what) is not in its shortest varint form", at: at)
        }
        return v
    }

    static func minimalInt32(_ r: inout ByteReader, _ what: String) throws -> Int32 {
        let at = r.offset
        guard let v = Int32(exactly: unzigzag(try minimalVarint(&r, what))) else {
            throw r.error(.corrupt, "\(what) does not fit 32 bits", at: at)
        }
        return v
    }

    @inline(__always)
    static func channelValues(_ p: StrokePoint) -> Channels {
        (UInt32(bitPattern: p.x), UInt32(bitPattern: p.y), UInt32(p.pressure), UInt32(bitPattern: p.radius), p.t)
    }
}

@inline(__always) func refZigzag32(_ v: UInt32) -> UInt32 {
    let s = Int32(bitPattern: v)
    return UInt32(bitPattern: (s << 1) ^ (s >> 31))
}

@inline(__always) func refUnzigzag32(_ u: UInt32) -> UInt32 {
    (u >> 1) ^ (0 &- (u & 1))
}

/// The adaptive Golomb-Rice coder of [PTS-5] … [PTS-7]: one (sum, count) state per channel.
struct RefRiceModel {
    var sum: (UInt64, UInt64, UInt64, UInt64, UInt64)
    var count: (UInt64, UInt64, UInt64, UInt64, UInt64)

    init() {
        let s = ReferenceStrokeCodec.initialSum
        sum = (s, s, s, s, s)
        count = (1, 1, 1, 1, 1)
    }

    /// The smallest k in 0...31 with count·2^(k+1) ≥ sum: 2^k is about half the running mean.
    @inline(__always) static func parameter(sum: UInt64, count: UInt64) -> UInt32 {
        var k: UInt32 = 0
        while k < 31 && (count << UInt64(k + 1)) < sum { k += 1 }
        return k
    }

    @inline(__always) mutating func state(_ c: Int) -> (UInt64, UInt64) {
        switch c {
        case 0: (sum.0, count.0)
        case 1: (sum.1, count.1)
        case 2: (sum.2, count.2)
        case 3: (sum.3, count.3)
        default: (sum.4, count.4)
        }
    }

    @inline(__always) mutating func update(_ c: Int, _ u: UInt32) {
        let (s0, n0) = state(c)
        var s = s0 + UInt64(u), n = n0 + 1
        if n >= ReferenceStrokeCodec.resetCount {
            s >>= 1
            n >>= 1
        }
        switch c {
        case 0: sum.0 = s; count.0 = n
        case 1: sum.1 = s; count.1 = n
        case 2: sum.2 = s; count.2 = n
        case 3: sum.3 = s; count.3 = n
        default: sum.4 = s; count.4 = n
        }
    }

    @inline(__always) mutating func encode(_ u: UInt32, channel c: Int, into bits: inout RefBitWriter) {
        let (s, n) = state(c)
        let k = RefRiceModel.parameter(sum: s, count: n)
        let q = u >> k
        if q < ReferenceStrokeCodec.escapeLength {
            // q one-bits, a zero-bit, then the k low bits of u.
            bits.write((UInt64(1) << UInt64(q)) - 1, count: q + 1)
            if k > 0 { bits.write(UInt64(u) & ((UInt64(1) << UInt64(k)) - 1), count: k) }
        } else {
            bits.write((UInt64(1) << UInt64(ReferenceStrokeCodec.escapeLength)) - 1, count: ReferenceStrokeCodec.escapeLength)
            bits.write(UInt64(u), count: 32)
        }
        update(c, u)
    }

    @inline(__always) mutating func decode(channel c: Int, from bits: inout RefBitReader) throws -> UInt32 {
        let (s, n) = state(c)
        let k = RefRiceModel.parameter(sum: s, count: n)
        let at = bits.byteOffset
        let q = try bits.unary(limit: ReferenceStrokeCodec.escapeLength)
        let u: UInt32
        if q < ReferenceStrokeCodec.escapeLength {
            let low = k > 0 ? UInt32(try bits.read(k)) : 0
            // q < 24 and k ≤ 31: q << k may exceed 32 bits only for values that cannot be written.
            let wide = UInt64(q) << UInt64(k) | UInt64(low)
            guard let v = UInt32(exactly: wide) else {
                throw bits.error(.corrupt, "point value overflows 32 bits", at: at)
            }
            u = v
        } else {
            u = UInt32(try bits.read(32))
            guard u >> k >= ReferenceStrokeCodec.escapeLength else {
                throw bits.error(.corrupt, "escaped point value \(u) should have been coded inline", at: at)
            }
        }
        update(c, u)
        return u
    }
}

/// Packs bits least significant first into bytes ([PTS-4]).
struct RefBitWriter {
    private(set) var bytes: [UInt8]
    private var acc: UInt64 = 0
    private var filled: UInt32 = 0

    init(capacity: Int) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    /// Appends the `count` (≤ 32) low bits of `value`, least significant first.
    @inline(__always) mutating func write(_ value: UInt64, count: UInt32) {
        acc |= value << UInt64(filled)
        filled += count
        while filled >= 8 {
            bytes.append(UInt8(truncatingIfNeeded: acc))
            acc >>= 8
            filled -= 8
        }
    }

    /// The bytes, the last one padded with zero bits.
    mutating func finish() -> [UInt8] {
        if filled > 0 {
            bytes.append(UInt8(truncatingIfNeeded: acc))
            acc = 0
            filled = 0
        }
        return bytes
    }
}

/// Reads bits least significant first from `bytes[range]`, reporting absolute offsets.
struct RefBitReader {
    let bytes: [UInt8]
    let base: Int
    let path: String?
    private var position: Int
    private let end: Int
    private var acc: UInt64 = 0
    private var available: UInt32 = 0

    init(_ bytes: [UInt8], range: Range<Int>, base: Int, path: String?) {
        self.bytes = bytes
        self.base = base
        self.path = path
        self.position = range.lowerBound
        self.end = range.upperBound
    }

    /// Absolute offset of the byte holding the next unread bit.
    var byteOffset: Int { base + position - Int(available + 7) / 8 }

    func error(_ code: LnoteError.Code, _ message: String, at: Int) -> LnoteError {
        LnoteError(code, message, path: path, offset: at)
    }

    @inline(__always) private mutating func refill(_ need: UInt32) throws {
        while available < need {
            guard position < end else {
                throw error(.corrupt, "point bit stream ends inside a value", at: base + end)
            }
            acc |= UInt64(bytes[position]) << UInt64(available)
            position += 1
            available += 8
        }
    }

    /// The next `count` (1...32) bits as an integer.
    @inline(__always) mutating func read(_ count: UInt32) throws -> UInt64 {
        try refill(count)
        let v = acc & ((UInt64(1) << UInt64(count)) - 1)
        acc >>= UInt64(count)
        available -= count
        return v
    }

    /// Counts one-bits up to a zero-bit (consumed) or up to `limit` one-bits (no terminator).
    @inline(__always) mutating func unary(limit: UInt32) throws -> UInt32 {
        var q: UInt32 = 0
        while q < limit {
            if available == 0 { try refill(1) }
            // Count the run of ones in what is buffered.
            let ones = UInt32((~acc).trailingZeroBitCount)
            let run = min(ones, available, limit - q)
            if run > 0 {
                acc >>= UInt64(run)
                available -= run
                q += run
                continue
            }
            // The next bit is a zero: the terminator.
            acc >>= 1
            available -= 1
            return q
        }
        return q
    }

    /// [PTS-8] The stream must end exactly: no whole unread byte, and zero padding bits.
    func finish() throws {
        guard position == end, available < 8 else {
            throw error(.corrupt, "point bit stream has unused bytes", at: byteOffset)
        }
        guard acc == 0 else {
            throw error(.corrupt, "point bit stream padding is not zero", at: base + end - 1)
        }
    }
}
