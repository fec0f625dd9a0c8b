import Foundation
import Synchronization
import LnoteModel
import LnoteReplication

/// One thing that changed in a notebook, for an app to redraw only that (`Document.changes`,
/// `Notebook.changes`).
///
/// Events are derived from the operations applied — made here, merged from sync, or read
/// from what another process appended — never from comparing states: each names the
/// operations (`operations`) that caused it. An operation that writes a register (a title,
/// a page's position, canvas or deletion, an element's transform or z key) gives an event
/// only when it is that register's winner once applied, so an event always describes the
/// state the reader then finds (until a later event says otherwise).
public struct Change: Sendable, Hashable, CustomStringConvertible {
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        /// A document appeared (`title` is its title then). Notebook stream only.
        case documentCreated
        /// `title` is the document's title now.
        case documentRetitled
        case documentDeleted
        case documentRestored
        /// A page was added (`page`).
        case pageAdded
        /// A page was deleted (soft: its content is kept).
        case pageRemoved
        case pageRestored
        /// A page moved in the document's page order.
        case pageMoved
        /// A page's canvas changed (`canvas`).
        case pageResized
        /// A page this handle has not loaded changed in another process: read it again if it
        /// is shown (its changes are told element by element once it is loaded).
        case pageChanged
        /// Elements added on top of or between others (`elements`: their ids, in order applied).
        case elementsAdded
        /// Elements erased whole.
        case elementsErased
        /// Point ranges of strokes erased (the pixel eraser).
        case elementsPartlyErased
        /// Elements brought back by a restore (undo of an erase, `restore-element`).
        case elementsRestored
        /// Point ranges of strokes brought back by a range restore.
        case elementsPartlyRestored
        /// Elements whose transform changed.
        case elementsMoved
        /// Elements whose z key changed.
        case elementsReordered
        /// What this process held of a log was read again from the files (another process
        /// salvaged or repaired it, or frames this process had seen were rolled back by their
        /// writer): reload the page (`page`), or the whole document when `page` is nil.
        case reloaded
        /// The consumer fell behind and `missed` events were dropped (the buffer keeps the
        /// newest): reload everything shown, then go on with the events that follow.
        case missed
    }

    /// Where a change came from.
    public enum Origin: String, Sendable, Hashable, CaseIterable {
        /// An edit made through this process's API (`addStroke`, `setTitle`, …).
        case local
        /// Operations received from a peer by sync (`Document.receive`), durable when told.
        case merge
        /// Another process (or another `Notebook` opened on the same folder) appended them.
        case otherProcess
    }

    public var kind: Kind
    /// nil only for `missed`.
    public var origin: Origin?
    /// nil only for the notebook stream's `missed`.
    public var document: DocumentID?
    public var page: PageID?
    public var elements: [ElementID] = []
    /// The operations that made this change, in the order applied.
    public var operations: [OpID] = []
    /// `documentCreated`, `documentRetitled`: the title after the change.
    public var title: String?
    /// `pageResized`: the canvas after the change.
    public var canvas: CanvasSize?
    /// `missed`: how many events were dropped.
    public var missed = 0

    public init(kind: Kind, origin: Origin?, document: DocumentID?, page: PageID? = nil, elements: [ElementID] = [],
                operations: [OpID] = [], title: String? = nil, canvas: CanvasSize? = nil, missed: Int = 0) {
        self.kind = kind
        self.origin = origin
        self.document = document
        self.page = page
        self.elements = elements
        self.operations = operations
        self.title = title
        self.canvas = canvas
        self.missed = missed
    }

    /// `elementsAdded local 3F2A…/9C1B… 00000000000000a1.17 00000000000000a1.18`
    public var description: String {
        var s = kind.rawValue
        if let origin { s += " \(origin.rawValue)" }
        if let document { s += " \(document)" + (page.map { "/\($0)" } ?? "") }
        if let title { s += " \"\(title)\"" }
        if let canvas { s += " \(canvas)" }
        if kind == .missed { s += " \(missed)" }
        for e in elements { s += " \(e)" }
        return s
    }

    /// True when `other` can be folded into this event (same kind, place and origin, and
    /// a kind that lists elements).
    func canAbsorb(_ other: Change) -> Bool {
        other.kind == kind && other.origin == origin && other.document == document && other.page == page
            && [.elementsAdded, .elementsErased, .elementsPartlyErased, .elementsRestored, .elementsPartlyRestored,
                .elementsMoved, .elementsReordered].contains(kind)
    }
}

/// The events of a document or a notebook, as an `AsyncSequence`.
///
/// **Buffering policy.** Writers never wait for a consumer: each subscription keeps at most
/// `capacity` undelivered events (1,024 unless the subscriber said otherwise). When one more
/// arrives, the oldest is dropped and counted; the consumer's next element is then one
/// `missed` event with the count, followed by the newest events in order. A consumer that
/// gets `missed` reloads what it shows and carries on. The sequence ends when the document
/// (or notebook) is closed, or when the consuming task is cancelled.
public struct ChangeStream: AsyncSequence, Sendable {
    public typealias Element = Change
    let subscription: ChangeSubscription

    public func makeAsyncIterator() -> Iterator { Iterator(subscription: subscription) }

    public struct Iterator: AsyncIteratorProtocol {
        let subscription: ChangeSubscription
        public mutating func next() async -> Change? { await subscription.next() }
        public mutating func next(isolation actor: isolated (any Actor)?) async -> Change? { await subscription.next() }
    }
}

/// One subscriber's buffer (see `ChangeStream` for the policy).
final class ChangeSubscription: Sendable {
    private struct State {
        var buffer: [Change] = []
        var head = 0
        var dropped = 0
        var finished = false
        var waiter: CheckedContinuation<Change?, Never>?
    }
    private let state = Mutex(State())
    let capacity: Int
    /// What a dropped event's `missed` event names (the hub's document, nil for a notebook).
    let document: DocumentID?
    private let onCancel: @Sendable (ChangeSubscription) -> Void

    init(capacity: Int, document: DocumentID?, onCancel: @escaping @Sendable (ChangeSubscription) -> Void) {
        self.capacity = max(1, capacity)
        self.document = document
        self.onCancel = onCancel
    }

    /// Adds an event; never blocks, drops the oldest when full.
    func deliver(_ c: Change) {
        let waiter = state.withLock { s -> CheckedContinuation<Change?, Never>? in
            guard !s.finished else { return nil }
            if let w = s.waiter {
                s.waiter = nil
                return w
            }
            s.buffer.append(c)
            if s.buffer.count - s.head > capacity {
                s.head += 1
                s.dropped += 1
            }
            if s.head > 1024 && s.head * 2 > s.buffer.count {
                s.buffer.removeFirst(s.head)
                s.head = 0
            }
            return nil
        }
        waiter?.resume(returning: c)
    }

    func finish() {
        let waiter = state.withLock { s -> CheckedContinuation<Change?, Never>? in
            s.finished = true
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?.resume(returning: nil)
    }

    private func take(_ s: inout State) -> Change?? {
        if s.dropped > 0 {
            defer { s.dropped = 0 }
            return .some(Change(kind: .missed, origin: nil, document: document, missed: s.dropped))
        }
        if s.head < s.buffer.count {
            defer { s.head += 1 }
            return .some(s.buffer[s.head])
        }
        if s.finished { return .some(nil) }
        return nil
    }

    func next() async -> Change? {
        if Task.isCancelled {
            cancel()
            return nil
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Change?, Never>) in
                let ready = state.withLock { s -> Change?? in
                    if let r = take(&s) { return r }
                    s.waiter = c
                    return nil
                }
                if let ready { c.resume(returning: ready) }
            }
        } onCancel: {
            cancel()
        }
    }

    /// Events waiting to be taken (tests).
    var pending: Int { state.withLock { $0.buffer.count - $0.head } }

    private func cancel() {
        finish()
        onCancel(self)
    }
}

/// Where a document's or a notebook's events go: every live subscription. Publishing takes
/// a lock for a moment and never waits for a consumer.
final class ChangeHub: Sendable {
    private let subscriptions = Mutex<[ObjectIdentifier: ChangeSubscription]>([:])
    private let closed = Mutex(false)
    let document: DocumentID?

    init(document: DocumentID?) { self.document = document }

    var hasSubscribers: Bool { subscriptions.withLock { !$0.isEmpty } }

    func subscribe(capacity: Int) -> ChangeStream {
        let sub = ChangeSubscription(capacity: capacity, document: document) { [weak self] s in
            _ = self?.subscriptions.withLock { $0.removeValue(forKey: ObjectIdentifier(s)) }
        }
        if closed.withLock({ $0 }) {
            sub.finish()
        } else {
            subscriptions.withLock { $0[ObjectIdentifier(sub)] = sub }
        }
        return ChangeStream(subscription: sub)
    }

    func publish(_ changes: [Change]) {
        guard !changes.isEmpty else { return }
        let subs = subscriptions.withLock { Array($0.values) }
        for s in subs { for c in changes { s.deliver(c) } }
    }

    /// Ends every subscription (the document or notebook closed).
    func finish() {
        closed.withLock { $0 = true }
        let subs = subscriptions.withLock { d -> [ChangeSubscription] in
            defer { d = [:] }
            return Array(d.values)
        }
        for s in subs { s.finish() }
    }
}

/// The origin of document operations this process wrote, for the notebook's stream, which
/// reads every document log (`Notebook.changes`): an operation found there is this
/// process's (`local` or `merge`) when registered, another process's otherwise. An entry is
/// registered before the frame is written and marked durable once the log is synced: the
/// notebook's reader stops at a frame whose entry is not durable yet, so its events too come
/// after durability.
final class OriginRegistry: Sendable {
    /// Operation ids are per log (a replica's counters are per log), so entries are kept per
    /// document: the same id in two documents' logs is two operations.
    private struct Key: Hashable {
        var document: DocumentID
        var op: OpID
    }
    private struct State {
        var active = false
        var ops: [Key: (origin: Change.Origin, durable: Bool)] = [:]
        var created: [DocumentID: Change.Origin] = [:]
    }
    private let state = Mutex(State())
    /// Called (with the document) once operations registered for it are durable.
    let poke: Mutex<(@Sendable (DocumentID) -> Void)?> = Mutex(nil)

    var isActive: Bool { state.withLock { $0.active } }
    func activate() { state.withLock { $0.active = true } }

    func register(_ ids: [OpID], document: DocumentID, origin: Change.Origin) {
        state.withLock { s in
            guard s.active else { return }
            for id in ids { s.ops[Key(document: document, op: id)] = (origin, false) }
        }
    }

    func markDurable(_ ids: [OpID], document: DocumentID) {
        let any = state.withLock { s -> Bool in
            var any = false
            for id in ids {
                let k = Key(document: document, op: id)
                guard s.ops[k] != nil else { continue }
                s.ops[k]!.durable = true
                any = true
            }
            return any
        }
        if any, let p = poke.withLock({ $0 }) { p(document) }
    }

    func forget(_ ids: [OpID], document: DocumentID) {
        state.withLock { s in for id in ids { s.ops[Key(document: document, op: id)] = nil } }
    }

    /// Drops a document's entries: its log was read whole (its operations absorbed without
    /// events), so no later read will take them.
    func forgetDocument(_ document: DocumentID) {
        state.withLock { s in s.ops = s.ops.filter { $0.key.document != document } }
    }

    func registerCreated(_ document: DocumentID, origin: Change.Origin) {
        state.withLock { s in if s.active { s.created[document] = origin } }
    }

    func takeCreated(_ document: DocumentID) -> Change.Origin? {
        state.withLock { $0.created.removeValue(forKey: document) }
    }

    /// The origin of an operation read from a document's log: nil when it is registered and
    /// not durable yet (stop there); `otherProcess` when it is not registered. Consumes the
    /// entry.
    func take(_ id: OpID, document: DocumentID) -> Change.Origin? {
        state.withLock { s -> Change.Origin? in
            let k = Key(document: document, op: id)
            guard let e = s.ops[k] else { return .otherProcess }
            guard e.durable else { return nil }
            s.ops[k] = nil
            return e.origin
        }
    }
}

// MARK: - From operations to events

enum ChangeDerivation {
    /// The events of document operations applied (in order) to `state`, which is the state
    /// after all of them.
    static func document(_ applied: [Op], state: DocumentState, document: DocumentID, origin: Change.Origin) -> [Change] {
        var out: [Change] = []
        let pages = Dictionary(state.pages.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
        func add(_ kind: Change.Kind, _ op: Op, page: PageID? = nil, title: String? = nil, canvas: CanvasSize? = nil) {
            out.append(Change(kind: kind, origin: origin, document: document, page: page, operations: [op.id], title: title, canvas: canvas))
        }
        for op in applied {
            switch op.body {
            case .createDocument:
                break  // the document's first operation: `documentCreated` tells it (notebook stream)
            case .setTitle:
                if state.title.winner == op.ref { add(.documentRetitled, op, title: state.title.value) }
            case .deleteDocument:
                if state.deleted.winner == op.ref && state.deleted.value { add(.documentDeleted, op) }
            case .restoreDocument:
                if state.deleted.winner == op.ref && !state.deleted.value { add(.documentRestored, op) }
            case .addPage(let p, _, _):
                if pages[p]?.adds.first == op.ref { add(.pageAdded, op, page: p) }
            case .deletePage(let p, _):
                if let r = pages[p], r.deleted.winner == op.ref, r.deleted.value { add(.pageRemoved, op, page: p) }
            case .restorePage(let p):
                if let r = pages[p], r.deleted.winner == op.ref, !r.deleted.value { add(.pageRestored, op, page: p) }
            case .movePage(let p, _):
                if pages[p]?.position.winner == op.ref { add(.pageMoved, op, page: p) }
            case .setCanvas(let p, _):
                if let r = pages[p], r.canvas.winner == op.ref { add(.pageResized, op, page: p, canvas: r.canvas.value) }
            case .add, .erase, .eraseRange, .move, .reorder, .restore, .restoreRange:
                break
            }
        }
        return out
    }

    /// The events of page operations applied (in order) to `replica`, which holds the state
    /// after all of them. Consecutive events of one kind are folded into one.
    static func page(_ applied: [Op], replica: PageReplica, document: DocumentID, origin: Change.Origin) -> [Change] {
        var out: [Change] = []
        func add(_ kind: Change.Kind, _ op: Op, _ ids: [ElementID]) {
            guard !ids.isEmpty else { return }
            let c = Change(kind: kind, origin: origin, document: document, page: replica.page, elements: ids, operations: [op.id])
            if let last = out.last, last.canAbsorb(c) {
                out[out.count - 1].elements += ids
                out[out.count - 1].operations.append(op.id)
            } else {
                out.append(c)
            }
        }
        for op in applied {
            switch op.body {
            case .add:
                add(.elementsAdded, op, [op.id])
            case .erase(let ids):
                add(.elementsErased, op, ids.uniqued())
            case .eraseRange(let id, _):
                add(.elementsPartlyErased, op, [id])
            case .restore(let ids):
                // Only those it brought back: an erase concurrent with it still holds.
                add(.elementsRestored, op, ids.uniqued().filter { replica.isLive($0) })
            case .restoreRange(let id, _):
                add(.elementsPartlyRestored, op, [id])
            case .move(let ts):
                add(.elementsMoved, op, ts.map(\.element).uniqued().filter { replica.element($0)?.transform.winner == op.ref })
            case .reorder(let zs):
                add(.elementsReordered, op, zs.map(\.element).uniqued().filter { replica.element($0)?.z.winner == op.ref })
            default:
                break
            }
        }
        return out
    }
}
