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
