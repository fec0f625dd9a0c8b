import Foundation
import Testing
import LnoteModel
import LnoteReplication
import LnoteStore
import LnoteSync
import LnoteServer

/// [SYNC-59] Checkpoints uploaded to a real relay over HTTP are checked against the
/// operations it holds.
@Suite struct RelayTrustCheckpointTests {
    @Test("[SYNC-59] the issue's forged checkpoint (an empty page claiming {A: 1000000}) is 400 bad_checkpoint; a true one is kept")
    func forgedCheckpointOverHTTP() async throws {
        let dir = try TempDir()
        let relay = try LocalRelay(dir: dir)
        defer { relay.close() }
        _ = try await Fixture.notebook(at: dir.sub("A"), strokes: 6)
        try await Fixture.sync(dir.sub("A"), relay.url, token: relay.token)
        let a = try await RelayTrustOwnersTests.firstPage(dir.sub("A"))
        let client = try HTTPClient()
        defer { try? client.close() }
        func put(_ c: Checkpoint) async throws -> (Int, [String: Any]) {
            let page = c.log.page.map { $0.description } ?? c.log.document.description
            var req = HTTPRequest(method: "PUT", url: relay.url + "/documents/\(c.log.document)/checkpoints/\(page)", body: c.encoded())
            req.setBearerToken(relay.token)
            let r = try await client.send(req)
            return (r.status, (try? JSONSerialization.jsonObject(with: Data(r.body))) as? [String: Any] ?? [:])
        }
        let empty = PageSnapshot.encode(PageState(page: a.log.page!), coveredLogOffset: 0, logIncarnation: 0)
        #expect(try PageSnapshot.decode(empty).state == PageState(page: a.log.page!), "a valid empty page snapshot")
        let forged = Checkpoint(log: a.log, clock: VectorClock([(a.replica, UInt64(1_000_000))]), snapshot: empty)
        let (status, json) = try await put(forged)
        #expect(status == 400)
        #expect(json["error"] as? String == "bad_checkpoint")
        #expect((json["message"] as? String ?? "").contains(a.log.description), "\(json)")
        #expect(try relay.store.checkpoints(notebook: relay.notebook).isEmpty)
        // The HTTP client reports it as a 400 ([SYNC-22]).
        let remote = try HTTPRemote(url: relay.url, options: .init(token: relay.token))
        defer { try? remote.close() }
        await #expect(throws: LnoteError(.invalidArgument)) { try await remote.putCheckpoint(forged) }

        let genuine = Checkpoint(log: a.log, clock: a.state.clock,
                                 snapshot: PageSnapshot.encode(a.state, coveredLogOffset: 0, logIncarnation: 0))
        #expect(try await put(genuine).0 == 204)
        #expect(try relay.store.checkpoints(notebook: relay.notebook) == [genuine])
    }
}
