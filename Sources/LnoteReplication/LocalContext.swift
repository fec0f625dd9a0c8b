import LnoteModel

/// [MERGE-2] [MERGE-5] The context of a local operation in a *wide* log: one whose clock
/// names more replicas besides the author than a context may ([LOG-23], 4096).
///
/// Such a log is legal (every operation in it carried a context within the bound), so it
/// must stay editable: otherwise 4,097 operations from as many replicas, each valid on its
/// own, would make every later local edit of the log impossible on every replica. A local
/// operation then carries a *closed* clock smaller than the log's: a clock that covers, for
/// every replica it names, that replica's replica context (every context it wrote merged) — so
/// it covers the context of every operation it covers, and the operation is exactly what a
/// correct replica that had received only those operations would write. Every rule judges
/// operations by their own contexts, so the merge, and convergence, are unchanged.
enum LocalContext {
    static var limit: Int { OpValidator.maxClockEntries }

    /// Entries of `clock` other than `author`'s (all of them when `author` is nil).
    static func width(_ clock: VectorClock, besides author: ReplicaID?) -> Int {
        let own = author.map { clock[$0] > 0 } ?? false
        return clock.entries.count - (own ? 1 : 0)
    }

    /// True when a local operation by `author` on a log at `clock` cannot take the whole clock
    /// as its context.
    static func isWide(_ clock: VectorClock, for author: ReplicaID?) -> Bool {
        width(clock, besides: author) > limit
    }

    /// The least clock at least `start` (itself closed) that covers `ids` and is closed under
    /// `contexts` (sorted by replica, as a log's state keeps them); nil when it would name more
    /// than `limit` replicas besides `author`.
    static func closure(of ids: some Sequence<OpID>, from start: VectorClock, besides author: ReplicaID?,
                        contexts: [ReplicaContext]) -> VectorClock? {
        var clock = start
        var work = Array(ids)
        while let id = work.popLast() {
            guard clock[id.replica] < id.counter else { continue }
            clock[id.replica] = id.counter
            if width(clock, besides: author) > limit { return nil }
            // The replica's context is the merge of every context it wrote, and its latest
            // operation: covering it covers every operation of that replica, with its context.
            if let c = contexts.context(of: id.replica) {
                for e in c.clock.entries where clock[e.replica] < e.counter {
                    work.append(OpID(replica: e.replica, counter: e.counter))
                }
            }
        }
        return clock
    }

    /// `closure(of: required, …)`, then each of `wanted` (greatest first: the writes a
    /// register's frontier holds, the winner last) that still fits: an operation left out
    /// is one the new operation is concurrent with, which the rules settle as for any
    /// concurrent write (a conflict reported, the greatest `OpRef` winning). nil when
    /// `required` alone does not fit.
    static func closure(of required: [OpID], wanting wanted: [OpID], from start: VectorClock, besides author: ReplicaID?,
                        contexts: [ReplicaContext]) -> VectorClock? {
        guard var clock = closure(of: required, from: start, besides: author, contexts: contexts) else { return nil }
        for id in wanted.reversed() where !clock.covers(id) {
            if let c = closure(of: [id], from: clock, besides: author, contexts: contexts) { clock = c }
        }
        return clock
    }

    /// [LOG-4] The Lamport timestamp of a local operation of `log` (`"page …"`, `"document …"`)
    /// whose context is `context`: the operations it covers, plus one.
    /// - Throws: `.limitExceeded` when the log has reached the greatest timestamp.
    static func lamport(after context: VectorClock, in log: @autoclosure () -> String) throws -> UInt64 {
        let total = context.total
        guard total < OpValidator.maxLamport else {
            throw LnoteError(.limitExceeded, "\(log()) holds \(total) operations: no Lamport timestamp is left")
        }
        return total + 1
    }

    /// The error for a local edit that names operations no context within the bound covers.
    static func tooWide(_ what: String, width: Int) -> LnoteError {
        LnoteError(.limitExceeded, "\(what) names operations made after those of more than \(limit) replicas "
                   + "(the log names \(width)): no context can cover them ([LOG-23], [MERGE-5])")
    }
}
