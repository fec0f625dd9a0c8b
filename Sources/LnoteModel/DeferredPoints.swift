import Synchronization

/// The point streams of a version-2 snapshot read with its points deferred
/// (`Protocol/page-snapshot.md` [SNAP-38]): the file's bytes, whose CRC and element records
/// were checked when it was read, and where each chunk of 64 records begins. Or the point
/// stream of one `addStroke` frame replayed from a page's own log with its points deferred
/// (operation-log.md [LOG-27]): the frame's payload, its CRC and every other field checked.
/// Or the streams of a log tail's leading plain adds read straight from the tail's bytes
/// ([LOG-28]): the bytes as read, and where each frame's stream is (`FrameStream`).
///
/// A stroke read that way holds a `Slot` instead of its points. Its chunk is decoded, with
/// every check of an eager read (the point stream's bits, [PT2-7]'s padding, [SNAP-19]'s
/// bounds), the first time one of its strokes is resolved; the outcome (points or error) is
/// kept, so a chunk is decoded at most once whichever copy of the state asks, and a damaged
/// chunk gives the same error every time. Strokes are coded against the stroke before them
/// in their chunk ([SNAP-35]), so a chunk is the smallest unit that decodes alone.
///
/// A snapshot's source also holds the points of the records its erase-history section keeps
/// for erased elements ([SNAP-40]): version-1 records, whose point streams ([PTS-1]…) stand
/// alone, so each is a chunk of its own (a negative chunk number), decoded with the checks
/// and errors of an eager read of that section.
public final class DeferredPoints: Sendable, Hashable {
    /// Identity: one source per file read (or frame replayed).
    public static func == (l: DeferredPoints, r: DeferredPoints) -> Bool { l === r }
    public func hash(into h: inout Hasher) { h.combine(ObjectIdentifier(self)) }

    /// Where one deferred stroke's points are: its record's index in the elements section
    /// (or, negative, `-1 - rank` for the rank-th record kept by the erase-history section),
    /// and its point count (read when the record was, [PT2-2] or [PTS-2] checked).
    public struct Slot: Hashable, Sendable {
        package let source: DeferredPoints
        package let index: Int
        public let count: Int

        public static func == (l: Slot, r: Slot) -> Bool {
            l.source === r.source && l.index == r.index
        }
        public func hash(into h: inout Hasher) {
            h.combine(ObjectIdentifier(source))
            h.combine(index)
        }
    }

    /// Where the records are: the offset of each chunk's first record, the section's end.
    struct Layout: Sendable {
        var starts: [Int] = []
        var end = 0
        var records = 0
    }

    /// Where the point stream of a record kept by the erase-history section is ([SNAP-40]):
    /// everything an eager read of it needs to decode it as that read does.
    struct KeptStream: Sendable {
        /// The offsets of the record and of its point stream; the end of the section body
        /// (the reader's end when the record was read).
        var record: Int
        var stream: Int
        var sectionEnd: Int
        var shortestVarints: Bool
        var id: ElementID
        var style: InkStyle
        /// The rank of its tombstone, the `index` of an error.
        var tombstone: Int
    }

    /// Where the point stream of a log tail's plain add is ([LOG-28]): everything the eager
    /// decode of its frame needs to decode the stream as that decode does.
    package struct FrameStream: Sendable {
        /// The stream: `bytes[pointsAt..<end]`, the rest of its frame's payload.
        package var pointsAt: Int
        package var end: Int
        package var style: InkStyle
        package var operation: OpID
        /// The compact frame's version (`StrokeCodecV2.Context.frame(version:)`).
        package var version: Int
        /// The file offset that byte 0 of the frame's payload stands for (`LoggedFrame.payloadBase`):
        /// where [LOG-23]'s errors are reported, as the operation validator reports them.
        package var payloadBase: Int

        package init(pointsAt: Int, end: Int, style: InkStyle, operation: OpID, version: Int, payloadBase: Int) {
            self.pointsAt = pointsAt
            self.end = end
            self.style = style
            self.operation = operation
            self.version = version
            self.payloadBase = payloadBase
        }
    }

    /// What decoding a chunk gave: for each of its records, the points (nil for an image).
    typealias Outcome = Result<[[StrokePoint]?], LnoteError>

    /// The chunk of a record index: its group of 64 records, or (negative) its own for a kept record.
    @inline(__always)
    static func chunk(of index: Int) -> Int { index >= 0 ? index / PageSnapshot.elementIndexStride : index }

    /// A record's position in its chunk's outcome.
    @inline(__always)
    static func position(of index: Int) -> Int { index >= 0 ? index % PageSnapshot.elementIndexStride : 0 }

    /// What the bytes are: a snapshot (records coded against the page clock's replicas), or
    /// one frame's payload whose points (a stream in its standalone context) begin at a
    /// position, for a stroke of that style.
    enum Kind: Sendable {
        case snapshot(PageSnapshot.ReplicaTable, version: UInt16)
        /// The stream starts at `pointsAt` and ends with the payload, coded against the
        /// standalone context of compact stroke frames of `version`
        /// (`StrokeCodecV2.Context.frame(version:)`: 1 `addStroke`, 2 `addStroke2`, 3 `addStroke3`).
        case frame(style: InkStyle, operation: OpID, pointsAt: Int, version: Int)
        /// A log tail's bytes: slot `i` is the stream of `FrameStream` `i`, a chunk of its own.
        case frames
    }

    let bytes: [UInt8]
    let base: Int
    let path: String?
    let kind: Kind
    /// A snapshot's layout and the outcomes of its chunks and kept records; a frame's one
    /// outcome (`frame`: a frame's source needs no arrays, made for each of a log tail's frames).
    private let state = Mutex<(layout: Layout, chunks: [Outcome?], kept: [KeptStream], keptChunks: [Outcome?], frame: Outcome?,
                               streams: [FrameStream])>((Layout(), [], [], [], nil, []))

    init(bytes: [UInt8], path: String?, replicas: PageSnapshot.ReplicaTable, version: UInt16) {
        self.bytes = bytes
        self.base = 0
        self.path = path
        self.kind = .snapshot(replicas, version: version)
    }

    /// The points of one frame: `payload[at...]` is the point stream, the last field; `base`
    /// is the payload's offset in its file, for errors.
    package init(frame payload: [UInt8], pointsAt at: Int, style: InkStyle, operation: OpID, base: Int, path: String?,
                 version: Int) {
        self.bytes = payload
        self.base = base
        self.path = path
        self.kind = .frame(style: style, operation: operation, pointsAt: at, version: version)
    }

    /// The streams of a log tail's plain adds: `bytes` is the tail as read from the file,
    /// whose byte 0 is at file offset `base`. `setStreams` says where each stream is.
    package init(tail bytes: [UInt8], base: Int, path: String?) {
        self.bytes = bytes
        self.base = base
        self.path = path
        self.kind = .frames
    }

    /// Set once by the reader of a tail, after its frames were read and before any of their
    /// slots is used: slot `i` is the stream of `streams[i]`. (The outcomes' array is made
    /// when the first stream is decoded: a listing open may decode none.)
    package func setStreams(_ streams: consuming [FrameStream]) {
        state.withLock { $0.streams = streams }
    }

    /// Keeps the first `n` streams alone, before any is decoded: the adds a replica applied
    /// from a tail's bytes, when it did not apply them all (the others are no stroke's).
    package func keepStreams(_ n: Int) {
        state.withLock {
            guard n < $0.streams.count else { return }
            $0.streams = Array($0.streams[..<n])
            if $0.chunks.count > n { $0.chunks = Array($0.chunks[..<n]) }
        }
    }

    /// True for one frame's points (one chunk, numbered 0).
    var isFrame: Bool {
        if case .frame = kind { return true }
        return false
    }

    /// True for a log tail's streams (a chunk per frame).
    var isTail: Bool {
        if case .frames = kind { return true }
        return false
    }

    /// The chunk of slot index `index`: a frame per chunk in a tail's source, else `chunk(of:)`.
    @inline(__always)
    func chunk(ofSlot index: Int) -> Int { isTail ? index : Self.chunk(of: index) }

    /// A slot's position in its chunk's outcome.
    @inline(__always)
    func position(ofSlot index: Int) -> Int { isTail ? 0 : Self.position(of: index) }

    var replicas: PageSnapshot.ReplicaTable? {
        if case .snapshot(let r, _) = kind { return r }
        return nil
    }

    /// Set once by the reader, after the records were read and before any slot is handed out.
    func setLayout(starts: [Int], end: Int, records: Int) {
        state.withLock {
            $0.layout = Layout(starts: starts, end: end, records: records)
            $0.chunks = Array(repeating: nil, count: starts.count)
        }
    }

    /// Set once by the reader of the erase-history section, after its records were read and
    /// before any of their slots is used: kept record `rank` has slot index `-1 - rank`.
    func setKept(_ streams: [KeptStream]) {
        state.withLock {
            $0.kept = streams
            $0.keptChunks = Array(repeating: nil, count: streams.count)
        }
    }

    /// True when the erase-history section's records hold deferred points here.
    var hasKept: Bool { state.withLock { !$0.kept.isEmpty } }

    package func slot(index: Int, count: Int) -> Slot { Slot(source: self, index: index, count: count) }

    /// The points of one deferred stroke: its chunk decoded (or the outcome kept from before).
    func points(of slot: Slot) throws -> [StrokePoint] {
        let decoded = try outcome(ofChunk: chunk(ofSlot: slot.index)).get()
        guard let points = decoded[position(ofSlot: slot.index)], points.count == slot.count else {
            throw LnoteError(.corrupt, "record \(slot.index) decodes differently from when it was read", path: path, index: slot.index)
        }
        return points
    }

    private func outcome(ofChunk k: Int) -> Outcome {
        if case .frame(let style, let operation, let at, let version) = kind {
            guard k == 0 else { return .failure(LnoteError(.invalidState, "no chunk \(k) of a frame's points", path: path)) }
            if let done = state.withLock({ $0.frame }) { return done }
            var r = ByteReader(bytes, range: at..<bytes.count, base: base, path: path)
            r.shortestVarints = true
            let outcome = decodeFrame(&r, style: style, operation: operation, version: version, payloadBase: base)
            state.withLock { $0.frame = outcome }
            return outcome
        }
        if isTail { return outcome(ofStream: k) }
        if k < 0 { return outcome(ofKept: -1 - k) }
        let (kept, layout) = state.withLock { s -> (Outcome?, Layout?) in
            if s.chunks.indices.contains(k), let o = s.chunks[k] { return (o, nil) }
            return (nil, s.layout)
        }
        if let kept { return kept }
        guard let layout else { return .failure(LnoteError(.invalidState, "no layout of deferred points", path: path)) }
        // Decoded outside the lock: two threads may both decode a chunk, with the same result.
        let outcome = decodeChunk(k, layout)
        state.withLock { if $0.chunks.indices.contains(k) { $0.chunks[k] = outcome } }
        return outcome
    }

    /// The outcome of a tail's stream `k` (decoded, or kept from before).
    private func outcome(ofStream k: Int) -> Outcome {
        let (done, stream) = state.withLock { s -> (Outcome?, FrameStream?) in
            guard s.streams.indices.contains(k) else { return (nil, nil) }
            return (s.chunks.indices.contains(k) ? s.chunks[k] : nil, s.streams[k])
        }
        if let done { return done }
        guard let stream else { return .failure(LnoteError(.invalidState, "no stream \(k) of a log tail's points", path: path)) }
        var r = ByteReader(bytes, range: stream.pointsAt..<stream.end, base: base, path: path)
        r.shortestVarints = true
        let outcome = decodeFrame(&r, style: stream.style, operation: stream.operation, version: stream.version,
                                  payloadBase: stream.payloadBase)
        state.withLock {
            if $0.chunks.isEmpty { $0.chunks = Array(repeating: nil, count: $0.streams.count) }
            $0.chunks[k] = outcome
        }
        return outcome
    }

    /// The outcome of the record kept with rank `rank` (decoded, or kept from before).
    private func outcome(ofKept rank: Int) -> Outcome {
        let (kept, stream) = state.withLock { s -> (Outcome?, KeptStream?) in
            guard s.kept.indices.contains(rank) else { return (nil, nil) }
            return (s.keptChunks[rank], s.kept[rank])
        }
        if let kept { return kept }
        guard let stream else { return .failure(LnoteError(.invalidState, "no kept record \(rank) of deferred points", path: path)) }
        let outcome = decodeKept(stream)
        state.withLock { $0.keptChunks[rank] = outcome }
        return outcome
    }

    /// Decodes a kept record's points as the eager read of the erase-history section does
    /// (`PageSnapshot.decodeEraseHistory`): the same stream decoder from the same offset with
    /// the same reader's end, then [SNAP-19]'s bounds reported at the record's first byte;
    /// its errors carry the tombstone's rank and are `corrupt` (inside a file whose CRC matched).
    private func decodeKept(_ s: KeptStream) -> Outcome {
        var r = ByteReader(bytes, range: s.stream..<s.sectionEnd, base: base, path: path)
        r.shortestVarints = s.shortestVarints
        do {
            let points = try StrokeCodec.decodePoints(&r)
            if let problem = ContentBounds.problem(.stroke(Stroke(style: s.style, points: points))) {
                throw r.error(.corrupt, "element \(s.id): \(problem)", at: s.record)
            }
            return .success([points])
        } catch var e as LnoteError {
            if e.index == nil { e.index = s.tombstone }
            if e.code == .truncated || e.code == .limitExceeded { e.code = .corrupt }
            return .failure(e)
        } catch {
            return .failure(LnoteError(.corrupt, "\(error)", path: path, offset: s.stream, index: s.tombstone))
        }
    }

    /// Decodes chunk `k` as an eager read would: the same record decoder with points, so the
    /// same checks and the same errors, at the same offsets.
    private func decodeChunk(_ k: Int, _ layout: Layout) -> Outcome {
        let stride = PageSnapshot.elementIndexStride
        guard layout.starts.indices.contains(k) else {
            return .failure(LnoteError(.invalidState, "no chunk \(k) of deferred points", path: path))
        }
        let end = k + 1 < layout.starts.count ? layout.starts[k + 1] : layout.end
        var r = ByteReader(bytes, range: layout.starts[k]..<end, base: base, path: path)
        r.shortestVarints = true
        let replicas: PageSnapshot.ReplicaTable
        let version: UInt16
        switch kind {
        case .frame(let style, let operation, _, let version):
            return decodeFrame(&r, style: style, operation: operation, version: version, payloadBase: base)
        case .frames:
            return outcome(ofStream: k)
        case .snapshot(let table, let v):
            replicas = table
            version = v
        }
        var context = PageSnapshot.RecordContext(version: version)
        let first = k * stride, n = min(stride, layout.records - first)
        var out: [[StrokePoint]?] = []
        out.reserveCapacity(n)
        do {
            for j in 0..<n {
                do {
                    let e = try PageSnapshot.decodeElementV2(&r, replicas: replicas, context: &context)
                    out.append(e.content.stroke?.points)
                } catch var e as LnoteError {
                    if e.index == nil { e.index = first + j }
                    // Inside a file whose CRC matched: damage, not a cut file ([SNAP-27]).
                    if e.code == .truncated || e.code == .limitExceeded { e.code = .corrupt }
                    throw e
                }
            }
            guard r.isAtEnd else {
                throw r.error(.corrupt, "chunk \(k) of the element records does not end where the next begins")
            }
        } catch let e as LnoteError {
            return .failure(e)
        } catch {
            return .failure(LnoteError(.corrupt, "\(error)", path: path))
        }
        return .success(out)
    }

    /// The points of a frame's stream, with the checks an eager decode of the frame makes:
    /// the stream's own ([PT2-8], [PT2-7]), the end of the payload, and [LOG-23]'s bounds
    /// (reported as the operation validator does, at the payload's first byte, `payloadBase`,
    /// naming the operation by its id where the validator describes it whole).
    private func decodeFrame(_ r: inout ByteReader, style: InkStyle, operation: OpID, version: Int, payloadBase: Int) -> Outcome {
        let at = r.offset
        do {
            var context = StrokeCodecV2.Context.frame(version: version)
            let points = try StrokeCodecV2.decodePoints(&r, width: style.width, context: &context)
            guard r.isAtEnd else { throw r.error(.corrupt, "\(r.remaining) bytes after the point stream") }
            if let problem = ContentBounds.problem(.stroke(Stroke(style: style, points: points))) {
                throw r.error(.corrupt, "operation \(operation) breaks [LOG-23]: \(problem)", at: payloadBase)
            }
            return .success([points])
        } catch var e as LnoteError {
            if e.code == .truncated || e.code == .limitExceeded { e.code = .corrupt }
            return .failure(e)
        } catch {
            return .failure(LnoteError(.corrupt, "\(error)", path: path, offset: at))
        }
    }

    /// Decodes and checks every chunk of every source (on every core), whether or not a
    /// stroke still refers to it: a stroke erased since it was read, or an operation that had
    /// no effect, must still have had valid points ([SNAP-38], [LOG-27]). Throws the error of
    /// the first failing chunk, sources in the order given.
    package static func check(_ sources: [DeferredPoints]) throws {
        var work: [(source: DeferredPoints, chunk: Int)] = []
        for s in sources {
            // A tail's source: a chunk per stream.
            let (chunks, kept) = s.isFrame ? (1, 0) : s.state.withLock { (s.isTail ? $0.streams.count : $0.chunks.count, $0.kept.count) }
            for k in 0..<chunks { work.append((s, k)) }
            // The kept records after the elements: the erase-history section comes last.
            for rank in 0..<kept { work.append((s, -1 - rank)) }
        }
        for o in decode(work) { _ = try o.get() }
    }

    /// The outcome of every job, in the order given, decoded on every core in an interleaved
    /// order (see `interleaved`).
    static func decode(_ work: [(source: DeferredPoints, chunk: Int)]) -> [Outcome] {
        let order = interleaved(Array(work.indices))
        let outcomes = Parallel.map(order.count, parallel: order.count > 1) { j in
            work[order[j]].source.outcome(ofChunk: work[order[j]].chunk)
        }
        var out = [Outcome?](repeating: nil, count: work.count)
        for (j, i) in order.enumerated() { out[i] = outcomes[j] }
        return out.map { $0! }
    }

    /// `work` reordered so that the contiguous blocks `Parallel.map` hands each thread take
    /// every k-th job: a snapshot's chunks (hundreds of microseconds each) come first and a
    /// log tail's frames (a few each) after, and without this one thread got every chunk.
    static func interleaved<T>(_ work: [T]) -> [T] {
        let blocks = min(work.count, Parallel.processors * 4)
        guard blocks > 1 else { return work }
        var out: [T] = []
        out.reserveCapacity(work.count)
        for b in 0..<blocks { for i in stride(from: b, to: work.count, by: blocks) { out.append(work[i]) } }
        return out
    }

    /// Resolves every deferred stroke of `elements`, decoding the chunks they need on every
    /// core. On failure nothing is changed and the error is that of the first failing chunk
    /// in file order.
    package static func resolve(_ elements: inout [ElementRecord]) throws {
        // The chunks to decode, per source (a state holds one snapshot's slots, except in
        // tests that mix states).
        var needed: [ObjectIdentifier: (source: DeferredPoints, chunks: Set<Int>)] = [:]
        for e in elements {
            guard case .stroke(let s) = e.content, let d = s.deferred else { continue }
            needed[ObjectIdentifier(d.source), default: (d.source, [])].chunks.insert(d.source.chunk(ofSlot: d.index))
        }
        guard !needed.isEmpty else { return }
        // Every chunk of every source, decoded on every core; the first failure in the order
        // of the sources' first use (a snapshot before the frames replayed onto it).
        var work: [(source: DeferredPoints, chunk: Int)] = []
        for e in elements {
            guard case .stroke(let s) = e.content, let d = s.deferred else { continue }
            let key = ObjectIdentifier(d.source)
            guard let n = needed.removeValue(forKey: key) else { continue }
            // File order: the elements' chunks, then the kept records' (negative, rank order).
            for k in n.chunks.filter({ $0 >= 0 }).sorted() + n.chunks.filter({ $0 < 0 }).sorted(by: >) { work.append((n.source, k)) }
        }
        let outcomes = decode(work)
        // Every chunk decoded: the points are taken from the outcomes, without a lock a stroke,
        // and the elements changed only once every stroke has its points.
        var decoded: [ObjectIdentifier: [Int: [[StrokePoint]?]]] = [:]
        for (j, o) in outcomes.enumerated() { decoded[ObjectIdentifier(work[j].source), default: [:]][work[j].chunk] = try o.get() }
        var resolved: [(Int, Stroke)] = []
        for i in elements.indices {
            guard case .stroke(let s) = elements[i].content, let d = s.deferred else { continue }
            guard let points = decoded[ObjectIdentifier(d.source)]?[d.source.chunk(ofSlot: d.index)]?[d.source.position(ofSlot: d.index)],
                  points.count == d.count else {
                throw LnoteError(.corrupt, "record \(d.index) decodes differently from when it was read", path: d.source.path, index: d.index)
            }
            resolved.append((i, Stroke(style: s.style, points: points)))
        }
        for (i, s) in resolved { elements[i].content = .stroke(s) }
    }
}

extension ElementRecord {
    /// The record with its points decoded and checked ([SNAP-38]); itself when resolved.
    public func resolved() throws -> ElementRecord {
        guard !content.isResolved else { return self }
        var r = self
        r.content = try content.resolved()
        return r
    }
}
