import Foundation
import LnoteModel
import LnoteStore

// Page list commands: page add, page remove, page restore, page move.

extension CommandTable {
    static let pageAdd = Command(
        name: "page add",
        synopsis: "lnote page add FOLDER DOC [--after PAGE | --first] [--width PT --height PT]",
        summary: "Add an empty page; prints its id",
        details: """
        The page goes at the end unless --first or --after PAGE (a page id, prefix, or position pN or #N).
        --width, --height   page size in points (default: the size of the document's last
                            page, A4 portrait 595.3 x 841.9 when it has none; one of the two
                            given alone keeps the other side of that size)
        """,
        options: ["after", "width", "height"],
        flags: ["first"],
        run: { args, console in
            try args.expect(2, "FOLDER DOC")
            let width = try Units.positive(args, "width"), height = try Units.positive(args, "height")
            let pid = try await withNotebook(args.positionals[0], console: console) { nb in
                try await withDocument(nb, args.positionals[1], console: console) { d in
                    let base = await d.defaultCanvas
                    let canvas = CanvasSize(width: width ?? base.width, height: height ?? base.height)
                    return try await d.addPage(try await placement(args, in: d, required: false), canvas: canvas)
                }
            }
            console.out(pid.description)
            return Exit.ok
        })

    static let pageRemove = Command(
        name: "page remove",
        synopsis: "lnote page remove FOLDER DOC PAGE",
        summary: "Delete a page (soft: its content is kept; lnote page restore brings it back)",
        run: { args, console in
            try args.expect(3, "FOLDER DOC PAGE")
            try await withNotebook(args.positionals[0], console: console) { nb in
                try await withDocument(nb, args.positionals[1], console: console) { d in
                    let pid = try await Resolve.page(args.positionals[2], in: d)
                    guard let record = await d.state.pages.first(where: { $0.id == pid }), !record.deleted.value else {
                        throw LnoteError(.invalidState, "page \(pid) is already deleted")
                    }
                    try await d.deletePage(pid)
                }
            }
            return Exit.ok
        })

    static let pageRestore = Command(
        name: "page restore",
        synopsis: "lnote page restore FOLDER DOC PAGE",
        summary: "Restore a deleted page (name it by id or prefix: lnote show lists deleted pages)",
        run: { args, console in
            try args.expect(3, "FOLDER DOC PAGE")
            try await withNotebook(args.positionals[0], console: console) { nb in
                try await withDocument(nb, args.positionals[1], console: console) { d in
                    let pid = try await Resolve.page(args.positionals[2], in: d)
                    guard let record = await d.state.pages.first(where: { $0.id == pid }), record.deleted.value else {
                        throw LnoteError(.invalidState, "page \(pid) is not deleted")
                    }
                    try await d.restorePage(pid)
                }
            }
            return Exit.ok
        })

    static let pageMove = Command(
        name: "page move",
        synopsis: "lnote page move FOLDER DOC PAGE (--after PAGE | --first)",
        summary: "Move a page to the front or after another page",
        options: ["after"],
        flags: ["first"],
        run: { args, console in
            try args.expect(3, "FOLDER DOC PAGE")
            try await withNotebook(args.positionals[0], console: console) { nb in
                try await withDocument(nb, args.positionals[1], console: console) { d in
                    let pid = try await Resolve.page(args.positionals[2], in: d)
                    let to = try await placement(args, in: d, required: true)
                    if case .after(let other) = to, other == pid {
                        throw LnoteError(.invalidArgument, "cannot move page \(pid) after itself")
                    }
                    try await d.movePage(pid, to: to)
                }
            }
            return Exit.ok
        })
}
