import LnoteModel
import LnoteSQLite
import Synchronization

/// The relay's SQLite backend: one file, WAL, `synchronous = FULL`, and beside it the
/// high-water mark `<file>.hwm` ([SYNC-58]). The schema, its upgrades and the mark are
/// here (`RelaySQLiteDatabase+Schema.swift`); the relay's semantics are in `RelayStore`.
///
/// One connection serves every thread: a transaction holds the connection's lock for its
/// whole body, so transactions of this process run one at a time, and `BEGIN IMMEDIATE`
/// with the busy timeout serializes the writers of several processes. A write body runs
/// once (SQLite has no serialization failure to retry), but the relay does not rely on it.
public final class RelaySQLiteDatabase: RelayDatabase {
    /// The SQLite file (`:memory:` or empty for an in-memory database, without a mark).
    public let path: String
    public var location: String { path }
    let db: SQLiteDatabase
    /// The mark, once `open` took it; nil for an in-memory database.
    let mark = Mutex<HighWaterMark?>(nil)

    /// The high-water mark's file for the database at `path`.
    public static func markPath(for path: String) -> String { path + ".hwm" }

    /// Opens (creating it when missing) the SQLite file at `path` in WAL mode with
    /// `synchronous = FULL`. The schema is prepared by `open`, which `RelayStore` calls.
    /// - Throws: `.database` when the file cannot be opened or is not a database.
    public init(path: String) throws {
        self.path = path
        db = try SQLiteDatabase(path: path, options: .init(create: true, journalMode: .wal, synchronous: .full))
    }

    var inMemory: Bool { path.isEmpty || path == ":memory:" || path.hasPrefix("file::memory:") }

    public var tokenInsertionOrder: String { "rowid" }

    /// `julianday('now')` (this host's clock, to the millisecond) as milliseconds since 1970.
    public var nowMillisecondsSQL: String { "CAST(round((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)" }

    public func transaction<T>(_ mode: RelayTransactionMode, _ body: (any RelayTransaction) throws -> T) throws -> T {
        try db.transaction(mode.writes ? .immediate : .deferred) {
            let tx = SQLiteRelayTransaction(db, mode: mode)
            defer { tx.end() }
            return try body(tx)
        }
    }

    /// `sqlite_sequence` holds the greatest sequence AUTOINCREMENT ever gave `ops`; it is
    /// raised here by `count`, and the rows are then inserted with explicit sequences (an
    /// explicit value at or below the counter leaves it as it is). The database's write
    /// lock, taken by `BEGIN IMMEDIATE`, is held from the read to the commit.
    public func allocateSequences(_ count: Int, _ tx: any RelayTransaction) throws -> Int64 {
        precondition(count > 0, "allocating no sequence")
        // The same rule as PostgreSQL's, so that the tests on SQLite find a misuse too.
        guard (tx as? SQLiteRelayTransaction)?.mode ?? .allocating == .allocating else {
            throw LnoteError(.invalidState, "change sequences allocated in a transaction not opened .allocating", path: path)
        }
        let issued = try Self.issuedSequence(tx)
        let top = Int64(clamping: issued) + Int64(count)
        if try tx.execute("UPDATE sqlite_sequence SET seq = ?1 WHERE name = 'ops'", [.integer(top)]) == 0 {
            try tx.execute("INSERT INTO sqlite_sequence (name, seq) VALUES ('ops', ?1)", [.integer(top)])
        }
        return Int64(clamping: issued) + 1
    }

    public func issued(through sequence: Int64) throws {
        try mark.withLock { $0 }?.advance(to: UInt64(max(0, sequence)))
    }

    /// Closes the database. The store that closes while no other store has the file open
    /// writes the exact high-water mark ([SYNC-58]).
    /// - Throws: `.io` when the mark cannot be written (the database is closed all the
    ///   same; the next opening then treats the file as not closed cleanly).
    public func close() throws {
        var markError: (any Error)?
        if let m = mark.withLock({ m in defer { m = nil }; return m }) {
            do { try m.close { try self.transaction(.read) { try Self.issuedSequence($0) } } } catch { markError = error }
        }
        try db.close()
        if let markError { throw markError }
    }

    /// The greatest change sequence the database ever issued: SQLite's AUTOINCREMENT
    /// counter for `ops` (which outlives deleted rows), or the greatest held.
    static func issuedSequence(_ tx: any RelayTransaction) throws -> UInt64 {
        let counter = try tx.query("SELECT seq FROM sqlite_sequence WHERE name = 'ops'").first?.first?.int64 ?? 0
        let held = try tx.query("SELECT coalesce(max(seq), 0) FROM ops").first?.first?.int64 ?? 0
        return UInt64(max(0, max(counter, held)))
    }
}

/// A transaction of `RelaySQLiteDatabase`: statements are kept by SQL text for the
/// transaction and finalized when it ends.
final class SQLiteRelayTransaction: RelayTransaction {
    let db: SQLiteDatabase
    let mode: RelayTransactionMode
    private var statements: [String: SQLiteRelayStatement] = [:]

    init(_ db: SQLiteDatabase, mode: RelayTransactionMode) {
        self.db = db
        self.mode = mode
    }

    func end() {
        for s in statements.values { s.statement.finalize() }
        statements.removeAll()
    }

    func prepare(_ sql: String) throws -> any RelayStatement {
        if let s = statements[sql] { return s }
        let s = SQLiteRelayStatement(try db.prepare(sql), db: db)
        statements[sql] = s
        return s
    }
}

final class SQLiteRelayStatement: RelayStatement {
    let statement: SQLiteDatabase.Statement
    let db: SQLiteDatabase

    init(_ statement: SQLiteDatabase.Statement, db: SQLiteDatabase) {
        self.statement = statement
        self.db = db
    }

    func rows(_ params: [RelayValue]) throws -> [[RelayValue]] {
        var out: [[RelayValue]] = []
        try forEach(params) { out.append($0); return true }
        return out
    }

    func forEach(_ params: [RelayValue], _ body: ([RelayValue]) throws -> Bool) throws {
        try statement.reset()
        try statement.bind(params.map(\.sqlite))
        // Reset at the end, so a statement stopped early holds no read cursor.
        defer { try? statement.reset() }
        while try statement.step() {
            guard try body(try statement.row().map(RelayValue.init)) else { break }
        }
    }

    /// One step, then a reset: no read cursor is left open.
    func first(_ params: [RelayValue]) throws -> [RelayValue]? {
        try statement.reset()
        try statement.bind(params.map(\.sqlite))
        defer { try? statement.reset() }
        return try statement.step() ? try statement.row().map(RelayValue.init) : nil
    }

    @discardableResult
    func run(_ params: [RelayValue]) throws -> Int {
        try statement.run(params.map(\.sqlite))
        try statement.reset()
        return db.changes
    }
}

extension RelayValue {
    var sqlite: SQLiteValue {
        switch self {
        case .null: .null
        case .integer(let v): .integer(v)
        case .text(let s): .text(s)
        case .blob(let b): .blob(b)
        }
    }

    /// A REAL, which no relay column holds, reads as NULL: every accessor then finds the
    /// row malformed, as it would a REAL.
    init(_ v: SQLiteValue) {
        switch v {
        case .null, .real: self = .null
        case .integer(let i): self = .integer(i)
        case .text(let s): self = .text(s)
        case .blob(let b): self = .blob(b)
        }
    }
}
