import Foundation
import Synchronization
import Testing
import LnoteModel
import LnoteReplication
import LnoteStore
import LnoteSync
@testable import LnoteServer

/// An endpoint for a service whose sync routes a test does not use: every call fails.
struct UnusedEndpoint: SyncEndpoint {
    func sync(_ request: SyncRequest) async throws -> SyncResponse { throw LnoteError(.invalidState, "unused") }
    func missingAssets(_ ids: [AssetID], document: DocumentID) async throws -> [AssetID] { throw LnoteError(.invalidState, "unused") }
    func putAsset(_ bytes: [UInt8], id: AssetID, document: DocumentID) async throws -> Bool { throw LnoteError(.invalidState, "unused") }
    func getAsset(_ id: AssetID, document: DocumentID) async throws -> [UInt8] { throw LnoteError(.invalidState, "unused") }
}

/// A view source whose library waits until `release()`, counting the calls that entered, and
/// whose document lookups throw `failure` when one is set.
final class HeldSource: WebViewSource, Sendable {
    private struct State {
        var entered = 0
        var released = false
        var waiting: [CheckedContinuation<Void, Never>] = []
    }
    private let state = Mutex(State())
    let failure: LnoteError?
    init(failure: LnoteError? = nil) { self.failure = failure }

    var entered: Int { state.withLock { $0.entered } }

    func release() {
        let waiting = state.withLock { s in
            s.released = true
            defer { s.waiting = [] }
            return s.waiting
        }
        for c in waiting { c.resume() }
    }

    func library() async throws -> [WebViewDocument] {
        await withCheckedContinuation { c in
            let now = state.withLock { s -> Bool in
                s.entered += 1
                if s.released { return true }
                s.waiting.append(c)
                return false
            }
            if now { c.resume() }
        }
        return []
    }
    func document(_ id: DocumentID) async throws -> WebViewPages? {
        if let failure { throw failure }
        return nil
    }
    func page(_ page: PageID, of document: DocumentID) async throws -> WebViewPage? { nil }
    func storedCover(_ document: DocumentID) async throws -> [UInt8]? { nil }
    func conflicts() async throws -> [WebViewConflicts] { [] }
    func deviceNames() async throws -> [ReplicaID: String] { [:] }
}

@Suite struct ViewLimitsTests {
    static let token = "view-limits-token"

    static func service(_ source: HeldSource, maxViewAnswers: Int = 2) -> SyncHTTPService {
        SyncHTTPService(kind: "peer", authorize: { t, _ in Access(t == token ? .ok : .unauthorized) },
                        endpoint: { _, _ in UnusedEndpoint() }, view: { nb in WebView(notebook: nb, source: source) },
                        maxViewAnswers: maxViewAnswers)
    }

    static func request(_ path: String, token: String? = ViewLimitsTests.token, method: String = "GET") -> HTTPServerRequest {
        var h: HTTPHeaders = [:]
        if let token { h.add("Authorization", "Bearer \(token)") }
        return HTTPServerRequest(method: method, path: path, headers: h)
    }

    /// The headers of [SYNC-94], checked on an answer of the service itself.
    static func secured(_ r: HTTPServerResponse, _ what: String) {
        #expect(r.headers["Content-Security-Policy"]?.hasPrefix("default-src 'none';") == true, "\(what): \(r.headers)")
        #expect(r.headers["X-Content-Type-Options"] == "nosniff", "\(what)")
        #expect(r.headers["Cache-Control"] == "no-store", "\(what)")
        #expect(r.headers["Referrer-Policy"] == "no-referrer", "\(what)")
        #expect(r.headers["X-Frame-Options"] == "DENY", "\(what)")
    }

    /// [SYNC-95] At most `maxViewAnswers` view answers are built at once; one more is answered
    /// 503 with `Retry-After` (and the view's headers) at once, not queued; the slots come back.
    @Test func sync95BusyViewIs503WithRetryAfter() async throws {
        let source = HeldSource()
        let service = Self.service(source, maxViewAnswers: 2)
        let path = "/v1/notebooks/\(UUID().uuidString)/view"
        async let a = service.respond(Self.request(path))
        async let b = service.respond(Self.request(path))
        while source.entered < 2 { await Task.yield() }
        let busy = await service.respond(Self.request(path))
        #expect(busy.status == 503 && busy.headers["Retry-After"] == "1", "\(busy.status) \(busy.headers)")
        #expect(String(decoding: busy.body, as: UTF8.self).contains("\"error\":\"unavailable\""))
        Self.secured(busy, "503")
        #expect(source.entered == 2, "the third answer was not started")
        source.release()
        let (ra, rb) = await (a, b)
        #expect(ra.status == 200 && rb.status == 200)
        // The slots were given back, and the sync routes never take one.
        #expect(await service.respond(Self.request(path)).status == 200)
        #expect(await service.respond(Self.request(path)).status == 200)
        #expect(source.entered == 4)
    }

    /// [SYNC-94] Every answer under the view's routes carries the headers, errors included:
    /// 400, 401, 404, 413, 500, the shell's 404; answers elsewhere do not.
    @Test func sync94ErrorAnswersUnderTheViewCarryTheHeaders() async throws {
        let nb = UUID().uuidString
        let base = "/v1/notebooks/\(nb)/view"
        let plain = Self.service(HeldSource())
        let cases: [(SyncHTTPService, HTTPServerRequest, Int)] = [
            (plain, Self.request(base + "/documents/not-a-uuid"), 400),
            (plain, Self.request(base, token: nil), 401),
            (plain, Self.request(base, token: "wrong"), 401),
            (plain, Self.request(base + "/nothing"), 404),
            (plain, Self.request("/v1/notebooks/not-a-uuid/view"), 400),
            (plain, Self.request("/view/not-a-notebook"), 404),
            (plain, Self.request(base + "/documents/\(UUID().uuidString)"), 404),
            (Self.service(HeldSource(failure: LnoteError(.limitExceeded, "too large"))),
             Self.request(base + "/documents/\(UUID().uuidString)"), 413),
            (Self.service(HeldSource(failure: LnoteError(.database, "disk I/O error", path: "/srv/relay.sqlite"))),
             Self.request(base + "/documents/\(UUID().uuidString)"), 500),
            // A damaged row on PostgreSQL names no file: still 500 with an incident, not 400.
            (Self.service(HeldSource(failure: LnoteError(.corrupt, "bad frame", path: "postgresql:///relay?host=/tmp"))),
             Self.request(base + "/documents/\(UUID().uuidString)"), 500),
        ]
        for (service, request, status) in cases {
            let r = await service.respond(request)
            #expect(r.status == status, "\(request.path): \(r.status) \(String(decoding: r.body, as: UTF8.self))")
            Self.secured(r, "\(status) \(request.path)")
            if status == 500 {
                let text = String(decoding: r.body, as: UTF8.self)
                #expect(text.contains("\"incident\"") && !text.contains("postgresql") && !text.contains("/srv"), "\(text)")
            }
            if let refusal = await service.admit(request) {
                #expect(refusal.status == status, "\(request.path)")
                Self.secured(refusal, "admission \(status) \(request.path)")
            }
        }
        // Not under the view: a sync route's refusal stays as it was.
        let other = await plain.respond(Self.request("/v1/notebooks/\(nb)/sync", token: nil))
        #expect(other.status == 401 && other.headers["Content-Security-Policy"] == nil)
    }

    /// [SYNC-95] One budget per answer: a page's SVG reads the document log and the page's
    /// log; a limit each fits alone but not both together refuses it (each read had a budget
    /// of its own once).
    @Test func sync95OneBudgetForTheWholeAnswer() async throws {
        let seed: UInt64 = 0x5EED_B0D6
        let dir = try TempDir()
        let f = try await Fixture.make(at: dir.sub("A"), strokes: 30, seed: seed)
        let relay = try await RelayWebViewTests.relay(dir)
        do {
            try await Fixture.sync(dir.sub("A"), relay.server.url(notebook: relay.notebook), token: relay.token)
            let docOnly = RelayWebSource(store: relay.store, notebook: relay.notebook)
            #expect(try await docOnly.document(f.document) != nil)
            let d = docOnly.budget.used
            let whole = RelayWebSource(store: relay.store, notebook: relay.notebook)
            #expect(try await whole.page(f.page, of: f.document) != nil)
            let p = whole.budget.used - d
            #expect(d > 0 && p > 0, "seed \(seed): document log \(d) B, page \(p) B")
            let limit = max(d, p) + min(d, p) / 2
            // Each read alone fits...
            #expect(try await RelayWebSource(store: relay.store, notebook: relay.notebook, limit: limit).document(f.document) != nil)
            _ = try relay.store.viewPage(notebook: relay.notebook, document: f.document, page: f.page, limit: limit)
            // ...both in one answer do not.
            await #expect(throws: LnoteError(.limitExceeded)) {
                _ = try await RelayWebSource(store: relay.store, notebook: relay.notebook, limit: limit).page(f.page, of: f.document)
            }
        } catch {
            Issue.record("seed \(seed): \(error)")
        }
        await relay.close()
    }
}

/// [SYNC-95] The relay's view equals the folder's after every kind of edit, with a checkpoint
/// uploaded for every page log that grew (`checkpointInterval = 1`), so that the relay
/// materializes pages from checkpoints plus the operations past them.
@Suite struct RelayEqualsFolderTests {
    /// Syncs with a checkpoint for every page log that grew by one operation.
    static func syncCheckpointing(_ path: String, _ url: String, token: String) async throws {
        let nb = try await Notebook.open(at: path, create: true, options: Fixture.quiet)
        do {
            let remote = try HTTPRemote(url: url, options: .init(token: token))
            defer { try? remote.close() }
            var session = SyncSession(notebook: nb, remote: remote)
            session.checkpointInterval = 1
            _ = try await session.run()
            try await nb.close()
        } catch {
            try? await nb.close()
            throw error
        }
    }

    @Test func sync95RelayEqualsFolderAfterEditsWithCheckpoints() async throws {
        let seed: UInt64 = 0x5EED_E0A1
        let dir = try TempDir()
        let f = try await Fixture.make(at: dir.sub("A"), strokes: 10, seed: seed)
        let relay = try await RelayWebViewTests.relay(dir)
        let client = try HTTPClient()
        do {
            let url = relay.server.url(notebook: relay.notebook)
            try await Self.syncCheckpointing(dir.sub("A"), url, token: relay.token)
            var other: DocumentID?
            // Edits: erase, erase a range, move, delete a page, delete a document; a sync and a
            // comparison after each.
            let steps: [(String, (Document, [ElementID]) async throws -> Void)] = [
                ("erase", { d, ids in try await d.erase([ids[0]], on: f.page) }),
                ("erase range", { d, ids in try await d.eraseRange(ids[1], [PointRange(2, 8)], on: f.page) }),
                ("move", { d, ids in try await d.move([ids[2], ids[3]], dx: 150, dy: -60, on: f.page) }),
                ("delete page", { d, _ in try await d.deletePage(f.second) }),
            ]
            for (name, step) in steps + [("delete document", { _, _ in })] {
                let nb = try await Notebook.open(at: dir.sub("A"), options: Fixture.quiet)
                if name == "delete document" {
                    if let other { try await nb.deleteDocument(other) }
                } else {
                    if other == nil {
                        let d2 = try await nb.createDocument(title: "second", firstPage: Fixture.canvas)
                        _ = try await d2.addStrokes(Fixture.strokes(3, seed: seed &+ 1), to: await d2.pageList[0].id)
                        other = d2.id
                        try await d2.close()
                    }
                    let d = try await nb.openDocument(f.document)
                    try await step(d, try await d.elementIDs(f.page))
                    try await d.close()
                }
                try await nb.close()
                try await Self.syncCheckpointing(dir.sub("A"), url, token: relay.token)
                let held = try await relay.store.perform { s in
                    try s.database.transaction(.read) { tx in try tx.query("SELECT count(*) FROM checkpoints", []).first?.first?.int64 ?? 0 }
                }
                #expect(held > 0, "\(name): no checkpoint on the relay")
                // Every live page's SVG, from the relay and from the folder.
                let nbA = try await Notebook.open(at: dir.sub("A"), options: Fixture.quiet)
                let peer = try PeerServer(notebook: nbA, token: relay.token)
                let api = "\(relay.server.http.baseURL)/v1/notebooks/\(relay.notebook.uuid.uuidString)/view"
                let peerAPI = "\(peer.http.baseURL)/v1/notebooks/\(peer.notebookID.uuidString)/view"
                var pages = 0
                for doc in [f.document] + (other.map { [$0] } ?? []) {
                    let (relayDoc, folderDoc) = (try await get(client, api + "/documents/\(doc)", token: relay.token),
                                                 try await get(client, peerAPI + "/documents/\(doc)", token: relay.token))
                    // The same HTML but for the notebook id each server names in its paths.
                    let relayText = relayDoc.text.replacingOccurrences(of: relay.notebook.uuid.uuidString, with: peer.notebookID.uuidString)
                    #expect(relayDoc.status == folderDoc.status && relayText == folderDoc.text, "\(name): document \(doc) differs")
                    guard folderDoc.status == 200 else { continue }
                    let d = try await nbA.openDocument(doc)
                    for p in await d.pageList {
                        let path = "/documents/\(doc)/pages/\(p.id)/svg"
                        let r = try await get(client, api + path, token: relay.token)
                        let l = try await get(client, peerAPI + path, token: relay.token)
                        #expect(r.status == 200 && r.body == l.body, "\(name): page \(p.id) differs (seed \(seed))")
                        pages += 1
                    }
                    try await d.close()
                }
                #expect(pages > 0, "\(name)")
                try peer.close()
                try await nbA.close()
            }
        } catch {
            Issue.record("seed \(seed): \(error)")
        }
        try? client.close()
        await relay.close()
    }
}
