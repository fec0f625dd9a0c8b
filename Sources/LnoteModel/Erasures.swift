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
    /// Positions in `list` by the erase's author, in counter order, once `list` is longer than
    /// `indexAbove`.
    private var byReplica: [ReplicaID: [Int]]?
    /// With the index: for each erase author, for each restorer, the counters of that
    /// restorer's restore recorded on the author's first erases (`byReplica` order), as far
    /// as each has one: its *run*. For an author in `irregular` nothing is kept.
    ///
    /// Erases and restores applied in causal order always make runs: a restore that covers an
    /// author's erase covers the author's earlier ones, which were applied before it, so each
    /// restorer's first restores along an author's erases form a prefix (the erases it has
    /// taken back) with counters that never decrease. Then the erases a context sees taken
    /// back are, for each restorer, the prefix of its run that the context covers: `seenHolding`
    /// finds them by a binary search per restorer, and `takeBack` walks on from the run's end.
    /// A list given otherwise (a snapshot built elsewhere) is checked when indexed; an author
    /// whose erases do not make runs is scanned as before.
    private var runs: [ReplicaID: [ReplicaID: [UInt64]]] = [:]
    private var irregular: Set<ReplicaID> = []

    /// Erases `takeBack` looked at, over this value's life (kept for tests to bound the work).
    package private(set) var takeBackVisits = 0

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
            if let last = byReplica![author]?.last, list[last].ref.id.counter > e.ref.id.counter || !e.holds {
                // Not after the author's others (an author's erases come in counter order: only
                // a list given otherwise), or already taken back: indexed again.
                buildIndex()
            } else {
                byReplica![author, default: []].append(list.count - 1)
                if !e.holds {
                    buildIndex()
                } else if runs[author] == nil && !irregular.contains(author) {
                    runs[author] = [:]  // its first erase: no restore yet
                }
            }
        } else if list.count > Erasures.indexAbove {
            buildIndex()
        }
    }

    /// Each author's positions in counter order, and the runs of their restores.
    private mutating func buildIndex() {
        var index: [ReplicaID: [Int]] = [:]
        for (i, e) in list.enumerated() { index[e.ref.id.replica, default: []].append(i) }
        runs = [:]
        irregular = []
        for (author, unsorted) in index {
            let positions = unsorted.sorted { list[$0].ref.id.counter < list[$1].ref.id.counter }
            index[author] = positions
            var mine: [ReplicaID: [UInt64]] = [:]
            var regular = true
            for (j, p) in positions.enumerated() where regular {
                let by = list[p].cancelledBy
                // Restores sorted, as lists are kept (a list given otherwise is scanned).
                guard zip(by, by.dropFirst()).allSatisfy({ $0 < $1 }) else {
                    regular = false
                    break
                }
                var last: ReplicaID?
                for r in by where r.replica != last {
                    last = r.replica
                    // A restorer's run must cover the author's first erases without a gap, its
                    // counters never decreasing.
                    guard (mine[r.replica]?.count ?? 0) == j, r.counter >= mine[r.replica]?.last ?? 0 else {
                        regular = false
                        break
                    }
                    mine[r.replica, default: []].append(r.counter)
                }
            }
            if regular { runs[author] = mine } else { irregular.insert(author) }
        }
        byReplica = index
    }

    /// Calls `body` with each author of an erase and the greatest counter of it `context`
    /// covers (by the context's entries or by the authors, whichever are fewer), until it
    /// returns false. Static: `takeBack`'s body changes `self`, and a method of `self` called
    /// meanwhile would be given a copy of it, whose list the first change then copies whole.
    private static func forEachAuthor(in byReplica: [ReplicaID: [Int]], coveredBy context: VectorClock,
                                      _ body: (ReplicaID, UInt64) throws -> Bool) rethrows {
        if context.entries.count <= byReplica.count {
            for e in context.entries where byReplica[e.replica] != nil {
                guard try body(e.replica, e.counter) else { return }
            }
        } else {
            for author in byReplica.keys {
                let upTo = context[author]
                guard try upTo == 0 || body(author, upTo) else { return }
            }
        }
    }

    /// True when an operation whose context is `context` had seen the element erased: it
    /// covers one of the erases and none of the restores that took that one back ([MERGE-42],
    /// [MERGE-70]).
    package func seenHolding(by context: VectorClock) -> Bool { seenHoldingCounting(by: context).seen }

    /// `seenHolding`, with how many erases and runs it looked at (for tests to bound the work).
    package func seenHoldingCounting(by context: VectorClock) -> (seen: Bool, visits: Int) {
        var visits = 0
        func seen(_ i: Int) -> Bool {
            visits += 1
            return !list[i].cancelledBy.contains { context.covers($0) }
        }
        guard let byReplica else {
            return (list.indices.contains { context.covers(list[$0].ref.id) && seen($0) }, visits)
        }
        var found = false
        Self.forEachAuthor(in: byReplica, coveredBy: context) { author, upTo in
            let positions = byReplica[author]!
            // The author's erases the context covers: a prefix of its positions.
            let covered = positions.partitioningIndex { list[$0].ref.id.counter > upTo }
            guard covered > 0 else { return true }
            guard let restorers = runs[author] else {
                found = positions[..<covered].contains(where: seen)
                return !found
            }
            // Those it sees taken back: for each restorer, the prefix of its run it covers.
            var takenBack = 0
            for (restorer, counters) in restorers where takenBack < covered {
                visits += 1
                let seenUpTo = context[restorer]
                takenBack = max(takenBack, counters.partitioningIndex { $0 > seenUpTo })
            }
            found = takenBack < covered
            return !found
        }
        return (found, visits)
    }

    /// [MERGE-70] Restore `id`, whose context is `context`, takes back every erase that
    /// context covers: each records it unless it already records a restore of the same replica
    /// (whose counter is then smaller: a replica's operations are applied in counter order).
    /// Returns true when it recorded it on one.
    ///
    /// Past `indexAbove` erases, a restore looks at each author's erases from the end of its
    /// restorer's run (`runs`): erasing and restoring one element n times by turns costs n,
    /// not n².
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
        guard let byReplica else {
            for i in list.indices where context.covers(list[i].ref.id) { record(i) }
            return changed
        }
        Self.forEachAuthor(in: byReplica, coveredBy: context) { author, upTo in
            let positions = byReplica[author]!
            guard var restorers = runs.removeValue(forKey: author) else {
                for i in positions where list[i].ref.id.counter <= upTo { record(i) }
                return true
            }
            // Taken out of the dictionaries while it grows: appended in place, not copied.
            var run = restorers.removeValue(forKey: id.replica) ?? []
            var k = run.count
            while k < positions.count, list[positions[k]].ref.id.counter <= upTo {
                let p = positions[k]
                record(p)
                // Past the run no erase records this restorer; a restore's counter is above the
                // restorer's earlier ones. Otherwise (not reached by causal delivery) the
                // author is scanned from now on.
                guard let mine = list[p].cancelledBy.first(where: { $0.replica == id.replica }), mine == id,
                      id.counter >= run.last ?? 0 else {
                    irregular.insert(author)
                    for i in positions where list[i].ref.id.counter <= upTo { record(i) }
                    return true
                }
                run.append(id.counter)
                k += 1
            }
            if !run.isEmpty { restorers[id.replica] = run }
            runs[author] = restorers
            return true
        }
        return changed
    }

    public static func == (l: Erasures, r: Erasures) -> Bool {
        if l.inOrder && r.inOrder { return l.list == r.list }
        return l.count == r.count && l.sorted == r.sorted
    }

    public func hash(into hasher: inout Hasher) { hasher.combine(sorted) }
}

