import Foundation
import Testing
import LnoteModel
import LnoteSQLite
import LnoteStore
import LnoteSync
import LnoteServer
import LnoteTestSupport

/// Tokens a person chooses for `lnote serve` ([SYNC-28]) and relay tokens that expire
/// ([SYNC-29]).
@Suite struct TokenStrengthAndExpiryTests {
    let lnote = Subprocess.product("lnote")

    /// [SYNC-28] The rule itself: 32 to 256 hex digits, either case; anything else is
    /// `.invalidArgument` naming the rule, and the message says how to make a good one.
    @Test func serverTokenStrengthRule() {
        let weak = ["abcde", "t0ken", "", String(repeating: "a", count: 31), String(repeating: "g", count: 40),
                    String(repeating: "a", count: 31) + " ", String(repeating: "a", count: 257),
                    "correct horse battery staple and more words"]
        for t in weak {
            #expect(throws: LnoteError(.invalidArgument), "\(t)") { try RelayToken.checkServerToken(t) }
            do { try RelayToken.checkServerToken(t) } catch let e as LnoteError {
                #expect(e.message.contains("32 to 256 hex digits") && e.message.contains("[SYNC-28]"), "\(t): \(e.message)")
                #expect(e.message.contains("openssl rand -hex 32"), "\(t)")
            } catch { Issue.record("\(t): \(error)") }
        }
        for t in [String(repeating: "a", count: 32), String(repeating: "F", count: 64), RelayToken.generate(),
                  String(repeating: "0", count: 256)] {
            #expect(throws: Never.self, "\(t)") { try RelayToken.checkServerToken(t) }
        }
        ReliabilityReport.record(family: "abuse", detail: "TokenStrengthAndExpiryTests.serverTokenStrengthRule: weak server tokens",
                                 cases: weak.count)
    }

    /// [SYNC-28] The library enforces the rule too: `PeerServer` refuses a weak token with
    /// `.invalidArgument` before it binds a port (so the folder it was given is not served),
    /// and serves with a strong one.
    @Test func peerServerRefusesAWeakToken() async throws {
        let dir = try TempDir()
        _ = try await Fixture.notebook(at: dir.sub("A"), strokes: 2)
        let served = try await Notebook.open(at: dir.sub("A"), options: Fixture.quiet)
        let weak = ["abc", String(repeating: "7", count: 31), String(repeating: "z", count: 40),
                    String(repeating: "ab", count: 16) + "-", String(repeating: "c", count: 257)]
        for t in weak {
            do {
                let server = try PeerServer(notebook: served, token: t)
                Issue.record("PeerServer accepted the token \"\(t)\" (\(t.utf8.count) bytes)")
                try server.close()
            } catch let e as LnoteError {
                #expect(e.code == .invalidArgument, "\(t): \(e)")
                #expect(e.message.contains("32 to 256 hex digits") && e.message.contains("[SYNC-28]"), "\(t): \(e.message)")
            }
        }
        let server = try PeerServer(notebook: served, token: String(repeating: "A1", count: 16))
        #expect(try await Fixture.sync(dir.sub("B"), server.url, token: String(repeating: "A1", count: 16)).opsReceived > 0)
        try server.close()
        try await served.close()
        ReliabilityReport.record(family: "abuse", detail: "TokenStrengthAndExpiryTests.peerServerRefusesAWeakToken: weak tokens given to PeerServer",
                                 cases: weak.count)
    }

    /// [SYNC-28] `lnote serve` refuses a short token from --token or $LNOTE_TOKEN (exit 2,
    /// nothing served) and starts with a token of 32 hex digits.
    @Test func serveRefusesAWeakToken() async throws {
        let dir = try TempDir()
        _ = try await Fixture.notebook(at: dir.sub("A"), strokes: 2)
        let short = try await Subprocess.run(lnote, ["serve", dir.sub("A"), "--token", "abcde"])
        #expect(short.status == 2, "\(short.errText)")
        #expect(short.errText.contains("--token: a token of 5 hex digits"), "\(short.errText)")
        #expect(short.errText.contains("openssl rand -hex 32"), "\(short.errText)")
        #expect(!short.outText.contains("url: "))
        let env = try await Subprocess.run(lnote, ["serve", dir.sub("A")], environment: ["LNOTE_TOKEN": "secret"])
        #expect(env.status == 2, "\(env.errText)")
        #expect(env.errText.contains("$LNOTE_TOKEN: a token of 6 characters, not all hex digits"), "\(env.errText)")
        let help = try await Subprocess.run(lnote, ["serve", "--help"])
        #expect(help.outText.contains("openssl rand -hex 32"), "\(help.outText)")

        let good = String(repeating: "a1", count: 16)
        let serve = try Subprocess.start(lnote, ["serve", dir.sub("A"), "--token", good])
        #expect(await serve.waitForOutput("url: "))
        serve.kill(SIGTERM)
        let r = await serve.wait()
        #expect(r.status == 0, "\(r.errText)")
        ReliabilityReport.record(family: "abuse", detail: "TokenStrengthAndExpiryTests.serveRefusesAWeakToken", cases: 2)
    }

    /// Sets a token's expiry in the file, as if its time had run out (no test waits for a clock).
    static func expire(db path: String, token: String, at ms: Int64) throws {
        let raw = try SQLiteDatabase(path: path)
        defer { try? raw.close() }
        try raw.execute("UPDATE tokens SET expires = ?1 WHERE digest = ?2", [.integer(ms), .blob(RelayToken.digest(token))])
    }

    /// [SYNC-29] A token made with --expires works until then; after it, every request is 401
    /// `token_expired` (for its notebook or another), nothing is read or written, the client
    /// reports it in words, and `relay token list` shows creation and expiry. A token without
    /// --expires never expires.
    @Test func relayTokensExpire() async throws {
        let dir = try TempDir()
        let db = dir.sub("relay.sqlite")
        let nb = try await Subprocess.run(lnote, ["relay", "notebook", "create", "--db", db]).outText
            .trimmingCharacters(in: .whitespacesAndNewlines)
        for bad in ["0d", "12", "h", "1.5h", "-3d", "99999999999w", "12s", "1y"] {
            let r = try await Subprocess.run(lnote, ["relay", "token", "create", "--db", db, "--notebook", nb,
                                                     "--device", "phone", "--expires", bad])
            #expect(r.status == 2, "--expires \(bad): \(r.errText)")
            #expect(r.errText.contains("--expires needs a whole number and a unit"), "\(r.errText)")
        }
        let expiring = try await Subprocess.run(lnote, ["relay", "token", "create", "--db", db, "--notebook", nb,
                                                        "--device", "phone", "--expires", "12h"]).outText
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let forever = try await Subprocess.run(lnote, ["relay", "token", "create", "--db", db, "--notebook", nb,
                                                       "--device", "laptop"]).outText
            .trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(RelayToken.isWellFormed(expiring) && RelayToken.isWellFormed(forever))

        let store = try RelayStore(path: db)
        let notebook = NotebookID(nb)!
        let listed = try store.listTokens(notebook: notebook)
        let phone = try #require(listed.first { $0.device == "phone" })
        let hours = Double(try #require(phone.expires) - phone.created) / 3_600_000
        #expect(abs(hours - 12) < 0.01, "\(hours)")
        #expect(listed.first { $0.device == "laptop" }?.expires == nil)
        let other = try store.createNotebook()
        try store.close()

        let lines = try await Subprocess.run(lnote, ["relay", "token", "list", "--db", db, "--notebook", nb]).outText
        let rows = lines.split(separator: "\n").map { $0.split(separator: " ").map(String.init) }
        #expect(rows.first == ["ID", "DEVICE", "CREATED", "EXPIRES", "LABEL"], "\(lines)")
        #expect(rows.contains { $0.count >= 4 && $0[1] == "phone" && $0[2].hasPrefix("20") && $0[3].hasPrefix("20") }, "\(lines)")
        #expect(rows.contains { $0.count >= 4 && $0[1] == "laptop" && $0[2].hasPrefix("20") && $0[3] == "never" }, "\(lines)")

        let relay = try Subprocess.start(lnote, ["relay", "--db", db])
        #expect(await relay.waitForOutput("url: "))
        let base = relay.outputSoFar.split(separator: "\n").first { $0.hasPrefix("url: ") }.map { String($0.dropFirst(5)) } ?? ""
        let url = "\(base)/v1/notebooks/\(nb)"
        _ = try await Fixture.notebook(at: dir.sub("A"), strokes: 3)
        // Before its expiry it works.
        try await Fixture.sync(dir.sub("A"), url, token: expiring)

        let past = Int64(Date().timeIntervalSince1970 * 1000) - 60_000
        try Self.expire(db: db, token: expiring, at: past)
        let client = try HTTPClient()
        defer { try? client.close() }
        var cases = 0
        for (name, target) in [("own notebook", url), ("another notebook", "\(base)/v1/notebooks/\(other)")] {
            var req = HTTPRequest.post(target + "/sync", body: SyncCodec.encode(SyncRequest(replica: ReplicaID(7), epoch: 0, cursor: 0)))
            req.setBearerToken(expiring)
            let r = try await client.send(req)
            let body = String(decoding: r.body, as: UTF8.self)
            #expect(r.status == 401, "\(name): \(r.status) \(body)")
            #expect(body.contains("\"error\":\"token_expired\"") && body.contains("expired at"), "\(name): \(body)")
            cases += 1
        }
        // The client says so in words; what B pushes with it is not stored.
        _ = try await Fixture.notebook(at: dir.sub("B"), strokes: 2, seed: 99)
        do {
            try await Fixture.sync(dir.sub("B"), url, token: expiring)
            Issue.record("an expired token synced")
        } catch let e as LnoteError {
            #expect(e.code == .unauthorized)
            #expect(e.description.contains("token_expired") && e.description.contains("expired at"), "\(e)")
        }
        let cli = try await Subprocess.run(lnote, ["sync", dir.sub("B"), url, "--token", expiring])
        #expect(cli.status == 1 && cli.errText.contains("this token expired at"), "\(cli.errText)")
        cases += 2
        // The token that never expires still works, and the notebook holds only what A pushed
        // while its token worked.
        try await Fixture.sync(dir.sub("D"), url, token: forever)
        relay.kill(SIGTERM)
        _ = await relay.wait()
        #expect(try await Fixture.canonical(dir.sub("D")) == Fixture.canonical(dir.sub("A")))
        let after = try await Subprocess.run(lnote, ["relay", "token", "list", "--db", db, "--notebook", nb]).outText
        #expect(after.contains("  expired 20"), "\(after)")
        ReliabilityReport.record(family: "abuse", detail: "TokenStrengthAndExpiryTests.relayTokensExpire: expired token requests",
                                 cases: cases)
    }

    /// [SYNC-29] A relay store of schema version 2 (no expiry column) opens, is upgraded to 3,
    /// and its tokens keep working, without expiry.
    @Test func version2StoreIsUpgradedAndItsTokensKeepWorking() async throws {
        let dir = try TempDir()
        let db = dir.sub("relay.sqlite")
        var store = try RelayStore(path: db)
        let nb = try store.createNotebook()
        let token = try store.createToken(notebook: nb, label: "old", device: "desk")
        try store.close()
        do {
            // Back to version 2 as that version wrote it.
            let raw = try SQLiteDatabase(path: db)
            defer { try? raw.close() }
            try raw.execute("ALTER TABLE tokens DROP COLUMN expires")
            try raw.execute("PRAGMA user_version = 2")
        }
        store = try RelayStore(path: db)
        defer { try? store.close() }
        #expect(store.opened.upgradedFrom == 2)
        #expect(try store.access(token: token, notebook: nb) == Access(.ok, device: "desk"))
        #expect(try store.listTokens(notebook: nb).map(\.expires) == [nil])
        let fresh = try store.createToken(notebook: nb, label: "", device: "phone", expiresIn: .seconds(3600))
        #expect(try store.access(token: fresh, notebook: nb) == Access(.ok, device: "phone"))
        #expect(throws: LnoteError(.invalidArgument)) { try store.createToken(notebook: nb, label: "", expiresIn: .zero) }
    }
}
