import LnoteModel

extension RelaySQLiteDatabase: RelayCopyBackend {
    public var backendName: String { "sqlite" }

    /// `PRAGMA user_version` of a file marked as a relay store (`application_id`), or nil.
    public func storedRelaySchemaVersion() throws -> Int64? {
        try transaction(.read) { tx in
            let app = try tx.query("PRAGMA application_id").first?.first?.int64 ?? 0
            let version = try tx.query("PRAGMA user_version").first?.first?.int64 ?? 0
            return app == RelayStore.applicationID && version > 0 ? version : nil
        }
    }

    public func issuedSequence(_ tx: any RelayTransaction) throws -> Int64 {
        Int64(clamping: try Self.issuedSequence(tx))
    }

    /// Another store of this machine holds the high-water mark's lock (it was not `alone`
    /// when this one opened).
    public var openedByOtherStores: Bool {
        mark.withLock { $0.map { !$0.alone } } ?? false
    }
}
