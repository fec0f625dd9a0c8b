import Foundation
import Testing
import LnoteModel
import LnoteReplication
import LnoteStore
import LnoteSync
import LnoteServer
import LnoteTestSupport

/// Images of documents the other side does not hold yet, through every transport (folder,
/// peer server, relay), and the statuses and error codes of the asset routes
/// (`Protocol/sync-protocol.md` [SYNC-8], [SYNC-10], [SYNC-11], [SYNC-22]).
@Suite struct AssetSyncTests {
    /// A folder with one new document whose first page holds a stroke and two images;
    /// returns the document and the images' bytes. `seed` varies the bytes (printed by the
    /// callers' failure messages).
    static func documentWithImages(at path: String, seed: UInt64) async throws -> (DocumentID, [[UInt8]]) {
        var rng = TestRNG(seed: seed)
        let images = (0..<2).map { _ in (0..<Int.random(in: 500...3000, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) } }
        let nb = try await Notebook.open(at: path, create: true, options: Fixture.quiet)
        let d = try await nb.createDocument(title: "with images")
        let pid = await d.pageList[0].id
        _ = try await d.addStroke(HandwritingGenerator.strokes(seed: seed, count: 1)[0], to: pid)
        for (i, bytes) in images.enumerated() {
            _ = try await d.addImage(bytes, frame: QRect(x: Int32(100 * i), y: 50, width: 400, height: 300), to: pid)
        }
        let id = d.id
        try await nb.close()
        return (id, images)
    }

    /// The asset files of a document package, and the assets waiting in the folder's
    /// staging area ([SYNC-10]).
    static func assetFiles(_ folder: String, _ doc: DocumentID) throws -> (package: Set<String>, waiting: [String]) {
        let fm = FileManager.default
        let package = Set(try fm.contentsOfDirectory(atPath: PackagePaths(folder: folder, id: doc).assets))
        let incoming = folder + "/.lnote/incoming"
        let waiting = fm.fileExists(atPath: incoming) ? try fm.contentsOfDirectory(atPath: incoming) : []
        return (package, waiting)
    }

    static func documents(_ folder: String) async throws -> [DocumentID] {
        let nb = try await Notebook.open(at: folder, create: true, options: Fixture.quiet)
        let ids = try await nb.documentIDs()
        try await nb.close()
        return ids
    }

    static func verified(_ folder: String) async throws -> [String] {
        let nb = try await Notebook.open(at: folder, options: Fixture.quiet)
        let report = try await nb.verify()
        try await nb.close()
        return report.problems.map { "\($0)" }
    }

    /// [SYNC-10] `lnote sync A B`, B empty: A's new document with two images arrives at the
    /// first sync (it used to fail once with "asset … is not stored": the assets were
    /// written into a package created for them, then removed as orphans when the document
    /// log's receipt closed the document). Then back from B to a third, empty folder.
    @Test("[SYNC-10] folder to folder: a new document with images syncs at the first try")
    func folderToFolder() async throws {
        let seed: UInt64 = 101
        let dir = try TempDir()
        let (a, b, c) = (dir.sub("A"), dir.sub("B"), dir.sub("C"))
        let (doc, images) = try await Self.documentWithImages(at: a, seed: seed)
        let lnote = Subprocess.product("lnote")
        _ = try await Subprocess.run(lnote, ["init", b])
        let first = try await Subprocess.run(lnote, ["sync", a, b])
        #expect(first.status == 0, "seed \(seed): lnote sync A B: \(first.errText)")
        #expect(first.outText.contains("assets ↑2"), "seed \(seed): \(first.outText)")
        let ids = Set(images.map { AssetID.of($0).description })
        #expect(try Self.assetFiles(b, doc).package == ids, "seed \(seed)")
        #expect(try Self.assetFiles(b, doc).waiting.isEmpty, "seed \(seed): waiting copies are removed once adopted")
        #expect(try await Fixture.canonical(a) == Fixture.canonical(b), "seed \(seed)")
        #expect(try await Self.verified(b).isEmpty, "seed \(seed)")
        // The other way: B is the client, C the empty folder it pushes to.
        _ = try await Subprocess.run(lnote, ["init", c])
        let back = try await Subprocess.run(lnote, ["sync", b, c])
        #expect(back.status == 0, "seed \(seed): lnote sync B C: \(back.errText)")
        #expect(try Self.assetFiles(c, doc).package == ids, "seed \(seed)")
        #expect(try await Fixture.canonical(a) == Fixture.canonical(c), "seed \(seed)")
        // Pulling into an empty folder too: D is the client and receives everything.
        let d = dir.sub("D")
        _ = try await Subprocess.run(lnote, ["init", d])
        let pull = try await Subprocess.run(lnote, ["sync", d, c])
        #expect(pull.status == 0, "seed \(seed): lnote sync D C: \(pull.errText)")
        #expect(pull.outText.contains("↓2"), "seed \(seed): \(pull.outText)")
        #expect(try Self.assetFiles(d, doc).package == ids, "seed \(seed)")
        #expect(try await Fixture.canonical(a) == Fixture.canonical(d), "seed \(seed)")
    }

    /// [SYNC-60] [PKG-14] A peer folder whose stored asset does not hash to its name cannot
    /// give it: the folder sync quarantines the one image that needs it and brings the rest
    /// (another document, the page's stroke and other image), exit 3, instead of failing
    /// whole on every run (as it did; over HTTP it already quarantined).
    @Test("[SYNC-60] folder to folder: a damaged asset quarantines its image; the rest arrives")
    func damagedAssetInAPeerFolder() async throws {
        let seed: UInt64 = 113
        let dir = try TempDir()
        let (a, b) = (dir.sub("A"), dir.sub("B"))
        let (doc, images) = try await Self.documentWithImages(at: a, seed: seed)
        let other = try await Fixture.notebook(at: dir.sub("other"), strokes: 3)
        let lnote = Subprocess.product("lnote")
        _ = try await Subprocess.run(lnote, ["sync", a, dir.sub("other")])
        let damaged = PackagePaths(folder: a, id: doc).asset(AssetID.of(images[0]))
        var bytes = try #require(FileManager.default.contents(atPath: damaged))
        bytes[0] ^= 0xFF
        try bytes.write(to: URL(fileURLWithPath: damaged))
        _ = try await Subprocess.run(lnote, ["init", b])
        let r = try await Subprocess.run(lnote, ["sync", b, a])
        #expect(r.status == 3, "seed \(seed): \(r.errText)")
        #expect(r.errText.contains("quarantined") && r.errText.contains(AssetID.of(images[0]).description), "\(r.errText)")
        #expect(Set(try await Self.documents(b)) == [doc, other], "seed \(seed)")
        #expect(try Self.assetFiles(b, doc).package == [AssetID.of(images[1]).description], "seed \(seed)")
    }

    /// [SYNC-10] [SYNC-8] An empty folder served by `lnote serve` receives a new document
    /// with images at the first sync (it used to fail every time with 404), and a third,
    /// empty folder pulls it from there, assets first.
    @Test("[SYNC-10] [SYNC-8] peer server: a new document with images syncs to and from an empty served folder")
    func peerServer() async throws {
        let seed: UInt64 = 202
        let dir = try TempDir()
        let (a, s, c) = (dir.sub("A"), dir.sub("S"), dir.sub("C"))
        let (doc, images) = try await Self.documentWithImages(at: a, seed: seed)
        let served = try await Notebook.open(at: s, create: true, options: Fixture.quiet)
        let server = try PeerServer(notebook: served, token: Fixture.peerToken)
        let up = try await Fixture.sync(a, server.url, token: Fixture.peerToken)
        #expect(up.assetsSent == 2 && up.opsAccepted == up.opsSent && up.opsSent > 0, "seed \(seed): \(up)")
        let down = try await Fixture.sync(c, server.url, token: Fixture.peerToken)
        #expect(down.assetsReceived == 2, "seed \(seed): \(down)")
        try server.close()
        try await served.close()
        let ids = Set(images.map { AssetID.of($0).description })
        for folder in [s, c] {
            #expect(try Self.assetFiles(folder, doc).package == ids, "seed \(seed): \(folder)")
            #expect(try Self.assetFiles(folder, doc).waiting.isEmpty, "seed \(seed): \(folder)")
            #expect(try await Self.verified(folder).isEmpty, "seed \(seed): \(folder)")
        }
        #expect(try await Fixture.canonical(a) == Fixture.canonical(s), "seed \(seed)")
        #expect(try await Fixture.canonical(a) == Fixture.canonical(c), "seed \(seed)")
    }

    /// [SYNC-10] The same through a relay: the newcomer's pull of a document it does not
    /// hold stores the downloaded assets before the operations, and keeps them.
    @Test("[SYNC-10] relay: a new document with images syncs up, and down to an empty folder")
    func relay() async throws {
        let seed: UInt64 = 303
        let dir = try TempDir()
        let relay = try LocalRelay(dir: dir)
        defer { relay.close() }
        let (a, b) = (dir.sub("A"), dir.sub("B"))
        let (doc, images) = try await Self.documentWithImages(at: a, seed: seed)
        #expect(try await Fixture.sync(a, relay.url, token: relay.token).assetsSent == 2, "seed \(seed)")
        #expect(try await Fixture.sync(b, relay.url, token: relay.token).assetsReceived == 2, "seed \(seed)")
        #expect(try Self.assetFiles(b, doc).package == Set(images.map { AssetID.of($0).description }), "seed \(seed)")
        #expect(try Self.assetFiles(b, doc).waiting.isEmpty, "seed \(seed)")
        #expect(try await Fixture.canonical(a) == Fixture.canonical(b), "seed \(seed)")
        #expect(try relay.store.info(notebook: relay.notebook).assets == 2)
    }

    /// [SYNC-10] An upload for a document the server does not hold is kept apart, not in a
    /// package made up for it; closing a document (here: receiving its document log, which
    /// opens and closes it) never removes an asset whose operation has not arrived yet; the
    /// operation then adopts it.
    @Test("[SYNC-10] waiting assets: no package is made for them, closing a document keeps them, their operation adopts them")
    func waitingAssets() async throws {
        let seed: UInt64 = 404
        let dir = try TempDir()
        let (doc, images) = try await Self.documentWithImages(at: dir.sub("A"), seed: seed)
        let a = try await Notebook.open(at: dir.sub("A"), options: Fixture.quiet)
        let b = try await Notebook.open(at: dir.sub("B"), create: true, options: Fixture.quiet)
        let assets = images.map(AssetID.of)
        for bytes in images { _ = try await b.writeAsset(bytes, document: doc) }
        #expect(try await b.documentIDs().isEmpty, "seed \(seed): an upload made a document")
        for id in assets {
            #expect(try await b.hasAsset(id, document: doc))
            #expect(try await !b.hasAsset(id, document: DocumentID()), "held for its document only")
        }
        // The document log first, alone: the document is created, opened and closed.
        let docOps = try await a.openDocument(doc).operations(notCoveredBy: VectorClock())
        try await b.receive(docOps, document: doc, page: nil)
        try await b.openDocument(doc).close()
        for id in assets { #expect(try await b.hasAsset(id, document: doc), "seed \(seed): closing removed a waiting asset") }
        // Then the page log: the images' operations adopt the waiting assets.
        let pid = try await a.openDocument(doc).pageList[0].id
        let pageOps = try await a.openDocument(doc).operations(page: pid, notCoveredBy: VectorClock())
        try await b.receive(pageOps, document: doc, page: pid)
        try await b.openDocument(doc).close()
        #expect(try Self.assetFiles(dir.sub("B"), doc) == (Set(assets.map(\.description)), []), "seed \(seed)")
        for (id, bytes) in zip(assets, images) { #expect(try await b.readAsset(id, document: doc) == bytes) }
        try await a.close()
        try await b.close()
        #expect(try await Fixture.canonical(dir.sub("A")) == Fixture.canonical(dir.sub("B")), "seed \(seed)")
    }

    /// [SYNC-10] `PUT …/assets/{asset}` answers 201 when the asset is new and 204 when it
    /// is held, on the peer server and on the relay; for a document the peer does not hold
    /// it creates no document; a refused upload (bytes that do not hash to the id) stores
    /// nothing.
    @Test("[SYNC-10] asset PUT: 201 new, 204 held; no document appears; a refused PUT stores nothing")
    func assetStatuses() async throws {
        let dir = try TempDir()
        let served = try await Notebook.open(at: dir.sub("S"), create: true, options: Fixture.quiet)
        let peer = try PeerServer(notebook: served, token: Fixture.peerToken)
        let relay = try LocalRelay(dir: dir)
        defer { relay.close() }
        let client = try HTTPClient()
        defer { try? client.close() }
        var rng = TestRNG(seed: 505)
        let bytes = (0..<1000).map { _ in UInt8.random(in: 0...255, using: &rng) }
        let id = AssetID.of(bytes)
        let doc = DocumentID()
        for (name, base, token) in [("peer", peer.url, Fixture.peerToken), ("relay", relay.url, relay.token)] {
            func send(_ method: String, _ path: String, _ body: [UInt8] = []) async throws -> HTTPResponse {
                var r = HTTPRequest(method: method, url: base + path, headers: [:], body: body)
                r.setBearerToken(token)
                return try await client.send(r)
            }
            let put = "/documents/\(doc)/assets/\(id)"
            let refused = try await send("PUT", put, bytes + [0])
            #expect(refused.status == 400, "\(name): \(refused.status)")
            #expect(String(decoding: try await send("POST", "/documents/\(doc)/assets/missing", Array("[\"\(id)\"]".utf8)).body,
                           as: UTF8.self) == "[\"\(id)\"]", "\(name): the refused upload stored something")
            #expect(try await send("PUT", put, bytes).status == 201, "\(name)")
            #expect(try await send("PUT", put, bytes).status == 204, "\(name)")
            #expect(try await send("POST", "/documents/\(doc)/assets/missing", Array("[\"\(id)\"]".utf8)).body == Array("[]".utf8), "\(name)")
            #expect(try await send("GET", put).body == bytes, "\(name)")
        }
        #expect(try await served.documentIDs().isEmpty, "an upload made a document package")
        try peer.close()
        try await served.close()
        #expect(try relay.store.info(notebook: relay.notebook).assets == 1)
    }

    /// [SYNC-22] [SYNC-8] A push naming an asset that was never uploaded is refused with
    /// 409 `asset_missing` by both servers, changes nothing, and the client reports
    /// `notFound` naming the request and the code.
    @Test("[SYNC-22] [SYNC-8] asset_missing: 409 and its code from the peer and the relay; the client reports notFound")
    func assetMissing() async throws {
        let dir = try TempDir()
        let served = try await Notebook.open(at: dir.sub("S"), create: true, options: Fixture.quiet)
        let peer = try PeerServer(notebook: served, token: Fixture.peerToken)
        let relay = try LocalRelay(dir: dir)
        defer { relay.close() }
        let client = try HTTPClient()
        defer { try? client.close() }
        let doc = DocumentID(), page = PageID()
        let me = ReplicaID(0x5A)
        var d = DocumentReplica(id: doc)
        var p = PageReplica(page: page)
        let docOps = [try d.make(.createDocument(title: "x"), by: me, wallTime: 1),
                      try d.make(.addPage(page, position: d.endPosition, canvas: .a4), by: me, wallTime: 2)]
        let asset = AssetID.of([7, 7, 7])
        let image = try p.add(.image(ImageElement(asset: asset, frame: QRect(x: 0, y: 0, width: 10, height: 10))), by: me, wallTime: 3)
        let request = SyncRequest(replica: me, epoch: 0, cursor: 0, have: [],
                                  push: [LogBatch(log: LogRef(document: doc), ops: docOps),
                                         LogBatch(log: LogRef(document: doc, page: page), ops: [image])])
        for (name, url, token) in [("peer", peer.url, Fixture.peerToken), ("relay", relay.url, relay.token)] {
            var raw = HTTPRequest.post(url + "/sync", body: SyncCodec.encode(request))
            raw.setBearerToken(token)
            let r = try await client.send(raw)
            #expect(r.status == 409, "\(name)")
            let body = try JSONSerialization.jsonObject(with: Data(r.body)) as? [String: Any]
            #expect(body?["error"] as? String == "asset_missing", "\(name): \(String(decoding: r.body, as: UTF8.self))")
            #expect((body?["message"] as? String)?.contains(asset.description) == true, "\(name)")
            let remote = try HTTPRemote(url: url, options: .init(token: token))
            defer { try? remote.close() }
            do {
                _ = try await remote.sync(request)
                Issue.record("\(name): accepted")
            } catch let e as LnoteError {
                #expect(e.code == .notFound, "\(name): \(e)")
                #expect(e.underlying == "HTTP 409 asset_missing", "\(name): \(e)")
                #expect(e.message.contains("POST \(url)/sync"), "\(name): \(e)")
            }
        }
        #expect(try await served.documentIDs().isEmpty, "the peer stored part of a refused push")
        #expect(try relay.store.info(notebook: relay.notebook).operations == 0)
        try peer.close()
        try await served.close()
    }

    /// [SYNC-22] [SYNC-43] A peer serving a replica installed from a checkpoint refuses a
    /// client further behind with 409 `history_not_held` (not `asset_missing`, not a tail);
    /// the client reports `invalidState` and receives nothing of that page.
    @Test("[SYNC-22] [SYNC-43] history_not_held: 409 and its code from a peer serving an installed replica")
    func historyNotHeld() async throws {
        let dir = try TempDir()
        let relay = try LocalRelay(dir: dir)
        defer { relay.close() }
        let (a, b, c) = (dir.sub("A"), dir.sub("B"), dir.sub("C"))
        _ = try await Fixture.notebook(at: a, strokes: 300, seed: 41)
        #expect(try await Fixture.sync(a, relay.url, token: relay.token).checkpointsSent == 1)
        #expect(try await Fixture.sync(b, relay.url, token: relay.token).checkpointsInstalled == 1)
        let served = try await Notebook.open(at: b, options: Fixture.quiet)
        let peer = try PeerServer(notebook: served, token: Fixture.peerToken)
        do {
            try await Fixture.sync(c, peer.url, token: Fixture.peerToken)
            Issue.record("a replica lacking history served a tail")
        } catch let e as LnoteError {
            #expect(e.code == .invalidState, "\(e)")
            #expect(e.underlying == "HTTP 409 history_not_held", "\(e)")
            #expect(e.message.contains("history before checkpoint clock"), "\(e)")
        }
        // The raw answer to a first contact with nothing held.
        let client = try HTTPClient()
        defer { try? client.close() }
        var raw = HTTPRequest.post(peer.url + "/sync", body: SyncCodec.encode(SyncRequest(replica: ReplicaID(9), epoch: 0, cursor: 0, have: [])))
        raw.setBearerToken(Fixture.peerToken)
        let r = try await client.send(raw)
        #expect(r.status == 409)
        let body = try JSONSerialization.jsonObject(with: Data(r.body)) as? [String: Any]
        #expect(body?["error"] as? String == "history_not_held", "\(String(decoding: r.body, as: UTF8.self))")
        try peer.close()
        try await served.close()
        let (doc, pid) = try await CheckpointTests.firstPage(a)
        #expect(!FileManager.default.fileExists(atPath: PackagePaths(folder: c, id: doc).log(pid)), "C received part of the page")
    }

    /// [SYNC-11] A peer answers to one notebook id, derived from its folder's replica id
    /// (the same after a restart); another id gets 404 and nothing is read or written.
    @Test("[SYNC-11] a peer serves one notebook id, from its replica id; another id is 404 and changes nothing")
    func peerNotebookID() async throws {
        #expect(PeerServer.notebookID(replica: ReplicaID(0xA1)) == UUID(uuidString: "A1000000-0000-4000-AC6E-6F7465706565"))
        let dir = try TempDir()
        _ = try await Fixture.notebook(at: dir.sub("S"), strokes: 3)
        let served = try await Notebook.open(at: dir.sub("S"), options: Fixture.quiet)
        let replica = served.replicaID
        let server = try PeerServer(notebook: served, token: Fixture.peerToken)
        #expect(server.notebookID == PeerServer.notebookID(replica: replica))
        #expect(server.url.hasSuffix("/v1/notebooks/\(server.notebookID.uuidString)"))
        let before: [NotebookLogClock] = try await served.logClocks()
        let other = server.url.replacingOccurrences(of: server.notebookID.uuidString, with: UUID().uuidString)
        _ = try await Self.documentWithImages(at: dir.sub("C"), seed: 606)
        do {
            try await Fixture.sync(dir.sub("C"), other, token: Fixture.peerToken)
            Issue.record("a peer served another notebook id")
        } catch let e as LnoteError {
            #expect(e.code == .notFound, "\(e)")
            #expect(e.underlying == "HTTP 404 not_found", "\(e)")
        }
        let after: [NotebookLogClock] = try await served.logClocks()
        #expect(after == before)
        #expect(!FileManager.default.fileExists(atPath: dir.sub("S") + "/.lnote/incoming"), "an upload went through")
        // A wrong token is still 401 first, whatever the id.
        await #expect(throws: LnoteError(.unauthorized)) { try await Fixture.sync(dir.sub("C"), other, token: "nope") }
        try server.close()
        // Restarted on the same folder: the same URL.
        let again = try PeerServer(notebook: served, token: Fixture.peerToken)
        #expect(again.notebookID == server.notebookID)
        try await Fixture.sync(dir.sub("D"), again.url, token: Fixture.peerToken)
        try again.close()
        try await served.close()
        #expect(try await Fixture.canonical(dir.sub("S")) == Fixture.canonical(dir.sub("D")))
    }
}
