import Foundation
import LnoteModel
import LnoteStore
import LnoteSync

/// `lnote serve`: one notebook folder served over the sync protocol, so that another
/// machine can sync with it directly.
///
/// The folder stays open (and locked) while serving. Requests need the bearer token; only
/// its SHA-256 is kept in memory. Requests run on libmicrohttpd's threads (one per
/// connection), the sync work on Swift's executor.
public final class PeerServer: Sendable {
    public let http: HTTPServer
    public let endpoint: NotebookEndpoint
    /// The one notebook id this server answers to (`Protocol/sync-protocol.md` [SYNC-11]):
    /// derived from the served folder's replica id, so it stays the same across restarts
    /// and changes when the folder becomes another replica (copied or moved, [PKG-60]).
    /// Any other id is 404 `not_found` after the token check: a client configured for
    /// another notebook never merges its notebook into this one.
    public let notebookID: UUID

    public init(notebook: Notebook, token: String, configuration: HTTPServer.Configuration = .init()) throws {
        let endpoint = NotebookEndpoint(notebook: notebook)
        let digest = TokenDigest(token: token)
        let id = Self.notebookID(replica: notebook.replica)
        let service = SyncHTTPService(kind: "peer", maxBodyBytes: configuration.maxRequestBodyBytes,
                                      authorize: { t, _ in
                                          guard let t else { return .unauthorized }
                                          return digest.matches(t) ? .ok : .unauthorized
                                      },
                                      endpoint: { nb in nb == id ? endpoint : nil })
        self.endpoint = endpoint
        notebookID = id
        http = try HTTPServer(configuration: configuration, handler: service.handle)
    }

    /// [SYNC-11] The replica id as 8 bytes little-endian, then the ASCII bytes `lnotepee`,
    /// with the UUID version (byte 6: high nibble 4) and variant (byte 8: top bits `10`)
    /// set over them.
    public static func notebookID(replica: ReplicaID) -> UUID {
        let r = replica.rawValue
        var bytes = (0..<8).map { UInt8(truncatingIfNeeded: r >> (8 * $0)) } + Array("lnotepee".utf8)
        bytes[6] = (bytes[6] & 0x0f) | 0x40
        bytes[8] = (bytes[8] & 0x3f) | 0x80
        return UUID(bytes: bytes)!
    }

    /// The notebook URL clients pass to `lnote sync`.
    public var url: String { "\(http.baseURL)/v1/notebooks/\(notebookID.uuidString)" }

    public func close() throws { try http.close() }
}

/// `lnote relay`: a store-and-forward sync server for many notebooks, keeping operations,
/// assets and checkpoints in SQLite. It needs no notebook folder.
public final class RelayServer: Sendable {
    public let http: HTTPServer
    public let store: RelayStore

    public init(store: RelayStore, configuration: HTTPServer.Configuration = .init()) throws {
        self.store = store
        let service = SyncHTTPService(kind: "relay", maxBodyBytes: configuration.maxRequestBodyBytes,
                                      authorize: { t, nb in try store.authorize(token: t, notebook: NotebookID(nb)) },
                                      endpoint: { nb in try store.endpoint(notebook: NotebookID(nb)) })
        http = try HTTPServer(configuration: configuration, handler: service.handle)
    }

    /// The URL of one notebook on this relay.
    public func url(notebook: NotebookID) -> String { "\(http.baseURL)/v1/notebooks/\(notebook.uuid.uuidString)" }

    public func close() throws { try http.close() }
}
