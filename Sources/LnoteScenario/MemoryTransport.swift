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

/// A replica in memory: one document replica and one page replica per page, and its undo
/// and redo stacks, kept as the store keeps them ([MERGE-73] … [MERGE-76]) with the same pure
/// functions (`Undo.inverse`, `Undo.remaining`, `Undo.revert`), so that undo means the same
/// on every transport.
public final class MemoryNode: ScenarioNode, SyncableNotebook {
    struct State {
        var doc: DocumentReplica
        var pages: [PageID: PageReplica] = [:]
        var docLog: [Op] = []
        var pageLogs: [PageID: [Op]] = [:]
        var assets: [AssetID: [UInt8]] = [:]
        var remoteStates: [String: [UInt8]] = [:]
        /// Steps newest last, each its operations' entries in the order made.
        var undo: [[UndoEntry]] = []
        var redo: [[UndoEntry]] = []
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
        try state.withLock { s in
            var entries: [UndoEntry] = []
            let id = try Self.perform(edit, on: &s, by: replica, wallTime: wallTime, recording: &entries)
            Self.record(entries, on: &s)
            return id
        }
    }

    public func performGroup(_ edits: [NodeEdit], wallTime: Int64) async throws -> [ElementID] {
        try state.withLock { s in
            // As `Document.undoGroup`: what was made before an error stays one step.
            var entries: [UndoEntry] = []
            defer { Self.record(entries, on: &s) }
            return try edits.compactMap { try Self.perform($0, on: &s, by: replica, wallTime: wallTime, recording: &entries) }
        }
    }

    /// Applies a local edit to in-memory replicas and records the operation; shared by the
    /// memory node and usable by any node that keeps replicas in memory.
    static func perform(_ edit: NodeEdit, on s: inout State, by me: ReplicaID, wallTime: Int64) throws -> ElementID? {
        var entries: [UndoEntry] = []
        return try perform(edit, on: &s, by: me, wallTime: wallTime, recording: &entries)
    }

    /// `perform`, noting in `entries` what takes each page operation back, as the store's
    /// editing calls note it ([MERGE-73]).
    static func perform(_ edit: NodeEdit, on s: inout State, by me: ReplicaID, wallTime: Int64,
                        recording entries: inout [UndoEntry]) throws -> ElementID? {
        func page(_ p: PageID) throws -> PageReplica {
            guard s.doc.page(p) != nil else { throw LnoteError(.notFound, "no page \(p)") }
            return s.pages[p] ?? PageReplica(page: p)
        }
        func docOp(_ body: Op.Body) throws {
            s.docLog.append(try s.doc.make(body, by: me, wallTime: wallTime))
        }
        func pageOp(_ p: PageID, _ f: (inout PageReplica) throws -> Op) throws -> Op {
            // As the store: a deleted page is not edited until restored.
            if s.doc.page(p)?.deleted.value == true {
                throw LnoteError(.invalidState, "page \(p) is deleted; restore it before editing")
            }
            var r = try page(p)
            let op = try f(&r)
            s.pages[p] = r
            s.pageLogs[p, default: []].append(op)
            return op
        }
        /// The inverse of a move or reorder of `ids`, as the store computes it: from the
        /// elements' transforms (z keys) before, in the order the edit names them.
        func shaped(_ p: PageID, _ f: (inout PageReplica) throws -> Op, inverse: (PageReplica) -> Op.Body?) throws {
            _ = try pageOp(p) { r in
                let back = inverse(r)
                let op = try f(&r)
                if let back { entries.append(UndoEntry(page: p, op: op.id, inverse: back, made: UndoEntry.madeBody(op))) }
                return op
            }
        }
        func made(_ p: PageID, _ body: Op.Body) throws {
            _ = try pageOp(p) { r in try Undo.make(body, on: &r, page: p, by: me, wallTime: wallTime, into: &entries) }
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
            try docOp(.deletePage(p, seen: try page(p).clockSeen(by: me)))
        case .restorePage(let p):
            try docOp(.restorePage(p))
        case .movePage(let p, let after):
            try docOp(.movePage(p, position: try s.doc.position(after: after, moving: p, by: me)))
        case .add(let p, let stroke, let below, let above):
            let op = try pageOp(p) { try $0.add(.stroke(stroke), by: me, wallTime: wallTime, above: above, below: below) }
            entries.append(UndoEntry(page: p, op: op.id, inverse: .erase([op.id])))
            return op.id
        case .erase(let p, let ids):
            try made(p, .erase(ids))
        case .eraseRange(let p, let id, let range):
            try made(p, .eraseRange(id, [range]))
        case .restore(let p, let ids):
            try made(p, .restore(ids))
        case .restoreRange(let p, let id, let range):
            try made(p, .restoreRange(id, [range]))
        case .move(let p, let ids, let dx, let dy):
            try shaped(p, { try $0.move(ids, dx: dx, dy: dy, by: me, wallTime: wallTime) }, inverse: { r in
                Undo.inverse(of: .move(ids.map { ElementTransform($0, .identity) }), id: OpID(replica: me, counter: 1), before: r)
            })
        case .toFront(let p, let ids):
            try shaped(p, { try $0.bringToFront(ids, by: me, wallTime: wallTime) }, inverse: { r in
                Undo.inverse(of: .reorder(ids.map { ElementZ($0, ZKey(layer: 0)) }), id: OpID(replica: me, counter: 1), before: r)
            })
        case .toBack(let p, let ids):
            try shaped(p, { try $0.sendToBack(ids, by: me, wallTime: wallTime) }, inverse: { r in
                Undo.inverse(of: .reorder(ids.map { ElementZ($0, ZKey(layer: 0)) }), id: OpID(replica: me, counter: 1), before: r)
            })
        }
        return nil
    }


    /// A new step: pushed on the undo stack, the redo stack cleared. An edit that took
    /// nothing back-able (no entries) is no step.
    static func record(_ entries: [UndoEntry], on s: inout State) {
        guard !entries.isEmpty else { return }
        s.undo.append(entries)
        s.redo = []
    }

    public func undo(page filter: PageID?, redo: Bool, wallTime: Int64) async throws -> Int {
        try state.withLock { s in try Self.unwind(undoing: !redo, page: filter, on: &s, by: replica, wallTime: wallTime) }
    }

    /// [MERGE-73], [MERGE-74] The top step (with a page, the top step that changed it) is taken
    /// back: its entries last first, each reduced by `Undo.remaining` on the page as it is
    /// now, consecutive entries of one page in one go, pages deleted since skipped. What that
    /// made is pushed on the other stack; a step of which nothing is left is dropped and the
    /// one below it tried.
    static func unwind(undoing: Bool, page filter: PageID?, on s: inout State, by me: ReplicaID, wallTime: Int64) throws -> Int {
        while true {
            let stack = undoing ? s.undo : s.redo
            guard let i = stack.lastIndex(where: { step in filter.map { p in step.contains { $0.page == p } } ?? true }) else {
                return 0
            }
            var runs: [(page: PageID, entries: [UndoEntry])] = []
            for e in stack[i].reversed() {
                if runs.last?.page == e.page { runs[runs.count - 1].entries.append(e) } else { runs.append((e.page, [e])) }
            }
            var made: [UndoEntry] = []
            for run in runs {
                guard let record = s.doc.page(run.page), !record.deleted.value else { continue }
                var r = s.pages[run.page] ?? PageReplica(page: run.page)
                var ops: [Op] = []
                for e in run.entries {
                    guard let body = Undo.remaining(e, on: r) else { continue }
                    ops.append(try Undo.make(body, on: &r, page: run.page, by: me, wallTime: wallTime, into: &made))
                }
                guard !ops.isEmpty else { continue }
                s.pages[run.page] = r
                s.pageLogs[run.page, default: []] += ops
            }
            if undoing { s.undo.remove(at: i) } else { s.redo.remove(at: i) }
            if made.isEmpty { continue }
            if undoing { s.redo.append(made) } else { s.undo.append(made) }
            return made.count
        }
    }

    public func revert(page p: PageID, to point: HistoryPoint, wallTime: Int64) async throws -> Int {
        try state.withLock { s in
            guard let record = s.doc.page(p) else { throw LnoteError(.notFound, "no page \(p)") }
            guard !record.deleted.value else { throw LnoteError(.invalidState, "page \(p) is deleted; restore it before editing") }
            var r = s.pages[p] ?? PageReplica(page: p)
            // [MERGE-76] The page as of the moment, from every operation its log holds.
            let target = try History.pageState(p, at: point, ops: s.pageLogs[p] ?? [], applied: r.clock)
            var entries: [UndoEntry] = []
            var ops: [Op] = []
            for body in Undo.revert(r, to: target) {
                ops.append(try Undo.make(body, on: &r, page: p, by: replica, wallTime: wallTime, into: &entries))
            }
            if !ops.isEmpty {
                s.pages[p] = r
                s.pageLogs[p, default: []] += ops
            }
            Self.record(entries, on: &s)
            return ops.count
        }
    }

    public func history(of p: PageID) async throws -> [HistoryStep] {
        state.withLock { s in History.steps(s.pageLogs[p] ?? [], applied: s.pages[p]?.clock ?? VectorClock()) }
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
