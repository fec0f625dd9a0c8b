import LnoteModel

/// What time travel reads of an operation to find a moment: its id, context and wall time.
/// Operations have them, and so do the headers of their frames (decoded without the body).
public protocol HistoryStamp {
    var id: OpID { get }
    var context: VectorClock { get }
    var wallTime: Int64 { get }
}

extension Op: HistoryStamp {}
extension OperationCodec.Header: HistoryStamp {}

/// Time travel over one log's operations (merge-semantics.md §6): which operations a moment
/// names, and the state they make. Pure, like the replicas: the caller supplies the
/// operations its log holds.
public enum History {
    /// [MERGE-81] The clock a moment names among a log's operations, before its cut.
    ///
    /// - Parameters:
    ///   - ops: the operations the log holds (applied or waiting; duplicates ignored).
    ///   - applied: the log's applied clock; only operations it covers count for a wall time.
    /// - Throws: `notFound` for an operation the log does not hold, or holds but has not
    ///   applied (it waits for operations it depends on, [MERGE-40]).
    public static func clock(of point: HistoryPoint, in ops: [some HistoryStamp], applied: VectorClock, log: String? = nil) throws -> VectorClock {
        switch point {
        case .clock(let c):
            return c
        case .operation(let id):
            guard let op = ops.first(where: { $0.id == id }) else {
                throw LnoteError(.notFound, "operation \(id) is not in this log", path: log)
            }
            guard applied.covers(id) else {
                throw LnoteError(.notFound, "operation \(id) waits for operations it depends on: it is not part of any state yet", path: log)
            }
            var c = op.context
            c.include(id)
            return c
        case .wallTime(let t):
            var c = VectorClock()
            for op in ops where op.wallTime <= t && applied.covers(op.id) {
                c.merge(op.context)
                c.include(op.id)
            }
            return c
        }
    }

    /// [MERGE-80] The cut of `clock`: the greatest clock at most `clock ∧ applied` that
    /// covers each of its operations' contexts. Operations it covers that are not in `ops`
    /// are not looked at: `check(_:…)` refuses a cut that needs them.
    public static func cut(_ clock: VectorClock, in ops: [some HistoryStamp], applied: VectorClock) -> VectorClock {
        var cut = clock.meet(applied)
        // Operations by author, by counter: lowering an entry only ever removes operations
        // above the new bound, so each pass looks at what the cut still covers.
        var changed = true
        while changed {
            changed = false
            for op in ops where op.id.counter > 0 && cut.covers(op.id) && !cut.covers(op.context) {
                cut[op.id.replica] = op.id.counter - 1
                changed = true
            }
        }
        return cut
    }

    /// [MERGE-82] Refuses a cut this log cannot rebuild: one that does not cover the
    /// checkpoint base (`base`), or that covers an operation neither held (`ops`) nor under
    /// the base.
    public static func check(_ cut: VectorClock, ops: [Op], base: VectorClock?, log: String? = nil) throws {
        if let base, !cut.covers(base) {
            throw LnoteError(.invalidState, "that moment is not above the checkpoint this page was installed from (\(base)): the operations under it are not held here",
                             path: log)
        }
        // Counted, each id once: a replica's range is whole when it holds as many of its
        // counters as the range has. Only a range that is not looks for its first hole.
        var inRange: [ReplicaID: UInt64] = [:]
        var counted = OpIDTable(minimumCapacity: ops.count)
        for op in ops {
            let r = op.id.replica
            if op.id.counter > (base?[r] ?? 0) && op.id.counter <= cut[r] && counted.insert(op.id) { inRange[r, default: 0] += 1 }
        }
        for e in cut.entries {
            let from = (base?[e.replica] ?? 0) + 1
            guard from <= e.counter, inRange[e.replica, default: 0] < e.counter - from + 1 else { continue }
            let counters = Set(ops.lazy.filter { $0.id.replica == e.replica }.map(\.id.counter))
            for c in from...e.counter where !counters.contains(c) {
                throw LnoteError(.invalidState, "that moment needs operation \(OpID(replica: e.replica, counter: c)), which this log lost (a peer that holds it can send it back)",
                                 path: log)
            }
        }
    }

    /// The state of a page log as of a moment: `base` (a state the moment starts from: a
    /// checkpoint base or a past snapshot whose clock the cut covers; nil for an empty page)
    /// with the operations the moment's cut covers and `base` does not applied ([MERGE-80] –
    /// [MERGE-82]), its points as `base` and `ops` hold them (decoded, or deferred).
    ///
    /// `allowingDeferred`: operations read from a store's own log with their points deferred
    /// ([LOG-27]) pass with every other field checked; their points are checked when decoded.
    /// Without it (the default) such an operation is refused, as `PageReplica.receive` does.
    public static func pageState(_ page: PageID, at point: HistoryPoint, ops: [Op], applied: VectorClock,
                                 base: PageState? = nil, log: String? = nil, allowingDeferred: Bool = false) throws -> PageState {
        let cut = try self.cut(clock(of: point, in: ops, applied: applied, log: log), in: ops, applied: applied)
        try check(cut, ops: ops, base: base?.clock, log: log)
        var replica = base.map { PageReplica(state: $0) } ?? PageReplica(page: page)
        let baseClock = base?.clock ?? VectorClock()
        try replica.receive(ops.filter { cut.covers($0.id) && !baseClock.covers($0.id) }, allowingDeferred: allowingDeferred)
        guard replica.clock == cut else {
            throw LnoteError(.invalidState, "the operations up to \(cut) made the clock \(replica.clock): the log holds operations that do not fit together",
                             path: log)
        }
        return replica.state
    }

    /// The state of a document log as of a moment ([MERGE-80] – [MERGE-83]).
    public static func documentState(_ document: DocumentID, at point: HistoryPoint, ops: [Op], applied: VectorClock,
                                     log: String? = nil) throws -> DocumentState {
        let cut = try self.cut(clock(of: point, in: ops, applied: applied, log: log), in: ops, applied: applied)
        try check(cut, ops: ops, base: nil, log: log)
        var replica = DocumentReplica(id: document)
        try replica.receive(ops.filter { cut.covers($0.id) })
        guard replica.state.clock == cut else {
            throw LnoteError(.invalidState, "the operations up to \(cut) made the clock \(replica.state.clock): the log holds operations that do not fit together",
                             path: log)
        }
        return replica.state
    }
}

/// One step of a log's history as a person reads it ([MERGE-84]): one operation, with what
/// it names and the moment it made.
public struct HistoryStep: Hashable, Sendable {
    public var id: OpID
    public var author: ReplicaID { id.replica }
    /// The author's wall time, ms since 1970.
    public var wallTime: Int64
    /// The operation's kind (`Op.Body.name`).
    public var kind: String
    /// The elements it adds or edits (page logs), in the order it names them.
    public var elements: [ElementID]
    /// The pages it names (document logs).
    public var pages: [PageID]
    /// Points it adds (a stroke's), or names (a partial erase: the points its ranges cover,
    /// before clamping to the stroke).
    public var points: Int
    /// The operation waits for operations it depends on ([MERGE-40]): not part of any state yet.
    public var pending: Bool
    /// Its context plus its id: give it back (`HistoryPoint.clock`) to see the state it made.
    public var moment: VectorClock
    /// One line, as `lnote log` prints it.
    public var summary: String
}

extension History {
    /// [MERGE-84] The steps of a log, in log order.
    public static func steps(_ ops: [Op], applied: VectorClock) -> [HistoryStep] {
        ops.map { op in
            var elements: [ElementID] = []
            var pages: [PageID] = []
            var points = 0
            switch op.body {
            case .add(let content, _):
                elements = [op.id]
                if case .stroke(let s) = content { points = s.pointCount }
            case .erase(let ids), .restore(let ids): elements = ids
            case .eraseRange(let id, let ranges), .restoreRange(let id, let ranges):
                elements = [id]
                points = ranges.normalizedUnion().reduce(0) { $0 + $1.count }
            case .move(let ts): elements = ts.map(\.element)
            case .reorder(let zs): elements = zs.map(\.element)
            case .addPage(let p, _, _), .deletePage(let p, _), .restorePage(let p), .movePage(let p, _), .setCanvas(let p, _):
                pages = [p]
            case .createDocument, .setTitle, .deleteDocument, .restoreDocument:
                break
            }
            return HistoryStep(id: op.id, wallTime: op.wallTime, kind: op.body.name, elements: elements, pages: pages,
                               points: points, pending: !applied.covers(op.id), moment: op.clock, summary: op.summary)
        }
    }
}
