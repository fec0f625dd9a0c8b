import LnoteModel

/// A reader of the version-2 elements section body (`Protocol/page-snapshot.md` [SNAP-33] …
/// [SNAP-35], and of versions 3 and 4: [SNAP-42], [SNAP-43]), written from the spec alone: the records against the previous record of
/// their chunk, strokes through `ReferenceStrokeCodecV2`. The shared encodings of section 2
/// (OpRef, Transform, ZKey, QRect) are read with `ElementCodec`, which other tests check;
/// what this reader checks is what [SNAP-34] and [SNAP-35] add: the flags, the replica
/// index, the deltas, the shared z prefix, the chunk boundaries. It does not check the
/// invariants of 4.4, so it is compared with lnote on files lnote accepts.
enum ReferenceElementsV2 {
    struct Fault: Error {
        let message: String
        let offset: Int
    }

    /// [SNAP-35] The previous record at the start of a chunk, and what a record leaves.
    struct Previous {
        var replica: ReplicaID?
        var counter: UInt64 = 0
        var lamportMinusCounter: UInt64 = 0
        var wallTime: UInt64 = 0
        var zEncoding: [UInt8] = []
        var layer: Int64?
        var style: InkStyle?
        var points = ReferenceStrokeCodecV2.Context()
    }

    static func encoding(_ z: ZKey) -> [UInt8] {
        var w = ByteWriter()
        ElementCodec.encode(z, into: &w)
        return w.bytes
    }

    /// Reads the body `bytes[range]` (its first byte at absolute offset `base + range.lowerBound`)
    /// given the replicas of the page clock in increasing order.
    static func decode(_ bytes: [UInt8], range: Range<Int>, base: Int = 0, replicas: [ReplicaID]) throws -> [ElementRecord] {
        var streams: [Range<Int>] = [], prefixes: [Int] = []
        return try decode(bytes, range: range, base: base, replicas: replicas, streams: &streams, prefixes: &prefixes)
    }

    /// `decode`, also giving where each point stream lies (absolute offsets) and each
    /// record's z prefix `p` (−1 for a next-layer record).
    static func decode(_ bytes: [UInt8], range: Range<Int>, base: Int = 0, replicas: [ReplicaID],
                       streams: inout [Range<Int>], prefixes: inout [Int]) throws -> [ElementRecord] {
        var flags: [UInt8] = []
        return try decode(bytes, range: range, base: base, replicas: replicas, streams: &streams, prefixes: &prefixes, flags: &flags)
    }

    /// `decode`, also giving each record's flags byte.
    static func decode(_ bytes: [UInt8], range: Range<Int>, base: Int = 0, replicas: [ReplicaID],
                       streams: inout [Range<Int>], prefixes: inout [Int], flags allFlags: inout [UInt8]) throws -> [ElementRecord] {
        var r = ByteReader(bytes, range: range, base: base)
        r.shortestVarints = true
        func fault(_ message: String, at offset: Int) -> Fault { Fault(message: message, offset: offset) }
        let countAt = r.offset
        let n = try r.varint("count")
        // [SNAP-42] A version-3 file's chunks start from the point context with grids; [SNAP-43]
        // a version-4 file's with grids and predictors ([PT2-12]), and its records may say
        // *next id* (`bytes` is the whole file: its version field says which).
        let grids = bytes.count > 8 && bytes[8] >= 3
        let nextIDs = bytes.count > 8 && bytes[8] >= 4
        guard n <= UInt64(r.remaining / (nextIDs ? 5 : 7)) else { throw fault("[SNAP-33] count \(n)", at: countAt) }
        var out: [ElementRecord] = []
        func start() -> Previous {
            var p = Previous()
            p.points = ReferenceStrokeCodecV2.Context.chunk(grids: grids, predictors: nextIDs)
            return p
        }
        var previous = start()
        for i in 0..<Int(n) {
            if i % 64 == 0 { previous = start() }
            let recordAt = r.offset
            let flags = try r.u8("flags")
            allFlags.append(flags)
            guard flags & (nextIDs ? 0x80 : 0xC0) == 0 else { throw fault("[SNAP-34] flag bits 6-7", at: recordAt) }
            let nextID = flags & 64 != 0
            let sameReplica = flags & 1 != 0, plain = flags & 2 != 0, noHistory = flags & 4 != 0
            let image = flags & 8 != 0, sameStyle = flags & 16 != 0, nextLayer = flags & 32 != 0

            // Replica.
            let replica: ReplicaID
            if sameReplica {
                guard let p = previous.replica else { throw fault("[SNAP-35] same replica first in chunk", at: recordAt) }
                replica = p
            } else {
                let fieldAt = r.offset
                let index = try r.varint("replica index")
                if index < UInt64(replicas.count) {
                    replica = replicas[Int(index)]
                } else if index == UInt64(replicas.count) {
                    let raw = try r.u64("replica")
                    guard raw != 0, !replicas.contains(ReplicaID(raw)) else { throw fault("[SNAP-34] explicit replica \(raw)", at: fieldAt) }
                    replica = ReplicaID(raw)
                } else {
                    throw fault("[SNAP-34] replica index \(index)", at: fieldAt)
                }
                guard replica != previous.replica else { throw fault("[SNAP-34] same replica not flagged", at: fieldAt) }
            }
            let counter: UInt64, lamportMinusCounter: UInt64
            if nextID {
                counter = previous.counter &+ 1
                lamportMinusCounter = previous.lamportMinusCounter
                guard counter != 0 else { throw fault("[SNAP-43] next id after 2^64 - 1", at: recordAt) }
            } else {
                let counterAt = r.offset
                counter = previous.counter &+ UInt64(bitPattern: try r.svarint("counter"))
                guard counter != 0 else { throw fault("[SHR-3] counter 0", at: counterAt) }
                lamportMinusCounter = previous.lamportMinusCounter &+ UInt64(bitPattern: try r.svarint("lamport"))
                if nextIDs && counter == previous.counter &+ 1 && lamportMinusCounter == previous.lamportMinusCounter {
                    throw fault("[SNAP-43] next id not flagged", at: recordAt)
                }
            }
            let wallTime = previous.wallTime &+ UInt64(bitPattern: try r.svarint("wall time"))

            // Transform.
            var transform = LWWRegister(Transform.identity)
            if !plain {
                let fieldAt = r.offset
                if r.remaining > 0, r.bytes[r.position] == 1 {
                    var peek = r
                    if try ElementCodec.decodeTransform(&peek).isTranslation { throw fault("[SNAP-36] kind 1 translation", at: fieldAt) }
                }
                let t = try ElementCodec.decodeTransform(&r)
                let frontier = try refList(&r)
                guard t != .identity || !frontier.isEmpty else { throw fault("[SNAP-34] plain transform not flagged", at: fieldAt) }
                transform = LWWRegister(t, frontier: frontier)
            }

            // Z key.
            let z: ZKey
            let zEncoding: [UInt8]
            if nextLayer {
                guard let layer = previous.layer, layer < Int64.max else { throw fault("[SNAP-35] next layer first in chunk", at: recordAt) }
                z = ZKey(layer: layer + 1)
                zEncoding = encoding(z)
                prefixes.append(-1)
            } else {
                let zAt = r.offset
                let p = try r.varint("z prefix")
                guard p <= UInt64(previous.zEncoding.count) else { throw fault("[SNAP-34] z prefix \(p)", at: zAt) }
                prefixes.append(Int(p))
                let sAt = r.offset
                let s = try r.varint("z suffix")
                guard s <= UInt64(r.remaining) else { throw fault("[SNAP-34] z suffix \(s)", at: sAt) }
                let suffix = try r.bytes(Int(s))
                zEncoding = Array(previous.zEncoding[0..<Int(p)]) + suffix
                guard Int(p) == previous.zEncoding.count || suffix.isEmpty || suffix[0] != previous.zEncoding[Int(p)] else {
                    throw fault("[SNAP-34] z prefix \(p) is not the longest", at: zAt)
                }
                var zr = ByteReader(zEncoding)
                zr.shortestVarints = true
                guard let key = try? ElementCodec.decodeZKey(&zr), zr.isAtEnd else { throw fault("[SNAP-34] z key", at: zAt) }
                if let layer = previous.layer, key.path.isEmpty, key.fraction.isEmpty, layer < Int64.max, key.layer == layer + 1 {
                    throw fault("[SNAP-34] next layer not flagged", at: recordAt)
                }
                z = key
            }

            // History.
            var zFrontier: [OpRef] = [], erased: [PointRange] = [], edit: [OpRef] = []
            if !noHistory {
                let fieldAt = r.offset
                zFrontier = try refList(&r)
                let m = try r.varint("ranges")
                guard m <= UInt64(r.remaining / 2) else { throw fault("[SNAP-14] range count", at: fieldAt) }
                var to: UInt64 = 0
                for _ in 0..<Int(m) {
                    let from = to &+ (try r.varint("gap"))
                    to = from &+ (try r.varint("length"))
                    guard let f = UInt32(exactly: from), let t = UInt32(exactly: to) else { throw fault("[SNAP-23] range", at: fieldAt) }
                    erased.append(PointRange(f, t))
                }
                edit = try refList(&r)
                guard !(zFrontier.isEmpty && erased.isEmpty && edit.isEmpty) else { throw fault("[SNAP-34] no history not flagged", at: fieldAt) }
            }

            // Content.
            let content: ElementContent
            if image {
                guard !sameStyle else { throw fault("[SNAP-34] image with same style", at: recordAt) }
                let digest = try r.bytes(32)
                let frame = try ElementCodec.decodeRect(&r)
                let rotation = try ElementCodec.int32(&r, "rotation")
                content = .image(ImageElement(asset: AssetID(digest: digest)!, frame: frame, rotation: rotation))
            } else {
                let style: InkStyle
                if sameStyle {
                    guard let s = previous.style else { throw fault("[SNAP-35] same style first in chunk", at: recordAt) }
                    style = s
                } else {
                    let fieldAt = r.offset
                    guard let tool = ToolKind(rawValue: try r.u8("tool")) else { throw fault("[SHR-8] tool", at: fieldAt) }
                    let color = RGBA(packed: try r.u32("color"))
                    let width = try ElementCodec.int32(&r, "width")
                    style = InkStyle(tool: tool, color: color, width: width)
                    guard style != previous.style else { throw fault("[SNAP-34] same style not flagged", at: fieldAt) }
                }
                let streamAt = r.offset
                let points = try ReferenceStrokeCodecV2.decodePoints(&r, width: style.width, context: &previous.points)
                streams.append(streamAt..<r.offset)
                content = .stroke(Stroke(style: style, points: points))
                previous.style = style
            }
            out.append(ElementRecord(id: OpID(replica: replica, counter: counter), lamport: lamportMinusCounter &+ counter,
                                     wallTime: Int64(bitPattern: wallTime), content: content, transform: transform,
                                     z: LWWRegister(z, frontier: zFrontier), erased: erased, frontier: edit))
            previous.replica = replica
            previous.counter = counter
            previous.lamportMinusCounter = lamportMinusCounter
            previous.wallTime = wallTime
            previous.zEncoding = zEncoding
            previous.layer = z.layer
        }
        guard r.isAtEnd else { throw fault("[SNAP-12] bytes after the records", at: r.offset) }
        return out
    }

    /// Section 4.3: a ref list, `10·m` ≤ bytes left.
    static func refList(_ r: inout ByteReader) throws -> [OpRef] {
        let at = r.offset
        let m = try r.varint("refs")
        guard m <= UInt64(r.remaining / 10) else { throw Fault(message: "[SNAP-14] ref count", offset: at) }
        return try (0..<Int(m)).map { _ in try ElementCodec.decodeOpRef(&r) }
    }

    /// The elements section body of a version-2 snapshot file and the page clock's replicas.
    static func elementsSection(of file: [UInt8]) throws -> (body: Range<Int>, replicas: [ReplicaID]) {
        var at = 52
        var replicas: [ReplicaID] = []
        while at + 6 <= file.count - 4 {
            let tag = UInt16(file[at]) | UInt16(file[at + 1]) << 8
            let size = Int(file[at + 2]) | Int(file[at + 3]) << 8 | Int(file[at + 4]) << 16 | Int(file[at + 5]) << 24
            let body = (at + 6)..<(at + 6 + size)
            if tag == 1 {
                var r = ByteReader(file, range: body)
                replicas = try ElementCodec.decodeClock(&r).replicas
            } else if tag == 2 {
                return (body, replicas)
            }
            at = body.upperBound
        }
        throw Fault(message: "no elements section", offset: at)
    }
}
