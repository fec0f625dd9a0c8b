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
        var continuation: CheckedContinuation<Outcome, Never>
        var timer: Task<Void, Never>?
    }

    private struct State {
        var versions: [UUID: UInt64] = [:]
        var waiters: [UInt64: Waiter] = [:]
        var byNotebook: [UUID: Set<UInt64>] = [:]
        var nextID: UInt64 = 0
        var closed = false

        /// Removes a waiter and its index entry.
        mutating func remove(_ id: UInt64) -> Waiter? {
            guard let w = waiters.removeValue(forKey: id) else { return nil }
            byNotebook[w.notebook]?.remove(id)
            if byNotebook[w.notebook]?.isEmpty == true { byNotebook[w.notebook] = nil }
            return w
        }
    }

    private let state = Mutex(State())

    public init() {}

    /// The notebook's version now: take it before computing an answer, then wait past it, so
    /// that a change that lands in between is never missed.
    public func version(of notebook: UUID) -> UInt64 {
        state.withLock { $0.versions[notebook] ?? 0 }
    }

    /// Requests held now.
    public var waiting: Int { state.withLock { $0.waiters.count } }

    /// The notebook may have gained operations: its version grows and its waiters wake.
    /// Safe from any thread (an inotify thread, a store's queue).
    public func bump(_ notebook: UUID) {
        let woken: [Waiter] = state.withLock { s in
            s.versions[notebook, default: 0] += 1
            guard let ids = s.byNotebook.removeValue(forKey: notebook) else { return [] }
            return ids.compactMap { s.waiters.removeValue(forKey: $0) }
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
            defer { s.waiters = [:]; s.byNotebook = [:] }
            return Array(s.waiters.values)
        }
        for w in woken {
            w.timer?.cancel()
            w.continuation.resume(returning: .closing)
        }
    }

    /// Waits until the notebook's version exceeds `seen`, `deadline` passes, or the server
    /// closes — whichever comes first (at once when one already has).
    public func wait(_ notebook: UUID, after seen: UInt64, until deadline: ContinuousClock.Instant) async -> Outcome {
        let id = state.withLock { s -> UInt64 in
            s.nextID += 1
            return s.nextID
        }
        return await withCheckedContinuation { (c: CheckedContinuation<Outcome, Never>) in
            let now: Outcome? = state.withLock { s in
                if s.closed { return .closing }
                if (s.versions[notebook] ?? 0) > seen { return .changed }
                if ContinuousClock.now >= deadline { return .timedOut }
                s.waiters[id] = Waiter(notebook: notebook, continuation: c, timer: nil)
                s.byNotebook[notebook, default: []].insert(id)
                return nil
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
