import Foundation
import LnoteModel
import LnoteRender
import LnoteStore

// Page editing commands. Each appends operations to the page's log through the library
// (never rewriting snapshots itself); closing the document then saves.

extension CommandTable {
    static let importStrokes = Command(
        name: "import",
        synopsis: "lnote import FOLDER DOC [PAGE] FILE [--format jsonl|inkml|xopp] [--tool pen|pencil|marker|highlighter] [--color #rrggbb[aa]] [--width PT] [--json]",
        summary: "Add strokes from JSON lines, InkML or Xournal++ (.xopp); prints the new element ids",
        details: """
        The format comes from FILE's name (.jsonl or - for standard input: JSON lines;
        .inkml or .xml: W3C InkML; .xopp: Xournal++) or --format. The whole input is read and
        checked first: a malformed one imports nothing and the error names the file, the line
        or byte offset (Protocol/import-jsonl.md, Protocol/interchange.md).
        JSON lines: {"points": [[x, y, t_ms, pressure], ...]}, x and y in points (y down); a
        line's "page" key sends it to the page at that position (1, 2, ...; pages are added
        at the end up to it) or to the page with that id; lines without it go to PAGE.
        InkML and .xopp: the file's first page goes to PAGE, each further page to a new page
        added at the end. Without PAGE, a new page at the end takes what would go to PAGE.
        New pages have the size the file gives (.xopp, InkML's canvas annotation), else the
        size of the document's last page. A page whose ink reaches past its right or bottom
        edge grows to fit it (said on stderr); ink past its left or top edge (a point
        nearer to it than its radius) is imported and reported, as no canvas grows that way.
        Text, images and eraser strokes of a .xopp file are skipped and counted.
        --tool    pen (default), pencil, marker or highlighter
        --color   #rrggbb or #rrggbbaa (default #000000)
        --width   ink width in points, 0.1 to 10000 (default 2)
                  (InkML brushes and .xopp strokes say their own ink; these fill what they omit)
        --json    a summary instead of the ids: "pages" (each with "page", "created",
                  "canvas", "grown", "strokes", "points"), "strokes", "points",
                  "skipped" (by kind), "elements" (the new ids)
        An element id names an element within its page (each page has its own log): the ids
        printed for strokes sent to two pages may be equal.
        """,
        options: ["tool", "color", "width", "format"],
        flags: ["json"],
        run: { args, console in try await runImport(args, console: console) })

    static let addImage = Command(
        name: "add-image",
        synopsis: "lnote add-image FOLDER DOC PAGE FILE --x PT --y PT --width PT --height PT [--rotation DEG]",
        summary: "Place an image on a page; prints its element id",
        details: """
        The file's bytes are stored durably in the package's assets/ (named by their SHA-256)
        before the operation that places them is written. The frame is in points (y down);
        --rotation is clockwise in degrees (default 0). The bytes are stored as given: any
        format the app can show. lnote's own pictures (thumbnails, PDF and SVG export) draw
        PNG and JPEG images and a placeholder box for anything else; add-image says so on
        standard error when that will be the case (and why: the format, damage, a size
        beyond the limits).
        """,
        options: ["x", "y", "width", "height", "rotation"],
        run: { args, console in
            try args.expect(4, "FOLDER DOC PAGE FILE")
            func required(_ n: String, positive: Bool) throws -> Int32 {
                guard let v = positive ? try Units.positive(args, n) : try Units.length(args, n) else {
                    throw Arguments.UsageError(message: "--\(n) is required")
                }
                return v
            }
            let frame = QRect(x: try required("x", positive: false), y: try required("y", positive: false),
                              width: try required("width", positive: true), height: try required("height", positive: true))
            let degrees = try args.double("rotation") ?? 0
            guard abs(degrees) <= 360 else { throw Arguments.UsageError(message: "--rotation must be within ±360 degrees") }
            let rotation = Int32((degrees * 100).rounded())
            let file = args.positionals[3]
            guard let data = FileManager.default.contents(atPath: file) else {
                throw LnoteError(.notFound, "cannot read image file", path: file)
            }
            guard !data.isEmpty else { throw LnoteError(.invalidArgument, "image file is empty", path: file) }
            let id = try await withNotebook(args.positionals[0], console: console) { nb in
                try await withDocument(nb, args.positionals[1], console: console) { d in
                    let pid = try await Resolve.page(args.positionals[2], in: d)
                    return try await d.addImage([UInt8](data), frame: frame, rotation: rotation, to: pid)
                }
            }
            console.out(id.description)
            // Stored as given (any format the app can show); said when lnote's own pictures
            // cannot show it, so that a placeholder box in a thumbnail is no surprise.
            if let why = DrawableImage.problem(with: [UInt8](data)) {
                console.err("lnote add-image: note: thumbnails, PDF and SVG export draw a placeholder box for \(file): \(why) "
                            + "(lnote draws PNG and JPEG images; the bytes are stored as given)")
            }
            return Exit.ok
        })

    static let erase = Command(
        name: "erase",
        synopsis: "lnote erase FOLDER DOC PAGE ID...",
        summary: "Erase whole elements",
        details: """
        Each ID is an element id (replicahex.counter, as lnote show prints), a unique prefix
        of one on the page, or .counter when only one replica made an element with that counter.
        """,
        run: { args, console in
            guard args.positionals.count >= 4 else { throw Arguments.UsageError(message: "expected FOLDER DOC PAGE ID...") }
            try await onElements(args, console: console) { d, pid, ids in try await d.erase(ids, on: pid) }
            return Exit.ok
        })

    static let eraseRange = Command(
        name: "erase-range",
        synopsis: "lnote erase-range FOLDER DOC PAGE ID FROM TO",
        summary: "Erase points FROM (included) to TO (excluded) of a stroke, like a pixel eraser",
        details: "Point indices count from 0 in the stroke as drawn (lnote show --points lists them).",
        run: { args, console in
            try args.expect(6, "FOLDER DOC PAGE ID FROM TO")
            guard let from = UInt32(args.positionals[4]), let to = UInt32(args.positionals[5]) else {
                throw Arguments.UsageError(message: "FROM and TO must be point indices (whole numbers from 0)")
            }
            guard from < to else { throw Arguments.UsageError(message: "FROM must be less than TO") }
            try await withNotebook(args.positionals[0], console: console) { nb in
                try await withDocument(nb, args.positionals[1], console: console) { d in
                    let pid = try await Resolve.page(args.positionals[2], in: d)
                    let e = try await Resolve.elements([args.positionals[3]], on: pid, in: d)[0]
                    guard case .stroke(let s) = e.content else {
                        throw LnoteError(.invalidArgument, "element \(e.id) is an image; only strokes have points")
                    }
                    guard Int(to) <= s.points.count else {
                        throw LnoteError(.invalidArgument, "range [\(from), \(to)) is outside stroke \(e.id) of \(s.points.count) points")
                    }
                    try await d.eraseRange(e.id, [PointRange(from, to)], on: pid)
                }
            }
            return Exit.ok
        })

    static let move = Command(
        name: "move",
        synopsis: "lnote move FOLDER DOC PAGE ID... --dx PT --dy PT",
        summary: "Move elements by (dx, dy) points",
        details: "x grows to the right, y downwards. Either offset may be omitted (0). Write negative values as --dx=-5 or --dx -5.",
        options: ["dx", "dy"],
        run: { args, console in
            guard args.positionals.count >= 4 else { throw Arguments.UsageError(message: "expected FOLDER DOC PAGE ID...") }
            let dx = try Units.length(args, "dx"), dy = try Units.length(args, "dy")
            guard dx != nil || dy != nil else { throw Arguments.UsageError(message: "give --dx PT and/or --dy PT") }
            try await onElements(args, console: console) { d, pid, ids in
                try await d.move(ids, dx: dx ?? 0, dy: dy ?? 0, on: pid)
            }
            return Exit.ok
        })

    static let front = Command(
        name: "front",
        synopsis: "lnote front FOLDER DOC PAGE ID...",
        summary: "Bring elements to the front (keeping their order among themselves)",
        run: { args, console in
            guard args.positionals.count >= 4 else { throw Arguments.UsageError(message: "expected FOLDER DOC PAGE ID...") }
            try await onElements(args, console: console) { d, pid, ids in try await d.bringToFront(ids, on: pid) }
            return Exit.ok
        })

    static let back = Command(
        name: "back",
        synopsis: "lnote back FOLDER DOC PAGE ID...",
        summary: "Send elements to the back (keeping their order among themselves)",
        run: { args, console in
            guard args.positionals.count >= 4 else { throw Arguments.UsageError(message: "expected FOLDER DOC PAGE ID...") }
            try await onElements(args, console: console) { d, pid, ids in try await d.sendToBack(ids, on: pid) }
            return Exit.ok
        })

    /// FOLDER DOC PAGE ID...: resolves everything, then runs `edit` with the element ids.
    static func onElements(_ args: Arguments, console: Console,
                           _ edit: (Document, PageID, [ElementID]) async throws -> Void) async throws {
        try await withNotebook(args.positionals[0], console: console) { nb in
            try await withDocument(nb, args.positionals[1], console: console) { d in
                let pid = try await Resolve.page(args.positionals[2], in: d)
                let elements = try await Resolve.elements(Array(args.positionals[3...]), on: pid, in: d)
                try await edit(d, pid, elements.map(\.id))
            }
        }
    }
}
