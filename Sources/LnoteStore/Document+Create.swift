import Foundation
import LnoteModel
import LnoteReplication

extension Document {
    /// Creates a package atomically ([PKG-2]): everything is written and synced inside a
    /// temporary directory `.<UUID>.lnote.tmp-<hex>` in the notebook folder, which is then
    /// renamed into place and the folder synced. A crash leaves either no document or a
    /// complete one (plus, at worst, a temporary directory that opening the notebook removes).
    /// `stage`, when given, writes more files into the staged package (its paths) before the
    /// rename, so they appear atomically with it (checkpoint installs use it).
    ///
    /// Several processes ([PKG-90]): the staged directory and its `lock` file are created
    /// under the notebook lock, and the document lock of the staged package is held until the
    /// package is in place, so a process cleaning up staged directories ([PKG-91]) never takes
    /// one in progress for a dead one. When another process created the same package first
    /// (sync receiving the same new document in two processes), the rename fails and this
    /// throws `alreadyExists`, leaving the other package as it is.
    static func createPackage(folder: String, id: DocumentID, ops: [Op], io: Syscalls, notebookLock: FileLock,
                              stage: ((PackagePaths) throws -> Void)? = nil) throws -> PackagePaths {
        let paths = PackagePaths(folder: folder, id: id)
        if try io.stat(paths.root) != nil {
            throw LnoteError(.alreadyExists, "document package exists", path: paths.root)
        }
        var d = DocumentReplica(id: id)
        try d.receive(ops)
        let tmp = DurableFile.join(folder, DurableFile.temporaryName(for: "\(id)\(PackagePaths.suffix)"))
        let staged = PackagePaths(folder: folder, id: id, root: tmp)
        let held = try notebookLock.withLock { () -> FileLock.Held in
            try io.mkdir(tmp)
            do {
                guard let held = try FileLock(path: staged.lock, io: io, timeout: notebookLock.timeout).tryAcquire() else {
                    throw LnoteError(.invalidState, "a new package's lock is held", path: staged.lock)
                }
                return held
            } catch {
                try? io.removeTree(tmp)
                throw error
            }
        }
        defer { held.release() }
        do {
            for dir in [staged.pages, staged.assets, staged.thumbnails] { try io.mkdir(dir) }
            let header = LogHeader(kind: .document, owner: id.uuid)
            var w = ByteWriter()
            w.append(header.encoded)
            var firstPending: Int?
            for op in ops {
                if firstPending == nil && !d.clock.covers(op.id) { firstPending = w.count }
                OperationCodec.frame(op).encode(into: &w)
            }
            try DurableFile.replace(staged.documentLog, with: w.bytes, io: io)
            let file = DocumentFile(state: d.state, coveredOffset: UInt64(firstPending ?? w.count),
                                    incarnation: header.incarnation, assets: [:])
            let docBytes = try StoreJSON.encode(file)
            try DurableFile.replace(staged.document, with: docBytes, io: io)
            try stage?(staged)
            // After the staged snapshots, which the manifest counts ([PKG-13]).
            let manifest = try ManifestFile.expected(paths: staged, documentBytes: docBytes, state: d.state, io: io)
            try DurableFile.replace(staged.manifest, with: try StoreJSON.encode(manifest), io: io)
            try DurableFile.syncDirectory(tmp, io: io)
            try io.rename(tmp, paths.root)
        } catch let e as LnoteError where e.code == .io && (try? io.stat(paths.root)) != nil && (try? io.stat(tmp)) != nil {
            // Another process renamed the same package into place first (ENOTEMPTY, EEXIST).
            try? io.removeTree(tmp)
            throw LnoteError(.alreadyExists, "document package exists (created meanwhile by another process)",
                             path: paths.root, underlying: e.underlying)
        } catch {
            if (try? io.stat(tmp)) != nil { try? io.removeTree(tmp) }
            throw error
        }
        try DurableFile.syncDirectory(folder, io: io)
        return paths
    }

    /// The first operations of a new local document: `createDocument`, then `addPage` for
    /// the first page unless `firstPage` is nil.
    static func initialOperations(id: DocumentID, title: String, firstPage: CanvasSize?, replica: ReplicaID,
                                  now: Int64) throws -> [Op] {
        var d = DocumentReplica(id: id)
        var ops = [try d.make(.createDocument(title: title), by: replica, wallTime: now)]
        if let canvas = firstPage {
            ops.append(try d.make(.addPage(PageID(), position: d.endPosition, canvas: canvas), by: replica, wallTime: now))
        }
        return ops
    }

    /// Marks the document deleted (soft: a `deleteDocument` operation; `restore()` undoes it).
    public func markDeleted() async throws {
        _ = try await commitDocument(.deleteDocument)
        try locked { try saveDocumentFiles() }
    }

    /// Undoes `markDeleted()`.
    public func restore() async throws {
        _ = try await commitDocument(.restoreDocument)
        try locked { try saveDocumentFiles() }
    }
}

extension PackagePaths {
    /// Paths of a package staged under another directory name.
    init(folder: String, id: DocumentID, root: String) {
        self.id = id
        self.root = root
    }
}
