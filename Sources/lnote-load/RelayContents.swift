import Foundation
import LnoteModel
import LnoteSync
import LnoteSQLite

/// The operations a relay's database holds, read straight from its `ops` table (not through
/// the relay): after a SIGKILL this is what the next relay starts from. Read-only: the
/// database is opened with SQLite's read-only flag and closed before the relay restarts.
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
