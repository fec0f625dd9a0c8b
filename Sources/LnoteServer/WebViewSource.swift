import LnoteModel
import LnoteReplication

/// What the read-only web view ([SYNC-90]) shows of one notebook, whoever holds it: a served
/// folder (`NotebookWebSource`) or a relay's store (`RelayWebSource`). One view, two sources:
/// `WebView` turns what a source answers into HTML, SVG and pictures.
///
/// Everything a source returns came from other machines (titles, device names, ink):
/// `WebView` escapes every text it puts in HTML. A source stores nothing of its own (opening a
/// served folder's document may still repair a torn log tail, as every open does).
public protocol WebViewSource: Sendable {
    /// The live documents, in the order the library lists them (newest change first).
    func library() async throws -> [WebViewDocument]
    /// A document's title and live pages in document order; nil when the notebook has no such
    /// document (or it is deleted).
    func document(_ id: DocumentID) async throws -> WebViewPages?
    /// What drawing a live page takes; nil when the document has no such live page.
    func page(_ page: PageID, of document: DocumentID) async throws -> WebViewPage?
    /// The stored cover picture of a document (JPEG or PNG bytes) when one is held and shows
    /// the first page as it is now; nil otherwise (the view then draws the first page).
    func storedCover(_ document: DocumentID) async throws -> [UInt8]?
    /// Every document's conflicts ([MERGE-50], [MERGE-65]), documents in library order,
    /// those without conflicts left out.
    func conflicts() async throws -> [WebViewConflicts]
    /// The names of the devices that own replica ids ([SYNC-57]), for naming operations.
    func deviceNames() async throws -> [ReplicaID: String]
}

/// One document of the library.
public struct WebViewDocument: Sendable, Hashable {
    public var id: DocumentID
    public var title: String
    public var pageCount: Int
    /// ms since 1970.
    public var modified: Int64
    public init(id: DocumentID, title: String, pageCount: Int, modified: Int64) {
        self.id = id
        self.title = title
        self.pageCount = pageCount
        self.modified = modified
    }
}

/// A document's live pages, in document order.
public struct WebViewPages: Sendable, Hashable {
    public struct Page: Sendable, Hashable {
        public var id: PageID
        public var canvas: CanvasSize
        public init(id: PageID, canvas: CanvasSize) {
            self.id = id
            self.canvas = canvas
        }
    }
    public var id: DocumentID
    public var title: String
    public var pages: [Page]
    public init(id: DocumentID, title: String, pages: [Page]) {
        self.id = id
        self.title = title
        self.pages = pages
    }
}

/// One document's conflicts, with its live pages in order (to number the pages).
public struct WebViewConflicts: Sendable, Hashable {
    public var document: DocumentID
    public var title: String
    public var livePages: [PageID]
    public var conflicts: [Conflict]
    public init(document: DocumentID, title: String, livePages: [PageID], conflicts: [Conflict]) {
        self.document = document
        self.title = title
        self.livePages = livePages
        self.conflicts = conflicts
    }
}

/// What drawing one page takes: its state, its canvas, and the bytes of the image assets it
/// shows that the source holds (a missing one is drawn as the renderer's placeholder).
public struct WebViewPage: Sendable {
    public var state: PageState
    public var canvas: CanvasSize
    public var assets: [AssetID: [UInt8]]
    public init(state: PageState, canvas: CanvasSize, assets: [AssetID: [UInt8]]) {
        self.state = state
        self.canvas = canvas
        self.assets = assets
    }

    /// The asset lookup a renderer takes.
    public func asset(_ id: AssetID) -> [UInt8]? { assets[id] }
}
