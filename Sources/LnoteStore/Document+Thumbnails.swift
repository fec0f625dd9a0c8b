import LnoteModel
import LnoteReplication
import LnoteRender

// Thumbnails ([PKG-17], [PKG-103]): `thumbnails/<page>.jpg`, a JPEG whose COM segment stamps
// the page state it shows. Derived data, never a source of truth, and kept off the edit path:
// a save (autosave, flush, compaction, close) or a merge marks the pages whose picture is
// stale; a background task renders them once the save's own work is done, without the
// document lock, and writes each under the lock by durable replace. `close()` finishes what
// is still waiting before it returns (nothing is written by this handle after that).

extension Document {
    /// Longest side of a stored thumbnail, in pixels.
    public static let thumbnailSide = 256

    /// Where a page's thumbnail lives: `thumbnails/<page>.jpg`.
    public nonisolated func thumbnailPath(_ pid: PageID) -> String { paths.thumbnail(pid) }

    /// Where older versions of lnote kept a page's thumbnail: `thumbnails/<page>.png`. Read
    /// when no `.jpg` exists yet; removed when the page's JPEG is written.
    public nonisolated func legacyThumbnailPath(_ pid: PageID) -> String { paths.legacyThumbnail(pid) }

    /// What the stored thumbnail of a page is made from, for the background renderer.
    struct ThumbnailJob: Sendable {
        var page: PageID
        var state: PageState
        var canvas: CanvasSize
        var stamp: ThumbnailStamp
        /// Where the package keeps the image assets the page shows.
        var paths: PackagePaths
        var io: Syscalls
    }

    /// Draws a page as its stored thumbnail: rendered by cairo ([PKG-17]: images with their
    /// pixels, size and rotation), then a JPEG stamped with what it shows. Runs off the
    /// document's thread: asset files are read without the lock, which they do not need
    /// (content-addressed, written before the operations that show them, never rewritten).
    /// An asset file that is absent, or that does not decode, is drawn as the renderer's
    /// placeholder, and the picture is what this state looks like for good. An asset whose
    /// reading failed (EIO, EMFILE, ...) is drawn as the placeholder too, but `assetError`
    /// then says so: such a picture must not be stored stamped fresh (a later try may read it).
    static func drawThumbnail(_ job: ThumbnailJob) throws -> (bytes: [UInt8], assetError: (any Error)?) {
        var assetError: (any Error)?
        let picture = try PageRenderer.raster(job.state, canvas: job.canvas, maxSide: thumbnailSide, assets: { id in
            do {
                return try Document.drawableAsset(job.paths.asset(id), io: job.io)
            } catch {
                assetError = assetError ?? error
                return nil
            }
        })
        return (try JPEGEncoder.encode(picture, comment: job.stamp.comment), assetError)
    }

    // MARK: - Marking stale pictures

    /// Queues a page for the background renderer: its state may not be the one its picture
    /// shows. Cheap (a stamp of the page's clock), made on the save or merge path; nothing is
    /// drawn here. A loaded page whose picture this handle wrote for the same state is
    /// left alone.
    func markThumbnail(_ pid: PageID) {
        guard options.thumbnails, !closed, broken == nil else { return }
        if let lp = pages[pid], let record = doc.page(pid),
           thumbnailQueue.known(pid) == ThumbnailStamp(page: pid, clock: lp.replica.clock, canvas: record.canvas.value) {
            return
        }
        let delay = options.thumbnailDelay
        thumbnailQueue.mark(pid) {
            // A task of its own, running at once on the shared pool, concurrently with the
            // rest of this actor's current job (the save or the merge): its wait and its
            // `thumbnailQueue.next()` need no actor, so it can take a page mid-save. Only
            // what it asks of the document (`thumbnailJob`, `storeThumbnail`) waits for the
            // current job to end.
            Task.detached(priority: .utility) { [self] in
                if delay > .zero { try? await Task.sleep(for: delay) }
                await self.renderMarkedThumbnails()
            }
        }
    }

    /// At the end of a save: marks every loaded live page whose picture, as far as this
    /// handle knows, shows another state (edits since, a merge, a new canvas).
    func markChangedThumbnails() {
        guard options.thumbnails, !closed, broken == nil else { return }
        for (pid, lp) in pages {
            guard let record = doc.page(pid), !record.deleted.value else { continue }
            if thumbnailQueue.known(pid) != ThumbnailStamp(page: pid, clock: lp.replica.clock, canvas: record.canvas.value) {
                markThumbnail(pid)
            }
        }
    }

    /// The background renderer: takes marked pages one at a time until none waits. Asks the
    /// document for what to draw, draws it here (no lock, not on the document's thread),
    /// and has the document write it.
    nonisolated func renderMarkedThumbnails() async {
        while let pid = thumbnailQueue.next() {
            guard let job = await thumbnailJob(pid) else { continue }
            let bytes: [UInt8]
            do {
                let drawn = try Document.drawThumbnail(job)
                // An asset that could not be read: not stored, not known; the next save's
                // look at the page marks it again.
                guard drawn.assetError == nil else {
                    thumbnailQueue.count(failed: 1)
                    continue
                }
                bytes = drawn.bytes
            } catch {
                thumbnailQueue.count(failed: 1)
                continue
            }
            await storeThumbnail(job, bytes)
        }
    }

    /// What to draw for a marked page; nil when there is nothing to do: the handle is closed,
    /// the page is gone or deleted (a deleted page keeps its last picture), its state cannot
    /// be read without loading it, or its stored picture already shows this state.
    func thumbnailJob(_ pid: PageID) -> ThumbnailJob? {
        guard options.thumbnails, !closed, broken == nil, let record = doc.page(pid), !record.deleted.value else { return nil }
        // A loaded page's stamp is its clock's (the page caught up with its log first): a
        // picture that already shows that state is found without decoding the page's points.
        // Every page a handle loaded is marked at its first save and looked at again at
        // close; a server that opened a page to serve its log would otherwise decode all its
        // points at close only to find its picture current.
        if pages[pid] != nil, let lp = try? loadedPageDeferred(pid),
           pictureIsCurrent(pid, ThumbnailStamp(page: pid, clock: lp.replica.clock, canvas: record.canvas.value)) {
            return nil
        }
        guard let state = try? stateForThumbnail(pid) else { return nil }
        let stamp = ThumbnailStamp(page: pid, clock: state.clock, canvas: record.canvas.value)
        if pictureIsCurrent(pid, stamp) { return nil }
        return ThumbnailJob(page: pid, state: state, canvas: record.canvas.value, stamp: stamp, paths: paths, io: io)
    }

    /// For tests: whether `thumbnailJob` finds something to draw for `pid`, and whether the
    /// page's points are decoded after it (nil when the page is not loaded).
    func thumbnailCheck(_ pid: PageID) -> (draw: Bool, pointsDecoded: Bool?) {
        let job = thumbnailJob(pid)
        return (job != nil, pages[pid]?.replica.isResolved)
    }

    /// True when the page's picture, as this handle knows it or as stored, has `stamp`.
    private func pictureIsCurrent(_ pid: PageID, _ stamp: ThumbnailStamp) -> Bool {
        if thumbnailQueue.known(pid) == stamp { return true }
        // Only the file's first bytes (the stamp's segment): a sparse file of a terabyte in a
        // hostile folder is not allocated.
        if let stored = try? DurableFile.readPrefixIfExists(thumbnailPath(pid), count: ThumbnailStamp.stampPrefixSize, io: io),
           ThumbnailStamp.read(fromJPEG: stored) == stamp {
            thumbnailQueue.setKnown(pid, stamp)
            return true
        }
        return false
    }

    /// A page's state for its picture without loading it: a loaded page's state; else its
    /// snapshot's (an evicted page's snapshot holds what it was evicted with); else, for a
    /// page with no files, the empty page. nil when only its log would tell.
    func stateForThumbnail(_ pid: PageID) throws -> PageState? {
        if pages[pid] != nil { return try loadedPage(pid).replica.state }
        if let bytes = try DurableFile.readIfExists(paths.content(pid), io: io) {
            let state = try PageSnapshot.decode(bytes, path: paths.content(pid)).state
            return state.page == pid ? state : nil
        }
        return try pageHasFiles(pid) ? nil : PageState(page: pid)
    }

    /// Writes a picture the background renderer drew, unless the handle closed meanwhile or
    /// the page (loaded) moved on to another state: a newer mark is then on its way, and an
    /// older picture must not replace one `thumbnail(page:)` wrote meanwhile. Failures are
    /// counted, never thrown: a thumbnail is derived ([PKG-17]).
    ///
    /// The lock is only tried, never waited for: another process holding it would otherwise
    /// stall this actor (every edit and save) for up to `lockTimeout`. Under the lock the page
    /// is checked again (catching up may have moved it on), and a loaded page must have no
    /// frame not yet synced: a state whose frames a failed sync or a power cut could take back
    /// would reuse its counters for other content after reopening, and the picture would look
    /// fresh. A busy lock or such a page: nothing written, not known, marked again later.
    func storeThumbnail(_ job: ThumbnailJob, _ bytes: [UInt8]) {
        guard !closed, broken == nil else { return }
        guard pictureStillFits(job) else { return }
        do {
            let written = try tryLocked { () throws -> Bool in
                guard pictureStillFits(job), pageSettled(job.page) else { return false }
                try writeThumbnail(job.page, bytes)
                return true
            }
            guard written == true else {
                remarkThumbnailLater(job.page)
                return
            }
            thumbnailQueue.setKnown(job.page, job.stamp)
            thumbnailQueue.count(rendered: 1)
        } catch {
            thumbnailQueue.count(failed: 1)
        }
    }

    /// The page is not loaded (its state came from its snapshot, durable, or it has no
    /// files), or loaded with the clock the picture shows.
    private func pictureStillFits(_ job: ThumbnailJob) -> Bool {
        guard let lp = pages[job.page] else { return true }
        return lp.replica.clock == job.state.clock
    }

    /// A loaded page's log holds nothing not yet synced, by this process or (as far as it
    /// read) another, and no failed sync: its state survives a crash as it is.
    private func pageSettled(_ pid: PageID) -> Bool {
        guard let lp = pages[pid] else { return true }
        return lp.log.unsyncedFrames == 0 && !lp.log.othersUnsynced && lp.log.poisoned == nil
    }

    /// Marks a page again after a pause (a busy lock, frames not yet synced): a renderer that
    /// took it again at once would spin while the other process holds the lock. The pause is
    /// `thumbnailDelay`, between 100 ms and 5 s; a save meanwhile marks the page anyway (its
    /// picture is not known).
    private func remarkThumbnailLater(_ pid: PageID) {
        let pause = min(max(options.thumbnailDelay, .milliseconds(100)), .seconds(5))
        Task.detached(priority: .utility) { [weak self] in
            try? await Task.sleep(for: pause)
            await self?.markThumbnail(pid)
        }
    }

    /// `thumbnails/<page>.jpg` by durable replace under the document lock ([PKG-20],
    /// [PKG-92]); then the page's old `.png`, if any, is removed.
    func writeThumbnail(_ pid: PageID, _ bytes: [UInt8]) throws {
        try locked {
            try DurableFile.replace(thumbnailPath(pid), with: bytes, io: io)
            if try io.stat(legacyThumbnailPath(pid)) != nil {
                try io.unlink(legacyThumbnailPath(pid), missingOK: true)
                try DurableFile.syncDirectory(paths.thumbnails, io: io)
            }
        }
    }

    /// `close()`: renders, on this thread, every page still waiting and the one the renderer
    /// has in flight (its own result is then dropped: the handle is closed when it returns),
    /// unless the handle is broken (then they are dropped). Failures are skipped, as in the
    /// background.
    func finishThumbnailsForClose() {
        let waiting = thumbnailQueue.takeAll()
        // A renderer waiting out `thumbnailDelay` wakes now, finds nothing, and stops.
        thumbnailQueue.worker?.cancel()
        guard options.thumbnails, broken == nil else { return }
        for pid in waiting {
            guard let job = thumbnailJob(pid) else { continue }
            guard let drawn = try? Document.drawThumbnail(job), drawn.assetError == nil else {
                thumbnailQueue.count(failed: 1)
                continue
            }
            storeThumbnail(job, drawn.bytes)
        }
    }

    /// Returns once no page waits for its picture and the background renderer has stopped
    /// (after `thumbnailDelay`, when one is set). Tests wait here before looking at
    /// `thumbnails/`; an app need not (`close()` finishes the pictures itself).
    public func thumbnailsSettled() async {
        while let worker = thumbnailQueue.worker { await worker.value }
    }

    /// For tests: wakes a renderer waiting out `thumbnailDelay` (as `close()` does, but the
    /// pages still waiting are rendered by it), then returns once none waits and it stopped.
    /// With a long delay, a test decides when pictures are drawn, whatever the machine's load.
    func renderThumbnailsNow() async {
        while let worker = thumbnailQueue.worker {
            worker.cancel()
            await worker.value
        }
    }

    /// How the background renderer fared on this handle: pictures written, failures (drawing
    /// or writing), marks dropped because the queue was full.
    public nonisolated var thumbnailCounts: (rendered: Int, failed: Int, dropped: Int) {
        thumbnailQueue.state.withLock { ($0.rendered, $0.failed, $0.dropped) }
    }
}

// MARK: - Reading thumbnails

/// What `Document.refreshThumbnail(page:)` found before it made the picture fresh.
public enum ThumbnailRefresh: String, Sendable, Equatable {
    /// The stored JPEG showed the page's current state: nothing was written.
    case fresh
    /// No picture at all: one was rendered.
    case missing
    /// A JPEG of another state (or without a stamp): rendered again.
    case stale
    /// Only the `.png` of an older lnote: rendered as JPEG, the PNG removed.
    case legacyPNG
}

/// A page's picture as it is on disk, fresh or not.
public struct StoredThumbnail: Sendable, Equatable {
    public enum Format: String, Sendable { case jpeg, png }
    public var format: Format
    public var bytes: [UInt8]
    /// The stamp of a JPEG written by lnote ([PKG-103]); nil for a PNG.
    public var stamp: ThumbnailStamp?

    public init(format: Format, bytes: [UInt8], stamp: ThumbnailStamp?) {
        self.format = format
        self.bytes = bytes
        self.stamp = stamp
    }
}

extension Document {
    /// A page's picture, fresh ([PKG-17], [PKG-97], [PKG-103]): the stored
    /// `thumbnails/<page>.jpg` when its stamp is that of the page's current state; else the
    /// page drawn now from that state (a page with no files is drawn empty, without creating
    /// them) and stored by durable replace under the document lock, best-effort (a failure to
    /// store it still returns the picture), replacing an old `.png`.
    /// - Returns: the JPEG's bytes.
    /// - Throws: `notFound` when the document has no such page; what reading the page throws.
    public func thumbnail(page pid: PageID) throws -> [UInt8] {
        try freshThumbnail(pid, mustStore: false).bytes
    }

    /// `thumbnail(page:)` for `lnote verify --repair`: makes the stored picture fresh and says
    /// what it found. A failure to store it throws.
    public func refreshThumbnail(page pid: PageID) throws -> ThumbnailRefresh {
        try freshThumbnail(pid, mustStore: true).found
    }

    /// The cover ([PKG-17]): the picture of the first live page (`manifest.json`'s
    /// `coverPage`), fresh as `thumbnail(page:)` makes it; nil when no page is live.
    public func coverThumbnail() throws -> [UInt8]? {
        try checkUsable()
        try refreshDocument()
        guard let first = doc.livePages.first else { return nil }
        return try thumbnail(page: first.id)
    }

    /// The picture stored for a page, without drawing anything: `thumbnails/<page>.jpg`, else
    /// the `.png` of an older lnote; nil when there is neither (or it is not a regular file,
    /// or it is larger than `ThumbnailStamp.maxStoredSize`: not read, drawn again on request).
    /// It may be stale: compare `stamp` with the page's, or ask `thumbnail(page:)`.
    public nonisolated func storedThumbnail(page pid: PageID) -> StoredThumbnail? {
        let limit = ThumbnailStamp.maxStoredSize
        if let jpeg = try? DurableFile.readIfExists(thumbnailPath(pid), io: io, limit: limit) {
            return StoredThumbnail(format: .jpeg, bytes: jpeg, stamp: ThumbnailStamp.read(fromJPEG: jpeg))
        }
        if let png = try? DurableFile.readIfExists(legacyThumbnailPath(pid), io: io, limit: limit) {
            return StoredThumbnail(format: .png, bytes: png, stamp: nil)
        }
        return nil
    }

    /// The stamp of a page's current state ([PKG-103]), for telling whether a stored picture
    /// is fresh. Loads the page (without decoding its points) unless it has no files.
    /// - Throws: `notFound` when the document has no such page.
    public func thumbnailStamp(page pid: PageID) throws -> ThumbnailStamp {
        try checkUsable()
        try refreshDocument()
        guard let record = doc.page(pid) else {
            throw LnoteError(.notFound, "no page \(pid) in document \(id)", path: paths.root)
        }
        let hasContent = try pages[pid] != nil || pageHasFiles(pid)
        let clock = hasContent ? try loadedPageDeferred(pid).replica.clock : VectorClock()
        return ThumbnailStamp(page: pid, clock: clock, canvas: record.canvas.value)
    }

    func freshThumbnail(_ pid: PageID, mustStore: Bool) throws -> (bytes: [UInt8], found: ThumbnailRefresh) {
        let current = try thumbnailStamp(page: pid)
        let found: ThumbnailRefresh
        switch storedThumbnail(page: pid) {
        case let s? where s.format == .jpeg && s.stamp == current:
            thumbnailQueue.setKnown(pid, current)
            return (s.bytes, .fresh)
        case let s? where s.format == .jpeg: found = .stale
        case _?: found = .legacyPNG
        case nil: found = .missing
        }
        guard let record = doc.page(pid) else {
            throw LnoteError(.notFound, "no page \(pid) in document \(id)", path: paths.root)
        }
        let hasContent = try pages[pid] != nil || pageHasFiles(pid)
        let state = hasContent ? try loadedPage(pid).replica.state : PageState(page: pid)
        let job = ThumbnailJob(page: pid, state: state, canvas: record.canvas.value,
                               stamp: ThumbnailStamp(page: pid, clock: state.clock, canvas: record.canvas.value),
                               paths: paths, io: io)
        let (bytes, assetError) = try Document.drawThumbnail(job)
        // An asset that could not be read: the picture (its placeholder) is returned, not
        // stored stamped fresh; a repair is told why.
        if let assetError {
            if mustStore { throw assetError }
            return (bytes, found)
        }
        do {
            try writeThumbnail(pid, bytes)
            thumbnailQueue.setKnown(pid, job.stamp)
        } catch {
            // Derived data ([PKG-17]): the picture is returned all the same, except to a repair.
            if mustStore { throw error }
        }
        return (bytes, found)
    }
}

extension Document {
    /// Renders a page's current state (deleted pages included) as a thumbnail whose longer
    /// side is `maxSide` pixels, in the page's canvas aspect ratio. Writes nothing.
    /// - Throws: `notFound` when the document has no such page.
    public func renderThumbnail(_ pid: PageID, maxSide: Int = Document.thumbnailSide) throws -> Thumbnail {
        try checkUsable()
        guard let record = doc.page(pid) else {
            throw LnoteError(.notFound, "no page \(pid) in document \(id)", path: paths.root)
        }
        // A page with no files yet is empty: render it without creating its files.
        let hasContent = try pages[pid] != nil || pageHasFiles(pid)
        let state = hasContent ? try pageState(pid) : PageState(page: pid)
        return try PageRenderer.raster(state, canvas: record.canvas.value, maxSide: maxSide,
                                       assets: { id in try? Document.drawableAsset(self.paths.asset(id), io: self.io) })
    }
}
