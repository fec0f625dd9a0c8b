import LnoteModel
import LnoteReplication

/// Which log of the scenario's one document an operation belongs to.
public enum LogKey: Hashable, Sendable, Comparable, CustomStringConvertible {
    case document
    case page(PageID)
    public var description: String {
        switch self {
        case .document: "document"
        case .page(let p): "page \(p)"
        }
    }
}

/// An operation with the log it belongs to.
public struct LoggedOp: Sendable, Equatable {
    public var log: LogKey
    public var op: Op
    public init(_ log: LogKey, _ op: Op) {
        self.log = log
        self.op = op
    }
}

/// A local edit with every name resolved to an id and every value quantized.
public enum NodeEdit: Sendable {
    case createDocument(title: String)
    case add(PageID, Stroke, below: ElementID?, above: ElementID?)
    case erase(PageID, [ElementID])
    case eraseRange(PageID, ElementID, PointRange)
    case move(PageID, [ElementID], dx: Int32, dy: Int32)
    case toFront(PageID, [ElementID])
    case toBack(PageID, [ElementID])
    case addPage(PageID, after: PageID?)
    case deletePage(PageID)
    case movePage(PageID, after: PageID?)
    case restorePage(PageID)
    case title(String)
    case restore(PageID, [ElementID])
    case restoreRange(PageID, ElementID, PointRange)
}

/// What a replica shows, for comparing replicas and checking expectations.
public struct NodeView: Sendable, Equatable {
    public var document: DocumentState
    public var pages: [PageID: PageState]
    public var conflicts: [Conflict]
    /// The replica's canonical text form where the transport has one (identical for equal states).
    public var canonical: String?
    public init(document: DocumentState, pages: [PageID: PageState], conflicts: [Conflict], canonical: String? = nil) {
        self.document = document
        self.pages = pages
        self.conflicts = conflicts
        self.canonical = canonical
    }
}

/// One replica in a scenario: in memory, a notebook folder, or a folder behind HTTP.
public protocol ScenarioNode: AnyObject, Sendable {
    var replica: ReplicaID { get }
    /// Performs a local edit; returns the new element's id for an add. A page edit is one
    /// undo step of this replica ([MERGE-73]).
    func perform(_ edit: NodeEdit, wallTime: Int64) async throws -> ElementID?
    /// Performs page edits as one undo step (an undo group); returns the ids of the elements
    /// the adds among them made, in order.
    func performGroup(_ edits: [NodeEdit], wallTime: Int64) async throws -> [ElementID]
    /// Undoes (or, with `redo`, redoes) this replica's latest step, of `page` when given
    /// ([MERGE-73], [MERGE-74]); returns how many operations it made (0: nothing to do).
    func undo(page: PageID?, redo: Bool, wallTime: Int64) async throws -> Int
    /// Makes the page as it was at a moment, as one undo step ([MERGE-76]); returns how many
    /// operations that took.
    func revert(page: PageID, to point: HistoryPoint, wallTime: Int64) async throws -> Int
    /// The steps of a page's log, in this replica's log order ([MERGE-84]).
    func history(of page: PageID) async throws -> [HistoryStep]
    /// Every operation held (applied or waiting): the document log first, then page logs by
    /// page id, each in the order this replica holds it.
    func heldOps() async throws -> [LoggedOp]
    func contains(_ log: LogKey, _ id: OpID) async throws -> Bool
    func view() async throws -> NodeView
    /// Saves, closes and reopens the replica's document from what it stored.
    func restart() async throws
    func close() async throws
}

/// How replicas exchange operations in a scenario.
public protocol ScenarioTransport: Sendable {
    var name: String { get }
    func makeNode(replica: ReplicaID, label: String, document: DocumentID) async throws -> any ScenarioNode
    /// Delivers exactly these operations, in this order, from one replica to another.
    func deliver(_ ops: [LoggedOp], from: any ScenarioNode, to: any ScenarioNode) async throws
    /// A full sync among the replicas, both ways, as a user would run it.
    func sync(_ nodes: [any ScenarioNode]) async throws
    func close() async throws
}
