import Dispatch
import Foundation
import LnoteModel
import LnoteSync
import Synchronization

/// Names one notebook on a relay (the `{notebook}` of `/v1/notebooks/{notebook}`).
public struct NotebookID: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var uuid: UUID
    public init(_ uuid: UUID = UUID()) { self.uuid = uuid }
    /// Parses a UUID string (either case). Canonical-form checks of request paths
    /// ([SYNC-23]) belong to the router.
    public init?(_ string: String) {
        guard let u = UUID(uuidString: string) else { return nil }
        uuid = u
    }
    /// The uppercase UUID string, as stored.
    public var description: String { uuid.uuidString }
    public static func < (l: NotebookID, r: NotebookID) -> Bool { l.description < r.description }
}

/// What the relay knows about one notebook.
public struct RelayNotebookInfo: Sendable, Equatable {
    public var id: NotebookID
    /// What an operator calls it (`relay notebook create --name`, `rename`); "" when unnamed.
    public var name: String
    /// Changes when the relay can no longer answer "what changed since cursor c" ([SYNC-2]).
    public var epoch: UInt64
    /// The greatest change sequence of the notebook's operations (0: none yet).
    public var cursor: UInt64
    public var operations: Int
    public var assets: Int
    public var checkpoints: Int
    public var tokens: Int
}

/// The relay's storage: notebooks, their operation logs, assets, checkpoints and tokens,
/// in one database reached through a `RelayDatabase` backend: an SQLite file
/// (`RelaySQLiteDatabase`: WAL, `synchronous = FULL`, `init(path:)`) today. The logical
/// schema is in `RelayStore+Schema.swift`; the relay's semantics are here and in the
/// extensions, written once for every backend.
///
/// Every method that writes runs in one transaction: a method that throws changed nothing.
/// The methods are synchronous and block on the database (and on fsync at each commit), so
/// call them from a thread of your own (libmicrohttpd's handler threads are fine);
/// `RelayEndpoint` wraps them for async callers on the store's own threads (a serial queue
/// for SQLite, one thread per pooled connection for PostgreSQL), off Swift concurrency's
/// shared threads. Readers see whole transactions.
public final class RelayStore: Sendable {
    /// A pull (the operations of one sync answer) stops before its frames and per-log
    /// headers would exceed this many bytes; the answer's cursor then names the last
    /// operation included, and the next sync continues from there. 48 MiB leaves room
    /// under the 64 MiB body limit ([SYNC-24]) for headers and clocks.
    public static let defaultPullLimit = 48 << 20

    /// Names the database in errors: the SQLite file's path (`database.location`).
    public let path: String
    /// See `defaultPullLimit`.
    public let pullLimit: Int
    /// What opening the store did: a schema upgrade, new epochs after a restore ([SYNC-58]).
    public let opened: OpenReport
    /// The backend: every row is read and written through it.
    public let database: any RelayDatabase
    /// Where `RelayEndpoint` runs the blocking calls when the backend runs one transaction at
    /// a time (SQLite): a serial queue.
    let queue: DispatchQueue
    /// Where it runs them when the backend allows concurrent transactions
    /// (`RelayDatabase.allowsConcurrentTransactions`): as many threads as it can run
    /// transactions at once (`maxConcurrentTransactions`, PostgreSQL's pool size).
    let workers: RelayWorkers?
    /// Told of each notebook that gained operations or a new epoch (`observeChanges`).
    let observers = ChangeObservers()
    /// Whether the backend's change feed was started (by the first `observeChanges`).
    let feedStarted = Mutex<Bool>(false)

    /// The high-water mark's file for the SQLite database at `path`.
    public static func markPath(for path: String) -> String { RelaySQLiteDatabase.markPath(for: path) }

    /// Opens the relay store in the SQLite file at `path` (`RelaySQLiteDatabase`),
    /// creating it when missing, upgrading an older schema, and checking the high-water
    /// mark ([SYNC-58]): when the database's change sequence is below it (a restored copy),
    /// or the store holds operations and the mark is missing or unreadable, every notebook
    /// gets a new epoch and the database's sequence is raised to the mark, so sequences are
    /// never issued twice. `opened` says what was done.
    ///
    /// - Parameters:
    ///   - path: the SQLite file; its mark is `<path>.hwm`.
    ///   - pullLimit: the largest pull in bytes (at least one operation is always sent).
    /// - Throws: `.unsupportedVersion` when the file's schema is newer than this build's;
    ///   `.invalidArgument` when the file is an SQLite database that is not a relay store;
    ///   `.database` for SQLite failures (a file that is not a database included); `.io`
    ///   when the mark cannot be written.
    public convenience init(path: String, pullLimit: Int = RelayStore.defaultPullLimit) throws {
        guard pullLimit > 0 else { throw LnoteError(.invalidArgument, "pull limit must be positive", path: path) }
        try self.init(database: try RelaySQLiteDatabase(path: path), pullLimit: pullLimit)
    }

    /// Opens the relay store in `database`: prepares it (`RelayDatabase.open`: schema,
    /// upgrades, the backend's checks). The store owns the database from here: `close()`
    /// closes it, and so does a failed opening. The backend's change feed is started by the
    /// first `observeChanges` (a server's long polls): a store opened for an admin command
    /// or a copy has no observer, and holds no listening connection.
    ///
    /// - Throws: `.invalidArgument` for a pull limit that is not positive; what
    ///   `RelayDatabase.open` throws.
    public init(database: any RelayDatabase, pullLimit: Int = RelayStore.defaultPullLimit) throws {
        let path = database.location
        do {
            guard pullLimit > 0 else { throw LnoteError(.invalidArgument, "pull limit must be positive", path: path) }
            // The upgrade runs through the store's own methods, on a store not yet opened.
            let opening = RelayStore(opening: database, pullLimit: pullLimit)
            opened = try database.open(RelayOpening(
                upgradeFromVersion1: { tx in try opening.upgradeFromVersion1(tx) },
                resetEpochs: { tx in _ = try Self.resetAllEpochs(tx, path: path) }))
        } catch {
            try? database.close()
            throw error
        }
        self.path = path
        self.pullLimit = pullLimit
        self.database = database
        // A backend with one connection (SQLite) runs one call at a time: a serial queue. One
        // with a pool (PostgreSQL) runs as many as it has connections, each on its own thread.
        self.queue = DispatchQueue(label: "lnote.relay-store")
        self.workers = database.allowsConcurrentTransactions
            ? RelayWorkers(limit: database.maxConcurrentTransactions, name: "lnote.relaystore") : nil
    }

    /// A store over `database` as it is, for its upgrade while the real one is being opened.
    private init(opening database: any RelayDatabase, pullLimit: Int) {
        self.path = database.location
        self.pullLimit = pullLimit
        self.database = database
        self.queue = DispatchQueue(label: "lnote.relay-store.opening")
        self.workers = nil
        opened = OpenReport()
    }

    /// Closes the database. Calls made afterwards throw `.invalidState`; closing twice
    /// does nothing. With SQLite, the store that closes while no other store has the file
    /// open writes the exact high-water mark ([SYNC-58]).
    /// - Throws: `.io` when the mark cannot be written (the database is closed all the
    ///   same; the next opening then treats the file as not closed cleanly).
    public func close() throws {
        try database.close()
    }

    // MARK: - Notebooks

    /// Creates a notebook with a fresh random epoch.
    ///
    /// - Parameters:
    ///   - id: the notebook's id (default: a new random UUID). Giving one lets an operator
    ///     recreate a notebook under a known id.
    ///   - name: what an operator calls it ("": unnamed); `RelayStore.checkNotebookName`.
    /// - Throws: `.alreadyExists` when a notebook has that id; `.invalidArgument` for a
    ///   name that is not fit.
    @discardableResult
    public func createNotebook(id: NotebookID = NotebookID(), name: String = "") throws -> NotebookID {
        if !name.isEmpty { try Self.checkNotebookName(name) }
        return try database.transaction(.write) { tx in
            // The UNIQUE key decides, so that two processes creating it at once store it once.
            let inserted = try tx.execute("""
                INSERT INTO notebooks (id, epoch, created, name) VALUES (?1, ?2, ?3, ?4) ON CONFLICT DO NOTHING
                """, [.text(id.description), .integer(Int64(bitPattern: Self.randomEpoch())), .integer(Self.now()), .text(name)])
            guard inserted == 1 else {
                throw LnoteError(.alreadyExists, "notebook \(id) already exists", path: path)
            }
            return id
        }
    }

    /// The longest notebook name, in bytes of UTF-8.
    public static let maxNotebookNameBytes = 200

    /// Throws `.invalidArgument` saying what makes `name` unfit to name a notebook: empty,
    /// longer than `maxNotebookNameBytes`, a control character, a space at either end.
    public static func checkNotebookName(_ name: String) throws {
        guard !name.isEmpty else { throw LnoteError(.invalidArgument, "an empty notebook name") }
        if let p = PrintableText.problem(name, maxBytes: maxNotebookNameBytes, what: "a notebook name") {
            throw LnoteError(.invalidArgument, p)
        }
        guard name.first?.isWhitespace == false, name.last?.isWhitespace == false else {
            throw LnoteError(.invalidArgument, "a notebook name that starts or ends with a space")
        }
    }

    /// Gives a notebook another name ("": none). Clients are not affected: they reach it
    /// by its id.
    /// - Throws: `.notFound` for an unknown notebook; `.invalidArgument` for a name that is
    ///   not fit (`checkNotebookName`).
    public func renameNotebook(_ notebook: NotebookID, to name: String) throws {
        if !name.isEmpty { try Self.checkNotebookName(name) }
        try database.transaction(.write) { tx in
            let (nb, _) = try row(of: notebook, tx)
            try tx.execute("UPDATE notebooks SET name = ?1 WHERE nb = ?2", [.text(name), .integer(nb)])
        }
    }

    /// What `deleteNotebook` removed.
    public struct NotebookDeletion: Sendable, Equatable {
        public var notebook: RelayNotebookInfo
        /// Rows removed from `owners` and `chains` (derived from the operations).
        public var owners = 0
        public var chains = 0
    }

    /// Deletes a notebook and everything it holds, in one transaction: its operations,
    /// assets (each notebook has its own: none is shared with another), checkpoints, tokens
    /// (its clients are then refused, 401), owners and chains, then its row. Change
    /// cursors are not stored per client: the operations' sequences go with them (never
    /// issued again). Long polls held for it are answered, and then refused like any
    /// request for an unknown notebook.
    ///
    /// - Parameter onlyIfEmpty: refuse (`.invalidState`, saying how many) when it holds
    ///   operations; checked in the deleting transaction.
    /// - Returns: what it held.
    /// - Throws: `.notFound` for an unknown notebook; `.invalidState` as said.
    @discardableResult
    public func deleteNotebook(_ notebook: NotebookID, onlyIfEmpty: Bool = false) throws -> NotebookDeletion {
        let deleted = try database.transaction(.write) { tx in
            var d = NotebookDeletion(notebook: try info(notebook: notebook, tx))
            if onlyIfEmpty && d.notebook.operations > 0 {
                throw LnoteError(.invalidState, "notebook \(notebook) holds \(d.notebook.operations) operation"
                                 + (d.notebook.operations == 1 ? "" : "s"), path: path)
            }
            let nb = try row(of: notebook, tx).nb
            for table in ["ops", "assets", "checkpoints", "tokens"] {
                try tx.execute("DELETE FROM \(table) WHERE nb = ?1", [.integer(nb)])
            }
            d.owners = try tx.execute("DELETE FROM owners WHERE nb = ?1", [.integer(nb)])
            d.chains = try tx.execute("DELETE FROM chains WHERE nb = ?1", [.integer(nb)])
            try tx.execute("DELETE FROM notebooks WHERE nb = ?1", [.integer(nb)])
            try database.publishChange(of: notebook, tx)
            return d
        }
        observers.notify(notebook)
        return deleted
    }

    /// Every notebook, sorted by id.
    public func notebooks() throws -> [RelayNotebookInfo] {
        try database.transaction(.read) { tx in
            try tx.query("SELECT id FROM notebooks").compactMap { $0[0].string.flatMap(NotebookID.init) }
                .sorted().map { try info(notebook: $0, tx) }
        }
    }

    /// One notebook's epoch, cursor and counts.
    /// - Throws: `.notFound` for an unknown notebook.
    public func info(notebook: NotebookID) throws -> RelayNotebookInfo {
        try database.transaction(.read) { tx in try info(notebook: notebook, tx) }
    }

    func info(notebook: NotebookID, _ tx: any RelayTransaction) throws -> RelayNotebookInfo {
        let (nb, epoch) = try row(of: notebook, tx)
        func count(_ table: String) throws -> Int {
            Int(try tx.query("SELECT count(*) FROM \(table) WHERE nb = ?1", [.integer(nb)])[0][0].int64 ?? 0)
        }
        let name = try tx.query("SELECT name FROM notebooks WHERE nb = ?1", [.integer(nb)]).first?.first?.string ?? ""
        return RelayNotebookInfo(id: notebook, name: name, epoch: epoch, cursor: try cursor(nb, tx), operations: try count("ops"),
                                 assets: try count("assets"), checkpoints: try count("checkpoints"),
                                 tokens: try count("tokens"))
    }

    /// Gives the notebook a new random epoch, so every client compares clocks at its next
    /// sync ([SYNC-6], [SYNC-58]: `lnote relay epoch reset`). Opening a restored file does
    /// this for every notebook by itself; run it by hand after anything else that may have
    /// lost operations a client believes the relay holds. Long polls held for the notebook
    /// are answered (`resync`).
    /// - Returns: the new epoch.
    @discardableResult
    public func resetEpoch(notebook: NotebookID) throws -> UInt64 {
        let epoch = try database.transaction(.write) { tx in
            let (nb, old) = try row(of: notebook, tx)
            let epoch = try Self.newEpoch(tx, nb: nb, old: old)
            try database.publishChange(of: notebook, tx)
            return epoch
        }
        observers.notify(notebook)
        return epoch
    }

    /// Gives every notebook a new random epoch ([SYNC-58]).
    /// - Returns: the notebooks and their new epochs, sorted by id.
    @discardableResult
    public func resetEpochs() throws -> [(notebook: NotebookID, epoch: UInt64)] {
        let reset = try database.transaction(.write) { tx in
            let reset = try Self.resetAllEpochs(tx, path: path).sorted { $0.notebook < $1.notebook }
            for r in reset { try database.publishChange(of: r.notebook, tx) }
            return reset
        }
        for r in reset { observers.notify(r.notebook) }
        return reset
    }

    /// Calls `observer` (on the thread that committed) after each commit that stored new
    /// operations in a notebook or gave it a new epoch: the in-process notification that
    /// wakes the long polls a `RelayServer` holds ([SYNC-72]). Another process writing the
    /// same database is observed only through the backend's change feed
    /// (`RelayDatabase.startChangeFeed`; SQLite has none: its changes reach held requests
    /// when they time out).
    ///
    /// The first call starts the backend's change feed (PostgreSQL: a listening connection
    /// of its own) and returns once a change another process commits afterwards will be
    /// observed (waiting at most about the connect timeout when the database is away; every
    /// notebook is then reported once the feed listens). On a closed store there is nothing
    /// to observe: the feed is not started.
    /// - Returns: what `stopObserving` takes.
    public func observeChanges(_ observer: @escaping @Sendable (NotebookID) -> Void) -> Int {
        let token = observers.add(observer)
        let observers = self.observers
        // Under the lock: a second observer returns once the feed started, as the first does.
        feedStarted.withLock { started in
            guard !started else { return }
            // Throws only when the database is closed (`.invalidState`: nothing to observe);
            // the feed's own connection failures are retried on its thread.
            do {
                try database.startChangeFeed { observers.notify($0) }
                started = true
            } catch {}
        }
        return token
    }

    /// Stops calling an observer. Idempotent.
    public func stopObserving(_ token: Int) { observers.remove(token) }

    static func newEpoch(_ tx: any RelayTransaction, nb: Int64, old: UInt64) throws -> UInt64 {
        var epoch = randomEpoch()
        while epoch == old { epoch = randomEpoch() }
        try tx.execute("UPDATE notebooks SET epoch = ?1 WHERE nb = ?2", [.integer(Int64(bitPattern: epoch)), .integer(nb)])
        return epoch
    }

    static func resetAllEpochs(_ tx: any RelayTransaction, path: String) throws -> [(notebook: NotebookID, epoch: UInt64)] {
        try tx.query("SELECT nb, id, epoch FROM notebooks").map { r in
            guard let nb = r[0].int64, let id = r[1].string.flatMap(NotebookID.init), let old = r[2].int64 else {
                throw LnoteError(.corrupt, "malformed notebook row in the relay store", path: path)
            }
            return (id, try newEpoch(tx, nb: nb, old: UInt64(bitPattern: old)))
        }
    }

    /// The endpoint serving one notebook's sync protocol from this store.
    /// - Parameter device: the device of the request's token ([SYNC-57]); nil for a caller
    ///   in this process (owners are then neither checked nor recorded).
    /// - Throws: `.notFound` for an unknown notebook.
    public func endpoint(notebook: NotebookID, device: String? = nil) throws -> RelayEndpoint {
        _ = try database.transaction(.read) { tx in try row(of: notebook, tx) }
        return RelayEndpoint(store: self, notebook: notebook, device: device)
    }

    // MARK: - Internals shared by the extensions

    /// The notebook's row id and epoch; `.notFound` when it does not exist.
    func row(of notebook: NotebookID, _ tx: any RelayTransaction) throws -> (nb: Int64, epoch: UInt64) {
        let rows = try tx.query("SELECT nb, epoch FROM notebooks WHERE id = ?1", [.text(notebook.description)])
        guard let r = rows.first, let nb = r[0].int64, let e = r[1].int64 else {
            throw LnoteError(.notFound, "no notebook \(notebook)", path: path)
        }
        return (nb, UInt64(bitPattern: e))
    }

    /// The notebook's change cursor: its greatest operation sequence (0 with none).
    func cursor(_ nb: Int64, _ tx: any RelayTransaction) throws -> UInt64 {
        UInt64(try tx.query("SELECT max(seq) FROM ops WHERE nb = ?1", [.integer(nb)]).first?.first?.int64 ?? 0)
    }

    static func randomEpoch() -> UInt64 {
        var g = SystemRandomNumberGenerator()
        return UInt64.random(in: 1...UInt64.max, using: &g)
    }

    /// Milliseconds since 1970, for `created` and `uploaded` columns (shown, never compared).
    static func now() -> Int64 { Int64((Date().timeIntervalSince1970 * 1000).rounded()) }

    /// Runs `body` on the store's queue and returns its result to an async caller.
    func perform<T: Sendable>(_ body: @escaping @Sendable (RelayStore) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            if let workers {
                workers.submit { continuation.resume(with: Result { try body(self) }) }
            } else {
                queue.async { continuation.resume(with: Result { try body(self) }) }
            }
        }
    }
}

// MARK: - Log references in columns

extension RelayStore {
    /// The `page` column of a log: the page's 16 UUID bytes, or an empty blob for the
    /// document log. (Not NULL: SQLite treats NULLs as distinct in a UNIQUE constraint, so
    /// a NULL page would let the same document operation be stored twice.)
    static func pageColumn(_ log: LogRef) -> RelayValue { .blob(log.page?.uuid.bytes ?? []) }

    static func logRef(document: RelayValue, page: RelayValue, path: String) throws -> LogRef {
        guard let d = document.bytes.flatMap({ UUID(bytes: $0) }), let p = page.bytes else {
            throw LnoteError(.corrupt, "malformed log reference in the relay store", path: path)
        }
        if p.isEmpty { return LogRef(document: DocumentID(d)) }
        guard let pu = UUID(bytes: p) else {
            throw LnoteError(.corrupt, "malformed page id in the relay store", path: path)
        }
        return LogRef(document: DocumentID(d), page: PageID(pu))
    }
}
