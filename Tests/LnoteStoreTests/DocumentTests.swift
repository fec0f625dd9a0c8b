import Foundation
import Testing
import LnoteModel
import LnoteReplication
@testable import LnoteStore

@Suite("Documents: editing, reopening, snapshots, manifests")
struct DocumentTests {
    @Test("edits survive close and reopen; page content is the same")
    func roundTrip() async throws {
        let dir = try TempDir("doc")
        defer { dir.remove() }
        let nb = try await openNotebook(dir.path)
        let d = try await nb.createDocument(title: "Notes")
        let p0 = try #require(await d.pageList.first?.id)
        let a = try await d.addStroke(stroke(4), to: p0)
        let b = try await d.addStroke(stroke(6, x: 100), to: p0)
        try await d.eraseRange(b, [PointRange(1, 3)], on: p0)
        try await d.move([a], dx: 5, dy: -5, on: p0)
        let p1 = try await d.addPage()
        _ = try await d.addStrokes([stroke(3), stroke(2)], to: p1)
        try await d.setTitle("Renamed")
        try await d.erase([a], on: p0)
        let before0 = try await d.pageState(p0)
        let before1 = try await d.pageState(p1)
        try await nb.close()

        let nb2 = try await openNotebook(dir.path)
        let list = try await nb2.list()
        #expect(list.count == 1 && list[0].title == "Renamed" && list[0].pageCount == 2 && list[0].elementCount == 3)
        let d2 = try await nb2.openDocument(d.id)
        #expect(try await d2.pageState(p0) == before0)
        #expect(try await d2.pageState(p1) == before1)
        #expect(await d2.pageList.map(\.id) == [p0, p1])
        #expect(await d2.recoveryReports.isEmpty)
        try await nb2.close()
    }

    @Test("[PKG-41] [PKG-32] a page reopens from its snapshot plus the log tail; compaction never rewrites the log")
    func compactionKeepsLog() async throws {
        let dir = try TempDir("doc")
        defer { dir.remove() }
        let nb = try await openNotebook(dir.path, options: testOptions { $0.compactAfterFrames = 5 })
        let d = try await nb.createDocument(title: "C")
        let p = try #require(await d.pageList.first?.id)
        var ids: [ElementID] = []
        for i in 0..<12 { ids.append(try await d.addStroke(stroke(3, x: Int32(i)), to: p)) }
        let paths = d.paths
        let logBefore = fileBytes(paths.log(p))!
        let snap = try PageSnapshot.decode(fileBytes(paths.content(p))!, path: nil)
        // Two compactions happened (after 5 and 10 frames); the snapshot covers 10 frames.
        #expect(snap.state.elements.count == 10)
        #expect(snap.coveredLogOffset < UInt64(logBefore.count))
        let state = try await d.pageState(p)
        try await nb.close()
        // The log was only appended to: its first bytes are those of every earlier version.
        let logAfter = fileBytes(paths.log(p))!
        #expect(Array(logAfter.prefix(logBefore.count)) == logBefore)
        let nb2 = try await openNotebook(dir.path)
        let d2 = try await nb2.openDocument(d.id)
        #expect(try await d2.pageState(p) == state)
        let all = try await d2.operations(page: p, notCoveredBy: VectorClock())
        #expect(all.count == 12, "old operations stay in the log for peers")
        try await nb2.close()
    }

    /// [PKG-14] An image larger than one sync request carries (64 MiB) is refused before
    /// anything is written: it could never be sent, and every later push would fail on it.
    @Test("[PKG-14] an image over 64 MiB is refused; one of exactly 64 MiB is added")
    func imageSizeLimit() async throws {
        let dir = try TempDir("doc")
        defer { dir.remove() }
        let nb = try await openNotebook(dir.path)
        let d = try await nb.createDocument(title: "big")
        let pid = await d.pageList[0].id
        let frame = QRect(x: 0, y: 0, width: 10, height: 10)
        await #expect(throws: LnoteError(.limitExceeded)) {
            try await d.addImage([UInt8](repeating: 7, count: Document.maxAssetBytes + 1), frame: frame, to: pid)
        }
        #expect(listNames(PackagePaths(folder: dir.path, id: d.id).assets).isEmpty, "nothing written")
        #expect(try await d.elementIDs(pid).isEmpty)
        _ = try await d.addImage([UInt8](repeating: 7, count: Document.maxAssetBytes), frame: frame, to: pid)
        #expect(try await d.elementIDs(pid).count == 1)
        try await nb.close()
    }

    @Test("a Page handle edits its page; closing it writes its snapshot and releases its log")
    func pageHandle() async throws {
        let dir = try TempDir("doc")
        defer { dir.remove() }
        let nb = try await openNotebook(dir.path)
        let d = try await nb.createDocument(title: "H")
        let page = try await d.openPage(await d.pageList[0].id)
        let a = try await page.addStroke(stroke())
        let img = try await page.addImage([3, 1, 4], frame: QRect(x: 0, y: 0, width: 5, height: 5))
        try await page.bringToFront([a])
        #expect(try await page.elements().map(\.id) == [img, a])
        await #expect(throws: LnoteError(.notFound)) { try await d.openPage(PageID()) }
        try await nb.close()

        // A group-commit waiter is released by closing the page, not failed.
        let nb2 = try await openNotebook(dir.path, options: testOptions {
            $0.groupCommit = GroupCommit(maxDelay: .seconds(60), maxFrames: 1000)
        })
        let d2 = try await nb2.openDocument(d.id)
        let page2 = try await d2.openPage(page.id)
        let late = Task { try await page2.addStroke(stroke(2)) }
        while await d2.syncWaiterCount == 0 { try await Task.sleep(for: .milliseconds(1)) }
        try await page2.close()
        let lateID = try await late.value
        #expect(try await page2.elements().map(\.id) == [img, a, lateID])
        try await nb2.close()
    }
}
