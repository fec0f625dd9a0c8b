import LnoteModel

/// Where a sync goes: an HTTP(S) endpoint, or an endpoint reached in-process (another
/// notebook folder on a mounted drive).
public protocol SyncRemote: Sendable {
    /// Identifies the remote for the sync bookkeeping kept beside the notebook.
    var key: String { get }
    /// One request/response exchange.
    func sync(_ request: SyncRequest) async throws -> SyncResponse
    func missingAssets(_ ids: [AssetID], document: DocumentID) async throws -> [AssetID]
    func putAsset(_ bytes: [UInt8], id: AssetID, document: DocumentID) async throws
    func getAsset(_ id: AssetID, document: DocumentID) async throws -> [UInt8]
    /// Bytes sent and received so far through this remote (0 for in-process remotes).
    var traffic: (sent: Int, received: Int) { get }
    /// The checkpoints the remote keeps (§5); [] when it keeps none.
    func checkpoints() async throws -> [Checkpoint]
    /// Uploads a checkpoint (§5).
    /// - Throws: `.notFound` when the remote keeps no checkpoints (not a relay).
    func putCheckpoint(_ checkpoint: Checkpoint) async throws
    /// False when the remote's change cursors do not outlive this process (a folder reached
    /// directly gets a new in-memory endpoint each time): the session then starts with a
    /// clock comparison instead of offering a cursor that would only be refused.
    var cursorsOutliveProcess: Bool { get }
    /// The device that owns each replica id ([SYNC-57]); empty when the remote does not say.
    func devices() async throws -> [ReplicaID: String]
    /// Whether `sync` may carry `wait` ([SYNC-70]): the remote holds the request until it
    /// has something this side lacks. False for a folder reached directly (its changes are
    /// noticed on disk).
    var supportsLongPolls: Bool { get }
    /// Installs what is told the bytes of each transfer as they move (nil: removes it), so
    /// that a progress indicator moves while one large answer arrives. Called on the
    /// transfer's thread: it must be quick and thread-safe. A remote that moves no bytes
    /// (a folder) never calls it.
    func observeTransfers(_ observer: (@Sendable (TransferProgress) -> Void)?)
}

/// Bytes moved through a remote so far, the transfer in flight included.
public struct TransferProgress: Sendable, Equatable {
    /// Bytes sent and received since the remote was made: every finished exchange (as
    /// `SyncRemote.traffic` counts it) plus what the transfer in flight moved so far.
    public var sent: Int
    public var received: Int
    /// The body of the answer in flight: bytes received so far, and its length when the
    /// server said (0: not known yet).
    public var receiving: Int
    public var receivingTotal: Int

    public init(sent: Int, received: Int, receiving: Int, receivingTotal: Int) {
        self.sent = sent
        self.received = received
        self.receiving = receiving
        self.receivingTotal = receivingTotal
    }
}

extension SyncRemote {
    public var cursorsOutliveProcess: Bool { true }
    public var supportsLongPolls: Bool { false }
    public func observeTransfers(_ observer: (@Sendable (TransferProgress) -> Void)?) {}
    public func devices() async throws -> [ReplicaID: String] { [:] }
}

/// A remote endpoint called directly, with no network: folder-to-folder sync.
/// Bodies still go through the binary codec so the path is the one HTTP takes.
public struct LocalRemote: SyncRemote {
    public let key: String
    public let endpoint: any SyncEndpoint
    public let cursorsOutliveProcess: Bool

    /// - Parameter cursorsOutliveProcess: false when `endpoint` is made for this sync only
    ///   (folder-to-folder sync), true when it lives as long as the remote's saved state.
    public init(key: String, endpoint: any SyncEndpoint, cursorsOutliveProcess: Bool = true) {
        self.key = key
        self.endpoint = endpoint
        self.cursorsOutliveProcess = cursorsOutliveProcess
    }

    /// - Throws: the `LnoteError` of a `SyncRefusal` (what the HTTP binding's client reports
    ///   for the same 409), or the endpoint's `LnoteError`.
    public func sync(_ request: SyncRequest) async throws -> SyncResponse {
        let answer: SyncResponse
        do {
            answer = try await endpoint.sync(try SyncCodec.decodeRequest(SyncCodec.encode(request)))
        } catch let r as SyncRefusal {
            throw r.error
        }
        return try SyncCodec.decodeResponse(SyncCodec.encode(answer))
    }
    public func missingAssets(_ ids: [AssetID], document: DocumentID) async throws -> [AssetID] {
        try await endpoint.missingAssets(ids, document: document)
    }
    public func putAsset(_ bytes: [UInt8], id: AssetID, document: DocumentID) async throws {
        _ = try await endpoint.putAsset(bytes, id: id, document: document)
    }
    public func getAsset(_ id: AssetID, document: DocumentID) async throws -> [UInt8] {
        try await endpoint.getAsset(id, document: document)
    }
    public var traffic: (sent: Int, received: Int) { (0, 0) }
    // Checkpoints: the defaults below (a folder keeps none; `.notFound` as a peer's 404).

    /// The other folder's device names ([SYNC-57]).
    public func devices() async throws -> [ReplicaID: String] { try await endpoint.deviceNames() ?? [:] }
}

/// Remotes that keep no checkpoints (a peer, a test double) need not say so.
extension SyncRemote {
    public func checkpoints() async throws -> [Checkpoint] { [] }
    public func putCheckpoint(_ checkpoint: Checkpoint) async throws {
        throw LnoteError(.notFound, "\(key) keeps no checkpoints (only a relay does)")
    }
}
