import Foundation
import LnoteModel
import LnoteReplication

extension Document {
    /// The clock of a page's log, or of the document log when `page` is nil: which
    /// operations are applied here.
    public func clock(page pid: PageID? = nil) throws -> VectorClock {
        try checkUsable()
        guard let pid else { return doc.clock }
        if pages[pid] == nil, try !pageHasFiles(pid) { return VectorClock() }
        return try loadedPage(pid, allowUnknown: true).replica.clock
    }

    /// Every page of the document, deleted ones included, in document order.
    public var allPageIDs: [PageID] { doc.state.pages.map(\.id) }

    /// Every page log this document holds: the document's pages, and pages that received
    /// operations before their `addPage` arrived.
    public func pageLogs() throws -> [PageID] {
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
        let frames: [LoggedFrame]
        let path: String
        if let pid {
            let hasFiles = try pageHasFiles(pid)
            if pages[pid] == nil && !hasFiles { return [] }
            let lp = try loadedPage(pid, allowUnknown: true)
            try syncNow(.page(pid), lp.log)
            frames = try readAllFrames(lp)
            path = lp.log.path
        } else {
            try syncNow(.document, docLog)
            frames = try readAllDocumentFrames()
            path = docLog.path
        }
        var out: [(Frame, Op)] = []
        var seen = Set<OpID>()
        for f in frames {
            // Only what the clock does not cover is decoded: a sync of a few new strokes
            // reads the log but does not decode the points of all the others.
            guard let id = OperationCodec.id(of: f.frame), !clock.covers(id), !seen.contains(id),
                  let op = try? OperationCodec.decode(f.frame, base: Int(f.offset) + Frame.headerSize + 1, path: path),
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
    /// `page` is nil) ([PKG-43]). Operations already here (applied or waiting) are skipped
    /// before anything is written, so each operation is in the log once; the rest are
    /// appended with one `fdatasync`, then applied. A page the document does not know yet
    /// (its `addPage` has not arrived) gets its log all the same.
    ///
    /// - Returns: how many operations were new (appended), and those applied by this call
    ///   (others wait for dependencies and are applied by a later call).
    /// - Throws: `invalidArgument` for an operation of the other kind of log; `notFound` for
    ///   an image whose asset is not in `assets/` yet (store it first with `storeAsset` —
    ///   [PKG-14]); `corrupt` when the engine refuses an operation. Nothing is written or
    ///   applied then.
    @discardableResult
    public func receive(_ ops: [Op], page pid: PageID? = nil) async throws -> ReceiveOutcome {
        try checkUsable()
        for op in ops where op.body.isPageOperation != (pid != nil) {
            throw LnoteError(.invalidArgument, "\(op.body.name) \(op.id) does not belong in a \(pid == nil ? "document" : "page") log")
        }
        guard let pid else { return try await receiveDocument(ops) }
        let lp = try loadedPage(pid, allowUnknown: true)
        var seen = Set<OpID>()
        let fresh = ops.filter { !lp.replica.contains($0.id) && seen.insert($0.id).inserted }
        guard !fresh.isEmpty else { return ReceiveOutcome(appended: 0, applied: []) }
        for op in fresh {
            if case .add(.image(let i), _) = op.body, try !hasAsset(i.asset) {
                throw LnoteError(.notFound, "asset \(i.asset) of operation \(op.id) is not stored; store it before the operation",
                                 path: paths.asset(i.asset))
            }
        }
        // The engine validates everything before applying anything.
        let applied = try lp.replica.receive(fresh)
        let offsets = try await append(fresh, to: lp)
        let done = Set(applied.map(\.id))
        for (op, off) in zip(fresh, offsets) where !done.contains(op.id) { lp.pendingOffsets[op.id] = off }
        for op in lp.pendingOffsets.keys where lp.replica.clock.covers(op) { lp.pendingOffsets[op] = nil }
        noteAssets(of: fresh.compactMap(\.addedContent), page: pid)
        return ReceiveOutcome(appended: fresh.count, applied: applied)
    }

    private func receiveDocument(_ ops: [Op]) async throws -> ReceiveOutcome {
        var seen = Set<OpID>()
        let fresh = ops.filter { !doc.contains($0.id) && seen.insert($0.id).inserted }
        guard !fresh.isEmpty else { return ReceiveOutcome(appended: 0, applied: []) }
        var next = doc
        let applied = try next.receive(fresh)
        var offset = docLog.end
        let frames = fresh.map(OperationCodec.encode)
        try docLog.write(encoded: frames)
        doc = next
        let done = Set(applied.map(\.id))
        for (op, frame) in zip(fresh, frames) {
            if !done.contains(op.id) { docPendingOffsets[op.id] = offset }
            offset += UInt64(frame.count)
        }
        for id in docPendingOffsets.keys where doc.clock.covers(id) { docPendingOffsets[id] = nil }
        noteEdit()
        do {
            try await makeDurable(.document, docLog)
        } catch let e as LnoteError {
            broken = e
            throw e
        }
        return ReceiveOutcome(appended: fresh.count, applied: applied)
    }

    /// Every frame of document.log; damage is salvaged, reported and the log re-offered.
    func readAllDocumentFrames() throws -> [LoggedFrame] {
        do {
            return try docLog.readFrames(from: UInt64(LogHeader.size))
        } catch let e as LnoteError where e.code == .corrupt {
            let replay = try docLog.recover()
            var report = replay.report
            var pending: [OpID: UInt64] = [:]
            var next = doc
            _ = try Document.feed(replay.frames, kind: .document, fromStart: true, path: docLog.path,
                                  report: &report, pending: &pending) { try next.receive($0) }
            doc = next
            docPendingOffsets = pending
            reports.append(report)
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
    /// Operations that were new here and were appended to the log.
    public var appended: Int
    /// Operations applied by this call, in the order applied (earlier waiting ones included).
    public var applied: [Op]
}
