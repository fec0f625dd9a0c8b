import Foundation
import Testing
import LnoteModel
import LnoteReplication
@testable import LnoteStore

/// Undo, redo, restores and revert on real documents ([MERGE-73] … [MERGE-76], [PKG-99],
/// [PKG-100]): new operations in the logs, merged like any edit, with the undo history kept
/// per replica beside the notebook.
@Suite struct UndoStoreTests {
    /// Two notebooks holding one document, and a way to exchange a page's operations.
    struct Pair {
        let a: Notebook, b: Notebook
        let da: Document, db: Document
        let pid: PageID
        func exchange() async throws {
            _ = try await db.receive(try await da.operations(page: pid, notCoveredBy: try await db.clock(page: pid)), page: pid)
            _ = try await da.receive(try await db.operations(page: pid, notCoveredBy: try await da.clock(page: pid)), page: pid)
        }
        func close() async { try? await a.close(); try? await b.close() }
    }

    func pair(_ dir: TempDir) async throws -> Pair {
        let a = try await openNotebook(dir.sub("A"), options: testOptions())
        let b = try await openNotebook(dir.sub("B"), options: testOptions())
        let da = try await a.createDocument(title: "undo")
        let pid = await da.pageList[0].id
        _ = try await b.receive(try await da.operations(notCoveredBy: VectorClock()), document: da.id, page: nil)
        let db = try await b.openDocument(da.id)
        return Pair(a: a, b: b, da: da, db: db, pid: pid)
    }

    @Test("[MERGE-73] undo of an add erases it, redo brings it back, a new edit clears redo; the history survives reopening")
    func undoRedoAdd() async throws {
        let dir = try TempDir("undo-add")
        defer { dir.remove() }
        var nb = try await openNotebook(dir.sub("A"), options: testOptions())
        var d = try await nb.createDocument(title: "u")
        let pid = await d.pageList[0].id
        let s1 = try await d.addStroke(stroke(5, x: 10), to: pid)
        let s2 = try await d.addStroke(stroke(5, x: 50), to: pid)
        #expect(try await d.canUndo)
        #expect(try await !d.canRedo)
        let undone = try #require(try await d.undo())
        #expect(undone.label == "add")
        #expect(try await d.elementIDs(pid) == [s1])
        #expect(try await d.canRedo)
        // Reopened: the stacks come back from the journal.
        let docID = d.id
        try await nb.close()
        nb = try await openNotebook(dir.sub("A"), options: testOptions())
        d = try await nb.openDocument(docID)
        #expect(try await d.redo() != nil)
        #expect(try await d.elementIDs(pid) == [s1, s2])
        // The redo restored s2 (an element erased then restored keeps its id and place).
        #expect(try await d.undo() != nil)
        #expect(try await d.undo() != nil)
        #expect(try await d.elementIDs(pid).isEmpty)
        #expect(try await d.undo() == nil, "nothing left to undo")
        try await d.redo()
        _ = try await d.addStroke(stroke(3, x: 90), to: pid)
        #expect(try await !d.canRedo, "a new step clears the redo stack")
        try await nb.close()
    }

    @Test("[MERGE-74] [MERGE-70] undo of an erase restores it; concurrent with another replica's erase, that erase still wins")
    func undoEraseVersusConcurrentErase() async throws {
        let dir = try TempDir("undo-erase")
        defer { dir.remove() }
        let p = try await pair(dir)
        let e = try await p.da.addStroke(stroke(6, x: 10), to: p.pid)
        try await p.exchange()
        try await p.da.erase([e], on: p.pid)
        try await p.da.undo()
        #expect(try await p.da.elementIDs(p.pid) == [e], "undo of the erase brings it back")
        // b erases it concurrently (it has not seen a's erase and undo).
        try await p.db.erase([e], on: p.pid)
        try await p.exchange()
        #expect(try await p.da.elementIDs(p.pid).isEmpty)
        #expect(try await p.db.elementIDs(p.pid).isEmpty)
        #expect(try await p.da.pageState(p.pid) == p.db.pageState(p.pid))
        // b undoes its erase: the restore has seen both erases, so the element comes back everywhere.
        try await p.db.undo()
        try await p.exchange()
        #expect(try await p.da.elementIDs(p.pid) == [e])
        #expect(try await p.da.pageState(p.pid) == p.db.pageState(p.pid))
        await p.close()
    }

    @Test("[MERGE-74] an undo skips what others overwrote: a move another replica's later move won, an element they erased")
    func overwrittenIsSkipped() async throws {
        let dir = try TempDir("undo-overwritten")
        defer { dir.remove() }
        let p = try await pair(dir)
        let e = try await p.da.addStroke(stroke(4, x: 10), to: p.pid)
        let f = try await p.da.addStroke(stroke(4, x: 60), to: p.pid)
        try await p.exchange()
        try await p.da.move([e, f], dx: 100, dy: 0, on: p.pid)  // a's step: move both
        try await p.exchange()
        try await p.db.move([e], dx: 0, dy: 50, on: p.pid)      // b moves e again, after seeing a's move
        try await p.exchange()
        let step = try #require(try await p.da.undo())
        // Only f moves back: e's register is won by b's later move.
        #expect(step.entries.count == 1)
        let st = try await p.da.pageState(p.pid)
        #expect(st.elements.first { $0.id == f }?.transform.value == .identity)
        #expect(st.elements.first { $0.id == e }?.transform.value == Transform.translation(100, 50))
        // The adds: b erases f; undoing a's add of f is overwritten, so the undo goes on to e's add.
        try await p.exchange()
        try await p.db.erase([f], on: p.pid)
        try await p.exchange()
        let next = try #require(try await p.da.undo())
        #expect(next.entries.map(\.inverse) == [.restore([e])], "the add of e undone, what redoes it a restore")
        #expect(try await p.da.elementIDs(p.pid).isEmpty)
        await p.close()
    }

    @Test("[MERGE-73] an undo group is one step: an import of several strokes goes at once")
    func groupIsOneStep() async throws {
        let dir = try TempDir("undo-group")
        defer { dir.remove() }
        let nb = try await openNotebook(dir.sub("A"), options: testOptions())
        let d = try await nb.createDocument(title: "g")
        let pid = await d.pageList[0].id
        let keep = try await d.addStroke(stroke(3, x: 5), to: pid)
        try await d.undoGroup("import") {
            for i in 0..<4 { _ = try await d.addStroke(stroke(3, x: Int32(20 + 10 * i)), to: pid) }
            let all = try await d.elementIDs(pid)
            try await d.move(Array(all.suffix(2)), dx: 7, dy: 7, on: pid)
        }
        #expect(try await d.elementIDs(pid).count == 5)
        let step = try #require(try await d.undo())
        #expect(step.label == "import")
        #expect(try await d.elementIDs(pid) == [keep])
        #expect(try await d.redo() != nil)
        #expect(try await d.elementIDs(pid).count == 5)
        await #expect(throws: LnoteError.self) { try await d.endUndoGroup() }
        try await nb.close()
    }

    @Test("[MERGE-71] [MERGE-73] undo of a partial erase restores only the points it newly erased")
    func undoPartialErase() async throws {
        let dir = try TempDir("undo-range")
        defer { dir.remove() }
        let p = try await pair(dir)
        let e = try await p.da.addStroke(stroke(10, x: 10), to: p.pid)
        try await p.exchange()
        try await p.db.eraseRange(e, [PointRange(0, 3)], on: p.pid)
        try await p.exchange()
        try await p.da.eraseRange(e, [PointRange(2, 6)], on: p.pid)
        try await p.da.undo()
        #expect(try await p.da.element(e, on: p.pid)?.erased == [PointRange(0, 3)], "b's erased points stay erased")
        try await p.exchange()
        #expect(try await p.db.pageState(p.pid) == p.da.pageState(p.pid))
        await p.close()
    }

    @Test("[MERGE-76] revert makes the page as it was; a concurrent add survives; the revert is one undoable step")
    func revertVersusConcurrentAdd() async throws {
        let dir = try TempDir("revert")
        defer { dir.remove() }
        let p = try await pair(dir)
        let e = try await p.da.addStroke(stroke(6, x: 10), to: p.pid)
        let f = try await p.da.addStroke(stroke(6, x: 40), to: p.pid)
        try await p.exchange()
        let moment = try await p.da.clock(page: p.pid)
        let then = try await p.da.pageState(p.pid)
        try await p.da.erase([e], on: p.pid)
        try await p.da.move([f], dx: 30, dy: 30, on: p.pid)
        try await p.da.eraseRange(f, [PointRange(1, 4)], on: p.pid)
        try await p.da.bringToFront([f], on: p.pid)
        let g = try await p.da.addStroke(stroke(3, x: 80), to: p.pid)
        let concurrent = try await p.db.addStroke(stroke(3, x: 120), to: p.pid)   // b has not seen the revert
        let ops = try await p.da.revert(page: p.pid, to: .clock(moment))
        #expect(!ops.isEmpty)
        let now = try await p.da.pageState(p.pid)
        #expect(now.elements.map(\.id) == then.elements.map(\.id))
        for (x, y) in zip(now.elements, then.elements) {
            #expect(x.transform.value == y.transform.value && x.z.value == y.z.value && x.erased == y.erased)
        }
        #expect(try await p.da.revert(page: p.pid, to: .clock(moment)).isEmpty, "already as it was")
        try await p.exchange()
        let merged = try await p.db.elementIDs(p.pid)
        #expect(Set(merged) == Set([e, f, concurrent]))
        #expect(!merged.contains(g))
        // The revert undone: the page is as before it.
        try await p.da.undo()
        #expect(try await p.da.elementIDs(p.pid).contains(g))
        await p.close()
    }

    @Test("[PKG-100] the journal's lines are JSON as specified; a rewrite by another process and a cut line are read right")
    func journalFileChanges() async throws {
        let dir = try TempDir("undo-journal-file")
        defer { dir.remove() }
        let nb = try await openNotebook(dir.sub("A"), options: testOptions())
        let d = try await nb.createDocument(title: "j")
        let pid = await d.pageList[0].id
        let s1 = try await d.addStroke(stroke(3, x: 5), to: pid)
        let s2 = try await d.addStroke(stroke(3, x: 9), to: pid)
        let s3 = try await d.addStroke(stroke(3, x: 13), to: pid)
        let path = await d.undoJournalPath
        let me = await d.replica
        // Each line parses as the spec says: a `do` of this replica, the inverse a frame in base64.
        var lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n").map(String.init)
        #expect(lines.count == 3)
        let last = try #require(try JSONSerialization.jsonObject(with: Data(lines[2].utf8)) as? [String: Any])
        #expect(last["change"] as? String == "do")
        #expect(last["replica"] as? String == me.description)
        let step = try #require(last["step"] as? [String: Any])
        #expect(step["label"] as? String == "add")
        let entry = try #require((step["entries"] as? [[String: Any]])?.first)
        #expect(entry["op"] as? String == s3.description)
        #expect(entry["page"] as? String == pid.description)
        let inverse = try #require((entry["inverse"] as? String).flatMap { Data(base64Encoded: $0) })
        #expect(try Frame.decodeAll(Array(inverse)).count == 1)
        // Another process rewrites the journal (rename over it) without the last step: this
        // handle, which holds the old file open, reads the new one.
        lines.removeLast()
        try Data((lines.joined(separator: "\n") + "\n").utf8).write(to: URL(fileURLWithPath: path + ".new"))
        #expect(rename(path + ".new", path) == 0)
        #expect(try await d.undo() != nil)
        #expect(Set(try await d.elementIDs(pid)) == [s1, s3])
        // A line cut by a crash (no newline): the next line is written on a line of its own.
        let h = try #require(FileHandle(forWritingAtPath: path))
        try h.seekToEnd()
        try h.write(contentsOf: Data("{\"change\":\"do\",\"rep".utf8))
        try h.close()
        let s4 = try await d.addStroke(stroke(3, x: 17), to: pid)
        #expect(try await d.undo() != nil)
        #expect(Set(try await d.elementIDs(pid)) == [s1, s3])
        _ = s4
        #expect(try await d.undo() != nil)
        #expect(try await d.elementIDs(pid) == [s3])
        #expect(try await d.undo() == nil)
        try await nb.close()
    }

    @Test("[PKG-100] a journal another process keeps appending to is still rewritten once past its bound")
    func journalRewrittenDespiteOtherWriters() async throws {
        let dir = try TempDir("undo-journal-floor")
        defer { dir.remove() }
        let nb = try await openNotebook(dir.sub("A"), options: testOptions())
        let d = try await nb.createDocument(title: "j")
        let pid = await d.pageList[0].id
        _ = try await d.addStroke(stroke(3, x: 5), to: pid)
        let path = await d.undoJournalPath
        // Another process of another replica id appends 16 KiB lines: this handle's cache is
        // stale at each of its reads, and the file passes 256 KiB.
        let other = "{\"change\":\"drop\",\"replica\":\"00000000000000ff\",\"pad\":\"" + String(repeating: "x", count: 16_000) + "\"}\n"
        var largest: UInt64 = 0
        for i in 0..<40 {
            let h = try #require(FileHandle(forWritingAtPath: path))
            try h.seekToEnd()
            try h.write(contentsOf: Data(other.utf8))
            try h.close()
            largest = max(largest, UInt64(try FileManager.default.attributesOfItem(atPath: path)[.size] as! Int))
            _ = try await d.canUndo
            _ = try await d.addStroke(stroke(3, x: Int32(10 + i)), to: pid)
        }
        let size = UInt64(try FileManager.default.attributesOfItem(atPath: path)[.size] as! Int)
        #expect(largest > 256 * 1024, "the journal reached \(largest) bytes")
        #expect(size < largest, "never rewritten: \(size) bytes")
        // The rewrite kept this replica's steps: all 41 strokes can be undone.
        var undone = 0
        while try await d.undo() != nil { undone += 1 }
        #expect(undone == 41)
        try await nb.close()
    }

    @Test("[MERGE-75] [PKG-100] the journal is per replica id; a damaged line is skipped; a restore of a live element is refused")
    func journalAndRefusals() async throws {
        let dir = try TempDir("undo-journal")
        defer { dir.remove() }
        let nb = try await openNotebook(dir.sub("A"), options: testOptions())
        let d = try await nb.createDocument(title: "j")
        let pid = await d.pageList[0].id
        let e = try await d.addStroke(stroke(3, x: 5), to: pid)
        let path = await d.undoJournalPath
        #expect(FileManager.default.fileExists(atPath: path))
        // A cut line (a crash while appending) and a line of another replica are ignored.
        let h = try #require(FileHandle(forWritingAtPath: path))
        try h.seekToEnd()
        try h.write(contentsOf: Data("{\"change\":\"do\",\"replica\":\"00000000000000ff\",\"step\":{\"label\":\"x\",\"wallTime\":0,\"entries\":[]}}\n{\"change\":\"dr".utf8))
        try h.close()
        #expect(try await d.undo()?.label == "add")
        #expect(try await d.undo() == nil)
        // e is erased by the undo: restorable; a live element is not.
        let g = try await d.addStroke(stroke(3, x: 9), to: pid)
        await #expect(throws: LnoteError.self) { try await d.restore([g], on: pid) }
        try await d.restore([e], on: pid)
        #expect(Set(try await d.elementIDs(pid)) == [e, g])
        try await nb.close()
    }

    @Test("[PKG-99] a snapshot from before restores is set aside: the page is rebuilt from its log with erased content")
    func legacySnapshotRebuiltFromLog() async throws {
        let dir = try TempDir("undo-legacy")
        defer { dir.remove() }
        var nb = try await openNotebook(dir.sub("A"), options: testOptions())
        var d = try await nb.createDocument(title: "l")
        let pid = await d.pageList[0].id
        let e = try await d.addStroke(stroke(5, x: 5), to: pid)
        let f = try await d.addStroke(stroke(5, x: 25), to: pid)
        try await d.erase([e], on: pid)
        try await d.eraseRange(f, [PointRange(1, 2)], on: pid)
        try await d.compact(page: pid)
        let docID = d.id
        let content = await d.paths.content(pid)
        try await nb.close()
        // Rewrite the snapshot as an older lnote wrote it: no erase history.
        var old = try PageSnapshot.decode(Array(try Data(contentsOf: URL(fileURLWithPath: content))))
        for i in old.state.tombstones.indices { old.state.tombstones[i].record = nil }
        for i in old.state.elements.indices { old.state.elements[i].rangeErasures = [] }
        let bytes = PageSnapshot.encode(old)
        #expect(try PageSnapshot.decode(bytes).lacksEraseHistory)
        try Data(bytes).write(to: URL(fileURLWithPath: content))
        nb = try await openNotebook(dir.sub("A"), options: testOptions())
        d = try await nb.openDocument(docID)
        try await d.restore([e], on: pid)
        try await d.restoreRange(f, [PointRange(0, 5)], on: pid)
        let st = try await d.pageState(pid)
        #expect(st.elements.map(\.id).sorted() == [e, f].sorted())
        #expect(st.elements.allSatisfy { $0.erased.isEmpty })
        try await nb.close()
    }
}
