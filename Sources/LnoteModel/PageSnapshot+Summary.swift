import Foundation

extension PageSnapshot {
    /// What a library or a manifest needs from a snapshot, read from the first bytes of the
    /// file without decoding its elements (`Protocol/page-snapshot.md` §4.6, "Summary read").
    public struct Summary: Hashable, Sendable {
        public var page: PageID
        public var coveredLogOffset: UInt64
        public var logIncarnation: UInt64
        /// The `length` field: the file's size as its writer recorded it.
        public var length: UInt64
        /// `n` of the elements section: live elements.
        public var elementCount: Int
        /// `modified` of the page section: greatest author wall time, ms since 1970.
        public var modified: Int64

        public init(page: PageID, coveredLogOffset: UInt64, logIncarnation: UInt64, length: UInt64,
                    elementCount: Int, modified: Int64) {
            self.page = page
            self.coveredLogOffset = coveredLogOffset
            self.logIncarnation = logIncarnation
            self.length = length
            self.elementCount = elementCount
            self.modified = modified
        }
    }

    /// How many bytes a reader should read first for `summary(prefix:path:)`: the header,
    /// a page section whose clock has up to about 200 replicas, and the element count.
    public static let summaryReadSize = 4096

    /// Reads the element count and the modification time of a snapshot from a prefix of
    /// its file: the 52-byte header, the page section (tag `0x0001`) and the first varint
    /// of the elements section (tag `0x0002`), which [SNAP-10] and [SNAP-12] place first
    /// and second in every version-1 file.
    ///
    /// This is a cache read, not a validation: it CANNOT check the whole-file CRC
    /// ([SNAP-6]), the later sections, or that the file is as long as its `length` field
    /// says, so a file damaged after these bytes gives a summary here and fails `decode`.
    /// It checks everything it reads: the magic, `length` ≥ 56, no bytes past `length`,
    /// the version and incompatible flags (a damaged version field therefore reads as
    /// `unsupportedVersion` here, where `decode` would say `corrupt` after the CRC), the
    /// two section headers against `length`, the page section consumed exactly, and the
    /// element count against its section's size (28 bytes at least each, as `decode`).
    /// Nothing is allocated from a count it reads except the clock's entries, which are
    /// capped by the bytes of the page section present in `prefix`.
    ///
    /// - Parameters:
    ///   - prefix: the first bytes of the file (any number; the whole file works too).
    ///   - path: named in errors.
    /// - Returns: the summary.
    /// - Throws: `LnoteError` with an offset: `truncated` (at `prefix.count`) when `prefix`
    ///   ends before the bytes the summary needs — read more, unless `prefix` is the whole
    ///   file; `corrupt` for a value that cannot be right whatever follows (bad magic,
    ///   a section header that does not fit in `length`, a count its section cannot hold);
    ///   `unsupportedVersion` for a newer version or an unknown incompatible flag.
    public static func summary(prefix bytes: [UInt8], path: String? = nil) throws -> Summary {
        func failure(_ code: LnoteError.Code, _ message: String, at offset: Int) -> LnoteError {
            LnoteError(code, message, path: path, offset: offset)
        }
        let n = bytes.count
        func need(_ end: Int, _ what: String) throws {
            guard end <= n else { throw failure(.truncated, "\(what) is past the \(n) bytes read", at: n) }
        }

        // [SNAP-3] Magic, [SNAP-4] the fixed fields.
        for i in 0..<min(n, magic.count) where bytes[i] != magic[i] {
            throw failure(.corrupt, "not a page snapshot (bad magic)", at: i)
        }
        try need(headerSize, "snapshot header")
        var header = ByteReader(bytes, range: 8..<headerSize, path: path)
        let versionField = try header.u16()
        let flags = try header.u16()
        let declared = try header.u64()
        // [SNAP-5] as far as a prefix can tell.
        let minimum = headerSize + trailerSize
        guard declared >= UInt64(minimum) else {
            throw failure(.corrupt, "snapshot length \(declared) is below the minimum \(minimum)", at: 12)
        }
        guard UInt64(n) <= declared else {
            throw failure(.corrupt, "\(UInt64(n) - declared) unexpected bytes after the snapshot", at: Int(declared))
        }
        // `declared` ≥ n here, and n fits in Int; a larger `declared` (cut file) is capped.
        let sectionsEnd = Int(exactly: declared - UInt64(trailerSize)) ?? Int.max
        // [SNAP-7] [SNAP-8] Version and flags (no CRC to tell damage from a newer file).
        guard versionField != 0 else { throw failure(.corrupt, "snapshot version 0", at: 8) }
        guard versionField <= version else {
            throw failure(.unsupportedVersion, "snapshot format version \(versionField) is newer than \(version)", at: 8)
        }
        guard flags & incompatibleFlags == 0 else {
            throw failure(.unsupportedVersion, "snapshot uses unknown flags \(hex32(UInt32(flags)))", at: 10)
        }
        let page = PageID(UUID(bytes: try header.bytes(16, "page id"))!)
        let coveredLogOffset = try header.u64("covered log offset")
        let logIncarnation = try header.u64("log incarnation")

        /// The body range of the section whose header is at `at`, which must have `tag`.
        func section(at: Int, _ tag: Section) throws -> Range<Int> {
            guard at <= sectionsEnd - sectionHeaderSize else {
                throw failure(.corrupt, "\(tag) section header cut off by the end of the sections", at: at)
            }
            try need(at + sectionHeaderSize, "\(tag) section header")
            var r = ByteReader(bytes, range: at..<at + sectionHeaderSize, path: path)
            let found = try r.u16("section tag")
            guard found == tag.rawValue else {
                throw failure(.corrupt, "section \(hex32(UInt32(found))) where the \(tag) section must be", at: at)
            }
            let size = try r.u32("section length")
            let bodyStart = at + sectionHeaderSize
            guard let count = Int(exactly: size), count <= sectionsEnd - bodyStart else {
                throw failure(.corrupt, "\(tag) section length \(size) exceeds the \(sectionsEnd - bodyStart) bytes left",
                              at: at + 2)
            }
            return bodyStart..<bodyStart + count
        }

        // [SNAP-13] The page section, whole.
        let pageBody = try section(at: headerSize, .page)
        try need(pageBody.upperBound, "page section")
        var s = ByteReader(bytes, range: pageBody, path: path)
        let modified: Int64
        do {
            _ = try ElementCodec.decodeClock(&s)
            _ = try s.varint("max lamport")
            modified = try s.svarint("modified")
            try s.expectEnd("page section")
        } catch var e as LnoteError where e.code == .truncated || e.code == .limitExceeded {
            // [SNAP-27] The section is all here: running past it is corruption.
            e.code = .corrupt
            throw e
        }

        // [SNAP-14] The elements section's count.
        let elementsBody = try section(at: pageBody.upperBound, .elements)
        var c = ByteReader(bytes, range: elementsBody.lowerBound..<min(elementsBody.upperBound, n), path: path)
        let countAt = c.offset
        let v: UInt64
        do {
            v = try c.varint("element count")
        } catch let e as LnoteError where e.code == .truncated {
            try need(elementsBody.upperBound, "element count")
            var m = e
            m.code = .corrupt
            throw m
        }
        let left = elementsBody.upperBound - c.offset
        // [SNAP-31] 28 bytes per version-1 record, 7 per version-2 or -3 record ([SNAP-34]),
        // 5 per version-4 record ([SNAP-43]).
        let minimumRecord = minimumRecordBytes(version: versionField)
        guard let count = Int(exactly: v), count <= left / minimumRecord else {
            throw failure(.corrupt, "element count \(v) cannot fit in the \(left) bytes left", at: countAt)
        }
        return Summary(page: page, coveredLogOffset: coveredLogOffset, logIncarnation: logIncarnation,
                       length: declared, elementCount: count, modified: modified)
    }
}
