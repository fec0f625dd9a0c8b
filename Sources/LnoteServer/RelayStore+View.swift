import Synchronization
import LnoteModel
import LnoteReplication
import LnoteStore
import LnoteSync

/// What the web view ([SYNC-95]) reads of a relay's notebook: its documents and pages
/// materialized in memory from the operations and checkpoints held, for one request, never
/// stored. One answer reads at most `maxViewBytes` of operation frames, checkpoint snapshots
/// and image assets, counted in one `ViewBudget` over every read the answer makes (a cover
/// reads the document log, then its first page and its assets): past that it is refused whole
/// (`.limitExceeded`, HTTP 413). An asset's length is read before its bytes.
extension RelayStore {
    /// The most bytes of frames, snapshots and image assets one view request reads (64 MiB).
    public static let maxViewBytes = 64 << 20

    /// Counts the bytes one view answer read, and refuses past its budget: one per answer,
    /// shared by every read the answer makes.
    final class ViewBudget: Sendable {
        let limit: Int
        private let taken = Mutex(0)
        init(limit: Int) { self.limit = limit }
        var used: Int { taken.withLock { $0 } }
        func take(_ n: Int, _ notebook: NotebookID) throws {
            let used = taken.withLock { u in
                u += n
                return u
            }
            guard used <= limit else {
                throw LnoteError(.limitExceeded, "notebook \(notebook) is too large for the web view (more than "
                                    + "\(limit >> 20) MiB of operations to read for one answer); sync it to a folder "
                                    + "and look at it there (lnote serve)")
            }
        }
    }

    /// Decodes one row's frame as one operation.
    private func viewOp(_ bytes: [UInt8]) throws -> Op {
        let frames = try Frame.decodeAll(bytes, path: path)
        guard frames.count == 1 else { throw LnoteError(.corrupt, "\(frames.count) frames in one row", path: path) }
        return try OperationCodec.decode(frames[0], path: path)
    }

    /// Every document of the notebook (deleted ones included) from its document logs, by id;
    /// only document `only` when given (nothing when the relay holds no operation of it).
    /// - Throws: `.notFound` for an unknown notebook; `.limitExceeded` past `limit`.
    public func viewDocuments(notebook: NotebookID, only: DocumentID? = nil,
                              limit: Int = RelayStore.maxViewBytes) throws -> [DocumentID: DocumentReplica] {
        try viewDocuments(notebook: notebook, only: only, budget: ViewBudget(limit: limit))
    }

    func viewDocuments(notebook: NotebookID, only: DocumentID? = nil, budget: ViewBudget) throws -> [DocumentID: DocumentReplica] {
        try database.transaction(.read) { tx in
            let (nb, _) = try row(of: notebook, tx)
            var ops: [DocumentID: [Op]] = [:]
            // The documents from their chains, then each log's operations by the leading
            // columns of the ops table's unique index (nb, document, page, …): a seek each,
            // never a scan of every operation of the notebook.
            let documents: [RelayValue] = if let only { [.blob(only.uuid.bytes)] } else {
                try tx.query("SELECT DISTINCT document FROM chains WHERE nb = ?1 AND page = ?2", [.integer(nb), .blob([])])
                    .map { $0[0] }
            }
            let q = try tx.prepare("SELECT frame FROM ops WHERE nb = ?1 AND document = ?2 AND page = ?3")
            for d in documents {
                let log = try Self.logRef(document: d, page: .blob([]), path: path)
                try q.forEach([.integer(nb), d, .blob([])]) { r in
                    let frame = r[0].bytes ?? []
                    try budget.take(frame.count, notebook)
                    ops[log.document, default: []].append(try viewOp(frame))
                    return true
                }
            }
            var out: [DocumentID: DocumentReplica] = [:]
            for (id, list) in ops {
                var replica = DocumentReplica(id: id)
                _ = try replica.receive(list)
                out[id] = replica
            }
            return out
        }
    }

    /// One page's state: its checkpoint when one is held, then the operations held past it.
    /// An empty page when nothing is held for its log.
    /// - Throws: `.notFound` for an unknown notebook; `.limitExceeded` past `limit`.
    public func viewPage(notebook: NotebookID, document: DocumentID, page: PageID,
                         limit: Int = RelayStore.maxViewBytes) throws -> PageReplica {
        try viewPage(notebook: notebook, log: LogRef(document: document, page: page), budget: ViewBudget(limit: limit))
    }

    func viewPage(notebook: NotebookID, log: LogRef, budget: ViewBudget) throws -> PageReplica {
        guard let page = log.page else { throw LnoteError(.invalidArgument, "a document log has no page state") }
        return try database.transaction(.read) { tx in
            let (nb, _) = try row(of: notebook, tx)
            let key: [RelayValue] = [.integer(nb), .blob(log.document.uuid.bytes), Self.pageColumn(log)]
            var replica = PageReplica(page: page)
            if let r = try tx.query("SELECT snapshot FROM checkpoints WHERE nb = ?1 AND document = ?2 AND page = ?3", key).first {
                let snapshot = r[0].bytes ?? []
                try budget.take(snapshot.count, notebook)
                // Checked when it was put ([SYNC-59]); decoded again as anything read is.
                let state = try PageSnapshot.decode(snapshot, path: path).state
                guard state.page == page else {
                    throw LnoteError(.corrupt, "the checkpoint of log \(log) holds page \(state.page)", path: path)
                }
                replica = PageReplica(state: state)
            }
            let replicas = try tx.query("SELECT replica FROM chains WHERE nb = ?1 AND document = ?2 AND page = ?3", key)
                .compactMap { $0[0].int64 }
            let q = try tx.prepare("""
                SELECT frame FROM ops WHERE nb = ?1 AND document = ?2 AND page = ?3 AND replica = ?4 AND counter > ?5
                ORDER BY counter
                """)
            var ops: [Op] = []
            for r in replicas {
                let from = replica.clock[ReplicaID(UInt64(bitPattern: r))]
                try q.forEach(key + [.integer(r), .integer(Int64(clamping: from))]) { row in
                    let frame = row[0].bytes ?? []
                    try budget.take(frame.count, notebook)
                    ops.append(try viewOp(frame))
                    return true
                }
            }
            _ = try replica.receive(ops)
            return replica
        }
    }

    /// Every page log the notebook holds operations or a checkpoint for, in one document.
    func viewPageLogs(notebook: NotebookID, document: DocumentID) throws -> Set<PageID> {
        try database.transaction(.read) { tx in
            let (nb, _) = try row(of: notebook, tx)
            let key: [RelayValue] = [.integer(nb), .blob(document.uuid.bytes), .blob([])]
            var out = Set<PageID>()
            for sql in ["SELECT DISTINCT page FROM chains WHERE nb = ?1 AND document = ?2 AND page <> ?3",
                        "SELECT page FROM checkpoints WHERE nb = ?1 AND document = ?2 AND page <> ?3"] {
                for r in try tx.query(sql, key) {
                    if let p = try Self.logRef(document: .blob(document.uuid.bytes), page: r[0], path: path).page { out.insert(p) }
                }
            }
            return out
        }
    }

    /// An image asset's bytes for the view, its length taken from the budget before they are
    /// read; nil when the relay does not hold it.
    func viewAsset(_ id: AssetID, notebook: NotebookID, budget: ViewBudget) throws -> [UInt8]? {
        try database.transaction(.read) { tx in
            let (nb, _) = try row(of: notebook, tx)
            let key: [RelayValue] = [.integer(nb), .text(id.description)]
            guard let length = try tx.query("SELECT length(bytes) FROM assets WHERE nb = ?1 AND id = ?2", key).first?.first?.int64
            else { return nil }
            try budget.take(Int(clamping: length), notebook)
            return try tx.query("SELECT bytes FROM assets WHERE nb = ?1 AND id = ?2", key).first?.first?.bytes
        }
    }

    /// A document's conflicts as `Document.allConflicts` gives them for a folder: the
    /// document-level ones with every page's clock, then each page's, in document order.
    func viewConflicts(notebook: NotebookID, document: DocumentReplica, budget: ViewBudget) throws -> [Conflict] {
        let held = try viewPageLogs(notebook: notebook, document: document.state.id)
        var clocks: [PageID: VectorClock] = [:]
        var pageConflicts: [Conflict] = []
        for p in document.state.pages where held.contains(p.id) {
            let replica = try viewPage(notebook: notebook, log: LogRef(document: document.state.id, page: p.id), budget: budget)
            clocks[p.id] = replica.clock
            pageConflicts += replica.conflicts()
        }
        return document.conflicts(pageClocks: clocks) + pageConflicts
    }
}

/// The web view's source for one notebook of a relay ([SYNC-95]): each call materializes
/// what it needs from the store (on the store's queue). A source is made for one answer:
/// every call it answers takes from one budget of `limit` bytes (`RelayStore.maxViewBytes`).
/// The relay holds no thumbnails: covers are drawn by the view.
public struct RelayWebSource: WebViewSource {
    public let store: RelayStore
    public let notebook: NotebookID
    let budget: RelayStore.ViewBudget
    /// The bytes this source's answer may read in all.
    public var limit: Int { budget.limit }

    public init(store: RelayStore, notebook: NotebookID, limit: Int = RelayStore.maxViewBytes) {
        self.store = store
        self.notebook = notebook
        budget = RelayStore.ViewBudget(limit: limit)
    }

    /// Live documents, newest change first (then by id), as a folder's library lists them.
    static func live(_ docs: [DocumentID: DocumentReplica]) -> [DocumentState] {
        docs.values.map(\.state).filter { !$0.deleted.value }
            .sorted { ($0.modified, $1.id) > ($1.modified, $0.id) }
    }

    public func library() async throws -> [WebViewDocument] {
        let (notebook, budget) = (notebook, budget)
        return try await store.perform { s in
            Self.live(try s.viewDocuments(notebook: notebook, budget: budget)).map {
                WebViewDocument(id: $0.id, title: $0.title.value, pageCount: $0.livePages.count, modified: $0.modified)
            }
        }
    }

    public func document(_ id: DocumentID) async throws -> WebViewPages? {
        let (notebook, budget) = (notebook, budget)
        return try await store.perform { s in
            guard let d = try s.viewDocuments(notebook: notebook, only: id, budget: budget)[id]?.state, !d.deleted.value else {
                return nil
            }
            return WebViewPages(id: id, title: d.title.value, pages: d.livePages.map { .init(id: $0.id, canvas: $0.canvas.value) })
        }
    }

    public func page(_ page: PageID, of document: DocumentID) async throws -> WebViewPage? {
        let (notebook, budget) = (notebook, budget)
        return try await store.perform { s -> WebViewPage? in
            guard let d = try s.viewDocuments(notebook: notebook, only: document, budget: budget)[document]?.state, !d.deleted.value,
                  let record = d.livePages.first(where: { $0.id == page }) else { return nil }
            let state = try s.viewPage(notebook: notebook, log: LogRef(document: document, page: page), budget: budget).state
            var assets: [AssetID: [UInt8]] = [:]
            for case .image(let img) in state.elements.map(\.content) where assets[img.asset] == nil {
                // A missing asset is drawn as the placeholder, as in a folder.
                if let bytes = try s.viewAsset(img.asset, notebook: notebook, budget: budget) { assets[img.asset] = bytes }
            }
            return WebViewPage(state: state, canvas: record.canvas.value, assets: assets)
        }
    }

    public func storedCover(_ document: DocumentID) async throws -> [UInt8]? { nil }

    public func conflicts() async throws -> [WebViewConflicts] {
        let (notebook, budget) = (notebook, budget)
        return try await store.perform { s in
            let docs = try s.viewDocuments(notebook: notebook, budget: budget)
            var out: [WebViewConflicts] = []
            for d in Self.live(docs) {
                let found = try s.viewConflicts(notebook: notebook, document: docs[d.id]!, budget: budget)
                if !found.isEmpty {
                    out.append(WebViewConflicts(document: d.id, title: d.title.value, livePages: d.livePages.map(\.id),
                                                conflicts: found))
                }
            }
            return out
        }
    }

    public func deviceNames() async throws -> [ReplicaID: String] {
        let notebook = notebook
        return try await store.perform { s in
            Dictionary(try s.owners(notebook: notebook).map { ($0.replica, $0.device) }, uniquingKeysWith: { a, _ in a })
        }
    }
}
