import Foundation
import Synchronization
import LnoteModel
import LnoteStore

/// What a `SyncWatcher` keeps in step: one notebook and one remote.
///
/// The watcher never runs `sync`, `longPollRequest` and `absorb` at the same time (they may
/// open the notebook); `send` runs while they do (it only waits on the network).
public protocol SyncWatchTarget: Sendable {
    /// Whether the remote holds long polls ([SYNC-70]): then its changes come by them,
    /// else by a sync every `SyncWatcher.Options.interval`.
    var supportsLongPolls: Bool { get }
    /// One complete sync.
    /// - Parameter pushOnly: the round was started by a local change while long polls bring
    ///   the remote's changes: with nothing to push it need not reach the remote
    ///   (`SyncSession.pullWithoutPush`).
    func sync(pushOnly: Bool) async throws -> SyncReport
    /// The long poll to send (`SyncSession.longPollRequest`); nil when there is no cursor yet.
    func longPollRequest(wait: UInt32) async throws -> SyncRequest?
    /// Sends a long poll and returns its answer.
    func send(_ request: SyncRequest) async throws -> SyncResponse
    /// Stores a long poll's answer (`SyncSession.absorbLongPoll`).
    func absorb(_ answer: SyncResponse, for request: SyncRequest) async throws -> SyncReport
}

/// A notebook kept open and a remote: what an application watches.
public struct SessionWatchTarget: SyncWatchTarget {
    public var session: SyncSession
    public init(session: SyncSession) { self.session = session }

    public var supportsLongPolls: Bool { session.remote.supportsLongPolls && session.remote.cursorsOutliveProcess }

    public func sync(pushOnly: Bool) async throws -> SyncReport {
        var s = session
        s.pullWithoutPush = !pushOnly
        return try await s.run()
    }

    public func longPollRequest(wait: UInt32) async throws -> SyncRequest? { try await session.longPollRequest(wait: wait) }
    public func send(_ request: SyncRequest) async throws -> SyncResponse { try await session.remote.sync(request) }
    public func absorb(_ answer: SyncResponse, for request: SyncRequest) async throws -> SyncReport {
        try await session.absorbLongPoll(answer, for: request)
    }
}

/// Keeps a notebook in step with a remote ([SYNC-75]): local changes are pushed as soon as
/// they are written, the remote's arrive through long polls, and nothing runs in between.
///
/// - Local changes: inotify on the folders (`LogWatch`, a thread that sleeps in `poll`);
///   where inotify is missing, a poll of the logs' sizes and times (`LogWatch.fingerprint`).
///   An application can also call `notifyChanged()` after an edit.
/// - Remote changes: a long poll always held at the remote (`SyncWatchTarget.send`, a curl
///   thread that sleeps in `poll`), its answer stored as soon as it comes, then the next one
///   sent. A remote without long polls (a folder, an older server that answers the first
///   one 400) is synced every `interval` instead.
/// - Failures: those waiting can fix (no connection, a timeout, a 5xx or 429, a 409, the
///   folder open in another process) are retried with a backoff that doubles from
///   `minBackoff` to `maxBackoff`; the others (`isPermanent`: 400, 401, 403, 404, 405, 413,
///   426, a `Stop` thrown by the target such as a missing folder) end `run`.
///
/// Rounds (local changes, starts, retries) and the storing of long-poll answers run one at
/// a time; a long poll stays held at the remote while they run. The sync's own writes show
/// as local changes: the round they start finds nothing to push and, while long polls
/// work, does not reach the remote.
public final class SyncWatcher: Sendable {
    /// What started a round.
    public enum Cause: String, Sendable {
        case start, local, remote, interval, retry
    }

    public enum Event: Sendable {
        /// `run` started: how local changes are noticed (`inotify`, `polling every …`,
        /// `none`), and whether the remote's come by long polls (else every `interval`).
        case started(localChanges: String, longPolls: Bool)
        /// A round ran, or a long poll's answer was stored (`.remote`).
        case synced(SyncReport, cause: Cause)
        /// A failure waiting can fix; the next attempt is in `retryIn` (doubling up to the maximum).
        case failed(LnoteError, retryIn: Duration)
        /// A failure waiting cannot fix: `run` returns it.
        case stopped(LnoteError)
        /// The remote refused a long poll as a bad request (it does not know `wait`): it is
        /// synced every `interval` instead.
        case longPollsUnavailable(LnoteError)
    }

    /// How local changes are noticed.
    public enum LocalChanges: Sendable {
        /// inotify on these notebook folders; a poll of their fingerprints where it is missing.
        case folders([String])
        /// A value that changes with local data, polled.
        case polling(fingerprint: @Sendable () -> Int, every: Duration)
        /// Only `notifyChanged()`.
        case none
    }

    public struct Options: Sendable {
        /// Seconds a long poll asks the remote to hold it (servers cap it: lnote's at 60).
        public var wait: UInt32 = 50
        /// How often a remote without long polls is synced.
        public var interval: Duration = .seconds(30)
        public var minBackoff: Duration = .seconds(1)
        public var maxBackoff: Duration = .seconds(60)
        /// How often fingerprints are polled where inotify is missing.
        public var poll: Duration = .milliseconds(500)
        public init(wait: UInt32 = 50, interval: Duration = .seconds(30), minBackoff: Duration = .seconds(1),
                    maxBackoff: Duration = .seconds(60), poll: Duration = .milliseconds(500)) {
            self.wait = wait
            self.interval = interval
            self.minBackoff = minBackoff
            self.maxBackoff = maxBackoff
            self.poll = poll
        }
    }

    /// Thrown by a target for a failure that must stop the watcher whatever its code (the
    /// notebook folder is gone).
    public struct Stop: Error, Sendable {
        public var error: LnoteError
        public init(_ error: LnoteError) { self.error = error }
    }

    public let target: any SyncWatchTarget
    public let local: LocalChanges
    public let options: Options
    private let notified = Mutex<Triggers?>(nil)
    private let localMode = Mutex("not started")

    public init(target: any SyncWatchTarget, local: LocalChanges, options: Options = Options()) {
        self.target = target
        self.local = local
        self.options = options
    }

    /// A watcher with only a sync closure (no long polls): the remote is synced every
    /// `interval`, local changes are found by polling `fingerprint` every `poll`.
    public convenience init(interval: Duration = .seconds(30), poll: Duration = .milliseconds(500),
                            minBackoff: Duration = .seconds(1), maxBackoff: Duration = .seconds(60),
                            fingerprint: @escaping @Sendable () -> Int,
                            sync: @escaping @Sendable () async throws -> SyncReport) {
        self.init(target: ClosureTarget(sync: sync), local: .polling(fingerprint: fingerprint, every: poll),
                  options: Options(interval: interval, minBackoff: minBackoff, maxBackoff: maxBackoff, poll: poll))
    }

    /// How local changes are noticed in the current run: `inotify`, `polling every …`, `none`.
    public var localChangeMode: String { localMode.withLock { $0 } }

    /// Asks for a round (an application after an edit), unless backing off.
    public func notifyChanged() { notified.withLock { $0 }?.fire(.local) }

    /// Runs until the surrounding task is cancelled, a failure waiting cannot fix happens,
    /// or `maxSyncs` rounds were attempted.
    ///
    /// - Parameter events: called for each round, stored long-poll answer and failure (from
    ///   the watcher's tasks; keep it quick).
    /// - Returns: the failure that stopped it, or nil.
    @discardableResult
    public func run(maxSyncs: Int? = nil, events: @escaping @Sendable (Event) -> Void) async -> LnoteError? {
        let run = WatchRun(longPolls: target.supportsLongPolls)
        notified.withLock { $0 = run.triggers }
        let source = startLocal(run)
        events(.started(localChanges: localChangeMode, longPolls: run.longPolls.load(ordering: .relaxed)))
        defer {
            source.stop()
            notified.withLock { $0 = nil }
        }
        await withTaskCancellationHandler {
            await withTaskGroup(of: Bool.self) { group in
                group.addTask { await self.rounds(run, maxSyncs: maxSyncs, events: events); return true }
                if run.longPolls.load(ordering: .relaxed) {
                    group.addTask { await self.polls(run, events: events); return false }
                }
                // The round loop ends the run (done, cancelled, or a permanent failure from
                // either loop); the poll loop alone may end early (an older server).
                while let roundsEnded = await group.next(), !roundsEnded {}
                run.finish()
                group.cancelAll()
            }
        } onCancel: {
            run.finish()
        }
        return run.stopError
    }

    // MARK: - The two loops

    /// Rounds: the first at once, then one per local change (interval or retry deadline).
    private func rounds(_ run: WatchRun, maxSyncs: Int?, events: @Sendable (Event) -> Void) async {
        var cause = Cause.start
        var backoff: Duration?
        var attempts = 0
        while !run.isFinished {
            attempts += 1
            let pushOnly = cause == .local && run.pollHealthy.load(ordering: .relaxed)
            do {
                let report = try await run.lock.run { try await target.sync(pushOnly: pushOnly) }
                backoff = nil
                run.roundSucceeded()
                events(.synced(report, cause: cause))
            } catch {
                if run.isFinished || error is CancellationError { return }
                guard failed(error, run, backoff: &backoff, events: events) != nil else { return }
            }
            if let maxSyncs, attempts >= maxSyncs { return }
            if let backoff {
                // Local changes wait for the retry (it syncs everything anyway).
                guard await run.triggers.sleep(for: backoff) else { return }
                cause = .retry
            } else {
                let deadline: ContinuousClock.Instant? = run.longPolls.load(ordering: .relaxed)
                    ? nil : ContinuousClock.now + options.interval
                guard let next = await run.triggers.next(until: deadline, timeout: .interval) else { return }
                cause = next
            }
        }
    }

    /// Long polls: one always held at the remote; each answer stored, the next sent.
    private func polls(_ run: WatchRun, events: @Sendable (Event) -> Void) async {
        var backoff: Duration?
        // Long polls in a row whose answer forgot the cursor ([SYNC-75]: `resync` or another
        // epoch), each followed by a clock comparison: a remote that does it every time (a
        // hostile or broken one) would have this client compare and push again forever.
        var cursorLosses = 0
        var lastLoss: ContinuousClock.Instant?
        // The pause before the next poll after empty answers that came at once.
        var unheld: Duration?
        while !run.isFinished {
            do {
                let seenRounds = run.roundsDone
                guard let request = try await run.lock.run({ try await target.longPollRequest(wait: options.wait) }) else {
                    // No cursor: the first round has not succeeded yet, or a resync is due.
                    run.pollHealthy.store(false, ordering: .relaxed)
                    if seenRounds > 0 { run.triggers.fire(.remote) }
                    guard await run.waitForRound(after: seenRounds) else { return }
                    continue
                }
                // Held from now on: local rounds need not pull (until a send fails).
                run.pollHealthy.store(true, ordering: .relaxed)
                let sent = ContinuousClock.now
                let answer = try await target.send(request)
                backoff = nil
                // An answer with nothing in it that came at once: the remote did not hold the
                // poll ([SYNC-70]). Asked again at once, such a remote would be asked dozens of
                // times a second; the next poll waits, from `minBackoff` doubling.
                let empty = answer.pull.isEmpty && !answer.resync && answer.cursor == request.cursor && answer.epoch == request.epoch
                if empty && ContinuousClock.now - sent < Self.heldAtLeast {
                    let pause = unheld.map { min($0 * 2, options.maxBackoff) } ?? options.minBackoff
                    unheld = pause
                    guard await run.triggers.sleepIgnoringFires(for: pause) else { return }
                } else if !empty {
                    unheld = nil
                }
                if answer.resync || answer.epoch != request.epoch {
                    // In a row means close together: resets minutes apart (a relay restarted
                    // or its epoch reset by its operator, a comparison each time) are not.
                    let now = ContinuousClock.now
                    cursorLosses = lastLoss.map { now - $0 < Self.lossWindow } == true ? cursorLosses + 1 : 1
                    lastLoss = now
                    guard cursorLosses < Self.maxCursorLosses else {
                        throw LnoteError(.protocolMismatch, "the remote answered \(cursorLosses) long polls in a row with "
                                         + (answer.resync ? "resync" : "another epoch") + " right after a clock comparison")
                    }
                } else {
                    cursorLosses = 0
                }
                if !answer.pull.isEmpty || answer.resync || answer.cursor != request.cursor || answer.epoch != request.epoch {
                    let report = try await run.lock.run { try await target.absorb(answer, for: request) }
                    events(.synced(report, cause: .remote))
                }
            } catch {
                if run.isFinished || error is CancellationError { return }
                let e = Self.lnoteError(error)
                run.pollHealthy.store(false, ordering: .relaxed)
                if Self.httpStatus(e) == 400 || Self.httpStatus(e) == 405 {
                    // An older server: `wait` is an unknown flag there.
                    run.longPolls.store(false, ordering: .relaxed)
                    events(.longPollsUnavailable(e))
                    run.triggers.fire(.interval)
                    return
                }
                guard let wait = failed(error, run, backoff: &backoff, events: events),
                      await run.triggers.sleepIgnoringFires(for: wait) else { return }
            }
        }
    }

    /// Long polls in a row that may lose the cursor before the watcher stops (a relay that
    /// restarts loses it once; one that loses it every time has no cursor to give).
    static let maxCursorLosses = 3
    /// Losses further apart than this start the count again.
    static let lossWindow: Duration = .seconds(60)
    /// An empty long-poll answer sooner than this was not held by the remote.
    static let heldAtLeast: Duration = .milliseconds(500)

    /// After a failed round or long poll: stops the watcher on a failure waiting cannot fix
    /// (nil), or doubles the backoff (from `minBackoff` to `maxBackoff`) and returns it.
    private func failed(_ error: any Error, _ run: WatchRun, backoff: inout Duration?,
                        events: @Sendable (Event) -> Void) -> Duration? {
        let e = Self.lnoteError(error)
        if Self.isPermanent(error) {
            run.stop(with: e)
            events(.stopped(e))
            return nil
        }
        let wait = backoff.map { min($0 * 2, options.maxBackoff) } ?? options.minBackoff
        backoff = wait
        events(.failed(e, retryIn: wait))
        return wait
    }

    // MARK: - Local changes

    private struct LocalSource {
        var stop: @Sendable () -> Void
    }

    private func startLocal(_ run: WatchRun) -> LocalSource {
        let triggers = run.triggers
        switch local {
        case .none:
            localMode.withLock { $0 = "none" }
            return LocalSource(stop: {})
        case .folders(let folders):
            let every = options.poll
            do {
                let watch = try LogWatch(folders: folders, pollInterval: every) { triggers.fire(.local) }
                localMode.withLock { $0 = watch.mode }
                return LocalSource(stop: { watch.close() })
            } catch {
                // A folder that is not there: the first round says so (and stops the run).
                localMode.withLock { $0 = "polling every \(every)" }
                return pollingSource(every: every, triggers: triggers) { LogWatch.fingerprint(folders: folders) }
            }
        case .polling(let fingerprint, let every):
            localMode.withLock { $0 = "polling every \(every)" }
            return pollingSource(every: every, triggers: triggers, fingerprint)
        }
    }

    private func pollingSource(every: Duration, triggers: Triggers, _ fingerprint: @escaping @Sendable () -> Int) -> LocalSource {
        let task = Task.detached {
            var last = fingerprint()
            while !Task.isCancelled {
                try? await Task.sleep(for: every)
                let now = fingerprint()
                if now != last {
                    last = now
                    triggers.fire(.local)
                }
            }
        }
        return LocalSource(stop: { task.cancel() })
    }

    // MARK: - Failures

    /// Whether waiting cannot fix `error`: a `Stop`, an HTTP status that will be the same
    /// next time (400, 401, 403, 404, 405, 413, 426), a token refused, a protocol the
    /// remote does not speak. Connection failures, timeouts, 5xx, 429, 409 (an asset to
    /// upload again) and local errors (the folder open in another process) are transient.
    public static func isPermanent(_ error: any Error) -> Bool {
        if error is Stop { return true }
        let e = lnoteError(error)
        if let status = httpStatus(e) { return [400, 401, 403, 404, 405, 413, 426].contains(status) }
        switch e.code {
        case .unauthorized, .protocolMismatch, .unsupportedVersion: return true
        default: return false
        }
    }

    /// The HTTP status of an error a remote reported: its `underlying` is `HTTP <status>`
    /// or `HTTP <status> <code>` (sync-protocol.md [SYNC-22]).
    static func httpStatus(_ e: LnoteError) -> Int? {
        guard let u = e.underlying, u.hasPrefix("HTTP ") else { return nil }
        return Int(u.dropFirst(5).prefix { $0.isNumber })
    }

    static func lnoteError(_ error: any Error) -> LnoteError {
        if let s = error as? Stop { return s.error }
        if let o = error as? OwnerRefusal { return o.error }
        return error as? LnoteError ?? LnoteError(.network, "\(error)")
    }
}

/// A target made of a sync closure alone (no long polls).
struct ClosureTarget: SyncWatchTarget {
    let syncBody: @Sendable () async throws -> SyncReport
    init(sync: @escaping @Sendable () async throws -> SyncReport) { syncBody = sync }
    var supportsLongPolls: Bool { false }
    func sync(pushOnly: Bool) async throws -> SyncReport { try await syncBody() }
    func longPollRequest(wait: UInt32) async throws -> SyncRequest? { nil }
    func send(_ request: SyncRequest) async throws -> SyncResponse {
        throw LnoteError(.invalidState, "this watcher has no long polls")
    }
    func absorb(_ answer: SyncResponse, for request: SyncRequest) async throws -> SyncReport { SyncReport() }
}

/// What the two loops of one `run` share.
final class WatchRun: Sendable {
    let triggers = Triggers()
    let lock = AsyncLock()
    /// False once the remote refused a long poll (an older server) or has none.
    let longPolls: Atomic<Bool>
    /// A long poll is held (none failed since): rounds started by local changes need not pull.
    let pollHealthy = Atomic<Bool>(false)
    private let state = Mutex<(finished: Bool, stopError: LnoteError?, rounds: Int,
                               roundWaiters: [CheckedContinuation<Bool, Never>])>((false, nil, 0, []))

    init(longPolls: Bool) { self.longPolls = Atomic(longPolls) }

    var isFinished: Bool { state.withLock { $0.finished } }
    var stopError: LnoteError? { state.withLock { $0.stopError } }
    var roundsDone: Int { state.withLock { $0.rounds } }

    func stop(with e: LnoteError) {
        state.withLock { if $0.stopError == nil { $0.stopError = e } }
        finish()
    }

    /// Ends both loops: wakes every wait.
    func finish() {
        let waiters = state.withLock { s -> [CheckedContinuation<Bool, Never>] in
            s.finished = true
            defer { s.roundWaiters = [] }
            return s.roundWaiters
        }
        for w in waiters { w.resume(returning: false) }
        triggers.finish()
    }

    func roundSucceeded() {
        let waiters = state.withLock { s -> [CheckedContinuation<Bool, Never>] in
            s.rounds += 1
            defer { s.roundWaiters = [] }
            return s.roundWaiters
        }
        for w in waiters { w.resume(returning: true) }
    }

    /// Waits until more than `count` rounds succeeded; false when the run finished.
    func waitForRound(after count: Int) async -> Bool {
        await withCheckedContinuation { c in
            let now: Bool? = state.withLock { s in
                if s.finished { return false }
                if s.rounds > count { return true }
                s.roundWaiters.append(c)
                return nil
            }
            if let now { c.resume(returning: now) }
        }
    }
}

/// The causes of rounds, gathered from any thread (inotify's, a timer, an app's call) for
/// the round loop, which sleeps on a continuation in between.
final class Triggers: Sendable {
    private struct State {
        var pending: SyncWatcher.Cause?
        var waiter: CheckedContinuation<SyncWatcher.Cause?, Never>?
        var finished = false
    }
    private let state = Mutex(State())

    /// Records a cause (the first pending one is kept) and wakes the waiting loop.
    func fire(_ cause: SyncWatcher.Cause) {
        let w = state.withLock { s -> CheckedContinuation<SyncWatcher.Cause?, Never>? in
            guard !s.finished else { return nil }
            if let w = s.waiter {
                s.waiter = nil
                return w
            }
            if s.pending == nil { s.pending = cause }
            return nil
        }
        w?.resume(returning: cause)
    }

    func finish() {
        let w = state.withLock { s -> CheckedContinuation<SyncWatcher.Cause?, Never>? in
            s.finished = true
            defer { s.waiter = nil }
            return s.waiter
        }
        w?.resume(returning: nil)
    }

    /// The next cause; `timeout` when `deadline` passes first; nil when finished.
    func next(until deadline: ContinuousClock.Instant?, timeout: SyncWatcher.Cause) async -> SyncWatcher.Cause? {
        let timer = deadline.map { d in
            Task { [weak self] in
                try? await Task.sleep(until: d, clock: .continuous)
                if !Task.isCancelled { self?.fire(timeout) }
            }
        }
        defer { timer?.cancel() }
        return await withCheckedContinuation { c in
            let now: SyncWatcher.Cause?? = state.withLock { s in
                if s.finished { return .some(nil) }
                if let p = s.pending {
                    s.pending = nil
                    return .some(p)
                }
                s.waiter = c
                return .none
            }
            if let now { c.resume(returning: now) }
        }
    }

    /// Sleeps `duration` whatever fires meanwhile (kept pending, then dropped: the round
    /// after the sleep syncs everything); false when finished.
    func sleep(for duration: Duration) async -> Bool {
        let until = ContinuousClock.now + duration
        while ContinuousClock.now < until {
            guard let c = await next(until: until, timeout: .retry) else { return false }
            if c == .retry && ContinuousClock.now >= until { break }
        }
        state.withLock { $0.pending = nil }
        return !state.withLock { $0.finished }
    }

    /// Sleeps `duration` without taking the round loop's causes; false when finished.
    func sleepIgnoringFires(for duration: Duration) async -> Bool {
        try? await Task.sleep(for: duration)
        return !state.withLock { $0.finished }
    }
}

/// A lock for async code: one holder at a time, the others wait in order (no thread blocks).
/// (Shared with LnoteServer, which serializes a served notebook's sync calls with it.)
package final class AsyncLock: Sendable {
    private let state = Mutex<(held: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    package init() {}

    package func run<T>(_ body: () async throws -> T) async throws -> T {
        await lock()
        defer { unlock() }
        return try await body()
    }

    private func lock() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let now = state.withLock { s -> Bool in
                if !s.held {
                    s.held = true
                    return true
                }
                s.waiters.append(c)
                return false
            }
            if now { c.resume() }
        }
    }

    private func unlock() {
        let next = state.withLock { s -> CheckedContinuation<Void, Never>? in
            guard !s.waiters.isEmpty else {
                s.held = false
                return nil
            }
            return s.waiters.removeFirst()
        }
        next?.resume()
    }
}
