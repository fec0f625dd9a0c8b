import Foundation
import LnoteModel
import LnoteReplication

extension Document {
    /// Creates a package atomically ([PKG-2]): everything is written and synced inside a
    /// temporary directory `.<UUID>.lnote.tmp-<hex>` in the notebook folder, which is then
    /// renamed into place and the folder synced. A crash leaves either no document or a
    /// complete one (plus, at worst, a temporary directory that opening the notebook removes).
    static func createPackage(folder: String, id: DocumentID, title: String, firstPage: CanvasSize?,
                              replica: ReplicaID, io: Syscalls, now: Int64) throws -> PackagePaths {
        let paths = PackagePaths(folder: folder, id: id)
        if try io.stat(paths.root) != nil {
            throw LnoteError(.alreadyExists, "document package exists", path: paths.root)
        }
        let tmp = DurableFile.join(folder, DurableFile.temporaryName(for: "\(id)\(PackagePaths.suffix)"))
        let staged = PackagePaths(folder: folder, id: id, root: tmp)
        do {
            try io.mkdir(tmp)
            for dir in [staged.pages, staged.assets, staged.thumbnails] { try io.mkdir(dir) }
            var d = DocumentReplica(id: id)
            var ops = [try d.make(.createDocument(title: title), by: replica, wallTime: now)]
            if let canvas = firstPage {
                ops.append(try d.make(.addPage(PageID(), position: d.endPosition, canvas: canvas), by: replica, wallTime: now))
            }
            let header = LogHeader(kind: .document, owner: id.uuid)
            var w = ByteWriter()
            w.append(header.encoded)
            for op in ops { OperationCodec.frame(op).encode(into: &w) }
            try DurableFile.replace(staged.documentLog, with: w.bytes, io: io)
            let stats = Dictionary(uniqueKeysWithValues: d.state.pages.map { ($0.id, PageStats()) })
            let file = DocumentFile(state: d.state, coveredOffset: UInt64(w.count), incarnation: header.incarnation, stats: stats)
            let docBytes = try StoreJSON.encode(file)
            try DurableFile.replace(staged.document, with: docBytes, io: io)
            try DurableFile.replace(staged.manifest, with: try StoreJSON.encode(ManifestFile(from: file, documentBytes: docBytes)), io: io)
            try DurableFile.syncDirectory(tmp, io: io)
            try io.rename(tmp, paths.root)
        } catch {
            if (try? io.stat(tmp)) != nil { try? io.removeTree(tmp) }
            throw error
        }
        try DurableFile.syncDirectory(folder, io: io)
        return paths
    }

    /// Marks the document deleted (soft: a `deleteDocument` operation; `restore()` undoes it).
    public func markDeleted() async throws {
        _ = try await commitDocument(.deleteDocument)
        try saveDocumentFiles()
    }

    /// Undoes `markDeleted()`.
    public func restore() async throws {
        _ = try await commitDocument(.restoreDocument)
        try saveDocumentFiles()
    }
}

extension PackagePaths {
    /// Paths of a package staged under another directory name.
    init(folder: String, id: DocumentID, root: String) {
        self.id = id
        self.root = root
    }
}
