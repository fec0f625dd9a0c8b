import LnoteModel
import LnoteSQLite

extension RelayStore {
    /// `PRAGMA user_version` of the schema below. A file with a greater version is refused.
    public static let schemaVersion: Int64 = 1
    /// `PRAGMA application_id`: "LNRY", marks the file as a relay store.
    public static let applicationID: Int64 = 0x4C4E_5259

    /// Version 1.
    ///
    /// - `notebooks`: `nb` is the internal row id every other table refers to; `id` the
    ///   UUID (uppercase text); `epoch` a random non-zero u64 stored by bit pattern.
    /// - `tokens`: only the SHA-256 of each token ([SYNC-25]).
    /// - `ops`: one row per operation; `seq` is the change sequence (AUTOINCREMENT: never
    ///   reused, so cursors only grow); `page` is 16 bytes or empty for the document log;
    ///   `replica` and `counter` are the operation's id (replica by bit pattern); `frame` the
    ///   frame exactly as received (frames are canonical: one operation, one byte string).
    ///   The UNIQUE constraint is the deduplication ([SYNC-7]) and the index the clock and
    ///   "not covered" queries walk; `ops_by_seq` serves "changed since cursor".
    /// - `assets`: content-addressed, shared by the documents of a notebook.
    /// - `checkpoints`: at most one per log (the newest, see `putCheckpoint`).
    static let schemaV1 = """
        CREATE TABLE notebooks (
            nb INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            epoch INTEGER NOT NULL,
            created INTEGER NOT NULL
        );
        CREATE TABLE tokens (
            digest BLOB NOT NULL UNIQUE,
            nb INTEGER NOT NULL REFERENCES notebooks(nb),
            label TEXT NOT NULL,
            created INTEGER NOT NULL
        );
        CREATE INDEX tokens_by_notebook ON tokens(nb);
        CREATE TABLE ops (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            nb INTEGER NOT NULL REFERENCES notebooks(nb),
            document BLOB NOT NULL,
            page BLOB NOT NULL,
            replica INTEGER NOT NULL,
            counter INTEGER NOT NULL,
            frame BLOB NOT NULL,
            UNIQUE (nb, document, page, replica, counter)
        );
        CREATE INDEX ops_by_seq ON ops(nb, seq);
        CREATE TABLE assets (
            nb INTEGER NOT NULL REFERENCES notebooks(nb),
            id TEXT NOT NULL,
            bytes BLOB NOT NULL,
            UNIQUE (nb, id)
        );
        CREATE TABLE checkpoints (
            nb INTEGER NOT NULL REFERENCES notebooks(nb),
            document BLOB NOT NULL,
            page BLOB NOT NULL,
            clock BLOB NOT NULL,
            snapshot BLOB NOT NULL,
            uploaded INTEGER NOT NULL,
            UNIQUE (nb, document, page)
        );
        """

    /// Creates the schema in an empty file, accepts a current one, refuses anything else.
    static func prepareSchema(_ db: SQLiteDatabase) throws {
        try db.transaction {
            let version = try db.query("PRAGMA user_version").first?.first?.int64 ?? 0
            let app = try db.query("PRAGMA application_id").first?.first?.int64 ?? 0
            guard app == 0 || app == applicationID else {
                throw LnoteError(.invalidArgument, "not an lnote relay store (application_id \(app))", path: db.path)
            }
            guard version <= schemaVersion else {
                throw LnoteError(.unsupportedVersion,
                                 "relay store schema version \(version); this build knows up to \(schemaVersion)",
                                 path: db.path)
            }
            if version == schemaVersion && app == applicationID { return }
            let tables = try db.query("SELECT count(*) FROM sqlite_master WHERE type = 'table'").first?.first?.int64 ?? 0
            guard version == 0, tables == 0 else {
                throw LnoteError(.invalidArgument,
                                 "not an lnote relay store (schema version \(version), \(tables) tables)", path: db.path)
            }
            try db.execute(schemaV1)
            try db.execute("PRAGMA application_id = \(applicationID)")
            try db.execute("PRAGMA user_version = \(schemaVersion)")
        }
    }
}
