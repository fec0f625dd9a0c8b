#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import LnoteModel
import LnoteReplication

/// An open `.lnote` document package: its document log, the pages opened so far, and the
/// saving machinery (autosave, compaction, flush, close).
///
/// Every edit is appended to its log and made durable before the call returns ([PKG-34]);
/// snapshots (`document.json`, `pages/<id>.content`) and `manifest.json` are rewritten
/// later by autosave, `flush()` or `close()`, atomically ([PKG-20]). Only pages that
/// changed are rewritten ([PKG-16]).
///
/// A failed append or sync of a page log unloads that page (its next use re-reads it from
/// disk, the truth); a failed sync of `document.log` makes this handle unusable (reopen
/// the document). Every other failure throws and leaves the handle usable.
public actor Document {
    public nonisolated let id: DocumentID
    public nonisolated let paths: PackagePaths
    /// The replica that stamps local operations (the notebook folder's id, which sync may
    /// replace while the document is open: `Notebook.remintReplica`).
    public nonisolated var replica: ReplicaID { identity.current }
    /// The notebook's replica identity, shared with every document it opened.
    nonisolated let identity: ReplicaIdentity
    nonisolated let io: Syscalls
    let options: StoreOptions

    var doc: DocumentReplica
    var docLog: PageLog
    var docPendingOffsets: [OpID: UInt64] = [:]
    /// Operations the document's state holds that `document.log` lacks ([PKG-51]).
    var docMissing = OpRanges()
    /// Where each operation of `document.log` starts, built at the first duplicate received
    /// ([PKG-58]); nil until then and after a rewrite of the log.
    var docLogIndex: [OpID: UInt64]?
    /// Assets each page references: document.json's cache ([PKG-15]); only grows.
    var pageAssets: [PageID: Set<AssetID>]
    /// Bumped whenever `pageAssets` grows: document.json must then be rewritten.
    var assetsGeneration = 0
    /// Each page's element count and modification time as its snapshot on disk records
    /// them ([PKG-12]): read from the snapshot's first bytes the first time they are needed,
    /// replaced whenever this handle writes the snapshot.
    var snapshotCounts: [PageID: PageCounts] = [:]
    var pages: [PageID: LoadedPage] = [:]
    /// Increases on every page access (least-recently-used eviction).
    var useCounter: UInt64 = 0
    /// What the document.json on disk was written from (nil: unknown, write it).
    var documentOnDisk: DocumentFileKey?
    /// `sha256:<hex>` of the document.json bytes on disk (the manifest's `source`).
    var documentSource = ""
    /// The manifest on disk once this handle compared or wrote it; until then the bytes read
    /// at open are in `manifestBytesAtOpen`.
    var manifestOnDisk: ManifestFile?
    var manifestBytesAtOpen: [UInt8]?
    /// The document-derived part of the manifest, for the document clock it was computed at.
    var manifestBasis: (clock: VectorClock, basis: ManifestBasis)?
    var reports: [RecoveryReport] = []
    var closed = false
    /// Set when document.log failed to sync: nothing is accepted any more.
    var broken: LnoteError?

    // Autosave.
    var autosaveTask: Task<Void, Never>?
    var lastEdit: ContinuousClock.Instant?
    var firstUnsaved: ContinuousClock.Instant?
    var autosaveFailure: LnoteError?

    // Group commit.
    var syncWaiters: [LogKey: [CheckedContinuation<Void, Error>]] = [:]
    var syncTimers: [LogKey: Task<Void, Never>] = [:]

    var onClose: (@Sendable (DocumentID) async -> Void)?

    enum LogKey: Hashable {
        case document
        case page(PageID)
    }

    /// Opens the package at `paths` ([PKG-40]): reads document.json (or rebuilds it from the
    /// log when missing or damaged), replays document.log from the offset it covers, and
    /// reconciles manifest.json, reading the first bytes of every live page's snapshot
    /// ([PKG-13]). Removes temporary files left by interrupted writes.
    init(paths: PackagePaths, identity: ReplicaIdentity, io: Syscalls, options: StoreOptions) async throws {
        self.id = paths.id
        self.paths = paths
        self.identity = identity
        self.io = io
        self.options = options
        guard let st = try io.stat(paths.root), st.isDirectory else {
            throw LnoteError(.notFound, "no document package", path: paths.root)
        }
        for dir in [paths.root, paths.pages, paths.assets, paths.thumbnails] {
            try io.mkdir(dir, existingOK: true)
            try DurableFile.removeTemporaryFiles(in: dir, io: io)
        }
        var opening: [RecoveryReport] = []
        var base = DocumentState(id: paths.id)
        var baseAssets: [PageID: Set<AssetID>] = [:]
        var covered: (UInt64, UInt64)?
        var onDisk: (key: DocumentFileKey, source: String)?
        if let bytes = try DurableFile.readIfExists(paths.document, io: io) {
            do {
                let (f, s, assets) = try DocumentFile.decode(bytes, path: paths.document)
                guard s.id == paths.id else {
                    throw LnoteError(.corrupt, "document.json names document \(s.id)", path: paths.document)
                }
                base = s
                baseAssets = assets
                covered = (f.log.offset, f.incarnation)
                onDisk = (DocumentFileKey(clock: s.clock, coveredOffset: f.log.offset, incarnation: f.incarnation,
                                          assetsGeneration: 0),
                          ManifestFile.fingerprint(bytes))
            } catch let e as LnoteError where e.code == .corrupt || e.code == .truncated {
                // The log is the truth: preserve the damaged snapshot and rebuild from the whole log.
                var r = RecoveryReport(path: paths.document)
                r.problems.append(e)
                r.quarantinedCopy = try Document.quarantine(paths.document, io: io)
                opening.append(r)
            }
        } else if try io.stat(paths.documentLog) == nil {
            throw LnoteError(.corrupt, "neither document.json nor document.log exists", path: paths.root)
        }
        let (log, replay) = try PageLog.open(path: paths.documentLog, kind: .document, owner: paths.id.uuid,
                                             from: covered?.0, incarnation: covered?.1, create: true, io: io)
        var unpaired: (report: RecoveryReport, clock: VectorClock)?
        if let u = replay.unpairedOffset, let c = covered {
            // [PKG-47] document.json covers an offset that is no frame boundary of document.log: the
            // log was cut or replaced after it was written. The log is the truth: document.json
            // is set aside and the state rebuilt from the whole log (replay starts at its header).
            do {
                var r = RecoveryReport(path: paths.document)
                r.problems.append(LnoteError(
                    .corrupt, "document.json covers offset \(c.0) of log incarnation \(JSONText.u64(c.1)), where "
                        + "document.log (whole frames up to \(u.logEnd)) has no frame boundary there: the log was cut or replaced "
                        + "after document.json was written; the document is rebuilt from its log", path: paths.document))
                r.quarantinedCopy = try Document.quarantine(paths.document, io: io)
                unpaired = (r, base.clock)
                base = DocumentState(id: paths.id)
                baseAssets = [:]
                onDisk = nil
            } catch {
                try? log.close()
                throw error
            }
        }
        let author = identity.current
        var report = replay.report
        var replica = DocumentReplica(state: base)
        var pending: [OpID: UInt64] = [:]
        do {
            try Document.feed(replay.frames, kind: .document, fromStart: replay.start == UInt64(LogHeader.size),
                              path: paths.documentLog, report: &report, pending: &pending) { try replica.receive($0) }
        } catch {
            try? log.close()
            throw error
        }
        pending = pending.filter { !replica.clock.covers($0.key) }
        if pending.keys.contains(where: { $0.replica == author }) {
            // [PKG-56] This replica's operations wait for one of its own that the log lost.
            do {
                report.mintedReplica = try identity.remint(reason: "operations of this replica in \(paths.documentLog) wait for "
                    + "one of its own that the log lost")
            } catch {
                try? log.close()
                throw error
            }
        }
        if !report.isClean || report.mintedReplica != nil { opening.append(report) }
        if var u = unpaired {
            u.report.noteLostOperations(snapshot: u.clock, rebuilt: replica.clock, replica: author)
            if u.report.lostOwnOperations > 0 && identity.current == author {
                // [PKG-56] This replica's next document operations would reuse those ids.
                do {
                    let change = try identity.remint(reason: Document.lostOwnReason(u.report))
                    u.report.mintedReplica = change
                } catch {
                    try? log.close()
                    throw error
                }
            }
            opening.append(u.report)
        }
        self.doc = replica
        self.docLog = log
        self.docPendingOffsets = pending
        self.pageAssets = baseAssets
        self.documentOnDisk = onDisk?.key
        self.documentSource = onDisk?.source ?? ""
        self.reports = opening
        self.manifestBytesAtOpen = try DurableFile.readIfExists(paths.manifest, io: io)
        // [PKG-51] What the document's state holds that document.log lacks (see `loadedPage`).
        let fromHeader = replay.start == UInt64(LogHeader.size)
        if try fromHeader || io.stat(paths.documentMissing) != nil {
            try settleDocumentMissing(frames: fromHeader ? replay.frames : try docLog.readFrames(from: UInt64(LogHeader.size)))
        }
        // [PKG-13] document.json is brought up to date with the log, and manifest.json with
        // document.json and the live pages' snapshots (read here: one prefix per page).
        try saveDocumentFiles()
    }

    isolated deinit {
        if !closed {
            // The descriptors must be released: closing here cannot save (deinit cannot await)
            // but everything edited is already durable in the logs.
            try? docLog.close()
            for p in pages.values { try? p.log.close() }
            autosaveTask?.cancel()
        }
    }

    // MARK: - Reading

    /// The document's replicated state (title, pages in order including deleted ones, clocks).
    public var state: DocumentState { doc.state }

    public var title: String { doc.state.title.value }

    /// Live pages in document order, with their facts as of this moment.
    public var pageList: [PageInfo] {
        doc.livePages.map { info($0) }
    }

    /// Pages that were deleted (soft: their content is kept and can be restored).
    public var deletedPages: [PageInfo] {
        doc.state.pages.filter(\.deleted.value).map { info($0) }
    }

    /// A loaded page's facts come from its state; another page's from its snapshot's first
    /// bytes, cached (read here if no save needed them yet: a page deleted before this
    /// handle opened, or added since by sync). A failed read does not fail the listing: the
    /// page shows with `countsError` set, and the next listing reads again.
    private func info(_ p: PageRecord) -> PageInfo {
        var c = PageCounts.empty
        var countsError: LnoteError?
        if let lp = pages[p.id] {
            c = PageCounts(lp.replica.state)
        } else {
            do {
                c = try counts(of: p.id)
            } catch {
                countsError = error as? LnoteError
                    ?? LnoteError(.io, "the page's counts could not be read", path: paths.content(p.id),
                                  underlying: "\(error)")
            }
        }
        return PageInfo(id: p.id, canvas: p.canvas.value, created: p.created, elementCount: c.elementCount,
                        modified: c.modified, deleted: p.deleted.value, countsError: countsError)
    }

    /// What opening the document and its pages found and repaired (torn tails, damage).
    public var recoveryReports: [RecoveryReport] { reports }

    /// The last background autosave failure, if any (it is retried by `flush()`/`close()`).
    public var lastAutosaveFailure: LnoteError? { autosaveFailure }

    /// Concurrent writes to the title, page order, canvas or deletion, and pages deleted while
    /// edited elsewhere ([MERGE-65]).
    public func conflicts() -> [Conflict] {
        var clocks: [PageID: VectorClock] = [:]
        for (id, p) in pages { clocks[id] = p.replica.clock }
        return doc.conflicts(pageClocks: clocks)
    }

    // MARK: - Internals shared by the extensions

    func checkUsable() throws {
        if closed { throw LnoteError(.invalidState, "document is closed", path: paths.root) }
        if let broken { throw LnoteError(.invalidState, "document unusable after a failed write of document.log (\(broken)); reopen it", path: paths.root) }
    }

    /// Decodes frames into operations and feeds them to `receive` ([PKG-39]): malformed
    /// frames and operations of the wrong log are reported and skipped ([LOG-13]); the
    /// engine skips operations it already has; operations still waiting for dependencies
    /// are remembered with their offsets so compaction never covers them.
    @discardableResult
    static func feed(_ frames: [LoggedFrame], kind: LogKind, fromStart: Bool, path: String,
                     report: inout RecoveryReport, pending: inout [OpID: UInt64],
                     receive: ([Op]) throws -> [Op]) throws -> [Op] {
        var ops: [Op] = []
        ops.reserveCapacity(frames.count)
        var offsets: [OpID: UInt64] = [:]
        offsets.reserveCapacity(frames.count)
        let decoded = decode(frames, path: path)
        for (i, lf) in frames.enumerated() {
            do {
                let op = try decoded[i].get()
                guard op.body.isPageOperation == (kind == .page) else {
                    throw LnoteError(.corrupt, "\(op.body.name) operation in a \(kind) log", path: path, offset: Int(lf.offset))
                }
                if offsets[op.id] == nil { offsets[op.id] = lf.offset }
                ops.append(op)
            } catch let e as LnoteError {
                var m = e
                m.code = .corrupt
                m.message = "malformed operation: \(e.message)"
                m.path = path
                m.offset = Int(lf.offset)
                m.index = fromStart ? i : nil
                report.undecodable.append(m)
            }
        }
        var applied: [Op]
        do {
            applied = try receive(ops)
        } catch {
            // One operation the engine refuses must not keep the others out: apply one by one.
            applied = []
            for op in ops {
                do {
                    applied += try receive([op])
                } catch let e as LnoteError {
                    report.undecodable.append(LnoteError(.corrupt, "operation \(op.id) refused: \(e.message)", path: path,
                                                         offset: offsets[op.id].map { Int($0) }))
                }
            }
        }
        let done = Set(applied.map(\.id))
        for (id, off) in offsets where !done.contains(id) {
            pending[id] = min(pending[id] ?? off, off)
        }
        return applied
    }

    /// The operations of logged frames, in order, each or its decoding error. Frames decode
    /// independently: a long replay decodes them on several cores.
    static func decode(_ frames: [LoggedFrame], path: String) -> [Result<Op, any Error>] {
        let payloadBytes = frames.reduce(0) { $0 + $1.frame.payload.count }
        return Parallel.map(frames.count, parallel: payloadBytes >= 64 * 1024) { i in
            let lf = frames[i]
            return Result { try OperationCodec.decode(lf.frame, base: Int(lf.offset) + Frame.headerSize + 1, path: path) }
        }
    }

    /// Renames a damaged file to `<path>.corrupt-<n>` (first free n). Returns the new path.
    static func quarantine(_ path: String, io: Syscalls) throws -> String {
        var n = 1
        while try io.stat("\(path).corrupt-\(n)") != nil { n += 1 }
        let target = "\(path).corrupt-\(n)"
        try io.rename(path, target)
        try DurableFile.syncDirectory(DurableFile.split(path).dir, io: io)
        return target
    }

    func now() -> Int64 { options.now() }
}

/// One page as the document knows it.
public struct PageInfo: Sendable, Hashable {
    public var id: PageID
    public var canvas: CanvasSize
    /// ms since 1970.
    public var created: Int64
    /// 0 with `countsError` set when they are unknown.
    public var elementCount: Int
    public var modified: Int64
    public var deleted: Bool
    /// Why `elementCount` and `modified` are unknown (shown as 0): the read of the page's
    /// snapshot failed (an I/O error; a damaged snapshot counts as an empty page, [PKG-12]).
    /// nil when they are known. The read is tried again on the next listing.
    public var countsError: LnoteError? = nil

    /// Consistent with `==`, where errors compare by code.
    public func hash(into h: inout Hasher) {
        h.combine(id)
        h.combine(canvas)
        h.combine(created)
        h.combine(elementCount)
        h.combine(modified)
        h.combine(deleted)
        h.combine(countsError?.code)
    }
}

/// Where a page goes in the document.
public enum PagePlacement: Sendable, Hashable {
    case first
    case last
    case after(PageID)
}

/// A page loaded in memory: its replica, its open log, and what its snapshot covers.
final class LoadedPage {
    let id: PageID
    var replica: PageReplica
    let log: PageLog
    /// The log offset and incarnation the `.content` file on disk covers (nil: no usable snapshot).
    var covered: (offset: UInt64, incarnation: UInt64)?
    /// Operations waiting for dependencies, by the offset of their frame.
    var pendingOffsets: [OpID: UInt64] = [:]
    /// Frames appended or replayed since the snapshot.
    var framesSinceSnapshot = 0
    /// True when the in-memory state differs from the `.content` file.
    var dirty = false
    /// `Document.useCounter` at the last access.
    var lastUse: UInt64 = 0
    /// Operations the state holds that the log lacks ([PKG-51]).
    var missing = OpRanges()
    /// Where each operation of the log starts, built at the first duplicate received
    /// ([PKG-58]); nil until then and after the log is rewritten.
    var logIndex: [OpID: UInt64]?

    init(id: PageID, replica: PageReplica, log: PageLog) {
        self.id = id
        self.replica = replica
        self.log = log
    }

    /// Bytes of log past the snapshot's coverage.
    var bytesSinceSnapshot: UInt64 {
        guard let c = covered, c.incarnation == log.incarnation else { return log.end - UInt64(LogHeader.size) }
        return log.end - min(c.offset, log.end)
    }
}
