import Testing
@testable import LnoteModel

/// The point codec version 2 against `ReferenceStrokeCodecV2`, a second implementation of
/// `Protocol/page-snapshot.md` section 3a written from the spec alone: the same bytes for
/// every chunk of strokes (one context carried from stroke to stroke, as a chunk of element
/// records carries it), and for every input the same points with the reader at the same
/// offset, or the same error code, offset and path. Error messages are not compared.
@Suite("Point codec v2 against a reference written from the spec")
struct StrokeCodecV2ReferenceTests {
    typealias Ref = ReferenceStrokeCodecV2
    typealias Outcome = StrokeCodecReferenceTests.Outcome
    typealias Differences = StrokeCodecReferenceTests.Differences

    /// A stroke's points and the width its radius is derived with.
    struct Stroke2 {
        var points: [StrokePoint]
        var width: Int32
    }

    /// A chunk's strokes, in one context, as the result of decoding them all.
    enum ChunkOutcome: Equatable, CustomStringConvertible {
        case points([[StrokePoint]], end: Int)
        case failure(LnoteError.Code, offset: Int?, path: String?, stroke: Int)

        var description: String {
            switch self {
            case let .points(p, end): "\(p.count) strokes, reader at \(end)"
            case let .failure(c, o, path, s): "\(c) at \(o.map(String.init) ?? "nil") in \(path ?? "-") (stroke \(s))"
            }
        }
    }

    static func outcome(_ bytes: [UInt8], widths: [Int32], range: Range<Int>? = nil, base: Int = 0, path: String? = nil,
                        reference: Bool) -> (ChunkOutcome, message: String) {
        var r = ByteReader(bytes, range: range ?? 0..<bytes.count, base: base, path: path)
        var production = StrokeCodecV2.Context()
        var mine = Ref.Context()
        var strokes: [[StrokePoint]] = []
        for (i, width) in widths.enumerated() {
            do {
                strokes.append(reference ? try Ref.decodePoints(&r, width: width, context: &mine)
                                         : try StrokeCodecV2.decodePoints(&r, width: width, context: &production))
            } catch let e as LnoteError {
                return (.failure(e.code, offset: e.offset, path: e.path, stroke: i), e.message)
            } catch {
                return (.failure(.invalidState, offset: nil, path: nil, stroke: i), "\(error)")
            }
        }
        return (.points(strokes, end: r.offset), "")
    }

    /// Decodes with both codecs and records a difference. Returns the reference's outcome.
    @discardableResult
    static func sameDecoding(_ bytes: [UInt8], widths: [Int32], range: Range<Int>? = nil, base: Int = 0,
                             path: String? = nil, _ log: Differences,
                             _ context: @autoclosure () -> String) -> (ChunkOutcome, message: String) {
        let actual = outcome(bytes, widths: widths, range: range, base: base, path: path, reference: false)
        let expected = outcome(bytes, widths: widths, range: range, base: base, path: path, reference: true)
        if actual.0 != expected.0 {
            log.record("decoders differ: production \(actual.0) (\(actual.message)), reference \(expected.0) (\(expected.message)): \(context())")
        }
        return expected
    }

    /// Encodes a chunk with both codecs, stroke by stroke in one context each, and records
    /// the first stroke whose bytes differ. Returns the reference's bytes.
    @discardableResult
    static func sameEncoding(_ strokes: [Stroke2], _ log: Differences, _ context: @autoclosure () -> String) -> [UInt8] {
        var production = StrokeCodecV2.Context()
        var mine = Ref.Context()
        var w = ByteWriter()
        w.append([0xAB, 0xCD])
        var expected: [UInt8] = []
        for (i, s) in strokes.enumerated() {
            let before = w.count
            StrokeCodecV2.encodePoints(s.points, width: s.width, context: &production, into: &w)
            let actual = Array(w.bytes[before...])
            let mineBytes = Ref.encodedPoints(s.points, width: s.width, context: &mine)
            expected += mineBytes
            if actual != mineBytes {
                let at = (0..<min(actual.count, mineBytes.count)).first { actual[$0] != mineBytes[$0] }
                    ?? min(actual.count, mineBytes.count)
                log.record("encoders differ at byte \(at) of stroke \(i) of \(strokes.count) (\(s.points.count) points, width \(s.width)): production \(actual.count) bytes, reference \(mineBytes.count): \(context())")
                return expected
            }
        }
        if Array(w.bytes.prefix(2)) != [0xAB, 0xCD] { log.record("encodePoints(into:) changed the bytes before it: \(context())") }
        return expected
    }

    // MARK: Inputs

    /// A value of a channel's range that is often extreme.
    static func extreme(_ c: Int, _ g: inout SplitMix64) -> Int64 {
        let r = Ref.ranges[c]
        switch g.below(5) {
        case 0: return r.lowerBound
        case 1: return r.upperBound
        case 2: return min(r.upperBound, max(r.lowerBound, 0))
        default: return r.lowerBound + Int64(g.below(UInt64(r.upperBound - r.lowerBound) + 1))
        }
    }

    /// One channel of `n` points: constant, linear, on an exact grid (often the chunk's
    /// `preferred` grid, so that the context's grid is met again), a small random walk, or
    /// extremes; clamped to the channel's range.
    static func channel(_ c: Int, count n: Int, preferred: Int64, _ g: inout SplitMix64) -> [Int64] {
        let r = Ref.ranges[c]
        let start = g.chance(0.3) ? extreme(c, &g) : (c == Ref.pressure ? Int64(g.below(1001)) : Int64(g.int(in: -5000...5000)) + (c == Ref.t ? 5000 : 0))
        var out: [Int64] = []
        func clamp(_ v: Int64) -> Int64 { min(r.upperBound, max(r.lowerBound, v)) }
        switch g.below(6) {
        case 0:
            out = Array(repeating: start, count: n)
        case 1:
            let step = g.chance(0.2) ? extreme(c, &g) - start : Int64(g.int(in: -40...40))
            out = (0..<n).map { clamp(start + Int64($0) * step) }
        case 2, 3:
            let grid: Int64 = g.chance(0.5) ? preferred : [1, 2, 3, 5, 10, 25, 100, 1 << 20, Int64(Int32.max)][Int(g.below(9))]
            var v = start
            var q = Int64(g.int(in: -3...3))
            for _ in 0..<n {
                out.append(clamp(v))
                q += Int64(g.int(in: -2...2))
                v = clamp(v + grid * q)
            }
        case 4:
            var v = start
            for _ in 0..<n {
                out.append(v)
                v = clamp(v + Int64(g.int(in: -3...3)) * (g.chance(0.05) ? 1 << Int64(g.below(33)) : 1))
            }
        default:
            out = (0..<n).map { _ in g.chance(0.5) ? extreme(c, &g) : start }
        }
        return out
    }

    /// An adversarial stroke: 0 to 3 points often, channels of every kind, a radius often
    /// derived, widths that are 0, negative or extreme.
    static func adversarialStroke(preferred: [Int64], _ g: inout SplitMix64) -> Stroke2 {
        let n: Int
        switch g.below(20) {
        case 0..<6: n = Int(g.below(4))
        case 6: n = 200 + Int(g.below(1800))
        default: n = 4 + Int(g.below(60))
        }
        let width: Int32 = [20, 0, -30, 1, 13, .max, .min, Int32(truncatingIfNeeded: g.next())][Int(g.below(8))]
        let v = (0..<5).map { channel($0, count: n, preferred: preferred[$0], &g) }
        var points = (0..<n).map { i in
            StrokePoint(x: Int32(v[0][i]), y: Int32(v[1][i]), pressure: UInt16(v[2][i]), radius: Int32(v[3][i]), t: UInt32(v[4][i]))
        }
        if g.chance(0.4) {
            for i in points.indices { points[i].radius = Int32(Ref.derivedRadius(width: width, pressure: Int64(points[i].pressure))) }
            // Sometimes all but one point derived.
            if !points.isEmpty, g.chance(0.2) { points[Int(g.below(UInt64(n)))].radius &+= 1 }
        }
        return Stroke2(points: points, width: width)
    }

    /// A chunk of strokes as a page codes them: handwriting of either profile (as lnote
    /// derives its radius, or not), adversarial strokes, the random model's points, mixed.
    static func chunk(_ seed: UInt64, maxStrokes: Int = 64) -> [Stroke2] {
        var g = SplitMix64(seed: seed)
        let preferred = (0..<5).map { _ in [1, 2, 10, 25, 7][Int(g.below(5))] as Int64 }
        let kind = g.below(4)
        var options = HandwritingGenerator.Options()
        options.profile = g.chance(0.5) ? .pen : .smooth
        if options.profile == .smooth { options.pointsPerStroke = 3...80 }
        var h = HandwritingGenerator(seed: seed, options: options)
        var m = RandomModel(seed: seed)
        var out: [Stroke2] = []
        for _ in 0..<(1 + Int(g.below(UInt64(maxStrokes)))) {
            switch kind == 3 ? g.below(3) : kind {
            case 0:
                let s = h.nextStroke()
                out.append(Stroke2(points: s.points, width: s.style.width))
            case 1:
                out.append(adversarialStroke(preferred: preferred, &g))
            default:
                out.append(Stroke2(points: m.points(), width: Int32(g.int(in: -50...50))))
            }
        }
        return out
    }

    // MARK: The reference on its own

    /// [PT2-1] [SNAP-37] The reference writes stroke T's point stream in the spec's version-2
    /// vector (4.8, first stroke of its chunk: the initial context) byte for byte, and reads
    /// it back.
    @Test("[PT2-1] [SNAP-37] the reference writes the stream of the 4.8 vector")
    func referenceWritesTheSpecVector() throws {
        let file = try #require(parseHexDump(try specVector("tiny-page-v2")))
        let fromSpec = Array(file[0x7B..<0x96])
        var c = Ref.Context()
        let mine = Ref.encodedPoints(TinyPage.pointsT, width: 20, context: &c)
        #expect(mine == fromSpec, "reference: \(hexDump(mine))")
        var r = ByteReader(fromSpec)
        var d = Ref.Context()
        #expect(try Ref.decodePoints(&r, width: 20, context: &d) == TinyPage.pointsT)
        #expect(r.isAtEnd)
        #expect(c == d)
        #expect(Ref.maxCount == UInt64(Stroke.maxPoints))
        // [IMP-6]'s radius, as the spec words it, is the model's.
        for width: Int32 in [20, 0, -30, 13, .max, .min] {
            for p: UInt16 in [0, 1, 499, 500, 999, 1000] {
                #expect(Ref.derivedRadius(width: width, pressure: Int64(p)) == Int64(Stroke.radius(width: width, pressure: p)))
            }
        }
    }

    /// [PT2-7] [PT2-9] The reference alone: every chunk round-trips (points, reader at the
    /// end, the same context), and whatever a mutated chunk decodes to re-encodes to exactly
    /// the bytes consumed.
    @Test("[PT2-7] [PT2-9] the reference round-trips and is canonical")
    func referenceRoundTripsAndIsCanonical() {
        var decodedMutations = 0
        for seed in testSeeds(0x5EED_0301, count: 60) {
            let strokes = Self.chunk(seed, maxStrokes: 12)
            var c = Ref.Context()
            var bytes: [UInt8] = []
            for s in strokes { bytes += Ref.encodedPoints(s.points, width: s.width, context: &c) }
            var r = ByteReader(bytes + [0x55], range: 0..<(bytes.count + 1), base: 9)
            var d = Ref.Context()
            do {
                for (i, s) in strokes.enumerated() {
                    let back = try Ref.decodePoints(&r, width: s.width, context: &d)
                    #expect(back == s.points, "seed \(seed), stroke \(i)")
                }
                #expect(r.offset == 9 + bytes.count, "seed \(seed)")
                #expect(c == d, "seed \(seed): contexts differ")
            } catch {
                Issue.record("seed \(seed): \(error)")
            }
            var g = SplitMix64(seed: seed)
            guard !bytes.isEmpty else { continue }
            for _ in 0..<8 {
                var mutated = bytes
                for _ in 0..<(1 + Int(g.below(2))) {
                    let i = Int(g.below(UInt64(mutated.count)))
                    mutated[i] ^= g.chance(0.6) ? 1 << UInt8(g.below(8)) : UInt8(truncatingIfNeeded: g.next())
                }
                var m = ByteReader(mutated)
                var e = Ref.Context(), f = Ref.Context()
                var again: [UInt8] = []
                do {
                    for s in strokes {
                        let p = try Ref.decodePoints(&m, width: s.width, context: &e)
                        again += Ref.encodedPoints(p, width: s.width, context: &f)
                    }
                    decodedMutations += 1
                    #expect(again == Array(mutated[0..<m.position]), "seed \(seed): not canonical")
                    #expect(e == f, "seed \(seed): contexts differ after a mutation")
                } catch {}
            }
        }
        #expect(decodedMutations > 0)
    }

    // MARK: Production against the reference

    /// [PT2-1] [PT2-3] [PT2-4] [PT2-5] [PT2-6] The same bytes as the reference for every chunk:
    /// both generator profiles, adversarial strokes (0 to 3 points, constant and linear
    /// channels, grids, extremes of `Int32`, `UInt32` and pressure 0 … 1000, derived and
    /// stored radii), the random model's points, one context across up to 64 strokes. Every
    /// mode is reached on every channel that can have it (checked, so that a change of the
    /// generators cannot silently narrow the test).
    @Test("[PT2-1] [PT2-3] [PT2-4] [PT2-5] [PT2-6] encoder matches the reference")
    func encoderMatchesReference() {
        let log = Differences("encoder v2")
        var modes = Array(repeating: Set<Int>(), count: 5)
        var derived = Set<Bool>()
        var strokesSeen = 0
        for seed in testSeeds(0x5EED_0302, count: 50) {
            let strokes = Self.chunk(seed)
            var c = Ref.Context()
            for s in strokes where s.points.count >= 1 {
                let v = s.points.map(Ref.values)
                let isDerived = v.allSatisfy { $0[Ref.radius] == Ref.derivedRadius(width: s.width, pressure: $0[Ref.pressure]) }
                derived.insert(isDerived)
                if v.count >= 3 {
                    for ch in 0..<5 where !(isDerived && ch == Ref.radius) {
                        modes[ch].insert(Ref.mode(v, channel: ch, contextGrid: c.grid[ch]).mode)
                    }
                }
                _ = Ref.encodedPoints(s.points, width: s.width, context: &c)
            }
            strokesSeen += strokes.count
            Self.sameEncoding(strokes, log, "seed \(seed)")
        }
        log.finish()
        #expect(derived == [false, true])
        for ch in 0..<5 {
            let all: Set<Int> = ch < Ref.pressure ? [0, 1, 2] : [0, 1, 2, 3]
            #expect(modes[ch] == all, "channel \(ch): modes \(modes[ch].sorted()) of \(all.sorted())")
        }
        #expect(strokesSeen > 1000)
    }

    /// [PT2-1] … [PT2-8] Valid chunks decode alike, with a base offset and a path, the reader
    /// ending at the same offset (bytes after the chunk are not read).
    @Test("[PT2-1] [PT2-2] [PT2-8] decoder matches the reference on valid chunks")
    func decoderMatchesReferenceOnValidChunks() {
        let log = Differences("valid chunks v2")
        for seed in testSeeds(0x5EED_0303, count: 100) {
            let strokes = Self.chunk(seed, maxStrokes: 20)
            var c = Ref.Context()
            var bytes: [UInt8] = []
            for s in strokes { bytes += Ref.encodedPoints(s.points, width: s.width, context: &c) }
            let result = Self.sameDecoding(bytes + [0, 1, 2], widths: strokes.map(\.width), range: 0..<(bytes.count + 3),
                                           base: Int(seed % 5000), path: "p\(seed % 7)", log, "seed \(seed)")
            if case .failure = result.0 { log.record("the reference rejects its own chunk: \(result.message), seed \(seed)") }
        }
        log.finish()
    }

    /// [PT2-2] [PT2-8] Every byte of some chunks replaced by several values, and every cut:
    /// the same outcome, offsets counted from a base, with a path. The reference meets every
    /// rule of [PT2-2] and [PT2-8] on these inputs (checked), so each is compared at least once.
    @Test("[PT2-2] [PT2-8] decoder matches the reference on every byte replaced and every cut")
    func decoderMatchesReferenceOnEveryByteAndCut() {
        let log = Differences("mutations v2")
        var rules = Set<String>()
        func note(_ result: (ChunkOutcome, message: String)) {
            if case .failure = result.0, let end = result.message.firstIndex(of: ":") {
                rules.insert(String(result.message[..<end]))
            }
        }
        var cases = 0
        for seed in testSeeds(0x5EED_0304, count: 4) {
            var strokes = Self.chunk(seed, maxStrokes: 4)
            for i in strokes.indices where strokes[i].points.count > 40 { strokes[i].points.removeLast(strokes[i].points.count - 40) }
            var c = Ref.Context()
            var bytes: [UInt8] = []
            var bitsStarts: [Int] = []  // where each stroke's bits begin (modes, first values)
            for s in strokes {
                let one = Ref.encodedPoints(s.points, width: s.width, context: &c)
                var r = ByteReader(one)
                if (try? r.varint()) ?? 0 > 0, (try? r.varint()) != nil { bitsStarts.append(bytes.count + r.position) }
                bytes += one
            }
            let widths = strokes.map(\.width)
            var g = SplitMix64(seed: seed)
            let base = Int(seed % 1000)
            // Every bit of the first bytes of each stroke's bits flipped: the modes, grids and
            // first values, where rules 1, 3 and 5 live.
            for start in bitsStarts {
                for bit in 0..<(8 * min(6, bytes.count - start)) {
                    var b = bytes
                    b[start + bit / 8] ^= 1 << UInt8(bit % 8)
                    cases += 1
                    note(Self.sameDecoding(b, widths: widths, base: base, path: "f", log, "seed \(seed), bit \(bit) after \(start)"))
                }
            }
            for i in bytes.indices {
                for v in [bytes[i] ^ 0x01, bytes[i] ^ 0x80, bytes[i] ^ 0x10, bytes[i] &+ 1, 0x00, 0xFF,
                          UInt8(truncatingIfNeeded: g.next())] where v != bytes[i] {
                    var b = bytes
                    b[i] = v
                    cases += 1
                    note(Self.sameDecoding(b, widths: widths, base: base, path: "m", log, "seed \(seed), byte \(i) = \(v)"))
                }
                cases += 1
                note(Self.sameDecoding(Array(bytes[0..<i]), widths: widths, base: base, path: "cut", log, "seed \(seed), cut at \(i)"))
            }
        }
        // Noise behind a plausible header: a count, a length that fits, random bits biased
        // towards zeros (long unary runs, escapes, gamma codes).
        for seed in testSeeds(0x5EED_0305, count: 1500) {
            var g = SplitMix64(seed: seed)
            let n = [1, 2, 3, 4, 9, 30, 1_000, 1_048_577][Int(g.below(8))]
            let bits = (0..<(1 + Int(g.below(30)))).map { _ in
                UInt8(truncatingIfNeeded: g.chance(0.5) ? g.next() & g.next() & g.next() : g.next())
            }
            var w = ByteWriter()
            w.varint(UInt64(n)); w.varint(UInt64(bits.count)); w.append(bits)
            let width: Int32 = [20, 0, -7][Int(g.below(3))]
            cases += 1
            note(Self.sameDecoding(w.bytes, widths: [width, width], base: 3, path: "n", log, "seed \(seed), noise"))
        }
        // Hand-built: three points whose constant pressure is coded in mode 0 (its second
        // difference 0) instead of linear: x 0, 1, 3; y 0, 1, 3; pressure 500; t 0, 4, 8;
        // a radius derived with width 0.
        var w = Ref.BitWriter()
        var c = Ref.Context()
        w.write(true)
        for mode: UInt64 in [0, 0, 0, 3] { w.write(mode, width: 2) }
        for ch in [Ref.x, Ref.y, Ref.pressure, Ref.t] { Ref.writeRice(0, state: &c.firstState[ch], to: &w) }
        for (ch, step) in [(Ref.x, Int64(1)), (Ref.y, 1), (Ref.pressure, 0), (Ref.t, 4)] {
            Ref.writeRice(Ref.zigzag(step), state: &c.stepState[ch], to: &w)
        }
        for (ch, dd) in [(Ref.x, Int64(1)), (Ref.y, 1), (Ref.pressure, 0)] {
            Ref.writeRice(Ref.zigzag(dd), state: &c.secondState[ch], to: &w)
        }
        let linear = [3, UInt8(w.bytes.count)] + w.bytes
        let handBuilt = Self.sameDecoding(linear, widths: [0], base: 1, path: "h", log, "hand-built linear pressure in mode 0")
        // Pressure's second differences begin at bit 63 (1 + 4·2 mode bits, four first values of
        // 7 bits at k = 6, four first steps of 5 bits at k = 4, x's and y's of 3 bits at
        // k = 2): byte 7 of the bits, after n and L, from base 1.
        #expect(handBuilt.0 == .failure(.corrupt, offset: 1 + 2 + 7, path: "h", stroke: 0), "\(handBuilt)")
        note(handBuilt)
        log.finish()
        let expected: Set<String> = [
            "varint cut", "varint not shortest", "[PT2-2] count", "[PT2-2] L", "[PT2-2] bits",
            "[PT2-8] 1 linear x or y", "[PT2-8] 1 mode 1 on grid 1", "[PT2-8] 1 grid",
            "[PT2-8] 2 unary", "[PT2-8] 2 escape", "[PT2-8] 2 unary dd", "[PT2-8] 2 escape dd", "[PT2-8] 3 first value", "[PT2-8] 3 last value",
            "[PT2-8] 4 value", "[PT2-8] 5 linear", "[PT2-8] 5 gcd", "[PT2-8] 6 derived",
            "[PT2-8] 7 past L", "[PT2-8] 7 unused byte", "[PT2-8] 7 padding",
        ]
        #expect(expected.subtracting(rules).isEmpty, "rules never met: \(expected.subtracting(rules).sorted())")
        #expect(cases > 3_000)
    }

    // MARK: Element records, version 2

    /// [SNAP-16] The Lamport runs of one replica's operations `(counter, lamport)`, by counter
    /// from 1: where the running maximum's `lamport − counter` changes.
    static func runs(_ ops: [(UInt64, UInt64)]) -> [LamportRun] {
        var out: [LamportRun] = []
        var greatest: UInt64 = 0
        for (c, l) in ops.sorted(by: { $0.0 < $1.0 }) {
            greatest = max(greatest, l)
            if out.last?.offset != greatest - c { out.append(LamportRun(from: c, offset: greatest - c)) }
        }
        return out
    }

    /// Element `i`'s key on a layered page: layer `i + 1` (the *next layer* of the one
    /// before), but every fifth element `i` shares element `i − 1`'s layer with a fraction, so
    /// that it is coded as a prefix of a next-layer key's encoding, and the element after it
    /// is not the next layer.
    static func layeredKey(_ i: Int) -> ZKey {
        i % 5 == 4 ? ZKey(layer: Int64(i), path: [], fraction: [0x80]) : ZKey(layer: Int64(i + 1), path: [], fraction: [])
    }

    /// Pages written by lnote: random pages (strokes, images, history), and pages of more than
    /// 64 strokes of both generator profiles, with next-layer keys or fraction keys.
    static func pages(_ seed: UInt64) -> [PageState] {
        var out = [PageSnapshot.canonicalized(PageSnapshotV2Tests.page(seed: seed, elements: 12))]
        var g = SplitMix64(seed: seed)
        var options = HandwritingGenerator.Options()
        options.profile = g.chance(0.5) ? .pen : .smooth
        options.pointsPerStroke = 3...40
        let strokes = HandwritingGenerator.strokes(seed: seed, count: 65 + Int(g.below(80)), options: options)
        let layered = g.chance(0.5)
        let replicas = [ReplicaID(0xB0), ReplicaID(0x1C3)]
        var page = PageState(page: PageID())
        var counters = [UInt64](repeating: 0, count: 2)
        var fraction: [UInt8] = [0x80]
        for (i, s) in strokes.enumerated() {
            let who = g.chance(0.8) ? 0 : 1
            counters[who] += 1
            fraction = i % 100 == 99 ? fraction + [0x80] : [UInt8](fraction.dropLast()) + [fraction.last! + 1]
            page.elements.append(ElementRecord(
                id: OpID(replica: replicas[who], counter: counters[who]), lamport: UInt64(i + 1),
                wallTime: 1_700_000_000_000 + Int64(i) * Int64(g.below(2000)), content: .stroke(s),
                z: LWWRegister(layered ? Self.layeredKey(i) : ZKey(layer: 0, path: [], fraction: fraction))))
        }
        page.clock = VectorClock(zip(replicas, counters).filter { $0.1 > 0 })
        page.maxLamport = UInt64(strokes.count)
        page.contexts = page.clock.replicas.map { r in
            let own = page.elements.filter { $0.id.replica == r }
            return ReplicaContext(replica: r, clock: page.clock,
                                  lamports: Self.runs(own.map { ($0.id.counter, $0.lamport) }))
        }
        out.append(page)
        return out
    }

    /// [SNAP-33] [SNAP-34] [SNAP-35] [SNAP-37] A reader of version-2 element records written
    /// from the spec (`ReferenceElementsV2`) reads the spec's vector and every page lnote
    /// writes (chunks of 64 records, each from the initial context) to lnote's elements.
    @Test("[SNAP-33] [SNAP-34] [SNAP-35] [SNAP-37] [SNAP-42] element records of versions 2 and 3 read by a reference reader")
    func elementRecordsMatchReference() throws {
        let vector = try #require(parseHexDump(try specVector("tiny-page-v2")))
        let (body, replicas) = try ReferenceElementsV2.elementsSection(of: vector)
        #expect(try ReferenceElementsV2.decode(vector, range: body, replicas: replicas) == PageSnapshot.decode(vector).state.elements)
        var chunked = 0, layeredPrefixes = 0
        for seed in testSeeds(0x5EED_0306, count: 12) {
            for state in Self.pages(seed) {
                do {
                    try PageSnapshot.validate(state)
                } catch {
                    Issue.record("seed \(seed): the test's page is invalid: \(error)")
                    continue
                }
                for version: UInt16 in [2, 3, 4] {
                let file = PageSnapshot.encode(state, coveredLogOffset: 1, logIncarnation: 2, version: version)
                let (body, replicas) = try ReferenceElementsV2.elementsSection(of: file)
                do {
                    var streams: [Range<Int>] = [], prefixes: [Int] = []
                    let mine = try ReferenceElementsV2.decode(file, range: body, replicas: replicas,
                                                              streams: &streams, prefixes: &prefixes)
                    #expect(mine == state.elements, "seed \(seed), \(state.elements.count) elements")
                    if mine.count > 64 { chunked += 1 }
                    // Element 4 of a layered page is coded against element 3's next-layer key:
                    // its layer and step count (2 bytes) are shared with that key's encoding.
                    if state.elements.count > 64, state.elements[4].z.value == Self.layeredKey(4) {
                        #expect(Array(prefixes[3...6]) == [-1, 2, 0, -1], "seed \(seed): z prefixes \(prefixes.prefix(8))")
                        layeredPrefixes += 1
                    }
                } catch {
                    Issue.record("seed \(seed), version \(version): the reference rejects lnote's page: \(error)")
                }
                }
            }
        }
        #expect(chunked >= 20 && layeredPrefixes >= 4, "\(chunked) chunked pages, \(layeredPrefixes) layered")
    }

    /// [SNAP-34] [SNAP-36] Every byte of the elements section of some pages replaced (the file
    /// resealed): whatever lnote accepts, the reference reads to the same elements; whatever
    /// the reference rejects by a rule of [SNAP-34] … [SNAP-36], lnote rejects as `corrupt`
    /// at that offset or before it (the reference does not check 4.4's invariants).
    @Test("[SNAP-34] [SNAP-35] [SNAP-36] mutated element records: lnote and the reference agree")
    func mutatedElementRecords() throws {
        let log = Differences("element records v2")
        var accepted = 0, rejectedByRule = 0
        for (k, seed) in testSeeds(0x5EED_0307, count: 3).enumerated() {
            var g = SplitMix64(seed: seed)
            let state = PageSnapshot.canonicalized(PageSnapshotV2Tests.page(seed: seed, elements: 8))
            let file = PageSnapshot.encode(state, coveredLogOffset: 1, logIncarnation: 2, version: UInt16(2 + k))
            let (body, replicas) = try ReferenceElementsV2.elementsSection(of: file)
            // The bytes of the records but their point streams (the tests above mutate those).
            var streams: [Range<Int>] = [], prefixes: [Int] = []
            _ = try ReferenceElementsV2.decode(file, range: body, replicas: replicas, streams: &streams, prefixes: &prefixes)
            for i in body where !streams.contains(where: { $0.dropFirst(2).contains(i) }) {
                for v in [file[i] ^ 0x01 ^ UInt8(truncatingIfNeeded: g.next() & 0xFE)] where v != file[i] {
                    var b = file
                    b[i] = v
                    b = PageSnapshotTests.reseal(b)
                    let production: Result<[ElementRecord], LnoteError> = Result { try PageSnapshot.decode(b).state.elements }
                        .mapError { $0 as? LnoteError ?? LnoteError(.invalidState, "\($0)") }
                    let mine = Result { try ReferenceElementsV2.decode(b, range: body, replicas: replicas) }
                    switch (production, mine) {
                    case let (.success(p), .success(m)):
                        accepted += 1
                        if p != m { log.record("byte \(i) = \(v): lnote and the reference read different elements, seed \(seed)") }
                    case let (.success, .failure(e)):
                        log.record("byte \(i) = \(v): lnote accepts, the reference rejects: \(e), seed \(seed)")
                    case let (.failure(e), .failure(f as ReferenceElementsV2.Fault))
                        where f.message.hasPrefix("[SNAP-34]") || f.message.hasPrefix("[SNAP-35]") || f.message.hasPrefix("[SNAP-36]")
                            || f.message.hasPrefix("[SNAP-43]"):
                        rejectedByRule += 1
                        // lnote may find an earlier fault that this reader does not look for
                        // (the invariants of 4.4), never a later one.
                        if e.code != .corrupt || (e.offset ?? .max) > f.offset {
                            log.record("byte \(i) = \(v): lnote \(e.code) at \(e.offset ?? -1) (\(e.message)), reference \(f.message) at \(f.offset), seed \(seed)")
                        }
                    default:
                        break
                    }
                }
            }
        }
        log.finish()
        #expect(accepted > 0 && rejectedByRule > 0, "\(accepted) accepted, \(rejectedByRule) rejected by a rule of SNAP-34 … 36")
    }

    /// [PT2-8] 2 A needless escape of a second difference whose 40 bits run past the stream's
    /// bits (read as zeros) is reported, like every bad code, at the byte where it begins: an
    /// error offset always names a byte of the input. (lnote once reported the byte after the
    /// escape's bits, up to 5 bytes past the input.)
    @Test("[PT2-8] a needless escape that runs past the bits is reported where it begins")
    func escapePastTheEnd() {
        var w = Ref.BitWriter()
        var c = Ref.Context()
        w.write(true)  // radius derived (width 0, radius 0)
        for mode: UInt64 in [0, 0, 3, 3] { w.write(mode, width: 2) }
        for ch in [Ref.x, Ref.y, Ref.pressure, Ref.t] { Ref.writeRice(0, state: &c.firstState[ch], to: &w) }
        for ch in [Ref.x, Ref.y, Ref.pressure, Ref.t] { Ref.writeRice(Ref.zigzag(1), state: &c.stepState[ch], to: &w) }
        // x's second difference: an escape whose 40 bits are all past the bits.
        let codeBit = w.bits.count
        for _ in 0..<24 { w.write(false) }
        w.write(true)
        let stream = [3, UInt8(w.bytes.count)] + w.bytes
        let end = 100 + stream.count
        let lnote = Self.outcome(stream, widths: [0], base: 100, path: "e", reference: false).0
        let reference = Self.outcome(stream, widths: [0], base: 100, path: "e", reference: true).0
        #expect(lnote == reference)
        // [PT2-8] 2: at the byte where the code begins, inside the input.
        #expect(lnote == .failure(.corrupt, offset: 100 + 2 + codeBit / 8, path: "e", stroke: 0))
        if case let .failure(_, offset?, _, _) = lnote {
            #expect(offset < end, "offset \(offset), input ends at \(end)")
        }
    }

    /// The encoder divides exact multiples of a grid by a shift and a multiplication by the
    /// inverse of the grid's odd part: the quotient must be the division's, for negative
    /// steps, large grids and steps near the limits of a difference of two `Int32`s.
    @Test("[PT2-4] grid quotients by the inverse of the odd part equal the division's")
    func gridQuotients() {
        let seed: UInt64 = 0x9_0D1
        var g = SplitMix64(seed: seed)
        var checked = 0
        for _ in 0..<20_000 {
            let grids: [UInt64] = [1, 2, 3, 10, 25, 100, 1 << 20, UInt64(Int32.max), g.next() % (1 << 32) + 1]
            let grid = grids[Int(g.next() % 9)]
            let limit = Int64(UInt32.max) / Int64(grid)
            let k = Int64(bitPattern: g.next()) % (limit + 1)
            let step = k * Int64(grid)
            let shift = Int64(grid.trailingZeroBitCount)
            let quotient = (step &>> shift) &* StrokeCodecV2.oddInverse(grid &>> UInt64(shift))
            #expect(quotient == step / Int64(grid), "seed \(seed): step \(step), grid \(grid)")
            checked += 1
        }
        #expect(checked == 20_000)
    }
}
