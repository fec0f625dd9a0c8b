import Dispatch
import Foundation
import LnoteModel
import LnoteSQLite
import LnoteSync

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
/// in one SQLite file (WAL, `synchronous = FULL`). The schema is in `RelayStore+Schema.swift`.
///
/// Every method that writes runs in one transaction: a method that throws changed nothing.
/// The methods are synchronous and block on SQLite (and on fsync at each commit), so call
/// them from a thread of your own (libmicrohttpd's handler threads are fine);
/// `RelayEndpoint` wraps them for async callers on a dispatch queue, off Swift
/// concurrency's shared threads. One connection serves every thread; its lock serializes
/// calls, so readers see whole transactions.
public final class RelayStore: Sendable {
    /// A pull (the operations of one sync answer) stops before its frames and per-log
    /// headers would exceed this many bytes; the answer's cursor then names the last
    /// operation included, and the next sync continues from there. 48 MiB leaves room
    /// under the 64 MiB body limit ([SYNC-24]) for headers and clocks.
    public static let defaultPullLimit = 48 << 20

    public let path: String
    /// See `defaultPullLimit`.
    public let pullLimit: Int
    let db: SQLiteDatabase
    /// Where `RelayEndpoint` runs the blocking calls.
    let queue: DispatchQueue

    /// Opens the relay store at `path`, creating it when missing.
    ///
    /// - Parameters:
    ///   - path: the SQLite file.
    ///   - pullLimit: the largest pull in bytes (at least one operation is always sent).
    /// - Throws: `.unsupportedVersion` when the file's schema is newer than this build's;
    ///   `.invalidArgument` when the file is an SQLite database that is not a relay store;
    ///   `.database` for SQLite failures (a file that is not a database included).
    public init(path: String, pullLimit: Int = RelayStore.defaultPullLimit) throws {
        guard pullLimit > 0 else { throw LnoteError(.invalidArgument, "pull limit must be positive", path: path) }
        self.path = path
        self.pullLimit = pullLimit
        let db = try SQLiteDatabase(path: path, options: .init(create: true, journalMode: .wal, synchronous: .full))
        do {
            try Self.prepareSchema(db)
        } catch {
            try? db.close()
            throw error
        }
        self.db = db
        self.queue = DispatchQueue(label: "lnote.relay-store")
    }

    /// Closes the database. Calls made afterwards throw `.invalidState`; closing twice
    /// does nothing.
    public func close() throws {
        try db.close()
    }

    // MARK: - Notebooks

    /// Creates a notebook with a fresh random epoch.
    ///
    /// - Parameter id: the notebook's id (default: a new random UUID). Giving one lets an
    ///   operator recreate a notebook under a known id.
    /// - Throws: `.alreadyExists` when a notebook has that id.
    @discardableResult
    public func createNotebook(id: NotebookID = NotebookID()) throws -> NotebookID {
        try db.transaction {
            guard try db.query("SELECT 1 FROM notebooks WHERE id = ?1", [.text(id.description)]).isEmpty else {
                throw LnoteError(.alreadyExists, "notebook \(id) already exists", path: path)
            }
            try db.execute("INSERT INTO notebooks (id, epoch, created) VALUES (?1, ?2, ?3)",
                           [.text(id.description), .integer(Int64(bitPattern: Self.randomEpoch())), .integer(Self.now())])
            return id
        }
    }

    /// Every notebook, sorted by id.
    public func notebooks() throws -> [RelayNotebookInfo] {
        try db.transaction(.deferred) {
            try db.query("SELECT id FROM notebooks").compactMap { $0[0].string.flatMap(NotebookID.init) }
                .sorted().map { try info(notebook: $0) }
        }
    }

    /// One notebook's epoch, cursor and counts.
    /// - Throws: `.notFound` for an unknown notebook.
    public func info(notebook: NotebookID) throws -> RelayNotebookInfo {
        try db.transaction(.deferred) {
            let (nb, epoch) = try row(of: notebook)
            func count(_ table: String) throws -> Int {
                Int(try db.query("SELECT count(*) FROM \(table) WHERE nb = ?1", [.integer(nb)])[0][0].int64 ?? 0)
            }
            return RelayNotebookInfo(id: notebook, epoch: epoch, cursor: try cursor(nb), operations: try count("ops"),
                                     assets: try count("assets"), checkpoints: try count("checkpoints"),
                                     tokens: try count("tokens"))
        }
    }

    /// Gives the notebook a new random epoch, so every client compares clocks at its next
    /// sync ([SYNC-6]). Run it after restoring the file from a backup: change sequences
    /// handed out after the backup was taken would otherwise be handed out again, and a
    /// client whose cursor is past the backup's could miss operations.
    /// - Returns: the new epoch.
    @discardableResult
    public func resetEpoch(notebook: NotebookID) throws -> UInt64 {
        try db.transaction {
            let (nb, old) = try row(of: notebook)
            var epoch = Self.randomEpoch()
            while epoch == old { epoch = Self.randomEpoch() }
            try db.execute("UPDATE notebooks SET epoch = ?1 WHERE nb = ?2", [.integer(Int64(bitPattern: epoch)), .integer(nb)])
            return epoch
        }
    }

    /// The endpoint serving one notebook's sync protocol from this store.
    /// - Throws: `.notFound` for an unknown notebook.
    public func endpoint(notebook: NotebookID) throws -> RelayEndpoint {
        _ = try db.transaction(.deferred) { try row(of: notebook) }
        return RelayEndpoint(store: self, notebook: notebook)
    }

    // MARK: - Internals shared by the extensions

    /// The notebook's row id and epoch; `.notFound` when it does not exist.
    func row(of notebook: NotebookID) throws -> (nb: Int64, epoch: UInt64) {
        let rows = try db.query("SELECT nb, epoch FROM notebooks WHERE id = ?1", [.text(notebook.description)])
        guard let r = rows.first, let nb = r[0].int64, let e = r[1].int64 else {
            throw LnoteError(.notFound, "no notebook \(notebook)", path: path)
        }
        return (nb, UInt64(bitPattern: e))
    }

    /// The notebook's change cursor: its greatest operation sequence (0 with none).
    func cursor(_ nb: Int64) throws -> UInt64 {
        UInt64(try db.query("SELECT max(seq) FROM ops WHERE nb = ?1", [.integer(nb)]).first?.first?.int64 ?? 0)
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
            queue.async { continuation.resume(with: Result { try body(self) }) }
        }
    }
}

// MARK: - Log references in columns

extension RelayStore {
    /// The `page` column of a log: the page's 16 UUID bytes, or an empty blob for the
    /// document log. (Not NULL: SQLite treats NULLs as distinct in a UNIQUE constraint, so
    /// a NULL page would let the same document operation be stored twice.)
    static func pageColumn(_ log: LogRef) -> SQLiteValue { .blob(log.page?.uuid.bytes ?? []) }

    static func logRef(document: SQLiteValue, page: SQLiteValue, path: String) throws -> LogRef {
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
