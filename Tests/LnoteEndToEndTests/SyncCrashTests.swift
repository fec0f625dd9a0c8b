import Foundation
import Synchronization
import Testing
import LnoteModel
@testable import LnoteStore
import LnoteSync
import LnoteTestSupport

/// [PKG-52] [SYNC-7] A replica crashed (simulated through the syscall seam) at each disk
/// mutation of a sync that brings it a notebook: reopened, it holds every edit of its own it
/// had acknowledged before, nothing is damaged (a torn tail at most), and the next sync gives
/// it exactly the other side's notebook. Every 4th mutation in the test suite (each step
/// costs most of a second here); `LNOTE_SYNC_CRASH_STRIDE=1` (scripts/reliability.sh's full run)
/// crashes at every one.
@Suite struct SyncCrashTests {
    /// Crashes at the n-th disk mutation once armed (after opening, so the sync's own are counted).
    final class ArmedCrash: Sendable {
        let armed = Mutex(false)
        let seen = Mutex(0)
        let at: Int
        init(at: Int) { self.at = at }
        var plan: FaultPlan {
            FaultPlan { [self] e in
                guard e.kind.mutates, armed.withLock({ $0 }) else { return nil }
                let i = seen.withLock { s -> Int in
                    defer { s += 1 }
                    return s
                }
                return i == at ? .crash(afterBytes: 3) : nil
            }
        }
        var crashed: Bool { seen.withLock { $0 } > at }
    }

    @Test("[SYNC-7] [PKG-52] a crash at each disk mutation of receiving a sync reopens undamaged and converges")
    func crashAtEachMutationOfASync() async throws {
        let dir = try TempDir()
        _ = try await Fixture.notebook(at: dir.sub("source"), strokes: 24, pages: 3)
        let stride = max(1, ProcessInfo.processInfo.environment["LNOTE_SYNC_CRASH_STRIDE"].flatMap(Int.init) ?? 4)
        var step = 0, cases = 0
        var lost = 0, corrupted = 0
        while step < 1000 {
            let context = "step \(step)"
            // A copy of the source per step: the check's sync below sends B's own edit back to it.
            let a = dir.sub("A\(step)"), b = dir.sub("B\(step)")
            try FileManager.default.copyItem(atPath: dir.sub("source"), toPath: a)
            // B's own edit, acknowledged before the sync.
            let own = try await Notebook.open(at: b, create: true, options: Fixture.quiet)
            let doc = try await own.createDocument(title: "own")
            let page = await doc.pageList[0].id
            var handwriting = HandwritingGenerator(seed: UInt64(step))
            let acked = try await doc.addStrokes(handwriting.strokes(2), to: page)
            try await own.close()

            let crash = ArmedCrash(at: step)
            let nbB = try await Notebook(path: b, create: false, options: Fixture.quiet, io: Syscalls(faults: crash.plan))
            let nbA = try await Notebook.open(at: a, options: Fixture.quiet)
            crash.armed.withLock { $0 = true }
            var completed = true
            do {
                let remote = LocalRemote(key: a, endpoint: NotebookEndpoint(notebook: nbA), cursorsOutliveProcess: false)
                _ = try await SyncSession(notebook: nbB, remote: remote).run()
                try await nbB.close()
            } catch {
                completed = false
                try? await nbB.close()
            }
            try await nbA.close()
            #expect(completed == !crash.crashed, "\(context)")

            // Reopened without faults: B's own edit is there, nothing is damaged.
            let reopened = try await Notebook.open(at: b, options: Fixture.quiet)
            let d = try await reopened.openDocument(doc.id)
            let have = Set(try await d.elements(page).map(\.id))
            let kept = Set(acked).isSubset(of: have)
            #expect(kept, "\(context): B's acknowledged strokes missing after the crash")
            var damaged = false
            for id in try await reopened.documentIDs() {
                let r = try await reopened.openDocument(id).recoveryReports
                if r.contains(where: \.hasDamage) { damaged = true }
            }
            #expect(!damaged, "\(context): damage reported after reopening")
            try await reopened.close()
            let bad = try Verify.run(folder: b).problems.filter { ![.tornTail, .orphanAsset].contains($0.kind) }
            #expect(bad.isEmpty, "\(context): \(bad)")

            // The next sync (no faults) completes it: both sides hold the same notebook.
            let nbA2 = try await Notebook.open(at: a, options: Fixture.quiet)
            let nbB2 = try await Notebook.open(at: b, options: Fixture.quiet)
            _ = try await SyncSession(notebook: nbB2, remote: LocalRemote(key: a, endpoint: NotebookEndpoint(notebook: nbA2),
                                                                      cursorsOutliveProcess: false)).run()
            try await nbB2.close()
            try await nbA2.close()
            let same = try await Fixture.canonical(a) == Fixture.canonical(b)
            #expect(same, "\(context): B differs from A after the next sync")

            if !kept { lost += 1 } else if damaged || !bad.isEmpty || !same { corrupted += 1 }
            try? FileManager.default.removeItem(atPath: a)
            try? FileManager.default.removeItem(atPath: b)
            cases += 1
            if completed { break }
            step += stride
        }
        #expect(step > 10, "a sync bringing 3 pages makes more than 10 disk mutations")
        ReliabilityReport.record(family: "syscall faults",
                                 detail: "crash at \(stride == 1 ? "each" : "every \(stride)th") disk mutation of a sync's receipt and close (SyncCrashTests)",
                                 cases: cases, lost: lost, corrupted: corrupted)
    }
}
