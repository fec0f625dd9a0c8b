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
