import Foundation
import Testing
import LnoteModel
import LnoteTestSupport

/// `lnote relay stats` and `lnote relay copy` through the real binary (issue 17 item 4), on
/// SQLite files and databases of the test process's PostgreSQL cluster.
@Suite struct RelayOpsCLITests {
    static func json(_ text: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], "not a JSON object: \(text)")
    }

    /// `lnote relay --postgres URL --port 0`, once it printed its URL.
    static func startRelay(_ sb: Sandbox, _ args: [String]) async throws -> (child: Subprocess.Child, port: Int) {
        let child = try Subprocess.start(Subprocess.product("lnote"), ["relay"] + args + ["--port", "0"], directory: sb.path)
        guard await child.waitForOutput("url: ", seconds: 60), await child.waitForOutput("\n", seconds: 60),
              let line = child.outputSoFar.split(separator: "\n").first(where: { $0.hasPrefix("url: ") }),
              let port = line.split(separator: ":").last.flatMap({ Int($0) }) else {
            child.kill(SIGKILL)
            let r = await child.wait()
            throw LnoteError(.network, "lnote relay did not start: \(r.errText)")
        }
        return (child, port)
    }

    @Test("[issue 17] relay stats: table and --json on SQLite and PostgreSQL; relay processes counted while they run, gone after a clean stop")
    func stats() async throws {
        let cluster = try await PostgresCluster.shared()
        let (name, url) = try await cluster.createDatabase()
        let sb = try Sandbox("relay-stats")
        var children: [Subprocess.Child] = []
        do {
            try await Self.checkStats(sb, url, &children)
        } catch {
            for c in children { c.kill(SIGKILL); _ = await c.wait() }
            sb.remove()
            await cluster.dropDatabase(name)
            throw error
        }
        for c in children { c.kill(SIGKILL); _ = await c.wait() }
        sb.remove()
        await cluster.dropDatabase(name)
    }

    static func checkStats(_ sb: Sandbox, _ url: String, _ children: inout [Subprocess.Child]) async throws {
        for db in [["--db", "r.sqlite"], ["--postgres", url]] {
            let nb = try await sb.ok(["relay", "notebook", "create"] + db)
            _ = try await sb.ok(["relay", "notebook", "create"] + db)
            for d in ["a", "b", "c"] { _ = try await sb.ok(["relay", "token", "create"] + db + ["--notebook", nb, "--device", d]) }
            let text = try await sb.ok(["relay", "stats"] + db)
            let lines = text.split(separator: "\n").map(String.init)
            #expect(lines.first?.hasPrefix("relay stats of ") == true && lines.first?.contains("schema version 5") == true, "\(text)")
            #expect(lines.dropFirst().first?.split(separator: " ").map(String.init) == ["WHAT", "COUNT", "BYTES", "BYTES", "OF"],
                    "\(text)")
            #expect(lines.contains { $0.hasPrefix("notebooks") && $0.hasSuffix(" 2") }, "\(text)")
            #expect(lines.contains { $0.hasPrefix("tokens") && $0.contains(" 3 ") }, "\(text)")
            #expect(lines.contains { $0.hasPrefix("operations") && $0.contains(" 0 ") }, "\(text)")
            // Columns line up: every count ends in the same column as the header's COUNT.
            let countEnd = try #require(lines[1].range(of: "COUNT")?.upperBound).utf16Offset(in: lines[1])
            for l in lines[2...6] {
                let digits = l.prefix(countEnd)
                #expect(digits.last?.isNumber == true, "aligned: \(l)")
            }
            #expect(text.contains("watchers: 0 relay processes seen in the last 60 s, 0 long polls held"), "\(text)")
            let j = try json(try await sb.ok(["relay", "stats", "--json"] + db))
            #expect(j["notebooks"] as? Int == 2 && j["tokens"] as? Int == 3 && j["operations"] as? Int == 0, "\(j)")
            #expect(j["operationBytes"] as? Int == 0 && j["relayProcesses"] as? Int == 0 && j["longPolls"] as? Int == 0, "\(j)")
            #expect((j["processes"] as? [Any])?.isEmpty == true && j["windowSeconds"] as? Int == 60, "\(j)")
            #expect(j["location"] as? String != nil)
        }

        // Two relay processes on the PostgreSQL database: both counted, with their ports.
        let one = try await startRelay(sb, ["--postgres", url])
        children.append(one.child)
        let two = try await startRelay(sb, ["--postgres", url])
        children.append(two.child)
        var seen: [String: Any] = [:]
        for _ in 0..<100 {
            seen = try json(try await sb.ok("relay", "stats", "--postgres", url, "--json"))
            if seen["relayProcesses"] as? Int == 2 { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(seen["relayProcesses"] as? Int == 2, "\(seen)")
        let ports = Set(((seen["processes"] as? [[String: Any]]) ?? []).compactMap { $0["port"] as? Int })
        #expect(ports == [one.port, two.port], "\(seen)")
        let text = try await sb.ok("relay", "stats", "--postgres", url)
        #expect(text.contains("watchers: 2 relay processes seen in the last 60 s, 0 long polls held"), "\(text)")
        #expect(text.contains("HOST") && text.contains("LONG-POLLS") && text.contains(String(two.port)), "\(text)")

        // A clean stop deletes the process's row.
        one.child.kill(SIGTERM)
        #expect(await one.child.wait().code == 0)
        let after = try json(try await sb.ok("relay", "stats", "--postgres", url, "--json"))
        #expect(after["relayProcesses"] as? Int == 1, "\(after)")

        // A missing SQLite file is refused, not created.
        let missing = try await sb.run("relay", "stats", "--db", "nope.sqlite")
        #expect(missing.code != 0 && missing.err.contains("does not exist"), "\(missing)")
        #expect(!FileManager.default.fileExists(atPath: sb.path + "/nope.sqlite"))
        let help = try await sb.run("relay", "stats", "--help")
        #expect(help.code == 0 && help.out.contains("--json") && help.out.contains("longPolls"), "\(help)")
    }

    @Test("[issue 17] relay copy: SQLite to PostgreSQL verified (text and --json), back to SQLite; non-empty target and bad sources refused")
    func copy() async throws {
        let cluster = try await PostgresCluster.shared()
        let (name, url) = try await cluster.createDatabase()
        let (name2, url2) = try await cluster.createDatabase()
        let sb = try Sandbox("relay-copy")
        do {
            try await Self.checkCopy(sb, url, url2)
        } catch {
            sb.remove()
            await cluster.dropDatabase(name)
            await cluster.dropDatabase(name2)
            throw error
        }
        sb.remove()
        await cluster.dropDatabase(name)
        await cluster.dropDatabase(name2)
    }

    static func checkCopy(_ sb: Sandbox, _ url: String, _ url2: String) async throws {
        let nb = try await sb.ok("relay", "notebook", "create", "--db", "r.sqlite", "--name", "Field notes")
        let token = try await sb.ok("relay", "token", "create", "--db", "r.sqlite", "--notebook", nb, "--device", "desk")
        let text = try await sb.ok("relay", "copy", "--from", "r.sqlite", "--to", url)
        // [SYNC-85] The notebook's name goes with it.
        #expect(try await sb.ok("relay", "notebook", "list", "--postgres", url).hasSuffix("  Field notes"))
        #expect(text.hasPrefix("copied r.sqlite to "), "\(text)")
        #expect(text.contains("verified: every count and checksum is equal"), "\(text)")
        let lines = text.split(separator: "\n").map(String.init)
        #expect(lines.contains { $0.hasPrefix("TABLE") && $0.contains("SOURCE") && $0.contains("TARGET") }, "\(text)")
        #expect(lines.contains { $0.hasPrefix("notebooks") && $0.hasSuffix("1  ok") }, "\(text)")
        #expect(lines.contains { $0.hasPrefix("tokens") && $0.hasSuffix("1  ok") }, "\(text)")
        #expect(lines.contains { $0.hasPrefix(nb) && $0.hasSuffix("ok") }, "\(text)")
        // The token works on the copy (listed there, same id).
        let listed = try await sb.ok("relay", "token", "list", "--postgres", url, "--notebook", nb)
        #expect(listed.contains("desk"), "\(listed)")
        #expect(!token.isEmpty)

        // The same target again: refused, not touched.
        let again = try await sb.run("relay", "copy", "--from", "r.sqlite", "--to", url)
        #expect(again.code == 1 && again.err.contains("not empty") && again.err.contains("empty database"), "\(again)")
        #expect(try await sb.ok("relay", "notebook", "list", "--postgres", url).split(separator: "\n").count == 2, "a header and one notebook")

        // --json, PostgreSQL to a new SQLite file.
        let j = try json(try await sb.ok("relay", "copy", "--from", url, "--to", "back.sqlite", "--json"))
        #expect(j["verified"] as? Bool == true, "\(j)")
        let tables = (j["tables"] as? [[String: Any]]) ?? []
        #expect(tables.map { $0["table"] as? String } == ["notebooks", "tokens", "ops", "assets", "checkpoints", "owners", "chains"])
        #expect(tables.allSatisfy { $0["source"] as? Int == $0["target"] as? Int }, "\(tables)")
        #expect(((j["notebooks"] as? [[String: Any]]) ?? []).first?["id"] as? String == nb, "\(j)")
        #expect((j["differences"] as? [Any])?.isEmpty == true)
        let back = try await sb.ok("relay", "notebook", "list", "--db", "back.sqlite").split(separator: "\n").last
        #expect(back?.hasPrefix(nb) == true && back?.hasSuffix("  Field notes") == true, "\(String(describing: back))")

        // Bad sources: missing (not created), not a database, an empty PostgreSQL database.
        let missing = try await sb.run("relay", "copy", "--from", "missing.sqlite", "--to", url2)
        #expect(missing.code == 1 && missing.err.contains("missing.sqlite") && missing.err.contains("does not exist"), "\(missing)")
        #expect(!FileManager.default.fileExists(atPath: sb.path + "/missing.sqlite"))
        FileManager.default.createFile(atPath: sb.path + "/junk.sqlite", contents: Data(repeating: 0x5A, count: 4096))
        let junk = try await sb.run("relay", "copy", "--from", "junk.sqlite", "--to", "new.sqlite")
        #expect(junk.code == 1 && junk.err.contains("junk.sqlite"), "\(junk)")
        #expect(!FileManager.default.fileExists(atPath: sb.path + "/new.sqlite"), "the target was not created")
        let empty = try await sb.run("relay", "copy", "--from", url2, "--to", "new.sqlite")
        #expect(empty.code == 1 && empty.err.contains("holds no relay store"), "\(empty)")
        #expect(!FileManager.default.fileExists(atPath: sb.path + "/new.sqlite"), "the target was not created")
        // A source with a password: never printed.
        let away = try await sb.run("relay", "copy", "--from",
                                    "postgresql://lnote:pw-s3cret@/relay?host=/nonexistent-lnote-socket&connect_timeout=2",
                                    "--to", "new.sqlite")
        #expect(away.code == 1 && away.err.contains("cannot be reached") && !away.err.contains("s3cret"), "\(away)")
        let usage = try await sb.run("relay", "copy", "--from", "r.sqlite")
        #expect(usage.code == 2 && usage.err.contains("--to"), "\(usage)")
        let help = try await sb.run("relay", "copy", "--help")
        #expect(help.code == 0 && help.out.contains("--json") && help.out.contains("one transaction"), "\(help)")
    }
}

extension Sandbox {
    /// `ok` with the arguments in an array.
    @discardableResult
    func ok(_ args: [String], sourceLocation: SourceLocation = #_sourceLocation) async throws -> String {
        let r = try await run(args)
        guard r.code == 0 else {
            Issue.record("expected exit 0: \(r)", sourceLocation: sourceLocation)
            throw LnoteError(.invalidState, "lnote \(args.joined(separator: " ")) failed")
        }
        return r.out.hasSuffix("\n") ? String(r.out.dropLast()) : r.out
    }
}
