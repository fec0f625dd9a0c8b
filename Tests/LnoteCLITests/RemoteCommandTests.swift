import Foundation
import Testing
import LnoteModel
import LnoteStore
import LnoteTestSupport

/// Issue 18, "Remotes and serving": remotes saved by name ([PKG-101]), `lnote sync` with
/// the default one, `--init`, a served folder that keeps its URL and token ([PKG-102]),
/// and errors in words with the exit codes the help promises.
@Suite("Saved remotes, a stable peer server, errors in words")
struct RemoteCommandTests {
    /// Runs `lnote` with `directory` as the working directory.
    func run(_ sb: Sandbox, in directory: String, _ args: String..., env: [String: String] = [:]) async throws -> Run {
        let r = try await Subprocess.run(lnoteBinary, args, environment: env, directory: directory)
        return Run(args: args, code: r.code, out: r.outText, err: r.errText)
    }

    func strokes(_ sb: Sandbox, seed: UInt64, count: Int) throws -> String {
        var rng = SplitMix64(seed: seed)
        try sb.write("s\(seed).jsonl", strokeLines(count: count, rng: &rng))
        return sb.sub("s\(seed).jsonl")
    }

    @Test("[issue 18] two folders and a peer server kept in step through saved remotes, the default one by `lnote sync` alone")
    func twoFoldersThroughSavedRemotes() async throws {
        let seed = testSeed()
        let sb = try Sandbox("remotes")
        defer { sb.remove() }
        try await sb.ok("init", "laptop")
        let doc = try await sb.ok("new", "laptop", "--title", "Shared")
        try await sb.ok("import", "laptop", doc, "p1", try strokes(sb, seed: seed, count: 5))

        // A drive that is not a notebook yet: saved by name, made one by --init.
        let add = try await sb.run("remote", "add", "laptop", "usb", sb.sub("usb"))
        #expect(add.code == 0 && add.err.contains("--init"), "seed \(seed): \(add)")
        let refused = try await run(sb, in: sb.sub("laptop"), "sync")
        #expect(refused.code == 1 && refused.err.contains("add --init"), "seed \(seed): \(refused)")
        let first = try await run(sb, in: sb.sub("laptop"), "sync", "--init")
        #expect(first.code == 0 && first.err.contains("created the notebook folder"), "seed \(seed): \(first)")
        let laptop = try await sb.ok("show", "laptop", doc, "--json")
        #expect(try await sb.ok("show", "usb", doc, "--json") == laptop, "seed \(seed)")

        // A peer server for the usb folder: its URL and token saved on a third folder.
        try await sb.ok("init", "desktop")
        let serve = try Subprocess.start(lnoteBinary, ["serve", sb.sub("usb")])
        #expect(await serve.waitForOutput("token: "))
        try await Task.sleep(for: .milliseconds(50))
        let lines = serve.outputSoFar.split(separator: "\n")
        let url = lines.first { $0.hasPrefix("url: ") }.map { String($0.dropFirst(5)) } ?? ""
        let token = lines.first { $0.hasPrefix("token: ") }.map { String($0.dropFirst(7)) } ?? ""
        try await sb.ok("remote", "add", "desktop", "home", url, "--token", token)
        let pulled = try await sb.run("sync", "desktop", "home")
        #expect(pulled.code == 0, "seed \(seed): \(pulled)")
        serve.kill(SIGTERM)
        _ = await serve.wait()
        #expect(try await sb.ok("show", "desktop", doc, "--json") == laptop, "seed \(seed)")

        // The token is kept with mode 0600 and never printed back.
        let path = SavedRemotes.path(notebook: sb.sub("desktop"))
        let mode = (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)?.intValue
        #expect(mode == 0o600, "mode \(String(mode ?? 0, radix: 8))")
        let list = try await sb.run("remote", "list", "desktop")
        #expect(list.code == 0 && !list.out.contains(token) && !list.err.contains(token), "\(list)")
        #expect(list.lines.first?.hasPrefix("NAME") == true && list.out.contains("saved"), "\(list)")
        let json = try parseJSON(try await sb.ok("remote", "list", "desktop", "--json")) as? [String: Any]
        let entries = json?["remotes"] as? [[String: Any]]
        #expect(json?["default"] as? String == "home" && entries?.count == 1
                && entries?.first?["token_saved"] as? Bool == true && entries?.first?["location"] as? String == url, "\(String(describing: json))")

        // The server restarted keeps its port and token: the saved remote still works.
        try await sb.ok("import", "laptop", doc, "p1", try strokes(sb, seed: seed &+ 1, count: 3))
        try await sb.ok("sync", "laptop", "usb")
        let again = try Subprocess.start(lnoteBinary, ["serve", sb.sub("usb")])
        #expect(await again.waitForOutput("url: "))
        try await Task.sleep(for: .milliseconds(50))
        #expect(again.outputSoFar.contains("url: \(url)\n") && !again.outputSoFar.contains("token: "), "\(again.outputSoFar)")
        let second = try await run(sb, in: sb.sub("desktop"), "sync")
        #expect(second.code == 0 && second.out.contains("received"), "seed \(seed): \(second)")
        again.kill(SIGINT)
        _ = await again.wait()
        #expect(try await sb.ok("show", "desktop", doc, "--json") == (try await sb.ok("show", "laptop", doc, "--json")), "seed \(seed)")

        // --new-token: a new token printed; the saved one is refused, in words.
        let rotated = try Subprocess.start(lnoteBinary, ["serve", sb.sub("usb"), "--new-token"])
        #expect(await rotated.waitForOutput("token: "))
        try await Task.sleep(for: .milliseconds(50))
        let old = try await run(sb, in: sb.sub("desktop"), "sync", "home")
        rotated.kill(SIGTERM)
        _ = await rotated.wait()
        #expect(old.code == 1 && old.err.contains("unauthorized") && old.err.contains("token"), "\(old)")
        #expect(!rotated.outputSoFar.contains("token: \(token)"))

        // Removing the default makes the next one the default; none left: a usage error in words.
        try await sb.ok("remote", "remove", "desktop", "home")
        let none = try await run(sb, in: sb.sub("desktop"), "sync")
        #expect(none.code == 2 && none.err.contains("lnote remote add"), "\(none)")
    }

    @Test("[issue 18] a damaged saved-remotes file is refused by name, and left as it was")
    func damagedFile() async throws {
        let sb = try Sandbox("remotes-bad")
        defer { sb.remove() }
        try await sb.ok("init", "nb")
        let path = SavedRemotes.path(notebook: sb.sub("nb"))
        let remote = { (name: String, location: String, token: String?) in
            "{\"added\": 1, \"location\": \"\(location)\", \"name\": \"\(name)\"" + (token.map { ", \"token\": \"\($0)\"" } ?? "") + "}"
        }
        for bad in ["{\"format\": 1, \"remotes\": [{\"name\": \"a\"}]}", "not json", "{\"format\": 9, \"remotes\": []}",
                    "{\"format\": 1, \"default\": \"x\", \"remotes\": []}",
                    // [PKG-101]: remotes but no default; a relative folder; a token for a folder; a token with a space.
                    "{\"format\": 1, \"remotes\": [\(remote("a", "/x", nil))]}",
                    "{\"default\": \"a\", \"format\": 1, \"remotes\": [\(remote("a", "drive", nil))]}",
                    "{\"default\": \"a\", \"format\": 1, \"remotes\": [\(remote("a", "/x", "t"))]}",
                    "{\"default\": \"a\", \"format\": 1, \"remotes\": [\(remote("a", "http://h:1/v1/notebooks/x", "a b"))]}"] {
            try Data(bad.utf8).write(to: URL(fileURLWithPath: path))
            for args in [["remote", "list", "nb"], ["remote", "add", "nb", "b", sb.sub("other")], ["sync", "nb"]] {
                let r = try await sb.run(args)
                #expect(r.code == 1 && r.err.contains(".lnote/saved-remotes.json") && r.err.contains("remove it"), "\(bad): \(r)")
                #expect(String(decoding: try Data(contentsOf: URL(fileURLWithPath: path)), as: UTF8.self) == bad)
            }
        }
    }

    @Test("[issue 18] `lnote sync NAME --init` in a folder syncs with the saved remote NAME; $LNOTE_TOKEN never goes to a saved remote's server")
    func savedNameAndTokens() async throws {
        let sb = try Sandbox("remotes-init")
        defer { sb.remove() }
        try await sb.ok("init", "nb")
        try await sb.ok("remote", "add", "nb", "usb", sb.sub("usb"))
        let r = try await run(sb, in: sb.sub("nb"), "sync", "usb", "--init")
        #expect(r.code == 0 && FileManager.default.fileExists(atPath: sb.sub("usb/.lnote")), "\(r)")
        #expect(!FileManager.default.fileExists(atPath: sb.sub("nb/usb")), "no stray folder named after the remote")
        // A saved URL without a token: $LNOTE_TOKEN is not sent there.
        try await sb.ok("remote", "add", "nb", "far", "http://127.0.0.1:9/v1/notebooks/00000000-0000-0000-0000-000000000001")
        let far = try await run(sb, in: sb.sub("nb"), "sync", "far", env: ["LNOTE_TOKEN": String(repeating: "ab", count: 32)])
        #expect(far.code == 2 && far.err.contains("token is needed"), "\(far)")
    }

    @Test("[issue 18] SavedRemotes: names checked, one default while any is saved, the file read back equal (seeded)")
    func savedRemotesModel() throws {
        let seed = testSeed()
        var rng = SplitMix64(seed: seed)
        let dir = try Sandbox("remotes-model")
        defer { dir.remove() }
        try FileManager.default.createDirectory(atPath: dir.sub("nb/.lnote"), withIntermediateDirectories: true)
        var model: [String] = []
        var modelDefault: String?
        for step in 0..<200 {
            let name = ["a", "b", "c", "d", "e"][Int(rng.next() % 5)]
            let action = rng.next() % 3
            let result: Result<Void, LnoteError> = Result {
                try SavedRemotes.update(notebook: dir.sub("nb")) { r in
                    switch action {
                    case 0: try r.add(SavedRemote(name: name, location: "/x/\(name)", added: Int64(step)), makeDefault: rng.next() % 4 == 0)
                    case 1: try r.remove(name)
                    default: try r.setDefault(name)
                    }
                }
            }.mapError { $0 as! LnoteError }
            let exists = model.contains(name)
            switch (action, result) {
            case (0, .success): #expect(!exists, "seed \(seed) step \(step)"); model.append(name)
            case (0, .failure(let e)): #expect(exists && e.code == .alreadyExists, "seed \(seed) step \(step)")
            case (1, .success): #expect(exists, "seed \(seed) step \(step)"); model.removeAll { $0 == name }
            case (1, .failure(let e)), (2, .failure(let e)): #expect(!exists && e.code == .notFound, "seed \(seed) step \(step)")
            default: #expect(exists, "seed \(seed) step \(step)"); modelDefault = name
            }
            let loaded = try SavedRemotes.load(notebook: dir.sub("nb"))
            #expect(loaded.remotes.map { $0.name } == model, "seed \(seed) step \(step)")
            // One default exactly while any remote is saved.
            #expect((loaded.defaultName == nil) == model.isEmpty, "seed \(seed) step \(step)")
            if let d = loaded.defaultName { #expect(model.contains(d)) }
            if action == 2, case .success = result { #expect(loaded.defaultName == modelDefault) }
        }
        for bad in ["", ".x", "-x", "a b", "a/b", String(repeating: "x", count: 65), "é"] {
            #expect(throws: LnoteError.self) { try SavedRemotes.checkName(bad) }
        }
    }

    @Test("[issue 18] errors say what happened in words (no internal code names); bad arguments exit 2, a missing file 1")
    func errorsInWords() async throws {
        let sb = try Sandbox("words")
        defer { sb.remove() }
        try await sb.ok("init", "nb")
        let doc = try await sb.ok("new", "nb", "--title", "T")
        let codeName = try Regex(#"\b(notFound|invalidState|invalidArgument|io|corrupt|truncated|alreadyExists|limitExceeded|unsupportedVersion|protocolMismatch|database|network):"#)
        let cases: [([String], Int32, String)] = [
            (["show", "nb", "nosuchdoc"], 1, "no document"),
            (["show", "nb", doc, "#0"], 2, "p1, p2"),
            (["show", "nb", doc, "p0"], 2, "p1, p2"),
            (["show", "nb", doc, "#-1"], 2, "p1, p2"),
            (["show", "nb", doc, "p9"], 1, "no page p9"),
            (["thumbnail", "nb", doc, "p1", "--out", "/nonexistent-dir/x.png"], 1, "does not exist"),
            (["sync", "nb", "ftp://x"], 2, "http:// or https://"),
            (["sync", "nb", "nb"], 2, "same folder"),
            (["sync", "nb", sb.sub("nowhere")], 1, "--init"),
            (["show", sb.sub("nowhere"), doc], 1, "lnote init"),
            (["replay", sb.sub("missing.json")], 1, "no scenario file"),
            (["replay", sb.sub("missing.json"), "--transport", "ftp"], 2, "unknown --transport"),
            (["init", "nb"], 1, "already a notebook folder"),
        ]
        for (args, code, words) in cases {
            let r = try await sb.run(args)
            #expect(r.code == code && r.err.contains(words), "\(r)")
            #expect(r.err.firstMatch(of: codeName) == nil, "an internal code name: \(r)")
            #expect(!r.err.contains("Error Domain="), "a raw NSError: \(r)")
        }
        // p1 and '#1' name the same page.
        #expect(try await sb.ok("show", "nb", doc, "p1", "--json") == (try await sb.ok("show", "nb", doc, "#1", "--json")))
    }
}

/// Issue 18: `--json` on the commands a script reads: sync, serve, compact, export.
@Suite("JSON output of sync, serve, compact and export")
struct JSONOutputTests {
    @Test("[issue 18] each prints one JSON value with the documented fields and counts that match the text form")
    func jsonOutputs() async throws {
        let seed = testSeed()
        var rng = SplitMix64(seed: seed)
        let sb = try Sandbox("json")
        defer { sb.remove() }
        try await sb.ok("init", "a")
        let doc = try await sb.ok("new", "a")
        let n = 2 + Int(rng.next() % 6)
        try sb.write("s.jsonl", strokeLines(count: n, rng: &rng))
        try await sb.ok("import", "a", doc, "p1", sb.sub("s.jsonl"))
        let sync = try parseJSON(try await sb.ok("sync", "a", "b", "--init", "--json")) as? [String: Any]
        let fields = ["remote", "ops_sent", "ops_accepted", "ops_received", "ops_applied", "ops_from_checkpoints",
                      "documents_received", "assets_sent", "assets_received",
                      "bytes_sent", "bytes_received", "round_trips", "pages_from_checkpoints", "ops_healed", "forks",
                      "quarantined", "needs_attention"]
        #expect(Set(sync?.keys.map { $0 } ?? []) == Set(fields), "seed \(seed): \(String(describing: sync))")
        // The document's creation, its page and the n strokes.
        #expect((sync?["ops_sent"] as? Int ?? 0) >= n && sync?["needs_attention"] as? Bool == false, "seed \(seed): \(String(describing: sync))")
        let compact = try parseJSON(try await sb.ok("compact", "b", "--json")) as? [String: Any]
        let written = compact?["written"] as? [[String: Any]]
        // Closing a document already folded its logs (autosave): nothing left to compact, said as such.
        #expect(compact?["compacted"] as? Int == written?.count && compact?["pages"] as? Int == 1,
                "seed \(seed): \(String(describing: compact))")
        let export = try parseJSON(try await sb.ok("export", "b", "--sqlite", sb.sub("b.sqlite"), "--json")) as? [String: Any]
        #expect(export?["strokes"] as? Int == n && export?["documents"] as? Int == 1 && export?["format"] as? Int == 1,
                "seed \(seed): \(String(describing: export))")
        let serve = try Subprocess.start(lnoteBinary, ["serve", sb.sub("a"), "--json"])
        #expect(await serve.waitForOutput("}\n"))
        serve.kill(SIGTERM)
        let served = await serve.wait()
        let line = try parseJSON(served.outText) as? [String: Any]
        #expect((line?["url"] as? String)?.contains("/v1/notebooks/") == true && line?["token"] is String
                && line?["port"] as? Int != nil && line?["folder"] as? String != nil, "\(served.outText)")
    }
}

/// Issue 18: `lnote init --name` names the machine; the name travels with syncs.
@Suite("Machine names")
struct MachineNameTests {
    @Test("[issue 18] [PKG-65] a machine's name reaches folders synced directly and through lnote serve; a peer cannot rename this folder's replica; names are checked")
    func namesTravel() async throws {
        let sb = try Sandbox("names")
        defer { sb.remove() }
        let laptop = try await sb.ok("init", "laptop", "--name", "laptop")
        try await sb.ok("init", "desktop", "--name", "desktop")
        try await sb.ok("init", "phone")
        let doc = try await sb.ok("new", "laptop")
        try sb.write("s.jsonl", "{\"points\": [[0, 0], [10, 5]]}\n")
        try await sb.ok("import", "laptop", doc, "p1", sb.sub("s.jsonl"))
        #expect(try await sb.ok("name", "laptop") == "\(laptop) laptop")

        // Directly, folder to folder.
        try await sb.ok("sync", "desktop", "laptop")
        #expect(try await sb.ok("log", "desktop", doc, "p1").contains("(laptop)"))
        // Through a peer server.
        let serve = try Subprocess.start(lnoteBinary, ["serve", sb.sub("desktop"), "--json"])
        #expect(await serve.waitForOutput("}\n"))
        let info = try parseJSON(serve.outputSoFar) as? [String: Any]
        let url = info?["url"] as? String ?? "", token = info?["token"] as? String ?? ""
        try await sb.ok("sync", "phone", url, "--token", token)
        serve.kill(SIGTERM)
        _ = await serve.wait()
        #expect(try await sb.ok("log", "phone", doc, "p1").contains("(laptop)"))

        // A peer's devices file naming this folder's own replica, or renaming one it knows,
        // changes nothing here.
        let phone = String(try await sb.ok("name", "phone").prefix(16))
        try Data("{\"devices\": [{\"device\": \"impostor\", \"replica\": \"\(phone)\"}, {\"device\": \"mallory\", \"replica\": \"\(laptop)\"}], \"format\": 1}\n".utf8)
            .write(to: URL(fileURLWithPath: sb.sub("desktop/.lnote/devices.json")))
        try await sb.ok("sync", "phone", "desktop")
        #expect(try await sb.ok("name", "phone").contains("no name"))
        #expect(try await sb.ok("log", "phone", doc, "p1").contains("(laptop)"))
        // Names are printable and not empty.
        #expect(try await sb.run("init", "other", "--name", "bad\u{1B}[2Jname").code == 2)
        #expect(try await sb.run("name", "phone", " ").code == 2)
        try await sb.ok("name", "phone", "pocket")
        #expect(try await sb.ok("name", "phone") == "\(phone) pocket")
    }
}
