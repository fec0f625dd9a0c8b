import Foundation
import Synchronization
import Testing
import LnoteModel
import LnoteReplication
@testable import LnoteStore

/// Many holders of one document's leases at once ([PKG-94]): apps opening, editing and
/// closing it, and the notebook's own work (what a sync does) taking and giving back its
/// leases, so that the last lease goes, and the document is closed and opened again, over
/// and over while others ask for it.
@Suite("Leases of one document taken and given back by many tasks at once")
struct LeaseConcurrencyTests {
    /// What the tasks report.
    final class Tally: Sendable {
        let failures = Mutex<[String]>([])
        let strokes = Mutex(0)
        let done = Mutex(0)
    }

    @Test("[PKG-94] apps and the notebook's own work take and give back one document's leases at once: none waits forever, none gets a closed handle")
    func leasesChurnWithoutHangOrClosedHandle() async throws {
        let seed = testSeed()
        let dir = try TempDir("leasechurn")
        defer { dir.remove() }
        // As `lnote serve` opens a folder: autosave on, so closes race with autosaves too.
        let nb = try await openNotebook(dir.path, options: testOptions { $0.autosave = true; $0.autosaveDelay = .milliseconds(5) })
        let created = try await nb.createDocument(title: "Shared")
        let docID = created.id
        let page = try #require(await created.pageList.first?.id)
        try await created.close()
        let tally = Tally()
        let (apps, workers, rounds) = (3, 5, 40)
        let run = Task {
            await withTaskGroup(of: Void.self) { group in
                for t in 0..<(apps + workers) {
                    group.addTask {
                        var rng = SeededRNG(seed: seed &+ UInt64(t))
                        for round in 0..<rounds {
                            do {
                                if t < apps {
                                    // An app: open, edit, maybe wait a little, close.
                                    let d = try await nb.openDocument(docID)
                                    try await d.addStroke(marked(t * 1000 + round), to: page)
                                    tally.strokes.withLock { $0 += 1 }
                                    if rng.next() % 2 == 0 { try await Task.sleep(for: .microseconds(Int64(rng.next() % 2000))) }
                                    try await d.close()
                                } else {
                                    // The notebook's own work (a sync): read the log's clock and frames.
                                    _ = try await nb.frames(document: docID, page: page, notCoveredBy: VectorClock())
                                    _ = try await nb.appliedClock(document: docID, page: nil)
                                    if rng.next() % 4 == 0 { _ = try await nb.logClocks() }
                                }
                                if rng.next() % 3 == 0 { await Task.yield() }
                            } catch {
                                tally.failures.withLock { $0.append("task \(t) round \(round): \(error)") }
                            }
                        }
                        tally.done.withLock { $0 += 1 }
                    }
                }
            }
        }
        // A hang must fail the test, not stop the run: wait with a (generous) bound.
        let deadline = ContinuousClock.now + .seconds(60)
        while tally.done.withLock({ $0 }) < apps + workers && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        let finished = tally.done.withLock { $0 }
        guard finished == apps + workers else {
            Issue.record("seed \(seed): \(apps + workers - finished) of \(apps + workers) tasks still waiting after 60 s (a lease or close never completed)")
            return  // the hung tasks are left behind
        }
        await run.value
        let failures = tally.failures.withLock { $0 }
        #expect(failures.isEmpty, "seed \(seed): \(failures.count) calls failed: \(failures.prefix(5))")
        let d = try await nb.openDocument(docID)
        let markers = Set(try await d.elements(page).compactMap(marker(of:)))
        #expect(markers.count == tally.strokes.withLock { $0 }, "seed \(seed): strokes lost")
        try await d.close()
        #expect(await d.isClosed, "seed \(seed): the last lease closes it")
        try await nb.close()
        #expect(try Verify.run(folder: dir.path).problems.isEmpty, "seed \(seed)")
    }
}
