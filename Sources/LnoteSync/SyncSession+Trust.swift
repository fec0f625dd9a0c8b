import Foundation
import LnoteModel
import LnoteReplication
import LnoteStore

/// What one sync run keeps between its exchanges.
struct SyncRun {
    /// A newcomer's checkpoints, not installed yet ([SYNC-59]).
    var candidates: [DocumentID: [PageState]]?
    /// Pages installed from checkpoints by this run, checked after it ([SYNC-59]).
    var installed: [LogRef] = []
    /// The operations each installed page's checkpoint covers (its clock's total).
    var installedOperations: [LogRef: Int] = [:]
    /// Documents that received operations or installed pages (`SyncReport.documentsReceived`).
    var documentsReceived: Set<DocumentID> = []
    /// Replica ids this folder wrote under until a mint of this run: forks of them are its own.
    var sessionOwn: Set<ReplicaID> = []
    /// Forks found and not handled yet.
    var forks: [FoundFork] = []
    /// Replicas another device owns, whose operations the push leaves out ([SYNC-57]).
    var withheld: Set<ReplicaID> = []
    /// Content hashes to ask for ([SYNC-53]).
    var askRanges: [HashRange] = []
    /// The remote's content hashes answered so far, by log, replica and counter (16 bytes).
    var remoteHashes: [LogRef: [ReplicaID: [UInt64: [UInt8]]]] = [:]
    /// Removed operations to make again once the remote's versions are in ([SYNC-54]).
    var remakes: [ForkRemoval] = []
    var needsComparison = false
    /// Whether a clock comparison (with digests, [SYNC-52]) ran in this sync.
    var compared = false
    var resyncs = 0
    /// Per replica and counter, the content hashes (16 bytes) of the operations received into
    /// logs of documents the last receipt created ([PKG-96]): such a log holds exactly them,
    /// so the digest check reads them from here rather than opening every new document.
    var createdHashes: [LogRef: [ReplicaID: [UInt64: [UInt8]]]] = [:]
}

/// A fork as found, before it is reported and handled.
struct FoundFork {
    var log: LogRef
    var id: OpID
    var local: [UInt8]?
    var remote: [UInt8]?
    /// The remote's version, when it was received.
    var remoteOp: Op? = nil
    var remoteFrame: Frame? = nil
    var source: SyncFork.Source
}

/// Trust (sync-protocol.md §6): restored folders, digests, forks and their repair.
extension SyncSession {
    /// [SYNC-55] When the remote holds operations of this replica id that this folder lacks
    /// (its clock of some log has this replica above what this folder's state holds), the
    /// folder was restored from an older copy: it mints a new id before it makes any
    /// operation. Its lost operations come in the pull like anyone else's.
    func checkRestoredInPlace(have: [LogClock], theirs: [LogRef: VectorClock], _ run: inout SyncRun,
                              _ report: inout SyncReport) async throws {
        let me = notebook.replicaID
        let mine = Dictionary(have.map { ($0.log, $0.clock) }, uniquingKeysWith: { $0.merged($1) })
        for log in theirs.keys.sorted() where theirs[log]![me] > (mine[log]?[me] ?? 0) {
            // What a log holds may be less than what its state holds (operations lost to
            // damage, [PKG-51]): the state says what this replica made.
            let applied = try await notebook.appliedClock(of: log)
            guard theirs[log]![me] > applied[me] else { continue }
            let reason = "\(remote.key) holds operations of replica \(me) that this folder lacks (log \(log): "
                + "\(theirs[log]![me]) there, \(applied[me]) here): it was restored from an older copy"
            if let change = try await notebook.remintReplicaForRepair(reason: reason) {
                run.sessionOwn.insert(change.old)
                report.replicaChanges.append(change)
            }
            return
        }
    }

    /// [SYNC-52] Compares chain digests: where both sides hold a replica's operations up to
    /// the same counter (or this side holds more, or the pull just brought the remote's), this
    /// side's chain at the remote's counter must be the remote's; where it is not, the
    /// operations differ somewhere in `1…k`, and their content hashes are asked for.
    func compareDigests(_ mine: [LogDigests], _ theirs: [LogDigests], touched: Set<LogRef>, _ run: inout SyncRun) async throws {
        var local: [LogRef: [ReplicaID: LogDigests.Entry]] = [:]
        for d in mine { for e in d.entries { local[d.log, default: [:]][e.replica] = e } }
        // The log's hashes read once for all its entries (the remote chooses how many entries
        // name it: a whole read for each cost 22 ms an entry on a log of 5,000 operations).
        var tables = LogHashTables(notebook)
        for d in theirs.sorted(by: { $0.log < $1.log }) {
            for e in d.entries {
                let m = local[d.log]?[e.replica]
                if let m, m.counter == e.counter {
                    if m.digest != e.digest { run.askRanges.append(HashRange(log: d.log, replica: e.replica, from: 1, to: e.counter)) }
                    continue
                }
                // Counters differ: this side's chain at the remote's counter, when it holds that far.
                guard (m?.counter ?? 0) > e.counter || touched.contains(d.log) else { continue }
                let hashes: [[UInt8]]
                if let created = run.createdHashes[d.log] {
                    // What `contentHashes` would read back from the log the receipt created.
                    let byCounter = created[e.replica] ?? [:]
                    var c: UInt64 = 1
                    var list: [[UInt8]] = []
                    while c <= e.counter, let h = byCounter[c] {
                        list.append(h)
                        c += 1
                    }
                    hashes = list
                } else {
                    hashes = try await tables.hashes(in: d.log, replica: e.replica, from: 1, to: e.counter)
                }
                guard UInt64(hashes.count) == e.counter else { continue }  // e.counter is the remote's: never Int(...)
                let chain = hashes.reduce(ContentHash.emptyChain) { ContentHash.chain($0, $1) }
                if chain != e.digest { run.askRanges.append(HashRange(log: d.log, replica: e.replica, from: 1, to: e.counter)) }
            }
        }
    }

    /// [SYNC-53] Asks the content hashes of the ranges whose digests differ (nothing is
    /// pushed meanwhile: a fork must be known before this side's versions spread) and notes
    /// every counter whose operation differs.
    func askHashes(_ state: inout RemoteState, _ run: inout SyncRun, _ report: inout SyncReport, _ tell: Tell) async throws {
        let ranges = run.askRanges
        run.askRanges = []
        let answer = try await exchange(SyncRequest(replica: notebook.replicaID, epoch: state.epoch, cursor: state.cursor,
                                                    hashRanges: ranges), &report, tell)
        // This side's hashes, each log read once for all the ranges that name it (the remote
        // chooses how many, up to 65,536), in log order; then compared in the answer's order.
        // A read that fails is thrown where its range comes in the answer, as before.
        let answered = answer.hashes ?? []
        var held = [Result<[[UInt8]], any Error>](repeating: .success([]), count: answered.count)
        var tables = LogHashTables(notebook)
        for i in answered.indices.filter({ !answered[$0].hashes.isEmpty }).sorted(by: { answered[$0].log < answered[$1].log }) {
            let h = answered[i]
            do {
                held[i] = .success(try await tables.hashes(in: h.log, replica: h.replica, from: h.from, to: h.from + UInt64(h.hashes.count) - 1))
            } catch {
                held[i] = .failure(error)
            }
        }
        for (k, h) in answered.enumerated() where !h.hashes.isEmpty {
            for (i, theirs) in h.hashes.enumerated() { run.remoteHashes[h.log, default: [:]][h.replica, default: [:]][h.from + UInt64(i)] = theirs }
            let mine = try held[k].get()
            for (i, theirs) in h.hashes.enumerated() where i < mine.count && mine[i] != theirs {
                run.forks.append(FoundFork(log: h.log, id: OpID(replica: h.replica, counter: h.from + UInt64(i)),
                                           local: mine[i], remote: theirs, source: .digests))
            }
        }
        try await finishExchange(answer, &state, &run, &report, tell)
    }

    /// Reports the forks found ([SYNC-56]) and handles them ([SYNC-54]): a fork of another
    /// replica is kept in the quarantine as a `fork` (both sides keep their content); forks
    /// of this folder's own operations are repaired — a new id, its versions out of the logs,
    /// then a clock comparison to receive the remote's, then re-authoring (`remake`).
    func handleForks(_ run: inout SyncRun, _ report: inout SyncReport) async throws {
        var seen = Set<String>()
        let found = run.forks.filter { seen.insert("\($0.log)/\($0.id)").inserted }
        run.forks = []
        let own = run.sessionOwn.union([notebook.replicaID])
        var mine: [String: OwnFork] = [:]
        for f in found {
            let isOwn = own.contains(f.id.replica)
            report.forks.append(SyncFork(log: f.log, id: f.id, localHash: f.local, remoteHash: f.remote, own: isOwn, source: f.source))
            guard isOwn else {
                let entry = QuarantineEntry(
                    kind: .fork, time: Int64((Date().timeIntervalSince1970 * 1000).rounded()), remote: remote.key,
                    document: f.log.document, page: f.log.page, operation: f.id,
                    reason: "\(remote.key) holds operation \(f.id) with content other than this replica's (a fork: replica "
                        + "\(f.id.replica) reused its ids); each side keeps its own until its author repairs it",
                    frame: f.remoteFrame?.encoded, hash: f.remote, otherHash: f.local)
                try await notebook.quarantine(entry)
                continue
            }
            let key = "\(f.log)/\(f.id.replica)"
            var o = mine[key] ?? OwnFork(document: f.log.document, page: f.log.page, replica: f.id.replica, from: f.id.counter,
                                         otherHashes: run.remoteHashes[f.log]?[f.id.replica] ?? [:])
            o.from = min(o.from, f.id.counter)
            if let h = f.remote { o.otherHashes[f.id.counter] = h }
            if let op = f.remoteOp { o.otherVersions.append(op) }
            mine[key] = o
        }
        guard !mine.isEmpty else { return }
        let forks = mine.keys.sorted().map { mine[$0]! }
        let repair: ForkRepair
        do {
            repair = try await notebook.repairOwnFork(forks, remote: remote.key)
        } catch let e as LnoteError {
            for f in forks {
                report.repairs.append(SyncRepair(log: LogRef(document: f.document, page: f.page), replica: f.replica,
                                                 newReplica: notebook.replicaID, removed: [], toRemake: 0, failure: e.description))
            }
            return
        }
        if let m = repair.minted {
            run.sessionOwn.insert(m.old)
            report.replicaChanges.append(m)
        }
        for r in repair.removals {
            report.repairs.append(SyncRepair(log: LogRef(document: r.document, page: r.page), replica: r.replica,
                                             newReplica: notebook.replicaID, removed: r.removed.map(\.id),
                                             toRemake: r.remake.count))
            run.remakes.append(r)
        }
        // The remote's versions of what left the logs come by a clock comparison (this
        // folder's clocks of those logs are lower now).
        run.needsComparison = true
    }

    /// Makes the removed operations of the repairs again with `reauthor` ([SYNC-54]); without
    /// it, they stay in the quarantine and the report says how many.
    func remake(_ run: inout SyncRun, _ report: inout SyncReport) async throws {
        let removals = run.remakes
        run.remakes = []
        for removal in removals {
            let log = LogRef(document: removal.document, page: removal.page)
            guard let i = report.repairs.lastIndex(where: { $0.log == log && $0.replica == removal.replica }) else { continue }
            report.repairs[i].newReplica = notebook.replicaID
            guard !removal.remake.isEmpty else { continue }
            guard let hook = reauthor else {
                report.repairs[i].pending += removal.remake.count
                continue
            }
            do {
                let r = try await notebook.remake(removal, with: hook)
                report.repairs[i].remade += r.made.count
                report.repairs[i].skipped += r.skipped.count
            } catch let e as LnoteError {
                report.repairs[i].pending += removal.remake.count
                report.repairs[i].failure = e.description
            }
        }
    }
}

/// This side's content hashes of one log at a time, read once for all the ranges that ask
/// about it in a row (`contentHashTable`), or range by range when the storage cannot give a
/// whole table (`contentHashes`). Only the last log's table is kept.
struct LogHashTables {
    let notebook: any SyncableNotebook
    private var log: LogRef?
    private var table: ContentHashTable?

    init(_ notebook: any SyncableNotebook) { self.notebook = notebook }

    /// `notebook.contentHashes(in:replica:from:to:)`.
    mutating func hashes(in log: LogRef, replica: ReplicaID, from: UInt64, to: UInt64) async throws -> [[UInt8]] {
        if self.log != log {
            // The previous table released before the next is read: one at a time.
            table = nil
            self.log = nil
            table = try await notebook.contentHashTable(in: log)
            self.log = log
        }
        if let table { return table.hashes(replica: replica, from: from, to: to) }
        return try await notebook.contentHashes(in: log, replica: replica, from: from, to: to)
    }
}
