#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import LnoteModel
import LnoteReplication

/// A folder of `.lnote` packages with its replica identity (`.lnote/replica.json`).
///
/// One process at a time: opening takes an exclusive `flock` on `.lnote/lock` ([PKG-61]),
/// so two writers never stamp operations with the same replica id.
public actor Notebook {
    /// The folder's absolute path (symlinks resolved).
    public nonisolated let path: String
    /// The replica id this folder writes under now (it changes when one is minted:
    /// `remintReplica`).
    public nonisolated var replica: ReplicaID { identity.current }
    /// Set when the folder's recorded location no longer matched and a new replica id was
    /// minted (the folder was copied or moved) ([PKG-60]).
    public nonisolated let replicaChange: ReplicaChange?
    /// Replica ids this folder wrote under before (oldest first).
    public nonisolated var previousReplicas: [ReplicaID] { identity.previous }
    /// Every replica id change since the notebook was opened, in order: the one opening made
    /// (`replicaChange`), then those minted by `remintReplica` (sync, [SYNC-54], [SYNC-55]) or
    /// by a document that found its own operations lost ([PKG-56]).
    public nonisolated var replicaChanges: [ReplicaChange] { identity.changes }
    /// The id shared with every document this notebook opens.
    public nonisolated let identity: ReplicaIdentity
    nonisolated let io: Syscalls
    let options: StoreOptions
    private var lock: FileDescriptor?
    private var documents: [DocumentID: Document] = [:]

    /// Opens (or with `create`, creates) a notebook folder.
    ///
    /// - Throws: `notFound` when the folder does not exist and `create` is false;
    ///   `invalidState` when another process has it open; `corrupt` for an unreadable
    ///   replica.json; `io`.
    public static func open(at path: String, create: Bool = false, options: StoreOptions = StoreOptions()) async throws -> Notebook {
        try await Notebook(path: path, create: create, options: options, io: .live)
    }

    init(path: String, create: Bool, options: StoreOptions, io: Syscalls,
         machineIDPath: String = "/etc/machine-id") async throws {
        self.io = io
        self.options = options
        if try io.stat(path) == nil {
            guard create else { throw LnoteError(.notFound, "no notebook folder", path: path) }
            try io.mkdir(path)
            try DurableFile.syncDirectory(DurableFile.split(path).dir, io: io)
        }
        let abs = try io.realpath(path)
        self.path = abs
        let meta = DurableFile.join(abs, ".lnote")
        try io.mkdir(meta, existingOK: true)
        let lockFD = try io.open(DurableFile.join(meta, "lock"), O_RDWR | O_CREAT)
        do {
            guard try io.tryLock(lockFD) else {
                throw LnoteError(.invalidState, "the notebook is open in another process", path: abs)
            }
            try DurableFile.removeTemporaryFiles(in: meta, io: io)
            let quarantine = Quarantine.folder(abs)
            if try io.stat(quarantine)?.isDirectory == true { try DurableFile.removeTemporaryFiles(in: quarantine, io: io) }
            try Notebook.removeTemporaries(in: abs, io: io)
            let found = try Notebook.identity(folder: abs, meta: meta, machineIDPath: machineIDPath,
                                              newReplica: options.newReplicaID, io: io)
            self.replicaChange = found.change
            self.identity = ReplicaIdentity(file: DurableFile.join(meta, "replica.json"), fingerprint: found.fingerprint,
                                            current: found.replica, previous: found.previous, change: found.change, io: io)
        } catch {
            try? lockFD.close()
            throw error
        }
        self.lock = lockFD
    }

    isolated deinit {
        if let lock, lock.isOpen { try? lock.close() }
    }

    /// Removes temporary files and staged package directories left by interrupted writes.
    static func removeTemporaries(in folder: String, io: Syscalls) throws {
        var removed = false
        for name in try io.listDirectory(folder) where DurableFile.isTemporaryName(name) {
            let p = DurableFile.join(folder, name)
            if let st = try io.stat(p), st.isDirectory { try io.removeTree(p) } else { try io.unlink(p, missingOK: true) }
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
    }

    static func fingerprint(folder: String, machineIDPath: String, io: Syscalls) throws -> ReplicaFile.Fingerprint {
        guard let st = try io.stat(folder) else { throw LnoteError(.notFound, "notebook folder vanished", path: folder) }
        var machine: String?
        if let bytes = try? DurableFile.readIfExists(machineIDPath, io: io) {
            let s = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            if !s.isEmpty { machine = s }
        }
        return .init(device: st.device, inode: st.inode, path: folder, machine: machine)
    }

    /// Reads `.lnote/replica.json`, minting a replica id when there is none or when the
    /// folder is not where (or on the machine) it was ([PKG-60]).
    static func identity(folder: String, meta: String, machineIDPath: String, newReplica: ReplicaID? = nil,
                         io: Syscalls) throws -> (replica: ReplicaID, change: ReplicaChange?, previous: [ReplicaID],
                                                  fingerprint: ReplicaFile.Fingerprint) {
        let file = DurableFile.join(meta, "replica.json")
        let here = try fingerprint(folder: folder, machineIDPath: machineIDPath, io: io)
        if let bytes = try DurableFile.readIfExists(file, io: io) {
            let r = try StoreJSON.decode(ReplicaFile.self, bytes, path: file)
            guard r.format == 1, r.replica.count == 16, let id = ReplicaID(hex: r.replica), id.rawValue != 0 else {
                throw LnoteError(r.format > 1 ? .unsupportedVersion : .corrupt, "bad replica.json", path: file)
            }
            let previous = r.previous.compactMap { ReplicaID(hex: $0) }
            if r.fingerprint == here { return (id, nil, previous, here) }
            var reasons: [String] = []
            if r.fingerprint.path != here.path { reasons.append("path \(r.fingerprint.path) → \(here.path)") }
            if r.fingerprint.device != here.device || r.fingerprint.inode != here.inode { reasons.append("different directory (device/inode)") }
            if r.fingerprint.machine != here.machine { reasons.append("different machine") }
            var fresh = ReplicaID.random()
            while fresh == id || previous.contains(fresh) { fresh = ReplicaID.random() }
            let all = previous + [id]
            let out = ReplicaFile(format: 1, replica: fresh.description, fingerprint: here, previous: all.map(\.description))
            try DurableFile.replace(file, with: try StoreJSON.encode(out), io: io)
            return (fresh, ReplicaChange(old: id, new: fresh, reason: reasons.joined(separator: "; ")), all, here)
        }
        let fresh = newReplica ?? ReplicaID.random()
        let out = ReplicaFile(format: 1, replica: fresh.description, fingerprint: here, previous: [])
        try DurableFile.replace(file, with: try StoreJSON.encode(out), io: io)
        return (fresh, nil, [], here)
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
        try list(folder: path, includeDeleted: includeDeleted, io: .live)
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
    /// Returns the documents whose files were rebuilt.
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
            if let open = documents[docID], await !open.isClosed {
                try await open.flush()
                continue
            }
            if try Notebook.manifestIsCurrent(paths, io: io) { continue }
            let d = try await Document(paths: paths, identity: identity, io: io, options: options)
            try await d.close()
            rebuilt.append(docID)
        }
        return rebuilt
    }

    /// True when manifest.json holds exactly what document.json on disk and the summaries
    /// of its live pages' snapshots call for ([PKG-13]): one prefix read per live page.
    static func manifestIsCurrent(_ paths: PackagePaths, io: Syscalls) throws -> Bool {
        guard let m = try DurableFile.readIfExists(paths.manifest, io: io),
              let d = try DurableFile.readIfExists(paths.document, io: io),
              let (_, state, _) = try? DocumentFile.decode(d, path: paths.document) else { return false }
        let expected = try ManifestFile.expected(paths: paths, documentBytes: d, state: state, io: io)
        return try StoreJSON.encode(expected) == m
    }

    // MARK: - Documents

    /// Creates a document (atomically: [PKG-2]) with one page unless `firstPage` is nil,
    /// and opens it.
    public func createDocument(title: String, firstPage: CanvasSize? = .a4) async throws -> Document {
        try checkOpen()
        let docID = DocumentID()
        let ops = try Document.initialOperations(id: docID, title: title, firstPage: firstPage, replica: replica,
                                                 now: options.now())
        _ = try Document.createPackage(folder: path, id: docID, ops: ops, io: io)
        return try await openDocument(docID)
    }

    /// Opens a document (the same handle while it stays open).
    public func openDocument(_ docID: DocumentID) async throws -> Document {
        try checkOpen()
        if let d = documents[docID], await !d.isClosed { return d }
        let d = try await Document(paths: PackagePaths(folder: path, id: docID), identity: identity, io: io, options: options)
        await d.setOnClose { [weak self] id in await self?.forget(id) }
        documents[docID] = d
        return d
    }

    private func forget(_ docID: DocumentID) { documents[docID] = nil }

    func isOpen(_ docID: DocumentID) -> Bool { documents[docID] != nil }

    /// Deletes a document softly (a `deleteDocument` operation, replicated like any other;
    /// the package stays and `restoreDocument` brings it back).
    public func deleteDocument(_ docID: DocumentID) async throws {
        let wasOpen = documents[docID] != nil
        let d = try await openDocument(docID)
        try await d.markDeleted()
        if !wasOpen { try await d.close() }
    }

    public func restoreDocument(_ docID: DocumentID) async throws {
        let wasOpen = documents[docID] != nil
        let d = try await openDocument(docID)
        try await d.restore()
        if !wasOpen { try await d.close() }
    }

    /// Checks the folder ([PKG-70]); see `Verify`. With `removeTemporaryFiles`, temporary
    /// files left by interrupted writes in documents that are not open are removed first
    /// (safe: this notebook holds the folder lock) and listed in `removedTemporaryFiles`.
    public func verify(removeTemporaryFiles: Bool = false) throws -> VerifyReport {
        try checkOpen()
        var removed: [String] = []
        if removeTemporaryFiles {
            for docID in try io.listDirectory(path).compactMap(PackagePaths.documentID(fromName:)) where documents[docID] == nil {
                let p = PackagePaths(folder: path, id: docID)
                for dir in [p.root, p.pages, p.assets, p.thumbnails] where try io.stat(dir)?.isDirectory == true {
                    removed += try DurableFile.removeTemporaryFiles(in: dir, io: io).map { DurableFile.join(dir, $0) }
                }
            }
        }
        var report = try Verify.run(folder: path, io: io)
        report.removedTemporaryFiles = removed
        return report
    }

    /// Closes every open document and releases the folder lock.
    public func close() async throws {
        guard let lock else { return }
        var failure: Error?
        for d in documents.values {
            do { try await d.close() } catch { failure = failure ?? error }
        }
        documents = [:]
        self.lock = nil
        do { try lock.close() } catch { failure = failure ?? error }
        if let failure { throw failure }
    }

    /// The wall-clock time this notebook stamps (ms since 1970; `StoreOptions.now`).
    public nonisolated var wallTime: Int64 { options.now() }

    /// Replaces the folder's replica id by a new random one ([PKG-60]): the old id is appended
    /// to `previous` in `.lnote/replica.json`, which is rewritten durably before this returns,
    /// and every document open here stamps its later operations with the new id. For sync,
    /// which calls it when another copy of the folder wrote under the current id
    /// (sync-protocol.md [SYNC-54], [SYNC-55]).
    ///
    /// - Parameter reason: why, kept in the returned change (and in `replicaChanges`).
    /// - Throws: `io` when `replica.json` cannot be written (the id is then unchanged).
    @discardableResult
    public func remintReplica(reason: String) throws -> ReplicaChange {
        try checkOpen()
        return try identity.remint(reason: reason)
    }

    private func checkOpen() throws {
        guard lock != nil else { throw LnoteError(.invalidState, "notebook is closed", path: path) }
    }
}

/// A replica id change found when opening a copied or moved folder.
public struct ReplicaChange: Sendable, Hashable, CustomStringConvertible {
    public var old: ReplicaID
    public var new: ReplicaID
    /// What differed: path, device/inode, machine.
    public var reason: String
    public var description: String { "replica id \(old) → \(new) (\(reason))" }
}
