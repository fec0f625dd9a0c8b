import Foundation
import Synchronization
import LnoteModel
import LnoteReplication
import LnoteStore
import LnoteSync

/// `lnote serve`: one notebook folder served over the sync protocol, so that another
/// machine can sync with it directly.
///
/// The folder stays open (and locked) while serving. Requests need the bearer token; only
/// its SHA-256 is kept in memory. libmicrohttpd polls the connections (epoll) and suspends
/// each request while the sync work runs on Swift's executor, so long polls ([SYNC-70])
/// hold no thread; they are woken by `changes` (by default the folder's logs growing,
/// `FolderLogSignal`).
public final class PeerServer: Sendable {
    public let http: HTTPServer
    public let endpoint: NotebookEndpoint
    /// The long polls held ([SYNC-71]).
    public let longPolls: LongPolls
    /// What wakes them ([SYNC-72]).
    public let changes: any ChangeSignal
    /// The one notebook id this server answers to (`Protocol/sync-protocol.md` [SYNC-11]):
    /// derived from the served folder's replica id, so it stays the same across restarts
    /// and changes when the folder becomes another replica (copied or moved, [PKG-60]).
    /// Any other id is 404 `not_found` after the token check: a client configured for
    /// another notebook never merges its notebook into this one.
    public let notebookID: UUID

    /// Starts serving.
    /// - Parameters:
    ///   - token: the bearer token requests must carry: 32 to 256 hex digits ([SYNC-28]).
    ///   - changes: what tells that the notebook may have gained operations (default: its
    ///     folder's logs, `FolderLogSignal`); started here, stopped by `close()`.
    /// - Throws: `.invalidArgument` for a weak token (`RelayToken.checkServerToken`), before
    ///   anything starts; what `HTTPServer` throws; what `changes.start` throws.
    public init(notebook: Notebook, token: String, configuration: HTTPServer.Configuration = .init(),
                changes: (any ChangeSignal)? = nil) throws {
        try RelayToken.checkServerToken(token)
        let endpoint = NotebookEndpoint(notebook: notebook)
        let digest = TokenDigest(token: token)
        let id = Self.notebookID(replica: notebook.replica)
        let refusals = RefusedDocumentsLog()
        let lock = AsyncLock()
        let owned = SerialEndpoint(inner: ReportingEndpoint(inner: OwnReplicaEndpoint(inner: endpoint, notebook: notebook),
                                                            notebook: notebook, log: refusals), lock: lock)
        let view = WebView(notebook: id, source: NotebookWebSource(notebook: notebook, lock: lock))
        let polls = LongPolls()
        let service = SyncHTTPService(kind: "peer", maxBodyBytes: configuration.maxRequestBodyBytes, longPolls: polls,
                                      authorize: { t, _ in
                                          guard let t else { return Access(.unauthorized) }
                                          return Access(digest.matches(t) ? .ok : .unauthorized)
                                      },
                                      endpoint: { nb, _ in nb == id ? owned : nil },
                                      view: { nb in nb == id ? view : nil })
        self.endpoint = endpoint
        notebookID = id
        longPolls = polls
        let signal = changes ?? FolderLogSignal(folder: notebook.path)
        self.changes = signal
        try signal.start { polls.bump(id) }
        do {
            http = try HTTPServer(configuration: configuration.answeringShutdownAsSync, admission: service.admit,
                                  asyncHandler: service.respond)
        } catch {
            signal.stop()
            throw error
        }
        let http = self.http
        refusals.connect { http.log($0) }
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

    /// [SYNC-91] The web view's entry URL, the token in its fragment.
    public func viewURL(token: String) -> String { WebView.url(baseURL: http.baseURL, notebook: notebookID, token: token) }

    /// Answers the long polls it holds 503 ([SYNC-74]), stops watching, stops serving.
    /// Idempotent.
    public func close() throws {
        longPolls.close()
        changes.stop()
        try http.close()
    }
}

/// An endpoint that changes how `sync` is answered and passes the asset calls on to the one
/// it wraps unchanged.
protocol SyncEndpointWrapper: SyncEndpoint {
    /// The endpoint the asset calls go to.
    var wrapped: any SyncEndpoint { get }
}

extension SyncEndpointWrapper {
    func missingAssets(_ ids: [AssetID], document: DocumentID) async throws -> [AssetID] {
        try await wrapped.missingAssets(ids, document: document)
    }

    @discardableResult
    func putAsset(_ bytes: [UInt8], id: AssetID, document: DocumentID) async throws -> Bool {
        try await wrapped.putAsset(bytes, id: id, document: document)
    }

    func getAsset(_ id: AssetID, document: DocumentID) async throws -> [UInt8] {
        try await wrapped.getAsset(id, document: document)
    }

    func deviceNames() async throws -> [ReplicaID: String]? { try await wrapped.deviceNames() }
}

/// A served folder answers one request at a time: held long polls look again at each
/// change, and a notebook's sync calls open and close its documents, so two requests
/// interleaved at their `await`s could close a document under each other. Requests are
/// short; a held long poll does not hold the lock while it waits (only while it answers).
struct SerialEndpoint: SyncEndpoint {
    let inner: any SyncEndpoint
    /// Shared with the web view's reads of the folder (`NotebookWebSource`).
    let lock: AsyncLock

    func sync(_ request: SyncRequest) async throws -> SyncResponse { try await lock.run { try await inner.sync(request) } }
    func missingAssets(_ ids: [AssetID], document: DocumentID) async throws -> [AssetID] {
        try await lock.run { try await inner.missingAssets(ids, document: document) }
    }
    @discardableResult
    func putAsset(_ bytes: [UInt8], id: AssetID, document: DocumentID) async throws -> Bool {
        try await lock.run { try await inner.putAsset(bytes, id: id, document: document) }
    }
    func getAsset(_ id: AssetID, document: DocumentID) async throws -> [UInt8] {
        try await lock.run { try await inner.getAsset(id, document: document) }
    }
    func deviceNames() async throws -> [ReplicaID: String]? { try await lock.run { try await inner.deviceNames() } }
}

/// [SYNC-83] Puts each document the served folder leaves out ([PKG-22]: its package holds a
/// symlink, FIFO… where a file belongs) on the server's log, the first time a sync finds it
/// and again only when the reason changes: one line per document and reason, however many
/// requests meet it. The operator learns why a document does not travel; the client is told
/// nothing of it ([SYNC-81]).
struct ReportingEndpoint: SyncEndpointWrapper {
    let inner: any SyncEndpoint
    var wrapped: any SyncEndpoint { inner }
    let notebook: Notebook
    let log: RefusedDocumentsLog

    func sync(_ request: SyncRequest) async throws -> SyncResponse {
        do {
            let answer = try await inner.sync(request)
            log.report(await notebook.refusedDocuments)
            return answer
        } catch {
            log.report(await notebook.refusedDocuments)
            throw error
        }
    }

}

/// The documents `ReportingEndpoint` has logged, with their reasons, and where it logs.
final class RefusedDocumentsLog: Sendable {
    private let state = Mutex<(reported: [DocumentID: String], sink: (@Sendable (String) -> Void)?)>(([:], nil))

    /// Sets where lines go (the server's log, once it exists).
    func connect(_ sink: @escaping @Sendable (String) -> Void) {
        state.withLock { $0.sink = sink }
    }

    /// Logs the documents of `refused` not logged yet with the same reason, in id order.
    func report(_ refused: [DocumentID: LnoteError]) {
        guard !refused.isEmpty else { return }
        let (lines, sink) = state.withLock { s -> ([String], (@Sendable (String) -> Void)?) in
            var lines: [String] = []
            for (id, e) in refused.sorted(by: { $0.key < $1.key }) where s.reported[id] != e.description {
                s.reported[id] = e.description
                lines.append("skipped document \(id): \(e.description)")
            }
            return (lines, s.sink)
        }
        guard let sink else { return }
        for line in lines { sink(line) }
    }
}

/// [SYNC-57] A notebook endpoint that owns its folder's replica id: a push holding an
/// operation authored under it that the folder does not hold is refused whole (403
/// `forbidden`), since only the folder itself writes under its id. Operations it holds
/// (their ids are covered by its clock of their log) go through as duplicates: the
/// notebook drops them, or reports a fork ([SYNC-51]) and stores nothing.
struct OwnReplicaEndpoint: SyncEndpointWrapper {
    let inner: NotebookEndpoint
    var wrapped: any SyncEndpoint { inner }
    /// The notebook `inner` serves.
    let notebook: any SyncableNotebook
    /// Who the refusal names as the owner.
    static let owner = "this peer server (lnote serve)"

    func sync(_ request: SyncRequest) async throws -> SyncResponse {
        // The folder's replica id now (a folder that finds itself restored takes a new one,
        // [SYNC-55]). Ids are read from the frames' first bytes; the endpoint decodes everything.
        let replica = notebook.replicaID
        var own: [(log: LogRef, id: OpID)] = []
        for batch in request.push {
            for frame in batch.frames {
                if let id = OperationCodec.id(of: frame), id.replica == replica { own.append((batch.log, id)) }
            }
        }
        if !own.isEmpty {
            let clocks = Dictionary(try await notebook.logClocks().map { ($0.log, $0.clock) },
                                    uniquingKeysWith: { $0.merged($1) })
            if let new = own.first(where: { !(clocks[$0.log]?.covers($0.id) ?? false) }) {
                // A malformed push is refused as malformed (400), whoever it names.
                for batch in request.push { for i in batch.frames.indices { _ = try batch.op(at: i, path: "push") } }
                throw ServerRefusal.replicaOwned(replica, owner: Self.owner, operation: new.id, log: new.log)
            }
        }
        return try await inner.sync(request)
    }

}

/// `lnote relay`: a store-and-forward sync server for many notebooks, keeping operations,
/// assets and checkpoints in SQLite. It needs no notebook folder.
///
/// Requests are suspended while they are answered (epoll, no thread per connection), the
/// SQLite work runs on the store's queue; long polls ([SYNC-70]) are held in `longPolls`
/// and woken when the store commits operations for their notebook (`observeChanges`).
public final class RelayServer: Sendable {
    /// The most long polls one token holds at once ([SYNC-73]): a device watches each of its
    /// notebooks with one; the 17th releases its oldest (answered at once).
    public static let maxLongPollsPerToken = 16
    public let http: HTTPServer
    public let store: RelayStore
    /// The long polls held ([SYNC-71]).
    public let longPolls: LongPolls
    private let observation: Int

    /// - Parameter viewLimit: the most bytes one web view answer reads of a notebook ([SYNC-95]).
    public init(store: RelayStore, configuration: HTTPServer.Configuration = .init(),
                viewLimit: Int = RelayStore.maxViewBytes) throws {
        self.store = store
        // [SYNC-73] Each relay token (a device) holds at most 16 long polls at once.
        let polls = LongPolls(maxPerHolder: RelayServer.maxLongPollsPerToken)
        longPolls = polls
        let service = SyncHTTPService(kind: "relay", maxBodyBytes: configuration.maxRequestBodyBytes, longPolls: polls,
                                      authorize: { t, nb in
                                          try await store.perform { try $0.access(token: t, notebook: NotebookID(nb)) }
                                      },
                                      endpoint: { nb, device in
                                          try await store.perform { try $0.endpoint(notebook: NotebookID(nb), device: device) }
                                      },
                                      // [SYNC-95] Materialized from the store for each request.
                                      view: { nb in
                                          WebView(notebook: nb, source: RelayWebSource(store: store, notebook: NotebookID(nb), limit: viewLimit))
                                      })
        observation = store.observeChanges { polls.bump($0.uuid) }
        do {
            http = try HTTPServer(configuration: configuration.answeringShutdownAsSync, admission: service.admit,
                                  asyncHandler: service.respond)
        } catch {
            store.stopObserving(observation)
            throw error
        }
    }

    /// The URL of one notebook on this relay.
    public func url(notebook: NotebookID) -> String { "\(http.baseURL)/v1/notebooks/\(notebook.uuid.uuidString)" }

    /// [SYNC-91] The web view's entry URL of one notebook, the token in its fragment.
    public func viewURL(notebook: NotebookID, token: String) -> String {
        WebView.url(baseURL: http.baseURL, notebook: notebook.uuid, token: token)
    }

    /// Answers the long polls it holds 503 ([SYNC-74]), then stops serving. Idempotent.
    public func close() throws {
        longPolls.close()
        store.stopObserving(observation)
        try http.close()
    }
}

extension HTTPServer.Configuration {
    /// This configuration, with requests ended by `stop()` or over the body budget answered as
    /// the sync protocol says ([SYNC-74], [SYNC-79]: 503 `unavailable`, JSON, `Retry-After: 1`,
    /// `Connection: close`), bodies over the size limit as 413 `too_large` in JSON
    /// ([SYNC-22], [SYNC-24]), and a body length told two ways as 400 `bad_request` in JSON
    /// ([SYNC-80]).
    var answeringShutdownAsSync: HTTPServer.Configuration {
        var c = self
        c.tooLargeResponse = SyncHTTPService.error(.tooLarge, "request body exceeds \(c.maxRequestBodyBytes) bytes")
        c.badFramingResponse = SyncHTTPService.error(.badRequest, "the body's length is told two ways: conflicting Content-Length "
                                                     + "values, or Content-Length with Transfer-Encoding")
        c.shutdownResponse = SyncHTTPService.error(.unavailable, "the server is shutting down; retry")
        c.overloadedResponse = SyncHTTPService.error(.unavailable, "too many request bodies in flight; retry")
        return c
    }
}
