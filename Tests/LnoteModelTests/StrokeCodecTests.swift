import Testing
import LnoteModel

/// The point stream of `Protocol/page-snapshot.md` section 3 ([PTS-1] … [PTS-11]) through
/// the production codec; `StrokeCodecReferenceTests` compares it with a second codec.
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

    /// [PTS-1] … [PTS-10]: lossless on any point list, including extremes, and re-encoding
    /// gives the same bytes.
    @Test func randomAndAdversarialRoundTrip() {
        for seed in testSeeds(0x5EED_0001, count: 400) {
            var m = RandomModel(seed: seed)
            Self.roundTrip(m.points(), "seed \(seed)")
        }
    }

    /// [PTS-5] [PTS-6] [PTS-9] Extremes: no points, one point, jumps between `Int32.min` and
    /// `Int32.max`, decreasing time, a stroke that needs width 32 in one block and 0 in the
    /// next, and second differences at the edge of every width.
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
        // A long constant run (width 0), a jump that needs width 32, then constant again.
        var pts = Array(repeating: StrokePoint(x: 5, y: 5, pressure: 500, radius: 10, t: 0), count: 300)
        pts.append(StrokePoint(x: 2_000_000_000, y: -2_000_000_000, pressure: 0, radius: 10, t: 4_000_000_000))
        pts += Array(repeating: StrokePoint(x: 5, y: 5, pressure: 500, radius: 10, t: 0), count: 50)
        Self.roundTrip(pts, "constant, jump, constant")
        // [PTS-6] Every width's edge: a second difference dd = −2^(k−1) has u = 2^k − 1 (k bits),
        // dd = +2^(k−1) has u = 2^k (k + 1 bits), for k = 1 … 32 (for k = 32 both are −2^31),
        // on every channel but pressure, inside a block (point 5, the fourth of block 0) and
        // at the first point of the next (point 10).
        for k in 1...32 {
            let half = UInt32(1) << UInt32(k - 1)
            for dd in [half, 0 &- half] {
                for at in [5, 10] {
                    var pts = Array(repeating: StrokePoint(x: 0, y: 0, pressure: 500, radius: 0, t: 0), count: 14)
                    for i in at..<pts.count {
                        let moved = UInt32(truncatingIfNeeded: i - at + 1) &* dd
                        pts[i].x = Int32(bitPattern: moved)
                        pts[i].y = Int32(bitPattern: 0 &- moved)
                        pts[i].radius = Int32(bitPattern: moved)
                        pts[i].t = moved
                    }
                    Self.roundTrip(pts, "dd \(Int32(bitPattern: dd)) from point \(at)")
                }
            }
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
        // Regression guard for the current encoder (1.68 with the blocks of [PTS-6], [PTS-7]).
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

    /// [PTS-2] [PTS-3] Every cut of a valid stream is `truncated`, at an offset no later than
    /// the cut: a varint cut off is `truncated`, [PTS-2] and [PTS-3] check the lengths
    /// before the streams, and a valid stream has no value that a `corrupt` check rejects.
    @Test func truncationAtEveryOffset() {
        for seed in testSeeds(0x5EED_0002, count: 30) {
            var m = RandomModel(seed: seed)
            let pts = m.points()
            let bytes = StrokeCodec.encodedPoints(pts)
            for cut in 0..<bytes.count {
                let base = Int(seed % 1000)
                let e = expectDecodeFailure([.truncated], "seed \(seed) cut at \(cut)") {
                    var r = ByteReader(Array(bytes[0..<cut]), base: base)
                    _ = try StrokeCodec.decodePoints(&r)
                }
                if let o = e?.offset { #expect((base...(base + cut)).contains(o), "seed \(seed) cut at \(cut): offset \(o)") }
            }
        }
    }

    /// [PTS-8] [PTS-10] Canonical: whatever a mutated stream decodes to re-encodes to exactly
    /// the bytes the decoder consumed; everything else throws with an offset inside the input.
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

    /// [PTS-1] … [PTS-3] [PTS-8] [PTS-10] Random bytes decode to a canonical stream or throw
    /// `truncated` or `corrupt` with an offset.
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

    /// [PTS-1] [PTS-2] [PTS-3] [PTS-8] [PTS-10] Streams built by hand, one per rule (and
    /// for some the canonical stream next to the rejected one): each rejected with the code
    /// and at the exact absolute offset the spec gives, or decoded to the points computed by
    /// hand. Each is read alone, at a base offset, and inside a buffer with bytes after its
    /// range. `StrokeCodecReferenceTests` runs the same streams through the reference codec.
    @Test(arguments: Self.handBuiltStreams)
    func specificRejections(_ stream: HandBuiltStream) {
        for (bytes, range, base) in stream.placements {
            var r = ByteReader(bytes, range: range, base: base, path: "hand")
            let context = "\(stream.name), base \(base), range \(range)"
            switch stream.expected {
            case let .rejected(code, offset):
                let e = expectDecodeFailure([code], context) { _ = try StrokeCodec.decodePoints(&r) }
                #expect(e?.offset == base + range.lowerBound + offset, "\(context): \(e.map { "\($0)" } ?? "no error")")
            case let .accepted(points):
                do {
                    #expect(try StrokeCodec.decodePoints(&r) == points, "\(context)")
                    #expect(r.offset == base + range.upperBound, "\(context)")
                } catch {
                    Issue.record("\(context): \(error)")
                }
            }
        }
        if case let .accepted(points) = stream.expected {
            #expect(StrokeCodec.encodedPoints(points) == stream.bytes, "\(stream.name): \(hexDump(StrokeCodec.encodedPoints(points)))")
        }
    }

    /// A point stream written by hand, and what a reader must make of it.
    struct HandBuiltStream: Sendable, CustomTestStringConvertible {
        enum Expected: Sendable {
            /// Rejected with this code, at this offset from the start of the stream.
            case rejected(LnoteError.Code, at: Int)
            case accepted([StrokePoint])
        }

        let name: String
        let bytes: [UInt8]
        let expected: Expected

        init(_ name: String, _ hex: String, _ expected: Expected) {
            self.name = name
            self.bytes = parseHexDump(hex)!
            self.expected = expected
        }

        var testDescription: String { name }

        /// The stream alone; at base offset 1000; and at base 500 after 3 bytes, with 2
        /// bytes after its range (a reader must not look past its range).
        var placements: [(bytes: [UInt8], range: Range<Int>, base: Int)] {
            [(bytes, 0..<bytes.count, 0),
             (bytes, 0..<bytes.count, 1000),
             ([0xFF, 0xFF, 0xFF] + bytes + [0xAA, 0x55], 3..<(3 + bytes.count), 500)]
        }
    }

    static func points(x: [Int32], y: Int32 = 0, pressure: [UInt16], radius: [Int32]? = nil, t: [UInt32]? = nil) -> [StrokePoint] {
        x.indices.map { StrokePoint(x: x[$0], y: y, pressure: pressure[$0 < pressure.count ? $0 : pressure.count - 1],
                                    radius: radius?[$0] ?? 0, t: t?[$0] ?? 0) }
    }

    /// Most streams below hold 3 points: point 0 = (0, 0, 1000, 0, 0) (pressure `e8 07`), a
    /// zero first step, one block of one point. Their offsets: `n` 0, point 0 1 to 6, the
    /// first step 7 to 11, `H` 12, `G` 13, the width stream from 14. Width streams are
    /// given as bits in stream order (`|` between bytes) and then as bytes ([PTS-4]: the
    /// first bit is the low bit of the first byte). [PTS-7] codes: `0` same as the block
    /// before, `10` one up, `110` one down, `111cccc` the code in 4 bits, low bit first.
    static let handBuiltStreams: [HandBuiltStream] = [
        // Canonical streams.
        HandBuiltStream("canonical: 3 points, every code 0 (bits 00000)",
                        "03 00 00 e8 07 00 00 00 00 00 00 00 01 00 00",
                        .accepted(points(x: [0, 0, 0], pressure: [1000]))),
        HandBuiltStream("canonical: the spec's example points-3",
                        "03 d0 0f a0 1f f4 03 14 00 18 06 28 00 08 03 03 97 5c 00 02 01 02",
                        .accepted([StrokePoint(x: 1000, y: 2000, pressure: 500, radius: 10, t: 0),
                                   StrokePoint(x: 1012, y: 2003, pressure: 520, radius: 10, t: 4),
                                   StrokePoint(x: 1025, y: 2005, pressure: 540, radius: 11, t: 8)])),
        // 11 points, pressure 500, first step x +1, t +4. Block 0 (points 2-9): x u = 0 1 2 3
        // 0 0 0 0 (dd 0 -1 +1 -2 0 0 0 0), code 2 (111 0100), the rest 0; block 1 (point 10):
        // x code 0 after 2 (111 0000), radius u = 1 (dd -1), code 1 (10).
        // Bits 1110100 0 0 0 0 | 1110000 0 0 10 0 = 11101000|00011100|0000100(0) = 17 38 10.
        // Packed: x of block 0 in 2 bits each, 00 10 01 11 00 00 00 00 = e4 00; radius of
        // block 1: 01.
        HandBuiltStream("canonical: two blocks, codes up, same, explicit, full and partial groups",
                        "0b 00 00 f4 03 00 00 02 00 00 00 08 03 03 17 38 10 e4 00 01",
                        .accepted(points(x: [0, 1, 2, 2, 3, 2, 1, 0, -1, -2, -3], pressure: [500],
                                         radius: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1], t: (0...10).map { UInt32(4 * $0) }))),
        // x code 3 (111 1100), u = 4 5 3 in 3 bits: 001 101 110 (and 7 padding bits) = ec 00;
        // dd +2 -3 -2.
        HandBuiltStream("canonical: a partial group of 3 values in 9 bits",
                        "05 00 00 e8 07 00 00 00 00 00 00 00 02 02 1f 00 ec 00",
                        .accepted(points(x: [0, 0, 2, 1, -2], pressure: [1000]))),
        // x code 13 (111 1011 = 6f 00): width 16, u = 4096 (13 bits) = 00 10; dd +2048.
        HandBuiltStream("canonical: code 13 (width 16) for a 13-bit value",
                        "03 00 00 e8 07 00 00 00 00 00 00 00 02 02 6f 00 00 10",
                        .accepted(points(x: [0, 0, 2048], pressure: [1000]))),
        // x code 13 (111 1011), y code 14 (111 0111), radius code 15 (111 1111), each for
        // the largest value of its width: 1111011 1|110111 0 1|111111 0(0) = ef bb 3f; groups
        // ff ff, ff ff ff, ff ff ff ff; dd -2^15, -2^23, -2^31.
        HandBuiltStream("canonical: codes 13, 14, 15 (widths 16, 24, 32) full",
                        "03 00 00 e8 07 00 00 00 00 00 00 00 03 09 ef bb 3f ff ff ff ff ff ff ff ff ff",
                        .accepted([StrokePoint(x: 0, y: 0, pressure: 1000, radius: 0, t: 0),
                                   StrokePoint(x: 0, y: 0, pressure: 1000, radius: 0, t: 0),
                                   StrokePoint(x: -32768, y: -8_388_608, pressure: 1000, radius: .min, t: 0)])),
        // Pressure 999: x u = 1 (10), pressure u = 2 (111 0100): 1 0 0 1110100 0 0 = b9 00.
        HandBuiltStream("canonical: pressure 999, 999, then 1000 in a block",
                        "03 00 00 e7 07 00 00 00 00 00 00 00 02 02 b9 00 01 02",
                        .accepted(points(x: [0, 0, -1], pressure: [999, 999, 1000]))),
        HandBuiltStream("canonical: pressure 999 then 1000 at point 1",
                        "02 00 00 e7 07 00 00 00 00 02 00 00",
                        .accepted(points(x: [0, 0], pressure: [999, 1000]))),
        // n = 10: one block, 13 bytes after n, so 5·1 ≤ 8·(13 − 12).
        HandBuiltStream("canonical: [PTS-2] 10 points in 14 bytes",
                        "0a 00 00 00 00 00 00 00 00 00 00 01 00 00",
                        .accepted(points(x: Array(repeating: 0, count: 10), pressure: [0]))),

        // [PTS-1]
        HandBuiltStream("[PTS-1] count 1,048,577",
                        "81 80 40", .rejected(.corrupt, at: 0)),
        HandBuiltStream("[PTS-1] pressure 1001 in point 0",
                        "01 00 00 e9 07 00 00", .rejected(.corrupt, at: 3)),
        HandBuiltStream("[PTS-1] x of point 0 is 2^31 (zigzag 2^32)",
                        "01 80 80 80 80 10 00 00 00 00", .rejected(.corrupt, at: 1)),
        HandBuiltStream("[PTS-1] t of point 0 is 2^32",
                        "01 00 00 00 00 80 80 80 80 10", .rejected(.corrupt, at: 5)),
        HandBuiltStream("[PTS-1] [PTS-11] first step of x is -2^31 - 1 (zigzag 2^32 + 1)",
                        "02 00 00 00 00 00 81 80 80 80 10 00 00 00 00", .rejected(.corrupt, at: 6)),
        HandBuiltStream("[PTS-1] pressure 1000 + 1 at point 1: at the first step",
                        "02 00 00 e8 07 00 00 00 00 02 00 00", .rejected(.corrupt, at: 7)),
        HandBuiltStream("[PTS-1] pressure 1000 + 1 at point 1 of 3 points: at the first step",
                        "03 00 00 e8 07 00 00 00 00 02 00 00 01 00 00", .rejected(.corrupt, at: 7)),
        // [PTS-10] and section 1: varints.
        HandBuiltStream("[PTS-10] count 3 written 83 00",
                        "83 00 00 00 e8 07 00 00 00 00 00 00 00 01 00 00", .rejected(.corrupt, at: 0)),
        HandBuiltStream("[PTS-10] H = 1 written 81 00",
                        "03 00 00 e8 07 00 00 00 00 00 00 00 81 00 00 00", .rejected(.corrupt, at: 12)),
        HandBuiltStream("[PTS-10] first step of x (0) written 80 00",
                        "02 00 00 00 00 00 80 00 00 00 00 00", .rejected(.corrupt, at: 6)),
        HandBuiltStream("section 1: x of point 0 in 11 bytes",
                        "01 80 80 80 80 80 80 80 80 80 80 00 00 00 00 00", .rejected(.corrupt, at: 1)),
        HandBuiltStream("section 1: x of point 0 over 64 bits",
                        "01 ff ff ff ff ff ff ff ff ff 02 00 00 00 00", .rejected(.corrupt, at: 1)),
        HandBuiltStream("section 1: the first step cut inside a varint",
                        "02 00 00 00 00 00 80", .rejected(.truncated, at: 6)),

        // [PTS-2]
        HandBuiltStream("[PTS-2] 1,048,576 points in 12 bytes",
                        "80 80 40 00 00 00 00 00 00 00 00 00 00 00 00", .rejected(.truncated, at: 0)),
        HandBuiltStream("[PTS-2] 11 points (2 blocks) in 13 bytes",
                        "0b 00 00 00 00 00 00 00 00 00 00 01 00 00", .rejected(.truncated, at: 0)),

        // [PTS-3]
        HandBuiltStream("[PTS-3] H = 5 with 1 byte left",
                        "03 00 00 e8 07 00 00 00 00 00 00 00 05 00 00", .rejected(.truncated, at: 12)),
        HandBuiltStream("[PTS-3] H + G = 2 with 1 byte left",
                        "03 00 00 e8 07 00 00 00 00 00 00 00 01 01 00", .rejected(.truncated, at: 12)),
        HandBuiltStream("[PTS-3] 19 points (3 blocks, 15 bits) with H = 1",
                        "13 00 00 e8 07 00 00 00 00 00 00 00 01 01 00 00", .rejected(.corrupt, at: 12)),

        // [PTS-8] 1: 16 after 15. Block 0: x 111 1111 (15), 0 0 0 0; block 1: x 10.
        // Bits 1111111 0|0 0 0 10 = 7f 08; x's group of block 0: 8 values of 32 bits, the
        // first 2^24 (25 bits, so 15 is the smallest code).
        HandBuiltStream("[PTS-8] 1: code p + 1 after p = 15 (x, block 1, byte 1)",
                        "0b 00 00 e8 07 00 00 00 00 00 00 00 02 20 7f 08 00 00 00 01" + String(repeating: " 00", count: 28),
                        .rejected(.corrupt, at: 15)),
        // x 111 0100, y 111 0100, pressure 0, radius 0, t 110: 1110100 1|110100 0 0|110 =
        // 97 0b 03; t's code begins in byte 2.
        HandBuiltStream("[PTS-8] 1: code p - 1 after p = 0 (t, byte 2)",
                        "03 00 00 e8 07 00 00 00 00 00 00 00 03 00 97 0b 03", .rejected(.corrupt, at: 16)),
        HandBuiltStream("[PTS-8] 1: explicit code p (111 0000)",
                        "03 00 00 e8 07 00 00 00 00 00 00 00 01 00 07", .rejected(.corrupt, at: 14)),
        HandBuiltStream("[PTS-8] 1: explicit code p + 1 (111 1000)",
                        "03 00 00 e8 07 00 00 00 00 00 00 00 01 00 0f", .rejected(.corrupt, at: 14)),
        // Block 0: x code 3 (111 1100) with u = 4 first (group 04 00 00), 0 0 0 0; block 1:
        // x 111 0100 (2 = p - 1). Bits 1111100 0|000 1110100|0(0) = 1f b8 00; block 1's x
        // code begins at bit 11, in byte 1.
        HandBuiltStream("[PTS-8] 1: explicit code p - 1 (x, block 1, byte 1)",
                        "0b 00 00 e8 07 00 00 00 00 00 00 00 03 03 1f b8 00 04 00 00", .rejected(.corrupt, at: 15)),
        // [PTS-8] 2: bits 0 0 0 0 111 0, then the byte ends inside t's code.
        HandBuiltStream("[PTS-8] 2: the width stream ends inside a code",
                        "03 00 00 e8 07 00 00 00 00 00 00 00 01 00 70", .rejected(.corrupt, at: 15)),
        // x 111 0100, y 111 0100, pressure 0, radius 0: 16 bits, no room for t's code.
        HandBuiltStream("[PTS-8] 2: the width stream ends before t's code",
                        "03 00 00 e8 07 00 00 00 00 00 00 00 02 00 97 0b", .rejected(.corrupt, at: 16)),
        // [PTS-8] 3: x code 2 (1 byte, 02), y code 2 (1 byte) with G = 1.
        HandBuiltStream("[PTS-8] 3: y's group past G = 1",
                        "03 00 00 e8 07 00 00 00 00 00 00 00 03 01 97 0b 00 02", .rejected(.corrupt, at: 18)),
        // [PTS-8] 4: x code 2 (111 0100 0 0 0 0 = 17 00) holding u = 1.
        HandBuiltStream("[PTS-8] 4: code 2 for the value 1",
                        "03 00 00 e8 07 00 00 00 00 00 00 00 02 01 17 00 01", .rejected(.corrupt, at: 16)),
        HandBuiltStream("[PTS-8] 4: code 13 (width 16) for 4095 (12 bits)",
                        "03 00 00 e8 07 00 00 00 00 00 00 00 02 02 6f 00 ff 0f", .rejected(.corrupt, at: 16)),
        // [PTS-8] 5: the partial group above (ec 00) with its last padding bit set (ec 80).
        HandBuiltStream("[PTS-8] 5: padding bit set in the last byte of a 2-byte group",
                        "05 00 00 e8 07 00 00 00 00 00 00 00 02 02 1f 00 ec 80", .rejected(.corrupt, at: 17)),
        // [PTS-8] 6: pressure 1000 + 1 in the block; the pressure group is the second byte.
        HandBuiltStream("[PTS-8] 6: pressure 1001 in a block",
                        "03 00 00 e8 07 00 00 00 00 00 00 00 02 02 b9 00 01 02", .rejected(.corrupt, at: 17)),
        // Pressure 999, first step +1 (1000), then dd 0 (code 0, an empty group) gives 1001.
        // x 10, y 0, pressure 0, radius 10, t 0: 1000100(0) = 11; groups x 01, radius 01.
        // The spec's "first byte of the pressure group" is read as where that empty group
        // would start: after x's group, at the radius group.
        HandBuiltStream("[PTS-8] 6: pressure 1001 in a block whose pressure group is empty",
                        "03 00 00 e7 07 00 00 00 00 02 00 00 01 02 11 01 01", .rejected(.corrupt, at: 16)),
        // [PTS-8] 7.
        HandBuiltStream("[PTS-8] 7: an unused width byte",
                        "03 00 00 e8 07 00 00 00 00 00 00 00 02 00 00 00", .rejected(.corrupt, at: 15)),
        HandBuiltStream("[PTS-8] 7: width padding bit set in the last byte (17 80)",
                        "03 00 00 e8 07 00 00 00 00 00 00 00 02 01 17 80 02", .rejected(.corrupt, at: 15)),
        HandBuiltStream("[PTS-8] 7: an unused packed byte",
                        "03 00 00 e8 07 00 00 00 00 00 00 00 02 02 17 00 02 00", .rejected(.corrupt, at: 17)),

        // [PTS-8] The first fault in reading order.
        // x code 4 (111 0010 = 27 00) for 4 5 3 (3 bits would do), 4 bits each: 0010 1010
        // 1100 = 54 03, and a padding bit set (83): check 4 at the group's first byte.
        HandBuiltStream("[PTS-8] order: 4 before 5 in the same group",
                        "05 00 00 e8 07 00 00 00 00 00 00 00 02 02 27 00 54 83", .rejected(.corrupt, at: 16)),
        // x code 2, u = 2 with a padding bit (06); y code 2 past G = 1.
        HandBuiltStream("[PTS-8] order: 5 on x's group before 3 on y's",
                        "03 00 00 e8 07 00 00 00 00 00 00 00 03 01 97 0b 00 06", .rejected(.corrupt, at: 17)),
        // Pressure 1001 as above, and t code 1 (10): 1 0 0 1110100 0 10 = b9 08; groups x 01,
        // pressure 02, t 03 (u = 1 and a padding bit).
        HandBuiltStream("[PTS-8] order: 5 on t's group before 6 in the same block",
                        "03 00 00 e8 07 00 00 00 00 00 00 00 02 03 b9 08 01 02 03", .rejected(.corrupt, at: 18)),
        // Block 0: pressure code 2 (u = 2 at point 2, group 02 00); block 1: x 110 after 0.
        // Bits 0 0 1110100 0 0 | 110 = 5c 18.
        HandBuiltStream("[PTS-8] order: 6 in block 0 before 1 in block 1",
                        "0b 00 00 e8 07 00 00 00 00 00 00 00 02 02 5c 18 02 00", .rejected(.corrupt, at: 16)),
        HandBuiltStream("[PTS-8] order: 7, an unused width byte before an unused packed byte",
                        "03 00 00 e8 07 00 00 00 00 00 00 00 02 01 00 00 00", .rejected(.corrupt, at: 15)),
        // Two unused width bytes after a padding bit set (20 00 00): 7 names the whole unused
        // byte first, at the first unused byte (not the last byte of the stream).
        HandBuiltStream("[PTS-8] order: 7, an unused width byte before the padding bits",
                        "03 00 00 e8 07 00 00 00 00 00 00 00 03 00 20 00 00", .rejected(.corrupt, at: 15)),
    ]
}
