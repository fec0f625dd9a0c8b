import LnoteModel
import LnoteReplication
import LnoteSync

/// Checkpoints (`Protocol/sync-protocol.md` §5): at most one per log, the newest, and only
/// one the relay's own operations give ([SYNC-59]).
extension RelayStore {
    /// Keeps `checkpoint` if it is newer than the one held for its log and the operations
    /// the relay holds give it ([SYNC-59]).
    ///
    /// Checked, in this order: it is a page log's (document logs get no checkpoint,
    /// [SYNC-40]); its snapshot decodes as a page snapshot of that page whose clock is the
    /// checkpoint's; the relay holds, for every replica of that clock, every operation up
    /// to its counter. Then, when it is newer, the relay replays the operations its clock
    /// covers with `PageReplica` — from the checkpoint held when that one's clock is
    /// covered (it was checked the same way), else from the empty page — and keeps it only
    /// if the state is the snapshot's.
    ///
    /// Newer means: its clock covers the held one's (an equal clock replaces, so a
    /// re-upload is idempotent). When the held clock covers the new one strictly, the held
    /// one stays. When the clocks are concurrent (two clients checkpointed different
    /// histories), the one whose clock has the greater total (covers more operations) is
    /// kept; on equal totals, the one whose encoded body is lexicographically greater, so
    /// the outcome does not depend on the order of the uploads.
    ///
    /// - Returns: true when `checkpoint` is now the one held; false when the held one is
    ///   newer (the new one is then checked only as far as its decoding and its clock).
    /// - Throws: `.notFound` for an unknown notebook; `.limitExceeded` for a snapshot over
    ///   `Checkpoint.maxSnapshotSize`; `ServerRefusal` (`badCheckpoint`, HTTP 400
    ///   `bad_checkpoint`) naming the log and the reason otherwise refused.
    @discardableResult
    public func putCheckpoint(notebook: NotebookID, checkpoint: Checkpoint) throws -> Bool {
        try Self.checkLimits(of: checkpoint)
        let state = try Self.decodedState(of: checkpoint)
        return try database.transaction(.write) { tx in
            let (nb, _) = try row(of: notebook, tx)
            let log = checkpoint.log
            let key: [RelayValue] = [.integer(nb), .blob(log.document.uuid.bytes), Self.pageColumn(log)]
            try checkCovered(checkpoint, nb: nb, tx)
            let rows = try tx.query("SELECT clock, snapshot FROM checkpoints WHERE nb = ?1 AND document = ?2 AND page = ?3", key)
            var base: Checkpoint?
            if let r = rows.first {
                let held = Checkpoint(log: log, clock: try decodeClock(r[0]), snapshot: r[1].bytes ?? [])
                guard Self.replaces(checkpoint, held) else { return false }
                // One stored before the limits were what they are is no base: the new one is
                // then checked from the empty page, within the limits.
                if checkpoint.clock.covers(held.clock), (try? Self.checkLimits(of: held)) != nil { base = held }
            }
            try verify(checkpoint, state: state, nb: nb, from: base, tx)
            var w = ByteWriter()
            ElementCodec.encode(checkpoint.clock, into: &w)
            try tx.execute("""
                INSERT INTO checkpoints (nb, document, page, clock, snapshot, uploaded) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                ON CONFLICT (nb, document, page) DO UPDATE
                SET clock = excluded.clock, snapshot = excluded.snapshot, uploaded = excluded.uploaded
                """, key + [.blob(w.bytes), .blob(checkpoint.snapshot), .integer(Self.now())])
            return true
        }
    }

    /// The largest checkpoint snapshot a relay checks (8 MiB; a dense page of 400,000 points
    /// takes about one). Larger ones are refused as too large (413), which a client takes as
    /// "no checkpoint of this page here" ([SYNC-40]).
    public static let maxCheckpointBytes = 8 << 20
    /// The most points a page may hold (and the operations since the held checkpoint add) for
    /// the relay to check its checkpoint: the check replays them with every point decoded
    /// (about 20 bytes each), and a snapshot of a megabyte can hold millions of them.
    public static let maxCheckpointPoints = 1 << 22

    /// Refuses (413) a checkpoint whose snapshot is over `maxCheckpointBytes`, is of snapshot
    /// format 1 or of a format newer than this build reads (so that the client skips it,
    /// [SYNC-40], rather than fail its sync) (format 1 has no points to leave undecoded: its streams are decoded to
    /// be counted, and a few bytes of them can stand for many points), or whose page holds
    /// more than `maxCheckpointPoints` points, counted with the points left undecoded.
    static func checkLimits(of checkpoint: Checkpoint) throws {
        let bytes = checkpoint.snapshot
        guard bytes.count <= maxCheckpointBytes else {
            throw LnoteError(.limitExceeded, "checkpoint snapshot of \(bytes.count) bytes exceeds \(maxCheckpointBytes) "
                             + "(a relay checks checkpoints of at most \(maxCheckpointBytes >> 20) MiB)")
        }
        let versionAt = PageSnapshot.magic.count
        if bytes.count >= versionAt + 2, bytes.starts(with: PageSnapshot.magic) {
            let version = UInt16(bytes[versionAt]) | UInt16(bytes[versionAt + 1]) << 8
            guard (2...PageSnapshot.version).contains(version) else {
                throw LnoteError(.limitExceeded, "checkpoint snapshot of format \(version); a relay checks formats 2 to "
                                 + "\(PageSnapshot.version) only (their points can be counted without decoding them; "
                                 + "a newer one it cannot read)")
            }
        }
        // Any decoding error is reported by `decodedState`, with its reason.
        guard let contents = try? PageSnapshot.decode(bytes, path: "snapshot", deferringPoints: true) else { return }
        let points = contents.state.pointCount + contents.state.tombstones.reduce(0) { $0 + ($1.record?.content.pointCount ?? 0) }
        guard points <= maxCheckpointPoints else {
            throw LnoteError(.limitExceeded, "checkpoint of \(checkpoint.log) holds \(points) points; a relay checks checkpoints "
                             + "of at most \(maxCheckpointPoints) (it replays them decoded)")
        }
    }

    /// The checkpoints held for the notebook, sorted by log.
    /// - Throws: `.notFound` for an unknown notebook.
    public func checkpoints(notebook: NotebookID) throws -> [Checkpoint] {
        try database.transaction(.read) { tx in
            let (nb, _) = try row(of: notebook, tx)
            return try tx.query("SELECT document, page, clock, snapshot FROM checkpoints WHERE nb = ?1", [.integer(nb)])
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

    // MARK: - [SYNC-59] Checks

    /// The page state of a checkpoint's snapshot, checked against the checkpoint's log and clock.
    static func decodedState(of checkpoint: Checkpoint) throws -> PageState {
        let log = checkpoint.log
        guard let page = log.page else {
            throw ServerRefusal.badCheckpoint(log, "a document log gets no checkpoint (only page logs do)")
        }
        let contents: PageSnapshot.Contents
        do { contents = try PageSnapshot.decode(checkpoint.snapshot, path: "snapshot") } catch let e as LnoteError {
            throw ServerRefusal.badCheckpoint(log, "its snapshot is not a valid page snapshot (\(e))")
        }
        guard contents.state.page == page else {
            throw ServerRefusal.badCheckpoint(log, "its snapshot is of page \(contents.state.page)")
        }
        guard contents.state.clock == checkpoint.clock else {
            throw ServerRefusal.badCheckpoint(log, "its snapshot's clock \(contents.state.clock) is not the checkpoint's clock \(checkpoint.clock)")
        }
        return contents.state
    }

    /// Throws unless the relay holds every operation the checkpoint's clock covers.
    func checkCovered(_ checkpoint: Checkpoint, nb: Int64, _ tx: any RelayTransaction) throws {
        let log = checkpoint.log
        let q = try tx.prepare("SELECT head FROM chains WHERE nb = ?1 AND document = ?2 AND page = ?3 AND replica = ?4")
        for e in checkpoint.clock.entries {
            let r = try q.first([.integer(nb), .blob(log.document.uuid.bytes), Self.pageColumn(log),
                                 .integer(Int64(bitPattern: e.replica.rawValue))])
            let head = r.map { UInt64(max(0, $0[0].int64 ?? 0)) } ?? 0
            guard head >= e.counter else {
                throw ServerRefusal.badCheckpoint(log, "its clock \(checkpoint.clock) covers operations the relay does not hold: "
                                                      + "it holds those of \(e.replica) up to \(head), not \(e.counter)")
            }
        }
    }

    /// Replays the operations of the checkpoint's log its clock covers (those not covered
    /// by `base`'s clock, from `base`'s state) and throws unless the result is `state`.
    func verify(_ checkpoint: Checkpoint, state: PageState, nb: Int64, from base: Checkpoint?,
                _ tx: any RelayTransaction) throws {
        let log = checkpoint.log
        var replica: PageReplica
        if let base {
            replica = PageReplica(state: try Self.decodedState(of: base))
        } else {
            replica = PageReplica(page: state.page)
        }
        let q = try tx.prepare("""
            SELECT counter, frame FROM ops WHERE nb = ?1 AND document = ?2 AND page = ?3 AND replica = ?4
            AND counter > ?5 AND counter <= ?6 ORDER BY counter
            """)
        var ops: [Op] = []
        // The operations' points, bounded as the snapshot's are (`checkLimits`): decoding
        // stops once they pass the budget.
        var points = 0
        for e in checkpoint.clock.entries {
            let from = replica.clock[e.replica]
            guard e.counter > from else { continue }
            try q.forEach([.integer(nb), .blob(log.document.uuid.bytes), Self.pageColumn(log),
                           .integer(Int64(bitPattern: e.replica.rawValue)), .integer(Int64(clamping: from)),
                           .integer(Int64(clamping: e.counter))]) { r in
                let counter = r[0].int64 ?? 0
                do {
                    let frames = try Frame.decodeAll(r[1].bytes ?? [], path: path)
                    guard frames.count == 1 else { throw LnoteError(.corrupt, "\(frames.count) frames in one row", path: path) }
                    let op = try OperationCodec.decode(frames[0], path: path)
                    if case .add(let content, _) = op.body { points += content.pointCount }
                    guard points <= Self.maxCheckpointPoints else {
                        throw CheckpointOverBudget()
                    }
                    ops.append(op)
                } catch is CheckpointOverBudget {
                    throw LnoteError(.limitExceeded, "the operations checkpoint \(log) covers hold more than \(Self.maxCheckpointPoints) "
                                     + "points; a relay checks checkpoints of at most that many (it replays them decoded)")
                } catch let error as LnoteError {
                    throw ServerRefusal.badCheckpoint(log, "operation \(e.replica).\(counter) held by the relay is refused "
                                                          + "(\(error)); see `lnote relay quarantine list`")
                }
                return true
            }
        }
        do { _ = try replica.receive(ops) } catch let error as LnoteError {
            throw ServerRefusal.badCheckpoint(log, "the relay's operations do not replay (\(error))")
        }
        guard replica.pending.isEmpty else {
            throw ServerRefusal.badCheckpoint(log, "its clock \(checkpoint.clock) is not causally complete: "
                                                  + "\(replica.pending.count) of the operations it covers wait for others")
        }
        let expected = PageSnapshot.canonicalized(replica.state), claimed = PageSnapshot.canonicalized(state)
        // The same state: a client's page from before range restores were kept keeps what was
        // left of each partial erase, where this replay keeps the erases whole beside the restores.
        guard PageSnapshot.sameState(expected, as: claimed) else {
            // Replayed from a held checkpoint written before range restores were kept
            // (page-snapshot.md [SNAP-44]), the state holds strokes the old way, and a client's
            // claim that keeps its restores is not equal to it: checked again from the empty page.
            if base != nil {
                try verify(checkpoint, state: state, nb: nb, from: nil, tx)
                return
            }
            throw ServerRefusal.badCheckpoint(log, "its state is not the state the relay's operations give ("
                                                  + Self.difference(claimed, expected) + ")")
        }
    }

    /// Where two page states differ, in a few words.
    static func difference(_ claimed: PageState, _ expected: PageState) -> String {
        if claimed.clock != expected.clock { return "clock \(claimed.clock), the operations give \(expected.clock)" }
        if claimed.elements.map(\.id) != expected.elements.map(\.id) {
            return "\(claimed.elements.count) elements, the operations give \(expected.elements.count)"
        }
        if claimed.elements != expected.elements {
            let i = claimed.elements.indices.first { claimed.elements[$0] != expected.elements[$0] } ?? 0
            return "element \(claimed.elements[i].id) differs"
        }
        if claimed.tombstones != expected.tombstones {
            return "\(claimed.tombstones.count) tombstones, the operations give \(expected.tombstones.count)"
        }
        if claimed.contexts != expected.contexts { return "replica contexts differ" }
        if claimed.maxLamport != expected.maxLamport {
            return "greatest Lamport timestamp \(claimed.maxLamport), the operations give \(expected.maxLamport)"
        }
        return "modified \(claimed.modified), the operations give \(expected.modified)"
    }

    /// Checks every checkpoint held (a store upgraded from a version that stored them
    /// unchecked) and deletes those [SYNC-59] refuses.
    /// - Returns: how many were deleted.
    func dropUnverifiableCheckpoints(_ tx: any RelayTransaction) throws -> Int {
        let rows = try tx.query("SELECT nb, document, page, clock, snapshot FROM checkpoints")
        var dropped = 0
        for r in rows {
            guard let nb = r[0].int64 else { continue }
            do {
                let checkpoint = Checkpoint(log: try Self.logRef(document: r[1], page: r[2], path: path),
                                            clock: try decodeClock(r[3]), snapshot: r[4].bytes ?? [])
                try Self.checkLimits(of: checkpoint)
                let state = try Self.decodedState(of: checkpoint)
                try checkCovered(checkpoint, nb: nb, tx)
                try verify(checkpoint, state: state, nb: nb, from: nil, tx)
                continue
            } catch is ServerRefusal {
            } catch let e as LnoteError where e.code == .corrupt || e.code == .truncated || e.code == .limitExceeded {
                // Beyond what a relay checks now: dropped like one that does not check out.
            }
            // (nb, document, page) is the table's UNIQUE key.
            try tx.execute("DELETE FROM checkpoints WHERE nb = ?1 AND document = ?2 AND page = ?3", [r[0], r[1], r[2]])
            dropped += 1
        }
        return dropped
    }

    private func decodeClock(_ v: RelayValue) throws -> VectorClock {
        var r = ByteReader(v.bytes ?? [], path: path)
        let c = try ElementCodec.decodeClock(&r)
        try r.expectEnd("checkpoint clock")
        return c
    }
}

private struct CheckpointOverBudget: Error {}
