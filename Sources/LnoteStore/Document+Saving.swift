import Foundation
import LnoteModel
import LnoteReplication

extension Document {
    // MARK: - Snapshots

    /// Writes a page's snapshot covering its log ([PKG-41]): sync the log, encode the state
    /// with the offset it covers (never past an operation still waiting for dependencies),
    /// durable replace of `pages/<id>.content`. The log itself is not touched: old operations
    /// stay for peers that are far behind.
    ///
    /// Under the document lock, after reading what the log gained ([PKG-88]): a page whose
    /// log another process replaced is dropped instead (its snapshot would name an
    /// incarnation that holds other operations). When another process appended since this
    /// handle's last snapshot, the snapshot on disk may already cover the same offset of the
    /// same incarnation: it is then kept as it is.
    func snapshot(_ lp: LoadedPage) throws {
        precondition(lockDepth > 0, "snapshots need the document lock")
        guard try refreshPage(lp) else { return }
        // [PKG-24] A log whose salvage could not be written (refreshPage retried it): no
        // snapshot of a log that is about to be rewritten; the page stays unsaved.
        guard lp.log.pendingSalvage == nil else { return }
        try syncNow(.page(lp.id), lp.log)
        let coveredOffset = min(lp.log.end, lp.pendingOffsets.values.min() ?? .max)
        if lp.othersSinceSnapshot, let s = try? snapshotSummary(lp.id), s.logIncarnation == lp.log.incarnation,
           s.coveredLogOffset == coveredOffset {
            snapshotCounts[lp.id] = PageCounts(elementCount: s.elementCount, modified: s.modified)
            lp.covered = (coveredOffset, lp.log.incarnation)
            lp.framesSinceSnapshot = lp.pendingOffsets.count
            lp.dirty = false
            lp.othersSinceSnapshot = false
            return
        }
        // Points deferred at load ([SNAP-38]) are decoded before they are written again;
        // damaged ones set the page aside to be rebuilt from its log ([PKG-42]).
        guard try resolveForSnapshot(lp) else { return }
        let state = lp.replica.state
        let bytes = PageSnapshot.encode(state, coveredLogOffset: coveredOffset, logIncarnation: lp.log.incarnation)
        guard try writeCache(paths.content(lp.id), bytes) else {
            // [PKG-23] Deferred: the page stays dirty and its log holds everything. The old
            // or the new file may be in place: read it again when needed.
            snapshotCounts[lp.id] = nil
            return
        }
        snapshotCounts[lp.id] = PageCounts(state)
        try keepPast(lp.id, total: state.clock.total, incarnation: lp.log.incarnation, bytes: bytes)
        markThumbnail(lp.id)  // drawn in the background, after this save ([PKG-103])
        lp.covered = (coveredOffset, lp.log.incarnation)
        lp.framesSinceSnapshot = lp.pendingOffsets.count
        lp.dirty = false
        lp.othersSinceSnapshot = false
    }

    /// Writes a cache of the logs — a page snapshot, `document.json`, `manifest.json` — by
    /// durable replace ([PKG-20]). Returns false, keeping the error in `deferredSave`, when
    /// the write failed with an I/O error (a full disk: ENOSPC, EDQUOT; EIO): the old file is
    /// intact, the logs hold everything the file would have held ([PKG-13]), and a later save
    /// or compaction writes it ([PKG-23]). So an edit, an import or a sync whose operations
    /// are durable in their log is reported as done, and is not repeated by a caller that
    /// would otherwise retry it. A simulated crash (tests) still throws.
    func writeCache(_ path: String, _ bytes: [UInt8]) throws -> Bool {
        do {
            try DurableFile.replace(path, with: bytes, io: io)
            return true
        } catch let e as LnoteError where e.code == .io && io.faults?.hasCrashed != true {
            deferredSave = e
            return false
        }
    }

    /// The summary of a page's snapshot on disk, nil when it has none or it is not one.
    func snapshotSummary(_ pid: PageID) throws -> PageSnapshot.Summary? {
        let path = paths.content(pid)
        let fd: FileDescriptor
        do {
            fd = try io.open(path, O_RDONLY)
        } catch let e as LnoteError where e.isNotFound {
            return nil
        }
        defer { try? fd.close() }
        let bytes = try io.pread(fd, count: PageSnapshot.summaryReadSize, at: 0)
        guard let s = try? PageSnapshot.summary(prefix: bytes, path: path), s.page == pid else { return nil }
        return s
    }

    /// A page's counts as its snapshot on disk records them ([PKG-12]): cached, or read from
    /// the snapshot's first bytes (`empty` when it has none).
    func counts(of pid: PageID) throws -> PageCounts {
        if let c = snapshotCounts[pid] { return c }
        let c = try PageCounts.read(paths.content(pid), page: pid, io: io)
        snapshotCounts[pid] = c
        return c
    }

    /// Compacts one page now: writes its snapshot if anything changed since the last one.
    public func compact(page pid: PageID) async throws {
        try checkUsable()
        try locked {
            let lp = try loadedPage(pid)
            if lp.dirty { try snapshot(lp) }
        }
    }

    /// Rewrites document.json when what it is made of changed since it was written, then
    /// manifest.json when it differs from what document.json and the page snapshots call
    /// for ([PKG-13], [PKG-16]). Everything they describe is synced first.
    ///
    /// After page edits alone, a save does not encode document.json at all (what it is made
    /// of — the document clock, the covered offset and incarnation of document.log, the
    /// asset sets — is compared with what it was written from), and recomputes the manifest
    /// with a dictionary look-up and two additions per live page: no page file is read, and
    /// its cost does not grow with the document's pages.
    ///
    /// Under the document lock ([PKG-82]), once the document log is up to date (the lock's
    /// catch-up), so what this handle writes covers everything the log holds. Another
    /// process may have saved since this handle last did ([PKG-93]): when document.json or
    /// manifest.json on disk is not the file this handle last read or wrote (its identity:
    /// inode, size, modification time; one `stat` each), it is read again before deciding,
    /// and the page counts cached here are read again from the snapshots.
    func saveDocumentFiles() throws {
        precondition(lockDepth > 0, "saving needs the document lock")
        // Pictures of the pages that changed are drawn after the save, in the background ([PKG-103]).
        defer { markChangedThumbnails() }
        try syncAllLogs()
        let coveredOffset = min(docLog.end, docPendingOffsets.values.min() ?? .max)
        let key = DocumentFileKey(clock: doc.clock, coveredOffset: coveredOffset, incarnation: docLog.incarnation,
                                  assetsGeneration: assetsGeneration)
        if try fileIdentity(paths.document) != documentIdentity {
            // Another process wrote it: see what it holds.
            let (read, identity) = try Document.readWithIdentity(paths.document, io: io)
            documentIdentity = identity
            documentOnDisk = nil
            documentSource = read.map(ManifestFile.fingerprint) ?? ""
            if let bytes = read, let (f, s, assets) = try? DocumentFile.decode(bytes, path: paths.document), assets == pageAssets {
                documentOnDisk = DocumentFileKey(clock: s.clock, coveredOffset: f.log.offset, incarnation: f.incarnation,
                                                 assetsGeneration: assetsGeneration)
            }
        }
        if key != documentOnDisk {
            let file = DocumentFile(state: doc.state, coveredOffset: coveredOffset, incarnation: docLog.incarnation,
                                    assets: pageAssets)
            let bytes = try StoreJSON.encode(file)
            documentOnDisk = nil  // unknown until the replace succeeds
            documentIdentity = []
            // [PKG-23] Deferred: the manifest, derived from document.json on disk, waits too.
            guard try writeCache(paths.document, bytes) else { return }
            documentOnDisk = key
            documentSource = ManifestFile.fingerprint(bytes)
            documentIdentity = try fileIdentity(paths.document)
        }
        if try fileIdentity(paths.manifest) != manifestIdentity {
            // Another process saved: its page snapshots may differ from the counts cached here.
            let (read, identity) = try Document.readWithIdentity(paths.manifest, io: io)
            manifestIdentity = identity
            manifestOnDisk = read.flatMap { try? ManifestFile.decode($0, path: paths.manifest) }
            manifestBytesAtOpen = nil
            let loaded = Set(pages.keys)
            snapshotCounts = snapshotCounts.filter { loaded.contains($0.key) && pages[$0.key]?.othersSinceSnapshot == false }
        }
        let basis: ManifestBasis
        if let b = manifestBasis, b.clock == doc.clock {
            basis = b.basis
        } else {
            basis = ManifestBasis(doc.state)
            manifestBasis = (doc.clock, basis)
        }
        // [PKG-13] 5: the manifest on disk gives the element count when a live page's
        // snapshot is in a newer format (never one that counts that page as empty).
        let previous = manifestOnDisk ?? manifestBytesAtOpen.flatMap { try? ManifestFile.decode($0, path: paths.manifest) }
        let manifest = try ManifestFile(basis: basis, source: documentSource, previous: previous) { try counts(of: $0) }
        if manifest != manifestOnDisk {
            let bytes = try StoreJSON.encode(manifest)
            if bytes != manifestBytesAtOpen {
                manifestOnDisk = nil
                manifestIdentity = []
                guard try writeCache(paths.manifest, bytes) else { return }  // [PKG-23]
                manifestIdentity = try fileIdentity(paths.manifest)
            }
            manifestOnDisk = manifest
            manifestBytesAtOpen = nil
        }
    }

    // MARK: - Autosave, flush, close

    /// Notes an edit and arms the debounced autosave ([PKG-50]).
    func noteEdit() {
        let t = ContinuousClock.now
        lastEdit = t
        if firstUnsaved == nil { firstUnsaved = t }
        guard options.autosave, autosaveTask == nil else { return }
        autosaveTask = Task { await self.autosaveLoop() }
    }

    private func autosaveLoop() async {
        while !closed {
            try? await Task.sleep(for: options.autosaveDelay)
            guard !closed, let last = lastEdit, let first = firstUnsaved else { break }
            let now = ContinuousClock.now
            if now - last >= options.autosaveDelay || now - first >= options.autosaveMaxDelay { break }
        }
        autosaveTask = nil
        guard !closed, broken == nil else { return }
        do {
            try locked { try autosave() }
            autosaveFailure = nil
        } catch let e as LnoteError {
            autosaveFailure = e
        } catch {
            autosaveFailure = LnoteError(.io, "\(error)")
        }
    }

    /// What a background autosave does: compact pages past the threshold, then save the
    /// document snapshot and the manifest.
    func autosave() throws {
        firstUnsaved = nil
        deferredSave = nil
        for lp in pages.values where lp.dirty
            && (lp.bytesSinceSnapshot >= options.compactAfterBytes || lp.framesSinceSnapshot >= options.compactAfterFrames) {
            try snapshot(lp)
        }
        try saveDocumentFiles()
    }

    /// Saves everything now (the app is going to the background): every changed page's
    /// snapshot, document.json and manifest.json.
    public func flush() async throws {
        try checkUsable()
        try locked {
            firstUnsaved = nil
            deferredSave = nil
            for lp in pages.values where lp.dirty { try snapshot(lp) }
            try saveDocumentFiles()
        }
        autosaveFailure = nil
    }

    /// Closes the page's log and forgets it, after writing its snapshot if it changed.
    public func closePage(_ pid: PageID) async throws {
        try checkUsable()
        guard let lp = pages[pid] else { return }
        if lp.dirty { try locked { try snapshot(lp) } } else { try syncNow(.page(pid), lp.log) }
        guard pages[pid] === lp else { return }
        pages[pid] = nil
        try lp.log.close()
    }

    /// Gives back the lease this caller got from `Notebook.openDocument` ([PKG-94]): what
    /// changed is saved (as `flush()` does), and when no other lease remains — another
    /// caller, or the notebook's own work (a sync, a delete) — the handle is closed for good:
    /// orphan assets ([PKG-15]) are removed and every file released. A handle that is still
    /// leased elsewhere stays usable; its holder's calls go on. Calling it more times than
    /// the document was opened does nothing.
    public func close() async throws {
        guard !closed else { return }
        guard let lease, try await lease(id) else {
            try await closeNow()
            return
        }
    }

    /// Saves everything, removes orphan assets ([PKG-15]) and releases every file: the
    /// handle is unusable afterwards. Safe to call once; later calls do nothing.
    func closeNow() async throws {
        guard !closed else { return }
        var failure: Error?
        if broken == nil {
            do {
                try locked {
                    deferredSave = nil
                    for lp in pages.values where lp.dirty { try snapshot(lp) }
                    try removeOrphanAssets()
                    try saveDocumentFiles()
                }
            } catch {
                failure = error
            }
        }
        // The pictures still waiting are drawn now: nothing is written after close ([PKG-103]).
        finishThumbnailsForClose()
        closed = true
        watcher?.stop()
        watcher = nil
        autosaveTask?.cancel()
        autosaveTask = nil
        for key in Array(syncWaiters.keys) { failWaiters(key, LnoteError(.invalidState, "document closed")) }
        for lp in pages.values {
            do { try lp.log.close() } catch { failure = failure ?? error }
        }
        pages = [:]
        do { try docLog.close() } catch { failure = failure ?? error }
        try? undoFile?.close()
        undoFile = nil
        hub.finish()
        if let failure { throw failure }
    }

    var isClosed: Bool { closed }

    func setLease(_ f: @escaping @Sendable (DocumentID) async throws -> Bool) { lease = f }

    // MARK: - Orphan assets

    /// Removes files in `assets/` that no page references ([PKG-15]). A page references an
    /// asset when any add operation in its log, or any live element of its snapshot, names
    /// it. The cached per-page sets in document.json (which only grow, from every add
    /// applied or replayed here and every snapshot loaded) decide quickly that nothing is
    /// orphaned; before anything is removed every page's whole log and snapshot are read to
    /// confirm.
    ///
    /// Under the document lock: every append that references an asset is made under it too,
    /// after its asset is written ([PKG-14]), so what the logs say here is complete.
    @discardableResult
    func removeOrphanAssets() throws -> [AssetID] {
        precondition(lockDepth > 0, "removing assets needs the document lock")
        let names = try io.listDirectory(paths.assets)
        var candidates = Set(names.compactMap(AssetID.init(hex:)))
        for a in pageAssets.values { candidates.subtract(a) }
        guard !candidates.isEmpty else { return [] }
        // Every page with files, known to the document or not yet (its addPage may be on its way).
        var pageIDs = Set(doc.state.pages.map(\.id)).union(pages.keys)
        for name in try io.listDirectory(paths.pages) where !DurableFile.isTemporaryName(name) {
            if name.hasSuffix(".log"), let p = PageID(String(name.dropLast(4))) { pageIDs.insert(p) }
            if name.hasSuffix(".content"), let p = PageID(String(name.dropLast(8))) { pageIDs.insert(p) }
            if name.hasSuffix(".base"), let p = PageID(String(name.dropLast(5))) { pageIDs.insert(p) }
        }
        for p in pageIDs.sorted() {
            // A page whose files cannot be read whole may reference anything: remove nothing.
            guard let referenced = try assetsReferenced(by: p) else { return [] }
            candidates.subtract(referenced)
            if candidates.isEmpty { return [] }
        }
        for a in candidates.sorted() { try io.unlink(paths.asset(a), missingOK: true) }
        try DurableFile.syncDirectory(paths.assets, io: io)
        return candidates.sorted()
    }

    /// Every asset a page's whole log, snapshot and checkpoint base name; nil when its
    /// snapshot or base does not decode (what they reference is then unknown, and a
    /// checkpoint-installed page's log does not hold the adds its base covers).
    func assetsReferenced(by pid: PageID) throws -> Set<AssetID>? {
        var out = Set<AssetID>()
        if pages[pid] != nil {
            let lp = try loadedPage(pid, allowUnknown: true)
            try syncNow(.page(pid), lp.log)
            out.formUnion(lp.replica.state.imageAssets)
            for f in try readAllFrames(lp) { if let a = Document.imageAsset(in: f) { out.insert(a) } }
        } else {
            if let bytes = try DurableFile.readIfExists(paths.content(pid), io: io) {
                guard let s = try? PageSnapshot.decode(bytes, path: paths.content(pid)) else { return nil }
                out.formUnion(s.state.imageAssets)
            }
            do {
                if let base = try baseState(page: pid) { out.formUnion(base.imageAssets) }
            } catch let e as LnoteError where e.code == .corrupt || e.code == .truncated || e.code == .unsupportedVersion {
                return nil
            }
            if let bytes = try DurableFile.readIfExists(paths.log(pid), io: io), bytes.count > LogHeader.size {
                let scan = LogScanner.scanFile(bytes, path: paths.log(pid))
                for f in scan.frames { if let a = Document.imageAsset(in: f) { out.insert(a) } }
            }
        }
        noteAssets(out, page: pid)
        return out
    }

    static func imageAsset(in lf: LoggedFrame) -> AssetID? {
        guard lf.frame.type == OperationCodec.Kind.add.rawValue,
              let op = try? OperationCodec.decode(lf.frame), case .add(.image(let i), _) = op.body else { return nil }
        return i.asset
    }

    /// Every frame of a loaded page's log; damage found on the way is salvaged and reported.
    func readAllFrames(_ lp: LoadedPage) throws -> [LoggedFrame] {
        do {
            return try lp.log.readFrames(from: UInt64(LogHeader.size))
        } catch let e as LnoteError where e.code == .corrupt {
            return try locked { try salvagePage(lp) }
        }
    }

    /// Salvages a loaded page's log ([PKG-38]) under the document lock and applies what the
    /// rewritten log gives back. Returns every frame of it.
    func salvagePage(_ lp: LoadedPage) throws -> [LoggedFrame] {
        precondition(lockDepth > 0, "a salvage needs the document lock")
        // Records a listing open left unparsed ([SNAP-46]) that do not decode: nothing can be
        // applied onto them. The log is salvaged, and the page set aside, to be loaded again
        // eagerly from its files (which quarantines the snapshot and replays the salvaged log,
        // [PKG-42]).
        if lp.replica.hasUnbuiltRecords, (try? lp.replica.buildRecords()) == nil {
            let replay = try lp.log.recover()
            reports.append(replay.report)
            _ = readUnbuiltRecords(lp)
            return replay.frames
        }
        do {
            let replay = try lp.log.recover()
            var report = replay.report
            // Offsets changed with the new incarnation: re-offer every frame (the engine skips
            // what it has) and recompute where the waiting operations are.
            var pending: [OpID: UInt64] = [:]
            let applied = try Document.feed(replay.frames, kind: .page, fromStart: true, path: lp.log.path,
                                            report: &report, pending: &pending) { try lp.replica.receive($0) }
            lp.pendingOffsets = pending.filter { !lp.replica.clock.covers($0.key) }
            if lp.log.pendingSalvage == nil,
               Document.ownOperationLost(pending: lp.pendingOffsets, report: report, clock: lp.replica.clock, author: replica) {
                // [PKG-56] As on loading: an operation of this replica the damage took, whose id
                // the next edit would take again.
                report.mintedReplica = try identity.remint(reason: Document.ownOperationLostReason(lp.log.path))
            }
            lp.covered = nil
            lp.framesSinceSnapshot = replay.frames.count
            lp.dirty = true
            lp.logIndex = nil
            reports.append(report)
            noteAssets(of: applied.compactMap(\.addedContent), page: lp.id)
            // [PKG-51] The state keeps what the damage took from the log: record it, so that
            // sync offers the clock of what the log still holds and a peer sends it back.
            try settleMissing(lp, frames: replay.frames)
            emitPageEvents(applied, lp, origin: .otherProcess)
            return replay.frames
        }
    }
}
