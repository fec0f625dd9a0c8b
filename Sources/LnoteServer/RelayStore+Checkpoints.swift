import LnoteModel
import LnoteSQLite
import LnoteSync

/// Checkpoints (`Protocol/sync-protocol.md` §5): at most one per log, the newest.
extension RelayStore {
    /// Keeps `checkpoint` if it is newer than the one held for its log.
    ///
    /// Newer means: its clock covers the held one's (an equal clock replaces, so a
    /// re-upload is idempotent). When the held clock covers the new one strictly, the held
    /// one stays. When the clocks are concurrent (two clients checkpointed different
    /// histories), the one whose clock has the greater total (covers more operations) is
    /// kept; on equal totals, the one whose encoded body is lexicographically greater, so
    /// the outcome does not depend on the order of the uploads.
    ///
    /// - Returns: true when `checkpoint` is now the one held.
    /// - Throws: `.notFound` for an unknown notebook; `.limitExceeded` for a snapshot over
    ///   `Checkpoint.maxSnapshotSize`.
    @discardableResult
    public func putCheckpoint(notebook: NotebookID, checkpoint: Checkpoint) throws -> Bool {
        guard checkpoint.snapshot.count <= Checkpoint.maxSnapshotSize else {
            throw LnoteError(.limitExceeded, "checkpoint snapshot of \(checkpoint.snapshot.count) bytes exceeds \(Checkpoint.maxSnapshotSize)")
        }
        return try db.transaction {
            let (nb, _) = try row(of: notebook)
            let key: [SQLiteValue] = [.integer(nb), .blob(checkpoint.log.document.uuid.bytes), Self.pageColumn(checkpoint.log)]
            let rows = try db.query("SELECT clock, snapshot FROM checkpoints WHERE nb = ?1 AND document = ?2 AND page = ?3", key)
            if let r = rows.first {
                let held = Checkpoint(log: checkpoint.log, clock: try decodeClock(r[0]), snapshot: r[1].bytes ?? [])
                guard Self.replaces(checkpoint, held) else { return false }
            }
            var w = ByteWriter()
            ElementCodec.encode(checkpoint.clock, into: &w)
            try db.execute("""
                INSERT INTO checkpoints (nb, document, page, clock, snapshot, uploaded) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                ON CONFLICT (nb, document, page) DO UPDATE
                SET clock = excluded.clock, snapshot = excluded.snapshot, uploaded = excluded.uploaded
                """, key + [.blob(w.bytes), .blob(checkpoint.snapshot), .integer(Self.now())])
            return true
        }
    }

    /// The checkpoints held for the notebook, sorted by log.
    /// - Throws: `.notFound` for an unknown notebook.
    public func checkpoints(notebook: NotebookID) throws -> [Checkpoint] {
        try db.transaction(.deferred) {
            let (nb, _) = try row(of: notebook)
            return try db.query("SELECT document, page, clock, snapshot FROM checkpoints WHERE nb = ?1", [.integer(nb)])
                .map { r in
                    Checkpoint(log: try Self.logRef(document: r[0], page: r[1], path: path), clock: try decodeClock(r[2]),
                               snapshot: r[3].bytes ?? [])
                }
                .sorted { $0.log < $1.log }
        }
    }

    /// Whether `new` takes the place of `held` (see `putCheckpoint`).
    static func replaces(_ new: Checkpoint, _ held: Checkpoint) -> Bool {
        switch new.clock.compare(held.clock) {
        case .equal, .after: return true
        case .before: return false
        case .concurrent:
            if new.clock.total != held.clock.total { return new.clock.total > held.clock.total }
            return held.encoded().lexicographicallyPrecedes(new.encoded())
        }
    }

    private func decodeClock(_ v: SQLiteValue) throws -> VectorClock {
        var r = ByteReader(v.bytes ?? [], path: path)
        let c = try ElementCodec.decodeClock(&r)
        try r.expectEnd("checkpoint clock")
        return c
    }
}
