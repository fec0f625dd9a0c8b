import Foundation
import Synchronization
import Testing
import LnoteModel
import LnoteReplication
@testable import LnoteStore

@Suite("Opening damaged packages, and failures while editing")
struct RecoveryTests {
    func sample(_ dir: TempDir, strokes: Int = 6) async throws -> (DocumentID, PackagePaths, PageID, PageState) {
        let nb = try await openNotebook(dir.path)
        let d = try await nb.createDocument(title: "R")
        let p = await d.pageList[0].id
        for i in 0..<strokes { try await d.addStroke(stroke(3, x: Int32(i)), to: p) }
        try await d.flush()
        let s = try await d.pageState(p)
        try await nb.close()
        return (d.id, d.paths, p, s)
    }

    @Test("[PKG-42] a damaged page snapshot is quarantined and the page rebuilt from its whole log")
    func damagedSnapshot() async throws {
        let dir = try TempDir("rec")
        defer { dir.remove() }
        let (id, paths, p, state) = try await sample(dir)
        var bytes = fileBytes(paths.content(p))!
        bytes[bytes.count / 2] ^= 0xFF
        try writeFile(paths.content(p), bytes)
        let nb = try await openNotebook(dir.path)
        let d = try await nb.openDocument(id)
        #expect(try await d.pageState(p) == state)
        let reports = await d.recoveryReports
        #expect(reports.contains { $0.path == paths.content(p) && $0.quarantinedCopy == paths.content(p) + ".corrupt-1" })
        #expect(fileBytes(paths.content(p) + ".corrupt-1") == bytes)
        try await nb.close()
        #expect(fileBytes(paths.content(p)) != nil, "rewritten on close")
    }

    /// An older snapshot (covering part of the log), whole or with one byte damaged anywhere
    /// (header included), must give the page the whole log gives: the log is replayed from
    /// the snapshot's offset when it holds, from the start when it does not.
    @Test("[PKG-42] an older snapshot, whole or damaged at any byte, gives the page its log gives")
    func olderSnapshotWholeOrDamaged() async throws {
        let seed = UInt64.random(in: 0...UInt64.max)
        var g = SplitMix64(seed: seed)
        let dir = try TempDir("rec")
        defer { dir.remove() }
        let nb = try await openNotebook(dir.path)
        let d = try await nb.createDocument(title: "R")
        let id = d.id, paths = d.paths
        let p = await d.pageList[0].id
        // Big enough for the parallel decoders (an element index, 64 KiB of frames).
        var strokes: [Stroke] = []
        for i in 0..<150 {
            var points: [StrokePoint] = []
            for j in 0..<(60 + Int(g.next() % 300)) {
                points.append(StrokePoint(x: Int32(i * 10 + j), y: Int32(j * 3) + Int32(g.next() % 5), pressure: UInt16(500 + j % 200),
                                          radius: 10, t: UInt32(j * 4)))
            }
            strokes.append(Stroke(points: points))
        }
        try await d.addStrokes(Array(strokes[..<80]), to: p)
        try await d.flush()
        let older = fileBytes(paths.content(p))!
        try await d.addStrokes(Array(strokes[80...]), to: p)
        let state = try await d.pageState(p)
        try await nb.close()

        var positions = [0, 9, 20, 36, 44, older.count - 1]
        for _ in 0..<6 { positions.append(Int(g.next() % UInt64(older.count))) }
        for at in [nil] + positions.map(Optional.some) {
            var bytes = older
            if let at { bytes[at] ^= 0x5A }
            try writeFile(paths.content(p), bytes)
            let nb = try await openNotebook(dir.path)
            let d = try await nb.openDocument(id)
            #expect(try await d.pageState(p) == state, "seed \(seed), damaged byte \(at.map(String.init) ?? "none")")
            let quarantined = await d.recoveryReports.contains { $0.quarantinedCopy != nil }
            #expect(quarantined == (at != nil), "seed \(seed), damaged byte \(at.map(String.init) ?? "none")")
            try await nb.close()
            for n in 1...3 { try? FileManager.default.removeItem(atPath: paths.content(p) + ".corrupt-\(n)") }
        }
    }

    @Test("[PKG-38] [PKG-33] a bad frame in a page log: reported, quarantined, later frames salvaged under a new incarnation, never applied")
    func damagedLogFrame() async throws {
        let dir = try TempDir("rec")
        defer { dir.remove() }
        let (id, paths, p, state) = try await sample(dir)
        // Damage the 3rd frame; the page's snapshot covers everything, so remove it to force a replay.
        var log = fileBytes(paths.log(p))!
        let at = Int(try LogFileContents(log).frames[2].offset)  // past the anchor and its copy, [PKG-110]
        log[at + 20] ^= 0x01
        try writeFile(paths.log(p), log)
        try FileManager.default.removeItem(atPath: paths.content(p))
        let nb = try await openNotebook(dir.path)
        let d = try await nb.openDocument(id)
        let els = try await d.elements(p)
        // The 3rd stroke is gone; those after it came from the same replica and depend on it: they wait.
        #expect(els.map(\.id) == Array(state.elements.prefix(2).map(\.id)))
        let r = try #require(await d.recoveryReports.first { $0.path == paths.log(p) })
        #expect(r.problems.count == 1 && r.problems[0].offset == at && r.problems[0].index == 2)
        #expect(r.quarantinedCopy == paths.log(p) + ".corrupt-1" && fileBytes(r.quarantinedCopy!) == log)
        #expect(r.salvagedFrames == 5 && r.newIncarnation != nil)
        // The waiting operations are still served to peers and kept in the rewritten log.
        #expect(try await d.operations(page: p, notCoveredBy: VectorClock()).count == 5)
        try await nb.close()
    }

    @Test("[PKG-40] a damaged document.json is quarantined and rebuilt from document.log")
    func damagedDocumentJSON() async throws {
        let dir = try TempDir("rec")
        defer { dir.remove() }
        let (id, paths, p, _) = try await sample(dir)
        let good = try DocumentFile.decode(fileBytes(paths.document)!, path: "").1
        try writeFile(paths.document, Array("{\"format\": 1".utf8))
        let nb = try await openNotebook(dir.path)
        let d = try await nb.openDocument(id)
        #expect(await d.state == good)
        #expect(await d.pageList.map(\.id) == [p])
        #expect(fileBytes(paths.document + ".corrupt-1") != nil)
        try await nb.close()
        #expect(try Verify.run(folder: dir.path).problems.allSatisfy { $0.kind == .quarantinedFile })
    }

    @Test("[PKG-34] ENOSPC while appending: the edit throws, nothing of it remains, the next edit works")
    func enospcOnAppend() async throws {
        let dir = try TempDir("rec")
        defer { dir.remove() }
        let (id, paths, p, state) = try await sample(dir)
        let plan = FaultPlan.failing(.write, nth: 0, pathContains: ".log", with: .fail(errno: ENOSPC))
        let nb = try await openNotebook(dir.path, io: Syscalls(faults: plan))
        let d = try await nb.openDocument(id)
        await #expect(throws: LnoteError(.io)) { try await d.addStroke(stroke(), to: p) }
        #expect(try await d.pageState(p) == state, "the page was reloaded from disk")
        try await d.addStroke(stroke(7), to: p)
        #expect(try await d.elements(p).count == state.elements.count + 1)
        try await nb.close()
        let (log, replay) = try PageLog.open(path: paths.log(p), kind: .page, owner: p.uuid, create: false, io: .live)
        #expect(replay.report.isClean)
        try log.close()
    }

    @Test("[PKG-36] a failed fdatasync of document.log makes the handle unusable; reopening recovers")
    func failedDocumentSync() async throws {
        let dir = try TempDir("rec")
        defer { dir.remove() }
        let (id, _, _, _) = try await sample(dir)
        // Armed once the document is open (opening may sync the log it read: [PKG-88]).
        let armed = Mutex(false)
        let plan = FaultPlan { e in
            armed.withLock { $0 } && e.kind == .fdatasync && e.path.contains("document.log") ? .fail(errno: EIO) : nil
        }
        let nb = try await openNotebook(dir.path, io: Syscalls(faults: plan))
        let d = try await nb.openDocument(id)
        armed.withLock { $0 = true }
        await #expect(throws: LnoteError(.io)) { try await d.setTitle("lost?") }
        await #expect(throws: LnoteError(.invalidState)) { try await d.setTitle("again") }
        try? await nb.close()
        let nb2 = try await openNotebook(dir.path)
        let d2 = try await nb2.openDocument(id)
        try await d2.setTitle("after")
        #expect(await d2.title == "after")
        try await nb2.close()
    }

    @Test("[PKG-50] autosave writes document.json and manifest.json after edits pause")
    func autosave() async throws {
        let dir = try TempDir("rec")
        defer { dir.remove() }
        let nb = try await openNotebook(dir.path, options: testOptions {
            $0.autosave = true
            $0.autosaveDelay = .milliseconds(20)
        })
        let d = try await nb.createDocument(title: "Auto")
        let before = fileBytes(d.paths.document)
        try await d.setTitle("Saved by autosave")
        // Wait (bounded: 60 s guards a hang, nothing is timed) for the background save to
        // reach manifest.json, the last file it writes: document.json is replaced first, so
        // seeing it change does not mean the manifest (what `list` reads) is there yet.
        var waited = 0
        while try await nb.list().first?.title != "Saved by autosave", waited < 6000 {
            try await Task.sleep(for: .milliseconds(10))
            waited += 1
        }
        #expect(fileBytes(d.paths.document) != before, "document.json was not rewritten")
        #expect(try await nb.list().first?.title == "Saved by autosave")
        #expect(await d.lastAutosaveFailure == nil)
        try await nb.close()
    }

    @Test("[PKG-53] at most maxLoadedPages pages stay open; evicted pages are snapshotted first")
    func eviction() async throws {
        let dir = try TempDir("rec")
        defer { dir.remove() }
        let rec = SyscallRecorder()
        let nb = try await openNotebook(dir.path, io: Syscalls(recorder: rec), options: testOptions { $0.maxLoadedPages = 3 })
        let d = try await nb.createDocument(title: "Many")
        for _ in 0..<7 { try await d.addPage() }
        for p in await d.pageList { try await d.addStroke(stroke(), to: p.id) }
        let opens = rec.all.filter { $0.kind == .open && $0.path.hasSuffix(".log") && !$0.path.hasSuffix("document.log") }.count
        let closes = rec.all.filter { $0.kind == .close && $0.path.hasSuffix(".log") && !$0.path.hasSuffix("document.log") }.count
        #expect(opens - closes <= 3)
        let paths = d.paths
        let pageIDs = await d.pageList.map(\.id)
        try await nb.close()
        for p in pageIDs { #expect(fileBytes(paths.content(p)) != nil) }
    }
}

@Suite("Replay goes through receive")
struct ReplayTests {
    @Test("[PKG-39] a valid frame whose operation does not decode is reported and not applied; the rest is")
    func malformedFrameNotApplied() async throws {
        let dir = try TempDir("rep")
        defer { dir.remove() }
        let nb = try await openNotebook(dir.path)
        let d = try await nb.createDocument(title: "M")
        let p = await d.pageList[0].id
        try await d.addStroke(stroke(), to: p)
        try await nb.close()
        let paths = d.paths
        try FileManager.default.removeItem(atPath: paths.content(p))
        var w = ByteWriter()
        Frame(type: 0x7e, payload: [1, 2, 3, 4]).encode(into: &w)
        let before = fileBytes(paths.log(p))!
        try writeFile(paths.log(p), before + w.bytes)
        let nb2 = try await openNotebook(dir.path)
        let d2 = try await nb2.openDocument(d.id)
        #expect(try await d2.elements(p).count == 1)
        let r = try #require(await d2.recoveryReports.first { $0.path == paths.log(p) })
        #expect(r.undecodable.count == 1 && r.undecodable[0].offset == before.count && r.undecodable[0].index == 1)
        #expect(r.problems.isEmpty && r.quarantinedCopy == nil, "a valid frame is not damage: the file is kept")
        try await nb2.close()
    }

    @Test("[PKG-39] replaying the whole log over a snapshot that already has it changes nothing")
    func replayTwiceChangesNothing() async throws {
        let dir = try TempDir("rep")
        defer { dir.remove() }
        let nb = try await openNotebook(dir.path)
        let d = try await nb.createDocument(title: "R")
        let p = await d.pageList[0].id
        let a = try await d.addStroke(stroke(), to: p)
        try await d.addStroke(stroke(4), to: p)
        try await d.move([a], dx: 3, dy: 3, on: p)
        try await d.flush()
        let state = try await d.pageState(p)
        try await nb.close()
        // Same state, but an incarnation that does not match: the whole log is replayed on top.
        try writeFile(d.paths.content(p), PageSnapshot.encode(state, coveredLogOffset: 40, logIncarnation: 12345))
        let nb2 = try await openNotebook(dir.path)
        let d2 = try await nb2.openDocument(d.id)
        #expect(try await d2.pageState(p) == state)
        try await nb2.close()
    }
}
