import Foundation
import Testing
import LnoteTestSupport

/// `lnote-load` (scripts/load.sh) in small, in the test suite: a short run with one relay kill
/// passes its checks, and a relay that lost an acknowledged operation fails the run (the
/// checker can fail). The runs record no RELIABILITY.md row (LNOTE_REPORT_DIR emptied): only
/// the load runs of scripts/reliability.sh do.
@Suite struct LoadSmokeTests {
    static func load(_ extra: [String], clients: Int = 2, seconds: Int = 3, kills: Int = 1) async throws -> Subprocess.Result {
        try await Subprocess.run(Subprocess.product("lnote-load"),
                                 ["--clients", String(clients), "--seconds", String(seconds), "--kills", String(kills),
                                  "--lnote", Subprocess.product("lnote")] + extra,
                                 environment: ["LNOTE_REPORT_DIR": ""])
    }

    /// A failed run keeps its files for a person to look at; the test removes them.
    static func removeKept(_ r: Subprocess.Result) {
        guard let line = r.outText.split(separator: "\n").first(where: { $0.contains("files kept in ") }),
              let range = line.range(of: "files kept in ") else { return }
        let path = String(line[range.upperBound...])
        if path.hasPrefix(FileManager.default.temporaryDirectory.path) { try? FileManager.default.removeItem(atPath: path) }
    }

    @Test func shortRunWithAKillPasses() async throws {
        let r = try await Self.load([])
        defer { Self.removeKept(r) }
        #expect(r.status == 0, "\(r.outText)\(r.errText)")
        #expect(r.outText.contains("kills 1, relay crashes 0"), "\(r.outText)")
        #expect(r.outText.contains("lost 0 (at kills 0), unexpected 0, divergent clients 0, corrupted 0, hung 0"), "\(r.outText)")
        #expect(r.outText.contains("sync latency ms (successful rounds): p50 "), "\(r.outText)")
    }

    /// Issue 17, in small (the soak is `scripts/load.sh --postgres --relays 3 --clients 8
    /// --seconds 30`): two relay processes on one PostgreSQL database started by lnote-load,
    /// clients picking one at random per round, two relay kills and a database restart.
    @Test func postgresRelaysWithKillsAndADatabaseRestartPass() async throws {
        let r = try await Self.load(["--postgres", "--relays", "2", "--db-restart"], seconds: 6, kills: 2)
        defer { Self.removeKept(r) }
        #expect(r.status == 0, "\(r.outText)\(r.errText)")
        #expect(r.outText.contains("kills 2, relay crashes 0"), "\(r.outText)")
        #expect(r.outText.contains("PostgreSQL: 2 relay processes"), "\(r.outText)")
        #expect(r.outText.contains("database restarts 1"), "\(r.outText)")
        #expect(r.outText.contains("lost 0 (at kills 0), unexpected 0, divergent clients 0, corrupted 0, hung 0"), "\(r.outText)")
    }

    @Test func aRelayThatLostAnAcknowledgedOperationFailsTheRun() async throws {
        let r = try await Self.load(["--inject-loss"])
        defer { Self.removeKept(r) }
        #expect(r.status == 1, "\(r.outText)\(r.errText)")
        #expect(r.outText.contains("(at kills 1)"), "\(r.outText)")
        #expect(r.outText.contains("the relay's database lacks 1 acknowledged operations"), "\(r.outText)")
    }
}
