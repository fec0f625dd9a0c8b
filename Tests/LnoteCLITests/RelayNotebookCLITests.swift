import Foundation
import Testing
import LnoteModel
import LnoteTestSupport

/// Issue 18: `lnote relay notebook create --name`, names in `relay notebook list` (text and
/// --json), `relay notebook rename`, `relay notebook delete [--yes]`.
@Suite("Relay notebooks named and deleted")
struct RelayNotebookCLITests {
    @Test("[issue 18] [SYNC-85] create --name, list, rename, delete (refused while it holds operations, unless --yes)")
    func namedAndDeleted() async throws {
        let seed = testSeed()
        var rng = SplitMix64(seed: seed)
        let sb = try Sandbox("relay-names")
        defer { sb.remove() }
        let db = ["--db", sb.sub("r.sqlite")]
        let kitchen = try await sb.ok(["relay", "notebook", "create", "--name", "Kitchen ☕"] + db)
        let lab = try await sb.ok(["relay", "notebook", "create"] + db)
        let text = try await sb.ok(["relay", "notebook", "list"] + db)
        let rows = text.split(separator: "\n")
        #expect(rows.first?.hasSuffix("CURSOR  NAME") == true && rows.count == 3, "\(text)")
        #expect(rows.contains { $0.hasPrefix(kitchen) && $0.hasSuffix("  Kitchen ☕") } && rows.contains { $0.hasPrefix(lab) && $0.hasSuffix("  -") },
                "\(text)")
        try await sb.ok(["relay", "notebook", "rename", lab, "Lab notes"] + db)
        try await sb.ok(["relay", "notebook", "rename", kitchen, ""] + db)
        let json = try parseJSON(try await sb.ok(["relay", "notebook", "list", "--json"] + db)) as? [[String: Any]]
        let names = Dictionary(uniqueKeysWithValues: (json ?? []).compactMap { o in (o["id"] as? String).map { ($0, o["name"] as? String) } })
        #expect(names == [kitchen: "", lab: "Lab notes"], "\(String(describing: json))")

        // Usage errors (2): a bad name, a bad id; an unknown notebook (1).
        for args in [["relay", "notebook", "create", "--name", " padded"], ["relay", "notebook", "rename", lab, "two\nlines"],
                     ["relay", "notebook", "rename", "not-a-uuid", "x"], ["relay", "notebook", "delete", "nope"]] {
            let r = try await sb.run(args + db)
            #expect(r.code == 2 && !r.err.isEmpty, "\(r)")
        }
        let unknown = try await sb.run(["relay", "notebook", "delete", UUID().uuidString] + db)
        #expect(unknown.code == 1 && unknown.err.contains("no notebook"), "\(unknown)")

        // Lab notes gets operations through a real relay.
        try await sb.ok("init", "desk")
        let doc = try await sb.ok("new", "desk")
        let n = 3 + Int(rng.next() % 5)
        try sb.write("s.jsonl", strokeLines(count: n, rng: &rng))
        try await sb.ok("import", "desk", doc, "p1", sb.sub("s.jsonl"))
        let token = try await sb.ok(["relay", "token", "create", "--notebook", lab, "--device", "desk"] + db)
        let relay = try Subprocess.start(lnoteBinary, ["relay"] + db)
        defer { relay.kill(SIGTERM) }
        #expect(await relay.waitForOutput("url: "))
        try await Task.sleep(for: .milliseconds(50))
        let base = relay.outputSoFar.split(separator: "\n").first { $0.hasPrefix("url: ") }.map { String($0.dropFirst(5)) } ?? ""
        let pushed = try parseJSON(try await sb.ok("sync", "desk", "\(base)/v1/notebooks/\(lab)", "--token", token, "--json")) as? [String: Any]
        let ops = try #require(pushed?["ops_sent"] as? Int, "seed \(seed)")

        let refused = try await sb.run(["relay", "notebook", "delete", lab] + db)
        #expect(refused.code == 1 && refused.err.contains("holds \(ops) operations") && refused.err.contains("--yes"),
                "seed \(seed): \(refused)")
        let deleted = try await sb.run(["relay", "notebook", "delete", lab, "--yes"] + db)
        #expect(deleted.code == 0 && deleted.out == "deleted notebook \(lab) (Lab notes): \(ops) operations, 0 assets, 0 checkpoints, 1 token\n",
                "seed \(seed): \(deleted)")
        // Its device is refused from then on; the other notebook stays; an empty one goes without --yes.
        let after = try await sb.run("sync", "desk", "\(base)/v1/notebooks/\(lab)", "--token", token)
        #expect(after.code == 1 && after.err.contains("token"), "\(after)")
        try await sb.ok(["relay", "notebook", "delete", kitchen] + db)
        let empty = try await sb.run(["relay", "notebook", "list"] + db)
        #expect(empty.code == 0 && empty.out.isEmpty && empty.err.contains("no notebooks"), "\(empty)")
        relay.kill(SIGTERM)
        _ = await relay.wait()
    }
}
