import Foundation
import LnoteModel
import LnoteReplication

extension Document {
    /// The clock of a page's log, or of the document log when `page` is nil: which
    /// operations are applied here.
    public func clock(page pid: PageID? = nil) throws -> VectorClock {
        try checkUsable()
        try refreshDocument()
        guard let pid else { return doc.clock }
        if pages[pid] == nil, try !pageHasFiles(pid) { return VectorClock() }
        // A clock needs no point: the page is loaded with its points deferred ([LOG-27]).
        return try loadedPageDeferred(pid, allowUnknown: true).replica.clock
    }

    /// The page clock a `deletePage` by `replica` carries ([MERGE-63]): the page's clock, or
    /// in a page log wider than a context may name a closed part of it ([MERGE-5]).
    func clockSeen(page pid: PageID, by replica: ReplicaID) throws -> VectorClock {
        if pages[pid] == nil, try !pageHasFiles(pid) { return VectorClock() }
        let lp = try loadedPageDeferred(pid, allowUnknown: true)
        // In a wide log the clock seen names the top and bottom elements: records a listing
        // open left unparsed ([SNAP-46]) are read first; when they do not decode, the page is
        // loaded again eagerly (which quarantines the snapshot, [PKG-42]).
        guard readUnbuiltRecords(lp) else { return try loadedPage(pid, allowUnknown: true).replica.clockSeen(by: replica) }
        return lp.replica.clockSeen(by: replica)
    }

    /// Every page of the document, deleted ones included, in document order.
    public var allPageIDs: [PageID] {
        refreshQuietly()
        return doc.state.pages.map(\.id)
    }

    /// Every page log this document holds: the document's pages, and pages that received
    /// operations before their `addPage` arrived.
    public func pageLogs() throws -> [PageID] {
        try refreshDocument()
        var ids = Set(doc.state.pages.map(\.id)).union(pages.keys)
        for name in try io.listDirectory(paths.pages) where name.hasSuffix(".log") && !DurableFile.isTemporaryName(name) {
            if let p = PageID(String(name.dropLast(4))) { ids.insert(p) }
        }
        return ids.sorted()
    }

    /// The frames of a log whose operations `clock` does not cover, exactly as the log holds
    /// them and in its order ([PKG-44]): what a peer at `clock` is missing. Only durable
    /// frames are returned (appends in flight are synced first), so a crash can never take
    /// back an operation a peer has seen. Operations still waiting for their own
    /// dependencies here are included; malformed frames (reported when the log was opened)
    /// are not.
    public func frames(page pid: PageID? = nil, notCoveredBy clock: VectorClock) async throws -> [Frame] {
        try await held(page: pid, notCoveredBy: clock).map(\.frame)
    }

    /// The operations of a log that `clock` does not cover (see `frames(page:notCoveredBy:)`).
    public func operations(page pid: PageID? = nil, notCoveredBy clock: VectorClock) async throws -> [Op] {
        try await held(page: pid, notCoveredBy: clock).map(\.op)
    }

    /// What a peer at `clock` lacks of a log, for serving it ([PKG-44]): the frames, or, for a
    /// page installed from a checkpoint whose log lacks some of them, where the history has a
    /// hole ([SYNC-43]). A serving side reports the hole to the peer as a refusal of its own
    /// kind instead of the `invalidState` that `frames(page:notCoveredBy:)` throws.
    public func framesForPeer(page pid: PageID? = nil, notCoveredBy clock: VectorClock) async throws -> PeerFrames {
        let found = try await unchecked(page: pid, notCoveredBy: clock)
        if let pid, let gap = try historyGap(page: pid, notCoveredBy: clock, held: Set(found.map(\.op.id))) {
            return .historyNotHeld(gap)
        }
        return .frames(found.map(\.frame))
    }

    /// The first operation a peer at `clock` lacks that this page's log does not hold, when
    /// the page was installed from a checkpoint (the rule of `checkHistoryHeld`, as a value).
    ///
    /// - Parameter held: ids of the operations of the log not covered by `clock`.
    func historyGap(page pid: PageID, notCoveredBy clock: VectorClock, held: Set<OpID>) throws -> HistoryGap? {
        guard let base = try baseClock(page: pid), !clock.covers(base) else { return nil }
        for e in base.entries where e.counter > clock[e.replica] {
            for c in (clock[e.replica] + 1)...e.counter where !held.contains(OpID(replica: e.replica, counter: c)) {
                return HistoryGap(page: pid, base: base, missing: OpID(replica: e.replica, counter: c), path: paths.base(pid))
            }
        }
        return nil
    }

    private func held(page pid: PageID?, notCoveredBy clock: VectorClock) async throws -> [(frame: Frame, op: Op)] {
        let out = try await unchecked(page: pid, notCoveredBy: clock)
        if let pid { try checkHistoryHeld(page: pid, notCoveredBy: clock, held: Set(out.map(\.op.id))) }
        return out
    }

    /// The held operations `clock` does not cover, without the history check.
    private func unchecked(page pid: PageID?, notCoveredBy clock: VectorClock) async throws -> [(frame: Frame, op: Op)] {
        try checkUsable()
        // What is served comes from the log: the page's own points are not needed, so its
        // snapshot's are not decoded ([LOG-27]; the served frames are decoded below). Loaded
        // before the lock is taken: under it, a page not loaded yet is loaded eagerly.
        if let pid, pages[pid] == nil, try pageHasFiles(pid) { _ = try loadedPageDeferred(pid, allowUnknown: true) }
        // Under the document lock, and synced: what is served to a peer is whole batches of
        // whoever wrote them (a writer holds the lock until its batch is written, or rolled
        // back), durable (frames read from another process are synced here too, whatever it
        // deferred), so that no peer holds an operation its author may lose and give out again.
        guard let (frames, path) = try locked({ () -> ([LoggedFrame], String)? in
            if let pid {
                if pages[pid] == nil, try !pageHasFiles(pid) { return nil }
                let lp = try loadedPageDeferred(pid, allowUnknown: true)
                try syncNow(.page(pid), lp.log)
                return (try readAllFrames(lp), lp.log.path)
            }
            try syncNow(.document, docLog)
            return (try readAllDocumentFrames(), docLog.path)
        }) else { return [] }
        var out: [(Frame, Op)] = []
        var seen = Set<OpID>()
        for f in frames {
            // Only what the clock does not cover is decoded: a sync of a few new strokes
            // reads the log but does not decode the points of all the others.
            guard let id = OperationCodec.id(of: f.frame), !clock.covers(id), !seen.contains(id),
                  let op = try? OperationCodec.decode(f.frame, base: f.payloadBase, path: path),
                  op.body.isPageOperation == (pid != nil) else { continue }
            seen.insert(op.id)
            out.append((f.frame, op))
        }
        return out
    }

    /// True when the page has a snapshot or a log on disk.
    func pageHasFiles(_ pid: PageID) throws -> Bool {
        let content = try io.stat(paths.content(pid)) != nil
        return try content || io.stat(paths.log(pid)) != nil
    }

    /// Applies operations received from a peer to a page's log (or the document log when
    /// `page` is nil) ([PKG-43]). What the log already holds is skipped before anything is
    /// written, so each operation is in the log once; the rest are appended with one
    /// `fdatasync`, then applied. A page the document does not know yet (its `addPage` has
    /// not arrived) gets its log all the same.
    ///
    /// - An operation whose id the log holds is compared with the operation held there
    ///   (content hashes, [SYNC-50]): a different one is a fork ([PKG-58], [SYNC-51]), not
    ///   stored, and reported in `forks`; the rest of the call goes on. Duplicates with the
    ///   same content are dropped. The check reads the log once per loaded page, at the first
    ///   duplicate (`logIndex`), then one frame per duplicate.
    /// - An operation the state holds but the log lost ([PKG-51]) is appended and not applied
    ///   again (`healed`, [PKG-54]); it cannot be compared with anything.
    /// - An operation below a checkpoint base ([PKG-46]) is in the state only and is dropped.
    ///
    /// - Returns: how many operations were appended (new or healed), those applied by this
    ///   call (others wait for dependencies and are applied by a later call), the healed ones
    ///   and the forks found.
    /// - Throws: `invalidArgument` for an operation of the other kind of log; `notFound` for
    ///   an image whose asset is not in `assets/` yet (store it first with `storeAsset` —
    ///   [PKG-14]); `corrupt` when the engine refuses an operation. Nothing is written or
    ///   applied then.
    @discardableResult
    public func receive(_ ops: [Op], page pid: PageID? = nil) async throws -> ReceiveOutcome {
        try await receive(ops, page: pid, assets: [])
    }

    /// `receive`, first writing `assets` (bytes of assets the operations reference) into the
    /// package in the same hold of the document lock ([PKG-14]), so no close in another
    /// process can remove them as orphans before the operations are stored.
    ///
    /// Events ([PKG-95]): the operations applied are told to `changes` subscribers (origin
    /// `merge`) after they are durable.
    func receive(_ ops: [Op], page pid: PageID?, assets: [[UInt8]]) async throws -> ReceiveOutcome {
        try checkUsable()
        for op in ops where op.body.isPageOperation != (pid != nil) {
            throw LnoteError(.invalidArgument, "\(op.body.name) \(op.id) does not belong in a \(pid == nil ? "document" : "page") log")
        }
        guard let pid else { return try await receiveDocument(ops, assets: assets) }
        struct Staged {
            var sorted: SortedReceipt
            var incoming: [Op] = []
            var applied: [Op] = []
            var lp: LoadedPage?
        }
        let staged = try locked { () -> Staged in
            try checkUsable()
            for bytes in assets { try writeAsset(bytes) }
            let lp = try loadedPage(pid, allowUnknown: true)
            // Built before sorting: reading the whole log may salvage it, which changes `missing`.
            if ops.contains(where: { lp.replica.contains($0.id) && !lp.missing.contains($0.id) }) { _ = try logIndex(lp) }
            let base = try baseClock(page: pid)
            let sorted = try Document.sort(ops, contains: lp.replica.contains, missing: lp.missing, base: base,
                                           index: lp.logIndex) { try lp.log.readFrame(at: $0) }
            let incoming = sorted.fresh + sorted.healed
            guard !incoming.isEmpty else { return Staged(sorted: sorted) }
            for op in incoming {
                if case .add(.image(let i), _) = op.body, try !hasAsset(i.asset) {
                    throw LnoteError(.notFound, "asset \(i.asset) of operation \(op.id) is not stored; store it before the operation",
                                     path: paths.asset(i.asset))
                }
            }
            // The engine validates everything before applying anything.
            let applied = try lp.replica.receive(sorted.fresh)
            let offsets = try writeFrames(incoming, to: lp)
            // Recorded before the lock is released: a snapshot never covers a waiting operation.
            let done = Set(applied.map(\.id))
            for (op, off) in zip(sorted.fresh, offsets) where !done.contains(op.id) { lp.pendingOffsets[op.id] = off }
            for op in lp.pendingOffsets.keys where lp.replica.clock.covers(op) { lp.pendingOffsets[op] = nil }
            if lp.logIndex != nil {
                for (op, off) in zip(incoming, offsets) where lp.logIndex?[op.id] == nil { lp.logIndex?[op.id] = off }
            }
            return Staged(sorted: sorted, incoming: incoming, applied: applied, lp: lp)
        }
        guard let lp = staged.lp else { return ReceiveOutcome(appended: 0, applied: [], forks: staged.sorted.forks) }
        try await finishAppend(to: lp)
        let sorted = staged.sorted
        if !sorted.healed.isEmpty {
            try locked {
                for op in sorted.healed { lp.missing.remove(op.id) }
                try writeMissing(lp.missing, to: paths.missing(pid))
            }
        }
        noteAssets(of: staged.incoming.compactMap(\.addedContent), page: pid)
        emitPageEvents(staged.applied, lp, origin: .merge)
        if !staged.applied.isEmpty { markThumbnail(pid) }  // redrawn in the background ([PKG-103])
        return ReceiveOutcome(appended: staged.incoming.count, applied: staged.applied, healed: sorted.healed.map(\.id),
                              forks: sorted.forks)
    }

    /// Received operations sorted by what the log holds ([PKG-43], [PKG-54], [PKG-58]).
    struct SortedReceipt {
        /// Not held at all: to append and apply.
        var fresh: [Op] = []
        /// Held by the state but lost from the log: to append only.
        var healed: [Op] = []
        var forks: [ReceivedFork] = []
    }

    /// Sorts received operations: new ones, ones the log lost (`missing`), duplicates (the
    /// same content as the operation held under their id: dropped) and forks (other
    /// content). Duplicates within `ops` are compared with the first of them.
    ///
    /// - Parameters:
    ///   - contains: whether the state holds an id (applied or waiting).
    ///   - index: where the log holds each id; built by the caller whenever `contains` says yes
    ///     for an id `missing` does not hold.
    ///   - read: the frame at an offset of the log.
    static func sort(_ ops: [Op], contains: (OpID) -> Bool, missing: OpRanges, base: VectorClock?,
                     index: [OpID: UInt64]?, read: (UInt64) throws -> Frame) throws -> SortedReceipt {
        var out = SortedReceipt()
        var first: [OpID: Op] = [:]
        for op in ops {
            if let earlier = first[op.id] {
                let held = ContentHash.of(earlier), received = ContentHash.of(op)
                if held != received { out.forks.append(ReceivedFork(id: op.id, held: held, received: received, frame: OperationCodec.frame(op))) }
                continue
            }
            first[op.id] = op
            if !contains(op.id) {
                out.fresh.append(op)
            } else if missing.contains(op.id) {
                out.healed.append(op)
            } else if let offset = index?[op.id] {
                let held = ContentHash.of(try read(offset)), received = ContentHash.of(op)
                if held != received { out.forks.append(ReceivedFork(id: op.id, held: held, received: received, frame: OperationCodec.frame(op))) }
            } else if base?.covers(op.id) != true, index != nil {
                // Held by the state, in neither the log nor a checkpoint base, and not recorded as
                // missing (a log changed behind this handle): the log lacks it, so it is appended.
                out.healed.append(op)
            }
        }
        return out
    }

    private func receiveDocument(_ ops: [Op], assets: [[UInt8]]) async throws -> ReceiveOutcome {
        struct Staged {
            var sorted: SortedReceipt
            var incoming: [Op] = []
            var applied: [Op] = []
        }
        let staged = try locked { () -> Staged in
            try checkUsable()
            for bytes in assets { try writeAsset(bytes) }
            if ops.contains(where: { doc.contains($0.id) && !docMissing.contains($0.id) }) { _ = try documentLogIndex() }
            let sorted = try Document.sort(ops, contains: doc.contains, missing: docMissing, base: nil,
                                           index: docLogIndex) { try docLog.readFrame(at: $0) }
            let incoming = sorted.fresh + sorted.healed
            guard !incoming.isEmpty else { return Staged(sorted: sorted) }
            var next = doc
            let applied = try next.receive(sorted.fresh)
            var offset = docLog.end
            let frames = incoming.map(OperationCodec.encode)
            origins?.register(incoming.map(\.id), document: id, origin: .merge)
            do {
                try docLog.write(encoded: frames)
            } catch {
                origins?.forget(incoming.map(\.id), document: id)
                throw error
            }
            doc = next
            let done = Set(applied.map(\.id))
            for (i, (op, frame)) in zip(incoming, frames).enumerated() {
                if i < sorted.fresh.count && !done.contains(op.id) { docPendingOffsets[op.id] = offset }
                if docLogIndex != nil && docLogIndex?[op.id] == nil { docLogIndex?[op.id] = offset }
                offset += UInt64(frame.count)
            }
            for id in docPendingOffsets.keys where doc.clock.covers(id) { docPendingOffsets[id] = nil }
            noteEdit()
            try syncDocumentLog(forgetting: incoming.map(\.id))
            return Staged(sorted: sorted, incoming: incoming, applied: applied)
        }
        let sorted = staged.sorted
        guard !staged.incoming.isEmpty else { return ReceiveOutcome(appended: 0, applied: [], forks: sorted.forks) }
        if options.groupCommit != nil {
            do {
                try await makeDurable(.document, docLog)
            } catch let e as LnoteError {
                documentLogFailed(e)
                origins?.forget(staged.incoming.map(\.id), document: id)
                throw e
            }
        }
        origins?.markDurable(staged.incoming.map(\.id), document: id)
        if !sorted.healed.isEmpty {
            try locked {
                for op in sorted.healed { docMissing.remove(op.id) }
                try writeMissing(docMissing, to: paths.documentMissing)
            }
        }
        emitDocumentEvents(staged.applied, origin: .merge)
        return ReceiveOutcome(appended: staged.incoming.count, applied: staged.applied, healed: sorted.healed.map(\.id),
                              forks: sorted.forks)
    }

    /// Every frame of document.log; damage is salvaged, reported and the log re-offered.
    func readAllDocumentFrames() throws -> [LoggedFrame] {
        do {
            return try docLog.readFrames(from: UInt64(LogHeader.size))
        } catch let e as LnoteError where e.code == .corrupt {
            return try locked { try salvageDocumentLog() }
        }
    }

    /// Salvages `document.log` ([PKG-38]) under the document lock and applies what the
    /// rewritten log gives back. Returns every frame of it.
    func salvageDocumentLog() throws -> [LoggedFrame] {
        precondition(lockDepth > 0, "a salvage needs the document lock")
        do {
            let replay = try docLog.recover()
            var report = replay.report
            var pending: [OpID: UInt64] = [:]
            var next = doc
            let applied = try Document.feed(replay.frames, kind: .document, fromStart: true, path: docLog.path,
                                            report: &report, pending: &pending) { try next.receive($0) }
            doc = next
            docPendingOffsets = pending.filter { !next.clock.covers($0.key) }
            docLogIndex = nil
            reports.append(report)
            try settleDocumentMissing(frames: replay.frames)
            emitDocumentEvents(applied, origin: .otherProcess)
            return replay.frames
        }
    }
}

/// What a replica serving a peer has of the operations the peer lacks
/// (`Document.framesForPeer`).
public enum PeerFrames: Sendable, Equatable {
    /// Every one of them, as the log holds them.
    case frames([Frame])
    /// Not all: the page was installed from a checkpoint and its log lacks some (sync-protocol.md
    /// [SYNC-43]).
    case historyNotHeld(HistoryGap)
}

/// A hole in the history a page holds: it was installed from a checkpoint ([PKG-46]), and a
/// peer at a clock that does not cover the checkpoint's would need operations before it that
/// this replica never had in its log.
public struct HistoryGap: Sendable, Hashable, CustomStringConvertible {
    public var page: PageID
    /// The checkpoint clock the page was installed from (its base clock).
    public var base: VectorClock
    /// The first operation the peer lacks that this replica does not hold.
    public var missing: OpID
    /// The page's base file.
    public var path: String

    /// The words of `checkHistoryHeld`'s error, so both doors say the same thing.
    public var description: String {
        """
        history before checkpoint clock \(base) of page \(page) is not held here \
        (operation \(missing.replica):\(missing.counter) is missing; this replica was installed from a checkpoint \
        and can sync that page only with a relay, which holds the full history)
        """
    }
}

/// What `Document.receive` did.
public struct ReceiveOutcome: Sendable, Hashable {
    /// Operations appended to the log: new ones, and ones the log had lost (`healed`).
    public var appended: Int
    /// Operations applied by this call, in the order applied (earlier waiting ones included).
    public var applied: [Op]
    /// Operations the state already held that the log had lost, appended again ([PKG-54]).
    public var healed: [OpID] = []
    /// Operations whose id the log holds with other content ([PKG-58], [SYNC-51]): not stored.
    public var forks: [ReceivedFork] = []

    public init(appended: Int, applied: [Op], healed: [OpID] = [], forks: [ReceivedFork] = []) {
        self.appended = appended
        self.applied = applied
        self.healed = healed
        self.forks = forks
    }
}

/// A received operation whose id the log holds with other content: a fork ([SYNC-51]).
public struct ReceivedFork: Sendable, Hashable {
    public var id: OpID
    /// The content hash ([SYNC-50]) of the operation the log holds, 32 bytes.
    public var held: [UInt8]
    /// The content hash of the operation received, 32 bytes.
    public var received: [UInt8]
    /// The received operation's frame (not stored in the log).
    public var frame: Frame
}
