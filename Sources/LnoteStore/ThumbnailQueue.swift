import Synchronization
import LnoteModel

/// The pages of one document whose picture is stale, waiting for the background renderer
/// ([PKG-103]), and the state of that renderer.
///
/// Bounded and coalescing: a page marked while it waits keeps its place (it is rendered
/// once, from its state when its turn comes); past `limit` the oldest waiting page is
/// dropped (counted in `dropped`). Guarded by a mutex: the document marks pages on its own
/// thread, the renderer takes them from a task of its own.
final class ThumbnailQueue: Sendable {
    struct State {
        var order: [PageID] = []
        var head = 0
        var waiting: Set<PageID> = []
        /// The page the renderer took last and has not finished.
        var inFlight: PageID?
        /// The renderer's task while it runs (nil once it found nothing left).
        var worker: Task<Void, Never>?
        /// What this handle knows the thumbnail file of a page holds (written or read here).
        var known: [PageID: ThumbnailStamp] = [:]
        var dropped = 0
        var rendered = 0
        var failed = 0
    }

    let limit: Int
    let state = Mutex(State())

    init(limit: Int) {
        self.limit = max(1, limit)
    }

    /// Adds `page` to the waiting pages (nothing when it waits already) and, when no renderer
    /// runs, records the one `start` makes (in the same step as the renderer's last `next`,
    /// so a mark is never left without a renderer).
    func mark(_ page: PageID, start: () -> Task<Void, Never>) {
        state.withLock { s in
            if !s.waiting.contains(page) {
                if s.waiting.count >= limit, s.popFirst() != nil { s.dropped += 1 }
                s.order.append(page)
                s.waiting.insert(page)
            }
            if s.worker == nil { s.worker = start() }
        }
    }

    /// The next page to render, now in flight; nil when none waits, and the renderer is
    /// then recorded as stopped (in the same step, so a mark after it starts a new one).
    func next() -> PageID? {
        state.withLock { s in
            s.inFlight = nil
            guard let p = s.popFirst() else {
                s.worker = nil
                return nil
            }
            s.inFlight = p
            return p
        }
    }

    /// Every waiting page and the one in flight, taken out of the queue (close renders them
    /// itself).
    func takeAll() -> [PageID] {
        state.withLock { s in
            var out: [PageID] = []
            if let p = s.inFlight { out.append(p) }
            while let p = s.popFirst() { if p != s.inFlight { out.append(p) } }
            s.inFlight = nil
            return out
        }
    }

    /// The renderer's task while it runs.
    var worker: Task<Void, Never>? { state.withLock { $0.worker } }

    func known(_ page: PageID) -> ThumbnailStamp? { state.withLock { $0.known[page] } }
    func setKnown(_ page: PageID, _ stamp: ThumbnailStamp?) { state.withLock { $0.known[page] = stamp } }
    func count(rendered: Int = 0, failed: Int = 0) {
        state.withLock {
            $0.rendered += rendered
            $0.failed += failed
        }
    }
}

extension ThumbnailQueue.State {
    mutating func popFirst() -> PageID? {
        guard head < order.count else { return nil }
        let p = order[head]
        head += 1
        if head > 64 && head * 2 > order.count {
            order.removeFirst(head)
            head = 0
        }
        waiting.remove(p)
        return p
    }
}
