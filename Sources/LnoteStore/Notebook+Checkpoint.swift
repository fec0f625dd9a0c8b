import Foundation
import LnoteModel
import LnoteReplication

/// Checkpoints ([PKG-46], `Protocol/sync-protocol.md` §5): a newcomer installs page
/// snapshots fetched from a relay instead of replaying their whole history.
extension Notebook {
    /// True when the folder holds no document package at all (a newcomer).
    public func holdsNoDocuments() throws -> Bool {
        try documentIDs().isEmpty
    }

    /// Creates a document package from page checkpoints, atomically ([PKG-2], [PKG-46]).
    ///
    /// The package gets an empty `document.log` (the document's operations arrive by sync
    /// afterwards) and, per page, a new empty page log, a `.content` snapshot of the
    /// checkpoint state covering that empty log, and a `.base` file keeping the checkpoint:
    /// the operations this replica holds in its state but not in its log, and the state a
    /// damaged `.content` is rebuilt from. Assets the
    /// states reference go into `assets/` in the same package, before the rename, so no
    /// page ever references an asset that is not there ([PKG-14]).
    ///
    /// - Parameters:
    ///   - pages: the checkpoint states (each names its page; its clock is what it covers).
    ///   - assets: bytes of every asset the states reference (more are ignored).
    /// - Throws: `alreadyExists` when the document exists here; `invalidArgument` for two
    ///   states of one page; `notFound` for a referenced asset missing from `assets`; `io`.
    public func installCheckpoint(document docID: DocumentID, pages: [PageState], assets: [[UInt8]]) async throws {
        var seen = Set<PageID>()
        for s in pages where !seen.insert(s.page).inserted {
            throw LnoteError(.invalidArgument, "two checkpoints for page \(s.page) of document \(docID)")
        }
        let byID = Dictionary(assets.map { (AssetID.of($0), $0) }, uniquingKeysWith: { a, _ in a })
        var needed = Set<AssetID>()
        for s in pages { needed.formUnion(s.imageAssets) }
        for a in needed where byID[a] == nil {
            throw LnoteError(.notFound, "asset \(a) referenced by a checkpoint of document \(docID) was not supplied")
        }
        let io = io
        origins.registerCreated(docID, origin: .merge)
        defer { pokeFollowing(docID) }
        _ = try Document.createPackage(folder: path, id: docID, ops: [], io: io, notebookLock: notebookLock) { staged in
            for a in needed.sorted() { try DurableFile.replace(staged.asset(a), with: byID[a]!, io: io) }
            for s in pages {
                // The base file first: a state without its base would serve a history with a hole.
                try DurableFile.replace(staged.base(s.page), with: PageBase.encode(s), io: io)
                let header = try PageLog.create(path: staged.log(s.page), kind: .page, owner: s.page.uuid,
                                                anchor: LogAnchor(writer: self.identity.current.rawValue, baseWallTime: self.options.now()),
                                                io: io).header
                let bytes = PageSnapshot.encode(s, coveredLogOffset: UInt64(LogHeader.size), logIncarnation: header.incarnation)
                try DurableFile.replace(staged.content(s.page), with: bytes, io: io)
            }
        }
    }

    /// A page's applied state for a checkpoint, or nil when the page has no files or the
    /// document does not exist.
    public func checkpointState(document docID: DocumentID, page pid: PageID) async throws -> PageState? {
        guard try holdsDocument(docID) else { return nil }
        return try await withDocument(docID) { try await $0.checkpointState(page: pid) }
    }
}

extension Notebook {
    /// Whether a page installed from a checkpoint holds what its base and its log give
    /// (`Document.installedPageMatches`); nil when the page has no base or is not here.
    public func installedPageMatches(document docID: DocumentID, page pid: PageID) async throws -> Bool? {
        guard try holdsDocument(docID) else { return nil }
        return try await withDocument(docID) { try await $0.installedPageMatches(pid) }
    }

    /// Gives up a page's checkpoint (`Document.dropCheckpoint`).
    public func dropCheckpoint(document docID: DocumentID, page pid: PageID) async throws {
        try await withDocument(docID) { try await $0.dropCheckpoint(page: pid) }
    }

    /// What the logs of this folder lack of what their states hold ([PKG-51]), from the
    /// missing-operations files (written whenever it changes), sorted by log.
    /// - Throws: `corrupt` naming a file that does not decode.
    public func missingOperations() throws -> [MissingInLog] {
        var out: [MissingInLog] = []
        for docID in try documentIDs() {
            let paths = PackagePaths(folder: path, id: docID)
            if let bytes = try DurableFile.readIfExists(paths.documentMissing, io: io) {
                out.append(MissingInLog(document: docID, page: nil, missing: try OpRanges.decode(bytes, path: paths.documentMissing)))
            }
            for name in try listPages(paths).sorted() where name.hasSuffix(PackagePaths.missingSuffix) && !DurableFile.isTemporaryName(name) {
                guard let p = PageID(String(name.dropLast(PackagePaths.missingSuffix.count))) else { continue }
                let file = paths.missing(p)
                out.append(MissingInLog(document: docID, page: p, missing: try OpRanges.decode(try DurableFile.read(file, io: io), path: file)))
            }
        }
        return out.filter { !$0.missing.isEmpty }
    }
}

/// Operations a log's state holds that the log lacks ([PKG-51]).
public struct MissingInLog: Sendable, Hashable {
    public var document: DocumentID
    /// nil: the document log.
    public var page: PageID?
    public var missing: OpRanges
}
