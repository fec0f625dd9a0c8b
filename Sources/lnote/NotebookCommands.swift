import Foundation
import LnoteModel
import LnoteStore

// Notebook and document commands: init, new, ls, title, rm, restore.

extension CommandTable {
    static let initCommand = Command(
        name: "init",
        synopsis: "lnote init FOLDER [--name MACHINE]",
        summary: "Create a notebook folder; prints its replica id",
        details: """
        FOLDER must not exist yet or be empty; its parent must exist. The folder gets a
        .lnote/ directory holding its replica id (16 hex digits), which stamps every edit made
        here. A copied or moved folder gets a new replica id when it is next opened.
        --name names this machine ("laptop"): `lnote log`, `lnote conflicts` and `lnote history`
        print the name beside its replica id, here and on every folder that syncs with this one
        (directly, or through `lnote serve`). `lnote name FOLDER NAME` changes it later.
        """,
        options: ["name"],
        run: { args, console in
            try args.expect(1, "FOLDER")
            let folder = args.positionals[0]
            let name = args.option("name")
            if let name, let problem = PrintableText.deviceNameProblem(name) {
                throw Arguments.UsageError(message: "--name: \(problem)")
            }
            let fm = FileManager.default
            var isDir: ObjCBool = false
            if fm.fileExists(atPath: folder, isDirectory: &isDir) {
                guard isDir.boolValue else { throw LnoteError(.alreadyExists, "a file is in the way at \(folder)", path: folder) }
                if fm.fileExists(atPath: folder + "/.lnote/replica.json") {
                    let replica = try await withNotebook(folder, console: console) { $0.replica }
                    throw LnoteError(.alreadyExists, "\(folder) is already a notebook folder (replica \(replica))", path: folder)
                }
                let entries = try fm.contentsOfDirectory(atPath: folder)
                guard entries.isEmpty else {
                    throw LnoteError(.invalidArgument, "\(folder) is not empty and not a notebook folder: give a new or empty folder", path: folder)
                }
            }
            let nb = try await Notebook.open(at: folder, create: true)
            let replica = nb.replica
            do {
                if let name { try await nb.nameThisMachine(name) }
            } catch {
                try? await nb.close()
                throw error
            }
            try await nb.close()
            console.out(replica.description)
            return Exit.ok
        })

    static let name = Command(
        name: "name",
        synopsis: "lnote name FOLDER [MACHINE]",
        summary: "Print or set the name of this machine's replica (shown beside its replica id)",
        details: """
        Without MACHINE: prints the name (nothing when none is set) and the replica id. With it:
        names this folder's replica, as `lnote init --name` does. Names are shown beside
        replica ids by log, conflicts and history, and given to the folders that sync with
        this one; a relay's device names (`lnote relay token create --device`) are learnt too.
        """,
        run: { args, console in
            try args.expect(1, max: 2, "FOLDER [MACHINE]")
            if args.positionals.count == 2, let problem = PrintableText.deviceNameProblem(args.positionals[1]) {
                throw Arguments.UsageError(message: "MACHINE: \(problem)")
            }
            return try await withNotebook(args.positionals[0], console: console) { nb in
                if args.positionals.count == 2 {
                    try await nb.nameThisMachine(args.positionals[1])
                    console.out("\(nb.replica) is now named \(args.positionals[1])")
                } else {
                    let known = try await nb.machineName()
                    console.out(known.map { "\(nb.replica) \($0)" } ?? "\(nb.replica) (no name: set one with lnote name FOLDER MACHINE)")
                }
                return Exit.ok
            }
        })

    static let new = Command(
        name: "new",
        synopsis: "lnote new FOLDER [--title T] [--pages N] [--width PT --height PT]",
        summary: "Create a document; prints its id",
        details: """
        --title   the title (default "Untitled")
        --pages   how many empty pages it starts with (default 1; 0 for none)
        --width, --height   page size in points (default A4 portrait, 595.3 x 841.9)
        """,
        options: ["title", "pages", "width", "height"],
        run: { args, console in
            try args.expect(1, "FOLDER")
            let title = args.option("title") ?? "Untitled"
            let pages = try args.int("pages") ?? 1
            guard (0...10_000).contains(pages) else { throw Arguments.UsageError(message: "--pages must be 0 to 10000") }
            let canvas = try Units.canvas(args)
            let id = try await withNotebook(args.positionals[0], console: console) { nb in
                let d = try await nb.createDocument(title: title, firstPage: pages > 0 ? canvas : nil)
                do {
                    for _ in 1..<max(pages, 1) { try await d.addPage(.last, canvas: canvas) }
                } catch {
                    try? await d.close()
                    throw error
                }
                try await d.close()
                return d.id
            }
            console.out(id.description)
            return Exit.ok
        })

    static let ls = Command(
        name: "ls",
        synopsis: "lnote ls FOLDER [--all] [--json]",
        summary: "List the documents of a notebook (from their manifests only)",
        details: """
        Newest first: id, title, live pages, elements, last modification (UTC). Only each
        package's manifest.json is read, without locking the folder (an app may have it open). A package whose manifest is missing or unreadable is
        listed with that status (opening the document rebuilds it).
        --all    include deleted documents (marked "deleted")
        --json   canonical JSON: an array of {id, title, created, modified, pages, elements,
                 coverPage, deleted, manifest}
        """,
        flags: ["all", "json"],
        run: { args, console in
            try args.expect(1, "FOLDER")
            // Lock-free: listing works while an app has the folder open.
            try requireNotebook(args.positionals[0])
            let list = try Notebook.list(at: args.positionals[0], includeDeleted: args.flag("all"))
            if args.flag("json") {
                console.raw(CanonicalJSON.array(list.map(\.json)).text(.pretty))
                return Exit.ok
            }
            guard !list.isEmpty else {
                console.out(args.flag("all") ? "no documents" : "no documents (lnote ls --all shows deleted ones)")
                return Exit.ok
            }
            var rows = [["ID", "TITLE", "PAGES", "ELEMENTS", "MODIFIED", ""]]
            for s in list {
                var status: [String] = []
                if s.deleted { status.append("deleted") }
                switch s.manifest {
                case .valid: break
                case .missing: status.append("manifest missing")
                case .unreadable(let why): status.append("manifest unreadable: \(why)")
                }
                rows.append([s.id.description, s.title.isEmpty ? "-" : s.title, "\(s.pageCount)", "\(s.elementCount)",
                             timestamp(s.modified), status.joined(separator: ", ")])
            }
            for line in table(rows) { console.out(line.trimmingTrailingSpaces) }
            return Exit.ok
        })

    static let title = Command(
        name: "title",
        synopsis: "lnote title FOLDER DOC TEXT...",
        summary: "Set a document's title",
        details: "The words of TEXT are joined with single spaces (quote the title to keep it exact).",
        run: { args, console in
            guard args.positionals.count >= 3 else { throw Arguments.UsageError(message: "expected FOLDER DOC TEXT") }
            let text = args.positionals[2...].joined(separator: " ")
            try await withNotebook(args.positionals[0], console: console) { nb in
                try await withDocument(nb, args.positionals[1], console: console) { d in
                    try await d.setTitle(text)
                }
            }
            return Exit.ok
        })

    /// `doc remove`, named like `page remove`; `rm` is kept as its alias (scripts use it).
    static let docRemove = documentRemoval(name: "doc remove")
    static let rm = documentRemoval(name: "rm", aliasOf: "doc remove")
    /// `doc restore`, named like `page restore`; `restore` is kept as its alias.
    static let docRestore = documentRestoral(name: "doc restore")
    static let restore = documentRestoral(name: "restore", aliasOf: "doc restore")

    static func documentRemoval(name: String, aliasOf: String? = nil) -> Command {
        Command(
            name: name,
            synopsis: "lnote \(name) FOLDER DOC",
            summary: aliasOf.map { "The same as lnote \($0) (kept for scripts)" }
                ?? "Delete a document (soft: lnote doc restore brings it back)",
            details: "The deletion is an operation like any other: it replicates, and the package stays on disk. "
                + "Pages are removed alike with lnote page remove.",
            run: { args, console in
                try args.expect(2, "FOLDER DOC")
                try await withNotebook(args.positionals[0], console: console) { nb in
                    try await withDocument(nb, args.positionals[1], console: console) { d in
                        guard await !d.state.deleted.value else {
                            throw LnoteError(.invalidState, "document \(d.id) is already deleted")
                        }
                        try await d.markDeleted()
                    }
                }
                return Exit.ok
            })
    }

    static func documentRestoral(name: String, aliasOf: String? = nil) -> Command {
        Command(
            name: name,
            synopsis: "lnote \(name) FOLDER DOC",
            summary: aliasOf.map { "The same as lnote \($0) (kept for scripts)" }
                ?? "Restore a deleted document (name it by id or prefix: lnote ls --all lists deleted ones)",
            run: { args, console in
                try args.expect(2, "FOLDER DOC")
                try await withNotebook(args.positionals[0], console: console) { nb in
                    try await withDocument(nb, args.positionals[1], console: console) { d in
                        guard await d.state.deleted.value else {
                            throw LnoteError(.invalidState, "document \(d.id) is not deleted")
                        }
                        try await d.restore()
                    }
                }
                return Exit.ok
            })
    }
}

extension DocumentSummary {
    var json: CanonicalJSON {
        let manifestStatus: CanonicalJSON
        switch manifest {
        case .valid: manifestStatus = "valid"
        case .missing: manifestStatus = "missing"
        case .unreadable: manifestStatus = "unreadable"
        }
        return [
            "id": .string(id.description),
            "title": .string(title),
            "created": .int(created),
            "modified": .int(modified),
            "pages": .int(Int64(pageCount)),
            "elements": .int(Int64(elementCount)),
            "coverPage": coverPage.map { .string($0.description) } ?? .null,
            "deleted": .bool(deleted),
            "manifest": manifestStatus,
        ]
    }
}

extension String {
    var trimmingTrailingSpaces: String {
        var s = Substring(self)
        while s.last == " " { s = s.dropLast() }
        return String(s)
    }
}
