import Foundation
import LnoteModel
import LnoteReplication

/// A page or the document as it was at a moment of its history, and the history itself
/// (merge-semantics.md §6). Read-only: nothing here writes.
extension Document {
    /// [MERGE-80] – [MERGE-82] The state of a page as of a moment: the operations of its log
    /// that the moment's cut covers, applied onto the latest past snapshot the cut covers
    /// ([PKG-98]), else onto its checkpoint base when it has one, else onto an empty page.
    ///
    /// With `deferringPoints`, the strokes' points are read as opening a page reads them
    /// (`elementIDs`, [SNAP-38], [LOG-27]): every other field checked, the points decoded and
    /// checked on first use (`PageState.resolved()`, `Stroke.resolved()`). What needs only
    /// which elements there were, their erased ranges, transforms and order (a revert, a
    /// listing) asks for that; without it, every point is decoded.
    ///
    /// - Throws: `notFound` for a page the document does not know, or an operation the log
    ///   does not hold or has not applied; `invalidState` for a moment not above the page's
    ///   checkpoint base, or one that needs an operation the log lost or cannot decode.
    ///   Never a state built from part of the moment.
    public func pageState(_ pid: PageID, at point: HistoryPoint, deferringPoints: Bool = false) async throws -> PageState {
        let m = try pageMoment(pid, at: point, deferringPoints: deferringPoints)
        return try History.pageState(pid, at: .clock(m.cut), ops: m.ops, applied: m.applied, base: m.base, log: m.path,
                                     allowingDeferred: deferringPoints)
    }

    /// A moment of a page: its cut, found from the frames' headers alone, where it starts (the
    /// latest past snapshot the cut covers, [PKG-98], else the checkpoint base, else the empty
    /// page), and the operations of the cut above that start, decoded (on every core when
    /// they are many).
    /// Frames after the moment are never decoded. A frame of the cut that does not decode is
    /// left out, so `History.check` refuses the moment as needing an operation not held.
    private func pageMoment(_ pid: PageID, at point: HistoryPoint, deferringPoints: Bool)
        throws -> (cut: VectorClock, ops: [Op], applied: VectorClock, base: PageState?, path: String) {
        try checkUsable()
        try refreshDocument()
        // Only the clock and the log are needed: the page's own points stay deferred.
        let (frames, applied, path, incarnation) = try locked { () -> ([LoggedFrame], VectorClock, String, UInt64) in
            let lp = try loadedPageDeferred(pid)
            return (try readAllFrames(lp), lp.replica.clock, lp.log.path, lp.log.incarnation)
        }
        // [MERGE-80] Each id once: its first frame in the log whose header decodes as a page
        // operation's (later copies are kept aside: one with the same header stands in when
        // that first one's body does not decode). Frames of ids the wanted range leaves out
        // are never decoded.
        let ids = frames.map { f in OperationCodec.Kind(rawValue: f.frame.type)?.isPageKind == true ? OperationCodec.id(of: f.frame) : nil }
        func firstHeaders(_ wanted: (OpID) -> Bool) -> (headers: [OperationCodec.Header], frames: [LoggedFrame], spares: [OpID: [LoggedFrame]]) {
            var headers: [OperationCodec.Header] = []
            var chosen: [LoggedFrame] = []
            var spares: [OpID: [LoggedFrame]] = [:]
            var seen = OpIDTable()
            for (f, id) in zip(frames, ids) {
                guard let id, wanted(id) else { continue }
                if seen.contains(id) {
                    spares[id, default: []].append(f)
                    continue
                }
                guard let h = OperationCodec.header(of: f.frame) else { continue }
                seen.insert(id)
                headers.append(h)
                chosen.append(f)
            }
            return (headers, chosen, spares)
        }
        // The moment's clock. Only a wall time needs every frame's header.
        var clock: VectorClock
        switch point {
        case .clock(let c):
            clock = c
        case .operation(let id):
            clock = try History.clock(of: point, in: firstHeaders { $0 == id }.headers, applied: applied, log: path)
        case .wallTime:
            clock = try History.clock(of: point, in: firstHeaders { _ in true }.headers, applied: applied, log: path)
        }
        clock = clock.meet(applied)
        // [PKG-98] From the latest past snapshot the clock covers (a past state is closed, so
        // it is also under the cut), else the checkpoint base, else the empty page.
        let checkpoint = try baseState(page: pid)
        let base = try pastStart(pid, cut: clock, incarnation: incarnation, base: checkpoint?.clock,
                                 deferringPoints: deferringPoints) ?? checkpoint
        let baseClock = base?.clock ?? VectorClock()
        // Headers of what lies between the start and the clock: the cut and the decode need
        // nothing else (the cut never goes below a closed start).
        let between = firstHeaders { clock.covers($0) && !baseClock.covers($0) }
        let cut = History.cut(clock, in: between.headers, applied: applied)
        let needed = zip(between.headers, between.frames).filter { cut.covers($0.0.id) }
        var ops: [Op] = []
        ops.reserveCapacity(needed.count)
        for (h, result) in zip(needed.map(\.0), Document.decode(needed.map(\.1), path: path, deferringPoints: deferringPoints)) {
            if let op = try? result.get(), op.body.isPageOperation {
                ops.append(op)
                continue
            }
            // A first copy whose body does not decode: a later copy of the same id may.
            for f in between.spares[h.id] ?? [] {
                if let op = try? Document.decodeFrame(f, path: path, deferringPoints: deferringPoints),
                   op.context == h.context, op.wallTime == h.wallTime, op.body.isPageOperation {
                    ops.append(op)
                    break
                }
            }
        }
        lastMoment = (baseClock.total, ops.count)
        return (cut, ops, applied, base, path)
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
            let lp = try loadedPageDeferred(pid)
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

    /// The operations of a log's frames, each once, in log order, for its steps ([MERGE-84])
    /// and for the document log's moments. Frames that do not decode were reported when the
    /// log was opened ([PKG-39]) and are part of no state. A page log's strokes keep their
    /// points deferred ([LOG-27]): steps need only their counts.
    static func historyOperations(_ frames: [LoggedFrame], page: Bool, path: String) -> [Op] {
        var seen = OpIDTable(minimumCapacity: frames.count)
        var out: [Op] = []
        out.reserveCapacity(frames.count)
        for f in frames {
            guard let op = try? OperationCodec.decode(f.frame, base: f.payloadBase, path: path,
                                                      deferringPoints: page),
                  op.body.isPageOperation == page, seen.insert(op.id) else { continue }
            out.append(op)
        }
        return out
    }
}
