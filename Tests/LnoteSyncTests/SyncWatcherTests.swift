import Foundation
import Synchronization
import Testing
import LnoteModel
@testable import LnoteSync

@Suite struct SyncWatcherTests {
    final class Log: Sendable {
        let events = Mutex<[String]>([])
        func add(_ s: String) { events.withLock { $0.append(s) } }
        var all: [String] { events.withLock { $0 } }
    }

    /// While the remote is unreachable the watcher backs off (doubling, capped), and it
    /// resumes as soon as the remote answers again.
    @Test func backsOffWhileUnreachableThenResumes() async {
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
        await watcher.run(maxSyncs: 6) { event in
            switch event {
            case .synced: log.add("synced")
            case .failed(_, let wait): log.add("failed \(wait.components.attoseconds / 1_000_000_000_000_000)ms")
            }
        }
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
        for _ in 0..<15_000 where syncs.withLock({ $0 }) < 2 { try? await Task.sleep(for: .milliseconds(2)) }
        let second = syncs.withLock { $0 } >= 2
        #expect(second, "the edit made during the first sync waited for the next interval")
        if !second { run.cancel() }
        await run.value
    }

    /// A local change (or `notifyChanged`) triggers a sync long before the interval.
    @Test func localChangesTriggerASync() async {
        let syncs = Mutex(0)
        let fingerprint = Mutex(1)
        let watcher = SyncWatcher(interval: .seconds(3600), poll: .milliseconds(2),
                                  fingerprint: { fingerprint.withLock { $0 } },
                                  sync: { syncs.withLock { $0 += 1 }; return SyncReport() })
        let run = Task { await watcher.run(maxSyncs: 3) { _ in } }
        /// Waits (bounded: a broken watcher fails the test instead of hanging it).
        func waitFor(_ n: Int) async -> Bool {
            for _ in 0..<15_000 where syncs.withLock({ $0 }) < n { try? await Task.sleep(for: .milliseconds(2)) }
            return syncs.withLock { $0 } >= n
        }
        // First sync happens at once; then a folder change; then an explicit notification.
        #expect(await waitFor(1))
        fingerprint.withLock { $0 = 2 }
        #expect(await waitFor(2), "a changed fingerprint did not trigger a sync")
        watcher.notifyChanged()
        let third = await waitFor(3)
        #expect(third, "notifyChanged did not trigger a sync")
        if !third { run.cancel() }
        await run.value
    }
}
