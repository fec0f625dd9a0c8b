import Testing
@testable import LnoteModel

/// Point stream v2 with written parameters (`Protocol/page-snapshot.md` [PT2-10]), the stream
/// of an `addStroke2` frame (operation-log.md [LOG-29]): every stroke coded alone against the
/// standalone context, compared with `ReferenceStrokeCodecV2`, a second codec written from
/// the spec: the same bytes, and for every input the same points or the same error code,
/// offset and path.
@Suite("Point codec v2 with written parameters against the reference")
struct StrokeCodecV2WrittenParametersTests {
    typealias Ref = ReferenceStrokeCodecV2
    typealias Suite2 = StrokeCodecV2ReferenceTests
    typealias Differences = StrokeCodecReferenceTests.Differences

    /// One stroke decoded alone by one codec: its points and where the reader stopped, or the
    /// error's code, offset and path (and message, not compared).
    static func outcome(_ bytes: [UInt8], width: Int32, base: Int, path: String, reference: Bool)
        -> (Suite2.ChunkOutcome, message: String) {
        var r = ByteReader(bytes, range: 0..<bytes.count, base: base, path: path)
        do {
            var production = StrokeCodecV2.Context.standaloneWithParameters
            var mine = Ref.Context.standalone(writtenParameters: true)
            let points = reference ? try Ref.decodePoints(&r, width: width, context: &mine)
                                   : try StrokeCodecV2.decodePoints(&r, width: width, context: &production)
            return (.points([points], end: r.offset), "")
        } catch let e as LnoteError {
            return (.failure(e.code, offset: e.offset, path: e.path, stroke: 0), e.message)
        } catch {
            return (.failure(.invalidState, offset: nil, path: nil, stroke: 0), "\(error)")
        }
    }

    @discardableResult
    static func same(_ bytes: [UInt8], width: Int32, base: Int = 0, path: String = "f", _ log: Differences,
                     _ context: @autoclosure () -> String) -> (Suite2.ChunkOutcome, message: String) {
        let actual = outcome(bytes, width: width, base: base, path: path, reference: false)
        let expected = outcome(bytes, width: width, base: base, path: path, reference: true)
        if actual.0 != expected.0 {
            log.record("decoders differ: production \(actual.0) (\(actual.message)), reference \(expected.0) (\(expected.message)): \(context())")
        }
        return expected
    }

    static func encoded(_ s: Suite2.Stroke2) -> [UInt8] {
        var c = StrokeCodecV2.Context.standaloneWithParameters
        var w = ByteWriter()
        StrokeCodecV2.encodePoints(s.points, width: s.width, context: &c, into: &w)
        return w.bytes
    }

    /// The parameters a reference encoding wrote, channel by channel (nil where none).
    static func parameters(_ s: Suite2.Stroke2) -> [Int?] {
        let v = s.points.map(Ref.values)
        guard v.count >= 3 else { return Array(repeating: nil, count: 5) }
        let derived = v.allSatisfy { $0[Ref.radius] == Ref.derivedRadius(width: s.width, pressure: $0[Ref.pressure]) }
        return (0..<5).map { c in
            if derived && c == Ref.radius { return nil }
            let (mode, grid) = Ref.mode(v, channel: c, contextGrid: 1)
            return mode == 3 ? nil : Ref.bestParameter(Ref.secondDifferences(v, channel: c, grid: grid))
        }
    }

    /// [PT2-10] [LOG-29] Every stroke of many chunks (both generator profiles, adversarial
    /// strokes, the random model's points) coded alone: the same bytes as the reference, which
    /// decode back to the points in both codecs; every parameter 0 to 14 is chosen somewhere.
    @Test("[PT2-10] [LOG-29] encoder matches the reference, stroke by stroke, standalone")
    func encoderMatchesReference() {
        let log = Differences("encoder, written parameters")
        var chosen = Set<Int>()
        var strokes = 0
        for seed in testSeeds(0x5EED_0310, count: 40) {
            for (i, s) in Suite2.chunk(seed).enumerated() {
                var c = Ref.Context.standalone(writtenParameters: true)
                let expected = Ref.encodedPoints(s.points, width: s.width, context: &c)
                let actual = Self.encoded(s)
                strokes += 1
                if actual != expected {
                    log.record("encoders differ: seed \(seed), stroke \(i) (\(s.points.count) points): \(actual.count) against \(expected.count) bytes")
                    continue
                }
                for p in Self.parameters(s) { if let p { chosen.insert(p) } }
                let back = Self.same(expected, width: s.width, log, "seed \(seed), stroke \(i)")
                if back.0 != .points([s.points], end: expected.count) {
                    log.record("seed \(seed), stroke \(i) does not round-trip: \(back.0) \(back.message)")
                }
            }
        }
        log.finish()
        #expect(strokes > 800)
        #expect(chosen.isSuperset(of: 0...14), "parameters chosen: \(chosen.sorted())")
    }

    /// [PT2-8] [PT2-10] Every byte of some streams replaced several ways, every bit of their
    /// modes and parameters flipped, and every cut: both decoders agree (points and end, or
    /// error code, offset and path), and a parameter other than the best is refused somewhere.
    @Test("[PT2-8] [PT2-10] decoder matches the reference on every byte replaced, every bit of the modes flipped, every cut")
    func decoderMatchesReferenceOnMutations() {
        let log = Differences("mutations, written parameters")
        var rules = Set<String>()
        var cases = 0
        func note(_ result: (Suite2.ChunkOutcome, message: String)) {
            cases += 1
            if case .failure = result.0, let end = result.message.firstIndex(of: ":") { rules.insert(String(result.message[..<end])) }
        }
        for seed in testSeeds(0x5EED_0311, count: 6) {
            var g = SplitMix64(seed: seed)
            for (i, var s) in Suite2.chunk(seed, maxStrokes: 6).enumerated() {
                if s.points.count > 40 { s.points.removeLast(s.points.count - 40) }
                let bytes = Self.encoded(s)
                var r = ByteReader(bytes)
                let bitsAt = ((try? r.varint()) ?? 0) > 0 && (try? r.varint()) != nil ? r.position : bytes.count
                for bit in 0..<(8 * min(5, bytes.count - bitsAt)) {
                    var b = bytes
                    b[bitsAt + bit / 8] ^= 1 << UInt8(bit % 8)
                    note(Self.same(b, width: s.width, base: 7, path: "bit", log, "seed \(seed), stroke \(i), bit \(bit)"))
                }
                for j in bytes.indices {
                    for v in [bytes[j] ^ 0x01, bytes[j] ^ 0x80, bytes[j] &+ 1, 0x00, 0xFF, UInt8(truncatingIfNeeded: g.next())]
                    where v != bytes[j] {
                        var b = bytes
                        b[j] = v
                        note(Self.same(b, width: s.width, base: 7, path: "m", log, "seed \(seed), stroke \(i), byte \(j) = \(v)"))
                    }
                    note(Self.same(Array(bytes[..<j]), width: s.width, base: 7, path: "cut", log, "seed \(seed), stroke \(i), cut at \(j)"))
                }
            }
        }
        // Streams that write a parameter one off the best, on every channel that has one.
        var g = SplitMix64(seed: 0x5EED_0312)
        var h = HandwritingGenerator(seed: 0x5EED_0312, options: { var o = HandwritingGenerator.Options(); o.profile = .pen; return o }())
        var refused = 0
        for n in 0..<60 {
            let stroke = h.nextStroke()
            let s = Suite2.Stroke2(points: stroke.points, width: stroke.style.width)
            let best = Self.parameters(s)
            for c in 0..<5 {
                guard let k = best[c] else { continue }
                var forced = best.map { $0 ?? 0 }
                forced[c] = k == 14 ? 13 : (k == 0 || g.chance(0.5) ? k + 1 : k - 1)
                var ctx = Ref.Context.standalone(writtenParameters: true)
                let bytes = Ref.encodedPoints(s.points, width: s.width, context: &ctx, forcedParameters: forced)
                let result = Self.same(bytes, width: s.width, base: 3, path: "forced", log, "stroke \(n), channel \(c), parameter \(forced[c])")
                note(result)
                if case .failure(.corrupt, _, _, _) = result.0, result.message.hasPrefix("[PT2-8] 5 parameter") { refused += 1 }
                else if case .failure = result.0 {} else { log.record("stroke \(n), channel \(c): a parameter off the best was accepted") }
            }
        }
        log.finish()
        #expect(refused > 100, "\(refused) streams refused for their parameter")
        #expect(rules.contains("[PT2-8] 5 parameter") && rules.contains("[PT2-8] 2 unary dd"), "rules met: \(rules.sorted())")
        #expect(cases > 10_000)
    }

    /// [LOG-29] The spec's `addStroke2` vector's stream: the reference writes it, with x's
    /// parameter 0 and y's 1 (both ties, broken towards the smaller).
    @Test("[PT2-10] [LOG-29] the reference writes the stream of the addStroke2 vector")
    func referenceWritesTheVector() {
        let points = [StrokePoint(x: 1000, y: 2000, pressure: 500, radius: 0, t: 0),
                      StrokePoint(x: 1020, y: 2015, pressure: 520, radius: 0, t: 8),
                      StrokePoint(x: 1045, y: 2028, pressure: 540, radius: 0, t: 16)]
        var c = Ref.Context.standalone(writtenParameters: true)
        let bytes = Ref.encodedPoints(points, width: 20, context: &c)
        #expect(bytes == [0x03, 0x0d, 0x24, 0x20, 0x7f, 0xe8, 0x0b, 0xfa, 0x01, 0x42, 0x81, 0x26, 0x86, 0xa0, 0x01])
        #expect(Self.parameters(Suite2.Stroke2(points: points, width: 20)) == [0, 1, nil, nil, nil])
        #expect(Self.encoded(Suite2.Stroke2(points: points, width: 20)) == bytes)
    }
}
