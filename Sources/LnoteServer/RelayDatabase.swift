import LnoteModel

/// Where a relay keeps its rows: the storage backend of `RelayStore` (issue 17).
///
/// **The seam.** A backend is data access only: connections, transactions, running SQL, and
/// the few things SQL cannot say the same way everywhere. Everything the relay promises —
/// validation of what arrives, forks and owners, chains and digests, quarantine, checkpoint
/// verification, pull limits, epochs and cursors, tokens — is written once, in `RelayStore`
/// and its extensions, as SQL that SQLite (3.40 and later) and PostgreSQL (15) both accept.
///
/// A typed storage protocol (`insertOperation`, `chainHead`, `ownerOf`, …) was the other
/// choice. It was not taken: the relay's logic is interleaved with about forty small
/// queries (the chain walk, the fate of each pushed operation, the pull under a byte
/// budget), so a typed protocol would either copy those queries into every backend or cut
/// the semantics into pieces that each backend re-implements, and the two copies would
/// drift. With a SQL seam a new backend is a connection wrapper, a schema and a handful of
/// hooks, and the same test suite checks both.
///
/// **Portable SQL, the rules the shared statements follow.** Placeholders are written once
/// as `?1 … ?n`, each number used (a backend that needs `$1 … $n` rewrites them with
/// `RelaySQL.dollarPlaceholders`). Values are int8, BLOB / bytea, text or NULL
/// (`RelayValue`); no `rowid`, no `INSERT OR IGNORE` (`INSERT … ON CONFLICT DO NOTHING`),
/// no `PRAGMA`, no `typeof`, no `ifnull` (`coalesce`), `RETURNING` only in a backend.
/// What cannot follow these rules is a requirement of this protocol, so it is written per
/// backend: the schema and its migrations (`open`), allocating change sequences
/// (`allocateSequences`), and `tokenInsertionOrder`.
///
/// **Transactions.** Every read and write of the relay runs in one `transaction`. A write
/// transaction MUST be serializable: the relay reads rows and writes what it derives from
/// them (chains, owners, checkpoints, the fate of a pushed operation) and relies on having
/// seen every write committed before its own. SQLite gives this with its single writer
/// (`BEGIN IMMEDIATE`); PostgreSQL with `SERIALIZABLE`, retried on a serialization failure.
/// So the body of a write transaction MAY run more than once, each time after the previous
/// run was rolled back: a body has no effect outside the database (observers, the
/// high-water mark and other notifications run after the commit, in `RelayStore`).
/// Storing the same operation twice at once is refused by the UNIQUE key of `ops`, never
/// by a lock in this process: two relay processes may share one database.
///
/// **Thread safety.** A database is used from any thread; each transaction runs its body
/// on the calling thread, with a connection no other transaction uses meanwhile.
/// Transactions do not nest.
public protocol RelayDatabase: AnyObject, Sendable {
    /// Names the database in errors and reports: the SQLite file's path, or a connection
    /// string without its password.
    var location: String { get }

    /// Prepares the database for a relay store, once, before any other call: creates the
    /// schema of `RelayStore.schemaVersion` in an empty database, upgrades an older one,
    /// refuses a newer one or one that is not a relay store, and runs the backend's own
    /// checks (SQLite: the high-water mark, [SYNC-58]). `relay` does what an upgrade or a
    /// check needs of the relay's semantics. A backend that throws here releases what it
    /// took; the store then calls `close()`.
    /// - Throws: `.unsupportedVersion` for a newer schema; `.invalidArgument` for a
    ///   database that is not a relay store; `.database` for storage failures.
    func open(_ relay: RelayOpening) throws -> RelayStore.OpenReport

    /// Runs `body` in one transaction: commits when it returns, rolls back when it throws
    /// (rethrowing the error). In `.write` and `.allocating` mode the body may run again
    /// after a rollback (see the protocol's discussion); in `.read` mode it sees one
    /// consistent state and must not write (it may run again too: a backend may retry a
    /// lock that could not be had in time).
    func transaction<T>(_ mode: RelayTransactionMode, _ body: (any RelayTransaction) throws -> T) throws -> T

    /// Reserves `count` change sequences (at least 1) for operations `tx` is about to store
    /// (`tx` is an `.allocating` transaction: in any other the call throws `.invalidState`)
    /// and returns the first; the others follow it. Each is greater than every sequence
    /// stored, or allocated by a transaction that committed, in any process: a committed
    /// allocation is never handed out again, even where `tx` stored fewer rows (gaps are
    /// allowed). One that rolled back may be given again: no answer carried it.
    /// A sequence MUST become visible to readers in allocation order: a reader that saw
    /// sequence `s` never later sees a new row below `s` (a client's cursor would skip it).
    /// SQLite: its single writer gives that order. PostgreSQL: update one counter row
    /// (`UPDATE … SET value = value + n RETURNING value`), whose lock is held to the commit;
    /// a `SEQUENCE` does not give the order.
    func allocateSequences(_ count: Int, _ tx: any RelayTransaction) throws -> Int64

    /// An expression, valid in a query on `tokens`, that orders the rows of one `created`
    /// millisecond by insertion (SQLite: `rowid`; PostgreSQL: an identity column).
    var tokenInsertionOrder: String { get }

    /// An SQL expression whose value is the database's clock, in whole milliseconds since
    /// 1970 (int8): what `relay_presence` heartbeats are written and judged by, so that relay
    /// processes on hosts whose clocks differ agree on which ones are alive (SQLite: the
    /// clock of the host running the statement, the only one that opens the file;
    /// PostgreSQL: the server's `clock_timestamp()`).
    var nowMillisecondsSQL: String { get }

    /// Called in the write transaction that stored operations in `notebook` or gave it a
    /// new epoch, so that a backend can tell other processes at the commit (PostgreSQL:
    /// `NOTIFY`, which is itself transactional). The default does nothing.
    func publishChange(of notebook: NotebookID, _ tx: any RelayTransaction) throws

    /// Starts calling `changed` (from any thread) when another process sharing the database
    /// reports a change (`publishChange`); called once, after `open`, by the store's first
    /// `observeChanges`. It returns once a change committed afterwards will be reported (a
    /// backend that cannot tell that yet reports every notebook once it can). The default
    /// does nothing: a held long poll then sees another process's change when its wait runs
    /// out ([SYNC-72]).
    func startChangeFeed(_ changed: @escaping @Sendable (NotebookID) -> Void) throws

    /// Called after the commit of a write that allocated sequences up to `sequence`, before
    /// its answer is given (SQLite: the high-water mark is advanced, [SYNC-58]). The default
    /// does nothing.
    /// - Throws: `.io` when that cannot be recorded (the write is committed all the same).
    func issued(through sequence: Int64) throws

    /// Releases the connections. Calls made afterwards throw `.invalidState`; closing twice
    /// does nothing.
    func close() throws

    /// Whether transactions of this process may run at once (several connections, each
    /// transaction on its own). `RelayStore` then runs its calls on up to
    /// `maxConcurrentTransactions` threads of its own; with false (the default, SQLite's one
    /// connection) on a serial queue.
    var allowsConcurrentTransactions: Bool { get }

    /// How many transactions of this process can be in the database at once (PostgreSQL: its
    /// pool size): `RelayStore` gives its calls that many threads, so that no connection
    /// idles while requests wait for a thread. Read only when `allowsConcurrentTransactions`.
    /// The default is 1.
    var maxConcurrentTransactions: Int { get }
}

extension RelayDatabase {
    public func publishChange(of notebook: NotebookID, _ tx: any RelayTransaction) throws {}
    public func startChangeFeed(_ changed: @escaping @Sendable (NotebookID) -> Void) throws {}
    public func issued(through sequence: Int64) throws {}
    public var allowsConcurrentTransactions: Bool { false }
    public var maxConcurrentTransactions: Int { 1 }
}

/// What a relay transaction may do.
public enum RelayTransactionMode: Sendable, Equatable {
    /// Reads one consistent state (SQLite `BEGIN DEFERRED`; PostgreSQL `REPEATABLE READ
    /// READ ONLY`).
    case read
    /// Reads and writes, serializably (SQLite `BEGIN IMMEDIATE`; PostgreSQL `SERIALIZABLE`),
    /// and never allocates change sequences.
    case write
    /// A write that may allocate change sequences (`RelayDatabase.allocateSequences`): a
    /// push. A backend may order these writers before they read anything (PostgreSQL takes
    /// the counter's lock as the transaction's first statement), which is what makes
    /// sequences visible in allocation order; the other writes need not wait for them.
    /// `allocateSequences` in a transaction of another mode throws `.invalidState`.
    case allocating

    /// Whether the transaction may write (`.write` or `.allocating`).
    public var writes: Bool { self != .read }
}

/// The relay's side of opening a database: the parts of an upgrade or a check that are the
/// relay's semantics, not the backend's. Each runs in a transaction the backend gives.
public struct RelayOpening {
    /// Fills what schema version 2 derives from the operations a version 1 store holds
    /// (content hashes, chains) and drops the checkpoints [SYNC-59] refuses; returns how
    /// many were dropped. A backend runs it after it created the version 2 columns.
    public let upgradeFromVersion1: (any RelayTransaction) throws -> Int
    /// Gives every notebook a new random epoch ([SYNC-58]).
    public let resetEpochs: (any RelayTransaction) throws -> Void
}

/// An open transaction: valid only inside the body `RelayDatabase.transaction` runs.
public protocol RelayTransaction: AnyObject {
    /// Compiles one statement for this transaction. A backend may give the same statement
    /// for the same text (SQLite keeps them per transaction), so a statement is never run
    /// again from inside its own `forEach`. Statements are released when the transaction
    /// ends.
    func prepare(_ sql: String) throws -> any RelayStatement
    /// Runs one statement and returns every row.
    func query(_ sql: String, _ params: [RelayValue]) throws -> [[RelayValue]]
    /// Runs one statement and returns how many rows it inserted, updated or deleted.
    @discardableResult
    func execute(_ sql: String, _ params: [RelayValue]) throws -> Int
}

extension RelayTransaction {
    public func query(_ sql: String) throws -> [[RelayValue]] { try query(sql, []) }

    /// Through `prepare`, which a backend makes cache statements by their text.
    public func query(_ sql: String, _ params: [RelayValue]) throws -> [[RelayValue]] {
        try prepare(sql).rows(params)
    }

    @discardableResult
    public func execute(_ sql: String, _ params: [RelayValue]) throws -> Int {
        try prepare(sql).run(params)
    }
}

/// A compiled statement of one transaction.
public protocol RelayStatement: AnyObject {
    /// Runs it with `params` and returns every row.
    func rows(_ params: [RelayValue]) throws -> [[RelayValue]]
    /// Runs it with `params` and returns the first row, or nil: in one step of SQLite, in
    /// one round trip to PostgreSQL (which sends every row the statement gives: a query
    /// that may give more than one row says `LIMIT 1`). The default reads through `forEach`.
    func first(_ params: [RelayValue]) throws -> [RelayValue]?
    /// Runs it with `params`, giving `body` one row at a time until it returns false or the
    /// rows run out (a backend may fetch rows in batches; the rest are not read).
    func forEach(_ params: [RelayValue], _ body: ([RelayValue]) throws -> Bool) throws
    /// Runs it with `params`; returns how many rows it inserted, updated or deleted.
    @discardableResult
    func run(_ params: [RelayValue]) throws -> Int
}

extension RelayStatement {
    /// The first row, or nil, through `forEach` (a backend gives a cheaper one).
    public func first(_ params: [RelayValue]) throws -> [RelayValue]? {
        var found: [RelayValue]?
        try forEach(params) { found = $0; return false }
        return found
    }
}

/// One value a relay statement binds or reads: int8, BLOB / bytea, text or NULL.
///
/// `blob([])` is an empty byte string, distinct from `null`. A backend maps its smaller
/// integer types (PostgreSQL's `int4` of `count(*)`… is `int8`, but `SELECT 1` is `int4`)
/// to `integer`.
public enum RelayValue: Sendable, Hashable, CustomStringConvertible {
    case null
    case integer(Int64)
    case text(String)
    case blob([UInt8])

    /// The integer, or nil when the value is not `.integer`.
    public var int64: Int64? { if case .integer(let v) = self { return v }; return nil }
    /// The text, or nil when the value is not `.text`.
    public var string: String? { if case .text(let s) = self { return s }; return nil }
    /// The bytes, or nil when the value is not `.blob`.
    public var bytes: [UInt8]? { if case .blob(let b) = self { return b }; return nil }

    public var description: String {
        switch self {
        case .null: "NULL"
        case .integer(let v): String(v)
        case .text(let s): "'\(s)'"
        case .blob(let b): "x'\(hexString(b))'"
        }
    }
}

/// Helpers for backends.
public enum RelaySQL {
    /// `sql` with each placeholder `?N` written `$N`, for a backend whose placeholders are
    /// numbered with `$` (PostgreSQL). Text in single quotes, quoted identifiers and
    /// comments are left as they are.
    public static func dollarPlaceholders(_ sql: String) -> String {
        var out: [UInt8] = []
        let s = Array(sql.utf8)
        out.reserveCapacity(s.count)
        var i = 0
        while i < s.count {
            let c = s[i]
            if c == UInt8(ascii: "'") || c == UInt8(ascii: "\"") {
                // Copy to the closing quote; a doubled quote is part of the text.
                out.append(c)
                i += 1
                while i < s.count {
                    out.append(s[i])
                    if s[i] == c {
                        if i + 1 < s.count && s[i + 1] == c {
                            out.append(c)
                            i += 2
                            continue
                        }
                        break
                    }
                    i += 1
                }
                i += 1
            } else if c == UInt8(ascii: "-"), i + 1 < s.count, s[i + 1] == UInt8(ascii: "-") {
                while i < s.count && s[i] != UInt8(ascii: "\n") { out.append(s[i]); i += 1 }
            } else if c == UInt8(ascii: "?"), i + 1 < s.count, (0x30...0x39).contains(s[i + 1]) {
                out.append(UInt8(ascii: "$"))
                i += 1
            } else {
                out.append(c)
                i += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
