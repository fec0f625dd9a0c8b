import Foundation
import LnoteModel
import LnoteRender
import LnoteStore

extension Bench {
    /// 17. Pages drawn by cairo (issue 19): a thumbnail (256 px) of each page of a 28-page
    /// document, and the PDF export of the 28 pages (drawn in one PDF and written durably),
    /// in the same interleaved loop. (The hand-made rasterizer it was once compared with is
    /// gone: cairo alone is reported.)
    /// `LNOTE_BENCH_PDF=FILE` keeps a copy of the PDF (to inspect it, e.g. with `pdfimages -list`).
    func caseRender() async throws {
        let pageCount = options.size(28, quick: 6)
        let strokesPerPage = options.size(150, quick: 40)
        var gen = HandwritingGenerator(seed: options.seed)
        var pages: [PageRenderer.Page] = []
        var points = 0
        for p in 0..<pageCount {
            let strokes = gen.strokes(strokesPerPage)
            let rep = ReplicaID(UInt64(p + 1))
            let elements = strokes.enumerated().map { i, s in
                ElementRecord(id: OpID(replica: rep, counter: UInt64(i + 1)), lamport: UInt64(i + 1), wallTime: 0,
                              content: .stroke(s), z: LWWRegister(ZKey(layer: Int64(i))))
            }
            points += strokes.reduce(0) { $0 + $1.points.count }
            pages.append(PageRenderer.Page(state: PageState(page: PageID(), elements: elements), canvas: .a4))
        }
        var cairoPixels = 0
        let cairo = Variant(name: "cairo thumbnails", body: {
            cairoPixels = 0
            for p in pages { cairoPixels += try PageRenderer.raster(p.state, canvas: p.canvas, maxSide: 256).pixels.count }
        })
        let dir = try ws.directory("case17")
        let file = dir + "/document.pdf"
        var pdfBytes = 0
        let pdf = Variant(name: "PDF export", body: {
            let bytes = try PageRenderer.pdf(pages, creationDate: "D:20260101000000Z").bytes
            try OutputFile.replace(file, with: bytes)
            pdfBytes = bytes.count
        })
        let t = try await measure([cairo, pdf], runs: options.runs)
        if let keep = ProcessInfo.processInfo.environment["LNOTE_BENCH_PDF"], !keep.isEmpty {
            try OutputFile.replace(keep, with: try Files.read(file))
        }
        let (w, h) = PageRenderer.size(for: .a4, maxSide: 256)
        guard cairoPixels == pageCount * w * h * 4, pdfBytes > 0 else {
            throw LnoteError(.invalidState, "case 17 drew \(cairoPixels) bytes of pixels, a PDF of \(pdfBytes) bytes")
        }
        let n = Double(pageCount)
        results.rows.append(Row(17, "thumbnail (256 px) of a page of \(strokesPerPage) strokes, cairo", measured: t[0].median / n,
                                unit: .seconds, baselineName: "", baseline: nil, target: .report,
                                note: "per page, median over \(pageCount) generated A4 pages (\(formatCount(points)) points in all), "
                                    + "256 px, strokes only",
                                measuredRuns: t[0].runs.map { $0 / n }))
        results.rows.append(Row(17, "PDF export of a \(pageCount)-page document (\(strokesPerPage) strokes a page)", measured: t[1].median,
                                unit: .seconds, baselineName: "", baseline: nil, target: .report,
                                note: "PageRenderer.pdf (cairo's PDF surface, vector strokes) and a durable write of the "
                                    + "\(formatBytes(Double(pdfBytes))) file",
                                measuredRuns: t[1].runs))
    }
}
