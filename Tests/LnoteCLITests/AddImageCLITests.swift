import Foundation
import Testing
import LnoteRender
import LnoteTestSupport

/// `lnote add-image` stores any bytes (the app may show formats lnote does not draw), and says
/// so on standard error when lnote's own pictures would draw a placeholder box instead.
@Suite struct AddImageCLITests {
    @Test("[PKG-14] add-image: a JPEG is placed silently; a GIF, a damaged JPEG and bytes of no format are placed too, with a note naming the file and why lnote draws a placeholder")
    func noteForImagesLnoteCannotDraw() async throws {
        let sb = try Sandbox("add-image")
        defer { sb.remove() }
        try await sb.ok("init", "nb")
        let doc = try await sb.ok("new", "nb", "--title", "Pictures")
        // 16 × 8 pixels of a gradient, as a thumbnail would be stored.
        var pixels: [UInt8] = []
        for i in 0..<(16 * 8) { pixels += [UInt8(i), UInt8(255 - i), 128, 255] }
        let jpeg = try JPEGEncoder.encode(Thumbnail(width: 16, height: 8, pixels: pixels))
        let files: [(name: String, bytes: [UInt8], drawn: Bool)] = [
            ("photo.jpg", jpeg, true),
            ("anim.gif", Array("GIF89a".utf8) + [16, 0, 8, 0, 0, 0, 0, 0x3B], false),
            ("cut.jpg", Array(jpeg.prefix(20)), false),  // cut inside its header
            ("notes.txt", Array("not a picture\n".utf8), false),
        ]
        for f in files {
            try Data(f.bytes).write(to: URL(fileURLWithPath: sb.sub(f.name)))
            let r = try await sb.run(["add-image", "nb", doc, "#1", f.name, "--x", "10", "--y", "10", "--width", "40", "--height", "20"])
            #expect(r.code == 0, "\(f.name): \(r)")
            let note = r.err.contains("lnote add-image: note: thumbnails, PDF and SVG export draw a placeholder box for \(f.name): ")
            #expect(note == !f.drawn, "\(f.name): \(r.err)")
            #expect(r.err.isEmpty == f.drawn, "\(f.name): \(r.err)")
        }
        // Every one of them was stored and placed.
        let shown = try await sb.ok("show", "nb", doc, "#1")
        #expect(shown.components(separatedBy: "image").count - 1 >= files.count, "\(shown)")
        _ = try await sb.ok("verify", "nb")
    }
}
