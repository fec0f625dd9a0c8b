import Foundation
import LnoteModel
import LnoteStore

extension CommandTable {
    static let watch = Command(
        name: "watch",
        synopsis: "lnote watch FOLDER [DOC] [--json]",
        summary: "Print what changes in a notebook, or in one document, as it happens (from any process)",
        details: """
        Without DOC: documents created, retitled, deleted or restored, and pages added,
        removed, restored, moved or resized, in every document of the folder. With DOC (an id
        or a unique prefix): that document's page changes and, for each page, the elements
        added, erased, partly erased, moved or reordered.
        Each line says where the change came from: local (this process), merge (received by
        sync in this process) or otherProcess (an app, `lnote serve`, `lnote sync`, another
        command). The folder stays usable by every other command meanwhile; other processes'
        appends are noticed through inotify (polling where it is missing).
        One line per change: a UTC time, the kind, the origin, the document/page, then the
        title, canvas or element ids it names. `missed N` means the output fell behind and
        N changes were skipped; `reloaded` that a log was rewritten (read the state again).
        --json   one JSON object per line instead, keys sorted: kind, origin, document, page,
                 elements, operations, title, canvas {width, height} (tenths of a point),
                 missed (absent keys do not apply)
        Stops on SIGINT or SIGTERM.
        """,
        flags: ["json"],
        run: { args, console in
            try args.expect(1, max: 2, "FOLDER [DOC]")
            let folder = args.positionals[0]
            let json = args.flag("json")
            try requireNotebook(folder)
            let signals = Signals.trap()
            let nb = try await Notebook.open(at: folder)
            do {
                let stream: ChangeStream
                var document: Document?
                if args.positionals.count == 2 {
                    let id = try await Resolve.document(args.positionals[1], in: nb)
                    let d = try await nb.openDocument(id)
                    // Every page loaded, so that its changes are told element by element.
                    for p in await d.allPageIDs { _ = try? await d.openPage(p) }
                    stream = await d.changes
                    document = d
                    console.err("lnote watch: watching document \(id) in \(nb.path); Ctrl-C stops")
                } else {
                    stream = await nb.changes
                    console.err("lnote watch: watching \(nb.path); Ctrl-C stops")
                }
                let printing = Task {
                    for await change in stream {
                        // JSON goes out as JSON (its encoder escapes what JSON must; `out`'s escapes
                        // would not be JSON); the text form is escaped like every line.
                        if json { console.raw(WatchLine.json(change) + "\n") } else { console.out(WatchLine.text(change)) }
                        // A line that could not be written (a full disk): watching on would drop
                        // every later one unseen, so the watch stops and says why (exit 1).
                        if StandardOutput.shared.failure != nil {
                            StandardOutput.shared.noteStoppedByFailure()
                            signals.interrupt()
                            return
                        }
                        if let d = document, change.kind == .pageAdded || change.kind == .pageChanged
                            || change.kind == .reloaded, let p = change.page {
                            _ = try? await d.openPage(p)
                        }
                    }
                }
                let signal = await signals.wait()
                printing.cancel()
                _ = await printing.value
                try await nb.close()
                guard signal != 0 else { return Exit.failure }  // output lost: LnoteCLI.run says so
                console.err("lnote watch: stopped (\(signal == SIGINT ? "SIGINT" : "SIGTERM"))")
                return Exit.ok
            } catch {
                try? await nb.close()
                throw error
            }
        })
}

/// How `lnote watch` prints a change.
enum WatchLine {
    struct JSONLine: Encodable {
        struct Canvas: Encodable {
            var width: Int32
            var height: Int32
        }
        var kind: String
        var origin: String?
        var document: String?
        var page: String?
        var elements: [String]?
        var operations: [String]?
        var title: String?
        var canvas: Canvas?
        var missed: Int?
    }

    static func json(_ c: Change) -> String {
        let line = JSONLine(kind: c.kind.rawValue, origin: c.origin?.rawValue, document: c.document?.description,
                            page: c.page?.description,
                            elements: c.elements.isEmpty ? nil : c.elements.map(\.description),
                            operations: c.operations.isEmpty ? nil : c.operations.map(\.description),
                            title: c.title, canvas: c.canvas.map { JSONLine.Canvas(width: $0.width, height: $0.height) },
                            missed: c.kind == .missed ? c.missed : nil)
        let e = JSONEncoder()
        e.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? String(decoding: e.encode(line), as: UTF8.self)) ?? "{\"kind\":\"\(c.kind.rawValue)\"}"
    }

    static func text(_ c: Change) -> String {
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.timeZone = TimeZone(identifier: "UTC")
        f.dateFormat = "HH:mm:ss.SSS"
        return f.string(from: Date()) + " " + c.description
    }
}
