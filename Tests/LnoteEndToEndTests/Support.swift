import Foundation
import Testing
import LnoteModel
import LnoteReplication
import LnoteStore
import LnoteSync
import LnoteServer

/// A temporary directory removed when the test ends.
final class TempDir: @unchecked Sendable {
    let url: URL
    var path: String { url.path }
    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("lnote-e2e-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }
    func sub(_ name: String) -> String { url.appendingPathComponent(name).path }
    deinit { try? FileManager.default.removeItem(at: url) }
}

enum Fixture {
    /// A token a `PeerServer` accepts ([SYNC-28]): 64 random hex digits, new for each run of
    /// the tests.
    static let peerToken = RelayToken.generate()

    static var quiet: StoreOptions {
        var o = StoreOptions()
        o.autosave = false
        return o
    }

    /// A folder with one document of `strokes` generated strokes on `pages` pages.
    static func notebook(at path: String, strokes: Int, pages: Int = 1, seed: UInt64 = 7) async throws -> DocumentID {
        let nb = try await Notebook.open(at: path, create: true, options: quiet)
        let d = try await nb.createDocument(title: "fixture")
        var gen = HandwritingGenerator(seed: seed)
        var ids = [await d.pageList[0].id]
        for _ in 1..<max(1, pages) { ids.append(try await d.addPage()) }
        for (i, p) in ids.enumerated() {
            _ = try await d.addStrokes(gen.strokes(strokes / ids.count + (i == 0 ? strokes % ids.count : 0)), to: p)
        }
        let id = d.id
        try await nb.close()
        return id
    }

    /// The canonical JSON of every document of a folder (what converged replicas share).
    static func canonical(_ path: String) async throws -> String {
        let nb = try await Notebook.open(at: path, options: quiet)
        var out = ""
        for id in try await nb.documentIDs() {
            let d = try await nb.openDocument(id)
            let state = await d.state
            var pages: [PageID: PageState] = [:]
            for p in state.pages { pages[p.id] = try await d.pageState(p.id) }
            out += state.canonicalJSON(pages: pages, style: .compact) + "\n"
        }
        try await nb.close()
        return out
    }

    /// Syncs a folder with a URL in-process.
    @discardableResult
    static func sync(_ path: String, _ url: String, token: String, caFile: String? = nil) async throws -> SyncReport {
        let nb = try await Notebook.open(at: path, create: true, options: quiet)
        do {
            let remote = try HTTPRemote(url: url, options: .init(token: token, caFile: caFile))
            defer { try? remote.close() }
            let r = try await SyncSession(notebook: nb, remote: remote).run()
            try await nb.close()
            return r
        } catch {
            try? await nb.close()
            throw error
        }
    }
}

/// A relay in this process on 127.0.0.1 with one notebook and its token.
final class LocalRelay: @unchecked Sendable {
    let store: RelayStore
    let server: RelayServer
    let notebook: NotebookID
    let token: String
    var url: String { server.url(notebook: notebook) }

    init(dir: TempDir, configuration: HTTPServer.Configuration = .init()) throws {
        store = try RelayStore(path: dir.sub("relay.sqlite"))
        notebook = try store.createNotebook()
        token = try store.createToken(notebook: notebook, label: "test")
        server = try RelayServer(store: store, configuration: configuration)
    }

    func close() {
        try? server.close()
        try? store.close()
    }
}

/// Seeded randomness whose seed goes into failure messages.
struct TestRNG: RandomNumberGenerator {
    var g: SplitMix64
    let seed: UInt64
    init(seed: UInt64) {
        self.seed = seed
        g = SplitMix64(seed: seed)
    }
    mutating func next() -> UInt64 { g.next() }
}
