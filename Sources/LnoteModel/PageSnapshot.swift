/// The page snapshot file, `pages/<page-uuid>.content`: everything in a `PageState`, plus
/// the extent of the page log it covers.
///
/// The layout is specified byte by byte in `Protocol/page-snapshot.md` ([SNAP-1] …):
///
/// | Offset | Size | Description |
/// |---|---|---|
/// | 0 | 8 | magic `LNOTEPG\0` |
/// | 8 | 2 | format version, u16 LE (5; versions 1 to 4 are still read) |
/// | 10 | 2 | flags, u16 LE (0) |
/// | 12 | 8 | file length L in bytes, u64 LE (the whole file, CRC included) |
/// | 20 | 16 | page id (UUID bytes) |
/// | 36 | 8 | covered log offset, u64 LE |
/// | 44 | 8 | log incarnation, u64 LE |
/// | 52 | L−56 | sections: tag u16 LE, length u32 LE, body; tags strictly increasing |
/// | L−4 | 4 | CRC-32C (u32 LE) of bytes 0..<L−4 |
///
/// Version 2 differs only in the elements section: records coded against the previous one of
/// their chunk of 64, points in `StrokeCodecV2`'s stream (`PageSnapshot+ElementsV2.swift`).
/// Version 3 differs from version 2 only in that stream's chunk context, which has
/// digitizer grids ([SNAP-42], [PT2-11]); version 4 from version 3 only in that context,
/// which has predictors too ([PT2-12]), and the record flag *next id* ([SNAP-43]); version 5
/// from version 4 only in its element index, which holds the records' ids after their
/// offsets ([SNAP-45], `PageSnapshot+IDTable.swift`), so that a page is listed without
/// parsing its records.
///
/// The bytes are a deterministic function of the state: `encode` first puts every set in
/// its canonical order (see `canonicalized(_:)`), so equal states give identical files.
public enum PageSnapshot {
    /// `LNOTEPG\0`
    public static let magic: [UInt8] = Array("LNOTEPG".utf8) + [0]
    /// The major format version this build writes, and the newest it reads.
    public static let version: UInt16 = 5
    /// The oldest version this build reads ([SNAP-7]): version 1 stays readable.
    public static let oldestVersion: UInt16 = 1
    /// Bytes before the first section.
    public static let headerSize = 52
    /// The trailing CRC.
    public static let trailerSize = 4
    /// Bytes of a section header (tag u16, length u32).
    public static let sectionHeaderSize = 6
    /// Flag bits a reader must understand (reserved: none defined in version 1).
    public static let incompatibleFlags: UInt16 = 0xFF00
    /// A section tag with this bit set must be understood; without it, it may be skipped.
    public static let criticalTagBit: UInt16 = 0x8000

    /// Section tags of format version 1, in the order they appear.
    public enum Section: UInt16, CaseIterable, Sendable {
        case page = 0x0001
        case elements = 0x0002
        case tombstones = 0x0003
        case contexts = 0x0004
        /// Where every 64th element record starts ([SNAP-32]): present exactly when the page
        /// has more than 64 elements, so that big pages decode on several cores.
        case elementIndex = 0x0005
        /// What restores need ([SNAP-40]): the restores that took back each erasure, the
        /// record of each erased element, and each partial erase's ranges. Critical: a reader
        /// that skipped it would lose what brings elements back. Present exactly when the page
        /// has a tombstone or a partially erased stroke.
        case eraseHistory = 0x8006
        /// The range restores of each stroke that has some ([SNAP-44]), beside its partial
        /// erases: critical, a reader that skipped it would bring back no restored point.
        case rangeRestores = 0x8007

        /// The sections every snapshot has ([SNAP-12]).
        static let required: [Section] = [.page, .elements, .tombstones, .contexts]
    }

    /// Elements between two entries of the element index ([SNAP-32]).
    public static let elementIndexStride = 64

    /// What a snapshot holds.
    public struct Contents: Hashable, Sendable {
        public var state: PageState
        /// Byte offset in `pages/<page-uuid>.log` up to which operations are included.
        public var coveredLogOffset: UInt64
        /// The random incarnation number of that log (a rewritten log gets a new one).
        public var logIncarnation: UInt64
        /// Where the state's deferred points are, when it was read with them deferred
        /// ([SNAP-38]) and holds an element: hand it to `PageReplica` with the state.
        public var deferredPoints: DeferredPoints?
        /// True for a snapshot written before restores ([SNAP-40]): it has tombstones or
        /// erased ranges but no erase-history section, so its state lacks the content of erased
        /// elements and each partial erase's ranges. A reader that holds the page's whole log
        /// rebuilds the page from it instead ([PKG-99]).
        public var lacksEraseHistory = false
        /// The element records left unparsed by a listing read ([SNAP-46]); `state.elements` is
        /// then empty and these are the page's elements, bottom to top.
        package var unbuilt: UnbuiltRecords?
        public init(state: PageState, coveredLogOffset: UInt64, logIncarnation: UInt64, deferredPoints: DeferredPoints? = nil) {
            self.state = state
            self.coveredLogOffset = coveredLogOffset
            self.logIncarnation = logIncarnation
            self.deferredPoints = deferredPoints
        }
    }

    // MARK: Encoding

    /// The snapshot bytes of `state` (put in canonical order first).
    ///
    /// A state that breaks an invariant `canonicalized` cannot repair (two elements with one
    /// id, a zero replica id, …) still encodes, but `decode` will reject the result: call
    /// `validate(_:)` first when the state comes from an untrusted computation.
    public static func encode(_ state: PageState, coveredLogOffset: UInt64, logIncarnation: UInt64) -> [UInt8] {
        encode(state, coveredLogOffset: coveredLogOffset, logIncarnation: logIncarnation, version: version)
    }

    /// `encode` in format `version` (1 to 5): tests write versions 1 to 4 to check that they stay
    /// readable ([SNAP-7]); lnote itself writes only the current version.
    public static func encode(_ state: PageState, coveredLogOffset: UInt64, logIncarnation: UInt64, version: UInt16) -> [UInt8] {
        encode(state, coveredLogOffset: coveredLogOffset, logIncarnation: logIncarnation, version: version, everyRestore: false)
    }

    /// `everyRestore`: each erasure's restores written as given (sorted), not reduced to the
    /// first of each replica: what lnote wrote before [MERGE-70] kept only those, for tests
    /// that check such snapshots stay readable ([SNAP-40]).
    package static func encode(_ state: PageState, coveredLogOffset: UInt64, logIncarnation: UInt64, version: UInt16,
                               everyRestore: Bool) -> [UInt8] {
        precondition((1...5).contains(version), "no snapshot format version \(version)")
        // A stroke read with its points deferred ([SNAP-38]) is resolved by its holder first:
        // written as is it would lose its points.
        precondition(state.isResolved, "a page snapshot of page \(state.page) encoded with deferred points")
        let s = canonicalized(state, everyRestore: everyRestore)
        var w = ByteWriter(capacity: 256 + s.pointCount * 2 + s.elements.count * 48)
        w.append(magic)
        w.u16(version)
        w.u16(0)
        w.u64(0) // file length, patched below
        w.append(s.page.uuid.bytes)
        w.u64(coveredLogOffset)
        w.u64(logIncarnation)

        section(.page, into: &w) { b in
            ElementCodec.encode(s.clock, into: &b)
            b.varint(s.maxLamport)
            b.svarint(s.modified)
        }
        // [SNAP-32] The offset in the elements body of every 64th record after the first.
        var indexOffsets: [Int] = []
        section(.elements, into: &w) { b in
            b.varint(UInt64(s.elements.count))
            if version == 1 {
                for (i, e) in s.elements.enumerated() {
                    if i > 0 && i % elementIndexStride == 0 { indexOffsets.append(b.count) }
                    encode(e, into: &b)
                }
            } else {
                // [SNAP-35] Each record against the previous one of its chunk of 64.
                let replicas = ReplicaTable(s.clock)
                var context = RecordContext(version: version)
                for (i, e) in s.elements.enumerated() {
                    if i % elementIndexStride == 0 {
                        if i > 0 { indexOffsets.append(b.count) }
                        context = RecordContext(version: version)
                    }
                    encodeV2(e, replicas: replicas, context: &context, into: &b)
                }
            }
        }
        section(.tombstones, into: &w) { b in
            b.varint(UInt64(s.tombstones.count))
            for t in s.tombstones {
                ElementCodec.encode(t.id, into: &b)
                b.varint(UInt64(t.erasures.count))
                for e in t.erasures {
                    ElementCodec.encode(e.ref, into: &b)
                    ElementCodec.encode(e.clock, into: &b)
                }
                encodeRefs(t.frontier, into: &b)
            }
        }
        section(.contexts, into: &w) { b in
            b.varint(UInt64(s.contexts.count))
            for c in s.contexts {
                b.u64(c.replica.rawValue)
                ElementCodec.encode(c.clock, into: &b)
                b.varint(UInt64(c.lamports.count))
                var from: UInt64 = 0
                for run in c.lamports {
                    b.varint(run.from &- from)
                    b.varint(run.offset)
                    from = run.from
                }
            }
        }
        if !indexOffsets.isEmpty {
            section(.elementIndex, into: &w) { b in
                b.varint(UInt64(elementIndexStride))
                b.varint(UInt64(indexOffsets.count))
                var previous = 0
                for o in indexOffsets {
                    b.varint(UInt64(o - previous))
                    previous = o
                }
                // [SNAP-45] Version 5: the records' ids after the offsets.
                if version >= 5 {
                    encodeIDTable(IDTable(ids: s.elements.lazy.map(\.id)), replicas: ReplicaTable(s.clock), into: &b)
                }
            }
        }

        if needsEraseHistory(s) {
            section(.eraseHistory, into: &w) { b in encodeEraseHistory(s, into: &b) }
        }
        let restored = lists(of: s, \.rangeRestores)
        if !restored.isEmpty {
            section(.rangeRestores, into: &w) { b in encodeRangeRestores(restored, into: &b) }
        }

        let length = w.count + trailerSize
        var bytes = w.bytes
        withUnsafeBytes(of: UInt64(length).littleEndian) { for i in 0..<8 { bytes[12 + i] = $0[i] } }
        let crc = CRC32C.checksum(bytes)
        withUnsafeBytes(of: crc.littleEndian) { bytes.append(contentsOf: $0) }
        return bytes
    }

    /// Convenience for `encode(c.state, coveredLogOffset:logIncarnation:)`.
    public static func encode(_ c: Contents) -> [UInt8] {
        encode(c.state, coveredLogOffset: c.coveredLogOffset, logIncarnation: c.logIncarnation)
    }

    private static func section(_ tag: Section, into w: inout ByteWriter, _ body: (inout ByteWriter) -> Void) {
        var b = ByteWriter()
        body(&b)
        // A section of 4 GiB would need 2 billion points: far beyond any page the store
        // accepts (it limits page size before it gets here); not a reachable input.
        guard let size = UInt32(exactly: b.count) else {
            preconditionFailure("snapshot section of \(b.count) bytes exceeds the 4 GiB limit of format version 1")
        }
        w.u16(tag.rawValue)
        w.u32(size)
        w.append(b.bytes)
    }

    static func encode(_ e: ElementRecord, into b: inout ByteWriter) {
        ElementCodec.encode(e.id, into: &b)
        b.varint(e.lamport)
        b.svarint(e.wallTime)
        ElementCodec.encode(e.transform.value, into: &b)
        encodeRefs(e.transform.frontier, into: &b)
        ElementCodec.encode(e.z.value, into: &b)
        encodeRefs(e.z.frontier, into: &b)
        encodeRanges(e.erased, into: &b)
        encodeRefs(e.frontier, into: &b)
        ElementCodec.encode(e.content, into: &b)
    }

    /// [SNAP-40] The erase-history section is written exactly when it holds something: a
    /// tombstone's record, a restore of an erasure, or a partial erase.
    static func needsEraseHistory(_ s: PageState) -> Bool {
        s.tombstones.contains { $0.record != nil || $0.erasures.contains { !$0.cancelledBy.isEmpty } }
            || s.elements.contains { !$0.rangeErasures.isEmpty }
    }

    /// [SNAP-40] Per tombstone (in the tombstone section's order): per erasure the restores that
    /// took it back, then its record when held; then the partial erases of every element
    /// (live or kept by a tombstone) that has some, by element id.
    static func encodeEraseHistory(_ s: PageState, into b: inout ByteWriter) {
        b.varint(UInt64(s.tombstones.count))
        for t in s.tombstones {
            for e in t.erasures {
                b.varint(UInt64(e.cancelledBy.count))
                for c in e.cancelledBy { ElementCodec.encode(c, into: &b) }
            }
            if let r = t.record {
                b.u8(1)
                var kept = r
                kept.frontier = []
                encode(kept, into: &b)
            } else {
                b.u8(0)
            }
        }
        let ranged = lists(of: s, \.rangeErasures)
        b.varint(UInt64(ranged.count))
        for (id, list) in ranged {
            ElementCodec.encode(id, into: &b)
            b.varint(UInt64(list.count))
            for x in list {
                ElementCodec.encode(x.ref, into: &b)
                encodeRanges(x.ranges, into: &b)
            }
        }
    }

    /// Each element, live or kept by a tombstone, whose `list` is not empty, with that list,
    /// by element id: the entries of the erase history's partial-erase lists ([SNAP-40]) and of
    /// the range-restore section ([SNAP-44]).
    static func lists<T>(of s: PageState, _ list: KeyPath<ElementRecord, [T]>) -> [(ElementID, [T])] {
        var out: [(ElementID, [T])] = []
        for e in s.elements where !e[keyPath: list].isEmpty { out.append((e.id, e[keyPath: list])) }
        for t in s.tombstones {
            if let r = t.record, !r[keyPath: list].isEmpty { out.append((r.id, r[keyPath: list])) }
        }
        out.sort { $0.0 < $1.0 }
        return out
    }

    /// [SNAP-44] The range restores of every element (live or kept by a tombstone) that has
    /// some (`lists(of:_:)`), by element id: each with its ranges and the partial erases it had seen.
    static func encodeRangeRestores(_ restored: [(ElementID, [RangeRestore])], into b: inout ByteWriter) {
        b.varint(UInt64(restored.count))
        for (id, list) in restored {
            ElementCodec.encode(id, into: &b)
            b.varint(UInt64(list.count))
            for x in list {
                ElementCodec.encode(x.ref, into: &b)
                encodeRanges(x.ranges, into: &b)
                b.varint(UInt64(x.seen.count))
                for o in x.seen { ElementCodec.encode(o, into: &b) }
            }
        }
    }

    static func encodeRefs(_ refs: [OpRef], into b: inout ByteWriter) {
        b.varint(UInt64(refs.count))
        for r in refs { ElementCodec.encode(r, into: &b) }
    }

    /// A range list ([SNAP-14]): the count, then each range as (gap, length).
    static func encodeRanges(_ ranges: [PointRange], into b: inout ByteWriter) {
        b.varint(UInt64(ranges.count))
        var previousEnd: UInt32 = 0
        for r in ranges {
            b.varint(UInt64(r.from - previousEnd))
            b.varint(UInt64(r.to - r.from))
            previousEnd = r.to
        }
    }

    // MARK: Canonical form

    /// `state` with every set in canonical order: elements by `ElementRecord.canonicalLess`,
    /// frontiers and concurrent lists ascending by `OpRef` without duplicates, erased ranges
    /// normalized, tombstones by id, erasures by ref, contexts by replica.
    public static func canonicalized(_ state: PageState) -> PageState { canonicalized(state, everyRestore: false) }

    /// True when `claimed` is the same state as `expected`, the state the operations give:
    /// equal, or equal but for strokes that `claimed` holds as a page written before range
    /// restores were kept (lnote before 2026-12-07, [SNAP-44]): no restores, and for each
    /// partial erase what of it was left, those taken back whole left out. Then each partial
    /// erase of `expected` must keep exactly what `claimed` lists ([MERGE-71]): both give the
    /// same erased points now and after any operation. A `claimed` stroke that keeps restores
    /// must equal `expected`'s: compared by what each erase keeps, a partial erase taken back
    /// whole, with the restore that took it, would pass unseen, and what arrives from another
    /// machine must be explained by the operations. With `anyForm` (for pages this replica
    /// wrote itself, where one read from an old snapshot and edited since holds both forms),
    /// every stroke whose lists differ is compared by what each erase keeps.
    /// Both in canonical order (`canonicalized`).
    public static func sameState(_ expected: PageState, as claimed: PageState, anyForm: Bool = false) -> Bool {
        if expected == claimed { return true }
        guard expected.elements.count == claimed.elements.count, expected.tombstones.count == claimed.tombstones.count else { return false }
        var a = expected, b = claimed
        func settle(_ x: inout ElementRecord, _ y: inout ElementRecord) -> Bool {
            guard x.rangeErasures != y.rangeErasures || x.rangeRestores != y.rangeRestores else { return true }
            // Only a claimed page written the old way is compared by what each erase keeps.
            guard anyForm || (y.rangeRestores.isEmpty && !x.rangeRestores.isEmpty) else { return false }
            guard RangeHistory.sameKept(x.rangeErasures, x.rangeRestores, y.rangeErasures, y.rangeRestores) else { return false }
            (x.rangeErasures, x.rangeRestores, y.rangeErasures, y.rangeRestores) = ([], [], [], [])
            return true
        }
        for i in a.elements.indices where a.elements[i].id == b.elements[i].id {
            guard settle(&a.elements[i], &b.elements[i]) else { return false }
        }
        for i in a.tombstones.indices where a.tombstones[i].id == b.tombstones[i].id {
            guard var x = a.tombstones[i].record, var y = b.tombstones[i].record else { continue }
            guard settle(&x, &y) else { return false }
            a.tombstones[i].record = x
            b.tombstones[i].record = y
        }
        return a == b
    }

    static func canonicalized(_ state: PageState, everyRestore: Bool) -> PageState {
        var s = state
        for i in s.elements.indices {
            s.elements[i].transform.frontier = sortedUnique(s.elements[i].transform.frontier)
            s.elements[i].z.frontier = sortedUnique(s.elements[i].z.frontier)
            s.elements[i].frontier = sortedUnique(s.elements[i].frontier)
            s.elements[i].erased = s.elements[i].erased.normalizedUnion()
        }
        s.elements.sort(by: ElementRecord.canonicalLess)
        for i in s.elements.indices where !s.elements[i].rangeErasures.isEmpty {
            s.elements[i].rangeErasures = canonical(s.elements[i].rangeErasures)
            s.elements[i].rangeRestores.sort { $0.ref < $1.ref }
        }
        for i in s.tombstones.indices {
            var erasures = s.tombstones[i].erasures.sorted { $0.ref < $1.ref }
            for k in erasures.indices {
                erasures[k].cancelledBy = everyRestore ? Array(Set(erasures[k].cancelledBy)).sorted()
                                                       : Erasure.firstRestores(erasures[k].cancelledBy)
            }
            s.tombstones[i].erasures = erasures
            s.tombstones[i].frontier = sortedUnique(s.tombstones[i].frontier)
            if var r = s.tombstones[i].record {
                r.transform.frontier = sortedUnique(r.transform.frontier)
                r.z.frontier = sortedUnique(r.z.frontier)
                r.frontier = []
                r.erased = r.erased.normalizedUnion()
                r.rangeErasures = canonical(r.rangeErasures)
                r.rangeRestores.sort { $0.ref < $1.ref }
                s.tombstones[i].record = r
            }
        }
        s.tombstones.sort { $0.id < $1.id }
        s.contexts.sort { $0.replica < $1.replica }
        return s
    }

    /// Partial erases by ref, ranges normalized, empty ones dropped.
    static func canonical(_ list: [RangeErasure]) -> [RangeErasure] {
        list.map { RangeErasure(ref: $0.ref, ranges: $0.ranges.normalizedUnion()) }
            .filter { !$0.ranges.isEmpty }.sorted { $0.ref < $1.ref }
    }

    static func sortedUnique(_ refs: [OpRef]) -> [OpRef] {
        var out = refs.sorted()
        var i = 1
        while i < out.count {
            if out[i] == out[i - 1] { out.remove(at: i) } else { i += 1 }
        }
        return out
    }

    /// Throws `invalidArgument` naming the first invariant `state` breaks among those a
    /// decoder checks ([SNAP-20] … [SNAP-27]): canonical order, unique ids, non-zero ids,
    /// non-empty erasure lists, normalized ranges.
    public static func validate(_ state: PageState) throws {
        func fail(_ message: String, index: Int? = nil) -> LnoteError {
            LnoteError(.invalidArgument, message, index: index)
        }
        func checkID(_ id: OpID, _ what: String, _ i: Int?) throws {
            guard id.replica.rawValue != 0, id.counter != 0 else { throw fail("\(what): zero replica id or counter", index: i) }
        }
        func checkRefs(_ refs: [OpRef], _ what: String, _ i: Int?) throws {
            for r in refs { try checkID(r.id, what, i) }
            guard zip(refs, refs.dropFirst()).allSatisfy({ $0 < $1 }) else {
                throw fail("\(what) not strictly increasing", index: i)
            }
        }
        func checkClock(_ c: VectorClock, _ what: String, _ i: Int?) throws {
            guard c.entries.allSatisfy({ $0.replica.rawValue != 0 }) else { throw fail("\(what) has a zero replica id", index: i) }
        }
        try checkClock(state.clock, "page clock", nil)
        guard state.clock.total <= VectorClock.maxTotal, state.maxLamport <= VectorClock.maxTotal else {
            throw fail("page clock or max lamport beyond 2^62 operations")
        }
        var ids = Set<OpID>()
        for (i, e) in state.elements.enumerated() {
            try checkID(e.id, "element id", i)
            guard ids.insert(e.id).inserted else { throw fail("duplicate element id \(e.id)", index: i) }
            if i > 0 {
                guard ElementRecord.canonicalLess(state.elements[i - 1], e) else {
                    throw fail("elements not in canonical z order", index: i)
                }
            }
            try checkRefs(e.transform.frontier, "transform frontier", i)
            try checkRefs(e.z.frontier, "z frontier", i)
            try checkRefs(e.frontier, "edit frontier", i)
            if let problem = e.z.value.validityProblem { throw fail("invalid z key: \(problem)", index: i) }
            guard e.erased == e.erased.normalizedUnion() else { throw fail("erased ranges not normalized", index: i) }
            // [SNAP-19] What operations carried: within [LOG-23]'s bounds.
            if let problem = ContentBounds.problem(e.content) ?? ContentBounds.problem(e.transform.value) {
                throw fail("element \(e.id): \(problem)", index: i)
            }
        }
        for (i, e) in state.elements.enumerated() {
            if let problem = rangeErasureProblem(e, clock: state.clock) { throw fail("element \(e.id): \(problem)", index: i) }
        }
        for (i, t) in state.tombstones.enumerated() {
            try checkID(t.id, "tombstone id", i)
            if i > 0 { guard state.tombstones[i - 1].id < t.id else { throw fail("tombstones not sorted by id", index: i) } }
            // [SNAP-24] An erased element is not live; a restored one is, unless its content was never held.
            guard !(t.isErased && ids.contains(t.id)) else { throw fail("tombstone \(t.id) is erased and also a live element", index: i) }
            guard !t.erasures.isEmpty else { throw fail("tombstone without erasures", index: i) }
            try checkRefs(t.erasures.map(\.ref), "erasures", i)
            for e in t.erasures {
                try checkClock(e.clock, "erasure clock", i)
                for c in e.cancelledBy { try checkID(c, "restore id", i) }
                // Strictly increasing, as a decoder requires; one restore per replica is what
                // encoding writes (`canonicalized` keeps the first of each, [MERGE-70]).
                guard zip(e.cancelledBy, e.cancelledBy.dropFirst()).allSatisfy({ $0 < $1 }) else {
                    throw fail("restores of an erasure not strictly increasing", index: i)
                }
            }
            try checkRefs(t.frontier, "tombstone frontier", i)
            if let r = t.record {
                guard t.isErased, r.id == t.id, r.frontier.isEmpty else {
                    throw fail("tombstone \(t.id) keeps a record while live, of another id, or with a frontier", index: i)
                }
                if let problem = r.z.value.validityProblem { throw fail("invalid z key: \(problem)", index: i) }
                if let problem = ContentBounds.problem(r.content) ?? ContentBounds.problem(r.transform.value)
                    ?? rangeErasureProblem(r, clock: state.clock) {
                    throw fail("erased element \(t.id): \(problem)", index: i)
                }
            }
            if !t.isErased { guard t.frontier.isEmpty else { throw fail("restored tombstone \(t.id) keeps a frontier", index: i) } }
        }
        try validateContexts(state.contexts, clock: state.clock, maxLamport: state.maxLamport, code: .invalidArgument)
    }

    /// [SNAP-41] [SNAP-44] What is wrong with a record's partial erases and range restores, or
    /// nil: each list sorted by ref; each partial erase normalized, non-empty and within the
    /// stroke; each restore likewise, within the partial erases' points, naming partial erases
    /// of the stroke, one per replica, each before it; what they leave erased ([MERGE-71]) its erased
    /// ranges. A record with erased ranges and no partial erases is of a format-2 page without
    /// the section ([SNAP-40]) and passes.
    /// Without `sums`, only the lists' form is checked (a reader that has the restores still
    /// to read).
    static func rangeErasureProblem(_ e: ElementRecord, clock: VectorClock, sums: Bool = true) -> String? {
        guard !e.rangeErasures.isEmpty else { return e.rangeRestores.isEmpty ? nil : "range restores without partial erases" }
        guard zip(e.rangeErasures, e.rangeErasures.dropFirst()).allSatisfy({ $0.ref < $1.ref }) else {
            return "partial erases not strictly increasing by ref"
        }
        // Operations this page applied, each replica's in the order of its counters ([MERGE-43]):
        // what a restore's `seen` bound covers is then exactly what came before it.
        var last: [ReplicaID: UInt64] = [:]
        for x in e.rangeErasures {
            guard clock.covers(x.ref.id) else { return "partial erase \(x.ref) is not an operation the page clock covers" }
            guard (last[x.ref.id.replica] ?? 0) < x.ref.id.counter else {
                return "partial erases of \(x.ref.id.replica) not in the order of their counters"
            }
            last[x.ref.id.replica] = x.ref.id.counter
        }
        let n = UInt32(clamping: e.content.pointCount)
        for x in e.rangeErasures {
            guard !x.ranges.isEmpty, x.ranges.isNormalized, x.ranges.last!.to <= n else {
                return "partial erase \(x.ref) has empty, unnormalized or out-of-stroke ranges"
            }
        }
        if !sums { return nil }
        if e.rangeRestores.isEmpty {
            // One partial erase (the usual case) is its own union: compared without building it.
            let union = e.rangeErasures.count == 1 ? e.rangeErasures[0].ranges : e.rangeErasures.flatMap(\.ranges).normalizedUnion()
            guard union == e.erased else {
                return "partial erases do not add up to the erased ranges"
            }
            return nil
        }
        guard zip(e.rangeRestores, e.rangeRestores.dropFirst()).allSatisfy({ $0.ref < $1.ref }) else {
            return "range restores not strictly increasing by ref"
        }
        var erasures: [OpID: OpRef] = [:]
        for x in e.rangeErasures { erasures[x.ref.id] = x.ref }
        let held = PointRange.union(of: e.rangeErasures.map(\.ranges))
        for x in e.rangeRestores {
            guard clock.covers(x.ref.id) else { return "range restore \(x.ref) is not an operation the page clock covers" }
            guard !x.seen.isEmpty, zip(x.seen, x.seen.dropFirst()).allSatisfy({ $0.replica < $1.replica }) else {
                return "range restore \(x.ref) names no partial erase, or a replica twice, or out of order"
            }
            for o in x.seen {
                guard let ref = erasures[o] else { return "range restore \(x.ref) names \(o), not a partial erase of the stroke" }
                guard ref < x.ref else { return "range restore \(x.ref) names partial erase \(ref), which is not before it" }
            }
            // Within the partial erases' points (a writer keeps only those of the ones it had
            // seen, `RangeHistory.received`; checked against all of them: once, not per restore).
            guard !x.ranges.isEmpty, x.ranges.isNormalized, x.ranges.subtractingNormalized(held).isEmpty else {
                return "range restore \(x.ref) has empty or unnormalized ranges, or points no partial erase holds"
            }
        }
        guard RangeHistory.erased(e.rangeErasures, e.rangeRestores) == e.erased else {
            return "partial erases and range restores do not leave the erased ranges"
        }
        return nil
    }

    /// [SNAP-26] Replica contexts: one per replica of `clock`, sorted, each the clock of that
    /// replica's latest operation, with well-formed Lamport runs. Throws `code`.
    public static func validateContexts(_ contexts: [ReplicaContext], clock: VectorClock, maxLamport: UInt64,
                                        code: LnoteError.Code = .corrupt) throws {
        func fail(_ message: String, index: Int? = nil) -> LnoteError { LnoteError(code, message, index: index) }
        func checkClock(_ c: VectorClock, _ what: String, _ i: Int?) throws {
            guard c.entries.allSatisfy({ $0.replica.rawValue != 0 }) else { throw fail("\(what) has a zero replica id", index: i) }
        }
        for (i, c) in contexts.enumerated() {
            guard c.replica.rawValue != 0 else { throw fail("context with a zero replica id", index: i) }
            if i > 0 { guard contexts[i - 1].replica < c.replica else { throw fail("contexts not sorted by replica", index: i) } }
            try checkClock(c.clock, "context clock", i)
            guard clock.covers(c.clock), c.clock[c.replica] == clock[c.replica], c.clock[c.replica] > 0 else {
                throw fail("context of \(c.replica) is not the clock of its latest operation", index: i)
            }
            guard c.lamports.first?.from == 1,
                  zip(c.lamports, c.lamports.dropFirst()).allSatisfy({ $0.from < $1.from && $0.offset != $1.offset }),
                  c.lamports.last!.from <= c.clock[c.replica] else {
                throw fail("lamport runs of \(c.replica) malformed", index: i)
            }
            // The runs hold running maxima: never decreasing from one counter to the next, never
            // above the greatest timestamp of the page, never past UInt64.
            let own = c.clock[c.replica]
            for (k, run) in c.lamports.enumerated() {
                let end = k + 1 < c.lamports.count ? c.lamports[k + 1].from - 1 : own
                let (last, overflow) = end.addingReportingOverflow(run.offset)
                guard !overflow, last <= maxLamport else {
                    throw fail("lamport runs of \(c.replica) exceed the greatest Lamport timestamp \(maxLamport)", index: i)
                }
                if k > 0 { guard run.offset &+ 1 >= c.lamports[k - 1].offset else {
                    throw fail("lamport runs of \(c.replica) decrease at counter \(run.from)", index: i)
                } }
            }
        }
        guard contexts.map(\.replica) == clock.replicas else {
            throw fail("contexts do not name exactly the replicas of the clock")
        }
    }
}

extension ElementRecord {
    /// The total order snapshots store elements in; the same as `zLess` (the element's
    /// position: its z key with its id as the last step's tag), kept as a name for the snapshot code.
    public static func canonicalLess(_ l: ElementRecord, _ r: ElementRecord) -> Bool { zLess(l, r) }
}
