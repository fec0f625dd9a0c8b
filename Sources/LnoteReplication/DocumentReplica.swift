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
    /// See `PageReplica.stage`.
    private var stage = LogClockStage()
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

    /// Builds a local document operation, applies it, and returns it ([MERGE-2]).
    /// - Throws: `.invalidArgument` for an edit naming an unknown page, `.invalidState` for a
    ///   page operation or a second `createDocument`, `.limitExceeded` when the log has
    ///   reached the greatest Lamport timestamp.
    public mutating func make(_ body: Op.Body, by replica: ReplicaID, wallTime: Int64) throws -> Op {
        guard !body.isPageOperation else { throw LnoteError(.invalidState, "\(body.name) is not a document operation") }
        let context = try localContext(for: body, by: replica)
        let op = Op(id: OpID(replica: replica, counter: clock[replica] + 1),
                    lamport: try LocalContext.lamport(after: context, in: "document \(id)"),
                    context: context, wallTime: wallTime, body: body)
        switch body {
        case .createDocument:
            guard clock.isEmpty else { throw LnoteError(.invalidState, "document \(id) already exists") }
        case .addPage(let p, _, _):
            guard pages[p] == nil else { throw LnoteError(.alreadyExists, "page \(p) already exists") }
        case .deletePage(let p, _):
            // [MERGE-2] A delete names a page live in its author's state, a restore a deleted
            // one: deleting a page again (or restoring a live one) would take over the flag and
            // silently end the conflict of a delete with edits made concurrently ([MERGE-63]).
            guard let page = pages[p] else { throw LnoteError(.invalidArgument, "no page \(p) in document \(id)") }
            guard !page.deleted.value else { throw LnoteError(.invalidState, "page \(p) is already deleted") }
        case .restorePage(let p):
            guard let page = pages[p] else { throw LnoteError(.invalidArgument, "no page \(p) in document \(id)") }
            guard page.deleted.value else { throw LnoteError(.invalidState, "page \(p) is not deleted") }
        case .movePage(let p, _), .setCanvas(let p, _):
            guard pages[p] != nil else { throw LnoteError(.invalidArgument, "no page \(p) in document \(id)") }
        default: break
        }
        // A local edit out of bounds (a title too long or with a control character, …) is the
        // caller's mistake: invalidArgument, naming the rule.
        if let v = OpValidator.violation(of: op) { throw LnoteError(.invalidArgument, v.description) }
        // [MERGE-5] See `PageReplica.make`.
        guard context == clock || contexts.lamportExceedsItsPast(op) else {
            throw LocalContext.tooWide("this edit of document \(id)", width: clock.entries.count)
        }
        buffer.clockMovedOutside()
        apply(op)
        stage.settle(clock: &clock, contexts: &contexts)
        return op
    }

    /// The Lamport timestamp of the next local operation: the operations applied, plus one
    /// ([MERGE-2]); in a wide log ([MERGE-5]) the least the next operation can get.
    public func nextLamport() throws -> UInt64 {
        try LocalContext.lamport(after: wideBase ?? clock, in: "document \(id)")
    }

    /// [MERGE-5] The context of a local operation by `replica`: the clock, or in a wide log
    /// the least closed clock that covers the author's own operations, the first and last
    /// pages, and every operation that wrote what the body writes.
    private func localContext(for body: Op.Body, by replica: ReplicaID) throws -> VectorClock {
        guard LocalContext.isWide(clock, for: replica) else { return clock }
        // Required: the author's own operations and the page's least add (the one naming it).
        // Wanted: its other adds and the writes of the register written.
        var named: [OpID] = clock[replica] > 0 ? [OpID(replica: replica, counter: clock[replica])] : []
        var wanted: [OpID] = []
        switch body {
        case .createDocument, .setTitle:
            wanted = title.frontier.map(\.id)
        case .deleteDocument, .restoreDocument:
            wanted = deleted.frontier.map(\.id)
        case .deletePage(let p, _), .restorePage(let p), .movePage(let p, _), .setCanvas(let p, _):
            if let r = pages[p] {
                named += r.adds.prefix(1).map(\.id)
                switch body {
                case .movePage: wanted = r.position.frontier.map(\.id)
                case .setCanvas: wanted = r.canvas.frontier.map(\.id)
                default: wanted = r.deleted.frontier.map(\.id)
                }
                wanted = r.adds.dropFirst().map(\.id) + wanted
            }
        default:
            break
        }
        guard let c = LocalContext.closure(of: named, wanting: wanted, from: wideBase ?? VectorClock(), besides: replica,
                                           contexts: contexts) else {
            throw LocalContext.tooWide("this edit of document \(id)", width: clock.entries.count)
        }
        return c
    }

    /// [MERGE-5] In a wide log, the least closed clock that covers the first and last pages'
    /// adds and position writes (each left out when that takes more than a context may name);
    /// nil in a log that is not wide.
    private var wideBase: VectorClock? {
        guard LocalContext.isWide(clock, for: nil) else { return nil }
        let ordered = pages.values.sorted(by: PageRecord.orderLess)
        var base = VectorClock()
        for r in [ordered.last, ordered.first].compactMap({ $0 }) {
            if let c = LocalContext.closure(of: r.adds.map(\.id) + r.position.frontier.map(\.id), from: base,
                                            besides: nil, contexts: contexts) {
                base = c
            }
        }
        return base
    }

    /// The layer above every position applied here: the next operation's Lamport timestamp
    /// (in a wide log, the least it can be).
    private var topLayer: Int64 { Int64(clamping: (wideBase ?? clock).total + 1) }

    /// The position key for a page placed after page `after` (nil: first) by the next local
    /// operation ([MERGE-62], [MERGE-13]). `moving` is the page being moved (a `movePage`);
    /// nil for a new page, which the next operation of `replica` adds.
    public func position(after: PageID?, moving: PageID? = nil, by replica: ReplicaID) throws -> ZKey {
        let tag: OpID
        if let moving {
            guard let m = pages[moving] else { throw LnoteError(.invalidArgument, "no page \(moving) in document \(id)") }
            tag = m.added.id
        } else {
            tag = OpID(replica: replica, counter: clock[replica] + 1)
        }
        let ordered = pages.values.filter { $0.id != moving }.sorted(by: PageRecord.orderLess)
        func bound(_ i: Int) -> (key: ZKey, tag: OpID)? {
            i >= 0 && i < ordered.count ? (ordered[i].position.value, ordered[i].added.id) : nil
        }
        let top = topLayer
        let key: ZKey
        if let after {
            guard after != moving else { throw LnoteError(.invalidArgument, "cannot move page \(after) after itself") }
            guard let i = ordered.firstIndex(where: { $0.id == after }) else {
                throw LnoteError(.invalidArgument, "no page \(after) in document \(id)")
            }
            key = ZKey.between(bound(i), bound(i + 1), for: tag, top: top, bottom: -top)
        } else {
            key = ZKey.between(nil, bound(0), for: tag, top: top, bottom: -top)
        }
        // Only neighbours whose keys are already 32 steps deep leave no room ([MERGE-13]).
        if let problem = key.validityProblem {
            throw LnoteError(.limitExceeded, "no room for a page there in document \(id): \(problem)")
        }
        return key
    }

    /// The position key for a page appended at the end.
    public var endPosition: ZKey { ZKey(layer: topLayer) }

    // MARK: - Receiving

    /// Applies received or replayed operations in any order (see `PageReplica.receive`).
    @discardableResult
    public mutating func receive(_ ops: [Op]) throws -> [Op] {
        for op in ops {
            guard !op.body.isPageOperation else {
                throw LnoteError(.invalidArgument, "\(op.body.name) \(op.id) is not a document operation")
            }
            try OpValidator.validate(op)
        }
        var applied: [Op] = []
        // Moved out, not copied: a copy would copy its dictionaries at the first change.
        var buf = CausalBuffer()
        swap(&buf, &buffer)
        buf.deliver(ops, counter: { self.stage.counter($0, in: self.clock) }) { op in
            self.apply(op)
            applied.append(op)
        }
        buffer = buf
        stage.settle(clock: &clock, contexts: &contexts)
        return applied
    }

    // MARK: - The rules

    private mutating func apply(_ op: Op) {
        stage.include(op.id, in: &clock)
        maxLamport = max(maxLamport, op.lamport)
        modified = max(modified, op.wallTime)
        // [MERGE-43] A context that leaves out part of what it claims to have seen: counted as
        // received, without effect.
        let consistent = stage.lamportExceedsItsPast(op, in: contexts)
        stage.record(op, in: &contexts)
        guard consistent else { return }
        switch op.body {
        case .createDocument(let t):
            // [MERGE-60] The first operation names the document; a second create (impossible
            // from a correct replica, as document ids are random) only competes as a title
            // write. `created` is the greatest of their wall times and 0, which no order of
            // delivery changes (a least needs to know whether any was applied: 0 is also a
            // wall time).
            created = max(created, op.wallTime)
            write(&title, t, by: op)
        case .setTitle(let t):
            // [MERGE-61] Title: last writer wins.
            write(&title, t, by: op)
        case .addPage(let p, let position, let canvas):
            // [MERGE-62] Concurrent adds of different pages are all kept. An add writes the
            // page's position and canvas registers; a page id added twice (only a faulty or
            // hostile replica does that) keeps every add, the least naming the page.
            // In place (one lookup): a copy of the record would copy a large frontier.
            func add(to r: inout PageRecord) {
                r.adds.insert(op.ref, at: r.adds.partitioningIndex { $0 > op.ref })
                r.created = min(r.created, op.wallTime)
                write(&r.position, position, by: op)
                write(&r.canvas, canvas, by: op)
            }
            add(to: &pages[p, default: PageRecord(id: p, adds: [], created: op.wallTime, position: LWWRegister(position),
                                                  canvas: LWWRegister(canvas))])
        case .deletePage(let p, let seen):
            // [MERGE-63] Deletion is soft and last-writer-wins against restore; the page keeps
            // its content, and the page clock the delete had seen tells concurrent edits apart.
            guard sawAdded(p, op) else { return }
            // In place, here and below: a copy of the record would copy a large frontier.
            guard pages[p] != nil else { return }
            let wins = pages[p]!.deleted.winner.map { op.ref > $0 } ?? true
            write(&pages[p]!.deleted, true, by: op)
            if wins { pages[p]!.deletedSeen = seen }
        case .restorePage(let p):
            guard sawAdded(p, op) else { return }
            guard pages[p] != nil else { return }
            let wins = pages[p]!.deleted.winner.map { op.ref > $0 } ?? true
            write(&pages[p]!.deleted, false, by: op)
            if wins { pages[p]!.deletedSeen = nil }
        case .movePage(let p, let position):
            // [MERGE-64] Page order: last writer wins per page.
            guard sawAdded(p, op) else { return }
            if pages[p] != nil { write(&pages[p]!.position, position, by: op) }
        case .setCanvas(let p, let canvas):
            guard sawAdded(p, op) else { return }
            if pages[p] != nil { write(&pages[p]!.canvas, canvas, by: op) }
        case .deleteDocument:
            write(&deleted, true, by: op)
        case .restoreDocument:
            write(&deleted, false, by: op)
        default:
            break
        }
    }

    /// True when `op`'s author had seen page `p` added: an edit of a page its author could
    /// not have seen is ignored ([MERGE-42]). Whichever add the context covers is applied
    /// before `op`, so the answer does not depend on the order of arrival.
    private func sawAdded(_ p: PageID, _ op: Op) -> Bool {
        pages[p]?.adds.contains { op.context.covers($0.id) } ?? false
    }

    // MARK: - Conflicts

    /// [MERGE-50] Concurrent title, page-order and canvas writes; and pages
    /// deleted while another replica edited them (given each page's current clock).
    public func conflicts(pageClocks: [PageID: VectorClock] = [:]) -> [Conflict] {
        state.conflicts(pageClocks: pageClocks)
    }
}
