import Foundation
import LnoteModel
import LnoteStore

extension Bench {
    /// 5. Save after editing one page: a 2-page document against a 200-page document.
    ///
    /// Both documents have the same edited page (200 strokes) and other pages of 20
    /// strokes each. They are closed after being built and reopened, as a user opens a
    /// document, so that only the edited page is loaded. Each run adds one stroke to the
    /// edited page (untimed: the journal append) and times `flush()`: the page's snapshot
    /// and thumbnail, and manifest.json (document.json holds nothing a page edit changes, so
    /// it is neither encoded nor rewritten).
    func caseSave() async throws {
        let bigPages = 200
        let otherStrokes = options.size(20, quick: 5)
        let editedStrokes = options.size(200, quick: 100)
        let built = try await Fixtures.notebookFolder(ws, name: "case5") { notebook in
            var ids: [DocumentID] = []
            for pageCount in [2, bigPages] {
                let doc = try await notebook.createDocument(title: "\(pageCount) pages")
                let first = await doc.pageList[0].id
                try await doc.addStrokes(self.source.handwriting(editedStrokes, stream: 5), to: first)
                for i in 1..<pageCount {
                    let p = try await doc.addPage()
                    try await doc.addStrokes(self.source.handwriting(otherStrokes, stream: 500 + UInt64(i)), to: p)
                }
                try await doc.close()
                ids.append(doc.id)
            }
            return ids
        }
        var storeOptions = StoreOptions()
        storeOptions.autosave = false
        let notebook = try await Notebook.open(at: built.path, options: storeOptions)
        let strokes = source.generated(2 * (options.runs + 2), pointRange: 40...200, stream: 55)
        var next = 0
        var written: [DocumentID: (content: Int, document: Int, manifest: Int)] = [:]
        func variant(_ id: DocumentID) async throws -> Variant {
            let doc = try await notebook.openDocument(id)
            let page = await doc.pageList[0].id
            _ = try await doc.elements(page)
            return Variant(name: "\(id)", setup: {
                try await doc.addStroke(strokes[next], to: page)
                next += 1
            }, body: {
                try await doc.flush()
            })
        }
        let small = try await variant(built.value[0]), big = try await variant(built.value[1])
        let t = try await measure([big, small], runs: options.runs)
        for id in built.value {
            let paths = PackagePaths(folder: notebook.path, id: id)
            let docPage = try await notebook.openDocument(id).pageList[0].id
            written[id] = (try Files.size(paths.content(docPage)), try Files.size(paths.document), try Files.size(paths.manifest))
        }
        try await notebook.close()
        results.rows.append(Row(5, "save after editing one page, \(bigPages)-page document", measured: t[0].median, unit: .seconds,
                                baselineName: "2-page document", baseline: t[1].median, target: .ratioAtMost(1.1),
                                note: "`Document.flush()` after one `addStroke`; it rewrites the edited page's snapshot "
                                    + "(and thumbnail) and manifest.json, whose counts come from counts kept in memory; "
                                    + "document.json (no per-page counts) is neither encoded nor rewritten: "
                                    + [bigPages, 2].enumerated().map { i, n in
                                        let w = written[built.value[1 - i]]!
                                        return "\(n) pages: snapshot \(formatBytes(Double(w.content))) + manifest "
                                            + "\(formatBytes(Double(w.manifest))) (document.json \(formatBytes(Double(w.document))), untouched)"
                                    }.joined(separator: "; "),
                                measuredRuns: t[0].runs, baselineRuns: t[1].runs))
    }
}
