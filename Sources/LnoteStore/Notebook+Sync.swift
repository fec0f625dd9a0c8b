import Foundation
import LnoteModel
import LnoteReplication

/// One log of a notebook and the clock of what it holds ([PKG-49]).
public struct NotebookLogClock: Sendable, Hashable {
    public var document: DocumentID
    /// nil: the document log.
    public var page: PageID?
    /// The operations the log holds and can serve (its applied clock, lowered below any
    /// operation it lost, [PKG-51]; a checkpoint base counts as held, [PKG-46]).
    public var clock: VectorClock
    /// The chain digests at `clock` ([SYNC-52]) of the replicas the log holds from counter 1;
    /// nil unless asked for (`logClocksAndDigests`).
    public var digests: [ChainDigest]? = nil
}

/// What sync needs from a notebook folder ([PKG-45]): every log's clock, the operations a
/// peer lacks, durable receipt (creating documents that do not exist yet), assets, and a
/// place to keep per-remote bookkeeping. Documents not open are opened for the call and
/// closed after it.
extension Notebook {
    /// The replica this folder writes as.
    public nonisolated var replicaID: ReplicaID { replica }

    /// The clock of every log (each document log, then its page logs), sorted by document
    /// then page: what each log holds and can serve ([PKG-49]). Loads each page that has
    /// files (one snapshot read plus its log tail), or reads the clock cache ([PKG-64]).
    public func logClocks() async throws -> [NotebookLogClock] {
        try await logSummaries(digests: false)
    }

    /// `logClocks`, each with its chain digests ([SYNC-52]), for a clock comparison. Reads
    /// every log whose digests are not in the clock cache (ids and content hashes; nothing is
    /// decoded).
    public func logClocksAndDigests() async throws -> [NotebookLogClock] {
        try await logSummaries(digests: true)
    }

    private func logSummaries(digests wanted: Bool) async throws -> [NotebookLogClock] {
        var out: [NotebookLogClock] = []
        let cached = loadClockCache()
        var cache = ClockCache()
        for docID in try documentIDs() {
          do {
            let paths = PackagePaths(folder: path, id: docID)
            // The files each log's clock depends on; when none changed and the document is
            // not open (an open one may hold unsaved state), the cached clocks are used.
            var keys: [(ClockCache.Key, [UInt64])] = [
                (ClockCache.Key(document: docID, page: nil), try fileIdentity(Notebook.clockFiles(paths, page: nil))),
            ]
            var pageIDs = Set<PageID>()
            for name in try listPages(paths) where !DurableFile.isTemporaryName(name) {
                if name.hasSuffix(".log"), let p = PageID(String(name.dropLast(4))) { pageIDs.insert(p) }
                if name.hasSuffix(".content"), let p = PageID(String(name.dropLast(8))) { pageIDs.insert(p) }
            }
            for p in pageIDs.sorted() {
                keys.append((ClockCache.Key(document: docID, page: p), try fileIdentity(Notebook.clockFiles(paths, page: p))))
            }
            let hits = keys.compactMap { k, files in
                cached.entries[k].flatMap { $0.files == files && (!wanted || $0.digests != nil) ? $0 : nil }
            }
            if !isOpen(docID), hits.count == keys.count {
                for ((k, _), e) in zip(keys, hits) {
                    cache.entries[k] = e
                    if k.page == nil || !e.clock.isEmpty {
                        out.append(NotebookLogClock(document: docID, page: k.page, clock: e.clock, digests: wanted ? e.digests : nil))
                    }
                }
                continue
            }
            let wasOpen = isOpen(docID)
            let logs = try await withDocument(docID) { d -> [(PageID?, VectorClock, [ChainDigest]?)] in
                var logs: [(PageID?, VectorClock, [ChainDigest]?)] = []
                for p in [nil] + (try await d.pageLogs()) as [PageID?] {
                    if wanted {
                        let (c, digests) = try await d.logClockAndDigests(page: p)
                        logs.append((p, c, digests))
                    } else {
                        logs.append((p, try await d.logClock(page: p), nil))
                    }
                }
                return logs
            }
            for (p, c, digests) in logs where p == nil || !c.isEmpty {
                out.append(NotebookLogClock(document: docID, page: p, clock: c, digests: digests))
            }
            // Identities are taken once the document is closed again: loading and closing
            // may write files (a new snapshot, document.json). A clock is cached only when its
            // log is the file it was before the document was read: another process may have
            // appended meanwhile (or the load cut a torn tail), and the clock read may then
            // be below what the identity says. An open document is not cached: it may hold
            // state its files do not show yet.
            guard !wasOpen else { continue }
            let before = Dictionary(keys, uniquingKeysWith: { a, _ in a })
            for (p, c, digests) in logs {
                let key = ClockCache.Key(document: docID, page: p)
                let after = try fileIdentity(Notebook.clockFiles(paths, page: p))
                guard let was = before[key], was.prefix(4) == after.prefix(4) else { continue }
                cache.entries[key] = ClockCache.Entry(files: after, clock: c, digests: digests)
            }
          } catch let e as LnoteError where e.isNotRegularFile {
            // [PKG-22] A package holding a symlink, FIFO… is left out, with its reason: the
            // rest of the folder still syncs.
            refusedDocuments[docID] = e
          }
        }
        if cache != cached { saveClockCache(cache) }
        return out
    }

    /// The files a log's clock is computed from ([PKG-64]): its log, its snapshot, and its
    /// missing-operations file ([PKG-51]).
    static func clockFiles(_ paths: PackagePaths, page: PageID?) -> [String] {
        page.map { [paths.log($0), paths.content($0), paths.missing($0)] } ?? [paths.documentLog, paths.document, paths.documentMissing]
    }

    /// The names in a package's `pages/` ([] when it has none yet).
    func listPages(_ paths: PackagePaths) throws -> [String] {
        guard try io.stat(paths.pages)?.isDirectory == true else { return [] }
        return try io.listDirectory(paths.pages)
    }

    /// The first 16 bytes of the content hashes of a replica's operations `from…to` in a log
    /// ([SYNC-53]), stopping at the first the log does not hold.
    public func contentHashes(document docID: DocumentID, page: PageID?, replica: ReplicaID,
                              from: UInt64, to: UInt64) async throws -> [[UInt8]] {
        guard try holdsDocument(docID) else { return [] }
        return try await withDocument(docID) { try await $0.contentHashes(page: page, replica: replica, from: from, to: to) }
    }

    /// Every content hash of a log, read once (`Document.contentHashTable`); empty for a
    /// document this folder does not hold.
    public func contentHashTable(document docID: DocumentID, page: PageID?) async throws -> ContentHashTable {
        guard try holdsDocument(docID) else { return ContentHashTable([:]) }
        return try await withDocument(docID) { try await $0.contentHashTable(page: page) }
    }

    /// Frames of a log whose operations `clock` does not cover, as the log holds them.
    public func frames(document docID: DocumentID, page: PageID?, notCoveredBy clock: VectorClock) async throws -> [Frame] {
        guard try holdsDocument(docID) else { return [] }
        return try await withDocument(docID) { try await $0.frames(page: page, notCoveredBy: clock) }
    }

    /// What a peer at `clock` lacks of a log, or the hole in a checkpoint-installed page's
    /// history that keeps this replica from giving it (`Document.framesForPeer`).
    public func framesForPeer(document docID: DocumentID, page: PageID?, notCoveredBy clock: VectorClock) async throws -> PeerFrames {
        guard try holdsDocument(docID) else { return .frames([]) }
        return try await withDocument(docID) { try await $0.framesForPeer(page: page, notCoveredBy: clock) }
    }

    /// `frames(document:page:notCoveredBy:)` for several logs of one document, opened once
    /// for all of them. In the order given.
    public func frames(document docID: DocumentID, logs: [(page: PageID?, clock: VectorClock)]) async throws -> [[Frame]] {
        guard try holdsDocument(docID) else { return logs.map { _ in [] } }
        return try await withDocument(docID) { d in
            var out: [[Frame]] = []
            for l in logs { out.append(try await d.frames(page: l.page, notCoveredBy: l.clock)) }
            return out
        }
    }

    /// `framesForPeer` for several logs of one document, opened once for all of them (a first
    /// contact asks for every log of every document: one opening per log would sync the
    /// document log again at each, [PKG-44]). In the order given.
    public func framesForPeer(document docID: DocumentID, logs: [(page: PageID?, clock: VectorClock)]) async throws -> [PeerFrames] {
        guard try holdsDocument(docID) else { return logs.map { _ in .frames([]) } }
        return try await withDocument(docID) { d in
            var out: [PeerFrames] = []
            for l in logs { out.append(try await d.framesForPeer(page: l.page, notCoveredBy: l.clock)) }
            return out
        }
    }

    /// Appends and applies received operations to one log, creating the document package
    /// when it does not exist ([PKG-45]). Returns what `Document.receive` did.
    ///
    /// With `remote`, each fork found ([PKG-58]) is also kept in the quarantine as a `fork`
    /// entry holding the received version ([PKG-48]), so that `verify` lists it.
    ///
    /// The assets the operations reference that sync staged (`writeAsset`) are moved into
    /// the package first, in the same opening of the document, so that closing it cannot
    /// take them for orphans ([PKG-15]); their staged copies are removed once the
    /// operations are stored.
    ///
    /// Several processes may receive the same new document at once: the package is created
    /// by one of them ([PKG-90]) and the others receive into it.
    @discardableResult
    public func receive(_ ops: [Op], document docID: DocumentID, page: PageID?, remote: String? = nil) async throws -> ReceiveOutcome {
        if try !holdsDocument(docID) {
            origins.registerCreated(docID, origin: .merge)
            do {
                // The whole document log at once when every id is there once; an id twice
                // (a duplicate, or a fork: [PKG-58]) goes through `Document.receive` below,
                // which stores it once and reports the other version, never both.
                if page == nil, Set(ops.lazy.map(\.id)).count == ops.count {
                    _ = try Document.createPackage(folder: path, id: docID, ops: ops, io: io, notebookLock: notebookLock)
                    pokeFollowing(docID)
                    return ReceiveOutcome(appended: ops.count, applied: [])
                }
                _ = try Document.createPackage(folder: path, id: docID, ops: [], io: io, notebookLock: notebookLock)
                pokeFollowing(docID)
            } catch let e as LnoteError where e.code == .alreadyExists {
                // Another process created it meanwhile: receive into it below.
            }
        }
        let referenced = Set(ops.flatMap { op -> [AssetID] in
            if case .add(.image(let i), _) = op.body { return [i.asset] }
            return []
        }).sorted()
        var staged: [AssetID] = []
        for a in referenced where try io.stat(stagedAssetPath(a, document: docID))?.isRegular == true { staged.append(a) }
        return try await withDocument(docID) { d in
            var bytes: [[UInt8]] = []
            for a in staged {
                guard try await !d.hasAsset(a) else { continue }
                // Gone meanwhile: a concurrent receipt adopted it (or `receive` below says
                // which asset is missing).
                guard let b = try readVerified(stagedAssetPath(a, document: docID), asset: a) else { continue }
                bytes.append(b)
            }
            // The assets and the operations in one hold of the document lock ([PKG-14]).
            let outcome = try await d.receive(ops, page: page, assets: bytes)
            // No directory sync: a copy that comes back after a crash is only redundant.
            try notebookLock.withLock {
                for a in staged { try io.unlink(stagedAssetPath(a, document: docID), missingOK: true) }
            }
            if let remote {
                for f in outcome.forks { try quarantineFork(f, document: docID, page: page, remote: remote) }
            }
            return outcome
        }
    }

    /// Creates the documents of `docs` that this folder does not hold, all made durable
    /// together ([PKG-96]): each package is staged whole in its own temporary directory
    /// (created, with its lock file held, under the notebook lock as in [PKG-90]), every file
    /// of every staged package is written, then synced, then the staged directories, and only
    /// then are the packages renamed into place and the folder synced once. A first sync of a
    /// notebook then costs about one journal commit per batch instead of several per file.
    ///
    /// Documents left out go through `receive`, one log at a time: those held already (or
    /// created meanwhile by another process, whose package is kept), and those
    /// `Document.prepareReceived` leaves out (an operation the validator refuses, an id twice,
    /// an image).
    ///
    /// - Returns: per document created, the operations its logs received; they are durable
    ///   when this returns.
    ///
    /// - Parameter progress: told the number of packages staged so far, after each one (a
    ///   progress indicator's count; the batch is durable only when this returns).
    public func createReceived(_ docs: [ReceivedDocument],
                               progress: (@Sendable (Int) -> Void)? = nil) async throws -> [DocumentID: Int] {
        let held = Set(try documentIDs())
        let prepared = docs.filter { !held.contains($0.id) }.compactMap(Document.prepareReceived)
        var created: [DocumentID: Int] = [:]
        var start = 0
        while start < prepared.count {
            // A bounded number of staged packages (and of their lock files held open) at once.
            let chunk = Array(prepared[start..<min(prepared.count, start + DurableBatch.maxPackages)])
            let before = start
            start += chunk.count
            for p in chunk { origins.registerCreated(p.id, origin: .merge) }
            let published = try Notebook.createBatch(chunk, folder: path, io: io, notebookLock: notebookLock,
                                                     staged: progress.map { tell in { tell(before + $0) } })
            for id in published {
                created[id] = chunk.first { $0.id == id }!.operationCount
                pokeFollowing(id)
            }
            try cacheClocks(of: chunk.filter { published.contains($0.id) })
        }
        return created
    }

    /// Records the clocks of packages just created, and their chain digests ([SYNC-52]), in the
    /// clock cache ([PKG-64]), with the identities of the files they were computed from, so the
    /// sync's next `logClocks` (what to push) and a clock comparison after a push into an empty
    /// folder do not open every new document to read back what it just wrote. A cache:
    /// an entry whose files changed since is ignored, and a failure to write it costs only time.
    private func cacheClocks(of packages: [PreparedPackage]) throws {
        guard !packages.isEmpty else { return }
        var cache = loadClockCache()
        for p in packages {
            let paths = PackagePaths(folder: path, id: p.id)
            for (page, clock) in p.clocks {
                let files = try fileIdentity(Notebook.clockFiles(paths, page: page))
                cache.entries[ClockCache.Key(document: p.id, page: page)] = ClockCache.Entry(files: files, clock: clock,
                                                                                            digests: p.digests[page])
            }
        }
        saveClockCache(cache)
    }

    /// Stages, syncs and publishes one batch of packages ([PKG-96]). Returns those published.
    /// `staged` is told how many packages of the chunk are staged, after each.
    private static func createBatch(_ chunk: [PreparedPackage], folder path: String, io: Syscalls,
                                    notebookLock: FileLock, staged stagedCount: ((Int) -> Void)? = nil) throws -> [DocumentID] {
        let batch = DurableBatch(io: io)
        var locks: [FileLock.Held] = []
        var staged: [(id: DocumentID, paths: PackagePaths, final: String)] = []
        defer { for l in locks { l.release() } }
        do {
            try notebookLock.withLock {
                for p in chunk {
                    let final = PackagePaths(folder: path, id: p.id).root
                    guard try io.stat(final) == nil else { continue }
                    let tmp = DurableFile.join(path, DurableFile.temporaryName(for: "\(p.id)\(PackagePaths.suffix)"))
                    let paths = PackagePaths(folder: path, id: p.id, root: tmp)
                    try io.mkdir(tmp)
                    staged.append((p.id, paths, final))
                    batch.addDirectory(tmp)
                    guard let l = try FileLock(path: paths.lock, io: io, timeout: notebookLock.timeout).tryAcquire() else {
                        throw LnoteError(.invalidState, "a new package's lock is held", path: paths.lock)
                    }
                    locks.append(l)
                }
            }
            for (k, (p, s)) in zip(chunk.filter { id in staged.contains { $0.id == id.id } }, staged).enumerated() {
                try Document.stage(p, at: s.paths, final: s.final, batch: batch)
                stagedCount?(k + 1)
            }
            try batch.sync(folder: path)
            let (done, refused) = try batch.publish()
            // Created meanwhile by another process: its package stays, the logs go to `receive`.
            for r in refused { try? io.removeTree(r.from) }
            return staged.filter { s in done.contains { $0.to == s.final } }.map(\.id)
        } catch {
            for s in staged where (try? io.stat(s.paths.root)) != nil { try? io.removeTree(s.paths.root) }
            throw error
        }
    }

    /// Keeps the received version of a forked operation in the quarantine ([PKG-48]): a known
    /// fork, listed by `verify` until its author repairs it.
    public func quarantineFork(_ f: ReceivedFork, document docID: DocumentID, page: PageID?, remote: String) throws {
        let e = QuarantineEntry(kind: .fork, time: options.now(), remote: remote, document: docID, page: page, operation: f.id,
                                reason: "\(remote) sent operation \(f.id) with content other than this replica's log holds "
                                    + "under that id (a fork: a replica reused its ids); this replica keeps its own",
                                frame: f.frame.encoded, hash: f.received, otherHash: f.held)
        try Quarantine.write(e, notebook: path, io: io, lock: notebookLock)
    }

    /// True when the asset is in the document's package or staged for it (`writeAsset`).
    public func hasAsset(_ asset: AssetID, document docID: DocumentID) async throws -> Bool {
        if try io.stat(PackagePaths(folder: path, id: docID).asset(asset))?.isRegular == true { return true }
        return try io.stat(stagedAssetPath(asset, document: docID))?.isRegular == true
    }

    /// An asset's bytes, from the document's package or from the staging folder.
    /// - Throws: `notFound` when neither holds it; `corrupt` when the bytes do not hash to
    ///   `asset`.
    public func readAsset(_ asset: AssetID, document docID: DocumentID) async throws -> [UInt8] {
        let inPackage = PackagePaths(folder: path, id: docID).asset(asset)
        if let bytes = try readVerified(inPackage, asset: asset) { return bytes }
        if let bytes = try readVerified(stagedAssetPath(asset, document: docID), asset: asset) { return bytes }
        throw LnoteError(.notFound, "no asset \(asset) in document \(docID)", path: inPackage)
    }

    /// Stores asset bytes that sync received for a document, before the operations that
    /// reference them: durably, in `.lnote/incoming/<document>.<asset>` (sync-protocol.md
    /// [SYNC-10]), never in the package. A package only gets an asset in the same opening
    /// that stores an operation referencing it (`receive`): written there directly, an asset
    /// would be removed as an orphan ([PKG-15]) by any close of the document before its
    /// operations arrive, and writing it for a document not held yet would create an empty
    /// package. Nothing is written when the package or the staging folder holds it already.
    ///
    /// Staging also removes staged assets older than `stagedAssetLifetime`: those no
    /// operation referenced (an upload whose push never came). A client that still needs one
    /// is told it is missing and uploads it again.
    public func writeAsset(_ bytes: [UInt8], document docID: DocumentID) async throws -> AssetID {
        let asset = AssetID.of(bytes)
        let inPackage = PackagePaths(folder: path, id: docID).asset(asset)
        if let st = try io.stat(inPackage), st.isRegular, st.size == UInt64(bytes.count) { return asset }
        let staged = stagedAssetPath(asset, document: docID)
        if let st = try io.stat(staged), st.isRegular, st.size == UInt64(bytes.count) { return asset }
        try notebookLock.withLock {
            if try io.stat(incomingPath) == nil {
                try io.mkdir(incomingPath, existingOK: true)
                try DurableFile.syncDirectory(DurableFile.join(path, ".lnote"), io: io)
            }
            try pruneStagedAssets()
            try DurableFile.replace(staged, with: bytes, io: io)
        }
        return asset
    }

    /// How long a staged asset waits for an operation that references it: 7 days.
    public static let stagedAssetLifetime: Int64 = 7 * 24 * 3600

    /// The folder of staged assets ([SYNC-10]).
    var incomingPath: String { DurableFile.join(path, ".lnote/incoming") }

    func stagedAssetPath(_ asset: AssetID, document docID: DocumentID) -> String {
        DurableFile.join(incomingPath, "\(docID.uuid.uuidString).\(asset)")
    }

    /// Removes temporary files left in the staging folder by an interrupted write
    /// ([PKG-21]) and staged assets older than `stagedAssetLifetime`. Under the notebook lock
    /// ([PKG-83]): every process writes there under it, so a temporary file is a dead
    /// writer's.
    private func pruneStagedAssets() throws {
        _ = try DurableFile.removeTemporaryFiles(in: incomingPath, io: io)
        let now = Int64(Date().timeIntervalSince1970)
        var removed = false
        for name in try io.listDirectory(incomingPath) {
            let p = DurableFile.join(incomingPath, name)
            guard let st = try io.stat(p), st.isRegular, now - st.modifiedSeconds > Self.stagedAssetLifetime else { continue }
            try io.unlink(p, missingOK: true)
            removed = true
        }
        if removed { try DurableFile.syncDirectory(incomingPath, io: io) }
    }

    /// A file's bytes, checked against the asset id it is stored under; nil when there is
    /// no such file.
    private func readVerified(_ file: String, asset: AssetID) throws -> [UInt8]? {
        guard let bytes = try DurableFile.readIfExists(file, io: io) else { return nil }
        guard AssetID.of(bytes) == asset else {
            throw LnoteError(.corrupt, "asset bytes do not match their name", path: file)
        }
        return bytes
    }

    /// Per-remote sync bookkeeping, kept in `.lnote/remotes/<sha256 of key>` ([PKG-63]).
    public func loadRemoteState(key: String) async throws -> [UInt8]? {
        try DurableFile.readIfExists(remoteStatePath(key), io: io)
    }

    ///
    /// Written under the notebook lock ([PKG-83]). Two processes syncing with the same remote
    /// at once each write their own; the last one stays.
    public func saveRemoteState(_ bytes: [UInt8], key: String) async throws {
        let dir = DurableFile.join(path, ".lnote/remotes")
        try notebookLock.withLock {
            try io.mkdir(dir, existingOK: true)
            try DurableFile.replace(remoteStatePath(key), with: bytes, io: io)
        }
    }

    private func remoteStatePath(_ key: String) -> String {
        DurableFile.join(path, ".lnote/remotes/\(AssetID.of(Array(key.utf8)))")
    }

    /// Every document package in the folder (deleted ones included), sorted.
    public func documentIDs() throws -> [DocumentID] {
        try io.listDirectory(path).compactMap(PackagePaths.documentID(fromName:)).sorted()
    }

    /// `documentIDs().contains(docID)`, without parsing every name in the folder at each
    /// request of a sync (a first pull asks for each of its documents: the names were parsed
    /// 200 × 200 times for 200 documents). The package's own name is looked up first; a name
    /// spelled otherwise (lowercase hex) is found by the listing.
    public func holdsDocument(_ docID: DocumentID) throws -> Bool {
        if io.fileType(atPath: PackagePaths(folder: path, id: docID).root) != nil { return true }
        return try documentIDs().contains(docID)
    }

    /// Runs `body` on the document holding a lease of this notebook's own ([PKG-94]): the
    /// document is opened for the call when nobody holds it, and closed after it only when
    /// nobody else took a lease meanwhile (an app's handle is never closed under it).
    func withDocument<T>(_ docID: DocumentID, _ body: (Document) async throws -> T) async throws -> T {
        let d = try await acquire(docID, external: false)
        let r: T
        do {
            r = try await body(d)
        } catch {
            try? await release(docID, external: false)
            throw error
        }
        // Given back once, also when closing fails: a second release would take another
        // holder's lease and close the handle under it.
        try await release(docID, external: false)
        return r
    }
}

extension Notebook {
    /// The applied clock of a log: what its state holds (`Document.clock(page:)`), which may
    /// exceed what the log holds ([PKG-51]).
    public func appliedClock(document docID: DocumentID, page: PageID?) async throws -> VectorClock {
        guard try holdsDocument(docID) else { return VectorClock() }
        return try await withDocument(docID) { try await $0.clock(page: page) }
    }
}
