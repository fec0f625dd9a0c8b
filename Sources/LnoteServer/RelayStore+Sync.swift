import LnoteModel
import LnoteReplication
import LnoteSync

/// One operation of a log, for "skip what the client just pushed".
struct LoggedOpID: Hashable {
    var log: LogRef
    var id: OpID
}

extension RelayStore {
    /// Most content hashes one answer carries ([SYNC-53]): a quarter of the pull limit's
    /// bytes, at least 4,096.
    var hashBudget: Int { max(4096, pullLimit / 64) }

    /// Answers one sync request for `notebook` (`Protocol/sync-protocol.md` [SYNC-4]..[SYNC-8],
    /// §6), with the semantics of `NotebookEndpoint`:
    ///
    /// 1. The whole push is validated before anything is written: every frame decodes as an
    ///    operation the validator accepts ([LOG-20]), page operations are in page logs and
    ///    document operations in document logs, and every asset an operation references is
    ///    stored for the notebook.
    /// 2. Each pushed operation is compared with what the relay holds under its id, by
    ///    content hash ([SYNC-50]): new, a duplicate (skipped), or a fork ([SYNC-51]: not
    ///    stored, listed in the answer's `forks` with the hash held).
    /// 3. With a `device` (a request that came with a token), ownership ([SYNC-57]): when a
    ///    new or forked operation is authored under a replica another device owns, the
    ///    whole request is refused. Otherwise the new operations are stored (`accepted`
    ///    counts them), chains advance, and `device` becomes the owner of the request's
    ///    replica when the push holds an operation authored under it and it has no owner.
    /// 4. With `have`: the answer holds, for every log, the stored operations the client's
    ///    clock does not cover (gaps included), and the relay's clocks, each entry the
    ///    greatest counter held without a gap from 1.
    ///    Without `have`, same epoch: the operations stored after the cursor.
    ///    Without `have`, another epoch (or a cursor past the notebook's, which only a store
    ///    restored from an older copy can produce): nothing, and `resync`.
    ///    Operations the request itself pushed are never sent back.
    ///    With `digests`: the relay's chain digests ([SYNC-52]); with `hashRanges`: the
    ///    content hashes asked for ([SYNC-53]).
    /// 5. A pull larger than `pullLimit` bytes (less what digests, hashes and forks take)
    ///    is cut in change-sequence order: the answer's cursor then names the last
    ///    operation included, and the next sync (steady state, from that cursor) continues.
    ///
    /// The answer is read in the transaction that stored the push, so the cursor and the
    /// pulled operations describe the same state. The high-water mark ([SYNC-58]) is
    /// advanced after the commit, before the answer is returned.
    ///
    /// - Parameter device: the device whose token the request carried (nil: a caller in
    ///   this process, for which ownership is neither checked nor recorded).
    /// - Throws: `.notFound` for an unknown notebook; `.corrupt` / `.truncated` for a frame
    ///   that is not a valid operation and `.invalidArgument` for an operation in the wrong
    ///   log or a malformed hash range (HTTP 400); `SyncRefusal` (`assetMissing`, HTTP 409
    ///   `asset_missing`) for a reference to an asset not uploaded; `ServerRefusal`
    ///   (`replicaOwned`, HTTP 403 `forbidden`) for an operation of a replica another
    ///   device owns; `.database` for storage failures, `.io` when the high-water mark
    ///   cannot be written. Nothing is written when it throws, but for `.io` from the mark
    ///   (the push is then stored; sending it again is harmless, [SYNC-7]).
    public func sync(_ request: SyncRequest, notebook: NotebookID, device: String? = nil) throws -> SyncResponse {
        // What the relay keeps of a pushed operation: its id, the assets it references, its
        // frame and content hash; never its decoded points.
        struct Incoming: RelayInsertable {
            var log: LogRef
            var id: OpID
            var assets: [AssetID]
            var frame: Frame
            var hash: [UInt8]
            var loggedID: LoggedOpID { LoggedOpID(log: log, id: id) }
            var frameBytes: [UInt8] { frame.encoded }
            var frameSize: Int { frame.encodedSize }
        }
        var incoming: [Incoming] = []
        var pushed = Set<LoggedOpID>()
        for batch in request.push {
            for (i, frame) in batch.frames.enumerated() {
                // Decoded and checked one at a time, the decoded operation dropped once hashed:
                // a stroke's points take about 20 bytes each decoded, and a valid frame of a
                // frame of 82 KB can hold a million of them ([LOG-23]), so decoding a whole push
                // first would hold hundreds of times its size ([SYNC-24]).
                let op = try batch.op(at: i, path: "push")
                guard op.body.isPageOperation == (batch.log.page != nil) else {
                    throw LnoteError(.invalidArgument, "\(op.body.name) \(op.id) does not belong in log \(batch.log)",
                                     path: "push", index: i)
                }
                guard op.id.counter <= UInt64(Int64.max) else {
                    throw LnoteError(.invalidArgument, "operation counter \(op.id.counter) out of range", path: "push", index: i)
                }
                incoming.append(Incoming(log: batch.log, id: op.id, assets: op.referencedAssets, frame: frame,
                                         hash: ContentHash.of(frame, decoded: op)))
                pushed.insert(LoggedOpID(log: batch.log, id: op.id))
            }
        }
        for (log, ids) in request.pushedEarlier {
            for id in ids { pushed.insert(LoggedOpID(log: log, id: id)) }
        }
        if let ranges = request.hashRanges {
            guard ranges.count <= SyncCodec.maxRanges else {
                throw LnoteError(.invalidArgument, "\(ranges.count) hash ranges (at most \(SyncCodec.maxRanges))", path: "hashRanges")
            }
            for (i, r) in ranges.enumerated() where r.from == 0 || r.to < r.from || r.replica.rawValue == 0 {
                throw LnoteError(.invalidArgument, "hash range \(r.replica) \(r.from)...\(r.to) is empty or names counter 0",
                                 path: "hashRanges", index: i)
            }
        }

        // A push may store operations: it allocates sequences, so it is an `.allocating`
        // write. A pull alone writes nothing (no cursor, owner or token use is recorded: a
        // device is claimed only by a push that stores its operations), so it reads one
        // consistent state and waits for no writer: sequences become visible in allocation
        // order (`RelayDatabase.allocateSequences`), so its cursor never skips an operation.
        let mode: RelayTransactionMode = incoming.isEmpty ? .read : .allocating
        let (answer, issued): (SyncResponse, Int64) = try database.transaction(mode) { tx in
            let (nb, epoch) = try row(of: notebook, tx)
            var present = Set<AssetID>()
            for x in incoming {
                for asset in x.assets where !present.contains(asset) {
                    guard try hasAsset(asset, nb: nb, tx) else {
                        throw SyncRefusal.assetMissing(asset, operation: x.id, log: x.log)
                    }
                    present.insert(asset)
                }
            }

            // [SYNC-51] What the relay holds under each pushed id (an earlier operation of
            // the same push counts as held).
            enum Fate { case new, duplicate, fork(held: [UInt8]) }
            var fates: [Fate] = []
            fates.reserveCapacity(incoming.count)
            func key(_ x: Incoming) -> [RelayValue] {
                [.integer(nb), .blob(x.log.document.uuid.bytes), Self.pageColumn(x.log),
                 .integer(Int64(bitPattern: x.id.replica.rawValue)), .integer(Int64(x.id.counter))]
            }
            if !incoming.isEmpty {
                // What the relay holds under the pushed ids, read by log and author in chunks:
                // one query per operation was a round trip each to PostgreSQL, under the lock.
                let held = try heldRows(incoming.map { LoggedOpID(log: $0.log, id: $0.id) }, nb: nb, tx)
                var inPush: [LoggedOpID: [UInt8]] = [:]
                for x in incoming {
                    let id = LoggedOpID(log: x.log, id: x.id)
                    var holding = inPush[id]
                    if holding == nil { holding = held[id]?.hash }
                    if let h = holding {
                        fates.append(h == x.hash ? .duplicate : .fork(held: h))
                    } else {
                        fates.append(.new)
                        inPush[id] = x.hash
                        continue
                    }
                    inPush[id] = holding
                }
            }

            // [SYNC-57] Owners: checked before anything is written.
            if let device, !incoming.isEmpty {
                let owners = try OwnerCache(tx, nb: nb)
                for (x, fate) in zip(incoming, fates) {
                    if case .duplicate = fate { continue }
                    if let owner = try owners.owner(of: x.id.replica), owner != device {
                        throw ServerRefusal.replicaOwned(x.id.replica, owner: owner, operation: x.id, log: x.log)
                    }
                }
            }

            var accepted: UInt64 = 0
            var forks: [ForkReport] = []
            var claims = false
            var lastSequence: Int64 = 0
            let newCount = fates.count { if case .new = $0 { true } else { false } }
            var sequence = newCount > 0 ? try database.allocateSequences(newCount, tx) : 0
            struct Group: Hashable {
                var log: LogRef
                var replica: ReplicaID
            }
            var touched = Set<Group>()
            var seenForks = Set<LoggedOpID>()
            // The new operations are inserted in chunks, each with the next of the allocated
            // sequences in push order. The UNIQUE key, not the lookup above, decides: an
            // operation another process stored since (a database shared by several relays) is
            // not stored twice, and is then a duplicate or a fork like any held one.
            var rows: [(row: Int, seq: Int64)] = []
            for (i, fate) in fates.enumerated() {
                if case .new = fate {
                    rows.append((i, sequence))
                    sequence += 1
                }
            }
            let lost = try insertNew(rows.map { (incoming[$0.row], $0.seq) }, nb: nb, key: key, tx)
            for (row, seq) in rows {
                guard let found = lost[seq] else {
                    lastSequence = max(lastSequence, seq)
                    continue
                }
                let x = incoming[row]
                // `insertNew` looked it up in this transaction: not found means not held either.
                guard let h = found else {
                    throw LnoteError(.database, "operation \(x.id) in \(x.log) was neither stored nor found", path: path)
                }
                fates[row] = h == x.hash ? .duplicate : .fork(held: h)
            }
            for (x, fate) in zip(incoming, fates) {
                switch fate {
                case .new:
                    accepted += 1
                    touched.insert(Group(log: x.log, replica: x.id.replica))
                case .duplicate:
                    break
                case .fork(let h):
                    if forks.count < SyncCodec.maxRanges, seenForks.insert(LoggedOpID(log: x.log, id: x.id)).inserted {
                        forks.append(ForkReport(log: x.log, id: x.id, held: h))
                    }
                    continue
                }
                if x.id.replica == request.replica { claims = true }
            }
            if !touched.isEmpty {
                let chains = try ChainWriter(tx)
                for g in touched {
                    try chains.advance(nb: nb, document: g.log.document.uuid.bytes, page: g.log.page?.uuid.bytes ?? [],
                                       replica: Int64(bitPattern: g.replica.rawValue), path: path)
                }
            }
            if let device, claims { try claim(request.replica, by: device, nb: nb, tx) }
            if accepted > 0 { try database.publishChange(of: notebook, tx) }

            let cursor = try self.cursor(nb, tx)
            var answer = SyncResponse(epoch: epoch, cursor: cursor, accepted: accepted, pull: [], forks: forks)
            if request.digests != nil { answer.digests = try digests(nb: nb, tx) }
            if let ranges = request.hashRanges { answer.hashes = try hashes(nb: nb, ranges: ranges, budget: hashBudget, tx) }
            let reserved = Self.encodedSize(digests: answer.digests, hashes: answer.hashes, forks: forks)
            if let have = request.have {
                let theirs = Dictionary(have.map { ($0.log, $0.clock) }, uniquingKeysWith: { $0.merged($1) })
                let (pull, clocks, at) = try pullNotCovered(nb: nb, theirs: theirs, skipping: pushed, cursor: cursor,
                                                            reserved: reserved, tx)
                answer.pull = pull
                answer.clocks = clocks
                answer.cursor = at
            } else if request.epoch == epoch, request.cursor <= cursor {
                let (pull, at) = try pullSince(nb: nb, since: request.cursor, skipping: pushed, cursor: cursor,
                                               reserved: reserved, tx)
                answer.pull = pull
                answer.cursor = at
            } else {
                answer.resync = true
            }
            return (answer, lastSequence)
        }
        // [SYNC-58] No answer carries a sequence the mark does not hold.
        if answer.accepted > 0 {
            try database.issued(through: issued)
            // [SYNC-72] Long polls held for this notebook look again.
            observers.notify(notebook)
        }
        return answer
    }

    /// An upper bound of the bytes `Digests`, `Hashes` and `Forks` take in an answer.
    static func encodedSize(digests: [LogDigests]?, hashes: [HashRange]?, forks: [ForkReport]) -> Int {
        var n = 0
        for d in digests ?? [] { n += 33 + 10 + d.entries.count * (8 + 10 + 16) }
        for h in hashes ?? [] { n += 33 + 8 + 10 + 10 + 16 * h.hashes.count }
        n += forks.count * (33 + 18 + 32)
        return n + 3 * 10
    }

    /// The server's clock of every log of the notebook: per replica, the greatest counter
    /// `c` such that every counter 1...c is stored ([SYNC-3]: never claim a missing one).
    public func clocks(notebook: NotebookID) throws -> [LogClock] {
        try database.transaction(.read) { tx in
            let (nb, _) = try row(of: notebook, tx)
            let heads = try replicaHeads(nb, tx)
            return Self.clocks(from: heads)
        }
    }

    // MARK: - Pull

    /// For one (log, replica): `head` the greatest counter held with no gap below it, `top`
    /// the greatest held.
    struct ReplicaHead {
        var log: LogRef
        var document: [UInt8]
        var page: [UInt8]
        var replica: Int64
        var head: UInt64
        var top: UInt64
    }

    /// Counters are at least 1 and unique per (log, replica), so a group whose greatest
    /// counter equals its count has no gap: its head is that counter. Only a group with a
    /// gap (rare: a client pushed an operation it held without its predecessors) is walked
    /// in counter order up to its first gap. Both queries read only the UNIQUE index.
    func replicaHeads(_ nb: Int64, _ tx: any RelayTransaction) throws -> [ReplicaHead] {
        let rows = try tx.query("""
            SELECT document, page, replica, count(*), max(counter) FROM ops WHERE nb = ?1
            GROUP BY document, page, replica
            """, [.integer(nb)])
        var heads: [ReplicaHead] = []
        heads.reserveCapacity(rows.count)
        for r in rows {
            guard let d = r[0].bytes, let p = r[1].bytes, let rep = r[2].int64, let count = r[3].int64,
                  let top = r[4].int64 else {
                throw LnoteError(.corrupt, "malformed operation row in the relay store", path: path)
            }
            var head = UInt64(top)
            if count != top {
                let walk = try tx.prepare("""
                    SELECT counter FROM ops WHERE nb = ?1 AND document = ?2 AND page = ?3 AND replica = ?4
                    ORDER BY counter
                    """)
                head = 0
                try walk.forEach([.integer(nb), .blob(d), .blob(p), .integer(rep)]) { row in
                    guard row[0].int64 == Int64(head) + 1 else { return false }
                    head += 1
                    return true
                }
            }
            heads.append(ReplicaHead(log: try Self.logRef(document: r[0], page: r[1], path: path), document: d, page: p,
                                     replica: rep, head: head, top: UInt64(top)))
        }
        return heads
    }

    static func clocks(from heads: [ReplicaHead]) -> [LogClock] {
        var clocks: [LogRef: VectorClock] = [:]
        for h in heads where h.head > 0 {
            clocks[h.log, default: VectorClock()][ReplicaID(UInt64(bitPattern: h.replica))] = h.head
        }
        return clocks.keys.sorted().map { LogClock(log: $0, clock: clocks[$0]!) }
    }

    /// The answer to `have`: stored operations the client's clocks do not cover.
    func pullNotCovered(nb: Int64, theirs: [LogRef: VectorClock], skipping pushed: Set<LoggedOpID>,
                        cursor: UInt64, reserved: Int = 0,
                        _ tx: any RelayTransaction) throws -> (pull: [LogBatch], clocks: [LogClock], cursor: UInt64) {
        let heads = try replicaHeads(nb, tx)
        let clocks = Self.clocks(from: heads)
        var clocksWriter = ByteWriter()
        SyncCodec.encodeClocksForSize(clocks, into: &clocksWriter)

        struct Candidate {
            var seq: Int64
            var log: LogRef
            var size: Int
        }
        var candidates: [Candidate] = []
        if theirs.isEmpty {
            // A client that holds nothing of the notebook (a first pull): every operation is a
            // candidate, read in one statement rather than one per log and replica (on
            // PostgreSQL each is a round trip, and a notebook has hundreds of logs).
            var logs: [[UInt8]: LogRef] = [:]
            for h in heads { logs[h.document + h.page] = h.log }
            let all = try tx.prepare("SELECT seq, document, page, replica, counter, length(frame) FROM ops WHERE nb = ?1")
            try all.forEach([.integer(nb)]) { r in
                guard let seq = r[0].int64, let replica = r[3].int64, let counter = r[4].int64, let size = r[5].int64,
                      let log = logs[(r[1].bytes ?? []) + (r[2].bytes ?? [])] else {
                    throw LnoteError(.corrupt, "malformed operation row in the relay store", path: path)
                }
                let id = OpID(replica: ReplicaID(UInt64(bitPattern: replica)), counter: UInt64(counter))
                if !pushed.contains(LoggedOpID(log: log, id: id)) {
                    candidates.append(Candidate(seq: seq, log: log, size: Int(size)))
                }
                return true
            }
        } else {
            let select = try tx.prepare("""
                SELECT seq, counter, length(frame) FROM ops
                WHERE nb = ?1 AND document = ?2 AND page = ?3 AND replica = ?4 AND counter > ?5
                """)
            for h in heads {
                let known = theirs[h.log]?[ReplicaID(UInt64(bitPattern: h.replica))] ?? 0
                guard h.top > known else { continue }
                // The rows at once (one round trip), not through a cursor (three): a head's rows
                // past what the client holds are few, and only their sizes are read here.
                for r in try select.rows([.integer(nb), .blob(h.document), .blob(h.page), .integer(h.replica),
                                          .integer(Int64(clamping: known))]) {
                    guard let seq = r[0].int64, let counter = r[1].int64, let size = r[2].int64 else {
                        throw LnoteError(.corrupt, "malformed operation row in the relay store", path: path)
                    }
                    let id = OpID(replica: ReplicaID(UInt64(bitPattern: h.replica)), counter: UInt64(counter))
                    if !pushed.contains(LoggedOpID(log: h.log, id: id)) {
                        candidates.append(Candidate(seq: seq, log: h.log, size: Int(size)))
                    }
                }
            }
        }
        candidates.sort { $0.seq < $1.seq }

        var acc = PullAccumulator(limit: pullLimit - clocksWriter.count - reserved, path: path)
        // Frames are read by runs of close sequences, not one statement per operation (on
        // PostgreSQL each statement is a round trip: a first pull of 7,500 operations spent
        // most of its time there). A run is the next candidates while they lie at most
        // `Self.runGap` apart, up to `Self.runCount` of them and `Self.runBytes` of frames; the
        // rows of the range that are not candidates (operations the client holds) are skipped.
        let range = try tx.prepare("SELECT seq, frame FROM ops WHERE nb = ?1 AND seq >= ?2 AND seq <= ?3 ORDER BY seq")
        var fetched: [Int64: [UInt8]] = [:]
        for (k, c) in candidates.enumerated() {
            guard acc.fits(c.log, size: c.size) else { break }
            if fetched[c.seq] == nil {
                var end = k, bytes = c.size
                while end + 1 < candidates.count, end - k + 1 < Self.runCount, bytes < Self.runBytes,
                      candidates[end + 1].seq - candidates[end].seq <= Self.runGap {
                    end += 1
                    bytes += candidates[end].size
                }
                let wanted = Set(candidates[k...end].map(\.seq))
                fetched.removeAll(keepingCapacity: true)
                try range.forEach([.integer(nb), .integer(c.seq), .integer(candidates[end].seq)]) { r in
                    if let seq = r[0].int64, wanted.contains(seq), let frame = r[1].bytes { fetched[seq] = frame }
                    return true
                }
            }
            guard let bytes = fetched.removeValue(forKey: c.seq) else {
                throw LnoteError(.corrupt, "operation \(c.seq) vanished during a read", path: path)
            }
            try acc.add(c.log, bytes, seq: c.seq)
        }
        return (acc.batches, clocks, acc.truncated ? UInt64(acc.lastSeq) : cursor)
    }

    /// How `pullNotCovered` reads frames: runs of at most this many candidates, this many
    /// bytes of frames, with at most this gap between two sequences.
    static let runCount = 512
    static let runBytes = 4 << 20
    static let runGap: Int64 = 64

    /// The steady-state answer: operations stored after `since`, in sequence order.
    func pullSince(nb: Int64, since: UInt64, skipping pushed: Set<LoggedOpID>,
                   cursor: UInt64, reserved: Int = 0, _ tx: any RelayTransaction) throws -> (pull: [LogBatch], cursor: UInt64) {
        let q = try tx.prepare("""
            SELECT seq, document, page, replica, counter, frame FROM ops
            WHERE nb = ?1 AND seq > ?2 ORDER BY seq
            """)
        var acc = PullAccumulator(limit: pullLimit - reserved, path: path)
        var logs: [[UInt8]: LogRef] = [:]
        try q.forEach([.integer(nb), .integer(Int64(clamping: since))]) { r in
            guard let seq = r[0].int64, let replica = r[3].int64, let counter = r[4].int64 else {
                throw LnoteError(.corrupt, "malformed operation row in the relay store", path: path)
            }
            let d = r[1], p = r[2]
            let key = (d.bytes ?? []) + (p.bytes ?? [])
            let log: LogRef
            if let l = logs[key] { log = l } else {
                log = try Self.logRef(document: d, page: p, path: path)
                logs[key] = log
            }
            let id = OpID(replica: ReplicaID(UInt64(bitPattern: replica)), counter: UInt64(counter))
            if pushed.contains(LoggedOpID(log: log, id: id)) {
                acc.skip(seq: seq)
                return true
            }
            guard let bytes = r[5].bytes else {
                throw LnoteError(.corrupt, "operation \(seq) has no frame", path: path)
            }
            guard acc.fits(log, size: bytes.count) else { return false }
            try acc.add(log, bytes, seq: seq)
            return true
        }
        return (acc.batches, acc.truncated ? UInt64(acc.lastSeq) : cursor)
    }
}

/// Gathers pulled frames per log under a byte budget.
struct PullAccumulator {
    /// LogRef (at most 33 bytes), frame count and byte length varints.
    static let perLogOverhead = 33 + 10 + 10
    let limit: Int
    let path: String
    private var frames: [LogRef: [Frame]] = [:]
    private var used = 0
    private var count = 0
    /// The sequence of the last operation included or skipped.
    private(set) var lastSeq: Int64 = 0
    /// Set when an operation did not fit.
    private(set) var truncated = false

    init(limit: Int, path: String) {
        self.limit = limit
        self.path = path
    }

    /// Whether an operation of `size` bytes in `log` fits; the first one always does (so
    /// every answer makes progress). Marks the pull truncated when it does not.
    mutating func fits(_ log: LogRef, size: Int) -> Bool {
        let cost = size + (frames[log] == nil ? Self.perLogOverhead : 0)
        if count > 0 && used + cost > limit {
            truncated = true
            return false
        }
        return true
    }

    mutating func add(_ log: LogRef, _ bytes: [UInt8], seq: Int64) throws {
        // Frames were CRC-checked on receipt; checking again catches damage at rest.
        let decoded: [Frame]
        do { decoded = try Frame.decodeAll(bytes, path: path) } catch var e as LnoteError {
            e.message = "stored operation \(seq): " + e.message
            throw e
        }
        guard decoded.count == 1 else {
            throw LnoteError(.corrupt, "stored operation \(seq) holds \(decoded.count) frames", path: path)
        }
        used += bytes.count + (frames[log] == nil ? Self.perLogOverhead : 0)
        frames[log, default: []].append(decoded[0])
        count += 1
        lastSeq = seq
    }

    mutating func skip(seq: Int64) { lastSeq = seq }

    /// The batches, logs sorted (a document's log before its pages'), frames in sequence order.
    var batches: [LogBatch] { frames.keys.sorted().map { LogBatch(log: $0, frames: frames[$0]!) } }
}

extension SyncCodec {
    /// `Clocks` as on the wire, to measure an answer's size.
    static func encodeClocksForSize(_ clocks: [LogClock], into w: inout ByteWriter) {
        w.varint(UInt64(clocks.count))
        for c in clocks {
            w.append(c.log.document.uuid.bytes)
            if let p = c.log.page { w.u8(1); w.append(p.uuid.bytes) } else { w.u8(0) }
            ElementCodec.encode(c.clock, into: &w)
        }
    }
}

extension RelayStore {
    /// Most ids one lookup names, and most rows (or frame bytes) one insert carries.
    static let idsPerLookup = 500
    /// Counters at most this far apart are read in one range (the rows between are dropped).
    static let gapInRun: UInt64 = 8
    static let rowsPerInsert = 64
    static let bytesPerInsert = 4 << 20

    /// The sequence and content hash the relay holds under each of `ids` that it holds: one
    /// query per log and author for up to `idsPerLookup` counters, not one per operation.
    func heldRows(_ ids: [LoggedOpID], nb: Int64, _ tx: any RelayTransaction) throws -> [LoggedOpID: (seq: Int64, hash: [UInt8])] {
        struct Chain: Hashable {
            var log: LogRef
            var replica: ReplicaID
        }
        var chains: [Chain: Set<UInt64>] = [:]
        for id in ids { chains[Chain(log: id.log, replica: id.id.replica), default: []].insert(id.id.counter) }
        var out: [LoggedOpID: (seq: Int64, hash: [UInt8])] = [:]
        for (chain, counters) in chains {
            let sorted = counters.sorted()
            var start = 0
            while start < sorted.count {
                // A run of counters with small gaps, read as one range of the key (a push of a
                // replica's new operations is one run). A list of counters (`IN (…)`) was
                // planned badly by PostgreSQL: 10 to 25 ms a query whatever its length.
                var end = start + 1
                while end < sorted.count, end - start < Self.idsPerLookup, sorted[end] - sorted[end - 1] <= Self.gapInRun { end += 1 }
                let (first, last) = (sorted[start], sorted[end - 1])
                start = end
                let rows = try tx.query("""
                    SELECT counter, seq, hash FROM ops
                    WHERE nb = ?1 AND document = ?2 AND page = ?3 AND replica = ?4 AND counter >= ?5 AND counter <= ?6
                    """, [.integer(nb), .blob(chain.log.document.uuid.bytes), Self.pageColumn(chain.log),
                          .integer(Int64(bitPattern: chain.replica.rawValue)), .integer(Int64(first)), .integer(Int64(last))])
                for r in rows {
                    guard let counter = r[0].int64, let seq = r[1].int64, counters.contains(UInt64(counter)) else { continue }
                    out[LoggedOpID(log: chain.log, id: OpID(replica: chain.replica, counter: UInt64(counter)))] = (seq, r[2].bytes ?? [])
                }
            }
        }
        return out
    }

    /// Inserts `rows` (an operation and the sequence allocated to it) with `ON CONFLICT DO
    /// NOTHING`, several to a statement. Returns the sequences of those not stored (another
    /// process stored their id first), each with the hash held under its id (nil: no row holds
    /// it, which the UNIQUE key cannot give).
    func insertNew<X>(_ rows: [(x: X, seq: Int64)], nb: Int64, key: (X) -> [RelayValue], _ tx: any RelayTransaction) throws -> [Int64: [UInt8]?]
        where X: RelayInsertable {
        var lost: [Int64: [UInt8]?] = [:]
        var start = 0
        while start < rows.count {
            var end = start
            var bytes = 0
            while end < rows.count, end - start < Self.rowsPerInsert, end == start || bytes < Self.bytesPerInsert {
                bytes += rows[end].x.frameSize
                end += 1
            }
            let part = rows[start ..< end]
            start = end
            var params: [RelayValue] = []
            params.reserveCapacity(part.count * 8)
            var values: [String] = []
            for (x, seq) in part {
                let n = params.count
                values.append("(" + (1...8).map { "?\(n + $0)" }.joined(separator: ", ") + ")")
                params += [.integer(seq)] + key(x) + [.blob(x.frameBytes), .blob(x.hash)]
            }
            let stored = try tx.execute("""
                INSERT INTO ops (seq, nb, document, page, replica, counter, frame, hash)
                VALUES \(values.joined(separator: ", ")) ON CONFLICT DO NOTHING
                """, params)
            guard stored < part.count else { continue }
            // Some were not stored: which, by the sequence each id holds now.
            let held = try heldRows(part.map { $0.x.loggedID }, nb: nb, tx)
            for (x, seq) in part {
                if let h = held[x.loggedID], h.seq == seq { continue }
                lost.updateValue(held[x.loggedID]?.hash, forKey: seq)
            }
        }
        return lost
    }
}

/// What `insertNew` needs of a pushed operation.
protocol RelayInsertable {
    var loggedID: LoggedOpID { get }
    /// The frame's bytes (made when inserted).
    var frameBytes: [UInt8] { get }
    var frameSize: Int { get }
    var hash: [UInt8] { get }
}
