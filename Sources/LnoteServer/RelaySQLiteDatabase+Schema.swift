import LnoteModel
import LnoteSQLite

/// The SQLite schema of the relay (`RelayStore+Schema.swift` says what each table and
/// column means), its upgrades from older files, and the high-water mark check.
extension RelaySQLiteDatabase {
    /// Version 1, with SQLite's types: `ops.seq` is `INTEGER PRIMARY KEY AUTOINCREMENT`
    /// (never reused, so cursors only grow; `allocateSequences` raises its counter).
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
    /// version 1 and upgraded, so the upgrade path is the one every store takes. The relay
    /// then fills `ops.hash` and `chains` (`RelayOpening.upgradeFromVersion1`).
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

    /// Version 3 over version 2: `tokens.expires`.
    static let upgradeV2toV3 = """
        ALTER TABLE tokens ADD COLUMN expires INTEGER;
        """

    /// Version 4 over version 3: `relay_presence`, the relay processes serving the file and
    /// the long polls each holds (`RelayPresence`). `IF NOT EXISTS`: a file taken back to an
    /// older version by hand (tests do) may hold it already.
    static let upgradeV3toV4 = """
        CREATE TABLE IF NOT EXISTS relay_presence (
            id TEXT PRIMARY KEY,
            host TEXT NOT NULL,
            pid INTEGER NOT NULL,
            port INTEGER NOT NULL,
            started INTEGER NOT NULL,
            heartbeat INTEGER NOT NULL,
            long_polls INTEGER NOT NULL
        );
        """

    /// Version 5 over version 4: `notebooks.name`. Added only where it is missing: a file
    /// taken back to an older version by hand (tests do) may hold it already.
    static let upgradeV4toV5 = """
        ALTER TABLE notebooks ADD COLUMN name TEXT NOT NULL DEFAULT '';
        """

    /// Prepares the schema, then checks the high-water mark ([SYNC-58]): when the
    /// database's change sequence is below it (a restored copy), or the store holds
    /// operations and the mark is missing or unreadable, or the last store was not closed,
    /// every notebook gets a new epoch and the database's sequence is raised to the mark,
    /// so sequences are never issued twice.
    /// - Throws: as `RelayDatabase.open`; `.io` when the mark cannot be written.
    public func open(_ relay: RelayOpening) throws -> RelayStore.OpenReport {
        var report = RelayStore.OpenReport()
        (report.upgradedFrom, report.checkpointsDropped) = try transaction(.write) { tx in try prepareSchema(tx, relay) }
        guard !inMemory else { return report }
        let markPath = Self.markPath(for: path)
        let m = try HighWaterMark(path: markPath)
        do {
            if m.alone {
                let (value, sign) = try checkMark(markPath: markPath, relay)
                report.epochsReset = sign
                m.opened(at: value)
            } else if case .mark(let held) = HighWaterMark.load(markPath) {
                // Another store has it open and judged it when it opened.
                m.opened(at: held.value)
            } else {
                m.opened(at: 0)
            }
        } catch {
            m.release()
            throw error
        }
        mark.withLock { $0 = m }
        return report
    }

    /// Creates the schema in an empty file, upgrades an older one, accepts a current one,
    /// refuses anything else.
    /// - Returns: the version upgraded from (0: a new file; nil: it was current) and the
    ///   checkpoints the upgrade dropped.
    private func prepareSchema(_ tx: any RelayTransaction, _ relay: RelayOpening) throws -> (Int64?, Int) {
        let version = try tx.query("PRAGMA user_version").first?.first?.int64 ?? 0
        let app = try tx.query("PRAGMA application_id").first?.first?.int64 ?? 0
        guard app == 0 || app == RelayStore.applicationID else {
            throw LnoteError(.invalidArgument, "not an lnote relay store (application_id \(app))", path: path)
        }
        guard version <= RelayStore.schemaVersion else {
            throw LnoteError(.unsupportedVersion,
                             "relay store schema version \(version); this build knows up to \(RelayStore.schemaVersion)",
                             path: path)
        }
        if version == RelayStore.schemaVersion && app == RelayStore.applicationID { return (nil, 0) }
        if version == 0 {
            let tables = try tx.query("SELECT count(*) FROM sqlite_master WHERE type = 'table'").first?.first?.int64 ?? 0
            guard tables == 0 else {
                throw LnoteError(.invalidArgument,
                                 "not an lnote relay store (schema version \(version), \(tables) tables)", path: path)
            }
            try db.execute(Self.schemaV1)
            try db.execute("PRAGMA application_id = \(RelayStore.applicationID)")
        } else if app != RelayStore.applicationID {
            throw LnoteError(.invalidArgument, "not an lnote relay store (schema version \(version), no application id)",
                             path: path)
        }
        var dropped = 0
        if version < 2 {
            try db.execute(Self.upgradeV1toV2)
            dropped = try relay.upgradeFromVersion1(tx)
        }
        if version < 3 { try db.execute(Self.upgradeV2toV3) }
        if version < 4 { try db.execute(Self.upgradeV3toV4) }
        if version < 5,
           try tx.query("SELECT count(*) FROM pragma_table_info('notebooks') WHERE name = 'name'").first?.first?.int64 == 0 {
            try db.execute(Self.upgradeV4toV5)
        }
        try db.execute("PRAGMA user_version = \(RelayStore.schemaVersion)")
        return (version, dropped)
    }

    /// Compares the database with its mark at opening (no other store has it open); resets
    /// every epoch and raises the database's sequence to the mark when the database may
    /// have been restored; then writes the mark this store reserves.
    /// - Returns: the mark now on disk, and why epochs were reset.
    private func checkMark(markPath: String, _ relay: RelayOpening) throws -> (UInt64, RelayStore.RestoreSign?) {
        let reading = HighWaterMark.load(markPath)
        let (sequence, target, sign): (UInt64, UInt64, RelayStore.RestoreSign?) = try transaction(.write) { tx in
            let sequence = try Self.issuedSequence(tx)
            let holds = sequence > 0
            var sign: RelayStore.RestoreSign?
            var target = sequence
            switch reading {
            case .mark(let m) where m.value > sequence:
                sign = m.open ? .notClosed(sequence: sequence, mark: m.value) : .belowMark(sequence: sequence, mark: m.value)
                target = m.value
            case .mark: break
            case .missing: if holds { sign = .markMissing(sequence: sequence) }
            case .unreadable(let why): if holds { sign = .markUnreadable(sequence: sequence, reason: why) }
            }
            if sign != nil {
                try relay.resetEpochs(tx)
                if target > sequence {
                    // Sequences after the copy's were handed out already: never again.
                    let updated = try tx.query("UPDATE sqlite_sequence SET seq = ?1 WHERE name = 'ops' RETURNING seq",
                                               [.integer(Int64(clamping: target))])
                    if updated.isEmpty {
                        try tx.execute("INSERT INTO sqlite_sequence (name, seq) VALUES ('ops', ?1)",
                                       [.integer(Int64(clamping: target))])
                    }
                }
            }
            return (sequence, target, sign)
        }
        // No other store is open: this one reserves from here.
        return (try HighWaterMark.reserve(beyond: max(sequence, target), at: markPath), sign)
    }
}
