import LnoteModel
import LnoteReplication
import LnoteSync

/// Chain digests ([SYNC-52]) and content hashes ([SYNC-53]) of the operations a relay holds.
///
/// The relay keeps, per (notebook, log, replica), the counter `head` up to which it holds
/// every operation of that replica and the chain digest there (table `chains`). The row
/// is advanced in the transaction that stores operations: from its head, it walks the
/// stored counters `head + 1, head + 2, …` while they are contiguous, one SHA-256 each. So
/// each operation enters a chain once, a `Digests` answer reads one row per (log,
/// replica), whatever the size of the log, and a push that leaves a gap costs one index
/// read for that replica until the gap is filled.
extension RelayStore {
    /// Statements to advance chains during one write.
    struct ChainWriter {
        let read: any RelayStatement
        let walk: any RelayStatement
        let write: any RelayStatement

        init(_ tx: any RelayTransaction) throws {
            read = try tx.prepare("SELECT head, digest FROM chains WHERE nb = ?1 AND document = ?2 AND page = ?3 AND replica = ?4")
            walk = try tx.prepare("""
                SELECT counter, hash FROM ops WHERE nb = ?1 AND document = ?2 AND page = ?3 AND replica = ?4 AND counter > ?5
                ORDER BY counter
                """)
            write = try tx.prepare("""
                INSERT INTO chains (nb, document, page, replica, head, digest) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                ON CONFLICT (nb, document, page, replica) DO UPDATE SET head = excluded.head, digest = excluded.digest
                """)
        }

        /// Advances the chain of `replica` in the log (`document`, `page` columns) over the
        /// contiguous counters stored above its head.
        func advance(nb: Int64, document: [UInt8], page: [UInt8], replica: Int64, path: String) throws {
            let key: [RelayValue] = [.integer(nb), .blob(document), .blob(page), .integer(replica)]
            var head: Int64 = 0
            var digest = ContentHash.emptyChain
            if let r = try read.first(key) {
                head = r[0].int64 ?? 0
                digest = r[1].bytes ?? []
            }
            let start = head
            try walk.forEach(key + [.integer(head)]) { r in
                guard head < Int64.max, r[0].int64 == head + 1 else { return false }
                guard let hash = r[1].bytes, hash.count == 32 else {
                    throw LnoteError(.corrupt, "operation \(ReplicaID(UInt64(bitPattern: replica))).\(head + 1) has no content hash",
                                     path: path)
                }
                digest = ContentHash.chain(digest, hash)
                head += 1
                return true
            }
            guard head > start else { return }
            try write.run(key + [.integer(head), .blob(digest)])
        }
    }

    /// Recomputes the chains of one notebook (nil: every notebook) from counter 1.
    func rebuildChains(nb: Int64?, _ tx: any RelayTransaction) throws {
        let filter: [RelayValue] = nb.map { [.integer($0)] } ?? []
        try tx.execute("DELETE FROM chains" + (nb == nil ? "" : " WHERE nb = ?1"), filter)
        let groups = try tx.query("SELECT DISTINCT nb, document, page, replica FROM ops" + (nb == nil ? "" : " WHERE nb = ?1"),
                                  filter)
        let writer = try ChainWriter(tx)
        for g in groups {
            guard let n = g[0].int64, let d = g[1].bytes, let p = g[2].bytes, let r = g[3].int64 else {
                throw LnoteError(.corrupt, "malformed operation row in the relay store", path: path)
            }
            try writer.advance(nb: n, document: d, page: p, replica: r, path: path)
        }
    }

    /// Recomputes the chain of one replica in one log from counter 1.
    func rebuildChain(nb: Int64, log: LogRef, replica: ReplicaID, _ tx: any RelayTransaction) throws {
        let key: [RelayValue] = [.integer(nb), .blob(log.document.uuid.bytes), Self.pageColumn(log),
                                 .integer(Int64(bitPattern: replica.rawValue))]
        try tx.execute("DELETE FROM chains WHERE nb = ?1 AND document = ?2 AND page = ?3 AND replica = ?4", key)
        try ChainWriter(tx).advance(nb: nb, document: log.document.uuid.bytes, page: log.page?.uuid.bytes ?? [],
                                    replica: Int64(bitPattern: replica.rawValue), path: path)
    }

    /// The relay's chain digests ([SYNC-52]): for every log and every replica it holds from
    /// counter 1 without a gap, the digest at its head (the entry of its clock). Logs
    /// sorted, replicas sorted; at most `OpValidator.maxClockEntries` replicas per log (the
    /// first ones), as the codec allows.
    func digests(nb: Int64, _ tx: any RelayTransaction) throws -> [LogDigests] {
        let rows = try tx.query("SELECT document, page, replica, head, digest FROM chains WHERE nb = ?1 AND head > 0",
                                [.integer(nb)])
        var byLog: [LogRef: [LogDigests.Entry]] = [:]
        var logs: [[UInt8]: LogRef] = [:]
        for r in rows {
            guard let d = r[0].bytes, let p = r[1].bytes, let rep = r[2].int64, let head = r[3].int64,
                  let digest = r[4].bytes, digest.count == 16 else {
                throw LnoteError(.corrupt, "malformed chain row in the relay store", path: path)
            }
            let log: LogRef
            if let l = logs[d + p] { log = l } else {
                log = try Self.logRef(document: r[0], page: r[1], path: path)
                logs[d + p] = log
            }
            byLog[log, default: []].append(LogDigests.Entry(replica: ReplicaID(UInt64(bitPattern: rep)),
                                                            counter: UInt64(head), digest: digest))
        }
        return byLog.keys.sorted().map { log in
            let entries = byLog[log]!.sorted { $0.replica < $1.replica }
            return LogDigests(log: log, entries: Array(entries.prefix(OpValidator.maxClockEntries)))
        }
    }

    /// The answer to `HashRanges` ([SYNC-53]): for each range, the first 16 bytes of the
    /// content hash of each operation held from `from`, in counter order, stopping at the
    /// first counter not held or at `to`, and once `budget` hashes were given in all (the
    /// later ranges are then answered with what is left, possibly nothing).
    func hashes(nb: Int64, ranges: [HashRange], budget: Int, _ tx: any RelayTransaction) throws -> [HashRange] {
        let q = try tx.prepare("""
            SELECT counter, hash FROM ops
            WHERE nb = ?1 AND document = ?2 AND page = ?3 AND replica = ?4 AND counter >= ?5 AND counter <= ?6
            ORDER BY counter
            """)
        var left = budget
        var out: [HashRange] = []
        out.reserveCapacity(ranges.count)
        for range in ranges {
            var answer = HashRange(log: range.log, replica: range.replica, from: range.from, to: range.from &- 1)
            // Counters are stored as Int64: none above Int64.max is held.
            if left > 0, let from = Int64(exactly: range.from) {
                let to = Int64(clamping: range.to)
                var expected = from
                var more = true
                try q.forEach([.integer(nb), .blob(range.log.document.uuid.bytes), Self.pageColumn(range.log),
                               .integer(Int64(bitPattern: range.replica.rawValue)), .integer(from), .integer(to)]) { r in
                    guard more, left > 0, r[0].int64 == expected else { return false }
                    guard let hash = r[1].bytes, hash.count >= 16 else {
                        throw LnoteError(.corrupt, "operation \(range.replica).\(expected) has no content hash", path: path)
                    }
                    answer.hashes.append(Array(hash.prefix(16)))
                    left -= 1
                    if expected == Int64.max { more = false } else { expected += 1 }
                    return more
                }
                answer.to = range.from &+ UInt64(answer.hashes.count) &- 1
            }
            out.append(answer)
        }
        return out
    }
}
