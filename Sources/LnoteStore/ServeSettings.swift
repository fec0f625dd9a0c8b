import Foundation
import LnoteModel

/// What `lnote serve` keeps across restarts for a folder ([PKG-102]): the bearer token it
/// generated and the port it got, so that the URL and token a peer saved keep working. In
/// `.lnote/serve.json`, mode 0600 (the token is a secret), written by durable replace under
/// the notebook lock.
public struct ServeSettings: Sendable, Equatable, Codable {
    public var format: Int = 1
    /// 32 to 256 hex digits ([SYNC-28]).
    public var token: String
    /// The port last served on (1…65535).
    public var port: Int

    public init(token: String, port: Int) {
        self.token = token
        self.port = port
    }

    /// `.lnote/serve.json` of a notebook folder.
    public static func path(notebook folder: String) -> String {
        DurableFile.join(DurableFile.join(folder, ".lnote"), "serve.json")
    }

    /// The folder's saved settings; nil when it was never served.
    /// - Throws: `corrupt` naming the file when it does not decode or holds a port out of
    ///   range; `unsupportedVersion` for another format.
    public static func load(notebook folder: String) throws -> ServeSettings? {
        let path = path(notebook: folder)
        guard let bytes = try DurableFile.readIfExists(path, io: .live) else { return nil }
        let fix = "; fix the file, or remove it (the next lnote serve makes a new token and takes a free port)"
        let s: ServeSettings
        do { s = try StoreJSON.decode(ServeSettings.self, bytes, path: path) } catch var e as LnoteError {
            e.message += fix
            throw e
        }
        guard s.format == 1 else {
            throw LnoteError(.unsupportedVersion, "serve settings format \(s.format) is not known (this lnote reads 1)" + fix, path: path)
        }
        guard (1...65535).contains(s.port) else { throw LnoteError(.corrupt, "port \(s.port) is not 1...65535" + fix, path: path) }
        let hex = s.token.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) || (0x41...0x46).contains($0) }
        guard hex, (32...256).contains(s.token.utf8.count) else {
            throw LnoteError(.corrupt, "the token is not 32 to 256 hex digits" + fix, path: path)
        }
        return s
    }

    /// Saves them, durably, mode 0600.
    public func save(notebook folder: String) throws {
        let io = Syscalls.live
        let bytes = try StoreJSON.encode(self)
        try FileLock.notebook(folder, io: io, timeout: .seconds(10)).withLock {
            try DurableFile.replace(Self.path(notebook: folder), with: bytes, io: io, mode: 0o600)
        }
    }
}
