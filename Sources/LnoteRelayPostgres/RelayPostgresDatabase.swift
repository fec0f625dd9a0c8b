import Foundation
import LnoteModel
import LnotePostgres
import LnoteServer
import Synchronization

/// The relay's PostgreSQL backend (issue 17): several relay processes may share one
/// database, each with a pool of connections; changes one process stores wake the long
/// polls another holds, through `NOTIFY`.
///
/// - Transactions: `.write` is `SERIALIZABLE`; a serialization failure (or deadlock) rolls
///   the body back and runs it again, at most `maxWriteAttempts` times, after a short
///   randomized pause. `.read` is `REPEATABLE READ READ ONLY`: one snapshot, never a
///   serialization failure.
/// - Statements are prepared once per pooled connection (named by a hash of their SQL), so
///   the relay's few dozen statements are parsed and planned once per connection.
/// - Change sequences come from one counter row (`relay_counters`), updated with
///   `RETURNING`: its row lock is held to the commit, so sequences become visible in
///   allocation order (`RelayDatabase.allocateSequences`).
/// - `publishChange` is `pg_notify('lnote_relay', '<notebook UUID>')`, delivered at the
///   commit; `startChangeFeed` listens on a dedicated connection on its own thread
///   (`RelayPostgresDatabase+ChangeFeed.swift`).
/// - The schema, its version and its migrations: `RelayPostgresDatabase+Schema.swift`.
///
/// Failures are `LnoteError(.database)` naming `location` (the URL without its password):
/// an unreachable server says so with libpq's reason (host or socket included). While the
/// server is away, calls fail; once it is back, later calls succeed with new connections.
public final class RelayPostgresDatabase: RelayDatabase, @unchecked Sendable {
    /// The `NOTIFY` channel of relay changes; the payload is the notebook's UUID.
    public static let channel = "lnote_relay"
    /// The default number of pooled connections.
    public static let defaultPoolSize = 8

    /// The connection string without its password.
    public let location: String
    /// At most this many transactions of this process run at once.
    public let poolSize: Int
    /// How many times a write body runs before a serialization failure is reported.
    public let maxWriteAttempts: Int
    let url: String
    let pool: PGPool
    let schema: RelayPostgresSchema
    let closed = Atomic<Bool>(false)
    let feed = Mutex<PostgresChangeFeed?>(nil)

    /// A backend for the database at `url`; no connection is opened until `open` (which
    /// `RelayStore` calls).
    ///
    /// - Parameters:
    ///   - url: a `postgresql://` URI or a libpq `key=value` string.
    ///   - poolSize: the most connections (and concurrent transactions) of this process.
    ///   - maxWriteAttempts: runs of a write body before a serialization failure is reported.
    /// - Throws: `.invalidArgument` for a pool size or attempt count below 1.
    public convenience init(url: String, poolSize: Int = RelayPostgresDatabase.defaultPoolSize,
                            maxWriteAttempts: Int = 12) throws {
        try self.init(url: url, poolSize: poolSize, maxWriteAttempts: maxWriteAttempts, schema: .current)
    }

    /// As the public initializer, with another schema (tests of migrations).
    init(url: String, poolSize: Int, maxWriteAttempts: Int = 12, schema: RelayPostgresSchema) throws {
        let location = Self.redacted(url)
        guard poolSize >= 1 else {
            throw LnoteError(.invalidArgument, "the PostgreSQL pool size must be at least 1, not \(poolSize)", path: location)
        }
        guard maxWriteAttempts >= 1 else {
            throw LnoteError(.invalidArgument, "write attempts must be at least 1, not \(maxWriteAttempts)", path: location)
        }
        self.url = url
        self.location = location
        self.poolSize = poolSize
        self.maxWriteAttempts = maxWriteAttempts
        self.schema = schema
        pool = PGPool(url: url, size: poolSize, checkoutTimeout: .seconds(60), connectTimeoutSeconds: 10)
    }

    deinit {
        if !closed.load(ordering: .acquiring) { try? close() }
    }

    /// PostgreSQL runs transactions of one process concurrently: `RelayStore` then serves
    /// requests on a concurrent queue, bounded by the pool.
    public var allowsConcurrentTransactions: Bool { true }

    /// The identity column of `tokens`.
    public var tokenInsertionOrder: String { "ins" }

    public func transaction<T>(_ mode: RelayTransactionMode, _ body: (any RelayTransaction) throws -> T) throws -> T {
        var attempt = 1
        while true {
            try checkOpen()
            do {
                return try pool.withConnection { conn in
                    try conn.transaction(mode == .write ? .serializable : .repeatableRead, readOnly: mode == .read) {
                        if mode == .write {
                            // Writers take turns, before their snapshot is taken (at their first
                            // query): every push updates the one sequence counter row, so two
                            // serializable writers that overlap would otherwise conflict on it
                            // and retry, the last of N concurrent pushers about N times. Readers
                            // are not blocked (EXCLUSIVE admits ACCESS SHARE).
                            try conn.execute("LOCK TABLE relay_counters IN EXCLUSIVE MODE")
                        }
                        let tx = PostgresRelayTransaction(conn)
                        return try body(tx)
                    }
                }
            } catch let e as PGError where e.isSerializationFailure && attempt < maxWriteAttempts {
                attempt += 1
                Self.pause(beforeAttempt: attempt)
            } catch let e as PGError {
                throw lnoteError(e, attempts: attempt)
            }
        }
    }

    /// One counter row, `UPDATE … RETURNING`: the row lock orders the allocations by commit.
    public func allocateSequences(_ count: Int, _ tx: any RelayTransaction) throws -> Int64 {
        precondition(count > 0, "allocating no sequence")
        let rows = try tx.query("UPDATE relay_counters SET value = value + ?1 WHERE name = 'ops' RETURNING value",
                                [.integer(Int64(count))])
        guard let top = rows.first?.first?.int64 else {
            throw LnoteError(.corrupt, "the relay's sequence counter (relay_counters 'ops') is missing", path: location)
        }
        return top - Int64(count) + 1
    }

    /// `pg_notify`, which PostgreSQL delivers when the transaction commits (and drops when it
    /// rolls back, so a retried body notifies once).
    public func publishChange(of notebook: NotebookID, _ tx: any RelayTransaction) throws {
        try tx.execute("SELECT pg_notify('\(Self.channel)', ?1)", [.text(notebook.description)])
    }

    public func startChangeFeed(_ changed: @escaping @Sendable (NotebookID) -> Void) throws {
        try checkOpen()
        let started = PostgresChangeFeed(url: url, location: location, changed: changed)
        let previous = feed.withLock { f in defer { f = started }; return f }
        previous?.stop()
        started.start()
    }

    /// Whether the change feed is listening now, and how many times it connected (for tests
    /// and reports); nil before `startChangeFeed`.
    public var changeFeedStatus: (listening: Bool, connections: Int)? {
        feed.withLock { $0 }?.status
    }

    /// Stops the change feed (waiting for its thread) and closes the pool; connections in
    /// use are closed when their transaction ends.
    public func close() throws {
        guard !closed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        feed.withLock { f in defer { f = nil }; return f }?.stop()
        pool.close()
    }

    // MARK: - Internals

    func checkOpen() throws {
        if closed.load(ordering: .acquiring) {
            throw LnoteError(.invalidState, "the relay's PostgreSQL database is closed", path: location)
        }
    }

    /// A few milliseconds, growing with the attempt, randomized so that writers that
    /// conflicted do not meet again in step.
    static func pause(beforeAttempt attempt: Int) {
        let ceiling = min(50_000, 500 << min(attempt, 7))
        usleep(UInt32(Int.random(in: ceiling / 4...ceiling)))
    }

    /// The project's error for a PostgreSQL failure, in words, naming `location`.
    func lnoteError(_ e: PGError, attempts: Int = 1) -> LnoteError {
        let state = e.sqlState.map { "SQLSTATE \($0)" }
        var detail = e.message
        if let d = e.detail, !d.isEmpty { detail += " (\(d))" }
        let error: LnoteError
        switch e.code {
        case .connection:
            error = LnoteError(.database, "the relay's PostgreSQL database cannot be reached or the connection was lost: \(detail)",
                               path: location, underlying: state)
        case .serializationFailure:
            error = LnoteError(.database, "a write still conflicted with concurrent writers after \(attempts) attempts: \(detail)",
                               path: location, underlying: state)
        case .timeout:
            error = LnoteError(.database, "all \(poolSize) PostgreSQL connections of this relay stayed busy: \(detail)",
                               path: location)
        case .invalidState where closed.load(ordering: .acquiring):
            error = LnoteError(.invalidState, "the relay's PostgreSQL database is closed", path: location)
        default:
            // Always a database failure: the relay answers it as its own (500), never as the
            // client's bad request carrying the database's location and SQL ([SYNC-81]).
            error = LnoteError(.database, "PostgreSQL \(e.code.rawValue): \(detail)" + (e.context.map { " in \($0)" } ?? ""),
                               path: location, underlying: state)
        }
        return error
    }

    /// `url` as libpq reads it (`key=value` settings), without `password` or `sslpassword`:
    /// parsed by libpq itself, so that no spelling it accepts (spaces around `=`, a `?` or `#`
    /// inside the password of a URI, a query parameter) lets a secret through. A string
    /// libpq cannot parse is not shown at all.
    public static func redacted(_ url: String) -> String {
        (try? PGConnection.redacted(url)) ?? "(a PostgreSQL connection string that does not parse; not shown)"
    }
}
