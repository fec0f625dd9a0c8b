import Foundation
import LnoteModel
import LnoteReplication
import LnoteSQLite
import LnoteStore

/// Exports a notebook folder to one self-contained SQLite file: the article's "level 2"
/// table layout (a BLOB of 16 bytes per point per stroke), as a copy. The folder stays the
/// source of truth. Format: Protocol/sqlite-export.md.
///
/// The database is written to a temporary file beside the target in one transaction, read
/// back and compared with the notebook (counts, every row, every stroke's decoded points,
/// every asset's bytes), and only then renamed over the target ([EXP-1], [EXP-2]). A failure
/// at any step removes the temporary file and leaves the target as it was.
public enum SQLiteExport {
    public struct Options: Sendable {
        /// Also export deleted documents and deleted pages (marked `deleted = 1`).
        public var includeDeleted = false
        /// Milliseconds since 1970 for `meta.exported_at_ms` (tests pass a fixed clock).
        public var now: @Sendable () -> Int64 = { Int64((Date().timeIntervalSince1970 * 1000).rounded()) }
        /// Test hook: runs on the committed temporary database before verification (to
        /// tamper with it and check that verification catches it).
        var beforeVerification: (@Sendable (SQLiteDatabase) throws -> Void)?
        public init() {}
    }

    /// What was exported.
    public struct Summary: Sendable, Hashable, CustomStringConvertible {
        public var counts: ExportCounts
        /// Size of the exported file in bytes.
        public var fileBytes: Int
        /// The notebook's replica id (recorded in `meta.source_replica`).
        public var sourceReplica: ReplicaID
        /// Set when opening the folder found it copied or moved (a new replica id was minted).
        public var replicaChange: ReplicaChange?
        /// The file's format ([EXP-3]): 1, or 2 when `counts.exactStrokes` > 0 ([EXP-28]).
        public var formatVersion: Int64

        public var description: String {
            "\(counts.documents) documents, \(counts.pages) pages, \(counts.strokes) strokes (\(counts.points) points), "
                + "\(counts.images) images, \(counts.assets) assets, \(fileBytes) bytes"
        }
    }

    /// Opens the notebook at `folder` (taking its lock, autosave off), exports it to
    /// `target`, and closes it.
    ///
    /// - Throws: `notFound` for a missing folder or target directory; `invalidArgument` when
    ///   `target` is a directory; `invalidState` when another process has the notebook open;
    ///   `corrupt` when verification fails; `database` and `io` for SQLite and file failures. Nothing is
    ///   left at `target` (or its previous content is untouched) when it throws.
    @discardableResult
    public static func export(folder: String, to target: String, options: Options = Options()) async throws -> Summary {
        var store = StoreOptions()
        store.autosave = false
        let nb = try await Notebook.open(at: folder, options: store)
        do {
            var summary = try await export(nb, to: target, options: options)
            summary.replicaChange = nb.replicaChange
            try await nb.close()
            return summary
        } catch {
            try? await nb.close()
            throw error
        }
    }

    /// Exports an open notebook. Documents are opened and closed one at a time; a document
    /// the caller holds open is closed as well.
    @discardableResult
    public static func export(_ nb: Notebook, to target: String, options: Options = Options()) async throws -> Summary {
        if ExportFiles.isDirectory(target) {
            throw LnoteError(.invalidArgument, "the export target is a directory", path: target)
        }
        let dir = ExportFiles.split(target).dir
        guard ExportFiles.isDirectory(dir) else { throw LnoteError(.notFound, "no directory for the export", path: dir) }
        let temp = try ExportFiles.temporaryPath(for: target)
        let docIDs = try await nb.documentIDs()
        // format_version is 1 when the rows are written; the writer moves it to 2 with the first
        // `exact` BLOB ([EXP-28]), and the verifier expects what the writer ended with.
        let exportedAt = options.now()
        let meta = { (version: Int64) -> [(String, String)] in [
            ("format_version", String(version)),
            ("exported_at_ms", String(exportedAt)),
            ("source_folder", nb.path),
            ("source_replica", nb.replica.description),
            ("include_deleted", options.includeDeleted ? "1" : "0"),
            ("generator", "lnote"),
        ] }
        do {
            let version = try await write(nb, docIDs, meta: meta(ExportSchema.version), to: temp, options: options)
            let counts = try await verify(nb, docIDs, version: version, meta: meta(version), temp: temp, target: target,
                                          options: options)
            try ExportFiles.sync(temp, directory: false)
            try ExportFiles.rename(temp, target)
            try ExportFiles.sync(dir, directory: true)
            return Summary(counts: counts, fileBytes: try ExportFiles.size(target), sourceReplica: nb.replica,
                           formatVersion: version)
        } catch {
            try? ExportFiles.unlinkIfPresent(temp)
            try? ExportFiles.unlinkIfPresent(temp + "-journal")
            throw error
        }
    }

    /// Pass 1: schema and every row in one transaction ([EXP-2]). Returns the file's format
    /// version ([EXP-3]).
    private static func write(_ nb: Notebook, _ docIDs: [DocumentID], meta: [(String, String)],
                              to temp: String, options: Options) async throws -> Int64 {
        let db = try SQLiteDatabase(path: temp, options: .init(create: true, journalMode: .delete, synchronous: .full))
        do {
            try db.execute("BEGIN IMMEDIATE")
            let writer = try ExportWriter(db)
            try writer.writeMeta(meta)
            for docID in docIDs {
                guard let doc = try await ExportSource.collect(nb, docID, includeDeleted: options.includeDeleted,
                                                               skip: writer.writtenAssets) else { continue }
                try writer.write(doc)
            }
            writer.finalize()
            try db.execute("COMMIT")
            try options.beforeVerification?(db)
            try db.close()
            return writer.version
        } catch {
            if db.isInTransaction { try? db.execute("ROLLBACK") }
            try? db.close()
            throw error
        }
    }

    /// Pass 2: a fresh read-only connection, compared with a fresh read of the notebook.
    private static func verify(_ nb: Notebook, _ docIDs: [DocumentID], version: Int64, meta: [(String, String)],
                               temp: String, target: String, options: Options) async throws -> ExportCounts {
        let db = try SQLiteDatabase(path: temp, options: .init(create: false, readOnly: true))
        do {
            let verifier = try ExportVerifier(db, target: target, version: version)
            try verifier.checkFile(meta: meta)
            var verified = Set<AssetID>()
            for docID in docIDs {
                guard let doc = try await ExportSource.collect(nb, docID, includeDeleted: options.includeDeleted,
                                                               skip: verified) else { continue }
                try verifier.check(doc)
                verified.formUnion(doc.assetIDs)
            }
            try verifier.checkTotals()
            verifier.finalize()
            let counts = verifier.counts
            try db.close()
            return counts
        } catch {
            try? db.close()
            throw error
        }
    }
}
