#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import Synchronization
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
/// **Several processes.** Other processes (and other handles) may have the same package
/// open ([PKG-61]). Every change to its files is made holding the document lock
/// `<UUID>.lnote/lock` for that change only ([PKG-82]); under it, this handle first reads
/// what the logs gained since it last looked, so operation ids and Lamport timestamps are
/// allocated from the log's real tail ([PKG-84]). Reads take no lock: before each read or
/// write this handle compares each log it uses with what it read (`fstat`, `stat`) and
/// applies only the new frames ([PKG-87]); a log another process rewrote is read again.
///
/// **Threads.** The actor runs on a thread of its own (`StoreExecutor`): its blocking
/// system calls never occupy Swift's cooperative threads.
///
/// **Leases.** A handle from `Notebook.openDocument` is shared by every caller that opens
/// the same document in that notebook, and by the notebook's own work (sync, delete,
/// restore). Each `openDocument` is one lease and each `close()` gives one back (after
/// saving what changed); the files are released when the last lease goes, so nobody's
/// handle is closed under them. Only `Notebook.close()` closes it regardless.
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
    /// The thread this actor runs on.
    nonisolated let executor: StoreExecutor
    public nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
    /// `<UUID>.lnote/lock` ([PKG-80]).
    nonisolated let lock: FileLock
    /// Nesting depth of `locked` sections (the lock is taken by the outermost).
    var lockDepth = 0
    /// True once the document's state was read from its files.
    var loaded = false
    /// Where `changes` subscribers get their events.
    nonisolated let hub: ChangeHub
    /// The notebook's record of this process's document operations (for `Notebook.changes`).
    let origins: OriginRegistry?
    /// Watches the package while `changes` has subscribers.
    var watcher: FolderWatcher?
    /// What the watcher reported since the last refresh it started.
    nonisolated let pendingWatch = Mutex<(scheduled: Bool, paths: Set<String>?, everything: Bool)>((false, [], false))
    /// Log sizes of pages this handle has not loaded, for telling `pageChanged` when polling.
    var unloadedLogSizes: [PageID: UInt64] = [:]

    var doc: DocumentReplica
    var docLog: PageLog
    var docPendingOffsets: [OpID: UInt64] = [:]
    /// Operations the document's state holds that `document.log` lacks ([PKG-51]).
    var docMissing = OpRanges()
    /// Where each operation of `document.log` starts, built at the first duplicate received
    /// ([PKG-58]); nil until then and after a rewrite of the log.
    var docLogIndex: [OpID: UInt64]?
    /// Assets each page references: document.json's cache ([PKG-15]); only grows.
    var pageAssets: [PageID: Set<AssetID>] = [:]
    /// Bumped whenever `pageAssets` grows: document.json must then be rewritten.
    var assetsGeneration = 0
    /// Each page's element count and modification time as its snapshot on disk records
    /// them ([PKG-12]): read from the snapshot's first bytes the first time they are needed,
    /// replaced whenever this handle writes the snapshot.
    var snapshotCounts: [PageID: PageCounts] = [:]
    /// Pages whose deferred points did not decode on first use ([SNAP-38], [LOG-27]): loaded
    /// again with every point decoded at load, so that damage is handled as at any load
    /// (a snapshot quarantined, a frame reported as undecodable, [PKG-42]).
    var eagerPages: Set<PageID> = []
    var pages: [PageID: LoadedPage] = [:]
    /// Increases on every page access (least-recently-used eviction).
    var useCounter: UInt64 = 0
    /// What the document.json on disk was written from (nil: unknown, write it).
    var documentOnDisk: DocumentFileKey?
    /// `sha256:<hex>` of the document.json bytes on disk (the manifest's `source`).
    var documentSource = ""
    /// The identity (`FileIdentity`) of the document.json and manifest.json this handle last
    /// read or wrote: another one means another process saved ([PKG-93]).
    var documentIdentity: [UInt64] = []
    var manifestIdentity: [UInt64] = []
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
    /// The last cache write (snapshot, document.json, manifest.json) that failed and waits
    /// for a later save ([PKG-23]); cleared when a flush, autosave or close starts.
    var deferredSave: LnoteError?
    /// The last time-travel answer of a page: the operation total it started from ([PKG-98])
    /// and how many operations it decoded (tests look at these).
    var lastMoment: (start: UInt64, decoded: Int) = (0, 0)
    /// The undo group open on this handle ([MERGE-73]): its label, how many begins it
    /// has, and the entries of its operations so far.
    var undoGroup: (label: String, depth: Int, entries: [UndoEntry])?
    /// The undo journal as last read or written by this handle, with the file's size and
    /// inode then: read again when either differs (another process appended or rewrote it).
    /// The undo journal as last read or written by this handle ([PKG-100]): its size and
    /// inode then, its stacks, and its size after its last rewrite (or when first read).
    var undoCache: UndoCache?
    /// The undo journal, open for reading and appending while it is the file at its path.
    var undoFile: FileDescriptor?
    /// The journal's size after this handle last rewrote it, or when it first read it: it is
    /// rewritten again only once it has doubled ([PKG-100]). Kept apart from `undoCache`,
    /// which another process's append makes stale.
    var undoFloor: UInt64 = 0
    /// The inode `undoFloor` was measured on: a file another process rewrote has a new one.
    var undoFloorInode: UInt64 = 0

    /// Pages whose picture is stale, waiting for the background renderer ([PKG-103]).
    nonisolated let thumbnailQueue: ThumbnailQueue

    // Group commit.
    var syncWaiters: [LogKey: [CheckedContinuation<Void, Error>]] = [:]
    var syncTimers: [LogKey: Task<Void, Never>] = [:]

    /// Gives a lease back to the notebook that handed this handle out (`close()`); false when
    /// that notebook is gone (the handle then closes itself); nil for a handle nobody shares.
    var lease: (@Sendable (DocumentID) async throws -> Bool)?

    enum LogKey: Hashable {
        case document
        case page(PageID)
    }

    /// A handle that has read nothing yet (`open` reads the package).
    init(paths: PackagePaths, identity: ReplicaIdentity, io: Syscalls, options: StoreOptions, origins: OriginRegistry? = nil) {
        self.id = paths.id
        self.paths = paths
        self.identity = identity
        self.io = io
        self.options = options
        self.origins = origins
        self.executor = StoreExecutor(name: "lnote.document")
        self.lock = FileLock.document(paths, io: io, timeout: options.lockTimeout)
        self.hub = ChangeHub(document: paths.id)
        self.thumbnailQueue = ThumbnailQueue(limit: options.thumbnailQueueLimit)
        self.doc = DocumentReplica(id: paths.id)
        self.docLog = PageLog(absent: paths.documentLog, kind: .document, owner: paths.id.uuid, io: io)
    }

    /// Opens the package at `paths` ([PKG-40]): reads document.json (or rebuilds it from the
    /// log when missing or damaged), replays document.log from the offset it covers, and
    /// reconciles manifest.json, reading the first bytes of every live page's snapshot
    /// ([PKG-13]). Reading takes no lock; a repair (damage, a snapshot that does not pair with
    /// its log) waits for the document lock; bringing document.json and manifest.json up to
    /// date and removing temporary files are done only when the lock is free at once
    /// ([PKG-85]). All of it on the document's own thread.
    static func open(paths: PackagePaths, identity: ReplicaIdentity, io: Syscalls, options: StoreOptions,
                     origins: OriginRegistry? = nil) async throws -> Document {
        let d = Document(paths: paths, identity: identity, io: io, options: options, origins: origins)
        do {
            try await d.load()
        } catch {
            await d.abandon()
            throw error
        }
        return d
    }

    /// Reads the package (see `open`).
    func load() throws {
        guard let st = try io.stat(paths.root), st.isDirectory else {
            throw LnoteError(.notFound, "no document package", path: paths.root)
        }
        let dirs = [paths.pages, paths.assets, paths.thumbnails]
        // [PKG-22] O_NOFOLLOW guards only a path's last name: a package or one of its
        // directories that is a symlink would lead every open below it elsewhere.
        for dir in [paths.root] + dirs {
            if let kind = io.fileType(atPath: dir), kind != "directory" {
                throw Syscalls.notRegular(dir, kind: kind, wantsDirectory: true)
            }
        }
        if try dirs.contains(where: { try io.stat($0)?.isDirectory != true }) {
            try locked { for dir in dirs { try io.mkdir(dir, existingOK: true) } }
        }
        if try !loadDocumentWithoutLock() {
            try locked { try loadDocumentLocked() }
        }
        loaded = true
        let (manifest, identity) = try Document.readWithIdentity(paths.manifest, io: io)
        manifestBytesAtOpen = manifest
        manifestIdentity = identity
        // [PKG-21] [PKG-85] Only when nobody else holds the lock now: a temporary file is then
        // left by a dead writer; healing document.json and the manifest ([PKG-13]) can wait
        // for the writer that holds the lock, who saves them itself.
        _ = try tryLocked {
            for dir in [paths.root] + dirs { try DurableFile.removeTemporaryFiles(in: dir, io: io) }
            try saveDocumentFiles()
        }
    }

    /// A handle whose opening failed: releases what it opened.
    func abandon() {
        closed = true
        try? docLog.close()
        for p in pages.values { try? p.log.close() }
        pages = [:]
        hub.finish()
    }

    /// The bytes of a file and its identity (inode, size, modification time) taken on the
    /// descriptor the bytes were read from; (nil, []) when it does not exist.
    static func readWithIdentity(_ path: String, io: Syscalls) throws -> (bytes: [UInt8]?, identity: [UInt64]) {
        let fd: FileDescriptor
        do {
            fd = try io.open(path, O_RDONLY)
        } catch let e as LnoteError where e.isNotFound {
            return (nil, [])
        }
        do {
            let st = try io.fstat(fd)
            let bytes = try io.readToEnd(fd)
            try fd.close()
            return (bytes, [st.inode, st.size, UInt64(bitPattern: st.modifiedSeconds), UInt64(bitPattern: st.modifiedNanoseconds)])
        } catch {
            try? fd.close()
            throw error
        }
    }

    /// The identity of a file now ([] when absent).
    func fileIdentity(_ path: String) throws -> [UInt64] {
        guard let st = try io.stat(path) else { return [] }
        return [st.inode, st.size, UInt64(bitPattern: st.modifiedSeconds), UInt64(bitPattern: st.modifiedNanoseconds)]
    }

    /// The common case, without the lock ([PKG-85], [PKG-86]): document.json decodes and
    /// names this document, no `document.missing`, and document.log holds whole frames from
    /// the offset document.json covers (an append in progress at its end is left for later).
    /// False when anything needs a repair, which `loadDocumentLocked` makes under the lock.
    func loadDocumentWithoutLock() throws -> Bool {
        // [PKG-86] The snapshot first, then the log: a log only grows while it keeps its
        // incarnation, so the offset document.json covers is then within what is read.
        let (read, identity) = try Document.readWithIdentity(paths.document, io: io)
        guard let bytes = read, let (f, s, assets) = try? DocumentFile.decode(bytes, path: paths.document), s.id == paths.id,
              try io.stat(paths.documentMissing) == nil,
              let (log, replay) = try PageLog.openForReading(path: paths.documentLog, kind: .document, owner: paths.id.uuid,
                                                             from: f.log.offset, incarnation: f.incarnation, io: io)
        else { return false }
        var report = replay.report
        var replica = DocumentReplica(state: s)
        var pending: [OpID: UInt64] = [:]
        do {
            try Document.feed(replay.frames, kind: .document, fromStart: false, path: paths.documentLog,
                              report: &report, pending: &pending) { try replica.receive($0) }
        } catch {
            try? log.close()
            throw error
        }
        pending = pending.filter { !replica.clock.covers($0.key) }
        if Document.ownOperationLost(pending: pending, report: report, clock: replica.clock, author: self.identity.current) {
            try? log.close()
            return false  // [PKG-56] needs a new replica id: under the lock
        }
        if !report.isClean { reports.append(report) }
        try? docLog.close()
        doc = replica
        docLog = log
        docPendingOffsets = pending
        pageAssets.merge(assets) { $0.union($1) }
        documentOnDisk = DocumentFileKey(clock: s.clock, coveredOffset: f.log.offset, incarnation: f.incarnation,
                                         assetsGeneration: pageAssets == assets ? assetsGeneration : -1)
        documentSource = ManifestFile.fingerprint(bytes)
        documentIdentity = identity
        return true
    }

    /// Reads the package under the document lock, repairing what needs it ([PKG-40],
    /// [PKG-47], [PKG-51], [PKG-56]).
    func loadDocumentLocked() throws {
        precondition(lockDepth > 0, "loadDocumentLocked needs the document lock")
        var opening: [RecoveryReport] = []
        var base = DocumentState(id: paths.id)
        var baseAssets: [PageID: Set<AssetID>] = [:]
        var covered: (UInt64, UInt64)?
        var onDisk: (key: DocumentFileKey, source: String, identity: [UInt64])?
        let (read, fileIdentity) = try Document.readWithIdentity(paths.document, io: io)
        if let bytes = read {
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
                          ManifestFile.fingerprint(bytes), fileIdentity)
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
        if Document.ownOperationLost(pending: pending, report: report, clock: replica.clock, author: author) {
            // [PKG-56] The next edit would take the id of one of its own that the log lost.
            do {
                report.mintedReplica = try identity.remint(reason: Document.ownOperationLostReason(paths.documentLog))
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
        try? docLog.close()
        self.doc = replica
        self.docLog = log
        self.docPendingOffsets = pending
        self.docMissing = OpRanges()
        self.pageAssets.merge(baseAssets) { $0.union($1) }
        self.documentOnDisk = onDisk.map {
            var k = $0.key
            k.assetsGeneration = pageAssets == baseAssets ? assetsGeneration : -1
            return k
        }
        self.documentSource = onDisk?.source ?? ""
        self.documentIdentity = onDisk?.identity ?? []
        self.reports += opening
        // [PKG-51] What the document's state holds that document.log lacks (see `loadedPage`).
        let fromHeader = replay.start == UInt64(LogHeader.size)
        if try fromHeader || io.stat(paths.documentMissing) != nil {
            try settleDocumentMissing(frames: fromHeader ? replay.frames : try docLog.readFrames(from: UInt64(LogHeader.size)))
        }
    }

    isolated deinit {
        if !closed {
            // The descriptors must be released: closing here cannot save (deinit cannot await)
            // but everything edited is already durable in the logs.
            try? docLog.close()
            try? undoFile?.close()
            for p in pages.values { try? p.log.close() }
            autosaveTask?.cancel()
            watcher?.stop()
            hub.finish()
        }
    }

    // MARK: - The document lock ([PKG-80] … [PKG-84])

    /// Runs `body` holding the document lock, after bringing the document log and the replica
    /// id up to date ([PKG-84], [PKG-89]). Sections nest (the outermost takes the lock). The
    /// body is synchronous: the lock is never held across a suspension, so no other call of
    /// this actor runs inside it.
    ///
    /// - Throws: `invalidState` when another holder kept the lock past `lockTimeout` ([PKG-81]).
    func locked<T>(_ body: () throws -> T) throws -> T {
        if lockDepth > 0 {
            lockDepth += 1
            defer { lockDepth -= 1 }
            return try body()
        }
        let held = try lock.acquire()
        lockDepth = 1
        defer {
            lockDepth = 0
            held.release()
        }
        try catchUpUnderLock()
        return try body()
    }

    /// `locked`, only when the lock is free now; nil (and `body` not run) otherwise.
    func tryLocked<T>(_ body: () throws -> T) throws -> T? {
        if lockDepth > 0 { return try locked(body) }
        guard let held = try lock.tryAcquire() else { return nil }
        lockDepth = 1
        defer {
            lockDepth = 0
            held.release()
        }
        try catchUpUnderLock()
        return try body()
    }

    private func catchUpUnderLock() throws {
        try identity.refreshIfChanged()
        if loaded { try refreshDocument() }
    }

    // MARK: - What other processes wrote ([PKG-87])

    /// Applies what `document.log` gained since this handle last read it (only the new
    /// frames); reads the document again when the log was replaced or shrank; salvages
    /// damage under the lock.
    func refreshDocument() throws {
        guard loaded, !closed, broken == nil else { return }
        switch try docLog.catchUp(underLock: lockDepth > 0) {
        case .unchanged:
            break
        case .grew(let frames):
            try applyDocumentFrames(frames, origin: .otherProcess)
        case .replaced:
            try reloadDocument()
        case .damaged:
            if lockDepth > 0 { _ = try salvageDocumentLog() } else { try locked {} }
        }
        for t in docLog.takeCutTails() {
            var r = RecoveryReport(path: docLog.path)
            r.tornTail = t
            reports.append(r)
        }
    }

    /// `refreshDocument` for the reads that cannot throw: a failure shows at the next call
    /// that can.
    func refreshQuietly() {
        try? refreshDocument()
    }

    /// Document frames another process appended: applied, and told to subscribers.
    func applyDocumentFrames(_ frames: [LoggedFrame], origin: Change.Origin) throws {
        var report = RecoveryReport(path: docLog.path)
        var pending: [OpID: UInt64] = [:]
        var next = doc
        let applied = try Document.feed(frames, kind: .document, fromStart: false, path: docLog.path,
                                        report: &report, pending: &pending) { try next.receive($0) }
        doc = next
        for (op, off) in pending where !doc.clock.covers(op) { docPendingOffsets[op] = min(docPendingOffsets[op] ?? off, off) }
        for op in docPendingOffsets.keys where doc.clock.covers(op) { docPendingOffsets[op] = nil }
        if Document.ownOperationLost(pending: docPendingOffsets, report: report, clock: doc.clock, author: replica) {
            // [PKG-56] As on loading: another process appended an operation of this replica
            // that this version cannot apply; the next edit would take its id.
            report.mintedReplica = try identity.remint(reason: Document.ownOperationLostReason(docLog.path))
        }
        for f in frames {
            guard let opID = OperationCodec.id(of: f.frame) else { continue }
            docMissing.remove(opID)  // another process appended what this log had lost ([PKG-54])
            if docLogIndex != nil && docLogIndex?[opID] == nil { docLogIndex?[opID] = f.offset }
        }
        if !report.isClean || report.mintedReplica != nil { reports.append(report) }
        emitDocumentEvents(applied, origin: origin)
    }

    /// Reads the document again from its files: its log was replaced (salvaged or repaired by
    /// another process) or lost frames this handle had read (rolled back by their writer).
    func reloadDocument() throws {
        try? docLog.close()
        doc = DocumentReplica(id: id)
        docLog = PageLog(absent: paths.documentLog, kind: .document, owner: id.uuid, io: io)
        docPendingOffsets = [:]
        docMissing = OpRanges()
        docLogIndex = nil
        documentOnDisk = nil
        documentSource = ""
        documentIdentity = []
        manifestBasis = nil
        if lockDepth > 0 {
            try loadDocumentLocked()
        } else if try !loadDocumentWithoutLock() {
            try locked { try loadDocumentLocked() }
        }
        hub.publish([Change(kind: .reloaded, origin: .otherProcess, document: id)])
    }

    /// Applies what a loaded page's log gained since this handle last read it ([PKG-87]).
    /// Returns false when the page was dropped (its log was replaced or shrank): the caller
    /// loads it again.
    @discardableResult
    func refreshPage(_ lp: LoadedPage) throws -> Bool {
        guard pages[lp.id] === lp else { return false }
        // A page that had no files, installed from a checkpoint by another process since: its
        // log does not hold what the base covers ([PKG-46]), so the files are read again.
        if lp.log.isAbsent, try io.stat(paths.base(lp.id)) != nil {
            drop(lp, because: LnoteError(.invalidState, "the page was installed from a checkpoint by another process", path: paths.base(lp.id)))
            hub.publish([Change(kind: .reloaded, origin: .otherProcess, document: id, page: lp.id)])
            return false
        }
        let caught = try lp.log.catchUp(underLock: lockDepth > 0)
        switch caught {
        case .grew, .damaged:
            // What other processes appended is applied onto the records: read first those a
            // listing open left unparsed ([SNAP-46]).
            guard readUnbuiltRecords(lp) else { return false }
        case .unchanged, .replaced:
            break
        }
        switch caught {
        case .unchanged:
            break
        case .grew(let frames):
            try applyPageFrames(frames, to: lp, origin: .otherProcess)
        case .replaced:
            drop(lp, because: LnoteError(.invalidState, "the page's log was rewritten by another process", path: lp.log.path))
            hub.publish([Change(kind: .reloaded, origin: .otherProcess, document: id, page: lp.id)])
            return false
        case .damaged:
            if lockDepth > 0 {
                _ = try salvagePage(lp)
            } else {
                return try locked { try refreshPage(lp) }
            }
        }
        for t in lp.log.takeCutTails() {
            var r = RecoveryReport(path: lp.log.path)
            r.tornTail = t
            reports.append(r)
        }
        return true
    }

    /// Page frames another process appended: applied, and told to subscribers.
    func applyPageFrames(_ frames: [LoggedFrame], to lp: LoadedPage, origin: Change.Origin) throws {
        var report = RecoveryReport(path: lp.log.path)
        var pending: [OpID: UInt64] = [:]
        let applied = try Document.feed(frames, kind: .page, fromStart: false, path: lp.log.path,
                                        report: &report, pending: &pending) { try lp.replica.receive($0) }
        for (op, off) in pending where !lp.replica.clock.covers(op) { lp.pendingOffsets[op] = min(lp.pendingOffsets[op] ?? off, off) }
        for op in lp.pendingOffsets.keys where lp.replica.clock.covers(op) { lp.pendingOffsets[op] = nil }
        if lp.log.pendingSalvage == nil,
           Document.ownOperationLost(pending: lp.pendingOffsets, report: report, clock: lp.replica.clock, author: replica) {
            // [PKG-56] As on loading: another process appended an operation of this replica
            // that this version cannot apply; the next edit would take its id.
            report.mintedReplica = try identity.remint(reason: Document.ownOperationLostReason(lp.log.path))
        }
        lp.framesSinceSnapshot += frames.count
        for f in frames {
            guard let opID = OperationCodec.id(of: f.frame) else { continue }
            lp.missing.remove(opID)
            if lp.logIndex != nil && lp.logIndex?[opID] == nil { lp.logIndex?[opID] = f.offset }
        }
        if !applied.isEmpty {
            lp.dirty = true
            lp.othersSinceSnapshot = true
        }
        if !report.isClean || report.mintedReplica != nil { reports.append(report) }
        noteAssets(of: applied.lazy.compactMap(\.addedContent), page: lp.id)
        emitPageEvents(applied, lp, origin: origin)
    }

    /// Forgets a loaded page whose log this handle can no longer trust.
    /// Reads the snapshot records a listing open left unparsed on a loaded page, if any
    /// ([SNAP-46]), before anything is applied onto them. False when they do not decode: the
    /// page is then dropped and marked to be loaded again with everything decoded at load,
    /// which finds the damage and handles it as at any open (a snapshot quarantined and the
    /// page rebuilt from its log, [PKG-42]).
    func readUnbuiltRecords(_ lp: LoadedPage) -> Bool {
        guard lp.replica.hasUnbuiltRecords else { return true }
        do {
            try lp.replica.buildRecords()
            return true
        } catch {
            eagerPages.insert(lp.id)
            drop(lp, because: error as? LnoteError ?? LnoteError(.corrupt, "\(error)", path: paths.content(lp.id)))
            // As a page whose deferred points fail is set aside (`setAsideDamagedPoints`).
            hub.publish([Change(kind: .reloaded, origin: .merge, document: id, page: lp.id)])
            return false
        }
    }

    func drop(_ lp: LoadedPage, because error: LnoteError) {
        guard pages[lp.id] === lp else { return }
        pages[lp.id] = nil
        failWaiters(.page(lp.id), error)
        try? lp.log.close()
        snapshotCounts[lp.id] = nil
    }

    // MARK: - Events

    /// Subscribes to what changes in this document, from now on (see `Change` and, for the
    /// buffering policy, `ChangeStream`): local edits when they are durable, merges from
    /// sync (`receive`) once durable, and what other processes append. While there is a
    /// subscriber the handle watches its package (inotify; polling where there is none), so
    /// other processes' appends to the pages it has loaded are applied and told within
    /// moments; a page it has not loaded is told as `pageChanged`. The stream ends when the
    /// handle closes.
    public var changes: ChangeStream {
        let stream = hub.subscribe(capacity: options.changeBufferCapacity)
        if !closed { startWatching() }
        return stream
    }

    func emitDocumentEvents(_ applied: [Op], origin: Change.Origin) {
        guard !applied.isEmpty, hub.hasSubscribers else { return }
        hub.publish(ChangeDerivation.document(applied, state: doc.state, document: id, origin: origin))
    }

    func emitPageEvents(_ applied: [Op], _ lp: LoadedPage, origin: Change.Origin) {
        guard !applied.isEmpty, hub.hasSubscribers else { return }
        hub.publish(ChangeDerivation.page(applied, replica: lp.replica, document: id, origin: origin))
    }

    private func startWatching() {
        guard watcher == nil else { return }
        recordUnloadedLogSizes()
        watcher = FolderWatcher(io: io, directories: [paths.root, paths.pages], pollInterval: options.pollInterval,
                                forcePolling: options.forcePolling) { [weak self] changed in
            self?.watched(changed)
        }
    }

    private nonisolated func watched(_ changed: Set<String>?) {
        let start = pendingWatch.withLock { w -> Bool in
            if let changed {
                w.paths?.formUnion(changed)
            } else {
                w.everything = true
            }
            defer { w.scheduled = true }
            return !w.scheduled
        }
        if start { Task { await self.refreshFromWatcher() } }
    }

    /// What the watcher saw: the document log and the loaded pages are brought up to date
    /// (their events told); pages not loaded whose log changed are told as `pageChanged`.
    func refreshFromWatcher() {
        let (changed, everything) = pendingWatch.withLock { w -> (Set<String>?, Bool) in
            defer { w = (false, [], false) }
            return (w.paths, w.everything)
        }
        guard !closed else { return }
        refreshQuietly()
        for lp in Array(pages.values) { _ = try? refreshPage(lp) }
        var changedPages: [PageID] = []
        if everything {
            for (pid, size) in currentUnloadedLogSizes() where unloadedLogSizes[pid] != size {
                changedPages.append(pid)
            }
        } else {
            for p in changed ?? [] where p.hasPrefix(paths.pages + "/") && p.hasSuffix(".log") {
                let name = DurableFile.split(p).name
                guard let pid = PageID(String(name.dropLast(4))), pages[pid] == nil else { continue }
                changedPages.append(pid)
            }
        }
        recordUnloadedLogSizes()
        guard hub.hasSubscribers else { return }
        hub.publish(changedPages.sorted().map { Change(kind: .pageChanged, origin: .otherProcess, document: id, page: $0) })
    }

    private func currentUnloadedLogSizes() -> [PageID: UInt64] {
        var out: [PageID: UInt64] = [:]
        for name in (try? io.listDirectory(paths.pages)) ?? [] where name.hasSuffix(".log") && !DurableFile.isTemporaryName(name) {
            guard let pid = PageID(String(name.dropLast(4))), pages[pid] == nil,
                  let st = try? io.stat(paths.log(pid)) else { continue }
            out[pid] = st.size
        }
        return out
    }

    private func recordUnloadedLogSizes() {
        unloadedLogSizes = currentUnloadedLogSizes()
    }

    // MARK: - Reading

    // Every read first applies what other processes appended ([PKG-87]); the reads that
    // cannot throw leave a failure to do so to the next call that can.

    /// The document's replicated state (title, pages in order including deleted ones, clocks).
    public var state: DocumentState {
        refreshQuietly()
        return doc.state
    }

    public var title: String {
        refreshQuietly()
        return doc.state.title.value
    }

    /// Live pages in document order, with their facts as of this moment.
    public var pageList: [PageInfo] {
        refreshQuietly()
        for lp in Array(pages.values) { _ = try? refreshPage(lp) }
        return doc.livePages.map { info($0) }
    }

    /// Pages that were deleted (soft: their content is kept and can be restored).
    public var deletedPages: [PageInfo] {
        refreshQuietly()
        for lp in Array(pages.values) { _ = try? refreshPage(lp) }
        return doc.state.pages.filter(\.deleted.value).map { info($0) }
    }

    /// A loaded page's facts come from its state; another page's from its snapshot's first
    /// bytes, cached (read here if no save needed them yet: a page deleted before this
    /// handle opened, or added since by sync). A failed read does not fail the listing: the
    /// page shows with `countsError` set, and the next listing reads again.
    private func info(_ p: PageRecord) -> PageInfo {
        var c = PageCounts.empty
        var countsError: LnoteError?
        if let lp = pages[p.id] {
            // From the replica's counts, not its state: a page loaded to be listed may hold
            // records not read yet ([SNAP-46]), which only a throwing call may read.
            c = PageCounts(elementCount: lp.replica.elementCount, modified: lp.replica.modifiedTime)
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
    /// Set when the last save could not write a snapshot, document.json or manifest.json (a
    /// full disk): the edits are durable in the logs and the write is retried by the next
    /// save ([PKG-23]). Still readable after `close()`.
    public var deferredSaveFailure: LnoteError? { deferredSave }

    /// Concurrent writes to the title, page order, canvas or deletion, and pages deleted while
    /// edited elsewhere ([MERGE-65]).
    public func conflicts() -> [Conflict] {
        refreshQuietly()
        for lp in Array(pages.values) { _ = try? refreshPage(lp) }
        // A page listed with its points deferred is checked first: its clock may cover a
        // replayed frame that its points' check drops ([LOG-27]).
        for (pid, lp) in pages where !lp.replica.isResolved { _ = try? loadedPage(pid, allowUnknown: true) }
        var clocks: [PageID: VectorClock] = [:]
        for (id, p) in pages where p.replica.isResolved { clocks[id] = p.replica.clock }
        return doc.conflicts(pageClocks: clocks)
    }

    // MARK: - Internals shared by the extensions

    /// The name of the thread this actor's code runs on (tests: a store thread, never one
    /// of Swift's cooperative threads).
    func currentThreadName() -> String? { ThreadName.current }

    func checkUsable() throws {
        if closed { throw LnoteError(.invalidState, "document is closed", path: paths.root) }
        if let broken { throw LnoteError(.invalidState, "document unusable after a failed write of document.log (\(broken)); reopen it", path: paths.root) }
    }

    /// Decodes frames into operations and feeds them to `receive` ([PKG-39]): malformed
    /// frames and operations of the wrong log are reported and skipped ([LOG-13]), with the
    /// ids their headers name in `report.undecodableOperations` ([PKG-56]); the engine skips
    /// operations it already has; operations still waiting for dependencies are remembered
    /// with their offsets so compaction never covers them. `decoded`: the frames' operations
    /// when the caller decoded them already (`decode(snapshot:…)`), in frame order.
    @discardableResult
    static func feed(_ frames: [LoggedFrame], skipping skip: Int = 0, kind: LogKind, fromStart: Bool, path: String,
                     report: inout RecoveryReport, pending: inout [OpID: UInt64], deferringPoints: Bool = false,
                     decoded predecoded: [Result<Op, any Error>]? = nil, decodedFrom: Int = 0,
                     receive: ([Op]) throws -> [Op]) throws -> [Op] {
        guard skip < frames.count else { return [] }
        var ops: [Op] = []
        ops.reserveCapacity(frames.count - skip)
        // The offset of each operation's frame (no table by id: a clean replay never needs one).
        var opOffsets: [UInt64] = []
        opOffsets.reserveCapacity(frames.count - skip)
        // Decoded where they are used: a serial replay (the usual one: a short tail) decodes
        // each frame right here, without a `Result` array copied out of. `decoded[j]` is the
        // operation of frame `first + j` (frames the caller applied already are skipped).
        let decoded: [Result<Op, any Error>], first: Int
        if let predecoded {
            (decoded, first) = (predecoded, decodedFrom)
        } else {
            let rest = skip == 0 ? frames : Array(frames[skip...])
            (decoded, first) = (decode(rest, path: path, deferringPoints: deferringPoints, onlyInParallel: true), skip)
        }
        for (i, lf) in frames.enumerated() where i >= skip {
            do {
                let op = try decoded.isEmpty || i < first ? decodeFrame(lf, path: path, deferringPoints: deferringPoints)
                                                         : decoded[i - first].get()
                guard op.body.isPageOperation == (kind == .page) else {
                    throw LnoteError(.corrupt, "\(op.body.name) operation in a \(kind) log", path: path, offset: Int(lf.offset))
                }
                opOffsets.append(lf.offset)
                ops.append(op)
            } catch let e as LnoteError {
                var m = e
                m.code = .corrupt
                m.message = "malformed operation: \(e.message)"
                m.path = path
                m.offset = Int(lf.offset)
                m.index = fromStart ? i : nil
                report.undecodable.append(m)
                if let id = OperationCodec.headerID(of: lf.frame) { report.undecodableOperations.append(id) }
            }
        }
        var applied: [Op]
        do {
            applied = try receive(ops)
        } catch {
            // One operation the engine refuses must not keep the others out: apply one by one.
            applied = []
            for (op, offset) in zip(ops, opOffsets) {
                do {
                    applied += try receive([op])
                } catch let e as LnoteError {
                    report.undecodable.append(LnoteError(.corrupt, "operation \(op.id) refused: \(e.message)", path: path,
                                                         offset: Int(offset)))
                    report.undecodableOperations.append(op.id)
                }
            }
        }
        var done = OpIDTable(minimumCapacity: applied.count)
        for op in applied { done.insert(op.id) }
        for (op, off) in zip(ops, opOffsets) where !done.contains(op.id) {
            pending[op.id] = min(pending[op.id] ?? off, off)
        }
        return applied
    }

    /// [PKG-56] True when the next edit of a log by `author` could take the id of one of its
    /// own operations that the log lost while peers may hold it: one of its operations waits
    /// for a lost one (`pending`, already less what `clock` covers), or a frame of its own
    /// did not decode or was refused by the engine (`report.undecodableOperations`) and the
    /// state does not count it.
    static func ownOperationLost(pending: [OpID: UInt64], report: RecoveryReport, clock: VectorClock,
                                 author: ReplicaID) -> Bool {
        pending.keys.contains { $0.replica == author }
            || report.undecodableOperations.contains { $0.replica == author && !clock.covers($0) }
    }

    static func ownOperationLostReason(_ path: String) -> String {
        "an operation of this replica in \(path) was lost (its frame does not decode or was refused, or operations wait for it)"
    }

    /// The operations of logged frames, in order, each or its decoding error. Frames decode
    /// independently: a long replay decodes them on several cores.
    /// With `onlyInParallel`, an empty array when the frames are too few to be worth the
    /// cores (the caller then decodes each with `decodeFrame`).
    static func decode(_ frames: [LoggedFrame], path: String, deferringPoints: Bool = false,
                       onlyInParallel: Bool = false) -> [Result<Op, any Error>] {
        let payloadBytes = frames.reduce(0) { $0 + $1.frame.payload.count }
        // Points deferred: a frame decodes in well under a microsecond, not worth the pool.
        let parallel = payloadBytes >= parallelFramePayloadBytes * (deferringPoints ? 8 : 1)
        @Sendable func decodeOne(_ lf: LoggedFrame) -> Result<Op, any Error> {
            Result { try decodeFrame(lf, path: path, deferringPoints: deferringPoints) }
        }
        guard parallel else {
            if onlyInParallel { return [] }
            // A plain loop: `Parallel.map`'s serial path is generic across modules, and its
            // unspecialized `map` cost a third as much as decoding 500 deferred frames.
            var out: [Result<Op, any Error>] = []
            out.reserveCapacity(frames.count)
            for lf in frames { out.append(decodeOne(lf)) }
            return out
        }
        return Parallel.map(frames.count) { decodeOne(frames[$0]) }
    }

    /// The operation of one logged frame.
    static func decodeFrame(_ lf: LoggedFrame, path: String, deferringPoints: Bool) throws -> Op {
        try OperationCodec.decode(lf.frame, base: lf.payloadBase, path: path,
                                  deferringPoints: deferringPoints)
    }

    /// Frames holding at least this many payload bytes decode on several cores. A page's log
    /// tail of 500 short pen strokes holds about 50 KiB and took 1.4 ms to decode serially
    /// (2.8 µs a frame), far above what handing the work to the pool costs (tens of µs).
    static let parallelFramePayloadBytes = 16 * 1024

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

    /// The anchor a page log this document creates starts with ([PKG-110]): this replica,
    /// now.
    nonisolated func newLogAnchor() -> LogAnchor { LogAnchor(writer: replica.rawValue, baseWallTime: options.now()) }
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
    /// True when another process appended to the log since this handle's last snapshot of
    /// it: that process may have written a snapshot covering as much ([PKG-88]).
    var othersSinceSnapshot = false
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
