import Foundation
import LnoteModel
import LnoteStore
import LnoteSync

/// The documents a peer server keeps open between requests.
///
/// A notebook's sync calls open a document for the call and close it after: a served
/// document was decoded from its snapshot, then snapshotted and given a new thumbnail, for
/// every request that touched it, so each round of a busy page cost more than the one before
/// (8 clients × 50 rounds took 9 × the time of 12 rounds). The server holds a lease of its own
/// on the documents the last requests touched, at most `limit` of them, and gives back those
/// idle for `idle`: the notebook's calls then find them open and leave them open. What a
/// request stores is durable when it is answered (the logs are synced, [PKG-34]); holding a
/// document open only defers its snapshot, which its close (eviction, idleness, the server's
/// notebook closing) writes.
actor WarmDocuments {
    private let notebook: Notebook
    private let limit: Int
    private let idle: Duration
    private var held: [DocumentID: (document: Document, lastUse: ContinuousClock.Instant)] = [:]
    private var stopped = false

    init(notebook: Notebook, limit: Int, idle: Duration) {
        self.notebook = notebook
        self.limit = limit
        self.idle = idle
    }

    /// The documents of `logs` that the folder holds, held open from now (opened when not
    /// held yet) and marked used now; the least recently used beyond `limit` are given back.
    /// A document that does not open is left to the calls that need it (they report why).
    func touch(_ logs: some Sequence<LogRef>) async {
        guard !stopped, limit > 0 else { return }
        let now = ContinuousClock.now
        var ids = Set<DocumentID>()
        for log in logs { ids.insert(log.document) }
        let present = Set((try? await notebook.documentIDs()) ?? [])
        for id in ids.sorted() where present.contains(id) {
            if held[id] != nil {
                held[id]!.lastUse = now
            } else if let d = try? await notebook.openDocument(id) {
                // `stopped` may have been set while opening.
                guard !stopped else {
                    try? await d.close()
                    return
                }
                held[id] = (d, now)
            }
        }
        while held.count > limit, let oldest = held.min(by: { $0.value.lastUse < $1.value.lastUse })?.key {
            await giveBack(oldest)
        }
    }

    /// Gives back the documents not used for `idle`.
    func closeIdle() async {
        let now = ContinuousClock.now
        for (id, e) in held where now - e.lastUse >= idle { await giveBack(id) }
    }

    /// Gives back every document held, and holds none from now on.
    func stop() async {
        stopped = true
        for id in held.keys.sorted() { await giveBack(id) }
    }

    /// How many documents are held (for tests and `stats`).
    var count: Int { held.count }

    private func giveBack(_ id: DocumentID) async {
        guard let e = held.removeValue(forKey: id) else { return }
        // The lease's close saves what changed; a failure there is the notebook's to report
        // to the next caller (the handle is closed either way).
        try? await e.document.close()
    }
}

/// Holds the documents a request pushes to open while it runs, and those it touched
/// afterwards (`WarmDocuments`). Inside `SerialEndpoint`: one request at a time.
struct WarmEndpoint: SyncEndpointWrapper {
    let inner: any SyncEndpoint
    let warm: WarmDocuments
    var wrapped: any SyncEndpoint { inner }

    func sync(_ request: SyncRequest) async throws -> SyncResponse {
        // Before: so that the request's own calls find the documents it pushes to open.
        await warm.touch(request.push.map(\.log))
        let response = try await inner.sync(request)
        await warm.touch(request.push.map(\.log) + response.pull.map(\.log))
        return response
    }
}
