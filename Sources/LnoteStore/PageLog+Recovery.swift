#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import LnoteModel

/// What opening (or salvaging) a log found and did. Never silent: every discarded byte
/// is accounted for here.
public struct RecoveryReport: Sendable, CustomStringConvertible {
    /// The log file.
    public var path: String
    /// An interrupted append that was cut off: where it started and how many bytes were
    /// discarded (the file was truncated to `offset`). Expected after a crash.
    public var tornTail: (offset: UInt64, bytes: Int)?
    /// Damage: each a `corrupt` (or `truncated`) error with path, offset and frame index.
    public var problems: [LnoteError] = []
    /// Where the damaged file was preserved before it was rewritten.
    public var quarantinedCopy: String?
    /// Valid frames kept by a salvage rewrite (all of them, before and after the damage).
    public var salvagedFrames = 0
    /// Bytes not kept by a salvage rewrite (damaged ranges and header).
    public var droppedBytes = 0
    /// The incarnation chosen by a salvage rewrite (snapshot offsets no longer apply).
    public var newIncarnation: UInt64?
    /// Valid frames whose operation did not decode (not applied); filled by the replayer.
    public var undecodable: [LnoteError] = []
    /// The operation ids that the headers of those frames name (when they name one), and
    /// those of operations the engine refused: operations this log holds but this reader
    /// cannot apply (damage, a type of a newer version, an operation refused). [PKG-56]
    public var undecodableOperations: [OpID] = []
    /// For a snapshot set aside because it does not pair with its log ([PKG-47]): the
    /// operations its state held that the state rebuilt from the log lacks, by replica
    /// (`counter range` of each), and how many of them this replica made.
    public var lostOperations: [(replica: ReplicaID, counters: ClosedRange<UInt64>)] = []
    public var lostOwnOperations = 0
    /// Set when `lostOwnOperations` made this folder mint a new replica id, so that its next
    /// edits do not reuse the lost operations' ids ([PKG-56]).
    public var mintedReplica: ReplicaChange?
    /// Set when the salvage could not be written (a full disk, a read-only file system,
    /// [PKG-24]): the damaged file is left as it is, `salvagedFrames` valid frames were read
    /// from it, and writes to the log wait until the salvage is made. The cause.
    public var salvagePending: LnoteError?

    public init(path: String) { self.path = path }

    /// Records what a set-aside snapshot (`snapshot`, its clock) held that the state rebuilt
    /// from the log (`rebuilt`) lacks, and says so in the report's problem.
    mutating func noteLostOperations(snapshot: VectorClock, rebuilt: VectorClock, replica: ReplicaID) {
        lostOperations = snapshot.entries.compactMap { e in
            e.counter > rebuilt[e.replica] ? (e.replica, (rebuilt[e.replica] + 1)...e.counter) : nil
        }
        lostOwnOperations = lostOperations.first { $0.replica == replica }?.counters.count ?? 0
        let total = lostOperations.reduce(0) { $0 + $1.counters.count }
        guard total > 0, !problems.isEmpty else { return }
        var m = "; \(total) operation\(total == 1 ? "" : "s") only the snapshot held \(total == 1 ? "is" : "are") gone here"
        m += " (sync brings back those a peer has)"
        if lostOwnOperations > 0 {
            m += ", \(lostOwnOperations) of them this replica's own: sync before editing, or their ids are used again"
        }
        problems[problems.count - 1].message += m
    }

    /// True when nothing was found: no torn tail, no damage, nothing undecodable.
    public var isClean: Bool { tornTail == nil && problems.isEmpty && undecodable.isEmpty }
    /// True when bytes that had been written whole were lost or rewritten.
    public var hasDamage: Bool { !problems.isEmpty || !undecodable.isEmpty }

    public var description: String {
        var parts: [String] = []
        if let t = tornTail { parts.append("torn tail of \(t.bytes) bytes at offset \(t.offset) discarded") }
        for p in problems { parts.append(p.description) }
        if let q = quarantinedCopy { parts.append("damaged file preserved as \(q)") }
        if newIncarnation != nil { parts.append("rewritten with \(salvagedFrames) valid frames (\(droppedBytes) bytes dropped)") }
        if let p = salvagePending {
            parts.append("salvage pending (\(p.message)\(p.underlying.map { " [\($0)]" } ?? "")): \(salvagedFrames) valid frames read from "
                         + "the damaged file, left as it is; writes to it wait until the salvage can be written")
        }
        for u in undecodable { parts.append(u.description) }
        if let m = mintedReplica { parts.append("new \(m)") }
        return parts.isEmpty ? "\(path): clean" : "\(path): " + parts.joined(separator: "; ")
    }
}

/// The result of opening a log: the frames to replay and what recovery did.
struct LogReplay {
    /// Frames from `start` to the end, in file order.
    var frames: [LoggedFrame]
    /// Where replay started: the snapshot's offset when usable, else just after the header.
    var start: UInt64
    /// True when `start` is not the offset the caller asked for (incarnation changed,
    /// salvage, offset out of range): the caller must replay from an empty or snapshot
    /// state through `receive`, which skips operations it already has.
    var fromBeginning: Bool
    var report: RecoveryReport
    /// Set when the offset the caller asked for names this log's incarnation but is not a
    /// frame boundary of it: past the end of the file, inside a frame or damage. The snapshot
    /// that recorded it does not describe a prefix of this log (the log was cut or replaced
    /// after it was written), so it must not be used with it ([PKG-47]). `logEnd` is the end
    /// of the log's last whole frame.
    var unpairedOffset: (offset: UInt64, logEnd: UInt64)?
}

extension PageLog {
    /// Opens a log, recovering from a torn tail or damage, and returns the frames to replay.
    ///
    /// - Parameters:
    ///   - from: the offset a snapshot covers; used only when `incarnation` matches the file's.
    ///   - create: create an empty log when the file does not exist.
    /// - Throws: `notFound`, `unsupportedVersion` (a newer file, left untouched), `corrupt`
    ///   when the header is valid but names another owner or kind, `io`.
    ///   - anchor: the anchor of a page log this creates ([PKG-110]).
    static func open(path: String, kind: LogKind, owner: UUID, from: UInt64? = nil, incarnation: UInt64? = nil,
                     create: Bool, anchor creating: LogAnchor? = nil, io: Syscalls) throws -> (PageLog, LogReplay) {
        if try io.stat(path) == nil {
            guard create else { throw LnoteError(.notFound, "no log", path: path) }
            try PageLog.create(path: path, kind: kind, owner: owner, anchor: creating, io: io)
        }
        let (fd, readOnly) = try PageLog.openFile(path, io: io)
        var handedOver = false
        defer { if !handedOver { try? fd.close() } }
        let size = try io.fstat(fd).size
        let headerBytes = try io.pread(fd, count: LogHeader.size, at: 0)
        var report = RecoveryReport(path: path)

        let header: LogHeader
        do {
            header = try LogHeader.decode(headerBytes, path: path)
        } catch let e as LnoteError where e.code == .corrupt || e.code == .truncated {
            // The header cannot be trusted: salvage whatever frames the file holds.
            report.problems.append(e)
            try fd.close()
            handedOver = true
            return try salvage(path: path, kind: kind, owner: owner, headerValid: false, report: report, io: io, readOnly: readOnly)
        }
        guard header.kind == kind, header.owner == owner else {
            throw LnoteError(.corrupt, "log header names \(header.kind) \(header.owner.uuidString), expected \(kind) \(owner.uuidString)",
                             path: path, offset: 10)
        }

        let anchor: LogAnchor?
        do {
            anchor = try PageLog.readAnchor(fd, header: header, size: size, io: io, path: path)
        } catch let e as LnoteError where e.code == .corrupt {
            // [PKG-112] Never a torn tail: salvaged whole, with a copy of the anchor if any
            // (the salvage reports the damage).
            try fd.close()
            handedOver = true
            return try salvage(path: path, kind: kind, owner: owner, headerValid: true, report: report, io: io, readOnly: readOnly)
        }
        var start = UInt64(LogHeader.size)
        // [PKG-47] An offset of this incarnation past the end of the file: the log lost what
        // the snapshot covers.
        var unpaired: (offset: UInt64, logEnd: UInt64)?
        if let from, incarnation == header.incarnation, from >= start {
            if from <= size { start = from } else { unpaired = (from, size) }
        }
        var scan = LogScanner.scan(try io.pread(fd, count: Int(size - start), at: start), base: start, anchor: anchor)
        if start > UInt64(LogHeader.size) && (!scan.damage.isEmpty || scan.tailIsCompleteBadFrame || scan.tornTail != nil) {
            // Anything but whole frames from a snapshot's offset: decide on the whole file
            // before cutting or rewriting anything (the offset itself may be what is wrong:
            // cut inside a frame, it would make a valid last frame look like a torn tail).
            let fromOffset = scan
            let offset = start
            start = UInt64(LogHeader.size)
            scan = LogScanner.scan(try io.pread(fd, count: Int(size - start), at: start), base: start, anchor: anchor)
            // Where a valid frame starts or ends is a frame boundary (damage may lie before it;
            // the anchor's and its copies' ends are too).
            if !scan.isBoundary(offset) {
                unpaired = (offset, scan.goodEnd)
            } else if scan.damage.isEmpty && !scan.tailIsCompleteBadFrame {
                // The offset ends a frame and only a torn tail follows: replay from it.
                start = offset
                scan = fromOffset
            }
        }
        if !scan.damage.isEmpty || scan.tailIsCompleteBadFrame {
            try fd.close()
            handedOver = true
            var (log, replay) = try salvage(path: path, kind: kind, owner: owner, headerValid: true, report: report, io: io,
                                            readOnly: readOnly)
            replay.unpairedOffset = unpaired
            return (log, replay)
        }
        if let tail = scan.tornTail, readOnly == nil {
            // [PKG-37] An interrupted append: cut it off so the next append follows the last good frame.
            // (A file that may not be written keeps it: its frames are read up to it, and
            // nothing is ever appended there.)
            try io.ftruncate(fd, to: tail.lowerBound)
            try io.fdatasync(fd)
            report.tornTail = (tail.lowerBound, Int(tail.upperBound - tail.lowerBound))
        }
        let log = PageLog(path: path, io: io, header: header, anchor: anchor, end: scan.goodEnd, fd: fd, readOnly: readOnly)
        handedOver = true
        let asked = from.map { $0 == start && incarnation == header.incarnation } ?? (start == UInt64(LogHeader.size))
        return (log, LogReplay(frames: scan.frames, start: start, fromBeginning: !asked || start == UInt64(LogHeader.size),
                               report: report, unpairedOffset: unpaired))
    }

    /// Opens a log for a reader that holds no lock and changes nothing ([PKG-85]): the
    /// frames from `from` (a snapshot's covered offset, when `incarnation` is the file's)
    /// or from the header, up to the last whole valid frame. Bytes after it that are not a
    /// whole frame may be an append in progress: they are left alone (a later `catchUp`
    /// reads them once whole).
    ///
    /// - Returns: nil when the log cannot be used so without a repair, which needs the lock:
    ///   no such file, a header that does not decode, a snapshot offset of another
    ///   incarnation (the whole log must then be replayed and what it lacks recorded,
    ///   [PKG-51]) or that is not a frame boundary ([PKG-47]), damage ([PKG-38]).
    /// - Throws: as `open` for a log of another kind or owner, or a newer version.
    static func openForReading(path: String, kind: LogKind, owner: UUID, from: UInt64?, incarnation: UInt64?,
                               io: Syscalls) throws -> (PageLog, LogReplay)? {
        guard let tail = try readTail(path: path, kind: kind, owner: owner, from: from, incarnation: incarnation, io: io)
        else { return nil }
        return try finishOpening(tail, scan: LogScanner.scan(tail.bytes, base: tail.start, anchor: tail.anchor))
    }

    /// What `openForReading` reads before it scans the frames: the log open, its header
    /// checked, and its bytes from `start` to the end. The scan (CRCs and frames) needs no
    /// file, so that a caller can run it beside other work (`Document.decode(snapshot:…)`),
    /// then hand it to `finishOpening`, which owns the descriptor from then on.
    struct Tail {
        let path: String
        let io: Syscalls
        let fd: FileDescriptor
        /// Why the file was opened read-only (nil: read-write), see `PageLog.openFile`.
        let readOnly: LnoteError?
        let header: LogHeader
        /// The log's anchor ([PKG-110]), needed to scan `bytes`.
        let anchor: LogAnchor?
        let size: UInt64
        let start: UInt64
        let bytes: [UInt8]
    }

    /// The first half of `openForReading`: nil in the same cases before the scan (no file,
    /// a damaged header, an offset of another incarnation or out of range).
    static func readTail(path: String, kind: LogKind, owner: UUID, from: UInt64?, incarnation: UInt64?,
                         io: Syscalls) throws -> Tail? {
        let fd: FileDescriptor
        let readOnly: LnoteError?
        do {
            (fd, readOnly) = try PageLog.openFile(path, io: io)
        } catch let e as LnoteError where e.isNotFound {
            return nil
        }
        var handedOver = false
        defer { if !handedOver { try? fd.close() } }
        // The size the open's type check saw (one fstat fewer per page open); asked again only
        // when that fstat failed.
        let size = try fd.takeSizeWhenOpened().map { UInt64($0) } ?? io.fstat(fd).size
        let header: LogHeader
        do {
            header = try LogHeader.decode(try io.pread(fd, count: LogHeader.size, at: 0), path: path)
        } catch let e as LnoteError where e.code == .corrupt || e.code == .truncated {
            return nil
        }
        guard header.kind == kind, header.owner == owner else {
            throw LnoteError(.corrupt, "log header names \(header.kind) \(header.owner.uuidString), expected \(kind) \(owner.uuidString)",
                             path: path, offset: 10)
        }
        var start = UInt64(LogHeader.size)
        if let from {
            guard incarnation == header.incarnation, from >= start, from <= size else { return nil }
            start = from
        }
        // A damaged anchor needs the lock's salvage ([PKG-112]).
        let anchor: LogAnchor?
        do {
            anchor = try PageLog.readAnchor(fd, header: header, size: size, io: io, path: path)
        } catch let e as LnoteError where e.code == .corrupt {
            return nil
        }
        let bytes = try io.pread(fd, count: Int(size - start), at: start)
        handedOver = true
        return Tail(path: path, io: io, fd: fd, readOnly: readOnly, header: header, anchor: anchor, size: size, start: start,
                    bytes: bytes)
    }

    /// The second half of `openForReading`, given the scan of `tail.bytes` (from
    /// `tail.start`): nil when it found damage or a bad frame at the end, or nothing whole
    /// after an offset that is not a frame boundary ([PKG-47]). The descriptor is closed
    /// unless it is handed to the log returned. Given a listing scan
    /// (`LogScanner.scanListing`), the replay's frames are those after `scan.leading`'s:
    /// the caller applies or replays the run itself (`Document.loadPageWithoutLock`).
    static func finishOpening(_ tail: Tail, scan: LogScan) throws -> (PageLog, LogReplay)? {
        var handedOver = false
        defer { if !handedOver { try? tail.fd.close() } }
        let (io, fd, path, start, size) = (tail.io, tail.fd, tail.path, tail.start, tail.size)
        guard scan.damage.isEmpty, !scan.tailIsCompleteBadFrame else { return nil }
        let anchorEnd = UInt64(LogHeader.size + (tail.anchor?.frame.count ?? 0))
        if start > UInt64(LogHeader.size), start != anchorEnd, scan.frameCount == 0, scan.tornTail != nil {
            // Nothing whole after the offset: an append in progress right there, or an offset
            // inside a frame ([PKG-47]). Only the whole log tells.
            let whole = LogScanner.scan(try io.pread(fd, count: Int(size) - LogHeader.size, at: UInt64(LogHeader.size)),
                                        base: UInt64(LogHeader.size), anchor: tail.anchor)
            guard whole.isBoundary(start) else { return nil }
        }
        let log = PageLog(path: path, io: io, header: tail.header, anchor: tail.anchor, end: scan.goodEnd, fd: fd,
                          readOnly: tail.readOnly)
        handedOver = true
        return (log, LogReplay(frames: scan.frames, start: start, fromBeginning: start == UInt64(LogHeader.size),
                               report: RecoveryReport(path: path)))
    }

    /// Re-reads the whole open log and, when it holds damage, quarantines and rewrites it.
    /// Returns every valid frame (the replay must start from the beginning when the
    /// report shows a new incarnation).
    func recover() throws -> LogReplay {
        let size = try withDescriptor { try io.fstat($0).size }
        let bytes = try withDescriptor { try io.pread($0, count: Int(size), at: 0) }
        var report = RecoveryReport(path: path)
        var headerOK = true
        var fileAnchor: LogAnchor?
        let rest = Array(bytes.dropFirst(LogHeader.size))
        do {
            fileAnchor = try LogHeader.decode(bytes, path: path).anchor(in: rest)
        } catch let e as LnoteError {
            headerOK = false
            report.problems.append(e)
        }
        let scan = LogScanner.scan(rest, base: UInt64(LogHeader.size), anchor: fileAnchor)
        if headerOK && fileAnchor == anchor && scan.damage.isEmpty && !scan.tailIsCompleteBadFrame && scan.goodEnd >= end {
            return LogReplay(frames: scan.frames.filter { $0.offset < end }, start: UInt64(LogHeader.size),
                             fromBeginning: true, report: report)
        }
        let (fresh, replay) = try PageLog.salvage(path: path, kind: header.kind, owner: header.owner,
                                                  headerValid: headerOK, report: report, io: io, readOnly: readOnly)
        try adopt(fresh)
        return replay
    }

    /// The bytes `ranges` cover together (each byte once), less those in `kept`.
    static func unionLength(_ ranges: [Range<UInt64>], less kept: Range<UInt64>) -> Int {
        var total: UInt64 = 0
        var current: Range<UInt64>?
        func add(_ r: Range<UInt64>) { total += UInt64(r.count - r.clamped(to: kept).count) }
        for r in ranges.filter({ !$0.isEmpty }).sorted(by: { $0.lowerBound < $1.lowerBound }) {
            if let c = current, r.lowerBound <= c.upperBound {
                current = c.lowerBound ..< max(c.upperBound, r.upperBound)
            } else {
                if let c = current { add(c) }
                current = r
            }
        }
        if let c = current { add(c) }
        return Int(total)
    }

    /// Preserves a damaged log as `<path>.corrupt-<n>` and rewrites it durably with only
    /// its valid frames, under a new incarnation ([PKG-38]).
    ///
    /// When a page log's copy or rewrite cannot be written for lack of space or because the
    /// file system is read-only (ENOSPC, EDQUOT, EROFS), nothing on disk is changed (a copy
    /// already made is removed) and the log is returned in the pending state ([PKG-24]): the
    /// same frames, read from the damaged file, held in memory; writes refused until a later
    /// salvage succeeds.
    ///
    /// `readOnly`: the file may not be written (opened read-only, `openFile`): nothing is
    /// tried; a page log is returned pending at once, a damaged document log is an error.
    static func salvage(path: String, kind: LogKind, owner: UUID, headerValid: Bool, report initial: RecoveryReport,
                        io: Syscalls, readOnly: LnoteError? = nil) throws -> (PageLog, LogReplay) {
        var report = initial
        let bytes = try DurableFile.read(path, io: io)
        let base = headerValid ? LogHeader.size : 0
        let (anchor, atForty) = salvagedAnchor(bytes, headerValid: headerValid, kind: kind, path: path)
        let scan = LogScanner.scan(Array(bytes.dropFirst(base)), base: UInt64(base), anchor: anchor)
        // Under a damaged header, the anchor found at offset 40 is kept, not dropped.
        let keptAnchor = !headerValid && atForty ? anchor?.frame.count ?? 0 : 0
        // [PKG-112] A version-2 page log whose anchor is damaged: what follows it is damage,
        // never a torn tail (log-form frames read with no anchor are no frames).
        let anchorLost = headerValid && !atForty && kind == .page && bytes.count > LogHeader.size
            && ((try? LogHeader.decode(bytes, path: path))?.version ?? 1) >= 2
        // The bytes the rewrite does not carry over, each counted once ([PKG-38]): under a
        // damaged header, everything before the first frame kept (the whole file when none
        // is); the damaged ranges; a torn tail that holds a complete bad frame or follows a
        // damaged anchor. Less the anchor at offset 40 when the rewrite keeps it.
        var dropped: [Range<UInt64>] = []
        if !headerValid { dropped.append(0 ..< (scan.frames.first?.offset ?? UInt64(bytes.count))) }
        for d in scan.damage {
            dropped.append(d.range)
            guard headerValid || d.range.lowerBound != 0 else { continue }
            report.problems.append(LnoteError(.corrupt, d.reason, path: path, offset: Int(d.range.lowerBound),
                                              index: d.frameIndex))
        }
        if let t = scan.tornTail {
            if scan.tailIsCompleteBadFrame || anchorLost {
                report.problems.append(anchorLost && t.lowerBound == UInt64(LogHeader.size) ? PageLog.damagedAnchor(path: path)
                                       : LnoteError(.corrupt, scan.tornTailReason ?? "bad frame", path: path,
                                                    offset: Int(t.lowerBound), index: scan.frames.count))
                dropped.append(t)
            } else if !(headerValid == false && scan.frames.isEmpty) {
                report.tornTail = (t.lowerBound, Int(t.upperBound - t.lowerBound))
            }
        }
        report.droppedBytes += PageLog.unionLength(dropped, less: UInt64(LogHeader.size) ..< UInt64(LogHeader.size + keptAnchor))
        if anchorLost && !report.problems.contains(where: { $0.offset == LogHeader.size }) {
            report.problems.insert(PageLog.damagedAnchor(path: path), at: 0)
        }
        // The same anchor, so that the log-form frames kept stay valid as they are ([PKG-38]).
        let start = LogStart(kind: kind, owner: owner, anchor: anchor)
        let header = start.header
        var w = ByteWriter(capacity: bytes.count)
        w.append(start.bytes)
        var frames: [LoggedFrame] = []
        frames.reserveCapacity(scan.frames.count)
        for f in scan.frames {
            frames.append(f.moved(to: UInt64(w.count)))
            let lo = Int(f.offset), hi = Int(f.end)
            w.append(bytes[lo..<hi])
        }
        if let readOnly {
            guard kind == .page else {
                throw LnoteError(.io, "this document log is damaged and the folder may not be written: nothing was changed; copy the "
                                 + "folder to a writable place and run lnote verify --repair there", path: path,
                                 underlying: readOnly.underlying ?? readOnly.message)
            }
            return try pending(path: path, bytes: bytes, scan: scan, kind: kind, owner: owner, headerValid: headerValid,
                               anchor: anchor, report: report, cause: readOnly, io: io)
        }
        do {
            if !bytes.isEmpty {
                var n = 1
                while try io.stat("\(path).corrupt-\(n)") != nil { n += 1 }
                let copy = "\(path).corrupt-\(n)"
                try DurableFile.replace(copy, with: bytes, io: io)
                report.quarantinedCopy = copy
            }
            try DurableFile.replace(path, with: w.bytes, io: io)
        } catch let e as LnoteError where kind == .page && (e.isDiskFull || e.isReadOnly) {
            return try pending(path: path, bytes: bytes, scan: scan, kind: kind, owner: owner, headerValid: headerValid,
                               anchor: anchor, report: report, cause: e, io: io)
        }
        report.salvagedFrames = frames.count
        report.newIncarnation = header.incarnation
        let fd = try io.open(path, O_RDWR)
        let log = PageLog(path: path, io: io, header: header, anchor: anchor, end: UInt64(w.count), fd: fd)
        return (log, LogReplay(frames: frames, start: UInt64(LogHeader.size), fromBeginning: true, report: report))
    }

    /// The anchor a salvage reads a damaged page log with ([PKG-112]): the valid anchor frame
    /// at offset 40 or, when that one is damaged, the first valid copy of an anchor in the file
    /// ([PKG-111]); under a valid version-2 header or, when the header is damaged, under any.
    /// A log-form frame's CRC starts from its anchor's, so a frame checked against the anchor
    /// found is its writer's; without one, log-form frames are damage and go to no replica.
    /// `atForty`: the anchor is the frame at offset 40 (not a copy found later).
    static func salvagedAnchor(_ bytes: [UInt8], headerValid: Bool, kind: LogKind, path: String)
        -> (anchor: LogAnchor?, atForty: Bool) {
        guard kind == .page, bytes.count > LogHeader.size else { return (nil, false) }
        if headerValid {
            guard let header = try? LogHeader.decode(bytes, path: path), header.version >= 2 else { return (nil, false) }
        }
        let rest = Array(bytes[LogHeader.size...])
        if case .frame(let f, _) = Frame.scan(rest, at: 0), let anchor = LogAnchor.parse(f) { return (anchor, true) }
        // Only standard frames are valid without an anchor: each anchor frame among them.
        let scan = LogScanner.scan(rest, base: UInt64(LogHeader.size), anchor: nil)
        return (scan.frames.lazy.filter { $0.frame.type == LogAnchor.type }.compactMap { LogAnchor.parse($0.frame) }.first, false)
    }
}


extension PageLog {
    /// The read-only outcome of a salvage that could not be written ([PKG-24]): the damaged
    /// file (`bytes`, as read) stays; a copy already made of it is removed; the log object holds
    /// the frames `scan` found, which are the ones a written salvage keeps.
    static func pending(path: String, bytes: [UInt8], scan: LogScan, kind: LogKind, owner: UUID, headerValid: Bool,
                        anchor: LogAnchor?, report initial: RecoveryReport, cause: LnoteError,
                        io: Syscalls) throws -> (PageLog, LogReplay) {
        var report = initial
        if let copy = report.quarantinedCopy {
            // The rewrite failed after the copy: take the copy back, so that nothing changed.
            try? io.unlink(copy, missingOK: true)
            try? DurableFile.syncDirectory(DurableFile.split(copy).dir, io: io)
            report.quarantinedCopy = nil
        }
        report.salvagePending = cause
        report.salvagedFrames = scan.frames.count
        let fd = try io.open(path, O_RDONLY)
        let header = (headerValid ? try? LogHeader.decode(bytes, path: path) : nil)
            ?? LogHeader(kind: kind, owner: owner, incarnation: 0)
        let log = PageLog(path: path, io: io, header: header, anchor: anchor, end: UInt64(bytes.count), fd: fd)
        log.pendingSalvage = PendingSalvage(frames: scan.frames, cause: cause)
        return (log, LogReplay(frames: scan.frames, start: UInt64(LogHeader.size), fromBeginning: true, report: report))
    }
}

extension PageLog {
    /// Rewrites the log with only `keep` (frames it holds, in their order) under a new
    /// incarnation, by durable replace, and takes over the new file ([PKG-57]): the one other
    /// exception to append-only, for a fork repair that moves this replica's own versions
    /// of forked operations out of the log ([SYNC-54]). The caller has set aside every
    /// snapshot that pairs with the old incarnation first, so none claims what was removed.
    func rewrite(keeping keep: [LoggedFrame]) throws {
        if let readOnly { throw PageLog.readOnlyRefusal(path: path, cause: readOnly) }
        try sync()
        // The same anchor: its writer's strokes are written in log form again ([LOG-33]).
        let start = LogStart(kind: kind, owner: self.header.owner, anchor: anchor)
        var w = ByteWriter(capacity: Int(end))
        w.append(start.bytes)
        for f in keep {
            let bytes = f.frame.encoded
            w.append(start.anchor?.logForm(bytes) ?? bytes)
        }
        try DurableFile.replace(path, with: w.bytes, io: io)
        let fd = try io.open(path, O_RDWR)
        try adopt(PageLog(path: path, io: io, header: start.header, anchor: start.anchor, end: UInt64(w.count), fd: fd))
    }
}
