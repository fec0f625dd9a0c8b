import Foundation
import Testing
import LnoteModel
import LnoteReplication
import LnoteStore
import LnoteSync
import LnoteServer
import LnoteTestSupport

/// Every route of a peer server, touched with ids the served folder does not hold: nothing
/// is created by being named ([SYNC-10], [SYNC-22]).
@Suite struct PeerServerRouteTests {
    /// The names in a folder, recursively, but the files a served folder keeps for itself
    /// (its lock, clock cache and staged uploads).
    static func tree(_ root: String) throws -> Set<String> {
        var out = Set<String>()
        guard let e = FileManager.default.enumerator(atPath: root) else { return out }
        for case let p as String in e where !p.hasPrefix(".lnote/") { out.insert(p) }
        return out
    }

    /// [SYNC-10] [SYNC-22] A valid token and a document id the folder does not hold: a `PUT`
    /// of an asset is kept waiting (201, then 204) and creates no package, `GET` of an asset
    /// is 404, `…/assets/missing` lists the asset until uploaded, a sync whose `have` names
    /// logs of the unknown document reads nothing into being, checkpoints and devices are
    /// 404. Afterwards the folder holds exactly what it held, and `ls` lists no new document.
    @Test func routesNamingAnUnknownDocumentCreateNothing() async throws {
        let dir = try TempDir()
        let known = try await Fixture.notebook(at: dir.sub("A"), strokes: 3)
        let served = try await Notebook.open(at: dir.sub("A"))
        let token = RelayToken.generate()
        let server = try PeerServer(notebook: served, token: token)
        let client = try HTTPClient()
        defer { try? client.close() }
        let before = try Self.tree(dir.sub("A"))
        func send(_ method: String, _ path: String, _ body: [UInt8] = []) async throws -> (Int, String) {
            var r = HTTPRequest(method: method, url: server.url + path, body: body)
            r.setBearerToken(token)
            let resp = try await client.send(r)
            return (resp.status, String(decoding: resp.body, as: UTF8.self))
        }
        var cases = 0
        for _ in 0..<5 {
            let doc = DocumentID()
            let bytes = (0..<100).map { _ in UInt8.random(in: 0...255) }
            let asset = AssetID.of(bytes)
            let base = "/documents/\(doc)/assets"
            var (s, text) = try await send("POST", base + "/missing", Array("[\"\(asset)\"]".utf8))
            #expect(s == 200 && text.contains(asset.description), "missing before: \(s) \(text)")
            (s, text) = try await send("GET", base + "/\(asset)")
            #expect(s == 404 && text.contains("\"not_found\""), "GET before: \(s) \(text)")
            (s, text) = try await send("PUT", base + "/\(asset)", bytes)
            #expect(s == 201, "PUT: \(s) \(text)")
            (s, text) = try await send("PUT", base + "/\(asset)", bytes)
            #expect(s == 204, "PUT again: \(s) \(text)")
            (s, text) = try await send("PUT", base + "/\(AssetID.of([1]))", [2])
            #expect(s == 400, "PUT of bytes that do not hash to the id: \(s) \(text)")
            (s, text) = try await send("POST", base + "/missing", Array("[\"\(asset)\"]".utf8))
            #expect(s == 200 && text == "[]", "missing after: \(s) \(text)")
            (s, _) = try await send("GET", base + "/\(asset)")
            #expect(s == 200, "GET after")
            (s, text) = try await send("PUT", "/documents/\(doc)/checkpoints/\(doc)", [0])
            #expect(s == 404, "checkpoint PUT: \(s) \(text)")
            (s, text) = try await send("DELETE", base + "/\(asset)")
            #expect(s == 405, "DELETE: \(s) \(text)")
            // A sync naming the unknown document's logs in `have`, in hash ranges, and with a
            // cursor, pushing nothing.
            let have = [LogClock(log: LogRef(document: doc), clock: VectorClock([(ReplicaID(5), UInt64(3))])),
                        LogClock(log: LogRef(document: doc, page: PageID()), clock: VectorClock())]
            let q = SyncRequest(replica: ReplicaID(5), epoch: 0, cursor: 0, have: have, digests: [],
                                hashRanges: [HashRange(log: LogRef(document: doc), replica: ReplicaID(5), from: 1, to: 3)])
            (s, text) = try await send("POST", "/sync", SyncCodec.encode(q))
            #expect(s == 200, "sync: \(s) \(text)")
            cases += 10
        }
        #expect(try Self.tree(dir.sub("A")) == before, "the served folder gained files")
        #expect(try await served.documentIDs() == [known])
        try server.close()
        try await served.close()
        #expect(try Notebook.list(at: dir.sub("A")).map(\.id) == [known])
        ReliabilityReport.record(family: "abuse", detail: "PeerServerRouteTests: routes naming unknown documents", cases: cases)
    }
}

/// What a client written from the spec alone found the peer server answering otherwise than
/// sync-protocol.md says: each a request the spec names an answer for.
@Suite struct PeerServerSpecAnswerTests {
    /// [SYNC-22] A known route asked with another method is 405 `method_not_allowed` (JSON),
    /// `GET /v1/hello` included (before any token); an unknown route stays 404.
    @Test func knownRoutesWithAnotherMethodAre405() async throws {
        let dir = try TempDir()
        let doc = try await Fixture.notebook(at: dir.sub("A"), strokes: 2)
        let served = try await Notebook.open(at: dir.sub("A"))
        let token = RelayToken.generate()
        let server = try PeerServer(notebook: served, token: token)
        let client = try HTTPClient()
        defer { try? client.close() }
        func send(_ method: String, _ url: String, token: String? = nil) async throws -> (Int, String) {
            var r = HTTPRequest(method: method, url: url, body: [])
            if let token { r.setBearerToken(token) }
            let resp = try await client.send(r)
            return (resp.status, String(decoding: resp.body, as: UTF8.self))
        }
        let root = "http://127.0.0.1:\(server.http.port)"
        let notAllowed: [(String, String)] = [
            ("POST", root + "/v1/hello"), ("PUT", root + "/v1/hello"),
            ("GET", server.url + "/sync"), ("PUT", server.url + "/sync"),
            ("POST", server.url + "/devices"), ("POST", server.url + "/checkpoints"),
            ("GET", server.url + "/documents/\(doc)/assets/missing"),
            ("GET", server.url + "/documents/\(doc)/checkpoints/\(doc)"),
            ("DELETE", server.url + "/documents/\(doc)/assets/\(AssetID.of([1]))"),
        ]
        for (method, url) in notAllowed {
            let (s, text) = try await send(method, url, token: url.hasSuffix("/hello") ? nil : token)
            #expect(s == 405 && text.contains("\"method_not_allowed\""), "\(method) \(url): \(s) \(text)")
        }
        var (s, text) = try await send("GET", server.url + "/nosuch", token: token)
        #expect(s == 404 && text.contains("\"not_found\""), "unknown route: \(s) \(text)")
        // [SYNC-92] Under the view, another method is 404, not 405.
        for method in ["POST", "PUT", "DELETE", "PATCH"] {
            for path in ["/view", "/view/conflicts", "/view/documents/\(doc)"] {
                (s, text) = try await send(method, server.url + path, token: token)
                #expect(s == 404 && text.contains("\"not_found\""), "\(method) \(path): \(s) \(text)")
            }
        }
        (s, text) = try await send("GET", root + "/v1/hello")
        #expect(s == 200, "hello: \(s) \(text)")
        // Another method does not get past the token: a wrong one is still refused.
        (s, text) = try await send("GET", server.url + "/sync", token: RelayToken.generate())
        #expect(s == 401, "wrong token: \(s) \(text)")
        try server.close()
        try await served.close()
    }

    /// [SYNC-22] [SYNC-24] A body over the server's size limit is 413 `too_large` in the
    /// protocol's JSON, like every other error, and the server goes on serving.
    @Test func bodyOverTheLimitIs413InJSON() async throws {
        let dir = try TempDir()
        _ = try await Fixture.notebook(at: dir.sub("A"), strokes: 1)
        let served = try await Notebook.open(at: dir.sub("A"))
        let token = RelayToken.generate()
        var config = HTTPServer.Configuration()
        config.maxRequestBodyBytes = 64 << 10
        let server = try PeerServer(notebook: served, token: token, configuration: config)
        let client = try HTTPClient()
        defer { try? client.close() }
        var r = HTTPRequest(method: "POST", url: server.url + "/sync", body: [UInt8](repeating: 7, count: 100 << 10))
        r.setBearerToken(token)
        let resp = try await client.send(r)
        let text = String(decoding: resp.body, as: UTF8.self)
        #expect(resp.status == 413, "\(resp.status) \(text)")
        let json = try JSONSerialization.jsonObject(with: Data(resp.body)) as? [String: Any]
        #expect(json?["error"] as? String == "too_large", "\(text)")
        #expect((json?["message"] as? String)?.contains("\(64 << 10)") == true, "\(text)")
        // Still serving.
        var hello = HTTPRequest(method: "GET", url: "http://127.0.0.1:\(server.http.port)/v1/hello", body: [])
        hello.setBearerToken(token)
        #expect(try await client.send(hello).status == 200)
        try server.close()
        try await served.close()
    }

    /// [SYNC-22] A page operation pushed in a document log is 400 `bad_request`, and the
    /// message names the operation, the log and the offset of its frame in the body.
    @Test func operationInTheWrongLogNamesItsOffset() async throws {
        let dir = try TempDir()
        let doc = try await Fixture.notebook(at: dir.sub("A"), strokes: 1)
        let served = try await Notebook.open(at: dir.sub("A"))
        let token = RelayToken.generate()
        let server = try PeerServer(notebook: served, token: token)
        let client = try HTTPClient()
        defer { try? client.close() }
        var page = PageReplica(page: PageID())
        var points: [StrokePoint] = []
        for i: Int32 in 0..<12 { points.append(StrokePoint(x: 100 + 7 * i, y: 200 + 3 * i, t: UInt32(8 * i))) }
        let op = try page.add(.stroke(Stroke(style: InkStyle(), points: points)), by: ReplicaID(0xC1), wallTime: 1)
        let body = SyncCodec.encode(SyncRequest(replica: ReplicaID(0xC1), epoch: 0, cursor: 0,
                                                push: [LogBatch(log: LogRef(document: doc), ops: [op])]))
        var r = HTTPRequest(method: "POST", url: server.url + "/sync", body: body)
        r.setBearerToken(token)
        let resp = try await client.send(r)
        let text = String(decoding: resp.body, as: UTF8.self)
        let frame = OperationCodec.frame(op)
        var w = ByteWriter()
        frame.encode(into: &w)
        // The frame's bytes end the body: its offset is where they start.
        let at = body.count - w.bytes.count
        #expect(Array(body[at...]) == w.bytes)
        let named = text.contains("does not belong in log") && text.contains("offset \(at)") && text.contains("\(op.id)")
        #expect(resp.status == 400 && text.contains("\"bad_request\"") && named, "\(resp.status) \(text)")
        #expect(try await served.documentIDs() == [doc])
        try server.close()
        try await served.close()
    }

    /// [SYNC-9] A cursor greater than the server's own (what a client holds after the
    /// server's store was put back to an older copy) is answered `resync`: no pull, and the
    /// client falls back to comparing clocks. A cursor at or below it is answered as usual.
    @Test func cursorBeyondTheServersIsResync() async throws {
        let dir = try TempDir()
        _ = try await Fixture.notebook(at: dir.sub("A"), strokes: 3)
        let served = try await Notebook.open(at: dir.sub("A"))
        let endpoint = NotebookEndpoint(notebook: served)
        let me = ReplicaID(77)
        let first = try await endpoint.sync(SyncRequest(replica: me, epoch: 0, cursor: 0, have: []))
        #expect(!first.resync && !first.pull.isEmpty)
        let at = try await endpoint.sync(SyncRequest(replica: me, epoch: first.epoch, cursor: first.cursor))
        #expect(!at.resync && at.pull.isEmpty && at.cursor == first.cursor, "\(at)")
        for beyond in [first.cursor + 1, first.cursor + 1_000, UInt64.max] {
            let a = try await endpoint.sync(SyncRequest(replica: me, epoch: first.epoch, cursor: beyond))
            #expect(a.resync && a.pull.isEmpty && a.cursor == first.cursor, "cursor \(beyond): \(a)")
        }
        try await served.close()
    }
}
