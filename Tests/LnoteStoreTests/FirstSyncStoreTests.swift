import Foundation
import Testing
import LnoteModel
import LnoteReplication
@testable import LnoteStore

/// The store's side of a first sync that is not the batch's order ([PKG-96] has its own tests):
/// what the serving side syncs before it serves a log, and the thumbnails of received pages.
@Suite struct FirstSyncStoreTests {
    /// Every log of `nb` served from clock zero through `framesForPeer`, as a first sync asks.
    static func serveAll(_ nb: Notebook) async throws -> Int {
        var frames = 0
        for c in try await nb.logClocks() {
            let got = try await nb.framesForPeer(document: c.document, logs: [(page: c.page, clock: VectorClock())])
            for case .frames(let f) in got { frames += f.count }
        }
        return frames
    }

    @Test("[PKG-44] a log its snapshot covers is served without an fdatasync; frames past the snapshot are synced first")
    func servingSyncsOnlyWhatNoSnapshotCovers() async throws {
        let dir = try TempDir("firstsync")
        defer { dir.remove() }
        let writer = try await openNotebook(dir.path)
        var ids: [DocumentID] = []
        for i in 0..<3 {
            let d = try await writer.createDocument(title: "d\(i)")
            _ = try await d.addStrokes([stroke(3 + i), stroke(2)], to: await d.pageList[0].id)
            ids.append(d.id)
            try await d.close()  // snapshots and document.json cover every log
        }
        // Another handle on the folder (another process, as far as the serving side knows).
        let recorder = SyscallRecorder()
        let server = try await openNotebook(dir.path, io: Syscalls(recorder: recorder))
        recorder.reset()
        let served = try await Self.serveAll(server)
        #expect(served == 3 * (2 + 2), "every operation served: \(served)")
        // Logs only: the clock cache is a durable replace of its own ([PKG-64]).
        let logSyncs = { recorder.all.filter { ($0.kind == .fdatasync || $0.kind == .fsync) && $0.path.hasSuffix(".log") } }
        let syncs = logSyncs()
        #expect(syncs.isEmpty, "logs covered by their snapshots need no sync to be served: \(syncs.map(\.path))")

        // The writer appends to one page without writing its snapshot (autosave off, the
        // document kept open): those frames are past the snapshot, so the serving side syncs
        // that log before serving them, and only that log.
        let d = try await writer.openDocument(ids[1])
        let page = await d.pageList[0].id
        _ = try await d.addStroke(stroke(9), to: page)
        recorder.reset()
        let again = try await Self.serveAll(server)
        #expect(again == served + 1)
        // Then the served document, closed again, writes that page's snapshot (no log sync).
        let after = logSyncs()
        #expect(after.map(\.path) == [d.paths.log(page)], "only the log with frames past its snapshot: \(after.map(\.path))")
        try await d.close()
        try await server.close()
        try await writer.close()
    }

    @Test("[PKG-97] received documents are installed without thumbnails; one is rendered and stored when asked for")
    func receivedPagesGetThumbnailsOnDemand() async throws {
        let dir = try TempDir("firstsync")
        defer { dir.remove() }
        let a = try await openNotebook(dir.sub("a"))
        let d = try await a.createDocument(title: "t")
        let p0 = await d.pageList[0].id
        _ = try await d.addStrokes([stroke(4), stroke(6)], to: p0)
        let p1 = try await d.addPage()
        _ = try await d.addStroke(stroke(3), to: p1)
        let received = ReceivedDocument(
            id: d.id, documentOps: try await d.operations(notCoveredBy: VectorClock()),
            pages: [p0: try await d.operations(page: p0, notCoveredBy: VectorClock()),
                    p1: try await d.operations(page: p1, notCoveredBy: VectorClock())])
        // The picture of each page's state, stamped ([PKG-103]): the encoder is deterministic.
        var expected: [PageID: [UInt8]] = [:]
        for p in [p0, p1] { expected[p] = try await d.renderThumbnail(p).jpeg(comment: try await d.thumbnailStamp(page: p).comment) }

        let b = try await openNotebook(dir.sub("b"))
        #expect(try await b.createReceived([received]) == [d.id: received.operationCount])
        let paths = PackagePaths(folder: dir.sub("b"), id: d.id)
        // Installed: snapshots, no thumbnail (absent means "not rendered yet", never a blank page).
        #expect(try FileManager.default.contentsOfDirectory(atPath: paths.thumbnails).isEmpty)
        #expect(FileManager.default.fileExists(atPath: paths.content(p0)))
        let db = try await b.openDocument(d.id)
        for p in [p0, p1] {
            let jpeg = try await db.thumbnail(page: p)
            #expect(jpeg == expected[p], "the picture of the page's current state")
            #expect(fileBytes(db.thumbnailPath(p)) == jpeg, "stored once rendered")
        }
        // Asked again: the stored file, read back.
        #expect(try await db.thumbnail(page: p0) == expected[p0])
        try await db.close()
        try await b.close()
        try await d.close()
        try await a.close()
        let report = try Verify.run(folder: dir.sub("b"))
        #expect(report.isClean, "\(report.problems)")
    }
    @Test("[PKG-64] [PKG-96] received documents' clocks and chain digests are cached: a comparison after the install opens none")
    func installCachesClocksAndDigests() async throws {
        let dir = try TempDir("firstsync")
        defer { dir.remove() }
        let a = try await openNotebook(dir.sub("a"))
        var received: [ReceivedDocument] = []
        for i in 0..<3 {
            let d = try await a.createDocument(title: "d\(i)")
            let p0 = await d.pageList[0].id
            _ = try await d.addStrokes([stroke(3 + i), stroke(2)], to: p0)
            var pages = [p0: try await d.operations(page: p0, notCoveredBy: VectorClock())]
            if i == 1 {
                let p1 = try await d.addPage()
                _ = try await d.addStroke(stroke(4), to: p1)
                pages[p1] = try await d.operations(page: p1, notCoveredBy: VectorClock())
            }
            received.append(ReceivedDocument(id: d.id, documentOps: try await d.operations(notCoveredBy: VectorClock()), pages: pages))
            try await d.close()
        }
        let expected = try await a.logClocksAndDigests()
        try await a.close()

        let b = try await openNotebook(dir.sub("b"))
        #expect(try await b.createReceived(received).count == 3)
        try await b.close()
        let recorder = SyscallRecorder()
        let again = try await openNotebook(dir.sub("b"), io: Syscalls(recorder: recorder))
        recorder.reset()
        let got = try await again.logClocksAndDigests()
        try await again.close()
        #expect(got == expected, "the cached clocks and digests are those the logs give")
        #expect(got.allSatisfy { $0.digests?.isEmpty == false })
        let opened = recorder.pathsOpened.filter { $0.contains(".lnote/") && !$0.contains("/.lnote/") }
        #expect(opened.isEmpty, "no package file read: \(opened)")
    }
}
