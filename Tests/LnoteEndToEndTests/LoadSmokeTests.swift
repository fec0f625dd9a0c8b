import Foundation
import Testing
import LnoteTestSupport

/// `lnote-load` (scripts/load.sh) in small, in the test suite: a short run with one relay kill
/// passes its checks, and a relay that lost an acknowledged operation fails the run (the
/// checker can fail). The runs record no RELIABILITY.md row (LNOTE_REPORT_DIR emptied): only
/// the load runs of scripts/reliability.sh do.
@Suite struct LoadSmokeTests {
    static func load(_ extra: [String]) async throws -> Subprocess.Result {
        try await Subprocess.run(Subprocess.product("lnote-load"),
                                 ["--clients", "2", "--seconds", "3", "--kills", "1", "--lnote", Subprocess.product("lnote")] + extra,
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

    @Test func aRelayThatLostAnAcknowledgedOperationFailsTheRun() async throws {
        let r = try await Self.load(["--inject-loss"])
        defer { Self.removeKept(r) }
        #expect(r.status == 1, "\(r.outText)\(r.errText)")
        #expect(r.outText.contains("(at kills 1)"), "\(r.outText)")
        #expect(r.outText.contains("the relay's database lacks 1 acknowledged operations"), "\(r.outText)")
    }
}
