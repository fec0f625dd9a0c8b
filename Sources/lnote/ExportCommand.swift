import Foundation
import LnoteExport
import LnoteModel

extension CommandTable {
    static let export = Command(
        name: "export",
        synopsis: "lnote export FOLDER --sqlite FILE [--include-deleted] [--json]",
        summary: "Copy a notebook into one SQLite file (one BLOB per stroke); prints what it holds",
        details: """
        The folder stays the source of truth: the file is a verified copy for queries and tools.
        It is written beside FILE under a temporary name in one transaction, read back and
        compared with the notebook (every row, every stroke's points, every asset's bytes), and
        only then renamed to FILE, replacing it. When anything fails, FILE is left as it was.
        The file is self-contained (no -wal beside it). Format: Protocol/sqlite-export.md.
        lnote export FOLDER DOC --inkml FILE writes one document's live pages as W3C InkML
        (Protocol/interchange.md).
        Points are 32-bit floats; a stroke with a value they cannot hold exactly (a coordinate
        beyond 2^20 pt, a time beyond 2^24 ms) also gets its exact integers (strokes.exact),
        which makes the file format 2, and a note on stderr says how many.
        --include-deleted   also export deleted documents and pages (marked deleted = 1)
        --json   {"file", "format", "bytes", "documents", "pages", "strokes", "points",
                 "images", "assets", "exact_strokes", "source_replica"}
        """,
        options: ["sqlite", "inkml"],
        flags: ["include-deleted", "json"],
        run: { args, console in
            // lnote export FOLDER DOC --inkml FILE: InterchangeCommands.swift.
            if let inkml = args.option("inkml") { return try await exportInkML(args, console: console, to: inkml) }
            try args.expect(1, "FOLDER")
            guard let file = args.option("sqlite") else { throw Arguments.UsageError(message: "expected --sqlite FILE") }
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
        })
}
