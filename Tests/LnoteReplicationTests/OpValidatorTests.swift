import Foundation
import Testing
import LnoteModel
@testable import LnoteReplication

/// The one validator every door applies ([LOG-3], [LOG-4], [LOG-20], [LOG-21], [MERGE-12],
/// [SHR-6]): what it refuses, that the frame decoder and the merge refuse the same, and that
/// what it lets through never makes the merge trap.
@Suite struct OpValidatorTests {
    static let a = ReplicaID(0xA1), b = ReplicaID(0xB2)

    static func op(_ counter: UInt64 = 2, lamport: UInt64? = nil, context: VectorClock? = nil, body: Op.Body) -> Op {
        let ctx = context ?? VectorClock([(a, counter - 1), (b, UInt64(3))])
        let l = lamport ?? OpValidator.lamport(id: OpID(replica: a, counter: counter), context: ctx)!
        return Op(id: OpID(replica: a, counter: counter), lamport: l, context: ctx, wallTime: 0, body: body)
    }

    static let stroke = ElementContent.stroke(Stroke(points: [StrokePoint(x: 0, y: 0)]))

    /// Refused by the validator, by the decoder (corrupt, with an offset) and by the merge.
    static func expectRefused(_ op: Op, _ rule: OpValidator.Violation.Rule, _ what: String,
                              sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(OpValidator.violation(of: op)?.rule == rule, "\(what)", sourceLocation: sourceLocation)
        // The hash form carries every field (an addStroke cannot even state a wrong Lamport
        // timestamp, [LOG-24]).
        let frames = try? Frame.decodeAll(OperationCodec.encode(op, form: .hash))
        if let f = frames?.first {
            do {
                _ = try OperationCodec.decode(f, base: 9, path: "x.log")
                Issue.record("decoded: \(what)", sourceLocation: sourceLocation)
            } catch let e as LnoteError {
                #expect(e.code == .corrupt && e.offset != nil && e.path == "x.log", "\(what): \(e)", sourceLocation: sourceLocation)
            } catch { Issue.record("\(error)", sourceLocation: sourceLocation) }
        }
        if op.body.isPageOperation {
            var r = PageReplica(page: PageID())
            #expect(throws: LnoteError(.corrupt), "\(what)", sourceLocation: sourceLocation) { try r.receive([op]) }
        } else {
            var d = DocumentReplica(id: DocumentID(UUID()))
            #expect(throws: LnoteError(.corrupt), "\(what)", sourceLocation: sourceLocation) { try d.receive([op]) }
        }
    }

    @Test("[LOG-4] the Lamport timestamp is the counter plus the other entries of the context, at most 2^62")
    func lamportRule() {
        #expect(OpValidator.lamport(id: OpID(replica: Self.a, counter: 2), context: VectorClock([(Self.a, UInt64(1)), (Self.b, UInt64(3))])) == 5)
        #expect(OpValidator.lamport(id: OpID(replica: Self.a, counter: 1), context: VectorClock()) == 1)
        let huge = VectorClock([(Self.b, UInt64.max)])
        #expect(OpValidator.lamport(id: OpID(replica: Self.a, counter: 1), context: huge) == nil)
        let edge = VectorClock([(Self.b, OpValidator.maxLamport - 1)])
        #expect(OpValidator.lamport(id: OpID(replica: Self.a, counter: 1), context: edge) == OpValidator.maxLamport)
        #expect(OpValidator.lamport(id: OpID(replica: Self.a, counter: 2), context: edge) == nil)
        Self.expectRefused(Self.op(lamport: 4, body: .erase([OpID(replica: Self.b, counter: 1)])), .log4, "one too few")
        Self.expectRefused(Self.op(lamport: 6, body: .erase([OpID(replica: Self.b, counter: 1)])), .log4, "one too many")
        Self.expectRefused(Self.op(lamport: UInt64.max, body: .add(Self.stroke, z: ZKey(layer: 1))), .log4, "2^64 - 1")
        Self.expectRefused(Self.op(1, lamport: 1 << 63, context: VectorClock([(Self.b, 1 << 63 - 1)]), body: .setTitle("x")), .log4, "past 2^62")
    }

    @Test("[LOG-3] the context's own entry is the counter minus one")
    func ownEntry() {
        // Built in memory (the encoding leaves the own entry implicit, so only the merge sees it).
        let op = Op(id: OpID(replica: Self.a, counter: 3), lamport: 3, context: VectorClock([(Self.a, UInt64(1))]), wallTime: 0,
                    body: .erase([OpID(replica: Self.b, counter: 1)]))
        #expect(OpValidator.violation(of: op)?.rule == .log3)
        var r = PageReplica(page: PageID())
        #expect(throws: LnoteError(.corrupt)) { try r.receive([op]) }
    }

    @Test("[LOG-21] [MERGE-12] [SHR-6] z keys and page positions: valid, |layer| <= Lamport")
    func keys() {
        Self.expectRefused(Self.op(body: .add(Self.stroke, z: ZKey(layer: 6))), .merge12, "layer above lamport")
        Self.expectRefused(Self.op(body: .add(Self.stroke, z: ZKey(layer: -6))), .merge12, "layer below -lamport")
        Self.expectRefused(Self.op(body: .reorder([ElementZ(OpID(replica: Self.b, counter: 1), ZKey(layer: 5)),
                                                     ElementZ(OpID(replica: Self.b, counter: 2), ZKey(layer: 9))])), .merge12, "second key")
        Self.expectRefused(Self.op(body: .addPage(PageID(), position: ZKey(layer: Int64.min), canvas: .a4)), .merge12, "page position")
        Self.expectRefused(Self.op(body: .movePage(PageID(), position: ZKey(layer: 100))), .merge12, "page move")
        // Invalid keys cannot be encoded into a frame the decoder accepts either; the merge refuses them too.
        let emptyUnderStep = ZKey(layer: 1, path: [ZKey.Step(fraction: [], tag: OpID(replica: Self.b, counter: 1))], fraction: [])
        #expect(OpValidator.violation(of: Self.op(body: .add(Self.stroke, z: emptyUnderStep)))?.rule == .shr6)
        #expect(OpValidator.violation(of: Self.op(body: .add(Self.stroke, z: ZKey(layer: 5, fraction: [1, 0]))))?.rule == .shr6)
        // The limits themselves pass.
        #expect(OpValidator.violation(of: Self.op(body: .add(Self.stroke, z: ZKey(layer: 5)))) == nil)
        #expect(OpValidator.violation(of: Self.op(body: .add(Self.stroke, z: ZKey(layer: -5, fraction: [255])))) == nil)
    }

    @Test("[LOG-23] bounds: strokes, images, transforms, lists, titles, canvases, clocks; each limit itself passes")
    func bounds() {
        let lim = Int32(OpValidator.coordinateLimit)
        func stroke(_ pts: [StrokePoint], width: Int32 = 20) -> Op.Body {
            .add(.stroke(Stroke(style: InkStyle(tool: .pen, color: .black, width: width), points: pts)), z: ZKey(layer: 1))
        }
        func refused(_ body: Op.Body, _ what: String, sourceLocation: SourceLocation = #_sourceLocation) {
            Self.expectRefused(Self.op(body: body), .log23, what, sourceLocation: sourceLocation)
        }
        func passes(_ body: Op.Body, _ what: String, sourceLocation: SourceLocation = #_sourceLocation) {
            #expect(OpValidator.violation(of: Self.op(body: body)) == nil, "\(what)", sourceLocation: sourceLocation)
        }
        let p0 = StrokePoint(x: 0, y: 0)
        refused(stroke([]), "no point")
        refused(stroke([StrokePoint(x: lim + 1, y: 0)]), "x beyond the limit")
        passes(stroke([StrokePoint(x: -lim, y: lim)]), "x, y at the limit")
        refused(stroke([StrokePoint(x: 0, y: 0, radius: -1)]), "negative radius")
        refused(stroke([StrokePoint(x: 0, y: 0, radius: OpValidator.maxRadius + 1)]), "radius beyond the limit")
        refused(stroke([StrokePoint(x: 0, y: 0, t: 5)]), "first point not at 0 ms")
        refused(stroke([p0, StrokePoint(x: 0, y: 0, t: 9), StrokePoint(x: 0, y: 0, t: 8)]), "time going back")
        refused(stroke([p0, StrokePoint(x: 0, y: 0, t: OpValidator.maxStrokeDuration + 1)]), "longer than 24 h")
        passes(stroke([p0, StrokePoint(x: 0, y: 0, radius: OpValidator.maxRadius, t: OpValidator.maxStrokeDuration)]), "the limits")
        refused(stroke([p0, StrokePoint(x: 0, y: 0, pressure: 1001, t: 1)]), "pressure beyond 1000")
        passes(stroke([StrokePoint(x: 0, y: 0, pressure: 1000)]), "pressure 1000")
        refused(stroke([p0], width: 0), "zero width")
        refused(stroke([p0], width: OpValidator.maxRadius + 1), "width beyond the limit")
        let asset = AssetID.of([1])
        refused(.add(.image(ImageElement(asset: asset, frame: QRect(x: 0, y: 0, width: 0, height: 5))), z: ZKey(layer: 1)), "empty frame")
        refused(.add(.image(ImageElement(asset: asset, frame: QRect(x: 0, y: 0, width: 5, height: 5), rotation: 36_001)), z: ZKey(layer: 1)), "rotation")
        passes(.add(.image(ImageElement(asset: asset, frame: QRect(x: -lim, y: lim, width: lim, height: 1), rotation: -36_000)), z: ZKey(layer: 1)), "image limits")
        let e = OpID(replica: Self.b, counter: 1)
        refused(.move([ElementTransform(e, .translation(lim + 1, 0))]), "translation beyond the limit")
        refused(.move([ElementTransform(e, Transform(a: OpValidator.maxMatrixCoefficient + 1, b: 0, c: 0, d: 65536, tx: 0, ty: 0))]), "scale beyond 256")
        refused(.move([]), "empty move"); refused(.erase([]), "empty erase"); refused(.reorder([]), "empty reorder")
        refused(.eraseRange(e, []), "no range")
        let many = (1...OpValidator.maxListCount + 1).map { OpID(replica: Self.b, counter: UInt64($0)) }
        refused(.erase(many), "an erase of 100,001 elements")
        passes(.erase(Array(many.dropLast())), "an erase of 100,000 elements")
        refused(.move(many.map { ElementTransform($0, .translation(1, 0)) }), "a move of 100,001 elements")
        refused(.reorder(many.map { ElementZ($0, ZKey(layer: 1)) }), "a reorder of 100,001 elements")
        refused(.eraseRange(e, (0...UInt32(OpValidator.maxListCount)).map { PointRange(2 * $0, 2 * $0 + 1) }), "100,001 ranges")
        refused(.setTitle(String(repeating: "é", count: 2049)), "a title of 4,098 bytes")
        passes(.setTitle(String(repeating: "é", count: 2048)), "a title of 4,096 bytes")
        for bad in ["a\u{1B}[31m", "tab\there", "line\nbreak", "\u{7F}", "\u{85}", "a\u{2028}b"] {
            refused(.setTitle(bad), "title \(bad.debugDescription)")
            refused(.createDocument(title: bad), "created with title \(bad.debugDescription)")
        }
        passes(.setTitle("Notes ✍️ — אבג /\\ \u{A0}"), "ordinary titles")
        refused(.setCanvas(PageID(), CanvasSize(width: lim + 1, height: 1)), "canvas beyond the limit")
        refused(.deletePage(PageID(), seen: VectorClock((1...4097).map { (ReplicaID(UInt64($0)), UInt64(1)) })), "a seen clock of 4097 entries")
        let wide = VectorClock((1...4097).map { (ReplicaID(UInt64($0) + 0x1000), UInt64(1)) } + [(Self.a, UInt64(1))])
        Self.expectRefused(Self.op(2, context: wide, body: .setTitle("x")), .log23, "a context of 4098 entries")
    }

    @Test("[LOG-23] a count the frame cannot hold is corrupt at the count, before anything is allocated")
    func countsBeyondTheFrame() throws {
        let e = OpID(replica: Self.b, counter: 1)
        for body: Op.Body in [.erase([e]), .move([ElementTransform(e, .translation(1, 0))]), .reorder([ElementZ(e, ZKey(layer: 1))]),
                              .eraseRange(e, [PointRange(0, 1)]), .setTitle("x")] {
            let op = Self.op(body: body)
            var payload = try #require(Frame.decodeAll(OperationCodec.encode(op)).first).payload
            // The list's count (or the title's length) follows the context (and an eraseRange's
            // stroke id): where a body-less operation with the same header ends.
            func payloadSize(_ b: Op.Body) -> Int { var w = ByteWriter(); OperationCodec.encodePayload(Self.op(body: b), into: &w); return w.bytes.count }
            var idWriter = ByteWriter()
            ElementCodec.encode(e, into: &idWriter)
            let countAt = payloadSize(.deleteDocument) + (body.name == "eraseRange" ? idWriter.bytes.count : 0)
            #expect(payload[countAt] == 1)
            payload[countAt] = 0x7F  // 127 items in the few bytes left
            do {
                _ = try OperationCodec.decode(Frame(type: OperationCodec.kind(of: body).rawValue, payload: payload), base: 100, path: "p.log")
                Issue.record("\(body.name): decoded")
            } catch let error as LnoteError {
                #expect(error.code == .corrupt && error.offset != nil, "\(body.name): \(error)")
            }
        }
        // Local edits out of bounds are the caller's mistake, named as such.
        var d = DocumentReplica(id: DocumentID(UUID()))
        _ = try d.make(.createDocument(title: "t"), by: Self.a, wallTime: 0)
        #expect(throws: LnoteError(.invalidArgument)) { try d.make(.setTitle(String(repeating: "x", count: 4097)), by: Self.a, wallTime: 0) }
        #expect(throws: LnoteError(.invalidArgument)) { try d.make(.setTitle("a\u{1B}b"), by: Self.a, wallTime: 0) }
    }

    /// Operations at every extreme the validator lets through, on a page and a document:
    /// the merge applies or ignores them and never traps; local edits afterwards still work.
    @Test("[MERGE-12] the merge never traps on what the validator lets through")
    func extremesNeverTrap() throws {
        let maxL = OpValidator.maxLamport
        let big = VectorClock([(Self.b, maxL - 1)])
        let far = OpID(replica: Self.b, counter: maxL - 1)
        let bodies: [Op.Body] = [
            .add(Self.stroke, z: ZKey(layer: Int64(maxL))),
            .add(Self.stroke, z: ZKey(layer: -Int64(maxL), path: Array(repeating: ZKey.Step(fraction: [255], tag: far), count: ZKey.maxDepth), fraction: [255])),
            .move([ElementTransform(far, Transform(a: -OpValidator.maxMatrixCoefficient, b: OpValidator.maxMatrixCoefficient,
                                                   c: 0, d: 1, tx: -Int32(OpValidator.coordinateLimit), ty: Int32(OpValidator.coordinateLimit)))]),
            .reorder([ElementZ(far, ZKey(layer: Int64(maxL)))]),
            .eraseRange(far, [PointRange(UInt32.max - 1, UInt32.max)]),
            .erase([far, far]),
        ]
        for body in bodies {
            // An author that has seen b's maxL − 1 operations: Lamport 2^62.
            let op = Op(id: OpID(replica: Self.a, counter: 1), lamport: maxL, context: big, wallTime: .min, body: body)
            #expect(OpValidator.violation(of: op) == nil, "\(body.name)")
            var r = PageReplica(page: PageID())
            try r.receive([op])  // waits: b's operations never arrive
            #expect(r.pending == [op])
            // A replica that holds b's history (a snapshot claiming it) applies it.
            var s = PageReplica(state: PageState(page: PageID(), clock: big, maxLamport: maxL - 1))
            try s.receive([op])
            #expect(s.pending.isEmpty)
            // The log is full: the next local edit is refused cleanly, never a trap.
            #expect(throws: LnoteError(.limitExceeded)) { try s.add(Self.stroke, by: Self.a, wallTime: 0) }
            _ = s.state.conflicts
            _ = PageSnapshot.encode(s.state, coveredLogOffset: 0, logIncarnation: 0)
        }
        var d = DocumentReplica(state: DocumentState(id: DocumentID(UUID()), clock: big, maxLamport: maxL - 1))
        let p = PageID()
        try d.receive([Op(id: OpID(replica: Self.a, counter: 1), lamport: maxL, context: big, wallTime: .max,
                          body: .addPage(p, position: ZKey(layer: Int64(maxL)),
                                         canvas: CanvasSize(width: Int32(OpValidator.coordinateLimit), height: Int32(OpValidator.coordinateLimit))))])
        #expect(d.state.pages.map(\.id) == [p])
        #expect(throws: LnoteError(.limitExceeded)) { try d.make(.setTitle("x"), by: Self.a, wallTime: 0) }
        _ = try d.position(after: p, by: Self.a)
    }
}
