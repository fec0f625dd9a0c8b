import Foundation
import LnoteModel
import LnoteReplication
import LnoteStore

// Looking inside: log, conflicts, compact, verify.

extension CommandTable {
    static let log = Command(
        name: "log",
        synopsis: "lnote log FOLDER DOC [PAGE] [--json]",
        summary: "List the operations of a page's log (or the document's), in log order",
        details: """
        One line per operation: its id (replica.counter), the device that owns the replica
        when a relay named it ([SYNC-57]), Lamport timestamp, context (the clock its author
        had seen, with the author's own entry, counter - 1, absent when 0, which the log's
        bytes leave out), and what it does. Operations still waiting for operations they
        depend on are marked "pending". Compaction never shortens a log,
        so this is the whole history kept here.
        --json   an array of {id, device (when known), lamport, context, wallTime, kind, summary, pending};
                 kind is the operation's name in operation-log.md (setTitle, movePage, ...;
                 add for every form of an add)
        """,
        flags: ["json"],
        run: { args, console in
            try args.expect(2, max: 3, "FOLDER DOC [PAGE]")
            let (ops, clock, devices) = try await withNotebook(args.positionals[0], console: console) { nb in
                let devices = try await nb.deviceNames()
                return try await withDocument(nb, args.positionals[1], console: console) { d in
                    let pid: PageID? = args.positionals.count == 3 ? try await Resolve.page(args.positionals[2], in: d) : nil
                    return (try await d.operations(page: pid, notCoveredBy: VectorClock()), try await d.clock(page: pid), devices)
                }
            }
            if args.flag("json") {
                console.raw(CanonicalJSON.array(ops.map { op -> CanonicalJSON in
                    var o: [String: CanonicalJSON] = [
                        "id": .string(op.id.description),
                        "lamport": .uint(op.lamport),
                        "context": op.context.json,
                        "wallTime": .int(op.wallTime),
                        "kind": .string(op.body.name),
                        "summary": .string(op.summary),
                        "pending": .bool(!clock.covers(op.id)),
                    ]
                    if let d = devices[op.id.replica] { o["device"] = .string(d) }
                    return .object(o)
                }).text(.pretty))
                return Exit.ok
            }
            if ops.isEmpty { console.out("no operations") }
            let rows = ops.map { op in
                [op.id.description, devices[op.id.replica].map { "(\($0))" } ?? "", "@\(op.lamport)", op.context.description,
                 op.summary + (clock.covers(op.id) ? "" : "  [pending]")]
            }
            for line in table(rows) { console.out(line) }
            return Exit.ok
        })

    static let conflicts = Command(
        name: "conflicts",
        synopsis: "lnote conflicts FOLDER [DOC] [--render DIR [--size N]] [--json]",
        summary: "List every conflict (concurrent edits and which one won); --render draws them",
        details: """
        Document level: concurrent title writes, page moves, canvas changes, and pages deleted
        while edited elsewhere. Page level: concurrent moves and reorders of an element, and
        whole erases that won over concurrent edits. Each line names the kind, the page
        (#N or deleted) and element, the concurrent operations (id@lamport, and the device that
        owns the replica when a relay named it) and the winner.
        Every document is searched (deleted ones included) unless DOC is given. The exit
        status is 0 whether or not there are conflicts.
        --json   an array of {document, kind, page, element, ops, winner}

        --render DIR draws, for each page with element conflicts (move, reorder, erase) or
        deleted while edited, PNG pictures (merge-semantics.md [MERGE-55] - [MERGE-58]):
          DIR/DOC/PAGE-merged.png
              the page as it is now, each conflicting element outlined in
              magenta (an erased one: its ink faint, the outline dashed)
          DIR/DOC/PAGE-side-R.png
              for each replica R that made one of the concurrent operations,
              the page as R saw it right after its latest one (the moment of
              that operation), the same elements outlined
          DIR/DOC/PAGE-delete-R.png
              a page deleted while edited: the page as the delete's author R
              had seen it; outlined are the elements changed since
          DIR/DOC/PAGE.png
              all of them side by side, merged first, in the index's order
              (no text is drawn)
          DIR/index.json
              {pages: [{document, page, number (live pages), deleted,
              conflicts, highlighted, merged, combined, sides: [{view,
              replica, operation, moment, file or reason}],
              unseen_reason}], not_pictured: [{document, kind, ...,
              reason}], files}
        Every panel outlines the page's whole highlighted set. At most 32
        sides are drawn per page (the rest: reason "too many sides").
        Replicas holding the same operations and assets write the same files,
        byte for byte (an image not fetched yet is drawn as a placeholder).
        A document folder in DIR that is a symlink or not a directory is
        refused; only regular files are removed. Pages without such
        conflicts get no files (title, page order and canvas conflicts are listed in the
        index as not pictured). DIR is created if missing (its parent must exist); each file is replaced
        atomically, and the files a previous run listed in DIR/index.json and this one does
        not write are removed (nothing else in DIR is touched). With --json the index is
        printed.
        --size N the longer side of each picture in pixels, 16 to 4096 (default 800)
        """,
        options: ["render", "size"],
        flags: ["json"],
        run: { args, console in
            try args.expect(1, max: 2, "FOLDER [DOC]")
            let render = args.option("render")
            var size = 800
            if let s = args.option("size") {
                guard render != nil else { throw Arguments.UsageError(message: "--size goes with --render DIR") }
                guard let n = Int(s), (16...4096).contains(n) else {
                    throw Arguments.UsageError(message: "--size \(s) must be a whole number from 16 to 4096")
                }
                size = n
            }
            if let render { try ConflictPictures.checkTarget(render) }
            var devices: [ReplicaID: String] = [:]
            var unpictured: [ConflictPictures.Unpictured] = []
            // With --render, what is printed of each page pictured (the plans themselves, with
            // their rebuilt pages, are dropped once written), and the index.
            var lines: [String] = []
            var files = 0
            var index: CanonicalJSON?
            let found: [(DocumentID, [PageID], Conflict)] = try await withNotebook(args.positionals[0], console: console) { nb in
                devices = try await nb.deviceNames()
                let ids = args.positionals.count == 2 ? [try await Resolve.document(args.positionals[1], in: nb)]
                    : try await nb.documentIDs()
                var out: [(DocumentID, [PageID], Conflict)] = []
                var pictured: [(DocumentID, [Conflict])] = []
                for id in ids {
                    try await withDocument(nb, id.description, console: console) { d in
                        let live = await d.pageList.map(\.id)
                        let all = try await d.allConflicts()
                        for c in all { out.append((id, live, c)) }
                        if render != nil {
                            unpictured += ConflictPictures.unpictured(id, all)
                            if ConflictPictures.hasPictures(all, pages: await d.allPageIDs) { pictured.append((id, all)) }
                        }
                    }
                }
                guard let render else { return out }
                // Every document folder written into is checked before anything is written
                // ([MERGE-58]); then one page at a time is rebuilt, drawn and written.
                let writer = try ConflictPictures.Writer(dir: render, size: size, documents: pictured.map(\.0))
                for (id, all) in pictured {
                    try await withDocument(nb, id.description, console: console) { d in
                        let live = await d.pageList.map(\.id)
                        try await ConflictPictures.plans(d, conflicts: all, live: live) { p in
                            try writer.add(p)
                            lines.append(ConflictPictures.summary(p, in: render, devices: devices))
                            files += 2 + p.sides.filter { $0.page != nil }.count
                        }
                    }
                }
                index = try writer.finish(unpictured: unpictured)
                return out
            }
            if let render, let index {
                if args.flag("json") {
                    console.raw(index.text(.pretty))
                    return Exit.ok
                }
                for line in lines { console.out(line) }
                for u in unpictured { console.out("\(u.document)  \(u.conflict.kind.rawValue): not pictured (\(u.reason))") }
                let indexPath = (render as NSString).appendingPathComponent("index.json")
                console.out(lines.isEmpty ? "no conflicts to picture (\(indexPath) lists none)"
                            : "wrote \(files) pictures of \(lines.count) page\(lines.count == 1 ? "" : "s") and \(indexPath)")
                return Exit.ok
            }
            if args.flag("json") {
                console.raw(CanonicalJSON.array(found.map { doc, _, c in
                    guard case .object(var o) = c.json else { return c.json }
                    o["document"] = .string(doc.description)
                    return .object(o)
                }).text(.pretty))
                return Exit.ok
            }
            if found.isEmpty { console.out("no conflicts") }
            for (doc, live, c) in found {
                var s = "\(doc)  \(c.kind.rawValue)"
                if let p = c.page { s += "  page \(live.firstIndex(of: p).map { "#\($0 + 1)" } ?? "(deleted)") \(p)" }
                if let e = c.element { s += "  element \(e)" }
                func named(_ r: OpRef) -> String { r.description + (devices[r.id.replica].map { " (\($0))" } ?? "") }
                s += ": " + c.ops.map(named).joined(separator: ", ") + " → winner \(named(c.winner))"
                console.out(s)
            }
            return Exit.ok
        })

    static let compact = Command(
        name: "compact",
        synopsis: "lnote compact FOLDER [DOC] [--json]",
        summary: "Fold every page's log into its snapshot now",
        details: """
        Writes a fresh snapshot of each page whose log holds operations past what its
        snapshot covers, then saves document.json and manifest.json. Logs are never
        shortened (peers far behind still need their operations). Prints one line per page
        compacted and a total; every document unless DOC is given.
        --json   {"compacted": N, "pages": N (looked at), "written": [{"document", "page",
                 "operations", "log_bytes"}, …]} (operations and log_bytes: the frames
                 folded in, those past what the old snapshot covered; the log's 40-byte
                 header is not counted)
        """,
        flags: ["json"],
        run: { args, console in
            try args.expect(1, max: 2, "FOLDER [DOC]")
            let (lines, total, pages, written) = try await withNotebook(args.positionals[0], console: console) { nb in
                let ids = args.positionals.count == 2 ? [try await Resolve.document(args.positionals[1], in: nb)]
                    : try await nb.documentIDs()
                var lines: [String] = []
                var written: [CanonicalJSON] = []
                var compacted = 0, pages = 0
                for id in ids {
                    try await withDocument(nb, id.description, console: console) { d in
                        for pid in await d.allPageIDs {
                            pages += 1
                            let r = try await d.compactReporting(page: pid)
                            try await d.closePage(pid)
                            guard r.written else { continue }
                            compacted += 1
                            written.append(.object(["document": .string(id.description), "page": .string(pid.description),
                                                    "operations": .int(Int64(r.frames)), "log_bytes": .int(Int64(r.bytes))]))
                            lines.append("\(id) page \(pid): \(r.frames) operation\(r.frames == 1 ? "" : "s") (\(r.bytes) bytes of log) folded into its snapshot")
                        }
                        try await d.flush()
                    }
                }
                return (lines, compacted, pages, written)
            }
            if args.flag("json") {
                console.raw(CanonicalJSON.object(["compacted": .int(Int64(total)), "pages": .int(Int64(pages)),
                                                  "written": .array(written)]).text(.pretty))
                return Exit.ok
            }
            for l in lines { console.out(l) }
            console.out("compacted \(total) of \(pages) page\(pages == 1 ? "" : "s")")
            return Exit.ok
        })

    static let verify = Command(
        name: "verify",
        synopsis: "lnote verify FOLDER [--repair] [--json]",
        summary: "Check every file of a notebook folder (changing nothing); --repair rebuilds what it can",
        details: """
        Decodes every manifest, document.json, page snapshot and log (frame by frame), checks
        that assets exist and match their hash, and looks for orphaned, temporary and
        unknown files; reports log files missing beside their snapshots and, exactly, the
        operations a snapshot holds that its log lacks; lists the operations kept in
        .lnote/quarantine/ (refused when received, own versions of forked operations) and
        the forks this folder knows of. Prints one problem per line (kind, path, offset, what
        is wrong), then the quarantine, and a summary. Exit status 1 when anything is wrong,
        0 when the folder is clean. Listed but not problems: a quarantined operation made
        again, a refused one the log now holds validly (or bytes that were no operation, once
        a valid one holds their id), a fork its author repaired, and a fork of another
        replica pushed here (this
        folder kept its version; the pusher's side repairs it). Page files whose page the document does not have yet (their
        operations came before the document's, and wait for them) are listed as "waiting:"
        and are not problems.
        The notebook is not opened (no lock is taken and nothing is repaired): run it on a
        folder no other process is writing.
        --repair opens the notebook (taking its lock) and rebuilds what the folder's own
                 files can rebuild: torn log tails cut, damaged logs salvaged wherever the
                 damage lies (the damaged file kept aside as .corrupt-N), snapshots
                 rewritten from their logs,
                 manifests, thumbnails (missing, stale or old PNG ones drawn again as JPEG),
                 temporary files and orphan assets removed.
                 It prints one "repaired:" line per thing done, then verifies again and
                 reports what is left (operations a log lost stay listed until a peer sends
                 them back: sync). Exit status as for verify, after the repair.
        --json   {documents, files, clean, problems: [{kind, path, offset, index, record, message}],
                  (index: a log's frame; record: a snapshot's record that does not decode,
                  an element, tombstone or context as the message says; else null)
                  waiting: [{kind, path, message}],
                  quarantine: [{kind, document, page, operation, remote, reason, remadeAs, resolved}]}
                 with --repair also "repaired": [TEXT, …]
        """,
        flags: ["json", "repair"],
        run: { args, console in
            try args.expect(1, "FOLDER")
            try requireNotebook(args.positionals[0])
            var repaired: [String]? = nil
            let report: VerifyReport
            if args.flag("repair") {
                let r = try await Repair.run(folder: args.positionals[0])
                repaired = r.actions
                report = r.after
            } else {
                report = try Verify.run(folder: args.positionals[0])
            }
            if args.flag("json") {
                var value: CanonicalJSON = [
                    "documents": .int(Int64(report.documents)),
                    "files": .int(Int64(report.files)),
                    "clean": .bool(report.isClean),
                    "problems": .array(report.problems.map { p in
                        [
                            "kind": .string(p.kind.rawValue),
                            "path": .string(p.path),
                            "offset": p.offset.map { .int(Int64($0)) } ?? .null,
                            "index": p.index.map { .int(Int64($0)) } ?? .null,
                            "record": p.record.map { .int(Int64($0)) } ?? .null,
                            "message": .string(p.message),
                        ]
                    }),
                    "waiting": .array(report.waiting.map { p in
                        [
                            "kind": .string(p.kind.rawValue),
                            "path": .string(p.path),
                            "message": .string(p.message),
                        ]
                    }),
                    "quarantine": .array(report.quarantine.map { e in
                        [
                            "kind": .string(e.kind.rawValue),
                            "document": .string(e.document.description),
                            "page": e.page.map { .string($0.description) } ?? .null,
                            "operation": e.operation.map { .string($0.description) } ?? .null,
                            "remote": .string(e.remote),
                            "reason": .string(e.reason),
                            "remadeAs": e.remadeAs.map { .array($0.map { .string($0.description) }) } ?? .null,
                            "resolved": e.resolved.map { .int($0) } ?? .null,
                        ]
                    }),
                ]
                if let repaired, case .object(var o) = value {
                    o["repaired"] = .array(repaired.map { .string($0) })
                    value = .object(o)
                }
                console.raw(value.text(.pretty))
            } else {
                if let repaired {
                    for a in repaired { console.out("repaired: \(a)") }
                    if repaired.isEmpty { console.out("repaired: nothing needed it") }
                }
                for p in report.problems { console.out(p.description) }
                for p in report.waiting { console.out("waiting: \(p.description)") }
                for e in report.quarantine where !e.needsAttention {
                    if e.wasPushedHere {
                        // A fork of this folder's own id pushed here is a problem, listed above.
                        if report.problems.contains(where: { $0.path.hasSuffix("/" + e.fileName) }) { continue }
                        console.out("quarantined (pushed here, not stored): \(e.operation?.description ?? "?") in log \(e.logDescription): "
                                    + "\(e.remote) pushed other content under an id this folder holds; it keeps its own, and the pusher was told")
                        continue
                    }
                    let how = switch e.kind {
                    case .fork: "the fork with \(e.remote) is gone (its author repaired it)"
                    case .invalid: "refused from \(e.remote); settled: held where it belongs (for damaged bytes, a valid operation under its id)"
                    case .ownFork: (e.remadeAs ?? []).isEmpty ? "nothing left to make again"
                        : "made again as " + (e.remadeAs ?? []).map(\.description).joined(separator: ", ")
                    }
                    console.out("quarantined (resolved): \(e.operation?.description ?? "?") in log \(e.logDescription): \(how)")
                }
                let checked = "\(report.documents) document\(report.documents == 1 ? "" : "s"), \(report.files) files checked"
                let waiting = report.waiting.isEmpty ? ""
                    : "; \(report.waiting.count) page file\(report.waiting.count == 1 ? "" : "s") waiting for their document's operations"
                console.out((report.isClean ? "\(checked): no problems"
                             : "\(checked): \(report.problems.count) problem\(report.problems.count == 1 ? "" : "s")") + waiting)
            }
            return report.isClean ? Exit.ok : Exit.failure
        })
}
