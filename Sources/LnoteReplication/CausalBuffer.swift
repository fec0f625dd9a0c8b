import LnoteModel

/// Holds operations until they can be applied in causal order.
///
/// An operation from replica `r` with counter `c` is deliverable when the log's clock has
/// `clock[r] == c − 1` and covers the operation's whole context: everything its author had
/// seen is applied first. Counters have no gaps per log, so this is exact.
/// An operation already covered by the clock, or already waiting, is a duplicate.
///
/// Each waiting operation is filed under the first of its dependencies the clock does not
/// meet yet (its author's previous counter, then its context's entries in order), and looked
/// at again only when that one is applied: releasing N operations costs about N plus their
/// contexts' entries, whatever order they arrived in. (Passes over every waiting replica until
/// nothing moved released one operation a pass when each waited on the next: N² log N, 40 s
/// for 16,000 operations of 49 bytes.)
struct CausalBuffer: Sendable, Hashable {
    private(set) var waiting: [ReplicaID: [UInt64: Op]] = [:]
    /// Where each waiting operation is filed; derived from `waiting` and the clock, so not
    /// part of the value (two buffers holding the same operations are equal).
    private var index = WaitIndex()

    /// Waiting operations by the dependency they wait for.
    struct WaitIndex: Sendable {
        /// Operations inserted since the last drain, not filed yet.
        var unfiled: [OpID] = []
        /// Key: a dependency, replica `r` reaching counter `c` (as an `OpID`). Value: the
        /// operations waiting for it, each with the position of that dependency in its list
        /// (0: its author's previous counter; i ≥ 1: its context's entry i − 1). Dependencies
        /// before that position were met when it was filed, and stay met: counters only grow.
        var blocked: [OpID: [(id: OpID, at: Int)]] = [:]
        /// Dependencies looked at so far (what tests bound).
        var checks = 0
        /// Set when the clock may have moved other than by this buffer's `apply` (a local
        /// edit, an `apply` that threw): the next drain then looks at every filed dependency
        /// and drops every operation the clock covers, as a pass over everything would.
        var clockMoved = false
    }

    /// Tells the buffer that the clock moved without it (an operation applied directly, as a
    /// local edit is): operations waiting on what it met, or that it now covers, are found at
    /// the next drain.
    mutating func clockMovedOutside() {
        if !waiting.isEmpty { index.clockMoved = true }
    }

    /// Dependencies looked at since the buffer was made: about the operations released plus
    /// their contexts' entries (tests bound it).
    var dependencyChecks: Int { index.checks }

    static func == (l: CausalBuffer, r: CausalBuffer) -> Bool { l.waiting == r.waiting }
    func hash(into h: inout Hasher) { h.combine(waiting) }

    var count: Int { waiting.values.reduce(0) { $0 + $1.count } }

    var isEmpty: Bool { waiting.isEmpty }

    /// All waiting operations, sorted by id (a deterministic order for snapshots and logs).
    var operations: [Op] {
        waiting.values.flatMap(\.values).sorted { $0.id < $1.id }
    }

    func contains(_ id: OpID) -> Bool { waiting[id.replica]?[id.counter] != nil }

    /// Replaces every waiting operation by `change(op)`, which must keep its id and context
    /// (where it is filed depends on them).
    mutating func update(_ change: (Op) throws -> Op) rethrows {
        for (replica, entries) in waiting {
            for (counter, op) in entries {
                let changed = try change(op)
                precondition(changed.id == op.id && changed.context == op.context, "a waiting operation's id or context changed")
                waiting[replica]![counter] = changed
            }
        }
    }

    /// Adds an operation; returns false for a duplicate of a waiting one.
    mutating func insert(_ op: Op) -> Bool {
        if waiting[op.id.replica]?[op.id.counter] != nil { return false }
        waiting[op.id.replica, default: [:]][op.id.counter] = op
        index.unfiled.append(op.id)
        return true
    }

    /// Delivers `ops` in causal order ([MERGE-40]): those already applied are skipped; one
    /// that is next from its author and whose context is covered is applied at once when
    /// nothing waits (a log replayed in order, a peer's operations in causal order: the usual
    /// case, which so never goes through the buffer); any other waits, then everything that
    /// became ready is drained. `apply` must advance what `counter` answers (the operations
    /// of a replica applied). The order in which ready operations are applied does not
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

    /// Applies every waiting operation that is or becomes deliverable, and drops those the
    /// clock already covers (they arrived twice).
    mutating func drain(counter: (ReplicaID) -> UInt64, apply: (Op) throws -> Void) rethrows {
        var ready: [OpID] = []
        var finished = false
        defer {
            if !finished {
                // `apply` threw: what was found ready is filed again at the next drain, which
                // also looks at everything (the clock may have moved for the operation that threw).
                index.unfiled.append(contentsOf: ready.reversed())
                index.clockMoved = true
            }
        }
        let unfiled = index.unfiled
        index.unfiled = []
        for id in unfiled { file(id, from: 0, counter: counter, ready: &ready) }
        if index.clockMoved {
            index.clockMoved = false
            // Dependencies met outside this buffer, in a fixed order.
            index.checks += index.blocked.count + waiting.count
            let met = index.blocked.keys.filter { counter($0.replica) >= $0.counter }.sorted()
            for key in met {
                for entry in index.blocked.removeValue(forKey: key) ?? [] { file(entry.id, from: entry.at, counter: counter, ready: &ready) }
            }
            // Anything the clock already covers arrived twice: drop it.
            for (replica, entries) in waiting {
                let applied = counter(replica)
                for c in entries.keys where c <= applied { remove(OpID(replica: replica, counter: c)) }
            }
        }
        ready.reverse()  // applied in the order found
        while let id = ready.popLast() {
            guard let op = waiting[id.replica]?[id.counter] else { continue }
            remove(id)
            // Every dependency was met when it was found ready, and counters only grow: its
            // author's counter is c − 1 unless the operation arrived twice.
            guard counter(id.replica) < id.counter else { continue }
            try apply(op)
            if let woken = index.blocked.removeValue(forKey: id) {
                var more: [OpID] = []
                for entry in woken { file(entry.id, from: entry.at, counter: counter, ready: &more) }
                ready.append(contentsOf: more.reversed())
            }
        }
        finished = true
        // Nothing waits: nothing filed is left but entries of operations dropped as stale.
        if waiting.isEmpty { index = WaitIndex(checks: index.checks) }
    }

    private mutating func remove(_ id: OpID) {
        waiting[id.replica]![id.counter] = nil
        if waiting[id.replica]!.isEmpty { waiting[id.replica] = nil }
    }

    /// Files a waiting operation under its first dependency from position `from` that the
    /// clock does not meet, or adds it to `ready` when it meets them all; drops it when the
    /// clock already covers it.
    private mutating func file(_ id: OpID, from: Int, counter: (ReplicaID) -> UInt64, ready: inout [OpID]) {
        guard let op = waiting[id.replica]?[id.counter] else { return }
        guard counter(id.replica) < id.counter else {
            remove(id)
            return
        }
        let entries = op.context.entries
        var at = from
        while at <= entries.count {
            index.checks += 1
            let (replica, needed) = at == 0 ? (id.replica, id.counter &- 1) : (entries[at - 1].replica, entries[at - 1].counter)
            if counter(replica) < needed {
                index.blocked[OpID(replica: replica, counter: needed), default: []].append((id, at))
                return
            }
            at += 1
        }
        ready.append(id)
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
