import Foundation
import Testing
import LnoteModel
import LnoteTestSupport

/// The sync commands as a person runs them: `lnote sync` between folders, with `lnote serve`,
/// and through `lnote relay` with a notebook and token made by `lnote relay … create`.
@Suite struct CLISyncTests {
    let lnote = Subprocess.product("lnote")

    func run(_ args: String..., env: [String: String] = [:]) async throws -> Subprocess.Result {
        let r = try await Subprocess.run(lnote, args, environment: env)
        #expect(r.status == 0, "lnote \(args.joined(separator: " ")): \(r.errText)")
        return r
    }

    @Test func foldersPeerAndRelay() async throws {
        let dir = try TempDir()
        let strokes = dir.sub("s.jsonl")
        try Data("""
        {"points": [[0, 0, 0, 0.5], [10, 5, 4, 0.6], [20, 8, 8, null]]}
        {"points": [[30, 30], [31, 32], [33, 35], [36, 39]]}
        """.utf8).write(to: URL(fileURLWithPath: strokes))
        for f in ["A", "B", "C", "D"] { _ = try await run("init", dir.sub(f)) }
        let doc = try await run("new", dir.sub("A"), "--title", "Shared").outText.trimmingCharacters(in: .whitespacesAndNewlines)
        _ = try await run("import", dir.sub("A"), doc, "#1", strokes)

        // Folder to folder (a mounted drive).
        let folderSync = try await run("sync", dir.sub("A"), dir.sub("B"))
        #expect(folderSync.outText.contains("sent 4 operations"), "\(folderSync.outText)")
        let a = try await run("show", dir.sub("A"), doc, "--json").outText
        #expect(try await run("show", dir.sub("B"), doc, "--json").outText == a)

        // A peer server: B serves, C syncs from it with the printed URL and token.
        let serve = try Subprocess.start(lnote, ["serve", dir.sub("B")])
        #expect(await serve.waitForOutput("token: "))
        try await Task.sleep(for: .milliseconds(50))
        serve.kill(SIGTERM)
        let served = await serve.wait()
        let lines = served.outText.split(separator: "\n")
        let url = lines.first { $0.hasPrefix("url: ") }.map { String($0.dropFirst(5)) } ?? ""
        let token = lines.first { $0.hasPrefix("token: ") }.map { String($0.dropFirst(7)) } ?? ""
        let serve2 = try Subprocess.start(lnote, ["serve", dir.sub("B"), "--token", token,
                                                  "--port", String(URLComponents(string: url)?.port ?? 0)])
        #expect(await serve2.waitForOutput("url: "))
        _ = try await run("sync", dir.sub("C"), url, "--token", token)
        let wrong = try await Subprocess.run(lnote, ["sync", dir.sub("C"), url, "--token", "nope"])
        #expect(wrong.status == 1, "status \(wrong.code): \(wrong.errText)")
        #expect(wrong.errText.contains("unauthorized"), "\(wrong.errText)")
        serve2.kill(SIGINT)
        _ = await serve2.wait()
        #expect(try await run("show", dir.sub("C"), doc, "--json").outText == a)

        // A relay: a notebook and a token made on the command line.
        let db = dir.sub("relay.sqlite")
        let nb = try await run("relay", "notebook", "create", "--db", db).outText.trimmingCharacters(in: .whitespacesAndNewlines)
        let t = try await run("relay", "token", "create", "--db", db, "--notebook", nb, "--device", "laptop").outText.trimmingCharacters(in: .whitespacesAndNewlines)
        let relay = try Subprocess.start(lnote, ["relay", "--db", db])
        #expect(await relay.waitForOutput("url: "))
        try await Task.sleep(for: .milliseconds(20))
        let base = try await relayURL(relay)
        let notebookURL = "\(base)/v1/notebooks/\(nb)"
        let t2 = try await run("relay", "token", "create", "--db", db, "--notebook", nb, "--device", "desktop").outText
            .trimmingCharacters(in: .whitespacesAndNewlines)
        _ = try await run("sync", dir.sub("A"), notebookURL, env: ["LNOTE_TOKEN": t])
        _ = try await run("sync", dir.sub("D"), notebookURL, env: ["LNOTE_TOKEN": t2])
        relay.kill(SIGTERM)
        let relayResult = await relay.wait()
        #expect(relayResult.status == 0)
        #expect(try await run("show", dir.sub("D"), doc, "--json").outText == a)
        // [SYNC-57] [PKG-65] The relay named A's device: D's log says whose operations they are.
        let log = try await run("log", dir.sub("D"), doc, "#1").outText
        #expect(log.contains("(laptop)"), "\(log)")
        #expect(try await run("log", dir.sub("D"), doc, "#1", "--json").outText.contains("\"device\": \"laptop\""))
    }

    /// The relay prints `url: BASE` first; read it from what it printed so far.
    func relayURL(_ child: Subprocess.Child) async throws -> String {
        _ = await child.waitForOutput("\n")
        // The line is complete once a newline follows it.
        for _ in 0..<1000 {
            if let line = child.outputSoFar.split(separator: "\n").first(where: { $0.hasPrefix("url: ") }) {
                return String(line.dropFirst(5))
            }
            try await Task.sleep(for: .milliseconds(5))
        }
        throw LnoteError(.network, "relay printed no URL")
    }
}
