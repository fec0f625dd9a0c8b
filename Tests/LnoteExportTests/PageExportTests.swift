import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
import Testing
import LnoteModel
import LnoteRender
import LnoteStore
import LnoteTestSupport

/// `lnote export FOLDER DOC --pdf FILE` and `--svg DIR`, read back with poppler's tools and an
/// XML parser, and compared with lnote's own raster of the same pages.
@Suite("PDF and SVG export") struct PageExportTests {
    /// A notebook with one document: an A4 page of handwriting with a rotated PNG image and a
    /// highlighter stroke, a deleted page, a landscape page with three lines, and a small page
    /// with one stroke partly erased.
    struct Pages {
        var folder: String
        var document: DocumentID
        /// Live pages in order, with what each holds.
        var pages: [(id: PageID, canvas: CanvasSize, strokes: Int)]
        var states: [PageState] = []
        var assets: [AssetID: [UInt8]] = [:]
    }

    static func redBlue(_ w: Int, _ h: Int) throws -> [UInt8] {
        var px = [UInt8](repeating: 255, count: w * h * 4)
        for y in 0..<h {
            for x in 0..<w {
                let o = (y * w + x) * 4
                (px[o], px[o + 1], px[o + 2]) = x < w / 2 ? (220, 30, 30) : (30, 30, 220)
            }
        }
        return try Thumbnail(width: w, height: h, pixels: px).cairoPNG()
    }

    static func make(in dir: TempDir, seed: UInt64) async throws -> Pages {
        var store = StoreOptions()
        store.autosave = false
        let folder = dir.sub("nb")
        let nb = try await Notebook.open(at: folder, create: true, options: store)
        let d = try await nb.createDocument(title: "Export")
        let p1 = try #require(await d.pageList.first?.id)
        var gen = HandwritingGenerator(seed: seed, options: {
            var o = HandwritingGenerator.Options()
            o.pointsPerStroke = 20...120
            return o
        }())
        var ink = gen.strokes(20)
        var hi = ink.removeLast()
        hi.style = InkStyle(tool: .highlighter, color: RGBA(r: 255, g: 230, b: 0), width: 80)
        _ = try await d.addStrokes(ink, to: p1)
        let png = try redBlue(60, 30)
        _ = try await d.addImage(png, frame: QRect(x: 1500, y: 5000, width: 2400, height: 1200), rotation: 3000, to: p1)
        _ = try await d.addStroke(hi, to: p1)
        let gone = try await d.addPage()
        _ = try await d.addStrokes(gen.strokes(3), to: gone)
        try await d.deletePage(gone)
        let landscape = CanvasSize(width: 8419, height: 5953)
        let p2 = try await d.addPage(canvas: landscape)
        let lines = (0..<3).map { k in
            Stroke(style: InkStyle(tool: .pen, color: RGBA(r: 20, g: 60, b: 160)),
                   points: (0..<30).map { i in
                       StrokePoint(x: 800 + Int32(i) * 220, y: 1500 + Int32(k) * 1200, pressure: 500, radius: 15 + Int32(i), t: UInt32(i * 4))
                   })
        }
        _ = try await d.addStrokes(lines, to: p2)
        let small = CanvasSize(width: 2000, height: 1000)
        let p3 = try await d.addPage(canvas: small)
        let cut = try await d.addStroke(Stroke(points: (0..<40).map { i in
            StrokePoint(x: 100 + Int32(i) * 45, y: 500, pressure: 500, radius: 30, t: UInt32(i * 4))
        }), to: p3)
        try await d.eraseRange(cut, [PointRange(15, 25)], on: p3)
        try await d.flush()
        var f = Pages(folder: folder, document: d.id,
                      pages: [(p1, .a4, ink.count + 1), (p2, landscape, 3), (p3, small, 1)])
        for p in f.pages { f.states.append(try await d.pageState(p.id)) }
        f.assets[AssetID.of(png)] = png
        try await d.close()
        try await nb.close()
        return f
    }

    /// Fails (does not skip) when a poppler tool is missing.
    static func tool(_ name: String) -> String? {
        let path = "/usr/bin/\(name)"
        guard FileManager.default.isExecutableFile(atPath: path) else {
            Issue.record("\(name) is missing: install poppler-utils (scripts/setup.sh --deps-only installs it)")
            return nil
        }
        return path
    }

    /// [pdfinfo] page count and sizes; [pdftoppm] each page rasterized and compared with
    /// `PageRenderer.raster` of the same state at the same size.
    ///
    /// The threshold: poppler (Splash) and cairo antialias edges differently and resample the
    /// image differently, so edge pixels differ while blank and solid ones match. Measured mean
    /// absolute differences (of 255, all pixels, 400 px): 0.31 to 0.34 (A4 page with image and
    /// highlighter), 0.28 (landscape), 0.13 (small page); the same pages with their ink moved
    /// by 3 pt give 1.3, 3.8 and 10.7. Bound: 1 (three times the largest measured), and the
    /// moved page at least twice as far as the real one, so the measure can fail.
    @Test func pdfHasEveryLivePageAndLooksLikeTheRaster() async throws {
        guard let pdfinfo = Self.tool("pdfinfo"), let pdftoppm = Self.tool("pdftoppm") else { return }
        let dir = try TempDir()
        defer { dir.remove() }
        let seed = UInt64.random(in: 0...UInt64.max)
        let f = try await Self.make(in: dir, seed: seed)
        let out = dir.sub("out.pdf")
        let run = try await runCLI(Subprocess.product("lnote"), ["export", f.folder, f.document.description, "--pdf", out, "--json"])
        #expect(run.code == 0, "seed \(seed): \(run.errText)")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(run.outText.utf8)) as? [String: Any])
        #expect(json["pages"] as? Int == 3 && json["images"] as? Int == 1 && json["placeholders"] as? Int == 0, "\(json)")
        #expect(json["format"] as? String == "pdf" && (json["files"] as? [[String: Any]])?.first?["file"] as? String == out)
        #expect(dir.entries().filter { $0.hasPrefix(".") }.isEmpty, "a temporary file was left: \(dir.entries())")

        let info = try await Subprocess.run(pdfinfo, ["-f", "1", "-l", "3", out])
        #expect(info.code == 0, "\(info.errText)")
        let pagesLine = info.outText.split(separator: "\n").first { $0.hasPrefix("Pages:") }
        #expect(pagesLine.map { $0.dropFirst(6).trimmingCharacters(in: .whitespaces) } == "3", "\(info.outText)")
        for (i, p) in f.pages.enumerated() {
            let line = "Page    \(i + 1) size:  \(pt(p.canvas.width)) x \(pt(p.canvas.height)) pts"
            #expect(info.outText.contains(line), "\(line) in \(info.outText)")
        }

        for (i, p) in f.pages.enumerated() {
            let (w, h) = PageRenderer.size(for: p.canvas, maxSide: 400)
            let prefix = dir.sub("page\(i + 1)")
            let r = try await Subprocess.run(pdftoppm, ["-f", "\(i + 1)", "-l", "\(i + 1)", "-png", "-scale-to-x", "\(w)",
                                                        "-scale-to-y", "\(h)", "-singlefile", out, prefix])
            #expect(r.code == 0, "\(r.errText)")
            let poppler = try Thumbnail(decoding: Array(try Data(contentsOf: URL(fileURLWithPath: prefix + ".png"))))
            let ours = try PageRenderer.raster(f.states[i], canvas: p.canvas, maxSide: 400, assets: { f.assets[$0] })
            try #require(poppler.width == ours.width && poppler.height == ours.height, "page \(i + 1): \(poppler.width)x\(poppler.height)")
            let mad = meanAbsoluteDifference(poppler, ours)
            #expect(mad < 1, "seed \(seed) page \(i + 1): mean absolute difference \(mad)")
            var moved = f.states[i]
            for k in moved.elements.indices { moved.elements[k].transform = LWWRegister(.translation(30, 30)) }
            let far = meanAbsoluteDifference(poppler, try PageRenderer.raster(moved, canvas: p.canvas, maxSide: 400, assets: { f.assets[$0] }))
            #expect(far > 2 * mad, "seed \(seed) page \(i + 1): moved \(far) against \(mad)")
        }
        // The image is there, in color, where the raster has it.
        let page1 = try Thumbnail(decoding: Array(try Data(contentsOf: URL(fileURLWithPath: dir.sub("page1.png")))))
        #expect(page1.pixels.indices.contains { $0 % 4 == 2 && page1.pixels[$0] > 180 && page1.pixels[$0 - 2] < 80 },
                "no blue pixel of the image")
    }

    /// SVG: one file per live page, named NNN-<page>.svg; the root's size and viewBox are the
    /// canvas in points; at least one `<path>` per visible stroke (one per polyline of nearly
    /// constant width and per taper, see `PageRenderer`) and one per image (whose picture is
    /// an `<image>` in a `<pattern>` filling the frame's path), the only `<image>`s.
    @Test func svgHasOneFilePerPageWithItsStrokes() async throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let seed = UInt64.random(in: 0...UInt64.max)
        let f = try await Self.make(in: dir, seed: seed)
        let out = dir.sub("svg")
        let run = try await runCLI(Subprocess.product("lnote"), ["export", f.folder, f.document.description, "--svg", out])
        #expect(run.code == 0, "seed \(seed): \(run.errText)")
        #expect(run.outText == "exported 3 pages of document \(f.document) to \(out)/ (3 SVG files)\n", "\(run.outText)")
        let names = try FileManager.default.contentsOfDirectory(atPath: out).sorted()
        #expect(names == f.pages.enumerated().map { "00\($0.offset + 1)-\($0.element.id).svg" }, "\(names)")
        for (i, p) in f.pages.enumerated() where i < names.count {
            let data = try Data(contentsOf: URL(fileURLWithPath: out + "/" + names[i]))
            let doc = SVGSummary()
            let parser = XMLParser(data: data)
            parser.delegate = doc
            #expect(parser.parse(), "page \(i + 1): \(String(describing: parser.parserError))")
            let w = pt(p.canvas.width), h = pt(p.canvas.height)
            #expect(doc.root?["width"] == "\(w)pt" && doc.root?["height"] == "\(h)pt", "\(String(describing: doc.root))")
            #expect(doc.root?["viewBox"] == "0 0 \(w) \(h)", "\(String(describing: doc.root))")
            // At least one path per stroke, and one per image (its frame, filled with the picture).
            let images = i == 0 ? 1 : 0
            #expect(doc.counts["path", default: 0] >= p.strokes + images, "seed \(seed) page \(i + 1): \(doc.counts)")
            #expect(doc.counts["image", default: 0] == images, "page \(i + 1): \(doc.counts)")
        }
        // Again, the same bytes (rewritten in place).
        let before = try Data(contentsOf: URL(fileURLWithPath: out + "/" + names[0]))
        #expect(try await runCLI(Subprocess.product("lnote"), ["export", f.folder, f.document.description, "--svg", out]).code == 0)
        let same = try Data(contentsOf: URL(fileURLWithPath: out + "/" + names[0])) == before
        #expect(same)
    }

    @Test func badRequestsWriteNothing() async throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let f = try await Self.make(in: dir, seed: 1)
        let lnote = Subprocess.product("lnote")
        let both = try await runCLI(lnote, ["export", f.folder, f.document.description, "--pdf", dir.sub("a.pdf"), "--svg", dir.sub("s")])
        #expect(both.code == 2, "\(both)")
        let noFolder = try await runCLI(lnote, ["export", f.folder, f.document.description, "--pdf", dir.sub("none/a.pdf")])
        #expect(noFolder.code == 1 && noFolder.errText.contains("none/a.pdf"), "\(noFolder)")
        let noDoc = try await runCLI(lnote, ["export", f.folder, "--pdf", dir.sub("a.pdf")])
        #expect(noDoc.code == 2, "\(noDoc)")
        let file = dir.sub("plain")
        FileManager.default.createFile(atPath: file, contents: Data([1]))
        let notDir = try await runCLI(lnote, ["export", f.folder, f.document.description, "--svg", file])
        #expect(notDir.code == 1, "\(notDir)")
        #expect(!FileManager.default.fileExists(atPath: dir.sub("a.pdf")) && !FileManager.default.fileExists(atPath: dir.sub("s")))
    }
}

/// Counts an SVG's elements by name and keeps the root's attributes.
final class SVGSummary: NSObject, XMLParserDelegate {
    var root: [String: String]?
    var counts: [String: Int] = [:]
    func parser(_ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?,
                attributes: [String: String] = [:]) {
        if root == nil, name == "svg" { root = attributes }
        counts[name, default: 0] += 1
    }
}

/// Tenths of a point as points, printed as pdfinfo and cairo print them (`%g`: 200, 595.3).
func pt(_ tenths: Int32) -> String {
    tenths % 10 == 0 ? "\(tenths / 10)" : "\(Quantization.points(tenths))"
}

func meanAbsoluteDifference(_ a: Thumbnail, _ b: Thumbnail) -> Double {
    var sum = 0
    for i in 0..<(a.width * a.height) {
        for c in 0..<3 { sum += abs(Int(a.pixels[i * 4 + c]) - Int(b.pixels[i * 4 + c])) }
    }
    return Double(sum) / Double(a.width * a.height * 3)
}
