import Foundation
import Testing
import LnoteModel
import LnoteReplication
import LnoteRender
import LnoteStore
import LnoteSync
import LnoteServer
import LnoteRelayPostgres
import LnoteTestSupport

/// The web view of the relay ([SYNC-95]): a notebook synced up from a folder, materialized
/// from the relay's operations and checkpoints, shown as the folder's own view shows it.
@Suite struct RelayWebViewTests {
    /// A relay in this process with one notebook, its token, and `f`'s folder synced to it.
    struct Setup {
        let store: RelayStore
        let server: RelayServer
        let notebook: NotebookID
        let token: String
        /// The PostgreSQL database made for the test, dropped by `close()`.
        let postgres: (cluster: PostgresCluster, name: String)?
        func close() async {
            try? server.close()
            try? store.close()
            if let postgres { await postgres.cluster.dropDatabase(postgres.name) }
        }
    }

    /// A relay on `backend`: SQLite in `dir`, or a database of its own in the test process's
    /// PostgreSQL cluster (a machine without PostgreSQL fails, saying how to install it).
    static func relay(_ dir: TempDir, backend: RelayBackendKind = .sqlite,
                      viewLimit: Int = RelayStore.maxViewBytes) async throws -> Setup {
        var postgres: (cluster: PostgresCluster, name: String)?
        let store: RelayStore
        switch backend {
        case .sqlite:
            store = try RelayStore(path: dir.sub("relay.sqlite"))
        case .postgres:
            let cluster = try await PostgresCluster.shared()
            let (name, url) = try await cluster.createDatabase()
            postgres = (cluster, name)
            store = try RelayStore(database: try RelayPostgresDatabase(url: url, poolSize: 4))
        }
        let notebook = try store.createNotebook()
        let token = try store.createToken(notebook: notebook, label: "test")
        let server = try RelayServer(store: store, viewLimit: viewLimit)
        return Setup(store: store, server: server, notebook: notebook, token: token, postgres: postgres)
    }

    /// [SYNC-95] Every route behind the notebook's token (401 without, 403 with another
    /// notebook's), the escaping, the SVG, and the same bytes as the folder's own view: the
    /// page's SVG from the relay's operations is the SVG of the folder's page.
    @Test(arguments: RelayBackends.all) func sync95RelayViewMatchesTheFolder(backend: RelayBackendKind) async throws {
        let seed: UInt64 = 0x5EED_0095
        let dir = try TempDir()
        let f = try await Fixture.make(at: dir.sub("A"), seed: seed)
        let relay = try await Self.relay(dir, backend: backend)
        let client = try HTTPClient()
        do {
            try await Fixture.sync(dir.sub("A"), relay.server.url(notebook: relay.notebook), token: relay.token)
            let base = relay.server.http.baseURL
            #expect(relay.server.viewURL(notebook: relay.notebook, token: relay.token)
                    == "\(base)/view/\(relay.notebook.uuid.uuidString)#token=\(relay.token)")
            try await WebViewCheck.routes(client, base: base, notebook: relay.notebook.uuid, token: relay.token, fixture: f)
            try await WebViewCheck.unknowns(client, base: base, notebook: relay.notebook.uuid, token: relay.token, fixture: f)
            try await WebViewCheck.content(client, base: base, notebook: relay.notebook.uuid, token: relay.token, fixture: f)
            // Another notebook's token opens nothing here; an unknown notebook is 404 for the
            // operator's token as for sync.
            let other = try relay.store.createNotebook()
            let otherToken = try relay.store.createToken(notebook: other, label: "other")
            let api = "\(base)/v1/notebooks/\(relay.notebook.uuid.uuidString)/view"
            let forbidden = try await get(client, api, token: otherToken)
            #expect(forbidden.status == 403, "\(forbidden.status) \(forbidden.text)")
            #expect(try await get(client, "\(base)/v1/notebooks/\(other.uuid.uuidString)/view", token: otherToken).text
                .contains("No documents."))
            // The folder's view of the same page, for the same bytes.
            let nb = try await Notebook.open(at: dir.sub("A"), options: Fixture.quiet)
            let peer = try PeerServer(notebook: nb, token: relay.token)
            let peerAPI = "\(peer.http.baseURL)/v1/notebooks/\(peer.notebookID.uuidString)/view"
            for page in [f.page, f.second] {
                let path = "/documents/\(f.document)/pages/\(page)/svg"
                let fromRelay = try await get(client, api + path, token: relay.token)
                let fromFolder = try await get(client, peerAPI + path, token: relay.token)
                #expect(fromRelay.status == 200 && fromRelay.body == fromFolder.body, "page \(page): the relay's SVG differs")
            }
            try peer.close()
            try await nb.close()
        } catch {
            Issue.record("seed \(seed), \(backend): \(error)")
        }
        try? client.close()
        await relay.close()
    }

    /// [SYNC-95] The relay's conflicts page lists what `allConflicts` of a folder holding the
    /// same operations lists: a title written on two machines at once and an element moved on
    /// both, materialized from the relay's logs (and its checkpoints, when a client left some).
    @Test(arguments: RelayBackends.all) func sync95RelayConflictsPage(backend: RelayBackendKind) async throws {
        let seed: UInt64 = 0x5EED_C095
        let dir = try TempDir()
        let f = try await Fixture.make(at: dir.sub("A"), strokes: 3, seed: seed)
        let relay = try await Self.relay(dir, backend: backend)
        let client = try HTTPClient()
        do {
            let url = relay.server.url(notebook: relay.notebook)
            try await Fixture.sync(dir.sub("A"), url, token: relay.token)
            try await Fixture.sync(dir.sub("B"), url, token: relay.token)
            var element: ElementID?
            for (side, dx, title) in [("A", Int32(100), "from A"), ("B", Int32(0), "from <i>B</i>")] {
                let nb = try await Notebook.open(at: dir.sub(side), options: Fixture.quiet)
                let d = try await nb.openDocument(f.document)
                try await d.setTitle(title)
                let e = try await d.elementIDs(f.page)[0]
                element = e
                try await d.move([e], dx: dx, dy: 100 - dx, on: f.page)
                try await d.close()
                try await nb.close()
            }
            for side in ["A", "B", "A"] { try await Fixture.sync(dir.sub(side), url, token: relay.token) }
            let nb = try await Notebook.open(at: dir.sub("A"), options: Fixture.quiet)
            let d = try await nb.openDocument(f.document)
            let expected = try await d.allConflicts()
            try await d.close()
            try await nb.close()
            #expect(Set(expected.map(\.kind)) == [.title, .move], "\(expected)")
            let api = "\(relay.server.http.baseURL)/v1/notebooks/\(relay.notebook.uuid.uuidString)/view/conflicts"
            let page = try await get(client, api, token: relay.token)
            #expect(page.status == 200, "\(page.status) \(page.text)")
            WebViewCheck.secured(page, "relay conflicts")
            for c in expected {
                #expect(page.text.contains("<td>\(c.kind.rawValue)</td>"), "\(c.kind) missing: \(page.text)")
                for op in c.ops + [c.winner] { #expect(page.text.contains(op.description), "\(op) missing: \(page.text)") }
            }
            #expect(page.text.contains(element!.description) && page.text.contains(">#1</a>"), "\(page.text)")
            #expect(!page.text.contains("<i>B</i>"))
        } catch {
            Issue.record("seed \(seed), \(backend): \(error)")
        }
        try? client.close()
        await relay.close()
    }

    /// [SYNC-95] A notebook larger than the view reads for one answer is refused with 413 and
    /// a message, not materialized; the same request fits a larger budget.
    @Test func sync95TooLargeIs413() async throws {
        let seed: UInt64 = 0x5EED_0413
        let dir = try TempDir()
        let f = try await Fixture.make(at: dir.sub("A"), strokes: 40, seed: seed)
        let small = try await Self.relay(dir, viewLimit: 2048)
        let client = try HTTPClient()
        do {
            try await Fixture.sync(dir.sub("A"), small.server.url(notebook: small.notebook), token: small.token)
            let api = "\(small.server.http.baseURL)/v1/notebooks/\(small.notebook.uuid.uuidString)/view"
            let r = try await get(client, api + "/documents/\(f.document)/pages/\(f.page)/svg", token: small.token)
            #expect(r.status == 413 && r.text.contains("too large for the web view"), "\(r.status) \(r.text)")
            let page = try small.store.viewPage(notebook: small.notebook, document: f.document, page: f.page)
            #expect(page.state.elements.count == 40)
            #expect(throws: LnoteError.self) {
                try small.store.viewPage(notebook: small.notebook, document: f.document, page: f.page, limit: 2048)
            }
        } catch {
            Issue.record("seed \(seed): \(error)")
        }
        try? client.close()
        await small.close()
    }

    /// [SYNC-96] The relay's page view in headless Chromium looks as lnote draws the page.
    @Test func sync96RelayPageInABrowser() async throws {
        let seed: UInt64 = 0x5EED_1096
        let dir = try TempDir()
        let f = try await Fixture.make(at: dir.sub("A"), seed: seed)
        let relay = try await Self.relay(dir)
        do {
            try await Fixture.sync(dir.sub("A"), relay.server.url(notebook: relay.notebook), token: relay.token)
            let state = try relay.store.viewPage(notebook: relay.notebook, document: f.document, page: f.page).state
            // The notebook id in lower case: the shell matches the answers' upper-case addresses anyway.
            let url = "\(relay.server.http.baseURL)/view/\(relay.notebook.uuid.uuidString.lowercased())?document=\(f.document)&page=\(f.page)"
                + "#token=\(relay.token)"
            try await WebViewCheck.screenshot(url: url, dir: dir, fixture: f, state: state, seed: seed)
        } catch is CancellationError {
        } catch {
            Issue.record("seed \(seed): \(error)")
        }
        await relay.close()
    }
}
