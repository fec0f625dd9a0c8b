import LnoteModel
import LnoteReplication

extension RelayStore {
    /// The version of the schema (`Tables`); a database with a greater one is refused.
    /// SQLite keeps it in `PRAGMA user_version`.
    public static let schemaVersion: Int64 = 5
    /// `PRAGMA application_id`: "LNRY", marks the file as a relay store.
    public static let applicationID: Int64 = 0x4C4E_5259

    /// The relay's tables, as every backend creates them (SQLite's DDL is in
    /// `RelaySQLiteDatabase+Schema.swift`). Integers are int8, bytes BLOB / bytea.
    ///
    /// - `notebooks (nb, id, epoch, created, name)`: `nb` is the internal id every other
    ///   table refers to, given by the database at insertion; `id` the UUID (uppercase text,
    ///   UNIQUE); `epoch` a random non-zero u64 stored by bit pattern; `name` what an
    ///   operator calls it (`RelayStore.checkNotebookName`; not unique), '' when unnamed
    ///   (every notebook made before version 5).
    /// - `tokens (digest, nb, label, created, device, expires)`: only the SHA-256 of each
    ///   token ([SYNC-25]), UNIQUE; `device` the device a token belongs to ([SYNC-57]),
    ///   NULL for tokens made before version 2, which act as the unnamed device
    ///   `token-<8 hex of the digest>`; `expires` when a token stops opening its notebook
    ///   ([SYNC-29]), in milliseconds since 1970, NULL (every token made before version 3):
    ///   never. Listed in `created` order, then insertion order
    ///   (`RelayDatabase.tokenInsertionOrder`).
    /// - `ops (seq, nb, document, page, replica, counter, frame, hash)`: one row per
    ///   operation; `seq` the change sequence, from `RelayDatabase.allocateSequences` (never
    ///   reused, so cursors only grow); `page` 16 bytes or empty for the document log;
    ///   `replica` and `counter` the operation's id (replica by bit pattern); `frame` the
    ///   frame exactly as received (frames are canonical: one operation, one byte string);
    ///   `hash` its content hash ([SYNC-50]), 32 bytes (a frame that does not decode at rest
    ///   gets the SHA-256 of the stored bytes: it equals no operation's content hash, and
    ///   `quarantine` lists it). UNIQUE (nb, document, page, replica, counter) is the
    ///   deduplication ([SYNC-7]) and the index the clock and "not covered" queries walk;
    ///   an index on (nb, seq) serves "changed since cursor".
    /// - `assets (nb, id, bytes)`: content-addressed, shared by the documents of a
    ///   notebook, UNIQUE (nb, id).
    /// - `checkpoints (nb, document, page, clock, snapshot, uploaded)`: at most one per log
    ///   (the newest, see `putCheckpoint`), UNIQUE (nb, document, page).
    /// - `owners (nb, replica, device, since)`: per notebook, the device that owns each
    ///   replica id ([SYNC-57]), key (nb, replica).
    /// - `chains (nb, document, page, replica, head, digest)`: per (notebook, log,
    ///   replica), the counter `head` up to which every operation is held, and the chain
    ///   digest there ([SYNC-52]); kept up to date in the transaction that stores
    ///   operations, so `Digests` answers read one row per replica. Key (nb, document,
    ///   page, replica).
    ///
    /// - `relay_presence (id, host, pid, port, started, heartbeat, long_polls)`: one row per
    ///   running relay process (`RelayPresence`), not per notebook: `id` a random id made at
    ///   the process's start (key), `host`, `pid` and `port` where it runs, `started` and
    ///   `heartbeat` in milliseconds since 1970 by the database's clock
    ///   (`RelayDatabase.nowMillisecondsSQL`: one clock for every host), `long_polls` the
    ///   requests it holds now ([SYNC-71]). Written off the request path (at most once a
    ///   second when the count changes, and every 15 s), deleted at a clean stop; a row
    ///   whose heartbeat is old belongs to a process that died (`RelayStore.stats` counts
    ///   the recent ones). Never part of a notebook's data: `RelayCopy` does not copy it.
    ///
    /// Version 2 added `ops.hash`, `tokens.device`, `owners` and `chains`
    /// (`Protocol/sync-protocol.md` §6), version 3 `tokens.expires`, version 4
    /// `relay_presence`, version 5 `notebooks.name`.
    enum Tables {}

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

    /// Version 1 to 2, the relay's part (`RelayOpening.upgradeFromVersion1`), once the
    /// backend added the columns and tables: content hashes and chains computed for the
    /// operations already held, and every checkpoint checked as [SYNC-59] now requires
    /// (one that fails is dropped: it was never checked when it was stored).
    /// - Returns: the number of checkpoints dropped.
    func upgradeFromVersion1(_ tx: any RelayTransaction) throws -> Int {
        let update = try tx.prepare("UPDATE ops SET hash = ?1 WHERE seq = ?2")
        let select = try tx.prepare("SELECT seq, frame FROM ops WHERE seq > ?1 ORDER BY seq LIMIT 1024")
        // In groups read completely before they are written, so no read walks rows
        // being updated.
        var after: Int64 = 0
        while true {
            let rows = try select.rows([.integer(after)])
            guard let last = rows.last?[0].int64 else { break }
            for r in rows {
                try update.run([.blob(Self.storedHash(r[1].bytes ?? [])), r[0]])
            }
            after = last
        }
        try rebuildChains(nb: nil, tx)
        return try dropUnverifiableCheckpoints(tx)
    }

    /// The content hash of a stored frame ([SYNC-50]), or, when the bytes are not one valid
    /// frame, the SHA-256 of the bytes themselves (never equal to a valid operation's hash).
    static func storedHash(_ bytes: [UInt8]) -> [UInt8] {
        if let frames = try? Frame.decodeAll(bytes), frames.count == 1 { return ContentHash.of(frames[0]) }
        return SHA256.hash(bytes)
    }
}
