#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import LnoteModel
import LnoteReplication

/// The files of one `<UUID>.lnote/` package ([PKG-1]).
///
/// ```
/// <UUID>.lnote/
///   manifest.json            library cache (derived from document.json and the page snapshots)
///   document.json            document snapshot: title, pages in order, clocks; covers document.log up to an offset
///   document.log             append-only document operations
///   pages/<page>.content     page snapshot; covers pages/<page>.log up to an offset
///   pages/<page>.log         append-only page operations
///   pages/<page>.<N>.past    optional earlier snapshot of the page, for time travel ([PKG-98])
///   assets/<sha256-hex>      content-addressed image bytes
///   thumbnails/<page>.jpg    derived page picture (JPEG stamped with the state it shows), redrawn
///                            in the background after a save or a merge ([PKG-17], [PKG-103]);
///                            older notebooks may hold thumbnails/<page>.png instead
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
    /// `thumbnails/<page>.jpg`: the page's picture ([PKG-17]).
    public func thumbnail(_ p: PageID) -> String { "\(thumbnails)/\(p).jpg" }
    /// `thumbnails/<page>.png`: the page's picture as older versions wrote it, replaced by the
    /// `.jpg` when the page is next drawn.
    public func legacyThumbnail(_ p: PageID) -> String { "\(thumbnails)/\(p).png" }
    /// `pages/<page>.missing`: operations the page's state holds that its log lacks ([PKG-51]).
    public func missing(_ p: PageID) -> String { "\(pages)/\(p)\(PackagePaths.missingSuffix)" }
    /// `document.missing`: operations the document's state holds that `document.log` lacks ([PKG-51]).
    public var documentMissing: String { root + "/document" + PackagePaths.missingSuffix }
    public static let missingSuffix = ".missing"

    /// The document id of a package directory name `<UUID>.lnote`, or nil.
    public static func documentID(fromName name: String) -> DocumentID? {
        guard name.hasSuffix(suffix), !name.hasPrefix(".") else { return nil }
        return DocumentID(String(name.dropLast(suffix.count)))
    }
}

/// Facts about one page derived from its content: what `Document.pageList` shows and the
/// manifest sums ([PKG-12]). Only `assets` is cached in `document.json`; the element count
/// and the modification time of a page that is not loaded come from its snapshot's first
/// bytes (`PageSnapshot.summary`).
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
        /// `[[from, offset], …]`: Lamport timestamp runs ([MERGE-43]).
        var lamports: [[UInt64]]
    }
    struct LogCoverage: Codable, Equatable {
        /// The document log's incarnation, 16 hex digits.
        var incarnation: String
        /// Bytes of document.log covered (all frames before it are applied here).
        var offset: UInt64
    }
    struct Page: Codable, Equatable {
        var id: String
        /// The least `addPage` of the page ([MERGE-62]).
        var added: String
        /// Further `addPage` operations of the same page id, sorted; absent when none.
        var otherAdds: [String]?
        var created: Int64
        var position: Register<String>
        var canvas: Register<Canvas>
        var deleted: Register<Bool>
        var deletedSeen: [String: UInt64]?
        /// Assets the page references ([PKG-15]); a cache that only grows. (Files written
        /// before the element count and modification time were dropped from here also hold
        /// `elementCount` and `modified`: decoding ignores them, [PKG-12].)
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
    var pages: [Page]
    var contexts: [Context]

    init(state s: DocumentState, coveredOffset: UInt64, incarnation: UInt64, assets: [PageID: Set<AssetID>]) {
        format = DocumentFile.currentFormat
        id = s.id.description
        log = LogCoverage(incarnation: JSONText.u64(incarnation), offset: coveredOffset)
        clock = JSONText.clock(s.clock)
        maxLamport = s.maxLamport
        created = s.created
        modified = s.modified
        title = Register(value: s.title.value, frontier: s.title.frontier.map(JSONText.ref))
        deleted = Register(value: s.deleted.value, frontier: s.deleted.frontier.map(JSONText.ref))
        contexts = s.contexts.map { Context(replica: $0.replica.description, clock: JSONText.clock($0.clock),
                                            lamports: $0.lamports.map { [$0.from, $0.offset] }) }
        pages = s.pages.map { p in
            Page(id: p.id.description, added: JSONText.ref(p.added),
                 otherAdds: p.adds.count > 1 ? p.adds.dropFirst().map(JSONText.ref) : nil, created: p.created,
                        position: Register(value: JSONText.zkey(p.position.value), frontier: p.position.frontier.map(JSONText.ref)),
                        canvas: Register(value: Canvas(width: p.canvas.value.width, height: p.canvas.value.height),
                                         frontier: p.canvas.frontier.map(JSONText.ref)),
                        deleted: Register(value: p.deleted.value, frontier: p.deleted.frontier.map(JSONText.ref)),
                 deletedSeen: p.deletedSeen.map(JSONText.clock),
                 assets: (assets[p.id] ?? []).sorted().map(\.description))
        }
    }

    /// Decodes and validates; every error is `corrupt`/`unsupportedVersion` naming `path`.
    static func decode(_ bytes: [UInt8], path: String) throws -> (DocumentFile, DocumentState, [PageID: Set<AssetID>]) {
        let f = try StoreJSON.decode(DocumentFile.self, bytes, path: path)
        guard f.format >= 1 else { throw LnoteError(.corrupt, "bad format \(f.format)", path: path) }
        guard f.format <= currentFormat else {
            throw LnoteError(.unsupportedVersion, "document.json format \(f.format) (this build reads \(currentFormat))", path: path)
        }
        do {
            let (s, assets) = try f.state()
            return (f, s, assets)
        } catch let e as LnoteError {
            throw e.at(path: path)
        }
    }

    var incarnation: UInt64 { (try? JSONText.u64(log.incarnation)) ?? 0 }

    private func state() throws -> (DocumentState, [PageID: Set<AssetID>]) {
        guard let docID = DocumentID(id) else { throw LnoteError(.corrupt, "bad document id \"\(id)\"") }
        _ = try JSONText.u64(log.incarnation)
        func reg<V>(_ r: Register<V>) throws -> LWWRegister<V> {
            LWWRegister(r.value, frontier: try r.frontier.map(JSONText.ref))
        }
        var assets: [PageID: Set<AssetID>] = [:]
        var pageRecords: [PageRecord] = []
        for p in pages {
            guard let pid = PageID(p.id) else { throw LnoteError(.corrupt, "bad page id \"\(p.id)\"") }
            guard assets[pid] == nil else { throw LnoteError(.corrupt, "page \(p.id) listed twice") }
            if let problem = OpValidator.canvasProblem(CanvasSize(width: p.canvas.value.width, height: p.canvas.value.height)) {
                throw LnoteError(.corrupt, "page \(p.id): \(problem)")
            }
            let position = LWWRegister(try JSONText.zkey(p.position.value), frontier: try p.position.frontier.map(JSONText.ref))
            let canvas = LWWRegister(CanvasSize(width: p.canvas.value.width, height: p.canvas.value.height),
                                     frontier: try p.canvas.frontier.map(JSONText.ref))
            let adds = try ([p.added] + (p.otherAdds ?? [])).map(JSONText.ref)
            guard zip(adds, adds.dropFirst()).allSatisfy({ $0 < $1 }) else {
                throw LnoteError(.corrupt, "page \(p.id): adds not strictly increasing")
            }
            pageRecords.append(PageRecord(id: pid, adds: adds, created: p.created, position: position,
                                          canvas: canvas, deleted: try reg(p.deleted),
                                          deletedSeen: try p.deletedSeen.map(JSONText.clock)))
            assets[pid] = Set(try p.assets.map { a -> AssetID in
                guard let id = AssetID(hex: a) else { throw LnoteError(.corrupt, "bad asset id \"\(a)\"") }
                return id
            })
        }
        let docClock = try JSONText.clock(clock)
        // What operations carried ([LOG-23], [LOG-4]): a title within bounds, at most 2^62
        // operations.
        if let problem = OpValidator.titleProblem(title.value) { throw LnoteError(.corrupt, "title: \(problem)") }
        guard docClock.total <= VectorClock.maxTotal, maxLamport <= VectorClock.maxTotal else {
            throw LnoteError(.corrupt, "clock or maxLamport beyond 2^62 operations")
        }
        var replicaContexts: [ReplicaContext] = []
        for c in contexts {
            guard c.replica.count == 16, let r = ReplicaID(hex: c.replica), r.rawValue != 0 else {
                throw LnoteError(.corrupt, "bad context replica \"\(c.replica)\"")
            }
            let runs = try c.lamports.map { pair -> LamportRun in
                guard pair.count == 2 else { throw LnoteError(.corrupt, "context \(c.replica): a lamport run is [from, offset]") }
                return LamportRun(from: pair[0], offset: pair[1])
            }
            replicaContexts.append(ReplicaContext(replica: r, clock: try JSONText.clock(c.clock), lamports: runs))
        }
        let s = DocumentState(id: docID, clock: docClock, maxLamport: maxLamport, created: created,
                              modified: modified, title: try reg(title), deleted: try reg(deleted),
                              pages: pageRecords.sorted(by: PageRecord.orderLess), contexts: replicaContexts)
        // The same checks as a page snapshot's contexts ([SNAP-26]).
        try PageSnapshot.validateContexts(replicaContexts, clock: docClock, maxLamport: maxLamport)
        return (s, assets)
    }
}

/// What a document.json is made of, compared by `saveDocumentFiles` instead of encoding
/// the file: the document state changes only with its clock ([PKG-16]).
struct DocumentFileKey: Equatable {
    var clock: VectorClock
    var coveredOffset: UInt64
    var incarnation: UInt64
    /// `Document.assetsGeneration` when it was written.
    var assetsGeneration: Int
}

/// `manifest.json` ([PKG-13]): what the library shows, a function of document.json (its
/// state and the SHA-256 of its bytes) and of the summaries of the live pages' snapshots.
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

    /// The manifest of a document whose document.json has fingerprint `source`, with
    /// `counts` giving each live page's snapshot facts. Work: one call of `counts` and a
    /// few additions per live page.
    ///
    /// A page whose `counts` fail with `unsupportedVersion` (a snapshot in a newer format)
    /// has counts this lnote cannot know ([PKG-13] 5): the element count is then `previous`'s
    /// (the manifest on disk, when it decodes and names this document; else the sum of the
    /// pages whose counts are known), and `modified` at least `previous`'s. Every other field
    /// is computed as usual.
    init(basis b: ManifestBasis, source: String, previous: ManifestFile?,
         counts: (PageID) throws -> PageCounts) throws {
        format = ManifestFile.currentFormat
        id = b.id
        title = b.title
        created = b.created
        var modified = b.modified
        var elements = 0
        var unknown = false
        for p in b.live {
            do {
                let c = try counts(p)
                elements += c.elementCount
                modified = max(modified, c.modified)
            } catch let e as LnoteError where e.code == .unsupportedVersion {
                unknown = true
            }
        }
        if unknown, let previous, previous.id == b.id {
            elements = previous.elementCount
            modified = max(modified, previous.modified)
        }
        self.modified = modified
        pageCount = b.live.count
        elementCount = elements
        coverPage = b.live.first?.description
        deleted = b.deleted
        self.source = source
    }

    /// The manifest the files of a package call for ([PKG-13]): from document.json's bytes
    /// and state, and the summary of each live page's snapshot (one prefix read per page).
    /// `previous`: the manifest on disk, for pages whose counts cannot be known (see
    /// `init(basis:source:previous:counts:)`).
    static func expected(paths: PackagePaths, documentBytes: [UInt8], state: DocumentState,
                         previous: ManifestFile? = nil, io: Syscalls) throws -> ManifestFile {
        try ManifestFile(basis: ManifestBasis(state), source: fingerprint(documentBytes), previous: previous) {
            try PageCounts.read(paths.content($0), page: $0, io: io)
        }
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
        // The library prints titles: one with a control character (a terminal escape, a line
        // break) is no title an operation carried ([LOG-23]).
        if let problem = OpValidator.titleProblem(m.title) { throw LnoteError(.corrupt, "title: \(problem)", path: path) }
        return m
    }

    var summary: DocumentSummary {
        DocumentSummary(id: DocumentID(id)!, title: title, created: created, modified: modified, pageCount: pageCount,
                        elementCount: elementCount, coverPage: coverPage.flatMap(PageID.init), deleted: deleted,
                        manifest: .valid)
    }
}

/// The part of a manifest that comes from the document state, computed once per change
/// of the document (its clock) rather than on every save.
struct ManifestBasis: Equatable {
    var id: String
    var title: String
    var created: Int64
    var modified: Int64
    var deleted: Bool
    /// Pages not deleted, in document order.
    var live: [PageID]

    init(_ s: DocumentState) {
        id = s.id.description
        title = s.title.value
        created = s.created
        modified = s.modified
        deleted = s.deleted.value
        live = s.pages.filter { !$0.deleted.value }.map(\.id)
    }
}

/// A page's live element count and modification time as its snapshot on disk records them
/// ([PKG-12]): what the manifest sums.
struct PageCounts: Hashable, Sendable {
    var elementCount: Int
    var modified: Int64

    /// A page with no snapshot (or one whose first bytes cannot be read as one).
    static let empty = PageCounts(elementCount: 0, modified: 0)

    init(elementCount: Int, modified: Int64) {
        self.elementCount = elementCount
        self.modified = modified
    }

    init(_ state: PageState) {
        self.init(elementCount: state.elements.count, modified: state.modified)
    }

    /// The counts of the snapshot at `path` from its first bytes ([PKG-12],
    /// page-snapshot.md [SNAP-31]): `empty` when there is no such file, or when its first
    /// bytes are not a snapshot of `page` (damage is reported and repaired when the page is
    /// opened, [PKG-42]; its next snapshot corrects the counts).
    ///
    /// Reads `PageSnapshot.summaryReadSize` bytes, more only when the page section is
    /// larger (a clock with hundreds of replicas).
    /// - Throws: `io` when the file exists but cannot be read; `unsupportedVersion` when its
    ///   first bytes are a snapshot in a format newer than this lnote reads (or with an
    ///   incompatible flag it does not know): its counts are unknown, not zero ([PKG-13] 5).
    static func read(_ path: String, page: PageID, io: Syscalls) throws -> PageCounts {
        let fd: FileDescriptor
        do {
            fd = try io.open(path, O_RDONLY)
        } catch let e as LnoteError where e.isNotFound {
            return .empty
        }
        var summary: PageSnapshot.Summary?
        do {
            var want = PageSnapshot.summaryReadSize
            while summary == nil {
                let bytes = try io.pread(fd, count: want, at: 0)
                do {
                    summary = try PageSnapshot.summary(prefix: bytes, path: path)
                } catch let e as LnoteError where e.code == .truncated && bytes.count == want && want < Int.max / 4 {
                    want *= 4  // the file goes on: read further
                } catch let e as LnoteError where [.truncated, .corrupt, .limitExceeded].contains(e.code) {
                    break
                }
            }
        } catch {
            try? fd.close()
            throw error
        }
        try fd.close()
        guard let summary, summary.page == page else { return .empty }
        return PageCounts(elementCount: summary.elementCount, modified: summary.modified)
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
