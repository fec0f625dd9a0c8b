/// Binary encodings of the small model values shared by snapshots and operations.
/// Every layout is specified in `Protocol/page-snapshot.md` ("Shared encodings").
public enum ElementCodec {
    public static let strokeTag: UInt8 = 1
    public static let imageTag: UInt8 = 2

    public static func encode(_ c: ElementContent, into w: inout ByteWriter) {
        switch c {
        case .stroke(let s):
            w.u8(strokeTag)
            w.u8(s.style.tool.rawValue)
            w.u32(s.style.color.packed)
            w.svarint(Int64(s.style.width))
            StrokeCodec.encodePoints(s.points, into: &w)
        case .image(let i):
            w.u8(imageTag)
            w.append(i.asset.digest)
            encode(i.frame, into: &w)
            w.svarint(Int64(i.rotation))
        }
    }

    public static func decodeContent(_ r: inout ByteReader) throws -> ElementContent {
        let at = r.offset
        switch try r.u8("element kind") {
        case strokeTag:
            let style = try decodeStrokeStyle(&r)
            let points = try StrokeCodec.decodePoints(&r)
            return .stroke(Stroke(style: style, points: points))
        case imageTag:
            let digest = try r.bytes(32, "asset digest")
            let frame = try decodeRect(&r)
            let rotation = try int32(&r, "rotation")
            return .image(ImageElement(asset: AssetID(digest: digest)!, frame: frame, rotation: rotation))
        case let k:
            throw r.error(.corrupt, "unknown element kind \(k)", at: at)
        }
    }

    /// A version-1 stroke's style, after its kind byte: tool, color, width.
    static func decodeStrokeStyle(_ r: inout ByteReader) throws -> InkStyle {
        let toolAt = r.offset
        guard let tool = ToolKind(rawValue: try r.u8("tool")) else {
            throw r.error(.corrupt, "unknown tool kind", at: toolAt)
        }
        let color = RGBA(packed: try r.u32("color"))
        let width = try int32(&r, "width")
        return InkStyle(tool: tool, color: color, width: width)
    }

    public static func encode(_ q: QRect, into w: inout ByteWriter) {
        w.svarint(Int64(q.x)); w.svarint(Int64(q.y)); w.svarint(Int64(q.width)); w.svarint(Int64(q.height))
    }

    public static func decodeRect(_ r: inout ByteReader) throws -> QRect {
        QRect(x: try int32(&r, "x"), y: try int32(&r, "y"), width: try int32(&r, "width"), height: try int32(&r, "height"))
    }

    public static func encode(_ t: Transform, into w: inout ByteWriter) {
        if t.isTranslation {
            w.u8(0)
            w.svarint(Int64(t.tx)); w.svarint(Int64(t.ty))
        } else {
            w.u8(1)
            for v in [t.a, t.b, t.c, t.d, t.tx, t.ty] { w.svarint(Int64(v)) }
        }
    }

    public static func decodeTransform(_ r: inout ByteReader) throws -> Transform {
        let at = r.offset
        switch try r.u8("transform kind") {
        case 0:
            return .translation(try int32(&r, "tx"), try int32(&r, "ty"))
        case 1:
            let t = Transform(a: try int32(&r, "a"), b: try int32(&r, "b"), c: try int32(&r, "c"),
                              d: try int32(&r, "d"), tx: try int32(&r, "tx"), ty: try int32(&r, "ty"))
            // [SHR-2] A translation written in full: accepted, except where one encoding is required.
            if r.shortestVarints && t.isTranslation {
                throw r.error(.corrupt, "a translation written as a matrix (kind 1)", at: at)
            }
            return t
        case let k:
            throw r.error(.corrupt, "unknown transform kind \(k)", at: at)
        }
    }

    /// [SHR-6] layer svarint; step count varint; each step's fraction (varint length, bytes)
    /// and tag (OpID); the final fraction (varint length, bytes).
    public static func encode(_ z: ZKey, into w: inout ByteWriter) {
        w.svarint(z.layer)
        w.varint(UInt64(z.path.count))
        for step in z.path {
            w.lengthPrefixed(step.fraction)
            encode(step.tag, into: &w)
        }
        w.lengthPrefixed(z.fraction)
    }

    public static func decodeZKey(_ r: inout ByteReader) throws -> ZKey {
        let start = r.offset
        let layer = try r.svarint("z layer")
        let depthAt = r.offset
        guard let depth = Int(exactly: try r.varint("z key steps")), depth <= ZKey.maxDepth else {
            throw r.error(.corrupt, "z key of more than \(ZKey.maxDepth) steps", at: depthAt)
        }
        // Each step takes at least 10 bytes (an empty fraction's length, a replica, a counter).
        guard depth * 10 <= r.remaining else {
            throw r.error(.truncated, "z key of \(depth) steps in \(r.remaining) bytes", at: depthAt)
        }
        func fraction() throws -> [UInt8] {
            let at = r.offset
            guard let n = Int(exactly: try r.varint("z fraction length")), n <= ZKey.maxFractionBytes else {
                throw r.error(.corrupt, "z key fraction longer than \(ZKey.maxFractionBytes) bytes", at: at)
            }
            return try r.bytes(n, "z fraction")
        }
        var path: [ZKey.Step] = []
        path.reserveCapacity(depth)
        for _ in 0..<depth {
            let f = try fraction()
            path.append(ZKey.Step(fraction: f, tag: try decodeOpID(&r)))
        }
        let z = ZKey(layer: layer, path: path, fraction: try fraction())
        if let problem = z.validityProblem { throw r.error(.corrupt, problem, at: start) }
        return z
    }

    public static func encode(_ id: OpID, into w: inout ByteWriter) {
        w.u64(id.replica.rawValue)
        w.varint(id.counter)
    }

    public static func decodeOpID(_ r: inout ByteReader) throws -> OpID {
        let rep = try r.u64("replica id")
        let at = r.offset
        let c = try r.varint("counter")
        guard rep != 0, c != 0 else { throw r.error(.corrupt, "zero replica id or counter", at: at) }
        return OpID(replica: ReplicaID(rep), counter: c)
    }

    public static func encode(_ ref: OpRef, into w: inout ByteWriter) {
        encode(ref.id, into: &w)
        w.varint(ref.lamport)
    }

    public static func decodeOpRef(_ r: inout ByteReader) throws -> OpRef {
        let id = try decodeOpID(&r)
        return OpRef(id: id, lamport: try r.varint("lamport"))
    }

    /// A clock: entry count, then (replica u64, counter varint) in strictly increasing
    /// replica order with non-zero counters.
    public static func encode(_ c: VectorClock, into w: inout ByteWriter) {
        w.varint(UInt64(c.entries.count))
        for e in c.entries {
            w.u64(e.replica.rawValue)
            w.varint(e.counter)
        }
    }

    public static func decodeClock(_ r: inout ByteReader) throws -> VectorClock {
        let n = try r.count("clock entries", minSize: 9)
        var pairs: [(ReplicaID, UInt64)] = []
        pairs.reserveCapacity(n)
        var last: UInt64 = 0
        for i in 0..<n {
            let at = r.offset
            let rep = try r.u64("clock replica")
            let c = try r.varint("clock counter")
            guard rep != 0, c != 0, i == 0 || rep > last else {
                throw r.error(.corrupt, "clock entries not strictly increasing or zero", at: at)
            }
            last = rep
            pairs.append((ReplicaID(rep), c))
        }
        return VectorClock(pairs)
    }

    public static func int32(_ r: inout ByteReader, _ what: String) throws -> Int32 {
        let at = r.offset
        guard let v = Int32(exactly: try r.svarint(what)) else {
            throw r.error(.corrupt, "\(what) does not fit 32 bits", at: at)
        }
        return v
    }
}
