import Foundation
import LnoteModel
import LnoteReplication

/// One log of a notebook and its applied clock.
public struct NotebookLogClock: Sendable, Hashable {
    public var document: DocumentID
    /// nil: the document log.
    public var page: PageID?
    public var clock: VectorClock
}

/// What sync needs from a notebook folder ([PKG-45]): every log's clock, the operations a
/// peer lacks, durable receipt (creating documents that do not exist yet), assets, and a
/// place to keep per-remote bookkeeping. Documents not open are opened for the call and
/// closed after it.
extension Notebook {
    /// The replica this folder writes as.
    public nonisolated var replicaID: ReplicaID { replica }

    /// The clock of every log (each document log, then its page logs), sorted by document
    /// then page. Loads each page that has files (one snapshot read plus its log tail).
    public func logClocks() async throws -> [NotebookLogClock] {
        var out: [NotebookLogClock] = []
        let cached = loadClockCache()
        var cache = ClockCache()
        for docID in try documentIDs() {
            let paths = PackagePaths(folder: path, id: docID)
            // The files each log's clock depends on; when none changed and the document is
            // not open (an open one may hold unsaved state), the cached clocks are used.
            var keys: [(ClockCache.Key, [UInt64])] = [
                (ClockCache.Key(document: docID, page: nil), try fileIdentity([paths.documentLog, paths.document])),
            ]
            var pageIDs = Set<PageID>()
            for name in (try? io.listDirectory(paths.pages)) ?? [] where !DurableFile.isTemporaryName(name) {
                if name.hasSuffix(".log"), let p = PageID(String(name.dropLast(4))) { pageIDs.insert(p) }
                if name.hasSuffix(".content"), let p = PageID(String(name.dropLast(8))) { pageIDs.insert(p) }
            }
            for p in pageIDs.sorted() {
                keys.append((ClockCache.Key(document: docID, page: p), try fileIdentity([paths.log(p), paths.content(p)])))
            }
            let hits = keys.compactMap { k, files in cached.entries[k].flatMap { $0.files == files ? $0 : nil } }
            if !isOpen(docID), hits.count == keys.count {
                for ((k, _), e) in zip(keys, hits) {
                    cache.entries[k] = e
                    if k.page == nil || !e.clock.isEmpty { out.append(NotebookLogClock(document: docID, page: k.page, clock: e.clock)) }
                }
                continue
            }
            let wasOpen = isOpen(docID)
            let (docClock, pageClocks) = try await withDocument(docID) { d -> (VectorClock, [PageID: VectorClock]) in
                var pageClocks: [PageID: VectorClock] = [:]
                for p in try await d.pageLogs() { pageClocks[p] = try await d.clock(page: p) }
                return (try await d.clock(), pageClocks)
            }
            out.append(NotebookLogClock(document: docID, page: nil, clock: docClock))
            for p in pageClocks.keys.sorted() where !pageClocks[p]!.isEmpty {
                out.append(NotebookLogClock(document: docID, page: p, clock: pageClocks[p]!))
            }
            // Identities are taken once the document is closed again: loading and closing
            // may write files (a recovered log, a new snapshot, document.json). An open
            // document is not cached: it may hold state its files do not show yet.
            guard !wasOpen else { continue }
            cache.entries[ClockCache.Key(document: docID, page: nil)] =
                ClockCache.Entry(files: try fileIdentity([paths.documentLog, paths.document]), clock: docClock)
            for (p, c) in pageClocks {
                cache.entries[ClockCache.Key(document: docID, page: p)] =
                    ClockCache.Entry(files: try fileIdentity([paths.log(p), paths.content(p)]), clock: c)
            }
        }
        if cache != cached { saveClockCache(cache) }
        return out
    }

    /// Frames of a log whose operations `clock` does not cover, as the log holds them.
    public func frames(document docID: DocumentID, page: PageID?, notCoveredBy clock: VectorClock) async throws -> [Frame] {
        guard try documentIDs().contains(docID) else { return [] }
        return try await withDocument(docID) { try await $0.frames(page: page, notCoveredBy: clock) }
    }

    /// Appends and applies received operations to one log, creating the document package
    /// when it does not exist ([PKG-45]). Returns what `Document.receive` did.
    @discardableResult
    public func receive(_ ops: [Op], document docID: DocumentID, page: PageID?) async throws -> ReceiveOutcome {
        if try !documentIDs().contains(docID) {
            if page == nil {
                _ = try Document.createPackage(folder: path, id: docID, ops: ops, io: io)
                return ReceiveOutcome(appended: ops.count, applied: [])
            }
            _ = try Document.createPackage(folder: path, id: docID, ops: [], io: io)
        }
        return try await withDocument(docID) { try await $0.receive(ops, page: page) }
    }

    public func hasAsset(_ asset: AssetID, document docID: DocumentID) async throws -> Bool {
        try io.stat(PackagePaths(folder: path, id: docID).asset(asset))?.isRegular == true
    }

    public func readAsset(_ asset: AssetID, document docID: DocumentID) async throws -> [UInt8] {
        let bytes = try DurableFile.read(PackagePaths(folder: path, id: docID).asset(asset), io: io)
        guard AssetID.of(bytes) == asset else {
            throw LnoteError(.corrupt, "asset bytes do not match their name", path: PackagePaths(folder: path, id: docID).asset(asset))
        }
        return bytes
    }

    /// Stores asset bytes durably in the document's `assets/` (creating nothing else).
    public func writeAsset(_ bytes: [UInt8], document docID: DocumentID) async throws -> AssetID {
        let paths = PackagePaths(folder: path, id: docID)
        if try io.stat(paths.root) == nil {
            _ = try Document.createPackage(folder: path, id: docID, ops: [], io: io)
        }
        let asset = AssetID.of(bytes)
        if let st = try io.stat(paths.asset(asset)), st.isRegular, st.size == UInt64(bytes.count) { return asset }
        try DurableFile.replace(paths.asset(asset), with: bytes, io: io)
        return asset
    }

    /// Per-remote sync bookkeeping, kept in `.lnote/remotes/<sha256 of key>` ([PKG-63]).
    public func loadRemoteState(key: String) async throws -> [UInt8]? {
        try DurableFile.readIfExists(remoteStatePath(key), io: io)
    }

    public func saveRemoteState(_ bytes: [UInt8], key: String) async throws {
        let dir = DurableFile.join(path, ".lnote/remotes")
        try io.mkdir(dir, existingOK: true)
        try DurableFile.replace(remoteStatePath(key), with: bytes, io: io)
    }

    private func remoteStatePath(_ key: String) -> String {
        DurableFile.join(path, ".lnote/remotes/\(AssetID.of(Array(key.utf8)))")
    }

    /// Every document package in the folder (deleted ones included), sorted.
    public func documentIDs() throws -> [DocumentID] {
        try io.listDirectory(path).compactMap(PackagePaths.documentID(fromName:)).sorted()
    }

    /// Runs `body` on the document, opening it for the call (and closing it after) when it
    /// was not open.
    func withDocument<T>(_ docID: DocumentID, _ body: (Document) async throws -> T) async throws -> T {
        let wasOpen = isOpen(docID)
        let d = try await openDocument(docID)
        do {
            let r = try await body(d)
            if !wasOpen { try await d.close() }
            return r
        } catch {
            if !wasOpen { try? await d.close() }
            throw error
        }
    }
}
