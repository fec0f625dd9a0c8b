import LnoteModel
import LnoteReplication
import LnoteStore

/// What the sync engine needs from a replica's storage: a notebook folder, or anything
/// else that holds logs (a test's in-memory replicas).
///
/// Implementations keep every operation they hold (applied or waiting) in their logs,
/// append received ones durably before applying them, and never hold a page operation
/// that references an asset they lack.
public protocol SyncableNotebook: Sendable {
    /// The replica this storage writes as.
    var replicaID: ReplicaID { get }
    /// Records device names a remote gave for replica ids ([SYNC-57]).
    func learnDeviceNames(_ names: [ReplicaID: String]) async throws
    /// The device names this storage knows (its own machine's name included, when it has
    /// one), for a peer that asks ([SYNC-57]).
    func knownDeviceNames() async throws -> [ReplicaID: String]
    /// The applied clock of every log held (documents and pages), sorted by log.
    func logClocks() async throws -> [LogClock]
    /// Operations held in `log` (applied or waiting) whose ids `clock` does not cover, as
    /// frames in the order the log holds them.
    func frames(in log: LogRef, notCoveredBy clock: VectorClock) async throws -> [Frame]
    /// `frames(in:notCoveredBy:)` for several logs, in the order given (a storage may read
    /// the logs of one document together).
    func frames(in logs: [(log: LogRef, clock: VectorClock)]) async throws -> [[Frame]]
    /// `frames(in:notCoveredBy:)` for serving a peer: a storage that cannot give every
    /// operation `clock` lacks (a page installed from a checkpoint) throws `SyncRefusal`
    /// (`historyNotHeld`, [SYNC-43]) rather than an error the peer could not tell apart.
    func framesForPeer(in log: LogRef, notCoveredBy clock: VectorClock) async throws -> [Frame]
    /// `framesForPeer(in:notCoveredBy:)` for several logs, in the order given (a storage may
    /// read the logs of one document together).
    func framesForPeer(in logs: [(log: LogRef, clock: VectorClock)]) async throws -> [[Frame]]
    /// Appends and applies received operations (those already held are skipped). Returns
    /// how many were new. Documents and pages that did not exist are created.
    func receive(_ batches: [LogBatch]) async throws -> Int
    /// True when the asset is held for the document: stored with it, or received for it
    /// and waiting for the operations that reference it ([SYNC-10]).
    func hasAsset(_ id: AssetID, document: DocumentID) async throws -> Bool
    func readAsset(_ id: AssetID, document: DocumentID) async throws -> [UInt8]
    /// Stores an asset received for a document durably (content-addressed: the id is the
    /// bytes' SHA-256), whether or not the document is held yet, where nothing removes it
    /// before the operations that reference it arrive by `receive` ([SYNC-10]).
    func writeAsset(_ bytes: [UInt8], document: DocumentID) async throws -> AssetID
    /// Sync bookkeeping per remote (opaque bytes), kept durably beside the notebook.
    func loadRemoteState(key: String) async throws -> [UInt8]?
    func saveRemoteState(_ bytes: [UInt8], key: String) async throws
    /// True when the storage holds no document (a newcomer, which may install checkpoints).
    func holdsNoDocuments() async throws -> Bool
    /// Creates a document from page checkpoint states and the assets they reference,
    /// atomically; its operations (document log, page tails) arrive by sync afterwards.
    func installCheckpoint(document: DocumentID, pages: [PageState], assets: [[UInt8]]) async throws
    /// A page log's applied state, to upload as a checkpoint (nil: none held).
    func checkpointState(of log: LogRef) async throws -> PageState?

    // MARK: Trust (sync-protocol.md §6). Each has a default: storage that does not implement
    // it takes part in sync without that check.

    /// `logClocks` with, per log, the chain digests ([SYNC-52]) of the replicas it holds from
    /// counter 1 without a gap, at the clock's counters. `digests` nil: not supported.
    func logClocksAndDigests() async throws -> (clocks: [LogClock], digests: [LogDigests]?)
    /// The first 16 bytes of the content hashes of a replica's operations `from…to` in a log,
    /// in counter order, stopping at the first not held ([SYNC-53]).
    func contentHashes(in log: LogRef, replica: ReplicaID, from: UInt64, to: UInt64) async throws -> [[UInt8]]
    /// Every content hash a log holds, read once, for answering many ranges of it
    /// (`contentHashes(in:replica:from:to:)` for each range reads the log each time); nil
    /// when the storage cannot give them at once (each range is then asked alone).
    func contentHashTable(in log: LogRef) async throws -> ContentHashTable?
    /// Every document this storage holds, listed once for a request that names many logs
    /// (each log of a document not held then costs nothing); nil when the storage cannot list
    /// them at once.
    func heldDocuments() async throws -> Set<DocumentID>?
    /// Receives operations already decoded and checked (`OperationCodec.decode`, log kind),
    /// like `receive(_:)`, and says what it did: forks found ([SYNC-51]), operations the logs
    /// had lost and got back, operations the merge refused (quarantined, not stopping the
    /// rest, [SYNC-60]).
    /// - Parameters:
    ///   - remote: who sent them, for the quarantine.
    ///   - recordForks: keep each fork found in the quarantine as a `fork` entry (a server;
    ///     a client decides about its forks itself, [SYNC-54]).
    func receive(checked logs: [CheckedLog], remote: String, recordForks: Bool) async throws -> Receipt
    /// `receive(checked:remote:recordForks:)`, telling `progress` how many of the documents
    /// the logs belong to were handled so far (from any thread, any number of times, the
    /// count never going down; the last call gives them all). A storage that cannot tell
    /// before the end tells it once, at the end (the default).
    func receive(checked logs: [CheckedLog], remote: String, recordForks: Bool,
                 progress: (@Sendable (Int) -> Void)?) async throws -> Receipt
    /// The applied clock of a log (what its state holds, which may exceed what its log holds).
    func appliedClock(of log: LogRef) async throws -> VectorClock
    /// Mints a new replica id ([SYNC-54], [SYNC-55]); nil when the storage cannot.
    func remintReplica(reason: String) async throws -> ReplicaChange?
    /// Repairs forks of this storage's own operations ([SYNC-54], `Notebook.repairOwnFork`).
    func repairOwnFork(_ forks: [OwnFork], remote: String) async throws -> ForkRepair
    /// Makes removed operations again (`Notebook.remake`).
    func remake(_ removal: ForkRemoval, with hook: ReauthorHook) async throws -> RemadeOperations
    /// Ids replaced for a fork repair that a stopped sync left unfinished
    /// (`Notebook.unfinishedForkRepairs`): still this storage's own ([SYNC-54]).
    func unfinishedForkRepairs() async throws -> [ReplicaID]
    /// What those repairs still have to make again (`Notebook.pendingRemakes`).
    func pendingRemakes(of replicas: Set<ReplicaID>) async throws -> [ForkRemoval]
    /// Mints a new replica id for a folder restored from an older copy ([SYNC-55]), listing
    /// the old one as a repair under way (`repairing`): the forks it may have made are this
    /// folder's to repair, also after a stopped sync.
    func remintReplicaForRepair(reason: String) async throws -> ReplicaChange?
    /// Those repairs finished (`Notebook.finishForkRepairs`).
    func finishForkRepairs(_ replicas: Set<ReplicaID>) async throws
    /// The forks of other replicas found with `remote` are gone (`Notebook.resolveForks`).
    func resolveForks(remote: String) async throws -> Int
    /// Refused operations whose log now holds a valid one under their id need nobody any more
    /// (`Notebook.resolveRefusalsNowHeld`): the entries so marked.
    func resolveRefusalsNowHeld() async throws -> [QuarantineEntry]
    /// Keeps an operation out of the logs ([PKG-48]).
    func quarantine(_ entry: QuarantineEntry) async throws
    /// What the logs lack of what their states hold ([PKG-51]).
    func missingOperations() async throws -> [MissingInLog]
    /// Whether a page installed from a checkpoint holds what its base and its log give
    /// ([SYNC-59]); nil: no base (or not supported).
    func installedPageMatches(_ log: LogRef) async throws -> Bool?
    /// Gives up a page's checkpoint, to rebuild it from operations ([SYNC-59]).
    func dropCheckpoint(_ log: LogRef) async throws
}

/// Operations of one log, decoded and checked by the receiver.
public struct CheckedLog: Sendable {
    public var log: LogRef
    public var ops: [Op]
    public init(log: LogRef, ops: [Op]) {
        self.log = log
        self.ops = ops
    }
}

/// What `SyncableNotebook.receive(checked:remote:)` did.
public struct Receipt: Sendable {
    /// Operations appended (new here, or lost from a log and got back).
    public var appended = 0
    /// Operations the logs had lost and got back ([PKG-54]).
    public var healed = 0
    /// Operations whose ids the logs hold with other content ([SYNC-51]): not stored.
    public var forks: [(log: LogRef, fork: ReceivedFork)] = []
    /// Operations the merge refused: kept in the quarantine, not applied ([SYNC-60]).
    public var quarantined: [QuarantineEntry] = []
    /// Documents this receipt created whole, each of whose logs holds exactly the operations
    /// received for it, in the order received ([PKG-96]).
    public var created: Set<DocumentID> = []
    public init() {}
}

/// Storage that knows nothing of checkpoints: never a newcomer, uploads none, and holds the
/// whole history of every log.
extension SyncableNotebook {
    /// Records device names a remote gave for replica ids ([SYNC-57]); a notebook without a
    /// place for them ignores them.
    public func learnDeviceNames(_ names: [ReplicaID: String]) async throws {}
    public func knownDeviceNames() async throws -> [ReplicaID: String] { [:] }

    public func framesForPeer(in log: LogRef, notCoveredBy clock: VectorClock) async throws -> [Frame] {
        try await frames(in: log, notCoveredBy: clock)
    }
    public func frames(in logs: [(log: LogRef, clock: VectorClock)]) async throws -> [[Frame]] {
        var out: [[Frame]] = []
        for l in logs { out.append(try await frames(in: l.log, notCoveredBy: l.clock)) }
        return out
    }
    public func framesForPeer(in logs: [(log: LogRef, clock: VectorClock)]) async throws -> [[Frame]] {
        var out: [[Frame]] = []
        for l in logs { out.append(try await framesForPeer(in: l.log, notCoveredBy: l.clock)) }
        return out
    }
    public func holdsNoDocuments() async throws -> Bool { false }
    public func contentHashTable(in log: LogRef) async throws -> ContentHashTable? { nil }
    public func heldDocuments() async throws -> Set<DocumentID>? { nil }
    public func installCheckpoint(document: DocumentID, pages: [PageState], assets: [[UInt8]]) async throws {
        throw LnoteError(.invalidState, "this storage cannot install checkpoints")
    }
    public func checkpointState(of log: LogRef) async throws -> PageState? { nil }
    public func receive(checked logs: [CheckedLog], remote: String, recordForks: Bool,
                        progress: (@Sendable (Int) -> Void)?) async throws -> Receipt {
        let receipt = try await receive(checked: logs, remote: remote, recordForks: recordForks)
        progress?(Set(logs.lazy.filter { !$0.ops.isEmpty }.map(\.log.document)).count)
        return receipt
    }
}

/// Storage that knows nothing of §6: no digests, no fork detection beyond what its own
/// `receive` does, no repair, no quarantine.
extension SyncableNotebook {
    public func logClocksAndDigests() async throws -> (clocks: [LogClock], digests: [LogDigests]?) {
        (try await logClocks(), nil)
    }
    public func contentHashes(in log: LogRef, replica: ReplicaID, from: UInt64, to: UInt64) async throws -> [[UInt8]] { [] }
    public func receive(checked logs: [CheckedLog], remote: String, recordForks: Bool) async throws -> Receipt {
        var r = Receipt()
        r.appended = try await receive(logs.map { LogBatch(log: $0.log, ops: $0.ops) })
        return r
    }
    public func appliedClock(of log: LogRef) async throws -> VectorClock {
        try await logClocks().first { $0.log == log }?.clock ?? VectorClock()
    }
    public func remintReplica(reason: String) async throws -> ReplicaChange? { nil }
    public func repairOwnFork(_ forks: [OwnFork], remote: String) async throws -> ForkRepair {
        throw LnoteError(.invalidState, "this storage cannot repair forks of its own operations")
    }
    public func remake(_ removal: ForkRemoval, with hook: ReauthorHook) async throws -> RemadeOperations {
        throw LnoteError(.invalidState, "this storage cannot make operations again")
    }
    public func unfinishedForkRepairs() async throws -> [ReplicaID] { [] }
    public func finishForkRepairs(_ replicas: Set<ReplicaID>) async throws {}
    public func pendingRemakes(of replicas: Set<ReplicaID>) async throws -> [ForkRemoval] { [] }
    public func remintReplicaForRepair(reason: String) async throws -> ReplicaChange? { try await remintReplica(reason: reason) }
    public func resolveForks(remote: String) async throws -> Int { 0 }
    public func resolveRefusalsNowHeld() async throws -> [QuarantineEntry] { [] }
    public func quarantine(_ entry: QuarantineEntry) async throws {}
    public func missingOperations() async throws -> [MissingInLog] { [] }
    public func installedPageMatches(_ log: LogRef) async throws -> Bool? { nil }
    public func dropCheckpoint(_ log: LogRef) async throws {
        throw LnoteError(.invalidState, "this storage cannot install checkpoints")
    }
}

extension Op {
    /// The assets this operation references (an image add references one).
    public var referencedAssets: [AssetID] {
        if case .add(.image(let i), _) = body { return [i.asset] }
        return []
    }
}
