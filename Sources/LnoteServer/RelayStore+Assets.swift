import LnoteModel
import LnoteSQLite

/// Assets are content-addressed and stored once per notebook: an asset uploaded for one
/// document serves every document of the notebook ([SYNC-8]).
extension RelayStore {
    /// Which of `ids` the notebook lacks, in the order given (duplicates kept).
    /// - Throws: `.notFound` for an unknown notebook.
    public func missingAssets(_ ids: [AssetID], notebook: NotebookID) throws -> [AssetID] {
        try db.transaction(.deferred) {
            let (nb, _) = try row(of: notebook)
            return try ids.filter { !(try hasAsset($0, nb: nb)) }
        }
    }

    /// Stores an asset after checking that `id` is the SHA-256 of `bytes`.
    /// - Returns: true when the asset was new (HTTP 201), false when already held (204).
    /// - Throws: `.invalidArgument` when the bytes do not hash to `id` (nothing is stored);
    ///   `.notFound` for an unknown notebook.
    @discardableResult
    public func putAsset(_ bytes: [UInt8], id: AssetID, notebook: NotebookID) throws -> Bool {
        guard AssetID.of(bytes) == id else {
            throw LnoteError(.invalidArgument, "asset bytes do not hash to \(id)")
        }
        return try db.transaction {
            let (nb, _) = try row(of: notebook)
            try db.execute("INSERT OR IGNORE INTO assets (nb, id, bytes) VALUES (?1, ?2, ?3)",
                           [.integer(nb), .text(id.description), .blob(bytes)])
            return db.changes == 1
        }
    }

    /// An asset's bytes.
    /// - Throws: `.notFound` when the notebook or the asset does not exist.
    public func asset(_ id: AssetID, notebook: NotebookID) throws -> [UInt8] {
        try db.transaction(.deferred) {
            let (nb, _) = try row(of: notebook)
            let rows = try db.query("SELECT bytes FROM assets WHERE nb = ?1 AND id = ?2", [.integer(nb), .text(id.description)])
            guard let bytes = rows.first?.first?.bytes else {
                throw LnoteError(.notFound, "no asset \(id) in notebook \(notebook)", path: path)
            }
            return bytes
        }
    }

    func hasAsset(_ id: AssetID, nb: Int64) throws -> Bool {
        !(try db.query("SELECT 1 FROM assets WHERE nb = ?1 AND id = ?2", [.integer(nb), .text(id.description)]).isEmpty)
    }
}
