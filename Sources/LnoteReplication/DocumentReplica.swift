import LnoteModel

/// A document's replicated metadata (title, page list and order, deletions) and its merge.
///
/// Same contract as `PageReplica`: pure, causal delivery, idempotent by operation id,
/// and a state that is a function of the set of applied operations.
public struct DocumentReplica: Sendable {
    public let id: DocumentID
    public private(set) var clock: VectorClock
    public private(set) var maxLamport: UInt64
    private var created: Int64
    private var modified: Int64
    private var title: LWWRegister<String>
    private var deleted: LWWRegister<Bool>
    private var pages: [PageID: PageRecord]
    private var contexts: [ReplicaContext]
    private var buffer = CausalBuffer()

    public init(state: DocumentState, pending: [Op] = []) {
        id = state.id
        clock = state.clock
        maxLamport = state.maxLamport
        created = state.created
        modified = state.modified
        title = state.title
        deleted = state.deleted
        pages = Dictionary(uniqueKeysWithValues: state.pages.map { ($0.id, $0) })
        contexts = state.contexts
        for op in pending where !clock.covers(op.id) { _ = buffer.insert(op) }
    }

    public init(id: DocumentID) { self.init(state: DocumentState(id: id)) }

    public var state: DocumentState {
        DocumentState(id: id, clock: clock, maxLamport: maxLamport, created: created, modified: modified,
                      title: title, deleted: deleted, pages: pages.values.sorted(by: PageRecord.orderLess),
                      contexts: contexts)
    }

    public var pending: [Op] { buffer.operations }
    public func contains(_ id: OpID) -> Bool { clock.covers(id) || buffer.contains(id) }
    public func page(_ id: PageID) -> PageRecord? { pages[id] }
    /// Live pages in order.
    public var livePages: [PageRecord] { pages.values.filter { !$0.deleted.value }.sorted(by: PageRecord.orderLess) }

    // MARK: - Local edits

    /// Builds a local document operation, applies it, and returns it.
    /// - Throws: `.invalidArgument` for an edit naming an unknown page, `.invalidState` for a
    ///   page operation or a second `createDocument`.
    public mutating func make(_ body: Op.Body, by replica: ReplicaID, wallTime: Int64) throws -> Op {
        guard !body.isPageOperation else { throw LnoteError(.invalidState, "\(body.name) is not a document operation") }
        let op = Op(id: OpID(replica: replica, counter: clock[replica] + 1), lamport: maxLamport + 1,
                           context: clock, wallTime: wallTime, body: body)
        switch body {
        case .createDocument:
            guard clock.isEmpty else { throw LnoteError(.invalidState, "document \(id) already exists") }
        case .addPage(let p, _, _):
            guard pages[p] == nil else { throw LnoteError(.alreadyExists, "page \(p) already exists") }
        case .deletePage(let p, _), .restorePage(let p), .movePage(let p, _), .setCanvas(let p, _):
            guard pages[p] != nil else { throw LnoteError(.invalidArgument, "no page \(p) in document \(id)") }
        case .setTitle(let t):
            guard t.utf8.count <= OperationCodec.maxTitleBytes else { throw LnoteError(.invalidArgument, "title too long") }
        default: break
        }
        try validateKeys(op)
        apply(op)
        return op
    }

    /// The position key for a page placed after `after` (nil: first), by the next local operation.
    public func position(after: PageID?) throws -> ZKey {
        let ordered = pages.values.sorted(by: PageRecord.orderLess)
        let top = Int64(maxLamport + 1)
        guard let after else {
            return ZKey.between(nil, ordered.first?.position.value, top: top, bottom: -top)
        }
        guard let i = ordered.firstIndex(where: { $0.id == after }) else {
            throw LnoteError(.invalidArgument, "no page \(after) in document \(id)")
        }
        let next = i + 1 < ordered.count ? ordered[i + 1].position.value : nil
        return ZKey.between(ordered[i].position.value, next, top: top, bottom: -top)
    }

    /// The position key for a page appended at the end.
    public var endPosition: ZKey { ZKey(layer: Int64(maxLamport + 1)) }

    private func validateKeys(_ op: Op) throws {
        let bound = Int64(clamping: op.lamport)
        func check(_ z: ZKey) throws {
            guard z.layer <= bound, z.layer >= -bound, z.isValid else {
                throw LnoteError(.corrupt, "operation \(op.id) has position \(z) outside ±\(bound)")
            }
        }
        switch op.body {
        case .addPage(_, let z, _), .movePage(_, let z): try check(z)
        default: break
        }
    }

    // MARK: - Receiving

    /// Applies received or replayed operations in any order (see `PageReplica.receive`).
    @discardableResult
    public mutating func receive(_ ops: [Op]) throws -> [Op] {
        for op in ops {
            guard !op.body.isPageOperation else {
                throw LnoteError(.invalidArgument, "\(op.body.name) \(op.id) is not a document operation")
            }
            try validateKeys(op)
        }
        var applied: [Op] = []
        var buf = buffer
        buf.deliver(ops, clock: { self.clock }) { op in
            self.apply(op)
            applied.append(op)
        }
        buffer = buf
        return applied
    }

    // MARK: - The rules

    private mutating func apply(_ op: Op) {
        clock.include(op.id)
        maxLamport = max(maxLamport, op.lamport)
        modified = max(modified, op.wallTime)
        contexts.record(op)
        switch op.body {
        case .createDocument(let t):
            // [MERGE-60] The first operation names the document; a second create (impossible
            // from a correct replica, as document ids are random) only competes as a title write.
            if created == 0 || op.wallTime < created { created = op.wallTime }
            write(&title, t, by: op)
        case .setTitle(let t):
            // [MERGE-61] Title: last writer wins.
            write(&title, t, by: op)
        case .addPage(let p, let position, let canvas):
            // [MERGE-62] Concurrent page adds are all kept; equal positions are ordered by OpRef.
            guard pages[p] == nil else { return }
            pages[p] = PageRecord(id: p, added: op.ref, created: op.wallTime, position: LWWRegister(position),
                                  canvas: LWWRegister(canvas))
        case .deletePage(let p, let seen):
            // [MERGE-63] Deletion is soft and last-writer-wins against restore; the page keeps
            // its content, and the page clock the delete had seen tells concurrent edits apart.
            guard op.context.covers(pageAdd(p)) else { return }
            pages[p].map { var r = $0
                let wins = r.deleted.winner.map { op.ref > $0 } ?? true
                write(&r.deleted, true, by: op)
                if wins { r.deletedSeen = seen }
                pages[p] = r
            }
        case .restorePage(let p):
            guard op.context.covers(pageAdd(p)) else { return }
            pages[p].map { var r = $0
                let wins = r.deleted.winner.map { op.ref > $0 } ?? true
                write(&r.deleted, false, by: op)
                if wins { r.deletedSeen = nil }
                pages[p] = r
            }
        case .movePage(let p, let position):
            // [MERGE-64] Page order: last writer wins per page.
            guard op.context.covers(pageAdd(p)) else { return }
            pages[p].map { var r = $0; write(&r.position, position, by: op); pages[p] = r }
        case .setCanvas(let p, let canvas):
            guard op.context.covers(pageAdd(p)) else { return }
            pages[p].map { var r = $0; write(&r.canvas, canvas, by: op); pages[p] = r }
        case .deleteDocument:
            write(&deleted, true, by: op)
        case .restoreDocument:
            write(&deleted, false, by: op)
        default:
            break
        }
    }

    /// The id of the operation that added page `p` (a zero id when unknown, which no context covers).
    private func pageAdd(_ p: PageID) -> OpID {
        pages[p]?.added.id ?? OpID(replica: ReplicaID(UInt64.max), counter: UInt64.max)
    }

    // MARK: - Conflicts

    /// [MERGE-50] Concurrent title, page-order and canvas writes; and pages
    /// deleted while another replica edited them (given each page's current clock).
    public func conflicts(pageClocks: [PageID: VectorClock] = [:]) -> [Conflict] {
        var out: [Conflict] = []
        if title.isConflicted { out.append(Conflict(kind: .title, ops: title.frontier, winner: title.winner!)) }
        for p in pages.values.sorted(by: PageRecord.orderLess) {
            if p.position.isConflicted {
                out.append(Conflict(kind: .pageOrder, page: p.id, ops: p.position.frontier, winner: p.position.winner!))
            }
            if p.canvas.isConflicted {
                out.append(Conflict(kind: .canvas, page: p.id, ops: p.canvas.frontier, winner: p.canvas.winner!))
            }
            if p.deleted.value, let seen = p.deletedSeen, let pageClock = pageClocks[p.id], !seen.covers(pageClock) {
                let winner = p.deleted.winner!
                out.append(Conflict(kind: .pageDelete, page: p.id, ops: [winner], winner: winner))
            }
        }
        return out
    }
}
