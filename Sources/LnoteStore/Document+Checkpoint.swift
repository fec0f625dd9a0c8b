import Foundation
import LnoteModel
import LnoteReplication

extension PackagePaths {
    /// Suffix of a page's base clock file ([PKG-46]).
    public static let baseSuffix = ".base"
    /// `pages/<page-uuid>.base`: the clock of the checkpoint a page was installed from.
    public func base(_ p: PageID) -> String { "\(pages)/\(p)\(PackagePaths.baseSuffix)" }
}

/// The base file of a page installed from a checkpoint, `pages/<page-uuid>.base`
/// ([PKG-46]): the checkpoint itself, i.e. the operations this replica has in its state but
/// not in its log, and the state they make, from which a damaged `.content` is rebuilt.
///
/// | Offset | Size | Description |
/// |---|---|---|
/// | 0 | 4 | magic `LNPB` |
/// | 4 | 1 | version (1) |
/// | 5 | … | `VectorClock` (entry count varint, then replica u64 + counter varint each) |
/// | … | varint | snapshot length L |
/// | … | L | page snapshot (page-snapshot.md) with covered offset 0 and incarnation 0 |
/// | … | 4 | CRC-32C (u32 LE) of every byte before it |
///
/// A file is valid if and only if it decodes completely with no trailing bytes, its CRC
/// matches, and the snapshot decodes, names the file's page and has the file's clock. A
/// damaged file is an error, never ignored: ignoring it would let this replica serve a
/// history with a hole in it, or rebuild a page without its checkpoint.
enum PageBase {
    static let magic: [UInt8] = Array("LNPB".utf8)
    static let version: UInt8 = 1

    static func encode(_ state: PageState) -> [UInt8] {
        let snapshot = PageSnapshot.encode(state, coveredLogOffset: 0, logIncarnation: 0)
        var w = ByteWriter(capacity: 64 + snapshot.count)
        w.append(magic)
        w.u8(version)
        ElementCodec.encode(state.clock, into: &w)
        w.lengthPrefixed(snapshot)
        w.u32(CRC32C.checksum(w.bytes))
        return w.bytes
    }

    /// The base clock and, with `state`, the checkpoint state.
    static func decode(_ bytes: [UInt8], page: PageID, path: String, state: Bool) throws -> (clock: VectorClock, state: PageState?) {
        var r = ByteReader(bytes, path: path)
        guard try r.bytes(4, "base magic") == magic else { throw r.error(.corrupt, "not a page base file (bad magic)", at: 0) }
        let v = try r.u8("base version")
        guard v == version else {
            throw LnoteError(.unsupportedVersion, "page base version \(v); this build reads \(version)", path: path, offset: 4)
        }
        let clock = try ElementCodec.decodeClock(&r)
        let snapshotAt = r.offset
        let snapshot = try r.lengthPrefixed("base snapshot", max: r.remaining)
        let crcAt = r.offset
        let end = r.position
        let stored = try r.u32("base CRC")
        try r.expectEnd("page base")
        guard stored == CRC32C.checksum(bytes, 0..<end) else {
            throw r.error(.corrupt, "page base CRC mismatch", at: crcAt)
        }
        guard state else { return (clock, nil) }
        let s = try PageSnapshot.decode(snapshot, path: path)
        guard s.state.page == page, s.state.clock == clock else {
            throw LnoteError(.corrupt, "page base snapshot names page \(s.state.page) with clock \(s.state.clock)",
                             path: path, offset: snapshotAt)
        }
        return (clock, s.state)
    }
}

extension Document {
    /// The clock of the checkpoint the page was installed from, or nil when the page holds
    /// its whole history in its log ([PKG-46]).
    ///
    /// - Throws: `corrupt`/`truncated` for a damaged base file (never ignored).
    public func baseClock(page pid: PageID) throws -> VectorClock? {
        try checkUsable()
        guard let bytes = try DurableFile.readIfExists(paths.base(pid), io: io) else { return nil }
        return try PageBase.decode(bytes, page: pid, path: paths.base(pid), state: false).clock
    }

    /// The checkpoint state a page was installed from: what `loadedPage` starts from when
    /// the page's `.content` is missing or damaged ([PKG-42], [PKG-46]). Nil: no base.
    func baseState(page pid: PageID) throws -> PageState? {
        guard let bytes = try DurableFile.readIfExists(paths.base(pid), io: io) else { return nil }
        return try PageBase.decode(bytes, page: pid, path: paths.base(pid), state: true).state
    }

    /// The page's applied state, to be uploaded as a checkpoint: replica-independent (it is
    /// re-encoded by the caller with no log offset), pending operations excluded. Nil when
    /// the page has no files.
    public func checkpointState(page pid: PageID) throws -> PageState? {
        try checkUsable()
        if pages[pid] == nil, try !pageHasFiles(pid) { return nil }
        return try loadedPage(pid, allowUnknown: true).replica.state
    }

    /// Refuses to serve a page's history when a peer at `clock` would need operations this
    /// replica never held in its log: those its checkpoint base covers ([PKG-46]).
    ///
    /// Only a real hole throws: an operation below the base clock that the log holds anyway
    /// does not (today none is ever appended, since receipt skips operations the state
    /// already has, [PKG-43]; the check stays exact rather than assume it).
    ///
    /// - Parameter held: ids of the operations of the log not covered by `clock`.
    /// - Throws: `invalidState` naming the first operation that is not held.
    func checkHistoryHeld(page pid: PageID, notCoveredBy clock: VectorClock, held: Set<OpID>) throws {
        guard let base = try baseClock(page: pid), !clock.covers(base) else { return }
        for e in base.entries where e.counter > clock[e.replica] {
            for c in (clock[e.replica] + 1)...e.counter where !held.contains(OpID(replica: e.replica, counter: c)) {
                throw LnoteError(.invalidState, """
                    history before checkpoint clock \(base) of page \(pid) is not held here \
                    (operation \(e.replica):\(c) is missing; this replica was installed from a checkpoint \
                    and can sync that page only with a relay, which holds the full history)
                    """, path: paths.base(pid))
            }
        }
    }
}

extension Document {
    /// For a page installed from a checkpoint ([PKG-46]): whether the page's state equals what
    /// its base and the operations its log holds give, replayed apart (sync-protocol.md
    /// [SYNC-59], after a newcomer's first sync). Nil for a page without a base.
    public func installedPageMatches(_ pid: PageID) throws -> Bool? {
        try checkUsable()
        guard let base = try baseState(page: pid) else { return nil }
        let lp = try loadedPage(pid, allowUnknown: true)
        try syncNow(.page(pid), lp.log)
        var expected = PageReplica(state: base)
        var ops: [Op] = []
        for f in try readAllFrames(lp) {
            guard let op = try? OperationCodec.decode(f.frame), op.body.isPageOperation else { continue }
            ops.append(op)
        }
        do { _ = try expected.receive(ops) } catch { return false }
        return PageSnapshot.sameState(expected.state, as: lp.replica.state, anyForm: true)
    }

    /// Gives up a page's checkpoint ([SYNC-59]): its `.base` and `.content` are kept as
    /// `<name>.corrupt-<n>` ([PKG-38]) and the page is rebuilt from its log alone, whose
    /// operations then wait for the history before the checkpoint, which sync fetches (the
    /// page's clock no longer covers it).
    public func dropCheckpoint(page pid: PageID) throws {
        try checkUsable()
        try locked {
            if let lp = pages[pid] {
                try syncNow(.page(pid), lp.log)
                pages[pid] = nil
                try lp.log.close()
            }
            // [PKG-98] Past snapshots written since the install may hold the refused state:
            // removed first, so that a crash leaves none of them beside a base that is gone.
            try removePasts(pid)
            if try io.stat(paths.base(pid)) != nil { _ = try Document.quarantine(paths.base(pid), io: io) }
            if try io.stat(paths.content(pid)) != nil { _ = try Document.quarantine(paths.content(pid), io: io) }
            try io.unlink(paths.missing(pid), missingOK: true)
            snapshotCounts[pid] = nil
            let rebuilt = try loadedPage(pid, allowUnknown: true)
            rebuilt.dirty = true
        }
        hub.publish([Change(kind: .reloaded, origin: .merge, document: id, page: pid)])
    }
}
