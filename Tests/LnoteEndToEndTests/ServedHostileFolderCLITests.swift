import Foundation
import Testing
import LnoteModel
import LnoteServer
import LnoteTestSupport

/// A served folder with a hostile file, through the binaries: `lnote serve` leaves out the
/// document whose package holds a link ([PKG-22]) and shows nothing of its target or its own
/// paths to the client ([SYNC-81]).
@Suite struct ServedHostileFolderCLITests {
    let lnote = Subprocess.product("lnote")

    @Test("[PKG-22] [SYNC-81] lnote serve never sends a linked page log's target, nor its own paths, to a syncing client")
    func linkedLogIsNotServed() async throws {
        let dir = try TempDir()
        let strokes = dir.sub("s.jsonl")
        try Data(#"{"points": [[0, 0, 0, 0.5], [10, 5, 4, 0.6]]}"#.utf8).write(to: URL(fileURLWithPath: strokes))
        for f in ["B", "C"] { #expect(try await Subprocess.run(lnote, ["init", dir.sub(f)]).status == 0) }
        let doc = try await Subprocess.run(lnote, ["new", dir.sub("B"), "--title", "Served"]).outText
            .trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(try await Subprocess.run(lnote, ["import", dir.sub("B"), doc, "#1", strokes]).status == 0)
        // The page's log becomes a link to a private file.
        let pages = FileManager.default.enumerator(atPath: dir.sub("B"))?.compactMap { $0 as? String }
            .filter { $0.contains("/pages/") && $0.hasSuffix(".log") } ?? []
        let log = try #require(pages.first, "a page log under \(dir.sub("B"))")
        let secret = dir.sub("private.txt")
        try Data("private bytes\n".utf8).write(to: URL(fileURLWithPath: secret))
        try FileManager.default.removeItem(atPath: dir.sub("B") + "/" + log)
        try FileManager.default.createSymbolicLink(atPath: dir.sub("B") + "/" + log, withDestinationPath: secret)

        let token = String(repeating: "5a", count: 32)
        let serve = try Subprocess.start(lnote, ["serve", dir.sub("B"), "--token", token])
        #expect(await serve.waitForOutput("url: "))
        try await Task.sleep(for: .milliseconds(50))
        let url = serve.outputSoFar.split(separator: "\n").first { $0.hasPrefix("url: ") }.map { String($0.dropFirst(5)) } ?? ""
        let sync = try await Subprocess.run(lnote, ["sync", dir.sub("C"), url, "--token", token])
        serve.kill(SIGTERM)
        let served = await serve.wait()
        // The document is not served (its package holds a link, [PKG-22]); the sync itself
        // goes on, and nothing of the private file reaches the client or either output.
        #expect(sync.status == 0, "\(sync.errText)")
        #expect(served.status == 0, "\(served.errText)")
        #expect(!sync.errText.contains(dir.sub("B")), "the client saw a server path: \(sync.errText)")
        for out in [sync.outText, sync.errText, served.outText, served.errText] { #expect(!out.contains("private bytes")) }
        let copied = FileManager.default.enumerator(atPath: dir.sub("C"))?.compactMap { $0 as? String } ?? []
        for f in copied where !f.hasPrefix(".lnote") {
            let bytes = (try? Data(contentsOf: URL(fileURLWithPath: dir.sub("C") + "/" + f))) ?? Data()
            #expect(bytes.range(of: Data("private bytes".utf8)) == nil, "\(f) holds the private file's bytes")
        }
        ReliabilityReport.record(family: "abuse", detail: "a served page log linked to a private file (ServedHostileFolderCLITests)", cases: 1)
    }

    /// [SYNC-83] Through the binaries: `lnote serve` puts the document it leaves out on
    /// stderr, escaped, once for two syncs. The served folder's name holds an escape sequence
    /// and a line break; the line quotes the linked file's path, so it carries them, written
    /// as `\u{1B}` and `\n`: the operator's terminal is never driven by a folder's names.
    @Test("[SYNC-83] lnote serve logs a skipped document on stderr, escaped, once")
    func skippedDocumentReachesTheOperatorEscaped() async throws {
        let dir = try TempDir()
        let name = "B\u{1B}[31m\nfake line"
        let served = dir.sub(name)
        let strokes = dir.sub("s.jsonl")
        try Data(#"{"points": [[0, 0, 0, 0.5], [10, 5, 4, 0.6]]}"#.utf8).write(to: URL(fileURLWithPath: strokes))
        for f in [served, dir.sub("C")] { #expect(try await Subprocess.run(lnote, ["init", f]).status == 0) }
        var docs: [String] = []
        for title in ["Hostile", "Fine"] {
            let doc = try await Subprocess.run(lnote, ["new", served, "--title", title]).outText
                .trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(try await Subprocess.run(lnote, ["import", served, doc, "#1", strokes]).status == 0)
            docs.append(doc)
        }
        let pages = FileManager.default.enumerator(atPath: served)?.compactMap { $0 as? String }
            .filter { $0.contains("/pages/") && $0.hasSuffix(".log") && $0.uppercased().hasPrefix(docs[0].uppercased()) } ?? []
        let log = try #require(pages.first, "a page log of \(docs[0]) under \(served)")
        try FileManager.default.removeItem(atPath: served + "/" + log)
        try Data("private bytes\n".utf8).write(to: URL(fileURLWithPath: dir.sub("private.txt")))
        try FileManager.default.createSymbolicLink(atPath: served + "/" + log, withDestinationPath: dir.sub("private.txt"))

        let token = RelayToken.generate()
        let serve = try Subprocess.start(lnote, ["serve", served, "--token", token])
        #expect(await serve.waitForOutput("url: "))
        try await Task.sleep(for: .milliseconds(50))
        let url = serve.outputSoFar.split(separator: "\n").first { $0.hasPrefix("url: ") }.map { String($0.dropFirst(5)) } ?? ""
        for _ in 0..<2 {
            let sync = try await Subprocess.run(lnote, ["sync", dir.sub("C"), url, "--token", token])
            #expect(sync.status == 0, "\(sync.errText)")
        }
        serve.kill(SIGTERM)
        let r = await serve.wait()
        #expect(r.status == 0, "\(r.errText)")
        let lines = r.errText.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let skipped = lines.filter { $0.hasPrefix("lnote serve: skipped document ") }
        #expect(skipped.count == 1, "\(r.errText)")
        let escaped = PrintableText.escaped(served + "/" + log)
        #expect(escaped.contains("\\u{1B}[31m\\nfake line"), "\(escaped)")
        #expect(skipped.first?.contains(escaped) == true, "\(r.errText)")
        #expect(skipped.first?.uppercased().contains(docs[0].uppercased()) == true, "\(r.errText)")
        // Nothing the folder holds drives the terminal or starts a line of its own.
        #expect(!r.errText.contains("\u{1B}"), "\(r.errText)")
        #expect(!lines.contains { $0.hasPrefix("fake line") }, "\(r.errText)")
        // The fine document was served; the hostile one was not.
        let got = FileManager.default.enumerator(atPath: dir.sub("C"))?.compactMap { $0 as? String }
            .filter { $0.hasSuffix(".lnote") }.map { $0.uppercased() } ?? []
        #expect(got.contains { $0.hasPrefix(docs[1].uppercased()) }, "\(got)")
        #expect(!got.contains { $0.hasPrefix(docs[0].uppercased()) }, "\(got)")
        ReliabilityReport.record(family: "abuse", detail: "lnote serve logging a skipped document with control characters in its path (ServedHostileFolderCLITests)",
                                 cases: 2)
    }
}
