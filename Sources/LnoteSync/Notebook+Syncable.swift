import LnoteModel
import LnoteReplication
import LnoteStore

/// A notebook folder is what the sync engine reads from and writes to.
extension Notebook: SyncableNotebook {
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

    /// Receives each document's log before its pages' logs, so that pages exist (their
    /// `addPage` applied) before their operations arrive.
    public func receive(_ batches: [LogBatch]) async throws -> Int {
        var appended = 0
        let ordered = batches.sorted { $0.log < $1.log }
        for batch in ordered {
            let ops = try batch.ops(path: "sync")
            let outcome = try await receive(ops, document: batch.log.document, page: batch.log.page)
            appended += outcome.appended
        }
        return appended
    }

    public func checkpointState(of log: LogRef) async throws -> PageState? {
        guard let page = log.page else { return nil }
        return try await checkpointState(document: log.document, page: page)
    }
}
