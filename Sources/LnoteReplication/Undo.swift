import LnoteModel

/// One page operation of an undo step: the operation made, and the body that takes its effect
/// back, computed from the state it was made on (merge-semantics.md [MERGE-73]).
public struct UndoEntry: Hashable, Sendable {
    public var page: PageID
    /// The operation whose effect this entry takes back.
    public var op: OpID
    /// What takes it back, as computed when `op` was made.
    public var inverse: Op.Body
    /// For a move or a reorder: the body of `op` itself, what it wrote ([MERGE-74]).
    public var made: Op.Body?
    public init(page: PageID, op: OpID, inverse: Op.Body, made: Op.Body? = nil) {
        self.page = page
        self.op = op
        self.inverse = inverse
        self.made = made
    }
}

extension UndoEntry {
    /// What an entry keeps of the operation itself: its body when a move or a reorder.
    public static func madeBody(_ op: Op) -> Op.Body? {
        switch op.body {
        case .move, .reorder: op.body
        default: nil
        }
    }
}

/// The pure part of undo ([MERGE-73] … [MERGE-75]): what takes an operation back, and what of
/// that is still to do once others have edited since.
public enum Undo {
    /// The body that takes back `body`, made as operation `id` on `before` (the page as its
    /// author held it just before), or nil when it has no effect to take back.
    ///
    /// - add → erase of the element;
    /// - erase → restore of the elements it erased;
    /// - eraseRange → restoreRange of the points it newly erased (not those already erased);
    /// - restore → erase of the elements it brought back;
    /// - restoreRange → eraseRange of the points it brought back;
    /// - move → move back to each element's transform before; reorder → its z key before.
    public static func inverse(of body: Op.Body, id: OpID, before r: PageReplica) -> Op.Body? {
        switch body {
        case .add:
            return .erase([id])
        case .erase(let ids):
            let live = ids.uniqued().filter { r.isLive($0) }
            return live.isEmpty ? nil : .restore(live)
        case .restore(let ids):
            let back = ids.uniqued().filter { r.isRestorable($0) }
            return back.isEmpty ? nil : .erase(back)
        case .eraseRange(let e, let ranges):
            guard let rec = r.element(e), case .stroke(let s) = rec.content else { return nil }
            let n = UInt32(clamping: s.pointCount)
            let newly = ranges.map { PointRange(min($0.from, n), min($0.to, n)) }.normalizedUnion().subtracting(rec.erased)
            return newly.isEmpty ? nil : .restoreRange(e, newly)
        case .restoreRange(let e, let ranges):
            guard let rec = r.element(e) else { return nil }
            let back = rec.erased.subtracting(rec.erased.subtracting(ranges))
            return back.isEmpty ? nil : .eraseRange(e, back)
        case .move(let ts):
            let before = ts.map(\.element).uniqued().compactMap { e in r.element(e).map { ElementTransform(e, $0.transform.value) } }
            return before.isEmpty ? nil : .move(before)
        case .reorder(let zs):
            let before = zs.map(\.element).uniqued().compactMap { e in r.element(e).map { ElementZ(e, $0.z.value) } }
            return before.isEmpty ? nil : .reorder(before)
        default:
            return nil
        }
    }

    /// Makes one local operation on `r`, noting in `entries` what takes it back (the inverse
    /// computed on the page just before it, [MERGE-73]).
    public static func make(_ body: Op.Body, on r: inout PageReplica, page: PageID, by me: ReplicaID, wallTime: Int64,
                            into entries: inout [UndoEntry]) throws -> Op {
        let id = OpID(replica: me, counter: r.clock[me] + 1)
        let inverse = inverse(of: body, id: id, before: r)
        let op = try r.make(body, by: me, wallTime: wallTime)
        if let inverse { entries.append(UndoEntry(page: page, op: op.id, inverse: inverse, made: UndoEntry.madeBody(op))) }
        return op
    }

    /// What of `entry` is still to do on `r` now ([MERGE-74]), or nil when others' edits
    /// overwrote all of it. `me`, the replica whose step it is, is `entry.op`'s.
    /// - an erase (undo of an add): the elements still live;
    /// - a restore: the elements still erased, whose content is held, and whose holding
    ///   erasures are all this replica's: one another replica erased too stays erased;
    /// - a restoreRange: the points still erased by this replica's partial erases and by no
    ///   other replica's; an eraseRange: the points not erased now;
    /// - a move (or reorder): the elements still live whose transform (or z) register's
    ///   winning write is this replica's and holds what `entry.op` wrote (`entry.made`; `op`
    ///   itself when it is not given): another replica's write that wins overwrote it, and so
    ///   did a later own write still in effect (above it on the stack, undone first).
    public static func remaining(_ entry: UndoEntry, on r: PageReplica) -> Op.Body? {
        let me = entry.op.replica
        switch entry.inverse {
        case .erase(let ids):
            let live = ids.filter { r.isLive($0) }
            return live.isEmpty ? nil : .erase(live)
        case .restore(let ids):
            let back = ids.filter { id in
                r.isRestorable(id) && r.tombstone(id)!.erasures.allSatisfy { !$0.holds || $0.ref.id.replica == me }
            }
            return back.isEmpty ? nil : .restore(back)
        case .restoreRange(let e, let ranges):
            guard let rec = r.element(e) else { return nil }
            var mine = rec.erased.subtracting(rec.erased.subtracting(ranges))
            if !rec.rangeErasures.isEmpty {
                // What this replica's partial erases and the others' still hold ([MERGE-71]):
                // the rule applied to each part (it is one erase at a time), not each erase's
                // remainder, which can be K · (m + 1) ranges.
                let own = RangeHistory.erased(rec.rangeErasures.filter { $0.ref.id.replica == me }, rec.rangeRestores)
                let others = RangeHistory.erased(rec.rangeErasures.filter { $0.ref.id.replica != me }, rec.rangeRestores)
                mine = mine.subtracting(mine.subtracting(own)).subtracting(others)
            }
            return mine.isEmpty ? nil : .restoreRange(e, mine)
        case .eraseRange(let e, let ranges):
            guard let rec = r.element(e), case .stroke(let s) = rec.content else { return nil }
            let n = UInt32(clamping: s.pointCount)
            let left = ranges.map { PointRange(min($0.from, n), min($0.to, n)) }.normalizedUnion().subtracting(rec.erased)
            return left.isEmpty ? nil : .eraseRange(e, left)
        case .move(let ts):
            var wrote: [ElementID: Transform] = [:]
            // [MERGE-26] An element named twice: the first item is the one applied.
            if case .move(let made)? = entry.made { for t in made where wrote[t.element] == nil { wrote[t.element] = t.transform } }
            let kept = ts.filter { t in
                guard let rec = r.element(t.element), let w = rec.transform.winner else { return false }
                if w.id == entry.op { return true }
                guard let v = wrote[t.element] else { return false }
                return w.id.replica == me && rec.transform.value == v
            }
            return kept.isEmpty ? nil : .move(kept)
        case .reorder(let zs):
            var wrote: [ElementID: ZKey] = [:]
            if case .reorder(let made)? = entry.made { for z in made where wrote[z.element] == nil { wrote[z.element] = z.z } }
            let kept = zs.filter { z in
                guard let rec = r.element(z.element), let w = rec.z.winner else { return false }
                if w.id == entry.op { return true }
                guard let v = wrote[z.element] else { return false }
                return w.id.replica == me && rec.z.value == v
            }
            return kept.isEmpty ? nil : .reorder(kept)
        default:
            return nil
        }
    }

    /// [MERGE-76] The bodies that make the live elements of `current` equal those of
    /// `target` (a state of the same page's past): elements live now and not then are erased,
    /// elements live then and erased now restored (when their content is held), and for
    /// every element live in both, erased ranges, transform and z key set to what they were.
    /// In that order (erase, restore, range changes, moves, reorders), each list by element id.
    public static func revert(_ current: PageReplica, to target: PageState) -> [Op.Body] {
        var erase: [ElementID] = [], restore: [ElementID] = []
        var eraseRanges: [(ElementID, [PointRange])] = [], restoreRanges: [(ElementID, [PointRange])] = []
        var moves: [ElementTransform] = [], reorders: [ElementZ] = []
        var then: [ElementID: ElementRecord] = [:]
        for e in target.elements { then[e.id] = e }
        for id in current.elementIDs.sorted() where then[id] == nil { erase.append(id) }
        for id in then.keys.sorted() {
            let past = then[id]!
            var now: ElementRecord
            if let live = current.element(id) {
                now = live
            } else if current.isRestorable(id), let kept = current.tombstone(id)?.record {
                restore.append(id)
                now = kept
            } else {
                continue  // never here, or its content is gone
            }
            let extra = now.erased.subtracting(past.erased), missing = past.erased.subtracting(now.erased)
            if !extra.isEmpty { restoreRanges.append((id, extra)) }
            if !missing.isEmpty { eraseRanges.append((id, missing)) }
            if now.transform.value != past.transform.value { moves.append(ElementTransform(id, past.transform.value)) }
            if now.z.value != past.z.value { reorders.append(ElementZ(id, past.z.value)) }
        }
        var out: [Op.Body] = []
        if !erase.isEmpty { out.append(.erase(erase)) }
        if !restore.isEmpty { out.append(.restore(restore)) }
        for (id, r) in restoreRanges { out.append(.restoreRange(id, r)) }
        for (id, r) in eraseRanges { out.append(.eraseRange(id, r)) }
        if !moves.isEmpty { out.append(.move(moves)) }
        if !reorders.isEmpty { out.append(.reorder(reorders)) }
        return out
    }
}
