import Foundation
import LnoteModel
import LnoteStore

// A first look at lnote without any input. (To be replaced by the two-machine sync demo.)

extension CommandTable {
    static let demo = Command(
        name: "demo",
        synopsis: "lnote demo [--keep DIR] [--seed N] [--pages N] [--strokes N]",
        summary: "Write a notebook of generated handwriting and show it",
        details: """
        Creates a notebook in a temporary folder (removed afterwards) or in DIR with --keep
        (DIR must not exist or be empty), adds a document with --pages pages (default 3) of
        --strokes generated handwriting strokes each (default 40; the same --seed gives the
        same strokes), then prints the library listing, the document and its first page.
        """,
        options: ["keep", "seed", "pages", "strokes"],
        run: { args, console in
            try args.expect(0, "no positional arguments")
            let seed = UInt64(bitPattern: Int64(try args.int("seed") ?? 1))
            let pageCount = try args.int("pages") ?? 3
            let strokeCount = try args.int("strokes") ?? 40
            guard (1...100).contains(pageCount) else { throw Arguments.UsageError(message: "--pages must be 1 to 100") }
            guard (0...10_000).contains(strokeCount) else { throw Arguments.UsageError(message: "--strokes must be 0 to 10000") }
            let folder: String
            let keep = args.option("keep")
            if let keep {
                folder = keep
                if let entries = try? FileManager.default.contentsOfDirectory(atPath: keep), !entries.isEmpty {
                    throw LnoteError(.alreadyExists, "--keep folder is not empty", path: keep)
                }
            } else {
                folder = NSTemporaryDirectory() + "lnote-demo-\(UUID().uuidString)"
            }
            defer { if keep == nil { try? FileManager.default.removeItem(atPath: folder) } }

            let nb = try await Notebook.open(at: folder, create: true)
            do {
                let d = try await nb.createDocument(title: "Demo notebook", firstPage: nil)
                var generator = HandwritingGenerator(seed: seed)
                for _ in 0..<pageCount {
                    let pid = try await d.addPage()
                    try await d.addStrokes(generator.strokes(strokeCount), to: pid)
                }
                try await d.close()
                console.out("notebook \(nb.path) (replica \(nb.replica))")
                console.out("")
                console.out("$ lnote ls")
                let list = try await nb.list()
                var rows = [["ID", "TITLE", "PAGES", "ELEMENTS", "MODIFIED"]]
                for s in list {
                    rows.append([s.id.description, s.title, "\(s.pageCount)", "\(s.elementCount)", timestamp(s.modified)])
                }
                for line in table(rows) { console.out(line) }
                let again = try await nb.openDocument(d.id)
                console.out("")
                console.out("$ lnote show \(d.id.description.prefix(8))")
                try await printDocument(again, console: console)
                if let first = await again.pageList.first {
                    console.out("")
                    console.out("$ lnote show \(d.id.description.prefix(8)) p1")
                    try await printPage(try await again.pageState(first.id), of: again, console: console, points: false)
                }
                try await again.close()
            } catch {
                try? await nb.close()
                throw error
            }
            try await nb.close()
            console.out("")
            console.out(keep == nil ? "(temporary folder removed; --keep DIR keeps the notebook)" : "kept in \(folder)")
            return Exit.ok
        })
}
