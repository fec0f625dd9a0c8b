import Foundation
import LnoteModel
import LnoteStore

extension Bench {
    /// 18. Thumbnails off the save path (issue 19, [PKG-103]).
    ///
    /// Two notebooks hold the same document (one page of 200 strokes, as case 5's edited
    /// page), one opened with thumbnails on, the other with them off. Each run adds one stroke
    /// (untimed) and times `flush()`; before the stroke the previous picture is left to finish
    /// (`thumbnailsSettled()`, untimed) and both variants then pause 300 ms, so that the timed
    /// save is the save alone and not the save competing with the picture of the run before it
    /// — which is what a user's next save meets when edits come slower than a picture takes.
    /// Target: the save with thumbnails on at most 1.1 × the save with them off.
    ///
    /// Then the picture itself: rendering a page of 200 strokes and encoding it as the stored
    /// JPEG (render + JPEG, CPU only), and a picture through the background path (the state
    /// read, render, JPEG, durable replace with its fsyncs) measured per page over 20 pages.
    func caseThumbnails() async throws {
        let strokesPerPage = options.size(200, quick: 60)
        var built: [Bool: (folder: String, doc: DocumentID)] = [:]
        for on in [true, false] {
            let f = try await Fixtures.notebookFolder(ws, name: on ? "case18-on" : "case18-off") { notebook in
                let doc = try await notebook.createDocument(title: "thumbnails")
                let first = await doc.pageList[0].id
                try await doc.addStrokes(self.source.handwriting(strokesPerPage, stream: 18), to: first)
                try await doc.close()
                return doc.id
            }
            built[on] = (f.path, f.value)
        }
        let strokes = source.generated(2 * (options.runs + 2), pointRange: 40...200, stream: 118)
        var notebooks: [Notebook] = []
        var docs: [Bool: Document] = [:]
        var pagesOf: [Bool: PageID] = [:]
        for on in [true, false] {
            var storeOptions = StoreOptions()
            storeOptions.autosave = false
            storeOptions.thumbnails = on
            let notebook = try await Notebook.open(at: built[on]!.folder, options: storeOptions)
            notebooks.append(notebook)
            let doc = try await notebook.openDocument(built[on]!.doc)
            docs[on] = doc
            let page = await doc.pageList[0].id
            _ = try await doc.elements(page)
            pagesOf[on] = page
        }
        let cursor = StrokeCursor(strokes)
        func variant(_ on: Bool) async -> Variant {
            let doc = docs[on]!, page = pagesOf[on]!
            return Variant(name: on ? "on" : "off", setup: {
                try await doc.addStroke(await cursor.next(), to: page)
                await doc.thumbnailsSettled()  // the previous save's picture (an edit marks nothing)
                // Both variants then leave the disk and processors alone for as long, so that the
                // one that waited for a picture does not save on a quieter machine.
                try await Task.sleep(for: .milliseconds(300))
            }, body: {
                try await doc.flush()
            })
        }
        let on = await variant(true), off = await variant(false)
        let t = try await measure([on, off], runs: options.runs)
        await docs[true]!.thumbnailsSettled()
        let counts = docs[true]!.thumbnailCounts
        let offDrawn = (try? FileManager.default.contentsOfDirectory(atPath: PackagePaths(folder: notebooks[1].path, id: built[false]!.doc).thumbnails))?.count ?? 0
        results.rows.append(Row(18, "save with thumbnails on (one page of \(strokesPerPage) strokes)", measured: t[0].median,
                                unit: .seconds, baselineName: "thumbnails off", baseline: t[1].median, target: .ratioAtMost(1.1),
                                note: "`Document.flush()` after one `addStroke`: the page's snapshot and manifest.json; with "
                                    + "thumbnails on it also marks the page (a SHA-256 of its clock) and the picture is drawn "
                                    + "after the save by a background task (\(counts.rendered) pictures drawn, \(counts.failed) "
                                    + "failed, \(counts.dropped) dropped; the off notebook's thumbnails/ holds \(offDrawn) "
                                    + "files, left from building it)",
                                measuredRuns: t[0].runs, baselineRuns: t[1].runs))

        // The picture: render + JPEG of the same page, CPU only.
        let doc = docs[true]!
        let page = await doc.pageList[0].id
        let stamp = try await doc.thumbnailStamp(page: page)
        var size = 0
        let draw = try await measure([Variant(name: "draw", body: {
            let picture = try await doc.renderThumbnail(page)
            size = try picture.jpeg(comment: stamp.comment).count
        })], runs: max(options.runs, 10))
        let render = try await measure([Variant(name: "render", body: {
            _ = try await doc.renderThumbnail(page)
        })], runs: max(options.runs, 10))
        let picture = try await doc.renderThumbnail(page)
        let encode = try await measure([Variant(name: "jpeg", body: {
            _ = try picture.jpeg(comment: stamp.comment)
        })], runs: max(options.runs, 10))
        results.rows.append(Row(18, "thumbnail of a page of \(strokesPerPage) strokes: render + JPEG", measured: draw[0].median,
                                unit: .seconds, baselineName: "render alone", baseline: render[0].median, target: .report,
                                note: "`renderThumbnail` (256 px on the longer side) then `jpeg(comment:)` (TurboJPEG, quality 80, "
                                    + "4:2:0, with the stamp; the JPEG alone: \(formatSeconds(encode[0].median))); \(formatBytes(Double(size))) a picture",
                                measuredRuns: draw[0].runs, baselineRuns: render[0].runs))

        // Through the background path: 20 pages marked by one save, drawn and written.
        let pages = 20
        var added: [PageID] = []
        for i in 0..<pages {
            let p = try await doc.addPage()
            try await doc.addStrokes(source.handwriting(options.size(60, quick: 20), stream: 1800 + UInt64(i)), to: p)
            added.append(p)
        }
        await doc.thumbnailsSettled()
        let before = doc.thumbnailCounts.rendered
        let clock = ContinuousClock()
        let start = clock.now
        try await doc.flush()
        let saved = clock.now
        await doc.thumbnailsSettled()
        let drawn = doc.thumbnailCounts.rendered - before
        let perPage = seconds(clock.now - saved) / Double(max(1, drawn))
        results.rows.append(Row(18, "background thumbnails after one save of \(pages) new pages, per page", measured: perPage,
                                unit: .seconds, baselineName: "", baseline: nil, target: .report,
                                note: String(format: "%d pictures drawn after a save of %.1f ms; each: the page's state, render, "
                                             + "JPEG, durable replace (temp file, fsync, rename, directory fsync) under the lock",
                                             drawn, 1000 * seconds(saved - start))))
        for n in notebooks { try await n.close() }
    }
}

/// The strokes case 18's runs add, one per run, in order.
private actor StrokeCursor {
    let strokes: [Stroke]
    var position = 0
    init(_ strokes: [Stroke]) { self.strokes = strokes }
    func next() -> Stroke {
        defer { position += 1 }
        return strokes[position % strokes.count]
    }
}
