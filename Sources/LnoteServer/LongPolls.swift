import Foundation
import Synchronization

/// The long polls a server holds ([SYNC-71]): a version per notebook that grows with each
/// change, and the requests waiting for it to grow.
///
/// A waiting request costs a suspended task and a sleeping timer task; nothing polls.
/// `bump` wakes every waiter of that notebook, `close` every waiter of every notebook (the
/// server shuts down, [SYNC-74]); a waiter's deadline wakes it alone. Each waiter is woken
/// exactly once, by whichever comes first, under one lock.
public final class LongPolls: Sendable {
    /// Why `wait` returned.
    public enum Outcome: Sendable, Equatable {
        /// The notebook's version grew past the one the caller saw.
        case changed
        /// The deadline passed first.
        case timedOut
        /// The server is shutting down: answer at once.
        case closing
    }

    private struct Waiter {
        var notebook: UUID
        var holder: String?
        var continuation: CheckedContinuation<Outcome, Never>
        var timer: Task<Void, Never>?
    }

    private struct State {
        var versions: [UUID: UInt64] = [:]
        var waiters: [UInt64: Waiter] = [:]
        var byNotebook: [UUID: Set<UInt64>] = [:]
        /// The waiters of each holder (a token), oldest first.
        var byHolder: [String: [UInt64]] = [:]
        var nextID: UInt64 = 0
        var closed = false

        /// Removes a waiter and its index entries.
        mutating func remove(_ id: UInt64) -> Waiter? {
            guard let w = waiters.removeValue(forKey: id) else { return nil }
            byNotebook[w.notebook]?.remove(id)
            if byNotebook[w.notebook]?.isEmpty == true { byNotebook[w.notebook] = nil }
            unindex(w, id)
            return w
        }

        /// Takes a waiter out of its holder's list (it was removed from `waiters` already).
        mutating func unindex(_ w: Waiter, _ id: UInt64) {
            guard let h = w.holder else { return }
            byHolder[h]?.removeAll { $0 == id }
            if byHolder[h]?.isEmpty == true { byHolder[h] = nil }
        }
    }

    private let state = Mutex(State())
    /// The most requests one holder (a token) may have held at once; nil: no bound.
    public let maxPerHolder: Int?

    /// - Parameter maxPerHolder: the most requests one holder (a token) may have held at
    ///   once ([SYNC-73]): a holder's next one releases its oldest (answered at once, as when
    ///   its wait runs out). nil: no bound (a server whose clients all share one token).
    public init(maxPerHolder: Int? = nil) {
        precondition(maxPerHolder.map { $0 >= 1 } ?? true, "maxPerHolder must be at least 1")
        self.maxPerHolder = maxPerHolder
    }

    /// The notebook's version now: take it before computing an answer, then wait past it, so
    /// that a change that lands in between is never missed.
    public func version(of notebook: UUID) -> UInt64 {
        state.withLock { $0.versions[notebook] ?? 0 }
    }

    /// Requests held now.
    public var waiting: Int { state.withLock { $0.waiters.count } }

    /// Requests one holder has held now.
    public func waiting(holder: String) -> Int { state.withLock { $0.byHolder[holder]?.count ?? 0 } }

    /// The notebook may have gained operations: its version grows and its waiters wake.
    /// Safe from any thread (an inotify thread, a store's queue).
    public func bump(_ notebook: UUID) {
        let woken: [Waiter] = state.withLock { s in
            s.versions[notebook, default: 0] += 1
            guard let ids = s.byNotebook.removeValue(forKey: notebook) else { return [] }
            return ids.compactMap { id in
                guard let w = s.waiters.removeValue(forKey: id) else { return nil }
                s.unindex(w, id)
                return w
            }
        }
        for w in woken {
            w.timer?.cancel()
            w.continuation.resume(returning: .changed)
        }
    }

    /// Wakes every waiter with `.closing`; later waits return `.closing` at once. Idempotent.
    public func close() {
        let woken: [Waiter] = state.withLock { s in
            s.closed = true
            defer { s.waiters = [:]; s.byNotebook = [:]; s.byHolder = [:] }
            return Array(s.waiters.values)
        }
        for w in woken {
            w.timer?.cancel()
            w.continuation.resume(returning: .closing)
        }
    }

    /// Waits until the notebook's version exceeds `seen`, `deadline` passes, or the server
    /// closes — whichever comes first (at once when one already has). A `holder` (a token's
    /// digest) over `maxPerHolder` held requests has its oldest released first, `.timedOut`.
    public func wait(_ notebook: UUID, after seen: UInt64, until deadline: ContinuousClock.Instant,
                     holder: String? = nil) async -> Outcome {
        let id = state.withLock { s -> UInt64 in
            s.nextID += 1
            return s.nextID
        }
        let limit = maxPerHolder
        // Indexed by holder only when bounded (a server whose clients share one token would
        // otherwise keep every waiter in one list).
        let holder = limit == nil ? nil : holder
        return await withCheckedContinuation { (c: CheckedContinuation<Outcome, Never>) in
            var released: Waiter?
            let now: Outcome? = state.withLock { s in
                if s.closed { return .closing }
                if (s.versions[notebook] ?? 0) > seen { return .changed }
                if ContinuousClock.now >= deadline { return .timedOut }
                if let holder, let limit, let held = s.byHolder[holder], held.count >= limit {
                    // [SYNC-73] One token holds at most `limit` requests: its oldest goes.
                    released = s.remove(held[0])
                }
                s.waiters[id] = Waiter(notebook: notebook, holder: holder, continuation: c, timer: nil)
                s.byNotebook[notebook, default: []].insert(id)
                if let holder { s.byHolder[holder, default: []].append(id) }
                return nil
            }
            if let released {
                released.timer?.cancel()
                released.continuation.resume(returning: .timedOut)
            }
            if let now {
                c.resume(returning: now)
                return
            }
            let timer = Task { [weak self] in
                try? await Task.sleep(until: deadline, clock: .continuous)
                guard !Task.isCancelled else { return }
                self?.expire(id)
            }
            // The waiter may already be gone (woken between the two locks): then the timer is not needed.
            let kept = state.withLock { s -> Bool in
                guard s.waiters[id] != nil else { return false }
                s.waiters[id]!.timer = timer
                return true
            }
            if !kept { timer.cancel() }
        }
    }

    private func expire(_ id: UInt64) {
        guard let w = state.withLock({ $0.remove(id) }) else { return }
        w.continuation.resume(returning: .timedOut)
    }
}
