/// The causally maximal operations of a set that grows under causal delivery: the writes of
/// a register that no later write has seen, or the edits of an element ([MERGE-25],
/// [MERGE-21]). Read as a list ascending by `OpRef` (`refs`), the greatest last.
///
/// Nearly every frontier holds one operation, a few when writes were concurrent: it is then
/// that sorted list, and a write scans it. A frontier that many replicas wrote concurrently
/// (each write valid, so any token holder can send thousands) would make every write a scan
/// and an insertion: quadratic in the writers. Past `indexAbove` members it is kept indexed
/// by replica instead, its greatest member tracked: a frontier holds at most one operation
/// per replica (an operation's context covers its author's earlier ones, [LOG-3]), and a
/// context names what it covers by replica, so a write costs the entries of its own context
/// (or of the frontier, the fewer), and reading the list costs one sort. Both forms are the
/// same value: equality and hashing look at the sorted list only.
public struct Frontier: Hashable, Sendable, ExpressibleByArrayLiteral {
    /// Indexed past this many members, back to a list below `listBelow` (apart, so that a
    /// frontier at the bound does not switch back and forth).
    static let indexAbove = 32
    static let listBelow = 8

    private enum Storage {
        case list([OpRef])
        case indexed(ReplicaIndex)
    }

    private var storage: Storage

    /// A frontier holding `refs` (ascending by `OpRef`, as every caller keeps them).
    public init(_ refs: [OpRef] = []) { storage = .list(refs) }

    public init(arrayLiteral refs: OpRef...) { storage = .list(refs) }

    /// The members, ascending by `OpRef`.
    public var refs: [OpRef] {
        switch storage {
        case .list(let refs): refs
        case .indexed(let index): index.members.values.sorted()
        }
    }

    public var count: Int {
        switch storage {
        case .list(let refs): refs.count
        case .indexed(let index): index.members.count
        }
    }

    public var isEmpty: Bool { count == 0 }

    /// The greatest member: a register's winner.
    public var last: OpRef? {
        switch storage {
        case .list(let refs): refs.last
        case .indexed(let index): index.greatest
        }
    }

    /// True while the frontier is kept indexed by replica (for tests and measurements).
    package var isIndexed: Bool {
        if case .indexed = storage { return true }
        return false
    }

    /// Adds `ref`, an operation whose context is `context`, and removes every member that
    /// context covers. Under causal delivery (everything `ref` had seen is applied first)
    /// the result is exactly the maximal operations of all added.
    package mutating func advance(_ ref: OpRef, context: VectorClock) {
        switch storage {
        case .list(var refs):
            storage = .list([]) // `refs` is then the only reference to its buffer
            Frontier.advance(&refs, ref, context: context)
            if refs.count > Frontier.indexAbove, let index = ReplicaIndex(refs) {
                storage = .indexed(index)
            } else {
                storage = .list(refs)
            }
        case .indexed(var index):
            storage = .list([])
            if !isKnownUniquelyReferenced(&index) { index = index.copy() }
            if index.advance(ref, context: context) {
                storage = index.members.count < Frontier.listBelow ? .list(index.members.values.sorted()) : .indexed(index)
            } else {
                // Two members of one replica: no valid operations make that (see
                // `ReplicaIndex.advance`); the list gives the same answer as always.
                var refs = index.members.values.sorted()
                Frontier.advance(&refs, ref, context: context)
                storage = .list(refs)
            }
        }
    }

    private static func advance(_ refs: inout [OpRef], _ ref: OpRef, context: VectorClock) {
        refs.removeAll { context.covers($0.id) }
        let i = refs.firstIndex { $0 > ref } ?? refs.count
        refs.insert(ref, at: i)
    }

    public static func == (l: Frontier, r: Frontier) -> Bool {
        if case .list(let a) = l.storage, case .list(let b) = r.storage { return a == b }
        return l.count == r.count && l.refs == r.refs
    }

    public func hash(into hasher: inout Hasher) { hasher.combine(refs) }
}

/// A large frontier's members by replica (one each), and the greatest. Shared between copies
/// of a `Frontier` and copied before a write unless uniquely referenced, so that `Frontier`
/// stays a value; never mutated while shared, hence Sendable.
private final class ReplicaIndex: @unchecked Sendable {
    var members: [ReplicaID: OpRef]
    var greatest: OpRef

    /// nil when two members share a replica (no valid operations leave such a frontier).
    init?(_ refs: [OpRef]) {
        guard let last = refs.last else { return nil }
        var members: [ReplicaID: OpRef] = [:]
        members.reserveCapacity(refs.count)
        for r in refs {
            guard members.updateValue(r, forKey: r.id.replica) == nil else { return nil }
        }
        self.members = members
        greatest = refs.max() ?? last
    }

    private init(members: [ReplicaID: OpRef], greatest: OpRef) {
        self.members = members
        self.greatest = greatest
    }

    func copy() -> ReplicaIndex { ReplicaIndex(members: members, greatest: greatest) }

    /// Removes the members `context` covers and adds `ref`; false (with only the covered
    /// members removed) when a member of `ref`'s replica is left, which [LOG-3] rules out:
    /// an operation's context covers its author's earlier operations.
    func advance(_ ref: OpRef, context: VectorClock) -> Bool {
        var lostGreatest = false
        if context.entries.count <= members.count {
            for e in context.entries {
                if let m = members[e.replica], m.id.counter <= e.counter {
                    members[e.replica] = nil
                    if m == greatest { lostGreatest = true }
                }
            }
        } else {
            let covered = members.values.filter { context.covers($0.id) }
            for m in covered {
                members[m.id.replica] = nil
                if m == greatest { lostGreatest = true }
            }
        }
        guard members[ref.id.replica] == nil else { return false }
        members[ref.id.replica] = ref
        if !lostGreatest {
            if ref > greatest { greatest = ref }
        } else if ref > greatest {
            // An operation that covers the greatest member has a greater Lamport timestamp
            // ([MERGE-43]): the usual case.
            greatest = ref
        } else {
            greatest = members.values.max()!
        }
        return true
    }
}
