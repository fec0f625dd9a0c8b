import LnoteModel
import LnoteReplication
import LnoteStore

/// The serving side of the sync protocol: what `lnote serve`, the relay, and a folder
/// reached directly all answer. Requests and answers are the protocol's values; HTTP is
/// only one way to carry them.
public protocol SyncEndpoint: Sendable {
    /// Answers one exchange.
    /// - Throws: `SyncRefusal` when the push references an asset the endpoint does not hold
    ///   ([SYNC-8]; nothing is stored) or the pull needs history it never held ([SYNC-43];
    ///   found while the answer is built, after the push was stored, [SYNC-22]);
    ///   `LnoteError` otherwise (nothing is stored when the push is refused).
    func sync(_ request: SyncRequest) async throws -> SyncResponse
    /// Which of these assets of a document the endpoint lacks.
    func missingAssets(_ ids: [AssetID], document: DocumentID) async throws -> [AssetID]
    /// Stores an asset, whether or not the endpoint holds the document yet ([SYNC-10]); the
    /// endpoint checks that `id` is the SHA-256 of the bytes.
    /// - Returns: true when the asset was new (HTTP 201), false when already held (204).
    @discardableResult
    func putAsset(_ bytes: [UInt8], id: AssetID, document: DocumentID) async throws -> Bool
    func getAsset(_ id: AssetID, document: DocumentID) async throws -> [UInt8]
    /// The device names the endpoint can give for replica ids ([SYNC-57], `GET …/devices`);
    /// nil when it keeps none.
    func deviceNames() async throws -> [ReplicaID: String]?
}

extension SyncEndpoint {
    public func deviceNames() async throws -> [ReplicaID: String]? { nil }
}

/// Serves a `SyncableNotebook` (a notebook folder) over the protocol.
///
/// Change cursors are kept in memory: each time a log's clock is seen to change, the log
/// gets the next sequence number and its clock at that number is remembered. A cursor
/// names "every change up to here", so the answer to `since: c` is, for each log changed
/// after c, the operations its clock at c did not cover. A new endpoint (a restarted
/// server) has a new random epoch; a client holding a cursor of another epoch is told to
/// resynchronize by clocks (`resync`).
public actor NotebookEndpoint: SyncEndpoint {
    public let notebook: any SyncableNotebook

    /// A folder's device names: its own machine's (`lnote init --name`) and those it learnt.
    public func deviceNames() async throws -> [ReplicaID: String]? { try await notebook.knownDeviceNames() }
    public nonisolated let epoch: UInt64
    private var sequence: UInt64 = 0
    private var history: [LogRef: [(seq: UInt64, clock: VectorClock)]] = [:]
    private var current: [LogRef: VectorClock] = [:]
    /// Clock snapshots kept per log; an older cursor gets the whole log (correct, larger).
    private let historyLimit = 256

    public init(notebook: any SyncableNotebook, epoch: UInt64? = nil) {
        self.notebook = notebook
        var g = SystemRandomNumberGenerator()
        self.epoch = epoch ?? UInt64.random(in: 1...UInt64.max, using: &g)
    }

    /// Notices logs whose clocks changed since last time (local edits included).
    private func refresh() async throws {
        for lc in try await notebook.logClocks() where current[lc.log] != lc.clock {
            sequence += 1
            current[lc.log] = lc.clock
            var h = history[lc.log, default: []]
            h.append((sequence, lc.clock))
            if h.count > historyLimit { h.removeFirst(h.count - historyLimit) }
            history[lc.log] = h
        }
    }

    /// Most content hashes one answer carries ([SYNC-53]): 16 MiB of hashes. A range cut
    /// short is answered as far as it goes; the client asks for the rest.
    public static let maxHashesPerAnswer = 1 << 20
    /// The most hashes `answerHashes` keeps read at once, over the logs a request asks about.
    static let hashTableLimit = 1 << 20

    public func sync(_ request: SyncRequest) async throws -> SyncResponse {
        // Validate everything before writing anything: frames were CRC-checked by the
        // codec; now each must decode, belong in its log, and name assets we hold.
        // What the client just pushed, by operation id, so that none is sent back to it: not
        // by frame bytes, since an operation has two forms ([LOG-22]) and a log keeps the
        // one it writes, whichever the client pushed ([SYNC-50]).
        var pushed = request.pushedEarlier
        var checked: [CheckedLog] = []
        for batch in request.push {
            let ops = try batch.ops(path: "push")
            for op in ops {
                guard op.body.isPageOperation == (batch.log.page != nil) else {
                    // `push`: an HTTP server then names the frame's offset in the body ([SYNC-22]).
                    throw LnoteError(.invalidArgument, "\(op.body.name) \(op.id) does not belong in log \(batch.log)",
                                     path: "push")
                }
                for asset in op.referencedAssets where !(try await notebook.hasAsset(asset, document: batch.log.document)) {
                    throw SyncRefusal.assetMissing(asset, operation: op.id, log: batch.log)
                }
            }
            pushed[batch.log, default: []].formUnion(ops.map(\.id))
            checked.append(CheckedLog(log: batch.log, ops: ops))
        }
        // [SYNC-51] An operation whose id is held with other content is not stored; the rest is.
        var receipt = Receipt()
        if !checked.isEmpty { receipt = try await notebook.receive(checked: checked, remote: QuarantineEntry.pushingReplica(request.replica), recordForks: true) }
        let accepted = UInt64(receipt.appended)
        let forks = receipt.forks.map { ForkReport(log: $0.log, id: $0.fork.id, held: $0.fork.held) }
        // A forked id's content here is not what the client pushed: it is sent like any other.
        for f in receipt.forks { pushed[f.log]?.remove(f.fork.id) }
        // [SYNC-52] Digests read every log whole, which finds damage a log hides behind its
        // snapshot and lowers that log's clock ([PKG-49]): computed before the clocks answered.
        // Answered with or without `have`: a client comparing chains alone (no clocks sent)
        // gets them at the server's current counters, which each entry carries.
        let computed = request.digests != nil ? try await notebook.logClocksAndDigests() : nil
        try await refresh()
        // What this answer speaks for: the clocks, history and cursor as of this refresh. The
        // awaits below let other requests store operations and refresh meanwhile; an answer
        // whose cursor or clocks were read after them would cover operations it did not send
        // (and a log skipped below as holding only the push would hide one for good).
        let (cursor, history, current) = (sequence, history, current)
        let hashes = try await answerHashes(request.hashRanges)

        var pull: [LogBatch] = []
        if let have = request.have {
            let theirs = Dictionary(have.map { ($0.log, $0.clock) }, uniquingKeysWith: { $0.merged($1) })
            // Asked together: the notebook reads the logs of each document in one opening.
            let wanted = current.keys.sorted().filter { !(theirs[$0]?.covers(current[$0]!) ?? current[$0]!.isEmpty) }
            let answers = try await notebook.framesForPeer(in: wanted.map { (log: $0, clock: theirs[$0] ?? VectorClock()) })
            for (log, found) in zip(wanted, answers) {
                let frames = found.filter { !NotebookEndpoint.isPushed($0, pushed[log]) }
                if !frames.isEmpty { pull.append(LogBatch(log: log, frames: frames)) }
            }
            let clocks = current.keys.sorted().map { LogClock(log: $0, clock: current[$0]!) }
            // [SYNC-52] Digests answer digests: ours, at the clocks just answered.
            var digests: [LogDigests]?
            if let (now, d) = computed {
                digests = d.map { list in
                    let answered = Dictionary(clocks.map { ($0.log, $0.clock) }, uniquingKeysWith: { a, _ in a })
                    let fresh = Dictionary(now.map { ($0.log, $0.clock) }, uniquingKeysWith: { a, _ in a })
                    // Only logs whose clock did not move in between (a local edit meanwhile).
                    return list.filter { answered[$0.log] == fresh[$0.log] }
                }
            }
            return SyncResponse(epoch: epoch, cursor: cursor, accepted: accepted, pull: pull, clocks: clocks,
                                digests: digests, forks: forks, hashes: hashes)
        }
        // [SYNC-6] Another epoch, or [SYNC-9] a cursor beyond this server's own (the client
        // counted changes this server does not hold: it was restored from an older copy, or
        // the cursor is made up): the client must compare clocks, not trust its cursor.
        guard request.epoch == epoch, request.cursor <= cursor else {
            return SyncResponse(epoch: epoch, cursor: cursor, accepted: accepted, pull: [], resync: true,
                                digests: computed?.digests, forks: forks, hashes: hashes)
        }
        for log in history.keys.sorted() {
            let h = history[log]!
            guard h.last!.seq > request.cursor else { continue }
            let base = h.last { $0.seq <= request.cursor }?.clock ?? VectorClock()
            // What the log's clock gained since `base` is exactly what this client just pushed
            // (a push into an empty folder, or a client that alone writes here): the log is not
            // read again and what it just stored is not decoded again. (Operations held but
            // waiting for a dependency are outside the clock and are not sent with this
            // answer; they come once what they wait for arrives and the clock covers them.)
            if NotebookEndpoint.pushedAll(pushed[log], since: base, upTo: h.last!.clock) { continue }
            if let b = try await batch(log, notCoveredBy: base, skipping: pushed[log]) { pull.append(b) }
        }
        return SyncResponse(epoch: epoch, cursor: cursor, accepted: accepted, pull: pull, digests: computed?.digests,
                            forks: forks, hashes: hashes)
    }

    /// [SYNC-53] The content hashes of the operations held in each asked range, from its
    /// start, stopping at the first not held, at its end, or when the answer holds
    /// `maxHashesPerAnswer`.
    ///
    /// Each log is read once for all the ranges that ask about it (a request may hold 65,536
    /// ranges: read again for each, one log of 600 operations kept the notebook busy for
    /// 4 ms a range), while the logs read stay under `hashTableLimit` hashes in all; the
    /// documents held are listed once.
    private func answerHashes(_ ranges: [HashRange]?) async throws -> [HashRange]? {
        guard let ranges else { return nil }
        var out: [HashRange] = []
        var budget = NotebookEndpoint.maxHashesPerAnswer
        var tables: [LogRef: ContentHashTable] = [:]
        var held = 0
        // Listed once: a range naming a document not held looked the folder up again, and
        // 65,536 of them (one request) kept a served folder of 300 documents busy for 48 s.
        let documents = ranges.isEmpty ? nil : try await notebook.heldDocuments()
        for r in ranges {
            let to = budget == 0 ? r.from - 1 : min(r.to, r.from &+ UInt64(budget) &- 1)
            var hashes: [[UInt8]] = []
            if to >= r.from, documents?.contains(r.log.document) ?? true {
                if tables[r.log] == nil, let t = try await notebook.contentHashTable(in: r.log) {
                    if held + t.count > NotebookEndpoint.hashTableLimit {
                        tables = [:]
                        held = 0
                    }
                    tables[r.log] = t
                    held += t.count
                }
                if let t = tables[r.log] {
                    hashes = t.hashes(replica: r.replica, from: r.from, to: to)
                } else {
                    hashes = try await notebook.contentHashes(in: r.log, replica: r.replica, from: r.from, to: to)
                }
            }
            budget -= hashes.count
            out.append(HashRange(log: r.log, replica: r.replica, from: r.from, to: r.from + UInt64(hashes.count) - 1, hashes: hashes))
        }
        return out
    }

    /// The operations of `log` not covered by `clock`, less those the client just pushed.
    /// - Throws: `SyncRefusal` (`historyNotHeld`) when the notebook cannot give them all.
    private func batch(_ log: LogRef, notCoveredBy clock: VectorClock, skipping: Set<OpID>?) async throws -> LogBatch? {
        let frames = try await notebook.framesForPeer(in: log, notCoveredBy: clock).filter { !NotebookEndpoint.isPushed($0, skipping) }
        return frames.isEmpty ? nil : LogBatch(log: log, frames: frames)
    }

    /// Whether every operation `clock` covers and `base` does not is in `pushed` (ids are
    /// unique in a set, so counting those in the range decides it).
    static func pushedAll(_ pushed: Set<OpID>?, since base: VectorClock, upTo clock: VectorClock) -> Bool {
        guard let pushed, !pushed.isEmpty else { return false }
        var gained: UInt64 = 0
        for (replica, counter) in clock.entries where counter > base[replica] { gained += counter - base[replica] }
        guard gained > 0, UInt64(pushed.count) >= gained else { return false }
        let inRange = pushed.reduce(into: UInt64(0)) { n, id in
            if !base.covers(id) && clock.covers(id) { n += 1 }
        }
        return inRange == gained
    }

    /// Whether `frame` holds one of the operations `pushed` names.
    static func isPushed(_ frame: Frame, _ pushed: Set<OpID>?) -> Bool {
        guard let pushed, !pushed.isEmpty, let id = OperationCodec.id(of: frame) else { return false }
        return pushed.contains(id)
    }

    public func missingAssets(_ ids: [AssetID], document: DocumentID) async throws -> [AssetID] {
        var out: [AssetID] = []
        for id in ids where !(try await notebook.hasAsset(id, document: document)) { out.append(id) }
        return out
    }

    @discardableResult
    public func putAsset(_ bytes: [UInt8], id: AssetID, document: DocumentID) async throws -> Bool {
        guard AssetID.of(bytes) == id else {
            throw LnoteError(.invalidArgument, "asset bytes do not hash to \(id)")
        }
        if try await notebook.hasAsset(id, document: document) { return false }
        _ = try await notebook.writeAsset(bytes, document: document)
        return true
    }

    public func getAsset(_ id: AssetID, document: DocumentID) async throws -> [UInt8] {
        guard try await notebook.hasAsset(id, document: document) else {
            throw LnoteError(.notFound, "no asset \(id) in document \(document)")
        }
        do {
            return try await notebook.readAsset(id, document: document)
        } catch let e as LnoteError where e.code == .corrupt || e.code == .truncated {
            // [SYNC-60] A stored asset whose bytes do not hash to its name (or that is no
            // regular file) is one this side cannot give: as if absent (404), so the other
            // side quarantines what needs it and syncs the rest, rather than failing whole.
            throw LnoteError(.notFound, "asset \(id) of document \(document) is damaged here (\(e.message)): it cannot be given",
                             path: e.path)
        }
    }
}
