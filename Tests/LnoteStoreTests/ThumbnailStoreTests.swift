import Foundation
import Testing
import LnoteTestSupport
import LnoteModel
import LnoteReplication
@testable import LnoteStore

/// The stamp in a stored thumbnail, nil when none (test side: plain Foundation reads).
private func storedStamp(_ path: String) -> ThumbnailStamp? {
    fileBytes(path).flatMap(ThumbnailStamp.read(fromJPEG:))
}

/// A horizontal stroke at height `y` (tenths of a point), wide enough to show in a thumbnail.
private func bar(y: Int32) -> Stroke {
    Stroke(points: (0..<12).map { StrokePoint(x: Int32(400 + 300 * $0), y: y, radius: 50) })
}

/// Thumbnails off the edit path ([PKG-103]): the stamp, the background renderer's queue and
/// lifetime, old PNGs, repair, and a writer killed between a save and its pictures.
@Suite("Thumbnails in the store: stamped JPEGs drawn after the save, repaired, crash-safe")
struct ThumbnailStoreTests {
    @Test("[PKG-103] the stamp: SHA-256 of page, canvas and clock, as the spec's bytes; read back from a COM payload")
    func stampBytes() throws {
        let page = try #require(PageID("3F2A0000-1111-2222-3333-444455556666"))
        let clock = VectorClock([(ReplicaID(0xa1), UInt64(17)), (ReplicaID(2), UInt64(3))])
        let input = ThumbnailStamp.input(page: page, clock: clock, canvas: CanvasSize(width: 5953, height: 8419))
        // The spec's bytes, written out: UUID, width, height, n, then (replica, counter) ascending.
        let expected: [UInt8] = [0x3F, 0x2A, 0x00, 0x00, 0x11, 0x11, 0x22, 0x22, 0x33, 0x33, 0x44, 0x44, 0x55, 0x55, 0x66, 0x66,
                                 0x00, 0x00, 0x17, 0x41, 0x00, 0x00, 0x20, 0xE3, 0x00, 0x00, 0x00, 0x02,
                                 0, 0, 0, 0, 0, 0, 0, 0x02, 0, 0, 0, 0, 0, 0, 0, 0x03,
                                 0, 0, 0, 0, 0, 0, 0, 0xA1, 0, 0, 0, 0, 0, 0, 0, 0x11]
        #expect(input == expected)
        let stamp = ThumbnailStamp(page: page, clock: clock, canvas: CanvasSize(width: 5953, height: 8419))
        #expect(stamp.digest == SHA256.hash(expected))
        #expect(stamp.description == "38b8e60b992d1378685d85877e3e334ce98e171647df10b43ceece58f37051bf", "the spec's vector")
        let comment = stamp.comment
        #expect(comment.count == 82 && String(decoding: comment.prefix(18), as: UTF8.self) == "lnote-thumbnail 2 ")
        #expect(ThumbnailStamp(comment: comment) == stamp)
        // Another format (1: pictures drawn before cairo drew images), an uppercase digit, a
        // short payload: not a stamp.
        var other = comment
        other[16] = UInt8(ascii: "1")
        #expect(ThumbnailStamp(comment: other) == nil)
        other[16] = UInt8(ascii: "3")
        #expect(ThumbnailStamp(comment: other) == nil)
        if let letter = comment.indices.dropFirst(18).first(where: { comment[$0] >= UInt8(ascii: "a") }) {
            var upper = comment
            upper[letter] -= 0x20
            #expect(ThumbnailStamp(comment: upper) == nil)
        }
        #expect(ThumbnailStamp(comment: Array(comment.dropLast())) == nil)
        // Every input changes it: the canvas, the page, one counter.
        #expect(ThumbnailStamp(page: page, clock: clock, canvas: .a4) != ThumbnailStamp(page: page, clock: clock, canvas: CanvasSize(width: 8419, height: 5953)))
        #expect(ThumbnailStamp(page: PageID(), clock: clock, canvas: .a4) != ThumbnailStamp(page: page, clock: clock, canvas: .a4))
        #expect(ThumbnailStamp(page: page, clock: VectorClock([(ReplicaID(0xa1), UInt64(18)), (ReplicaID(2), UInt64(3))]), canvas: .a4)
                != ThumbnailStamp(page: page, clock: clock, canvas: .a4))
    }

    @Test("[PKG-103] a save writes no picture; the background writes it after the save's last write; marks coalesce")
    func drawnAfterTheSave() async throws {
        let dir = try TempDir("thumb-after")
        defer { dir.remove() }
        let rec = SyscallRecorder()
        // A delay nothing reaches: the renderer draws only once the test wakes it, however
        // slow the machine is.
        let nb = try await openNotebook(dir.path, io: Syscalls(recorder: rec), options: testOptions { $0.thumbnailDelay = .seconds(3600) })
        let d = try await nb.createDocument(title: "t")
        let p = await d.pageList[0].id
        rec.reset()
        for k in 0..<3 {
            _ = try await d.addStroke(bar(y: 1000 + 400 * Int32(k)), to: p)
            try await d.flush()
            #expect(!rec.all.contains { $0.path.contains("/thumbnails/") && $0.kind == .write }, "save \(k) wrote a picture")
        }
        #expect(fileBytes(d.thumbnailPath(p)) == nil)
        let saved = rec.all
        let lastSaveWrite = try #require(saved.lastIndex { $0.kind == .write })
        await d.renderThumbnailsNow()
        let events = rec.all
        let pictureWrites = events.indices.filter { events[$0].kind == .write && events[$0].path.contains("/thumbnails/") }
        #expect(pictureWrites.count == 1, "three saves of one page, one picture (coalesced)")
        #expect(pictureWrites.allSatisfy { $0 > lastSaveWrite })
        // Durable: renamed into place and the directory synced.
        #expect(events.contains { $0.kind == .rename && $0.path.hasSuffix("/thumbnails/\(p).jpg") })
        #expect(events.contains { $0.kind == .fsync && $0.path.hasSuffix("/thumbnails") })
        let stamp = try await d.thumbnailStamp(page: p)
        #expect(storedStamp(d.thumbnailPath(p)) == stamp)
        #expect(d.thumbnailCounts.rendered == 1 && d.thumbnailCounts.failed == 0)
        // Asked for, the stored file is returned as it is (fresh: nothing drawn again).
        #expect(try await d.thumbnail(page: p) == fileBytes(d.thumbnailPath(p)))
        #expect(try await d.refreshThumbnail(page: p) == .fresh)
        // A save with nothing new marks nothing (no renderer started).
        try await d.flush()
        #expect(d.thumbnailQueue.worker == nil)
        await d.renderThumbnailsNow()
        #expect(d.thumbnailCounts.rendered == 1)
        try await d.close()
        try await nb.close()
        #expect(try Verify.run(folder: dir.path).isClean)
    }

    @Test("[PKG-103] close() finishes what waits, then nothing is written: the folder can be removed at once (6 rounds)")
    func closeFinishesThePictures() async throws {
        for round in 0..<6 {
            let dir = try TempDir("thumb-close")
            let rec = SyscallRecorder()
            let delay: Duration = round % 2 == 0 ? .zero : .seconds(30)
            let nb = try await openNotebook(dir.path, io: Syscalls(recorder: rec), options: testOptions { $0.thumbnailDelay = delay })
            let d = try await nb.createDocument(title: "t")
            let p0 = await d.pageList[0].id
            let p1 = try await d.addPage()
            _ = try await d.addStroke(bar(y: 2000), to: p0)
            _ = try await d.addStroke(bar(y: 3000), to: p1)
            try await d.flush()
            try await d.close()
            try await nb.close()
            let atClose = rec.all.count
            for p in [p0, p1] {
                #expect(storedStamp(d.thumbnailPath(p)) != nil, "round \(round): the picture of \(p) was finished by close")
            }
            dir.remove()
            // Whatever the renderer still had in flight finds the handle closed: no write, no
            // folder made again under the removed path. A renderer waiting out its delay was
            // woken by the close: this returns at once, not after 30 s.
            let clock = ContinuousClock()
            let start = clock.now
            try await Task.sleep(for: .milliseconds(20))
            await d.thumbnailsSettled()
            #expect(clock.now - start < .seconds(20), "round \(round)")
            #expect(rec.all.count == atClose, "round \(round): \(rec.all.dropFirst(atClose).map(\.path))")
            #expect(!FileManager.default.fileExists(atPath: dir.path), "round \(round)")
        }
    }

    @Test("[PKG-103] a loaded page whose picture is current is not decoded to find that out; a stale one is drawn")
    func currentPictureLeavesPointsDeferred() async throws {
        let dir = try TempDir("thumb-current")
        defer { dir.remove() }
        var nb = try await openNotebook(dir.path)
        let d0 = try await nb.createDocument(title: "t")
        let p = await d0.pageList[0].id
        for k in 0..<40 { _ = try await d0.addStroke(bar(y: Int32(1000 + 50 * k)), to: p) }
        try await d0.flush()
        try await d0.compact(page: p)
        try await nb.close()  // the picture is drawn and stored
        nb = try await openNotebook(dir.path)
        let d = try await nb.openDocument(d0.id)
        _ = try await d.clock(page: p)  // loads the page, its points deferred
        let current = await d.thumbnailCheck(p)
        #expect(!current.draw)
        #expect(current.pointsDecoded == false, "the stamp is the clock's: no point needed")
        _ = try await d.addStroke(bar(y: 4000), to: p)
        let stale = await d.thumbnailCheck(p)
        #expect(stale.draw, "an edit made the picture stale")
        try await nb.close()
    }

    @Test("[PKG-103] the queue is bounded: past the limit the oldest waiting page is dropped and counted")
    func boundedQueue() async throws {
        let dir = try TempDir("thumb-queue")
        defer { dir.remove() }
        let nb = try await openNotebook(dir.path, options: testOptions {
            $0.thumbnailQueueLimit = 2
            // The renderer sleeps until woken below: it cannot take pages during the save.
            $0.thumbnailDelay = .seconds(3600)
        })
        let d = try await nb.createDocument(title: "t")
        var pages = [await d.pageList[0].id]
        for _ in 0..<3 { pages.append(try await d.addPage()) }
        for (k, p) in pages.enumerated() { _ = try await d.addStroke(bar(y: 1000 + 300 * Int32(k)), to: p) }
        try await d.flush()
        await d.renderThumbnailsNow()
        // The save marks each page twice (its snapshot, then the save's look at loaded pages):
        // every mark past the limit drops one, so at least the 2 of 4 pages that do not fit.
        #expect(d.thumbnailCounts.dropped >= 2 && d.thumbnailCounts.rendered == 2, "\(d.thumbnailCounts)")
        // The dropped pages' pictures are stale (missing), and a request draws them.
        let drawn = pages.filter { fileBytes(d.thumbnailPath($0)) != nil }
        #expect(drawn.count == 2)
        for p in pages { #expect(storedStamp(d.thumbnailPath(p)) == nil || drawn.contains(p)) }
        for p in pages where !drawn.contains(p) {
            #expect(try await d.refreshThumbnail(page: p) == .missing)
            #expect(storedStamp(d.thumbnailPath(p)) == (try await d.thumbnailStamp(page: p)))
        }
        try await d.close()
        try await nb.close()
    }

    @Test("[PKG-103] a sparse terabyte thumbnails/<page>.jpg (hostile folder): never read whole, no crash, drawn again")
    func hugeStoredThumbnail() async throws {
        let dir = try TempDir("thumb-huge")
        defer { dir.remove() }
        let nb = try await openNotebook(dir.path, options: testOptions { $0.thumbnailDelay = .seconds(3600) })
        let d = try await nb.createDocument(title: "t")
        let p = await d.pageList[0].id
        _ = try await d.addStroke(bar(y: 1000), to: p)
        let small = try await d.thumbnail(page: p)
        let path = d.thumbnailPath(p)
        // Its own fresh picture, its stamp intact, grown to a terabyte of holes: the stamp is
        // read from a prefix, the picture is not handed out (nor allocated), a request draws it.
        #expect(truncate(path, 1 << 40) == 0, "truncate: errno \(errno)")
        #expect(d.storedThumbnail(page: p) == nil)
        #expect(try await d.thumbnail(page: p) == small)
        #expect(fileBytes(path) == small, "replaced by the picture drawn again")
        // A terabyte of zeros (no stamp) and an edit: close draws the page, reading a prefix only.
        try writeFile(path, [0xFF, 0xD8])
        #expect(truncate(path, 1 << 40) == 0)
        _ = try await d.addStroke(bar(y: 3000), to: p)
        try await d.flush()
        let stamp = try await d.thumbnailStamp(page: p)
        try await d.close()
        try await nb.close()
        #expect(storedStamp(path) == stamp)
        #expect((fileBytes(path)?.count ?? 0) < 1 << 20)
    }

    @Test("[PKG-103] a picture stamped in format 1 (drawn before images were) is stale: drawn again with format 2")
    func formatOneIsStale() async throws {
        let dir = try TempDir("thumb-v1")
        defer { dir.remove() }
        let nb = try await openNotebook(dir.path, options: testOptions { $0.thumbnails = false })
        let d = try await nb.createDocument(title: "t")
        let p = await d.pageList[0].id
        _ = try await d.addStroke(bar(y: 1000), to: p)
        let v2 = try await d.thumbnail(page: p)
        let stamp = try await d.thumbnailStamp(page: p)
        // The same picture and digest with the old format's text, as an older lnote wrote it.
        let at = try #require((0..<(v2.count - 18)).first { v2[$0..<($0 + 18)].elementsEqual("lnote-thumbnail 2 ".utf8) })
        var v1 = v2
        v1[at + 16] = UInt8(ascii: "1")
        try writeFile(d.thumbnailPath(p), v1)
        #expect(ThumbnailStamp.read(fromJPEG: v1) == nil)
        #expect(try await d.refreshThumbnail(page: p) == .stale)
        #expect(storedStamp(d.thumbnailPath(p)) == stamp)
        #expect(fileBytes(d.thumbnailPath(p)) == v2)
        try await d.close()
        try await nb.close()
    }

    @Test("[PKG-17] an asset that cannot be read (not absent) is no placeholder stamped fresh: nothing stored, retried at the next save")
    func unreadableAssetNotStored() async throws {
        let dir = try TempDir("thumb-asset")
        defer { dir.remove() }
        let nb = try await openNotebook(dir.path, options: testOptions { $0.thumbnailDelay = .seconds(3600) })
        let d = try await nb.createDocument(title: "t")
        let p = await d.pageList[0].id
        _ = try await d.addImage(Array(repeating: 0x42, count: 300), frame: QRect(x: 100, y: 100, width: 2000, height: 2000), to: p)
        let name = try #require(listNames(d.paths.assets).first)
        let asset = d.paths.assets + "/" + name
        // The asset's path made a directory: reading it fails (as EIO would), it is not absent.
        try FileManager.default.moveItem(atPath: asset, toPath: dir.path + "/aside")
        try FileManager.default.createDirectory(atPath: asset, withIntermediateDirectories: false)
        try await d.flush()
        await d.renderThumbnailsNow()
        #expect(d.thumbnailCounts.failed == 1 && d.thumbnailCounts.rendered == 0, "\(d.thumbnailCounts)")
        #expect(fileBytes(d.thumbnailPath(p)) == nil, "no placeholder stored as fresh")
        #expect(d.thumbnailQueue.known(p) == nil)
        // Asked for: the picture is returned, not stored; a repair's refresh says why.
        _ = try await d.thumbnail(page: p)
        #expect(fileBytes(d.thumbnailPath(p)) == nil)
        await #expect(throws: (any Error).self) { try await d.refreshThumbnail(page: p) }
        // The asset readable again (absent would do too: a placeholder for good): the next save draws it.
        try FileManager.default.removeItem(atPath: asset)
        try FileManager.default.moveItem(atPath: dir.path + "/aside", toPath: asset)
        _ = try await d.addStroke(bar(y: 5000), to: p)
        try await d.flush()
        await d.renderThumbnailsNow()
        #expect(d.thumbnailCounts.rendered == 1, "\(d.thumbnailCounts)")
        #expect(storedStamp(d.thumbnailPath(p)) == (try await d.thumbnailStamp(page: p)))
        try await d.close()
        try await nb.close()
    }

    @Test("[PKG-103] an asset file claiming a terabyte (sparse) is drawn as the placeholder, never read into memory")
    func hugeSparseAssetIsAPlaceholder() async throws {
        let dir = try TempDir("thumb-sparse")
        defer { dir.remove() }
        let nb = try await openNotebook(dir.path, options: testOptions { $0.thumbnailDelay = .seconds(3600) })
        let d = try await nb.createDocument(title: "t")
        let p = await d.pageList[0].id
        _ = try await d.addImage(Array(repeating: 0x42, count: 300), frame: QRect(x: 100, y: 100, width: 2000, height: 2000), to: p)
        let name = try #require(listNames(d.paths.assets).first)
        #expect(truncate(d.paths.assets + "/" + name, 1 << 40) == 0)
        try await d.flush()
        await d.renderThumbnailsNow()
        #expect(d.thumbnailCounts.rendered == 1 && d.thumbnailCounts.failed == 0, "\(d.thumbnailCounts)")
        _ = try await d.thumbnail(page: p)
        let page = try await d.renderable(p)
        #expect(page.assets.isEmpty, "a 1 TiB asset was read for drawing")
        try await d.close()
        try await nb.close()
    }

    @Test("[PKG-103] the lock held by another process: the renderer does not wait for it (the actor stays free), the page is drawn later")
    func busyLockNotWaited() async throws {
        let dir = try TempDir("thumb-lock")
        defer { dir.remove() }
        let nb = try await openNotebook(dir.path, options: testOptions {
            $0.thumbnailDelay = .seconds(3600)
            $0.lockTimeout = .seconds(30)
        })
        let d = try await nb.createDocument(title: "t")
        let p = await d.pageList[0].id
        _ = try await d.addStroke(bar(y: 1000), to: p)
        try await d.flush()
        // Another open file description holding the document's flock, as another process would.
        let fd = open(d.paths.lock, O_RDWR)
        #expect(fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0)
        let clock = ContinuousClock()
        let start = clock.now
        await d.renderThumbnailsNow()
        #expect(clock.now - start < .seconds(15), "waited for the lock")
        #expect(d.thumbnailCounts.rendered == 0 && d.thumbnailCounts.failed == 0, "\(d.thumbnailCounts)")
        #expect(fileBytes(d.thumbnailPath(p)) == nil)
        close(fd)
        // Not recorded as known: the next save marks it again.
        try await d.flush()
        await d.renderThumbnailsNow()
        #expect(d.thumbnailCounts.rendered == 1, "\(d.thumbnailCounts)")
        #expect(storedStamp(d.thumbnailPath(p)) == (try await d.thumbnailStamp(page: p)))
        try await d.close()
        try await nb.close()
    }

    @Test("[PKG-103] [PKG-35] a state whose frames wait for their group commit is not stored: counters a failed sync takes back would make a wrong picture look fresh")
    func unsyncedStateNotStored() async throws {
        let dir = try TempDir("thumb-group")
        defer { dir.remove() }
        let nb = try await openNotebook(dir.path, options: testOptions {
            $0.thumbnailDelay = .seconds(3600)
            $0.groupCommit = GroupCommit(maxDelay: .seconds(3600), maxFrames: 1000)
        })
        let d = try await nb.createDocument(title: "t")
        let p = await d.pageList[0].id
        /// An edit whose group commit the test ends itself (no timer reached).
        func edit(_ y: Int32, drawWhilePending: Bool) async throws {
            let task = Task { try await d.addStroke(bar(y: y), to: p) }
            while await d.unsyncedFrames(p) == 0 { try await Task.sleep(for: .milliseconds(1)) }
            if drawWhilePending { await d.renderThumbnailsNow() }
            try await d.syncPageNow(p)
            _ = try await task.value
        }
        try await edit(1000, drawWhilePending: false)
        try await d.flush()  // marks the page; the renderer sleeps
        try await edit(3000, drawWhilePending: true)
        #expect(d.thumbnailCounts.rendered == 0, "\(d.thumbnailCounts)")
        #expect(!FileManager.default.fileExists(atPath: d.thumbnailPath(p)), "a picture of frames not yet synced")
        #expect(d.thumbnailQueue.known(p) == nil)
        // Synced: the next save marks it, and it is drawn.
        try await d.flush()
        await d.renderThumbnailsNow()
        #expect(d.thumbnailCounts.rendered == 1, "\(d.thumbnailCounts)")
        #expect(storedStamp(d.thumbnailPath(p)) == (try await d.thumbnailStamp(page: p)))
        try await d.close()
        try await nb.close()
    }

    @Test("[PKG-103] thumbnails off: nothing drawn in the background or at close; on demand still works")
    func thumbnailsOff() async throws {
        let dir = try TempDir("thumb-off")
        defer { dir.remove() }
        let nb = try await openNotebook(dir.path, options: testOptions { $0.thumbnails = false })
        let d = try await nb.createDocument(title: "t")
        let p = await d.pageList[0].id
        _ = try await d.addStroke(bar(y: 1000), to: p)
        try await d.flush()
        await d.thumbnailsSettled()
        #expect(listNames(d.paths.thumbnails).isEmpty)
        let jpeg = try await d.thumbnail(page: p)
        #expect(fileBytes(d.thumbnailPath(p)) == jpeg)
        _ = try await d.addStroke(bar(y: 2000), to: p)
        try await d.close()
        try await nb.close()
        #expect(fileBytes(d.thumbnailPath(p)) == jpeg, "not redrawn at close")
        #expect(try Verify.run(folder: dir.path).isClean, "a stale picture is not a problem")
    }

    @Test("[PKG-103] verify --repair draws missing, stale and old PNG thumbnails as JPEG and says so; verify reports none of them")
    func repairRebuildsThumbnails() async throws {
        let dir = try TempDir("thumb-repair")
        defer { dir.remove() }
        let nb = try await openNotebook(dir.path, options: testOptions { $0.thumbnails = false })
        let d = try await nb.createDocument(title: "t")
        let p0 = await d.pageList[0].id
        let p1 = try await d.addPage()
        let p2 = try await d.addPage()
        let p3 = try await d.addPage()
        for (k, p) in [p0, p1, p2, p3].enumerated() { _ = try await d.addStroke(bar(y: 1000 + 500 * Int32(k)), to: p) }
        for p in [p0, p1, p2, p3] { _ = try await d.thumbnail(page: p) }
        // p0 fresh; p1 missing; p2 stale (an edit after its picture, thumbnails off);
        // p3 only the PNG an older lnote wrote.
        try FileManager.default.removeItem(atPath: d.thumbnailPath(p1))
        _ = try await d.addStroke(bar(y: 6000), to: p2)
        try FileManager.default.removeItem(atPath: d.thumbnailPath(p3))
        let png = try await d.renderThumbnail(p3).cairoPNG()
        try writeFile(d.legacyThumbnailPath(p3), png)
        try await d.close()
        try await nb.close()
        #expect(try Verify.run(folder: dir.path).isClean, "missing, stale and PNG thumbnails are not damage")

        // Before the repair: the PNG is what a reader finds for p3.
        let nb1 = try await openNotebook(dir.path)
        let d1 = try await nb1.openDocument(d.id)
        #expect(d1.storedThumbnail(page: p3)?.format == .png && d1.storedThumbnail(page: p3)?.bytes == png)
        #expect(d1.storedThumbnail(page: p1) == nil)
        try await d1.close()
        try await nb1.close()

        let report = try await Repair.run(folder: dir.path)
        let said = report.actions.joined(separator: "\n")
        #expect(report.actions.contains { $0.contains("page \(p1)") && $0.contains("there was none") }, "\(said)")
        #expect(report.actions.contains { $0.contains("page \(p2)") && $0.contains("another state") }, "\(said)")
        #expect(report.actions.contains { $0.contains("page \(p3)") && $0.contains("old PNG removed") }, "\(said)")
        #expect(!report.actions.contains { $0.contains("page \(p0)") && $0.contains("thumbnail") }, "\(said)")
        #expect(report.after.isClean)
        #expect(fileBytes(d.legacyThumbnailPath(p3)) == nil)

        let nb2 = try await openNotebook(dir.path)
        let d2 = try await nb2.openDocument(d.id)
        for p in [p0, p1, p2, p3] {
            #expect(storedStamp(d2.thumbnailPath(p)) == (try await d2.thumbnailStamp(page: p)), "\(p) fresh after the repair")
        }
        #expect(try await d2.coverThumbnail() == fileBytes(d2.thumbnailPath(p0)))
        try await d2.close()
        try await nb2.close()
        let again = try await Repair.run(folder: dir.path)
        #expect(!again.actions.contains { $0.contains("thumbnail") }, "\(again.actions)")
    }

    @Test("[PKG-103] [PKG-52] a writer killed between its save and its thumbnails leaves a folder verify accepts; the pictures are stale, then repaired")
    func killedBeforeThePictures() async throws {
        let binary = try crashtestBinary()
        let dir = try TempDir("thumb-kill")
        defer { dir.remove() }
        let folder = dir.sub("nb")
        var previous: [PageID: ThumbnailStamp] = [:]
        for round in 0..<3 {
            // The writer's pictures wait an hour after its save: the kill lands before them.
            let child = try Subprocess.start(binary, ["--thumbnails", folder, "3600000"])
            let saved = await child.waitForOutput("saved\n", seconds: 60)
            #expect(saved, "round \(round): the writer did not save")
            child.kill(SIGKILL)
            let result = await child.wait()
            #expect(result.signal == SIGKILL, "round \(round): \(result.code)")
            let pages = result.outText.split(separator: "\n").filter { $0.hasPrefix("S ") }.compactMap { PageID(String($0.dropFirst(2))) }
            #expect(pages.count == 2, "round \(round): \(result.outText)")

            // Not reopened: verify accepts what the kill left.
            let v = try Verify.run(folder: folder)
            #expect(v.isClean, "round \(round): \(v.problems)")

            let nb = try await openNotebook(folder)
            let docID = try #require(try await nb.list().first?.id)
            let d = try await nb.openDocument(docID)
            for p in pages {
                let current = try await d.thumbnailStamp(page: p)
                let stored = storedStamp(d.thumbnailPath(p))
                // Round 0: none yet; later rounds: the one drawn after the last round, now stale.
                #expect(stored == previous[p], "round \(round)")
                #expect(stored != current, "round \(round): the picture cannot show the save it did not follow")
                // Asked for, it is drawn fresh.
                _ = try await d.thumbnail(page: p)
                #expect(storedStamp(d.thumbnailPath(p)) == current)
                previous[p] = current
            }
            try await d.close()
            try await nb.close()
            #expect(try Verify.run(folder: folder).isClean, "round \(round)")
        }
        // A kill after the renderer started: the reopening removes a cut temporary file, and
        // the repair makes every picture fresh.
        let child = try Subprocess.start(binary, ["--thumbnails", folder, "0"])
        #expect(await child.waitForOutput("saved\n", seconds: 60))
        try await Task.sleep(for: .milliseconds(Int.random(in: 0...20)))
        child.kill(SIGKILL)
        _ = await child.wait()
        let report = try await Repair.run(folder: folder)
        #expect(report.after.isClean, "\(report.after.problems)")
        let nb = try await openNotebook(folder)
        let d = try await nb.openDocument(try #require(try await nb.list().first?.id))
        for p in await d.allPageIDs {
            #expect(storedStamp(d.thumbnailPath(p)) == (try await d.thumbnailStamp(page: p)))
        }
        try await d.close()
        try await nb.close()
    }
}

extension Document {
    /// Frames of a loaded page's log not yet synced (0 when not loaded).
    fileprivate func unsyncedFrames(_ p: PageID) -> Int { pages[p]?.log.unsyncedFrames ?? 0 }
    /// Ends a loaded page's group commit now, releasing the edits waiting on it.
    fileprivate func syncPageNow(_ p: PageID) throws {
        if let lp = pages[p] { try syncNow(.page(p), lp.log) }
    }
}
