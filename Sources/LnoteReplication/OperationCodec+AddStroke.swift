import LnoteModel

/// `addStroke3` (type 0x0A), `addStroke2` (0x09) and `addStroke` (0x06), the compact
/// encodings of an add of a stroke (`Protocol/operation-log.md` [LOG-24], [LOG-29],
/// [LOG-32]): writers write `addStroke3` for every new stroke; the other two are what they
/// wrote before it, read forever. The same
/// operation in hash form is an `add` (0x01); `ContentHash` hashes that form, so an operation
/// has one content hash whichever form a log or a peer holds.
///
/// After the header (replica, counter, wall time, context: no Lamport timestamp, which
/// [LOG-4] gives), one byte of flags (the tool in bits 0–1, bit 2 when a z key follows; in
/// `addStroke2` and `addStroke3`, bit 3 when the colour is opaque black and not written), the z key only when
/// it is not the usual one (`layer` = the Lamport timestamp, no path, empty fraction: an
/// element put on top), the colour, the width, and the points in stream v2 coded alone
/// (`StrokeCodecV2.Context.standalone`; with written parameters in `addStroke2`,
/// `standaloneWithParameters`; with grids too in `addStroke3`, `standaloneWithGrids`).
extension OperationCodec {
    /// Bits 0–1 of the flags byte: the tool.
    static let toolMask: UInt8 = 0b011
    /// Bit 2 of the flags byte: a z key follows (else the top key is implied).
    static let explicitZ: UInt8 = 0b100
    /// Bit 3 of an `addStroke2`'s or `addStroke3`'s flags byte: the colour is opaque black (`#000000ff`, what
    /// `lnote import` and most pens give) and is not written ([LOG-29]).
    static let blackInk: UInt8 = 0b1000
    /// The colour bit 3 stands for.
    static let black = RGBA(r: 0, g: 0, b: 0, a: 255)

    /// The context a compact stroke's points are coded against, by frame version
    /// (`compactVersion(ofType:)`).
    static func pointContext(version: Int) -> StrokeCodecV2.Context { .frame(version: version) }

    /// The name of a compact stroke frame's type, for errors.
    static func compactName(version: Int) -> String {
        version == 1 ? "addStroke" : "addStroke\(version)"
    }

    /// The z key an `addStroke` implies when its flags say none follows: the operation's own
    /// Lamport timestamp as the layer, the key of an element put on top (`PageReplica.topKey`).
    public static func impliedZ(lamport: UInt64) -> ZKey {
        ZKey(layer: Int64(clamping: lamport))
    }

    static func encodeAddStroke(_ op: Op, _ s: Stroke, _ z: ZKey, version: Int, into w: inout ByteWriter) {
        // A stroke replayed with its points deferred ([LOG-27]) is never written again.
        precondition(s.isResolved, "operation \(op.id) encoded with deferred points")
        w.u64(op.id.replica.rawValue)
        w.varint(op.id.counter)
        w.svarint(op.wallTime)
        var others = op.context
        others[op.id.replica] = 0
        ElementCodec.encode(others, into: &w)
        let implied = z == impliedZ(lamport: op.lamport)
        let omitColor = version >= 2 && s.style.color == black
        w.u8(s.style.tool.rawValue | (implied ? 0 : explicitZ) | (omitColor ? blackInk : 0))
        if !implied { ElementCodec.encode(z, into: &w) }
        if !omitColor { w.u32(s.style.color.packed) }
        w.svarint(Int64(s.style.width))
        var context = pointContext(version: version)
        StrokeCodecV2.encodePoints(s.points, width: s.style.width, context: &context, into: &w)
    }

    /// The body of an `addStroke` after its header. `r` requires shortest varints.
    /// `deferring`: the operation's id, when its points are to be deferred ([LOG-27]).
    static func decodeAddStrokeBody(_ r: inout ByteReader, lamport: UInt64, version: Int, deferring: OpID? = nil) throws -> Op.Body {
        let flagsAt = r.offset
        let flags = try r.u8("flags")
        let known = toolMask | explicitZ | (version >= 2 ? blackInk : 0)
        guard flags & ~known == 0, let tool = ToolKind(rawValue: flags & toolMask) else {
            throw r.error(.corrupt, "\(compactName(version: version)) flags 0x\(String(flags, radix: 16)) name no tool or set unknown bits",
                          at: flagsAt)
        }
        let z: ZKey
        if flags & explicitZ != 0 {
            let zAt = r.offset
            z = try ElementCodec.decodeZKey(&r)
            // [LOG-22] One encoding: the usual key is implied, never written out.
            guard z != impliedZ(lamport: lamport) else {
                throw r.error(.corrupt, "z key written out although it is the implied one", at: zAt)
            }
        } else {
            z = impliedZ(lamport: lamport)
        }
        let color = try decodeColor(&r, flags: flags, version: version)
        let width = try ElementCodec.int32(&r, "width")
        let style = InkStyle(tool: tool, color: color, width: width)
        if let id = deferring {
            let at = r.offset
            let count = try StrokeCodecV2.skipPoints(&r)
            let source = DeferredPoints(frame: r.bytes, pointsAt: at - r.base, style: style, operation: id, base: r.base,
                                        path: r.path, version: version)
            return .add(.stroke(Stroke(style: style, deferred: source.slot(index: 0, count: count))), z: z)
        }
        var context = pointContext(version: version)
        let points = try StrokeCodecV2.decodePoints(&r, width: width, context: &context)
        return .add(.stroke(Stroke(style: style, points: points)), z: z)
    }

    /// The colour of a compact stroke: implied by bit 3 of an `addStroke2`'s or `addStroke3`'s
    /// flags, else written; [LOG-29]: neither writes out opaque black (one encoding).
    static func decodeColor(_ r: inout ByteReader, flags: UInt8, version: Int) throws -> RGBA {
        if flags & blackInk != 0 { return black }
        let at = r.offset
        let color = RGBA(packed: try r.u32("color"))
        guard version < 2 || color != black else {
            throw r.error(.corrupt, "opaque black written out although flags bit 3 implies it", at: at)
        }
        return color
    }
}

/// An `addStroke` frame read straight from its bytes for a replay ([LOG-28]): the fields a
/// replica needs to apply a plain add, without an `Op` (no context clock, no body enum).
/// Only what `OperationCodec.plainAddStroke(_:base:path:)` (or its reading of a frame in a
/// log tail's bytes) accepts: a context naming no
/// replica but the author (its own entry `counter − 1`, so the Lamport timestamp is the
/// counter, [LOG-4]), the implied z key, the points deferred ([LOG-27]).
package struct PlainAddStroke: Sendable {
    package var id: OpID
    package var wallTime: Int64
    /// Its points deferred: to the frame's own source, or to a log tail's (a slot per add).
    package var stroke: Stroke
    /// [LOG-4]: the counter, as the context names no other replica.
    package var lamport: UInt64 { id.counter }
    /// The implied z key ([LOG-24]).
    package var z: ZKey { OperationCodec.impliedZ(lamport: lamport) }
}

extension OperationCodec {
    /// The frame as a plain add ([LOG-28]), or nil when it is anything else: another type, a
    /// context naming another replica, an explicit z key, or anything `decode(_:base:path:
    /// deferringPoints: true)` would refuse (that decoder then reports it, with its error
    /// and offset). Accepts exactly what that decoder accepts among such frames, with the
    /// same checks, the validator's ([LOG-20]) included.
    package static func plainAddStroke(_ frame: Frame, base: Int, path: String?) -> PlainAddStroke? {
        guard let version = compactVersion(ofType: frame.type) else { return nil }
        var r = ByteReader(frame.payload, base: base, path: path)
        r.shortestVarints = true
        guard let (replica, counter, wall) = try? plainAddHeader(&r),
              let (style, count, at) = plainAddBody(&r, replica: replica, counter: counter, version: version) else { return nil }
        let id = OpID(replica: ReplicaID(replica), counter: counter)
        let source = DeferredPoints(frame: r.bytes, pointsAt: at - r.base, style: style, operation: id, base: r.base,
                                    path: r.path, version: version)
        return PlainAddStroke(id: id, wallTime: wall, stroke: Stroke(style: style, deferred: source.slot(index: 0, count: count)))
    }

    /// `plainAddStroke(_:base:path:)` of a frame still in the bytes of a log tail, read where
    /// it lies (no copy of its payload): `bytes[payload]` is the payload of a frame of type
    /// `type` whose CRC was checked, `bytes[0]` is at file offset `base`. A log-form frame
    /// (type 0x8A, [LOG-33]) is read under `anchor` as the `addStroke3` frame it stands for,
    /// with exactly `LogAnchor.expand`'s conditions. Appends the add to `adds` and where its
    /// points are to `streams` (its slot in `tail`: the caller hands the streams to
    /// `tail.setStreams` before any is used); false, appending nothing, when it is no plain add.
    package static func plainAddStroke(_ bytes: [UInt8], payload: Range<Int>, type: UInt8, anchor: LogAnchor?, base: Int,
                                       path: String?, tail: DeferredPoints, into adds: inout [PlainAddStroke],
                                       streams: inout [DeferredPoints.FrameStream]) -> Bool {
        var r = ByteReader(bytes, range: payload, base: base, path: path)
        r.shortestVarints = true
        let version: Int, replica: UInt64, counter: UInt64, wall: Int64
        // The file offset that byte 0 of the frame's standard payload stands for.
        var payloadBase = base + payload.lowerBound
        if type == LogAnchor.logFormAddStroke3 {
            guard let anchor, let (c, w, shift) = anchor.logFormHeader(&r, payloadCount: payload.count) else { return false }
            (version, replica, counter, wall) = (3, anchor.writer, c, w)
            payloadBase -= shift
        } else {
            guard let v = compactVersion(ofType: type), let (a, c, w) = try? plainAddHeader(&r) else { return false }
            (version, replica, counter, wall) = (v, a, c, w)
        }
        guard let (style, count, at) = plainAddBody(&r, replica: replica, counter: counter, version: version) else { return false }
        let id = OpID(replica: ReplicaID(replica), counter: counter)
        adds.append(PlainAddStroke(id: id, wallTime: wall,
                                   stroke: Stroke(style: style, deferred: tail.slot(index: streams.count, count: count))))
        streams.append(DeferredPoints.FrameStream(pointsAt: at - base, end: payload.upperBound, style: style, operation: id,
                                                  version: version, payloadBase: payloadBase))
        return true
    }

    /// A compact stroke frame's header, as `decodeHeader` reads it: replica, counter, wall time.
    private static func plainAddHeader(_ r: inout ByteReader) throws -> (UInt64, UInt64, Int64) {
        let replica = try r.u64("replica id")
        let counter = try r.varint("counter")
        let wall = try r.svarint("wall time")
        return (replica, counter, wall)
    }

    /// The rest of a plain add after its wall time, with every check `plainAddStroke` makes:
    /// its style, its point count and the file offset where its stream starts; nil when it is
    /// no plain add or anything is refused. `r` ends at the payload's end.
    private static func plainAddBody(_ r: inout ByteReader, replica: UInt64, counter: UInt64, version: Int) -> (InkStyle, Int, Int)? {
        do {
            // [LOG-2]: neither zero.
            guard replica != 0, counter != 0, counter <= OpValidator.maxLamport else { return nil }
            // The context: empty. Its entry count is read as `decodeClock` reads it (same
            // checks, same errors); any other count means no plain add.
            guard try r.count("clock entries", minSize: 9) == 0 else { return nil }
            // The body, as `decodeAddStrokeBody` reads it: the implied key only.
            let flags = try r.u8("flags")
            guard flags & ~(toolMask | (version >= 2 ? blackInk : 0)) == 0, let tool = ToolKind(rawValue: flags & toolMask) else {
                return nil
            }
            let color = try decodeColor(&r, flags: flags, version: version)
            let width = try ElementCodec.int32(&r, "width")
            let style = InkStyle(tool: tool, color: color, width: width)
            let at = r.offset
            let count = try StrokeCodecV2.skipPoints(&r)
            guard r.isAtEnd else { return nil }
            // [LOG-23] and [SHR-6] / [MERGE-12] as `OpValidator` checks them (the context is
            // empty but for the author; [LOG-3] and [LOG-4] hold by construction).
            guard ContentBounds.strokeProblem(count: count, width: width) == nil else { return nil }
            let z = impliedZ(lamport: counter)
            guard z.validityProblem == nil, z.layer <= Int64(counter), z.layer >= -Int64(counter) else { return nil }
            return (style, count, at)
        } catch {
            return nil
        }
    }
}
