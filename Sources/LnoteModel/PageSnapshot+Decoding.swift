import Foundation

extension PageSnapshot {
    /// Reads a snapshot, checking its envelope and every invariant of `PageState`.
    ///
    /// The checks run in the order of `Protocol/page-snapshot.md` ("Reading a snapshot"):
    /// magic, length, CRC, then version and flags, then the sections. So a cut file is
    /// `truncated`, a damaged one `corrupt` (both with the byte offset of the problem), and
    /// an intact file from a newer major version `unsupportedVersion`.
    ///
    /// - Parameters:
    ///   - bytes: the whole file.
    ///   - path: named in errors.
    /// - Throws: `LnoteError` with code `truncated`, `corrupt` or `unsupportedVersion`.
    public static func decode(_ bytes: [UInt8], path: String? = nil) throws -> Contents {
        try decode(bytes, path: path, parallel: true)
    }

    /// `decode` with the points of a snapshot of version 2 or later deferred ([SNAP-38]): every check
    /// but those of the point streams' bits, which run when a stroke is first resolved
    /// (`Stroke.resolved()`, `PageState.resolved()`), chunk by chunk. A version-1 snapshot
    /// is read whole. Same errors as `decode` for everything it checks. A deferred stroke is
    /// not `==` to the same stroke read eagerly (it holds no points yet): compare resolved
    /// states.
    ///
    /// `reserving` leaves room for that many more elements in the decoded state (a log tail
    /// about to add them), beyond the usual room for new strokes: adding past the room moves
    /// every record to new memory.
    public static func decode(_ bytes: [UInt8], path: String? = nil, deferringPoints: Bool,
                              reserving: Int = 0) throws -> Contents {
        try decode(bytes, path: path, parallel: true, deferringPoints: deferringPoints, reserving: reserving)
    }

    /// `decode(_:path:deferringPoints:reserving:)` for an open that lists the page
    /// ([SNAP-46]): with `leavingRecordsUnbuilt`, a version-5 snapshot of more than 64
    /// elements without tombstones or erase history has its element records stepped over,
    /// not parsed (`Contents.unbuilt`, `state.elements` empty), when its element index, id
    /// table and last chunk check out; they are read, with every check, when first needed.
    /// Every other file is decoded as `decode` decodes it, with the same errors.
    package static func decode(_ bytes: [UInt8], path: String? = nil, deferringPoints: Bool, reserving: Int = 0,
                               leavingRecordsUnbuilt: Bool) throws -> Contents {
        try decode(bytes, path: path, parallel: true, deferringPoints: deferringPoints, reserving: reserving,
                   leavingRecordsUnbuilt: leavingRecordsUnbuilt)
    }

    /// True when a listing read ([SNAP-46]) of `bytes` is likely to leave the element records
    /// unparsed: a version-5 file whose section headers (read without any check) show an
    /// element index and neither a tombstone nor an erase history. For a caller choosing how
    /// to schedule the read (it is then short); the read itself decides.
    package static func mayLeaveRecordsUnparsed(_ bytes: [UInt8]) -> Bool { unparsedIndexBody(bytes) != nil }

    /// [SNAP-46] The element index body of a file whose records a listing read may leave
    /// unparsed: version 5, an element index, an empty tombstones section (one zero byte,
    /// shortest varints, [SNAP-36]), no erase-history or range-restore section. Read from the
    /// section headers alone, nothing checked (the read checks what it uses); nil for any other
    /// file. The one statement of which pages qualify, for the read and for its scheduling.
    static func unparsedIndexBody(_ bytes: [UInt8]) -> Range<Int>? {
        guard bytes.count >= headerSize + trailerSize, bytes[8] == 5, bytes[9] == 0 else { return nil }
        var at = headerSize
        var index: Range<Int>?
        let end = bytes.count - trailerSize
        while end - at >= sectionHeaderSize {
            let tag = UInt16(bytes[at]) | UInt16(bytes[at + 1]) << 8
            let size = Int(bytes[at + 2]) | Int(bytes[at + 3]) << 8 | Int(bytes[at + 4]) << 16 | Int(bytes[at + 5]) << 24
            let body = at + sectionHeaderSize
            guard size <= end - body else { return nil }
            switch Section(rawValue: tag) {
            case .eraseHistory, .rangeRestores: return nil
            case .tombstones: if size != 1 || bytes[body] != 0 { return nil }
            case .elementIndex: index = body..<(body + size)
            default: break
            }
            at = body + size
        }
        return index
    }

    /// The covered log offset and log incarnation a snapshot's header says, read without
    /// any check (nil when the bytes are too short to hold them): what a reader may use to
    /// start reading the log while `decode` has not yet checked the snapshot. `decode`'s
    /// values are the ones to trust.
    public static func peekCoverage(_ bytes: [UInt8]) -> (offset: UInt64, incarnation: UInt64)? {
        guard bytes.count >= headerSize else { return nil }
        func u64(_ at: Int) -> UInt64 { (0..<8).reduce(0) { $0 | UInt64(bytes[at + $1]) << (8 * $1) } }
        return (u64(36), u64(44))
    }

    /// `decode`, with the parallel decoding of big element sections allowed or not (tests
    /// compare both: they must agree on every input).
    static func decode(_ bytes: [UInt8], path: String?, parallel: Bool, deferringPoints: Bool = false,
                       reserving: Int = 0, leavingRecordsUnbuilt: Bool = false) throws -> Contents {
        func failure(_ code: LnoteError.Code, _ message: String, at offset: Int) -> LnoteError {
            LnoteError(code, message, path: path, offset: offset)
        }
        let n = bytes.count

        // [SNAP-3] Magic.
        for i in 0..<min(n, magic.count) where bytes[i] != magic[i] {
            throw failure(.corrupt, "not a page snapshot (bad magic)", at: i)
        }
        guard n >= 20 else { throw failure(.truncated, "snapshot header cut off after \(n) bytes", at: n) }

        // [SNAP-5] The length field, then [SNAP-6] the CRC, before anything else is trusted.
        var header = ByteReader(bytes, path: path)
        _ = try header.skip(8)
        let versionField = try header.u16()
        let flags = try header.u16()
        let declared = try header.u64()
        let minimum = headerSize + trailerSize
        guard declared >= UInt64(minimum) else {
            throw failure(.corrupt, "snapshot length \(declared) is below the minimum \(minimum)", at: 12)
        }
        guard declared <= UInt64(n) else {
            throw failure(.truncated, "snapshot cut off: \(n) of \(declared) bytes", at: n)
        }
        let length = Int(declared)
        guard length == n else {
            throw failure(.corrupt, "\(n - length) unexpected bytes after the snapshot", at: length)
        }
        let crcAt = length - trailerSize
        let stored = UInt32(bytes[crcAt]) | UInt32(bytes[crcAt + 1]) << 8
            | UInt32(bytes[crcAt + 2]) << 16 | UInt32(bytes[crcAt + 3]) << 24
        let computed = parallel ? CRC32C.checksumInParallel(bytes, 0..<crcAt) : CRC32C.checksum(bytes, 0..<crcAt)
        guard stored == computed else {
            throw failure(.corrupt, "snapshot CRC mismatch (stored \(hex32(stored)), computed \(hex32(computed)))", at: crcAt)
        }

        // [SNAP-7] [SNAP-8] Version and flags.
        guard versionField != 0 else { throw failure(.corrupt, "snapshot version 0", at: 8) }
        guard versionField <= version else {  // [SNAP-7] versions 1 to 4 are read
            throw failure(.unsupportedVersion, "snapshot format version \(versionField) is newer than \(version)", at: 8)
        }
        guard flags & incompatibleFlags == 0 else {
            throw failure(.unsupportedVersion, "snapshot uses unknown flags \(hex32(UInt32(flags)))", at: 10)
        }

        var r = ByteReader(bytes, range: 20..<crcAt, path: path)
        do {
            let page = PageID(UUID(bytes: try r.bytes(16, "page id"))!)
            let coveredLogOffset = try r.u64("covered log offset")
            let logIncarnation = try r.u64("log incarnation")

            var state = PageState(page: page)
            var deferral: DeferredPoints?
            var seen: Set<Section> = []
            var lastTag: UInt16 = 0
            var elementStarts: [Int] = []
            var indexSeen = false
            // The element count, and the records stepped over ([SNAP-46]).
            var elementCount = 0
            var unbuilt: UnbuiltRecords?
            while !r.isAtEnd {
                let at = r.offset
                guard r.remaining >= sectionHeaderSize else {
                    throw r.error(.corrupt, "section header cut off by the end of the sections")
                }
                let tag = try r.u16("section tag")
                let size = try r.u32("section length")
                // [SNAP-10] Tags strictly increasing (so each appears once).
                guard tag > lastTag else {
                    throw r.error(.corrupt, "section tag \(hex32(UInt32(tag))) is zero or out of order", at: at)
                }
                lastTag = tag
                guard let count = Int(exactly: size), count <= r.remaining else {
                    throw r.error(.corrupt, "section length \(size) exceeds the \(r.remaining) bytes left", at: at + 2)
                }
                let body = try r.skip(count, "section body")
                guard let known = Section(rawValue: tag) else {
                    // [SNAP-11] Unknown sections: skipped, unless marked critical.
                    if tag & criticalTagBit != 0 {
                        throw r.error(.unsupportedVersion, "unknown critical section \(hex32(UInt32(tag)))", at: at)
                    }
                    continue
                }
                seen.insert(known)
                var s = ByteReader(bytes, range: body, path: path)
                // [SNAP-36] Version 2 is canonical throughout: shortest varints everywhere.
                s.shortestVarints = versionField >= 2
                switch known {
                case .page:
                    let clockAt = s.offset
                    state.clock = try ElementCodec.decodeClock(&s)
                    let lamportAt = s.offset
                    state.maxLamport = try s.varint("max lamport")
                    // [SNAP-13] No log holds more than 2^62 operations ([LOG-4]).
                    guard state.clock.total <= VectorClock.maxTotal else {
                        throw s.error(.corrupt, "page clock counts more than 2^62 operations", at: clockAt)
                    }
                    guard state.maxLamport <= VectorClock.maxTotal else {
                        throw s.error(.corrupt, "max lamport \(state.maxLamport) beyond 2^62", at: lamportAt)
                    }
                    state.modified = try s.svarint("modified")
                case .elements:
                    deferral = deferringPoints && versionField >= 2
                        ? DeferredPoints(bytes: bytes, path: path, replicas: ReplicaTable(state.clock),
                                         version: versionField) : nil
                    if leavingRecordsUnbuilt && deferringPoints && versionField >= 5,
                       let lazy = unbuiltRecords(s, version: versionField, clock: state.clock,
                                                 reserving: max(0, reserving)) {
                        (unbuilt, elementStarts, elementCount) = lazy
                        _ = try s.skip(s.remaining)
                        deferral = nil
                    } else {
                        (state.elements, elementStarts) = try decodeElements(&s, index: parallel ? peekElementIndex(r) : nil,
                                                                             version: versionField, clock: state.clock,
                                                                             deferring: deferral, reserving: max(0, reserving))
                        elementCount = state.elements.count
                    }
                case .tombstones:
                    state.tombstones = try decodeTombstones(&s)
                case .contexts:
                    state.contexts = try decodeContexts(&s, clock: state.clock, maxLamport: state.maxLamport)
                case .eraseHistory:
                    // Restores next ([SNAP-44]): the partial erases are checked against the erased
                    // ranges once those are read.
                    var next = r
                    let restoresFollow = next.remaining >= 2 && (try? next.u16("section tag")) == Section.rangeRestores.rawValue
                    try decodeEraseHistory(&s, into: &state, deferring: deferral, sums: !restoresFollow)
                case .rangeRestores:
                    guard seen.contains(.eraseHistory) else {
                        throw r.error(.corrupt, "range-restore section without an erase-history section", at: at)
                    }
                    try decodeRangeRestores(&s, into: &state)
                case .elementIndex:
                    // [SNAP-32] Exactly where the records start (elements came first: tags increase).
                    let at = s.offset
                    guard try elementIndexOffsets(&s) == elementStarts, !elementStarts.isEmpty else {
                        throw s.error(.corrupt, "element index does not match the element records", at: at)
                    }
                    indexSeen = true
                    // [SNAP-45] Version 5: the records' ids (checked against them when they are
                    // read; records left unbuilt are checked when they are built).
                    if versionField >= 5 {
                        let table = try decodeIDTable(&s, elements: elementCount,
                                                      replicas: deferral?.replicas ?? ReplicaTable(state.clock))
                        if unbuilt == nil { try checkIDTable(table, against: state.elements, path: path) }
                    }
                }
                try s.expectEnd("section \(hex32(UInt32(tag)))")
            }
            // [SNAP-12] Every version-1 section is present.
            for s in Section.required where !seen.contains(s) {
                throw r.error(.corrupt, "section \(s) is missing", at: crcAt)
            }
            // [SNAP-32] A page of more than 64 elements has its index.
            guard indexSeen || elementStarts.isEmpty else {
                throw r.error(.corrupt, "section elementIndex is missing", at: crcAt)
            }
            // [SNAP-24] No id is both live and erased: a set of the live ids when there are
            // tombstones to look up (a page without erasures, the usual one, needs none; the
            // set is sized once rather than grown insert by insert).
            if !state.tombstones.isEmpty {
                var live = OpIDTable(minimumCapacity: state.elements.count)
                // Through the buffers: reading an id does not copy its record or tombstone.
                state.elements.withUnsafeBufferPointer { b in for i in b.indices { live.insert(b[i].id) } }
                try state.tombstones.withUnsafeBufferPointer { b in
                    for i in b.indices where live.contains(b[i].id) && b[i].isErased {
                        throw LnoteError(.corrupt, "tombstone \(b[i].id) is erased and also a live element", path: path, offset: crcAt, index: i)
                    }
                }
            }
            // [SNAP-40] Present exactly when needed; without it, a format-2 snapshot from before restores.
            var lacksHistory = false
            if seen.contains(.eraseHistory) {
                guard PageSnapshot.needsEraseHistory(state) else {
                    throw r.error(.corrupt, "erase-history section that holds no record, restore or partial erase", at: crcAt)
                }
            } else {
                lacksHistory = !state.tombstones.isEmpty || state.elements.contains { !$0.erased.isEmpty }
            }
            // The source when there are records, live or kept (a page of images only has
            // nothing to decode later, and its chunks check again quickly).
            let source = state.elements.isEmpty && !(deferral?.hasKept ?? false) ? nil : deferral
            var contents = Contents(state: state, coveredLogOffset: coveredLogOffset, logIncarnation: logIncarnation, deferredPoints: source)
            contents.lacksEraseHistory = lacksHistory
            contents.unbuilt = unbuilt
            return contents
        } catch var e as LnoteError where e.code == .truncated || e.code == .limitExceeded {
            // Inside a file whose length and CRC are right, a structure that runs past its
            // section, or a count its section cannot hold, is corruption, not a cut file.
            e.code = .corrupt
            throw e
        }
    }

    /// Refs strictly increasing ([SNAP-21]).
    static func decodeRefs(_ r: inout ByteReader, _ what: String) throws -> [OpRef] {
        let n = try r.count("\(what) count", minSize: 10)
        var out: [OpRef] = []
        out.reserveCapacity(n)
        for _ in 0..<n {
            let at = r.offset
            let ref = try ElementCodec.decodeOpRef(&r)
            if let last = out.last, !(last < ref) {
                throw r.error(.corrupt, "\(what) not strictly increasing", at: at)
            }
            out.append(ref)
        }
        return out
    }

    /// The elements section ([SNAP-14], [SNAP-20], [SNAP-22]) and where every 64th record
    /// starts, relative to the section body, for the element index check ([SNAP-32]).
    ///
    /// With `index` (the element index read ahead, unchecked) on a big section and several
    /// processors, groups of records are decoded in parallel from the offsets it gives. That
    /// path only returns when every group decodes and ends exactly where the next begins and
    /// the records pass the order and uniqueness checks; on any failure the section is
    /// decoded serially, so that results and errors never depend on the index or the core
    /// count.
    ///
    /// Version 2 records ([SNAP-35]) are coded against the previous record of their chunk of
    /// 64, so each chunk starts from a fresh `RecordContext`; every varint of the section
    /// must be in its shortest form.
    static func decodeElements(_ r: inout ByteReader, index: [Int]?, version: UInt16 = 1,
                               clock: VectorClock = VectorClock(),
                               deferring: DeferredPoints? = nil,
                               reserving: Int = 0) throws -> (elements: [ElementRecord], starts: [Int]) {
        let bodyStart = r.offset
        let v2 = version >= 2
        if v2 { r.shortestVarints = true }
        let n = try r.count("element count", minSize: minimumRecordBytes(version: version))
        let replicas = deferring?.replicas ?? ReplicaTable(v2 ? clock : VectorClock())
        let deferring = v2 ? deferring : nil
        let firstRecord = r.offset
        // Where each chunk begins, for the points decoded later ([SNAP-38]).
        func layOut(_ starts: [Int]) {
            deferring?.setLayout(starts: [firstRecord] + starts.map { bodyStart + $0 }, end: r.offset, records: n)
        }
        // Structure only, when the points are deferred: the parallel path is worth it from a
        // bigger section.
        let parallelFrom = parallelSectionBytes(version: version) * (deferring == nil ? 1 : 4)
        // With an index, a smaller section takes the same path on this thread alone: records
        // decoded straight into their slots and ids checked by a sort rather than a hash
        // table (a pen page's 1,500 records read with their points deferred: a fifth of
        // their decode was records copied and ids hashed).
        if let index,
           let done = decodeElementsInParallel(r, count: n, bodyStart: bodyStart, index: index, version: version, replicas: replicas,
                                               deferring: deferring, reserving: reserving,
                                               parallel: r.remaining >= parallelFrom && Parallel.processors > 1) {
            _ = try r.skip(r.remaining)
            layOut(index)
            return (done, index)
        }
        var out: [ElementRecord] = []
        // Room for what the count claims, up to `maxReservedRecords`: a count is bounded
        // by the bytes left over the smallest record (5 bytes), and a record takes 168
        // bytes decoded, its id 57 in `ids`; past the bound the arrays grow as records decode.
        let claimed = min(n, maxReservedRecords)
        out.reserveCapacity(claimed + reserving + spareElements(claimed))
        var starts: [Int] = []
        starts.reserveCapacity(claimed / elementIndexStride)
        var ids = OpIDTable(minimumCapacity: claimed)
        var context = RecordContext(version: version)
        for i in 0..<n {
            let at = r.offset
            if i % elementIndexStride == 0 {
                if i > 0 { starts.append(at - bodyStart) }
                context = RecordContext(version: version)
            }
            do {
                let e = v2 ? try decodeElementV2(&r, replicas: replicas, context: &context, deferring: deferring, index: i)
                           : try decodeElement(&r)
                // [SNAP-20] Canonical z order, [SNAP-22] unique ids.
                let above = out.withUnsafeBufferPointer { b in b.isEmpty || ElementRecord.canonicalLess(b[b.count - 1], e) }
                if !above {
                    throw r.error(.corrupt, "element \(e.id) is not above the previous one in z order", at: at)
                }
                guard ids.insert(e.id) else { throw r.error(.corrupt, "duplicate element id \(e.id)", at: at) }
                out.append(e)
            } catch var e as LnoteError {
                if e.index == nil { e.index = i }
                throw e
            }
        }
        layOut(starts)
        return (out, starts)
    }

    /// [SNAP-46] The records of a version-5 elements section (`s`, its body; `r`, the file
    /// just past it) left unparsed, or nil when the page does not qualify or anything the
    /// open would rely on does not check out (the caller then decodes them as usual, and
    /// reports what is wrong as any open does). Qualifies: more than 64 records, no
    /// tombstone, no erase-history or range-restore section. Checked here: the element
    /// index's entries and its id table ([SNAP-32], [SNAP-45], each on its own), the ids
    /// unique ([SNAP-22]), and the last chunk, decoded with its points deferred (the top
    /// record, which a record added on top goes above), whose ids must be the table's last.
    /// The index's offsets are checked against the records, and the table against their ids,
    /// when the records are built: by decoding the whole file again, as `decode`.
    static func unbuiltRecords(_ s: ByteReader, version: UInt16, clock: VectorClock,
                               reserving: Int) -> (records: UnbuiltRecords, starts: [Int], count: Int)? {
        let stride = elementIndexStride
        var body = s
        body.shortestVarints = true
        let bodyStart = body.offset
        guard let n = try? body.count("element count", minSize: minimumRecordBytes(version: version)),
              n > stride, let section = unparsedIndexBody(body.bytes) else { return nil }
        let replicas = ReplicaTable(clock)
        var b = ByteReader(body.bytes, range: section, base: body.base, path: body.path)
        b.shortestVarints = true
        guard let index = try? elementIndexOffsets(&b), index.count == (n - 1) / stride,
              let table = try? decodeIDTable(&b, elements: n, replicas: replicas), b.isAtEnd, table.idsAreUnique,
              let lastOffset = index.last else { return nil }
        // The last chunk, from where the index says it starts to the end of the section.
        let lastStart = bodyStart + lastOffset
        guard lastStart > body.offset, lastStart < body.end else { return nil }
        var last = ByteReader(body.bytes, range: lastStart..<body.end, base: body.base, path: body.path)
        last.shortestVarints = true
        let ids = table.ids
        let scratch = DeferredPoints(bytes: body.bytes, path: body.path, replicas: replicas, version: version)
        var context = RecordContext(version: version)
        var top: ElementRecord?
        do {
            for k in index.count * stride ..< n {
                let e = try decodeElementV2(&last, replicas: replicas, context: &context, deferring: scratch, index: k)
                guard e.id == ids[k], top.map({ ElementRecord.canonicalLess($0, e) }) ?? true else { return nil }
                top = e
            }
        } catch {
            return nil
        }
        guard last.isAtEnd, let top else { return nil }
        let bytes = body.bytes, path = body.path
        let records = UnbuiltRecords(ids: ids, top: (top.z.value, top.id)) {
            let c = try decode(bytes, path: path, parallel: true, deferringPoints: true, reserving: reserving)
            // Erased ranges without an erase history ([PKG-99]): an eager open would have read the
            // page from its log. Reported like records that do not decode, so that the page is
            // read again eagerly, which does that.
            guard !c.lacksEraseHistory else {
                throw LnoteError(.corrupt, "element records with erased ranges and no erase-history section: read the page again from its log",
                                 path: path, offset: bytes.count - trailerSize)
            }
            return (c.state.elements, c.deferredPoints)
        }
        return (records, index, n)
    }

    /// The fewest bytes a record of a version-`version` file takes ([SNAP-31], [SNAP-34],
    /// [SNAP-43]), which bounds the element count a section can hold. Version 1: 9 (id) +
    /// 1 + 1 (lamport, wall time) + 3 + 1 (transform and frontier) + 2 + 1 (z and frontier)
    /// + 1 + 1 (erased, erase frontier) + 8 (an empty stroke): 28. Versions 2 and 3: flags,
    /// counter, lamport, wall time, and a stroke on the next layer with the previous style
    /// whose stream is `n`, `L` and one byte of bits: 7. Version 4: the same with *next id*
    /// (no counter or lamport): 5.
    static func minimumRecordBytes(version: UInt16) -> Int {
        switch version {
        case 1: 28
        case 2, 3: 7
        default: 5
        }
    }

    /// Sections at least this big are worth decoding on several cores: 64 KiB of version-1
    /// records, 16 KiB of version-2 ones (which pack the same strokes in two to four times
    /// fewer bytes and cost more to decode per byte: a 2,000-stroke page of pen ink is 60 KiB).
    static func parallelSectionBytes(version: UInt16) -> Int { version >= 2 ? 16 * 1024 : 64 * 1024 }

    /// Room left in the decoded array of `n` elements for strokes added later (a log tail
    /// replayed onto the snapshot, new strokes): growing it moves every record to new memory.
    static func spareElements(_ n: Int) -> Int { n / 4 + 64 }

    /// The most element records a decode reserves room for before reading them (10.5 MiB,
    /// 13 MiB with the spare room): beyond it a snapshot is decoded serially, its records
    /// appended as they check out.
    static let maxReservedRecords = 1 << 16

    /// The parallel path of `decodeElements`, or nil when anything does not hold (the
    /// caller then decodes serially and reports what is wrong). `r` is just past the count.
    /// Without `parallel`, the same on the calling thread alone.
    static func decodeElementsInParallel(_ r: ByteReader, count n: Int, bodyStart: Int, index: [Int], version: UInt16,
                                         replicas: ReplicaTable, deferring: DeferredPoints? = nil,
                                         reserving: Int = 0, parallel: Bool = true) -> [ElementRecord]? {
        let v2 = version >= 2
        let stride = elementIndexStride
        // Its result has room for every claimed record before any is read: past
        // `maxReservedRecords`, the serial path, which grows as they check out.
        guard n > stride, n <= maxReservedRecords, index.count == (n - 1) / stride else { return nil }
        // Chunk k holds records k·64 ..< (k+1)·64 and starts at starts[k].
        var starts = [r.offset]
        for o in index {
            let at = bodyStart + o
            guard at > starts[starts.count - 1], at < r.end else { return nil }
            starts.append(at)
        }
        starts.append(r.end)
        let chunks = index.count + 1
        let groups = parallel ? min(chunks, Parallel.processors * 4) : 1
        let bytes = r.bytes, path = r.path, base = r.base, bounds = starts
        // Each group decodes its records straight into their slots of the result (moved, never
        // copied); a group that fails says how many it had initialized, so they are undone.
        var complete = false
        let all = [ElementRecord](unsafeUninitializedCapacity: n + reserving + spareElements(n)) { buffer, initialized in
            let slots = Slots(base: buffer.baseAddress!)
            let outcomes = Parallel.map(groups, parallel: parallel) { g -> (decoded: Int, ok: Bool) in
                let first = chunks * g / groups, last = chunks * (g + 1) / groups
                var reader = ByteReader(bytes, range: bounds[first]..<bounds[last], base: base, path: path)
                reader.shortestVarints = v2
                let records = min(n, last * stride) - first * stride
                let into = slots.base + first * stride
                var context = RecordContext(version: version)
                var k = 0
                do {
                    while k < records {
                        // Groups start at a chunk boundary: the context starts afresh there, and every
                        // chunk must start where the index says (else the serial pass reports it).
                        if k % stride == 0 {
                            guard reader.offset == bounds[first + k / stride] else { return (k, false) }
                            context = RecordContext(version: version)
                        }
                        (into + k).initialize(to: v2 ? try decodeElementV2(&reader, replicas: replicas, context: &context,
                                                                           deferring: deferring, index: first * stride + k)
                                                     : try decodeElement(&reader))
                        k += 1
                    }
                } catch {
                    return (k, false)
                }
                return (k, reader.isAtEnd)
            }
            if outcomes.allSatisfy(\.ok) {
                initialized = n
                complete = true
            } else {
                for (g, o) in outcomes.enumerated() { (slots.base + chunks * g / groups * stride).deinitialize(count: o.decoded) }
                initialized = 0
            }
        }
        guard complete else { return nil }
        // [SNAP-20] as the serial path checks it, in place.
        var ids: [OpID] = []
        ids.reserveCapacity(n)
        let ordered = all.withUnsafeBufferPointer { b -> Bool in
            for i in b.indices {
                if i > 0, !ElementRecord.canonicalLess(b[i - 1], b[i]) { return false }
                ids.append(b[i].id)
            }
            return true
        }
        guard ordered else { return nil }
        // [SNAP-22] Unique ids: sorting plain integers is cheaper than hashing each one.
        ids.sort()
        for i in ids.indices.dropFirst() where ids[i] == ids[i - 1] { return nil }
        return all
    }

    /// Where the groups of `decodeElementsInParallel` write: each its own slots.
    private struct Slots: @unchecked Sendable {
        let base: UnsafeMutablePointer<ElementRecord>
    }

    /// One element record ([SNAP-14]), without the checks that involve its neighbours.
    static func decodeElement(_ r: inout ByteReader) throws -> ElementRecord {
        var eager: KeptPoints? = nil
        return try decodeElement(&r, keeping: &eager)
    }

    /// The points of the records an erase-history section keeps ([SNAP-40]) as they are
    /// read with their points deferred: the snapshot's source, the tombstone being read, and
    /// where each stream stepped over is.
    struct KeptPoints {
        let source: DeferredPoints
        var tombstone = 0
        var streams: [DeferredPoints.KeptStream] = []
    }

    /// `decodeElement`; with `kept`, a stroke whose point stream has the usual header (3
    /// points or more, read by `StrokeCodec.quickHeader`, which the eager decoder reads
    /// first too) is stepped over and deferred to `kept.source`: every other check is made
    /// here, those of the stream's blocks and [SNAP-19]'s point bounds at first use, with the
    /// errors and offsets of this read.
    static func decodeElement(_ r: inout ByteReader, keeping kept: inout KeptPoints?) throws -> ElementRecord {
        let at = r.offset
        let id = try ElementCodec.decodeOpID(&r)
        let lamport = try r.varint("lamport")
        let wallTime = try r.svarint("wall time")
        let transform = try ElementCodec.decodeTransform(&r)
        let transformFrontier = try decodeRefs(&r, "transform frontier")
        let z = try ElementCodec.decodeZKey(&r)
        let zFrontier = try decodeRefs(&r, "z frontier")
        let erased = try decodeRanges(&r)
        let eraseFrontier = try decodeRefs(&r, "erase frontier")
        let content = kept == nil ? try ElementCodec.decodeContent(&r) : try decodeKeptContent(&r, id: id, at: at, &kept!)
        // [SNAP-19] What operations carried: within [LOG-23]'s bounds (a deferred stroke's
        // points when they are decoded).
        if let problem = ContentBounds.problem(content, allowingDeferred: true) ?? ContentBounds.problem(transform) {
            throw r.error(.corrupt, "element \(id): \(problem)", at: at)
        }
        return ElementRecord(id: id, lamport: lamport, wallTime: wallTime, content: content,
                             transform: LWWRegister(transform, frontier: transformFrontier),
                             z: LWWRegister(z, frontier: zFrontier),
                             erased: erased, frontier: eraseFrontier)
    }

    /// A kept record's content (see `decodeElement(_:keeping:)`).
    private static func decodeKeptContent(_ r: inout ByteReader, id: ElementID, at: Int,
                                          _ kept: inout KeptPoints) throws -> ElementContent {
        var peek = r
        guard (try? peek.u8("element kind")) == ElementCodec.strokeTag else { return try ElementCodec.decodeContent(&r) }
        _ = try r.u8("element kind")
        let style = try ElementCodec.decodeStrokeStyle(&r)
        let stream = r.offset
        guard let h = StrokeCodec.quickHeader(r) else {
            // Fewer than 3 points, or a header the eager decoder reads slowly to name a fault.
            return .stroke(Stroke(style: style, points: try StrokeCodec.decodePoints(&r)))
        }
        // Cannot throw: `quickHeader` checked that the header, H and G bytes are there ([PTS-3]).
        _ = try r.skip(h.headerBytes + h.widthBytes + h.packedBytes, "point stream")
        let rank = kept.streams.count
        kept.streams.append(DeferredPoints.KeptStream(record: at, stream: stream - r.base, sectionEnd: r.end,
                                                      shortestVarints: r.shortestVarints, id: id, style: style,
                                                      tombstone: kept.tombstone))
        return .stroke(Stroke(style: style, deferred: kept.source.slot(index: -1 - rank, count: h.n)))
    }

    /// The element index's offsets if a well-formed index section follows `r` (which is
    /// just past the elements section), else nil. Reads ahead without throwing: the index is
    /// checked for real when its section is reached.
    static func peekElementIndex(_ r: ByteReader) -> [Int]? {
        var h = r
        while h.remaining >= sectionHeaderSize {
            guard let tag = try? h.u16("section tag"), let size = try? h.u32("section length"),
                  let count = Int(exactly: size), let body = try? h.skip(count, "section body") else { return nil }
            guard tag == Section.elementIndex.rawValue else { continue }
            var b = ByteReader(h.bytes, range: body, base: h.base, path: h.path)
            return try? elementIndexOffsets(&b)
        }
        return nil
    }

    /// [SNAP-32] The element index body: stride (64), entry count, offset deltas. Returns
    /// the offsets relative to the elements section body.
    static func elementIndexOffsets(_ r: inout ByteReader) throws -> [Int] {
        let strideAt = r.offset
        let stride = try r.varint("element index stride")
        guard stride == UInt64(elementIndexStride) else {
            throw r.error(.corrupt, "element index stride \(stride), expected \(elementIndexStride)", at: strideAt)
        }
        let m = try r.count("element index entry count", minSize: 1)
        var out: [Int] = []
        out.reserveCapacity(m)
        var offset = 0
        for _ in 0..<m {
            let at = r.offset
            let delta = try r.varint("element index offset")
            guard delta > 0, let d = Int(exactly: delta), d <= Int(UInt32.max) else {
                throw r.error(.corrupt, "element index offsets must increase", at: at)
            }
            offset += d
            out.append(offset)
        }
        return out
    }

    /// Normalized ranges as (gap, length) pairs ([SNAP-23]).
    static func decodeRanges(_ r: inout ByteReader) throws -> [PointRange] {
        let n = try r.count("erased range count", minSize: 2)
        var out: [PointRange] = []
        out.reserveCapacity(n)
        var previousEnd: UInt64 = 0
        for i in 0..<n {
            let at = r.offset
            let gap = try r.varint("range gap")
            let length = try r.varint("range length")
            let (from, o1) = previousEnd.addingReportingOverflow(gap)
            let (to, o2) = from.addingReportingOverflow(length)
            guard i == 0 || gap > 0, length > 0, !o1, !o2, to <= UInt64(UInt32.max) else {
                throw r.error(.corrupt, "erased range \(i) is empty, adjacent, or out of range", at: at)
            }
            out.append(PointRange(UInt32(from), UInt32(to)))
            previousEnd = to
        }
        return out
    }

    static func decodeTombstones(_ r: inout ByteReader) throws -> [Tombstone] {
        // id (9) + erasure count (1) + one erasure (10 + 1) + concurrent count (1).
        let n = try r.count("tombstone count", minSize: 22)
        var out: [Tombstone] = []
        out.reserveCapacity(n)
        // The previous id alone (`out.last` would copy the whole tombstone).
        var lastID: ElementID?
        for i in 0..<n {
            let at = r.offset
            do {
                let id = try ElementCodec.decodeOpID(&r)
                // [SNAP-25] Sorted by id, so unique.
                if let last = lastID, !(last < id) {
                    throw r.error(.corrupt, "tombstone \(id) not above the previous id", at: at)
                }
                let erasuresAt = r.offset
                let m = try r.count("erasure count", minSize: 11)
                guard m > 0 else { throw r.error(.corrupt, "tombstone without erasures", at: erasuresAt) }
                var erasures: [Erasure] = []
                erasures.reserveCapacity(m)
                for _ in 0..<m {
                    let eAt = r.offset
                    let ref = try ElementCodec.decodeOpRef(&r)
                    if let last = erasures.last, !(last.ref < ref) {
                        throw r.error(.corrupt, "erasures not strictly increasing", at: eAt)
                    }
                    erasures.append(Erasure(ref: ref, clock: try ElementCodec.decodeClock(&r)))
                }
                let concurrent = try decodeRefs(&r, "tombstone frontier")
                out.append(Tombstone(id: id, erasures: erasures, frontier: concurrent))
                lastID = id
            } catch var e as LnoteError {
                if e.index == nil { e.index = i }
                throw e
            }
        }
        return out
    }

    /// [SNAP-40] The erase-history section, read onto the state's tombstones and elements
    /// (which come first: tags increase). Checks [SNAP-41] and that erased tombstones keep no
    /// frontier in their record and restored ones have none.
    ///
    /// With `deferring` (the snapshot's source of deferred points), the kept records' point
    /// streams are stepped over and decoded on first use (`decodeElement(_:keeping:)`).
    static func decodeEraseHistory(_ r: inout ByteReader, into state: inout PageState,
                                   deferring: DeferredPoints? = nil, sums: Bool = true) throws {
        let countAt = r.offset
        let n = try r.count("tombstone count", minSize: 2)
        guard n == state.tombstones.count else {
            throw r.error(.corrupt, "erase history for \(n) tombstones, the tombstone section has \(state.tombstones.count)", at: countAt)
        }
        var kept = deferring.map { KeptPoints(source: $0) }
        // Each tombstone is changed in place (through the array's buffer, which the state
        // alone holds): no copy of a tombstone, or of the array, per history read.
        try state.tombstones.withUnsafeMutableBufferPointer { tombstones in
            for i in 0..<n {
                let at = r.offset
                do {
                    var erasures = tombstones[i].erasures
                    for k in erasures.indices {
                        let m = try r.count("restore count", minSize: 9)
                        guard m > 0 else { continue }
                        var by: [OpID] = []
                        by.reserveCapacity(m)
                        for _ in 0..<m {
                            let cAt = r.offset
                            let c = try ElementCodec.decodeOpID(&r)
                            if let last = by.last, !(last < c) { throw r.error(.corrupt, "restores not strictly increasing", at: cAt) }
                            by.append(c)
                        }
                        // Written before [MERGE-70] kept one restore a replica: every restore.
                        erasures[k].cancelledBy = Erasure.firstRestores(by)
                    }
                    tombstones[i].erasures = erasures
                    let isErased = tombstones[i].isErased
                    let flagAt = r.offset
                    switch try r.u8("record flag") {
                    case 0: break
                    case 1:
                        kept?.tombstone = i
                        let rec = try decodeElement(&r, keeping: &kept)
                        guard rec.id == tombstones[i].id, rec.frontier.isEmpty, isErased else {
                            throw r.error(.corrupt, "tombstone \(tombstones[i].id) keeps a record of \(rec.id), with a frontier, or while restored", at: flagAt)
                        }
                        if let problem = rec.z.value.validityProblem { throw r.error(.corrupt, "invalid z key: \(problem)", at: flagAt) }
                        tombstones[i].record = rec
                    default:
                        throw r.error(.corrupt, "record flag is neither 0 nor 1", at: flagAt)
                    }
                    if !isErased && !tombstones[i].frontier.isEmpty {
                        throw r.error(.corrupt, "restored tombstone \(tombstones[i].id) keeps a frontier", at: at)
                    }
                } catch var e as LnoteError {
                    if e.index == nil { e.index = i }
                    throw e
                }
            }
        }
        let m = try r.count("partially erased element count", minSize: 11)
        var previous: ElementID?
        // The lists by id (strictly increasing), found through an id table.
        var lists: [(id: ElementID, list: [RangeErasure])] = []
        lists.reserveCapacity(m)
        var rank = OpIDTable(minimumCapacity: m)
        for _ in 0..<m {
            let at = r.offset
            let id = try ElementCodec.decodeOpID(&r)
            if let previous, !(previous < id) { throw r.error(.corrupt, "partially erased elements not increasing by id", at: at) }
            previous = id
            let k = try r.count("partial erase count", minSize: 12)
            guard k > 0 else { throw r.error(.corrupt, "partially erased element \(id) without partial erases", at: at) }
            var list: [RangeErasure] = []
            list.reserveCapacity(k)
            for _ in 0..<k {
                let xAt = r.offset
                let ref = try ElementCodec.decodeOpRef(&r)
                if let last = list.last, !(last.ref < ref) { throw r.error(.corrupt, "partial erases not increasing by ref", at: xAt) }
                let ranges = try decodeRanges(&r)
                guard !ranges.isEmpty else { throw r.error(.corrupt, "partial erase \(ref) without ranges", at: xAt) }
                list.append(RangeErasure(ref: ref, ranges: ranges))
            }
            rank.set(id, Int32(lists.count))
            lists.append((id, list))
        }
        let end = r.offset
        if let kept { kept.source.setKept(kept.streams) }
        guard m > 0 else { return }
        // Each entry names a stroke this state holds.
        var attached = [Bool](repeating: false, count: m)
        let clock = state.clock
        func attach(_ rec: inout ElementRecord) throws {
            // A stroke with erased ranges and no entry is of a page read from a format-2 snapshot
            // before restores, installed from a checkpoint ([MERGE-30]): its partial erases are unknown.
            guard let j = rank[rec.id].map(Int.init), !attached[j] else { return }
            attached[j] = true
            rec.rangeErasures = lists[j].list
            if let problem = PageSnapshot.rangeErasureProblem(rec, clock: clock, sums: sums) { throw r.error(.corrupt, "element \(rec.id): \(problem)", at: end) }
        }
        for i in state.elements.indices where rank.contains(state.elements[i].id) { try attach(&state.elements[i]) }
        try state.tombstones.withUnsafeMutableBufferPointer { tombstones in
            // Looked up by id first, the record matched without a copy.
            for i in tombstones.indices where rank.contains(tombstones[i].id) {
                guard case .some = tombstones[i].record else { continue }
                try attach(&tombstones[i].record!)
            }
        }
        if let j = attached.firstIndex(of: false) {
            throw r.error(.corrupt, "partial erases of \(lists[j].id), which is neither live nor kept by a tombstone", at: end)
        }
    }

    /// [SNAP-44] The range restores of each stroke that has some, by element id, attached to
    /// its record (live or kept by a tombstone, with partial erases); then every record with
    /// partial erases is checked: its erased ranges are what those and its restores leave.
    static func decodeRangeRestores(_ r: inout ByteReader, into state: inout PageState) throws {
        // id (9) + count (1) + one restore: ref (10), ranges (3), seen count (1), one OpID (9).
        let mAt = r.offset
        let m = try r.count("restored element count", minSize: 33)
        guard m > 0 else { throw r.error(.corrupt, "range-restore section that holds no restore", at: mAt) }
        var previous: ElementID?
        var lists: [(id: ElementID, list: [RangeRestore])] = []
        lists.reserveCapacity(m)
        var rank = OpIDTable(minimumCapacity: m)
        for _ in 0..<m {
            let at = r.offset
            let id = try ElementCodec.decodeOpID(&r)
            if let previous, !(previous < id) { throw r.error(.corrupt, "restored elements not increasing by id", at: at) }
            previous = id
            let k = try r.count("range restore count", minSize: 23)
            guard k > 0 else { throw r.error(.corrupt, "restored element \(id) without range restores", at: at) }
            var list: [RangeRestore] = []
            list.reserveCapacity(k)
            for _ in 0..<k {
                let xAt = r.offset
                let ref = try ElementCodec.decodeOpRef(&r)
                if let last = list.last, !(last.ref < ref) { throw r.error(.corrupt, "range restores not increasing by ref", at: xAt) }
                let rangesAt = r.offset
                let ranges = try decodeRanges(&r)
                guard !ranges.isEmpty else { throw r.error(.corrupt, "range restore \(ref) without ranges", at: rangesAt) }
                let sAt = r.offset
                let s = try r.count("seen partial erase count", minSize: 9)
                guard s > 0 else { throw r.error(.corrupt, "range restore \(ref) names no partial erase", at: sAt) }
                var seen: [OpID] = []
                seen.reserveCapacity(s)
                for _ in 0..<s {
                    let oAt = r.offset
                    let o = try ElementCodec.decodeOpID(&r)
                    if let last = seen.last, !(last.replica < o.replica) {
                        throw r.error(.corrupt, "partial erases a range restore names not increasing by replica", at: oAt)
                    }
                    seen.append(o)
                }
                list.append(RangeRestore(ref: ref, ranges: ranges, seen: seen))
            }
            rank.set(id, Int32(lists.count))
            lists.append((id, list))
        }
        let end = r.offset
        var attached = [Bool](repeating: false, count: m)
        let clock = state.clock
        func check(_ rec: inout ElementRecord) throws {
            if let j = rank[rec.id].map(Int.init), !attached[j] {
                attached[j] = true
                rec.rangeRestores = lists[j].list
            }
            guard !rec.rangeErasures.isEmpty || !rec.rangeRestores.isEmpty else { return }
            if let problem = PageSnapshot.rangeErasureProblem(rec, clock: clock) { throw r.error(.corrupt, "element \(rec.id): \(problem)", at: end) }
        }
        for i in state.elements.indices { try check(&state.elements[i]) }
        try state.tombstones.withUnsafeMutableBufferPointer { tombstones in
            for i in tombstones.indices {
                guard case .some = tombstones[i].record else { continue }
                try check(&tombstones[i].record!)
            }
        }
        if let j = attached.firstIndex(of: false) {
            throw r.error(.corrupt, "range restores of \(lists[j].id), which is neither live nor kept by a tombstone", at: end)
        }
    }

    /// `counter + offset`, or an impossible value past every page's greatest timestamp.
    private static func runEnd(_ counter: UInt64, _ offset: UInt64) -> UInt64 {
        let (v, overflow) = counter.addingReportingOverflow(offset)
        return overflow ? .max : v
    }

    static func decodeContexts(_ r: inout ByteReader, clock: VectorClock, maxLamport: UInt64) throws -> [ReplicaContext] {
        let n = try r.count("context count", minSize: 12)
        var out: [ReplicaContext] = []
        out.reserveCapacity(n)
        for i in 0..<n {
            do {
                let at = r.offset
                let replica = try r.u64("context replica")
                // [SNAP-26] Non-zero, strictly increasing.
                guard replica != 0, out.last.map({ $0.replica.rawValue < replica }) ?? true else {
                    throw LnoteError(.corrupt, "context replica zero or not increasing", path: r.path, offset: at, index: i)
                }
                let rid = ReplicaID(replica)
                let c = try ElementCodec.decodeClock(&r)
                // [SNAP-26] The clock of the replica's latest operation: within the page clock, and
                // naming that operation.
                guard clock.covers(c), c[rid] == clock[rid], c[rid] > 0 else {
                    throw LnoteError(.corrupt, "context of \(rid) is not the clock of its latest operation", path: r.path, offset: at, index: i)
                }
                let runsAt = r.offset
                let m = try r.count("lamport run count", minSize: 2)
                var runs: [LamportRun] = []
                runs.reserveCapacity(m)
                var from: UInt64 = 0
                for _ in 0..<m {
                    let runAt = r.offset
                    let delta = try r.varint("lamport run start")
                    let offset = try r.varint("lamport offset")
                    let (next, overflow) = from.addingReportingOverflow(delta)
                    // [SNAP-26] Runs start at 1, strictly increasing, within the replica's
                    // counters, each changing the offset.
                    guard !overflow, delta > 0, runs.isEmpty ? next == 1 : true, next <= c[rid],
                          runs.last?.offset != offset else {
                        throw LnoteError(.corrupt, "lamport runs of \(rid) malformed", path: r.path, offset: runAt, index: i)
                    }
                    // [SNAP-26] Running maxima: the previous run ends at or below the page's greatest
                    // timestamp, and this one does not start below where it ended.
                    if let prev = runs.last {
                        guard runEnd(next - 1, prev.offset) <= maxLamport, offset &+ 1 >= prev.offset else {
                            throw LnoteError(.corrupt, "lamport runs of \(rid) decrease or exceed the greatest Lamport timestamp \(maxLamport)",
                                             path: r.path, offset: runAt, index: i)
                        }
                    }
                    from = next
                    runs.append(LamportRun(from: from, offset: offset))
                }
                guard let lastRun = runs.last else {
                    throw LnoteError(.corrupt, "no lamport runs for \(rid)", path: r.path, offset: runsAt, index: i)
                }
                guard runEnd(c[rid], lastRun.offset) <= maxLamport else {
                    throw LnoteError(.corrupt, "lamport runs of \(rid) exceed the greatest Lamport timestamp \(maxLamport)",
                                     path: r.path, offset: runsAt, index: i)
                }
                out.append(ReplicaContext(replica: rid, clock: c, lamports: runs))
            } catch var e as LnoteError {
                // A field that does not read names its record too, as elements' and tombstones' do.
                if e.index == nil { e.index = i }
                throw e
            }
        }
        // [SNAP-26] One context for each replica of the page clock.
        guard out.map(\.replica) == clock.replicas else {
            throw LnoteError(.corrupt, "contexts name \(out.count) replicas, the clock \(clock.entries.count)", path: r.path, offset: r.offset)
        }
        return out
    }
}
