import LnoteModel
import LnoteReplication
import LnoteSync

/// An operation a relay holds that the validator refuses ([SYNC-60]): stored by a version
/// of the relay from before the validator was strict, or damaged at rest.
public struct QuarantinedOperation: Sendable, Equatable, CustomStringConvertible {
    public var notebook: NotebookID
    public var log: LogRef
    /// The id the row is stored under.
    public var id: OpID
    /// The change sequence of the row.
    public var sequence: Int64
    /// Why it is refused: the validator's rule and message ("operation … breaks [LOG-4]: …"),
    /// or the decoder's.
    public var reason: String

    public var description: String { "\(notebook)  \(log)  \(id)  \(reason)" }
}

extension RelayStore {
    /// Why the operation stored as `bytes` under `id` in `log` is refused, or nil when it
    /// is a valid operation of that log with that id.
    static func refusal(of bytes: [UInt8], id: OpID, log: LogRef) -> String? {
        let frames: [Frame]
        do { frames = try Frame.decodeAll(bytes, path: "stored frame") } catch let e as LnoteError {
            return "not a valid frame: \(e)"
        } catch { return "not a valid frame: \(error)" }
        guard frames.count == 1 else { return "\(frames.count) frames stored as one operation" }
        let op: Op
        do { op = try OperationCodec.decode(frames[0], path: "stored frame") } catch let e as LnoteError {
            return e.description
        } catch { return "\(error)" }
        if let v = OpValidator.violation(of: op) { return v.description }
        guard op.id == id else { return "stored under id \(id), the operation is \(op.id)" }
        guard op.body.isPageOperation == (log.page != nil) else { return "\(op.body.name) does not belong in log \(log)" }
        return nil
    }

    /// Every operation the relay holds that the validator refuses ([SYNC-60]), in change
    /// order. Reads the whole store.
    public func quarantine() throws -> [QuarantinedOperation] {
        try database.transaction(.read) { tx in
            var out: [QuarantinedOperation] = []
            try tx.prepare("""
                SELECT o.seq, n.id, o.document, o.page, o.replica, o.counter, o.frame
                FROM ops o JOIN notebooks n ON n.nb = o.nb ORDER BY o.seq
                """).forEach([]) { row in
                if let found = try quarantined(row) { out.append(found) }
                return true
            }
            return out
        }
    }

    /// One row of `SELECT seq, notebook id, document, page, replica, counter, frame`, when refused.
    private func quarantined(_ r: [RelayValue]) throws -> QuarantinedOperation? {
        guard let seq = r[0].int64, let nb = r[1].string.flatMap(NotebookID.init), let rep = r[4].int64,
              let counter = r[5].int64 else {
            throw LnoteError(.corrupt, "malformed operation row in the relay store", path: path)
        }
        let log = try Self.logRef(document: r[2], page: r[3], path: path)
        let id = OpID(replica: ReplicaID(UInt64(bitPattern: rep)), counter: UInt64(bitPattern: counter))
        guard let reason = Self.refusal(of: r[6].bytes ?? [], id: id, log: log) else { return nil }
        return QuarantinedOperation(notebook: nb, log: log, id: id, sequence: seq, reason: reason)
    }

    /// Deletes operations the validator refuses ([SYNC-60]), named by id.
    ///
    /// Each id must name exactly one refused operation (within `notebook` and `log` when
    /// given); the chain of its replica in its log is recomputed, and a checkpoint of that
    /// log whose clock covers it is deleted (its state included the operation). Epochs are
    /// not changed: the operations were refused by every client of this version anyway.
    ///
    /// - Returns: what was deleted, in the order of `ids`.
    /// - Throws: `.notFound` when an id names no operation (or no notebook is `notebook`);
    ///   `.invalidArgument` when it names only valid operations (they are not dropped);
    ///   `.ambiguous` when it names refused operations in several logs (give `notebook`
    ///   and `log`). Nothing is deleted when it throws.
    @discardableResult
    public func dropQuarantined(_ ids: [OpID], notebook: NotebookID? = nil, log: LogRef? = nil) throws -> [QuarantinedOperation] {
        try database.transaction(.write) { tx in
            var filter = ""
            var bindings: [RelayValue] = []
            if let notebook {
                let (nb, _) = try row(of: notebook, tx)
                filter += " AND o.nb = ?3"
                bindings.append(.integer(nb))
            }
            if let log {
                filter += " AND o.document = ?\(3 + bindings.count) AND o.page = ?\(4 + bindings.count)"
                bindings += [.blob(log.document.uuid.bytes), Self.pageColumn(log)]
            }
            var dropped: [QuarantinedOperation] = []
            for id in ids {
                guard let counter = Int64(exactly: id.counter) else {
                    throw LnoteError(.notFound, "no operation \(id) in the relay store", path: path)
                }
                let rows = try tx.query("""
                    SELECT o.seq, n.id, o.document, o.page, o.replica, o.counter, o.frame, o.nb
                    FROM ops o JOIN notebooks n ON n.nb = o.nb WHERE o.replica = ?1 AND o.counter = ?2
                    """ + filter, [.integer(Int64(bitPattern: id.replica.rawValue)), .integer(counter)] + bindings)
                guard !rows.isEmpty else {
                    throw LnoteError(.notFound, "no operation \(id) in the relay store"
                                        + (notebook.map { " for notebook \($0)" } ?? "") + (log.map { " in log \($0)" } ?? ""),
                                     path: path)
                }
                let refused = try rows.compactMap { r in try quarantined(r).map { (r, $0) } }
                guard let (r, found) = refused.first else {
                    throw LnoteError(.invalidArgument, "operation \(id) is valid (the validator accepts it); not dropped", path: path)
                }
                guard refused.count == 1 else {
                    let places = refused.map { "\($0.1.notebook) \($0.1.log)" }.joined(separator: ", ")
                    throw LnoteError(.ambiguous, "operation \(id) is refused in \(refused.count) logs (\(places)): "
                                        + "give --notebook and --log", path: path)
                }
                guard let nb = r[7].int64 else { throw LnoteError(.corrupt, "malformed operation row", path: path) }
                try tx.execute("DELETE FROM ops WHERE seq = ?1", [.integer(found.sequence)])
                try rebuildChain(nb: nb, log: found.log, replica: found.id.replica, tx)
                try dropCheckpoints(covering: found.id, in: found.log, nb: nb, tx)
                dropped.append(found)
            }
            return dropped
        }
    }

    /// Deletes the checkpoint of `log` when its clock covers `id`.
    private func dropCheckpoints(covering id: OpID, in log: LogRef, nb: Int64, _ tx: any RelayTransaction) throws {
        // (nb, document, page) is the table's UNIQUE key: one checkpoint per log.
        let key: [RelayValue] = [.integer(nb), .blob(log.document.uuid.bytes), Self.pageColumn(log)]
        for r in try tx.query("SELECT clock FROM checkpoints WHERE nb = ?1 AND document = ?2 AND page = ?3", key) {
            var reader = ByteReader(r[0].bytes ?? [], path: path)
            let clock = try? ElementCodec.decodeClock(&reader)
            if clock?.covers(id) ?? true {
                try tx.execute("DELETE FROM checkpoints WHERE nb = ?1 AND document = ?2 AND page = ?3", key)
            }
        }
    }
}
