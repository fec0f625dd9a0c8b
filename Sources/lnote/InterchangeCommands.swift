import Foundation
import LnoteInterchange
import LnoteModel
import LnoteStore

// `lnote import` (JSON lines, InkML, .xopp) and `lnote export --inkml`: argument parsing and
// printing around LnoteInterchange.

extension CommandTable {
    /// `lnote import FOLDER DOC [PAGE] FILE`: reads and checks the whole input, then resolves
    /// every page it names, then writes: new pages, grown canvases, strokes.
    static func runImport(_ args: Arguments, console: Console) async throws -> Int32 {
        try args.expect(3, max: 4, "FOLDER DOC [PAGE] FILE")
        let file = args.positionals[args.positionals.count - 1]
        let pageName = args.positionals.count == 4 ? args.positionals[2] : nil
        let format: InterchangeFormat
        if let f = args.option("format") {
            guard let v = InterchangeFormat(rawValue: f) else {
                throw Arguments.UsageError(message: "--format must be jsonl, inkml or xopp, got \"\(f)\"")
            }
            format = v
        } else {
            guard let v = InterchangeFormat(path: file) else {
                throw Arguments.UsageError(message: "cannot tell the format of \(file) from its name: give --format jsonl, inkml or xopp")
            }
            format = v
        }
        guard file != "-" || format == .jsonl else { throw Arguments.UsageError(message: "standard input (-) is read as JSON lines only") }
        var style = InkStyle()
        if let t = args.option("tool") {
            guard let tool = ToolKind(name: t) else {
                throw Arguments.UsageError(message: "--tool must be pen, pencil, marker or highlighter, got \"\(t)\"")
            }
            style.tool = tool
        }
        if let c = args.option("color") {
            guard let color = RGBA(hex: c) else { throw Arguments.UsageError(message: "--color must be #rrggbb or #rrggbbaa, got \"\(c)\"") }
            style.color = color
        }
        if let w = try Units.positive(args, "width") {
            // [IMP-6] A stroke is at most 10,000 pt wide ([LOG-23]): a wider ink is the
            // command's mistake, told before the file is read.
            guard w <= ContentBounds.maxRadius else {
                throw Arguments.UsageError(message: "--width must be at most 10000 pt (the widest stroke an operation carries)")
            }
            style.width = w
        }

        // 1. The whole input, checked, before the notebook is opened ([IMP-7], [XCH-1]).
        var ink: ImportedInk
        switch format {
        case .jsonl: ink = try JSONLinesReader.read(contentsOf: file, style: style)
        case .inkml: ink = try InkMLReader.read(contentsOf: file, style: style)
        case .xopp: ink = try XoppReader.read(contentsOf: file, style: style)
        }
        // An input without strokes or page sizes creates no page ([XCH-11]): there is nothing to add.
        if ink.strokeCount == 0, ink.pages.allSatisfy({ $0.canvas == nil }) { ink.pages = [] }
        for p in ink.pages {
            for (k, s) in p.strokes.enumerated() {
                if let problem = ContentBounds.problem(.stroke(s)) {
                    throw LnoteError(.invalidArgument, "stroke \(k + 1) of an input page: \(problem)", path: file)
                }
            }
        }

        struct Placed {
            var pid: PageID
            var created: Bool
            var canvas: CanvasSize
            var grown: Bool
            var strokes: [Stroke]
            var inkBeforeOrigin: Bool
        }
        let (placed, ids) = try await withNotebook(args.positionals[0], console: console) { nb in
            try await withDocument(nb, args.positionals[1], console: console) { d -> ([Placed], [ElementID]) in
                // 2. Every page named, resolved before anything is written.
                let live = await d.pageList
                var given: PageID?
                if let pageName {
                    let pid = try await Resolve.page(pageName, in: d)
                    // A deleted page has no current canvas to grow, and ink sent to it would not show.
                    guard live.contains(where: { $0.id == pid }) else {
                        throw LnoteError(.invalidState, "page \(pid) is deleted: restore it (lnote page restore) or name a live page")
                    }
                    given = pid
                }
                enum Slot: Hashable { case existing(PageID), new(Int) }
                var slots: [Slot] = []
                var newCanvas: [Int: CanvasSize?] = [:]
                var nextNew = 0
                var positionsAdded = 0
                var givenNew: Int?
                for p in ink.pages {
                    switch p.target {
                    case .given:
                        if let given { slots.append(.existing(given)) } else {
                            if givenNew == nil { givenNew = nextNew; newCanvas[nextNew] = p.canvas; nextNew += 1 }
                            slots.append(.new(givenNew!))
                        }
                    case .new:
                        newCanvas[nextNew] = p.canvas
                        slots.append(.new(nextNew)); nextNew += 1
                    case .id(let pid):
                        guard live.contains(where: { $0.id == pid }) else {
                            let at = p.line.map { "line \($0): " } ?? ""
                            throw LnoteError(.notFound, "\(at)\"page\" \(pid) is not a live page of document \(d.id)", path: file,
                                             offset: p.offset, index: p.line)
                        }
                        slots.append(.existing(pid))
                    case .position(let n):
                        if n <= live.count { slots.append(.existing(live[n - 1].id)) } else {
                            positionsAdded = max(positionsAdded, n - live.count)
                            slots.append(.new(-(n - live.count)))  // filled below: the k-th page added for positions
                        }
                    }
                }
                // The input pages of each slot, in one pass (a lookup per slot would be quadratic).
                var pagesOf: [Slot: [Int]] = [:]
                for (i, slot) in slots.enumerated() { pagesOf[slot, default: []].append(i) }
                let base = await d.defaultCanvas
                func fitted(_ pages: [Int], _ c: CanvasSize) -> CanvasSize {
                    var canvas = c
                    for i in pages { canvas = ink.pages[i].fitting(canvas).canvas }
                    return canvas
                }
                // 3. Pages created: first those positions need (in order), then the others.
                var created: [Int: PageID] = [:]
                var order: [PageID] = []
                var createdPages: [PageID: CanvasSize] = [:]
                // What was written, to take back if a later write fails ([XCH-1]).
                var grownFrom: [(PageID, CanvasSize)] = []
                var added: [(PageID, [ElementID])] = []
                // [MERGE-73] One import is one undo step, whatever pages it writes to (labelled as
                // `addStrokes` labels the strokes of one page).
                let total = ink.pages.reduce(0) { $0 + $1.strokes.count }
                await d.beginUndoGroup(total == 1 ? "add" : "add \(total) strokes")
                do {
                    for k in 1...max(1, positionsAdded) where positionsAdded > 0 {
                        let canvas = fitted(pagesOf[.new(-k)] ?? [], base)
                        let pid = try await d.addPage(.last, canvas: canvas)
                        created[-k] = pid
                        createdPages[pid] = canvas
                        order.append(pid)
                    }
                    for k in 0..<nextNew {
                        let canvas = fitted(pagesOf[.new(k)] ?? [], (newCanvas[k] ?? nil) ?? base)
                        let pid = try await d.addPage(.last, canvas: canvas)
                        created[k] = pid
                        createdPages[pid] = canvas
                        order.append(pid)
                    }
                    // 4. Existing pages grow to fit; then the strokes, one page at a time.
                    var byPage: [PageID: [Stroke]] = [:]
                    var pageOrder: [PageID] = []
                    for (i, p) in ink.pages.enumerated() {
                        let pid: PageID
                        switch slots[i] {
                        case .existing(let e): pid = e
                        case .new(let k): pid = created[k]!
                        }
                        if byPage[pid] == nil { pageOrder.append(pid) }
                        byPage[pid, default: []] += p.strokes
                    }
                    for pid in order where byPage[pid] == nil { pageOrder.append(pid); byPage[pid] = [] }
                    var placed: [Placed] = []
                    var ids: [ElementID] = []
                    for pid in pageOrder {
                        let strokes = byPage[pid]!
                        let page = ImportedPage(target: .given, strokes: strokes)
                        var canvas: CanvasSize
                        var grown = false
                        if let c = createdPages[pid] { canvas = c } else {
                            let current = live.first(where: { $0.id == pid })?.canvas ?? base
                            canvas = page.fitting(current).canvas
                            if canvas != current {
                                try await d.setCanvas(pid, canvas)
                                grownFrom.append((pid, current))
                                grown = true
                            }
                        }
                        if !strokes.isEmpty {
                            let new = try await d.addStrokes(strokes, to: pid)
                            ids += new
                            if createdPages[pid] == nil { added.append((pid, new)) }
                        }
                        placed.append(Placed(pid: pid, created: createdPages[pid] != nil, canvas: canvas, grown: grown,
                                             strokes: strokes, inkBeforeOrigin: page.fitting(canvas).inkBeforeOrigin))
                    }
                    try await d.endUndoGroup()
                    return (placed, ids)
                } catch {
                    try? await d.endUndoGroup()
                    // [XCH-1] Take back what was written, newest first: strokes on existing pages
                    // erased, canvases set back, created pages deleted.
                    var left: [String] = []
                    for (pid, new) in added.reversed() {
                        do { try await d.erase(new, on: pid) } catch { left.append("\(new.count) strokes on page \(pid)") }
                    }
                    for (pid, canvas) in grownFrom.reversed() {
                        do { try await d.setCanvas(pid, canvas) } catch { left.append("the grown canvas of page \(pid)") }
                    }
                    for pid in order.reversed() {
                        do { try await d.deletePage(pid) } catch { left.append("new page \(pid)") }
                    }
                    guard left.isEmpty else {
                        var e = (error as? LnoteError) ?? LnoteError(.io, "\(error)")
                        e.message += "; the import could not take back: " + left.joined(separator: ", ")
                        throw e
                    }
                    // What was written and taken back is in the log: say so (not "nothing changed").
                    var undone: [String] = []
                    let erased = added.reduce(0) { $0 + $1.1.count }
                    if erased > 0 { undone.append("\(erased) strokes erased") }
                    if !grownFrom.isEmpty { undone.append("\(grownFrom.count) canvases set back") }
                    if !order.isEmpty { undone.append("\(order.count) new pages deleted") }
                    guard !undone.isEmpty else { throw error }
                    var e = (error as? LnoteError) ?? LnoteError(.io, "\(error)")
                    e.message += "; what the import wrote was taken back (" + undone.joined(separator: ", ") + ")"
                    throw e
                }
            }
        }
        let skipped = ink.skipped.sorted { $0.key < $1.key }
        if args.flag("json") {
            var pageObjects: [CanonicalJSON] = []
            for p in placed {
                let canvas: [String: CanonicalJSON] = ["width": .int(Int64(p.canvas.width)), "height": .int(Int64(p.canvas.height))]
                let points = p.strokes.reduce(0) { $0 + $1.points.count }
                let fields: [String: CanonicalJSON] = [
                    "page": .string(p.pid.description), "created": .bool(p.created), "grown": .bool(p.grown),
                    "canvas": .object(canvas), "strokes": .int(Int64(p.strokes.count)), "points": .int(Int64(points)),
                ]
                pageObjects.append(.object(fields))
            }
            var skippedObject: [String: CanonicalJSON] = [:]
            for (k, v) in skipped { skippedObject[k] = .int(Int64(v)) }
            let summary: [String: CanonicalJSON] = [
                "pages": .array(pageObjects), "strokes": .int(Int64(ink.strokeCount)), "points": .int(Int64(ink.pointCount)),
                "skipped": .object(skippedObject), "elements": .array(ids.map { .string($0.description) }),
            ]
            console.raw(CanonicalJSON.object(summary).text(.pretty))
        } else {
            for id in ids { console.out(id.description) }
        }
        for p in placed {
            let size = "\(Units.pt(p.canvas.width)) x \(Units.pt(p.canvas.height)) pt"
            if p.created { console.err("lnote import: added page \(p.pid) (\(size)) with \(p.strokes.count) stroke\(p.strokes.count == 1 ? "" : "s")") }
            if p.grown { console.err("lnote import: page \(p.pid) grew to \(size) to fit the ink") }
            if p.inkBeforeOrigin { console.err("lnote import: note: ink on page \(p.pid) reaches past its left or top edge (a point nearer to the edge than its radius): it is imported, and that part lies off the page") }
        }
        if !skipped.isEmpty {
            console.err("lnote import: skipped " + skipped.map { "\($0.value) \($0.key)\($0.value == 1 ? "" : "s")" }.joined(separator: ", "))
        }
        if ids.isEmpty { console.err("lnote import: the file holds no strokes; nothing added") }
        return Exit.ok
    }

    /// `lnote export FOLDER DOC --inkml FILE`: every live page of the document as InkML,
    /// replaced durably.
    static func exportInkML(_ args: Arguments, console: Console, to file: String) async throws -> Int32 {
        try args.expect(2, "FOLDER DOC (with --inkml FILE)")
        let (pages, strokes) = try await withNotebook(args.positionals[0], console: console) { nb in
            try await withDocument(nb, args.positionals[1], console: console) { d -> ([InkMLWriter.Page], Int) in
                var pages: [InkMLWriter.Page] = []
                var n = 0
                for info in await d.pageList {
                    let strokes = try InkMLWriter.visibleStrokes(try await d.elements(info.id))
                    n += strokes.count
                    pages.append(InkMLWriter.Page(canvas: info.canvas, strokes: strokes))
                }
                return (pages, n)
            }
        }
        let text = InkMLWriter.write(pages)
        try OutputFile.replace(file, with: Array(text.utf8))
        console.out("exported \(pages.count) page\(pages.count == 1 ? "" : "s"), \(strokes) stroke\(strokes == 1 ? "" : "s") to \(file)")
        return Exit.ok
    }
}
