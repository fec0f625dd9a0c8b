import Foundation
import LnoteModel
import LnoteReplication
import LnoteStore

// Looking back: the steps of a log, and the moment a `--at` names (merge-semantics.md §6).

extension CommandTable {
    static let history = Command(
        name: "history",
        synopsis: "lnote history FOLDER DOC [PAGE] [--json]",
        summary: "List the steps of a page (or of the document): when, who, what, and the id to see it with --at",
        details: """
        One line per step, in log order: the author's time (UTC, to the millisecond: as typed
        to --at it names the moment just after that step), the step's id, the device
        that owns the replica when a relay named it, and what it did (strokes added with
        their points, elements erased, moved or brought forward; pages added, moved,
        deleted). Give a step's id to `lnote show FOLDER DOC PAGE --at ID` to see the page
        as that step left it. Steps still waiting for operations they depend on are marked
        "waiting"; they are part of no state yet.
        --json   an array of {id, author, device (when known), wallTime, kind, elements, pages,
                 points, waiting, moment}: moment is the step's clock (its context plus its
                 id), also accepted by --at
        """,
        flags: ["json"],
        run: { args, console in
            try args.expect(2, max: 3, "FOLDER DOC [PAGE]")
            let (steps, devices) = try await withNotebook(args.positionals[0], console: console) { nb in
                let devices = try await nb.deviceNames()
                return try await withDocument(nb, args.positionals[1], console: console) { d in
                    let pid: PageID? = args.positionals.count == 3 ? try await Resolve.page(args.positionals[2], in: d) : nil
                    return (try await d.history(of: pid), devices)
                }
            }
            if args.flag("json") {
                console.raw(CanonicalJSON.array(steps.map { s -> CanonicalJSON in
                    var o: [String: CanonicalJSON] = [
                        "id": .string(s.id.description),
                        "author": .string(s.author.description),
                        "wallTime": .int(s.wallTime),
                        "kind": .string(s.kind),
                        "elements": .array(s.elements.map { .string($0.description) }),
                        "pages": .array(s.pages.map { .string($0.description) }),
                        "points": .int(Int64(s.points)),
                        "waiting": .bool(s.pending),
                        "moment": s.moment.json,
                    ]
                    if let d = devices[s.author] { o["device"] = .string(d) }
                    return .object(o)
                }).text(.pretty))
                return Exit.ok
            }
            if steps.isEmpty { console.out("no steps") }
            let rows = steps.map { s in
                [preciseTimestamp(s.wallTime), s.id.description, devices[s.author] ?? "", stepText(s) + (s.pending ? "  [waiting]" : "")]
            }
            for line in table(rows) { console.out(line.trimmingTrailingSpaces) }
            return Exit.ok
        })

    /// What a step did, in words.
    static func stepText(_ s: HistoryStep) -> String {
        func elements(_ n: Int) -> String { n == 1 ? "1 element" : "\(n) elements" }
        switch s.kind {
        case "add": return s.points > 0 ? "added a stroke of \(s.points) point\(s.points == 1 ? "" : "s")" : "added an image"
        case "erase": return "erased \(elements(s.elements.count))"
        case "eraseRange": return "erased \(s.points) point\(s.points == 1 ? "" : "s") of \(s.elements.first.map(\.description) ?? "?")"
        case "restore": return "restored \(elements(s.elements.count))"
        case "restoreRange": return "restored \(s.points) point\(s.points == 1 ? "" : "s") of \(s.elements.first.map(\.description) ?? "?")"
        case "move": return "moved \(elements(s.elements.count))"
        case "reorder": return "reordered \(elements(s.elements.count))"
        case "createDocument": return "created the document"
        case "setTitle": return "renamed the document"
        case "addPage": return "added page \(s.pages.first.map(\.description) ?? "?")"
        case "deletePage": return "deleted page \(s.pages.first.map(\.description) ?? "?")"
        case "restorePage": return "restored page \(s.pages.first.map(\.description) ?? "?")"
        case "movePage": return "moved page \(s.pages.first.map(\.description) ?? "?")"
        case "setCanvas": return "resized page \(s.pages.first.map(\.description) ?? "?")"
        case "deleteDocument": return "deleted the document"
        case "restoreDocument": return "restored the document"
        default: return s.summary
        }
    }

    /// A moment as people read it: a wall time as a date, the rest as typed.
    static func momentText(_ at: HistoryPoint) -> String {
        if case .wallTime(let ms) = at { return preciseTimestamp(ms) }
        return at.description
    }

    /// The moment `--at` names, or nil without the option. A bad form is a usage error.
    static func moment(_ args: Arguments) throws -> HistoryPoint? {
        guard let text = args.option("at") else { return nil }
        guard let point = HistoryPoint(parsing: text) else {
            throw CLIError("--at \"\(text)\" is not a moment: " + (HistoryPoint.refusal(text) ?? "give \(HistoryPoint.forms)"),
                           code: Exit.usage)
        }
        return point
    }
}
