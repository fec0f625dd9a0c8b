import Foundation
import Testing
import LnoteModel
import LnoteStore
import LnoteSync
import LnoteServer
import LnoteTestSupport

/// Text another machine chose reaches the terminal escaped: the CLI prints every
/// human-readable line through `PrintableText.escaped` (titles, device names, server
/// messages), so no escape sequence, line break or bidi override gets through raw.
@Suite struct HostileTextOutputTests {
    let lnote = Subprocess.product("lnote")

    /// What a terminal must never receive from remote text: C0 (but the newline ending each
    /// line), DEL, C1, line/paragraph separators, bidi controls.
    static func rawControls(_ s: String) -> [String] {
        s.unicodeScalars.filter { $0 != "\n" && PrintableText.needsEscape($0) }
            .map { "U+" + String($0.value, radix: 16, uppercase: true) }
    }

    @Test func escapedWritesEveryControlAsAnEscape() {
        #expect(PrintableText.escaped("plain, ünïcode & \\ back") == "plain, ünïcode & \\ back")
        #expect(PrintableText.escaped("a\u{1B}[2Jb\nc\r\td\u{7F}\u{85}\u{9B}") == "a\\u{1B}[2Jb\\nc\\r\\td\\u{7F}\\u{85}\\u{9B}")
        #expect(PrintableText.escaped("x\u{202E}gpj.exe\u{2066}\u{2069}\u{200F}\u{061C}\u{2028}")
                == "x\\u{202E}gpj.exe\\u{2066}\\u{2069}\\u{200F}\\u{61C}\\u{2028}")
        // Every scalar below U+3000 either passes unchanged or is escaped to printable ASCII.
        for v in UInt32(0)..<0x3000 {
            guard let u = Unicode.Scalar(v) else { continue }
            let e = PrintableText.escaped(String(u))
            #expect(Self.rawControls(e).isEmpty && !e.contains("\n"), "U+\(String(v, radix: 16))")
        }
    }

    /// A title with bidi overrides made on one machine, synced folder to folder, and a relay
    /// device name with one: `ls`, `show`, `log`, `relay devices`, `relay token list` print
    /// them escaped on one line each; `--json` stays JSON that decodes to the exact title.
    @Test func remoteTitlesAndDeviceNamesArePrintedEscaped() async throws {
        let dir = try TempDir()
        let title = "Invoice \u{202E}fdp.exe\u{202C} \u{2067}x\u{2069}"
        let nb = try await Notebook.open(at: dir.sub("A"), create: true, options: Fixture.quiet)
        let d = try await nb.createDocument(title: title)
        let doc = d.id.description
        try await d.close()
        try await nb.close()
        _ = try await Subprocess.run(lnote, ["init", dir.sub("B")])
        let synced = try await Subprocess.run(lnote, ["sync", dir.sub("B"), dir.sub("A")])
        #expect(synced.status == 0, "\(synced.errText)")
        var checked = 0
        for args in [["ls", dir.sub("B")], ["show", dir.sub("B"), doc], ["log", dir.sub("B"), doc]] {
            let r = try await Subprocess.run(lnote, args)
            #expect(r.status == 0, "\(args): \(r.errText)")
            #expect(Self.rawControls(r.outText + r.errText).isEmpty, "\(args): \(Self.rawControls(r.outText))")
            if args[0] != "log" { #expect(r.outText.contains("Invoice \\u{202E}fdp.exe\\u{202C}"), "\(args): \(r.outText)") }
            checked += 1
        }
        let json = try await Subprocess.run(lnote, ["ls", dir.sub("B"), "--json"])
        let list = try JSONSerialization.jsonObject(with: Data(json.outText.utf8)) as? [[String: Any]]
        #expect(list?.first?["title"] as? String == title)

        // A relay device name with a bidi override, seen by `relay devices` and `token list`.
        let db = dir.sub("relay.sqlite")
        let notebook = try await Subprocess.run(lnote, ["relay", "notebook", "create", "--db", db]).outText
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let store = try RelayStore(path: db)
        let token = try store.createToken(notebook: NotebookID(notebook)!, label: "l\u{200F}abel", device: "desk\u{202E}lanimret")
        try store.close()
        let relay = try Subprocess.start(lnote, ["relay", "--db", db])
        #expect(await relay.waitForOutput("url: "))
        let base = relay.outputSoFar.split(separator: "\n").first { $0.hasPrefix("url: ") }.map { String($0.dropFirst(5)) } ?? ""
        let viaRelay = try await Subprocess.run(lnote, ["sync", dir.sub("A"), "\(base)/v1/notebooks/\(notebook)", "--token", token])
        #expect(viaRelay.status == 0, "\(viaRelay.errText)")
        relay.kill(SIGTERM)
        _ = await relay.wait()
        for args in [["relay", "devices", "--db", db, "--notebook", notebook], ["relay", "token", "list", "--db", db, "--notebook", notebook]] {
            let r = try await Subprocess.run(lnote, args)
            #expect(r.status == 0, "\(args): \(r.errText)")
            #expect(Self.rawControls(r.outText + r.errText).isEmpty, "\(args)")
            #expect(r.outText.contains("desk\\u{202E}lanimret"), "\(args): \(r.outText)")
            checked += 1
        }
        ReliabilityReport.record(family: "abuse", detail: "HostileTextOutputTests: bidi title and device name printed", cases: checked)
    }

    /// A hostile server's error message (an OSC title change, a screen clear, a newline
    /// followed by a fake line) is printed by `lnote sync` as one escaped line.
    @Test func aServerMessageCannotDriveTheTerminal() async throws {
        let dir = try TempDir()
        _ = try await Fixture.notebook(at: dir.sub("A"), strokes: 2)
        let evil = "\u{1B}]0;pwned\u{07}\u{1B}[2J\u{9B}31m\nlnote sync: done, 0 conflicts\r\u{202E}"
        let body = try JSONSerialization.data(withJSONObject: ["error": "unauthorized", "message": evil])
        let server = try HTTPServer(configuration: .init(), asyncHandler: { _ in
            HTTPServerResponse(status: 401, headers: ["Content-Type": "application/json"], body: [UInt8](body))
        })
        defer { try? server.close() }
        let r = try await Subprocess.run(lnote, ["sync", dir.sub("A"), "\(server.baseURL)/v1/notebooks/\(UUID())",
                                                 "--token", RelayToken.generate()])
        #expect(r.status == 1, "\(r.errText)")
        #expect(Self.rawControls(r.outText + r.errText).isEmpty, "\(Self.rawControls(r.errText))")
        let lines = r.errText.split(separator: "\n")
        #expect(lines.count == 1, "\(lines)")
        #expect(r.errText.contains("\\u{1B}]0;pwned\\u{7}\\u{1B}[2J\\u{9B}31m\\nlnote sync: done"), "\(r.errText)")
        ReliabilityReport.record(family: "abuse", detail: "HostileTextOutputTests: hostile server message", cases: 1)
    }
}
