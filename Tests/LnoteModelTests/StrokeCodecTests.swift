import Testing
import LnoteModel

@Suite("Point codec")
struct StrokeCodecTests {
    static func roundTrip(_ points: [StrokePoint], _ context: String) {
        let bytes = StrokeCodec.encodedPoints(points)
        var r = ByteReader(bytes)
        do {
            let back = try StrokeCodec.decodePoints(&r)
            #expect(back == points, "round trip differs: \(context)")
            #expect(r.isAtEnd, "decoder left \(r.remaining) bytes: \(context)")
            #expect(StrokeCodec.encodedPoints(back) == bytes, "re-encoding differs: \(context)")
        } catch {
            Issue.record("decoding failed: \(error): \(context)")
        }
    }

    /// [PTS-1] … [PTS-9]: lossless on any point list, including extremes.
    @Test func randomAndAdversarialRoundTrip() {
        for seed in testSeeds(0x5EED_0001, count: 400) {
            var m = RandomModel(seed: seed)
            Self.roundTrip(m.points(), "seed \(seed)")
        }
    }

    @Test func edgeCases() {
        let extremes: [StrokePoint] = [
            StrokePoint(x: .min, y: .max, pressure: 1000, radius: .min, t: .max),
            StrokePoint(x: .max, y: .min, pressure: 0, radius: .max, t: 0),
            StrokePoint(x: .min, y: .max, pressure: 1000, radius: .min, t: .max),
            StrokePoint(x: 0, y: 0, pressure: 0, radius: 0, t: 0),
            StrokePoint(x: .max, y: .max, pressure: 999, radius: .max, t: 1),
        ]
        Self.roundTrip([], "no points")
        Self.roundTrip([extremes[0]], "single extreme point")
        Self.roundTrip([StrokePoint(x: 0, y: 0)], "single point")
        Self.roundTrip(extremes, "huge jumps")
        // Decreasing time is allowed ([PTS-9]).
        Self.roundTrip([StrokePoint(x: 1, y: 1, t: 100), StrokePoint(x: 2, y: 2, t: 50), StrokePoint(x: 3, y: 3, t: 0)],
                       "decreasing t")
        // A long constant run, then an escape-sized jump, then constant again.
        var pts = Array(repeating: StrokePoint(x: 5, y: 5, pressure: 500, radius: 10, t: 0), count: 300)
        pts.append(StrokePoint(x: 2_000_000_000, y: -2_000_000_000, pressure: 0, radius: 10, t: 4_000_000_000))
        pts += Array(repeating: StrokePoint(x: 5, y: 5, pressure: 500, radius: 10, t: 0), count: 50)
        Self.roundTrip(pts, "constant, jump, constant")
        // Every escape threshold: values whose quotient is exactly 23, 24, 25 at k = 0.
        for v: Int32 in [11, 12, 13, -12, -13, 1 << 20, -(1 << 20)] {
            Self.roundTrip([StrokePoint(x: 0, y: 0), StrokePoint(x: v, y: -v)], "threshold \(v)")
        }
    }

    /// The size target: at most 3 bytes per point on realistic handwriting (here, the
    /// first 2,000 strokes of `HandwritingGenerator` seed 1, 20–400 points each).
    @Test func bytesPerPointOnHandwriting() throws {
        let strokes = HandwritingGenerator.strokes(seed: 1, count: 2000)
        var bytes = 0, points = 0
        for s in strokes {
            let b = StrokeCodec.encodedPoints(s.points)
            bytes += b.count
            points += s.points.count
            var r = ByteReader(b)
            #expect(try StrokeCodec.decodePoints(&r) == s.points)
        }
        let perPoint = Double(bytes) / Double(points)
        #expect(points > 2000 * 20)
        #expect(perPoint <= 3.0, "\(perPoint) bytes per point over \(points) points")
        // Regression guard for the current encoder (1.53 at the time of writing).
        #expect(perPoint <= 2.0, "\(perPoint) bytes per point over \(points) points")
        // Noisier input (digitizer noise 0.1 pt, pressure noise 0.003) stays under the target too.
        var noisy = HandwritingGenerator.Options()
        noisy.positionNoise = 0.1
        noisy.pressureNoise = 0.003
        bytes = 0; points = 0
        for s in HandwritingGenerator.strokes(seed: 2, count: 500, options: noisy) {
            bytes += StrokeCodec.encodedPoints(s.points).count
            points += s.points.count
        }
        #expect(Double(bytes) / Double(points) <= 3.0, "noisy: \(Double(bytes) / Double(points)) bytes per point")
    }

    @Test func generatorIsDeterministicAndRealistic() {
        let a = HandwritingGenerator.strokes(seed: 77, count: 50)
        let b = HandwritingGenerator.strokes(seed: 77, count: 50)
        let c = HandwritingGenerator.strokes(seed: 78, count: 50)
        #expect(a == b)
        #expect(a != c)
        for s in a {
            #expect((20...400).contains(s.points.count))
            #expect(s.points.first?.t == 0)
            for (p, q) in zip(s.points, s.points.dropFirst()) {
                // 240 Hz: 4 or 5 ms apart; pen moves at most a few points per sample.
                #expect((4...5).contains(q.t - p.t))
                #expect(abs(Int(q.x) - Int(p.x)) < 60 && abs(Int(q.y) - Int(p.y)) < 60)
                #expect(q.pressure <= 1000)
            }
        }
    }

    /// [PTS-2] [PTS-3] A cut stream throws `truncated` or `corrupt` with an offset.
    @Test func truncationAtEveryOffset() {
        for seed in testSeeds(0x5EED_0002, count: 30) {
            var m = RandomModel(seed: seed)
            let pts = m.points()
            let bytes = StrokeCodec.encodedPoints(pts)
            for cut in 0..<bytes.count {
                let base = Int(seed % 1000)
                expectDecodeFailure([.truncated, .corrupt], "seed \(seed) cut at \(cut)") {
                    var r = ByteReader(Array(bytes[0..<cut]), base: base)
                    _ = try StrokeCodec.decodePoints(&r)
                }
            }
        }
    }

    /// [PTS-10] Canonical: whatever a mutated stream decodes to re-encodes to exactly the
    /// bytes the decoder consumed; everything else throws with an offset inside the input.
    @Test func mutatedStreamsAreRejectedOrCanonical() {
        var decoded = 0, rejected = 0
        for seed in testSeeds(0x5EED_0003, count: 3000) {
            var m = RandomModel(seed: seed)
            var bytes = StrokeCodec.encodedPoints(m.points())
            guard !bytes.isEmpty else { continue }
            for _ in 0..<m.int(1...3) {
                let i = m.int(0...(bytes.count - 1))
                if m.chance(0.5) { bytes[i] ^= 1 << UInt8(m.int(0...7)) } else { bytes[i] = UInt8(m.int(0...255)) }
            }
            var r = ByteReader(bytes, base: 100)
            do {
                let pts = try StrokeCodec.decodePoints(&r)
                decoded += 1
                let consumed = r.offset - 100
                #expect(StrokeCodec.encodedPoints(pts) == Array(bytes[0..<consumed]), "seed \(seed): not canonical")
                #expect(pts.allSatisfy { $0.pressure <= 1000 }, "seed \(seed)")
            } catch let e as LnoteError {
                rejected += 1
                #expect([.truncated, .corrupt].contains(e.code), "seed \(seed): \(e)")
                if let o = e.offset { #expect((100...(100 + bytes.count)).contains(o), "seed \(seed): offset \(o)") }
                else { Issue.record("seed \(seed): no offset in \(e)") }
            } catch {
                Issue.record("seed \(seed): \(error)")
            }
        }
        #expect(decoded > 0 && rejected > 0)
    }

    @Test func randomBytesNeverCrash() {
        for seed in testSeeds(0x5EED_0004, count: 3000) {
            var g = SplitMix64(seed: seed)
            let n = Int(g.below(64))
            let bytes = (0..<n).map { _ in UInt8(truncatingIfNeeded: g.next()) }
            var r = ByteReader(bytes)
            do {
                let pts = try StrokeCodec.decodePoints(&r)
                #expect(StrokeCodec.encodedPoints(pts) == Array(bytes[0..<r.offset]), "seed \(seed)")
            } catch let e as LnoteError {
                #expect([.truncated, .corrupt].contains(e.code) && e.offset != nil, "seed \(seed): \(e)")
            } catch {
                Issue.record("seed \(seed): \(error)")
            }
        }
    }

    /// [PTS-8] Specific rejections: pressure out of range, padding, a needless escape,
    /// a count beyond the maximum.
    @Test func specificRejections() throws {
        // Pressure 1001 in the first point.
        var w = ByteWriter()
        w.varint(1); w.svarint(0); w.svarint(0); w.varint(1001); w.svarint(0); w.varint(0)
        var r = ByteReader(w.bytes)
        let e1 = expectDecodeFailure([.corrupt], "pressure 1001") { _ = try StrokeCodec.decodePoints(&r) }
        #expect(e1?.offset == 3)

        // Hand-built streams of 3 points: point 0 = (0, 0, 1000, 0, 0), a zero first step,
        // then one bit-stream point. k = 0 for every channel at the start (sum 2, count 1).
        func threePoints(pressure: UInt64 = 1000, stream: [UInt8], length: UInt64? = nil) -> [UInt8] {
            var w = ByteWriter()
            w.varint(3); w.svarint(0); w.svarint(0); w.varint(pressure); w.svarint(0); w.varint(0)
            w.append([0, 0, 0, 0, 0])
            w.varint(length ?? UInt64(stream.count)); w.append(stream)
            return w.bytes
        }
        // Pressure delta-of-delta +1 (zigzag 2, "110"): x "0", y "0", p "110", r "0", t "0";
        // bits LSB first 0,0,1,1,0,0,0 = 0x0C. Pressure would be 1001.
        r = ByteReader(threePoints(stream: [0x0C]))
        expectDecodeFailure([.corrupt], "pressure 1001 in the stream") { _ = try StrokeCodec.decodePoints(&r) }
        // The same with first pressure 999 decodes to 999, 999, 1000.
        r = ByteReader(threePoints(pressure: 999, stream: [0x0C]))
        #expect(try StrokeCodec.decodePoints(&r).map(\.pressure) == [999, 999, 1000])
        // A set padding bit.
        r = ByteReader(threePoints(stream: [0x80]))
        expectDecodeFailure([.corrupt], "non-zero padding") { _ = try StrokeCodec.decodePoints(&r) }
        // An extra byte in the stream.
        r = ByteReader(threePoints(stream: [0, 0]))
        expectDecodeFailure([.corrupt], "unused stream byte") { _ = try StrokeCodec.decodePoints(&r) }
        // A stream too short for its values.
        r = ByteReader(threePoints(stream: [0xFF]))
        expectDecodeFailure([.corrupt], "stream ends inside a value") { _ = try StrokeCodec.decodePoints(&r) }
        // The canonical form is accepted.
        r = ByteReader(threePoints(stream: [0]))
        #expect(try StrokeCodec.decodePoints(&r) == Array(repeating: StrokePoint(x: 0, y: 0, pressure: 1000, radius: 0, t: 0), count: 3))
        // A needless escape: x coded as 24 ones then 32 raw bits holding 1.
        var bits: [Bool] = Array(repeating: true, count: 24)
        bits += (0..<32).map { $0 == 0 }
        bits += [false, false, false, false] // y, p, r, t zero
        r = ByteReader(threePoints(stream: packBits(bits)))
        expectDecodeFailure([.corrupt], "needless escape") { _ = try StrokeCodec.decodePoints(&r) }
        // The needed escape of the same shape (x = 24) is accepted.
        bits = Array(repeating: true, count: 24) + (0..<32).map { [false, false, false, true, true][min($0, 4)] && $0 < 5 }
        bits += [false, false, false, false]
        r = ByteReader(threePoints(stream: packBits(bits)))
        #expect(try StrokeCodec.decodePoints(&r).map(\.x) == [0, 0, 12])
        // A longer-than-needed varint (0 written as 0x80 0x00).
        r = ByteReader([0x01, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00])
        expectDecodeFailure([.corrupt], "non-minimal varint") { _ = try StrokeCodec.decodePoints(&r) }

        // A count above Stroke.maxPoints.
        var w7 = ByteWriter()
        w7.varint(UInt64(Stroke.maxPoints) + 1)
        r = ByteReader(w7.bytes)
        expectDecodeFailure([.corrupt], "count above maximum") { _ = try StrokeCodec.decodePoints(&r) }
        // A huge count with few bytes: never allocates, reports truncation.
        var w8 = ByteWriter()
        w8.varint(UInt64(Stroke.maxPoints)); w8.append([0, 0, 0, 0, 0, 1, 0])
        r = ByteReader(w8.bytes)
        expectDecodeFailure([.truncated], "count larger than the bytes") { _ = try StrokeCodec.decodePoints(&r) }
    }
}

func packBits(_ bits: [Bool]) -> [UInt8] {
    var out = [UInt8](repeating: 0, count: (bits.count + 7) / 8)
    for (i, b) in bits.enumerated() where b { out[i / 8] |= 1 << UInt8(i % 8) }
    return out
}
