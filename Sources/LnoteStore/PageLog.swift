#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import LnoteModel

/// Which log a file is: a page's element operations or a document's page list and title.
public enum LogKind: UInt8, Sendable, CustomStringConvertible {
    case page = 1
    case document = 2
    public var description: String { self == .page ? "page" : "document" }
}

/// The fixed 40-byte header of a log file ([PKG-30]).
///
/// | Offset | Size | Description |
/// |---|---|---|
/// | 0 | 8 | magic `LNOTELOG` (ASCII) |
/// | 8 | 2 | format version, u16 LE: 1, or 2 for a page log that starts with an anchor ([PKG-110]) |
/// | 10 | 1 | kind: 1 page, 2 document |
/// | 11 | 1 | flags: 0 |
/// | 12 | 16 | owner UUID (page or document), RFC 4122 byte order |
/// | 28 | 8 | incarnation, u64 LE, random, never 0 |
/// | 36 | 4 | CRC-32C of bytes 0..<36, u32 LE |
public struct LogHeader: Hashable, Sendable {
    public static let magic: [UInt8] = Array("LNOTELOG".utf8)
    public static let size = 40
    /// The newest version this build reads. Version 2 ([PKG-110]) is a page log whose first
    /// frame may be an anchor (`LogAnchor`), after which its writer's strokes may be in log
    /// form; lnote writes it for every page log it creates with an anchor, and version 1
    /// for the others, which older lnote reads.
    public static let currentVersion: UInt16 = 2

    public var version: UInt16
    public var kind: LogKind
    public var owner: UUID
    /// Chosen at random when the file is created (or rewritten by salvage): offsets recorded
    /// by a snapshot are meaningful only for the incarnation it names.
    public var incarnation: UInt64

    public init(kind: LogKind, owner: UUID, incarnation: UInt64 = LogHeader.randomIncarnation(), version: UInt16 = 1) {
        self.version = version
        self.kind = kind
        self.owner = owner
        self.incarnation = incarnation
    }

    public static func randomIncarnation() -> UInt64 {
        var g = SystemRandomNumberGenerator()
        return UInt64.random(in: 1...UInt64.max, using: &g)
    }

    public var encoded: [UInt8] {
        var w = ByteWriter(capacity: LogHeader.size)
        w.append(LogHeader.magic)
        w.u16(version)
        w.u8(kind.rawValue)
        w.u8(0)
        w.append(owner.bytes)
        w.u64(incarnation)
        let crc = w.bytes.withUnsafeBytes { CRC32C.update(0, $0) }
        w.u32(crc)
        return w.bytes
    }

    /// Decodes the first 40 bytes of `bytes`.
    /// - Throws: `truncated` (fewer than 40 bytes), `corrupt` (magic, CRC, kind, flags),
    ///   `unsupportedVersion` (a newer format: the file is left alone).
    public static func decode(_ bytes: [UInt8], path: String? = nil) throws -> LogHeader {
        guard bytes.count >= size else {
            throw LnoteError(.truncated, "log header needs \(size) bytes, file has \(bytes.count)", path: path, offset: 0)
        }
        guard Array(bytes[0..<8]) == magic else {
            throw LnoteError(.corrupt, "bad log magic", path: path, offset: 0)
        }
        var r = ByteReader(bytes, range: 0..<size, path: path)
        _ = try r.bytes(8)
        let version = try r.u16("version")
        let kindByte = try r.u8("kind")
        let flags = try r.u8("flags")
        let owner = UUID(bytes: try r.bytes(16, "owner"))!
        let incarnation = try r.u64("incarnation")
        let stored = try r.u32("header CRC")
        let crc = bytes.withUnsafeBytes { CRC32C.update(0, UnsafeRawBufferPointer(rebasing: $0[0..<36])) }
        guard crc == stored else {
            throw LnoteError(.corrupt, "log header CRC mismatch", path: path, offset: 36)
        }
        guard version <= currentVersion, version >= 1 else {
            throw LnoteError(version == 0 ? .corrupt : .unsupportedVersion,
                             "log format version \(version) (this build reads 1 and 2)", path: path, offset: 8)
        }
        guard let kind = LogKind(rawValue: kindByte), flags == 0, incarnation != 0 else {
            throw LnoteError(.corrupt, "bad log kind, flags or incarnation", path: path, offset: 10)
        }
        return LogHeader(kind: kind, owner: owner, incarnation: incarnation, version: version)
    }

    /// The anchor of a version-2 page log ([PKG-110]): the frame at offset 40 when it is a
    /// valid anchor; nil in a version-1 log, a document log, or when there is none. `bytes`
    /// are the file's bytes from offset 40 (at least what an anchor frame takes, when the file
    /// has them).
    public func anchor(in bytes: [UInt8]) -> LogAnchor? {
        guard version >= 2, kind == .page, case .frame(let f, _) = Frame.scan(bytes, at: 0) else { return nil }
        return LogAnchor.parse(f)
    }
}

/// A frame read from a log, with where it starts in the file.
///
/// A log-form frame ([LOG-33]) is read as the `addStroke3` frame it stands for: `frame` is
/// then longer than the bytes the file holds (`size`), and `payloadBase` says where the file
/// offsets of the payload's bytes are, for error reports.
public struct LoggedFrame: Hashable, Sendable {
    public var frame: Frame
    /// Absolute file offset of the frame's first byte.
    public var offset: UInt64
    /// The frame's bytes in the file (header included).
    public var size: Int
    /// The file offset that byte 0 of `frame.payload` stands for: for a frame as written,
    /// just past its type byte; for an expanded log-form frame, that minus the bytes its
    /// header gained, so that every field after the wall time reports its offset in the file.
    public var payloadBase: Int
    /// File offset just past the frame.
    public var end: UInt64 { offset + UInt64(size) }
    public init(frame: Frame, offset: UInt64) {
        self.frame = frame
        self.offset = offset
        self.size = frame.encodedSize
        self.payloadBase = Int(offset) + Frame.headerSize + 1
    }
    /// The same frame copied to `offset` (a salvage's rewrite).
    func moved(to offset: UInt64) -> LoggedFrame {
        var f = self
        f.payloadBase += Int(offset) - Int(self.offset)
        f.offset = offset
        return f
    }
    /// A log-form frame of `size` bytes at `offset`, expanded to `frame`, whose header
    /// gained `shift` bytes.
    public init(expanded frame: Frame, offset: UInt64, size: Int, shift: Int) {
        self.frame = frame
        self.offset = offset
        self.size = size
        self.payloadBase = Int(offset) + Frame.headerSize + 1 - shift
    }
}

/// How a group of appends shares one `fdatasync` ([PKG-35]).
///
/// Appends that arrive within `maxDelay` of the first unsynced one (or until `maxFrames`
/// frames are waiting) are written immediately, in order, and made durable by one
/// `fdatasync`; each call still returns only after that sync succeeded. The delay bounds
/// the latency added to one edit; the frame count bounds what one sync carries.
public struct GroupCommit: Hashable, Sendable {
    public var maxDelay: Duration
    public var maxFrames: Int
    public init(maxDelay: Duration = .milliseconds(5), maxFrames: Int = 64) {
        self.maxDelay = maxDelay
        self.maxFrames = max(1, maxFrames)
    }
}

/// An append-only log file: `pages/<page-uuid>.log` or `document.log` ([PKG-30]...[PKG-39]).
///
/// The file is a 40-byte `LogHeader` followed by frames (`Frame`, specified in
/// `Protocol/operation-log.md`). It is never rewritten in normal operation: compaction
/// writes a snapshot that records the offset it covers. The one rewrite is salvage after
/// corruption (see `PageLog+Recovery.swift`), which chooses a new incarnation.
///
/// Several processes may hold the same log open ([PKG-61]): appends and every other change
/// happen only under the document lock ([PKG-82], [PKG-84]); a holder notices what others
/// appended, or that the file was replaced, with `catchUp` ([PKG-87]).
///
/// Not thread-safe: one owner (a `Document` actor) uses it.
final class PageLog {
    let path: String
    let io: Syscalls
    private(set) var header: LogHeader
    /// Offset just past the last good frame this object read or wrote: where the next
    /// append goes (once `catchUp` under the lock found nothing past it).
    private(set) var end: UInt64
    private var fd: FileDescriptor?
    /// The inode of the open file: a different one at `path` means the log was replaced
    /// (salvage or a fork repair by another process, [PKG-87]).
    private(set) var inode: UInt64 = 0
    /// True while no file exists at `path` (a page with no files yet): nothing to read; a
    /// writer creates it under the lock (`catchUp(underLock: true)`).
    private(set) var isAbsent = false
    private var isClosed = false
    /// A failed write may have left bytes past `end`: truncate before the next append.
    private var needsTruncate = false
    /// Frames written since the last successful sync.
    private(set) var unsyncedFrames = 0
    /// True when `catchUp` read frames another process wrote since this log was last synced
    /// here: that process may not have synced them yet (group commit, or a batch it is still
    /// writing), so `sync()` syncs before they are served or covered by a snapshot.
    private(set) var othersUnsynced = false
    /// Set when a sync failed: the kernel may have dropped the dirty pages, so nothing
    /// written since the last good sync can be trusted. Reopen to recover from disk, unless
    /// `cutAfterFailedSync` removed this process's unsynced frames ([PKG-36]).
    private(set) var poisoned: LnoteError?
    /// Where this process's first frame not yet synced starts (nil when all it wrote is
    /// synced): what a failed sync cuts ([PKG-36]).
    private(set) var ownUnsyncedStart: UInt64?
    /// True when frames of another process were read past `ownUnsyncedStart` (it appended
    /// while a group commit of this process waited): cutting this process's frames would cut
    /// theirs too, so a failed sync cannot be undone ([PKG-36]).
    private(set) var othersAfterOwnUnsynced = false
    /// Set when a salvage could not be written for lack of space or a read-only file system
    /// ([PKG-38], [PKG-24]): the file is the damaged one, left as it is, and this object holds
    /// the valid frames the salvage would keep (at their offsets in that file). Reads are served
    /// from them; writes are refused; the holder of the lock retries the salvage first
    /// (`catchUp(underLock: true)` reports `.damaged` while this is set).
    var pendingSalvage: PendingSalvage?
    /// Set when the file had to be opened read-only because it may not be written (read-only
    /// media, a backup without write permission; EROFS, EACCES, EPERM): its frames are read
    /// as usual, and every write is refused with this cause (`readOnlyRefusal`), before
    /// anything is written.
    private(set) var readOnly: LnoteError?

    /// What a salvage that could not be written left in memory.
    struct PendingSalvage {
        var frames: [LoggedFrame]
        /// Why the salvage could not be written (ENOSPC, EDQUOT, EROFS).
        var cause: LnoteError
    }

    var kind: LogKind { header.kind }
    var incarnation: UInt64 { header.incarnation }
    var isOpen: Bool { fd != nil }
    /// The log's anchor ([PKG-110]): its writer's `addStroke3` frames are written in log form
    /// ([LOG-33]). Nil for a version-1 or document log.
    private(set) var anchor: LogAnchor?
    /// The replica and wall time that a log this object creates (absent until a write) is
    /// anchored with; nil: no anchor.
    var anchorForCreation: (() -> LogAnchor?)?
    /// Where this object last wrote a copy of the anchor ([PKG-111]); nil: not yet.
    private var lastAnchorWritten: UInt64?
    /// A copy of the anchor goes before the first log-form frame this object writes, and again
    /// once this many bytes follow the last one it wrote.
    static let anchorCopySpacing: UInt64 = 64 << 10

    /// The frames of one write as this log holds them ([PKG-111], [LOG-33]): each of the
    /// anchor's writer's `addStroke3` frames in log form, and a copy of the anchor before the
    /// first of them when one is due (`anchorCopySpacing`): a bit flipped in the anchor then
    /// costs no frame of this opening's, a damaged sector at most 64 KiB of them.
    /// Returns the frames to write and the index in them of each frame given.
    func written(_ frames: [[UInt8]]) -> (frames: [[UInt8]], indices: [Int]) {
        guard let anchor else { return (frames, Array(frames.indices)) }
        var out: [[UInt8]] = []
        out.reserveCapacity(frames.count + 1)
        var indices: [Int] = []
        indices.reserveCapacity(frames.count)
        var at = end
        for f in frames {
            if let logForm = anchor.logForm(f) {
                if lastAnchorWritten.map({ at - $0 >= PageLog.anchorCopySpacing }) ?? true {
                    out.append(anchor.frame)
                    lastAnchorWritten = at
                    at += UInt64(anchor.frame.count)
                }
                indices.append(out.count)
                out.append(logForm)
                at += UInt64(logForm.count)
            } else {
                indices.append(out.count)
                out.append(f)
                at += UInt64(f.count)
            }
        }
        return (out, indices)
    }

    init(path: String, io: Syscalls, header: LogHeader, anchor: LogAnchor?, end: UInt64, fd: FileDescriptor,
         readOnly: LnoteError? = nil) {
        self.path = path
        self.io = io
        self.header = header
        self.anchor = anchor
        self.end = end
        self.fd = fd
        self.readOnly = readOnly
        self.inode = (try? io.fstat(fd).inode) ?? 0
        // Frames read from the file may be another process's, not synced yet.
        self.othersUnsynced = end > UInt64(LogHeader.size + (anchor?.frame.count ?? 0))
    }

    /// A log whose file does not exist (yet): empty, incarnation 0 (no snapshot names it).
    init(absent path: String, kind: LogKind, owner: UUID, io: Syscalls) {
        self.path = path
        self.io = io
        self.header = LogHeader(kind: kind, owner: owner, incarnation: 0)
        self.end = UInt64(LogHeader.size)
        self.isAbsent = true
    }

    deinit {
        if let fd, fd.isOpen {
            assertionFailure("PageLog \(path) was not closed")
            try? fd.close()
        }
    }

    // MARK: - Other processes ([PKG-84], [PKG-87])

    /// What `catchUp` found past `end`.
    enum Growth {
        /// Nothing new.
        case unchanged
        /// Whole valid frames appended by someone else; `end` moved past them (unless the call
        /// said not to commit: then `advance(to:)` does).
        case grew([LoggedFrame])
        /// The file at `path` is not the one this object has open (rewritten by a salvage or a
        /// fork repair, deleted, created since this object found none), or it is shorter than
        /// `end` (frames read earlier were rolled back by their writer, who never acknowledged
        /// them): what this process holds of the log must be read again from the files.
        case replaced
        /// Bytes past `end` that are not frames, followed by valid frames: damage, which only a
        /// holder of the lock may salvage ([PKG-38]).
        case damaged
    }

    /// Reads what the file gained past `end`: only the new bytes ([PKG-87]).
    ///
    /// - Parameters:
    ///   - underLock: the caller holds the document lock, so nobody else is writing. A partial
    ///     frame at the end is then a dead writer's torn tail and is cut ([PKG-37]), and an
    ///     absent file is created. Without the lock a partial frame may be an append in
    ///     progress: it is left alone and not read.
    ///   - commit: move `end` past the frames returned (false: the caller decides with
    ///     `advance(to:)`).
    func catchUp(underLock: Bool, commit: Bool = true) throws -> Growth {
        if isClosed { throw LnoteError(.invalidState, "log is closed", path: path) }
        if isAbsent, try io.stat(path) != nil {
            // Another process created it since ([PKG-84]: under the lock, by a durable replace,
            // so its header is whole): its frames are growth from the header on. A header
            // that is not this log's is a replacement: the caller reads the files again.
            let (fresh, cause) = try PageLog.openFile(path, io: io)
            guard let head = try? LogHeader.decode(try io.pread(fresh, count: LogHeader.size, at: 0), path: path),
                  head.kind == kind, head.owner == header.owner else {
                try? fresh.close()
                return .replaced
            }
            // Its frames, the anchor's included (the scan passes over it), are growth. A damaged
            // anchor is read again from the files, where the lock holder salvages it.
            let anchor: LogAnchor?
            do {
                anchor = try PageLog.readAnchor(fresh, header: head, size: try io.fstat(fresh).size, io: io, path: path)
            } catch {
                try? fresh.close()
                return .replaced
            }
            try adopt(PageLog(path: path, io: io, header: head, anchor: anchor, end: UInt64(LogHeader.size), fd: fresh,
                              readOnly: cause))
        }
        if isAbsent {
            guard underLock else { return .unchanged }
            let made = try PageLog.create(path: path, kind: kind, owner: header.owner, anchor: anchorForCreation?(), io: io)
            let fresh = try io.open(path, O_RDWR)
            let created = PageLog(path: path, io: io, header: made.header, anchor: made.anchor, end: made.end, fd: fresh)
            try adopt(created)
            return .unchanged
        }
        let fd = try descriptor()
        if pendingSalvage != nil {
            // The damaged file, read whole when this object was made: any change to it is
            // another process's salvage (or a salvage of it) and means reading it again.
            let st = try io.fstat(fd)
            guard let onPath = try io.stat(path), onPath.inode == st.inode, onPath.device == st.device,
                  st.size == end else { return .replaced }
            return underLock ? .damaged : .unchanged
        }
        if needsTruncate {
            // This process's own failed write left bytes past `end`: never read them as frames.
            guard underLock, readOnly == nil else { return .unchanged }
            try io.ftruncate(fd, to: end)
            needsTruncate = false
        }
        let st = try io.fstat(fd)
        guard let onPath = try io.stat(path), onPath.inode == st.inode, onPath.device == st.device else { return .replaced }
        if st.size < end { return .replaced }
        if st.size == end { return .unchanged }
        let scan = LogScanner.scan(try io.pread(fd, count: Int(st.size - end), at: end), base: end, anchor: anchor)
        if !scan.damage.isEmpty || scan.tailIsCompleteBadFrame {
            // Only whole frames written before the damage are safe to take now; the holder of
            // the lock salvages the rest (a reader leaves it to one).
            return .damaged
        }
        if let tail = scan.tornTail, underLock, readOnly == nil {
            try io.ftruncate(fd, to: tail.lowerBound)
            try io.fdatasync(fd)
            cutTails.append((tail.lowerBound, Int(tail.upperBound - tail.lowerBound)))
        }
        if commit {
            end = scan.goodEnd
            if !scan.frames.isEmpty {
                othersUnsynced = true
                if ownUnsyncedStart != nil { othersAfterOwnUnsynced = true }
            }
        }
        return scan.frames.isEmpty ? .unchanged : .grew(scan.frames)
    }

    /// Moves `end` to `offset`, a frame boundary past it that `catchUp(commit: false)` found.
    func advance(to offset: UInt64) {
        precondition(offset >= end)
        if offset > end {
            othersUnsynced = true
            if ownUnsyncedStart != nil { othersAfterOwnUnsynced = true }
        }
        end = offset
    }

    /// Torn tails of dead writers cut by `catchUp` under the lock (offset, bytes), for the
    /// caller's recovery report; cleared by `takeCutTails()`.
    private var cutTails: [(UInt64, Int)] = []

    func takeCutTails() -> [(offset: UInt64, bytes: Int)] {
        defer { cutTails = [] }
        return cutTails.map { ($0.0, $0.1) }
    }

    /// Creates a new empty log durably (temp file, fsync, rename, directory fsync): a page
    /// log given an anchor is a version-2 log that starts with it ([PKG-110]).
    /// - Returns: its header, anchor and end (where the first frame goes).
    /// - Throws: `alreadyExists` if a file is already there.
    @discardableResult
    static func create(path: String, kind: LogKind, owner: UUID, anchor: LogAnchor?, io: Syscalls) throws
        -> (header: LogHeader, anchor: LogAnchor?, end: UInt64) {
        if try io.stat(path) != nil {
            throw LnoteError(.alreadyExists, "log already exists", path: path)
        }
        let start = LogStart(kind: kind, owner: owner, anchor: anchor)
        try DurableFile.replace(path, with: start.bytes, io: io)
        return (start.header, start.anchor, UInt64(start.bytes.count))
    }

    /// The anchor of the log open on `fd` under `header` ([PKG-110]), read from offset 40.
    /// - Throws: `corrupt` at offset 40 for a version-2 page log with bytes after its header
    ///   that do not start with a valid anchor ([PKG-112]): its log-form frames cannot be
    ///   read, so its bytes are damage, to be salvaged with a copy of the anchor if there is
    ///   one, never a torn tail to cut.
    /// `size`: the file's, which every caller has already asked for.
    static func readAnchor(_ fd: FileDescriptor, header: LogHeader, size: UInt64, io: Syscalls, path: String) throws -> LogAnchor? {
        guard header.version >= 2, header.kind == .page else { return nil }
        guard size > UInt64(LogHeader.size) else { return nil }
        let count = Int(min(size - UInt64(LogHeader.size), UInt64(LogAnchor.maxFrameSize)))
        guard let anchor = header.anchor(in: try io.pread(fd, count: count, at: UInt64(LogHeader.size))) else {
            throw PageLog.damagedAnchor(path: path)
        }
        return anchor
    }

    /// The damage of a version-2 page log whose first frame is not a valid anchor ([PKG-112]).
    static func damagedAnchor(path: String) -> LnoteError {
        LnoteError(.corrupt, "the log's anchor (the frame after its header) is damaged: the strokes written in log form "
                   + "are read only with a valid copy of it", path: path, offset: LogHeader.size, index: 0)
    }

    /// Opens a log file to read and append, or only to read when it may not be written
    /// (EROFS, EACCES, EPERM: read-only media, a backup without write permission), with that
    /// cause: a reader of such a folder reads it as any other, a writer is refused at its first
    /// write (`readOnlyRefusal`).
    static func openFile(_ path: String, io: Syscalls) throws -> (FileDescriptor, readOnly: LnoteError?) {
        do {
            return (try io.open(path, O_RDWR), nil)
        } catch let e as LnoteError where e.isReadOnly {
            return (try io.open(path, O_RDONLY), e)
        }
    }

    /// The error every write gets on a log opened read-only: its reason is the system's
    /// (the errno stays in `underlying`, so `isReadOnly` holds for it).
    static func readOnlyRefusal(path: String, cause: LnoteError) -> LnoteError {
        LnoteError(.io, "this notebook's files may not be written: nothing was written; "
                   + "copy the folder to a writable place to edit it or sync into it",
                   path: path, underlying: cause.underlying ?? cause.message)
    }

    private func descriptor() throws -> FileDescriptor {
        if let poisoned { throw LnoteError(.invalidState, "log unusable after a failed sync: \(poisoned)", path: path) }
        guard let fd else {
            throw LnoteError(.invalidState, isAbsent && !isClosed ? "log file not created yet" : "log is closed", path: path)
        }
        return fd
    }

    /// Appends frames and makes them durable (write + `fdatasync`) before returning ([PKG-34]).
    func append(_ frames: [Frame]) throws {
        _ = try write(frames)
        try sync()
    }

    /// Writes frames after the last good frame without syncing. Returns the new end offset.
    @discardableResult
    func write(_ frames: [Frame]) throws -> UInt64 {
        try write(encoded: frames.map(\.encoded))
    }

    /// Writes encoded frames (each one frame's bytes, CRC included: `Frame.encoded`,
    /// `OperationCodec.encode`) after the last good frame, in one `pwrite`, without syncing.
    /// Returns the new end offset. On failure the file is truncated back to the previous end
    /// (or that is retried before the next write), so a failed append never leaves a partial
    /// frame in the middle.
    @discardableResult
    func write(encoded frames: [[UInt8]]) throws -> UInt64 {
        let fd = try descriptor()
        if let pending = pendingSalvage { throw pending.refusal(path: path) }
        guard !frames.isEmpty else { return end }
        if let readOnly { throw PageLog.readOnlyRefusal(path: path, cause: readOnly) }
        // [LOG-26] A frame longer than a reader accepts would read back as damage and hide
        // every frame after it: refused before anything is written.
        for (i, f) in frames.enumerated() where !Frame.fits(encodedCount: f.count) {
            throw LnoteError(.limitExceeded, "an operation encodes to a frame of \(f.count - Frame.headerSize) bytes after its CRC; "
                             + "a frame holds at most \(Frame.maxLength) (16 MiB): not written", path: path, index: i)
        }
        if needsTruncate {
            try io.ftruncate(fd, to: end)
            needsTruncate = false
        }
        var bytes = frames.count == 1 ? frames[0] : []
        if frames.count > 1 {
            // One copy per frame (Array(frames.joined()) copies byte by byte).
            bytes.reserveCapacity(frames.reduce(0) { $0 + $1.count })
            for f in frames { bytes.append(contentsOf: f) }
        }
        let start = end
        do {
            try io.pwrite(fd, bytes, at: end)
        } catch {
            needsTruncate = true
            if (try? io.ftruncate(fd, to: end)) != nil { needsTruncate = false }
            throw error
        }
        end += UInt64(bytes.count)
        // Operations: a copy of the anchor ([PKG-111]) is not one.
        unsyncedFrames += anchor.map { a in frames.reduce(0) { $0 + ($1 == a.frame ? 0 : 1) } } ?? frames.count
        if ownUnsyncedStart == nil { ownUnsyncedStart = start }
        return end
    }

    /// Forgets the frames written since `offset` (not yet synced): the file is truncated back
    /// to it, or that is retried before the next write. For a batch written in pieces whose
    /// later piece failed, so that none of it is left.
    func rollBack(to offset: UInt64) {
        guard let fd, offset >= UInt64(LogHeader.size), offset < end else { return }
        end = offset
        if let copy = lastAnchorWritten, copy >= offset { lastAnchorWritten = nil }  // the copy went with them
        if let own = ownUnsyncedStart, offset <= own {
            ownUnsyncedStart = nil
            othersAfterOwnUnsynced = false
            unsyncedFrames = 0
        }
        needsTruncate = (try? io.ftruncate(fd, to: offset)) == nil
    }

    /// Starts writing back the bytes written since `offset` without waiting (a hint for
    /// big appends: the disk works while more frames are encoded, and the `sync` that makes
    /// them durable has less left to write). A failure poisons the log, as a failed sync does.
    func startWriteback(from offset: UInt64) throws {
        let fd = try descriptor()
        guard offset < end else { return }
        do {
            try io.startWriteback(fd, offset: offset, count: Int(end - offset))
        } catch let e as LnoteError {
            poisoned = e
            throw e
        }
    }

    /// Makes every written frame durable. A failure poisons the log ([PKG-36]); the holder of
    /// the document lock then calls `cutAfterFailedSync` so that the failure it reports means
    /// the frames are not in the log.
    func sync() throws {
        if isAbsent && !isClosed { return }
        let fd = try descriptor()
        if pendingSalvage != nil { return }  // nothing written; the damaged file stays as it is
        if readOnly != nil {
            // Nothing written here, and nothing may be; another process (one that may write)
            // may have appended what this one serves: synced as usual, a read-only file
            // system's refusal to sync being no failure (it holds nothing unwritten).
            guard unsyncedFrames > 0 || othersUnsynced else { return }
            do {
                try io.fdatasync(fd)
            } catch let e as LnoteError where e.isReadOnly {
            } catch let e as LnoteError {
                poisoned = e
                throw e
            }
            othersUnsynced = false
            return
        }
        guard unsyncedFrames > 0 || othersUnsynced else { return }
        do {
            try io.fdatasync(fd)  // the file's data, whoever wrote it
        } catch let e as LnoteError {
            poisoned = e
            throw e
        }
        unsyncedFrames = 0
        othersUnsynced = false
        ownUnsyncedStart = nil
        othersAfterOwnUnsynced = false
    }

    /// Notes that the log's frames up to `offset` of incarnation `incarnation` are durable
    /// without syncing them here: a snapshot (or `document.json`) covering them exists, and
    /// its writer synced the log before writing it ([PKG-41], [PKG-44]). When that is every
    /// frame this object holds and nothing of this process waits for a sync, `sync()` has
    /// nothing left to do. Any other case (another incarnation, frames past `offset`, this
    /// process's own frames in flight, a poisoned log) leaves the log as it was.
    func noteDurable(through offset: UInt64, incarnation: UInt64) {
        guard incarnation == header.incarnation, offset == end, unsyncedFrames == 0, ownUnsyncedStart == nil,
              poisoned == nil, pendingSalvage == nil, !needsTruncate else { return }
        othersUnsynced = false
    }

    /// What `cutAfterFailedSync` did.
    enum FailedSyncOutcome: Equatable {
        /// This process's unsynced frames were cut: the file ends at `offset` again, and the
        /// log is usable (`durable`: the truncation was synced too).
        case cut(frames: Int, offset: UInt64, durable: Bool)
        /// Nothing of this process was waiting: the failed sync covered only frames read from
        /// another process, which are never cut.
        case nothingOwn
        /// The frames could not be cut (another process appended after them, the file was
        /// replaced, or the truncation failed): the log stays poisoned and what a reopening
        /// reads of them is unknown, as after a power cut. `reason` says why.
        case kept(reason: String)
    }

    /// After a failed `sync`, under the document lock: truncates the file back to where this
    /// process's unsynced frames begin ([PKG-36]), so that the failure reported to their
    /// writers is definite. Frames other processes wrote before them (`othersUnsynced`) are
    /// never cut: their writers synced them or never acknowledged them. The truncation is
    /// then synced; if that fails the cut stays (every reader now sees the shorter file) but
    /// the log stays poisoned.
    func cutAfterFailedSync() -> FailedSyncOutcome {
        guard poisoned != nil, let fd else { return .kept(reason: "the log is not poisoned or not open") }
        guard let start = ownUnsyncedStart else { return .nothingOwn }
        guard !othersAfterOwnUnsynced else {
            return .kept(reason: "another process appended after this process's unsynced frames")
        }
        do {
            let st = try io.fstat(fd)
            guard let onPath = try io.stat(path), onPath.inode == st.inode, onPath.device == st.device else {
                return .kept(reason: "the log file was replaced")
            }
            if st.size > end {
                // Bytes past `end` are a failed write of this process's (not yet truncated) or
                // frames another process appended since the lock was last released here.
                let past = LogScanner.scan(try io.pread(fd, count: Int(st.size - end), at: end), base: end, anchor: anchor)
                guard past.frames.isEmpty else { return .kept(reason: "another process appended after this process's unsynced frames") }
            } else if st.size < end {
                return .kept(reason: "the log is shorter than this process wrote")
            }
            try io.ftruncate(fd, to: start)
        } catch {
            return .kept(reason: "the truncation failed: \(error)")
        }
        let frames = unsyncedFrames
        end = start
        if let copy = lastAnchorWritten, copy >= start { lastAnchorWritten = nil }
        needsTruncate = false
        unsyncedFrames = 0
        ownUnsyncedStart = nil
        othersAfterOwnUnsynced = false
        do {
            try io.fdatasync(fd)
        } catch {
            return .cut(frames: frames, offset: start, durable: false)
        }
        // Frames read from other processes before ours keep `othersUnsynced`: the next sync
        // syncs them again before they are served or covered by a snapshot.
        poisoned = nil
        return .cut(frames: frames, offset: start, durable: true)
    }

    /// Reads the frames in `[from, end)`. Offsets before `end` were validated when written
    /// or when the log was opened; a damaged frame found here throws `corrupt` (call
    /// `recover` to salvage).
    func readFrames(from: UInt64) throws -> [LoggedFrame] {
        if isAbsent && !isClosed && from == UInt64(LogHeader.size) { return [] }
        let fd = try descriptor()
        guard from >= UInt64(LogHeader.size), from <= end else {
            throw LnoteError(.invalidArgument, "offset \(from) outside the log (end \(end))", path: path,
                             offset: Int(clamping: from))
        }
        if let pending = pendingSalvage { return pending.frames.filter { $0.offset >= from } }
        let bytes = try io.pread(fd, count: Int(end - from), at: from)
        let scan = LogScanner.scan(bytes, base: from, anchor: anchor)
        if let d = scan.damage.first {
            throw LnoteError(.corrupt, d.reason, path: path, offset: Int(d.range.lowerBound), index: d.frameIndex)
        }
        if let t = scan.tornTail {
            throw LnoteError(.corrupt, "frame cut off before the known end", path: path, offset: Int(t.lowerBound),
                             index: scan.frames.count)
        }
        return scan.frames
    }

    /// The one frame that starts at `offset` (a frame boundary found by an earlier read).
    /// - Throws: `corrupt` when no valid frame starts there.
    func readFrame(at offset: UInt64) throws -> Frame {
        let fd = try descriptor()
        if let pending = pendingSalvage {
            guard let f = pending.frames.first(where: { $0.offset == offset }) else {
                throw LnoteError(.corrupt, "no frame at offset \(offset)", path: path, offset: Int(clamping: offset))
            }
            return f.frame
        }
        guard offset >= UInt64(LogHeader.size), offset + UInt64(Frame.headerSize) < end else {
            throw LnoteError(.invalidArgument, "offset \(offset) outside the log (end \(end))", path: path, offset: Int(clamping: offset))
        }
        let head = try io.pread(fd, count: 4, at: offset)
        let length = UInt64(head[0]) | UInt64(head[1]) << 8 | UInt64(head[2]) << 16 | UInt64(head[3]) << 24
        let size = UInt64(Frame.headerSize) + length
        guard length >= 1, offset + size <= end else {
            throw LnoteError(.corrupt, "no frame at offset \(offset)", path: path, offset: Int(offset))
        }
        let bytes = try io.pread(fd, count: Int(size), at: offset)
        guard case .frame(let f, _) = Frame.scan(bytes, at: 0, chain: anchor?.chainSeed) else {
            throw LnoteError(.corrupt, "frame at offset \(offset) fails its check", path: path, offset: Int(offset))
        }
        if let anchor, f.type == LogAnchor.logFormAddStroke3, let (expanded, _) = anchor.expand(f.payload) { return expanded }
        return f
    }

    /// Syncs what is pending and closes the file. Safe to call once; later calls throw.
    func close() throws {
        guard !isClosed else { throw LnoteError(.invalidState, "log closed twice", path: path) }
        isClosed = true
        guard let fd else { return }  // absent: nothing open
        var failure: Error?
        if poisoned == nil && unsyncedFrames > 0 {
            do { try sync() } catch { failure = error }
        }
        self.fd = nil
        do { try fd.close() } catch { failure = failure ?? error }
        if let failure { throw failure }
    }

    /// Takes over another log object's descriptor and state (after a salvage rewrite
    /// replaced the file this one had open).
    func adopt(_ other: PageLog) throws {
        precondition(other.path == path)
        let old = fd
        fd = other.fd
        other.fd = nil
        other.isClosed = true
        header = other.header
        anchor = other.anchor
        lastAnchorWritten = nil
        end = other.end
        inode = other.inode
        isAbsent = false
        needsTruncate = false
        unsyncedFrames = 0
        othersUnsynced = other.othersUnsynced
        ownUnsyncedStart = nil
        othersAfterOwnUnsynced = false
        pendingSalvage = other.pendingSalvage
        readOnly = other.readOnly
        poisoned = nil
        if let old, old.isOpen { try old.close() }
    }

    /// Gives the descriptor to recovery code.
    func withDescriptor<T>(_ body: (FileDescriptor) throws -> T) throws -> T {
        try body(try descriptor())
    }
}

extension PageLog.PendingSalvage {
    /// The error a write gets while the salvage waits ([PKG-24]).
    func refusal(path: String) -> LnoteError {
        if cause.isReadOnly { return PageLog.readOnlyRefusal(path: path, cause: cause) }
        return LnoteError(.io, "this log is damaged and its salvage could not be written (\(cause.message)): "
                          + "nothing is written to it until the salvage can be; free space and try again",
                          path: path, underlying: cause.underlying)
    }
}

/// What a scan of log bytes found (pure: no I/O).
struct LogScan: Sendable {
    /// The frames, in file order; after `leading`'s when a listing scan read a run of plain
    /// adds first (`LogScanner.scanListing`).
    var frames: [LoggedFrame] = []
    /// The leading plain adds a listing scan read where they lie ([LOG-28]); empty otherwise.
    var leading = PlainRun()
    /// Bytes in the middle that are not frames, each followed by a valid frame.
    var damage: [Damage] = []
    /// Bytes at the end in which no valid frame starts: an interrupted append.
    var tornTail: Range<UInt64>?
    /// Why the tail is not a frame (kept for reports).
    var tornTailReason: String?
    /// True when the torn tail holds a complete frame extent whose CRC fails: damage to
    /// a frame that had been written whole, not a cut-off append.
    var tailIsCompleteBadFrame = false
    /// End of the last valid frame (where the next append goes).
    var goodEnd: UInt64
    /// Where the anchor and its copies that the scan passed over end ([PKG-110]): frame
    /// boundaries too, though no operation is listed there.
    var anchorEnds: [UInt64] = []

    /// Whether `offset` is where a frame the scan found, or the anchor or a copy, starts or ends.
    func isBoundary(_ offset: UInt64) -> Bool {
        anchorEnds.contains(offset) || frames.contains { $0.end == offset || $0.offset == offset }
            || leading.spans.contains { $0.offset == offset || $0.offset + UInt64($0.size) == offset }
    }

    /// How many frames the scan found: `leading`'s and `frames`.
    var frameCount: Int { leading.count + frames.count }
    /// Bytes the searches after damage ran through the CRC (`FrameSearch.bytesHashed`).
    var searchBytesHashed = 0

    struct Damage: Sendable, Hashable {
        var range: Range<UInt64>
        var reason: String
        /// Index (0-based, among the frames of this scan) the damaged frame would have had.
        var frameIndex: Int
    }
}

/// Splits log bytes into valid frames, damaged ranges and a torn tail ([PKG-37]).
package enum LogScanner {
    /// Scans `bytes`, whose first byte is at file offset `base`.
    ///
    /// A position that does not hold a valid frame starts a bad range; the scanner looks
    /// for the next position, byte by byte, where a valid frame starts (`FrameSearch`, at a
    /// bounded cost per position whatever the lengths the bytes announce). If
    /// there is one, the range up to it is damage and scanning resumes there; if not, the
    /// rest of the bytes is a torn tail.
    /// `expecting`: how many frames the caller counted from their lengths (room reserved).
    /// `anchor`: the log's anchor ([PKG-110]), whose frames are not listed (they are no
    /// operations) and against which log-form frames are checked and expanded ([LOG-33]).
    /// `start`: where in `bytes` to begin (a listing scan's run ends there); damage indexes
    /// count from it.
    static func scan(_ bytes: [UInt8], base: UInt64, anchor: LogAnchor?, expecting: Int = 0, from start: Int = 0) -> LogScan {
        var out = LogScan(goodEnd: base + UInt64(start))
        out.frames.reserveCapacity(expecting)
        var pos = start
        let chain = anchor?.chainSeed
        var search = FrameSearch(bytes, chain: chain)
        while true {
            let result = Frame.check(bytes, at: pos, chain: chain)
            switch result {
            case .valid(let r):
                let offset = base + UInt64(pos)
                let type = bytes[pos + Frame.headerSize]
                if isAnchor(bytes, r, type: type, anchor) {
                    // The anchor itself (or a copy of it): no operation.
                    out.anchorEnds.append(base + UInt64(r.upperBound))
                } else {
                    out.frames.append(loggedFrame(bytes, r, type: type, offset: offset, anchor: anchor))
                }
                pos = r.upperBound
                out.goodEnd = base + UInt64(pos)
            case .end:
                out.searchBytesHashed = search.bytesHashed
                return out
            case .truncated(let p), .corrupt(let p, _):
                let reason: String
                if case .corrupt(_, let why) = result { reason = why } else { reason = "frame extends past the end of the file" }
                if let next = search.next(after: p) {
                    out.damage.append(.init(range: base + UInt64(p)..<base + UInt64(next), reason: reason,
                                            frameIndex: out.frames.count))
                    pos = next
                } else {
                    out.tornTail = base + UInt64(p)..<base + UInt64(bytes.count)
                    out.tornTailReason = reason
                    if case .corrupt = result, completeExtent(bytes, at: p) { out.tailIsCompleteBadFrame = true }
                    out.searchBytesHashed = search.bytesHashed
                    return out
                }
            }
        }
    }

    /// Whether the valid frame at `r` (type `type`) is the anchor or a copy of it ([PKG-110]).
    @inline(__always)
    static func isAnchor(_ bytes: [UInt8], _ r: Range<Int>, type: UInt8, _ anchor: LogAnchor?) -> Bool {
        guard let anchor, type == LogAnchor.type, r.count == anchor.frame.count else { return false }
        return bytes[r].elementsEqual(anchor.frame)
    }

    /// The valid frame at `r` of `bytes` (type `type`, at file offset `offset`), not the
    /// anchor: a log-form frame expanded under `anchor` ([LOG-33]), every other frame as it
    /// is (a log-form frame that does not expand is refused by the operation decoder as an
    /// unknown type, [LOG-13]).
    static func loggedFrame(_ bytes: [UInt8], _ r: Range<Int>, type: UInt8, offset: UInt64, anchor: LogAnchor?) -> LoggedFrame {
        let payload = (r.lowerBound + Frame.headerSize + 1)..<r.upperBound
        if let anchor, type == LogAnchor.logFormAddStroke3, let (frame, shift) = anchor.expand(bytes, payload: payload) {
            return LoggedFrame(expanded: frame, offset: offset, size: r.count, shift: shift)
        }
        return LoggedFrame(frame: Frame(type: type, payload: Array(bytes[payload])), offset: offset)
    }

    /// Scans a whole log file's bytes after its header, with the anchor the header and the
    /// first frame give ([PKG-110]; none when the header does not decode).
    static func scanFile(_ bytes: [UInt8], path: String? = nil) -> LogScan {
        let rest = Array(bytes.dropFirst(LogHeader.size))
        let anchor = (try? LogHeader.decode(bytes, path: path))?.anchor(in: rest)
        return scan(rest, base: UInt64(LogHeader.size), anchor: anchor)
    }

    /// True when the length field at `p` is in range and the frame it announces fits in
    /// the bytes: the frame was written whole and its content changed since.
    static func completeExtent(_ bytes: [UInt8], at p: Int) -> Bool {
        guard bytes.count - p >= Frame.headerSize + 1 else { return false }
        let length = Int(UInt32(bytes[p]) | UInt32(bytes[p + 1]) << 8 | UInt32(bytes[p + 2]) << 16 | UInt32(bytes[p + 3]) << 24)
        return length >= 1 && length <= Frame.maxLength && p + Frame.headerSize + length <= bytes.count
    }
}

/// The first bytes of a new log: its header and, for a page log given one, its anchor
/// ([PKG-110]; the header is then version 2).
struct LogStart {
    let header: LogHeader
    let anchor: LogAnchor?
    let bytes: [UInt8]

    init(kind: LogKind, owner: UUID, anchor: LogAnchor?) {
        let anchor = kind == .page ? anchor : nil
        header = LogHeader(kind: kind, owner: owner, version: anchor == nil ? 1 : 2)
        self.anchor = anchor
        bytes = header.encoded + (anchor?.frame ?? [])
    }
}

/// A whole log file read at once, as a reader of the folder reads it (tools, tests, another
/// implementation's checks): its header, its anchor ([PKG-110]) and its frames in file order,
/// log-form frames expanded to the `addStroke3` frames they stand for ([LOG-33]).
public struct LogFileContents: Sendable {
    public var header: LogHeader
    public var anchor: LogAnchor?
    public var frames: [LoggedFrame]

    /// - Throws: the header's error (`corrupt`, `truncated`, `unsupportedVersion`), or
    ///   `corrupt` / `truncated` naming the offset of the first bytes after the header that
    ///   are not a valid frame.
    public init(_ bytes: [UInt8], path: String? = nil) throws {
        header = try LogHeader.decode(bytes, path: path)
        let rest = Array(bytes.dropFirst(LogHeader.size))
        anchor = header.anchor(in: rest)
        let scan = LogScanner.scan(rest, base: UInt64(LogHeader.size), anchor: anchor)
        if let d = scan.damage.first {
            throw LnoteError(.corrupt, d.reason, path: path, offset: Int(d.range.lowerBound), index: d.frameIndex)
        }
        if let t = scan.tornTail {
            throw LnoteError(scan.tailIsCompleteBadFrame ? .corrupt : .truncated, scan.tornTailReason ?? "frame cut off",
                             path: path, offset: Int(t.lowerBound), index: scan.frames.count)
        }
        frames = scan.frames
    }
}
