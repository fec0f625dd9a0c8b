#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import Synchronization
import LnoteModel
import LnoteReplication

/// A folder of `.lnote` packages with its replica identity (`.lnote/replica.json`).
///
/// **Several processes.** Any number of processes may open the same folder at once
/// ([PKG-61]): an app, `lnote serve`, `lnote sync --watch` and any other command. Nothing is
/// locked while the folder is open. Every process of the folder writes under its one
/// replica id; what keeps operation ids unique is the document lock each takes around an
/// append, under which it first reads what the log gained ([PKG-84]). Files in `.lnote/`
/// are written under the notebook lock `.lnote/lock`, held for one write ([PKG-83]).
///
/// **Threads.** The actor runs on a thread of its own (`StoreExecutor`), as each open
/// `Document` does.
///
/// **Handles.** `openDocument` hands out one shared `Document` per document, counting leases
/// ([PKG-94]): see `Document`.
public actor Notebook {
    /// The folder's absolute path (symlinks resolved).
    public nonisolated let path: String
    /// The replica id this folder writes under now (it changes when one is minted:
    /// `remintReplica`).
    public nonisolated var replica: ReplicaID { identity.current }
    /// Set when the folder's recorded location no longer matched and a new replica id was
    /// minted (the folder was copied or moved) ([PKG-60]).
    public nonisolated let replicaChange: ReplicaChange?
    /// Set when opening found `.lnote/replica.json` missing or damaged and minted a new
    /// replica id ([PKG-60], [PKG-66]); a caller tells its user.
    public nonisolated let replicaFileRecovery: ReplicaFileRecovery?
    /// Replica ids this folder wrote under before (oldest first).
    public nonisolated var previousReplicas: [ReplicaID] { identity.previous }
    /// Every replica id change since the notebook was opened, in order: the one opening made
    /// (`replicaChange`), then those minted by `remintReplica` (sync, [SYNC-54], [SYNC-55]) or
    /// by a document that found its own operations lost ([PKG-56]), or by another process of
    /// the folder ([PKG-89]).
    public nonisolated var replicaChanges: [ReplicaChange] { identity.changes }
    /// The id shared with every document this notebook opens.
    public nonisolated let identity: ReplicaIdentity
    nonisolated let io: Syscalls
    let options: StoreOptions
    /// The thread this actor runs on.
    nonisolated let executor: StoreExecutor
    public nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
    /// `.lnote/lock` ([PKG-83]): held for each write in `.lnote/`.
    nonisolated let notebookLock: FileLock
    var isOpenFlag = true
    /// Documents a clock computation (`logClocks`, hence a sync) left out because a name in
    /// their package is a symlink, FIFO, socket, device or a misplaced directory ([PKG-22]),
    /// with the error naming it. A sync neither reads nor serves them.
    public internal(set) var refusedDocuments: [DocumentID: LnoteError] = [:]
    /// Documents open in this notebook, each with its leases ([PKG-94]).
    private var documents: [DocumentID: OpenDocument] = [:]
    /// The origin of this process's document operations, for `changes` (see `OriginRegistry`).
    nonisolated let origins = OriginRegistry()
    /// Where `changes` subscribers get their events.
    nonisolated let hub = ChangeHub(document: nil)
    /// What `changes` reads: every document's log, while there are subscribers.
    var following: Following?
    nonisolated let pendingWatch = Mutex<(scheduled: Bool, paths: Set<String>?, everything: Bool, documents: Set<DocumentID>)>(
        (false, [], false, []))

    /// One open document and who holds it.
    final class OpenDocument {
        let task: Task<Document, Error>
        /// Leases of `openDocument` callers (given back by `Document.close()`).
        var external = 0
        /// Leases of this notebook's own work (`withDocument`: sync, delete, restore…).
        var internalLeases = 0
        /// Set, in the same turn of the actor that gave back the last lease, while the close
        /// runs: an `acquire` meanwhile waits for it. The task removes this entry from
        /// `documents` before it completes, so whoever it wakes finds the entry gone.
        var closing: Task<Void, Error>?
        init(task: Task<Document, Error>) { self.task = task }
    }

    /// Opens (or with `create`, creates) a notebook folder. Other processes may have it open
    /// too ([PKG-61]).
    ///
    /// - Throws: `notFound` when the folder does not exist and `create` is false; `corrupt`
    ///   for an unreadable replica.json; `invalidState` when another process holds the
    ///   notebook lock past `lockTimeout`; `io`.
    public static func open(at path: String, create: Bool = false, options: StoreOptions = StoreOptions()) async throws -> Notebook {
        try await Notebook(path: path, create: create, options: options, io: .live)
    }

    /// Opens on the notebook's own thread: creates the folder if asked, reads (or mints,
    /// [PKG-60]) the replica id under the notebook lock ([PKG-89]), and removes what
    /// interrupted writes left in `.lnote/` and the folder when nobody holds the notebook
    /// lock ([PKG-91]).
    init(path: String, create: Bool, options: StoreOptions, io: Syscalls,
         machineIDPath: String = "/etc/machine-id") async throws {
        let executor = StoreExecutor(name: "lnote.notebook")
        let timeout = options.lockTimeout
        let newReplica = options.newReplicaID
        let opened = try await executor.run { () -> Opened in
            if try io.stat(path) == nil {
                guard create else { throw LnoteError(.notFound, "no notebook folder", path: path) }
                try io.mkdir(path, existingOK: true)
                try DurableFile.syncDirectory(DurableFile.split(path).dir, io: io)
            }
            let abs = try io.realpath(path)
            let meta = DurableFile.join(abs, ".lnote")
            var newFolder = false
            if io.fileType(atPath: meta) == nil {
                try io.mkdir(meta, existingOK: true)
                try DurableFile.syncDirectory(abs, io: io)
                newFolder = true
            } else if let kind = io.fileType(atPath: meta), kind != "directory" {
                throw Syscalls.notRegular(meta, kind: kind, wantsDirectory: true)
            }
            let lock = FileLock.notebook(abs, io: io, timeout: timeout)
            let found = try lock.withLock {
                try Notebook.identity(folder: abs, meta: meta, machineIDPath: machineIDPath, newReplica: newReplica,
                                      newFolder: newFolder, io: io)
            }
            if let held = try lock.tryAcquire() {
                defer { held.release() }
                try DurableFile.removeTemporaryFiles(in: meta, io: io)
                for sub in [Quarantine.folder(abs), DurableFile.join(meta, "remotes"), DurableFile.join(meta, "incoming")]
                where try io.stat(sub)?.isDirectory == true {
                    try DurableFile.removeTemporaryFiles(in: sub, io: io)
                }
                try Notebook.removeTemporaries(in: abs, io: io)
            }
            return Opened(path: abs, replica: found.replica, change: found.change, previous: found.previous,
                          fingerprint: found.fingerprint, recovery: found.recovery, unsaved: found.unsaved)
        }
        self.executor = executor
        self.io = io
        self.options = options
        self.path = opened.path
        self.notebookLock = FileLock.notebook(opened.path, io: io, timeout: timeout)
        self.replicaChange = opened.change
        self.replicaFileRecovery = opened.recovery
        self.identity = ReplicaIdentity(file: DurableFile.join(DurableFile.join(opened.path, ".lnote"), "replica.json"),
                                        fingerprint: opened.fingerprint, current: opened.replica, previous: opened.previous,
                                        change: opened.change, unsaved: opened.unsaved, io: io, lock: notebookLock)
    }

    private struct Opened: Sendable {
        var path: String
        var replica: ReplicaID
        var change: ReplicaChange?
        var previous: [ReplicaID]
        var fingerprint: ReplicaFile.Fingerprint
        var recovery: ReplicaFileRecovery?
        var unsaved: [UInt8]?
    }

    isolated deinit {
        following?.watcher.stop()
        hub.finish()
    }

    /// Removes temporary files and staged package directories left by interrupted writes,
    /// under the notebook lock ([PKG-91]). A staged package is removed only when its lock file
    /// is missing or free: a process still creating it holds it.
    static func removeTemporaries(in folder: String, io: Syscalls) throws {
        var removed = false
        for name in try io.listDirectory(folder) where DurableFile.isTemporaryName(name) {
            let p = DurableFile.join(folder, name)
            if let st = try io.stat(p), st.isDirectory {
                let lockPath = DurableFile.join(p, "lock")
                if try io.stat(lockPath) != nil {
                    guard let held = try FileLock(path: lockPath, io: io, timeout: .zero).tryAcquire() else { continue }
                    defer { held.release() }
                    try io.removeTree(p)
                } else {
                    try io.removeTree(p)
                }
            } else {
                try io.unlink(p, missingOK: true)
            }
            removed = true
        }
        if removed { try DurableFile.syncDirectory(folder, io: io) }
    }

    // MARK: - Identity

    struct ReplicaFile: Codable, Equatable {
        struct Fingerprint: Codable, Equatable {
            var device: UInt64
            var inode: UInt64
            var path: String
            var machine: String?
        }
        var format: Int
        var replica: String
        var fingerprint: Fingerprint
        var previous: [String]
        /// Ids of `previous` replaced to repair a fork of this folder's own operations whose
        /// repair has not finished ([SYNC-54]): a sync that was stopped (killed) after the
        /// new id was written resumes it. Absent when none (the file as before).
        var repairing: [String]? = nil
    }

    static func fingerprint(folder: String, machineIDPath: String, io: Syscalls) throws -> ReplicaFile.Fingerprint {
        guard let st = try io.stat(folder) else { throw LnoteError(.notFound, "notebook folder vanished", path: folder) }
        var machine: String?
        if let bytes = try? DurableFile.readIfExists(machineIDPath, io: io, followingSymlinks: true) {
            let s = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            if !s.isEmpty { machine = s }
        }
        return .init(device: st.device, inode: st.inode, path: folder, machine: machine)
    }

    /// Reads `.lnote/replica.json`, minting a replica id when there is none or when the
    /// folder is not where (or on the machine) it was ([PKG-60]).
    static func identity(folder: String, meta: String, machineIDPath: String, newReplica: ReplicaID? = nil,
                         newFolder: Bool = false, io: Syscalls) throws -> (replica: ReplicaID, change: ReplicaChange?, previous: [ReplicaID],
                                                  fingerprint: ReplicaFile.Fingerprint, recovery: ReplicaFileRecovery?,
                                                  unsaved: [UInt8]?) {
        let file = DurableFile.join(meta, "replica.json")
        let here = try fingerprint(folder: folder, machineIDPath: machineIDPath, io: io)
        var damage: LnoteError?
        switch try readReplicaFile(file, io: io) {
        case .missing:
            break
        case .damaged(let e):
            damage = e
        case .valid(let r, let id):
            let previous = r.previous.compactMap { ReplicaID(hex: $0) }
            if r.fingerprint == here { return (id, nil, previous, here, nil, nil) }
            var reasons: [String] = []
            if r.fingerprint.path != here.path { reasons.append("path \(r.fingerprint.path) → \(here.path)") }
            if r.fingerprint.device != here.device || r.fingerprint.inode != here.inode { reasons.append("different directory (device/inode)") }
            if r.fingerprint.machine != here.machine { reasons.append("different machine") }
            var fresh = ReplicaID.random()
            while fresh == id || previous.contains(fresh) { fresh = ReplicaID.random() }
            let all = previous + [id]
            var out = ReplicaFile(format: 1, replica: fresh.description, fingerprint: here, previous: all.map(\.description))
            out.repairing = r.repairing  // a fork repair left unfinished is still this folder's to finish
            let unsaved = try writeReplicaFile(file, try StoreJSON.encode(out), io: io)
            var change = ReplicaChange(old: id, new: fresh, reason: reasons.joined(separator: "; "))
            change.unsaved = unsaved != nil
            return (fresh, change, all, here, nil, unsaved)
        }
        // [PKG-66] Missing or damaged: a new random id. A damaged file is renamed aside first
        // (`replica.json.corrupt-<n>`, evidence for a person; nothing is read from it: an id
        // it seems to hold cannot be proved to be this folder's).
        var setAside: String?
        if let damage {
            var n = 1
            while io.fileType(atPath: "\(file).corrupt-\(n)") != nil { n += 1 }
            let aside = "\(file).corrupt-\(n)"
            try io.rename(file, aside)
            setAside = aside
        }
        let fresh = newReplica ?? ReplicaID.random()
        let out = ReplicaFile(format: 1, replica: fresh.description, fingerprint: here, previous: [])
        let unsaved = try writeReplicaFile(file, try StoreJSON.encode(out), io: io)
        // A `.lnote` this opening just made is a new notebook, not a recovery.
        let recovery = newFolder && damage == nil
            ? nil : ReplicaFileRecovery(minted: fresh, problem: damage?.description ?? "missing", setAside: setAside)
        return (fresh, nil, [], here, recovery, unsaved)
    }

    /// Writes a minted replica.json by durable replace. On a full disk (ENOSPC, EDQUOT) the
    /// bytes are returned instead, for `ReplicaIdentity.writable()` to write before the first
    /// operation made under the new id ([PKG-24]): reading needs no id on disk.
    static func writeReplicaFile(_ file: String, _ bytes: [UInt8], io: Syscalls) throws -> [UInt8]? {
        do {
            try DurableFile.replace(file, with: bytes, io: io)
            return nil
        } catch let e as LnoteError where e.isDiskFull || e.isReadOnly {
            // Also a folder on read-only media: it is read under the new id, and the first
            // operation made under it fails writing replica.json, before anything else.
            return bytes
        }
    }

    enum ReplicaFileRead {
        case missing
        case damaged(LnoteError)
        case valid(ReplicaFile, ReplicaID)
    }

    /// Reads and checks `.lnote/replica.json` ([PKG-66]). Damaged: not a regular file, not
    /// JSON, wrong types or fields, a number out of range, a replica id that is not 16 hex
    /// digits or is zero, a format below 1. A well-formed file of a newer format (a valid
    /// object with `format` > 1) throws `unsupportedVersion` and is left alone.
    static func readReplicaFile(_ file: String, io: Syscalls) throws -> ReplicaFileRead {
        let bytes: [UInt8]
        do {
            guard let b = try DurableFile.readIfExists(file, io: io) else { return .missing }
            bytes = b
        } catch let e as LnoteError where e.code == .corrupt {
            return .damaged(e)  // a symlink, FIFO, directory… ([PKG-22])
        }
        do {
            let v = try ReplicaFile.decodeValidated(bytes, path: file)
            return .valid(v.file, v.replica)
        } catch let e as LnoteError where e.code != .io && e.code != .unsupportedVersion {
            return .damaged(e)
        }
    }

    // MARK: - Library

    /// The documents of the folder, read from their manifests only ([PKG-62]): no
    /// document.json, log or page is opened. Packages whose manifest is missing or
    /// unreadable are listed with that status (`reconcile` rebuilds them). Newest first.
    public func list(includeDeleted: Bool = false) throws -> [DocumentSummary] {
        try checkOpen()
        return try Notebook.list(folder: path, includeDeleted: includeDeleted, io: io)
    }

    /// `list` without opening the notebook (no lock: it only reads manifests), for tools
    /// that run while an app has the folder open.
    public static func list(at path: String, includeDeleted: Bool = false) throws -> [DocumentSummary] {
        // The folder a user names may be reached through a symlink; inside it none is
        // followed ([PKG-22]).
        let resolved = Syscalls.live.fileType(atPath: path) == "symlink" ? (try? Syscalls.live.realpath(path)) ?? path : path
        return try list(folder: resolved, includeDeleted: includeDeleted, io: .live)
    }

    static func list(folder path: String, includeDeleted: Bool, io: Syscalls) throws -> [DocumentSummary] {
        var out: [DocumentSummary] = []
        for name in try io.listDirectory(path) {
            guard let docID = PackagePaths.documentID(fromName: name) else { continue }
            let paths = PackagePaths(folder: path, id: docID)
            let summary: DocumentSummary
            do {
                if let bytes = try DurableFile.readIfExists(paths.manifest, io: io) {
                    var s = try ManifestFile.decode(bytes, path: paths.manifest).summary
                    if s.id != docID { s.manifest = .unreadable("manifest names document \(s.id)"); s.id = docID }
                    summary = s
                } else {
                    summary = DocumentSummary(id: docID, title: "", created: 0, modified: 0, pageCount: 0, elementCount: 0,
                                              coverPage: nil, deleted: false, manifest: .missing)
                }
            } catch let e as LnoteError where e.code != .io {
                summary = DocumentSummary(id: docID, title: "", created: 0, modified: 0, pageCount: 0, elementCount: 0,
                                          coverPage: nil, deleted: false, manifest: .unreadable(e.description))
            }
            if summary.deleted && !includeDeleted { continue }
            out.append(summary)
        }
        return out.sorted { ($0.modified, $1.id) > ($1.modified, $0.id) }
    }

    /// Rebuilds manifests that are missing, unreadable, or stale (not what document.json and
    /// the page snapshots on disk call for, [PKG-13]), and brings document.json up to date
    /// with its log, by opening and closing each such document. `nil`: every document.
    /// Returns the documents whose files were rebuilt. (A document another process is saving
    /// at that moment may look stale and be opened for nothing: harmless.)
    @discardableResult
    public func reconcile(_ only: DocumentID? = nil) async throws -> [DocumentID] {
        try checkOpen()
        var ids: [DocumentID] = []
        if let only { ids = [only] } else {
            ids = try io.listDirectory(path).compactMap(PackagePaths.documentID(fromName:))
        }
        var rebuilt: [DocumentID] = []
        for docID in ids {
            let paths = PackagePaths(folder: path, id: docID)
            if isOpen(docID) {
                try await withDocument(docID) { try await $0.flush() }
                continue
            }
            if try Notebook.manifestIsCurrent(paths, io: io) { continue }
            try await withDocument(docID) { _ in }
            rebuilt.append(docID)
        }
        return rebuilt
    }

    /// True when manifest.json holds exactly what document.json on disk and the summaries
    /// of its live pages' snapshots call for ([PKG-13]): one prefix read per live page (with
    /// its own element count where a page's snapshot is in a newer format, [PKG-13] 5).
    static func manifestIsCurrent(_ paths: PackagePaths, io: Syscalls) throws -> Bool {
        guard let m = try DurableFile.readIfExists(paths.manifest, io: io),
              let d = try DurableFile.readIfExists(paths.document, io: io),
              let (_, state, _) = try? DocumentFile.decode(d, path: paths.document) else { return false }
        let previous = try? ManifestFile.decode(m, path: paths.manifest)
        let expected = try ManifestFile.expected(paths: paths, documentBytes: d, state: state, previous: previous, io: io)
        return try StoreJSON.encode(expected) == m
    }

    // MARK: - Documents

    /// Creates a document (atomically: [PKG-2]) with one page unless `firstPage` is nil,
    /// and opens it (one lease, given back by `close()`).
    public func createDocument(title: String, firstPage: CanvasSize? = .a4) async throws -> Document {
        try checkOpen()
        let docID = DocumentID()
        let ops = try Document.initialOperations(id: docID, title: title, firstPage: firstPage, replica: try identity.writable(),
                                                 now: options.now())
        origins.registerCreated(docID, origin: .local)
        _ = try Document.createPackage(folder: path, id: docID, ops: ops, io: io, notebookLock: notebookLock)
        pokeFollowing(docID)
        return try await openDocument(docID)
    }

    /// Opens a document: the same handle for every caller while it stays open, even when
    /// several ask at once ([PKG-94]). Each call is one lease, which the caller gives back
    /// with `Document.close()`; the handle is closed when the last lease is given back (the
    /// notebook's own work holds leases too), or by `Notebook.close()`.
    public func openDocument(_ docID: DocumentID) async throws -> Document {
        try await acquire(docID, external: true)
    }

    /// Takes a lease on a document, opening it when nobody holds it. The opening task is in
    /// the table before the first suspension, so concurrent calls share it.
    func acquire(_ docID: DocumentID, external: Bool) async throws -> Document {
        try checkOpen()
        // Awaiting a finished task does not suspend: were the entry still here once its close
        // is done, this loop would spin on the notebook's thread, never letting the job that
        // removes it run. The closing task removes it before completing; removing it here too
        // keeps the loop finite whatever completes first.
        while let e = documents[docID], let closing = e.closing {
            _ = await closing.result
            if documents[docID] === e { documents[docID] = nil }
        }
        try checkOpen()
        if let e = documents[docID] {
            if external { e.external += 1 } else { e.internalLeases += 1 }
            do {
                return try await e.task.value
            } catch {
                if documents[docID] === e { documents[docID] = nil }
                throw error
            }
        }
        let paths = PackagePaths(folder: path, id: docID)
        let (identity, io, options, origins) = (identity, io, options, origins)
        // The lease is set before any caller gets the handle: a caller that closes it at once
        // gives back its lease, and never closes the handle under the others.
        let e = OpenDocument(task: Task { [weak self] in
            let d = try await Document.open(paths: paths, identity: identity, io: io, options: options, origins: origins)
            await d.setLease { [weak self] id in
                guard let self else { return false }
                try await self.release(id, external: true)
                return true
            }
            return d
        })
        if external { e.external = 1 } else { e.internalLeases = 1 }
        documents[docID] = e
        do {
            return try await e.task.value
        } catch {
            if documents[docID] === e { documents[docID] = nil }
            throw error
        }
    }

    /// Gives a lease back. When it was the last, the document is closed (its files
    /// released); otherwise a caller's lease (`Document.close()`) first saves what changed,
    /// still holding its lease: the handle cannot be closed under that save by another
    /// holder giving back the last lease meanwhile.
    ///
    /// The last lease's close starts in the same turn of the actor that counts zero leases
    /// (no suspension between): an `acquire` then either took its lease before (and the
    /// document stays open) or waits for the close and opens the document again.
    func release(_ docID: DocumentID, external: Bool) async throws {
        guard let e = documents[docID], e.closing == nil else { return }
        if external {
            guard e.external > 0 else { return }  // closed more often than opened: nothing to give back
        } else if e.internalLeases == 0 {
            return
        }
        var failure: Error?
        if external && e.external + e.internalLeases > 1 {
            do { try await e.task.value.flush() } catch { failure = error }
            // Our lease kept the entry open; only `Notebook.close()` may have closed it since.
            guard documents[docID] === e, e.closing == nil else {
                if let failure { throw failure }
                return
            }
        }
        if external { e.external -= 1 } else { e.internalLeases -= 1 }
        if e.external == 0 && e.internalLeases == 0 {
            let closing = startClosing(docID, e)
            if case .failure(let error) = await closing.result { failure = failure ?? error }
        }
        if let failure { throw failure }
    }

    /// Closes the document of an entry nobody holds a lease on, then removes the entry (on
    /// this actor, before the task completes).
    private func startClosing(_ docID: DocumentID, _ e: OpenDocument) -> Task<Void, Error> {
        let closing = Task { [self] in
            var failure: Error?
            do { try await e.task.value.closeNow() } catch { failure = error }
            if documents[docID] === e { documents[docID] = nil }
            if let failure { throw failure }
        }
        e.closing = closing
        return closing
    }

    /// True when this notebook has the document open (another process may have it open too).
    func isOpen(_ docID: DocumentID) -> Bool { documents[docID] != nil }

    /// Deletes a document softly (a `deleteDocument` operation, replicated like any other;
    /// the package stays and `restoreDocument` brings it back). A handle an app holds stays
    /// open ([PKG-94]).
    public func deleteDocument(_ docID: DocumentID) async throws {
        try await withDocument(docID) { try await $0.markDeleted() }
    }

    public func restoreDocument(_ docID: DocumentID) async throws {
        try await withDocument(docID) { try await $0.restore() }
    }

    /// Checks the folder ([PKG-70]); see `Verify`. Each document is checked holding its lock
    /// (so no append or save in any process is seen half done). With `removeTemporaryFiles`,
    /// temporary files left by interrupted writes are removed first, in each document whose
    /// lock is free now (a temporary file is then a dead writer's, [PKG-91]), and listed in
    /// `removedTemporaryFiles`.
    public func verify(removeTemporaryFiles: Bool = false) throws -> VerifyReport {
        try checkOpen()
        var removed: [String] = []
        if removeTemporaryFiles {
            for docID in try io.listDirectory(path).compactMap(PackagePaths.documentID(fromName:)) {
                let p = PackagePaths(folder: path, id: docID)
                guard let held = try FileLock.document(p, io: io, timeout: options.lockTimeout).tryAcquire() else { continue }
                defer { held.release() }
                for dir in [p.root, p.pages, p.assets, p.thumbnails] where try io.stat(dir)?.isDirectory == true {
                    removed += try DurableFile.removeTemporaryFiles(in: dir, io: io).map { DurableFile.join(dir, $0) }
                }
            }
        }
        var report = try Verify.run(folder: path, io: io, lockTimeout: options.lockTimeout)
        report.removedTemporaryFiles = removed
        return report
    }

    /// Closes every open document (whoever holds it) and stops `changes`.
    public func close() async throws {
        guard isOpenFlag else { return }
        isOpenFlag = false
        var failure: Error?
        for (_, e) in documents {
            if let closing = e.closing {
                _ = await closing.result
                continue
            }
            do {
                let d = try await e.task.value
                try await d.closeNow()
            } catch { failure = failure ?? error }
        }
        documents = [:]
        following?.watcher.stop()
        following = nil
        hub.finish()
        if let failure { throw failure }
    }

    /// The wall-clock time this notebook stamps (ms since 1970; `StoreOptions.now`).
    public nonisolated var wallTime: Int64 { options.now() }

    /// Replaces the folder's replica id by a new random one ([PKG-60]): the old id is appended
    /// to `previous` in `.lnote/replica.json`, which is rewritten durably before this returns,
    /// and every document open here stamps its later operations with the new id; other
    /// processes of the folder adopt it before their next append ([PKG-89]). For sync, which
    /// calls it when another copy of the folder wrote under the current id
    /// (sync-protocol.md [SYNC-54], [SYNC-55]).
    ///
    /// - Parameter reason: why, kept in the returned change (and in `replicaChanges`).
    /// - Throws: `io` when `replica.json` cannot be written (the id is then unchanged).
    @discardableResult
    public func remintReplica(reason: String) throws -> ReplicaChange {
        try remintReplica(reason: reason, repairingFork: false)
    }

    /// Declares `id`, one of `previousReplicas`, this folder's own for fork repairs
    /// ([SYNC-54]): the operations the folder holds under it were made here (it was moved,
    /// not copied). The next sync compares clocks, and each fork of `id` it finds is repaired
    /// as one of the folder's own: its version made again under the current id, the
    /// remote's kept under `id`. Written to replica.json (`repairing`) at once, so a sync
    /// stopped half-way resumes it. False when it was declared already.
    /// - Throws: `invalidArgument` when `id` is not a former id of this folder.
    @discardableResult
    public func adoptFormerReplica(_ id: ReplicaID) throws -> Bool {
        try checkOpen()
        return try identity.markRepairing(id)
    }

    /// `remintReplica(reason:)`; with `repairingFork`, replica.json also lists the old id in
    /// `repairing` ([SYNC-54]): a sync stopped before it repaired the forks made under it
    /// resumes the repair.
    public func remintReplica(reason: String, repairingFork: Bool) throws -> ReplicaChange {
        try checkOpen()
        return try identity.remint(reason: reason, repairingFork: repairingFork)
    }

    /// The name of the thread this actor's code runs on (tests).
    func currentThreadName() -> String? { ThreadName.current }

    func checkOpen() throws {
        guard isOpenFlag else { throw LnoteError(.invalidState, "notebook is closed", path: path) }
    }
}

/// A replica id change found when opening a copied or moved folder.
/// What opening a notebook did about a missing or damaged `.lnote/replica.json` ([PKG-66]).
public struct ReplicaFileRecovery: Sendable, Hashable, CustomStringConvertible {
    /// The id minted for this folder.
    public var minted: ReplicaID
    /// "missing", or what was wrong with the file.
    public var problem: String
    /// Where the damaged file was kept (`.lnote/replica.json.corrupt-<n>`); nil when missing.
    public var setAside: String?
    public var description: String {
        if let setAside {
            return "replica.json was damaged (\(problem)); kept as \(setAside); this folder now writes under a new replica id \(minted)"
        }
        return "replica.json was missing; this folder now writes under a new replica id \(minted)"
    }
}

public struct ReplicaChange: Sendable, Hashable, CustomStringConvertible {
    public var old: ReplicaID
    public var new: ReplicaID
    /// What differed: path, device/inode, machine.
    public var reason: String
    /// True when the new id could not be written to `.lnote/replica.json` (read-only media,
    /// a full disk): it is used for this run, and written before anything is made under it.
    public var unsaved = false
    public var description: String {
        "replica id \(old) → \(new) (\(reason))" + (unsaved ? "; not saved (the folder may not be written now): used for this run" : "")
    }
}
