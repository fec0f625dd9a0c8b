import Foundation
import LnoteModel
import LnoteReplication

/// A page or the document as it was at a moment of its history, and the history itself
/// (merge-semantics.md §6). Read-only: nothing here writes.
extension Document {
    /// [MERGE-80] – [MERGE-82] The state of a page as of a moment: the operations of its log
    /// that the moment's cut covers, applied onto its checkpoint base when it has one.
    ///
    /// - Throws: `notFound` for a page the document does not know or an operation the log
    ///   does not hold; `invalidState` for a moment before the page's checkpoint base or one
    ///   that needs an operation the log lost. Never a state built from part of the moment.
    public func pageState(_ pid: PageID, at point: HistoryPoint) async throws -> PageState {
        let h = try pageHistory(pid)
        return try History.pageState(pid, at: point, ops: h.ops, applied: h.applied, base: try baseState(page: pid), log: h.path)
    }

    /// The clock of the state `pageState(_:at:)` answers for this moment (its cut).
    public func pageClock(_ pid: PageID, at point: HistoryPoint) async throws -> VectorClock {
        let h = try pageHistory(pid)
        let cut = History.cut(try History.clock(of: point, in: h.ops, applied: h.applied, log: h.path), in: h.ops, applied: h.applied)
        try History.check(cut, ops: h.ops, base: try baseClock(page: pid), log: h.path)
        return cut
    }

    /// [MERGE-83] The document log's state as of a moment (titles, pages and their order,
    /// deletions). For the document's pages as of a wall time, ask each page with the same
    /// `.wallTime`.
    public func documentState(at point: HistoryPoint) async throws -> DocumentState {
        let h = try documentHistory()
        return try History.documentState(id, at: point, ops: h.ops, applied: h.applied, log: h.path)
    }

    /// [MERGE-84] The steps of a page's log (or the document log's when `page` is nil), in
    /// log order, waiting operations included and marked.
    public func history(of page: PageID? = nil) async throws -> [HistoryStep] {
        let h = try page.map { try pageHistory($0) } ?? documentHistory()
        return History.steps(h.ops, applied: h.applied)
    }

    // MARK: - Reading a whole log

    private struct LogHistory {
        var ops: [Op]
        var applied: VectorClock
        var path: String
    }

    /// Every operation a page's log holds, decoded, with the applied clock read under the
    /// same lock (so the two agree even while another process appends).
    private func pageHistory(_ pid: PageID) throws -> LogHistory {
        try checkUsable()
        try refreshDocument()
        let (frames, applied, path) = try locked { () -> ([LoggedFrame], VectorClock, String) in
            let lp = try loadedPage(pid)
            return (try readAllFrames(lp), lp.replica.clock, lp.log.path)
        }
        return LogHistory(ops: Document.historyOperations(frames, page: true, path: path), applied: applied, path: path)
    }

    private func documentHistory() throws -> LogHistory {
        try checkUsable()
        try refreshDocument()
        let (frames, applied) = try locked { (try readAllDocumentFrames(), doc.clock) }
        return LogHistory(ops: Document.historyOperations(frames, page: false, path: docLog.path), applied: applied,
                          path: docLog.path)
    }

    /// The operations of a log's frames, each once, in log order. Frames that do not decode
    /// were reported when the log was opened ([PKG-39]) and are part of no state.
    static func historyOperations(_ frames: [LoggedFrame], page: Bool, path: String) -> [Op] {
        var seen = Set<OpID>()
        var out: [Op] = []
        out.reserveCapacity(frames.count)
        for f in frames {
            guard let op = try? OperationCodec.decode(f.frame, base: Int(f.offset) + Frame.headerSize + 1, path: path),
                  op.body.isPageOperation == page, seen.insert(op.id).inserted else { continue }
            out.append(op)
        }
        return out
    }
}
