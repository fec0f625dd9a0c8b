import Foundation
import LnoteModel
import LnoteReplication

/// What a log holds, as opposed to what its state holds ([PKG-49], [PKG-51]): a log can lose
/// operations (damage salvaged, [PKG-38]; a deleted log file) while the snapshot its state was
/// read from keeps them. Sync must then offer the clock of what the log can serve, so that a
/// peer holding the lost operations sends them back, and receipt must append them to the log
/// without applying them twice ([PKG-54]).
extension Document {
    // MARK: - Clocks of what the log holds

    /// The clock of the operations a log holds and can serve ([PKG-49]): its applied clock,
    /// lowered for each replica to just below the first operation the state holds but the
    /// log lacks ([PKG-51]). A page installed from a checkpoint counts its base as held
    /// ([PKG-46]). This is what sync offers (`have`, the clocks a server answers with).
    public func logClock(page pid: PageID? = nil) throws -> VectorClock {
        try checkUsable()
        try refreshDocument()
        guard let pid else { return docMissing.truncating(doc.clock) }
        if pages[pid] == nil, try !pageHasFiles(pid) { return VectorClock() }
        // A clock needs no point: loaded with its points deferred ([LOG-27]).
        let lp = try loadedPageDeferred(pid, allowUnknown: true)
        return lp.missing.truncating(lp.replica.clock)
    }

    /// The operations a log's state holds that the log lacks ([PKG-51]): lost to damage or
    /// to a deleted log file, until a peer sends them again.
    public func missingOperations(page pid: PageID? = nil) throws -> OpRanges {
        try checkUsable()
        try refreshDocument()
        guard let pid else { return docMissing }
        if pages[pid] == nil, try !pageHasFiles(pid) { return OpRanges() }
        return try loadedPageDeferred(pid, allowUnknown: true).missing
    }

    /// The counters each replica has in these frames.
    static func heldCounters(_ frames: [LoggedFrame]) -> [ReplicaID: Set<UInt64>] {
        var out: [ReplicaID: Set<UInt64>] = [:]
        for f in frames {
            if let id = OperationCodec.id(of: f.frame) { out[id.replica, default: []].insert(id.counter) }
        }
        return out
    }

    /// Sets what a page's state holds that its log lacks, from every frame of the log, and
    /// writes `pages/<page>.missing` (or removes it) when the file says otherwise ([PKG-51]).
    func settleMissing(_ lp: LoadedPage, frames: [LoggedFrame]) throws {
        let base = try baseClock(page: lp.id)
        lp.missing = OpRanges(clock: lp.replica.clock, held: Document.heldCounters(frames), base: base)
        // [PKG-24] A salvage not written yet: known in memory, written with the salvage.
        guard lp.log.pendingSalvage == nil else { return }
        try writeMissing(lp.missing, to: paths.missing(lp.id))
    }

    /// `settleMissing` for `document.log`.
    func settleDocumentMissing(frames: [LoggedFrame]) throws {
        docMissing = OpRanges(clock: doc.clock, held: Document.heldCounters(frames), base: nil)
        try writeMissing(docMissing, to: paths.documentMissing)
    }

    /// Writes a missing-operations file by durable replace, or removes it when nothing is
    /// missing; nothing is written when the file already says exactly that. A file that does
    /// not decode is replaced (what it said is recomputed from the log, so nothing is lost).
    func writeMissing(_ missing: OpRanges, to path: String) throws {
        precondition(lockDepth > 0, "missing-operations files are written under the document lock")
        let onDisk = try DurableFile.readIfExists(path, io: io)
        if missing.isEmpty {
            guard onDisk != nil else { return }
            try io.unlink(path, missingOK: true)
            try DurableFile.syncDirectory(DurableFile.split(path).dir, io: io)
            return
        }
        let bytes = missing.encoded()
        if onDisk != bytes { try DurableFile.replace(path, with: bytes, io: io) }
    }

    /// True when a missing-operations file exists: the log must be read whole on opening to
    /// know what it lacks ([PKG-51]).
    func hasMissingFile(_ path: String) throws -> Bool { try io.stat(path) != nil }

    /// [PKG-56] A snapshot set aside held operations of this replica that its log lost: the
    /// next local edits would reuse their ids, which a peer holding the lost operations takes
    /// for duplicates. The folder mints a new replica id first; the report says so.
    func mintIfOwnOperationsWereLost(_ report: inout RecoveryReport) throws {
        guard report.lostOwnOperations > 0 else { return }
        report.mintedReplica = try identity.remint(reason: Document.lostOwnReason(report))
    }

    static func lostOwnReason(_ report: RecoveryReport) -> String {
        "\(report.lostOwnOperations) operation\(report.lostOwnOperations == 1 ? "" : "s") of this replica lost with the log behind \(report.path)"
    }

    // MARK: - Where the log holds each operation ([PKG-58])

    /// The offset of every operation of a loaded page's log, read once (ids from the first
    /// bytes of each frame, nothing decoded) and kept while the page stays loaded; appends
    /// add to it. Built only when a received operation's id is already held: duplicates are
    /// compared with what the log holds under their id.
    func logIndex(_ lp: LoadedPage) throws -> [OpID: UInt64] {
        if let i = lp.logIndex { return i }
        try syncNow(.page(lp.id), lp.log)
        let frames = try readAllFrames(lp)
        var index: [OpID: UInt64] = [:]
        index.reserveCapacity(frames.count)
        for f in frames {
            if let id = OperationCodec.id(of: f.frame), index[id] == nil { index[id] = f.offset }
        }
        lp.logIndex = index
        return index
    }

    /// `logIndex` for `document.log`.
    func documentLogIndex() throws -> [OpID: UInt64] {
        if let i = docLogIndex { return i }
        try syncNow(.document, docLog)
        let frames = try readAllDocumentFrames()
        var index: [OpID: UInt64] = [:]
        for f in frames {
            if let id = OperationCodec.id(of: f.frame), index[id] == nil { index[id] = f.offset }
        }
        docLogIndex = index
        return index
    }

    // MARK: - Content hashes and chain digests ([SYNC-50], [SYNC-52], [SYNC-53])

    /// The first 16 bytes of the content hash of each operation a log holds, per replica by
    /// counter (the first frame of an id, should a log hold one twice). Reads the whole log;
    /// the id comes from each frame's first bytes, and only compact stroke frames (`addStroke`, `addStroke2`, `addStroke3`) are decoded
    /// (their hash is taken over their hash form, `ContentHash.of`).
    func logHashes(page pid: PageID?) throws -> [ReplicaID: [UInt64: [UInt8]]] {
        try refreshDocument()
        let frames: [LoggedFrame]
        if let pid {
            if pages[pid] == nil, try !pageHasFiles(pid) { return [:] }
            // The hashes are the log's frames': the page's points are not decoded ([LOG-27]).
            let lp = try loadedPageDeferred(pid, allowUnknown: true)
            try syncNow(.page(pid), lp.log)
            frames = try readAllFrames(lp)
        } else {
            try syncNow(.document, docLog)
            frames = try readAllDocumentFrames()
        }
        var out: [ReplicaID: [UInt64: [UInt8]]] = [:]
        for f in frames {
            guard let id = OperationCodec.id(of: f.frame), out[id.replica]?[id.counter] == nil else { continue }
            out[id.replica, default: [:]][id.counter] = Array(ContentHash.of(f.frame).prefix(16))
        }
        return out
    }

    /// The chain digest ([SYNC-52]) of each replica of `clock` whose operations `1…clock[r]`
    /// the log holds, at `clock[r]`; replicas the log does not hold from counter 1 without a
    /// gap (a checkpoint base, lost operations) are left out.
    public func chainDigests(page pid: PageID? = nil, at clock: VectorClock) throws -> [ChainDigest] {
        try checkUsable()
        guard !clock.isEmpty else { return [] }
        return Document.chainDigests(try logHashes(page: pid), at: clock)
    }

    /// A log's clock ([PKG-49]) and its chain digests at that clock, for a clock comparison.
    /// The whole log is read first (for the hashes), so damage anywhere in it is found and
    /// salvaged, and what it lost recorded ([PKG-51]), before the clock is taken: a comparison
    /// never offers operations a damaged log lost, even behind its snapshot's offset.
    public func logClockAndDigests(page pid: PageID? = nil) throws -> (clock: VectorClock, digests: [ChainDigest]) {
        try checkUsable()
        let hashes = try logHashes(page: pid)
        let clock = try logClock(page: pid)
        return (clock, Document.chainDigests(hashes, at: clock))
    }

    static func chainDigests(_ hashes: [ReplicaID: [UInt64: [UInt8]]], at clock: VectorClock) -> [ChainDigest] {
        var out: [ChainDigest] = []
        for e in clock.entries {
            guard let byCounter = hashes[e.replica] else { continue }
            var d = ContentHash.emptyChain
            var complete = true
            for c in 1...e.counter {
                guard let h = byCounter[c] else { complete = false; break }
                d = ContentHash.chain(d, h)
            }
            if complete { out.append(ChainDigest(replica: e.replica, counter: e.counter, digest: d)) }
        }
        return out
    }

    /// The first 16 bytes of the content hashes of a replica's operations `from…to` in a log
    /// ([SYNC-53]), in counter order, stopping at the first the log does not hold.
    public func contentHashes(page pid: PageID? = nil, replica: ReplicaID, from: UInt64, to: UInt64) throws -> [[UInt8]] {
        try checkUsable()
        guard from >= 1, from <= to else { return [] }
        return ContentHashTable(try logHashes(page: pid)).hashes(replica: replica, from: from, to: to)
    }

    /// Every content hash a log holds (the first 16 bytes of each), read once: what
    /// `contentHashes(page:replica:from:to:)` answers from, for answering many ranges of one
    /// log without reading it again for each ([SYNC-53]).
    public func contentHashTable(page pid: PageID? = nil) throws -> ContentHashTable {
        try checkUsable()
        return ContentHashTable(try logHashes(page: pid))
    }
}
