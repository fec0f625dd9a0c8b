import Foundation
import Testing
import LnoteModel
import LnoteReplication
import LnoteRender
import LnoteStore

/// A fresh directory under the system temp dir.
func makeTempDir() throws -> String {
    var template = Array((NSTemporaryDirectory() + "lnote-thumbs-XXXXXX").utf8CString)
    guard let p = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
        throw LnoteError(.io, "mkdtemp failed")
    }
    return String(cString: p)
}

/// The bytes of an older lnote's `thumbnails/<page>.png` (a PNG's opening; the store never decodes it).
let legacyPNG: [UInt8] = [
    0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1F, 0x15, 0xC4,
    0x89, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9C, 0x63, 0xF8, 0xFF, 0xFF, 0xFF,
    0x7F, 0x00, 0x09, 0xFB, 0x03, 0xFD, 0x05, 0x43, 0x45, 0xCA, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45,
    0x4E, 0x44, 0xAE, 0x42, 0x60, 0x82,
]

private func nearWhite(_ c: RGBA) -> Bool { c.r >= 245 && c.g >= 245 && c.b >= 245 }
private func inked(_ c: RGBA) -> Bool { Int(c.r) + Int(c.g) + Int(c.b) < 3 * 100 }

/// Decoded pixels of a stored JPEG thumbnail.
private func storedPicture(_ path: String) throws -> Thumbnail {
    let bytes = try #require(FileManager.default.contents(atPath: path).map { Array($0) }, "no \(path)")
    return try JPEGEncoder.decode(bytes, path: path)
}

/// Mean absolute difference per channel between two pictures of one size.
private func meanError(_ a: Thumbnail, _ b: Thumbnail) -> Double {
    precondition(a.width == b.width && a.height == b.height)
    var sum = 0
    for i in stride(from: 0, to: a.pixels.count, by: 4) {
        for c in 0..<3 { sum += abs(Int(a.pixels[i + c]) - Int(b.pixels[i + c])) }
    }
    return Double(sum) / Double(a.width * a.height * 3)
}

/// [PKG-17] [PKG-103] What the store writes in `thumbnails/`: JPEG pictures of the pages.
@Suite("Store thumbnails: JPEG pictures of pages, after saves and merges")
struct StoreThumbnailTests {
    @Test("[PKG-17] closing a document leaves a JPEG picture of each changed page")
    func closingADocumentWritesItsPageThumbnails() async throws {
        let dir = try makeTempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var options = StoreOptions()
        options.autosave = false
        let nb = try await Notebook.open(at: dir, create: true, options: options)
        let d = try await nb.createDocument(title: "t")
        let pid = try #require(await d.pageList.first?.id)
        let blank = try await d.addPage(.last, canvas: CanvasSize(width: 8419, height: 5953))
        // A thick horizontal line across the middle of the A4 page.
        let line = Stroke(style: InkStyle(tool: .pen, color: .black),
                          points: (0...20).map { StrokePoint(x: 500 + Int32($0) * 250, y: 4200, radius: 60) })
        let ids = try await d.addStrokes([line], to: pid)
        _ = try await d.addStroke(line, to: blank)
        try await d.erase(try await d.elements(blank).map(\.id), on: blank)
        let path = d.thumbnailPath(pid)
        #expect(path.hasSuffix("/thumbnails/\(pid).jpg"))
        try await d.close()

        let t = try storedPicture(path)
        #expect(t.width == 181 && t.height == 256)
        // 4200 / 8419 · 256 ≈ 127.7; x from 500 to 5500 → 15 … 167 px.
        #expect(inked(t.pixel(90, 127)) && inked(t.pixel(20, 127)) && inked(t.pixel(160, 127)))
        #expect(nearWhite(t.pixel(0, 0)) && nearWhite(t.pixel(180, 255)) && nearWhite(t.pixel(90, 20)))

        // The landscape page whose stroke was erased has a blank landscape thumbnail.
        let d2 = try await nb.openDocument(d.id)
        let p2 = try storedPicture(d2.thumbnailPath(blank))
        #expect(p2.width == 256 && p2.height == 181)
        #expect((0..<p2.height).allSatisfy { y in (0..<p2.width).allSatisfy { nearWhite(p2.pixel($0, y)) } })
        // An edit after reopening redraws the picture after the save: erase the line, flush,
        // let the background work finish: a white page.
        try await d2.erase(ids, on: pid)
        try await d2.flush()
        await d2.thumbnailsSettled()
        let after = try storedPicture(path)
        #expect((0..<after.height).allSatisfy { y in (0..<after.width).allSatisfy { nearWhite(after.pixel($0, y)) } })
        try await d2.close()
        try await nb.close()

        let report = try Verify.run(folder: dir)
        #expect(report.isClean, "\(report.problems)")
    }

    @Test("[PKG-103] a merge into a page redraws its picture in the background, as the sender's page looks")
    func mergeRedrawsTheChangedPage() async throws {
        let dir = try makeTempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var options = StoreOptions()
        options.autosave = false
        let a = try await Notebook.open(at: dir + "/a", create: true, options: options)
        let b = try await Notebook.open(at: dir + "/b", create: true, options: options)
        let da = try await a.createDocument(title: "t")
        let p = try #require(await da.pageList.first?.id)
        _ = try await da.addStroke(Stroke(points: (0...20).map { StrokePoint(x: 500 + Int32($0) * 250, y: 2000, radius: 60) }), to: p)
        // b gets the document as a first sync does (no pictures), then asks for the cover.
        let received = ReceivedDocument(id: da.id, documentOps: try await da.operations(notCoveredBy: VectorClock()),
                                        pages: [p: try await da.operations(page: p, notCoveredBy: VectorClock())])
        _ = try await b.createReceived([received])
        let db = try await b.openDocument(da.id)
        let before = try #require(try await db.coverThumbnail())
        #expect(ThumbnailStamp.read(fromJPEG: before) == (try await db.thumbnailStamp(page: p)))

        // a draws a second line; b receives it, as a sync does.
        let since = try await db.thumbnailStamp(page: p)
        let clock = try await db.pageState(p).clock
        _ = try await da.addStroke(Stroke(points: (0...20).map { StrokePoint(x: 500 + Int32($0) * 250, y: 6000, radius: 60) }), to: p)
        let outcome = try await db.receive(try await da.operations(page: p, notCoveredBy: clock), page: p)
        #expect(outcome.applied.count == 1)
        await db.thumbnailsSettled()
        let stamp = try await db.thumbnailStamp(page: p)
        #expect(stamp != since)
        let stored = try #require(db.storedThumbnail(page: p))
        #expect(stored.format == .jpeg && stored.stamp == stamp, "the merged page's picture was redrawn")
        let picture = try JPEGEncoder.decode(stored.bytes)
        let expected = try await da.renderThumbnail(p)
        #expect(meanError(picture, expected) < 4)
        // 6000 / 8419 · 256 ≈ 182: the new line is there.
        #expect(inked(picture.pixel(90, 182)) && inked(picture.pixel(90, 61)))
        try await db.close()
        try await da.close()
        try await b.close()
        try await a.close()
        #expect(try Verify.run(folder: dir + "/b").isClean)
    }

    @Test("[PKG-17] an old notebook's PNG is read until the page is drawn, then replaced by the JPEG")
    func oldPNGIsReadThenReplaced() async throws {
        let dir = try makeTempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var options = StoreOptions()
        options.autosave = false
        let nb = try await Notebook.open(at: dir, create: true, options: options)
        let d = try await nb.createDocument(title: "t")
        let p = try #require(await d.pageList.first?.id)
        _ = try await d.addStroke(Stroke(points: (0...20).map { StrokePoint(x: 500 + Int32($0) * 250, y: 2000, radius: 60) }), to: p)
        try await d.close()
        // What an older lnote left: a PNG and no JPEG.
        try FileManager.default.removeItem(atPath: d.thumbnailPath(p))
        try Data(legacyPNG).write(to: URL(fileURLWithPath: d.legacyThumbnailPath(p)))

        let d2 = try await nb.openDocument(d.id)
        #expect(d2.storedThumbnail(page: p) == StoredThumbnail(format: .png, bytes: legacyPNG, stamp: nil))
        let jpeg = try await d2.thumbnail(page: p)
        #expect(ThumbnailStamp.read(fromJPEG: jpeg) == (try await d2.thumbnailStamp(page: p)))
        #expect(FileManager.default.contents(atPath: d2.thumbnailPath(p)).map { Array($0) } == jpeg)
        #expect(!FileManager.default.fileExists(atPath: d2.legacyThumbnailPath(p)), "the PNG is removed once the JPEG is written")
        try await d2.close()
        try await nb.close()
        #expect(try Verify.run(folder: dir).isClean)
    }
}
