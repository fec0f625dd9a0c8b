import Foundation
import Testing
import LnoteModel
import LnoteReplication
import LnoteRender
import LnoteStore
import LnoteSync
import LnoteServer

/// The web view of `lnote serve` ([SYNC-90]..[SYNC-96]): a `PeerServer` in this process on
/// loopback, requests through libcurl, the page in headless Chromium.
@Suite struct ServeWebViewTests {
    /// [SYNC-91] [SYNC-92] [SYNC-94] 401 without or with a wrong token on every route, 200
    /// with it and the security headers; 404 for another notebook, document or page; the
    /// hostile title escaped; the SVG well-formed and holding the strokes; a cover.
    @Test func sync92RoutesTokensEscapingAndSVG() async throws {
        let seed: UInt64 = 0x5EED_0092
        let dir = try TempDir()
        let f = try await Fixture.make(at: dir.sub("A"), seed: seed)
        let nb = try await Notebook.open(at: dir.sub("A"), options: Fixture.quiet)
        let token = RelayToken.generate()
        let server = try PeerServer(notebook: nb, token: token)
        let client = try HTTPClient()
        do {
            let base = server.http.baseURL
            #expect(server.viewURL(token: token) == "\(base)/view/\(server.notebookID.uuidString)#token=\(token)")
            try await WebViewCheck.routes(client, base: base, notebook: server.notebookID, token: token, fixture: f)
            try await WebViewCheck.unknowns(client, base: base, notebook: server.notebookID, token: token, fixture: f)
            try await WebViewCheck.content(client, base: base, notebook: server.notebookID, token: token, fixture: f)
            // Another notebook id: 404 after the token check, as for sync; the shell answers
            // any id (it names nothing), but not a path that is not one.
            let other = try await get(client, "\(base)/v1/notebooks/\(UUID().uuidString)/view", token: token)
            #expect(other.status == 404, "\(other.status) \(other.text)")
            #expect(try await get(client, "\(base)/view/not-a-notebook", token: nil).status == 404)
            // A deleted document is not shown.
            try await nb.deleteDocument(f.document)
            let gone = try await get(client, "\(base)/v1/notebooks/\(server.notebookID.uuidString)/view/documents/\(f.document)",
                                     token: token)
            #expect(gone.status == 404, "\(gone.status)")
            let library = try await get(client, "\(base)/v1/notebooks/\(server.notebookID.uuidString)/view", token: token)
            #expect(library.text.contains("No documents."), "\(library.text)")
        } catch {
            Issue.record("seed \(seed): \(error)")
        }
        try? client.close()
        try server.close()
        try await nb.close()
    }

    /// [SYNC-92] The conflicts `lnote conflicts` lists, in HTML: a title written on two
    /// machines at once and an element moved on both, after they synced.
    @Test func sync92ConflictsPage() async throws {
        let seed: UInt64 = 0x5EED_C0F1
        let dir = try TempDir()
        let f = try await Fixture.make(at: dir.sub("A"), strokes: 3, seed: seed)
        let nb = try await Notebook.open(at: dir.sub("A"), options: Fixture.quiet)
        let token = RelayToken.generate()
        let server = try PeerServer(notebook: nb, token: token)
        let client = try HTTPClient()
        do {
            let api = "\(server.http.baseURL)/v1/notebooks/\(server.notebookID.uuidString)/view/conflicts"
            #expect(try await get(client, api, token: token).text.contains("No conflicts."))
            try await Fixture.sync(dir.sub("B"), server.url, token: token)
            // Concurrent edits on both sides, then a sync each way.
            let b = try await Notebook.open(at: dir.sub("B"), options: Fixture.quiet)
            let db = try await b.openDocument(f.document)
            try await db.setTitle("from <b>B</b>")
            let element = try await db.elementIDs(f.page)[0]
            try await db.move([element], dx: 100, dy: 0, on: f.page)
            try await db.close()
            try await b.close()
            let da = try await nb.openDocument(f.document)
            try await da.setTitle("from A")
            try await da.move([element], dx: 0, dy: 100, on: f.page)
            try await da.flush()
            try await da.close()
            try await Fixture.sync(dir.sub("B"), server.url, token: token)
            let page = try await get(client, api, token: token)
            #expect(page.status == 200)
            WebViewCheck.secured(page, "conflicts")
            let da2 = try await nb.openDocument(f.document)
            let expected = try await da2.allConflicts()
            try await da2.close()
            #expect(Set(expected.map(\.kind)) == [.title, .move], "\(expected)")
            for c in expected {
                #expect(page.text.contains("<td>\(c.kind.rawValue)</td>"), "\(c.kind) missing: \(page.text)")
                for op in c.ops { #expect(page.text.contains(op.description), "\(op) missing") }
            }
            #expect(page.text.contains(">#1</a>"), "the move conflict names page #1: \(page.text)")
            #expect(!page.text.contains("<b>B</b>"))
        } catch {
            Issue.record("seed \(seed): \(error)")
        }
        try? client.close()
        try server.close()
        try await nb.close()
    }

    /// [SYNC-96] The page's view in headless Chromium looks as lnote draws the page.
    @Test func sync96PageInABrowser() async throws {
        let seed: UInt64 = 0x5EED_0096
        let dir = try TempDir()
        let f = try await Fixture.make(at: dir.sub("A"), seed: seed)
        let nb = try await Notebook.open(at: dir.sub("A"), options: Fixture.quiet)
        let token = RelayToken.generate()
        let server = try PeerServer(notebook: nb, token: token)
        do {
            let d = try await nb.openDocument(f.document)
            let state = try await d.pageState(f.page)
            try await d.close()
            let url = "\(server.http.baseURL)/view/\(server.notebookID.uuidString)?document=\(f.document)&page=\(f.page)#token=\(token)"
            try await WebViewCheck.screenshot(url: url, dir: dir, fixture: f, state: state, seed: seed)
        } catch is CancellationError {
        } catch {
            Issue.record("seed \(seed): \(error)")
        }
        try server.close()
        try await nb.close()
    }
}
