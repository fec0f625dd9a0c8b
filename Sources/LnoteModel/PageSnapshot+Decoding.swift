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
        let computed = CRC32C.checksum(bytes, 0..<crcAt)
        guard stored == computed else {
            throw failure(.corrupt, "snapshot CRC mismatch (stored \(hex32(stored)), computed \(hex32(computed)))", at: crcAt)
        }

        // [SNAP-7] [SNAP-8] Version and flags.
        guard versionField != 0 else { throw failure(.corrupt, "snapshot version 0", at: 8) }
        guard versionField <= version else {
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
            var seen: Set<Section> = []
            var lastTag: UInt16 = 0
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
                switch known {
                case .page:
                    state.clock = try ElementCodec.decodeClock(&s)
                    state.maxLamport = try s.varint("max lamport")
                    state.modified = try s.svarint("modified")
                case .elements:
                    state.elements = try decodeElements(&s)
                case .tombstones:
                    state.tombstones = try decodeTombstones(&s)
                case .contexts:
                    state.contexts = try decodeContexts(&s)
                }
                try s.expectEnd("section \(hex32(UInt32(tag)))")
            }
            // [SNAP-12] Every version-1 section is present.
            for s in Section.allCases where !seen.contains(s) {
                throw r.error(.corrupt, "section \(s) is missing", at: crcAt)
            }
            // [SNAP-24] No id is both live and erased.
            var live = Set<OpID>()
            for e in state.elements { live.insert(e.id) }
            for (i, t) in state.tombstones.enumerated() where live.contains(t.id) {
                throw LnoteError(.corrupt, "tombstone \(t.id) is also a live element", path: path, offset: crcAt, index: i)
            }
            return Contents(state: state, coveredLogOffset: coveredLogOffset, logIncarnation: logIncarnation)
        } catch var e as LnoteError where e.code == .truncated || e.code == .limitExceeded {
            // Inside a file whose length and CRC are right, a structure that runs past its
            // section, or a count its section cannot hold, is corruption, not a cut file.
            e.code = .corrupt
            throw e
        }
    }

    /// A count of items each at least `minSize` bytes long: `corrupt` if they cannot fit.
    static func count(_ r: inout ByteReader, _ what: String, minSize: Int) throws -> Int {
        let at = r.offset
        let v = try r.varint(what)
        guard let n = Int(exactly: v), n <= r.remaining / minSize else {
            throw r.error(.corrupt, "\(what) \(v) cannot fit in the \(r.remaining) bytes left", at: at)
        }
        return n
    }

    /// Refs strictly increasing ([SNAP-21]).
    static func decodeRefs(_ r: inout ByteReader, _ what: String) throws -> [OpRef] {
        let n = try count(&r, "\(what) count", minSize: 10)
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

    static func decodeElements(_ r: inout ByteReader) throws -> [ElementRecord] {
        // An element takes at least 9 (id) + 1 + 1 (lamport, wall time) + 3 + 1 (transform
        // and frontier) + 2 + 1 (z and frontier) + 1 + 1 (erased, erase frontier) + 8 (an
        // empty stroke): 28 bytes.
        let n = try count(&r, "element count", minSize: 28)
        var out: [ElementRecord] = []
        out.reserveCapacity(n)
        var ids = Set<OpID>()
        for i in 0..<n {
            let at = r.offset
            do {
                let id = try ElementCodec.decodeOpID(&r)
                let lamport = try r.varint("lamport")
                let wallTime = try r.svarint("wall time")
                let transform = try ElementCodec.decodeTransform(&r)
                let transformFrontier = try decodeRefs(&r, "transform frontier")
                let z = try ElementCodec.decodeZKey(&r)
                let zFrontier = try decodeRefs(&r, "z frontier")
                let erased = try decodeRanges(&r)
                let eraseFrontier = try decodeRefs(&r, "erase frontier")
                let content = try ElementCodec.decodeContent(&r)
                let e = ElementRecord(id: id, lamport: lamport, wallTime: wallTime, content: content,
                                      transform: LWWRegister(transform, frontier: transformFrontier),
                                      z: LWWRegister(z, frontier: zFrontier),
                                      erased: erased, frontier: eraseFrontier)
                // [SNAP-20] Canonical z order, [SNAP-22] unique ids.
                if let last = out.last, !ElementRecord.canonicalLess(last, e) {
                    throw r.error(.corrupt, "element \(id) is not above the previous one in z order", at: at)
                }
                guard ids.insert(id).inserted else { throw r.error(.corrupt, "duplicate element id \(id)", at: at) }
                out.append(e)
            } catch var e as LnoteError {
                if e.index == nil { e.index = i }
                throw e
            }
        }
        return out
    }

    /// Normalized ranges as (gap, length) pairs ([SNAP-23]).
    static func decodeRanges(_ r: inout ByteReader) throws -> [PointRange] {
        let n = try count(&r, "erased range count", minSize: 2)
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
        let n = try count(&r, "tombstone count", minSize: 22)
        var out: [Tombstone] = []
        out.reserveCapacity(n)
        for i in 0..<n {
            let at = r.offset
            do {
                let id = try ElementCodec.decodeOpID(&r)
                // [SNAP-25] Sorted by id, so unique.
                if let last = out.last, !(last.id < id) {
                    throw r.error(.corrupt, "tombstone \(id) not above the previous id", at: at)
                }
                let erasuresAt = r.offset
                let m = try count(&r, "erasure count", minSize: 11)
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
            } catch var e as LnoteError {
                if e.index == nil { e.index = i }
                throw e
            }
        }
        return out
    }

    static func decodeContexts(_ r: inout ByteReader) throws -> [ReplicaContext] {
        let n = try count(&r, "context count", minSize: 9)
        var out: [ReplicaContext] = []
        out.reserveCapacity(n)
        for i in 0..<n {
            let at = r.offset
            let replica = try r.u64("context replica")
            // [SNAP-26] Non-zero, strictly increasing.
            guard replica != 0, out.last.map({ $0.replica.rawValue < replica }) ?? true else {
                throw LnoteError(.corrupt, "context replica zero or not increasing", path: r.path, offset: at, index: i)
            }
            out.append(ReplicaContext(replica: ReplicaID(replica), clock: try ElementCodec.decodeClock(&r)))
        }
        return out
    }
}
