import Foundation
import LnoteModel
import LnoteRender
import Testing

/// `lnote thumbnail`: writes a PNG of the page (drawn and written by cairo), checks its arguments.
@Suite struct ThumbnailCommandTests {
    @Test func writesAPNGOfThePage() async throws {
        let sb = try Sandbox("thumb")
        defer { sb.remove() }
        try await sb.ok("init", "nb")
        let doc = try await sb.ok("new", "nb", "--width", "200", "--height", "100")
        try sb.write("s.jsonl", "{\"points\": [[10, 50], [190, 50]]}\n")
        try await sb.ok("import", "nb", doc, "#1", "s.jsonl", "--width", "8")
        let out = try await sb.ok("thumbnail", "nb", doc, "#1", "--out", "p.png", "--size", "64")
        #expect(out.hasSuffix("64x32 pixels to p.png"), "\(out)")
        let png = try #require(FileManager.default.contents(atPath: sb.sub("p.png")).map { Array($0) })
        #expect(Array(png[0..<8]) == [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
        // IHDR: width 64, height 32, 8-bit RGB (cairo writes an opaque picture without alpha).
        #expect(Array(png[16..<26]) == [0, 0, 0, 64, 0, 0, 0, 32, 8, 2])
        // Read back: the middle row (y 16) holds dark pixels, the top row none.
        let picture = try Thumbnail(decoding: png)
        #expect(picture.width == 64 && picture.height == 32)
        #expect(picture.pixel(32, 16).r < 64 && picture.pixel(32, 0) == RGBA(r: 255, g: 255, b: 255))

        let bad = try await sb.run("thumbnail", "nb", doc, "#1", "--out", "p.png", "--size", "0")
        #expect(bad.code == 2, "\(bad)")
        let missing = try await sb.run("thumbnail", "nb", doc, "#3", "--out", "q.png")
        #expect(missing.code == 1 && !FileManager.default.fileExists(atPath: sb.sub("q.png")), "\(missing)")
    }
}
