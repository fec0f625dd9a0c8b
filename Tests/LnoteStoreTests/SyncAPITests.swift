import Foundation
import Testing
import LnoteModel
import LnoteReplication
@testable import LnoteStore

/// Copies everything `from` has that `to` lacks, through the notebook sync API (assets
/// first, document logs before page logs).
func pushAll(from: Notebook, to: Notebook) async throws {
    let theirs = Dictionary(try await to.logClocks().map { ("\($0.document)/\($0.page?.description ?? "-")", $0.clock) },
                            uniquingKeysWith: { a, _ in a })
    for lc in try await from.logClocks() {
        let known = theirs["\(lc.document)/\(lc.page?.description ?? "-")"] ?? VectorClock()
        let frames = try await from.frames(document: lc.document, page: lc.page, notCoveredBy: known)
        let ops = try frames.map { try OperationCodec.decode($0) }
        for op in ops {
            if case .add(.image(let i), _) = op.body, !(try await to.hasAsset(i.asset, document: lc.document)) {
                _ = try await to.writeAsset(try await from.readAsset(i.asset, document: lc.document), document: lc.document)
            }
        }
        try await to.receive(ops, document: lc.document, page: lc.page)
    }
}

@Suite("Sync API: clocks, missing operations, durable receipt")
struct SyncAPITests {
    @Test("[PKG-43][PKG-44][PKG-45] two folders converge through frames/receive, images included")
    func twoFolders() async throws {
        let dir = try TempDir("sync")
        defer { dir.remove() }
        let a = try await openNotebook(dir.sub("a"))
        let b = try await openNotebook(dir.sub("b"))
        let da = try await a.createDocument(title: "Shared")
        let p0 = await da.pageList[0].id
        let s1 = try await da.addStroke(stroke(5), to: p0)
        _ = try await da.addImage([1, 2, 3, 4], frame: QRect(x: 1, y: 2, width: 3, height: 4), to: p0)
        let p1 = try await da.addPage()
        try await da.addStrokes([stroke(2), stroke(3)], to: p1)
        try await pushAll(from: a, to: b)
        let db = try await b.openDocument(da.id)
        #expect(try await db.pageState(p0) == (try await da.pageState(p0)))
        #expect(try await db.pageState(p1) == (try await da.pageState(p1)))
        #expect(await db.state == (await da.state))
        // Concurrent edits on both sides, then both directions.
        try await db.move([s1], dx: 10, dy: 0, on: p0)
        try await da.erase([s1], on: p0)
        try await db.setTitle("From B")
        try await pushAll(from: b, to: a)
        try await pushAll(from: a, to: b)
        #expect(try await db.pageState(p0) == (try await da.pageState(p0)))
        #expect(await db.state == (await da.state))
        #expect(await da.title == "From B")
        // A second push sends nothing new.
        let before = fileBytes(db.paths.log(p0))
        try await pushAll(from: a, to: b)
        #expect(fileBytes(db.paths.log(p0)) == before, "each operation is in the log once")
        try await a.close()
        try await b.close()
    }

    @Test("[PKG-43] [LOG-30] duplicates are skipped before appending; an image without its asset is refused")
    func duplicatesAndAssets() async throws {
        let dir = try TempDir("sync")
        defer { dir.remove() }
        let a = try await openNotebook(dir.sub("a"))
        let b = try await openNotebook(dir.sub("b"))
        let da = try await a.createDocument(title: "D")
        let p = await da.pageList[0].id
        try await da.addStrokes([stroke(), stroke(), stroke()], to: p)
        _ = try await da.addImage([9, 9], frame: QRect(x: 0, y: 0, width: 1, height: 1), to: p)
        let docOps = try await da.operations(notCoveredBy: VectorClock())
        let pageOps = try await da.operations(page: p, notCoveredBy: VectorClock())
        try await b.receive(docOps, document: da.id, page: nil)
        let db = try await b.openDocument(da.id)
        await #expect(throws: LnoteError(.notFound)) { try await db.receive(pageOps, page: p) }
        #expect(try await db.elements(p).isEmpty, "nothing applied")
        let out1 = try await db.receive(Array(pageOps.prefix(3)) + Array(pageOps.prefix(2)), page: p)
        #expect(out1.appended == 3 && out1.applied.count == 3)
        let out2 = try await db.receive(Array(pageOps.prefix(3)), page: p)
        #expect(out2.appended == 0 && out2.applied.isEmpty)
        #expect(try await db.operations(page: p, notCoveredBy: VectorClock()).count == 3)
        await #expect(throws: LnoteError(.invalidArgument)) { try await db.receive(docOps, page: p) }
        try await a.close()
        try await b.close()
    }

    /// [PKG-41] An operation waiting for its dependencies is never covered by a snapshot:
    /// after compaction and reopening it is still there and applies when they arrive.
    /// [LOG-31] The log holds them in arrival order (not causal order); replay gives back
    /// the state the page had.
    @Test("[PKG-41] [LOG-31] waiting operations survive compaction and reopening")
    func pendingSurvivesCompaction() async throws {
        let dir = try TempDir("sync")
        defer { dir.remove() }
        let a = try await openNotebook(dir.sub("a"))
        let da = try await a.createDocument(title: "P")
        let p = await da.pageList[0].id
        for i in 0..<4 { try await da.addStroke(stroke(3, x: Int32(i)), to: p) }
        let ops = try await da.operations(page: p, notCoveredBy: VectorClock())
        let docOps = try await da.operations(notCoveredBy: VectorClock())
        try await a.close()

        let b = try await openNotebook(dir.sub("b"))
        try await b.receive(docOps, document: da.id, page: nil)
        let db = try await b.openDocument(da.id)
        let first = try await db.receive([ops[0], ops[2], ops[3]], page: p)
        #expect(first.appended == 3 && first.applied.map(\.id) == [ops[0].id])
        try await db.compact(page: p)
        try await b.close()
        let b2 = try await openNotebook(dir.sub("b"))
        let db2 = try await b2.openDocument(da.id)
        #expect(try await db2.elements(p).map(\.id) == [ops[0].id])
        let second = try await db2.receive([ops[1]], page: p)
        #expect(second.applied.map(\.id) == [ops[1].id, ops[2].id, ops[3].id])
        #expect(try await db2.elements(p).count == 4)
        try await b2.close()
    }

    @Test("page operations that arrive before their addPage are kept and shown once it arrives")
    func pageBeforeAddPage() async throws {
        let dir = try TempDir("sync")
        defer { dir.remove() }
        let a = try await openNotebook(dir.sub("a"))
        let da = try await a.createDocument(title: "Early")
        let p1 = try await da.addPage()
        try await da.addStroke(stroke(), to: p1)
        let docOps = try await da.operations(notCoveredBy: VectorClock())
        let pageOps = try await da.operations(page: p1, notCoveredBy: VectorClock())
        let b = try await openNotebook(dir.sub("b"))
        try await b.receive(Array(docOps.prefix(2)), document: da.id, page: nil)  // without the second addPage
        try await b.receive(pageOps, document: da.id, page: p1)
        let db = try await b.openDocument(da.id)
        #expect(await db.pageList.count == 1)
        try await db.receive(docOps, page: nil)
        #expect(await db.pageList.map(\.id).contains(p1))
        #expect(try await db.elements(p1).count == 1)
        try await a.close()
        try await b.close()
    }

    @Test("[PKG-35] group commit: concurrent appends share fdatasyncs and all are durable")
    func groupCommit() async throws {
        let dir = try TempDir("gc")
        defer { dir.remove() }
        let rec = SyscallRecorder()
        let nb = try await openNotebook(dir.path, io: Syscalls(recorder: rec), options: testOptions {
            $0.groupCommit = GroupCommit(maxDelay: .milliseconds(200), maxFrames: 8)
        })
        let d = try await nb.createDocument(title: "G")
        let p = await d.pageList[0].id
        try await d.addStroke(stroke(), to: p)
        rec.reset()
        let ids = try await withThrowingTaskGroup(of: ElementID.self) { g in
            for i in 0..<24 { g.addTask { try await d.addStroke(stroke(3, x: Int32(i)), to: p) } }
            var out: [ElementID] = []
            for try await id in g { out.append(id) }
            return out
        }
        let syncs = rec.all.filter { $0.kind == .fdatasync && $0.path.hasSuffix(".log") }.count
        let writes = rec.all.filter { $0.kind == .write && $0.path.hasSuffix(".log") }.count
        #expect(writes == 24)
        #expect(syncs >= 3 && syncs < 24, "\(syncs) fdatasyncs for 24 appends")
        try await nb.close()
        let nb2 = try await openNotebook(dir.path)
        let d2 = try await nb2.openDocument(d.id)
        #expect(Set(try await d2.elements(p).map(\.id)).isSuperset(of: ids))
        try await nb2.close()
    }
}
