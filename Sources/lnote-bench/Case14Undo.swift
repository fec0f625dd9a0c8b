import Foundation
import LnoteModel
import LnoteReplication
import LnoteStore

extension Bench {
    /// 14. Undo and redo (issue 16): one step undone, and one redone, against one stroke's
    /// append, side by side on the same loaded 2,000-stroke pen page.
    ///
    /// - append: `Document.addStroke` (one operation, durable: one `fdatasync`; one line in the
    ///   undo journal, [PKG-100]);
    /// - undo: `Document.undo()` of the stroke just added: the journal read (from the handle's
    ///   cache), what is left of the step computed ([MERGE-74]), the erase appended durably,
    ///   the redo line written;
    /// - redo: `Document.redo()` of it: the same, a restore appended ([MERGE-70]).
    func caseUndo() async throws {
        let strokes = options.size(2_000, quick: 400)
        let dir = try ws.directory("case14")
        var storeOptions = StoreOptions()
        storeOptions.autosave = false
        let notebook = try await Notebook.open(at: dir + "/notebook", create: true, options: storeOptions)
        let doc = try await notebook.createDocument(title: "undo")
        let page = await doc.pageList[0].id
        let ink = source.strokes(.pen, strokes + 4_000, stream: 14)
        _ = try await doc.undoGroup("load") { try await doc.addStrokes(Array(ink[0..<strokes]), to: page) }
        try await doc.compact(page: page)
        var next = strokes
        func stroke() -> Stroke {
            defer { next += 1 }
            return ink[next % ink.count]
        }
        let append = Variant(name: "append one stroke", setup: {}, body: {
            _ = try await doc.addStroke(stroke(), to: page)
        })
        let undo = Variant(name: "undo one step", setup: {
            _ = try await doc.addStroke(stroke(), to: page)
        }, body: {
            guard try await doc.undo() != nil else { throw LnoteError(.invalidState, "nothing to undo") }
        })
        let redo = Variant(name: "redo one step", setup: {
            _ = try await doc.addStroke(stroke(), to: page)
            _ = try await doc.undo()
        }, body: {
            guard try await doc.redo() != nil else { throw LnoteError(.invalidState, "nothing to redo") }
        })
        let t = try await measure([undo, redo, append], runs: options.runs)
        let count = try await doc.elementIDs(page).count
        try await notebook.close()
        for (i, what) in [(0, "undo"), (1, "redo")] {
            results.rows.append(Row(14, "\(what) of one step (a stroke) on a \(formatCount(count))-stroke page",
                                    measured: t[i].median, unit: .seconds,
                                    baselineName: "appending one stroke", baseline: t[2].median,
                                    target: .ratioAtMost(1),
                                    note: "pen ink, page loaded; each durable (one fdatasync), the undo journal cached by the handle "
                                        + "([PKG-100]); \(what == "undo" ? "an erase" : "a restore") appended ([MERGE-74])",
                                    measuredRuns: t[i].runs, baselineRuns: t[2].runs))
        }
    }
}
