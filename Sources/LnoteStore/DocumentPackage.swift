import Foundation
import LnoteModel

/// The files of one `<UUID>.lnote/` package ([PKG-1]).
///
/// ```
/// <UUID>.lnote/
///   manifest.json            library cache (derived from document.json)
///   document.json            document snapshot: title, pages in order, clocks; covers document.log up to an offset
///   document.log             append-only document operations
///   pages/<page>.content     page snapshot; covers pages/<page>.log up to an offset
///   pages/<page>.log         append-only page operations
///   assets/<sha256-hex>      content-addressed image bytes
///   thumbnails/<page>.png    derived page picture, rewritten with its snapshot ([PKG-17])
/// ```
public struct PackagePaths: Sendable, Hashable {
    public static let suffix = ".lnote"
    public let root: String
    public let id: DocumentID

    public init(folder: String, id: DocumentID) {
        self.id = id
        root = DurableFile.join(folder, id.description + PackagePaths.suffix)
    }

    public var manifest: String { root + "/manifest.json" }
    public var document: String { root + "/document.json" }
    public var documentLog: String { root + "/document.log" }
    public var pages: String { root + "/pages" }
    public var assets: String { root + "/assets" }
    public var thumbnails: String { root + "/thumbnails" }
    public func content(_ p: PageID) -> String { "\(pages)/\(p).content" }
    public func log(_ p: PageID) -> String { "\(pages)/\(p).log" }
    public func asset(_ a: AssetID) -> String { "\(assets)/\(a)" }

    /// The document id of a package directory name `<UUID>.lnote`, or nil.
    public static func documentID(fromName name: String) -> DocumentID? {
        guard name.hasSuffix(suffix), !name.hasPrefix(".") else { return nil }
        return DocumentID(String(name.dropLast(suffix.count)))
    }
}

/// Facts about one page derived from its content, kept per page in `document.json` so the
/// library and orphan checks never read page files ([PKG-12]).
public struct PageStats: Hashable, Sendable {
    /// Live elements.
    public var elementCount: Int
    /// Greatest author wall time of the page's operations (ms since 1970).
    public var modified: Int64
    /// Assets referenced by live image elements, sorted.
    public var assets: [AssetID]
    public init(elementCount: Int = 0, modified: Int64 = 0, assets: [AssetID] = []) {
        self.elementCount = elementCount
        self.modified = modified
        self.assets = assets
    }

    public init(_ state: PageState) {
        elementCount = state.elements.count
        modified = state.modified
        assets = Set(state.elements.compactMap { $0.content.image?.asset }).sorted()
    }
}

/// `document.json` ([PKG-11]): the document snapshot.
struct DocumentFile: Codable, Equatable {
    static let currentFormat = 1

    struct Register<V: Codable & Equatable>: Codable, Equatable {
        var value: V
        /// Concurrent writers that won, ascending; the last is the winner. Empty: initial value.
        var frontier: [String]
    }
    struct Canvas: Codable, Equatable {
        var width: Int32
        var height: Int32
    }
    struct Context: Codable, Equatable {
        var replica: String
        var clock: [String: UInt64]
    }
    struct LogCoverage: Codable, Equatable {
        /// The document log's incarnation, 16 hex digits.
        var incarnation: String
        /// Bytes of document.log covered (all frames before it are applied here).
        var offset: UInt64
    }
    struct Page: Codable, Equatable {
        var id: String
        var added: String
        var created: Int64
        var position: Register<String>
        var canvas: Register<Canvas>
        var deleted: Register<Bool>
        var deletedSeen: [String: UInt64]?
        var elementCount: Int
        var modified: Int64
        var assets: [String]
    }

    var format: Int
    var id: String
    var log: LogCoverage
    var clock: [String: UInt64]
    var maxLamport: UInt64
    var created: Int64
    var modified: Int64
    var title: Register<String>
    var deleted: Register<Bool>
    var contexts: [Context]
    var pages: [Page]

    init(state s: DocumentState, coveredOffset: UInt64, incarnation: UInt64, stats: [PageID: PageStats]) {
        format = DocumentFile.currentFormat
        id = s.id.description
        log = LogCoverage(incarnation: JSONText.u64(incarnation), offset: coveredOffset)
        clock = JSONText.clock(s.clock)
        maxLamport = s.maxLamport
        created = s.created
        modified = s.modified
        title = Register(value: s.title.value, frontier: s.title.frontier.map(JSONText.ref))
        deleted = Register(value: s.deleted.value, frontier: s.deleted.frontier.map(JSONText.ref))
        contexts = s.contexts.map { Context(replica: $0.replica.description, clock: JSONText.clock($0.clock)) }
        pages = s.pages.map { p in
            let st = stats[p.id] ?? PageStats()
            return Page(id: p.id.description, added: JSONText.ref(p.added), created: p.created,
                        position: Register(value: JSONText.zkey(p.position.value), frontier: p.position.frontier.map(JSONText.ref)),
                        canvas: Register(value: Canvas(width: p.canvas.value.width, height: p.canvas.value.height),
                                         frontier: p.canvas.frontier.map(JSONText.ref)),
                        deleted: Register(value: p.deleted.value, frontier: p.deleted.frontier.map(JSONText.ref)),
                        deletedSeen: p.deletedSeen.map(JSONText.clock),
                        elementCount: st.elementCount, modified: st.modified, assets: st.assets.map(\.description))
        }
    }

    /// Decodes and validates; every error is `corrupt`/`unsupportedVersion` naming `path`.
    static func decode(_ bytes: [UInt8], path: String) throws -> (DocumentFile, DocumentState, [PageID: PageStats]) {
        let f = try StoreJSON.decode(DocumentFile.self, bytes, path: path)
        guard f.format >= 1 else { throw LnoteError(.corrupt, "bad format \(f.format)", path: path) }
        guard f.format <= currentFormat else {
            throw LnoteError(.unsupportedVersion, "document.json format \(f.format) (this build reads \(currentFormat))", path: path)
        }
        do {
            let (s, stats) = try f.state()
            return (f, s, stats)
        } catch let e as LnoteError {
            throw e.at(path: path)
        }
    }

    var incarnation: UInt64 { (try? JSONText.u64(log.incarnation)) ?? 0 }

    private func state() throws -> (DocumentState, [PageID: PageStats]) {
        guard let docID = DocumentID(id) else { throw LnoteError(.corrupt, "bad document id \"\(id)\"") }
        _ = try JSONText.u64(log.incarnation)
        func reg<V>(_ r: Register<V>) throws -> LWWRegister<V> {
            LWWRegister(r.value, frontier: try r.frontier.map(JSONText.ref))
        }
        var stats: [PageID: PageStats] = [:]
        var pageRecords: [PageRecord] = []
        for p in pages {
            guard let pid = PageID(p.id) else { throw LnoteError(.corrupt, "bad page id \"\(p.id)\"") }
            guard stats[pid] == nil else { throw LnoteError(.corrupt, "page \(p.id) listed twice") }
            guard p.canvas.value.width > 0, p.canvas.value.height > 0, p.elementCount >= 0 else {
                throw LnoteError(.corrupt, "page \(p.id): bad canvas or element count")
            }
            let position = LWWRegister(try JSONText.zkey(p.position.value), frontier: try p.position.frontier.map(JSONText.ref))
            let canvas = LWWRegister(CanvasSize(width: p.canvas.value.width, height: p.canvas.value.height),
                                     frontier: try p.canvas.frontier.map(JSONText.ref))
            pageRecords.append(PageRecord(id: pid, added: try JSONText.ref(p.added), created: p.created, position: position,
                                          canvas: canvas, deleted: try reg(p.deleted),
                                          deletedSeen: try p.deletedSeen.map(JSONText.clock)))
            let assets = try p.assets.map { a -> AssetID in
                guard let id = AssetID(hex: a) else { throw LnoteError(.corrupt, "bad asset id \"\(a)\"") }
                return id
            }
            stats[pid] = PageStats(elementCount: p.elementCount, modified: p.modified, assets: assets)
        }
        let contexts = try self.contexts.map { c -> ReplicaContext in
            guard c.replica.count == 16, let r = ReplicaID(hex: c.replica) else { throw LnoteError(.corrupt, "bad replica \"\(c.replica)\"") }
            return ReplicaContext(replica: r, clock: try JSONText.clock(c.clock))
        }
        let s = DocumentState(id: docID, clock: try JSONText.clock(clock), maxLamport: maxLamport, created: created,
                              modified: modified, title: try reg(title), deleted: try reg(deleted),
                              pages: pageRecords.sorted(by: PageRecord.orderLess), contexts: contexts)
        return (s, stats)
    }
}

/// `manifest.json` ([PKG-13]): what the library shows, derived from document.json.
struct ManifestFile: Codable, Equatable {
    static let currentFormat = 1
    var format: Int
    var id: String
    var title: String
    var created: Int64
    var modified: Int64
    var pageCount: Int
    var elementCount: Int
    var coverPage: String?
    var deleted: Bool
    /// `sha256:<hex>` of the document.json bytes this manifest was derived from.
    var source: String

    init(from f: DocumentFile, documentBytes: [UInt8]) {
        format = ManifestFile.currentFormat
        id = f.id
        title = f.title.value
        created = f.created
        let live = f.pages.filter { !$0.deleted.value }
        modified = max(f.modified, f.pages.map(\.modified).max() ?? 0)
        pageCount = live.count
        elementCount = live.reduce(0) { $0 + $1.elementCount }
        coverPage = live.first?.id
        deleted = f.deleted.value
        source = ManifestFile.fingerprint(documentBytes)
    }

    static func fingerprint(_ documentBytes: [UInt8]) -> String {
        "sha256:" + AssetID.of(documentBytes).description
    }

    static func decode(_ bytes: [UInt8], path: String) throws -> ManifestFile {
        let m = try StoreJSON.decode(ManifestFile.self, bytes, path: path)
        guard m.format >= 1, m.format <= currentFormat else {
            throw LnoteError(m.format < 1 ? .corrupt : .unsupportedVersion, "manifest format \(m.format)", path: path)
        }
        guard DocumentID(m.id) != nil, m.pageCount >= 0, m.elementCount >= 0 else {
            throw LnoteError(.corrupt, "bad manifest id or counts", path: path)
        }
        return m
    }

    var summary: DocumentSummary {
        DocumentSummary(id: DocumentID(id)!, title: title, created: created, modified: modified, pageCount: pageCount,
                        elementCount: elementCount, coverPage: coverPage.flatMap(PageID.init), deleted: deleted,
                        manifest: .valid)
    }
}

/// What the library shows for one document, read from its manifest only.
public struct DocumentSummary: Sendable, Hashable {
    public enum ManifestStatus: Sendable, Hashable {
        case valid
        /// No manifest.json: run `reconcile` (or open the document) to rebuild it.
        case missing
        /// manifest.json does not decode (the error text): `reconcile` rebuilds it.
        case unreadable(String)
    }
    public var id: DocumentID
    public var title: String
    /// ms since 1970.
    public var created: Int64
    public var modified: Int64
    /// Live pages.
    public var pageCount: Int
    /// Live elements on live pages, as of the last save.
    public var elementCount: Int
    public var coverPage: PageID?
    public var deleted: Bool
    public var manifest: ManifestStatus

    public init(id: DocumentID, title: String, created: Int64, modified: Int64, pageCount: Int, elementCount: Int,
                coverPage: PageID?, deleted: Bool, manifest: ManifestStatus) {
        self.id = id
        self.title = title
        self.created = created
        self.modified = modified
        self.pageCount = pageCount
        self.elementCount = elementCount
        self.coverPage = coverPage
        self.deleted = deleted
        self.manifest = manifest
    }
}
