import Foundation
import LnoteModel
import LnoteReplication

/// Fork repair in a document ([PKG-57], sync-protocol.md [SYNC-54]): this replica's own
/// versions of forked operations leave its logs, the state is rebuilt from what remains, and
/// what they did is made again under a new replica id (`reauthor`).
extension Document {
    /// Moves every operation of `replica` with counter `from` or more out of a log: the
    /// operations are handed to `setAside` (which keeps them durably, [PKG-48]) before
    /// anything changes; then the snapshot that pairs with the log is set aside (removed, or
    /// kept as `<name>.corrupt-<n>` when the state held operations the log had lost, which a
    /// rebuild from the log cannot keep), the log is rewritten without them under a new
    /// incarnation ([PKG-57]), and the state is rebuilt from the log (onto the checkpoint base
    /// of a page installed from one, [PKG-46]).
    ///
    /// A crash at any point leaves the old log (the state then rebuilt from it, forks
    /// included, which the next sync finds again) or the new one; never a snapshot that holds
    /// what the log no longer has.
    ///
    /// - Returns: the removed frames, in log order.
    /// - Throws: `invalidState` when a checkpoint base covers `(replica, from)`: the state
    ///   holds it outside any log and a rebuild cannot take it out.
    func removeOperations(page pid: PageID?, replica r: ReplicaID, from: UInt64,
                          setAside: @Sendable ([LoggedFrame]) throws -> Void) async throws -> [LoggedFrame] {
        try checkUsable()
        let gone = try locked { try removeOperationsLocked(page: pid, replica: r, from: from, setAside: setAside) }
        if !gone.isEmpty { hub.publish([Change(kind: .reloaded, origin: .merge, document: id, page: pid)]) }
        return gone
    }

    /// `removeOperations` under the document lock: no other process appends to the log or
    /// reads it for a repair meanwhile, and each process that has the log open notices the
    /// new incarnation (a new inode) and reads it again ([PKG-87]).
    private func removeOperationsLocked(page pid: PageID?, replica r: ReplicaID, from: UInt64,
                                        setAside: @Sendable ([LoggedFrame]) throws -> Void) throws -> [LoggedFrame] {
        func split(_ frames: [LoggedFrame]) -> (gone: [LoggedFrame], keep: [LoggedFrame]) {
            var gone: [LoggedFrame] = [], keep: [LoggedFrame] = []
            for f in frames {
                if let id = OperationCodec.id(of: f.frame), id.replica == r, id.counter >= from { gone.append(f) } else { keep.append(f) }
            }
            return (gone, keep)
        }
        guard let pid else {
            try syncNow(.document, docLog)
            let (gone, keep) = split(try readAllDocumentFrames())
            guard !gone.isEmpty else { return [] }
            // A log that may not be written: refused before anything (quarantine, snapshot) moves.
            if let cause = docLog.readOnly { throw PageLog.readOnlyRefusal(path: docLog.path, cause: cause) }
            try setAside(gone)
            try setSnapshotAside(paths.document, keep: !docMissing.isEmpty)
            documentOnDisk = nil
            documentSource = ""
            try io.unlink(paths.documentMissing, missingOK: true)
            try docLog.rewrite(keeping: keep)
            var report = RecoveryReport(path: docLog.path)
            var pending: [OpID: UInt64] = [:]
            var next = DocumentReplica(id: id)
            try Document.feed(try docLog.readFrames(from: UInt64(LogHeader.size)), kind: .document, fromStart: true,
                              path: docLog.path, report: &report, pending: &pending) { try next.receive($0) }
            if !report.isClean { reports.append(report) }
            doc = next
            docPendingOffsets = pending
            docMissing = OpRanges()
            docLogIndex = nil
            manifestBasis = nil
            try saveDocumentFiles()
            return gone
        }
        if pages[pid] == nil, try !pageHasFiles(pid) { return [] }
        if let base = try baseClock(page: pid), base[r] >= from {
            throw LnoteError(.invalidState, "operation \(r).\(from) of page \(pid) is inside the checkpoint this page was installed "
                + "from (base clock \(base)); it cannot be taken out of the state", path: paths.base(pid))
        }
        let lp = try loadedPage(pid, allowUnknown: true)
        try syncNow(.page(pid), lp.log)
        let (gone, keep) = split(try readAllFrames(lp))
        guard !gone.isEmpty else { return [] }
        if let cause = lp.log.readOnly { throw PageLog.readOnlyRefusal(path: lp.log.path, cause: cause) }
        try setAside(gone)
        try setSnapshotAside(paths.content(pid), keep: !lp.missing.isEmpty)
        snapshotCounts[pid] = nil
        try io.unlink(paths.missing(pid), missingOK: true)
        try lp.log.rewrite(keeping: keep)
        pages[pid] = nil
        try lp.log.close()
        let rebuilt = try loadedPage(pid, allowUnknown: true)
        rebuilt.dirty = true
        return gone
    }

    /// Removes a snapshot durably, or keeps it as `<name>.corrupt-<n>` ([PKG-38]'s name for a
    /// copy kept for a person) when it holds what no log does.
    private func setSnapshotAside(_ path: String, keep: Bool) throws {
        guard try io.stat(path) != nil else { return }
        if keep {
            _ = try Document.quarantine(path, io: io)
        } else {
            try io.unlink(path)
            try DurableFile.syncDirectory(DurableFile.split(path).dir, io: io)
        }
    }

    /// Makes the operations of a fork repair again as new operations of this folder's
    /// current replica id ([SYNC-54]), with `Reauthor` (module `LnoteReplication`), on the
    /// state that remains (which holds the other side's versions once they were received),
    /// and appends them durably. What an add added is added again (a new element id), and the
    /// removed operations' later edits of it are made on the new one.
    ///
    /// - Returns: which old operation each new one remakes, and the old ones left out (with
    ///   why: nothing they act on is left).
    public func reauthor(_ removal: ForkRemoval) async throws -> RemadeOperations {
        try checkUsable()
        let ops = removal.remake
        guard !ops.isEmpty else { return RemadeOperations() }
        /// The folder's id as [PKG-84] step 1 read it under the lock: another process may have
        /// minted one since this call began ([PKG-89]).
        func currentReplica() throws -> ReplicaID {
            let me = try identity.writable()
            guard ops.allSatisfy({ $0.id.replica != me }) else {
                throw LnoteError(.invalidState, "the forked replica \(me) is still this folder's id: mint a new one first",
                                 path: paths.root)
            }
            return me
        }
        _ = try currentReplica()
        let outcome: Reauthor.Outcome
        if let pid = removal.page {
            let (made, lp) = try locked { () -> (Reauthor.Outcome, LoadedPage) in
                let me = try currentReplica()
                let lp = try loadedPage(pid, allowUnknown: true)
                let outcome = Reauthor.page(ops, on: &lp.replica, as: me, wallTime: now())
                try writeFrames(outcome.ops, to: lp)
                return (outcome, lp)
            }
            outcome = made
            try await finishAppend(to: lp)
            noteAssets(of: outcome.ops.compactMap(\.addedContent), page: pid)
            emitPageEvents(outcome.ops, lp, origin: .merge)
        } else {
            outcome = try locked { () -> Reauthor.Outcome in
                let me = try currentReplica()
                var next = doc
                var clocks: [PageID: VectorClock] = [:]
                for op in ops {
                    if case .deletePage(let p, _) = op.body { clocks[p] = try clockSeen(page: p, by: me) }
                }
                let outcome = Reauthor.document(ops, on: &next, as: me, wallTime: now()) { clocks[$0] ?? VectorClock() }
                if !outcome.ops.isEmpty {
                    origins?.register(outcome.ops.map(\.id), document: id, origin: .merge)
                    try docLog.write(encoded: outcome.ops.map(OperationCodec.encode))
                    doc = next
                    noteEdit()
                    try syncDocumentLog(forgetting: outcome.ops.map(\.id))
                }
                return outcome
            }
            if !outcome.ops.isEmpty {
                if options.groupCommit != nil {
                    do {
                        try await makeDurable(.document, docLog)
                    } catch let e as LnoteError {
                        documentLogFailed(e)
                        throw e
                    }
                }
                origins?.markDurable(outcome.ops.map(\.id), document: id)
                emitDocumentEvents(outcome.ops, origin: .merge)
            }
        }
        // `Reauthor` makes at most one operation per removed one, in order, and names those it
        // skips: the others are made, in order.
        let skipped = Set(outcome.skipped.map(\.op))
        var made: [(old: OpID, new: OpID)] = []
        var next = outcome.ops.makeIterator()
        for op in ops where !skipped.contains(op.id) {
            guard let n = next.next() else { break }
            made.append((op.id, n.id))
        }
        return RemadeOperations(made: made, skipped: outcome.skipped)
    }
}

/// What making removed operations again did (`Document.reauthor`).
public struct RemadeOperations: Sendable {
    /// Each old operation and the new one that remakes it.
    public var made: [(old: OpID, new: OpID)] = []
    /// Old operations that had nothing left to act on, with why.
    public var skipped: [(op: OpID, reason: String)] = []
    public init(made: [(old: OpID, new: OpID)] = [], skipped: [(op: OpID, reason: String)] = []) {
        self.made = made
        self.skipped = skipped
    }
}
