import Foundation
import LnoteModel
import LnoteReplication
import LnoteStore

/// What one sync did.
public struct SyncReport: Sendable, Equatable {
    /// Operations sent, and how many of them the remote did not have.
    public var opsSent = 0
    public var opsAccepted = 0
    /// Operations received, and how many of them were new here (appended to a log: new, or
    /// lost from it and sent again, `healed`).
    public var opsReceived = 0
    public var opsApplied = 0
    public var assetsSent = 0
    public var assetsReceived = 0
    /// Protocol exchanges (sync requests; asset transfers are counted apart).
    public var roundTrips = 0
    public var assetRequests = 0
    public var bytesSent = 0
    public var bytesReceived = 0
    /// Page checkpoints installed by a newcomer, refused as invalid or not covered by the
    /// remote's clock ([SYNC-59]), and uploaded (§5).
    public var checkpointsInstalled = 0
    public var checkpointsRejected = 0
    public var checkpointsSent = 0
    /// Checkpoints this sync offered that the remote refused (`bad_checkpoint`, [SYNC-59]):
    /// the log and the remote's reason. The sync goes on without them.
    public var checkpointsRefused: [String] = []
    /// Operations the pages installed from checkpoints hold: the sum of their checkpoints'
    /// clocks, less those of pages given up and rebuilt from operations (which count in
    /// `opsReceived`). With `opsReceived`, what the newcomer got of the notebook.
    public var opsFromCheckpoints = 0
    /// Documents that received something: operations stored, or pages installed from
    /// checkpoints.
    public var documentsReceived = 0
    /// Installed pages whose state was not what their checkpoint and the operations received
    /// give, rebuilt from operations ([SYNC-59]).
    public var checkpointsRebuilt: [LogRef] = []
    /// Why a page of `checkpointsRebuilt` could not get its history (the remote cannot serve it).
    public var checkpointFailures: [String] = []
    /// Operations a log had lost (its state kept them) that the remote sent again ([PKG-54]).
    public var opsHealed = 0
    /// Forks found ([SYNC-51]): one operation id with two contents.
    public var forks: [SyncFork] = []
    /// Repairs of forks of this replica's own operations ([SYNC-54]).
    public var repairs: [SyncRepair] = []
    /// Received operations this replica refused, kept in the quarantine ([SYNC-60]).
    public var quarantined: [QuarantineEntry] = []
    /// Replica ids minted during the sync ([SYNC-54], [SYNC-55]).
    public var replicaChanges: [ReplicaChange] = []
    /// Operations the logs still lack after the sync: lost to damage, and not sent by the
    /// remote ([PKG-51]).
    public var missingOperations: [MissingInLog] = []
    /// Replicas whose operations this push left out because another device owns them
    /// ([SYNC-57]): the remote gets them from their author.
    public var withheldReplicas: [ReplicaID] = []
    /// This folder's former replica ids (replica.json's `previous`), as the caller found them:
    /// a fork of one of them is reported with how to declare it this folder's own
    /// (`Notebook.adoptFormerReplica`). Filled by the command line, not by the session.
    public var formerReplicas: [ReplicaID] = []
    /// Operations the remote lacks that a pull-only sync (`SyncSession.sendsNothing`) did not send.
    public var notSent = 0
    public init() {}

    /// True when a person should look: a fork of another replica, a repair whose operations
    /// were not all made again, an operation quarantined, or a page whose history could not
    /// be fetched ([SYNC-56]). `lnote sync` exits 3.
    public var needsAttention: Bool {
        forks.contains { !$0.own } || repairs.contains { $0.pending > 0 || $0.failure != nil }
            || quarantined.contains(where: \.needsAttention) || !checkpointFailures.isEmpty
    }
}

/// One fork found by a sync ([SYNC-51]).
public struct SyncFork: Sendable, Hashable, CustomStringConvertible {
    public enum Source: String, Sendable {
        /// The remote refused a pushed operation (its `forks`).
        case push
        /// The remote sent an operation whose id this replica holds.
        case pull
        /// Chain digests behind equal clocks differed and content hashes told which
        /// operation ([SYNC-52], [SYNC-53]).
        case digests
    }
    public var log: LogRef
    public var id: OpID
    /// This replica's content hash of the operation (32 bytes, or the first 16).
    public var localHash: [UInt8]?
    /// The remote's (32 bytes, or the first 16).
    public var remoteHash: [UInt8]?
    /// True when the forked replica is this folder's own (now or before a mint of this
    /// sync): it is repaired ([SYNC-54]). False: both sides keep theirs.
    public var own: Bool
    public var source: Source

    public var description: String {
        "fork of \(id) in log \(log): here \(localHash.map { hexString($0.prefix(8)) } ?? "?"), "
            + "remote \(remoteHash.map { hexString($0.prefix(8)) } ?? "?") (\(own ? "this replica's own: repaired" : "another replica's: both kept"), found by \(source.rawValue))"
    }
}

/// One repair of a fork of this replica's own operations in one log ([SYNC-54]).
public struct SyncRepair: Sendable, Hashable, CustomStringConvertible {
    public var log: LogRef
    /// The forked replica id.
    public var replica: ReplicaID
    /// The id the operations were made again under (this folder's id after the repair).
    public var newReplica: ReplicaID
    /// Operations moved out of the log into the quarantine, in log order.
    public var removed: [OpID]
    /// Of those, the ones whose content the remote does not hold: to be made again.
    public var toRemake: Int
    /// Made again under `newReplica`.
    public var remade = 0
    /// Left out: nothing they act on is left.
    public var skipped = 0
    /// Not made again (no re-authoring step, or it failed): still in the quarantine.
    public var pending = 0
    public var failure: String?

    public var description: String {
        var s = "repaired \(replica) in log \(log): \(removed.count) operation\(removed.count == 1 ? "" : "s") moved to the quarantine"
        s += ", \(remade) made again as \(newReplica)"
        if skipped > 0 { s += ", \(skipped) with nothing left to act on" }
        if pending > 0 { s += ", \(pending) waiting in the quarantine" }
        if let failure { s += " (re-authoring failed: \(failure))" }
        return s
    }
}

/// What a client remembers about one remote between syncs.
struct RemoteState: Equatable {
    var epoch: UInt64 = 0
    var cursor: UInt64 = 0
    /// Per log, operations the remote is known to hold (every counter up to the entry).
    var known: [LogRef: VectorClock] = [:]

    static let magic: [UInt8] = Array("LNRS".utf8)

    func encoded() -> [UInt8] {
        var w = ByteWriter()
        w.append(Self.magic)
        w.u8(1)
        w.u64(epoch)
        w.u64(cursor)
        SyncCodec.encode(known.keys.sorted().map { LogClock(log: $0, clock: known[$0]!) }, into: &w)
        w.u32(CRC32C.checksum(w.bytes))
        return w.bytes
    }

    /// Decodes saved state; anything damaged yields a fresh state (the next sync then
    /// compares clocks, which is always correct).
    static func decode(_ bytes: [UInt8]) -> RemoteState {
        guard bytes.count > 9 else { return RemoteState() }
        let body = Array(bytes[..<(bytes.count - 4)])
        var tail = ByteReader(Array(bytes[(bytes.count - 4)...]))
        guard let crc = try? tail.u32(), crc == CRC32C.checksum(body) else { return RemoteState() }
        var r = ByteReader(body)
        guard (try? r.bytes(4)) == magic, (try? r.u8()) == 1,
              let epoch = try? r.u64(), let cursor = try? r.u64(),
              let clocks = try? SyncCodec.decodeClocks(&r), r.isAtEnd else { return RemoteState() }
        return RemoteState(epoch: epoch, cursor: cursor,
                           known: Dictionary(clocks.map { ($0.log, $0.clock) }, uniquingKeysWith: { $0.merged($1) }))
    }

    /// Records that the remote holds these operations, keeping each entry contiguous: an
    /// entry only advances over counters the remote is known to hold.
    mutating func learn(_ ids: [OpID], in log: LogRef) {
        guard !ids.isEmpty else { return }
        var clock = known[log] ?? VectorClock()
        var byReplica: [ReplicaID: Set<UInt64>] = [:]
        for id in ids { byReplica[id.replica, default: []].insert(id.counter) }
        for (replica, counters) in byReplica {
            var c = clock[replica]
            while counters.contains(c + 1) { c += 1 }
            clock[replica] = c
        }
        known[log] = clock
    }
}

/// Runs the client side of the sync protocol between a local notebook and a remote.
///
/// A first contact (or a remote that restarted) exchanges clocks: the client sends `have`
/// (and its chain digests, [SYNC-52]), receives what it lacks and the remote's clocks, then
/// pushes what the remote lacks: two exchanges. Afterwards one exchange does both ways: the
/// client pushes what the remote is not known to hold and receives the changes since its
/// cursor. Assets travel before the operations that reference them, in both directions.
/// Nothing is remembered until an exchange has succeeded, so an interrupted sync is completed
/// by the next one.
///
/// Trust (§6): digests that differ behind equal counters are resolved into operations by
/// asking content hashes before anything is pushed ([SYNC-53]); forks of this replica's own
/// operations are repaired ([SYNC-54]: a new replica id, its versions moved to the
/// quarantine, the remote's received, its own made again by `reauthor`); a remote that holds
/// more of this replica's operations than this folder makes it mint a new id first
/// ([SYNC-55]); pulled operations are checked one by one ([SYNC-60]); a newcomer's
/// checkpoints are installed only when the remote's clocks cover them, and checked after
/// the sync ([SYNC-59]).
public struct SyncSession: Sendable {
    public let notebook: any SyncableNotebook
    public let remote: any SyncRemote
    /// A page log gets a new checkpoint uploaded once its clock covers this many more
    /// operations than the last one this client uploaded (§5); 0: never upload.
    public var checkpointInterval = 256
    /// How the removed operations of a fork repair are made again under the new replica id
    /// ([SYNC-54]). nil: they stay in the quarantine, and the report says so
    /// (`SyncRepair.pending`, `needsAttention`).
    public var reauthor: ReauthorHook? = Notebook.defaultReauthor
    /// With nothing to push and no clock comparison due, whether the sync still makes an
    /// exchange to pull what changed at the remote. A watcher whose long poll brings the
    /// remote's changes ([SYNC-75]) sets it to false for the rounds a local change starts:
    /// a round with nothing to push then touches only local files.
    public var pullWithoutPush = true
    /// Pull only: nothing is sent to the remote (no operations, assets or checkpoints), and
    /// `SyncReport.notSent` counts the operations it lacks. For a remote that may not be
    /// written (another folder on read-only media).
    public var sendsNothing = false

    public init(notebook: any SyncableNotebook, remote: any SyncRemote) {
        self.notebook = notebook
        self.remote = remote
    }

    public func run(progress: (@Sendable (SyncProgress) -> Void)? = nil) async throws -> SyncReport {
        var report = SyncReport()
        var state = RemoteState.decode(try await notebook.loadRemoteState(key: remote.key) ?? [])
        if !remote.cursorsOutliveProcess {
            // What the remote holds is still known; its cursor is not: compare clocks at once.
            state.epoch = 0
            state.cursor = 0
        }
        let start = remote.traffic
        let tell = Tell(progress.map { LiveProgress(remote: remote, start: start, handler: $0) })
        if let live = tell.live { remote.observeTransfers { live.transfer($0) } }
        defer { if tell.live != nil { remote.observeTransfers(nil) } }
        let firstContact = state.epoch == 0
        var run = SyncRun()
        if firstContact { run.candidates = try await checkpointCandidates(&report, tell) }
        // [SYNC-54] A fork of another replica found with this remote is reported until its
        // author repairs it: while one is pending, every sync compares clocks and digests (as
        // a folder reached directly always does), whatever the cursor.
        let forksKey = remote.key + "#forks"
        let forksPending = !(try await notebook.loadRemoteState(key: forksKey) ?? []).isEmpty
        run.needsComparison = state.epoch == 0 || forksPending
        // [SYNC-54] Ids replaced for a fork repair that a stopped sync did not finish: still
        // this folder's own, and the clocks are compared to find their forks again.
        let unfinished = try await notebook.unfinishedForkRepairs()
        if !unfinished.isEmpty {
            run.sessionOwn.formUnion(unfinished)
            run.needsComparison = true
            // What the stopped sync took out of the logs and did not make again yet: made
            // again in this one, once the remote's versions are in (the comparison first).
            for removal in try await notebook.pendingRemakes(of: Set(unfinished)) {
                report.repairs.append(SyncRepair(log: LogRef(document: removal.document, page: removal.page), replica: removal.replica,
                                                 newReplica: notebook.replicaID, removed: removal.removed.map(\.id),
                                                 toRemake: removal.remake.count))
                run.remakes.append(removal)
            }
        }
        try await settle(&state, &run, &report, tell)
        if try await checkInstalledPages(&run, &report) {
            // [SYNC-59] Pages rebuilt from operations: their history comes by a clock comparison.
            run.needsComparison = true
            do {
                try await settle(&state, &run, &report, tell)
            } catch let e as LnoteError where e.code == .invalidState {
                report.checkpointFailures.append(e.description)
            }
        }
        // Pending while this sync found one; cleared only by a comparison that found none.
        let forkedNow = report.forks.contains { !$0.own }
        if forkedNow != forksPending, forkedNow || run.compared {
            try await notebook.saveRemoteState(forkedNow ? [1] : [], key: forksKey)
            // Its author repaired it: the quarantine says so, and verify counts it no more.
            if !forkedNow { _ = try await notebook.resolveForks(remote: remote.key) }
        }
        // Refused operations that nothing is left to do about: a valid one is held under the
        // id of damaged bytes, or the operation came intact since, from this remote or another
        // ([PKG-48]). Best effort: the sync itself is done, and the next one looks again.
        let nowHeld = Dictionary(((try? await notebook.resolveRefusalsNowHeld()) ?? []).map { ($0.fileName, $0.resolved) },
                                 uniquingKeysWith: { a, _ in a })
        for i in report.quarantined.indices {
            if let r = nowHeld[report.quarantined[i].fileName] { report.quarantined[i].resolved = r }
        }
        // Every fork found was handled (its operations made again, or left in the quarantine
        // for want of a re-authoring step): the repairs of this folder's former ids are done.
        if !run.sessionOwn.isEmpty { try await notebook.finishForkRepairs(run.sessionOwn) }
        if !sendsNothing { try await uploadCheckpoints(state, firstContact: firstContact, &report) }
        report.missingOperations = try await notebook.missingOperations()
        report.documentsReceived = run.documentsReceived.count
        let t = remote.traffic
        report.bytesSent = t.sent - start.sent
        report.bytesReceived = t.received - start.received
        tell(.done, report)
        return report
    }

    /// Most exchanges one `settle` makes: a comparison, hashes, a repair's comparison, a push,
    /// and room for a resync and a second round of each.
    static let maxExchanges = 12

    /// Exchanges until nothing is left to compare, to find out, to repair or to push.
    func settle(_ state: inout RemoteState, _ run: inout SyncRun, _ report: inout SyncReport, _ tell: Tell) async throws {
        var exchanges = 0
        var pushed = false
        func count() throws {
            exchanges += 1
            guard exchanges <= SyncSession.maxExchanges else {
                throw LnoteError(.protocolMismatch, "sync with \(remote.key) did not settle after \(SyncSession.maxExchanges) exchanges")
            }
        }
        while true {
            var compared = false
            if run.needsComparison {
                run.needsComparison = false
                try count()
                try await compare(&state, &run, &report, tell)
                compared = true
                run.compared = true
                if run.needsComparison { continue }
            }
            if !run.askRanges.isEmpty {
                try count()
                try await askHashes(&state, &run, &report, tell)
                if run.needsComparison { continue }
            }
            if !run.forks.isEmpty {
                try await handleForks(&run, &report)
                if run.needsComparison { continue }
            }
            if !run.remakes.isEmpty { try await remake(&run, &report) }
            tell(.comparing, report)
            let push = try await pendingPush(state).compactMap { b -> LogBatch? in
                // [SYNC-57] Operations of replicas another device owns, refused once: they
                // reach the remote from their author.
                guard !run.withheld.isEmpty else { return b }
                let frames = b.frames.filter { OperationCodec.id(of: $0).map { !run.withheld.contains($0.replica) } ?? true }
                return frames.isEmpty ? nil : LogBatch(log: b.log, frames: frames)
            }
            if sendsNothing {
                report.notSent = push.reduce(0) { $0 + $1.frames.count }
                return
            }
            // Right after a clock comparison (or a steady exchange) there is nothing new to
            // pull; with nothing to push either, another exchange would carry nothing.
            if (compared || pushed || !pullWithoutPush) && push.isEmpty { return }
            try count()
            do {
                try await pushExchange(push, &state, &run, &report, tell)
            } catch let refusal as OwnerRefusal {
                // Another device owns that replica: push without its operations, or give up
                // when it is this folder's own id (another device writes under it).
                guard refusal.replica != notebook.replicaID, run.withheld.insert(refusal.replica).inserted else {
                    throw refusal.error
                }
                report.withheldReplicas.append(refusal.replica)
                continue
            }
            pushed = true
            if run.needsComparison || !run.forks.isEmpty { continue }
            return
        }
    }

    /// A clock comparison ([SYNC-5]): `have` and digests, no push. Installs the checkpoints
    /// the remote's clocks cover ([SYNC-59]), mints a new id when the remote holds more of
    /// this replica's operations than this folder ([SYNC-55]), stores the pull, and compares
    /// digests ([SYNC-52]).
    private func compare(_ state: inout RemoteState, _ run: inout SyncRun, _ report: inout SyncReport, _ tell: Tell) async throws {
        tell(.comparing, report)
        let (clocks, digests) = try await notebook.logClocksAndDigests()
        var have = clocks
        for (doc, states) in run.candidates ?? [:] {
            for s in states { have.append(LogClock(log: LogRef(document: doc, page: s.page), clock: s.clock)) }
        }
        let answer = try await exchange(SyncRequest(replica: notebook.replicaID, epoch: 0, cursor: 0, have: have,
                                                    digests: digests), &report, tell)
        let theirs = Dictionary((answer.clocks ?? []).map { ($0.log, $0.clock) }, uniquingKeysWith: { $0.merged($1) })
        if run.candidates != nil { try await installCovered(theirs, &run, &report, tell) }
        try await checkRestoredInPlace(have: clocks, theirs: theirs, &run, &report)
        let touched = try await absorb(answer, into: &state, &run, &report, tell)
        state.known = theirs
        state.epoch = answer.epoch
        state.cursor = answer.cursor
        try await notebook.saveRemoteState(state.encoded(), key: remote.key)
        if let mine = digests, let remoteDigests = answer.digests {
            try await compareDigests(mine, remoteDigests, touched: touched, &run)
        }
        // [SYNC-57] The devices behind the replica ids, on a clock comparison only (a steady
        // sync stays one exchange); a cache, so a failure here fails nothing.
        if var names = try? await remote.devices() {
            // [PKG-65] A remote names replicas this folder has no name for, never renames one:
            // this folder names itself (`lnote init --name`), and a name once learnt stays.
            let known = (try? await notebook.knownDeviceNames()) ?? [:]
            names = names.filter { known[$0.key] == nil && $0.key != notebook.replicaID }
            if names.count > Self.maxLearntNames { names = Dictionary(uniqueKeysWithValues: names.sorted { $0.key < $1.key }.prefix(Self.maxLearntNames).map { ($0.key, $0.value) }) }
            if !names.isEmpty, known.count < Self.maxKnownNames { try? await notebook.learnDeviceNames(names) }
        }
    }

    /// At most this many names learnt from one comparison, and none once the folder knows
    /// this many: a remote cannot grow `devices.json` without bound.
    static let maxLearntNames = 1_024
    static let maxKnownNames = 4_096

    /// A steady-state exchange: the push, and the changes since the cursor.
    private func pushExchange(_ push: [LogBatch], _ state: inout RemoteState, _ run: inout SyncRun,
                              _ report: inout SyncReport, _ tell: Tell) async throws {
        try await uploadAssets(push, &report, tell)
        let request = SyncRequest(replica: notebook.replicaID, epoch: state.epoch, cursor: state.cursor, push: push)
        let answer = try await exchange(request, &report, tell)
        report.opsSent += push.reduce(0) { $0 + $1.frames.count }
        report.opsAccepted += Int(answer.accepted)
        var pushedHashes: [LogRef: [OpID: [UInt8]]] = [:]
        for batch in push {
            // One operation decoded at a time (a stroke's points take far more room decoded
            // than in its frame).
            var ids: [OpID] = []
            for i in batch.frames.indices {
                let op = try batch.op(at: i)
                ids.append(op.id)
                if !answer.forks.isEmpty { pushedHashes[batch.log, default: [:]][op.id] = ContentHash.of(batch.frames[i], decoded: op) }
            }
            state.learn(ids, in: batch.log)
        }
        for f in answer.forks {
            // [SYNC-51] The remote holds another operation under a pushed id: it stored the rest.
            run.forks.append(FoundFork(log: f.log, id: f.id, local: pushedHashes[f.log]?[f.id], remote: f.held, source: .push))
        }
        try await finishExchange(answer, &state, &run, &report, tell)
    }

    /// The end of a steady-state exchange: on `resync` (the remote lost this client's cursor;
    /// it kept any push) the cursor is forgotten and clocks are compared again, at most twice
    /// in a row; otherwise the pull is stored and the cursor saved.
    func finishExchange(_ answer: SyncResponse, _ state: inout RemoteState, _ run: inout SyncRun,
                        _ report: inout SyncReport, _ tell: Tell) async throws {
        if answer.resync {
            state.epoch = 0
            state.cursor = 0
            try await notebook.saveRemoteState(state.encoded(), key: remote.key)
            run.resyncs += 1
            guard run.resyncs < 3 else { throw LnoteError(.protocolMismatch, "remote keeps asking to resynchronize") }
            run.needsComparison = true
            return
        }
        _ = try await absorb(answer, into: &state, &run, &report, tell)
        state.cursor = answer.cursor
        try await notebook.saveRemoteState(state.encoded(), key: remote.key)
    }

    func exchange(_ request: SyncRequest, _ report: inout SyncReport, _ tell: Tell) async throws -> SyncResponse {
        tell(.exchanging, report)
        report.roundTrips += 1
        return try await remote.sync(request)
    }

    /// Operations in local logs that the remote is not known to hold.
    private func pendingPush(_ state: RemoteState) async throws -> [LogBatch] {
        var wanted: [(log: LogRef, clock: VectorClock)] = []
        for lc in try await notebook.logClocks() {
            let known = state.known[lc.log] ?? VectorClock()
            if !known.covers(lc.clock) { wanted.append((lc.log, known)) }
        }
        // Asked together: the notebook reads the logs of each document in one opening.
        return zip(wanted, try await notebook.frames(in: wanted)).compactMap { w, frames in
            frames.isEmpty ? nil : LogBatch(log: w.log, frames: frames)
        }
    }

    /// Sends the assets referenced by pushed operations that the remote lacks.
    private func uploadAssets(_ push: [LogBatch], _ report: inout SyncReport, _ tell: Tell) async throws {
        var wanted: [DocumentID: Set<AssetID>] = [:]
        for batch in push where batch.log.page != nil {
            for i in batch.frames.indices {
                let assets = try batch.op(at: i).referencedAssets
                if !assets.isEmpty { wanted[batch.log.document, default: []].formUnion(assets) }
            }
        }
        guard !wanted.isEmpty else { return }
        tell(.uploadingAssets, report)
        for (doc, ids) in wanted.sorted(by: { $0.key < $1.key }) {
            report.assetRequests += 1
            for id in try await remote.missingAssets(ids.sorted(), document: doc) {
                let bytes = try await notebook.readAsset(id, document: doc)
                report.assetRequests += 1
                try await remote.putAsset(bytes, id: id, document: doc)
                report.assetsSent += 1
            }
        }
    }

    /// Stores a pull ([SYNC-60]): each operation is decoded and checked on its own; one that
    /// does not decode, belongs to the other kind of log, or names an asset the remote cannot
    /// give (or gives with other bytes) is kept in the quarantine with the remote, the log and
    /// the reason, and the rest goes on. The assets the others reference are fetched first,
    /// then the notebook appends them durably and applies them; forks it finds are noted.
    ///
    /// - Returns: the logs that received operations.
    func absorb(_ answer: SyncResponse, into state: inout RemoteState, _ run: inout SyncRun,
                        _ report: inout SyncReport, _ tell: Tell) async throws -> Set<LogRef> {
        guard !answer.pull.isEmpty else { return [] }
        var checked: [CheckedLog] = []
        for batch in answer.pull {
            var ops: [Op] = []
            var ids: [OpID] = []
            for (i, f) in batch.frames.enumerated() {
                let id = OperationCodec.id(of: f)
                if let id { ids.append(id) }
                do {
                    let op = try OperationCodec.decode(f, path: "sync response from \(remote.key)")
                    guard op.body.isPageOperation == (batch.log.page != nil) else {
                        throw LnoteError(.corrupt, "\(op.body.name) \(op.id) does not belong in log \(batch.log)")
                    }
                    ops.append(op)
                } catch let e as LnoteError {
                    try await quarantine(.invalid, frame: f, id: id, log: batch.log,
                                         reason: "operation \(i) of the pull for log \(batch.log): \(e.description)", &report)
                }
            }
            // The remote holds them all, refused or not.
            state.learn(ids, in: batch.log)
            checked.append(CheckedLog(log: batch.log, ops: ops))
        }
        report.opsReceived += answer.pull.reduce(0) { $0 + $1.frames.count }
        tell(.downloadingAssets, report)
        for i in checked.indices where checked[i].log.page != nil {
            let doc = checked[i].log.document
            var refused: [AssetID: String] = [:]
            for asset in Set(checked[i].ops.flatMap(\.referencedAssets)).sorted()
            where !(try await notebook.hasAsset(asset, document: doc)) {
                report.assetRequests += 1
                do {
                    let bytes = try await remote.getAsset(asset, document: doc)
                    guard AssetID.of(bytes) == asset else {
                        refused[asset] = "asset \(asset) from \(remote.key) does not match its hash"
                        continue
                    }
                    _ = try await notebook.writeAsset(bytes, document: doc)
                    report.assetsReceived += 1
                } catch let e as LnoteError where e.code == .notFound {
                    refused[asset] = "asset \(asset) is not held by \(remote.key): \(e.message)"
                } catch let e as LnoteError where e.code == .limitExceeded {
                    // [SYNC-60] An asset the remote cannot give within an answer's limit: the
                    // same every time, so its operations are quarantined and the rest goes on.
                    refused[asset] = "asset \(asset) from \(remote.key) is larger than an answer may be: \(e.message)"
                }
            }
            guard !refused.isEmpty else { continue }
            var kept: [Op] = []
            for op in checked[i].ops {
                if let why = op.referencedAssets.lazy.compactMap({ refused[$0] }).first {
                    try await quarantine(.invalid, frame: OperationCodec.frame(op), id: op.id, log: checked[i].log, reason: why, &report)
                } else {
                    kept.append(op)
                }
            }
            checked[i].ops = kept
        }
        let documents = Set(checked.lazy.filter { !$0.ops.isEmpty }.map(\.log.document))
        tell.documents(.applying, 0, of: documents.count, report)
        let counts = report
        let stored: (@Sendable (Int) -> Void)? = tell.live == nil ? nil : { @Sendable done in
            tell.documents(.applying, done, of: documents.count, counts)
        }
        let receipt = try await notebook.receive(checked: checked, remote: remote.key, recordForks: false, progress: stored)
        run.documentsReceived.formUnion(documents)
        run.createdHashes = [:]
        for l in checked where receipt.created.contains(l.log.document) {
            var byReplica: [ReplicaID: [UInt64: [UInt8]]] = [:]
            for op in l.ops where byReplica[op.id.replica]?[op.id.counter] == nil {
                byReplica[op.id.replica, default: [:]][op.id.counter] = Array(ContentHash.of(op).prefix(16))
            }
            run.createdHashes[l.log] = byReplica
        }
        report.opsApplied += receipt.appended
        report.opsHealed += receipt.healed
        report.quarantined += receipt.quarantined
        for (log, f) in receipt.forks {
            run.forks.append(FoundFork(log: log, id: f.id, local: f.held, remote: f.received,
                                       remoteOp: try? OperationCodec.decode(f.frame), remoteFrame: f.frame, source: .pull))
        }
        return Set(checked.filter { !$0.ops.isEmpty }.map(\.log))
    }

    /// Keeps a received operation out of the logs ([SYNC-60], [PKG-48]) and reports it.
    func quarantine(_ kind: QuarantineEntry.Kind, frame: Frame, id: OpID?, log: LogRef, reason: String,
                    _ report: inout SyncReport) async throws {
        let entry = QuarantineEntry(kind: kind, time: Int64((Date().timeIntervalSince1970 * 1000).rounded()), remote: remote.key,
                                    document: log.document, page: log.page, operation: id, reason: reason,
                                    frame: frame.encoded, hash: ContentHash.of(frame))
        try await notebook.quarantine(entry)
        report.quarantined.append(entry)
    }
}
