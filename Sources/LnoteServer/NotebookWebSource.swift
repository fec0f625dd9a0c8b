import LnoteModel
import LnoteReplication
import LnoteStore
import LnoteSync

/// The web view's source for a served folder (`lnote serve`, [SYNC-90]): the notebook's
/// documents as they are on disk now. Reads only: a stale cover is drawn for the answer, not
/// stored (the view is read-only; the folder's own thumbnail work stores pictures).
///
/// Each call holds the served folder's request lock (`SerialEndpoint`'s) while it reads, so
/// it never interleaves with a sync's opening and closing of documents; drawing happens
/// after, without the lock.
public struct NotebookWebSource: WebViewSource {
    public let notebook: Notebook
    let lock: AsyncLock

    public init(notebook: Notebook) { self.init(notebook: notebook, lock: AsyncLock()) }

    init(notebook: Notebook, lock: AsyncLock) {
        self.notebook = notebook
        self.lock = lock
    }

    /// Runs `body` on a live document, or answers nil when the folder has no such document
    /// or it is deleted. The document's lease is given back whatever `body` does.
    func withLiveDocument<T: Sendable>(_ id: DocumentID, _ body: (Document) async throws -> T) async throws -> T? {
        try await lock.run {
            guard try await notebook.holdsDocument(id) else { return nil }
            let d = try await notebook.openDocument(id)
            do {
                let result: T? = await d.state.deleted.value ? nil : try await body(d)
                try await d.close()
                return result
            } catch {
                try? await d.close()
                throw error
            }
        }
    }

    public func library() async throws -> [WebViewDocument] {
        try await lock.run {
            try await notebook.list().map {
                WebViewDocument(id: $0.id, title: $0.title, pageCount: $0.pageCount, modified: $0.modified)
            }
        }
    }

    public func document(_ id: DocumentID) async throws -> WebViewPages? {
        try await withLiveDocument(id) { d in
            WebViewPages(id: id, title: await d.title, pages: await d.pageList.map { .init(id: $0.id, canvas: $0.canvas) })
        }
    }

    public func page(_ page: PageID, of document: DocumentID) async throws -> WebViewPage? {
        try await withLiveDocument(document) { d -> WebViewPage? in
            guard await d.pageList.contains(where: { $0.id == page }) else { return nil }
            let r = try await d.renderable(page)
            return WebViewPage(state: r.state, canvas: r.canvas, assets: r.assets)
        } ?? nil
    }

    public func storedCover(_ document: DocumentID) async throws -> [UInt8]? {
        try await withLiveDocument(document) { d -> [UInt8]? in
            guard let first = await d.pageList.first,
                  let stored = d.storedThumbnail(page: first.id), let stamp = stored.stamp else { return nil }
            return try await d.thumbnailStamp(page: first.id) == stamp ? stored.bytes : nil
        } ?? nil
    }

    public func conflicts() async throws -> [WebViewConflicts] {
        var out: [WebViewConflicts] = []
        for summary in try await library() {
            let found = try await withLiveDocument(summary.id) { d in
                WebViewConflicts(document: d.id, title: await d.title, livePages: await d.pageList.map(\.id),
                                 conflicts: try await d.allConflicts())
            }
            if let found, !found.conflicts.isEmpty { out.append(found) }
        }
        return out
    }

    public func deviceNames() async throws -> [ReplicaID: String] {
        try await notebook.deviceNames()
    }
}
