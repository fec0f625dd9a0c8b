/// The whole erases of one element ([MERGE-52]: concurrent ones are all kept; [MERGE-70]:
/// each with the restores that took it back), read as a list sorted by ref (`sorted`).
///
/// An element erased by a handful of replicas is the usual case: the erases are that list,
/// and the rules scan it. One erased by many replicas at once (each erase valid, so any token
/// holder can send thousands) would make every later erase, restore or edit of the element a
/// scan of them all, and every erase an insertion into the middle: quadratic. So erases are
/// kept in the order they came (appended), sorted only when read as a list, and past
/// `indexAbove` of them indexed by author: an operation's context names what it covers by
/// replica, so the rules visit only the erases it covers (or all, when they are fewer than
/// its context's entries). How many hold is counted. Equality and hashing look at the sorted
/// list only.
public struct Erasures: Hashable, Sendable {
    static let indexAbove = 32

    /// In the order they came; read as it is while `inOrder`.
    private var list: [Erasure]
    /// True until an erase is appended out of order: a list given is read as given (sorted, as
    /// every caller keeps it; `PageSnapshot.validate` judges a state built otherwise).
    private var inOrder: Bool
    /// Positions in `list` by the erase's author, once `list` is longer than `indexAbove`.
    private var byReplica: [ReplicaID: [Int]]?
    /// For an erase author and a restorer: how many of `byReplica[author]`'s first positions
    /// record a restore of that restorer (`takeBack`). Only ever a lower bound of it: 0 when absent.
    private var firstUntaken: [AuthorAndRestorer: Int] = [:]

    /// Erases `takeBack` looked at, over this value's life (kept for tests to bound the work).
    package private(set) var takeBackVisits = 0

    private struct AuthorAndRestorer: Hashable, Sendable {
        var author: ReplicaID
        var restorer: ReplicaID
    }
    /// How many erases hold (no restore took them back).
    public private(set) var holding: Int

    /// Erases sorted by ref (as a snapshot and `sorted` give them).
    public init(_ erasures: [Erasure] = []) {
        list = erasures
        inOrder = true
        holding = erasures.reduce(0) { $0 + ($1.holds ? 1 : 0) }
        byReplica = nil
        if list.count > Erasures.indexAbove { buildIndex() }
    }

    /// Ascending by ref (as given, for a list given otherwise and not appended to since).
    public var sorted: [Erasure] { inOrder ? list : list.sorted { $0.ref < $1.ref } }

    public var count: Int { list.count }
    public var isEmpty: Bool { list.isEmpty }

    /// Adds an erase (one not yet among them).
    package mutating func append(_ e: Erasure) {
        if let last = list.last, !(last.ref < e.ref) { inOrder = false }
        list.append(e)
        if e.holds { holding += 1 }
        if byReplica != nil {
            let author = e.ref.id.replica
            let positions = byReplica![author, default: []]
            if let last = positions.last, list[last].ref.id.counter > e.ref.id.counter {
                // Not after the author's others (an author's erases come in counter order: only
                // a list given otherwise): kept in counter order, and `takeBack` starts over.
                byReplica![author]!.insert(list.count - 1, at: positions.partitioningIndex {
                    list[$0].ref.id.counter > e.ref.id.counter
                })
                firstUntaken = firstUntaken.filter { $0.key.author != author }
            } else {
                byReplica![author, default: []].append(list.count - 1)
            }
        } else if list.count > Erasures.indexAbove {
            buildIndex()
        }
    }

    /// Each author's positions in counter order (what `takeBack`'s `firstUntaken` counts in).
    private mutating func buildIndex() {
        var index: [ReplicaID: [Int]] = [:]
        for (i, e) in list.enumerated() { index[e.ref.id.replica, default: []].append(i) }
        for (author, positions) in index {
            index[author] = positions.sorted { list[$0].ref.id.counter < list[$1].ref.id.counter }
        }
        byReplica = index
        firstUntaken = [:]
    }

    /// Calls `body` with the position of each erase `context` covers (in no set order).
    private func forEachCovered(by context: VectorClock, _ body: (Int) throws -> Void) rethrows {
        if let byReplica, context.entries.count < list.count {
            for e in context.entries {
                guard let positions = byReplica[e.replica] else { continue }
                for i in positions where list[i].ref.id.counter <= e.counter { try body(i) }
            }
        } else {
            for i in list.indices where context.covers(list[i].ref.id) { try body(i) }
        }
    }

    /// True when an operation whose context is `context` had seen the element erased: it
    /// covers one of the erases and none of the restores that took that one back ([MERGE-42],
    /// [MERGE-70]).
    package func seenHolding(by context: VectorClock) -> Bool {
        var seen = false
        forEachCovered(by: context) { i in
            if !seen && !list[i].cancelledBy.contains(where: { context.covers($0) }) { seen = true }
        }
        return seen
    }

    /// [MERGE-70] Restore `id`, whose context is `context`, takes back every erase that
    /// context covers: each records it unless it already records a restore of the same replica
    /// (whose counter is then smaller: a replica's operations are applied in counter order).
    /// Returns true when it recorded it on one.
    ///
    /// Past `indexAbove` erases, `firstUntaken` remembers, for each erase author and restorer,
    /// how many of that author's erases (in the order they came, which is their counter order)
    /// are known to record a restore of that restorer, so a restore looks only at the ones
    /// after them: erasing and restoring one element n times by turns costs n, not n².
    package mutating func takeBack(seenBy context: VectorClock, restore id: OpID) -> Bool {
        var changed = false
        func record(_ i: Int) {
            takeBackVisits &+= 1
            let by = list[i].cancelledBy
            let at = by.partitioningIndex { $0.replica >= id.replica }
            guard at == by.count || by[at].replica != id.replica else { return }
            if by.isEmpty { holding -= 1 }
            list[i].cancelledBy.insert(id, at: at)
            changed = true
        }
        if let byReplica, context.entries.count < list.count {
            for e in context.entries {
                guard let positions = byReplica[e.replica] else { continue }
                let key = AuthorAndRestorer(author: e.replica, restorer: id.replica)
                var k = firstUntaken[key] ?? 0
                while k < positions.count, list[positions[k]].ref.id.counter <= e.counter {
                    record(positions[k])
                    k += 1
                }
                firstUntaken[key] = k
            }
        } else {
            for i in list.indices where context.covers(list[i].ref.id) { record(i) }
        }
        return changed
    }

    public static func == (l: Erasures, r: Erasures) -> Bool {
        if l.inOrder && r.inOrder { return l.list == r.list }
        return l.count == r.count && l.sorted == r.sorted
    }

    public func hash(into hasher: inout Hasher) { hasher.combine(sorted) }
}
