import Foundation
import Synchronization
import Testing
import LnoteModel
@testable import LnoteSync
import LnoteTestSupport

@Suite struct SyncWatcherTests {
    final class Log: Sendable {
        let events = Mutex<[String]>([])
        func add(_ s: String) { events.withLock { $0.append(s) } }
        var all: [String] { events.withLock { $0 } }
    }

    /// Waits (bounded: a broken watcher fails the test instead of hanging it).
    /// While the remote is unreachable the watcher backs off (doubling, capped), and it
    /// resumes as soon as the remote answers again.
    @Test("[SYNC-75] transient failures back off, doubling to the maximum, and resume")
    func backsOffWhileUnreachableThenResumes() async {
        let attempts = Mutex(0)
        let log = Log()
        let watcher = SyncWatcher(interval: .milliseconds(5), poll: .milliseconds(1),
                                  minBackoff: .milliseconds(10), maxBackoff: .milliseconds(40),
                                  fingerprint: { 0 },
                                  sync: {
                                      let n = attempts.withLock { $0 += 1; return $0 }
                                      if n <= 4 { throw LnoteError(.network, "connection refused (attempt \(n))") }
                                      return SyncReport()
                                  })
        let stopped = await watcher.run(maxSyncs: 6) { event in
            switch event {
            case .synced: log.add("synced")
            case .failed(_, let wait): log.add("failed \(wait.components.attoseconds / 1_000_000_000_000_000)ms")
            default: break
            }
        }
        #expect(stopped == nil)
        #expect(log.all == ["failed 10ms", "failed 20ms", "failed 40ms", "failed 40ms", "synced", "synced"])
    }

    /// An edit made while a sync runs (the fingerprint changes inside the sync) triggers
    /// another sync at the next poll, not at the next interval.
    @Test func changesDuringASyncAreNotMissed() async {
        let syncs = Mutex(0)
        let fingerprint = Mutex(1)
        let watcher = SyncWatcher(interval: .seconds(3600), poll: .milliseconds(2),
                                  fingerprint: { fingerprint.withLock { $0 } },
                                  sync: {
                                      let n = syncs.withLock { $0 += 1; return $0 }
                                      if n == 1 { fingerprint.withLock { $0 = 2 } }  // an edit during the first sync
                                      return SyncReport()
                                  })
        let run = Task { await watcher.run(maxSyncs: 2) { _ in } }
        let second = await eventually(30) { syncs.withLock { $0 } >= 2 }
        #expect(second, "the edit made during the first sync waited for the next interval")
        if !second { run.cancel() }
        _ = await run.value
    }

    /// A local change (or `notifyChanged`) triggers a sync long before the interval.
    @Test func localChangesTriggerASync() async {
        let syncs = Mutex(0)
        let fingerprint = Mutex(1)
        let watcher = SyncWatcher(interval: .seconds(3600), poll: .milliseconds(2),
                                  fingerprint: { fingerprint.withLock { $0 } },
                                  sync: { syncs.withLock { $0 += 1 }; return SyncReport() })
        let run = Task { await watcher.run(maxSyncs: 3) { _ in } }
        // First sync happens at once; then a folder change; then an explicit notification.
        #expect(await eventually(30) { syncs.withLock { $0 } >= 1 })
        fingerprint.withLock { $0 = 2 }
        #expect(await eventually(30) { syncs.withLock { $0 } >= 2 }, "a changed fingerprint did not trigger a sync")
        watcher.notifyChanged()
        let third = await eventually(30) { syncs.withLock { $0 } >= 3 }
        #expect(third, "notifyChanged did not trigger a sync")
        if !third { run.cancel() }
        _ = await run.value
    }

    /// [SYNC-75] Failures waiting cannot fix end `run` with the error: a token refused (401,
    /// 403), a 404 or a 400, a `Stop` (the folder is gone); 5xx, 429, 409, a connection
    /// refused or the folder open in another process are retried.
    @Test("[SYNC-75] permanent failures stop the watcher, transient ones are retried")
    func permanentFailuresStop() async {
        func http(_ status: Int, _ code: LnoteError.Code) -> LnoteError {
            LnoteError(code, "POST …/sync: HTTP \(status)", underlying: "HTTP \(status)")
        }
        for (error, permanent) in [(http(401, .unauthorized), true), (http(403, .unauthorized), true),
                                   (http(404, .notFound), true), (http(400, .invalidArgument), true),
                                   (http(426, .protocolMismatch), true), (http(503, .network), false),
                                   (http(500, .network), false), (http(429, .network), false),
                                   (http(409, .notFound), false),
                                   (LnoteError(.network, "connect", underlying: "CURLE_COULDNT_CONNECT (7): refused"), false),
                                   (LnoteError(.invalidState, "the notebook is open in another process"), false)] {
            #expect(SyncWatcher.isPermanent(error) == permanent, "\(error)")
        }
        #expect(SyncWatcher.isPermanent(SyncWatcher.Stop(LnoteError(.notFound, "no notebook folder", path: "/x"))))

        for failure in [http(401, .unauthorized), LnoteError(.notFound, "no notebook folder", path: "/gone")] {
            let calls = Mutex(0)
            let log = Log()
            let isStop = failure.underlying == nil
            let watcher = SyncWatcher(interval: .milliseconds(5), poll: .milliseconds(1), minBackoff: .milliseconds(1),
                                      fingerprint: { 0 },
                                      sync: {
                                          let n = calls.withLock { $0 += 1; return $0 }
                                          if n == 1 { throw LnoteError(.network, "reset", underlying: "CURLE_RECV_ERROR (56)") }
                                          if isStop { throw SyncWatcher.Stop(failure) }
                                          throw failure
                                      })
            let stopped = await watcher.run(maxSyncs: 50) { event in
                switch event {
                case .failed: log.add("failed")
                case .stopped(let e): log.add("stopped \(e.code)")
                default: break
                }
            }
            #expect(stopped?.code == failure.code)
            #expect(calls.withLock { $0 } == 2, "one retry of the transient failure, then the stop")
            #expect(log.all == ["failed", "stopped \(failure.code)"])
        }
    }

    /// A scripted remote with long polls: each `send` waits for the test to answer it.
    final class ScriptedTarget: SyncWatchTarget, @unchecked Sendable {
        let rounds = Mutex<[Bool]>([])          // pushOnly of each round
        let absorbed = Mutex<[SyncResponse]>([])
        let sent = Mutex<[SyncRequest]>([])
        let pending = Mutex<[CheckedContinuation<SyncResponse, any Error>]>([])
        let cursor = Mutex<UInt64>(0)
        var supportsLongPolls: Bool { true }

        func sync(pushOnly: Bool) async throws -> SyncReport {
            rounds.withLock { $0.append(pushOnly) }
            cursor.withLock { $0 = max($0, 1) }
            return SyncReport()
        }
        func longPollRequest(wait: UInt32) async throws -> SyncRequest? {
            let c = cursor.withLock { $0 }
            return c == 0 ? nil : SyncRequest(replica: ReplicaID(1), epoch: 9, cursor: c, wait: wait)
        }
        /// Held until `answer`; cancelled like a real remote's request (`HTTPRemote` aborts
        /// its transfer), so that a watcher cancelled while a poll is held ends.
        func send(_ request: SyncRequest) async throws -> SyncResponse {
            sent.withLock { $0.append(request) }
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { c in
                    pending.withLock { $0.append(c) }
                    if Task.isCancelled { cancelHeld() }
                }
            } onCancel: {
                cancelHeld()
            }
        }
        private func cancelHeld() {
            for c in pending.withLock({ p in defer { p = [] }; return p }) { c.resume(throwing: CancellationError()) }
        }
        func absorb(_ answer: SyncResponse, for request: SyncRequest) async throws -> SyncReport {
            absorbed.withLock { $0.append(answer) }
            cursor.withLock { $0 = answer.cursor }
            var r = SyncReport()
            r.opsReceived = answer.pull.count
            return r
        }
        /// Answers the held long poll (false when none is held).
        func answer(_ result: Result<SyncResponse, any Error>) -> Bool {
            guard let c = pending.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) else { return false }
            c.resume(with: result)
            return true
        }
        var held: Int { pending.withLock { $0.count } }
    }

    /// [SYNC-75] One long poll is always held once the first round gave a cursor; an
    /// answer with something is stored (a `.remote` event) and the next poll sent from its
    /// cursor; an empty answer (the wait ran out) is not stored; local changes start
    /// push-only rounds while the poll works.
    @Test("[SYNC-75] the watcher keeps one long poll held and stores its answers")
    func longPollLoop() async throws {
        let target = ScriptedTarget()
        let log = Log()
        let watcher = SyncWatcher(target: target, local: .none, options: .init(wait: 42, interval: .seconds(3600)))
        let run = Task {
            await watcher.run { event in
                switch event {
                case .started(let local, let longPolls): log.add("started \(local) \(longPolls)")
                case .synced(let r, let cause): log.add("synced \(cause.rawValue) \(r.opsReceived)")
                case .failed(let e, _): log.add("failed \(e.code)")
                default: log.add("other")
                }
            }
        }
        #expect(await eventually { target.held == 1 })
        #expect(target.sent.withLock { $0.first?.wait == 42 && $0.first?.cursor == 1 })
        // The wait ran out: nothing stored, the next poll sent (after a pause: this empty
        // answer came at once, as from a remote that does not hold polls).
        #expect(target.answer(.success(SyncResponse(epoch: 9, cursor: 1, accepted: 0, pull: []))))
        #expect(await eventually { target.sent.withLock { $0.count } == 2 && target.held == 1 })
        #expect(target.absorbed.withLock { $0.isEmpty })
        // Another client's operation: stored, then a poll from the new cursor.
        let pull = [LogBatch(log: LogRef(document: DocumentID()), frames: [])]
        #expect(target.answer(.success(SyncResponse(epoch: 9, cursor: 7, accepted: 0, pull: pull))))
        #expect(await eventually { target.sent.withLock { $0.count } == 3 && target.held == 1 })
        #expect(target.absorbed.withLock { $0.count } == 1)
        #expect(target.sent.withLock { $0.last?.cursor } == 7)
        // A local change while the poll works: a push-only round.
        watcher.notifyChanged()
        #expect(await eventually { target.rounds.withLock { $0 } == [false, true] })
        // A transient failure of the poll: reported, retried after the backoff.
        #expect(target.answer(.failure(LnoteError(.network, "reset", underlying: "CURLE_RECV_ERROR (56)"))))
        #expect(await eventually(5) { target.sent.withLock { $0.count } == 4 && target.held == 1 })
        run.cancel()
        _ = target.answer(.failure(CancellationError()))
        #expect(await run.value == nil)
        let events = log.all
        #expect(events.first == "started none true")
        #expect(events.contains("synced start 0") && events.contains("synced remote 1") && events.contains("synced local 0"))
        #expect(events.contains("failed network"))
    }

    /// [SYNC-75] A remote that answers every long poll in another epoch (each answer
    /// forgets the cursor, each next round compares clocks and pushes again) stops the
    /// watcher after 3 in a row, with an error that says so, rather than loop forever; one
    /// such answer (a relay restarted) is followed by polls as usual.
    @Test("[SYNC-75] a remote that changes its epoch on every long poll stops the watcher")
    func epochChurnStops() async throws {
        let target = ScriptedTarget()
        let watcher = SyncWatcher(target: target, local: .none,
                                  options: .init(wait: 42, interval: .seconds(3600), minBackoff: .milliseconds(1)))
        let finished = Mutex(false)
        let run = Task {
            let e = await watcher.run { _ in }
            finished.withLock { $0 = true }
            return e
        }
        // One lost cursor, then a poll answered in the same epoch: the count starts over.
        #expect(await eventually { target.held == 1 })
        #expect(target.answer(.success(SyncResponse(epoch: 10, cursor: 1, accepted: 0, pull: []))))
        #expect(await eventually { target.held == 1 && target.sent.withLock { $0.count } == 2 })
        #expect(target.answer(.success(SyncResponse(epoch: 9, cursor: 2, accepted: 0, pull: []))))
        // Then another epoch every time.
        var epoch: UInt64 = 100
        let stopped = await eventually {
            if target.held == 1 {
                epoch += 1
                _ = target.answer(.success(SyncResponse(epoch: epoch, cursor: 1, accepted: 0, pull: [])))
            }
            return target.sent.withLock { $0.count } >= 20 || finished.withLock { $0 }
        }
        #expect(stopped)
        let error = await run.value
        #expect(error?.code == .protocolMismatch, "\(String(describing: error))")
        #expect(error?.message.contains("3 long polls in a row with another epoch") == true, "\(String(describing: error))")
        #expect(target.sent.withLock { $0.count } == 5, "2 polls, then 3 lost cursors in a row")
    }

    /// [SYNC-75] A remote that answers each long poll at once with nothing (it does not hold
    /// them) is not asked again at once: the watcher pauses from `minBackoff`, doubling.
    @Test("[SYNC-75] empty answers that come at once are paced")
    func unheldPollsArePaced() async throws {
        let target = ScriptedTarget()
        let watcher = SyncWatcher(target: target, local: .none,
                                  options: .init(wait: 42, interval: .seconds(3600), minBackoff: .milliseconds(200)))
        let run = Task { await watcher.run { _ in } }
        let start = ContinuousClock.now
        // Answered as soon as held, for 1.2 s: pauses of 0.2, 0.4 and 0.8 s leave room for
        // about 4 polls (without them, hundreds).
        while ContinuousClock.now - start < .milliseconds(1200) {
            if target.held == 1 { _ = target.answer(.success(SyncResponse(epoch: 9, cursor: 1, accepted: 0, pull: []))) }
            try await Task.sleep(for: .milliseconds(2))
        }
        let polls = target.sent.withLock { $0.count }
        #expect(polls >= 2 && polls <= 6, "\(polls) polls in 1.2 s")
        run.cancel()
        _ = target.answer(.failure(CancellationError()))
        _ = await run.value
    }

    /// [SYNC-70] [SYNC-75] A remote that answers the long poll 400 (an older server: `wait`
    /// is an unknown flag there) is synced every interval instead, and the watcher says so.
    @Test("[SYNC-70] [SYNC-75] an older server that refuses long polls is synced every interval")
    func olderServerFallsBack() async throws {
        let target = ScriptedTarget()
        let log = Log()
        let watcher = SyncWatcher(target: target, local: .none, options: .init(interval: .milliseconds(20)))
        let run = Task {
            await watcher.run(maxSyncs: 4) { event in
                if case .longPollsUnavailable = event { log.add("fallback") }
            }
        }
        #expect(await eventually { target.held == 1 })
        #expect(target.answer(.failure(LnoteError(.invalidArgument, "unknown flags 8", underlying: "HTTP 400 bad_request"))))
        let done = await eventually { target.rounds.withLock { $0.count } >= 4 }
        #expect(done, "rounds every interval after the fallback")
        if !done { run.cancel() }
        #expect(await run.value == nil)
        #expect(log.all == ["fallback"])
        #expect(target.rounds.withLock { $0 }.allSatisfy { !$0 }, "every round pulls")
    }

    /// [SYNC-75] With `.folders`, a page log written under a package is a local change,
    /// noticed through inotify (no polling); writes to the `.lnote/` metadata are not.
    @Test("[SYNC-75] inotify on the folder starts a round for log writes, not for metadata")
    func inotifyStartsRounds() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("lnote-watch-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir + "/.lnote", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let rounds = Mutex(0)
        let watcher = SyncWatcher(target: ClosureTarget { rounds.withLock { $0 += 1 }; return SyncReport() },
                                  local: .folders([dir]), options: .init(interval: .seconds(3600)))
        let run = Task { await watcher.run { _ in } }
        #expect(await eventually { rounds.withLock { $0 } == 1 })
        #expect(watcher.localChangeMode == "inotify")
        // Metadata: no round.
        try Data("x".utf8).write(to: URL(fileURLWithPath: dir + "/.lnote/remote-state"))
        try await Task.sleep(for: .milliseconds(200))
        #expect(rounds.withLock { $0 } == 1)
        // A package appears, then its page log grows: rounds.
        let package = dir + "/" + UUID().uuidString + ".lnote"
        try FileManager.default.createDirectory(atPath: package + "/pages", withIntermediateDirectories: true)
        #expect(await eventually { rounds.withLock { $0 } >= 2 }, "a new package is a change")
        let before = rounds.withLock { $0 }
        try await Task.sleep(for: .milliseconds(50))
        let log = package + "/pages/" + UUID().uuidString + ".log"
        FileManager.default.createFile(atPath: log, contents: Data([1, 2, 3]))
        #expect(await eventually { rounds.withLock { $0 } > before }, "a page log written is a change")
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        let afterCreate = rounds.withLock { $0 }
        try await Task.sleep(for: .milliseconds(50))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data([4, 5]))
        try handle.close()
        #expect(await eventually { rounds.withLock { $0 } > afterCreate }, "an append is a change")
        run.cancel()
        _ = await run.value
    }
}
