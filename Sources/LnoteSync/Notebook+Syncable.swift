import LnoteModel
import LnoteReplication
import LnoteStore
import Synchronization

/// A notebook folder is what the sync engine reads from and writes to.
extension Notebook: SyncableNotebook {
    public func knownDeviceNames() async throws -> [ReplicaID: String] { try deviceNames() }

    public func logClocks() async throws -> [LogClock] {
        try await logClocks().map { LogClock(log: LogRef(document: $0.document, page: $0.page), clock: $0.clock) }
    }

    public func frames(in log: LogRef, notCoveredBy clock: VectorClock) async throws -> [Frame] {
        try await frames(document: log.document, page: log.page, notCoveredBy: clock)
    }

    public func framesForPeer(in log: LogRef, notCoveredBy clock: VectorClock) async throws -> [Frame] {
        switch try await framesForPeer(document: log.document, page: log.page, notCoveredBy: clock) {
        case .frames(let frames):
            return frames
        case .historyNotHeld(let gap):
            throw SyncRefusal(.historyNotHeld(log: log, operation: gap.missing), message: gap.description, path: gap.path)
        }
    }

    /// Each document opened once for all its logs asked for.
    public func frames(in logs: [(log: LogRef, clock: VectorClock)]) async throws -> [[Frame]] {
        var out: [[Frame]] = []
        for group in Self.byDocument(logs) {
            out += try await frames(document: group[0].log.document, logs: group.map { (page: $0.log.page, clock: $0.clock) })
        }
        return out
    }

    /// Runs of consecutive logs of one document.
    static func byDocument(_ logs: [(log: LogRef, clock: VectorClock)]) -> [[(log: LogRef, clock: VectorClock)]] {
        var out: [[(log: LogRef, clock: VectorClock)]] = []
        for l in logs {
            if out.last?.last?.log.document == l.log.document { out[out.count - 1].append(l) } else { out.append([l]) }
        }
        return out
    }

    /// Each document opened once for all its logs asked for.
    public func framesForPeer(in logs: [(log: LogRef, clock: VectorClock)]) async throws -> [[Frame]] {
        var out: [[Frame]] = []
        var i = 0
        while i < logs.count {
            let doc = logs[i].log.document
            var j = i
            while j < logs.count && logs[j].log.document == doc { j += 1 }
            let group = Array(logs[i..<j])
            let answers = try await framesForPeer(document: doc, logs: group.map { (page: $0.log.page, clock: $0.clock) })
            for (l, a) in zip(group, answers) {
                switch a {
                case .frames(let frames):
                    out.append(frames)
                case .historyNotHeld(let gap):
                    throw SyncRefusal(.historyNotHeld(log: l.log, operation: gap.missing), message: gap.description, path: gap.path)
                }
            }
            i = j
        }
        return out
    }

    /// Receives each document's log before its pages' logs, so that pages exist (their
    /// `addPage` applied) before their operations arrive.
    public func receive(_ batches: [LogBatch]) async throws -> Int {
        var logs: [CheckedLog] = []
        for batch in batches { logs.append(CheckedLog(log: batch.log, ops: try batch.ops(path: "sync"))) }
        return try await receive(checked: logs, remote: QuarantineEntry.pushingPeer, recordForks: true).appended
    }

    public func checkpointState(of log: LogRef) async throws -> PageState? {
        guard let page = log.page else { return nil }
        return try await checkpointState(document: log.document, page: page)
    }

    // MARK: - Trust (sync-protocol.md §6)

    public func logClocksAndDigests() async throws -> (clocks: [LogClock], digests: [LogDigests]?) {
        let all: [NotebookLogClock] = try await logClocksAndDigests()
        let clocks = all.map { LogClock(log: LogRef(document: $0.document, page: $0.page), clock: $0.clock) }
        let digests = all.compactMap { c -> LogDigests? in
            guard let d = c.digests, !d.isEmpty else { return nil }
            return LogDigests(log: LogRef(document: c.document, page: c.page), entries: Array(d.prefix(OpValidator.maxClockEntries)))
        }
        return (clocks, digests)
    }

    public func contentHashTable(in log: LogRef) async throws -> ContentHashTable? {
        try await contentHashTable(document: log.document, page: log.page)
    }

    public func heldDocuments() async throws -> Set<DocumentID>? {
        Set(try documentIDs())
    }

    public func contentHashes(in log: LogRef, replica: ReplicaID, from: UInt64, to: UInt64) async throws -> [[UInt8]] {
        try await contentHashes(document: log.document, page: log.page, replica: replica, from: from, to: to)
    }

    /// Receives each document's log before its pages' logs. A log whose operations the
    /// merge refuses as a batch is received one operation at a time: those refused are kept
    /// in the quarantine ([SYNC-60]) and the rest stored. With `recordForks` (a server
    /// receiving a push), forks are kept in the quarantine too ([PKG-48]); a client decides
    /// about them itself.
    ///
    /// Documents this folder does not hold yet (a first sync, a push into an empty folder)
    /// are created together, their packages made durable as one batch ([PKG-96]).
    public func receive(checked logs: [CheckedLog], remote: String, recordForks: Bool) async throws -> Receipt {
        try await receive(checked: logs, remote: remote, recordForks: recordForks, progress: nil)
    }

    /// Documents are counted as handled when their new package is staged (the batch is
    /// durable once the call returns), or when the last of their logs was received.
    public func receive(checked logs: [CheckedLog], remote: String, recordForks: Bool,
                        progress given: (@Sendable (Int) -> Void)?) async throws -> Receipt {
        // A package another process created meanwhile is staged, then received log by log:
        // counted once, and the count never goes down.
        let progress = given.map { tell in
            let highest = HighestCount()
            return { @Sendable (n: Int) in if highest.raise(to: n) { tell(n) } }
        }
        var out = Receipt()
        let held = Set(try documentIDs())
        var new: [DocumentID: ReceivedDocument] = [:]
        for l in logs where !held.contains(l.log.document) && !l.ops.isEmpty {
            var r = new[l.log.document] ?? ReceivedDocument(id: l.log.document, documentOps: [], pages: [:])
            if let p = l.log.page { r.pages[p, default: []] += l.ops } else { r.documentOps += l.ops }
            new[l.log.document] = r
        }
        let created = new.isEmpty ? [:] : try await createReceived(new.values.sorted { $0.id < $1.id }, progress: progress)
        out.appended = created.values.reduce(0, +)
        out.created = Set(created.keys)
        var done = created.count
        var previous: DocumentID?
        for l in logs.sorted(by: { $0.log < $1.log }) where !l.ops.isEmpty && created[l.log.document] == nil {
            if let p = previous, p != l.log.document {
                done += 1
                progress?(done)
            }
            previous = l.log.document
            let label: String? = recordForks ? remote : nil
            do {
                out.add(try await receive(l.ops, document: l.log.document, page: l.log.page, remote: label), log: l.log)
            } catch let e as LnoteError where e.code == .corrupt {
                for op in l.ops {
                    do {
                        out.add(try await receive([op], document: l.log.document, page: l.log.page, remote: label), log: l.log)
                    } catch let refused as LnoteError where refused.code == .corrupt {
                        let entry = QuarantineEntry(kind: .invalid, time: wallTime, remote: remote,
                                                    document: l.log.document, page: l.log.page, operation: op.id,
                                                    reason: "refused by the merge: \(refused.message)",
                                                    frame: OperationCodec.frame(op).encoded, hash: ContentHash.of(op))
                        _ = try quarantine(entry) as String
                        out.quarantined.append(entry)
                    }
                }
            }
        }
        if previous != nil { progress?(done + 1) }
        return out
    }

    public func appliedClock(of log: LogRef) async throws -> VectorClock {
        try await appliedClock(document: log.document, page: log.page)
    }

    public func remintReplica(reason: String) async throws -> ReplicaChange? {
        try remintReplica(reason: reason) as ReplicaChange
    }
    public func remintReplicaForRepair(reason: String) async throws -> ReplicaChange? {
        try remintReplica(reason: reason, repairingFork: true) as ReplicaChange
    }

    public func quarantine(_ entry: QuarantineEntry) async throws {
        _ = try quarantine(entry) as String
    }

    public func installedPageMatches(_ log: LogRef) async throws -> Bool? {
        guard let page = log.page else { return nil }
        return try await installedPageMatches(document: log.document, page: page)
    }

    public func dropCheckpoint(_ log: LogRef) async throws {
        guard let page = log.page else { return }
        try await dropCheckpoint(document: log.document, page: page)
    }
}

extension Receipt {
    mutating func add(_ o: ReceiveOutcome, log: LogRef) {
        appended += o.appended
        healed += o.healed.count
        forks += o.forks.map { (log, $0) }
    }
}

/// The greatest count told so far.
private final class HighestCount: Sendable {
    private let value = Mutex(0)
    /// True when `n` is above every count before it (and is now the greatest).
    func raise(to n: Int) -> Bool { value.withLock { if n > $0 { $0 = n; return true }; return false } }
}
