import Foundation
import LnoteModel

extension SyncSession {
    /// The long poll to send now ([SYNC-75]): a steady-state request from this folder's
    /// epoch and cursor at the remote, with no push and `wait` seconds.
    ///
    /// It reads the saved state and nothing else: the request can then be sent while other
    /// syncs run (`SyncWatcher` does), and its answer stored by `absorbLongPoll`.
    ///
    /// - Returns: nil when there is no cursor to wait from (never synced with this remote,
    ///   or a resync is due), or the remote holds no long polls: run a sync first.
    public func longPollRequest(wait: UInt32) async throws -> SyncRequest? {
        guard remote.supportsLongPolls, remote.cursorsOutliveProcess else { return nil }
        let state = RemoteState.decode(try await notebook.loadRemoteState(key: remote.key) ?? [])
        guard state.epoch != 0 else { return nil }
        return SyncRequest(replica: notebook.replicaID, epoch: state.epoch, cursor: state.cursor,
                           wait: min(max(wait, SyncCodec.waitRange.lowerBound), SyncCodec.waitRange.upperBound))
    }

    /// Stores the answer to a long poll made with `request` (`longPollRequest`): the pulled
    /// operations as a steady-state exchange stores them ([SYNC-60]: checked one by one,
    /// assets fetched first), and the answer's cursor.
    ///
    /// Other syncs may have run since the request was made. Its answer covers every change
    /// after the request's cursor, so saving the answer's cursor is safe whether it is ahead
    /// of or behind the cursor saved meanwhile (behind: some operations come again, and are
    /// dropped as duplicates). An answer of another epoch than the one saved now is not
    /// stored (a clock comparison happened meanwhile). A `resync`, or a fork found in the
    /// pull, forgets the cursor: `longPollRequest` then returns nil, and the next sync
    /// compares clocks (where forks are found again and handled, [SYNC-51]).
    ///
    /// - Returns: what was received (`roundTrips` 1).
    public func absorbLongPoll(_ answer: SyncResponse, for request: SyncRequest) async throws -> SyncReport {
        var report = SyncReport()
        report.roundTrips = 1
        var state = RemoteState.decode(try await notebook.loadRemoteState(key: remote.key) ?? [])
        guard state.epoch != 0, state.epoch == request.epoch else { return report }
        guard !answer.resync, answer.epoch == state.epoch else {
            state.epoch = 0
            state.cursor = 0
            try await notebook.saveRemoteState(state.encoded(), key: remote.key)
            return report
        }
        var run = SyncRun()
        _ = try await absorb(answer, into: &state, &run, &report, Tell(nil))
        report.documentsReceived = run.documentsReceived.count
        state.cursor = run.forks.isEmpty ? answer.cursor : 0
        if !run.forks.isEmpty { state.epoch = 0 }
        try await notebook.saveRemoteState(state.encoded(), key: remote.key)
        return report
    }
}
