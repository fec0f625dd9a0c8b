import Foundation
import Testing
import LnoteModel
import LnoteReplication
import LnoteStore
import LnoteSync
import LnoteServer
import LnoteTestSupport

@Suite struct CompactionSyncTests {
    /// A replica that was away through ten compactions of another still receives every
    /// operation: compaction never drops what a peer far behind needs.
    @Test func aReplicaThatMissedTenCompactionsReceivesEverything() async throws {
        let dir = try TempDir()
        let docID = try await Fixture.notebook(at: dir.sub("A"), strokes: 5)
        // B syncs once at the start, then is away.
        let a0 = try await Notebook.open(at: dir.sub("A"), options: Fixture.quiet)
        let b0 = try await Notebook.open(at: dir.sub("B"), create: true, options: Fixture.quiet)
        _ = try await SyncSession(notebook: b0, remote: LocalRemote(key: "A", endpoint: NotebookEndpoint(notebook: a0))).run()
        try await b0.close()
        let d = try await a0.openDocument(docID)
        let page = await d.pageList[0].id
        var gen = HandwritingGenerator(seed: 5)
        for round in 0..<10 {
            let ids = try await d.addStrokes(gen.strokes(6), to: page)
            try await d.move([ids[0]], dx: Int32(round * 10), dy: 0, on: page)
            try await d.erase([ids[1]], on: page)
            try await d.eraseRange(ids[2], [PointRange(0, 3)], on: page)
            try await d.compact(page: page)
        }
        try await a0.close()
        let a = try await Notebook.open(at: dir.sub("A"), options: Fixture.quiet)
        let b = try await Notebook.open(at: dir.sub("B"), options: Fixture.quiet)
        let report = try await SyncSession(notebook: b, remote: LocalRemote(key: "A", endpoint: NotebookEndpoint(notebook: a))).run()
        #expect(report.opsReceived == 10 * 9)
        try await a.close()
        try await b.close()
        #expect(try await Fixture.canonical(dir.sub("A")) == Fixture.canonical(dir.sub("B")))
    }
}

@Suite struct ServerLifecycleTests {
    /// `lnote relay` and `lnote serve` stop cleanly on SIGTERM and SIGINT (exit 0) and
    /// release what they hold: the folder can be opened again at once.
    @Test func serversStopCleanlyOnSignals() async throws {
        let dir = try TempDir()
        _ = try await Fixture.notebook(at: dir.sub("A"), strokes: 2)
        for (args, sig) in [(["relay", "--db", dir.sub("r.sqlite")], SIGTERM), (["relay", "--db", dir.sub("r.sqlite")], SIGINT),
                            (["serve", dir.sub("A"), "--token", String(repeating: "7e", count: 16)], SIGTERM), (["serve", dir.sub("A")], SIGINT)] {
            let child = try Subprocess.start(Subprocess.product("lnote"), args)
            // It serves once it has printed its URL (signal handlers are installed by then).
            #expect(await child.waitForOutput("url: "), "\(args[0]) did not start")
            child.kill(sig)
            let r = await child.wait()
            #expect(r.status == 0, "\(args[0]) on signal \(sig): \(r.errText)")
            #expect(r.outText.contains("url: http://127.0.0.1:"), "\(r.outText)")
            #expect(r.errText.contains("stopped"), "\(r.errText)")
        }
        // The served folder was released: it opens again.
        let nb = try await Notebook.open(at: dir.sub("A"), options: Fixture.quiet)
        try await nb.close()
    }
}
