import Foundation
import LnoteModel

/// One remote a notebook folder syncs with, saved under a name people choose ("desktop",
/// "relay", "usb"), as git and Syncthing keep them (document-package.md [PKG-101]).
public struct SavedRemote: Sendable, Equatable, Codable {
    /// 1 to 64 characters of letters, digits, `-`, `_` and `.`, not starting with `.` or `-`.
    public var name: String
    /// A notebook URL (`http(s)://…/v1/notebooks/UUID`) or the absolute path of another
    /// notebook folder.
    public var location: String
    /// The bearer token for a URL; never printed back by the CLI.
    public var token: String?
    /// When it was added, ms since 1970.
    public var added: Int64

    public init(name: String, location: String, token: String? = nil, added: Int64) {
        self.name = name
        self.location = location
        self.token = token
        self.added = added
    }

    /// True for a URL, false for a folder.
    public var isURL: Bool { location.hasPrefix("http://") || location.hasPrefix("https://") }
}

/// The remotes a notebook folder knows by name, kept in `.lnote/saved-remotes.json` with mode
/// 0600 (tokens are secrets) and changed under the notebook lock ([PKG-83]), so that two
/// processes adding at once both keep theirs. It does not need the notebook open: a folder
/// that is being served or watched can still have its remotes listed and changed.
public struct SavedRemotes: Sendable, Equatable {
    /// In the order added.
    public private(set) var remotes: [SavedRemote] = []
    /// The one `lnote sync FOLDER` uses when no remote is named; nil when none is saved.
    public private(set) var defaultName: String?

    public init() {}

    public func remote(named name: String) -> SavedRemote? { remotes.first { $0.name == name } }

    /// The default remote, or nil when none is saved.
    public var defaultRemote: SavedRemote? { defaultName.flatMap(remote(named:)) }

    // MARK: - Names

    /// Checks a remote name. - Throws: `invalidArgument` saying what is allowed.
    public static func checkName(_ name: String) throws {
        let allowed = name.utf8.allSatisfy { c in
            (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x2D || c == 0x5F || c == 0x2E
        }
        guard (1...64).contains(name.utf8.count), allowed, !name.hasPrefix("."), !name.hasPrefix("-") else {
            throw LnoteError(.invalidArgument,
                             "a remote name is 1 to 64 letters, digits, '-', '_' or '.', not starting with '.' or '-' (got \"\(PrintableText.escaped(name))\")")
        }
    }

    /// Checks a remote's location and token ([PKG-101]): an http(s) URL with a host, or an
    /// absolute folder path; a token only for a URL, 1 to 256 bytes of visible ASCII (it goes
    /// into an `Authorization` header).
    /// - Throws: `invalidArgument` saying what is wrong.
    public static func checkRemote(_ r: SavedRemote) throws {
        try checkName(r.name)
        if r.isURL {
            guard let c = URLComponents(string: r.location), c.host?.isEmpty == false else {
                throw LnoteError(.invalidArgument, "remote \(r.name): \"\(PrintableText.escaped(r.location))\" is not an http(s) URL with a host")
            }
        } else {
            guard r.location.hasPrefix("/"), PrintableText.controlCharacter(in: r.location) == nil else {
                throw LnoteError(.invalidArgument, "remote \(r.name): a folder is saved as an absolute path, not \"\(PrintableText.escaped(r.location))\"")
            }
            guard r.token == nil else { throw LnoteError(.invalidArgument, "remote \(r.name): a folder has no token") }
        }
        if let t = r.token {
            guard (1...256).contains(t.utf8.count), t.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) else {
                throw LnoteError(.invalidArgument, "remote \(r.name): a token is 1 to 256 visible ASCII characters")
            }
        }
    }

    // MARK: - Changes

    /// Adds a remote; the first one added becomes the default, and so does one added with
    /// `makeDefault`.
    /// - Throws: `alreadyExists` when the name is taken; `invalidArgument` for a bad name.
    public mutating func add(_ remote: SavedRemote, makeDefault: Bool = false) throws {
        try Self.checkRemote(remote)
        guard self.remote(named: remote.name) == nil else {
            throw LnoteError(.alreadyExists, "a remote named \"\(remote.name)\" is already saved (remove it first, or pick another name)")
        }
        remotes.append(remote)
        if makeDefault || defaultName == nil { defaultName = remote.name }
    }

    /// Removes a remote; when it was the default, the earliest one left becomes the default.
    /// - Throws: `notFound` when no remote has that name.
    public mutating func remove(_ name: String) throws {
        guard let i = remotes.firstIndex(where: { $0.name == name }) else {
            throw LnoteError(.notFound, "no remote named \"\(PrintableText.escaped(name))\" is saved" + knownNames)
        }
        remotes.remove(at: i)
        if defaultName == name { defaultName = remotes.first?.name }
    }

    /// Makes a saved remote the default. - Throws: `notFound`.
    public mutating func setDefault(_ name: String) throws {
        guard remote(named: name) != nil else {
            throw LnoteError(.notFound, "no remote named \"\(PrintableText.escaped(name))\" is saved" + knownNames)
        }
        defaultName = name
    }

    /// "; saved: a, b" or "; none is saved (add one with lnote remote add)".
    var knownNames: String {
        remotes.isEmpty ? "; none is saved (add one with lnote remote add NAME URL-or-FOLDER)"
                        : "; saved: " + remotes.map(\.name).joined(separator: ", ")
    }

    // MARK: - The file ([PKG-101])

    struct File: Codable, Equatable {
        var format: Int
        var `default`: String?
        var remotes: [SavedRemote]
    }

    /// `.lnote/saved-remotes.json` of a notebook folder.
    public static func path(notebook folder: String) -> String {
        DurableFile.join(DurableFile.join(folder, ".lnote"), "saved-remotes.json")
    }

    /// Reads a folder's saved remotes (none when the file does not exist).
    /// - Throws: `corrupt` naming the file when it does not decode or breaks a rule of
    ///   [PKG-101] (a bad name, a name twice, a default that names no remote).
    public static func load(notebook folder: String) throws -> SavedRemotes {
        try load(path(notebook: folder), io: .live)
    }

    static func load(_ path: String, io: Syscalls) throws -> SavedRemotes {
        do {
            return try decode(path, io: io)
        } catch var e as LnoteError where e.code == .corrupt || e.code == .unsupportedVersion {
            e.message += "; fix the file, or remove it and save the remotes again with lnote remote add"
            throw e
        }
    }

    private static func decode(_ path: String, io: Syscalls) throws -> SavedRemotes {
        guard let bytes = try DurableFile.readIfExists(path, io: io) else { return SavedRemotes() }
        let file = try StoreJSON.decode(File.self, bytes, path: path)
        guard file.format == 1 else {
            throw LnoteError(.unsupportedVersion, "saved remotes format \(file.format) is not known (this lnote reads 1)", path: path)
        }
        var out = SavedRemotes()
        for r in file.remotes {
            do { try out.add(r) } catch let e as LnoteError {
                throw LnoteError(.corrupt, e.message, path: path)
            }
        }
        // [PKG-101] `default` names a saved remote, and is there exactly when one is saved.
        switch (file.default, file.remotes.isEmpty) {
        case (let d?, false):
            guard out.remote(named: d) != nil else {
                throw LnoteError(.corrupt, "the default remote \"\(PrintableText.escaped(d))\" is not among the saved ones", path: path)
            }
            out.defaultName = d
        case (nil, true):
            break
        case (nil, false):
            throw LnoteError(.corrupt, "remotes are saved but none is the default", path: path)
        case (.some, true):
            throw LnoteError(.corrupt, "a default remote is named but none is saved", path: path)
        }
        return out
    }

    /// Reads, changes and writes a folder's saved remotes under the notebook lock: a
    /// durable replace ([PKG-20]) of a file of mode 0600. Returns what `change` returned.
    @discardableResult
    public static func update<T>(notebook folder: String, _ change: (inout SavedRemotes) throws -> T) throws -> T {
        let io = Syscalls.live
        let path = path(notebook: folder)
        return try FileLock.notebook(folder, io: io, timeout: .seconds(10)).withLock {
            var remotes = try load(path, io: io)
            let result = try change(&remotes)
            let file = File(format: 1, default: remotes.defaultName, remotes: remotes.remotes)
            try DurableFile.replace(path, with: try StoreJSON.encode(file), io: io, mode: 0o600)
            return result
        }
    }
}
