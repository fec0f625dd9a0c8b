import LnoteModel

/// Concurrent operations on one thing, and which one won.
///
/// A conflict is derived from the replicated state alone, so every replica that received
/// the same operations reports the same conflicts. It stays reported until a later
/// operation that saw all the concurrent ones supersedes them.
public struct Conflict: Hashable, Sendable, CustomStringConvertible {
    public enum Kind: String, Sendable, CaseIterable {
        /// Concurrent moves of one element (last writer wins).
        case move
        /// Concurrent reorders of one element (last writer wins).
        case reorder
        /// A whole erase against concurrent moves, reorders or partial erases (erase wins).
        case erase
        /// Concurrent page moves (last writer wins).
        case pageOrder
        /// A page deleted while others edited it: content kept, page restorable.
        case pageDelete
        /// Concurrent canvas changes of a page.
        case canvas
        /// Concurrent title changes (last writer wins).
        case title
    }

    public var kind: Kind
    public var page: PageID?
    public var element: ElementID?
    /// The concurrent operations, sorted.
    public var ops: [OpRef]
    /// The one whose effect is visible.
    public var winner: OpRef

    public init(kind: Kind, page: PageID? = nil, element: ElementID? = nil, ops: [OpRef], winner: OpRef) {
        self.kind = kind
        self.page = page
        self.element = element
        self.ops = ops.sorted()
        self.winner = winner
    }

    public var description: String {
        var s = "\(kind.rawValue)"
        if let page { s += " page \(page)" }
        if let element { s += " element \(element)" }
        s += ": " + ops.map(\.description).joined(separator: ", ") + " → winner \(winner)"
        return s
    }
}

extension PageState {
    /// [MERGE-50] The page's conflicts, in the order [JSON-11] lists them: live elements
    /// bottom to top (a `move` conflict, then a `reorder` one), then tombstones by id (an
    /// `erase` conflict, whose winner is the greatest erasure, until acknowledged).
    public var conflicts: [Conflict] {
        var out: [Conflict] = []
        for r in elements {
            if r.transform.isConflicted {
                out.append(Conflict(kind: .move, page: page, element: r.id, ops: r.transform.frontier, winner: r.transform.winner!))
            }
            if r.z.isConflicted {
                out.append(Conflict(kind: .reorder, page: page, element: r.id, ops: r.z.frontier, winner: r.z.winner!))
            }
        }
        for t in tombstones {
            let concurrent = t.concurrent
            // Only the erasures that hold: a taken-back one lost nothing ([MERGE-70]).
            let holding = t.erasures.filter(\.holds).map(\.ref)
            guard !concurrent.isEmpty, let winner = holding.max() else { continue }
            let ops = holding + concurrent
            if !isAcknowledged(ops, losers: concurrent) {
                out.append(Conflict(kind: .erase, page: page, element: t.id, ops: ops, winner: winner))
            }
        }
        return out
    }

    /// [MERGE-53] An erase conflict is cleared once every replica whose edit lost has
    /// written to this page again after seeing every operation of the conflict: its latest
    /// operation's clock covers them all.
    func isAcknowledged(_ ops: [OpRef], losers: [OpRef]) -> Bool {
        Set(losers.map(\.id.replica)).allSatisfy { r in
            guard let seen = contexts.context(of: r)?.clock else { return false }
            return ops.allSatisfy { seen.covers($0.id) }
        }
    }
}

extension DocumentState {
    /// [MERGE-50] The document's own conflicts, in the order [JSON-11] lists them: the
    /// title, then for each page in document order its position, its canvas, and a delete
    /// made while others edited the page (`pageClocks`: each page's applied clock; a page
    /// without one has no edits to compare).
    public func conflicts(pageClocks: [PageID: VectorClock] = [:]) -> [Conflict] {
        var out: [Conflict] = []
        if title.isConflicted { out.append(Conflict(kind: .title, ops: title.frontier, winner: title.winner!)) }
        for p in pages {
            if p.position.isConflicted {
                out.append(Conflict(kind: .pageOrder, page: p.id, ops: p.position.frontier, winner: p.position.winner!))
            }
            if p.canvas.isConflicted {
                out.append(Conflict(kind: .canvas, page: p.id, ops: p.canvas.frontier, winner: p.canvas.winner!))
            }
            if p.deleted.value, let seen = p.deletedSeen, let pageClock = pageClocks[p.id], !seen.covers(pageClock),
               let winner = p.deleted.winner {
                out.append(Conflict(kind: .pageDelete, page: p.id, ops: [winner], winner: winner))
            }
        }
        return out
    }
}
