import Foundation
import Synchronization
import LnoteModel
import LnoteReplication

extension Document {
    // MARK: - Pages in memory

    /// A loaded page, up to date with its log ([PKG-87]): loads it if needed ([PKG-42]: its
    /// ONE `.content` snapshot, then its log from the offset the snapshot covers), else
    /// applies what other processes appended since this handle last looked. Loading takes no
    /// lock in the common case ([PKG-85]); a page that needs a repair (a damaged snapshot or
    /// log, a snapshot that does not pair with its log, a missing log beside a snapshot, a
    /// missing-operations file) is loaded under the document lock, where the repair is made.
    ///
    /// With `deferring` (listing a page), a page not yet loaded is loaded with its points
    /// deferred ([SNAP-38], [LOG-27]), and a loaded page may still hold deferred points:
    /// everything but listing goes through `loadedPage`, which loads eagerly or resolves.
    func loadedPageDeferred(_ pid: PageID, allowUnknown: Bool = false, deferring: Bool = true) throws -> LoadedPage {
        useCounter += 1
        if let p = pages[pid] {
            p.lastUse = useCounter
            if try refreshPage(p) { return p }
            // Its log was replaced, or lost frames this handle had read: read it again.
        }
        guard allowUnknown || doc.page(pid) != nil else {
            throw LnoteError(.notFound, "no page \(pid) in document \(id)", path: paths.root)
        }
        try evictPages(keepingRoomFor: 1)
        let deferring = deferring && !eagerPages.contains(pid)
        if lockDepth == 0, let lp = try loadPageWithoutLock(pid, deferring: deferring) {
            lp.lastUse = useCounter
            pages[pid] = lp
            return lp
        }
        // A page that needs a repair is loaded eagerly: the repairs ([PKG-47], [PKG-56]) count
        // what the page holds, and they are made once.
        return try locked { try loadPageLocked(pid, deferring: false) }
    }

    /// The common case of loading a page, without the lock and without writing anything
    /// ([PKG-85], [PKG-86]): the snapshot decodes (or there is none), no missing-operations
    /// file, and the log holds whole frames from the offset the snapshot covers, in the
    /// incarnation it names (an append in progress at the end is left for later). A page with
    /// no files at all is empty, and its log is created by its first writer. nil when a repair
    /// is needed.
    func loadPageWithoutLock(_ pid: PageID, deferring: Bool = false) throws -> LoadedPage? {
        let contentPath = paths.content(pid)
        var base = PageState(page: pid)
        var deferred: DeferredPoints?
        // The log is read first, from where the snapshot's header says it covers (checked
        // below, when the snapshot is decoded): the snapshot's state is then decoded with room
        // for the tail's adds, rather than moved to bigger memory when they are applied.
        let snapshot = try DurableFile.readIfExists(contentPath, io: io)
        var covered: (offset: UInt64, incarnation: UInt64)?
        if let snapshot {
            guard let peeked = PageSnapshot.peekCoverage(snapshot) else { return nil }
            covered = peeked
        }
        var fromBase = false
        if covered == nil, let b = try baseState(page: pid) {
            base = b
            fromBase = true
        }
        guard try !hasMissingFile(paths.missing(pid)) else { return nil }
        var openedLog: PageLog?
        var frames: [LoggedFrame] = []
        var report = RecoveryReport(path: paths.log(pid))
        // With a snapshot, the log's frames are scanned (CRCs checked) beside the snapshot's
        // decode rather than before it: `tail` is the log read, not yet scanned.
        var tail: PageLog.Tail?
        if snapshot != nil {
            // Opened without a stat first: an absent log is nil here too, and a snapshot
            // without its log is repaired under the lock ([PKG-55]).
            guard let t = try PageLog.readTail(path: paths.log(pid), kind: .page, owner: pid.uuid,
                                               from: covered?.offset, incarnation: covered?.incarnation, io: io)
            else { return nil }
            tail = t
        } else if try io.stat(paths.log(pid)) == nil {
            // [PKG-55] A snapshot or base without its log needs one created and the missing
            // operations recorded: under the lock.
            guard covered == nil && !fromBase else { return nil }
            openedLog = PageLog(absent: paths.log(pid), kind: .page, owner: pid.uuid, io: io)
            openedLog?.anchorForCreation = { [self] in newLogAnchor() }
        } else {
            guard let (opened, replay) = try PageLog.openForReading(path: paths.log(pid), kind: .page, owner: pid.uuid,
                                                                     from: covered?.offset, incarnation: covered?.incarnation,
                                                                     io: io) else { return nil }
            openedLog = opened
            frames = replay.frames
            report = replay.report
        }
        var decodedFrames: [Result<Op, any Error>]?
        // [LOG-28] A tail's leading plain adds, read straight from their frames (listing only:
        // their points are deferred); the frames past them decoded as operations. With a
        // snapshot, read where they lie in the tail (`run`: `frames` holds only the frames
        // after them).
        var plain: [PlainAddStroke] = []
        var run = PlainRun()
        var unbuilt: UnbuiltRecords?
        if let snapshot, let t = tail {
            // [PKG-42] Points deferred to their first use ([SNAP-38]): `loadedPage`.
            var both = Document.decode(snapshot: snapshot, path: contentPath, tail: t.bytes, from: t.start, anchor: t.anchor,
                                       logPath: paths.log(pid), deferringPoints: deferring)
            // The log as `openForReading` gives it, from the scan made beside the decode.
            guard let (opened, replay) = try PageLog.finishOpening(t, scan: both.scan) else { return nil }
            openedLog = opened
            frames = replay.frames
            report = replay.report
            // [PKG-99] A snapshot from before restores is replaced under the lock.
            guard var s = both.snapshot.take(), s.state.page == pid, s.coveredLogOffset == covered?.offset,
                  s.logIncarnation == covered?.incarnation, !s.lacksEraseHistory else {
                try? opened.close()
                return nil
            }
            // Moved out, not copied: the replica then holds the only reference to the elements
            // and to the plain adds, and grows and takes them in place rather than copying
            // every record on its first append.
            swap(&base, &s.state)
            deferred = s.deferredPoints
            unbuilt = s.unbuilt.take()
            decodedFrames = both.frames.take()
            swap(&run, &both.scan.leading)
            swap(&plain, &run.adds)
        } else if deferring {
            plain = Document.plainAdds(frames, path: paths.log(pid))
        }
        guard let log = openedLog else { preconditionFailure("a page log opened on every path") }
        // The images of the base, before the state moves into the replica (without a copy).
        // (Records left unparsed, [SNAP-46], are not looked at: their images were noted when
        // the snapshot's state was made, as for a page not loaded at all.)
        let baseAssets = base.imageAssets
        var live = PageReplica(state: consume base,
                               reservingAdds: min(run.count + Document.addFrames(frames), Document.maxReservedFromTail),
                               deferredPoints: .some(deferred), unbuilt: unbuilt.take())
        var pending: [OpID: UInt64] = [:]
        let applied: [Op]
        // Applied straight from their bytes while the replica would apply them at once; the
        // first that it would not, and every frame after it, go through `receive`.
        let plainCount = plain.count, frameCount = run.count + frames.count
        let direct = live.applyPlainAdds(taking: &plain)
        // The source holds only the streams of the adds applied: the others are replayed as
        // their frames, whose own sources are checked ([LOG-27]).
        if direct < run.count { run.source?.keepStreams(direct) }
        Document.listingOpenStats.withLock {
            $0.opens += 1; $0.direct += direct; $0.plain += plainCount; $0.frames += frameCount
            if live.hasUnbuiltRecords { $0.unbuilt += 1 }
        }
        // The run's adds not applied from their bytes are replayed as the frames they are.
        var skip = direct, decodedFrom = plainCount
        if run.count > 0 {
            frames = run.loggedFrames(direct..<run.count) + frames
            (skip, decodedFrom) = (0, run.count - direct)
        }
        // [SNAP-46] Frames to replay onto records a listing open left unparsed: read them now.
        // When they do not decode, the page is loaded again eagerly under the lock, which finds
        // the damage and quarantines the snapshot ([PKG-42]).
        if frames.count > skip && live.hasUnbuiltRecords {
            do {
                try live.buildRecords()
            } catch {
                try? log.close()
                return nil
            }
        }
        do {
            applied = try Document.feed(frames, skipping: skip, kind: .page, fromStart: covered == nil, path: paths.log(pid),
                                        report: &report, pending: &pending, deferringPoints: deferring,
                                        decoded: decodedFrames, decodedFrom: decodedFrom) {
                // Every operation `feed` hands over came out of the frame decoder, which
                // validated it as `receive` would ([LOG-20]).
                try live.receive($0, allowingDeferred: true, validated: true)
            }
        } catch {
            try? log.close()
            throw error
        }
        pending = pending.filter { !live.clock.covers($0.key) }
        if Document.ownOperationLost(pending: pending, report: report, clock: live.clock, author: replica) {
            try? log.close()
            return nil  // [PKG-56] needs a new replica id: under the lock
        }
        if !report.isClean { reports.append(report) }
        let lp = LoadedPage(id: pid, replica: live, log: log)
        lp.pendingOffsets = pending
        lp.covered = covered
        lp.framesSinceSnapshot = frameCount
        lp.dirty = !applied.isEmpty || direct > 0 || fromBase
        noteAssets(Set(baseAssets), page: pid)
        noteAssets(of: applied.lazy.compactMap(\.addedContent), page: pid)
        return lp
    }

    /// A page's snapshot (nil when it does not decode), the scan of its log's bytes from
    /// `from` (`tail`), and the operations of the frames it found, decoded side by side on two
    /// cores when the tail is worth it: neither needs the other, and each alone leaves a core
    /// idle on a long tail. The snapshot is decoded with room for the tail's adds (counted
    /// from the frames' lengths and types before the scan checks them).
    ///
    /// The frames are read as operations only when the scan found the log clean (what
    /// `PageLog.finishOpening` accepts). With `deferringPoints`, the tail's leading plain adds
    /// are read as such, where they lie ([LOG-28], `scan.leading`), and `frames` holds the
    /// operations of the frames past them (`scan.frames`); nil when the tail is short (read
    /// in turn, `feed` decodes them).
    static func decode(snapshot: [UInt8], path: String, tail: [UInt8], from base: UInt64, anchor: LogAnchor?, logPath: String,
                       deferringPoints: Bool)
        -> (snapshot: PageSnapshot.Contents?, scan: LogScan, frames: [Result<Op, any Error>]?) {
        let (count, adds) = framesAndAdds(tail)
        // Counted from lengths no CRC has checked yet: room for at most `maxReservedFromTail`
        // (a damaged or hostile tail of 9-byte "adds" would otherwise reserve 168-byte
        // records for each, 19 times its size); past it the arrays grow as frames check out.
        let reserving = min(adds, maxReservedFromTail), expecting = min(count, maxReservedFromTail)
        @Sendable func decodeSnapshot() -> PageSnapshot.Contents? {
            try? PageSnapshot.decode(snapshot, path: path, deferringPoints: deferringPoints, reserving: reserving,
                                     leavingRecordsUnbuilt: deferringPoints)
        }
        @Sendable func clean(_ scan: LogScan) -> Bool { scan.damage.isEmpty && !scan.tailIsCompleteBadFrame }
        // A listing open reads the tail's leading plain adds where they lie (`scan.leading`).
        @Sendable func scanTail() -> LogScan {
            deferringPoints ? LogScanner.scanListing(tail, base: base, anchor: anchor, path: logPath, expecting: expecting, adds: reserving)
                            : LogScanner.scan(tail, base: base, anchor: anchor, expecting: expecting)
        }
        // A snapshot whose records a listing read leaves unparsed ([SNAP-46]) takes a few tens of
        // microseconds: less than handing the tail to another core costs the caller.
        guard count >= sideBySideFrames, !(deferringPoints && PageSnapshot.mayLeaveRecordsUnparsed(snapshot)) else {
            return (decodeSnapshot(), scanTail(), nil)
        }
        typealias Tail = (scan: LogScan, frames: [Result<Op, any Error>])
        @Sendable func decodeTail() -> Tail {
            let scan = scanTail()
            guard clean(scan) else { return (scan, []) }
            return (scan, decode(scan.frames, path: logPath, deferringPoints: deferringPoints))
        }
        // The snapshot, the longer half, on this thread; the tail beside it.
        let (contents, (scan, operations)) = Parallel.beside(decodeTail, decodeSnapshot)
        return (contents, scan, operations)
    }

    /// How many frames `tail` holds, and how many of them say they add an element, read from
    /// their lengths and type bytes alone, up to the first length that does not fit (the
    /// scan checks them). No more than the scan then finds, for a log that is not damaged.
    static func framesAndAdds(_ tail: [UInt8]) -> (frames: Int, adds: Int) {
        tail.withUnsafeBufferPointer { b in
            var at = 0, frames = 0, adds = 0
            while b.count - at >= Frame.headerSize + 1 {
                let length = Int(UInt32(b[at]) | UInt32(b[at + 1]) << 8 | UInt32(b[at + 2]) << 16 | UInt32(b[at + 3]) << 24)
                guard length >= 1, length <= Frame.maxLength, length <= b.count - at - Frame.headerSize else { break }
                let type = b[at + Frame.headerSize]
                // A log-form frame ([LOG-33]) is an addStroke3 once read.
                if saysAdd(type) || type == LogAnchor.logFormAddStroke3 { adds += 1 }
                frames += 1
                at += Frame.headerSize + length
            }
            return (frames, adds)
        }
    }

    /// The leading frames of a log tail that are plain adds ([LOG-28]), read as such; stops
    /// at the first frame that is not one.
    static func plainAdds(_ frames: [LoggedFrame], path: String) -> [PlainAddStroke] {
        var out: [PlainAddStroke] = []
        for lf in frames {
            guard let a = OperationCodec.plainAddStroke(lf.frame, base: lf.payloadBase, path: path)
            else { break }
            if out.isEmpty { out.reserveCapacity(min(frames.count, maxReservedFromTail)) }
            out.append(a)
        }
        return out
    }

    /// From this many frames in a tail, `decode(snapshot:…)` decodes them beside the snapshot.
    static let sideBySideFrames = 64

    /// The most frames, and elements, an open reserves room for from what a log tail says
    /// (2.6 MiB of records): frame lengths before their CRCs are checked, and the frames
    /// that say they add, whose CRCs anyone can compute. Past it, arrays grow as operations
    /// apply: a tail of 9-byte frames must not buy a 168-byte record's room for each.
    static let maxReservedFromTail = 1 << 14

    /// What the listing opens of this process did with their log tails ([LOG-28]): opens,
    /// tail frames, plain adds found, those applied from their bytes, and the opens that left
    /// a snapshot's records unparsed ([SNAP-46]). Read by tests (that
    /// the shortcut runs where it should) and free to keep: four additions under a lock per open.
    struct ListingOpenStats: Sendable { var opens = 0, direct = 0, plain = 0, frames = 0, unbuilt = 0 }
    static let listingOpenStats = Mutex(ListingOpenStats())

    /// How many of `frames` say they add an element (by their type byte): the room a replay
    /// makes at once. No more than applying them would take.
    static func addFrames(_ frames: [LoggedFrame]) -> Int {
        frames.reduce(0) { $0 + (saysAdd($1.frame.type) ? 1 : 0) }
    }

    /// True for the type byte of a frame that adds an element (`add`, `addStroke`, `addStroke2`, `addStroke3`).
    static func saysAdd(_ type: UInt8) -> Bool {
        type == OperationCodec.Kind.add.rawValue || OperationCodec.isCompactStroke(type)
    }

    /// Loads a page under the document lock, making the repairs it needs ([PKG-42],
    /// [PKG-47], [PKG-51], [PKG-55], [PKG-56]).
    func loadPageLocked(_ pid: PageID, deferring: Bool = false) throws -> LoadedPage {
        precondition(lockDepth > 0, "loadPageLocked needs the document lock")
        if let p = pages[pid], try refreshPage(p) { return p }
        let sources = try pageSources(pid, deferring: deferring)
        var logReport = sources.replay.report
        var live = PageReplica(state: sources.base, reservingAdds: min(Document.addFrames(sources.replay.frames), Document.maxReservedFromTail),
                               deferredPoints: .some(sources.deferredPoints))
        var pending: [OpID: UInt64] = [:]
        let applied: [Op]
        do {
            applied = try Document.feed(sources.replay.frames, kind: .page,
                                        fromStart: sources.replay.start == UInt64(LogHeader.size), path: paths.log(pid),
                                        report: &logReport, pending: &pending,
                                        deferringPoints: deferring) { try live.receive($0, allowingDeferred: true) }
        } catch {
            try? sources.log.close()
            throw error
        }
        // Replayed onto a snapshot, operations it already holds were not applied either: only
        // those its clock does not cover wait.
        pending = pending.filter { !live.clock.covers($0.key) }
        let author = replica
        // [PKG-24] While a salvage waits for space nothing is written (no edit either): the new
        // id is minted when the salvage is made (`salvagePage`).
        if Document.ownOperationLost(pending: pending, report: logReport, clock: live.clock, author: author)
            && sources.log.pendingSalvage == nil {
            // [PKG-56] Operations of this replica wait for one of its own the log lost (damage),
            // or one of its own does not decode: the next edit would take the lost one's id.
            do {
                logReport.mintedReplica = try identity.remint(reason: Document.ownOperationLostReason(paths.log(pid)))
            } catch {
                try? sources.log.close()
                throw error
            }
        }
        if !logReport.isClean || logReport.mintedReplica != nil { reports.append(logReport) }
        if var unpaired = sources.unpaired {
            // [PKG-47] Say what the discarded snapshot held that the log does not give back.
            unpaired.report.noteLostOperations(snapshot: unpaired.clock, rebuilt: live.clock, replica: author)
            do {
                if identity.current == author { try mintIfOwnOperationsWereLost(&unpaired.report) }
            } catch {
                try? sources.log.close()
                throw error
            }
            reports.append(unpaired.report)
        }
        let (log, covered) = (sources.log, sources.covered)
        let lp = LoadedPage(id: pid, replica: live, log: log)
        do {
            // [PKG-51] What the state holds that the log lacks: known once the whole log was read
            // (a replay from its header, onto a snapshot of another incarnation or of a deleted
            // log), or when an earlier opening recorded some (the log is then read whole again).
            let fromHeader = sources.replay.start == UInt64(LogHeader.size)
            if try fromHeader || hasMissingFile(paths.missing(pid)) {
                try settleMissing(lp, frames: fromHeader ? sources.replay.frames : try log.readFrames(from: UInt64(LogHeader.size)))
            }
        } catch {
            try? log.close()
            throw error
        }
        lp.pendingOffsets = pending
        lp.covered = covered.flatMap { $0.incarnation == log.incarnation ? $0 : nil }
        lp.framesSinceSnapshot = sources.replay.frames.count
        // A page without a usable snapshot whose state is not empty gets one at the next
        // save: its snapshot summary is what the manifest counts ([PKG-12]).
        lp.dirty = !applied.isEmpty || lp.covered == nil && covered != nil || sources.quarantined || sources.fromBase
        lp.lastUse = useCounter
        pages[pid] = lp
        noteAssets(of: sources.base.elements.lazy.map(\.content), page: pid)
        noteAssets(of: applied.lazy.compactMap(\.addedContent), page: pid)
        return lp
    }

    /// What loading a page starts from: its snapshot's state (or a checkpoint's base), and
    /// its open log with the frames to replay past what the snapshot covers.
    struct PageSources {
        var base: PageState
        /// Where the base's deferred points are ([SNAP-38]); nil when it holds none.
        var deferredPoints: DeferredPoints?
        var covered: (offset: UInt64, incarnation: UInt64)?
        var fromBase = false
        var quarantined = false
        var log: PageLog
        var replay: LogReplay
        /// A snapshot set aside because it does not pair with its log ([PKG-47]): the report
        /// of it, and the clock it had, to count what the rebuilt page lacks.
        var unpaired: (report: RecoveryReport, clock: VectorClock)?
    }

    /// Reads a page's snapshot, then opens its log from the offset the snapshot covers
    /// ([PKG-42]). A damaged snapshot is quarantined; the log is then replayed whole, onto a
    /// checkpoint's base if the page has one ([PKG-46]). (The lock-free open,
    /// `loadPageWithoutLock`, reads the log first and decodes both side by side; this repair
    /// path reads them in order, which keeps what it quarantines simple to follow.)
    func pageSources(_ pid: PageID, deferring: Bool = false) throws -> PageSources {
        let contentPath = paths.content(pid)
        var base = PageState(page: pid)
        var deferred: DeferredPoints?
        var covered: (offset: UInt64, incarnation: UInt64)?
        var quarantined = false
        var rebuilt = false
        var snapshotClock = VectorClock()
        if let bytes = try DurableFile.readIfExists(contentPath, io: io) {
            do {
                let s = try PageSnapshot.decode(bytes, path: contentPath, deferringPoints: deferring)
                guard s.state.page == pid else {
                    throw LnoteError(.corrupt, "snapshot names page \(s.state.page)", path: contentPath)
                }
                if s.lacksEraseHistory, try baseState(page: pid) == nil {
                    // [PKG-99] Written before restores, it lacks the content of erased elements
                    // and each partial erase: the page is rebuilt from its whole log, which
                    // holds them, and the next save writes a snapshot that has them.
                    rebuilt = true
                } else {
                    base = s.state
                    deferred = s.deferredPoints
                    snapshotClock = s.state.clock
                    covered = (s.coveredLogOffset, s.logIncarnation)
                }
            } catch let e as LnoteError where e.code == .corrupt || e.code == .truncated || e.code == .limitExceeded {
                var report = RecoveryReport(path: contentPath)
                report.problems.append(e)
                snapshotCounts[pid] = nil
                report.quarantinedCopy = try Document.quarantine(contentPath, io: io)
                reports.append(report)
                quarantined = true
            }
        }
        // A page installed from a checkpoint holds operations its log lacks: without a usable
        // snapshot it starts from the checkpoint, not from nothing ([PKG-46]).
        var fromBase = false
        if covered == nil, let b = try baseState(page: pid) {
            base = b
            fromBase = true
        }
        let (log, replay) = try PageLog.open(path: paths.log(pid), kind: .page, owner: pid.uuid, from: covered?.offset,
                                             incarnation: covered?.incarnation, create: true, anchor: newLogAnchor(), io: io)
        var unpaired: (report: RecoveryReport, clock: VectorClock)?
        if let u = replay.unpairedOffset, let c = covered {
            // [PKG-47] The snapshot names this log's incarnation but an offset that is not a frame
            // boundary of it: the log was cut or replaced after the snapshot was written, and the
            // snapshot may hold operations the log lost. The log is the truth: the snapshot is
            // set aside and the page rebuilt from the whole log (replay starts at its header
            // in this case), from the checkpoint base if the page has one.
            do {
                var report = RecoveryReport(path: contentPath)
                report.problems.append(LnoteError(
                    .corrupt, "snapshot covers offset \(c.offset) of log incarnation \(JSONText.u64(c.incarnation)), "
                        + "where its log (whole frames up to \(u.logEnd)) has no frame boundary there: the log was cut or replaced "
                        + "after the snapshot was written; the page is rebuilt from its log", path: contentPath, offset: 36))
                snapshotCounts[pid] = nil
                report.quarantinedCopy = try Document.quarantine(contentPath, io: io)
                unpaired = (report, snapshotClock)
                quarantined = true
                covered = nil
                base = PageState(page: pid)
                deferred = nil
                if let b = try baseState(page: pid) {
                    base = b
                    fromBase = true
                }
            } catch {
                try? log.close()
                throw error
            }
        }
        return PageSources(base: base, deferredPoints: deferred, covered: covered, fromBase: fromBase,
                           quarantined: quarantined || rebuilt, log: log, replay: replay, unpaired: unpaired)
    }

    /// Keeps at most `options.maxLoadedPages` pages in memory (each holds an open log):
    /// the least recently used are snapshotted when changed, then closed.
    ///
    /// A changed page's snapshot needs the document lock: outside a locked section it is
    /// written only when the lock is free now ([PKG-85]); otherwise the page stays loaded a
    /// little longer (a reader is never kept waiting by eviction).
    func evictPages(keepingRoomFor n: Int) throws {
        let excess = pages.count + n - max(1, options.maxLoadedPages)
        guard excess > 0 else { return }
        for lp in pages.values.sorted(by: { $0.lastUse < $1.lastUse }).prefix(excess) {
            if lp.dirty {
                guard try tryLocked({ try snapshot(lp) }) != nil else { continue }
            } else {
                try syncNow(.page(lp.id), lp.log)
            }
            guard pages[lp.id] === lp else { continue }  // dropped by the snapshot's catch-up
            pages[lp.id] = nil
            try lp.log.close()
        }
    }

    /// Forgets a page whose in-memory state may be ahead of its log (after a failed append
    /// or sync). Its next use reloads it from disk.
    func unload(_ lp: LoadedPage, failing error: Error) {
        guard pages[lp.id] === lp else { return }
        pages[lp.id] = nil
        failWaiters(.page(lp.id), error)
        try? lp.log.close()
    }

    /// Records the assets referenced by added images ([PKG-15]): the set only grows.
    func noteAssets(of contents: some Sequence<ElementContent>, page: PageID) {
        let found = contents.compactMap(\.image?.asset)
        guard !found.isEmpty else { return }
        noteAssets(Set(found), page: page)
    }

    /// Adds to a page's cached asset set; document.json is rewritten at the next save when
    /// it grew.
    func noteAssets(_ found: Set<AssetID>, page: PageID) {
        guard !found.isEmpty else { return }
        let before = pageAssets[page]?.count ?? 0
        pageAssets[page, default: []].formUnion(found)
        if pageAssets[page]!.count != before { assetsGeneration += 1 }
    }

    /// Makes a local page operation with `build`, appends it durably, and returns it.
    ///
    /// Under the document lock ([PKG-84]): the document and the page are brought up to date
    /// with their logs, so `build` allocates the operation's counter and Lamport timestamp
    /// from the log's real tail, and the frames are written at its end. `assets` are written
    /// first in the same section ([PKG-14]), so no close in any process can take them for
    /// orphans before the operation references them.
    func commitLocal(page pid: PageID, assets: [[UInt8]] = [],
                     _ build: (inout PageReplica, ReplicaID, Int64) throws -> [Op]) async throws -> [Op] {
        try checkUsable()
        let (ops, lp) = try locked { () -> ([Op], LoadedPage) in
            try checkUsable()
            guard let record = doc.page(pid) else {
                throw LnoteError(.notFound, "no page \(pid) in document \(id)", path: paths.root)
            }
            guard !record.deleted.value else {
                throw LnoteError(.invalidState, "page \(pid) is deleted; restore it before editing", path: paths.root)
            }
            for bytes in assets { try writeAsset(bytes) }
            let lp = try loadedPage(pid)
            let before = lp.replica.clock
            let ops: [Op]
            do {
                ops = try build(&lp.replica, try identity.writable(), now())
            } catch {
                // A builder that failed after applying part of its work leaves the state ahead
                // of the log: forget the page (its next use reloads it), or an id applied here
                // but never written would be allocated again for other content.
                if lp.replica.clock != before { unload(lp, failing: error) }
                throw error
            }
            try writeFrames(ops, to: lp)
            return (ops, lp)
        }
        try await finishAppend(to: lp)
        noteAssets(of: ops.compactMap(\.addedContent), page: pid)
        emitPageEvents(ops, lp, origin: .local)
        return ops
    }

    /// Writes operations at the end of a loaded page's log, under the document lock; makes
    /// them durable at once unless group commit is on (then `finishAppend` waits for it).
    /// Makes what was just written to the document log durable, unless group commit defers
    /// it ([PKG-35]). A failed sync cuts the frames and reads the document again, or leaves
    /// the handle unusable until it is reopened ([PKG-36], `syncLog`), and forgets the origins
    /// registered for `ops` (no event tells what is not on disk).
    func syncDocumentLog(forgetting ops: [OpID]) throws {
        guard options.groupCommit == nil else { return }
        do {
            try syncLog(.document, docLog)
        } catch {
            origins?.forget(ops, document: id)
            throw error
        }
    }

    /// After a failed wait for the durability of `document.log`: the handle is unusable unless
    /// the failed sync's frames were cut and the document read again ([PKG-36]).
    func documentLogFailed(_ e: LnoteError) {
        if broken == nil && docLog.poisoned != nil { broken = e }
    }

    /// Syncs `log` ([PKG-34]). When the `fdatasync` fails, the frames this process wrote since
    /// its last good sync are cut from the file under the document lock (`cutAfterFailedSync`,
    /// [PKG-36]), so that the failure reported to their writers is definite, and the state in
    /// memory forgets them: a page is unloaded (its next use reads it from disk), the document
    /// is read again from its files. When they cannot be cut, the page is unloaded too, and a
    /// document whose `document.log` failed is unusable until reopened.
    ///
    /// - Throws: the sync's error, its message saying what became of the frames.
    func syncLog(_ key: LogKey, _ log: PageLog) throws {
        let wasPoisoned = log.poisoned != nil
        do {
            try log.sync()
        } catch var e as LnoteError where !wasPoisoned && log.poisoned != nil {
            let outcome: PageLog.FailedSyncOutcome
            if lockDepth > 0 {
                outcome = log.cutAfterFailedSync()
            } else if let held = try? lock.acquire() {
                // A group commit syncs outside the section that wrote: take the lock for the cut
                // only (no catch-up: the cut checks the file itself).
                lockDepth = 1
                outcome = log.cutAfterFailedSync()
                lockDepth = 0
                held.release()
            } else {
                outcome = .kept(reason: "the document lock could not be taken")
            }
            switch outcome {
            case .cut(let n, let offset, let durable):
                e.message += "; the \(n) frame\(n == 1 ? "" : "s") written since the last good sync \(n == 1 ? "was" : "were") cut "
                    + "from the log at offset \(offset): not stored" + (durable ? "" : " (the cut itself could not be synced)")
            case .nothingOwn:
                e.message += "; nothing of this process was waiting for the sync"
            case .kept(let reason):
                e.message += "; the frames written since the last good sync could not be cut (\(reason)): "
                    + "reopening reads what the disk kept of them"
            }
            switch key {
            case .page(let pid):
                if let lp = pages[pid], lp.log === log { unload(lp, failing: e) }
            case .document:
                if log === docLog {
                    if log.poisoned == nil, case .cut = outcome {
                        do { try reloadDocument() } catch { broken = e }
                    } else {
                        broken = e
                    }
                }
            }
            throw e
        }
    }

    /// Returns the offset of each operation's frame. On failure the page is unloaded (its
    /// state may include operations that are not on disk) and nothing of the batch is left.
    @discardableResult
    func writeFrames(_ ops: [Op], to lp: LoadedPage) throws -> [UInt64] {
        precondition(lockDepth > 0, "appends need the document lock")
        guard !ops.isEmpty else { return [] }
        var offsets: [UInt64] = []
        offsets.reserveCapacity(ops.count)
        let batchStart = lp.log.end
        do {
            let (pieces, parallel) = Document.appendPieces(ops)
            for piece in pieces {
                // Strokes encode independently: a big batch (an import, a paste) uses every core.
                let encoded = Parallel.map(piece.count, parallel: parallel) { OperationCodec.encode(ops[piece.lowerBound + $0]) }
                // [LOG-33] This replica's strokes in log form where the log's anchor names it,
                // with a copy of the anchor when one is due ([PKG-111]).
                let (frames, indices) = lp.log.written(encoded)
                let start = lp.log.end
                var frameOffsets: [UInt64] = []
                frameOffsets.reserveCapacity(frames.count)
                var offset = start
                for f in frames {
                    frameOffsets.append(offset)
                    offset += UInt64(f.count)
                }
                for i in indices { offsets.append(frameOffsets[i]) }
                try lp.log.write(encoded: frames)
                // The disk writes this piece while the next is encoded; the sync below then
                // has only the last piece left to write.
                if piece.upperBound < ops.count { try lp.log.startWriteback(from: start) }
            }
        } catch {
            lp.log.rollBack(to: batchStart)  // no piece of a failed batch is left ([PKG-34])
            unload(lp, failing: error)
            throw error
        }
        lp.framesSinceSnapshot += ops.count
        lp.dirty = true
        noteEdit()
        if options.groupCommit == nil {
            do {
                try syncLog(.page(lp.id), lp.log)
            } catch {
                unload(lp, failing: error)
                throw error
            }
        }
        return offsets
    }

    /// After `writeFrames`, outside the lock: waits for the group commit that makes the
    /// frames durable, then compacts the page when its log is past the threshold ([PKG-41]).
    func finishAppend(to lp: LoadedPage) async throws {
        if options.groupCommit != nil {
            do {
                try await makeDurable(.page(lp.id), lp.log)
            } catch {
                unload(lp, failing: error)
                throw error
            }
        }
        if pages[lp.id] === lp,
           lp.bytesSinceSnapshot >= options.compactAfterBytes || lp.framesSinceSnapshot >= options.compactAfterFrames {
            try locked { if pages[lp.id] === lp { try snapshot(lp) } }
        }
    }

    /// Writes operations to a loaded page's log and waits until they are durable (a locked
    /// `writeFrames`, then `finishAppend`). Returns the offset of each operation's frame.
    @discardableResult
    func append(_ ops: [Op], to lp: LoadedPage) async throws -> [UInt64] {
        let offsets = try locked { try writeFrames(ops, to: lp) }
        try await finishAppend(to: lp)
        return offsets
    }

    /// How `append` splits a batch of operations: one piece encoded on one core when it
    /// holds fewer than 16,384 points; else pieces of a quarter of its points or more (at
    /// least 32,768), each encoded on every core.
    static func appendPieces(_ ops: [Op]) -> (pieces: [Range<Int>], parallel: Bool) {
        let points = ops.map { $0.addedContent?.pointCount ?? 0 }
        let total = points.reduce(0, +)
        guard total >= 16_384 else { return ([0..<ops.count], false) }
        let target = max(32_768, total / 4)
        var pieces: [Range<Int>] = []
        var lower = 0, sum = 0
        for (i, n) in points.enumerated() {
            sum += n
            if sum >= target || i == ops.count - 1 {
                pieces.append(lower..<(i + 1))
                (lower, sum) = (i + 1, 0)
            }
        }
        return (pieces, true)
    }

    /// Makes a local document operation, appends it durably, and returns it. `body` is built
    /// under the document lock, from the document as its log now holds it ([PKG-84]).
    func commitDocument(_ body: () throws -> Op.Body) async throws -> Op {
        try checkUsable()
        let op = try locked { () -> Op in
            try checkUsable()
            var next = doc
            let op = try next.make(try body(), by: try identity.writable(), wallTime: now())
            origins?.register([op.id], document: id, origin: .local)
            do {
                try docLog.write(encoded: [OperationCodec.encode(op)])  // truncated back on failure: nothing changed
            } catch {
                origins?.forget([op.id], document: id)
                throw error
            }
            doc = next
            noteEdit()
            try syncDocumentLog(forgetting: [op.id])
            return op
        }
        if options.groupCommit != nil {
            do {
                try await makeDurable(.document, docLog)
            } catch let e as LnoteError {
                documentLogFailed(e)
                origins?.forget([op.id], document: id)
                throw e
            }
        }
        origins?.markDurable([op.id], document: id)
        emitDocumentEvents([op], origin: .local)
        return op
    }

    func commitDocument(_ body: Op.Body) async throws -> Op {
        try await commitDocument { body }
    }

    // MARK: - Durability and group commit

    /// Waits until everything written to `log` is durable: at once, or within the group
    /// commit window, sharing one `fdatasync` with the appends of the same window ([PKG-35]).
    func makeDurable(_ key: LogKey, _ log: PageLog) async throws {
        guard let gc = options.groupCommit else {
            try syncLog(key, log)
            return
        }
        if log.unsyncedFrames >= gc.maxFrames {
            try syncNow(key, log)
            return
        }
        try await withCheckedThrowingContinuation { (c: CheckedContinuation<Void, Error>) in
            syncWaiters[key, default: []].append(c)
            if syncTimers[key] == nil {
                syncTimers[key] = Task { [delay = gc.maxDelay] in
                    try? await Task.sleep(for: delay)
                    self.timerFired(key)
                }
            }
        }
    }

    private func timerFired(_ key: LogKey) {
        syncTimers[key] = nil
        let log: PageLog?
        switch key {
        case .document: log = docLog
        case .page(let p): log = pages[p]?.log
        }
        guard let log else {
            failWaiters(key, LnoteError(.invalidState, "log closed before its group commit"))
            return
        }
        try? syncNow(key, log)
    }

    /// Syncs `log` now and releases everyone waiting on it (with the sync's outcome).
    func syncNow(_ key: LogKey, _ log: PageLog) throws {
        // [PKG-44] Frames a snapshot covers were synced by its writer before it wrote the
        // snapshot ([PKG-41]): only frames past it cost an `fdatasync` here. A first sync serves
        // (and opens and closes) every log of the folder: one sync per log otherwise.
        switch key {
        case .document:
            if let k = documentOnDisk { log.noteDurable(through: k.coveredOffset, incarnation: k.incarnation) }
        case .page(let pid):
            if let c = pages[pid]?.covered, pages[pid]?.log === log {
                log.noteDurable(through: c.offset, incarnation: c.incarnation)
            }
        }
        syncTimers.removeValue(forKey: key)?.cancel()
        let waiters = syncWaiters.removeValue(forKey: key) ?? []
        do {
            try syncLog(key, log)
        } catch {
            for w in waiters { w.resume(throwing: error) }
            throw error
        }
        for w in waiters { w.resume() }
    }

    /// Appends waiting for a group commit (tests).
    var syncWaiterCount: Int { syncWaiters.values.reduce(0) { $0 + $1.count } }

    func failWaiters(_ key: LogKey, _ error: Error) {
        syncTimers.removeValue(forKey: key)?.cancel()
        for w in syncWaiters.removeValue(forKey: key) ?? [] { w.resume(throwing: error) }
    }

    /// Syncs every log with appends in flight (before snapshots and before serving operations).
    func syncAllLogs() throws {
        try syncNow(.document, docLog)
        for (pid, lp) in pages { try syncNow(.page(pid), lp.log) }
    }

    // MARK: - Document operations

    /// Sets the document's title (a `setTitle` operation).
    public func setTitle(_ title: String) async throws {
        _ = try await commitDocument(.setTitle(title))
    }

    /// Adds an empty page (an `addPage` operation); its files are created when it is first
    /// written. Returns its id. Without a canvas, the page has the size of the document's
    /// last live page (A4 in a document without one): `defaultCanvas`.
    @discardableResult
    public func addPage(_ placement: PagePlacement = .last, canvas: CanvasSize? = nil) async throws -> PageID {
        let pid = PageID()
        let canvas = canvas ?? defaultCanvas
        _ = try await commitDocument { .addPage(pid, position: try position(placement), canvas: canvas) }
        snapshotCounts[pid] = .empty  // a new id: no files yet
        return pid
    }

    /// The size a new page gets when none is given: that of the document's last live page in
    /// document order, A4 when it has none.
    public var defaultCanvas: CanvasSize {
        refreshQuietly()
        return doc.livePages.last?.canvas.value ?? .a4
    }

    /// Deletes a page (soft: content kept; `restorePage` brings it back).
    /// - Throws: `invalidState` for a page this replica sees deleted already ([MERGE-2]: a
    ///   second delete would end, unseen, the conflict of the first with concurrent edits).
    public func deletePage(_ pid: PageID) async throws {
        try checkUsable()
        _ = try await commitDocument {
            // [MERGE-5] The page's clock, or in a wide page log a closed part of it.
            .deletePage(pid, seen: try clockSeen(page: pid, by: try identity.writable()))
        }
    }

    /// Brings back a deleted page ([MERGE-63]).
    /// - Throws: `invalidState` for a page this replica does not see deleted ([MERGE-2]).
    public func restorePage(_ pid: PageID) async throws {
        _ = try await commitDocument(.restorePage(pid))
    }

    public func movePage(_ pid: PageID, to placement: PagePlacement) async throws {
        _ = try await commitDocument { .movePage(pid, position: try position(placement, moving: pid)) }
    }

    public func setCanvas(_ pid: PageID, _ canvas: CanvasSize) async throws {
        _ = try await commitDocument(.setCanvas(pid, canvas))
    }

    /// The position key for a new page (`moving` nil) or for moving page `moving`.
    func position(_ placement: PagePlacement, moving: PageID? = nil) throws -> ZKey {
        switch placement {
        case .first: return try doc.position(after: nil, moving: moving, by: replica)
        case .last:
            if let last = doc.state.pages.last(where: { $0.id != moving }) {
                return try doc.position(after: last.id, moving: moving, by: replica)
            }
            return doc.endPosition
        case .after(let p): return try doc.position(after: p, moving: moving, by: replica)
        }
    }

    // MARK: - Page operations

    /// The materialized state of a page (loads it: one snapshot read plus its log tail), every
    /// point decoded.
    public func pageState(_ pid: PageID) throws -> PageState {
        try checkUsable()
        try refreshDocument()
        return try loadedPage(pid).replica.state
    }

    /// Live elements of a page, bottom to top, every point decoded.
    public func elements(_ pid: PageID) throws -> [ElementRecord] {
        try checkUsable()
        try refreshDocument()
        return try loadedPage(pid).replica.elements
    }

    /// The ids of a page's live elements, bottom to top. Loads the page without decoding
    /// the points of its snapshot ([SNAP-38]): the cost of opening a page, not of drawing it.
    public func elementIDs(_ pid: PageID) throws -> [ElementID] {
        try checkUsable()
        try refreshDocument()
        return try loadedPageDeferred(pid).replica.elementIDs
    }

    /// One live element of a page with its points; nil when it is not live. Decodes at most
    /// its chunk of the page's snapshot (64 records, [SNAP-35]), not the whole page.
    public func element(_ id: ElementID, on pid: PageID) throws -> ElementRecord? {
        try checkUsable()
        try refreshDocument()
        let lp = try loadedPageDeferred(pid)
        do {
            return try lp.replica.resolvedElement(id)
        } catch let e as LnoteError where e.code == .corrupt && !lp.replica.isResolved {
            // Damaged points: the page is loaded again, the damage handled as at load ([PKG-42]).
            return try loadedPage(pid).replica.resolvedElement(id)
        }
    }

    /// Adds a stroke on top of everything the page shows. Returns its element id.
    @discardableResult
    public func addStroke(_ stroke: Stroke, to pid: PageID) async throws -> ElementID {
        try await addStrokes([stroke], to: pid)[0]
    }

    /// Adds strokes on top, in order: one operation each, appended with one `fdatasync`.
    @discardableResult
    public func addStrokes(_ strokes: [Stroke], to pid: PageID) async throws -> [ElementID] {
        try await commitRecorded(page: pid, label: strokes.count == 1 ? "add" : "add \(strokes.count) strokes") { r, me, t, entries in
            // [MERGE-73] Undone by erasing what it added.
            entries = []
            guard strokes.count > 1 else {
                let ops = try strokes.map { try r.add(.stroke($0), by: me, wallTime: t) }
                entries = ops.map { UndoEntry(page: pid, op: $0.id, inverse: .erase([$0.id])) }
                return ops
            }
            // All or nothing: a stroke out of bounds ([LOG-23]) after others leaves the page
            // as it was.
            var next = r
            let ops = try strokes.map { try next.add(.stroke($0), by: me, wallTime: t) }
            r = next
            entries = [UndoEntry(page: pid, op: ops.last!.id, inverse: .erase(ops.map(\.id)))]
            return ops
        }.map(\.id)
    }

    /// The largest asset an image may have (64 MiB): what one sync request carries.
    public static let maxAssetBytes = 64 << 20

    /// Adds an image on top ([PKG-14]): the bytes are written durably to `assets/` first,
    /// then the operation referencing them is appended, both under one hold of the document
    /// lock (no close elsewhere can remove the asset in between).
    @discardableResult
    public func addImage(_ bytes: [UInt8], frame: QRect, rotation: Int32 = 0, to pid: PageID) async throws -> ElementID {
        try checkUsable()
        // [PKG-14] What one sync request carries (sync-protocol.md [SYNC-24]): a larger asset
        // could never be sent, and every later push would fail on it.
        guard bytes.count <= Document.maxAssetBytes else {
            throw LnoteError(.limitExceeded, "an image of \(bytes.count) bytes; an asset holds at most \(Document.maxAssetBytes) "
                             + "bytes (64 MiB, what one sync request carries)")
        }
        let asset = AssetID.of(bytes)
        return try await commitRecorded(page: pid, label: "add image", assets: [bytes]) { r, me, t, entries in
            let op = try r.add(.image(ImageElement(asset: asset, frame: frame, rotation: rotation)), by: me, wallTime: t)
            entries = [UndoEntry(page: pid, op: op.id, inverse: .erase([op.id]))]
            return [op]
        }[0].id
    }

    /// Erases whole elements.
    public func erase(_ ids: [ElementID], on pid: PageID) async throws {
        _ = try await commitRecorded(page: pid, label: "erase") { r, me, t, entries in
            [try Undo.make(.erase(ids), on: &r, page: pid, by: me, wallTime: t, into: &entries)]
        }
    }

    /// Erases point ranges of a stroke (the pixel eraser).
    public func eraseRange(_ element: ElementID, _ ranges: [PointRange], on pid: PageID) async throws {
        _ = try await commitRecorded(page: pid, label: "eraseRange") { r, me, t, entries in
            [try Undo.make(.eraseRange(element, ranges), on: &r, page: pid, by: me, wallTime: t, into: &entries)]
        }
    }

    /// Moves elements by (dx, dy) tenths of a point.
    public func move(_ ids: [ElementID], dx: Int32, dy: Int32, on pid: PageID) async throws {
        _ = try await commitRecorded(page: pid, label: "move") { r, me, t, entries in
            let inverse = Undo.inverse(of: .move(ids.map { ElementTransform($0, .identity) }), id: OpID(replica: me, counter: 1), before: r)
            let op = try r.move(ids, dx: dx, dy: dy, by: me, wallTime: t)
            if let inverse { entries = [UndoEntry(page: pid, op: op.id, inverse: inverse, made: UndoEntry.madeBody(op))] }
            return [op]
        }
    }

    /// Sets transforms explicitly.
    public func setTransforms(_ ts: [ElementTransform], on pid: PageID) async throws {
        _ = try await commitRecorded(page: pid, label: "move") { r, me, t, entries in
            [try Undo.make(.move(ts), on: &r, page: pid, by: me, wallTime: t, into: &entries)]
        }
    }

    public func bringToFront(_ ids: [ElementID], on pid: PageID) async throws {
        _ = try await commitRecorded(page: pid, label: "bring to front") { r, me, t, entries in
            let inverse = Undo.inverse(of: .reorder(ids.map { ElementZ($0, ZKey(layer: 0)) }), id: OpID(replica: me, counter: 1), before: r)
            let op = try r.bringToFront(ids, by: me, wallTime: t)
            if let inverse { entries = [UndoEntry(page: pid, op: op.id, inverse: inverse, made: UndoEntry.madeBody(op))] }
            return [op]
        }
    }

    public func sendToBack(_ ids: [ElementID], on pid: PageID) async throws {
        _ = try await commitRecorded(page: pid, label: "send to back") { r, me, t, entries in
            let inverse = Undo.inverse(of: .reorder(ids.map { ElementZ($0, ZKey(layer: 0)) }), id: OpID(replica: me, counter: 1), before: r)
            let op = try r.sendToBack(ids, by: me, wallTime: t)
            if let inverse { entries = [UndoEntry(page: pid, op: op.id, inverse: inverse, made: UndoEntry.madeBody(op))] }
            return [op]
        }
    }

    /// Sets z keys explicitly.
    public func reorder(_ zs: [ElementZ], on pid: PageID) async throws {
        _ = try await commitRecorded(page: pid, label: "reorder") { r, me, t, entries in
            [try Undo.make(.reorder(zs), on: &r, page: pid, by: me, wallTime: t, into: &entries)]
        }
    }

    /// Concurrent moves, reorders and erases on a page ([MERGE-50]).
    public func conflicts(page pid: PageID) throws -> [Conflict] {
        try checkUsable()
        try refreshDocument()
        return try loadedPage(pid).replica.conflicts()
    }

    // MARK: - Assets

    /// Writes asset bytes to `assets/<sha256>` durably unless already there. Returns the id.
    ///
    /// An asset no operation references is an orphan, which a close of this document in any
    /// process may remove ([PKG-15]): reference it soon (`receive` refuses an operation whose
    /// asset is gone, with `notFound`; `addImage` writes both at once).
    @discardableResult
    public func storeAsset(_ bytes: [UInt8]) throws -> AssetID {
        try checkUsable()
        return try locked { try writeAsset(bytes) }
    }

    /// `storeAsset` inside a locked section.
    @discardableResult
    func writeAsset(_ bytes: [UInt8]) throws -> AssetID {
        precondition(lockDepth > 0, "writing an asset needs the document lock")
        let asset = AssetID.of(bytes)
        let path = paths.asset(asset)
        if let st = try io.stat(path), st.isRegular, st.size == UInt64(bytes.count) { return asset }
        try DurableFile.replace(path, with: bytes, io: io)
        return asset
    }

    public func hasAsset(_ asset: AssetID) throws -> Bool {
        try io.stat(paths.asset(asset))?.isRegular == true
    }

    public func assetBytes(_ asset: AssetID) throws -> [UInt8] {
        try DurableFile.read(paths.asset(asset), io: io)
    }
}

extension Op {
    /// The content of an `add` operation.
    var addedContent: ElementContent? {
        if case .add(let c, _) = body { return c }
        return nil
    }
}
