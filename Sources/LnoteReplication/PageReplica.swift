import LnoteModel

/// One page's replicated state and the deterministic merge that maintains it.
///
/// Pure: no files, no clocks read from the system (wall times are given), no randomness.
/// Operations may be received in any order, in batches, and more than once: each is applied
/// exactly once, in causal order (those whose dependencies have not arrived wait in
/// `pending`). Every rule is a function of the set of applied operations, so replicas that
/// received the same operations hold equal `state`s. The rules are specified in
/// `Protocol/merge-semantics.md`; the ids below ([MERGE-n]) refer to it.
public struct PageReplica: Sendable {
    public let page: PageID
    public private(set) var clock: VectorClock
    public private(set) var maxLamport: UInt64
    private var modified: Int64
    private var contexts: [ReplicaContext]
    /// Replicas new to the log while operations are applied, merged into `clock` and
    /// `contexts` when they are (empty otherwise).
    private var stage = LogClockStage()
    /// Live elements, by id and bottom to top.
    private var records: ElementTable
    /// Tombstones, by id (`TombstoneTable`).
    private var tombstones: TombstoneTable
    private var buffer = CausalBuffer()
    /// Strokes whose partial erases or range restores a batch appended out of ref order
    /// (sorted when it ends: an insertion into the middle of each stroke's list, per erase,
    /// would be quadratic in the concurrent partial erases of one stroke).
    private var unsortedRangeErasures: [ElementID] = []

    /// Starts from a snapshot's state; `pending` are operations that were waiting when it
    /// was taken (they are re-offered to the causal buffer).
    ///
    /// The state is consumed: when the caller hands over the only reference to its
    /// elements (`PageReplica(state: consume s)`), their array moves into the table whole,
    /// without a record copied (`ElementTable`). A shared state is shared until written.
    ///
    /// `reservingAdds`: how many elements the caller is about to add (the operations of a log
    /// tail), so that their room is made once.
    ///
    /// `deferredPoints`: the source of the state's deferred strokes, when the caller read it
    /// (`PageSnapshot.Contents.deferredPoints`); without it the state is searched for them.
    public init(state: consuming PageState, pending: [Op] = [], reservingAdds: Int = 0) {
        self.init(state: state, pending: pending, reservingAdds: reservingAdds, deferredPoints: nil)
    }

    /// `init(state:pending:reservingAdds:)`, told where the state's deferred points are
    /// (`.some(nil)`: nowhere) by the reader that decoded it, so that the state is not searched.
    ///
    /// With `unbuilt` (`PageSnapshot.Contents.unbuilt`, [SNAP-46]), the state's elements are
    /// those records, not parsed yet (its `elements` MUST be empty): the replica is then not
    /// resolved, and reads them (`buildRecords()`) before anything but listing its ids,
    /// counting them and applying plain adds on top.
    package init(state: consuming PageState, pending: [Op] = [], reservingAdds: Int = 0,
                 deferredPoints: DeferredPoints??, unbuilt: UnbuiltRecords? = nil) {
        precondition(unbuilt == nil || state.elements.isEmpty, "unbuilt records beside built ones")
        page = state.page
        var sources: [DeferredPoints] = []
        if let given = deferredPoints {
            if let d = given { sources = [d] }
        } else {
            // The sources of the state's deferred strokes (one snapshot's, in practice).
            // (Erased elements' records too: a state handed over after an erase keeps theirs.)
            for e in state.elements + state.tombstones.compactMap(\.record) {
                guard case .stroke(let s) = e.content, let d = s.deferredSource else { continue }
                if !sources.contains(where: { $0 === d }) { sources.append(d) }
            }
        }
        // Waiting operations handed over may hold deferred points too.
        for op in pending {
            guard case .add(.stroke(let s), _) = op.body, let d = s.deferredSource else { continue }
            if !sources.contains(where: { $0 === d }) { sources.append(d) }
        }
        deferredSources = sources
        isResolved = sources.isEmpty && unbuilt == nil
        clock = state.clock
        maxLamport = state.maxLamport
        modified = state.modified
        contexts = state.contexts
        var elements: [ElementRecord] = []
        swap(&elements, &state.elements)
        // Handed over (not copied): the table may grow the array in place.
        records = ElementTable(ordered: consume elements, reserving: reservingAdds, unbuilt: unbuilt)
        var erased: [Tombstone] = []
        swap(&erased, &state.tombstones)
        // Handed over (not copied), as the elements are.
        tombstones = TombstoneTable(sorted: consume erased)
        for op in pending where !clock.covers(op.id) { _ = buffer.insert(op) }
    }

    public init(page: PageID) { self.init(state: PageState(page: page)) }

    /// False while some stroke of the state it started from, or of an operation replayed
    /// from the page's own log, still has its points deferred (page-snapshot.md [SNAP-38],
    /// operation-log.md [LOG-27]). The merge never needs points, only their count; `state`,
    /// `elements` and `element(_:)` give such strokes as they are held (`Stroke.isResolved`
    /// false, `points` empty): call `resolve()` before reading points or encoding the state.
    public private(set) var isResolved: Bool
    /// Every source of deferred points this replica took in — its starting state's, and every
    /// replayed operation's, whether the operation was applied, is waiting, was erased since
    /// or had no effect — until `resolve()` has checked them all.
    private var deferredSources: [DeferredPoints]

    /// Decodes and checks every deferred point stream this replica took in (on every core),
    /// including those of strokes erased since and of operations that wait or had no effect,
    /// then gives every live element and every waiting operation its points.
    /// - Throws: `corrupt`, naming the snapshot or log and the byte offset, when one does
    ///   not decode; nothing is changed then.
    public mutating func resolve() throws {
        guard !isResolved else { return }
        try buildRecords()
        try DeferredPoints.check(deferredSources)
        try records.resolvePoints()
        // Erased elements keep their records ([MERGE-30]): those erased since the start hold
        // their points as they were read.
        // Every source was checked above: each stroke takes its points from its chunk's outcome.
        try tombstones.update { t in
            guard let r = t.record, !r.content.isResolved else { return nil }
            var resolved = t
            resolved.record = try r.resolved()
            return resolved
        }
        try buffer.update { op in
            guard case .add(let content, let z) = op.body, !content.isResolved else { return op }
            var resolved = op
            resolved.body = .add(try content.resolved(), z: z)
            return resolved
        }
        deferredSources = []
        isResolved = true
    }

    /// One live element with its points decoded (only its chunk is decoded when they were
    /// deferred); nil when `id` is not live.
    public func resolvedElement(_ id: ElementID) throws -> ElementRecord? {
        try records.buildUnbuilt()
        return try records[id]?.resolved()
    }

    /// True while the replica starts from snapshot records a listing open left unparsed
    /// ([SNAP-46]), read or not yet: `buildRecords()` reads them.
    public var hasUnbuiltRecords: Bool { records.hasUnbuilt }

    /// Reads the snapshot records a listing open left unparsed ([SNAP-46]), if any: after it
    /// returns, every reader may read them. The replica stays unresolved (their points are
    /// deferred, checked by `resolve()`). Every throwing entry point that reads or changes
    /// records calls it first (`resolve`, `resolvedElement`, `make`, `add`, `move`,
    /// `bringToFront`, `sendToBack`, `receive`, `key(adjacentTo:above:for:)`, `nextLamport`);
    /// a caller about to use a non-throwing reader (`state`, `elements`, `element(_:)`,
    /// `conflicts()`, `clockSeen(by:)` in a wide log, …) on a page it loaded to list calls
    /// it, or `resolve()`.
    /// - Throws: `corrupt`, naming the snapshot and the byte offset, when they do not decode:
    ///   nothing is changed then, and the page must be read again eagerly ([PKG-42]).
    public mutating func buildRecords() throws {
        guard records.hasUnbuilt, let source = try records.buildUnbuilt() else { return }
        if !deferredSources.contains(where: { $0 === source }) { deferredSources.append(source) }
    }

    /// The ids of the live elements, bottom to top (no point decoded).
    public var elementIDs: [ElementID] { records.orderedIDs }

    /// The number of live elements.
    public var elementCount: Int { records.count }

    /// The greatest author wall time of the operations applied (`state.modified`, without
    /// materializing the state).
    public var modifiedTime: Int64 { modified }

    /// The materialized state: live elements bottom to top, every tombstone ([MERGE-30]),
    /// the clock and the replica contexts.
    public var state: PageState {
        PageState(page: page, clock: clock, maxLamport: maxLamport, modified: modified,
                  elements: records.ordered,
                  tombstones: tombstones.sorted, contexts: contexts)
    }

    /// Received operations waiting for their dependencies, by id.
    public var pending: [Op] { buffer.operations }

    /// Live elements, bottom to top.
    public var elements: [ElementRecord] { records.ordered }

    public func element(_ id: ElementID) -> ElementRecord? { records[id] }

    /// True when `id` names a live element (`element(id) != nil`, without copying its record).
    public func isLive(_ id: ElementID) -> Bool { records.contains(id) }

    /// True when the operation was applied or is waiting.
    public func contains(_ id: OpID) -> Bool { clock.covers(id) || buffer.contains(id) }

    /// True when `id` names an element that was added here and later erased whole.
    public func wasErased(_ id: ElementID) -> Bool { !records.contains(id) && clock.covers(id) }

    /// The erase history of an element erased whole at least once ([MERGE-70]), nil otherwise.
    public func tombstone(_ id: ElementID) -> Tombstone? { tombstones[id] }

    /// True when a restore of `id` made here would bring it back: it is erased and its
    /// content is held ([MERGE-30]).
    public func isRestorable(_ id: ElementID) -> Bool {
        guard let t = tombstones[id] else { return false }
        return t.isErased && t.record != nil
    }

    // MARK: - Local edits

    /// Builds a local operation, applies it, and returns it (to be logged and sent).
    ///
    /// The id is `(replica, clock[replica] + 1)`, the context the current clock, the Lamport
    /// timestamp the number of operations that clock covers plus one ([MERGE-2]).
    /// - Throws: `.invalidArgument` when the edit names an element that is not live here,
    ///   a range outside a stroke, or a z key or transform out of range; `.invalidState`
    ///   when the body is not a page operation; `.limitExceeded` when the log has reached
    ///   the greatest Lamport timestamp ([LOG-4]).
    public mutating func make(_ body: Op.Body, by replica: ReplicaID, wallTime: Int64) throws -> Op {
        guard body.isPageOperation else {
            throw LnoteError(.invalidState, "\(body.name) is not a page operation")
        }
        try buildRecords()
        let context = try localContext(for: body, by: replica)
        let op = Op(id: OpID(replica: replica, counter: clock[replica] + 1),
                    lamport: try LocalContext.lamport(after: context, in: "page \(page)"),
                    context: context, wallTime: wallTime, body: body)
        try validateLocal(op)
        // [MERGE-5] A closed context passes [MERGE-43]; one built from replica contexts that
        // miss an author (a damaged state) might not, and would be an edit without effect.
        guard context == clock || contexts.lamportExceedsItsPast(op) else {
            throw LocalContext.tooWide("this edit of page \(page)", width: clock.entries.count)
        }
        defer { settle() }
        buffer.clockMovedOutside()
        try apply(op)
        return op
    }

    /// The Lamport timestamp of the next local operation: the operations applied, plus one
    /// ([MERGE-2]). In a wide log ([MERGE-5]) the least the next operation can get: that of
    /// one naming nothing but the top and bottom elements (an edit naming more gets more).
    public func nextLamport() throws -> UInt64 {
        try records.buildUnbuilt()
        return try LocalContext.lamport(after: wideBase ?? clock, in: "page \(page)")
    }

    /// [MERGE-5] The context of a local operation by `replica`: the clock, or in a wide log
    /// the least closed clock that covers the author's own operations, the top and bottom
    /// elements' adds and z writes, and every operation the body's elements carry.
    private func localContext(for body: Op.Body, by replica: ReplicaID) throws -> VectorClock {
        guard LocalContext.isWide(clock, for: replica) else { return clock }
        // Required: the author's own operations, the elements named, and the erasures a
        // restore takes back (those its context does not cover stay). Wanted: the edits the
        // element's registers and frontier hold, which a write should supersede.
        var named: [OpID] = clock[replica] > 0 ? [OpID(replica: replica, counter: clock[replica])] : []
        var wanted: [OpID] = []
        func refs(_ id: ElementID) {
            named.append(id)
            func record(_ r: ElementRecord) {
                // The partial erases that may still hold a point: those whose ranges meet the
                // erased ones (a superset of those that keep something; one taken back whole
                // whose points another erase holds is named too).
                named += r.rangeErasures.filter { !$0.ranges.subtractingNormalized(r.erased).elementsEqual($0.ranges) }.map(\.ref.id)
                wanted += r.frontier.map(\.id) + r.transform.frontier.map(\.id) + r.z.frontier.map(\.id)
            }
            if let r = records[id] { record(r) }
            if let t = tombstones[id] {
                named += t.erasures.map(\.ref.id)
                wanted += t.frontier.map(\.id)
                if let r = t.record { record(r) }
            }
        }
        switch body {
        case .erase(let ids), .restore(let ids): ids.forEach(refs)
        case .eraseRange(let id, _), .restoreRange(let id, _): refs(id)
        case .move(let ts): ts.forEach { refs($0.element) }
        case .reorder(let zs): zs.forEach { refs($0.element) }
        default: break
        }
        guard let c = LocalContext.closure(of: named, wanting: wanted, from: wideBase ?? VectorClock(), besides: replica,
                                           contexts: contexts) else {
            throw LocalContext.tooWide("this edit of page \(page)", width: clock.entries.count)
        }
        return c
    }

    /// [MERGE-5] In a wide log, the least closed clock that covers the top and the bottom
    /// live elements' adds and z writes (each left out when that takes more than a context
    /// may name): a key put above (below) everything needs a layer beyond theirs. nil in a
    /// log that is not wide.
    private var wideBase: VectorClock? {
        guard LocalContext.isWide(clock, for: nil) else { return nil }
        var base = VectorClock()
        let ends = records.count == 0 ? [] : [records.record(atPosition: records.count - 1), records.record(atPosition: 0)]
        for r in ends {
            if let c = LocalContext.closure(of: [r.id] + r.z.frontier.map(\.id), from: base, besides: nil, contexts: contexts) {
                base = c
            }
        }
        return base
    }

    /// The clock a `deletePage` of this page made by `replica` carries ([MERGE-63]): the
    /// page's clock, or in a wide log ([MERGE-5]) the least closed clock that covers the
    /// author's own operations and the top and bottom elements (what it does not cover
    /// counts as concurrent with the delete: a conflict reported, nothing lost).
    public func clockSeen(by replica: ReplicaID) -> VectorClock {
        guard LocalContext.isWide(clock, for: nil) else { return clock }
        let own = clock[replica] > 0 ? [OpID(replica: replica, counter: clock[replica])] : []
        let base = wideBase ?? VectorClock()
        return LocalContext.closure(of: own, from: base, besides: nil, contexts: contexts) ?? base
    }

    /// The layer of a key on top of everything applied here: the next operation's Lamport
    /// timestamp (in a wide log, the least it can be).
    private var topLayer: Int64 { Int64(clamping: (wideBase ?? clock).total + 1) }

    /// The z key for an element placed on top of everything visible, by the next local operation.
    public var topKey: ZKey { ZKey(layer: topLayer) }
    /// The z key for an element placed below everything, by the next local operation.
    public var bottomKey: ZKey { ZKey(layer: -topLayer) }

    /// A z key that puts element `tag` just above (`above == true`) or just below element
    /// `id` as this replica sees it ([MERGE-13]). `tag` is the element being placed: the id
    /// of the next local operation for a new element, the element itself for a reorder.
    public func key(adjacentTo id: ElementID, above: Bool, for tag: ElementID) throws -> ZKey {
        try records.buildUnbuilt()
        guard let i = records.position(of: id) else {
            throw LnoteError(.invalidArgument, "no live element \(id) on page \(page)")
        }
        func bound(_ j: Int) -> (key: ZKey, tag: OpID)? {
            guard j >= 0, j < records.count else { return nil }
            let other = records.record(atPosition: j)
            // An element placed next to its own neighbour skips itself.
            if other.id == tag { return bound(j + (above ? 1 : -1)) }
            return (other.z.value, other.id)
        }
        let top = topLayer
        let me = (key: records[id]!.z.value, tag: id)
        let key = above ? ZKey.between(me, bound(i + 1), for: tag, top: top, bottom: -top)
                        : ZKey.between(bound(i - 1), me, for: tag, top: top, bottom: -top)
        // Only neighbours whose keys are already 32 steps deep leave no room ([MERGE-13]);
        // no correct replica makes such keys.
        if let problem = key.validityProblem {
            throw LnoteError(.limitExceeded, "no room \(above ? "above" : "below") \(id) on page \(page): \(problem)")
        }
        return key
    }

    /// Adds an element on top (or just above / below another), as the next local operation.
    public mutating func add(_ content: ElementContent, by replica: ReplicaID, wallTime: Int64,
                             above: ElementID? = nil, below: ElementID? = nil) throws -> Op {
        try buildRecords()
        let z: ZKey
        let me = OpID(replica: replica, counter: clock[replica] + 1)
        if let above { z = try key(adjacentTo: above, above: true, for: me) }
        else if let below { z = try key(adjacentTo: below, above: false, for: me) }
        else { z = topKey }
        return try make(.add(content, z: z), by: replica, wallTime: wallTime)
    }

    /// Moves elements by (dx, dy) tenths of a point relative to where this replica shows them.
    public mutating func move(_ ids: [ElementID], dx: Int32, dy: Int32, by replica: ReplicaID,
                              wallTime: Int64) throws -> Op {
        try buildRecords()
        let ts = try ids.map { id -> ElementTransform in
            guard let r = records[id] else { throw LnoteError(.invalidArgument, "no live element \(id) on page \(page)") }
            return ElementTransform(id, try r.transform.value.translated(by: dx, dy))
        }
        return try make(.move(ts), by: replica, wallTime: wallTime)
    }

    /// Brings elements to the front (keeping their relative order) as the next local operation.
    public mutating func bringToFront(_ ids: [ElementID], by replica: ReplicaID, wallTime: Int64) throws -> Op {
        try buildRecords()
        return try make(.reorder(stacked(try sortedByZ(ids), layer: topLayer)), by: replica, wallTime: wallTime)
    }

    /// Sends elements to the back (keeping their relative order) as the next local operation.
    public mutating func sendToBack(_ ids: [ElementID], by replica: ReplicaID, wallTime: Int64) throws -> Op {
        try buildRecords()
        return try make(.reorder(stacked(try sortedByZ(ids), layer: -topLayer)), by: replica, wallTime: wallTime)
    }

    /// [MERGE-15] The keys of a selection moved to one layer, bottom to top: the k-th
    /// element gets fraction F(k), F(0) empty and F(k+1) = fractionAbove(F(k)).
    private func stacked(_ sorted: [ElementID], layer: Int64) -> [ElementZ] {
        var zs: [ElementZ] = []
        var fraction: [UInt8] = []
        for (k, id) in sorted.enumerated() {
            if k > 0 { fraction = ZKey.fractionAbove(fraction) }
            zs.append(ElementZ(id, ZKey(layer: layer, fraction: fraction)))
        }
        return zs
    }

    private func sortedByZ(_ ids: [ElementID]) throws -> [ElementID] {
        for id in ids where !records.contains(id) {
            throw LnoteError(.invalidArgument, "no live element \(id) on page \(page)")
        }
        let set = Set(ids)
        return records.orderedIDs.filter { set.contains($0) }
    }

    private func validateLocal(_ op: Op) throws {
        func live(_ id: ElementID) throws -> ElementRecord {
            guard let r = records[id] else { throw LnoteError(.invalidArgument, "no live element \(id) on page \(page)") }
            return r
        }
        switch op.body {
        case .erase(let ids):
            for id in ids { _ = try live(id) }
        case .eraseRange(let id, let ranges), .restoreRange(let id, let ranges):
            let r = try live(id)
            guard let s = r.content.stroke else { throw LnoteError(.invalidArgument, "\(id) is not a stroke") }
            for range in ranges where range.isEmpty || Int(range.to) > s.pointCount {
                throw LnoteError(.invalidArgument, "range \(range) is outside stroke \(id) of \(s.pointCount) points")
            }
        case .restore(let ids):
            for id in ids {
                if records.contains(id) { throw LnoteError(.invalidArgument, "element \(id) on page \(page) is not erased") }
                guard let t = tombstones[id], t.isErased else {
                    throw LnoteError(.invalidArgument, "no erased element \(id) on page \(page)")
                }
                guard t.record != nil else {
                    throw LnoteError(.notFound, "the content of erased element \(id) on page \(page) is gone: this replica "
                                     + "holds the page from a checkpoint written before restores; a replica that holds it can restore it")
                }
            }
        case .move(let ts):
            for t in ts { _ = try live(t.element) }
        case .reorder(let zs):
            for z in zs { _ = try live(z.element) }
        default:
            break
        }
        // A local edit out of bounds is the caller's mistake: invalidArgument, naming the rule.
        if let v = OpValidator.violation(of: op) { throw LnoteError(.invalidArgument, v.description) }
    }

    // MARK: - Receiving

    /// Applies operations received from elsewhere (or replayed from the log), in any order.
    ///
    /// Duplicates are ignored; operations whose causal context is not yet applied wait
    /// ([MERGE-40]). Returns the operations applied by this call, in the order applied.
    /// - Throws: `.invalidArgument` for an operation that is not a page operation, `.corrupt`
    ///   for one the validator refuses ([MERGE-12]). Nothing is applied then.
    /// An operation holding deferred points ([LOG-27]) is refused.
    @discardableResult
    public mutating func receive(_ ops: [Op]) throws -> [Op] { try receive(ops, allowingDeferred: false) }

    /// `receive(_:)`; with `allowingDeferred`, for operations replayed from the page's own
    /// log only, an `addStroke` may hold its points deferred ([LOG-27]): `resolve()` checks
    /// them, whatever became of the operation.
    @discardableResult
    public mutating func receive(_ ops: [Op], allowingDeferred: Bool) throws -> [Op] {
        try receive(ops, allowingDeferred: allowingDeferred, validated: false)
    }

    /// `receive(_:allowingDeferred:)`; with `validated`, the caller vouches that every
    /// operation passed `OpValidator.violation(of:allowingDeferred:)` with the same
    /// `allowingDeferred` (the frame decoder makes that check, [LOG-20]: a replay of decoded
    /// frames need not make it twice).
    @discardableResult
    package mutating func receive(_ ops: [Op], allowingDeferred: Bool, validated: Bool) throws -> [Op] {
        try buildRecords()
        var sources: [DeferredPoints] = []
        // Through the buffer: each operation is checked in place, not copied out first.
        try ops.withUnsafeBufferPointer { b in
            for i in b.indices {
                guard b[i].body.isPageOperation else {
                    throw LnoteError(.invalidArgument, "\(b[i].body.name) \(b[i].id) is not a page operation")
                }
                if !validated { try OpValidator.validate(b[i], allowingDeferred: allowingDeferred) }
                // Also a duplicate of what the state holds: its frame is checked like any other.
                if case .add(.stroke(let s), _) = b[i].body, let d = s.deferredSource { sources.append(d) }
            }
        }
        if !sources.isEmpty {
            deferredSources += sources
            isResolved = false
        }
        var applied: [Op] = []
        // Moved out, not copied: a copy would copy its dictionaries at the first change.
        var buf = CausalBuffer()
        swap(&buf, &buffer)
        defer {
            buffer = buf
            settle()
        }
        try buf.deliver(ops, counter: { self.stage.counter($0, in: self.clock) }) { op in
            try self.apply(op)
            applied.append(op)
        }
        return applied
    }

    /// Applies a plain add read straight from its frame ([LOG-28]) when `receive` would
    /// apply it at once and in full: nothing waits, it is its author's next operation (its
    /// context, the author's own entry alone, is then covered), and its Lamport timestamp
    /// exceeds what that context covers ([MERGE-43]). Exactly what `receive` of the same
    /// operation, decoded, would do then (its points deferred, [LOG-27]). False, with
    /// nothing changed, otherwise: the caller then hands the frame to `receive`.
    package mutating func applyPlainAdd(_ a: PlainAddStroke) -> Bool {
        applyPlainAdds([a]) == 1
    }

    /// `applyPlainAdd` of each of `adds` in order, up to the first that it would not apply:
    /// returns how many were applied (the caller hands the rest to `receive`). The checks run
    /// as they would add by add (each add's [MERGE-43] check sees the timestamps of those
    /// before it), once per run of one author's next counters; the records are then built
    /// straight into the table.
    package mutating func applyPlainAdds(_ adds: [PlainAddStroke]) -> Int {
        var taken = adds
        return applyPlainAdds(taking: &taken)
    }

    /// `applyPlainAdds(_:)`, moving the strokes of the adds it applies into their records
    /// rather than copying them: those adds are left holding an empty stroke. (A copy of a
    /// stroke retains its points and its deferred source; on a page open that is a thousand
    /// atomic operations on one shared object, [LOG-28].)
    package mutating func applyPlainAdds(taking adds: inout [PlainAddStroke]) -> Int {
        guard buffer.isEmpty else { return 0 }
        // [SNAP-46] Over records not parsed yet, only the adds that go on top, each above the
        // one before it: one that goes lower needs the records, which `receive` reads first.
        let limit = records.hasUnbuilt ? addsOnTop(adds) : adds.count
        let n = adds.withUnsafeBufferPointer { b in
            var n = 0
            // Stored properties only: a computed one (`lamport`, `z`) is read from a copy of
            // the whole add, its references retained and released.
            while n < limit {
                let first = b[n].id
                guard stage.counter(first.replica, in: clock) == first.counter - 1,
                      stage.lamportExceedsItsPast(ownContextOf: first, lamport: first.counter, in: contexts) else { break }
                // The adds after it by the same author with the next counters pass both checks
                // once it does: each one's predecessor is the add before it, whose timestamp
                // (its counter) is below its own. So the run is taken whole: the clock and the
                // author's context updated for its first and its last add, which leaves them as
                // updating them for each add in turn would (the clock keeps the greatest
                // counter; the context's timestamps stay `counter + 0` through the run, one
                // Lamport run, [SNAP-16]).
                var end = n + 1
                var latest = b[n].wallTime
                while end < limit, b[end].id.replica == first.replica, b[end].id.counter == b[end - 1].id.counter &+ 1 {
                    latest = max(latest, b[end].wallTime)
                    end += 1
                }
                let last = b[end - 1].id
                stage.include(last, in: &clock)
                maxLamport = max(maxLamport, last.counter)
                modified = max(modified, latest)
                stage.record(ownContextOf: first, lamport: first.counter, in: &contexts)
                if end - n > 1 { stage.record(ownContextOf: last, lamport: last.counter, in: &contexts) }
                n = end
            }
            if n > 0 {
                // Once per source: a log tail's adds read where they lie share one ([LOG-28]).
                for i in 0..<n {
                    if let d = b[i].stroke.deferred?.source, d !== deferredSources.last { deferredSources.append(d) }
                }
            }
            return n
        }
        settle()
        guard n > 0 else { return 0 }
        isResolved = false
        adds.withUnsafeMutableBufferPointer { b in
            records.insert(count: n) { i in
                // Moved out, an empty stroke left in its place. (`swap` compiled to a copy and
                // a destroy: a retain and a release of the points' deferred source.)
                let stroke = withUnsafeMutablePointer(to: &b[i].stroke) { s in
                    let taken = s.move()
                    s.initialize(to: Stroke(points: []))
                    return taken
                }
                let id = b[i].id
                return ElementRecord(plainAdd: id, wallTime: b[i].wallTime, stroke: consume stroke,
                                     z: OperationCodec.impliedZ(lamport: id.counter))
            }
        }
        return n
    }

    /// How many of `adds`, from the first, go on top of the page in turn (each above the
    /// top the ones before it left).
    private func addsOnTop(_ adds: [PlainAddStroke]) -> Int {
        adds.withUnsafeBufferPointer { b in
            var top: (z: ZKey, id: ElementID)?
            for i in b.indices {
                let id = b[i].id
                let z = OperationCodec.impliedZ(lamport: id.counter)
                guard top.map({ ZKey.positionLess($0.z, $0.id, z, id) }) ?? records.goesOnTop(z, id) else { return i }
                top = (z, id)
            }
            return b.count
        }
    }

    /// Ends a batch of applied operations: replicas new to the log merged into the clock
    /// and contexts, elements added below the top placed in the z order.
    private mutating func settle() {
        stage.settle(clock: &clock, contexts: &contexts)
        records.settle()
        if !unsortedRangeErasures.isEmpty { sortRangeErasures() }
    }

    /// Sorts the partial erases of the strokes a batch appended to out of order, live or
    /// erased (their kept record).
    private mutating func sortRangeErasures() {
        let ids = Set(unsortedRangeErasures)
        unsortedRangeErasures = []
        func sort(_ r: inout ElementRecord) {
            r.rangeErasures.sort { $0.ref < $1.ref }
            r.rangeRestores.sort { $0.ref < $1.ref }
        }
        for id in ids where !records.update(id, sort) {
            tombstones.modify(id) { t in
                if t.record != nil { sort(&t.record!) }
            }
        }
    }

    // MARK: - The rules

    private mutating func apply(_ op: Op) throws {
        stage.include(op.id, in: &clock)
        maxLamport = max(maxLamport, op.lamport)
        modified = max(modified, op.wallTime)
        // [MERGE-43] A context that leaves out part of what it claims to have seen: counted as
        // received, without effect.
        let consistent = stage.lamportExceedsItsPast(op, in: contexts)
        stage.record(op, in: &contexts)
        guard consistent else { return }
        switch op.body {
        case .add(let content, let z):
            // [MERGE-10] [MERGE-11] A new element goes where its position (its key, its id as the last tag) puts it.
            records.insert(deferring: true, ElementRecord(id: op.id, lamport: op.lamport, wallTime: op.wallTime, content: content,
                                         z: LWWRegister(z)))
        case .erase(let ids):
            // One element (an erase of one stroke, the usual one) needs no set.
            erase(ids.count == 1 ? ids : Set(ids).sorted(), by: op)
        case .eraseRange(let id, let ranges):
            // [MERGE-20] Visible ink is the points minus the union of all erased ranges; each
            // partial erase is kept with its ranges for the restores that see it ([MERGE-71]).
            // Appended: a batch's strokes left out of order are sorted when it ends.
            var outOfOrder = false
            edit(id, by: op) { r in
                let n = UInt32(clamping: r.content.pointCount)
                let clamped = ranges.map { PointRange(min($0.from, n), min($0.to, n)) }.normalizedUnion()
                guard !clamped.isEmpty else { return }
                PageReplica.adoptUnknownErasures(&r)
                if let last = r.rangeErasures.last, !(last.ref < op.ref) { outOfOrder = true }
                r.rangeErasures.append(RangeErasure(ref: op.ref, ranges: clamped))
                r.erased = r.erased.isNormalized ? r.erased.unionNormalized(clamped) : (r.erased + clamped).normalizedUnion()
            }
            if outOfOrder { unsortedRangeErasures.append(id) }
        case .restoreRange(let id, let ranges):
            // [MERGE-71] Takes these points back from the partial erases its author had seen;
            // a concurrent one keeps all of its ranges. Kept beside the partial erases with
            // what it had seen (subtracted from each, K erases and m gaps left K · (m + 1) ranges).
            var outOfOrder = false
            edit(id, by: op) { r in
                PageReplica.adoptUnknownErasures(&r)
                guard !r.rangeErasures.isEmpty else { return }
                let n = UInt32(clamping: r.content.pointCount)
                let clamped = ranges.map { PointRange(min($0.from, n), min($0.to, n)) }.normalizedUnion()
                guard let (restore, erased) = RangeHistory.received(clamped, ref: op.ref, covers: op.context.covers,
                                                                     r.rangeErasures, r.rangeRestores, before: r.erased) else { return }
                if let last = r.rangeRestores.last, !(last.ref < op.ref) { outOfOrder = true }
                r.rangeRestores.append(restore)
                r.erased = erased
            }
            if outOfOrder { unsortedRangeErasures.append(id) }
        case .restore(let ids):
            if ids.count == 1 { restore(ids[0], by: op) } else { for id in Set(ids).sorted() { restore(id, by: op) } }
        case .move(let ts):
            // [MERGE-25] Last writer wins per element, by (Lamport, replica).
            var seen = Set<ElementID>(minimumCapacity: ts.count > 1 ? ts.count : 0)
            for t in ts where ts.count == 1 || seen.insert(t.element).inserted {
                edit(t.element, by: op) { r in write(&r.transform, t.transform, by: op) }
            }
        case .reorder(let zs):
            // [MERGE-15] Last writer wins per element; the element keeps its id as its position's last tag.
            var seen = Set<ElementID>(minimumCapacity: zs.count > 1 ? zs.count : 0)
            var moving: [ElementZ] = []
            for z in zs where zs.count == 1 || seen.insert(z.element).inserted {
                guard records.contains(z.element), op.context.covers(z.element), !hasSeenErased(z.element, op) else {
                    // An erased element's kept record takes the write too ([MERGE-30]).
                    edit(z.element, by: op) { r in write(&r.z, z.z, by: op) }
                    continue
                }
                moving.append(z)
            }
            // Taken out together and put back as one batch: one by one, each cost a pass over
            // the page's z order.
            for (z, removed) in zip(moving, records.remove(all: moving.map(\.element))) {
                guard var r = removed else { continue }
                write(&r.z, z.z, by: op)
                advance(&r.edits, with: op)
                records.insert(deferring: true, r)
            }
            records.settle()
        default:
            throw LnoteError(.invalidArgument, "\(op.body.name) is not a page operation")
        }
    }

    /// Applies an edit (move, reorder, partial erase) to a live element, advancing its
    /// frontier; on an erased element it only advances the tombstone's frontier
    /// ([MERGE-21]: erase wins). An edit whose author could not have seen the element, or
    /// had seen it erased, is ignored for that element ([MERGE-42]).
    private mutating func edit(_ id: ElementID, by op: Op, _ change: (inout ElementRecord) -> Void) {
        guard op.context.covers(id) else { return }
        // An element never erased (the usual case) needs no tombstone lookup.
        guard !tombstones.isEmpty, let seenErased = tombstones.modify(id, { $0.hasSeenErased(op) }) else {
            records.update(id) { r in
                change(&r)
                advance(&r.edits, with: op)
            }
            return
        }
        guard !seenErased else { return }
        let live = records.update(id) { r in
            change(&r)
            advance(&r.edits, with: op)
        }
        guard !live else { return }
        // [MERGE-30] Erased: the kept record takes the edit, as it would have live, so that a
        // restore brings back the same element whatever the order of arrival. In place: a copy
        // of the tombstone would copy a large frontier on every write. A restored element
        // whose content was never held ([MERGE-30]) takes no edit.
        tombstones.modify(id) { t in
            guard t.isErased else { return }
            if t.record != nil { change(&t.record!) }
            advance(&t.edits, with: op)
        }
    }

    /// [SNAP-41] A stroke's erased ranges whose partial erases are unknown (a page from a
    /// checkpoint written before restores) become one partial erase under the ref of the
    /// element's add, which every range restore of the element has seen: before its first
    /// partial erase or range restore here, so that the list adds up to the erased ranges.
    static func adoptUnknownErasures(_ r: inout ElementRecord) {
        guard r.rangeErasures.isEmpty, !r.erased.isEmpty else { return }
        // Clamped to the stroke, as every partial erase is ([MERGE-20]).
        let n = UInt32(clamping: r.content.pointCount)
        let ranges = r.erased.map { PointRange(min($0.from, n), min($0.to, n)) }.normalizedUnion()
        r.erased = ranges
        r.rangeErasures = ranges.isEmpty ? [] : [RangeErasure(ref: r.addRef, ranges: ranges)]
    }

    /// True when `op`'s author had seen element `id` erased ([MERGE-42], [MERGE-70]).
    private mutating func hasSeenErased(_ id: ElementID, _ op: Op) -> Bool {
        guard !tombstones.isEmpty else { return false }
        return tombstones.modify(id) { $0.hasSeenErased(op) } ?? false
    }

    /// [MERGE-21] A whole erase removes the element whatever else happened concurrently;
    /// the tombstone keeps what is needed to report the operations it won against, and the
    /// element whole for a restore ([MERGE-30]).
    /// `ids` distinct. The elements that leave the live set are taken out of it together (one
    /// by one, each cost a pass over the page's z order).
    private mutating func erase(_ ids: [ElementID], by op: Op) {
        let erasure = Erasure(ref: op.ref, clock: op.context)
        var leaving: [ElementID] = []
        var again: [Bool] = []
        for id in ids where op.context.covers(id) {
            // Concurrent erases: all are kept ([MERGE-52]); an erase of an element its author saw
            // erased is ignored ([MERGE-42]); one after a restore erases it again. In place.
            let known = tombstones.modify(id) { t -> Bool in
                guard !t.hasSeenErased(op) else { return false }
                t.erasureTable.append(erasure)
                return true
            }
            guard known != false else { continue }
            leaving.append(id)
            again.append(known == true)
        }
        for (k, removed) in records.remove(all: leaving).enumerated() {
            guard var r = removed else { continue }
            let id = leaving[k]
            if again[k] {
                // Erased again after a restore: the record goes back into the tombstone.
                tombstones.modify(id) { t in
                    t.edits = r.edits
                    r.edits = []
                    t.record = r
                }
            } else {
                var t = Tombstone(id: id, erasures: [erasure], record: r)
                t.edits = r.edits
                t.record!.edits = []
                tombstones[id] = t
            }
        }
    }

    /// [MERGE-70] A restore takes back every erase of the element its author had seen; the
    /// element is live again once no erase holds (an erase concurrent with the restore still
    /// does: erase wins against what it did not see).
    private mutating func restore(_ id: ElementID, by op: Op) {
        guard op.context.covers(id) else { return }
        let back = tombstones.modify(id) { t -> ElementRecord? in
            guard t.erasureTable.takeBack(seenBy: op.context, restore: op.id), !t.isErased else { return nil }
            var r = t.record
            r?.edits = t.edits
            t.record = nil
            t.edits = []
            return r
        }
        if let r = back ?? nil { records.insert(r) }
    }

    // MARK: - Conflicts

    /// [MERGE-50] Every element with concurrent operations, and which one won.
    public func conflicts() -> [Conflict] { state.conflicts }
}

extension Tombstone {
    /// True when `op`'s author had seen the element erased: it had applied one of the
    /// erasures and none of the restores that took that one back ([MERGE-42], [MERGE-70]).
    /// Whatever the context covers is applied before `op` (causal delivery), and only what
    /// it covers is looked at, so the answer does not depend on the order of arrival.
    func hasSeenErased(_ op: Op) -> Bool {
        erasureTable.seenHolding(by: op.context)
    }
}
