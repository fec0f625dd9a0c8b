import Foundation
import Testing
import LnoteModel
import LnoteStore
import LnoteSync
import LnoteServer
import LnoteTestSupport

/// [SYNC-7] Processes killed in the middle of a sync: the next sync converges.
@Suite struct KilledSyncTests {
    /// `lnote sync` is SIGKILLed at random instants; a final sync completes, and a fresh
    /// replica synced from the relay holds exactly the same notebook.
    @Test func clientKilledMidSync() async throws {
        let dir = try TempDir()
        let relay = try LocalRelay(dir: dir)
        defer { relay.close() }
        _ = try await Fixture.notebook(at: dir.sub("A"), strokes: 400, pages: 4)
        let seed = UInt64.random(in: 1...1_000_000)
        var rng = TestRNG(seed: seed)
        for round in 0..<6 {
            let child = try Subprocess.start(Subprocess.product("lnote"), ["sync", dir.sub("A"), relay.url, "--quiet"],
                                             environment: ["LNOTE_TOKEN": relay.token])
            try await Task.sleep(for: .milliseconds(Int.random(in: 0...250, using: &rng)))
            child.kill(SIGKILL)
            _ = await child.wait()
            _ = round
        }
        try await Fixture.sync(dir.sub("A"), relay.url, token: relay.token)
        try await Fixture.sync(dir.sub("B"), relay.url, token: relay.token)
        let a = try await Fixture.canonical(dir.sub("A")), b = try await Fixture.canonical(dir.sub("B"))
        #expect(a == b, "seed \(seed)")
        let verify = try await Notebook.open(at: dir.sub("A"), options: Fixture.quiet)
        let clean = try await verify.verify().isClean
        #expect(clean, "seed \(seed)")
        try await verify.close()
        // One case: six kills of the client, then the check that both replicas agree.
        ReliabilityReport.record(family: "sigkill rounds", detail: "lnote sync SIGKILLed 6 times mid-sync, then converged (KilledSyncTests, seed \(seed))",
                                 cases: 1, corrupted: a == b && clean ? 0 : 1)
    }

    /// The relay (`lnote relay`) is SIGKILLed while a client syncs; restarted on the same
    /// database, the next sync completes and everyone converges.
    @Test func serverKilledMidSync() async throws {
        let dir = try TempDir()
        let db = dir.sub("relay.sqlite")
        let store = try RelayStore(path: db)
        let notebook = try store.createNotebook()
        let token = try store.createToken(notebook: notebook, label: "t")
        try store.close()
        _ = try await Fixture.notebook(at: dir.sub("A"), strokes: 400, pages: 4)
        let seed = UInt64.random(in: 1...1_000_000)
        var rng = TestRNG(seed: seed)
        func startRelay() async throws -> (Subprocess.Child, String) {
            let child = try Subprocess.start(Subprocess.product("lnote"), ["relay", "--db", db])
            guard await child.waitForOutput("url: "), await child.waitForOutput("\n"),
                  let line = child.outputSoFar.split(separator: "\n").first(where: { $0.hasPrefix("url: ") }) else {
                throw LnoteError(.network, "relay did not start")
            }
            return (child, "\(line.dropFirst(5))/v1/notebooks/\(notebook.uuid.uuidString)")
        }
        for _ in 0..<4 {
            let (server, url) = try await startRelay()
            async let attempt: SyncReport? = try? Fixture.sync(dir.sub("A"), url, token: token)
            try await Task.sleep(for: .milliseconds(Int.random(in: 0...200, using: &rng)))
            server.kill(SIGKILL)
            _ = await server.wait()
            _ = await attempt
        }
        let (server, url) = try await startRelay()
        try await Fixture.sync(dir.sub("A"), url, token: token)
        try await Fixture.sync(dir.sub("B"), url, token: token)
        server.kill(SIGTERM)
        _ = await server.wait()
        let same = try await Fixture.canonical(dir.sub("A")) == Fixture.canonical(dir.sub("B"))
        #expect(same, "seed \(seed)")
        ReliabilityReport.record(family: "sigkill rounds", detail: "lnote relay SIGKILLed 4 times mid-sync, then converged (KilledSyncTests, seed \(seed))",
                                 cases: 1, corrupted: same ? 0 : 1)
    }
}
