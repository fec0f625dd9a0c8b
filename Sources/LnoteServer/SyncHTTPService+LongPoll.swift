import Foundation
import LnoteModel
import LnoteReplication
import LnoteSync

/// A held request was released because the server shuts down ([SYNC-74]): answered 503
/// `unavailable`, which the client retries.
struct ServerClosing: Error {}

extension SyncHTTPService {
    /// Answers a sync request, holding it while it carries `wait` and has nothing to answer
    /// ([SYNC-70], [SYNC-71]).
    ///
    /// The request is handled at once as without `wait`: its push stored, its errors thrown.
    /// When that answer has nothing for the client (`hasNothingNew`) and the request is a
    /// steady-state one (no `have`, no `hashRanges`), it is held until the notebook changes
    /// (`longPolls`), the wait (capped at `maxWait`) runs out, or the server closes. At each
    /// change the same request is answered again — as it would be if it arrived now: its
    /// push is held by then (sent again it is duplicates, and still left out of the pull;
    /// so it is not sent again: `pushedEarlier` names its ids), its `accepted` is the first
    /// answer's — and it is released as soon as that answer has something; when the wait
    /// runs out, that answer is sent whatever it holds.
    ///
    /// The version is read before each answer is computed, so a change that lands while
    /// one is computed wakes the next wait at once: none is missed.
    ///
    /// - Throws: what the endpoint throws; `ServerClosing` when the server shuts down.
    func answer(_ q: SyncRequest, from ep: any SyncEndpoint, notebook: UUID, holder: String? = nil) async throws -> SyncResponse {
        guard let polls = longPolls, let wait = q.wait, q.have == nil, q.hashRanges == nil else {
            return try await ep.sync(q)
        }
        let deadline = ContinuousClock.now + .seconds(Int64(min(wait, maxWait)))
        var seen = polls.version(of: notebook)
        let first = try await ep.sync(q)
        var latest = first
        var again = q
        if !q.push.isEmpty {
            again.pushedEarlier = q.pushedIDs
            again.push = []
        }
        while Self.hasNothingNew(latest, for: q) {
            let outcome = await polls.wait(notebook, after: seen, until: deadline, holder: holder)
            if outcome == .closing { throw ServerClosing() }
            seen = polls.version(of: notebook)
            latest = try await ep.sync(again)
            latest.accepted = first.accepted
            if outcome == .timedOut { break }
        }
        return latest
    }

    /// [SYNC-71] An answer that gives the client nothing it lacks: no resync, no fork, no
    /// clocks, digests or hashes, and no pulled operation authored by another replica than
    /// the client's own (those it sent itself, in another request; they are still sent when
    /// the request is released).
    static func hasNothingNew(_ a: SyncResponse, for q: SyncRequest) -> Bool {
        guard !a.resync, a.forks.isEmpty, a.clocks == nil, a.digests == nil, a.hashes == nil else { return false }
        return a.pull.allSatisfy { batch in
            batch.frames.allSatisfy { OperationCodec.id(of: $0)?.replica == q.replica }
        }
    }
}
