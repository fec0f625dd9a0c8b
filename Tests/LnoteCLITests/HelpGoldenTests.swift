import Foundation
import Testing
import LnoteTestSupport

/// Issue 18: every command's `--help` and the main error messages compared with files kept
/// in Tests/LnoteCLITests/Golden, so that a change of wording is a visible diff. After a
/// deliberate change: `LNOTE_UPDATE_GOLDEN=1 swift test --filter HelpGoldenTests` rewrites
/// them (then read the diff).
@Suite("Help and error texts against golden files")
struct HelpGoldenTests {
    static let golden = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Golden")
    static let updating = ProcessInfo.processInfo.environment["LNOTE_UPDATE_GOLDEN"] == "1"

    /// Compares `text` with the golden file `name` (or writes it when updating).
    func check(_ text: String, _ name: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let url = Self.golden.appendingPathComponent(name)
        if Self.updating {
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try Data(text.utf8).write(to: url)
            return
        }
        let expected = (try? String(contentsOf: url, encoding: .utf8)) ?? "(no golden file \(name))"
        #expect(text == expected, "\(name) differs from its golden file; if the change is meant, rerun with LNOTE_UPDATE_GOLDEN=1",
                sourceLocation: sourceLocation)
    }

    /// The command names `lnote --help` lists.
    func commandNames(_ sb: Sandbox) async throws -> [String] {
        let usage = try await sb.ok("--help")
        return usage.split(separator: "\n").dropFirst(3).compactMap { line -> String? in
            guard line.hasPrefix("  ") else { return nil }
            let words = line.dropFirst(2).components(separatedBy: "  ")
            return words.first?.trimmingCharacters(in: .whitespaces)
        }
    }

    @Test("[issue 18] every command's --help: as the golden file says, within 80 columns, and `lnote help CMD` prints the same")
    func everyHelp() async throws {
        let sb = try Sandbox("help")
        defer { sb.remove() }
        let names = try await commandNames(sb)
        #expect(names.count >= 40, "\(names)")
        try check(try await sb.ok("--help") + "\n", "help/lnote.txt")
        for name in names {
            let words = name.split(separator: " ").map(String.init)
            let help = try await sb.run(words + ["--help"])
            #expect(help.code == 0 && help.err.isEmpty, "\(help)")
            for line in help.out.split(separator: "\n") {
                #expect(line.count <= 80, "lnote \(name) --help: a line of \(line.count) columns: \(line)")
            }
            let viaHelp = try await sb.run(["help"] + words)
            #expect(viaHelp.out == help.out, "lnote help \(name)")
            try check(help.out, "help/" + words.joined(separator: "-") + ".txt")
        }
        // A group named alone with --help lists its commands; without, a usage error listing them.
        let group = try await sb.run("relay", "token", "--help")
        #expect(group.code == 0 && group.out.contains("lnote relay token create") && group.out.contains("lnote relay token revoke"), "\(group)")
        let bare = try await sb.run("remote")
        #expect(bare.code == 2 && bare.err.contains("lnote remote add"), "\(bare)")
    }

    @Test("[issue 18] the main error messages, word for word (paths shown as $SB)")
    func errorTexts() async throws {
        let sb = try Sandbox("errors")
        defer { sb.remove() }
        try await sb.ok("init", "nb")
        let doc = try await sb.ok("new", "nb", "--title", "T")
        let cases: [[String]] = [
            ["show", "nb", "nosuchdoc"],
            ["show", "nb", doc, "p0"],
            ["show", "nb", doc, "p7"],
            ["show", "missing", doc],
            ["sync", "nb"],
            ["sync", "nb", "ftp://host/x"],
            ["sync", "nb", "nb"],
            ["sync", "nb", "elsewhere"],
            ["sync", "nb", "http://127.0.0.1:9/v1/notebooks/00000000-0000-0000-0000-000000000000"],
            ["thumbnail", "nb", doc, "p1", "--out", "/nonexistent-dir/x.png"],
            ["replay", "missing.json"],
            ["replay", "x.json", "--transport", "ftp"],
            ["remote", "add", "nb", "-bad", "elsewhere"],
            ["remote", "remove", "nb", "nothing"],
            ["init", "nb"],
            ["new"],
            ["frobnicate"],
        ]
        var text = ""
        for args in cases {
            let r = try await sb.run(args)
            let err = r.err.replacingOccurrences(of: sb.path, with: "$SB").replacingOccurrences(of: doc, with: "$DOC")
                .replacing(try Regex("[0-9a-f]{16}"), with: "$REPLICA")
            text += "$ lnote \(args.map { $0 == doc ? "$DOC" : $0 }.joined(separator: " "))\n[exit \(r.code)]\n\(err)\n"
        }
        try check(text, "errors.txt")
    }

    @Test("[issue 18] short flags: -j, -q, -o and -h where the long ones exist")
    func shortFlags() async throws {
        let sb = try Sandbox("short")
        defer { sb.remove() }
        try await sb.ok("init", "nb")
        let doc = try await sb.ok("new", "nb")
        #expect(try await sb.ok("ls", "nb", "-j") == (try await sb.ok("ls", "nb", "--json")))
        #expect(try await sb.ok("show", "nb", doc, "p1", "-j") == (try await sb.ok("show", "nb", doc, "p1", "--json")))
        try await sb.ok("thumbnail", "nb", doc, "p1", "-o", sb.sub("a.png"))
        #expect(FileManager.default.fileExists(atPath: sb.sub("a.png")))
        try await sb.ok("init", "other")
        let quiet = try await sb.run("sync", "nb", "other", "-q")
        #expect(quiet.code == 0 && quiet.out.isEmpty, "\(quiet)")
        #expect(try await sb.ok("sync", "-h").hasPrefix("usage: lnote sync"))
        // A short form the command does not have is an unknown option (exit 2).
        #expect(try await sb.run("init", "x", "-j").code == 2)
    }
}
