import LnoteModel

/// Holds operations until they can be applied in causal order.
///
/// An operation from replica `r` with counter `c` is deliverable when the log's clock has
/// `clock[r] == c − 1` and covers the operation's whole context: everything its author had
/// seen is applied first. Counters have no gaps per log, so this is exact.
/// An operation already covered by the clock, or already waiting, is a duplicate.
struct CausalBuffer: Sendable, Hashable {
    private(set) var waiting: [ReplicaID: [UInt64: Op]] = [:]

    var count: Int { waiting.values.reduce(0) { $0 + $1.count } }

    var isEmpty: Bool { waiting.isEmpty }

    /// All waiting operations, sorted by id (a deterministic order for snapshots and logs).
    var operations: [Op] {
        waiting.values.flatMap(\.values).sorted { $0.id < $1.id }
    }

    func contains(_ id: OpID) -> Bool { waiting[id.replica]?[id.counter] != nil }

    /// Replaces every waiting operation by `change(op)` (same id).
    mutating func update(_ change: (Op) throws -> Op) rethrows {
        for (replica, entries) in waiting {
            for (counter, op) in entries { waiting[replica]![counter] = try change(op) }
        }
    }

    /// Adds an operation; returns false for a duplicate of a waiting one.
    mutating func insert(_ op: Op) -> Bool {
        if waiting[op.id.replica]?[op.id.counter] != nil { return false }
        waiting[op.id.replica, default: [:]][op.id.counter] = op
        return true
    }

    /// Removes and returns, one at a time, every operation that becomes deliverable;
    /// `apply` must advance what `counter` answers (the operations of a replica applied).
    /// Delivers `ops` in causal order ([MERGE-40]): those already applied are skipped; one
    /// that is next from its author and whose context is covered is applied at once when
    /// nothing waits (a log replayed in order, a peer's operations in causal order: the usual
    /// case, which so never goes through the buffer); any other waits, then everything that
    /// became ready is drained. The order in which ready operations are applied does not
    /// change the state the rules give.
    mutating func deliver(_ ops: [Op], counter: (ReplicaID) -> UInt64, apply: (Op) throws -> Void) rethrows {
        func covers(_ context: VectorClock) -> Bool { context.entries.allSatisfy { counter($0.replica) >= $0.counter } }
        for op in ops where counter(op.id.replica) < op.id.counter {
            if isEmpty && op.id.counter == counter(op.id.replica) + 1 && covers(op.context) {
                try apply(op)
            } else {
                _ = insert(op)
            }
        }
        if !isEmpty { try drain(counter: counter, apply: apply) }
    }

    mutating func drain(counter: (ReplicaID) -> UInt64, apply: (Op) throws -> Void) rethrows {
        func covers(_ context: VectorClock) -> Bool { context.entries.allSatisfy { counter($0.replica) >= $0.counter } }
        var progress = true
        while progress {
            progress = false
            for replica in waiting.keys.sorted() {
                while let next = waiting[replica]?[counter(replica) + 1], covers(next.context) {
                    waiting[replica]![next.id.counter] = nil
                    if waiting[replica]!.isEmpty { waiting[replica] = nil }
                    try apply(next)
                    progress = true
                }
                // Anything the clock already covers arrived twice: drop it.
                if let entries = waiting[replica] {
                    let applied = counter(replica)
                    let stale = entries.keys.filter { $0 <= applied }
                    for k in stale { waiting[replica]![k] = nil }
                    if waiting[replica]!.isEmpty { waiting[replica] = nil }
                }
            }
        }
    }
}

/// Maintains a set of causally maximal operations (an antichain) under causal delivery:
/// when an operation arrives, everything it had seen is already here, so removing what
/// its context covers and adding it yields exactly the maximal operations of all arrived.
@inline(__always)
func advance(_ frontier: inout Frontier, with op: Op) {
    frontier.advance(op.ref, context: op.context)
}

/// Writes an LWW register: the frontier advances; the value changes when the operation is
/// the new greatest `OpRef` (a causally later write always has a greater Lamport timestamp,
/// so the greatest is always in the frontier).
@inline(__always)
func write<V>(_ register: inout LWWRegister<V>, _ value: V, by op: Op) {
    let wins = register.winner.map { op.ref > $0 } ?? true
    advance(&register.writes, with: op)
    if wins { register.value = value }
}

extension Array where Element == ReplicaContext {
    /// Where `replica`'s context is (`found`), or would be inserted, in contexts sorted by
    /// replica (as a log's state keeps them, [SNAP-26]): a binary search, so that a log
    /// written by many replicas does not cost a scan of them all per operation.
    func contextIndex(of replica: ReplicaID) -> (index: Int, found: Bool) {
        var lo = 0, hi = count
        while lo < hi {
            let mid = (lo + hi) / 2
            if self[mid].replica < replica { lo = mid + 1 } else { hi = mid }
        }
        return (lo, lo < count && self[lo].replica == replica)
    }

    /// The context of `replica`, if it wrote to the log.
    func context(of replica: ReplicaID) -> ReplicaContext? {
        let (i, found) = contextIndex(of: replica)
        return found ? self[i] : nil
    }

    /// `context(of: replica)?.lamport(of: counter)`, read in place: a copy of the context
    /// retains and releases its arrays, once per operation checked. nil when `replica` wrote
    /// nothing here.
    func lamport(of replica: ReplicaID, _ counter: UInt64) -> UInt64? {
        let (i, found) = contextIndex(of: replica)
        return found ? self[i].lamport(of: counter) : nil
    }

    /// [MERGE-43] True when `op`'s Lamport timestamp exceeds that of every operation its
    /// context covers: for each replica, the greatest among its operations up to the one the
    /// context names, which causal delivery has applied. False only for a context that leaves out part of what it
    /// claims to have seen, which no correct replica writes.
    func lamportExceedsItsPast(_ op: Op) -> Bool {
        op.context.entries.allSatisfy { e in
            guard let l = lamport(of: e.replica, e.counter) else { return true }
            return l < op.lamport
        }
    }
}
