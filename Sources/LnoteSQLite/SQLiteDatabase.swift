// SQLiteDatabase: one connection to one SQLite file.
//
// Threading model: a connection may be shared between threads (the class is
// `@unchecked Sendable`). Every call into SQLite made through this wrapper, and every
// `Statement` call, runs under one recursive lock owned by the connection, so sequences
// such as "step, then read `sqlite3_errmsg`" are atomic. `transaction { }` holds that lock
// for the whole body, so another thread's calls wait until the transaction ends, while
// calls made inside the body from the same thread proceed (the lock is recursive).
// `Statement` is not `Sendable`: keep each prepared statement in the isolation domain that
// prepared it. For real parallel reads, open one connection per thread (WAL mode allows
// readers alongside one writer); the busy timeout covers contention between connections.
import CLnoteSQLite
import Foundation
import LnoteModel

/// One open SQLite database connection.
///
/// Opening applies the options (journal mode, synchronous level, busy timeout, foreign
/// keys). Every failure throws `LnoteError(.database)` whose `path` is the database path and
/// whose `underlying` reads `SQLITE_xxx (code): sqlite3_errmsg`. Call `close()` when done;
/// `deinit` closes a connection that was not closed.
public final class SQLiteDatabase: @unchecked Sendable {
    /// How the connection is opened and configured.
    public struct Options: Sendable, Equatable {
        /// `PRAGMA journal_mode`.
        public enum JournalMode: String, Sendable, Equatable {
            case wal = "wal"
            case delete = "delete"
            case truncate = "truncate"
            case memory = "memory"
        }
        /// `PRAGMA synchronous`.
        public enum Synchronous: String, Sendable, Equatable {
            /// fsync at every commit: durable against power loss.
            case full = "FULL"
            /// In WAL mode: fsync at checkpoints only (a power loss may lose recent commits,
            /// never corrupt the file).
            case normal = "NORMAL"
            case off = "OFF"
        }

        /// Create the file when it does not exist.
        public var create: Bool = true
        /// Open read-only (no journal mode change is attempted).
        public var readOnly: Bool = false
        public var journalMode: JournalMode = .wal
        public var synchronous: Synchronous = .full
        /// How long a statement waits on another connection's lock before `SQLITE_BUSY`.
        public var busyTimeoutMilliseconds: Int32 = 5_000
        /// `PRAGMA foreign_keys = ON`.
        public var foreignKeys: Bool = true

        public init(create: Bool = true, readOnly: Bool = false, journalMode: JournalMode = .wal,
                    synchronous: Synchronous = .full, busyTimeoutMilliseconds: Int32 = 5_000,
                    foreignKeys: Bool = true) {
            self.create = create
            self.readOnly = readOnly
            self.journalMode = journalMode
            self.synchronous = synchronous
            self.busyTimeoutMilliseconds = busyTimeoutMilliseconds
            self.foreignKeys = foreignKeys
        }
    }

    /// `BEGIN DEFERRED | IMMEDIATE | EXCLUSIVE`.
    public enum TransactionKind: String, Sendable {
        case deferred = "DEFERRED"
        case immediate = "IMMEDIATE"
        case exclusive = "EXCLUSIVE"
    }

    /// The path given at open (`:memory:` for an in-memory database).
    public let path: String
    public let options: Options

    /// Guards `handle`, `statements` and every SQLite call (see the threading model above).
    let lock = NSRecursiveLock()
    /// nil once closed.
    private var handle: OpaquePointer?
    /// Live prepared statements, finalized by `close()`.
    private var statements: [ObjectIdentifier: StatementHandle] = [:]
    private var savepointDepth = 0

    /// Opens (or creates) the database at `path` and applies `options`.
    ///
    /// - Throws: `LnoteError(.database)` when the file cannot be opened, is not a database
    ///   (`SQLITE_NOTADB`), or a pragma fails; `.invalidState` when WAL mode was requested
    ///   but SQLite kept another journal mode.
    public init(path: String, options: Options = Options()) throws {
        self.path = path
        self.options = options
        var flags = options.readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE
        if options.create && !options.readOnly { flags |= SQLITE_OPEN_CREATE }
        flags |= SQLITE_OPEN_FULLMUTEX | SQLITE_OPEN_EXRESCODE
        var db: OpaquePointer?
        let rc = sqlite3_open_v2(path, &db, flags, nil)
        guard rc == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(rc))
            if let db { sqlite3_close_v2(db) }
            throw LnoteError(.database, "cannot open database", path: path,
                             underlying: SQLiteResultCode.describe(rc, message: message))
        }
        handle = db
        sqlite3_extended_result_codes(db, 1)
        do {
            try check(sqlite3_busy_timeout(db, options.busyTimeoutMilliseconds), "set busy timeout")
            // Reading the schema is the first thing that touches the file: a file that is
            // not a database fails here with SQLITE_NOTADB rather than later.
            _ = try query("SELECT count(*) FROM sqlite_master")
            if !options.readOnly {
                let rows = try query("PRAGMA journal_mode = \(options.journalMode.rawValue)")
                let mode = rows.first?.first?.string?.lowercased() ?? ""
                if mode != options.journalMode.rawValue && path != ":memory:" && !path.isEmpty {
                    throw LnoteError(.invalidState,
                                     "journal_mode \(options.journalMode.rawValue) requested but SQLite kept '\(mode)'",
                                     path: path)
                }
            }
            try execute("PRAGMA synchronous = \(options.synchronous.rawValue)")
            try execute("PRAGMA foreign_keys = \(options.foreignKeys ? "ON" : "OFF")")
        } catch var e as LnoteError {
            sqlite3_close_v2(db)
            handle = nil
            e.message = "cannot open database: " + e.message
            throw e
        } catch {
            sqlite3_close_v2(db)
            handle = nil
            throw error
        }
    }

    deinit {
        // Statements hold a strong reference to their database, so none is alive here.
        if let handle { sqlite3_close_v2(handle) }
    }

    /// Finalizes every live statement and closes the connection.
    ///
    /// Calling `close()` again does nothing. Statements prepared from this connection
    /// throw `.invalidState` afterwards.
    /// - Throws: `LnoteError(.database)` when SQLite refuses to close (the handle is then
    ///   released anyway with `sqlite3_close_v2`, so nothing leaks).
    public func close() throws {
        lock.lock()
        defer { lock.unlock() }
        guard let db = handle else { return }
        for (_, s) in statements {
            if let p = s.pointer { sqlite3_finalize(p) }
            s.pointer = nil
        }
        statements.removeAll()
        handle = nil
        let rc = sqlite3_close(db)
        if rc != SQLITE_OK {
            let message = String(cString: sqlite3_errmsg(db))
            sqlite3_close_v2(db)
            throw LnoteError(.database, "close failed", path: path,
                             underlying: SQLiteResultCode.describe(rc, message: message))
        }
    }

    /// Whether `close()` has run.
    public var isClosed: Bool {
        lock.lock(); defer { lock.unlock() }
        return handle == nil
    }

    /// Runs one or more SQL statements separated by `;`, discarding any rows.
    public func execute(_ sql: String) throws {
        try withHandle { db in
            var errmsg: UnsafeMutablePointer<CChar>?
            let rc = sqlite3_exec(db, sql, nil, nil, &errmsg)
            if rc != SQLITE_OK {
                let message = errmsg.map { String(cString: $0) } ?? String(cString: sqlite3_errmsg(db))
                sqlite3_free(errmsg)
                throw LnoteError(.database, "execute failed: \(Self.excerpt(sql))", path: path,
                                 underlying: SQLiteResultCode.describe(sqlite3_extended_errcode(db), message: message))
            }
        }
    }

    /// Runs one statement with `bindings` (positional, `?1`, `?2`, ...) to completion.
    public func execute(_ sql: String, _ bindings: [SQLiteValue]) throws {
        try withHandle { _ in
            let statement = try prepare(sql)
            defer { statement.finalize() }
            try statement.bind(bindings)
            try statement.run()
        }
    }

    /// Runs one statement with `bindings` and returns every row.
    public func query(_ sql: String, _ bindings: [SQLiteValue] = []) throws -> [[SQLiteValue]] {
        try withHandle { _ in
            let statement = try prepare(sql)
            defer { statement.finalize() }
            try statement.bind(bindings)
            return try statement.allRows()
        }
    }

    /// Compiles one SQL statement. Trailing text after the first statement is rejected.
    public func prepare(_ sql: String) throws -> Statement {
        try withHandle { db in
            var stmt: OpaquePointer?
            var tail: UnsafePointer<CChar>?
            let rc = sql.withCString { cSQL -> Int32 in
                let rc = sqlite3_prepare_v3(db, cSQL, -1, 0, &stmt, &tail)
                if rc == SQLITE_OK, let tail, tail.pointee != 0 {
                    // Only whitespace or comments may follow the statement: compiling the
                    // rest must yield no statement.
                    var extra: OpaquePointer?
                    let rc2 = sqlite3_prepare_v3(db, tail, -1, 0, &extra, nil)
                    defer { sqlite3_finalize(extra) }
                    if rc2 != SQLITE_OK || extra != nil { return -1 }
                }
                return rc
            }
            if rc == -1 {
                sqlite3_finalize(stmt)
                throw LnoteError(.invalidArgument, "prepare takes one statement; extra SQL after the first: \(Self.excerpt(sql))",
                                 path: path)
            }
            guard rc == SQLITE_OK, let stmt else {
                if rc == SQLITE_OK {
                    throw LnoteError(.invalidArgument, "no SQL statement in: \(Self.excerpt(sql))", path: path)
                }
                throw error(rc, db: db, "prepare failed: \(Self.excerpt(sql))")
            }
            let box = StatementHandle(stmt)
            statements[ObjectIdentifier(box)] = box
            return Statement(database: self, handle: box, sql: sql)
        }
    }

    /// Runs `body` inside a transaction: `BEGIN IMMEDIATE` (by default), `COMMIT` when it
    /// returns, `ROLLBACK` when it throws (the error is rethrown).
    ///
    /// Nested calls become savepoints (`SAVEPOINT` / `RELEASE` / `ROLLBACK TO`), so a failing
    /// inner block undoes only its own changes. The connection lock is held for the whole
    /// body: other threads' calls wait.
    @discardableResult
    public func transaction<T>(_ kind: TransactionKind = .immediate, _ body: () throws -> T) throws -> T {
        lock.lock()
        defer { lock.unlock() }
        let db = try openHandle()
        if sqlite3_get_autocommit(db) == 0 {
            // Already inside a transaction: use a savepoint.
            savepointDepth += 1
            let name = "lnote_sp\(savepointDepth)"
            defer { savepointDepth -= 1 }
            try execute("SAVEPOINT \(name)")
            do {
                let result = try body()
                try execute("RELEASE \(name)")
                return result
            } catch {
                if sqlite3_get_autocommit(db) == 0 {
                    try? execute("ROLLBACK TO \(name)")
                    try? execute("RELEASE \(name)")
                }
                throw error
            }
        }
        try execute("BEGIN \(kind.rawValue)")
        let result: T
        do {
            result = try body()
        } catch {
            // SQLite may already have rolled back (e.g. after SQLITE_FULL); only roll back
            // a transaction that is still open.
            if sqlite3_get_autocommit(db) == 0 { try? execute("ROLLBACK") }
            throw error
        }
        do {
            try execute("COMMIT")
        } catch {
            if sqlite3_get_autocommit(db) == 0 { try? execute("ROLLBACK") }
            throw error
        }
        return result
    }

    /// Whether a transaction is open on this connection.
    public var isInTransaction: Bool {
        lock.lock(); defer { lock.unlock() }
        guard let handle else { return false }
        return sqlite3_get_autocommit(handle) == 0
    }

    /// The rowid of the most recent successful INSERT on this connection.
    public var lastInsertRowID: Int64 {
        lock.lock(); defer { lock.unlock() }
        guard let handle else { return 0 }
        return sqlite3_last_insert_rowid(handle)
    }

    /// Rows changed by the most recent INSERT, UPDATE or DELETE.
    public var changes: Int {
        lock.lock(); defer { lock.unlock() }
        guard let handle else { return 0 }
        return Int(sqlite3_changes64(handle))
    }

    /// The SQLite library version, e.g. `3.40.1`.
    public static var libraryVersion: String { String(cString: sqlite3_libversion()) }

    // MARK: - Internal

    /// Runs `body` under the lock with the open handle.
    func withHandle<T>(_ body: (OpaquePointer) throws -> T) throws -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body(try openHandle())
    }

    /// The handle; the caller holds the lock.
    private func openHandle() throws -> OpaquePointer {
        guard let handle else {
            throw LnoteError(.invalidState, "database is closed", path: path)
        }
        return handle
    }

    /// Throws the connection's current error when `rc` is not `SQLITE_OK`; the caller holds the lock.
    func check(_ rc: Int32, _ what: @autoclosure () -> String) throws {
        guard rc != SQLITE_OK else { return }
        throw error(rc, db: handle, what())
    }

    /// An error for `rc`, with `sqlite3_errmsg` when the connection has one; the caller holds the lock.
    func error(_ rc: Int32, db: OpaquePointer?, _ what: String) -> LnoteError {
        var code = rc
        var message = String(cString: sqlite3_errstr(rc))
        if let db {
            let ext = sqlite3_extended_errcode(db)
            // Prefer the connection's extended code when it refines the same primary code.
            if ext & 0xFF == rc & 0xFF { code = ext }
            message = String(cString: sqlite3_errmsg(db))
        }
        return LnoteError(.database, what, path: path,
                          underlying: SQLiteResultCode.describe(code, message: message))
    }

    /// Called by `Statement` when it finalizes itself; the caller holds the lock.
    func forget(_ box: StatementHandle) {
        statements.removeValue(forKey: ObjectIdentifier(box))
    }

    /// The SQL as it appears in error messages: one line, at most 200 characters.
    static func excerpt(_ sql: String) -> String {
        let oneLine = sql.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
            .joined(separator: " ")
        return oneLine.count > 200 ? String(oneLine.prefix(200)) + "…" : oneLine
    }
}

/// The `sqlite3_stmt *` shared by a `Statement` and its database's registry, so that
/// `close()` can finalize statements that are still alive.
final class StatementHandle {
    var pointer: OpaquePointer?
    init(_ pointer: OpaquePointer) { self.pointer = pointer }
}
