import Foundation
import Testing
import LnoteModel
import LnoteReplication
@testable import LnoteStore

/// merge-semantics.md §6 on real documents: moments of a page and of the document read
/// from the logs on disk, across compactions, reopening, a checkpoint base and lost
/// operations ([MERGE-80] – [MERGE-84]).
// The notebooks close in a task after the test returns, which writes their snapshots: the
// folder is removed again after that, or the close would leave it behind in /tmp.
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
        defer { let path = dir.path; Task { try? await reopened.close(); try? await b.close(); try? FileManager.default.removeItem(atPath: path) } }
        let d = try await reopened.openDocument(da.id)
        // A receives all of B's history, so its log holds every operation of the test.
        _ = try await d.receive(try await db.operations(page: pid, notCoveredBy: try await d.clock(page: pid)), page: pid)
        for (clock, json, _) in seen {
            let got = try await d.pageState(pid, at: .clock(clock))
            #expect(got.canonicalJSON() == json, "seed \(seed): the state at \(clock)")
            // Read with its points deferred, the same state once they are decoded.
            let deferred = try await d.pageState(pid, at: .clock(clock), deferringPoints: true)
            #expect(try deferred.resolved().canonicalJSON() == json, "seed \(seed): the state at \(clock), points deferred")
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
        defer { let path = dir.path; Task { try? await nb.close(); try? FileManager.default.removeItem(atPath: path) } }
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
        #expect(steps.map(\.kind) == ["createDocument", "addPage", "addPage", "setTitle"])
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
        defer { let path = dir.path; Task { try? await a.close(); try? await b.close(); try? FileManager.default.removeItem(atPath: path) } }
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
        defer { let path = dir.path; Task { try? await again.close(); try? FileManager.default.removeItem(atPath: path) } }
        let d2 = try await again.openDocument(d.id)
        #expect(try await d2.pageState(pid) == state)
        let refused = await #expect(throws: LnoteError.self) { try await d2.pageState(pid, at: .clock(state.clock)) }
        #expect(refused?.code == .invalidState)
        #expect(refused?.message.contains(kept.description) == true)
        #expect(try await d2.pageState(pid, at: .clock(VectorClock())).elements.isEmpty)
    }
}

/// [PKG-98] Past snapshots: kept at compaction, spaced and thinned, used by time travel,
/// passed over when damaged, reported by verify.
@Suite struct PastSnapshotTests {
    /// `count` operations of one author on `page`: adds, moves, erases, partial erases.
    static func history(_ page: PageID, count: Int, seed: UInt64) throws -> [Op] {
        var rng = SeededRNG(seed: seed)
        var r = PageReplica(page: page)
        let who = ReplicaID(0x9A57)
        var ops: [Op] = []
        var live: [(ElementID, Int)] = []
        for i in 0..<count {
            let wall = 1_700_000_000_000 + Int64(i)
            let kind = live.count < 20 ? 0 : rng.next() % 4
            let op: Op
            if kind == 0 {
                let n = 2 + Int(rng.next() % 6)
                op = try r.add(.stroke(stroke(n, x: Int32(i % 500))), by: who, wallTime: wall)
                live.append((op.id, n))
            } else {
                let k = Int(rng.next() % UInt64(live.count))
                switch kind {
                case 1: op = try r.move([live[k].0], dx: 5, dy: 1, by: who, wallTime: wall)
                case 2: op = try r.make(.erase([live.remove(at: k).0]), by: who, wallTime: wall)
                default: op = try r.make(.eraseRange(live[k].0, [PointRange(0, 1)]), by: who, wallTime: wall)
                }
            }
            ops.append(op)
        }
        return ops
    }

    /// A new notebook at `path` whose first page receives `count` operations of `history`,
    /// `every` at a time, compacted after each batch (so past snapshots are kept).
    static func compacted(_ path: String, count: Int, seed: UInt64, every: Int) async throws -> (Notebook, Document, PageID, [Op]) {
        let nb = try await openNotebook(path, io: fastIO)
        let d = try await nb.createDocument(title: "past")
        let pid = await d.pageList[0].id
        let ops = try history(pid, count: count, seed: seed)
        for start in stride(from: 0, to: ops.count, by: every) {
            _ = try await d.receive(Array(ops[start..<min(start + every, ops.count)]), page: pid)
            try await d.compact(page: pid)
        }
        return (nb, d, pid, ops)
    }

    @Test("[PKG-98] [MERGE-82] past snapshots are kept spaced, at most 8, and moments from them equal a replay from nothing")
    func keptSpacedAndUsed() async throws {
        let seed = testSeed()
        let dir = try TempDir("past")
        defer { dir.remove() }
        let (nb, d, pid, ops) = try await Self.compacted(dir.path, count: 13_000, seed: seed, every: 1_100)
        let totals = try await d.pastTotals(pid)
        #expect(totals.count == Document.pastKept, "seed \(seed): \(totals)")
        for (a, b) in zip(totals, totals.dropFirst()) { #expect(b - a >= Document.pastSpacing, "seed \(seed): \(totals)") }
        #expect(totals.last! >= 11_000, "seed \(seed): the newest is kept: \(totals)")
        // Older ones are further apart than newer ones.
        #expect(totals[1] - totals[0] >= totals[totals.count - 1] - totals[totals.count - 2], "seed \(seed): \(totals)")
        let paths = PackagePaths(folder: dir.path, id: d.id)
        for t in totals {
            let s = try PageSnapshot.decode(fileBytes(paths.past(pid, total: t))!, path: "past")
            #expect(s.state.clock.total == t)
        }
        // Moments just after, on and just before each past snapshot, and in between, against
        // the pure replay of the same operations from an empty page.
        let applied = try await d.clock(page: pid)
        var moments = [0, ops.count - 1]
        for t in totals.map(Int.init) { moments += [t - 2, t - 1, t] }
        for m in moments {
            let want = try History.pageState(pid, at: .operation(ops[m].id), ops: ops, applied: applied)
            let got = try await d.pageState(pid, at: .operation(ops[m].id))
            #expect(got == want, "seed \(seed): moment \(m)")
            let deferred = try await d.pageState(pid, at: .operation(ops[m].id), deferringPoints: true)
            #expect(try deferred.resolved() == want, "seed \(seed): moment \(m), points deferred")
            // It started from the latest past snapshot at or below the moment's total.
            let start = totals.last { $0 <= UInt64(m + 1) } ?? 0
            #expect(await d.lastMoment == (start, m + 1 - Int(start)), "seed \(seed): moment \(m)")
        }
        try await nb.close()
    }

    @Test("[PKG-98] damaged, misnamed or foreign past snapshots are passed over by time travel and reported by verify")
    func damagedOnesArePassedOver() async throws {
        let dir = try TempDir("past-damaged")
        defer { dir.remove() }
        let (nb, d, pid, ops) = try await Self.compacted(dir.path, count: 3_000, seed: 5, every: 1_100)
        let totals = try await d.pastTotals(pid)
        #expect(totals == [1_100, 2_200])
        let moment = ops[2_500].id
        let want = try await d.pageState(pid, at: .operation(moment))
        let paths = PackagePaths(folder: dir.path, id: d.id)
        try await nb.close()

        // Damage the one the moment starts from: one byte in its elements.
        var bytes = fileBytes(paths.past(pid, total: 2_200))!
        bytes[bytes.count / 2] ^= 0x40
        try writeFile(paths.past(pid, total: 2_200), bytes)
        // A copy under a wrong total, and one of another page.
        try writeFile(paths.past(pid, total: 2_400), fileBytes(paths.past(pid, total: 1_100))!)
        let other = PageID()
        try writeFile(paths.past(other, total: 1_100), fileBytes(paths.past(pid, total: 1_100))!)

        let again = try await openNotebook(dir.path, io: fastIO)
        let d2 = try await again.openDocument(d.id)
        #expect(try await d2.pageState(pid, at: .operation(moment)) == want)
        // Passed over the damaged 2,200 and the misnamed 2,400: started from 1,100.
        #expect(await d2.lastMoment == (1_100, 1_401))
        let report = try await again.verify()
        let problems = report.problems.map { "\($0.kind) \($0.path)" }
        #expect(problems.contains { $0.hasPrefix("undecodable") && $0.hasSuffix("\(pid).2200.past") }, "\(problems)")
        #expect(problems.contains { $0.hasPrefix("undecodable") && $0.hasSuffix("\(pid).2400.past") }, "\(problems)")
        let waiting = report.waiting.map { "\($0.kind) \($0.path)" }
        #expect(waiting.contains { $0.hasPrefix("orphanPageFile") && $0.hasSuffix("\(other).1100.past") }, "\(waiting)")
        #expect(!problems.contains { $0.hasSuffix("\(pid).1100.past") }, "\(problems)")
        try await again.close()

        // A forged one: a valid snapshot of 1,100 operations, one element short of what they give.
        var forged = try PageSnapshot.decode(fileBytes(paths.past(pid, total: 1_100))!, path: "past")
        forged.state.elements.removeLast()
        try writeFile(paths.past(pid, total: 1_100),
                      PageSnapshot.encode(forged.state, coveredLogOffset: forged.coveredLogOffset, logIncarnation: forged.logIncarnation))
        let third = try await openNotebook(dir.path, io: fastIO)
        let forgedProblems = try await third.verify().problems.map { "\($0.kind) \($0.path) \($0.message)" }
        #expect(forgedProblems.contains { $0.contains("\(pid).1100.past is not the state its log gives") }, "\(forgedProblems)")
        try await third.close()
    }

    @Test("[PKG-98] [MERGE-82] a moment starts from the latest past snapshot it covers; those of a log since replaced are not used")
    func startsFromPast() async throws {
        let dir = try TempDir("past-start")
        defer { dir.remove() }
        let (nb, d, pid, ops) = try await Self.compacted(dir.path, count: 2_500, seed: 9, every: 1_200)
        #expect(try await d.pastTotals(pid) == [1_200, 2_400])
        let cut = ops[2_000].clock
        let start = try await d.pastStart(pid, cut: cut, incarnation: try await d.logIncarnation(pid), base: nil)
        #expect(start?.clock.total == 1_200)
        // The answer starts there: it decodes the 801 operations above it, not 2,001.
        let want = try History.pageState(pid, at: .clock(cut), ops: ops, applied: try await d.clock(page: pid))
        #expect(try await d.pageState(pid, at: .clock(cut)) == want)
        #expect(await d.lastMoment == (1_200, 801))
        try await nb.close()
        let paths = PackagePaths(folder: dir.path, id: d.id)
        try FileManager.default.removeItem(atPath: paths.log(pid))
        let again = try await openNotebook(dir.path, io: fastIO)
        let d2 = try await again.openDocument(d.id)
        // The deleted log is made again with a new incarnation: past snapshots of the old one
        // are not used, and nothing under them can be rebuilt.
        let refused = await #expect(throws: LnoteError.self) { try await d2.pageState(pid, at: .clock(ops[2_400 - 1].clock)) }
        #expect(refused?.code == .invalidState)
        try await again.close()
    }

    @Test("[PKG-98] stale past snapshots (a total above the page's, another incarnation, an overflowing name) are removed, not trusted")
    func staleOnesAreRemoved() async throws {
        let dir = try TempDir("past-stale")
        defer { dir.remove() }
        let nb = try await openNotebook(dir.path, io: fastIO)
        let d = try await nb.createDocument(title: "past")
        let pid = await d.pageList[0].id
        let ops = try Self.history(pid, count: 3_000, seed: 3)
        _ = try await d.receive(Array(ops[..<1_100]), page: pid)
        try await d.compact(page: pid)
        let paths = PackagePaths(folder: dir.path, id: d.id)
        let kept = fileBytes(paths.past(pid, total: 1_100))!
        // A name whose total would overflow the spacing arithmetic, and one above the page.
        try writeFile(paths.past(pid, total: .max), kept)
        try writeFile(paths.past(pid, total: 2_900), kept)
        _ = try await d.receive(Array(ops[1_100..<2_300]), page: pid)
        try await d.compact(page: pid)
        // Both went (they cannot be of this log as it is); the new one is kept.
        #expect(try await d.pastTotals(pid) == [2_300])
        // The newest naming another log incarnation (the log was replaced since): all go.
        var other = try PageSnapshot.decode(fileBytes(paths.past(pid, total: 2_300))!, path: "past")
        other.logIncarnation &+= 1
        try writeFile(paths.past(pid, total: 2_300),
                      PageSnapshot.encode(other.state, coveredLogOffset: other.coveredLogOffset, logIncarnation: other.logIncarnation))
        try writeFile(paths.past(pid, total: 1_100), kept)
        _ = try await d.receive(Array(ops[2_300..<2_800]), page: pid)
        try await d.compact(page: pid)
        #expect(try await d.pastTotals(pid) == [2_800])
        try await nb.close()
    }

    @Test("[PKG-98] [SYNC-59] a checkpoint refused after the install takes the past snapshots made from it along")
    func refusedCheckpointTakesItsPasts() async throws {
        let dir = try TempDir("past-checkpoint")
        defer { dir.remove() }
        let a = try await openNotebook(dir.sub("A"), io: fastIO)
        let b = try await openNotebook(dir.sub("B"), io: fastIO)
        let da = try await a.createDocument(title: "source")
        let pid = await da.pageList[0].id
        _ = try await da.receive(try Self.history(pid, count: 1_200, seed: 4), page: pid)
        try await b.installCheckpoint(document: da.id, pages: [try await da.pageState(pid)], assets: [])
        let db = try await b.openDocument(da.id)
        _ = try await db.receive(try await da.operations(notCoveredBy: VectorClock()))
        try await db.addStroke(stroke(4), to: pid)
        try await db.compact(page: pid)
        #expect(try await db.pastTotals(pid) == [1_201])
        try await db.dropCheckpoint(page: pid)
        #expect(try await db.pastTotals(pid).isEmpty)
        try await a.close()
        try await b.close()
    }

    @Test("[MERGE-81] a first copy whose body does not decode gives way to a later copy of the same operation")
    func laterCopyOfADamagedFrame() async throws {
        let dir = try TempDir("past-copy")
        defer { dir.remove() }
        let nb = try await openNotebook(dir.path, io: fastIO)
        let d = try await nb.createDocument(title: "copy")
        let pid = await d.pageList[0].id
        let first = try await d.addStroke(stroke(6), to: pid)
        try await d.addStroke(stroke(4, x: 90), to: pid)
        let want = try await d.pageState(pid)
        try await nb.close()
        // Damage the body of the first frame under a good CRC, then append a good copy of it.
        let paths = PackagePaths(folder: dir.path, id: d.id)
        let log = fileBytes(paths.log(pid))!
        let frames = try LogFileContents(log).frames
        guard frames.count == 2 else {
            Issue.record("the log does not hold two frames")
            return
        }
        let (f1, r1, r2) = (frames[0].frame, Int(frames[0].offset)..<Int(frames[0].end), Int(frames[1].offset)..<Int(frames[1].end))
        #expect(OperationCodec.id(of: f1) == first)
        // A byte past its body: the header decodes, the operation does not; the CRC is good.
        let damaged = Frame(type: f1.type, payload: f1.payload + [0x00])
        #expect(OperationCodec.header(of: damaged)?.id == first)
        #expect(throws: LnoteError.self) { try OperationCodec.decode(damaged) }
        try writeFile(paths.log(pid), Array(log[..<r1.lowerBound]) + damaged.encoded + Array(log[r2]) + f1.encoded)
        let again = try await openNotebook(dir.path, io: fastIO)
        let d2 = try await again.openDocument(d.id)
        #expect(try await d2.pageState(pid, at: .clock(want.clock)) == want)
        #expect(try await d2.pageState(pid, at: .wallTime(.max)) == want)
        #expect(try await d2.pageState(pid, at: .operation(first)).elements.map(\.id) == [first])
        try await again.close()
    }

    @Test("[PKG-98] verify judges a past snapshot by its log also when the log holds a refused copy of one of its operations")
    func refusedCopyDoesNotMakeAGoodPastLookForged() async throws {
        let dir = try TempDir("past-refused-copy")
        defer { dir.remove() }
        let nb = try await openNotebook(dir.path, io: fastIO)
        let d = try await nb.createDocument(title: "past")
        let pid = await d.pageList[0].id
        let ops = try Self.history(pid, count: 1_200, seed: 8)
        _ = try await d.receive(ops, page: pid)
        try await d.compact(page: pid)
        #expect(try await d.pastTotals(pid) == [1_200])
        try await nb.close()
        // A copy of an operation the past covers, with its Lamport timestamp off by one: it
        // passes its CRC and the validator refuses it ([LOG-4]).
        var bad = ops[600]
        bad.lamport += 1
        var w = ByteWriter()
        OperationCodec.encodePayload(bad, into: &w)
        let frame = Frame(type: OperationCodec.frame(ops[600], form: .hash).type, payload: w.bytes)
        let paths = PackagePaths(folder: dir.path, id: d.id)
        try writeFile(paths.log(pid), fileBytes(paths.log(pid))! + frame.encoded)
        let again = try await openNotebook(dir.path, io: fastIO)
        let problems = try await again.verify().problems.map { "\($0.kind) \($0.path) \($0.message)" }
        #expect(!problems.contains { $0.contains(".1200.past") }, "\(problems)")
        #expect(problems.contains { $0.contains(paths.log(pid)) }, "checkLog reports the refused copy: \(problems)")
        try await again.close()
    }

    @Test("[PKG-98] names: only a page id, a canonical decimal total and .past")
    func names() {
        let p = PageID()
        #expect(PackagePaths.pastName("\(p).1024.past")! == (p, 1024))
        for bad in ["\(p).01024.past", "\(p).past", "\(p).-1.past", "\(p).1024.pasts", "x.1024.past", "\(p).1024.content", "\(p).1e3.past"] {
            #expect(PackagePaths.pastName(bad) == nil, "\(bad)")
        }
    }
}
