import Foundation
import Testing
import LnoteModel
import LnoteReplication
@testable import LnoteStore

/// merge-semantics.md §6 on real documents: moments of a page and of the document read
/// from the logs on disk, across compactions, reopening, a checkpoint base and lost
/// operations ([MERGE-80] – [MERGE-84]).
@Suite struct TimeTravelStoreTests {
    /// A wall clock that ticks 1 s per call, shared by the two notebooks of a test.
    final class Ticks: @unchecked Sendable {
        private let lock = NSLock()
        private var now: Int64 = 1_700_000_000_000
        func next() -> Int64 { lock.withLock { now += 1_000; return now } }
    }

    @Test("[MERGE-80] [MERGE-81] every state a page went through on two machines comes back, after compaction and reopening")
    func everyStateComesBack() async throws {
        let seed = testSeed()
        var rng = SeededRNG(seed: seed)
        let dir = try TempDir("timetravel")
        defer { dir.remove() }
        let ticks = Ticks()
        let options = testOptions { $0.now = { ticks.next() } }
        let a = try await openNotebook(dir.sub("A"), options: options)
        let b = try await openNotebook(dir.sub("B"), options: options)
        let da = try await a.createDocument(title: "travel")
        let pid = await da.pageList[0].id
        _ = try await b.receive(try await da.operations(notCoveredBy: VectorClock()), document: da.id, page: nil)
        let db = try await b.openDocument(da.id)

        var seen: [(clock: VectorClock, json: String, wall: Int64)] = []
        func record(_ d: Document) async throws {
            let s = try await d.pageState(pid)
            seen.append((s.clock, s.canonicalJSON(), s.modified))
        }
        for step in 0..<40 {
            let d = rng.next() % 2 == 0 ? da : db
            let live = try await d.elementIDs(pid)
            switch (rng.next() % 6, live.randomElement(using: &rng)) {
            case (1, let e?): try await d.erase([e], on: pid)
            case (2, let e?): try await d.eraseRange(e, [PointRange(1, 3)], on: pid)
            case (3, let e?): try await d.move([e], dx: 40, dy: -10, on: pid)
            case (4, let e?): try await d.bringToFront([e], on: pid)
            case (5, _):
                // Exchange what each holds; sometimes compact first, so snapshots cover part of the logs.
                if rng.next() % 2 == 0 { try await da.compact(page: pid) }
                _ = try await db.receive(try await da.operations(page: pid, notCoveredBy: try await db.clock(page: pid)), page: pid)
                _ = try await da.receive(try await db.operations(page: pid, notCoveredBy: try await da.clock(page: pid)), page: pid)
                try await record(da)
                try await record(db)
                continue
            default: try await d.addStroke(stroke(3 + Int(rng.next() % 6), x: Int32(step) * 20), to: pid)
            }
            try await record(d)
        }
        try await a.close()
        let reopened = try await openNotebook(dir.sub("A"), options: options)
        defer { Task { try? await reopened.close(); try? await b.close() } }
        let d = try await reopened.openDocument(da.id)
        // A receives all of B's history, so its log holds every operation of the test.
        _ = try await d.receive(try await db.operations(page: pid, notCoveredBy: try await d.clock(page: pid)), page: pid)
        for (clock, json, _) in seen {
            let got = try await d.pageState(pid, at: .clock(clock))
            #expect(got.canonicalJSON() == json, "seed \(seed): the state at \(clock)")
            #expect(try await d.pageClock(pid, at: .clock(clock)) == clock, "seed \(seed)")
        }
        // Each step's moment gives back the state its author had just made.
        let steps = try await d.history(of: pid)
        #expect(steps.count == (try await d.clock(page: pid)).total)
        for step in steps {
            let state = try await d.pageState(pid, at: .operation(step.id))
            #expect(state.clock == step.moment, "seed \(seed)")
        }
        // The last moment is now; a moment before any operation is the empty page.
        let now = try await d.pageState(pid)
        #expect(try await d.pageState(pid, at: .wallTime(.max)).canonicalJSON() == now.canonicalJSON())
        #expect(try await d.pageState(pid, at: .clock(now.clock)).canonicalJSON() == now.canonicalJSON())
        let empty = try await d.pageState(pid, at: .wallTime(0))
        #expect(empty.clock.isEmpty && empty.elements.isEmpty)
    }

    @Test("[MERGE-81] [MERGE-83] a wall time names a moment of the document log and of each page log")
    func wallTimeAcrossLogs() async throws {
        let dir = try TempDir("timetravel-doc")
        defer { dir.remove() }
        let ticks = Ticks()
        let nb = try await openNotebook(dir.path, options: testOptions { $0.now = { ticks.next() } })
        defer { Task { try? await nb.close() } }
        let d = try await nb.createDocument(title: "before")
        let first = await d.pageList[0].id
        let s1 = try await d.addStroke(stroke(4), to: first)
        let t1 = try await d.pageState(first).modified
        let second = try await d.addPage()
        try await d.setTitle("after")
        try await d.addStroke(stroke(5, x: 100), to: first)
        try await d.erase([s1], on: first)

        let doc = try await d.documentState(at: .wallTime(t1))
        #expect(doc.title.value == "before")
        #expect(doc.pages.map(\.id) == [first])
        let page = try await d.pageState(first, at: .wallTime(t1))
        #expect(page.elements.map(\.id) == [s1])
        let later = try await d.documentState(at: .wallTime(.max))
        #expect(later == (await d.state))
        #expect(later.pages.map(\.id).contains(second))

        let steps = try await d.history()
        #expect(steps.map(\.kind) == ["createDocument", "addPage", "addPage", "title"])
        let pageSteps = try await d.history(of: first)
        #expect(pageSteps.map(\.kind) == ["add", "add", "erase"])
        #expect(pageSteps.map(\.points) == [4, 5, 0])
        #expect(pageSteps[2].elements == [s1])
    }

    @Test("[MERGE-82] a page installed from a checkpoint: moments above the base come back, moments below are refused")
    func checkpointBase() async throws {
        let dir = try TempDir("timetravel-base")
        defer { dir.remove() }
        let a = try await openNotebook(dir.sub("A"))
        let b = try await openNotebook(dir.sub("B"))
        defer { Task { try? await a.close(); try? await b.close() } }
        let da = try await a.createDocument(title: "source")
        let pid = await da.pageList[0].id
        let early = try await da.addStroke(stroke(4), to: pid)
        try await da.addStroke(stroke(5, x: 50), to: pid)
        let base = try await da.pageState(pid)
        try await b.installCheckpoint(document: da.id, pages: [base], assets: [])
        let db = try await b.openDocument(da.id)
        _ = try await db.receive(try await da.operations(notCoveredBy: VectorClock()))
        let added = try await db.addStroke(stroke(6, x: 90), to: pid)

        #expect(try await db.pageState(pid, at: .clock(base.clock)) == base)
        let now = try await db.pageState(pid, at: .operation(OpID(replica: b.replica, counter: 1)))
        #expect(now == (try await db.pageState(pid)))
        #expect(now.elements.map(\.id).contains(added))
        let before = await #expect(throws: LnoteError.self) { try await db.pageState(pid, at: .clock(VectorClock())) }
        #expect(before?.code == .invalidState)
        #expect(before?.message.contains("checkpoint") == true)
        // An operation under the base is not in B's log.
        let under = await #expect(throws: LnoteError.self) { try await db.pageState(pid, at: .operation(early)) }
        #expect(under?.code == .notFound)
    }

    @Test("[MERGE-82] operations the log lost: moments that need them are refused by name, earlier ones come back")
    func lostOperations() async throws {
        let dir = try TempDir("timetravel-lost")
        defer { dir.remove() }
        let nb = try await openNotebook(dir.path)
        let d = try await nb.createDocument(title: "lost")
        let pid = await d.pageList[0].id
        let kept = try await d.addStroke(stroke(4), to: pid)
        try await d.compact(page: pid)
        let state = try await d.pageState(pid)
        try await nb.close()
        // The log file is lost; the snapshot still holds the stroke ([PKG-51]).
        let paths = PackagePaths(folder: dir.path, id: d.id)
        try FileManager.default.removeItem(atPath: paths.log(pid))

        let again = try await openNotebook(dir.path)
        defer { Task { try? await again.close() } }
        let d2 = try await again.openDocument(d.id)
        #expect(try await d2.pageState(pid) == state)
        let refused = await #expect(throws: LnoteError.self) { try await d2.pageState(pid, at: .clock(state.clock)) }
        #expect(refused?.code == .invalidState)
        #expect(refused?.message.contains(kept.description) == true)
        #expect(try await d2.pageState(pid, at: .clock(VectorClock())).elements.isEmpty)
    }
}
