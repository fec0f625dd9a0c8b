import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Testing
import LnoteModel
import LnoteTestSupport

/// `lnote relay … --postgres URL` and `lnote relay migrate` through the real binary, against
/// a database of the test process's PostgreSQL cluster (issue 17).
@Suite struct RelayPostgresCLITests {
    @Test("[issue 17] relay migrate, notebook, token and devices commands with --postgres; migrate with --db; clear errors")
    func postgresCommands() async throws {
        let cluster = try await PostgresCluster.shared()
        let (name, url) = try await cluster.createDatabase()
        let sb = try Sandbox("relay-pg")
        do {
            try await Self.check(sb, url)
        } catch {
            sb.remove()
            await cluster.dropDatabase(name)
            throw error
        }
        sb.remove()
        await cluster.dropDatabase(name)
    }

    static func check(_ sb: Sandbox, _ url: String) async throws {
        #expect(try await sb.ok("relay", "migrate", "--postgres", url).hasSuffix("created the relay schema, version 5"))
        #expect(try await sb.ok("relay", "migrate", "--postgres", url).hasSuffix("schema version 5 is current; nothing to do"))
        let nb = try await sb.ok("relay", "notebook", "create", "--postgres", url)
        #expect(UUID(uuidString: nb) != nil, "prints the notebook's id: \(nb)")
        let list = try await sb.ok("relay", "notebook", "list", "--postgres", url, "--pool-size", "1")
        let rows = list.split(separator: "\n").map { $0.split(separator: " ").map(String.init) }
        #expect(rows.first == ["ID", "OPS", "ASSETS", "CHECKPOINTS", "TOKENS", "CURSOR", "NAME"] && rows.count == 2
                && rows[1] == [nb, "0", "0", "0", "0", "0", "-"], "\(list)")
        let token = try await sb.ok("relay", "token", "create", "--postgres", url, "--notebook", nb, "--device", "tablet",
                                    "--label", "pg")
        #expect(token.count == 64)
        let tokens = try await sb.ok("relay", "token", "list", "--postgres", url, "--notebook", nb)
        #expect(tokens.contains("tablet") && tokens.contains("pg"), "\(tokens)")
        #expect(try await sb.ok("relay", "devices", "--postgres", url, "--notebook", nb).isEmpty)
        let id = try #require(tokens.split(separator: "\n").dropFirst().first?.split(separator: " ").first.map(String.init))
        try await sb.ok("relay", "token", "revoke", "--postgres", url, "--notebook", nb, id)
        #expect(try await sb.ok("relay", "token", "list", "--postgres", url, "--notebook", nb).isEmpty)
        #expect(try await sb.ok("relay", "epoch", "reset", "--postgres", url, "--notebook", nb).hasPrefix(nb))
        #expect(try await sb.ok("relay", "quarantine", "list", "--postgres", url).isEmpty)

        // SQLite stays the default backend, and migrate works on it too.
        #expect(try await sb.ok("relay", "migrate", "--db", "r.sqlite").hasSuffix("r.sqlite: created the relay schema, version 5"))
        #expect(try await sb.ok("relay", "migrate", "--db", "r.sqlite").hasSuffix("is current; nothing to do"))

        // Usage errors, and an unreachable server named without its password.
        let both = try await sb.run("relay", "migrate", "--db", "r.sqlite", "--postgres", url)
        #expect(both.code != 0 && both.err.contains("not both"), "\(both)")
        let neither = try await sb.run("relay", "notebook", "list")
        #expect(neither.code != 0 && neither.err.contains("--postgres URL is required"), "\(neither)")
        let away = try await sb.run("relay", "notebook", "list", "--postgres",
                                    "postgresql://lnote:pw-s3cret@/relay?host=/nonexistent-lnote-socket&connect_timeout=2")
        #expect(away.code != 0, "\(away)")
        #expect(away.err.contains("/nonexistent-lnote-socket") && away.err.contains("cannot be reached"), "\(away)")
        #expect(!away.err.contains("s3cret") && !away.out.contains("s3cret"), "\(away)")

        let help = try await sb.run("relay", "--help")
        #expect(help.code == 0 && help.out.contains("--postgres URL") && help.out.contains("--pool-size"), "\(help)")
        let migrateHelp = try await sb.run("relay", "migrate", "--help")
        #expect(migrateHelp.code == 0 && migrateHelp.out.contains("--postgres URL"), "\(migrateHelp)")
    }
}

/// Issue 18: the relay's lists as people and scripts read them.
@Suite("Relay lists: headers, --json, notebook URLs")
struct RelayListCLITests {
    @Test("[issue 18] notebook create --url prints the notebook URL; notebook and token lists have headers and --json")
    func lists() async throws {
        let sb = try Sandbox("relay-lists")
        defer { sb.remove() }
        let url = try await sb.ok("relay", "notebook", "create", "--db", "r.sqlite", "--url", "http://desk.local:8080")
        let nb = String(url.split(separator: "/").last ?? "")
        #expect(url == "http://desk.local:8080/v1/notebooks/\(nb)" && UUID(uuidString: nb) != nil, "\(url)")
        #expect(try await sb.run("relay", "notebook", "create", "--db", "r.sqlite", "--url", "desk:8080").code == 2)
        try await sb.ok("relay", "token", "create", "--db", "r.sqlite", "--notebook", nb, "--device", "laptop", "--expires", "30d")
        let list = try parseJSON(try await sb.ok("relay", "notebook", "list", "--db", "r.sqlite", "--json")) as? [[String: Any]]
        #expect(list?.count == 1 && list?.first?["id"] as? String == nb && list?.first?["tokens"] as? Int == 1, "\(String(describing: list))")
        let tokens = try parseJSON(try await sb.ok("relay", "token", "list", "--db", "r.sqlite", "--notebook", nb, "--json")) as? [[String: Any]]
        let t = tokens?.first
        #expect(tokens?.count == 1 && t?["device"] as? String == "laptop" && t?["expires"] as? Int != nil
                && t?["expired"] as? Bool == false && (t?["id"] as? String)?.count == 16, "\(String(describing: tokens))")
        let text = try await sb.ok("relay", "token", "list", "--db", "r.sqlite", "--notebook", nb)
        #expect(text.hasPrefix("ID  ") && text.contains("laptop"), "\(text)")
    }

    @Test("[issue 18] a mistyped --db is refused by the commands that read a relay, not made into an empty relay; a relay that cannot start removes the file it made")
    func noAccidentalDatabases() async throws {
        let sb = try Sandbox("relay-typo")
        defer { sb.remove() }
        for args in [["relay", "notebook", "list", "--db", "typo.sqlite"],
                     ["relay", "token", "create", "--db", "typo.sqlite", "--notebook", UUID().uuidString, "--device", "x"],
                     ["relay", "stats", "--db", "typo.sqlite"], ["relay", "quarantine", "list", "--db", "typo.sqlite"]] {
            let r = try await sb.run(args)
            #expect(r.code == 1 && r.err.contains("no relay database") && r.err.contains("typo.sqlite"), "\(r)")
        }
        #expect(!FileManager.default.fileExists(atPath: sb.sub("typo.sqlite")))
        // A busy port: the relay does not start, and leaves no database behind.
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(listener) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = 0
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &addr) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, len) == 0 && listen(listener, 1) == 0 && getsockname(listener, $0, &len) == 0 }
        }
        #expect(bound)
        let port = Int(UInt16(bigEndian: addr.sin_port))
        let busy = try await sb.run("relay", "--db", "fresh.sqlite", "--port", String(port))
        #expect(busy.code == 1, "\(busy)")
        #expect(!FileManager.default.fileExists(atPath: sb.sub("fresh.sqlite")) && !FileManager.default.fileExists(atPath: sb.sub("fresh.sqlite.hwm")))
    }
}
