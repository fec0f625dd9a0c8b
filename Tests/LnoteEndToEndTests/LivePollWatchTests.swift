import Foundation
import Testing
import LnoteModel
import LnoteStore
import LnoteSync
import LnoteServer
import LnoteTestSupport

/// `lnote sync --watch` as a person runs it, as a process, against a relay on 127.0.0.1:
/// it says it started, brings another device's stroke within the latency budget, prints a
/// timestamped line per round that moved something, stops cleanly on SIGTERM, and exits 1
/// on what waiting cannot fix (a refused token, at start or revoked while it runs; its
/// folder gone).
@Suite(.serialized) struct LivePollWatchTests {
    let lnote = Subprocess.product("lnote")

    /// The sizes of the page logs under a folder.
    static func logBytes(_ folder: String) -> Int {
        var total = 0
        let fm = FileManager.default
        for package in (try? fm.contentsOfDirectory(atPath: folder)) ?? [] where package.hasSuffix(".lnote") && package != ".lnote" {
            for log in (try? fm.contentsOfDirectory(atPath: "\(folder)/\(package)/pages")) ?? [] where log.hasSuffix(".log") {
                total += ((try? fm.attributesOfItem(atPath: "\(folder)/\(package)/pages/\(log)"))?[.size] as? Int) ?? 0
            }
        }
        return total
    }

    /// Waits for the child to end, killing it after `seconds` (a watch that does not stop
    /// fails the test instead of hanging it).
    static func finish(_ child: Subprocess.Child, within seconds: Int64 = 20) async -> Subprocess.Result {
        let killer = Task {
            try? await Task.sleep(for: .seconds(seconds))
            if !Task.isCancelled { child.kill(SIGKILL) }
        }
        let r = await child.wait()
        killer.cancel()
        return r
    }

    /// Adds one stroke to the folder's document and syncs it with the relay, in this process.
    static func draw(_ folder: String, _ doc: DocumentID, _ gen: inout HandwritingGenerator, relay: String, token: String) async throws {
        let nb = try await Notebook.open(at: folder, options: Fixture.quiet)
        let d = try await nb.openDocument(doc)
        _ = try await d.addStroke(gen.strokes(1)[0], to: await d.pageList[0].id)
        try await nb.close()
        try await Fixture.sync(folder, relay, token: token)
    }

    @Test("[SYNC-75] lnote sync --watch: starts, brings a remote change within the budget, prints timestamped lines, stops on SIGTERM")
    func watchBringsRemoteChanges() async throws {
        let seed = UInt64.random(in: 0...UInt64.max)
        print("LivePollWatchTests.watchBringsRemoteChanges: seed \(seed)")
        var gen = HandwritingGenerator(seed: seed)
        let dir = try TempDir()
        let relay = try LocalRelay(dir: dir, configuration: .init(perIPConnectionLimit: 0))
        defer { relay.close() }
        let tokenA = try relay.store.createToken(notebook: relay.notebook, label: "a", device: "a")
        let tokenB = try relay.store.createToken(notebook: relay.notebook, label: "b", device: "b")
        let doc = try await Fixture.notebook(at: dir.sub("A"), strokes: 2, seed: seed)
        try await Fixture.sync(dir.sub("A"), relay.url, token: tokenA)
        try await Notebook.open(at: dir.sub("B"), create: true, options: Fixture.quiet).close()

        let watch = try Subprocess.start(lnote, ["sync", dir.sub("B"), relay.url, "--token", tokenB, "--watch"])
        #expect(await watch.waitForOutput("watching "), "no start line: \(watch.outputSoFar)")
        #expect(await watch.waitForOutput("(start)"), "the first round: \(watch.outputSoFar)")
        #expect(await eventually { relay.server.longPolls.waiting == 1 }, "the watch holds a long poll")

        var latencies: [Double] = []
        for _ in 0..<5 {
            let before = Self.logBytes(dir.sub("B"))
            try await Self.draw(dir.sub("A"), doc, &gen, relay: relay.url, token: tokenA)
            let pushed = ContinuousClock.now
            let arrived = await eventually(5) { Self.logBytes(dir.sub("B")) > before }
            let d = ContinuousClock.now - pushed
            latencies.append(Double(d.components.seconds) + Double(d.components.attoseconds) * 1e-18)
            #expect(arrived, "the stroke did not reach B: \(watch.outputSoFar)")
            #expect(await eventually { relay.server.longPolls.waiting == 1 }, "the next long poll is held")
        }
        let sorted = latencies.sorted()
        print("lnote sync --watch: A's push acknowledged → B's page log grew: \(latencies.map { "\(Int($0 * 1000)) ms" })")
        #expect(sorted[sorted.count / 2] < 0.15, "median \(sorted[sorted.count / 2]) s (budget: p50 150 ms)")
        #expect(sorted.last! < 0.5, "slowest \(sorted.last!) s (budget: p99 500 ms)")

        watch.kill(SIGTERM)
        let r = await Self.finish(watch, within: 10)
        #expect(r.status == 0, "\(r.errText)")
        #expect(r.errText.contains("stopped (SIGTERM)"))
        let lines = r.outText.split(separator: "\n").map(String.init)
        let stamp = #/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z /#
        #expect(lines.allSatisfy { $0.contains(stamp) }, "\(lines)")
        #expect(lines.first?.contains("watching \(dir.sub("B")) with \(relay.url): local changes by inotify, its changes by long polls of 50 s") == true,
                "\(lines.first ?? "")")
        #expect(lines.filter { $0.hasSuffix("(remote)") && $0.contains("received 1 operation (1 new here)") }.count == 5, "\(lines)")
        // Rounds that moved nothing print nothing: the start, the five strokes.
        #expect(lines.count == 7, "\(lines)")
        #expect(try await Fixture.canonical(dir.sub("B")) == Fixture.canonical(dir.sub("A")))
    }

    @Test("[SYNC-75] lnote sync --watch exits 1 on a 401: a wrong token at start, a token revoked while it runs")
    func watchStopsOnUnauthorized() async throws {
        let dir = try TempDir()
        let relay = try LocalRelay(dir: dir, configuration: .init(perIPConnectionLimit: 0))
        defer { relay.close() }
        let tokenA = try relay.store.createToken(notebook: relay.notebook, label: "a", device: "a")
        let tokenB = try relay.store.createToken(notebook: relay.notebook, label: "b", device: "b")
        let doc = try await Fixture.notebook(at: dir.sub("A"), strokes: 1)
        try await Fixture.sync(dir.sub("A"), relay.url, token: tokenA)
        try await Notebook.open(at: dir.sub("B"), create: true, options: Fixture.quiet).close()

        let wrong = String(repeating: "0", count: 64)
        let clock = ContinuousClock()
        let t0 = clock.now
        let refused = try await Subprocess.run(lnote, ["sync", dir.sub("B"), relay.url, "--token", wrong, "--watch"])
        #expect(refused.status == 1, "\(refused.errText)")
        #expect(refused.errText.contains("HTTP 401 unauthorized") && refused.errText.contains("stopping: waiting cannot fix this"),
                "\(refused.errText)")
        // The status is said once (it was both the message's and the cause's).
        #expect(refused.errText.components(separatedBy: "HTTP 401 unauthorized").count == 2, "\(refused.errText)")
        #expect(clock.now - t0 < .seconds(10))

        let watch = try Subprocess.start(lnote, ["sync", dir.sub("B"), relay.url, "--token", tokenB, "--watch"])
        #expect(await watch.waitForOutput("(start)"))
        #expect(await eventually { relay.server.longPolls.waiting == 1 })
        // Let a round the first one's own writes started (inotify) end before the token goes:
        // it would be refused first, and the change below never reach B.
        try await Task.sleep(for: .milliseconds(500))
        #expect(await eventually { relay.server.longPolls.waiting == 1 })
        let id = try #require(try relay.store.listTokens(notebook: relay.notebook).first { $0.device == "b" }?.id)
        try relay.store.revokeToken(notebook: relay.notebook, id: id)
        // A change answers the long poll; the next one is refused.
        var gen = HandwritingGenerator(seed: 1)
        try await Self.draw(dir.sub("A"), doc, &gen, relay: relay.url, token: tokenA)
        let r = await Self.finish(watch)
        #expect(r.status == 1, "\(r.errText)")
        #expect(r.errText.contains("HTTP 401 unauthorized") && r.errText.contains("stopping"), "\(r.errText)")
        #expect(r.outText.contains("received 1 operation (1 new here)"), "the change was stored before the refusal: \(r.outText)")
    }

    @Test("[SYNC-75] lnote sync --watch exits 1 when its folder is removed")
    func watchStopsWhenTheFolderGoes() async throws {
        let dir = try TempDir()
        let relay = try LocalRelay(dir: dir, configuration: .init(perIPConnectionLimit: 0))
        defer { relay.close() }
        let tokenB = try relay.store.createToken(notebook: relay.notebook, label: "b", device: "b")
        _ = try await Fixture.notebook(at: dir.sub("B"), strokes: 1)
        let watch = try Subprocess.start(lnote, ["sync", dir.sub("B"), relay.url, "--token", tokenB, "--watch"])
        #expect(await watch.waitForOutput("(start)"))
        // The watch may be writing in it while it goes (a round the removal started): remove
        // until it is gone.
        for _ in 0..<50 where FileManager.default.fileExists(atPath: dir.sub("B")) {
            _ = try await Subprocess.run("/bin/rm", ["-rf", dir.sub("B")])
        }
        #expect(!FileManager.default.fileExists(atPath: dir.sub("B")))
        let r = await Self.finish(watch)
        #expect(r.status == 1, "\(r.errText)")
        // "no notebook folder" once it is gone, "not a notebook folder" while only its
        // `.lnote/` is: the removal races with the round.
        #expect((r.errText.contains("no notebook folder") || r.errText.contains("not a notebook folder"))
                && r.errText.contains("stopping: waiting cannot fix this"), "\(r.errText)")
    }
}
