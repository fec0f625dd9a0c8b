import Foundation
import Synchronization
import LnoteModel
import LnoteReplication
import LnoteSync

/// Replicas held in memory, with no files and no network. Deliveries hand operations
/// over directly; a sync runs the real sync protocol between in-process endpoints.
public final class MemoryTransport: ScenarioTransport {
    /// One endpoint per replica, kept for the whole scenario so cursors carry over.
    private let endpoints = Mutex<[ReplicaID: NotebookEndpoint]>([:])
    public init() {}
    public var name: String { "memory" }

    func endpoint(for node: MemoryNode) -> NotebookEndpoint {
        endpoints.withLock { e in
            if let x = e[node.replica] { return x }
            let x = NotebookEndpoint(notebook: node)
            e[node.replica] = x
            return x
        }
    }

    public func makeNode(replica: ReplicaID, label: String, document: DocumentID) async throws -> any ScenarioNode {
        MemoryNode(replica: replica, document: document)
    }

    public func deliver(_ ops: [LoggedOp], from: any ScenarioNode, to: any ScenarioNode) async throws {
        guard let to = to as? MemoryNode else { throw LnoteError(.invalidArgument, "not a memory node") }
        try to.receive(ops)
    }

    public func sync(_ nodes: [any ScenarioNode]) async throws {
        // Each replica syncs with each other one (both ways in one session); two rounds
        // carry everything everywhere for any number of replicas.
        let memory = nodes.compactMap { $0 as? MemoryNode }
        for _ in 0..<2 {
            for a in memory {
                for b in memory where a !== b {
                    let remote = LocalRemote(key: "memory-\(b.replica)", endpoint: endpoint(for: b))
                    _ = try await SyncSession(notebook: a, remote: remote).run()
                }
            }
        }
    }

    public func close() async throws {}
}

/// A replica in memory: one document replica and one page replica per page.
public final class MemoryNode: ScenarioNode, SyncableNotebook {
    struct State {
        var doc: DocumentReplica
        var pages: [PageID: PageReplica] = [:]
        var docLog: [Op] = []
        var pageLogs: [PageID: [Op]] = [:]
        var assets: [AssetID: [UInt8]] = [:]
        var remoteStates: [String: [UInt8]] = [:]
    }
    public let replica: ReplicaID
    public let document: DocumentID
    private let state: Mutex<State>

    init(replica: ReplicaID, document: DocumentID) {
        self.replica = replica
        self.document = document
        state = Mutex(State(doc: DocumentReplica(id: document)))
    }

    public func perform(_ edit: NodeEdit, wallTime: Int64) async throws -> ElementID? {
        try state.withLock { s in try Self.perform(edit, on: &s, by: replica, wallTime: wallTime) }
    }

    /// Applies a local edit to in-memory replicas and records the operation; shared by the
    /// memory node and usable by any node that keeps replicas in memory.
    static func perform(_ edit: NodeEdit, on s: inout State, by me: ReplicaID, wallTime: Int64) throws -> ElementID? {
        func page(_ p: PageID) throws -> PageReplica {
            guard s.doc.page(p) != nil else { throw LnoteError(.notFound, "no page \(p)") }
            return s.pages[p] ?? PageReplica(page: p)
        }
        func docOp(_ body: Op.Body) throws {
            s.docLog.append(try s.doc.make(body, by: me, wallTime: wallTime))
        }
        func pageOp(_ p: PageID, _ f: (inout PageReplica) throws -> Op) throws -> Op {
            var r = try page(p)
            let op = try f(&r)
            s.pages[p] = r
            s.pageLogs[p, default: []].append(op)
            return op
        }
        switch edit {
        case .createDocument(let title):
            try docOp(.createDocument(title: title))
        case .title(let t):
            try docOp(.setTitle(t))
        case .addPage(let p, let after):
            let pos = after == nil ? s.doc.endPosition : try s.doc.position(after: after, by: me)
            try docOp(.addPage(p, position: pos, canvas: .a4))
        case .deletePage(let p):
            try docOp(.deletePage(p, seen: try page(p).clock))
        case .restorePage(let p):
            try docOp(.restorePage(p))
        case .movePage(let p, let after):
            try docOp(.movePage(p, position: try s.doc.position(after: after, moving: p, by: me)))
        case .add(let p, let stroke, let below, let above):
            return try pageOp(p) { try $0.add(.stroke(stroke), by: me, wallTime: wallTime, above: above, below: below) }.id
        case .erase(let p, let ids):
            _ = try pageOp(p) { try $0.make(.erase(ids), by: me, wallTime: wallTime) }
        case .eraseRange(let p, let id, let range):
            _ = try pageOp(p) { try $0.make(.eraseRange(id, [range]), by: me, wallTime: wallTime) }
        case .move(let p, let ids, let dx, let dy):
            _ = try pageOp(p) { try $0.move(ids, dx: dx, dy: dy, by: me, wallTime: wallTime) }
        case .toFront(let p, let ids):
            _ = try pageOp(p) { try $0.bringToFront(ids, by: me, wallTime: wallTime) }
        case .toBack(let p, let ids):
            _ = try pageOp(p) { try $0.sendToBack(ids, by: me, wallTime: wallTime) }
        }
        return nil
    }

    /// Adds an image element (its asset must already be stored with `writeAsset`).
    public func addImage(_ image: ImageElement, page: PageID, wallTime: Int64) throws {
        try state.withLock { s in
            guard s.assets[image.asset] != nil else { throw LnoteError(.notFound, "asset \(image.asset) not stored") }
            var r = s.pages[page] ?? PageReplica(page: page)
            let op = try r.add(.image(image), by: replica, wallTime: wallTime)
            s.pages[page] = r
            s.pageLogs[page, default: []].append(op)
        }
    }

    public func heldOps() async throws -> [LoggedOp] {
        state.withLock { s in
            s.docLog.map { LoggedOp(.document, $0) }
                + s.pageLogs.keys.sorted().flatMap { p in s.pageLogs[p]!.map { LoggedOp(.page(p), $0) } }
        }
    }

    public func contains(_ log: LogKey, _ id: OpID) async throws -> Bool {
        state.withLock { s in
            switch log {
            case .document: s.doc.contains(id)
            case .page(let p): s.pages[p]?.contains(id) ?? false
            }
        }
    }

    func receive(_ ops: [LoggedOp]) throws {
        try state.withLock { s in
            var byLog: [LogKey: [Op]] = [:]
            var order: [LogKey] = []
            for lo in ops {
                if byLog[lo.log] == nil { order.append(lo.log) }
                byLog[lo.log, default: []].append(lo.op)
            }
            for key in order {
                let batch = byLog[key]!
                switch key {
                case .document:
                    let fresh = batch.filter { !s.doc.contains($0.id) }
                    try s.doc.receive(fresh)
                    s.docLog += Self.unique(fresh)
                case .page(let p):
                    var r = s.pages[p] ?? PageReplica(page: p)
                    let fresh = batch.filter { !r.contains($0.id) }
                    try r.receive(fresh)
                    s.pages[p] = r
                    s.pageLogs[p, default: []] += Self.unique(fresh)
                }
            }
        }
    }

    static func unique(_ ops: [Op]) -> [Op] {
        var seen = Set<OpID>()
        return ops.filter { seen.insert($0.id).inserted }
    }

    public func view() async throws -> NodeView {
        state.withLock { s in
            let pages = s.pages.mapValues(\.state)
            let conflicts = s.doc.conflicts(pageClocks: pages.mapValues(\.clock))
                + s.pages.keys.sorted().flatMap { s.pages[$0]!.conflicts() }
            return NodeView(document: s.doc.state, pages: pages, conflicts: conflicts)
        }
    }

    /// A restart: every page continues from its snapshot's bytes read back, with its
    /// waiting operations, and the document from its state, as a store reopening would.
    public func restart() async throws {
        try state.withLock { s in
            for (p, r) in s.pages {
                let bytes = PageSnapshot.encode(r.state, coveredLogOffset: 0, logIncarnation: 0)
                s.pages[p] = PageReplica(state: try PageSnapshot.decode(bytes).state, pending: r.pending)
            }
            s.doc = DocumentReplica(state: s.doc.state, pending: s.doc.pending)
        }
    }

    public func close() async throws {}

    // MARK: - SyncableNotebook

    public var replicaID: ReplicaID { replica }

    public func logClocks() async throws -> [LogClock] {
        state.withLock { s in
            [LogClock(log: LogRef(document: document), clock: s.doc.clock)]
                + s.pages.keys.sorted().map { LogClock(log: LogRef(document: document, page: $0), clock: s.pages[$0]!.clock) }
        }
    }

    public func frames(in log: LogRef, notCoveredBy clock: VectorClock) async throws -> [Frame] {
        try checkDocument(log.document)
        return state.withLock { s in
            let ops = log.page.map { s.pageLogs[$0] ?? [] } ?? s.docLog
            return ops.filter { !clock.covers($0.id) }.map(OperationCodec.frame)
        }
    }

    public func receive(_ batches: [LogBatch]) async throws -> Int {
        var ops: [LoggedOp] = []
        for b in batches {
            try checkDocument(b.log.document)
            ops += try b.ops().map { LoggedOp(b.log.page.map { .page($0) } ?? .document, $0) }
        }
        let before = try await heldOps().count
        try receive(ops)
        return try await heldOps().count - before
    }

    private func checkDocument(_ d: DocumentID) throws {
        guard d == document else { throw LnoteError(.notFound, "no document \(d) here") }
    }

    public func hasAsset(_ id: AssetID, document: DocumentID) async throws -> Bool {
        state.withLock { $0.assets[id] != nil }
    }
    public func readAsset(_ id: AssetID, document: DocumentID) async throws -> [UInt8] {
        guard let b = state.withLock({ $0.assets[id] }) else { throw LnoteError(.notFound, "no asset \(id)") }
        return b
    }
    public func writeAsset(_ bytes: [UInt8], document: DocumentID) async throws -> AssetID {
        let id = AssetID.of(bytes)
        state.withLock { $0.assets[id] = bytes }
        return id
    }
    public func loadRemoteState(key: String) async throws -> [UInt8]? { state.withLock { $0.remoteStates[key] } }
    public func saveRemoteState(_ bytes: [UInt8], key: String) async throws { state.withLock { $0.remoteStates[key] = bytes } }
}
