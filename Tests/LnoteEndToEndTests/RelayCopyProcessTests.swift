import Foundation
import Testing
import LnoteModel
import LnoteStore
import LnoteServer
import LnoteSync
import LnoteTestSupport

/// A relay moved from SQLite to PostgreSQL with `lnote relay copy` (issue 17 item 4,
/// [SYNC-58]): clients that synced with the old relay keep syncing with the new one at the
/// same URL from where they were — nothing sent or downloaded again, no clock comparison —
/// and converge on the edits made after the move.
@Suite struct RelayCopyProcessTests {
    static func startRelay(_ args: [String], port: Int, notebook: String) async throws -> PostgresRelayProcessTests.Relay {
        var last = ""
        // The old relay's port may take a moment to be free again.
        for _ in 0..<50 {
            let child = try Subprocess.start(Subprocess.product("lnote"), ["relay"] + args + ["--port", String(port)])
            if await child.waitForOutput("url: ", seconds: 60), await child.waitForOutput("\n", seconds: 60),
               let line = child.outputSoFar.split(separator: "\n").first(where: { $0.hasPrefix("url: ") }) {
                return PostgresRelayProcessTests.Relay(child: child, url: "\(line.dropFirst(5))/v1/notebooks/\(notebook)")
            }
            child.kill(SIGKILL)
            last = await child.wait().errText
            try await Task.sleep(for: .milliseconds(100))
        }
        throw LnoteError(.network, "lnote relay \(args.joined(separator: " ")) did not start: \(last)")
    }

    @Test("[issue 17] [SYNC-58] sync with an SQLite relay, copy it to PostgreSQL, serve that at the same URL: clients continue without re-sending, converge")
    func clientsContinueAfterCopy() async throws {
        let cluster = try await PostgresCluster.shared()
        let (name, url) = try await cluster.createDatabase()
        let dir = try TempDir()
        var relays: [PostgresRelayProcessTests.Relay] = []
        do {
            try await Self.run(url, dir: dir, relays: &relays)
        } catch {
            for r in relays { r.child.kill(SIGKILL); _ = await r.child.wait() }
            await cluster.dropDatabase(name)
            throw error
        }
        for r in relays { r.child.kill(SIGKILL); _ = await r.child.wait() }
        await cluster.dropDatabase(name)
    }

    static func run(_ url: String, dir: TempDir, relays: inout [PostgresRelayProcessTests.Relay]) async throws {
        let lnote = Subprocess.product("lnote")
        let db = dir.sub("relay.sqlite")
        let made = try await Subprocess.run(lnote, ["relay", "notebook", "create", "--db", db])
        let notebook = made.outText.trimmingCharacters(in: .whitespacesAndNewlines)
        try #require(made.code == 0 && NotebookID(notebook) != nil, "\(made.errText)")
        func token(_ device: String) async throws -> String {
            let r = try await Subprocess.run(lnote, ["relay", "token", "create", "--db", db, "--notebook", notebook, "--device", device])
            try #require(r.code == 0, "\(r.errText)")
            return r.outText.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        let ta = try await token("a"), tb = try await token("b")
        let seed = UInt64.random(in: 1...1_000_000)

        // The old relay, on SQLite.
        let old = try await startRelay(["--db", db], port: 0, notebook: notebook)
        relays.append(old)
        let port = try #require(URLComponents(string: old.url)?.port)
        _ = try await Fixture.notebook(at: dir.sub("A"), strokes: 120, pages: 2, seed: seed)
        _ = try await Fixture.notebook(at: dir.sub("B"), strokes: 80, pages: 2, seed: seed + 1)
        try await Fixture.sync(dir.sub("A"), old.url, token: ta)
        try await Fixture.sync(dir.sub("B"), old.url, token: tb)
        try await Fixture.sync(dir.sub("A"), old.url, token: ta)
        try await PostgresRelayProcessTests.write(dir.sub("B"), strokes: 10, seed: seed + 2)
        try await Fixture.sync(dir.sub("B"), old.url, token: tb)
        let steady = try await Fixture.sync(dir.sub("A"), old.url, token: ta)
        // Operations per written stroke (the fixture writes to every document).
        let k = steady.opsReceived / 10
        #expect(k >= 1 && steady.opsReceived == 10 * k && steady.opsSent == 0, "seed \(seed): \(steady)")
        let quiet = try await Fixture.sync(dir.sub("A"), old.url, token: ta)
        #expect(quiet.opsSent == 0 && quiet.opsReceived == 0, "seed \(seed): \(quiet)")
        let before = try await Fixture.canonical(dir.sub("A"))
        #expect(try await Fixture.canonical(dir.sub("B")) == before, "seed \(seed)")

        // The move: stop, copy, serve the copy on PostgreSQL at the same URL.
        old.child.kill(SIGTERM)
        #expect(await old.child.wait().code == 0)
        let copied = try await Subprocess.run(lnote, ["relay", "copy", "--from", db, "--to", url])
        #expect(copied.code == 0 && copied.outText.contains("verified"), "\(copied.outText)\(copied.errText)")
        let new = try await startRelay(["--postgres", url, "--pool-size", "4"], port: port, notebook: notebook)
        relays.append(new)
        #expect(new.url == old.url)

        // A continues from its cursor: nothing sent, nothing received, no clock comparison
        // (the same exchanges as a quiet sync with the old relay).
        let a1 = try await Fixture.sync(dir.sub("A"), new.url, token: ta)
        #expect(a1.opsSent == 0 && a1.opsReceived == 0 && a1.roundTrips == quiet.roundTrips, "seed \(seed): \(a1) vs \(quiet)")
        #expect(a1.bytesReceived <= quiet.bytesReceived + 64, "no clocks downloaded: \(a1.bytesReceived) vs \(quiet.bytesReceived)")
        // B's new edits get sequences after every copied one: A's cursor finds exactly them.
        try await PostgresRelayProcessTests.write(dir.sub("B"), strokes: 30, seed: seed + 3)
        let b1 = try await Fixture.sync(dir.sub("B"), new.url, token: tb)
        #expect(b1.opsSent == 30 * k && b1.opsAccepted == 30 * k && b1.opsReceived == 0, "only the new edits: \(b1) (seed \(seed))")
        try await PostgresRelayProcessTests.write(dir.sub("A"), strokes: 5, seed: seed + 4)
        let a2 = try await Fixture.sync(dir.sub("A"), new.url, token: ta)
        #expect(a2.opsReceived == 30 * k && a2.opsSent == 5 * k, "seed \(seed): \(a2)")
        let b2 = try await Fixture.sync(dir.sub("B"), new.url, token: tb)
        #expect(b2.opsReceived == 5 * k && b2.opsSent == 0, "seed \(seed): \(b2)")
        let a = try await Fixture.canonical(dir.sub("A")), b = try await Fixture.canonical(dir.sub("B"))
        #expect(a == b, "A and B converge through the copied relay (seed \(seed))")
        #expect(a != before)

        // The stats of the new relay see it serving.
        let stats = try await Subprocess.run(lnote, ["relay", "stats", "--postgres", url])
        #expect(stats.code == 0 && stats.outText.contains("watchers: 1 relay process seen"), "\(stats.outText)\(stats.errText)")
        new.child.kill(SIGTERM)
        #expect(await new.child.wait().code == 0)
    }
}
