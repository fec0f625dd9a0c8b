import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
import LnoteModel
import LnoteTestSupport

/// `lnote serve` prints its web view's URL ([SYNC-91]): the token in the fragment only when
/// the token itself is printed, and the URL opens the view (through URLSession).
@Suite("lnote serve prints the web view's URL")
struct ServeViewCLITests {
    static func get(_ url: String, token: String?) async throws -> (Int, String) {
        var r = URLRequest(url: URL(string: url)!)
        if let token { r.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        let (data, response) = try await URLSession.shared.data(for: r)
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, String(decoding: data, as: UTF8.self))
    }

    @Test("[SYNC-91] serve --json gives view_url with #token= when it makes the token; a restart prints view: without it")
    func viewURLPrinted() async throws {
        let seed = testSeed()
        let sb = try Sandbox("serveview")
        defer { sb.remove() }
        try await sb.ok("init", "nb")
        _ = try await sb.ok("new", "nb", "--title", "<b>bold</b> & co")
        let serve = try Subprocess.start(lnoteBinary, ["serve", sb.sub("nb"), "--port", "0", "--json"])
        #expect(await serve.waitForOutput("}\n"))
        let line = serve.outputSoFar.split(separator: "\n").first.map(String.init) ?? ""
        let json = try parseJSON(line) as? [String: Any]
        let token = json?["token"] as? String ?? "", url = json?["url"] as? String ?? ""
        let notebook = json?["notebook"] as? String ?? ""
        let base = url.components(separatedBy: "/v1/").first ?? ""
        let view = json?["view_url"] as? String ?? ""
        #expect(!token.isEmpty && view == "\(base)/view/\(notebook)#token=\(token)", "seed \(seed): \(line)")
        let shell = try await Self.get(String(view.prefix { $0 != "#" }), token: nil)
        #expect(shell.0 == 200 && shell.1.contains("history.replaceState"), "\(shell.0)")
        let library = try await Self.get("\(url)/view", token: token)
        #expect(library.0 == 200 && library.1.contains("&lt;b&gt;bold&lt;/b&gt; &amp; co"), "\(library)")
        #expect(try await Self.get("\(url)/view", token: nil).0 == 401)
        serve.kill(SIGTERM)
        _ = await serve.wait()

        // Restarted with the saved token: view: names the page without the token.
        let again = try Subprocess.start(lnoteBinary, ["serve", sb.sub("nb")])
        #expect(await again.waitForOutput("view: "))
        #expect(await again.waitForOutput("\n"))
        try await Task.sleep(for: .milliseconds(50))
        let out = again.outputSoFar
        again.kill(SIGTERM)
        _ = await again.wait()
        #expect(out.contains("view: \(base)/view/\(notebook)\n") && !out.contains(token), "\(out)")
    }
}
