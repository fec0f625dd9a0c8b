import Foundation
import LnoteModel
import LnotePostgres
import LnoteServer
import Synchronization

/// The relay's PostgreSQL backend (issue 17): several relay processes may share one
/// database, each with a pool of connections; changes one process stores wake the long
/// polls another holds, through `NOTIFY`.
///
/// - Transactions: `.write` and `.allocating` are `SERIALIZABLE`; a serialization failure
///   (or deadlock) rolls the body back and runs it again, at most `maxWriteAttempts` times,
///   after a short randomized pause. `.read` is `REPEATABLE READ READ ONLY`: one snapshot,
///   never a serialization failure. Every transaction waits at most `lockTimeout` for a
///   lock (`SET LOCAL lock_timeout`); one that could not have it (SQLSTATE 55P03) is rolled
///   back and run again, at most `maxLockWaits` times in all, then reported.
/// - Only `.allocating` transactions (pushes) take the counter's lock, as their first
///   statement (see `transaction`): pulls, checkpoints, tokens and notebooks never wait
///   for a push to commit.
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
    /// How long a statement waits for a lock before the transaction is run again.
    public let lockTimeout: Duration
    /// How many lock waits a transaction may run out of before the failure is reported.
    public let maxLockWaits: Int
    /// Whether `startChangeFeed` listens (false: a database opened for a short command).
    public let changeFeed: Bool
    /// How often the change feed's connection is checked (`PGConnection.checkAlive`), and
    /// how long the check waits for its answer.
    let feedCheck: (interval: Duration, timeout: Duration)
    let url: String
    let pool: PGPool
    let schema: RelayPostgresSchema
    let closed = Atomic<Bool>(false)
    let feed = Mutex<PostgresChangeFeed?>(nil)

    /// `pg_stat_activity.application_name` of the pooled connections (unless the URL names one).
    public static let applicationName = "lnote relay"
    /// `pg_stat_activity.application_name` of the change feed's connection.
    public static let changeFeedApplicationName = "lnote relay change feed"
    /// `pg_stat_activity.application_name` of the presence writer's connection.
    public static let presenceApplicationName = "lnote relay presence"

    /// A backend for the database at `url`; no connection is opened until `open` (which
    /// `RelayStore` calls).
    ///
    /// - Parameters:
    ///   - url: a `postgresql://` URI or a libpq `key=value` string.
    ///   - poolSize: the most connections (and concurrent transactions) of this process.
    ///   - maxWriteAttempts: runs of a write body before a serialization failure is reported.
    ///   - lockTimeout: the longest wait for a lock (the counter's, a row's) before the
    ///     transaction is rolled back and run again.
    ///   - maxLockWaits: lock waits run out before the failure is reported.
    ///   - changeFeed: false for a command that serves no long polls (`lnote relay notebook
    ///     create …`): `startChangeFeed` then opens no listening connection.
    /// - Throws: `.invalidArgument` for a pool size or count below 1, or a lock timeout
    ///   below a millisecond.
    public convenience init(url: String, poolSize: Int = RelayPostgresDatabase.defaultPoolSize,
                            maxWriteAttempts: Int = 12, lockTimeout: Duration = .seconds(5), maxLockWaits: Int = 3,
                            changeFeed: Bool = true) throws {
        try self.init(url: url, poolSize: poolSize, maxWriteAttempts: maxWriteAttempts, lockTimeout: lockTimeout,
                      maxLockWaits: maxLockWaits, changeFeed: changeFeed, schema: .current)
    }

    /// As the public initializer, with another schema (tests of migrations) and the change
    /// feed's check interval (tests of a lost feed).
    init(url: String, poolSize: Int, maxWriteAttempts: Int = 12, lockTimeout: Duration = .seconds(5), maxLockWaits: Int = 3,
         changeFeed: Bool = true, feedCheck: (interval: Duration, timeout: Duration) = (.seconds(15), .seconds(10)),
         schema: RelayPostgresSchema) throws {
        let location = Self.redacted(url)
        guard poolSize >= 1 else {
            throw LnoteError(.invalidArgument, "the PostgreSQL pool size must be at least 1, not \(poolSize)", path: location)
        }
        guard maxWriteAttempts >= 1, maxLockWaits >= 1 else {
            throw LnoteError(.invalidArgument, "write attempts and lock waits must be at least 1, not \(maxWriteAttempts) "
                             + "and \(maxLockWaits)", path: location)
        }
        guard lockTimeout >= .milliseconds(1) else {
            throw LnoteError(.invalidArgument, "the lock timeout must be at least 1 ms, not \(lockTimeout)", path: location)
        }
        self.url = url
        self.location = location
        self.poolSize = poolSize
        self.maxWriteAttempts = maxWriteAttempts
        self.lockTimeout = lockTimeout
        self.maxLockWaits = maxLockWaits
        self.changeFeed = changeFeed
        self.feedCheck = feedCheck
        self.schema = schema
        pool = PGPool(url: url, size: poolSize, checkoutTimeout: .seconds(60), connectTimeoutSeconds: 10,
                      applicationName: Self.applicationName, keepalive: .standard)
    }

    deinit {
        if !closed.load(ordering: .acquiring) { try? close() }
    }

    /// PostgreSQL runs transactions of one process concurrently: `RelayStore` then serves
    /// requests on as many threads as the pool has connections.
    public var allowsConcurrentTransactions: Bool { true }
    public var maxConcurrentTransactions: Int { poolSize }

    /// The identity column of `tokens`.
    public var tokenInsertionOrder: String { "ins" }

    /// The server's clock (`clock_timestamp()`: the time of the statement, not of its
    /// transaction's start) as milliseconds since 1970.
    public var nowMillisecondsSQL: String { "CAST(floor(extract(epoch FROM clock_timestamp()) * 1000) AS bigint)" }

    /// Opens the transaction with one message (`BEGIN` and its prelude), then runs `body`.
    ///
    /// An `.allocating` transaction (a push) takes `LOCK TABLE relay_counters IN EXCLUSIVE
    /// MODE` as its first statement, before its snapshot exists: `LOCK` is a utility
    /// statement, which PostgreSQL runs without taking a snapshot (as it does `BEGIN` and
    /// `SET`), so the `SERIALIZABLE` snapshot is taken by the body's first query, after the
    /// lock was granted, and sees every push that committed before. So pushes take turns:
    /// they never overlap on the counter row (two overlapping serializable writers of that
    /// row would conflict, and the last of N concurrent pushers retry about N times), and
    /// sequences become visible in allocation order (the lock is released after the commit
    /// is visible). Readers are not blocked (EXCLUSIVE admits ACCESS SHARE), and writes that
    /// allocate nothing (checkpoints, tokens, notebooks, epochs) do not take it.
    /// Taking the lock any later — after a query — would fix the snapshot before the wait,
    /// and a push would then fail on the counter row instead of seeing its predecessor.
    public func transaction<T>(_ mode: RelayTransactionMode, _ body: (any RelayTransaction) throws -> T) throws -> T {
        var attempt = 1, lockWaits = 0
        let prelude = Self.prelude(mode, lockTimeout: lockTimeout)
        while true {
            try checkOpen()
            do {
                return try pool.withConnection { conn in
                    try conn.transaction(mode.writes ? .serializable : .repeatableRead, readOnly: mode == .read,
                                         prelude: prelude) {
                        try body(PostgresRelayTransaction(conn, allocates: mode == .allocating))
                    }
                }
            } catch let e as PGError where e.isSerializationFailure && attempt < maxWriteAttempts {
                attempt += 1
                Self.pause(beforeAttempt: attempt)
            } catch let e as PGError where e.isLockTimeout && lockWaits + 1 < maxLockWaits {
                // Already waited `lockTimeout`: run again at once (the holder may have been a
                // transaction that since ended; a stuck one is reported after maxLockWaits).
                lockWaits += 1
                attempt += 1
            } catch let e as PGError {
                throw lnoteError(e, attempts: attempt, lockWaits: lockWaits + (e.isLockTimeout ? 1 : 0))
            }
        }
    }

    /// What `BEGIN` carries: the lock timeout, and for a push the counter's lock (first).
    static func prelude(_ mode: RelayTransactionMode, lockTimeout: Duration) -> String {
        let (seconds, attoseconds) = lockTimeout.components
        let ms = max(1, seconds * 1000 + attoseconds / 1_000_000_000_000_000)
        let timeout = "SET LOCAL lock_timeout = \(ms)"
        // Pushes queue in order on the counter's lock: under a steady stream of pushes the
        // wait is the queue's length, not a stuck holder, and a push timed out there would
        // go to the back of the queue again. It waits 12 times as long for that lock; the
        // body's statements keep the short timeout.
        return mode == .allocating
            ? "SET LOCAL lock_timeout = \(ms * 12); LOCK TABLE relay_counters IN EXCLUSIVE MODE; \(timeout)" : timeout
    }

    /// One counter row, `UPDATE … RETURNING`: the row lock orders the allocations by commit.
    public func allocateSequences(_ count: Int, _ tx: any RelayTransaction) throws -> Int64 {
        precondition(count > 0, "allocating no sequence")
        guard (tx as? PostgresRelayTransaction)?.allocates == true else {
            throw LnoteError(.invalidState, "change sequences allocated in a transaction not opened .allocating "
                             + "(it does not hold the counter's lock, so the order of sequences is not kept)", path: location)
        }
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

    /// Returns once the feed listens (a change committed afterwards is reported), or once its
    /// first connection failed (every notebook is then reported when a later one listens),
    /// waiting at most about the connect timeout.
    public func startChangeFeed(_ changed: @escaping @Sendable (NotebookID) -> Void) throws {
        try checkOpen()
        guard changeFeed else { return }
        let started = PostgresChangeFeed(url: url, location: location, check: feedCheck, changed: changed)
        let previous = feed.withLock { f in defer { f = started }; return f }
        previous?.stop()
        started.start(waitingUpTo: .seconds(15))
    }

    /// Whether the change feed is listening now, and how many times it connected (for tests
    /// and reports); nil before `startChangeFeed`, or without a change feed.
    public var changeFeedStatus: (listening: Bool, connections: Int)? {
        feed.withLock { $0 }?.status
    }

    /// The server process of the change feed's connection while it listens (for tests).
    public var changeFeedBackendPID: Int32? {
        feed.withLock { $0 }?.backendPID
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
    func lnoteError(_ e: PGError, attempts: Int = 1, lockWaits: Int = 0) -> LnoteError {
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
        case .lockTimeout:
            error = LnoteError(.database, "a lock stayed held by another transaction through \(lockWaits) waits of "
                               + "\(lockTimeout) (lock_timeout); a transaction left open elsewhere may hold it: \(detail)",
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
