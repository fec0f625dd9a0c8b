import LnoteModel
import LnoteReplication

/// What the sync engine needs from a replica's storage: a notebook folder, or anything
/// else that holds logs (a test's in-memory replicas).
///
/// Implementations keep every operation they hold (applied or waiting) in their logs,
/// append received ones durably before applying them, and never hold a page operation
/// that references an asset they lack.
public protocol SyncableNotebook: Sendable {
    /// The replica this storage writes as.
    var replicaID: ReplicaID { get }
    /// The applied clock of every log held (documents and pages), sorted by log.
    func logClocks() async throws -> [LogClock]
    /// Operations held in `log` (applied or waiting) whose ids `clock` does not cover, as
    /// frames in the order the log holds them.
    func frames(in log: LogRef, notCoveredBy clock: VectorClock) async throws -> [Frame]
    /// `frames(in:notCoveredBy:)` for serving a peer: a storage that cannot give every
    /// operation `clock` lacks (a page installed from a checkpoint) throws `SyncRefusal`
    /// (`historyNotHeld`, [SYNC-43]) rather than an error the peer could not tell apart.
    func framesForPeer(in log: LogRef, notCoveredBy clock: VectorClock) async throws -> [Frame]
    /// Appends and applies received operations (those already held are skipped). Returns
    /// how many were new. Documents and pages that did not exist are created.
    func receive(_ batches: [LogBatch]) async throws -> Int
    /// True when the asset is held for the document: stored with it, or received for it
    /// and waiting for the operations that reference it ([SYNC-10]).
    func hasAsset(_ id: AssetID, document: DocumentID) async throws -> Bool
    func readAsset(_ id: AssetID, document: DocumentID) async throws -> [UInt8]
    /// Stores an asset received for a document durably (content-addressed: the id is the
    /// bytes' SHA-256), whether or not the document is held yet, where nothing removes it
    /// before the operations that reference it arrive by `receive` ([SYNC-10]).
    func writeAsset(_ bytes: [UInt8], document: DocumentID) async throws -> AssetID
    /// Sync bookkeeping per remote (opaque bytes), kept durably beside the notebook.
    func loadRemoteState(key: String) async throws -> [UInt8]?
    func saveRemoteState(_ bytes: [UInt8], key: String) async throws
    /// True when the storage holds no document (a newcomer, which may install checkpoints).
    func holdsNoDocuments() async throws -> Bool
    /// Creates a document from page checkpoint states and the assets they reference,
    /// atomically; its operations (document log, page tails) arrive by sync afterwards.
    func installCheckpoint(document: DocumentID, pages: [PageState], assets: [[UInt8]]) async throws
    /// A page log's applied state, to upload as a checkpoint (nil: none held).
    func checkpointState(of log: LogRef) async throws -> PageState?
}

/// Storage that knows nothing of checkpoints: never a newcomer, uploads none, and holds the
/// whole history of every log.
extension SyncableNotebook {
    public func framesForPeer(in log: LogRef, notCoveredBy clock: VectorClock) async throws -> [Frame] {
        try await frames(in: log, notCoveredBy: clock)
    }
    public func holdsNoDocuments() async throws -> Bool { false }
    public func installCheckpoint(document: DocumentID, pages: [PageState], assets: [[UInt8]]) async throws {
        throw LnoteError(.invalidState, "this storage cannot install checkpoints")
    }
    public func checkpointState(of log: LogRef) async throws -> PageState? { nil }
}

extension Op {
    /// The assets this operation references (an image add references one).
    public var referencedAssets: [AssetID] {
        if case .add(.image(let i), _) = body { return [i.asset] }
        return []
    }
}
