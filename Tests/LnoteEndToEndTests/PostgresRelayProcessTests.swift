import Foundation
import Testing
import LnoteModel
import LnoteStore
import LnoteServer
import LnoteSync
import LnoteTestSupport

/// Two `lnote relay --postgres` processes on one database (issue 17): clients sync through
/// either, switch between them, and one relay is SIGKILLed mid-sync; the clients converge.
@Suite struct PostgresRelayProcessTests {
    /// A running `lnote relay` and the URL of the notebook on it.
    struct Relay {
        let child: Subprocess.Child
        let url: String
    }

    static func startRelay(_ databaseURL: String, notebook: String) async throws -> Relay {
        let child = try Subprocess.start(Subprocess.product("lnote"),
                                         ["relay", "--postgres", databaseURL, "--pool-size", "4", "--port", "0"])
        guard await child.waitForOutput("url: ", seconds: 60), await child.waitForOutput("\n", seconds: 60),
              let line = child.outputSoFar.split(separator: "\n").first(where: { $0.hasPrefix("url: ") }) else {
            child.kill(SIGKILL)
            let r = await child.wait()
            throw LnoteError(.network, "lnote relay --postgres did not start: \(r.errText)")
        }
        return Relay(child: child, url: "\(line.dropFirst(5))/v1/notebooks/\(notebook)")
    }

    /// Adds `count` generated strokes to the first page of every document of the folder.
    static func write(_ path: String, strokes count: Int, seed: UInt64) async throws {
        let nb = try await Notebook.open(at: path, options: Fixture.quiet)
        var gen = HandwritingGenerator(seed: seed)
        for id in try await nb.documentIDs() {
            let d = try await nb.openDocument(id)
            _ = try await d.addStrokes(gen.strokes(count), to: await d.pageList[0].id)
        }
        try await nb.close()
    }

    @Test("[issue 17] two relays on one PostgreSQL database: clients sync through either, switch, survive a SIGKILLed relay, converge")
    func twoRelaysOneDatabase() async throws {
        let cluster = try await PostgresCluster.shared()
        let (name, url) = try await cluster.createDatabase()
        let dir = try TempDir()
        var relays: [Relay] = []
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

    static func run(_ url: String, dir: TempDir, relays: inout [Relay]) async throws {
        let lnote = Subprocess.product("lnote")
        let migrated = try await Subprocess.run(lnote, ["relay", "migrate", "--postgres", url])
        #expect(migrated.code == 0, "\(migrated.errText)")
        let made = try await Subprocess.run(lnote, ["relay", "notebook", "create", "--postgres", url])
        let notebook = made.outText.trimmingCharacters(in: .whitespacesAndNewlines)
        try #require(made.code == 0 && NotebookID(notebook) != nil, "\(made.errText)")
        func token(_ device: String) async throws -> String {
            let r = try await Subprocess.run(lnote, ["relay", "token", "create", "--postgres", url, "--notebook", notebook,
                                                     "--device", device])
            try #require(r.code == 0, "\(r.errText)")
            return r.outText.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        let ta = try await token("a"), tb = try await token("b")

        relays.append(try await startRelay(url, notebook: notebook))
        relays.append(try await startRelay(url, notebook: notebook))
        let (one, two) = (relays[0], relays[1])
        let seed = UInt64.random(in: 1...1_000_000)
        var rng = TestRNG(seed: seed)

        // A through relay one, B through relay two: each sees the other's work.
        _ = try await Fixture.notebook(at: dir.sub("A"), strokes: 120, pages: 2, seed: seed)
        _ = try await Fixture.notebook(at: dir.sub("B"), strokes: 80, pages: 2, seed: seed + 1)
        try await Fixture.sync(dir.sub("A"), one.url, token: ta)
        try await Fixture.sync(dir.sub("B"), two.url, token: tb)
        try await Fixture.sync(dir.sub("A"), one.url, token: ta)
        #expect(try await Fixture.canonical(dir.sub("A")) == Fixture.canonical(dir.sub("B")), "seed \(seed)")

        // Switched: A through relay two, B through relay one.
        try await write(dir.sub("A"), strokes: 30, seed: seed + 2)
        try await write(dir.sub("B"), strokes: 30, seed: seed + 3)
        try await Fixture.sync(dir.sub("A"), two.url, token: ta)
        try await Fixture.sync(dir.sub("B"), one.url, token: tb)
        try await Fixture.sync(dir.sub("A"), two.url, token: ta)
        #expect(try await Fixture.canonical(dir.sub("A")) == Fixture.canonical(dir.sub("B")), "seed \(seed)")

        // Relay one is SIGKILLed while A pushes through it; A and B carry on through relay two.
        try await write(dir.sub("A"), strokes: 400, seed: seed + 4)
        async let attempt: SyncReport? = try? Fixture.sync(dir.sub("A"), one.url, token: ta)
        try await Task.sleep(for: .milliseconds(Int.random(in: 0...150, using: &rng)))
        one.child.kill(SIGKILL)
        _ = await one.child.wait()
        _ = await attempt
        try await write(dir.sub("B"), strokes: 20, seed: seed + 5)
        try await Fixture.sync(dir.sub("A"), two.url, token: ta)
        try await Fixture.sync(dir.sub("B"), two.url, token: tb)
        try await Fixture.sync(dir.sub("A"), two.url, token: ta)
        let a = try await Fixture.canonical(dir.sub("A")), b = try await Fixture.canonical(dir.sub("B"))
        #expect(a == b, "A and B converge after relay one was killed (seed \(seed))")
        #expect(a.contains("\"clock\""), "the canonical state holds the clocks")

        // A fresh client through the surviving relay gets the same notebook.
        try await Fixture.sync(dir.sub("C"), two.url, token: try await token("c"))
        #expect(try await Fixture.canonical(dir.sub("C")) == a, "seed \(seed)")

        two.child.kill(SIGTERM)
        let stopped = await two.child.wait()
        #expect(stopped.code == 0, "relay two stops cleanly on SIGTERM: \(stopped.errText)")
    }
}
