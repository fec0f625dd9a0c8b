import Foundation
import Synchronization
import LnoteModel
import LnoteReplication

/// Replicas held in memory: the merge alone, with no files and no network.
public struct MemoryTransport: ScenarioTransport {
    public init() {}
    public var name: String { "memory" }

    public func makeNode(replica: ReplicaID, label: String, document: DocumentID) async throws -> any ScenarioNode {
        MemoryNode(replica: replica, document: document)
    }

    public func deliver(_ ops: [LoggedOp], from: any ScenarioNode, to: any ScenarioNode) async throws {
        guard let to = to as? MemoryNode else { throw LnoteError(.invalidArgument, "not a memory node") }
        try to.receive(ops)
    }

    public func sync(_ nodes: [any ScenarioNode]) async throws {
        // Two rounds of pairwise delivery reach a fixpoint for any number of replicas.
        for _ in 0..<2 {
            for a in nodes {
                for b in nodes where a !== b {
                    var missing: [LoggedOp] = []
                    for lo in try await a.heldOps() where !(try await b.contains(lo.log, lo.op.id)) { missing.append(lo) }
                    try await deliver(missing, from: a, to: b)
                }
            }
        }
    }

    public func close() async throws {}
}

/// A replica in memory: one document replica and one page replica per page.
public final class MemoryNode: ScenarioNode {
    struct State {
        var doc: DocumentReplica
        var pages: [PageID: PageReplica] = [:]
        var docLog: [Op] = []
        var pageLogs: [PageID: [Op]] = [:]
    }
    public let replica: ReplicaID
    private let state: Mutex<State>

    init(replica: ReplicaID, document: DocumentID) {
        self.replica = replica
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
            let pos = after == nil ? s.doc.endPosition : try s.doc.position(after: after)
            try docOp(.addPage(p, position: pos, canvas: .a4))
        case .deletePage(let p):
            try docOp(.deletePage(p, seen: try page(p).clock))
        case .restorePage(let p):
            try docOp(.restorePage(p))
        case .movePage(let p, let after):
            try docOp(.movePage(p, position: try s.doc.position(after: after)))
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

    public func close() async throws {}
}
