import Foundation
import LnoteModel
import LnoteStore

/// `lnote remote add|list|remove|default`: remotes saved under names ([PKG-101]), so that
/// `lnote sync` needs neither the URL nor the token each time.
extension CommandTable {
    static let remoteFolderNote = """
    FOLDER is the notebook folder; without it, the current directory.
    """

    static let remoteAdd = Command(
        name: "remote add",
        synopsis: "lnote remote add [FOLDER] NAME URL-or-FOLDER [--token T] [--default]",
        summary: "Save a remote (a server's notebook URL or another notebook folder) under a name",
        details: """
        \(remoteFolderNote) NAME is 1 to 64 letters, digits, '-', '_' or '.'. The first
        remote saved is the default one (`lnote sync` with no remote uses it); --default
        makes this one the default. --token saves the bearer token for a URL in the folder's
        .lnote/saved-remotes.json (mode 0600); it is never printed again. Without --token,
        syncs with that URL need --token or $LNOTE_TOKEN. A folder is saved as an absolute
        path.
        """,
        options: ["token"],
        flags: ["default"],
        run: { args, console in
            try args.expect(2, max: 3, "[FOLDER] NAME URL-or-FOLDER")
            let p = args.positionals
            let folder = p.count == 3 ? p[0] : "."
            let (name, given) = (p[p.count - 2], p[p.count - 1])
            try requireNotebook(folder)
            try SavedRemotes.checkName(name)
            var location = given
            if SyncRunner.isURL(given) {
                guard let c = URLComponents(string: given), c.host?.isEmpty == false else {
                    throw CLIError("\"\(given)\" is not a URL lnote can use: expected http(s)://HOST:PORT/v1/notebooks/UUID",
                                   code: Exit.usage)
                }
            } else if given.contains("://") {
                throw CLIError("\"\(given)\" is neither an http(s) URL nor a folder: lnote syncs with http:// and https:// servers "
                               + "and with notebook folders", code: Exit.usage)
            } else {
                location = URL(fileURLWithPath: given).standardizedFileURL.path
                if (try? requireNotebook(location)) == nil {
                    console.err("lnote remote add: note: \(location) is not a notebook folder now; "
                                + "`lnote sync \(folder == "." ? "" : folder + " ")\(name) --init` will create it")
                }
            }
            let token = args.option("token")
            if let token, !SyncRunner.isURL(location) {
                _ = token
                throw CLIError("--token is for URLs: a folder needs none", code: Exit.usage)
            }
            let remote = SavedRemote(name: name, location: location, token: token,
                                     added: Int64(Date().timeIntervalSince1970 * 1000))
            let isDefault = try SavedRemotes.update(notebook: folder) { r in
                try r.add(remote, makeDefault: args.flag("default"))
                return r.defaultName == name
            }
            console.out("saved remote \(name): \(location)\(token != nil ? " (token saved)" : "")\(isDefault ? ", the default" : "")")
            if SyncRunner.isURL(location) && token == nil {
                console.err("lnote remote add: note: no token saved; syncs with \(name) need --token or $LNOTE_TOKEN")
            }
            return Exit.ok
        })

    static let remoteList = Command(
        name: "remote list",
        synopsis: "lnote remote list [FOLDER] [--json]",
        summary: "List the remotes saved in a notebook folder",
        details: """
        \(remoteFolderNote) One line per remote under a header: NAME, DEFAULT ("*" for the
        one `lnote sync` uses when given none), TOKEN ("saved" or "-"; tokens are never
        printed), LOCATION.
        --json prints {"default": NAME or null, "remotes": [{"name": …, "location": …,
        "token_saved": true|false, "added": ms since 1970}, …]} in the order added.
        """,
        flags: ["json"],
        run: { args, console in
            try args.expect(0, max: 1, "[FOLDER]")
            let folder = args.positionals.first ?? "."
            try requireNotebook(folder)
            let saved = try SavedRemotes.load(notebook: folder)
            if args.flag("json") {
                let list: [CanonicalJSON] = saved.remotes.map {
                    .object(["name": .string($0.name), "location": .string($0.location),
                             "token_saved": .bool($0.token != nil), "added": .int($0.added)])
                }
                let root = CanonicalJSON.object(["default": saved.defaultName.map { .string($0) } ?? .null, "remotes": .array(list)])
                console.raw(root.text(.pretty))
                return Exit.ok
            }
            guard !saved.remotes.isEmpty else {
                console.err("lnote remote list: no remote saved in \(folder); add one with lnote remote add NAME URL-or-FOLDER")
                return Exit.ok
            }
            let rows = [["NAME", "DEFAULT", "TOKEN", "LOCATION"]] + saved.remotes.map {
                [$0.name, $0.name == saved.defaultName ? "*" : "", $0.token != nil ? "saved" : "-", $0.location]
            }
            for line in table(rows) { console.out(line.trimmingTrailingSpaces) }
            return Exit.ok
        })

    static let remoteRemove = Command(
        name: "remote remove",
        synopsis: "lnote remote remove [FOLDER] NAME",
        summary: "Forget a saved remote (and its token)",
        details: """
        \(remoteFolderNote) When it was the default, the earliest remote saved becomes the
        default. Nothing is removed on the remote's side.
        """,
        run: { args, console in
            try args.expect(1, max: 2, "[FOLDER] NAME")
            let folder = args.positionals.count == 2 ? args.positionals[0] : "."
            let name = args.positionals.last!
            try requireNotebook(folder)
            let newDefault = try SavedRemotes.update(notebook: folder) { r in
                try r.remove(name)
                return r.defaultName
            }
            console.out("removed remote \(name)" + (newDefault.map { "; the default is now \($0)" } ?? ""))
            return Exit.ok
        })

    static let remoteDefault = Command(
        name: "remote default",
        synopsis: "lnote remote default [FOLDER] NAME",
        summary: "Make a saved remote the one `lnote sync` uses when given none",
        details: remoteFolderNote,
        run: { args, console in
            try args.expect(1, max: 2, "[FOLDER] NAME")
            let folder = args.positionals.count == 2 ? args.positionals[0] : "."
            let name = args.positionals.last!
            try requireNotebook(folder)
            try SavedRemotes.update(notebook: folder) { try $0.setDefault(name) }
            console.out("the default remote is now \(name)")
            return Exit.ok
        })
}
