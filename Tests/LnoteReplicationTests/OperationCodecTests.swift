import Foundation
import Testing
import LnoteModel
@testable import LnoteReplication

@Suite struct OperationCodecTests {
    let a = ReplicaID(0xA1), b = ReplicaID(0xB2)

    /// [LOG-22] The spec's test vector, byte for byte.
    @Test func moveVector() throws {
        let mv = Op(id: OpID(replica: b, counter: 1), lamport: 2, context: VectorClock([(a, UInt64(1))]),
                    wallTime: 1_700_000_000_500,
                    body: .move([ElementTransform(OpID(replica: a, counter: 1), .translation(50, 0))]))
        let hex = "28000000169e641c04b2000000000000000102e8a7abfef96201a1000000000000000101a10000000000000001006400"
        #expect(hexString(OperationCodec.encode(mv)) == hex)
        let frames = try Frame.decodeAll(OperationCodec.encode(mv))
        #expect(try OperationCodec.decode(frames[0]) == mv)
    }

    static func sampleOps() -> [Op] {
        let a = ReplicaID(0xA1), b = ReplicaID(0xB2)
        let e = OpID(replica: a, counter: 1)
        let ctx = VectorClock([(a, UInt64(3)), (b, UInt64(2))])
        let p = PageID()
        let stroke = Stroke(points: [StrokePoint(x: -5, y: 7, pressure: 1000, radius: 3, t: 0),
                                     StrokePoint(x: Quantization.coordinateLimit, y: -Quantization.coordinateLimit, pressure: 0, radius: 0, t: 99_999)])
        let img = ImageElement(asset: AssetID(digest: Array(repeating: 7, count: 32))!, frame: QRect(x: 1, y: 2, width: 3, height: 4), rotation: -9000)
        let bodies: [Op.Body] = [
            .add(.stroke(stroke), z: ZKey(layer: -4, fraction: [1, 2, 255])),
            .add(.image(img), z: ZKey(layer: 6)),
            .erase([e, OpID(replica: b, counter: 2)]),
            .eraseRange(e, [PointRange(0, 1), PointRange(5, 4_000_000_000)]),
            .move([ElementTransform(e, Transform(a: 1, b: -2, c: 3, d: -4, tx: 5, ty: -6))]),
            .reorder([ElementZ(e, ZKey(layer: 3, fraction: [9])),
                      ElementZ(OpID(replica: b, counter: 1), ZKey(layer: 3, path: [ZKey.Step(fraction: [], tag: e)], fraction: [0x80]))]),
            .createDocument(title: "Notes ✍️"),
            .setTitle(""),
            .addPage(p, position: ZKey(layer: 2), canvas: .a4),
            .deletePage(p, seen: ctx),
            .restorePage(p),
            .movePage(p, position: ZKey(layer: -1, fraction: [128])),
            .setCanvas(p, CanvasSize(width: 1, height: 2)),
            .deleteDocument,
            .restoreDocument,
        ]
        return bodies.enumerated().map { i, body in
            // [LOG-4] counter 3 plus the other entry of the context (a: 3).
            Op(id: OpID(replica: b, counter: 3), lamport: 6, context: ctx, wallTime: -5 + Int64(i), body: body)
        }
    }

    @Test func everyKindRoundTrips() throws {
        for op in Self.sampleOps() {
            let bytes = OperationCodec.encode(op)
            let frames = try Frame.decodeAll(bytes)
            #expect(frames.count == 1)
            #expect(try OperationCodec.decode(frames[0]) == op, "\(op.body.name)")
        }
    }

    /// `OperationCodec.id(of:)` reads the id that `decode` reads, for every kind; and gives
    /// nil, never a wrong id, when the payload is cut before the id ends or names replica or
    /// counter 0, or the type is unknown.
    @Test func idWithoutDecoding() throws {
        for op in Self.sampleOps() {
            let frame = OperationCodec.frame(op)
            #expect(OperationCodec.id(of: frame) == op.id, "\(op.body.name)")
            for cut in 0..<9 {  // the u64 replica id, then the counter's first byte
                #expect(OperationCodec.id(of: Frame(type: frame.type, payload: Array(frame.payload.prefix(cut)))) == nil)
            }
            #expect(OperationCodec.id(of: Frame(type: 0x7F, payload: frame.payload)) == nil)
            var zeroReplica = frame.payload
            for i in 0..<8 { zeroReplica[i] = 0 }
            #expect(OperationCodec.id(of: Frame(type: frame.type, payload: zeroReplica)) == nil)
            var zeroCounter = frame.payload
            zeroCounter[8] = 0
            #expect(OperationCodec.id(of: Frame(type: frame.type, payload: zeroCounter)) == nil)
        }
    }

    /// [LOG-10] [LOG-13] Truncating at every offset or flipping any bit is detected, never applied.
    @Test func everyCutAndEveryBitFlipIsDetected() throws {
        for op in Self.sampleOps() {
            let bytes = OperationCodec.encode(op)
            for cut in 1..<bytes.count {  // cut 0 is an empty, valid stream
                #expect(throws: LnoteError.self) { _ = try Frame.decodeAll(Array(bytes[..<cut])).map { try OperationCodec.decode($0) } }
            }
            for bit in 0..<(bytes.count * 8) {
                var damaged = bytes
                damaged[bit / 8] ^= UInt8(1 << (bit % 8))
                #expect(throws: LnoteError.self, "\(op.body.name) bit \(bit)") {
                    _ = try Frame.decodeAll(damaged).map { try OperationCodec.decode($0) }
                }
            }
        }
    }

    /// [LOG-20] Payloads with valid frames but invalid contents are rejected with an offset.
    @Test func malformedPayloadsAreRejected() throws {
        var rng = SeededRNG(seed: 42)
        for trial in 0..<2_000 {
            let kind = OperationCodec.Kind.allCases.randomElement(using: &rng)!
            let n = Int.random(in: 0...40, using: &rng)
            let payload = (0..<n).map { _ in UInt8.random(in: 0...255, using: &rng) }
            do {
                let op = try OperationCodec.decode(Frame(type: kind.rawValue, payload: payload))
                // Random bytes that happen to decode must re-encode to the same payload.
                #expect(OperationCodec.frame(op, form: OperationCodec.form(ofType: kind.rawValue)).payload == payload, "trial \(trial) (seed 42)")
            } catch let e as LnoteError {
                #expect(e.offset != nil, "trial \(trial): \(e)")
            }
        }
        #expect(throws: LnoteError(.corrupt)) { try OperationCodec.decode(Frame(type: 0x7f, payload: [])) }
    }
}

extension OperationCodecTests {
    /// [LOG-24] [SYNC-50] The spec's addStroke vector and its hash form, byte for byte, read
    /// out of `Protocol/operation-log.md`; both decode to one operation with one hash.
    /// The code blocks of `Protocol/operation-log.md` as hex: on each line, the leading
    /// tokens made of hex digits (the bytes; the rest of the line describes them).
    static func specFrameBlocks() throws -> [String] {
        let spec = try String(contentsOf: URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../Protocol/operation-log.md").standardized, encoding: .utf8)
        return spec.components(separatedBy: "```").enumerated().filter { $0.offset % 2 == 1 }.map { block in
            block.element.split(separator: "\n").map { line in line.split(separator: " ", omittingEmptySubsequences: true)
                .prefix { $0.allSatisfy(\.isHexDigit) }.joined() }.joined()
        }
    }

    @Test func addStrokeVector() throws {
        let me = ReplicaID(0xB0)
        let points = [StrokePoint(x: 1000, y: 2000, pressure: 500, radius: 0, t: 0),
                      StrokePoint(x: 1020, y: 2015, pressure: 520, radius: 0, t: 8),
                      StrokePoint(x: 1045, y: 2028, pressure: 540, radius: 0, t: 16)]
        let op = Op(id: OpID(replica: me, counter: 2), lamport: 2, context: VectorClock([(me, UInt64(1))]),
                    wallTime: 1_700_000_000_900,
                    body: .add(.stroke(Stroke(style: InkStyle(tool: .pen, color: .black, width: 20), points: points)), z: ZKey(layer: 2)))
        #expect(OpValidator.violation(of: op) == nil)
        let compact = OperationCodec.encode(op), hashForm = OperationCodec.encode(op, form: .hash)
        let v1 = OperationCodec.encode(op, form: .writtenV1), v2 = OperationCodec.encode(op, form: .writtenV2)
        if ProcessInfo.processInfo.environment["PRINT_VECTORS"] != nil {
            print("VECTOR \(hexString(compact)) \(hexString(v2)) \(hexString(v1)) \(hexString(hashForm))")
        }
        let blocks = try Self.specFrameBlocks()
        let specCompact = try #require(blocks.first { $0.hasPrefix(hexString(compact.prefix(9))) })
        let specAdd = try #require(blocks.first { $0.hasPrefix(hexString(hashForm.prefix(9))) })
        let specV1 = try #require(blocks.first { $0.hasPrefix(hexString(v1.prefix(9))) })
        let specV2 = try #require(blocks.first { $0.hasPrefix(hexString(v2.prefix(9))) })
        #expect(specCompact == hexString(compact))
        #expect(specAdd == hexString(hashForm))
        #expect(specV1 == hexString(v1))
        #expect(specV2 == hexString(v2))
        #expect(compact[8] == 0x0A && v2[8] == 0x09 && v1[8] == 0x06 && hashForm[8] == 0x01)
        let f1 = try Frame.decodeAll(compact)[0], f2 = try Frame.decodeAll(hashForm)[0], f3 = try Frame.decodeAll(v1)[0]
        let f4 = try Frame.decodeAll(v2)[0]
        #expect(try OperationCodec.decode(f1) == op && OperationCodec.decode(f2) == op && OperationCodec.decode(f3) == op
                && OperationCodec.decode(f4) == op)
        #expect(ContentHash.of(f1) == SHA256.hash([0x01] + f2.payload) && ContentHash.of(f2) == ContentHash.of(f1)
                && ContentHash.of(f3) == ContentHash.of(f1) && ContentHash.of(f4) == ContentHash.of(f1))
    }

    /// [LOG-32] [PT2-11] The spec's second `addStroke3` vector: the first 12 points of a pen
    /// whose coordinates sit on a 0.75-pt grid (y on grid 15/2 of `G`; x, with steps of 8 and 7
    /// tenths only, on the coarser 31/4 that also fits),
    /// byte for byte, and the same operation's `addStroke2` for comparison.
    @Test("[LOG-32] [PT2-11] the addStroke3 vector of a stroke on a digitizer grid")
    func addStroke3GridVector() throws {
        let values: [(Int32, Int32, UInt16, UInt32)] = [
            (648, 626, 257, 0), (648, 626, 395, 8), (648, 618, 480, 15), (648, 611, 546, 23), (648, 603, 525, 30),
            (656, 588, 588, 39), (656, 581, 583, 45), (656, 566, 611, 53), (663, 551, 513, 60), (663, 543, 520, 68),
            (663, 536, 545, 76), (663, 521, 616, 82)]
        let points = values.map { StrokePoint(x: $0.0, y: $0.1, pressure: $0.2, radius: 0, t: $0.3) }
        let me = ReplicaID(0xB0)
        let op = Op(id: OpID(replica: me, counter: 1), lamport: 1, context: VectorClock(), wallTime: 1_700_000_000_000,
                    body: .add(.stroke(Stroke(style: InkStyle(tool: .pen, color: .black, width: 20), points: points)), z: ZKey(layer: 1)))
        #expect(OpValidator.violation(of: op) == nil)
        let compact = OperationCodec.encode(op), v2 = OperationCodec.encode(op, form: .writtenV2)
        if ProcessInfo.processInfo.environment["PRINT_VECTORS"] != nil {
            print("GRIDVECTOR \(hexString(compact)) \(hexString(v2))")
        }
        let blocks = try Self.specFrameBlocks()
        let specCompact = try #require(blocks.first { $0.hasPrefix(hexString(compact.prefix(9))) })
        #expect(specCompact == hexString(compact))
        #expect(compact[8] == 0x0A && compact.count < v2.count, "\(compact.count) against \(v2.count) bytes")
        let f = try Frame.decodeAll(compact)[0]
        #expect(try OperationCodec.decode(f) == op)
        #expect(ContentHash.of(f) == ContentHash.of(try Frame.decodeAll(v2)[0]))
        // x on grid 31/4 (index 49: its steps of 8 and 7 tenths fit that coarser grid too), y on
        // 15/2 (index 51), which it names in full since x's does not fit it.
        var c = StrokeCodecV2.Context.standaloneWithGrids
        var w = ByteWriter()
        StrokeCodecV2.encodePoints(points, width: 20, context: &c, into: &w)
        #expect(StrokeCodecV2.coordinateGrids[51].a == 15 && StrokeCodecV2.coordinateGrids[51].q == 2)
        #expect(c.lastGrid.x == 50 && c.lastGrid.y == 52, "grids \(c.lastGrid)")
    }

    /// [LOG-26] A stroke at the point limit with jumpy points does not fit in an `addStroke`
    /// frame but does as `add`: lnote writes it as `add` (what every log append and every
    /// received document's log stores), and it decodes to the same operation.
    @Test("[LOG-26] a stroke too long for addStroke is written as add")
    func strokeTooLongForAddStroke() throws {
        let seed: UInt64 = 0x10_626
        var g = SplitMix64(seed: seed)
        let limit = UInt64(Quantization.coordinateLimit)
        var points: [StrokePoint] = []
        points.reserveCapacity(Stroke.maxPoints)
        var t: UInt32 = 0
        for i in 0..<Stroke.maxPoints {
            if i > 0 { t += UInt32(g.next() % 80) }
            points.append(StrokePoint(x: Int32(Int64(g.next() % (2 * limit + 1)) - Int64(limit)),
                                      y: Int32(Int64(g.next() % (2 * limit + 1)) - Int64(limit)),
                                      pressure: UInt16(g.next() % 1001), radius: Int32(g.next() % 100_000), t: t))
        }
        var replica = PageReplica(page: PageID())
        let op = try replica.add(.stroke(Stroke(style: InkStyle(), points: points)), by: ReplicaID(0x26), wallTime: 1)
        let written = OperationCodec.frame(op, form: .written)
        #expect(written.payload.count >= Frame.maxLength, "seed \(seed): the addStroke form must not fit (\(written.payload.count) B)")
        let frame = OperationCodec.frame(op)
        #expect(frame.type == OperationCodec.Kind.add.rawValue, "seed \(seed)")
        #expect(frame.payload.count < Frame.maxLength, "seed \(seed)")
        #expect(frame == OperationCodec.frame(op, form: .hash))
        let bytes = OperationCodec.encode(op)
        #expect(bytes == frame.encoded, "the in-place encoding makes the same choice")
        #expect(try OperationCodec.decode(Frame.decodeAll(bytes)[0]) == op, "seed \(seed)")
        // An ordinary stroke is still written in the compact form.
        let small = try replica.add(.stroke(Stroke(style: InkStyle(), points: Array(points.prefix(3)))), by: ReplicaID(0x26), wallTime: 2)
        #expect(OperationCodec.frame(small).type == OperationCodec.Kind.addStroke3.rawValue)
    }
}
