import LnoteModel
import LnoteReplication

/// Progress of a running sync, for a progress line or an app's indicator.
public struct SyncProgress: Sendable, Equatable {
    public enum Phase: String, Sendable { case comparing, uploadingAssets, exchanging, downloadingAssets, applying, done }
    public var phase: Phase
    public var opsSent: Int
    public var opsReceived: Int
    public var bytesSent: Int
    public var bytesReceived: Int
}

/// What one sync did.
public struct SyncReport: Sendable, Equatable {
    /// Operations sent, and how many of them the remote did not have.
    public var opsSent = 0
    public var opsAccepted = 0
    /// Operations received, and how many of them were new here.
    public var opsReceived = 0
    public var opsApplied = 0
    public var assetsSent = 0
    public var assetsReceived = 0
    /// Protocol exchanges (sync requests; asset transfers are counted apart).
    public var roundTrips = 0
    public var assetRequests = 0
    public var bytesSent = 0
    public var bytesReceived = 0
    /// Page checkpoints installed by a newcomer, refused as invalid, and uploaded (§5).
    public var checkpointsInstalled = 0
    public var checkpointsRejected = 0
    public var checkpointsSent = 0
    public init() {}
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
/// A first contact (or a remote that restarted) exchanges clocks: the client sends `have`,
/// receives what it lacks and the remote's clocks, then pushes what the remote lacks: two
/// exchanges. Afterwards one exchange does both ways: the client pushes what the remote is
/// not known to hold and receives the changes since its cursor. Assets travel before the
/// operations that reference them, in both directions. Nothing is remembered until an
/// exchange has succeeded, so an interrupted sync is completed by the next one.
public struct SyncSession: Sendable {
    public let notebook: any SyncableNotebook
    public let remote: any SyncRemote
    /// A page log gets a new checkpoint uploaded once its clock covers this many more
    /// operations than the last one this client uploaded (§5); 0: never upload.
    public var checkpointInterval = 256

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
        // Takes the report as an argument: reading `report` from here while a callee holds
        // it inout would be an exclusivity violation.
        let tell: (SyncProgress.Phase, SyncReport) -> Void = { [remote] phase, r in
            let t = remote.traffic
            progress?(SyncProgress(phase: phase, opsSent: r.opsSent, opsReceived: r.opsReceived,
                                   bytesSent: t.sent - start.sent, bytesReceived: t.received - start.received))
        }
        let firstContact = state.epoch == 0
        if firstContact { try await installCheckpoints(&report, tell) }
        var attempts = 0
        while true {
            attempts += 1
            var compared = false
            if state.epoch == 0 {
                compared = true
                tell(.comparing, report)
                let have = try await notebook.logClocks()
                let answer = try await exchange(SyncRequest(replica: notebook.replicaID, epoch: 0, cursor: 0, have: have),
                                                &report, tell)
                try await absorb(answer, into: &state, &report, tell)
                state.known = Dictionary((answer.clocks ?? []).map { ($0.log, $0.clock) }, uniquingKeysWith: { $0.merged($1) })
                state.epoch = answer.epoch
                state.cursor = answer.cursor
                try await notebook.saveRemoteState(state.encoded(), key: remote.key)
            }
            tell(.comparing, report)
            let push = try await pendingPush(state)
            // Right after a clock comparison there is nothing new to pull; with nothing to
            // push either, a second exchange would carry nothing.
            if compared && push.isEmpty { break }
            try await uploadAssets(push, &report, tell)
            let request = SyncRequest(replica: notebook.replicaID, epoch: state.epoch, cursor: state.cursor, push: push)
            let answer = try await exchange(request, &report, tell)
            report.opsSent += push.reduce(0) { $0 + $1.frames.count }
            report.opsAccepted += Int(answer.accepted)
            for batch in push { state.learn(try batch.ops().map(\.id), in: batch.log) }
            if answer.resync {
                // The remote lost our cursor: it kept the push; compare clocks again.
                state.epoch = 0
                state.cursor = 0
                try await notebook.saveRemoteState(state.encoded(), key: remote.key)
                guard attempts < 3 else { throw LnoteError(.protocolMismatch, "remote keeps asking to resynchronize") }
                continue
            }
            try await absorb(answer, into: &state, &report, tell)
            state.cursor = answer.cursor
            try await notebook.saveRemoteState(state.encoded(), key: remote.key)
            break
        }
        try await uploadCheckpoints(state, firstContact: firstContact, &report)
        let t = remote.traffic
        report.bytesSent = t.sent - start.sent
        report.bytesReceived = t.received - start.received
        tell(.done, report)
        return report
    }

    private func exchange(_ request: SyncRequest, _ report: inout SyncReport,
                          _ tell: (SyncProgress.Phase, SyncReport) -> Void) async throws -> SyncResponse {
        tell(.exchanging, report)
        report.roundTrips += 1
        return try await remote.sync(request)
    }

    /// Operations in local logs that the remote is not known to hold.
    private func pendingPush(_ state: RemoteState) async throws -> [LogBatch] {
        var out: [LogBatch] = []
        for lc in try await notebook.logClocks() {
            let known = state.known[lc.log] ?? VectorClock()
            guard !known.covers(lc.clock) else { continue }
            let frames = try await notebook.frames(in: lc.log, notCoveredBy: known)
            if !frames.isEmpty { out.append(LogBatch(log: lc.log, frames: frames)) }
        }
        return out
    }

    /// Sends the assets referenced by pushed operations that the remote lacks.
    private func uploadAssets(_ push: [LogBatch], _ report: inout SyncReport,
                              _ tell: (SyncProgress.Phase, SyncReport) -> Void) async throws {
        var wanted: [DocumentID: Set<AssetID>] = [:]
        for batch in push where batch.log.page != nil {
            for op in try batch.ops() where !op.referencedAssets.isEmpty {
                wanted[batch.log.document, default: []].formUnion(op.referencedAssets)
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

    /// Fetches the assets pulled operations reference, then hands the operations to the
    /// notebook (which appends them durably and applies them).
    private func absorb(_ answer: SyncResponse, into state: inout RemoteState, _ report: inout SyncReport,
                        _ tell: (SyncProgress.Phase, SyncReport) -> Void) async throws {
        guard !answer.pull.isEmpty else { return }
        var decoded: [(LogBatch, [Op])] = []
        for batch in answer.pull { decoded.append((batch, try batch.ops(path: "sync response"))) }
        tell(.downloadingAssets, report)
        for (batch, ops) in decoded where batch.log.page != nil {
            for asset in Set(ops.flatMap(\.referencedAssets)).sorted()
            where !(try await notebook.hasAsset(asset, document: batch.log.document)) {
                report.assetRequests += 1
                let bytes = try await remote.getAsset(asset, document: batch.log.document)
                guard AssetID.of(bytes) == asset else {
                    throw LnoteError(.corrupt, "asset \(asset) from \(remote.key) does not match its hash")
                }
                _ = try await notebook.writeAsset(bytes, document: batch.log.document)
                report.assetsReceived += 1
            }
        }
        tell(.applying, report)
        report.opsReceived += decoded.reduce(0) { $0 + $1.1.count }
        report.opsApplied += try await notebook.receive(answer.pull)
        for (batch, ops) in decoded { state.learn(ops.map(\.id), in: batch.log) }
    }
}
