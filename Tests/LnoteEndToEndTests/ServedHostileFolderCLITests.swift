import Foundation
import Testing
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
}
