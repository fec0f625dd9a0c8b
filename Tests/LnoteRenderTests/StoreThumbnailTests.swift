import Foundation
import Testing
import LnoteModel
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

/// [PKG-17] The store writes `thumbnails/<page>.png` with each page snapshot.
@Suite struct StoreThumbnailTests {
    @Test func closingADocumentWritesItsPageThumbnails() async throws {
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
        try await d.close()

        let bytes = try #require(FileManager.default.contents(atPath: path).map { Array($0) }, "no \(path)")
        let png = try DecodedPNG(bytes)
        #expect(png.width == 181 && png.height == 256)
        let t = Thumbnail(width: png.width, height: png.height, pixels: png.pixels)
        // 4200 / 8419 · 256 ≈ 127.7; x from 500 to 5500 → 15 … 167 px.
        #expect(isDark(t.pixel(90, 127)) && isDark(t.pixel(20, 127)) && isDark(t.pixel(160, 127)))
        #expect(t.pixel(0, 0) == white && t.pixel(180, 255) == white && t.pixel(90, 20) == white)

        // The landscape page whose stroke was erased has a blank landscape thumbnail.
        let d2 = try await nb.openDocument(d.id)
        let b = try #require(FileManager.default.contents(atPath: d2.thumbnailPath(blank)).map { Array($0) })
        let p2 = try DecodedPNG(b)
        #expect(p2.width == 256 && p2.height == 181 && p2.pixels.allSatisfy { $0 == 255 })
        // An edit after reopening rewrites the thumbnail: erase the line, flush, white page.
        try await d2.erase(ids, on: pid)
        try await d2.flush()
        let after = try DecodedPNG(try #require(FileManager.default.contents(atPath: path).map { Array($0) }))
        #expect(after.pixels.allSatisfy { $0 == 255 })
        try await d2.close()
        try await nb.close()

        let report = try Verify.run(folder: dir)
        #expect(report.isClean, "\(report.problems)")
    }
}
