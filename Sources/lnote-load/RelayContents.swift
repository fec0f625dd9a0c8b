import Foundation
import LnoteModel
import LnoteSync
import LnoteSQLite
import LnotePostgres

/// Where the run's relays keep their data, and how this program reads and (for
/// `--inject-loss`) alters it behind their backs.
enum LoadDatabase: Sendable {
    case sqlite(path: String)
    case postgres(url: String)

    /// The `lnote relay` options naming it. PostgreSQL: 4 connections per relay process.
    var relayArguments: [String] {
        switch self {
        case .sqlite(let path): ["--db", path]
        case .postgres(let url): ["--postgres", url, "--pool-size", "4"]
        }
    }

    /// For messages (the URL of a throwaway cluster holds no password).
    var description: String {
        switch self {
        case .sqlite(let path): path
        case .postgres(let url): url
        }
    }

    func contents() throws -> RelayContents {
        switch self {
        case .sqlite(let path): try RelayContents(db: path)
        case .postgres(let url): try RelayContents(postgres: url)
        }
    }

    func deleteOne(of ops: OpSet) throws -> (LogRef, OpID)? {
        switch self {
        case .sqlite(let path): try RelayContents.deleteOne(of: ops, db: path)
        case .postgres(let url): try RelayContents.deleteOne(of: ops, postgres: url)
        }
    }
}

/// The operations a relay's database holds, read straight from its `ops` table (not through
/// the relay): after a SIGKILL this is what the next relay starts from. Read-only: the
/// SQLite database is opened with SQLite's read-only flag and closed before the relay
/// restarts; PostgreSQL's is read by one connection of this program, closed after reading.
struct RelayContents {
    /// Per log and replica, every counter held.
    var counters: [LogRef: [ReplicaID: Set<UInt64>]] = [:]
    var rows = 0

    init(db: String) throws {
        let sqlite = try SQLiteDatabase(path: db, options: .init(create: false, readOnly: true))
        defer { try? sqlite.close() }
        for r in try sqlite.query("SELECT document, page, replica, counter FROM ops") {
            guard let d = r[0].bytes.flatMap({ UUID(bytes: $0) }), let p = r[1].bytes,
                  let replica = r[2].int64, let counter = r[3].int64, counter > 0 else {
                throw LnoteError(.corrupt, "a row of the relay's ops table does not name a log and an operation: \(r)", path: db)
            }
            let page: PageID?
            if p.isEmpty { page = nil } else {
                guard let u = UUID(bytes: p) else { throw LnoteError(.corrupt, "a page id of \(p.count) bytes in the ops table", path: db) }
                page = PageID(u)
            }
            counters[LogRef(document: DocumentID(d), page: page), default: [:]][ReplicaID(UInt64(bitPattern: replica)), default: []]
                .insert(UInt64(counter))
            rows += 1
        }
    }

    /// The `ops` table of a PostgreSQL relay database (every notebook's: a run has one).
    init(postgres url: String) throws {
        let connection = try PGConnection(url: url, connectTimeoutSeconds: 10)
        defer { connection.close() }
        let r = try connection.execute("SELECT document, page, replica, counter FROM ops")
        for i in 0..<r.rowCount {
            let d = try r.bytes(i, 0), p = try r.bytes(i, 1)
            let replica = try r.int64(i, 2), counter = try r.int64(i, 3)
            guard let document = UUID(bytes: d), counter > 0 else {
                throw LnoteError(.corrupt, "a row of the relay's ops table does not name a log and an operation: "
                                 + "document of \(d.count) bytes, counter \(counter)")
            }
            let page: PageID?
            if p.isEmpty { page = nil } else {
                guard let u = UUID(bytes: p) else { throw LnoteError(.corrupt, "a page id of \(p.count) bytes in the ops table") }
                page = PageID(u)
            }
            counters[LogRef(document: DocumentID(document), page: page), default: [:]][ReplicaID(UInt64(bitPattern: replica)), default: []]
                .insert(UInt64(counter))
            rows += 1
        }
    }

    /// `deleteOne(of:db:)` on a PostgreSQL relay database.
    static func deleteOne(of ops: OpSet, postgres url: String) throws -> (LogRef, OpID)? {
        guard let (log, clock) = ops.logs.min(by: { $0.key < $1.key }), let e = clock.entries.first else { return nil }
        let connection = try PGConnection(url: url, connectTimeoutSeconds: 10)
        defer { connection.close() }
        let r = try connection.execute("DELETE FROM ops WHERE document = $1 AND page = $2 AND replica = $3 AND counter = $4",
                                       [.bytea(log.document.uuid.bytes), .bytea(log.page?.uuid.bytes ?? []),
                                        .int64(Int64(bitPattern: e.replica.rawValue)), .int64(Int64(e.counter))])
        guard r.affectedRows == 1 else { throw LnoteError(.invalidState, "--inject-loss: no row deleted") }
        return (log, OpID(replica: e.replica, counter: e.counter))
    }

    /// Deletes the operation with the greatest counter of one replica in one log of `ops`
    /// from the database (`--inject-loss`); returns it, or nil when `ops` is empty.
    static func deleteOne(of ops: OpSet, db: String) throws -> (LogRef, OpID)? {
        guard let (log, clock) = ops.logs.min(by: { $0.key < $1.key }), let e = clock.entries.first else { return nil }
        let sqlite = try SQLiteDatabase(path: db, options: .init(create: false))
        defer { try? sqlite.close() }
        try sqlite.execute("DELETE FROM ops WHERE document = ?1 AND page = ?2 AND replica = ?3 AND counter = ?4",
                           [.blob(log.document.uuid.bytes), .blob(log.page?.uuid.bytes ?? []),
                            .integer(Int64(bitPattern: e.replica.rawValue)), .integer(Int64(e.counter))])
        guard sqlite.changes == 1 else { throw LnoteError(.invalidState, "--inject-loss: no row deleted", path: db) }
        return (log, OpID(replica: e.replica, counter: e.counter))
    }

    /// For each log and replica, the counters held from 1 without a gap.
    var held: OpSet {
        var out = OpSet()
        for (log, replicas) in counters {
            var clock = VectorClock()
            for (replica, set) in replicas {
                var n: UInt64 = 0
                while set.contains(n + 1) { n += 1 }
                clock[replica] = n
            }
            if !clock.isEmpty { out.logs[log] = clock }
        }
        return out
    }

    /// Operations held that `made` does not name (no client made them).
    func unexpected(given made: OpSet) -> Int {
        var n = 0
        for (log, replicas) in counters {
            let clock = made.logs[log] ?? VectorClock()
            for (replica, set) in replicas { n += set.filter { $0 > clock[replica] }.count }
        }
        return n
    }
}
