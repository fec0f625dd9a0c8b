import LnoteModel

/// `addStroke` (type 0x06), the compact encoding of an add of a stroke
/// (`Protocol/operation-log.md` [LOG-24]): what writers write for every new stroke. The same
/// operation in hash form is an `add` (0x01); `ContentHash` hashes that form, so an operation
/// has one content hash whichever form a log or a peer holds.
///
/// After the header (replica, counter, wall time, context: no Lamport timestamp, which
/// [LOG-4] gives), one byte of flags (the tool in bits 0–1, bit 2 when a z key follows), the
/// z key only when it is not the usual one (`layer` = the Lamport timestamp, no path, empty
/// fraction: an element put on top), the colour, the width, and the points in stream v2
/// coded alone (`StrokeCodecV2.Context.standalone`).
extension OperationCodec {
    /// Bits 0–1 of the flags byte: the tool.
    static let toolMask: UInt8 = 0b011
    /// Bit 2 of the flags byte: a z key follows (else the top key is implied).
    static let explicitZ: UInt8 = 0b100

    /// The z key an `addStroke` implies when its flags say none follows: the operation's own
    /// Lamport timestamp as the layer, the key of an element put on top (`PageReplica.topKey`).
    public static func impliedZ(lamport: UInt64) -> ZKey {
        ZKey(layer: Int64(clamping: lamport))
    }

    static func encodeAddStroke(_ op: Op, _ s: Stroke, _ z: ZKey, into w: inout ByteWriter) {
        // A stroke replayed with its points deferred ([LOG-27]) is never written again.
        precondition(s.isResolved, "operation \(op.id) encoded with deferred points")
        w.u64(op.id.replica.rawValue)
        w.varint(op.id.counter)
        w.svarint(op.wallTime)
        var others = op.context
        others[op.id.replica] = 0
        ElementCodec.encode(others, into: &w)
        let implied = z == impliedZ(lamport: op.lamport)
        w.u8(s.style.tool.rawValue | (implied ? 0 : explicitZ))
        if !implied { ElementCodec.encode(z, into: &w) }
        w.u32(s.style.color.packed)
        w.svarint(Int64(s.style.width))
        var context = StrokeCodecV2.Context.standalone
        StrokeCodecV2.encodePoints(s.points, width: s.style.width, context: &context, into: &w)
    }

    /// The body of an `addStroke` after its header. `r` requires shortest varints.
    /// `deferring`: the operation's id, when its points are to be deferred ([LOG-27]).
    static func decodeAddStrokeBody(_ r: inout ByteReader, lamport: UInt64, deferring: OpID? = nil) throws -> Op.Body {
        let flagsAt = r.offset
        let flags = try r.u8("flags")
        guard flags & ~(toolMask | explicitZ) == 0, let tool = ToolKind(rawValue: flags & toolMask) else {
            throw r.error(.corrupt, "addStroke flags 0x\(String(flags, radix: 16)) name no tool or set unknown bits", at: flagsAt)
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
        let color = RGBA(packed: try r.u32("color"))
        let width = try ElementCodec.int32(&r, "width")
        let style = InkStyle(tool: tool, color: color, width: width)
        if let id = deferring {
            let at = r.offset
            let count = try StrokeCodecV2.skipPoints(&r)
            let source = DeferredPoints(frame: r.bytes, pointsAt: at - r.base, style: style, operation: id, base: r.base, path: r.path)
            return .add(.stroke(Stroke(style: style, deferred: source.slot(index: 0, count: count))), z: z)
        }
        var context = StrokeCodecV2.Context.standalone
        let points = try StrokeCodecV2.decodePoints(&r, width: width, context: &context)
        return .add(.stroke(Stroke(style: style, points: points)), z: z)
    }
}
