import Foundation
import Testing
import LnoteModel
import LnoteReplication
import LnoteStore
import LnoteSync
import LnoteServer
import LnoteTestSupport

/// Long polls against `lnote serve`'s server (`PeerServer`) with a real notebook folder:
/// woken by another client's push and by an append made through the served notebook (its
/// folder's logs growing, seen by inotify), and answered 503 when the server closes.
@Suite struct LivePollPeerTests {
    static func remote(_ url: String, _ token: String) throws -> HTTPRemote {
        var o = HTTPRemote.Options(token: token)
        o.retry.maxAttempts = 1
        return try HTTPRemote(url: url, options: o)
    }

    @Test("[SYNC-71] [SYNC-72] [SYNC-74] a peer server holds long polls: a push and an append through the served notebook wake them; close answers 503")
    func peerLongPoll() async throws {
        let seed = UInt64.random(in: 0...UInt64.max)
        print("LivePollPeerTests.peerLongPoll: seed \(seed)")
        var gen = HandwritingGenerator(seed: seed)
        let dir = try TempDir()
        let doc = try await Fixture.notebook(at: dir.sub("S"), strokes: 3, seed: seed)
        let served = try await Notebook.open(at: dir.sub("S"), options: Fixture.quiet)
        let token = RelayToken.generate()
        let signal = FolderLogSignal(folder: served.path)
        let server = try PeerServer(notebook: served, token: token, configuration: .init(perIPConnectionLimit: 0), changes: signal)
        #expect(signal.mode == "inotify")

        let b = try await Notebook.open(at: dir.sub("B"), create: true, options: Fixture.quiet)
        let c = try await Notebook.open(at: dir.sub("C"), create: true, options: Fixture.quiet)
        let rb = try Self.remote(server.url, token), rc = try Self.remote(server.url, token)
        let sb = SyncSession(notebook: b, remote: rb), sc = SyncSession(notebook: c, remote: rc)
        _ = try await sb.run()
        _ = try await sc.run()
        let page = try await b.openDocument(doc).pageList[0].id
        func count(_ nb: Notebook) async throws -> Int { try await nb.openDocument(doc).elements(page).count }
        #expect(try await count(b) == 3)

        // 1. Another client pushes: the held long poll is answered with its stroke.
        let q1 = try #require(try await sb.longPollRequest(wait: 30))
        let p1 = Task { try await rb.sync(q1) }
        #expect(await eventually { server.longPolls.waiting == 1 })
        _ = try await c.openDocument(doc).addStroke(gen.strokes(1)[0], to: page)
        _ = try await sc.run()
        let a1 = try await p1.value
        _ = try await sb.absorbLongPoll(a1, for: q1)
        #expect(try await count(b) == 4)

        // 2. The application serving the folder draws a stroke: its log grows, inotify says
        // so, the held long poll is answered with it.
        let q2 = try #require(try await sb.longPollRequest(wait: 30))
        let p2 = Task { try await rb.sync(q2) }
        #expect(await eventually { server.longPolls.waiting == 1 })
        let clock = ContinuousClock()
        _ = try await served.openDocument(doc).addStroke(gen.strokes(1)[0], to: page)
        let appended = clock.now
        let a2 = try await p2.value
        let latency = clock.now - appended
        // Woken by inotify (the signal's mode is checked above), not by a poll: how soon is a
        // figure, not a test.
        print("peer long poll answered \(latency) after a local append")
        _ = try await sb.absorbLongPoll(a2, for: q2)
        #expect(try await count(b) == 5)

        // 3. Closing the server answers a held long poll 503 `unavailable` (retried by clients).
        let q3 = try #require(try await sb.longPollRequest(wait: 30))
        let p3 = Task { try await rb.sync(q3) }
        #expect(await eventually { server.longPolls.waiting == 1 })
        try server.close()
        await #expect {
            _ = try await p3.value
        } throws: { e in
            (e as? LnoteError)?.code == .network && (e as? LnoteError)?.underlying == "HTTP 503 unavailable"
        }
        try? rb.close()
        try? rc.close()
        try await b.close()
        try await c.close()
        try await served.close()
    }
}
