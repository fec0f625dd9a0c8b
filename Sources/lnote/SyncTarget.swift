import Foundation
import LnoteModel
import LnoteStore

/// What `lnote sync [FOLDER] [REMOTE]` syncs: the folder, the remote's URL or folder, and
/// the token saved with it, from the positionals, the folder's saved remotes ([PKG-101])
/// and `--init`.
struct SyncTarget {
    var folder: String
    /// A URL or a folder path.
    var location: String
    /// The token saved with the remote (a saved remote's, or a saved remote's of the same URL).
    var savedToken: String?
    /// True when the remote was named by a saved remote (by name, or the default one): its
    /// token is the saved one, never `$LNOTE_TOKEN`, which a folder prepared by someone else
    /// could otherwise send to a server of their choosing.
    var fromSaved = false

    /// The token to use: `--token`, else for a saved remote its saved token, else for a URL
    /// typed on the command line `$LNOTE_TOKEN`, else a saved remote's of the same URL.
    func token(option: String?, environment: String?) -> String? {
        if let option { return option }
        if fromSaved { return savedToken }
        return environment.flatMap { $0.isEmpty ? nil : $0 } ?? savedToken
    }

    static func resolve(_ p: [String], initializing: Bool, console: Console) async throws -> SyncTarget {
        var folder = "."
        var spec: String?
        switch p.count {
        case 0:
            break
        case 1:
            // A URL, or the name of a remote saved in the current folder: the remote, with the
            // current folder. Anything else: the folder, with its default remote.
            let one = p[0]
            let savedHere = !one.contains("/") && isNotebookFolder(".")
                && ((try? SavedRemotes.load(notebook: "."))?.remote(named: one) != nil)
            if SyncRunner.isURL(one) || savedHere {
                spec = one
            } else {
                folder = one
            }
        default:
            folder = p[0]
            spec = p[1]
        }
        if initializing { try await createIfNeeded(folder, console: console) }
        try requireFolder(folder, role: "FOLDER")
        let saved = try SavedRemotes.load(notebook: folder)
        guard let spec else {
            guard let d = saved.defaultRemote else {
                throw CLIError("no remote given, and none is saved in \(folder): give a URL or a folder "
                               + "(lnote sync FOLDER REMOTE), or save one with lnote remote add NAME URL-or-FOLDER",
                               code: Exit.usage)
            }
            if !d.isURL {
                if initializing { try await createIfNeeded(d.location, console: console) }
                try requireFolder(d.location, role: "the default remote \(d.name):")
                try refuseSame(d.location, folder)
            }
            return SyncTarget(folder: folder, location: d.location, savedToken: d.token, fromSaved: true)
        }
        if !SyncRunner.isURL(spec), !spec.contains("/"), let r = saved.remote(named: spec) {
            if !r.isURL {
                if initializing { try await createIfNeeded(r.location, console: console) }
                try requireFolder(r.location, role: "the remote \(r.name):")
                try refuseSame(r.location, folder)
            }
            return SyncTarget(folder: folder, location: r.location, savedToken: r.token, fromSaved: true)
        }
        if SyncRunner.isURL(spec) {
            return SyncTarget(folder: folder, location: spec, savedToken: saved.remotes.first { $0.location == spec }?.token)
        }
        if spec.contains("://") {
            throw CLIError("\"\(spec)\" is not something lnote syncs with: give an http:// or https:// notebook URL, "
                           + "a notebook folder, or the name of a saved remote", code: Exit.usage)
        }
        if initializing { try await createIfNeeded(spec, console: console) }
        try requireFolder(spec, role: "REMOTE", names: saved.remotes.map(\.name))
        try refuseSame(spec, folder)
        let absolute = URL(fileURLWithPath: spec).standardizedFileURL.path
        return SyncTarget(folder: folder, location: spec,
                          savedToken: saved.remotes.first { $0.location == absolute }?.token)
    }

    static func refuseSame(_ remote: String, _ folder: String) throws {
        guard realPath(remote) == realPath(folder) else { return }
        throw CLIError("FOLDER and REMOTE are the same folder (\(folder)): give another notebook folder or a URL",
                       code: Exit.usage)
    }

    static func realPath(_ path: String) -> String {
        URL(fileURLWithPath: path).resolvingSymlinksInPath().standardizedFileURL.path
    }

    static func isNotebookFolder(_ path: String) -> Bool { (try? requireNotebook(path)) != nil }

    /// `requireNotebook`, with what to do next when the folder is missing or empty.
    static func requireFolder(_ path: String, role: String, names: [String] = []) throws {
        do {
            try requireNotebook(path)
        } catch let e as LnoteError where e.code == .notFound {
            let entries = try? FileManager.default.contentsOfDirectory(atPath: path)
            var hint: String
            if entries == nil || entries?.isEmpty == true {
                hint = "\(entries == nil ? "it does not exist" : "it is empty"); add --init to make it a new notebook folder"
            } else {
                hint = "it is a folder with other files: give a notebook folder"
            }
            if role == "REMOTE" && !names.isEmpty { hint += ", or one of the saved remotes: " + names.joined(separator: ", ") }
            throw CLIError("\(role) \(path) is not a notebook folder: \(hint)", code: Exit.failure)
        }
    }

    /// Makes `path` a new notebook folder when it does not exist or is an empty directory,
    /// saying so on stderr; leaves a notebook folder as it is.
    static func createIfNeeded(_ path: String, console: Console) async throws {
        guard !isNotebookFolder(path) else { return }
        var isDir: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDir) {
            guard isDir.boolValue, (try FileManager.default.contentsOfDirectory(atPath: path)).isEmpty else {
                throw CLIError("--init: \(path) is not empty and not a notebook folder; give an empty or new folder")
            }
        }
        let nb = try await Notebook.open(at: path, create: true)
        let replica = nb.replica
        try await nb.close()
        console.err("lnote sync: created the notebook folder \(path) (replica \(replica))")
    }
}
