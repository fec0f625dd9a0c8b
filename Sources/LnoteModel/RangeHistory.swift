/// One range restore of a stroke as a page keeps it ([MERGE-71], page-snapshot.md [SNAP-44]):
/// the points it takes back and which partial erases it had seen.
///
/// Kept beside the partial erases, not subtracted from each of them: `K` partial erases of a
/// stroke and a restore of `m` gaps inside them left `K · (m + 1)` ranges when each erase kept
/// its own remainder, from operations whose size is only `K + m`. Kept this way the history
/// grows with the operations' bytes, and the erased ranges are computed from it.
public struct RangeRestore: Hashable, Sendable {
    public var ref: OpRef
    /// Normalized, never empty: the restore's ranges, clamped to the stroke, that some partial
    /// erase it had seen erased (its other points never take anything back).
    public var ranges: [PointRange]
    /// For each replica with partial erases of the stroke that the restore's context covered,
    /// the greatest of them (its counter): it had seen exactly that replica's partial erases up
    /// to that one. Strictly increasing (one per replica), never empty.
    public var seen: [OpID]
    public init(ref: OpRef, ranges: [PointRange], seen: [OpID]) {
        self.ref = ref
        self.ranges = ranges
        self.seen = seen
    }

    /// True when this restore had seen partial erase `e` (its context covered it).
    public func hasSeen(_ e: OpID) -> Bool { RangeRestore.covers(seen, e) }

    /// True when a `seen` list (strictly increasing) covers `e`.
    static func covers(_ seen: [OpID], _ e: OpID) -> Bool {
        var lo = 0, hi = seen.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if seen[mid].replica < e.replica { lo = mid + 1 } else { hi = mid }
        }
        return lo < seen.count && seen[lo].replica == e.replica && seen[lo].counter >= e.counter
    }
}

/// [MERGE-71] What a stroke's partial erases and range restores leave erased.
///
/// A point is erased when some partial erase holds it that no range restore holding it had
/// seen: the union, over the partial erases, of each one's ranges less those of the restores
/// that had seen it. Computed without building each erase's remainder (for `K` erases and a
/// restore of `m` gaps those hold `K · (m + 1)` ranges): the erases are grouped by the set of
/// restores that had seen them, in a trie of restores, and at each node its restore's ranges
/// are taken once from the union of everything below it (not from each erase's remainder).
public enum RangeHistory {
    /// The `seen` list of a range restore with context `covers`, among `erasures`: for each
    /// replica, its greatest partial erase that the context covers. With `reach` and
    /// `erased(after:before:_:_:)`, the rule step by step: the reference the tests compare
    /// `received` (which a replica uses) with.
    static func seen(among erasures: [RangeErasure], covers: (OpID) -> Bool) -> [OpID] {
        var best: [ReplicaID: UInt64] = [:]
        for e in erasures where covers(e.ref.id) {
            best[e.ref.id.replica] = max(best[e.ref.id.replica] ?? 0, e.ref.id.counter)
        }
        return best.map { OpID(replica: $0.key, counter: $0.value) }.sorted()
    }

    /// The points of `cut` (normalized) that some partial erase `seen` names or precedes holds:
    /// what a restore with that list can ever take back.
    static func reach(of cut: [PointRange], seen: [OpID], among erasures: [RangeErasure]) -> [PointRange] {
        let held = PointRange.union(of: erasures.filter { RangeRestore.covers(seen, $0.ref.id) }.map(\.ranges))
        return cut.subtractingNormalized(cut.subtractingNormalized(held))
    }

    /// The erased ranges (normalized) that `erasures` (each normalized) and `restores` give.
    public static func erased(_ erasures: [RangeErasure], _ restores: [RangeRestore]) -> [PointRange] {
        var peak = 0
        return erased(erasures, restores, peak: &peak)
    }

    /// `erased(_:_:)`, with `peak` the most ranges the unions waiting on the trie's walk held at
    /// once (for tests).
    static func erased(_ erasures: [RangeErasure], _ restores: [RangeRestore], peak: inout Int) -> [PointRange] {
        if restores.isEmpty { return PointRange.union(of: erasures.map(\.ranges)) }
        // Per replica, its partial erases and the restores that name it with their bound (the
        // counter of its latest erase each had seen).
        var erasesOf: [ReplicaID: [Int]] = [:]
        for (i, e) in erasures.enumerated() { erasesOf[e.ref.id.replica, default: []].append(i) }
        var boundsOf: [ReplicaID: [(restore: Int, counter: UInt64)]] = [:]
        for (j, r) in restores.enumerated() {
            for o in r.seen where erasesOf[o.replica] != nil { boundsOf[o.replica, default: []].append((j, o.counter)) }
        }
        // The trie: a node per sequence of restores; an erase sits at the node of the restores
        // that had seen it. A replica's restores by bound, greatest first: an erase of counter
        // `c` was seen by the first of them down to the last bound ≥ `c`, so the replica's
        // erases, greatest counter first, are placed walking down one path. Among equal bounds
        // the restores with more ranges come first (nearer the root): their ranges are then
        // taken once, from the union, rather than from every remainder below.
        var child: [[Int: Int]] = [[:]]
        var restoreAt: [Int] = [-1]
        var held: [[Int]] = [[]]
        var parent: [Int] = [-1]
        for (replica, var mine) in erasesOf {
            mine.sort { erasures[$0].ref.id.counter > erasures[$1].ref.id.counter }
            var bounds = boundsOf[replica] ?? []
            bounds.sort {
                ($0.counter, restores[$0.restore].ranges.count, -$0.restore) > ($1.counter, restores[$1.restore].ranges.count, -$1.restore)
            }
            var node = 0, k = 0
            for i in mine {
                let c = erasures[i].ref.id.counter
                while k < bounds.count, bounds[k].counter >= c {
                    let j = bounds[k].restore
                    if let next = child[node][j] {
                        node = next
                    } else {
                        child.append([:]); restoreAt.append(j); held.append([]); parent.append(node)
                        child[node][j] = child.count - 1
                        node = child.count - 1
                    }
                    k += 1
                }
                held[node].append(i)
            }
        }
        // Each node's union (its erases' ranges and its children's), less its restore's
        // ranges, goes to its parent. Depth first, the heaviest child (the most ranges below
        // it) first: a node holds a union only while its lighter children are worked on, and
        // a path has few such nodes (each lighter subtree holds at most half of its parent's
        // weight), whose unions come from disjoint subtrees. One restore can cut several of
        // them, so they can hold more ranges than the history, but not the history times the
        // number of restores (done from the last node back, the unions of a long path's side
        // branches all waited at once: R · (m + 1) ranges for R replicas and m gaps).
        let count = child.count
        var kids = [[Int]](repeating: [], count: count)
        for node in 1..<count { kids[parent[node]].append(node) }
        var weight = [Int](repeating: 1, count: count)
        for node in stride(from: count - 1, through: 1, by: -1) {
            weight[node] += restores[restoreAt[node]].ranges.count + held[node].reduce(0) { $0 + erasures[$1].ranges.count }
            weight[parent[node]] += weight[node]
        }
        for node in 0..<count where kids[node].count > 1 { kids[node].sort { (weight[$0], $1) > (weight[$1], $0) } }
        var stack: [(node: Int, next: Int, union: [PointRange])] = [(0, 0, [])]
        var waiting = 0
        while var top = stack.popLast() {
            if top.next < kids[top.node].count {
                let next = kids[top.node][top.next]
                top.next += 1
                stack.append(top)
                stack.append((next, 0, []))
                continue
            }
            var value = top.union
            waiting -= top.union.count
            if !held[top.node].isEmpty {
                let mine = PointRange.union(of: held[top.node].map { erasures[$0].ranges })
                value = value.isEmpty ? mine : value.unionNormalized(mine)
            }
            guard top.node != 0 else { return value }
            if !value.isEmpty { subtract(restores[restoreAt[top.node]].ranges, from: &value) }
            if !value.isEmpty {
                let p = stack.count - 1
                waiting -= stack[p].union.count
                if stack[p].union.isEmpty { stack[p].union = value } else { stack[p].union = stack[p].union.unionNormalized(value) }
                waiting += stack[p].union.count
                peak = max(peak, waiting)
            }
        }
        return []
    }

    /// `value` (normalized) less `cut` (normalized), in place. The ranges of `cut` within
    /// `value`'s span are found by binary search; a few of them are taken out one by one (a
    /// search and a move of the tail each), many by one pass over both lists.
    static func subtract(_ cut: [PointRange], from value: inout [PointRange]) {
        guard let lo = value.first?.from, let hi = value.last?.to else { return }
        let within = slice(cut, to: PointRange(lo, hi))
        guard !within.isEmpty else { return }
        guard within.count * 16 < value.count else {
            value = value.subtractingNormalized(within)
            return
        }
        for g in within {
            // The first range of `value` that ends after g starts.
            var a = 0, b = value.count
            while a < b {
                let mid = (a + b) / 2
                if value[mid].to <= g.from { a = mid + 1 } else { b = mid }
            }
            var end = a
            while end < value.count, value[end].from < g.to { end += 1 }
            guard a < end else { continue }
            var pieces: [PointRange] = []
            if value[a].from < g.from { pieces.append(PointRange(value[a].from, g.from)) }
            if value[end - 1].to > g.to { pieces.append(PointRange(g.to, value[end - 1].to)) }
            value.replaceSubrange(a..<end, with: pieces)
        }
    }

    /// A range restore received by a stroke with partial erases `erasures`, range restores
    /// `restores` and erased ranges `before` ([MERGE-71]): the restore as the stroke keeps it
    /// (its `seen` list and its `ranges` cut to the points the erases it had seen hold; nil when
    /// it had seen none or takes nothing back) and the erased ranges after it. `ranges` is the
    /// operation's, clamped to the stroke and normalized; `covers` its context.
    ///
    /// What `seen(among:covers:)`, `reach(of:seen:among:)` and `erased(after:before:_:_:)`
    /// give one after the other, with one pass over the partial erases instead of three and
    /// without the union of every erase the restore had seen: each is cut to the span of
    /// `ranges` as it is passed (a binary search), so a stroke with `K` partial erases costs
    /// `K` context lookups and searches per restore, and the work with ranges stays within
    /// that span.
    public static func received(_ ranges: [PointRange], ref: OpRef, covers: (OpID) -> Bool, _ erasures: [RangeErasure],
                                _ restores: [RangeRestore], before: [PointRange]) -> (restore: RangeRestore, erased: [PointRange])? {
        guard let lo = ranges.first?.from, let hi = ranges.last?.to else { return nil }
        let span = PointRange(lo, hi)
        // The greatest covered counter per replica; a run of one replica's erases is kept aside
        // and entered once (most strokes have few erasers, often one).
        var best: [ReplicaID: UInt64] = [:]
        var run: OpID? = nil
        var meeting: [RangeErasure] = []
        for e in erasures {
            let id = e.ref.id
            if covers(id) {
                if let r = run, r.replica == id.replica {
                    if id.counter > r.counter { run = id }
                } else {
                    if let r = run { best[r.replica] = max(best[r.replica] ?? 0, r.counter) }
                    run = id
                }
            }
            let within = slice(e.ranges, to: span)
            if !within.isEmpty { meeting.append(RangeErasure(ref: e.ref, ranges: within)) }
        }
        if let r = run { best[r.replica] = max(best[r.replica] ?? 0, r.counter) }
        guard !best.isEmpty else { return nil }
        let seen = best.map { OpID(replica: $0.key, counter: $0.value) }.sorted()
        // Held by the erases the list names or precedes, as `reach` takes them.
        let union = PointRange.union(of: meeting.filter { RangeRestore.covers(seen, $0.ref.id) }.map(\.ranges))
        let cut = ranges.subtractingNormalized(ranges.subtractingNormalized(union))
        guard !cut.isEmpty else { return nil }
        let restore = RangeRestore(ref: ref, ranges: cut, seen: seen)
        // The erases it had not seen that meet its (narrower) span, as `erased(after:)` finds them.
        let window = PointRange(cut.first!.from, cut.last!.to)
        let unseen = meeting.compactMap { e -> RangeErasure? in
            guard !restore.hasSeen(e.ref.id) else { return nil }
            let r = slice(e.ranges, to: window)
            return r.isEmpty ? nil : RangeErasure(ref: e.ref, ranges: r)
        }
        return (restore, erased(after: restore, before: before, unseen: unseen, earlier: restores[...]))
    }

    /// The erased ranges after `restore`, the last of `restores`, was added to a stroke whose
    /// erased ranges were `before`: only the points it holds can change, and there only the
    /// partial erases it had not seen can keep them erased, so only those and the restores
    /// that reach its span are looked at again, each cut to that span.
    static func erased(after restore: RangeRestore, before: [PointRange], _ erasures: [RangeErasure],
                              _ restores: [RangeRestore]) -> [PointRange] {
        guard let lo = restore.ranges.first?.from, let hi = restore.ranges.last?.to else { return before }
        let window = PointRange(lo, hi)
        let unseen = erasures.compactMap { e -> RangeErasure? in
            guard !restore.hasSeen(e.ref.id) else { return nil }
            let r = slice(e.ranges, to: window)
            return r.isEmpty ? nil : RangeErasure(ref: e.ref, ranges: r)
        }
        return erased(after: restore, before: before, unseen: unseen, earlier: restores.dropLast())
    }

    /// `erased(after:before:_:_:)` given the partial erases `restore` had not seen, each cut to
    /// its span (those left empty left out), and the stroke's other range restores `earlier`.
    static func erased(after restore: RangeRestore, before: [PointRange], unseen: [RangeErasure],
                       earlier: ArraySlice<RangeRestore>) -> [PointRange] {
        guard let lo = restore.ranges.first?.from, let hi = restore.ranges.last?.to else { return before }
        let window = PointRange(lo, hi)
        var inside: [PointRange] = []
        if !unseen.isEmpty {
            var reaching = earlier.compactMap { x -> RangeRestore? in
                // Most restores miss the window: their span is looked at before a search.
                guard let f = x.ranges.first?.from, let t = x.ranges.last?.to, f < window.to, window.from < t else { return nil }
                let r = slice(x.ranges, to: window)
                return r.isEmpty ? nil : RangeRestore(ref: x.ref, ranges: r, seen: x.seen)
            }
            reaching.append(restore)
            let local = erased(unseen, reaching)
            inside = local.subtractingNormalized(local.subtractingNormalized(restore.ranges))
        }
        return before.subtractingNormalized(restore.ranges).unionNormalized(inside)
    }

    /// The ranges of `ranges` (normalized) that meet `window`, cut to it: found by binary
    /// search, so a list far longer than the window costs its logarithm.
    static func slice(_ ranges: [PointRange], to window: PointRange) -> [PointRange] {
        var lo = 0, hi = ranges.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if ranges[mid].to <= window.from { lo = mid + 1 } else { hi = mid }
        }
        var out: [PointRange] = []
        var i = lo
        while i < ranges.count, ranges[i].from < window.to {
            out.append(PointRange(max(ranges[i].from, window.from), min(ranges[i].to, window.to)))
            i += 1
        }
        return out
    }

    /// What of partial erase `e` still holds: its ranges less those of every restore that had
    /// seen it ([MERGE-71]; the `ranges` of a partial erase in page-snapshot.md [JSON-10]).
    public static func kept(_ e: RangeErasure, _ restores: [RangeRestore]) -> [PointRange] {
        let cut = PointRange.union(of: restores.filter { $0.hasSeen(e.ref.id) }.map(\.ranges))
        return cut.isEmpty ? e.ranges : e.ranges.subtractingNormalized(cut)
    }

    /// True when two histories of one stroke keep the same ranges of every partial erase (the
    /// same erased points now and after any later operation). Compared one partial erase at a
    /// time: the lists of kept ranges can be far larger than the histories.
    public static func sameKept(_ a: [RangeErasure], _ ar: [RangeRestore], _ b: [RangeErasure], _ br: [RangeRestore]) -> Bool {
        var i = 0, j = 0
        while true {
            var ka: [PointRange] = [], kb: [PointRange] = []
            while i < a.count, ka.isEmpty { ka = kept(a[i], ar); i += 1 }
            while j < b.count, kb.isEmpty { kb = kept(b[j], br); j += 1 }
            if ka.isEmpty && kb.isEmpty { return true }
            guard ka == kb, a[i - 1].ref == b[j - 1].ref else { return false }
        }
    }
}

extension ElementRecord {
    /// Each partial erase with what of it still holds, those taken back whole left out
    /// ([MERGE-71]; the `partialErases` of page-snapshot.md [JSON-10]). Computed: for `K`
    /// partial erases and a restore of `m` gaps it can hold `K · (m + 1)` ranges.
    public var keptRangeErasures: [RangeErasure] {
        rangeErasures.compactMap { e in
            let k = RangeHistory.kept(e, rangeRestores)
            return k.isEmpty ? nil : RangeErasure(ref: e.ref, ranges: k)
        }
    }
}
