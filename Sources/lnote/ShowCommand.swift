import Foundation
import LnoteModel
import LnoteReplication
import LnoteStore

extension CommandTable {
    static let show = Command(
        name: "show",
        synopsis: "lnote show FOLDER DOC [PAGE] [--at WHEN] [--json] [--points]",
        summary: "Show a document (pages, element counts, conflicts) or one page (its elements)",
        details: """
        DOC is a document id or a unique prefix of one; PAGE a page id, a unique prefix, or a position pN
        (the N-th live page: p1 is the first; #N works too, quoted in a shell).
        A document: title, dates, live pages in order with their size and element count,
        deleted pages (marked), and how many conflicts it holds.
        A page: its elements bottom to top, each with its id, kind, style, point count,
        visible point ranges, transform and z key.
        --points  also list every point, one per line: x y (pt), pressure (0-1), radius (pt),
                  t (ms from the stroke's start). Note the order: x y p r t, where import
                  files give x y t p.
        --at WHEN show it as it was at a moment of its history, rebuilt from the logs: a step's
                  id from `lnote history` (a1.17: as that step left it), a clock
                  ({a1:17, b2:3}), or a time (2026-12-02T10:00:00Z, 2026-12-02 for the end of
                  the day before, @MS): everything stamped at or before it, with what that had
                  seen. A document takes a time only (each log has its own ids and clocks).
        --json    print the replicated state as canonical JSON: fixed key order, elements in z
                  order, nothing local to this folder (no file offsets, paths or incarnations),
                  so equal states print byte-identical text. For a document: its metadata,
                  every page (deleted ones included) with its state, and its conflicts.
                  Points are included with --points; otherwise each stroke shows pointCount.
                  Units are the stored integers (Protocol/page-snapshot.md), not points:
                  coordinates, radii, widths and canvas sizes in tenths of a point
                  ("width": 20 is 2 pt, a canvas of 5953 is 595.3 pt), pressure in
                  thousandths (500 is 0.5), times in ms; a transform's a b c d in 16.16
                  fixed point (65536 is 1), its tx ty in tenths of a point; each point is
                  [x, y, pressure, radius, t].
        """,
        options: ["at"],
        flags: ["json", "points"],
        run: { args, console in
            try args.expect(2, max: 3, "FOLDER DOC [PAGE]")
            let json = args.flag("json"), points = args.flag("points")
            let at = try moment(args)
            if let at, args.positionals.count == 2, !at.isWallTime {
                throw CLIError("--at \(at) names a moment of one log: give a PAGE, or a time for the whole document", code: Exit.usage)
            }
            try await withNotebook(args.positionals[0], console: console) { nb in
                try await withDocument(nb, args.positionals[1], console: console) { d in
                    if args.positionals.count == 3 {
                        let pid = try await Resolve.page(args.positionals[2], in: d)
                        let state: PageState
                        if let at { state = try await d.pageState(pid, at: at) } else { state = try await d.pageState(pid) }
                        if json {
                            console.raw(state.canonicalJSON(style: .pretty, includePoints: points))
                        } else {
                            try await printPage(state, of: d, console: console, points: points, past: at != nil)
                        }
                    } else if let at {
                        try await printDocument(d, at: at, console: console, json: json, points: points)
                    } else if json {
                        var states: [PageID: PageState] = [:]
                        for p in await d.state.pages { states[p.id] = try await d.pageState(p.id) }
                        console.raw(await d.state.canonicalJSON(pages: states, style: .pretty, includePoints: points))
                    } else {
                        try await printDocument(d, console: console)
                    }
                }
            }
            return Exit.ok
        })

    static func printDocument(_ d: Document, console: Console) async throws {
        let conflicts = try await d.allConflicts()
        let state = await d.state
        let live = await d.pageList
        let deleted = await d.deletedPages
        console.out(state.title.value.isEmpty ? "(untitled)" : state.title.value)
        var head = [["document", d.id.description + (state.deleted.value ? "  (deleted)" : "")],
                    ["created", timestamp(state.created)],
                    ["modified", timestamp(state.modified)],
                    ["pages", "\(live.count)" + (deleted.isEmpty ? "" : " (and \(deleted.count) deleted)")],
                    ["elements", "\(live.reduce(0) { $0 + $1.elementCount })"
                        + (live.contains { $0.countsError != nil } ? " (some pages unreadable, not counted)" : "")],
                    ["conflicts", "\(conflicts.count)" + (conflicts.isEmpty ? "" : " (lnote conflicts to list them)")]]
        if state.title.isConflicted { head.append(["", "title written concurrently; the last writer's title shows"]) }
        for line in table(head) { console.out(line) }
        guard !live.isEmpty || !deleted.isEmpty else { return }
        console.out("")
        var rows: [[String]] = []
        let byPage = Dictionary(grouping: conflicts.filter { $0.page != nil }, by: { $0.page! })
        func row(_ label: String, _ p: PageInfo) -> [String] {
            let c = byPage[p.id]?.count ?? 0
            return [label, p.id.description, "\(Units.pt(p.canvas.width)) x \(Units.pt(p.canvas.height)) pt",
                    p.countsError.map { "? elements (\($0.message))" } ?? "\(p.elementCount) element\(p.elementCount == 1 ? "" : "s")",
                    (p.deleted ? "deleted" : "") + (c > 0 ? (p.deleted ? ", " : "") + "\(c) conflict\(c == 1 ? "" : "s")" : "")]
        }
        for (i, p) in live.enumerated() { rows.append(row("#\(i + 1)", p)) }
        for p in deleted { rows.append(row("-", p)) }
        for line in table(rows) { console.out("  " + line.trimmingTrailingSpaces) }
    }

    /// The document as of a wall time: its log's state, and each of its pages as of the same time.
    static func printDocument(_ d: Document, at: HistoryPoint, console: Console, json: Bool, points: Bool) async throws {
        let state = try await d.documentState(at: at)
        var states: [PageID: PageState] = [:]
        for p in state.pages { states[p.id] = try await d.pageState(p.id, at: at) }
        if json {
            console.raw(state.canonicalJSON(pages: states, style: .pretty, includePoints: points))
            return
        }
        console.out((state.title.value.isEmpty ? "(untitled)" : state.title.value) + "  (as of \(momentText(at)))")
        let live = state.pages.filter { !$0.deleted.value }
        let deleted = state.pages.filter { $0.deleted.value }
        let conflicts = states.values.reduce(0) { $0 + $1.conflicts.count }
        for line in table([["document", d.id.description + (state.deleted.value ? "  (deleted)" : "")],
                           ["created", timestamp(state.created)], ["modified", timestamp(state.modified)],
                           ["pages", "\(live.count)" + (deleted.isEmpty ? "" : " (and \(deleted.count) deleted)")],
                           ["conflicts", "\(conflicts)"]]) { console.out(line) }
        guard !state.pages.isEmpty else { return }
        console.out("")
        var rows: [[String]] = []
        func row(_ label: String, _ p: PageRecord) -> [String] {
            let n = states[p.id]?.elements.count ?? 0
            return [label, p.id.description, "\(Units.pt(p.canvas.value.width)) x \(Units.pt(p.canvas.value.height)) pt",
                    "\(n) element\(n == 1 ? "" : "s")", p.deleted.value ? "deleted" : ""]
        }
        for (i, p) in live.enumerated() { rows.append(row("#\(i + 1)", p)) }
        for p in deleted { rows.append(row("-", p)) }
        for line in table(rows) { console.out("  " + line.trimmingTrailingSpaces) }
    }

    static func printPage(_ s: PageState, of d: Document, console: Console, points: Bool, past: Bool = false) async throws {
        let live = await d.pageList
        let docState = await d.state
        let record = docState.pages.first { $0.id == s.page }
        let position = live.firstIndex { $0.id == s.page }.map { "#\($0 + 1)" } ?? "deleted"
        let canvas = record.map { "\(Units.pt($0.canvas.value.width)) x \(Units.pt($0.canvas.value.height)) pt" } ?? "?"
        // A past state's conflicts are those of that state, not of today's.
        let conflicts = past ? s.conflicts : try await d.conflicts(page: s.page)
        // A page's moment is of its own log: where it sits, its size and the title are today's.
        console.out(past ? "page \(s.page) as of \(s.clock) (today \(position) of \"\(docState.title.value)\", \(canvas))"
                         : "page \(s.page) (\(position) of \"\(docState.title.value)\", \(canvas))")
        console.out("\(s.elements.count) element\(s.elements.count == 1 ? "" : "s"), \(s.pointCount) points, "
                    + "\(s.tombstones.count) erased kept as tombstones, \(conflicts.count) conflict\(conflicts.count == 1 ? "" : "s")")
        console.out("clock \(s.clock)  modified \(timestamp(s.modified))")
        guard !s.elements.isEmpty else { return }
        console.out("")
        var rows = [["ID", "KIND", "STYLE", "POINTS", "VISIBLE", "TRANSFORM", "Z"]]
        for e in s.elements {
            var kind = "", style = "", count = "", visible = ""
            switch e.content {
            case .stroke(let st):
                kind = "stroke"
                style = "\(st.style.tool) \(st.style.color) \(Units.pt(st.style.width))pt"
                count = "\(st.points.count)"
                let v = e.visibleRanges
                visible = v.isEmpty ? "none" : v.count == 1 && v[0].count == st.points.count ? "all"
                    : v.map(\.description).joined(separator: " ")
            case .image(let i):
                kind = "image"
                style = "\(Units.pt(i.frame.width))x\(Units.pt(i.frame.height)) at (\(Units.pt(i.frame.x)), \(Units.pt(i.frame.y)))"
                    + (i.rotation != 0 ? " rot \(Double(i.rotation) / 100)°" : "")
                count = "-"
                visible = "-"
            }
            var conflictMark = ""
            if e.transform.isConflicted || e.z.isConflicted { conflictMark = " (conflict)" }
            rows.append([e.id.description, kind, style, count, visible, transformText(e.transform.value) + conflictMark,
                         e.z.value.description])
        }
        let lines = table(rows)
        console.out(lines[0].trimmingTrailingSpaces)
        for (i, e) in s.elements.enumerated() {
            console.out(lines[i + 1].trimmingTrailingSpaces)
            if points, case .stroke(let st) = e.content {
                // Written as bytes: a page can hold a million points ([issue 15]).
                var text: [UInt8] = []
                text.reserveCapacity(st.points.count * 32)
                for p in st.points { PointText.line(p, into: &text) }
                console.rawBytes(text)
            }
        }
    }

    /// A transform in points: `translate(1.5, -2)` or the full matrix.
    static func transformText(_ t: Transform) -> String {
        if t == .identity { return "none" }
        if t.isTranslation { return "translate(\(Units.pt(t.tx)), \(Units.pt(t.ty)))" }
        return t.description
    }
}
