import Foundation
import LnoteExport
import LnoteModel
import LnoteRender
import LnoteStore

extension CommandTable {
    static let export = Command(
        name: "export",
        synopsis: "lnote export FOLDER --sqlite FILE [--include-deleted] [--json]  |  lnote export FOLDER DOC (--pdf FILE | --svg DIR | --inkml FILE) [--json]",
        summary: "Copy a notebook into one SQLite file, or a document's pages into PDF, SVG or InkML",
        details: """
        --sqlite FILE: the folder stays the source of truth: the file is a verified copy for
        queries and tools. It is written beside FILE under a temporary name in one transaction,
        read back and compared with the notebook (every row, every stroke's points, every
        asset's bytes), and only then renamed to FILE, replacing it. When anything fails, FILE
        is left as it was. The file is self-contained (no -wal beside it). Format:
        Protocol/sqlite-export.md.
        Points are 32-bit floats; a stroke with a value they cannot hold exactly (a coordinate
        beyond 2^20 pt, a time beyond 2^24 ms) also gets its exact integers (strokes.exact),
        which makes the file format 2, and a note on stderr says how many.
        --include-deleted   also export deleted documents and pages (marked deleted = 1)
        --json   {"file", "format", "bytes", "documents", "pages", "strokes", "points",
                 "images", "assets", "exact_strokes", "source_replica"}

        --pdf FILE: one PDF page per live page of DOC, in document order, each the size of
        its canvas in points; strokes are vector paths (width following pressure), images
        embedded with their pixels and rotation. Drawn by cairo, as `lnote thumbnail` draws.
        --svg DIR: one SVG file per live page, DIR/NNN-<page-id>.svg (NNN the page's
        position from 001, at least three digits), width and height in pt, viewBox in
        points. DIR is created if missing; other files in it are left alone.
        Each file is written durably (temporary file, fsync, rename, fsync of the folder).
        A missing or undecodable image asset is drawn as a gray box and counted.
        --json   {"document", "format" ("pdf" or "svg"), "files": [{"file", "page",
                 "bytes"}], "pages", "images", "placeholders"}

        --inkml FILE: one document's live pages as W3C InkML (Protocol/interchange.md).
        """,
        options: ["sqlite", "pdf", "svg", "inkml"],
        flags: ["include-deleted", "json"],
        run: { args, console in
            let forms = ["sqlite", "pdf", "svg", "inkml"].filter { args.option($0) != nil }
            guard forms.count == 1 else {
                throw Arguments.UsageError(message: forms.isEmpty ? "expected --sqlite FILE, --pdf FILE, --svg DIR or --inkml FILE"
                                           : "give one of --sqlite, --pdf, --svg and --inkml")
            }
            switch forms[0] {
            case "sqlite": return try await exportSQLite(args, console)
            // lnote export FOLDER DOC --inkml FILE: InterchangeCommands.swift.
            case "inkml": return try await exportInkML(args, console: console, to: args.option("inkml")!)
            default: return try await exportPages(args, console, pdf: forms[0] == "pdf")
            }
        })

    /// `export FOLDER --sqlite FILE`.
    static func exportSQLite(_ args: Arguments, _ console: Console) async throws -> Int32 {
        try args.expect(1, "FOLDER")
        let file = args.option("sqlite")!
        try requireNotebook(args.positionals[0])
        var options = SQLiteExport.Options()
        options.includeDeleted = args.flag("include-deleted")
        let summary = try await SQLiteExport.export(folder: args.positionals[0], to: file, options: options)
        if let change = summary.replicaChange {
            console.err("lnote: note: this folder was copied or moved: \(change)")
        }
        if summary.counts.exactStrokes > 0 {
            console.err("lnote: note: \(summary.counts.exactStrokes) strokes hold values 32-bit floats cannot (beyond 2^20 pt or 2^24 ms): "
                        + "their exact samples are in strokes.exact, and the file is format \(summary.formatVersion) (readers of format 1 refuse it)")
        }
        if args.flag("json") {
            let c = summary.counts
            console.raw(CanonicalJSON.object([
                "file": .string(file), "format": .int(summary.formatVersion), "bytes": .int(Int64(summary.fileBytes)),
                "documents": .int(Int64(c.documents)), "pages": .int(Int64(c.pages)), "strokes": .int(Int64(c.strokes)),
                "points": .int(Int64(c.points)), "images": .int(Int64(c.images)), "assets": .int(Int64(c.assets)),
                "exact_strokes": .int(Int64(c.exactStrokes)), "source_replica": .string(summary.sourceReplica.description),
            ]).text(.pretty))
            return Exit.ok
        }
        console.out("exported \(summary) to \(file)")
        return Exit.ok
    }

    /// `export FOLDER DOC --pdf FILE` and `export FOLDER DOC --svg DIR`.
    static func exportPages(_ args: Arguments, _ console: Console, pdf: Bool) async throws -> Int32 {
        try args.expect(2, "FOLDER DOC")
        if args.flag("include-deleted") { throw Arguments.UsageError(message: "--include-deleted goes with --sqlite only") }
        let target = args.option(pdf ? "pdf" : "svg")!
        let (docID, pages) = try await withNotebook(args.positionals[0], console: console) { nb in
            try await withDocument(nb, args.positionals[1], console: console) { d in
                var out: [RenderablePage] = []
                for info in await d.pageList { out.append(try await d.renderable(info.id)) }
                return (d.id, out)
            }
        }
        guard !pages.isEmpty else { throw LnoteError(.invalidState, "document \(docID) has no live page to export") }
        var assets: [AssetID: [UInt8]] = [:]
        for p in pages { assets.merge(p.assets) { a, _ in a } }
        let lookup: AssetLookup = { assets[$0] }
        var files: [(file: String, page: PageID, bytes: Int)] = []
        var images = PageRenderer.ImageCounts()
        func written(_ path: String, _ bytes: [UInt8], _ page: PageID) throws {
            do { try OutputFile.replace(path, with: bytes) } catch var e as LnoteError {
                e.message = "cannot write \(path): \(e.message)"
                throw e
            }
            files.append((path, page, bytes.count))
        }
        if pdf {
            // The document's last change as the PDF's date: the same notebook gives the same bytes.
            let modified = pages.map(\.state.modified).max() ?? 0
            let (bytes, counts) = try PageRenderer.pdf(pages.map { PageRenderer.Page(state: $0.state, canvas: $0.canvas) },
                                                       assets: lookup, creationDate: pdfDate(ms: modified))
            images = counts
            try written(target, bytes, pages[0].state.page)
        } else {
            try OutputFile.makeDirectory(target)
            let digits = max(3, String(pages.count).count)
            for (i, p) in pages.enumerated() {
                let (bytes, counts) = try PageRenderer.svg(PageRenderer.Page(state: p.state, canvas: p.canvas), assets: lookup)
                images.drawn += counts.drawn
                images.placeholders += counts.placeholders
                let n = String(i + 1)
                let name = String(repeating: "0", count: digits - n.count) + n + "-\(p.state.page).svg"
                try written((target as NSString).appendingPathComponent(name), bytes, p.state.page)
            }
        }
        if images.placeholders > 0 {
            console.err("lnote: note: \(images.placeholders) images drawn as gray boxes (asset missing or not a PNG or JPEG that decodes)")
        }
        if args.flag("json") {
            console.raw(CanonicalJSON.object([
                "document": .string(docID.description), "format": .string(pdf ? "pdf" : "svg"),
                "files": .array(files.map { .object(["file": .string($0.file), "page": .string($0.page.description),
                                                     "bytes": .int(Int64($0.bytes))]) }),
                "pages": .int(Int64(pages.count)), "images": .int(Int64(images.drawn)),
                "placeholders": .int(Int64(images.placeholders)),
            ]).text(.pretty))
            return Exit.ok
        }
        if pdf {
            console.out("exported \(pages.count) pages of document \(docID) to \(target) (\(files[0].bytes) bytes)")
        } else {
            console.out("exported \(pages.count) pages of document \(docID) to \(target)/ (\(files.count) SVG files)")
        }
        return Exit.ok
    }

    /// A PDF date (`D:YYYYMMDDHHmmSSZ`, UTC) for `ms` since 1970.
    static func pdfDate(ms: Int64) -> String {
        var t = time_t(ms / 1000)
        var parts = tm()
        gmtime_r(&t, &parts)
        return String(format: "D:%04d%02d%02d%02d%02d%02dZ", Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1, Int(parts.tm_mday),
                      Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec))
    }
}
