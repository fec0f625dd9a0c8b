import Foundation
import LnoteModel

/// Turns operations into frames and back. The layouts are specified byte by byte in
/// `Protocol/operation-log.md`; the frame `type` byte is the operation kind.
///
/// An add of a stroke has four encodings ([LOG-22]): `addStroke3` (0x0A, compact: point
/// stream v2 with written parameters and digitizer grids, no Lamport timestamp, the usual z
/// key and black ink implied), which writers write; `addStroke2` (0x09, the same without
/// grids) and `addStroke` (0x06, adaptive second differences, colour always written), which
/// lnote wrote before and still reads; and `add` (0x01), the *hash form*, which content
/// hashes are taken over ([SYNC-50]) and which logs written before `addStroke` hold. Every
/// other operation has one encoding, the same in every form.
public enum OperationCodec {
    public enum Kind: UInt8, CaseIterable, Sendable {
        case add = 0x01, erase = 0x02, eraseRange = 0x03, move = 0x04, reorder = 0x05
        case addStroke = 0x06
        case restore = 0x07, restoreRange = 0x08
        case addStroke2 = 0x09
        case addStroke3 = 0x0A
        case createDocument = 0x20, setTitle = 0x21, addPage = 0x22, deletePage = 0x23
        case restorePage = 0x24, movePage = 0x25, setCanvas = 0x26
        case deleteDocument = 0x27, restoreDocument = 0x28

        /// Page-log operations are the types below 0x20 (operation-log.md §3).
        public var isPageKind: Bool { rawValue < 0x20 }

        /// The compact forms of an add of a stroke, `addStroke` (0x06), `addStroke2` (0x09)
        /// and `addStroke3` (0x0A): no Lamport timestamp, hashed as the `add` of the same
        /// operation.
        public var isCompactStroke: Bool { self == .addStroke || self == .addStroke2 || self == .addStroke3 }
    }

    /// Whether a frame of `type` holds a compact form of an add of a stroke (0x06, 0x09, 0x0A).
    public static func isCompactStroke(_ type: UInt8) -> Bool {
        compactVersion(ofType: type) != nil
    }

    /// The version of a compact stroke frame's type: 1 for `addStroke` (0x06), 2 for
    /// `addStroke2` (0x09), 3 for `addStroke3` (0x0A); nil for any other type.
    static func compactVersion(ofType type: UInt8) -> Int? {
        switch type {
        case Kind.addStroke.rawValue: 1
        case Kind.addStroke2.rawValue: 2
        case Kind.addStroke3.rawValue: 3
        default: nil
        }
    }

    public static func kind(of body: Op.Body) -> Kind {
        switch body {
        case .add: .add
        case .erase: .erase
        case .eraseRange: .eraseRange
        case .move: .move
        case .reorder: .reorder
        case .restore: .restore
        case .restoreRange: .restoreRange
        case .createDocument: .createDocument
        case .setTitle: .setTitle
        case .addPage: .addPage
        case .deletePage: .deletePage
        case .restorePage: .restorePage
        case .movePage: .movePage
        case .setCanvas: .setCanvas
        case .deleteDocument: .deleteDocument
        case .restoreDocument: .restoreDocument
        }
    }

    /// Which of an operation's encodings to write ([LOG-22]).
    public enum Form: Sendable, Hashable {
        /// What writers write: an add of a stroke as `addStroke3` (0x0A), everything else in
        /// its one encoding.
        case written
        /// What lnote wrote before `addStroke3`: an add of a stroke as `addStroke2` (0x09),
        /// everything else as in `written`. Read forever; written to re-encode such a frame.
        case writtenV2
        /// What lnote wrote before `addStroke2`: an add of a stroke as `addStroke` (0x06),
        /// everything else as in `written`. Read forever; written to re-encode such a frame.
        case writtenV1
        /// The encoding content hashes are taken over ([SYNC-50]): an add of a stroke as
        /// `add` (0x01), everything else as in `written`.
        case hash
    }

    /// The form a frame of `type` is in, the one it re-encodes to ([LOG-22]): `written` for
    /// an `addStroke3`, `writtenV2` for an `addStroke2`, `writtenV1` for an `addStroke`, else
    /// `hash` (any other operation has one encoding).
    public static func form(ofType type: UInt8) -> Form {
        switch type {
        case Kind.addStroke3.rawValue: .written
        case Kind.addStroke2.rawValue: .writtenV2
        case Kind.addStroke.rawValue: .writtenV1
        default: .hash
        }
    }

    /// The frame type `op` is written with in `form`.
    public static func type(of op: Op, form: Form = .written) -> UInt8 {
        if case .add(.stroke, _) = op.body {
            switch form {
            case .written: return Kind.addStroke3.rawValue
            case .writtenV2: return Kind.addStroke2.rawValue
            case .writtenV1: return Kind.addStroke.rawValue
            case .hash: break
            }
        }
        return kind(of: op.body).rawValue
    }

    /// `op`'s frame as lnote writes it: the written form, or the hash form when the written
    /// form's frame would be longer than a frame may be ([LOG-26]: stream v2's worst case per
    /// point is larger than the `add` frame's, so a stroke near the point limit with jumpy
    /// points can fit only as `add`).
    public static func frame(_ op: Op) -> Frame {
        let written = frame(op, form: .written)
        guard !written.fits, written.type != type(of: op, form: .hash) else { return written }
        return frame(op, form: .hash)
    }

    public static func frame(_ op: Op, form: Form) -> Frame {
        var w = ByteWriter(capacity: payloadSizeGuess(op))
        let type = type(of: op, form: form)
        encodePayload(op, type: type, into: &w)
        return Frame(type: type, payload: w.bytes)
    }

    /// The bytes of `frame(op)`, its payload written in place (what logs store).
    public static func encode(_ op: Op) -> [UInt8] {
        let written = encode(op, form: .written)
        guard !Frame.fits(encodedCount: written.count), type(of: op, form: .written) != type(of: op, form: .hash) else {
            return written
        }
        return encode(op, form: .hash)
    }

    public static func encode(_ op: Op, form: Form) -> [UInt8] {
        let type = type(of: op, form: form)
        return Frame.encoded(type: type, payloadCapacity: payloadSizeGuess(op)) { encodePayload(op, type: type, into: &$0) }
    }

    /// About the size of `op`'s payload: its header and clock, plus two bytes a point (the
    /// point stream takes 1.5 to 4 on handwriting).
    static func payloadSizeGuess(_ op: Op) -> Int {
        var size = 32 + 12 * op.context.entries.count
        if case .add(let content, _) = op.body { size += 64 + 2 * content.pointCount }
        return size
    }

    /// The payload of `op` in the frame type `type`: `addStroke3`, `addStroke2` or `addStroke`
    /// for an add of a stroke in a compact form, else the operation's kind.
    static func encodePayload(_ op: Op, type: UInt8, into w: inout ByteWriter) {
        if isCompactStroke(type), case .add(.stroke(let s), let z) = op.body {
            encodeAddStroke(op, s, z, version: compactVersion(ofType: type)!, into: &w)
        } else {
            encodePayload(op, into: &w)
        }
    }

    /// The payload in hash form (the operation's `Kind`, never `addStroke`).
    /// Header: replica u64, counter varint, lamport varint, wall time svarint, context
    /// (without the author's own entry, which is implied: counter − 1). Then the body.
    public static func encodePayload(_ op: Op, into w: inout ByteWriter) {
        // A stroke replayed with its points deferred ([LOG-27]) is never written again.
        if case .add(let c, _) = op.body { precondition(c.isResolved, "operation \(op.id) encoded with deferred points") }
        w.u64(op.id.replica.rawValue)
        w.varint(op.id.counter)
        w.varint(op.lamport)
        w.svarint(op.wallTime)
        var others = op.context
        others[op.id.replica] = 0
        ElementCodec.encode(others, into: &w)
        switch op.body {
        case .add(let content, let z):
            ElementCodec.encode(z, into: &w)
            ElementCodec.encode(content, into: &w)
        case .erase(let ids), .restore(let ids):
            encodeIDs(ids, into: &w)
        case .eraseRange(let id, let ranges), .restoreRange(let id, let ranges):
            ElementCodec.encode(id, into: &w)
            w.varint(UInt64(ranges.count))
            for r in ranges {
                w.varint(UInt64(r.from))
                w.varint(UInt64(r.to - r.from))
            }
        case .move(let ts):
            w.varint(UInt64(ts.count))
            for t in ts {
                ElementCodec.encode(t.element, into: &w)
                ElementCodec.encode(t.transform, into: &w)
            }
        case .reorder(let zs):
            w.varint(UInt64(zs.count))
            for z in zs {
                ElementCodec.encode(z.element, into: &w)
                ElementCodec.encode(z.z, into: &w)
            }
        case .createDocument(let title), .setTitle(let title):
            w.string(title)
        case .addPage(let p, let pos, let canvas):
            w.append(p.uuid.bytes)
            ElementCodec.encode(pos, into: &w)
            w.svarint(Int64(canvas.width))
            w.svarint(Int64(canvas.height))
        case .deletePage(let p, let seen):
            w.append(p.uuid.bytes)
            ElementCodec.encode(seen, into: &w)
        case .restorePage(let p):
            w.append(p.uuid.bytes)
        case .movePage(let p, let pos):
            w.append(p.uuid.bytes)
            ElementCodec.encode(pos, into: &w)
        case .setCanvas(let p, let canvas):
            w.append(p.uuid.bytes)
            w.svarint(Int64(canvas.width))
            w.svarint(Int64(canvas.height))
        case .deleteDocument, .restoreDocument:
            break
        }
    }

    private static func encodeIDs(_ ids: [ElementID], into w: inout ByteWriter) {
        w.varint(UInt64(ids.count))
        for id in ids { ElementCodec.encode(id, into: &w) }
    }

    /// The id of the operation in `frame`, read from the first bytes of its payload (the
    /// replica id and counter, operation-log.md §2) without decoding the rest; nil when
    /// they are not there or not valid. For skipping operations a clock covers before
    /// decoding them: `decode` checks everything, this id included.
    public static func id(of frame: Frame) -> OpID? {
        Kind(rawValue: frame.type) == nil ? nil : headerID(of: frame)
    }

    /// The id the first bytes of a payload name, whatever the frame's type, known to this
    /// version or not (every payload starts with the same header, operation-log.md §3): what
    /// a frame that does not decode claims to be, for [PKG-56]. Nil when the bytes do not hold
    /// a non-zero replica id and counter.
    public static func headerID(of frame: Frame) -> OpID? {
        var r = ByteReader(frame.payload)
        guard let replica = try? r.u64("replica id"), let counter = try? r.varint("counter"),
              replica != 0, counter != 0 else { return nil }
        return OpID(replica: ReplicaID(replica), counter: counter)
    }

    /// What every payload starts with (operation-log.md §3): the id, the Lamport timestamp
    /// when written, the wall time and the context (with the author's own entry).
    public struct Header: Sendable {
        public var id: OpID
        public var wallTime: Int64
        public var context: VectorClock
        var written: UInt64?
        var lamportAt: Int
        var contextAt: Int
    }

    private static func decodeHeader(_ r: inout ByteReader, kind: Kind) throws -> Header {
        let replica = try r.u64("replica id")
        let counterAt = r.offset
        let counter = try r.varint("counter")
        guard replica != 0, counter != 0 else {
            throw r.error(.corrupt, "zero replica id or counter", at: counterAt)
        }
        let lamportAt = r.offset
        // [LOG-24] An addStroke carries no Lamport timestamp: it is the one [LOG-4] gives.
        let written: UInt64? = kind.isCompactStroke ? nil : try r.varint("lamport")
        let wall = try r.svarint("wall time")
        let contextAt = r.offset
        var context = try ElementCodec.decodeClock(&r)
        guard context[ReplicaID(replica)] == 0 else {
            throw r.error(.corrupt, "context names the author itself", at: contextAt)
        }
        context[ReplicaID(replica)] = counter - 1
        return Header(id: OpID(replica: ReplicaID(replica), counter: counter), wallTime: wall, context: context,
                      written: written, lamportAt: lamportAt, contextAt: contextAt)
    }

    /// The header of the operation in `frame` (id, wall time, context) without its body; nil
    /// when the frame's type is unknown or its header does not decode. For choosing which
    /// frames to decode (time travel): `decode` checks everything, the header included.
    public static func header(of frame: Frame) -> Header? {
        guard let kind = Kind(rawValue: frame.type) else { return nil }
        var r = ByteReader(frame.payload)
        r.shortestVarints = true
        return try? decodeHeader(&r, kind: kind)
    }

    /// Decodes a frame's payload. `base` is the payload's offset in its file or body, for
    /// error reports; every error names `path` and an absolute offset.
    ///
    /// `deferringPoints`: an `addStroke` frame's point stream is stepped over after the checks
    /// [PT2-2] makes before allocating, and the stroke holds it undecoded until it is resolved
    /// (operation-log.md [LOG-27]: only for frames replayed from a page's own log).
    ///
    /// A frame refused with its points deferred is refused with the error an eager decode
    /// gives (code, message, offset): deferring changes when points are checked, never what
    /// a damaged frame is reported as ([LOG-27]). (Stepping over a damaged stream can stop
    /// elsewhere than decoding it does, and find trailing bytes where the eager decoder
    /// finds a bad code.)
    public static func decode(_ frame: Frame, base: Int = 0, path: String? = nil, deferringPoints: Bool = false) throws -> Op {
        guard deferringPoints else { return try decodeOnce(frame, base: base, path: path, deferringPoints: false) }
        do {
            return try decodeOnce(frame, base: base, path: path, deferringPoints: true)
        } catch {
            _ = try decodeOnce(frame, base: base, path: path, deferringPoints: false)
            throw error
        }
    }

    private static func decodeOnce(_ frame: Frame, base: Int, path: String?, deferringPoints: Bool) throws -> Op {
        var r = ByteReader(frame.payload, base: base, path: path)
        // [LOG-22] One encoding per operation: what decodes re-encodes to the same bytes.
        r.shortestVarints = true
        guard let kind = Kind(rawValue: frame.type) else {
            throw LnoteError(.corrupt, "unknown operation type 0x\(String(frame.type, radix: 16))",
                             path: path, offset: base - 1)
        }
        let h = try decodeHeader(&r, kind: kind)
        let replica = h.id.replica.rawValue, counter = h.id.counter, written = h.written, wall = h.wallTime
        let context = h.context, contextAt = h.contextAt
        var lamportAt = h.lamportAt
        let lamport: UInt64
        if let written {
            lamport = written
        } else {
            lamportAt = contextAt
            guard let l = OpValidator.lamport(id: OpID(replica: ReplicaID(replica), counter: counter), context: context) else {
                throw r.error(.corrupt, "its context covers more than \(OpValidator.maxLamport) operations", at: contextAt)
            }
            lamport = l
        }
        let body: Op.Body
        switch kind {
        case .addStroke, .addStroke2, .addStroke3:
            body = try decodeAddStrokeBody(&r, lamport: lamport, version: compactVersion(ofType: kind.rawValue)!,
                                           deferring: deferringPoints ? OpID(replica: ReplicaID(replica), counter: counter) : nil)
        case .add:
            let z = try ElementCodec.decodeZKey(&r)
            body = .add(try ElementCodec.decodeContent(&r), z: z)
        case .erase:
            body = .erase(try decodeIDs(&r))
        case .restore:
            body = .restore(try decodeIDs(&r))
        case .eraseRange, .restoreRange:
            let id = try ElementCodec.decodeOpID(&r)
            let n = try r.count("range count", minSize: 2)
            var ranges: [PointRange] = []
            ranges.reserveCapacity(n)
            for _ in 0..<n {
                let at = r.offset
                let from = try r.varint("range start"), len = try r.varint("range length")
                guard let f = UInt32(exactly: from), let l = UInt32(exactly: len), l > 0,
                      f.addingReportingOverflow(l).overflow == false else {
                    throw r.error(.corrupt, "point range out of bounds", at: at)
                }
                ranges.append(PointRange(f, f + l))
            }
            body = kind == .eraseRange ? .eraseRange(id, ranges) : .restoreRange(id, ranges)
        case .move:
            let n = try r.count("move count", minSize: 11)
            var ts: [ElementTransform] = []
            ts.reserveCapacity(n)
            for _ in 0..<n {
                let id = try ElementCodec.decodeOpID(&r)
                ts.append(ElementTransform(id, try ElementCodec.decodeTransform(&r)))
            }
            body = .move(ts)
        case .reorder:
            let n = try r.count("reorder count", minSize: 11)
            var zs: [ElementZ] = []
            zs.reserveCapacity(n)
            for _ in 0..<n {
                let id = try ElementCodec.decodeOpID(&r)
                zs.append(ElementZ(id, try ElementCodec.decodeZKey(&r)))
            }
            body = .reorder(zs)
        case .createDocument:
            body = .createDocument(title: try r.string("title", max: .max))
        case .setTitle:
            body = .setTitle(try r.string("title", max: .max))
        case .addPage:
            let p = try pageID(&r)
            let pos = try ElementCodec.decodeZKey(&r)
            body = .addPage(p, position: pos, canvas: try canvas(&r))
        case .deletePage:
            let p = try pageID(&r)
            body = .deletePage(p, seen: try ElementCodec.decodeClock(&r))
        case .restorePage:
            body = .restorePage(try pageID(&r))
        case .movePage:
            let p = try pageID(&r)
            body = .movePage(p, position: try ElementCodec.decodeZKey(&r))
        case .setCanvas:
            let p = try pageID(&r)
            body = .setCanvas(p, try canvas(&r))
        case .deleteDocument:
            body = .deleteDocument
        case .restoreDocument:
            body = .restoreDocument
        }
        try r.expectEnd("operation \(kind)")
        let op = Op(id: OpID(replica: ReplicaID(replica), counter: counter), lamport: lamport,
                    context: context, wallTime: wall, body: body)
        // [LOG-20] The rules an operation obeys on its own, here as at every other door.
        if let v = OpValidator.violation(of: op, allowingDeferred: deferringPoints) {
            throw r.error(.corrupt, v.description, at: v.rule == .log4 ? lamportAt : base)
        }
        return op
    }

    private static func decodeIDs(_ r: inout ByteReader) throws -> [ElementID] {
        let n = try r.count("id count", minSize: 9)
        var ids: [ElementID] = []
        ids.reserveCapacity(n)
        for _ in 0..<n { ids.append(try ElementCodec.decodeOpID(&r)) }
        return ids
    }

    private static func pageID(_ r: inout ByteReader) throws -> PageID {
        PageID(UUID(bytes: try r.bytes(16, "page id"))!)
    }

    private static func canvas(_ r: inout ByteReader) throws -> CanvasSize {
        let at = r.offset
        let w = try ElementCodec.int32(&r, "canvas width"), h = try ElementCodec.int32(&r, "canvas height")
        guard w > 0, h > 0 else { throw r.error(.corrupt, "canvas size must be positive", at: at) }
        return CanvasSize(width: w, height: h)
    }
}
