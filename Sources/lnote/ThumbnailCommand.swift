import Foundation
import LnoteModel
import LnoteRender
import LnoteStore

extension CommandTable {
    static let thumbnail = Command(
        name: "thumbnail",
        synopsis: "lnote thumbnail FOLDER DOC PAGE --out FILE.png [--size N]",
        summary: "Render a page as a PNG picture (what thumbnails/<page>.jpg holds)",
        details: """
        Renders the page's current state with cairo: white background, strokes in their ink
        (width following pressure, erased parts left out, the highlighter translucent), images
        with their pixels, size and rotation (a missing or undecodable asset as a gray box).
        The stored thumbnails (JPEG, 256 pixels) are drawn again after a page changes, off
        the edit path; this command renders afresh and writes only FILE (replaced durably). PAGE is an id, a prefix, or pN (the N-th live page; #N also works, quoted).
        --out FILE   the PNG to write (replaced if it exists)
        --size N     the longer side in pixels, 1 to 4096 (default 256)
        """,
        options: ["out", "size"],
        run: { args, console in
            try args.expect(3, "FOLDER DOC PAGE")
            guard let out = args.option("out") else { throw Arguments.UsageError(message: "expected --out FILE.png") }
            var size = Document.thumbnailSide
            if let s = args.option("size") {
                guard let n = Int(s), (1...4096).contains(n) else {
                    throw Arguments.UsageError(message: "--size \(s) must be a whole number from 1 to 4096")
                }
                size = n
            }
            let (pid, picture) = try await withNotebook(args.positionals[0], console: console) { nb in
                try await withDocument(nb, args.positionals[1], console: console) { d in
                    let pid = try await Resolve.page(args.positionals[2], in: d)
                    let page = try await d.renderable(pid)
                    return (pid, try PageRenderer.raster(page.state, canvas: page.canvas, maxSide: size, assets: page.asset))
                }
            }
            let parent = (out as NSString).deletingLastPathComponent
            var isDir: ObjCBool = false
            if !parent.isEmpty, !FileManager.default.fileExists(atPath: parent, isDirectory: &isDir) || !isDir.boolValue {
                throw CLIError("cannot write the picture to \(out): the folder \(parent) does not exist")
            }
            do {
                try OutputFile.replace(out, with: picture.cairoPNG())
            } catch {
                throw LnoteError(.io, "cannot write the picture to \(out): \(describeForPeople(error))")
            }
            console.out("page \(pid): \(picture.width)x\(picture.height) pixels to \(out)")
            return Exit.ok
        })
}
