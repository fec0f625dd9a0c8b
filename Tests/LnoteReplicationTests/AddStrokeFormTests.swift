import Foundation
import Testing
import LnoteModel
import LnoteTestSupport
@testable import LnoteReplication

/// `addStroke3` (0x0A), the written form of an add of a stroke, and `addStroke2` (0x09) and
/// `addStroke` (0x06), those written before it, against their hash form `add` (0x01):
/// `Protocol/operation-log.md` [LOG-22], [LOG-24], [LOG-25], [LOG-29], [LOG-32];
/// sync-protocol.md [SYNC-50].
@Suite struct AddStrokeFormTests {
    static let me = ReplicaID(0xB0), other = ReplicaID(0x0123_4567_89AB_CDEF)

    /// Adds of `strokes` as one replica draws them (the implied z key), a few of them placed
    /// below the previous one (an explicit z key) and some made after another replica's
    /// operations (a context with entries).
    static func ops(_ strokes: [Stroke], seed: UInt64) throws -> [Op] {
        var rng = SeededRNG(seed: seed)
        var mine = PageReplica(page: PageID()), theirs = PageReplica(page: PageID())
        var out: [Op] = []
        var last: ElementID?
        for (i, s) in strokes.enumerated() {
            if rng.next() % 8 == 0 {
                let op = try theirs.add(.stroke(s), by: other, wallTime: Int64(i))
                _ = try mine.receive([op])
                out.append(op)
                continue
            }
            let below = rng.next() % 5 == 0 ? last : nil
            let op = try mine.add(.stroke(s), by: me, wallTime: 1_700_000_000_000 + Int64(i) * 900, below: below)
            last = op.id
            out.append(op)
        }
        return out
    }

    /// Strokes at the edges of [LOG-23] and of the codec: 1, 2 and 3 points, constant
    /// channels, extreme coordinates, radii, pressures, times and widths.
    static func adversarialStrokes() -> [Stroke] {
        let lim = Int32(Quantization.coordinateLimit)
        func p(_ x: Int32, _ y: Int32, _ pr: UInt16 = 500, _ r: Int32 = 0, _ t: UInt32 = 0) -> StrokePoint {
            StrokePoint(x: x, y: y, pressure: pr, radius: r, t: t)
        }
        let styles = [InkStyle(tool: .pen, color: .black, width: 20),
                      InkStyle(tool: .highlighter, color: RGBA(packed: 0xFFFF_00FF), width: 100_000),
                      InkStyle(tool: .pencil, color: RGBA(packed: 0), width: 1),
                      InkStyle(tool: .marker, color: RGBA(packed: 0x1234_5678), width: 37)]
        var lists: [[StrokePoint]] = []
        lists.append([p(0, 0)])
        lists.append([p(lim, -lim, 1000, 100_000, 0)])
        lists.append([p(-lim, lim, 0, 0, 0), p(lim, -lim, 1000, 100_000, 86_400_000)])
        lists.append([p(5, 5), p(5, 5), p(5, 5)])
        lists.append([p(lim, lim, 0, 0, 0), p(-lim, -lim, 1000, 100_000, 1), p(lim, lim, 0, 0, 86_400_000)])
        lists.append([p(1, 2, 300, 7, 0), p(3, 4, 300, 7, 4), p(5, 6, 300, 7, 8), p(7, 8, 300, 7, 12)])
        var ramp: [StrokePoint] = []
        for i in 0..<50 {
            ramp.append(p(Int32(i * 25), Int32(i * 75), UInt16(i * 10), Int32(i), UInt32(i * 4)))
        }
        lists.append(ramp)
        var zigzag: [StrokePoint] = []
        for i in 0..<9 {
            let x: Int32 = i % 2 == 0 ? lim : -lim
            zigzag.append(p(x, 0, UInt16(i % 2 * 1000), 0, UInt32(i) * 10_800_000))
        }
        lists.append(zigzag)
        var out: [Stroke] = []
        for (i, pts) in lists.enumerated() {
            for style in styles {
                out.append(Stroke(style: style, points: pts))
                // The radius the import derives from pressure and width ([PT2-3]'s `derived` bit).
                out.append(Stroke(style: style, points: pts.map {
                    var q = $0
                    q.radius = Stroke.radius(width: style.width, pressure: $0.pressure)
                    return q
                }))
            }
            _ = i
        }
        return out
    }

    static func pen(_ count: Int, seed: UInt64) -> [Stroke] {
        var o = HandwritingGenerator.Options()
        o.profile = .pen
        return HandwritingGenerator.strokes(seed: seed, count: count, options: o)
    }

    /// [LOG-22] [LOG-24] [LOG-29] [LOG-32] [SYNC-50] Every add of a stroke is written as an
    /// addStroke3; all four forms decode to the operation, re-encode to themselves, and have
    /// one content hash, the SHA-256 of the hash form's type and payload.
    @Test("[LOG-24] [LOG-29] [LOG-32] [SYNC-50] every form round-trips and hashes alike", arguments: [1, 2, 3] as [UInt64])
    func roundTripsAndHashes(seed: UInt64) throws {
        let strokes = HandwritingGenerator.strokes(seed: seed, count: 120) + Self.pen(120, seed: seed)
            + Self.adversarialStrokes()
        let ops = try Self.ops(strokes, seed: seed)
        var explicit = 0, withContext = 0
        for op in ops {
            let written = OperationCodec.frame(op), hashForm = OperationCodec.frame(op, form: .hash)
            let v1 = OperationCodec.frame(op, form: .writtenV1), v2 = OperationCodec.frame(op, form: .writtenV2)
            #expect(written.type == 0x0A && v2.type == 0x09 && v1.type == 0x06 && hashForm.type == 0x01, "seed \(seed), \(op.id)")
            #expect(try OperationCodec.decode(written) == op, "seed \(seed), \(op.id)")
            #expect(try OperationCodec.decode(v1) == op, "seed \(seed), \(op.id)")
            #expect(try OperationCodec.decode(v2) == op, "seed \(seed), \(op.id)")
            #expect(ContentHash.of(v1) == SHA256.hash([0x01] + hashForm.payload), "seed \(seed), \(op.id)")
            #expect(ContentHash.of(v2) == SHA256.hash([0x01] + hashForm.payload), "seed \(seed), \(op.id)")
            #expect(try OperationCodec.decode(hashForm) == op, "seed \(seed), \(op.id)")
            #expect(OperationCodec.encode(op) == written.encoded)
            let expected = SHA256.hash([0x01] + hashForm.payload)
            #expect(ContentHash.of(written) == expected && ContentHash.of(hashForm) == expected
                    && ContentHash.of(op) == expected && ContentHash.of(written, decoded: op) == expected,
                    "seed \(seed), \(op.id)")
            if case .add(_, let z) = op.body, z != OperationCodec.impliedZ(lamport: op.lamport) { explicit += 1 }
            if op.context.entries.count > 1 { withContext += 1 }
        }
        #expect(explicit > 0 && withContext > 0, "the seed exercises explicit z keys and contexts")
        // Images and every other kind keep their one encoding: written form = hash form.
        for op in OperationCodecTests.sampleOps() {
            if case .add(.stroke, _) = op.body { continue }
            #expect(OperationCodec.frame(op) == OperationCodec.frame(op, form: .hash))
            #expect(ContentHash.of(OperationCodec.frame(op)) == SHA256.hash([OperationCodec.frame(op).type] + OperationCodec.frame(op).payload))
        }
    }

    /// [LOG-22] [LOG-24] Every byte of addStroke frames replaced (by 1, 0x80 and 0xFF
    /// xor-ed in and by a seeded random value), and every cut: the decoder throws a typed
    /// `LnoteError` at an offset inside the payload, or decodes to an operation whose written
    /// form is exactly the mutated bytes (one encoding) and whose hash is its hash form's.
    @Test("[LOG-24] [LOG-29] [LOG-32] every byte of addStroke, addStroke2 and addStroke3 frames mutated, every cut",
          arguments: [0x06, 0x09, 0x0A] as [UInt8])
    func mutatedFrames(type: UInt8) throws {
        let form = OperationCodec.form(ofType: type)
        let seed: UInt64 = 24
        var rng = SeededRNG(seed: seed)
        let strokes = Array(Self.pen(12, seed: seed)) + Array(HandwritingGenerator.strokes(seed: seed, count: 4))
            + Self.adversarialStrokes().filter { $0.points.count <= 3 }.prefix(6)
        let ops = try Self.ops(strokes, seed: seed)
        var cases = 0, rejected = 0, accepted = 0
        func check(_ payload: [UInt8], _ what: String) {
            cases += 1
            let base = 1000
            do {
                let op = try OperationCodec.decode(Frame(type: type, payload: payload), base: base, path: "p.log")
                accepted += 1
                #expect(OperationCodec.frame(op, form: form).payload == payload, "seed \(seed): \(what) decodes but does not re-encode")
                #expect(ContentHash.of(Frame(type: type, payload: payload)) == ContentHash.of(op))
            } catch let e as LnoteError {
                rejected += 1
                #expect(e.code == .corrupt || e.code == .truncated, "seed \(seed): \(what): \(e)")
                // [PT2-8] 2: a code that starts in the zeros read past the stream's last byte
                // (after a code whose low bits ran into them: up to 27 bits, a state's largest
                // parameter) is reported where it starts, a few bytes past the payload's end.
                #expect(e.path == "p.log" && (e.offset.map { $0 >= base - 1 && $0 <= base + payload.count + 4 } ?? false),
                        "seed \(seed): \(what): offset \(String(describing: e.offset)) outside the payload of \(payload.count): \(e.message)")
            } catch {
                Issue.record("seed \(seed): \(what): untyped error \(error)")
            }
        }
        for op in ops {
            let payload = OperationCodec.frame(op, form: form).payload
            for i in payload.indices {
                for x in [UInt8(1), 0x80, 0xFF, UInt8.random(in: 1...255, using: &rng)] {
                    var m = payload
                    m[i] ^= x
                    check(m, "\(op.id) byte \(i) ^ \(x)")
                }
            }
            for cut in 0..<payload.count { check(Array(payload[..<cut]), "\(op.id) cut at \(cut)") }
            check(payload + [0], "\(op.id) with a trailing byte")
        }
        #expect(rejected > 0 && cases == rejected + accepted)
        ReliabilityReport.record(family: "bit flips", detail: "frames of type 0x\(String(type, radix: 16)): every byte xor-ed 4 ways, every cut (seed \(seed))",
                                 cases: cases, corrupted: 0)
    }

    /// [LOG-24] [LOG-29] What the writer may not write: a written-out implied z key, unknown
    /// flag bits, a Lamport timestamp the context cannot give; in an addStroke2, opaque black
    /// written out.
    @Test("[LOG-24] [LOG-29] [LOG-32] non-canonical compact stroke payloads are corrupt", arguments: [0x06, 0x09, 0x0A] as [UInt8])
    func specificRejections(type: UInt8) throws {
        let version = try #require(OperationCodec.compactVersion(ofType: type))
        let version2 = version >= 2
        let form = OperationCodec.form(ofType: type)
        let s = Stroke(style: InkStyle(tool: .pencil, color: .black, width: 20),
                       points: [StrokePoint(x: 10, y: 20, pressure: 500, radius: 0, t: 0)])
        var page = PageReplica(page: PageID())
        let op = try page.add(.stroke(s), by: Self.me, wallTime: 7)
        let good = OperationCodec.frame(op, form: form).payload
        // Header: replica 8, counter 1, wall time 1, context 1: flags at 11. An addStroke2
        // implies the black ink (bit 3) and writes no colour.
        #expect(good[11] == ToolKind.pencil.rawValue | (version2 ? 0b1000 : 0))
        #expect(good.count == (version2 ? 21 : 25), "\(good.count) bytes")
        func error(_ payload: [UInt8]) -> LnoteError? {
            do { _ = try OperationCodec.decode(Frame(type: type, payload: payload), base: 9); return nil }
            catch { return error as? LnoteError }
        }
        for bit in (version2 ? 4 : 3)..<8 {
            var m = good
            m[11] |= UInt8(1 << bit)
            let e = error(m)
            #expect(e?.code == .corrupt && e?.offset == 9 + 11, "flag bit \(bit)")
        }
        if version2 {
            // Black written out where bit 3 implies it: corrupt at the colour; another
            // colour written out decodes to it.
            let black = Array(good[..<11]) + [good[11] & ~0b1000, 0xFF, 0, 0, 0] + Array(good[12...])
            let e = error(black)
            #expect(e?.code == .corrupt && e?.offset == 9 + 12 && e?.message.contains("black") == true, "\(String(describing: e))")
            let red = Array(good[..<11]) + [good[11] & ~0b1000, 0xFF, 0, 0, 0xD0] + Array(good[12...])
            let decoded = try OperationCodec.decode(Frame(type: type, payload: red))
            guard case .add(.stroke(let t), _) = decoded.body else { Issue.record("not a stroke"); return }
            #expect(t.style.color == RGBA(r: 0xD0, g: 0, b: 0) && t.points == s.points)
        }
        // The implied key (layer = lamport 1, no path, empty fraction) written out.
        var w = ByteWriter()
        ElementCodec.encode(ZKey(layer: 1), into: &w)
        var m = Array(good[..<11]) + [good[11] | 0b100] + w.bytes + Array(good[12...])
        var e = error(m)
        #expect(e?.code == .corrupt && e?.offset == 9 + 12 && e?.message.contains("implied") == true, "\(String(describing: e))")
        // Another key written out is fine and decodes to it.
        w = ByteWriter()
        ElementCodec.encode(ZKey(layer: 1, fraction: [0x80]), into: &w)
        m = Array(good[..<11]) + [good[11] | 0b100] + w.bytes + Array(good[12...])
        #expect(error(m) == nil)
        // A context whose sum passes 2⁶²: corrupt at the context.
        let huge = Op(id: OpID(replica: Self.me, counter: 1), lamport: 1, context: VectorClock([(Self.other, OpValidator.maxLamport)]),
                      wallTime: 0, body: .add(.stroke(s), z: ZKey(layer: 1)))
        var hw = ByteWriter()
        OperationCodec.encodeAddStroke(huge, s, ZKey(layer: 1), version: version, into: &hw)
        e = error(hw.bytes)
        #expect(e?.code == .corrupt && e?.offset == 9 + 8 + 1 + 1, "\(String(describing: e))")
    }

    /// [LOG-25] [LOG-20] A type the reader does not know is refused as corrupt, naming the
    /// type and the type byte's offset: what lnote before `addStroke` (which knew 0x01–0x05
    /// and 0x20–0x28 only) does with 0x06. Today's reader knows 0x06 and refuses the rest.
    @Test("[LOG-25] an unknown type is corrupt at its type byte")
    func olderReadersRejectTheType() throws {
        var page = PageReplica(page: PageID())
        let op = try page.add(.stroke(Self.pen(1, seed: 5)[0]), by: Self.me, wallTime: 1)
        let payload = OperationCodec.frame(op).payload
        let older: Set<UInt8> = Set(0x01...0x05).union(0x20...0x28)
        for type in UInt8.min...UInt8.max where OperationCodec.Kind(rawValue: type) == nil {
            #expect(!older.contains(type))
            do {
                _ = try OperationCodec.decode(Frame(type: type, payload: payload), base: 50, path: "x.log")
                Issue.record("type \(type) accepted")
            } catch let e as LnoteError {
                #expect(e.code == .corrupt && e.offset == 49 && e.message == "unknown operation type 0x\(String(type, radix: 16))")
            }
        }
        #expect(OperationCodec.Kind(rawValue: 0x06) == .addStroke && !older.contains(0x06))
        #expect(OperationCodec.Kind(rawValue: 0x09) == .addStroke2 && !older.contains(0x09))
        #expect(OperationCodec.Kind(rawValue: 0x0A) == .addStroke3 && !older.contains(0x0A))
    }

    /// [PT2-10] Strokes whose few points are far apart and off any grid — corners of a
    /// hand-drawn box, a fast scribble, a jump across the page — have second differences in
    /// the thousands to hundreds of thousands: with parameters up to 14 an addStroke2 or
    /// addStroke3 frame is never more than a byte longer than the addStroke frame of the same
    /// operation (a colour written in both), where parameters capped at 7 made each such value
    /// a 65-bit escape.
    @Test("[PT2-10] far-apart points cost an addStroke2 or addStroke3 no more than an addStroke")
    func farApartPoints() throws {
        let seed: UInt64 = 0x2910
        var g = SplitMix64(seed: seed)
        var page = PageReplica(page: PageID())
        let style = InkStyle(tool: .pen, color: RGBA(r: 0x20, g: 0x40, b: 0xD0), width: 20)
        var i = 0
        // Jumps of up to 10,000 pt a point: second differences up to 393,216 tenths are coded
        // without an escape ([PT2-10]; past that, 13.9 m between points, they are escaped).
        for spread in [500, 3_000, 20_000, 95_000] as [UInt64] {
            for count in [4, 8, 16, 40] {
                var points: [StrokePoint] = []
                var x: Int64 = 50_000, y: Int64 = 50_000
                for j in 0..<count {
                    x += Int64(g.next() % (2 * spread + 1)) - Int64(spread)
                    y += Int64(g.next() % (2 * spread + 1)) - Int64(spread)
                    points.append(StrokePoint(x: Int32(x), y: Int32(y), t: UInt32(j * 8)))
                }
                let op = try page.add(.stroke(Stroke(style: style, points: points)), by: Self.me, wallTime: 1_700_000_000_000 + Int64(i))
                i += 1
                let v3 = OperationCodec.encode(op), v1 = OperationCodec.encode(op, form: .writtenV1)
                let v2 = OperationCodec.encode(op, form: .writtenV2)
                #expect(v3.count <= v1.count + 1 && v2.count <= v1.count + 1,
                        "seed \(seed): \(count) points ±\(spread): addStroke3 \(v3.count) B, addStroke2 \(v2.count) B, addStroke \(v1.count) B")
                #expect(try OperationCodec.decode(Frame.decodeAll(v3)[0]) == op, "seed \(seed)")
            }
        }
    }

    /// Issue 15 target 1: the journal's add-stroke frames take at most 4.0 bytes per point
    /// (frame header, ids, clock, style and points), on both ink profiles, losslessly.
    @Test("[LOG-24] addStroke frames: at most 4 bytes per point on both profiles")
    func density() throws {
        for (label, strokes) in [("smooth", HandwritingGenerator.strokes(seed: 11, count: 600)), ("pen", Self.pen(600, seed: 11))] {
            var page = PageReplica(page: PageID())
            var bytes = 0, old = 0, points = 0
            for (i, s) in strokes.enumerated() {
                let op = try page.add(.stroke(s), by: Self.me, wallTime: 1_700_000_000_000 + Int64(i) * 900)
                let frame = OperationCodec.encode(op)
                bytes += frame.count
                old += OperationCodec.encode(op, form: .hash).count
                points += s.points.count
                #expect(try OperationCodec.decode(Frame.decodeAll(frame)[0]) == op)
            }
            let perPoint = Double(bytes) / Double(points)
            #expect(perPoint <= 4.0, "\(label): \(perPoint) B/pt (add frames: \(Double(old) / Double(points)))")
        }
    }
}
