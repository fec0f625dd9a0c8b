/// Element records of snapshot format versions 2, 3 and 4 (`Protocol/page-snapshot.md` 4.3,
/// "Element record, version 2", [SNAP-33] … [SNAP-36], [SNAP-42], [SNAP-43]): each record
/// coded against the previous record of its chunk of 64, its points in the version 2 point
/// stream (`StrokeCodecV2`; with digitizer grids from version 3; with predictors and the
/// *next id* flag from version 4).
extension PageSnapshot {
    /// Record flags ([SNAP-34]).
    enum RecordFlag {
        /// The id's replica is the previous record's (no replica field).
        static let sameReplica: UInt8 = 0x01
        /// The transform is the identity and its frontier empty (no transform fields).
        static let plainTransform: UInt8 = 0x02
        /// The z frontier, the erased ranges and the edit frontier are all empty (none written).
        static let noHistory: UInt8 = 0x04
        /// An image (else a stroke).
        static let image: UInt8 = 0x08
        /// A stroke with the previous stroke's style (no tool, color, width).
        static let sameStyle: UInt8 = 0x10
        /// The z key is the previous record's layer plus one, with no path and an empty
        /// fraction (what an element added on top gets): no z fields.
        static let nextLayer: UInt8 = 0x20
        /// Version 4 ([SNAP-43]): the counter is the previous record's plus one and
        /// `lamport − counter` the previous record's (no counter or lamport field).
        static let nextID: UInt8 = 0x40
        /// The flags a record of a version-2 or version-3 file may have.
        static let knownV2: UInt8 = 0x3F
        /// The flags a record of a version-4 file may have.
        static let knownV4: UInt8 = 0x7F
    }

    /// What a record is coded against: the previous record of its chunk ([SNAP-35]).
    struct RecordContext {
        var replica: ReplicaID?
        var counter: UInt64 = 0
        /// Lamport minus counter (modulo 2⁶⁴).
        var lead: UInt64 = 0
        var wallTime: Int64 = 0
        /// The previous z key's version-1 encoding (2.4), and its layer.
        var z: [UInt8] = []
        /// Set by the reader when the previous key was the next layer: `z` is then stale and
        /// the key is `layer` alone (its encoding made only when a record needs it).
        var zIsLayer = false
        var layer: Int64?
        var style: InkStyle?
        var points = StrokeCodecV2.Context()
        /// Whether records may use the *next id* flag (version 4, [SNAP-43]).
        let nextIDs: Bool

        /// The context at the start of a chunk of a version-`version` file (2 to 4): from
        /// version 3 its points are coded with digitizer grids ([SNAP-42], [PT2-11]); from
        /// version 4 with predictors too ([PT2-12]), and its records may say *next id*
        /// ([SNAP-43]).
        init(version: UInt16) {
            if version >= 4 {
                points = .chunkWithPredictors
            } else if version == 3 {
                points = .chunkWithGrids
            }
            nextIDs = version >= 4
        }
    }

    /// The replica fields of version 2: an index into the page clock's replicas (sorted), or
    /// the clock's replica count followed by the replica itself for one the clock lacks.
    struct ReplicaTable {
        let replicas: [ReplicaID]
        let index: [ReplicaID: Int]
        init(_ clock: VectorClock) {
            replicas = clock.replicas
            var index: [ReplicaID: Int] = [:]
            for (i, r) in replicas.enumerated() { index[r] = i }
            self.index = index
        }
        func contains(_ r: ReplicaID) -> Bool {
            var low = 0, high = replicas.count
            while low < high {
                let mid = (low + high) / 2
                if replicas[mid] < r { low = mid + 1 } else { high = mid }
            }
            return low < replicas.count && replicas[low] == r
        }
    }

    static func encodeV2(_ e: ElementRecord, replicas: ReplicaTable, context c: inout RecordContext,
                         into b: inout ByteWriter) {
        var flags: UInt8 = 0
        if e.id.replica == c.replica { flags |= RecordFlag.sameReplica }
        let plain = e.transform.value == .identity && e.transform.frontier.isEmpty
        if plain { flags |= RecordFlag.plainTransform }
        let noHistory = e.z.frontier.isEmpty && e.erased.isEmpty && e.frontier.isEmpty
        if noHistory { flags |= RecordFlag.noHistory }
        let zValue = e.z.value
        let nextLayer = zValue.path.isEmpty && zValue.fraction.isEmpty && c.layer.map { $0 != .max && zValue.layer == $0 + 1 } == true
        if nextLayer { flags |= RecordFlag.nextLayer }
        var style: InkStyle?
        switch e.content {
        case .image: flags |= RecordFlag.image
        case .stroke(let s):
            style = s.style
            if s.style == c.style { flags |= RecordFlag.sameStyle }
        }
        let lead = e.lamport &- e.id.counter
        // [SNAP-43] The usual case of one author drawing: the next counter, the same lead.
        let nextID = c.nextIDs && e.id.counter == c.counter &+ 1 && lead == c.lead
        if nextID { flags |= RecordFlag.nextID }
        b.u8(flags)
        if flags & RecordFlag.sameReplica == 0 {
            if let i = replicas.index[e.id.replica] {
                b.varint(UInt64(i))
            } else {
                b.varint(UInt64(replicas.replicas.count))
                b.u64(e.id.replica.rawValue)
            }
        }
        if !nextID {
            b.svarint(Int64(bitPattern: e.id.counter &- c.counter))
            b.svarint(Int64(bitPattern: lead &- c.lead))
        }
        b.svarint(Int64(bitPattern: UInt64(bitPattern: e.wallTime) &- UInt64(bitPattern: c.wallTime)))
        if !plain {
            ElementCodec.encode(e.transform.value, into: &b)
            encodeRefs(e.transform.frontier, into: &b)
        }
        var zw = ByteWriter()
        ElementCodec.encode(e.z.value, into: &zw)
        let z = zw.bytes
        if !nextLayer {
            var shared = 0
            while shared < min(z.count, c.z.count) && z[shared] == c.z[shared] { shared += 1 }
            b.varint(UInt64(shared))
            b.varint(UInt64(z.count - shared))
            b.append(z[shared...])
        }
        if !noHistory {
            encodeRefs(e.z.frontier, into: &b)
            encodeRanges(e.erased, into: &b)
            encodeRefs(e.frontier, into: &b)
        }
        switch e.content {
        case .image(let i):
            b.append(i.asset.digest)
            ElementCodec.encode(i.frame, into: &b)
            b.svarint(Int64(i.rotation))
        case .stroke(let s):
            if flags & RecordFlag.sameStyle == 0 {
                b.u8(s.style.tool.rawValue)
                b.u32(s.style.color.packed)
                b.svarint(Int64(s.style.width))
            }
            StrokeCodecV2.encodePoints(s.points, width: s.style.width, context: &c.points, into: &b)
        }
        c.replica = e.id.replica
        c.counter = e.id.counter
        c.lead = lead
        c.wallTime = e.wallTime
        c.z = z
        c.layer = zValue.layer
        if let style { c.style = style }
    }

    /// One version-2 element record ([SNAP-34]), without the checks that involve its
    /// neighbours but those of its coding against the previous record (`context`).
    /// `r.shortestVarints` must be set: version 2 is canonical throughout.
    /// A z key as a prefix of `previous` and the bytes after it ([SNAP-34]): the key and its
    /// encoding.
    static func decodeZV2(_ r: inout ByteReader, previous: [UInt8]) throws -> (ZKey, [UInt8]) {
        let zAt = r.offset
        let shared = try r.varint("z prefix")
        guard let s = Int(exactly: shared), s <= previous.count else {
            throw r.error(.corrupt, "z prefix of \(shared) bytes, the previous key has \(previous.count)", at: zAt)
        }
        let rest = try r.count("z bytes", max: r.remaining)
        let restBytes = try r.skip(rest, "z bytes")
        if rest > 0 && s < previous.count && r.bytes[restBytes.lowerBound] == previous[s] {
            throw r.error(.corrupt, "z prefix shorter than what the keys share", at: zAt)
        }
        var z = Array(previous[0..<s])
        z.append(contentsOf: r.bytes[restBytes])
        var zr = ByteReader(z, path: r.path)
        zr.shortestVarints = true
        let zKey: ZKey
        do {
            zKey = try ElementCodec.decodeZKey(&zr)
        } catch let e as LnoteError {
            throw r.error(.corrupt, "z key: \(e.message)", at: zAt)
        }
        guard zr.isAtEnd else { throw r.error(.corrupt, "bytes after the z key", at: zAt) }
        var zw = ByteWriter(capacity: z.count)
        ElementCodec.encode(zKey, into: &zw)
        guard zw.bytes == z else { throw r.error(.corrupt, "z key not in its canonical encoding", at: zAt) }
        return (zKey, z)
    }

    /// With `deferring` (a snapshot read with its points deferred, [SNAP-38]), a stroke's
    /// point stream is stepped over after [PT2-2]'s checks and the stroke holds the slot of
    /// record `index` instead of its points.
    static func decodeElementV2(_ r: inout ByteReader, replicas: ReplicaTable,
                                context c: inout RecordContext, deferring: DeferredPoints? = nil,
                                index: Int = 0) throws -> ElementRecord {
        let at = r.offset
        let flags = try r.u8("record flags")
        guard flags & ~(c.nextIDs ? RecordFlag.knownV4 : RecordFlag.knownV2) == 0 else {
            throw r.error(.corrupt, "unknown record flags", at: at)
        }
        let replica: ReplicaID
        if flags & RecordFlag.sameReplica != 0 {
            guard let previous = c.replica else {
                throw r.error(.corrupt, "the first record of a chunk has no previous replica", at: at)
            }
            replica = previous
        } else {
            let indexAt = r.offset
            let index = try r.varint("replica index")
            if index < UInt64(replicas.replicas.count) {
                replica = replicas.replicas[Int(index)]
            } else if index == UInt64(replicas.replicas.count) {
                let raw = try r.u64("replica id")
                replica = ReplicaID(raw)
                guard raw != 0, !replicas.contains(replica) else {
                    throw r.error(.corrupt, "replica written in full but zero or in the page clock", at: indexAt)
                }
            } else {
                throw r.error(.corrupt, "replica index \(index) beyond the page clock's \(replicas.replicas.count)", at: indexAt)
            }
            guard replica != c.replica else {
                throw r.error(.corrupt, "replica written where it is the previous record's", at: indexAt)
            }
        }
        let counter: UInt64, lead: UInt64
        if flags & RecordFlag.nextID != 0 {
            // [SNAP-43] The counter after the previous record's (which is never the largest:
            // it wraps to zero, refused like a zero counter written out).
            counter = c.counter &+ 1
            lead = c.lead
            guard counter != 0 else { throw r.error(.corrupt, "next id after counter 2^64 - 1", at: at) }
        } else {
            let counterAt = r.offset
            counter = c.counter &+ UInt64(bitPattern: try r.svarint("counter delta"))
            guard counter != 0 else { throw r.error(.corrupt, "zero counter", at: counterAt) }
            lead = c.lead &+ UInt64(bitPattern: try r.svarint("lamport delta"))
            // [SNAP-43] Canonical: the next id is written with its flag.
            if c.nextIDs && counter == c.counter &+ 1 && lead == c.lead {
                throw r.error(.corrupt, "the next id written in full", at: at)
            }
        }
        let lamport = lead &+ counter
        let wallTime = Int64(bitPattern: UInt64(bitPattern: c.wallTime) &+ UInt64(bitPattern: try r.svarint("wall time delta")))
        var transform = LWWRegister(Transform.identity)
        if flags & RecordFlag.plainTransform == 0 {
            let tAt = r.offset
            transform = LWWRegister(try ElementCodec.decodeTransform(&r), frontier: try decodeRefs(&r, "transform frontier"))
            guard transform.value != .identity || !transform.frontier.isEmpty else {
                throw r.error(.corrupt, "identity transform written in full", at: tAt)
            }
        }
        // The z key: the next layer, or a prefix shared with the previous record's and the rest.
        let zKey: ZKey
        let z: [UInt8]?
        if flags & RecordFlag.nextLayer != 0 {
            guard let layer = c.layer, layer != .max else {
                throw r.error(.corrupt, "next layer without a previous layer", at: at)
            }
            zKey = ZKey(layer: layer + 1, path: [], fraction: [])
            z = nil  // encoded only if the next record needs it (no allocation per record)
        } else {
            var previous = c.z
            if c.zIsLayer, let layer = c.layer {
                var zw = ByteWriter(capacity: 12)
                ElementCodec.encode(ZKey(layer: layer, path: [], fraction: []), into: &zw)
                previous = zw.bytes
            }
            let decoded = try decodeZV2(&r, previous: previous)
            zKey = decoded.0
            z = decoded.1
            // [SNAP-34] Canonical: the next layer is written with its flag.
            if zKey.path.isEmpty && zKey.fraction.isEmpty, let layer = c.layer, layer != .max, zKey.layer == layer + 1 {
                throw r.error(.corrupt, "the next layer written in full", at: at)
            }
        }
        var zFrontier: [OpRef] = [], erased: [PointRange] = [], editFrontier: [OpRef] = []
        if flags & RecordFlag.noHistory == 0 {
            let hAt = r.offset
            zFrontier = try decodeRefs(&r, "z frontier")
            erased = try decodeRanges(&r)
            editFrontier = try decodeRefs(&r, "edit frontier")
            guard !zFrontier.isEmpty || !erased.isEmpty || !editFrontier.isEmpty else {
                throw r.error(.corrupt, "empty frontiers and ranges written in full", at: hAt)
            }
        }
        // [SNAP-19] What operations carried: within [LOG-23]'s bounds (a deferred stroke's
        // points when they are decoded); the content's problem is named before the
        // transform's. The identity transform needs no check.
        let transformProblem = flags & RecordFlag.plainTransform == 0 ? ContentBounds.problem(transform.value) : nil
        let id = OpID(replica: replica, counter: counter)
        c.replica = replica
        c.counter = counter
        c.lead = lead
        c.wallTime = wallTime
        if let z { c.z = z }
        c.zIsLayer = z == nil
        c.layer = zKey.layer
        // The content is checked, then built in the record returned: built in a variable
        // first, it compiled to a copy and a destroy, which for a deferred stroke retain and
        // release the source that every record of the snapshot shares, from each decoding
        // thread at once.
        if flags & RecordFlag.image != 0 {
            guard flags & RecordFlag.sameStyle == 0 else { throw r.error(.corrupt, "an image with a stroke style flag", at: at) }
            let digest = try r.bytes(32, "asset digest")
            let frame = try ElementCodec.decodeRect(&r)
            let rotation = try ElementCodec.int32(&r, "rotation")
            let image = ImageElement(asset: AssetID(digest: digest)!, frame: frame, rotation: rotation)
            if let problem = ContentBounds.problem(.image(image), allowingDeferred: true) ?? transformProblem {
                throw r.error(.corrupt, "element \(id): \(problem)", at: at)
            }
            return ElementRecord(id: id, lamport: lamport, wallTime: wallTime, content: .image(image), transform: consume transform,
                                 z: LWWRegister(consume zKey, frontier: consume zFrontier),
                                 erased: consume erased, frontier: consume editFrontier)
        }
        let style: InkStyle
        if flags & RecordFlag.sameStyle != 0 {
            guard let previous = c.style else { throw r.error(.corrupt, "no previous stroke style in this chunk", at: at) }
            style = previous
        } else {
            let styleAt = r.offset
            guard let tool = ToolKind(rawValue: try r.u8("tool")) else {
                throw r.error(.corrupt, "unknown tool kind", at: styleAt)
            }
            let color = RGBA(packed: try r.u32("color"))
            let width = try ElementCodec.int32(&r, "width")
            style = InkStyle(tool: tool, color: color, width: width)
            guard style != c.style else { throw r.error(.corrupt, "style written where it is the previous stroke's", at: styleAt) }
        }
        c.style = style
        if let deferring {
            // From its count and width; its points are checked when they are decoded.
            let count = try StrokeCodecV2.skipPoints(&r)
            if let problem = ContentBounds.strokeProblem(count: count, width: style.width) ?? transformProblem {
                throw r.error(.corrupt, "element \(id): \(problem)", at: at)
            }
            return ElementRecord(id: id, lamport: lamport, wallTime: wallTime,
                                 content: .stroke(Stroke(style: style, deferred: deferring.slot(index: index, count: count))),
                                 transform: consume transform, z: LWWRegister(consume zKey, frontier: consume zFrontier),
                                 erased: consume erased, frontier: consume editFrontier)
        }
        let points = try StrokeCodecV2.decodePoints(&r, width: style.width, context: &c.points)
        let content = ElementContent.stroke(Stroke(style: style, points: points))
        if let problem = ContentBounds.problem(content, allowingDeferred: true) ?? transformProblem {
            throw r.error(.corrupt, "element \(id): \(problem)", at: at)
        }
        return ElementRecord(id: id, lamport: lamport, wallTime: wallTime, content: consume content,
                             transform: consume transform, z: LWWRegister(consume zKey, frontier: consume zFrontier),
                             erased: consume erased, frontier: consume editFrontier)
    }
}
