import Foundation
import LnoteModel
import LnoteReplication
import LnoteStore

// Taking edits back: undo and redo of this folder's own steps, bringing back erased elements
// and points, and making a page as it was (merge-semantics.md [MERGE-70] – [MERGE-76]). Each
// writes ordinary operations through the library, merged like any edit.

extension CommandTable {
    static let undo = Command(
        name: "undo",
        synopsis: "lnote undo FOLDER DOC [PAGE] [--json]",
        summary: "Take back this folder's latest edit of a document (or of one page)",
        details: undoDetails(undoing: true),
        flags: ["json"],
        run: { args, console in try await unwindCommand(args, console: console, undoing: true) })

    static let redo = Command(
        name: "redo",
        synopsis: "lnote redo FOLDER DOC [PAGE] [--json]",
        summary: "Do again the edit the latest undo took back (of a document, or of one page)",
        details: undoDetails(undoing: false),
        flags: ["json"],
        run: { args, console in try await unwindCommand(args, console: console, undoing: false) })

    static func undoDetails(undoing: Bool) -> String {
        let (verb, done, key) = undoing ? ("undo", "undid", "undone") : ("redo", "redid", "redone")
        let what = undoing
            ? """
              Undo is this folder's own: its steps are the edits made through this folder (its
              replica), one step per command (an import of several strokes is one step), taken
              back latest first. Edits others made and synced here are never taken back; a step
              they have since overwritten entirely (erased what it added, moved what it moved) is
              skipped, and one they overwrote in part is taken back for the rest. Undo writes new
              operations (erases, restores, moves), synced like any edit; a new edit clears what
              `lnote redo` could do again.
              """
            : """
              Redo does again what `lnote undo` took back, latest first, for what of it others have
              not overwritten since. A new edit made after the undo clears what can be redone.
              """
        return what + """

            With PAGE: the latest step that changed that page (and whatever else that step
            changed); steps of other pages stay where they are.
            Prints what it did, e.g. `\(done) "erase" on page #2: restored 1 element`.
            Nothing to \(verb) is not an error: it prints `nothing to \(verb)` and exits 0 (a
            script can tell from --json).
            --json   {"\(key)": true, "label", "wallTime", "operations": [{page, id, kind, elements,
                     points}], "canUndo", "canRedo"} (kind: what the new operation did; canUndo
                     and canRedo are for the whole document afterwards), or {"\(key)": false,
                     "canUndo", "canRedo"} when there was nothing to \(verb)
            """
    }

    static let revert = Command(
        name: "revert",
        synopsis: "lnote revert FOLDER DOC PAGE --to WHEN [--json]",
        summary: "Make a page as it was at a moment of its history (new operations: nothing is lost)",
        details: """
        Writes the erases, restores, range erases and restores, moves and reorders that make
        the page's elements what they were at WHEN, as one step of this folder (`lnote undo`
        takes it back). Elements whose content this folder no longer holds stay as they are.
        WHEN is a moment as `lnote show --at` takes it: a step's id from `lnote history`
        (a1.17: as that step left it), a clock ({a1:17, b2:3}), or a time
        (2026-12-02T10:00:00Z, 2026-12-02 for the end of the day before, @MS).
        Prints how many operations it wrote, by kind, or that the page is already as it was.
        --json   {"page", "to", "operations": [{id, kind, elements, points}]}
        """,
        options: ["to"],
        flags: ["json"],
        run: { args, console in
            try args.expect(3, "FOLDER DOC PAGE")
            guard let text = args.option("to") else {
                throw Arguments.UsageError(message: "--to WHEN is required: \(HistoryPoint.forms)")
            }
            guard let point = HistoryPoint(parsing: text) else {
                throw CLIError("--to \"\(text)\" is not a moment: " + (HistoryPoint.refusal(text) ?? "give \(HistoryPoint.forms)"),
                           code: Exit.usage)
            }
            let (pid, label, ops) = try await withNotebook(args.positionals[0], console: console) { nb in
                try await withDocument(nb, args.positionals[1], console: console) { d in
                    let pid = try await Resolve.page(args.positionals[2], in: d)
                    let ops = try await d.revert(page: pid, to: point)
                    return (pid, await pageLabel(pid, in: d), ops)
                }
            }
            if args.flag("json") {
                console.raw(CanonicalJSON.object([
                    "page": .string(pid.description),
                    "to": .string(point.description),
                    "operations": .array(ops.map { op in Effect(op.body).json(id: op.id, page: nil) }),
                ]).text(.pretty))
                return Exit.ok
            }
            if ops.isEmpty {
                console.out("page \(label) is already as it was at \(momentText(point)): nothing written")
            } else {
                console.out("wrote \(ops.count) operation\(ops.count == 1 ? "" : "s") on page \(label): "
                            + Effect.summary(ops.map { Effect($0.body) }))
            }
            return Exit.ok
        })

    static let restoreElement = Command(
        name: "restore-element",
        synopsis: "lnote restore-element FOLDER DOC PAGE ID [--range FROM-TO ...] [--json]",
        summary: "Bring back an erased element, or erased points of a stroke",
        details: """
        Without --range: brings back an element erased whole, as it was erased (with every
        edit made to it since), at its place ([MERGE-70]). It takes back the erases this
        folder has seen: an erase made elsewhere at the same time still wins.
        With --range: brings back erased points of a live stroke ([MERGE-71]); FROM is
        included, TO excluded, counted from 0 in the stroke as drawn (`lnote show --points`),
        as `lnote erase-range` takes them. --range may be given several times.
        ID is an element id as `lnote show` prints it (00000000000000a1.17), a unique prefix of
        one, or .counter; erased elements are named like live ones (`lnote show PAGE --json`
        lists them under tombstones).
        Fails (exit 1) for an element that is not erased, an id the page never held, ranges
        with no erased point, and an element whose content this folder no longer holds (a page
        installed from a checkpoint: a folder that holds it can restore it).
        --json   {"page", "element", "restored": "element" | "points", "ranges": [[from, to]],
                 "points"}
        """,
        options: ["range"],
        flags: ["json"],
        run: { args, console in
            try args.expect(4, "FOLDER DOC PAGE ID")
            let ranges = try (args.options["range"] ?? []).map(parseRange)
            let (pid, label, id, restored) = try await withNotebook(args.positionals[0], console: console) { nb in
                try await withDocument(nb, args.positionals[1], console: console) { d in
                    let pid = try await Resolve.page(args.positionals[2], in: d)
                    let state = try await d.pageState(pid)
                    let erased = state.tombstones.filter(\.isErased).map(\.id)
                    let name = args.positionals[3]
                    let candidates = state.elements.map(\.id) + erased
                    let id = try Resolve.element(name, among: candidates, id: { $0 }, on: pid)
                    var restored: [PointRange] = []
                    if ranges.isEmpty {
                        // The library refuses a live element, naming it ("is not erased").
                        try await d.restore([id], on: pid)
                    } else {
                        let asked = ranges.normalizedUnion()
                        if let live = state.elements.first(where: { $0.id == id }) {
                            restored = live.erased.subtracting(live.erased.subtracting(asked))
                            if restored.isEmpty, case .stroke(let s) = live.content,
                               asked.allSatisfy({ Int($0.to) <= s.pointCount }) {
                                let shown = asked.map(\.description).joined(separator: " ")
                                throw LnoteError(.invalidArgument, "points \(shown) of \(id) are not erased: nothing to restore"
                                                 + (live.erased.isEmpty ? "" : " (erased: \(live.erased.map(\.description).joined(separator: " ")))"))
                            }
                        }
                        // An element erased whole, an image, points outside the stroke: the library says.
                        try await d.restoreRange(id, asked, on: pid)
                    }
                    return (pid, await pageLabel(pid, in: d), id, restored)
                }
            }
            let points = restored.reduce(0) { $0 + $1.count }
            if args.flag("json") {
                console.raw(CanonicalJSON.object([
                    "page": .string(pid.description),
                    "element": .string(id.description),
                    "restored": .string(ranges.isEmpty ? "element" : "points"),
                    "ranges": .array(restored.map { .array([.int(Int64($0.from)), .int(Int64($0.to))]) }),
                    "points": .int(Int64(points)),
                ]).text(.pretty))
                return Exit.ok
            }
            if ranges.isEmpty {
                console.out("restored element \(id) on page \(label)")
            } else {
                console.out("restored \(points) point\(points == 1 ? "" : "s") of \(id) on page \(label): "
                            + restored.map(\.description).joined(separator: " "))
            }
            return Exit.ok
        })

    /// `FROM-TO` (TO excluded) as a point range; a bad form is a usage error.
    static func parseRange(_ text: String) throws -> PointRange {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 2, let from = UInt32(parts[0]), let to = UInt32(parts[1]) else {
            throw Arguments.UsageError(message: "--range \"\(text)\" must be FROM-TO, point indices from 0 (TO excluded), e.g. 2-5")
        }
        guard from < to else { throw Arguments.UsageError(message: "--range \"\(text)\": FROM must be less than TO") }
        return PointRange(from, to)
    }

    /// `#N` for a live page, its id otherwise.
    static func pageLabel(_ pid: PageID, in d: Document) async -> String {
        (await d.pageList).firstIndex { $0.id == pid }.map { "#\($0 + 1)" } ?? pid.description
    }

    /// undo and redo: FOLDER DOC [PAGE] [--json].
    static func unwindCommand(_ args: Arguments, console: Console, undoing: Bool) async throws -> Int32 {
        try args.expect(2, max: 3, "FOLDER DOC [PAGE]")
        let verb = undoing ? "undo" : "redo"
        let (step, labels, page, canUndo, canRedo) = try await withNotebook(args.positionals[0], console: console) { nb in
            try await withDocument(nb, args.positionals[1], console: console) { d in
                let pid: PageID? = args.positionals.count == 3 ? try await Resolve.page(args.positionals[2], in: d) : nil
                let step: UndoStep?
                switch (undoing, pid) {
                case (true, let p?): step = try await d.undo(page: p)
                case (true, nil): step = try await d.undo()
                case (false, let p?): step = try await d.redo(page: p)
                case (false, nil): step = try await d.redo()
                }
                var labels: [PageID: String] = [:]
                for p in Set((step?.entries.map(\.page) ?? []) + (pid.map { [$0] } ?? [])) { labels[p] = await pageLabel(p, in: d) }
                return (step, labels, pid, try await d.canUndo, try await d.canRedo)
            }
        }
        let key = undoing ? "undone" : "redone"
        if args.flag("json") {
            var o: [String: CanonicalJSON] = [key: .bool(step != nil), "canUndo": .bool(canUndo), "canRedo": .bool(canRedo)]
            if let step {
                o["label"] = .string(step.label)
                o["wallTime"] = .int(step.wallTime)
                o["operations"] = .array(step.entries.map { Effect(done: $0.inverse).json(id: $0.op, page: $0.page) })
            }
            console.raw(CanonicalJSON.object(o).text(.pretty))
            return Exit.ok
        }
        guard let step else {
            console.out("nothing to \(verb)" + (page.map { " on page \(labels[$0] ?? $0.description)" } ?? ""))
            return Exit.ok
        }
        // Per page, in the order the step's operations were made.
        var order: [PageID] = []
        var byPage: [PageID: [Effect]] = [:]
        for e in step.entries {
            if byPage[e.page] == nil { order.append(e.page) }
            byPage[e.page, default: []].append(Effect(done: e.inverse))
        }
        let parts = order.map { p in "on page \(labels[p] ?? p.description): " + Effect.summary(byPage[p]!) }
        console.out("\(undoing ? "undid" : "redid") \"\(step.label)\" " + parts.joined(separator: "; "))
        return Exit.ok
    }

    /// What one page operation did: its kind, the elements it names, and how many points
    /// (for range erases and restores).
    struct Effect {
        var kind: String
        var elements: [ElementID]
        var points: Int

        init(_ body: Op.Body) {
            kind = body.name
            points = 0
            switch body {
            case .erase(let ids), .restore(let ids): elements = ids
            case .eraseRange(let e, let r), .restoreRange(let e, let r):
                elements = [e]
                points = r.normalizedUnion().reduce(0) { $0 + $1.count }
            case .move(let ts): elements = ts.map(\.element)
            case .reorder(let zs): elements = zs.map(\.element)
            case .add(let content, _):
                elements = []
                if case .stroke(let s) = content { points = s.pointCount }
            default: elements = []
            }
        }

        /// What an undo or redo did, from what takes it back (`UndoEntry.inverse`): the
        /// opposite of an erase is a restore, of a range erase a range restore; a move (or
        /// reorder) is taken back by a move (reorder) of the same elements.
        init(done inverse: Op.Body) {
            switch inverse {
            case .erase(let ids): self.init(.restore(ids))
            case .restore(let ids): self.init(.erase(ids))
            case .eraseRange(let e, let r): self.init(.restoreRange(e, r))
            case .restoreRange(let e, let r): self.init(.eraseRange(e, r))
            default: self.init(inverse)
            }
        }

        func json(id: OpID, page: PageID?) -> CanonicalJSON {
            var o: [String: CanonicalJSON] = [
                "id": .string(id.description),
                "kind": .string(kind),
                "elements": .array(elements.map { .string($0.description) }),
                "points": .int(Int64(points)),
            ]
            if let page { o["page"] = .string(page.description) }
            return .object(o)
        }

        /// `restored 1 element, moved 2 elements`: effects of one kind together, kinds in
        /// the order they first come.
        static func summary(_ effects: [Effect]) -> String {
            var kinds: [String] = []
            var elements: [String: [ElementID]] = [:]
            var points: [String: Int] = [:]
            for e in effects {
                if !kinds.contains(e.kind) { kinds.append(e.kind) }
                for id in e.elements where !(elements[e.kind]?.contains(id) ?? false) { elements[e.kind, default: []].append(id) }
                points[e.kind, default: 0] += e.points
            }
            func count(_ n: Int) -> String { n == 1 ? "1 element" : "\(n) elements" }
            return kinds.map { k in
                let ids = elements[k] ?? [], n = ids.count, p = points[k] ?? 0
                let pts = "\(p) point\(p == 1 ? "" : "s") of " + (n == 1 ? ids[0].description : "\(n) strokes")
                switch k {
                case "erase": return "erased \(count(n))"
                case "restore": return "restored \(count(n))"
                case "eraseRange": return "erased \(pts)"
                case "restoreRange": return "restored \(pts)"
                case "move": return "moved \(count(n))"
                case "reorder": return "reordered \(count(n))"
                default: return "\(k) \(count(n))"
                }
            }.joined(separator: ", ")
        }
    }
}
