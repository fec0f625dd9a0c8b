import Foundation
import Synchronization
import LnoteModel
import LnoteReplication
import LnoteStore
import LnoteSync

/// Replicas that are real notebook folders in a temporary directory. Deliveries append the
/// operations to the receiving folder's logs through the store; a sync is the folder-to-
/// folder sync `lnote sync FOLDER OTHER-FOLDER` runs.
public final class FolderTransport: ScenarioTransport {
    public let root: URL
    private let keep: Bool
    public var name: String { "folder" }

    /// - Parameter directory: where the folders go (a fresh temporary directory when nil,
    ///   removed by `close`).
    public init(directory: URL? = nil) throws {
        if let directory {
            root = directory
            keep = true
        } else {
            root = FileManager.default.temporaryDirectory.appendingPathComponent("lnote-scenario-\(UUID().uuidString)")
            keep = false
        }
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
    }

    public func makeNode(replica: ReplicaID, label: String, document: DocumentID) async throws -> any ScenarioNode {
        let path = root.appendingPathComponent(label).path
        var options = FolderNode.options
        options.newReplicaID = replica
        // The scenario's fake clock stamps the store's operations too (a revert to a time
        // names the same operations on every transport).
        let clock = NodeClock()
        options.now = { clock.now }
        let notebook = try await Notebook.open(at: path, create: true, options: options)
        return FolderNode(notebook: notebook, replica: replica, document: document, clock: clock)
    }

    public func deliver(_ ops: [LoggedOp], from: any ScenarioNode, to: any ScenarioNode) async throws {
        guard let to = to as? FolderNode else { throw LnoteError(.invalidArgument, "not a folder node") }
        try await to.receive(ops)
    }

    public func sync(_ nodes: [any ScenarioNode]) async throws {
        let folders = nodes.compactMap { $0 as? FolderNode }
        for _ in 0..<2 {
            for a in folders {
                for b in folders where a !== b {
                    _ = try await SyncSession(notebook: a.notebook, remote: LocalRemote(key: b.notebook.path,
                                                                                        endpoint: NotebookEndpoint(notebook: b.notebook))).run()
                }
            }
        }
    }

    public func close() async throws {
        if !keep { try? FileManager.default.removeItem(at: root) }
    }
}

/// The wall time a folder replica's store stamps: the scenario's fake clock, set before each step.
final class NodeClock: Sendable {
    private let value = Mutex<Int64>(Wall().now)
    var now: Int64 { value.withLock { $0 } }
    func set(_ t: Int64) { value.withLock { $0 = t } }
}

/// A notebook folder playing one replica of a scenario, created with the scenario's
/// replica id (1, 2, 3 …) so that ties resolve as the scenario says.
public final class FolderNode: ScenarioNode {
    static var options: StoreOptions {
        var o = StoreOptions()
        o.autosave = false
        return o
    }
    public let notebook: Notebook
    public let replica: ReplicaID
    public let document: DocumentID
    /// The wall time the store stamps on this replica's operations: the scenario's clock.
    private let clock: NodeClock

    init(notebook: Notebook, replica: ReplicaID, document: DocumentID, clock: NodeClock) {
        self.notebook = notebook
        self.replica = replica
        self.document = document
        self.clock = clock
    }

    private func tick(_ wallTime: Int64) { clock.set(wallTime) }

    private func doc() async throws -> Document {
        if try await notebook.holdsDocument(document) { return try await notebook.openDocument(document) }
        throw LnoteError(.notFound, "document \(document) not in this folder yet")
    }

    public func perform(_ edit: NodeEdit, wallTime: Int64) async throws -> ElementID? {
        if case .createDocument(let title) = edit {
            let op = Op(id: OpID(replica: notebook.replica, counter: 1), lamport: 1, context: VectorClock(),
                        wallTime: wallTime, body: .createDocument(title: title))
            try await notebook.receive([op], document: document, page: nil)
            return nil
        }
        tick(wallTime)
        return try await perform(edit, on: try await doc())
    }

    /// One edit through the real `Document` API (each page edit one undo step, or part of
    /// the open undo group).
    private func perform(_ edit: NodeEdit, on d: Document) async throws -> ElementID? {
        switch edit {
        case .createDocument: return nil
        case .title(let t): try await d.setTitle(t)
        case .addPage(let p, let after): try await d.addPage(id: p, after.map { .after($0) } ?? .last)
        case .deletePage(let p): try await d.deletePage(p)
        case .restorePage(let p): try await d.restorePage(p)
        case .movePage(let p, let after): try await d.movePage(p, to: after.map { .after($0) } ?? .first)
        case .add(let p, let stroke, nil, nil):
            return try await d.addStroke(stroke, to: p)
        case .add(let p, let stroke, let below, let above):
            return try await d.addStroke(stroke, to: p, above: above, below: below)
        case .restore(let p, let ids): try await d.restore(ids, on: p)
        case .restoreRange(let p, let id, let r): try await d.restoreRange(id, [r], on: p)
        case .erase(let p, let ids): try await d.erase(ids, on: p)
        case .eraseRange(let p, let id, let r): try await d.eraseRange(id, [r], on: p)
        case .move(let p, let ids, let dx, let dy): try await d.move(ids, dx: dx, dy: dy, on: p)
        case .toFront(let p, let ids): try await d.bringToFront(ids, on: p)
        case .toBack(let p, let ids): try await d.sendToBack(ids, on: p)
        }
        return nil
    }

    public func performGroup(_ edits: [NodeEdit], wallTime: Int64) async throws -> [ElementID] {
        tick(wallTime)
        let d = try await doc()
        await d.beginUndoGroup("group")
        var added: [ElementID] = []
        do {
            for e in edits { if let id = try await perform(e, on: d) { added.append(id) } }
        } catch {
            try? await d.endUndoGroup()
            throw error
        }
        try await d.endUndoGroup()
        return added
    }

    public func undo(page: PageID?, redo: Bool, wallTime: Int64) async throws -> Int {
        tick(wallTime)
        let d = try await doc()
        let step: UndoStep?
        switch (redo, page) {
        case (false, nil): step = try await d.undo()
        case (false, let p?): step = try await d.undo(page: p)
        case (true, nil): step = try await d.redo()
        case (true, let p?): step = try await d.redo(page: p)
        }
        return step?.entries.count ?? 0
    }

    public func revert(page: PageID, to point: HistoryPoint, wallTime: Int64) async throws -> Int {
        tick(wallTime)
        return try await doc().revert(page: page, to: point).count
    }

    public func history(of page: PageID) async throws -> [HistoryStep] {
        try await doc().history(of: page)
    }

    public func heldOps() async throws -> [LoggedOp] {
        guard try await notebook.holdsDocument(document) else { return [] }
        let d = try await doc()
        var out = try await d.operations(page: nil, notCoveredBy: VectorClock()).map { LoggedOp(.document, $0) }
        for p in try await d.pageLogs() {
            out += try await d.operations(page: p, notCoveredBy: VectorClock()).map { LoggedOp(.page(p), $0) }
        }
        return out
    }

    public func contains(_ log: LogKey, _ id: OpID) async throws -> Bool {
        guard try await notebook.holdsDocument(document) else { return false }
        let d = try await doc()
        switch log {
        case .document: return try await d.operations(page: nil, notCoveredBy: VectorClock()).contains { $0.id == id }
        case .page(let p):
            guard try await d.pageLogs().contains(p) else { return false }
            return try await d.operations(page: p, notCoveredBy: VectorClock()).contains { $0.id == id }
        }
    }

    /// Hands operations to the store in the order given, one batch per run of the same log.
    func receive(_ ops: [LoggedOp]) async throws {
        var i = 0
        while i < ops.count {
            var j = i
            while j < ops.count && ops[j].log == ops[i].log { j += 1 }
            let batch = ops[i..<j].map(\.op)
            switch ops[i].log {
            case .document: try await notebook.receive(batch, document: document, page: nil)
            case .page(let p): try await notebook.receive(batch, document: document, page: p)
            }
            i = j
        }
    }

    public func view() async throws -> NodeView {
        let d = try await doc()
        var pages: [PageID: PageState] = [:]
        var conflicts: [Conflict] = []
        for p in try await d.pageLogs() {
            guard await d.state.pages.contains(where: { $0.id == p }) else { continue }
            pages[p] = try await d.pageState(p)
        }
        conflicts = await d.conflicts()
        for p in pages.keys.sorted() { conflicts += try await d.conflicts(page: p) }
        var canonical = ""
        for p in pages.keys.sorted() { canonical += pages[p]!.canonicalJSON() + "\n" }
        return NodeView(document: await d.state, pages: pages, conflicts: conflicts, canonical: canonical)
    }

    /// Closes the document (which writes its snapshots); the next use reopens it from the
    /// files, as a new process would.
    public func restart() async throws {
        guard try await notebook.holdsDocument(document) else { return }
        try await doc().close()
    }

    public func close() async throws { try await notebook.close() }
}
