import Foundation
import Synchronization
import LnoteModel
import LnoteReplication

/// One log in which this folder's own operations of a replica id fork from another side's
/// (sync-protocol.md [SYNC-54]): this folder reused ids another copy of it also used.
public struct OwnFork: Sendable, Hashable {
    public var document: DocumentID
    /// nil: the document log.
    public var page: PageID?
    /// The forked replica id (this folder's, now or before a mint in the same sync).
    public var replica: ReplicaID
    /// The least counter whose operation differs: this folder's operations of `replica` from
    /// it on leave the log.
    public var from: UInt64
    /// What the other side holds, by counter: the first 16 bytes (or all 32) of the content
    /// hash of its version, where known. Decides which removed operations are made again.
    public var otherHashes: [UInt64: [UInt8]]
    /// The other side's operations of `replica` from `from` on, when the caller has them: they
    /// are received once this folder's versions are out.
    public var otherVersions: [Op]

    public init(document: DocumentID, page: PageID?, replica: ReplicaID, from: UInt64,
                otherHashes: [UInt64: [UInt8]] = [:], otherVersions: [Op] = []) {
        self.document = document
        self.page = page
        self.replica = replica
        self.from = from
        self.otherHashes = otherHashes
        self.otherVersions = otherVersions
    }
}

/// The operations one fork repair took out of one log.
public struct ForkRemoval: Sendable {
    public var document: DocumentID
    public var page: PageID?
    public var replica: ReplicaID
    /// Every operation removed, in log order (each is in the quarantine, [PKG-48]).
    public var removed: [Op]
    /// Those whose content the other side does not hold (it holds other content under their
    /// ids, or nothing): what must be made again under the new id. The others are the other
    /// side's own operations, received back.
    public var remake: [Op]
    /// The quarantine entries of `removed`.
    public var entries: [QuarantineEntry]
}

/// What `Notebook.repairOwnFork` did.
public struct ForkRepair: Sendable {
    /// The replica id minted first, when the forked id was this folder's current one.
    public var minted: ReplicaChange?
    public var removals: [ForkRemoval] = []
    /// The other side's versions stored once this folder's were out.
    public var received = 0
}

/// Makes removed operations again in an open document ([SYNC-54]): `Document.reauthor` (the
/// default, built on `Reauthor` of `LnoteReplication`), or a replacement.
public typealias ReauthorHook = @Sendable (ForkRemoval, Document) async throws -> RemadeOperations

extension Notebook {
    /// The default way to make removed operations again: `Document.reauthor`.
    public static let defaultReauthor: ReauthorHook = { removal, document in try await document.reauthor(removal) }

    /// Repairs forks of this folder's own operations ([SYNC-54]): mints a new replica id
    /// when a forked id is the current one (before anything else, so no new operation is
    /// made under it); moves this folder's operations of the forked replica, from the first
    /// forked counter on, out of each log into the quarantine ([PKG-48], [PKG-57]); rebuilds
    /// the affected pages and documents from what remains; then receives the other side's
    /// versions given in `otherVersions`.
    ///
    /// Nothing is made again here: `remake(_:with:)` does that, once the other side's
    /// versions are in (a caller that did not have them fetches them first: this folder's
    /// clock of the log is lower now).
    ///
    /// - Parameter remote: who the fork was found with (kept in the quarantine entries).
    /// - Returns: per log, the removed operations in log order, and which must be made again.
    public func repairOwnFork(_ forks: [OwnFork], remote: String) async throws -> ForkRepair {
        try checkOpen()
        var out = ForkRepair()
        var merged: [String: OwnFork] = [:]
        for f in forks {
            let key = "\(f.document)/\(f.page?.description ?? "-")/\(f.replica)"
            if var m = merged[key] {
                m.from = min(m.from, f.from)
                m.otherHashes.merge(f.otherHashes) { a, _ in a }
                m.otherVersions += f.otherVersions.filter { v in !m.otherVersions.contains { $0.id == v.id } }
                merged[key] = m
            } else {
                merged[key] = f
            }
        }
        let current = replica
        if merged.values.contains(where: { $0.replica == current }) {
            out.minted = try identity.remint(reason: "operations of replica \(current) fork from those \(remote) holds: "
                + "another copy of this folder wrote under the same id", repairingFork: true)
        }
        let time = options.now()
        let (folder, io, lock) = (path, io, notebookLock)
        for f in merged.values.sorted(by: { ($0.document, $0.page?.uuid.uuidString ?? "", $0.replica) < ($1.document, $1.page?.uuid.uuidString ?? "", $1.replica) }) {
            guard try holdsDocument(f.document) else { continue }
            var prefixes: [UInt64: [UInt8]] = f.otherHashes.mapValues { Array($0.prefix(16)) }
            var full: [UInt64: [UInt8]] = f.otherHashes.filter { $0.value.count == 32 }
            for v in f.otherVersions where v.id.replica == f.replica {
                let h = ContentHash.of(v)
                prefixes[v.id.counter] = Array(h.prefix(16))
                full[v.id.counter] = h
            }
            let (other, otherFull) = (prefixes, full)
            let entriesBox = EntriesBox()
            let gone = try await withDocument(f.document) { d in
                try await d.removeOperations(page: f.page, replica: f.replica, from: f.from) { frames in
                    var entries: [QuarantineEntry] = []
                    for lf in frames {
                        let id = OperationCodec.id(of: lf.frame)
                        let h = ContentHash.of(lf.frame)
                        let same = id.map { other[$0.counter] == Array(h.prefix(16)) } ?? false
                        var e = QuarantineEntry(
                            kind: .ownFork, time: time, remote: remote, document: f.document, page: f.page, operation: id,
                            reason: same ? "this replica's copy of an operation \(remote) holds identically; received from it again"
                                : "this replica's version of an operation whose id \(remote) holds with other content "
                                + "(or that follows one in the log); to be made again under a new replica id",
                            frame: lf.frame.encoded, hash: h, otherHash: id.flatMap { otherFull[$0.counter] })
                        if same { e.remadeAs = [] }
                        try Quarantine.write(e, notebook: folder, io: io, lock: lock)
                        entries.append(e)
                    }
                    entriesBox.set(entries)
                }
            }
            guard !gone.isEmpty else { continue }
            var removed: [Op] = [], remake: [Op] = []
            for lf in gone {
                guard let op = try? OperationCodec.decode(lf.frame) else { continue }
                removed.append(op)
                if other[op.id.counter] != Array(ContentHash.of(lf.frame).prefix(16)) { remake.append(op) }
            }
            out.removals.append(ForkRemoval(document: f.document, page: f.page, replica: f.replica, removed: removed,
                                            remake: remake, entries: entriesBox.get()))
            let versions = f.otherVersions.filter { $0.id.replica == f.replica && $0.id.counter >= f.from }
            if !versions.isEmpty {
                out.received += try await receive(versions, document: f.document, page: f.page, remote: remote).appended
            }
        }
        return out
    }

    /// The replica ids this folder replaced to repair a fork of its own operations, whose
    /// repair a sync began and did not finish (it was stopped): still this folder's own for
    /// the next sync, which resumes the repair ([SYNC-54]).
    public func unfinishedForkRepairs() throws -> [ReplicaID] {
        try checkOpen()
        return try identity.unfinishedRepairs()
    }

    /// The re-authoring left undone by a fork repair of `replicas` that a sync began and did
    /// not finish: per log, this folder's removed operations still waiting in the quarantine
    /// to be made again (`ownFork` entries without `remadeAs`), in log order. A sync that
    /// resumes the repair makes them again once the other side's versions are in ([SYNC-54]).
    public func pendingRemakes(of replicas: Set<ReplicaID>) throws -> [ForkRemoval] {
        try checkOpen()
        guard !replicas.isEmpty else { return [] }
        let (entries, _) = try Quarantine.list(notebook: path, io: io)
        var groups: [String: (key: (DocumentID, PageID?, ReplicaID), entries: [QuarantineEntry])] = [:]
        for (_, e) in entries where e.kind == .ownFork && e.remadeAs == nil && e.frame != nil {
            guard let id = e.operation, replicas.contains(id.replica) else { continue }
            let key = "\(e.document)/\(e.page?.description ?? "-")/\(id.replica)"
            groups[key, default: ((e.document, e.page, id.replica), [])].entries.append(e)
        }
        var out: [ForkRemoval] = []
        for key in groups.keys.sorted() {
            let g = groups[key]!
            // In log order: a replica's counters increase along its log.
            let ordered = g.entries.sorted { $0.operation!.counter < $1.operation!.counter }
            var ops: [Op] = [], kept: [QuarantineEntry] = []
            for e in ordered {
                guard let frame = try? Frame.decodeAll(e.frame!).first, let op = try? OperationCodec.decode(frame) else { continue }
                ops.append(op)
                kept.append(e)
            }
            guard !ops.isEmpty else { continue }
            out.append(ForkRemoval(document: g.key.0, page: g.key.1, replica: g.key.2, removed: ops, remake: ops, entries: kept))
        }
        return out
    }

    /// Records that the fork repairs of `replicas` finished (a sync that handled every fork
    /// it found ended): they are no longer this folder's own ([SYNC-54]).
    public func finishForkRepairs(_ replicas: Set<ReplicaID>) throws {
        try checkOpen()
        try identity.finishRepairs(replicas)
    }

    /// Makes the removed operations of a fork repair again with `hook` in the open document
    /// ([SYNC-54]), then records in each quarantine entry what remade it (`remadeAs`; an
    /// empty list for an operation with nothing left to act on).
    public func remake(_ removal: ForkRemoval, with hook: ReauthorHook) async throws -> RemadeOperations {
        guard !removal.remake.isEmpty else { return RemadeOperations() }
        // An operation the other side turned out to hold identically (its version, received
        // since, has the same content hash) is not made again: it is here already.
        let counters = removal.remake.map(\.id.counter)
        let from = counters.min()!, to = counters.max()!
        let held = try await withDocument(removal.document) {
            try await $0.contentHashes(page: removal.page, replica: removal.replica, from: from, to: to)
        }
        var todo = removal
        todo.remake = []
        for op in removal.remake {
            let i = Int(op.id.counter - from)
            if i < held.count, held[i] == Array(ContentHash.of(op).prefix(16)) {
                if let e = removal.entries.first(where: { $0.operation == op.id && $0.remadeAs == nil }) {
                    var s = e
                    s.reason += "; the other side holds it identically: received from it again"
                    try Quarantine.write(s, notebook: path, io: io, lock: notebookLock, replace: true)
                    try markRemade(s, as: [])
                }
            } else {
                todo.remake.append(op)
            }
        }
        guard !todo.remake.isEmpty else { return RemadeOperations() }
        let result = try await withDocument(removal.document) { d in try await hook(todo, d) }
        let made = Dictionary(result.made.map { ($0.old, $0.new) }, uniquingKeysWith: { a, _ in a })
        let skipped = Dictionary(result.skipped.map { ($0.op, $0.reason) }, uniquingKeysWith: { a, _ in a })
        for e in removal.entries where e.remadeAs == nil {
            guard let old = e.operation else { continue }
            if let n = made[old] {
                try markRemade(e, as: [n])
            } else if let why = skipped[old] {
                var s = e
                s.reason += "; not made again: \(why)"
                try Quarantine.write(s, notebook: path, io: io, lock: notebookLock, replace: true)
                try markRemade(s, as: [])
            }
        }
        return result
    }
}

/// Carries the entries written inside a document's call back out of it.
private final class EntriesBox: Sendable {
    private let entries = Mutex<[QuarantineEntry]>([])
    func set(_ e: [QuarantineEntry]) { entries.withLock { $0 = e } }
    func get() -> [QuarantineEntry] { entries.withLock { $0 } }
}
