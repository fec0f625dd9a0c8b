import CLnoteZlib
import Foundation
import Testing

/// `lnote thumbnail`: writes a PNG of the page, checks its arguments.
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
        // IHDR: width 64, height 32, 8-bit RGBA.
        #expect(Array(png[16..<29]) == [0, 0, 0, 64, 0, 0, 0, 32, 8, 6, 0, 0, 0])
        // The one IDAT, inflated: the middle row (y 16) holds dark pixels, the top row none.
        let idatLength = Int(png[33]) << 24 | Int(png[34]) << 16 | Int(png[35]) << 8 | Int(png[36])
        #expect(String(decoding: png[37..<41], as: UTF8.self) == "IDAT")
        let zlib = Array(png[41..<(41 + idatLength)])
        let row = 64 * 4 + 1
        var raw = [UInt8](repeating: 0, count: row * 32)
        var rawLength = uLongf(raw.count)
        let status = raw.withUnsafeMutableBufferPointer { dst in
            zlib.withUnsafeBufferPointer { src in uncompress(dst.baseAddress, &rawLength, src.baseAddress, uLong(src.count)) }
        }
        #expect(status == Z_OK && Int(rawLength) == raw.count)
        #expect(raw[16 * row + 1 + 32 * 4] < 64 && raw[1 + 32 * 4] == 255)

        let bad = try await sb.run("thumbnail", "nb", doc, "#1", "--out", "p.png", "--size", "0")
        #expect(bad.code == 2, "\(bad)")
        let missing = try await sb.run("thumbnail", "nb", doc, "#3", "--out", "q.png")
        #expect(missing.code == 1 && !FileManager.default.fileExists(atPath: sb.sub("q.png")), "\(missing)")
    }
}
