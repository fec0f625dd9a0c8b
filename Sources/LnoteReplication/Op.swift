import LnoteModel

/// One element's new transform, inside a move.
public struct ElementTransform: Hashable, Sendable {
    public var element: ElementID
    public var transform: Transform
    public init(_ element: ElementID, _ transform: Transform) {
        self.element = element
        self.transform = transform
    }
}

/// One element's new z key, inside a reorder.
public struct ElementZ: Hashable, Sendable {
    public var element: ElementID
    public var z: ZKey
    public init(_ element: ElementID, _ z: ZKey) {
        self.element = element
        self.z = z
    }
}

/// One replicated operation (named `Op` so it never clashes with Foundation's `Operation`):
/// its identity, causal context, and what it does.
///
/// Operations live in a log: one per page (element operations) and one per document
/// (page list and metadata operations). Counters and clocks are per log.
public struct Op: Hashable, Sendable, CustomStringConvertible {
    /// (replica, counter): unique; `counter == context[replica] + 1`.
    public var id: OpID
    /// The number of operations its author had applied in this log, plus one: the counter
    /// plus the other entries of the context ([LOG-4]), checked on receipt.
    public var lamport: UInt64
    /// The author's clock of this log just before the operation: what it had seen.
    public var context: VectorClock
    /// Author's wall-clock time, ms since 1970. Shown to people; never decides a merge.
    public var wallTime: Int64
    public var body: Body

    public init(id: OpID, lamport: UInt64, context: VectorClock, wallTime: Int64, body: Body) {
        self.id = id
        self.lamport = lamport
        self.context = context
        self.wallTime = wallTime
        self.body = body
    }

    public var ref: OpRef { OpRef(id: id, lamport: lamport) }

    /// The clock of the log once this operation is applied: its context plus itself.
    public var clock: VectorClock {
        var c = context
        c.include(id)
        return c
    }

    public enum Body: Hashable, Sendable {
        // Page log.
        /// Adds an element at z key `z` (on top of what the author saw, or an explicit place).
        case add(ElementContent, z: ZKey)
        /// Erases whole elements.
        case erase([ElementID])
        /// Erases point ranges of a stroke (the pixel eraser).
        case eraseRange(ElementID, [PointRange])
        /// Sets the transform of each element.
        case move([ElementTransform])
        /// Sets the z key of each element.
        case reorder([ElementZ])
        /// Takes back the whole erases of each element that its author had seen ([MERGE-70]).
        case restore([ElementID])
        /// Takes back, of the partial erases of a stroke its author had seen, these point
        /// ranges ([MERGE-71]).
        case restoreRange(ElementID, [PointRange])

        // Document log.
        /// First operation of a document log.
        case createDocument(title: String)
        case setTitle(String)
        case addPage(PageID, position: ZKey, canvas: CanvasSize)
        /// Deletes a page (soft: content kept); `seen` is the page log's clock its author had.
        case deletePage(PageID, seen: VectorClock)
        case restorePage(PageID)
        case movePage(PageID, position: ZKey)
        case setCanvas(PageID, CanvasSize)
        case deleteDocument
        case restoreDocument

        /// True for operations that belong in a page log.
        public var isPageOperation: Bool {
            switch self {
            case .add, .erase, .eraseRange, .move, .reorder, .restore, .restoreRange: true
            default: false
            }
        }

        /// The name operation-log.md gives the operation's type ([LOG-10]; every stroke form of an
        /// add, 0x06, 0x09 and 0x0A, is an `add`), as the CLI prints it (`log --json`'s and
        /// `history --json`'s `kind`) and errors name it.
        public var name: String {
            switch self {
            case .add: "add"
            case .erase: "erase"
            case .eraseRange: "eraseRange"
            case .move: "move"
            case .reorder: "reorder"
            case .restore: "restore"
            case .restoreRange: "restoreRange"
            case .createDocument: "createDocument"
            case .setTitle: "setTitle"
            case .addPage: "addPage"
            case .deletePage: "deletePage"
            case .restorePage: "restorePage"
            case .movePage: "movePage"
            case .setCanvas: "setCanvas"
            case .deleteDocument: "deleteDocument"
            case .restoreDocument: "restoreDocument"
            }
        }
    }

    /// `00000000000000a1.17 @5 {…} add stroke(42 pts)`
    public var description: String { "\(id) @\(lamport) \(context) \(summary)" }

    /// A readable one-line summary of the body.
    public var summary: String {
        switch body {
        case .add(let c, let z):
            switch c {
            case .stroke(let s): return "add stroke \(s.pointCount) pts \(s.style.tool) \(s.style.color) z=\(z)"
            case .image(let i): return "add image \(i.asset.description.prefix(12)) z=\(z)"
            }
        case .erase(let ids): return "erase \(ids.map(\.description).joined(separator: " "))"
        case .eraseRange(let id, let rs): return "eraseRange \(id) \(rs.map(\.description).joined(separator: " "))"
        case .move(let ts): return "move " + ts.map { "\($0.element)→\($0.transform)" }.joined(separator: " ")
        case .reorder(let zs): return "reorder " + zs.map { "\($0.element)→z=\($0.z)" }.joined(separator: " ")
        case .restore(let ids): return "restore \(ids.map(\.description).joined(separator: " "))"
        case .restoreRange(let id, let rs): return "restoreRange \(id) \(rs.map(\.description).joined(separator: " "))"
        case .createDocument(let t): return "createDocument \"\(t)\""
        case .setTitle(let t): return "setTitle \"\(t)\""
        case .addPage(let p, let pos, let c): return "addPage \(p) at \(pos) canvas \(c)"
        case .deletePage(let p, let seen): return "deletePage \(p) seen \(seen)"
        case .restorePage(let p): return "restorePage \(p)"
        case .movePage(let p, let pos): return "movePage \(p) to \(pos)"
        case .setCanvas(let p, let c): return "setCanvas \(p) \(c)"
        case .deleteDocument: return "deleteDocument"
        case .restoreDocument: return "restoreDocument"
        }
    }
}
