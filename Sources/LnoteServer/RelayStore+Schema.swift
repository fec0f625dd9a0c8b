import LnoteModel
import LnoteReplication
import LnoteSQLite

extension RelayStore {
    /// `PRAGMA user_version` of the schema below. A file with a greater version is refused.
    public static let schemaVersion: Int64 = 3
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

    /// Version 2 over version 1 (`Protocol/sync-protocol.md` §6). A new file is made as
    /// version 1 and upgraded, so the upgrade path is the one every store takes.
    ///
    /// - `ops.hash`: the operation's content hash ([SYNC-50]), 32 bytes, filled for every
    ///   row by `upgradeToV2` (a frame that does not decode at rest gets the SHA-256 of the
    ///   stored bytes: it equals no operation's content hash, and `quarantine` lists it).
    /// - `tokens.device`: the device a token belongs to ([SYNC-57]); NULL for tokens made
    ///   before version 2, which act as the unnamed device `token-<8 hex of the digest>`.
    /// - `owners`: per notebook, the device that owns each replica id ([SYNC-57]).
    /// - `chains`: per (notebook, log, replica), the counter `head` up to which every
    ///   operation is held, and the chain digest there ([SYNC-52]); kept up to date in the
    ///   transaction that stores operations, so `Digests` answers read one row per replica.
    static let upgradeV1toV2 = """
        ALTER TABLE ops ADD COLUMN hash BLOB NOT NULL DEFAULT x'';
        ALTER TABLE tokens ADD COLUMN device TEXT;
        CREATE TABLE owners (
            nb INTEGER NOT NULL REFERENCES notebooks(nb),
            replica INTEGER NOT NULL,
            device TEXT NOT NULL,
            since INTEGER NOT NULL,
            PRIMARY KEY (nb, replica)
        ) WITHOUT ROWID;
        CREATE TABLE chains (
            nb INTEGER NOT NULL REFERENCES notebooks(nb),
            document BLOB NOT NULL,
            page BLOB NOT NULL,
            replica INTEGER NOT NULL,
            head INTEGER NOT NULL,
            digest BLOB NOT NULL,
            PRIMARY KEY (nb, document, page, replica)
        ) WITHOUT ROWID;
        """

    /// Version 3 over version 2: `tokens.expires`, when a token stops opening its notebook
    /// ([SYNC-29]), in milliseconds since 1970; NULL (every token made before version 3):
    /// never.
    static let upgradeV2toV3 = """
        ALTER TABLE tokens ADD COLUMN expires INTEGER;
        """

    /// Why every notebook got a new epoch when the store was opened ([SYNC-58]).
    public enum RestoreSign: Sendable, Equatable, CustomStringConvertible {
        /// The file's change sequence is below the high-water mark: it was restored from
        /// an older copy.
        case belowMark(sequence: UInt64, mark: UInt64)
        /// The store holds operations and has no mark (written by an older version, or
        /// the mark was removed): it may have been restored.
        case markMissing(sequence: UInt64)
        /// The mark cannot be read: it may have been restored.
        case markUnreadable(sequence: UInt64, reason: String)
        /// The last store to open the file did not close it (a crash, a kill): its mark is
        /// a reservation above the sequence, and a restore cannot be ruled out.
        case notClosed(sequence: UInt64, mark: UInt64)

        public var description: String {
            switch self {
            case .belowMark(let s, let m): "change sequence \(s) is below the high-water mark \(m): restored from an older copy"
            case .markMissing(let s): "change sequence \(s) and no high-water mark"
            case .markUnreadable(let s, let why): "change sequence \(s) and an unreadable high-water mark (\(why))"
            case .notClosed(let s, let m):
                "change sequence \(s) below the mark \(m) reserved by a relay that was not closed: a restore cannot be ruled out"
            }
        }
    }

    /// What opening a store did beyond opening it (`RelayStore.opened`).
    public struct OpenReport: Sendable, Equatable {
        /// The schema version the file had when it was upgraded (0: a new file); nil when
        /// it was current.
        public var upgradedFrom: Int64?
        /// Checkpoints dropped by the upgrade because the operations held do not give
        /// their state ([SYNC-59]).
        public var checkpointsDropped = 0
        /// Set when every notebook got a new epoch ([SYNC-58]), with the reason.
        public var epochsReset: RestoreSign?
        public init() {}
    }

    /// Creates the schema in an empty file, upgrades an older one, accepts a current one,
    /// refuses anything else.
    func prepareSchema(report: inout OpenReport) throws {
        try db.transaction {
            let version = try db.query("PRAGMA user_version").first?.first?.int64 ?? 0
            let app = try db.query("PRAGMA application_id").first?.first?.int64 ?? 0
            guard app == 0 || app == Self.applicationID else {
                throw LnoteError(.invalidArgument, "not an lnote relay store (application_id \(app))", path: path)
            }
            guard version <= Self.schemaVersion else {
                throw LnoteError(.unsupportedVersion,
                                 "relay store schema version \(version); this build knows up to \(Self.schemaVersion)",
                                 path: path)
            }
            if version == Self.schemaVersion && app == Self.applicationID { return }
            if version == 0 {
                let tables = try db.query("SELECT count(*) FROM sqlite_master WHERE type = 'table'").first?.first?.int64 ?? 0
                guard tables == 0 else {
                    throw LnoteError(.invalidArgument,
                                     "not an lnote relay store (schema version \(version), \(tables) tables)", path: path)
                }
                try db.execute(Self.schemaV1)
                try db.execute("PRAGMA application_id = \(Self.applicationID)")
            } else if app != Self.applicationID {
                throw LnoteError(.invalidArgument, "not an lnote relay store (schema version \(version), no application id)",
                                 path: path)
            }
            report.upgradedFrom = version
            if version < 2 { report.checkpointsDropped = try upgradeToV2() }
            if version < 3 { try db.execute(Self.upgradeV2toV3) }
            try db.execute("PRAGMA user_version = \(Self.schemaVersion)")
        }
    }

    /// Version 1 to 2: new columns and tables, content hashes and chains computed for the
    /// operations already held, and every checkpoint checked as [SYNC-59] now requires
    /// (one that fails is dropped: it was never checked when it was stored).
    /// - Returns: the number of checkpoints dropped.
    private func upgradeToV2() throws -> Int {
        try db.execute(Self.upgradeV1toV2)
        let update = try db.prepare("UPDATE ops SET hash = ?1 WHERE seq = ?2")
        defer { update.finalize() }
        // In groups read completely before they are written, so no read walks rows
        // being updated.
        var after: Int64 = 0
        while true {
            let rows = try db.query("SELECT seq, frame FROM ops WHERE seq > ?1 ORDER BY seq LIMIT 1024", [.integer(after)])
            guard let last = rows.last?[0].int64 else { break }
            for r in rows {
                try update.run([.blob(Self.storedHash(r[1].bytes ?? [])), r[0]])
            }
            after = last
        }
        try rebuildChains(nb: nil)
        return try dropUnverifiableCheckpoints()
    }

    /// The content hash of a stored frame ([SYNC-50]), or, when the bytes are not one valid
    /// frame, the SHA-256 of the bytes themselves (never equal to a valid operation's hash).
    static func storedHash(_ bytes: [UInt8]) -> [UInt8] {
        if let frames = try? Frame.decodeAll(bytes), frames.count == 1 { return ContentHash.of(frames[0]) }
        return SHA256.hash(bytes)
    }
}
