import LnoteModel

/// A log's clock and replica contexts while operations are applied to it.
///
/// Both are arrays sorted by replica ([SNAP-26]): cheap to search and to update in place,
/// but a replica the log did not name yet is an insertion that moves every entry above
/// it. One batch from N replicas new to the log (a hostile push can carry a million, each
/// operation valid) then cost O(N²) moves, twice. A replica new to the log is therefore
/// kept aside here, in hash tables, until `settle` merges all of them into the arrays in one
/// pass. Every lookup during the batch sees both, so the rules see exactly the clock and
/// contexts they would have seen ([MERGE-1]: the state is the same).
struct LogClockStage: Sendable {
    private var counters: [ReplicaID: UInt64] = [:]
    private var contexts: [ReplicaID: ReplicaContext] = [:]

    var isEmpty: Bool { counters.isEmpty && contexts.isEmpty }

    /// The operations of `replica` applied: `clock[replica]`, or what this stage holds.
    @inline(__always)
    func counter(_ replica: ReplicaID, in clock: VectorClock) -> UInt64 {
        let c = clock[replica]
        if c > 0 || counters.isEmpty { return c }
        return counters[replica] ?? 0
    }

    /// Records that `id` is applied.
    @inline(__always)
    mutating func include(_ id: OpID, in clock: inout VectorClock) {
        if clock[id.replica] > 0 {
            clock.include(id)
        } else {
            counters[id.replica] = max(counters[id.replica] ?? 0, id.counter)
        }
    }

    /// The Lamport timestamp of operation `counter` of `replica`, from its replica context in
    /// `sorted` or in this stage, read in place.
    @inline(__always)
    func lamport(of replica: ReplicaID, _ counter: UInt64, in sorted: [ReplicaContext]) -> UInt64? {
        if let l = sorted.lamport(of: replica, counter) { return l }
        return contexts.isEmpty ? nil : contexts[replica]?.lamport(of: counter)
    }

    /// Records that `op` is the latest operation seen from its author ([MERGE-53]), and its
    /// Lamport timestamp ([MERGE-43]).
    mutating func record(_ op: Op, in sorted: inout [ReplicaContext]) {
        update(op.id.replica, in: &sorted) { c in
            // `op.clock` without building it (a new array for every operation).
            c.clock.merge(op.context)
            c.clock.include(op.id)
            c.recordLamport(op.lamport, of: op.id.counter)
        }
    }

    /// `record(op)` for an operation whose context names its author alone (`counter − 1`):
    /// the same contexts, without the operation built.
    mutating func record(ownContextOf id: OpID, lamport: UInt64, in sorted: inout [ReplicaContext]) {
        update(id.replica, in: &sorted) { c in
            // Merging the context (the author's entry `counter − 1`) then including the
            // operation: the entry rises to the counter.
            c.clock.include(id)
            c.recordLamport(lamport, of: id.counter)
        }
    }

    /// Changes the context of `replica`: in place in `sorted`, or, for an author new to the
    /// log, in this stage (taken out while it changes, so that its arrays are not copied).
    private mutating func update(_ replica: ReplicaID, in sorted: inout [ReplicaContext],
                                 _ change: (inout ReplicaContext) -> Void) {
        let (i, found) = sorted.contextIndex(of: replica)
        if found {
            change(&sorted[i])
            return
        }
        var c = contexts.removeValue(forKey: replica) ?? ReplicaContext(replica: replica, clock: VectorClock())
        change(&c)
        contexts[replica] = c
    }

    /// [MERGE-43] `[ReplicaContext].lamportExceedsItsPast(op)`, with this stage's contexts.
    func lamportExceedsItsPast(_ op: Op, in sorted: [ReplicaContext]) -> Bool {
        if contexts.isEmpty { return sorted.lamportExceedsItsPast(op) }
        return op.context.entries.allSatisfy { e in
            guard let l = lamport(of: e.replica, e.counter, in: sorted) else { return true }
            return l < op.lamport
        }
    }

    /// `lamportExceedsItsPast(op)` for an operation whose context names its author alone.
    func lamportExceedsItsPast(ownContextOf id: OpID, lamport: UInt64, in sorted: [ReplicaContext]) -> Bool {
        guard id.counter > 1, let l = self.lamport(of: id.replica, id.counter - 1, in: sorted) else { return true }
        return l < lamport
    }

    /// Merges what this stage holds into `clock` and `sorted`, in one pass each, and empties it.
    mutating func settle(clock: inout VectorClock, contexts sorted: inout [ReplicaContext]) {
        guard !isEmpty else { return }
        if !counters.isEmpty {
            clock.merge(VectorClock(counters.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }))
            counters = [:]
        }
        if !contexts.isEmpty {
            let added = contexts.values.sorted { $0.replica < $1.replica }
            var out: [ReplicaContext] = []
            out.reserveCapacity(sorted.count + added.count)
            var i = 0, j = 0
            while i < sorted.count || j < added.count {
                if j == added.count || (i < sorted.count && sorted[i].replica < added[j].replica) {
                    out.append(sorted[i]); i += 1
                } else {
                    out.append(added[j]); j += 1
                }
            }
            sorted = out
            contexts = [:]
        }
    }
}
