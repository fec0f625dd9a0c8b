import LnoteModel

/// Assets are content-addressed and stored once per notebook: an asset uploaded for one
/// document serves every document of the notebook ([SYNC-8]).
extension RelayStore {
    /// Which of `ids` the notebook lacks, in the order given (duplicates kept).
    /// - Throws: `.notFound` for an unknown notebook.
    public func missingAssets(_ ids: [AssetID], notebook: NotebookID) throws -> [AssetID] {
        try database.transaction(.read) { tx in
            let (nb, _) = try row(of: notebook, tx)
            return try ids.filter { !(try hasAsset($0, nb: nb, tx)) }
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
        return try database.transaction(.write) { tx in
            let (nb, _) = try row(of: notebook, tx)
            return try tx.execute("INSERT INTO assets (nb, id, bytes) VALUES (?1, ?2, ?3) ON CONFLICT DO NOTHING",
                                  [.integer(nb), .text(id.description), .blob(bytes)]) == 1
        }
    }

    /// An asset's bytes.
    /// - Throws: `.notFound` when the notebook or the asset does not exist.
    public func asset(_ id: AssetID, notebook: NotebookID) throws -> [UInt8] {
        try database.transaction(.read) { tx in
            let (nb, _) = try row(of: notebook, tx)
            let rows = try tx.query("SELECT bytes FROM assets WHERE nb = ?1 AND id = ?2", [.integer(nb), .text(id.description)])
            guard let bytes = rows.first?.first?.bytes else {
                throw LnoteError(.notFound, "no asset \(id) in notebook \(notebook)", path: path)
            }
            return bytes
        }
    }

    func hasAsset(_ id: AssetID, nb: Int64, _ tx: any RelayTransaction) throws -> Bool {
        !(try tx.query("SELECT 1 FROM assets WHERE nb = ?1 AND id = ?2", [.integer(nb), .text(id.description)]).isEmpty)
    }
}
