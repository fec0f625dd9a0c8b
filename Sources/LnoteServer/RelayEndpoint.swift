import LnoteModel
import LnoteSync

/// One notebook of a relay, served over the sync protocol: the relay's counterpart of
/// `NotebookEndpoint`, backed by a `RelayStore` (see `RelayStore.sync` for the semantics).
///
/// The `document` argument of the asset calls is not used for storage: assets are shared
/// by the documents of a notebook. Each call runs on the store's dispatch queue, so the
/// blocking database work stays off Swift concurrency's shared threads.
public struct RelayEndpoint: SyncEndpoint {
    public let store: RelayStore
    public let notebook: NotebookID
    /// The device whose token opened this endpoint ([SYNC-57]); nil for a caller in this
    /// process, for which owners are neither checked nor recorded.
    public let device: String?

    /// Prefer `RelayStore.endpoint(notebook:device:)`, which checks that the notebook exists.
    public init(store: RelayStore, notebook: NotebookID, device: String? = nil) {
        self.store = store
        self.notebook = notebook
        self.device = device
    }

    public func sync(_ request: SyncRequest) async throws -> SyncResponse {
        let notebook = notebook, device = device
        return try await store.perform { try $0.sync(request, notebook: notebook, device: device) }
    }

    /// The owners of the notebook's replica ids ([SYNC-57]), sorted by replica id.
    public func owners() async throws -> [ReplicaOwner] {
        let notebook = notebook
        return try await store.perform { try $0.owners(notebook: notebook) }
    }

    public func missingAssets(_ ids: [AssetID], document: DocumentID) async throws -> [AssetID] {
        let notebook = notebook
        return try await store.perform { try $0.missingAssets(ids, notebook: notebook) }
    }

    @discardableResult
    public func putAsset(_ bytes: [UInt8], id: AssetID, document: DocumentID) async throws -> Bool {
        let notebook = notebook
        return try await store.perform { try $0.putAsset(bytes, id: id, notebook: notebook) }
    }

    public func getAsset(_ id: AssetID, document: DocumentID) async throws -> [UInt8] {
        let notebook = notebook
        return try await store.perform { try $0.asset(id, notebook: notebook) }
    }

    public func putCheckpoint(_ checkpoint: Checkpoint) async throws {
        let notebook = notebook
        _ = try await store.perform { try $0.putCheckpoint(notebook: notebook, checkpoint: checkpoint) }
    }

    public func checkpoints() async throws -> [Checkpoint] {
        let notebook = notebook
        return try await store.perform { try $0.checkpoints(notebook: notebook) }
    }
}
