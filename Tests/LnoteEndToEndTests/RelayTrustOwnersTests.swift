import Foundation
import Testing
import LnoteModel
import LnoteReplication
import LnoteStore
import LnoteSync
import LnoteServer

/// Owners ([SYNC-57]) and forks ([SYNC-51]) through the real servers, over HTTP.
@Suite struct RelayTrustOwnersTests {
    /// The first page log of the folder's only document, its state, and the folder's replica.
    static func firstPage(_ folder: String) async throws -> (log: LogRef, state: PageState, replica: ReplicaID, frames: [Frame]) {
        let nb = try await Notebook.open(at: folder, options: Fixture.quiet)
        let d = try await nb.openDocument(try await nb.documentIDs()[0])
        let pid = await d.pageList[0].id
        let state = try await d.pageState(pid)
        let log = LogRef(document: d.id, page: pid)
        let frames = try await nb.frames(in: log, notCoveredBy: VectorClock())
        try await nb.close()
        return (log, state, nb.replica, frames)
    }

    /// A new stroke on that page authored under `replica` (a valid operation the folder does not hold).
    static func newStroke(on page: (log: LogRef, state: PageState), by replica: ReplicaID, seed: UInt64) throws -> Op {
        var r = PageReplica(state: page.state)
        return try r.add(.stroke(HandwritingGenerator.strokes(seed: seed, count: 1)[0]), by: replica, wallTime: 1_700_000_000_000)
    }

    static func post(_ client: HTTPClient, _ url: String, token: String, _ request: SyncRequest) async throws
        -> (status: Int, json: [String: Any], body: [UInt8]) {
        var req = HTTPRequest.post(url + "/sync", body: SyncCodec.encode(request))
        req.setBearerToken(token)
        let r = try await client.send(req)
        return (r.status, (try? JSONSerialization.jsonObject(with: Data(r.body))) as? [String: Any] ?? [:], r.body)
    }

    static func devices(_ client: HTTPClient, _ url: String, token: String?) async throws -> (Int, [[String: String]]) {
        var req = HTTPRequest(method: "GET", url: url + "/devices")
        if let token { req.setBearerToken(token) }
        let r = try await client.send(req)
        return (r.status, (try? JSONSerialization.jsonObject(with: Data(r.body))) as? [[String: String]] ?? [])
    }

    @Test("[SYNC-57] a relay's devices own their replicas: another device's new operation under one is 403 naming replica and owner, nothing stored; GET devices lists the owners")
    func relayOwners() async throws {
        let dir = try TempDir()
        let store = try RelayStore(path: dir.sub("relay.sqlite"))
        let nb = try store.createNotebook()
        let laptop = try store.createToken(notebook: nb, label: "", device: "laptop")
        let tablet = try store.createToken(notebook: nb, label: "", device: "tablet")
        let legacy = try store.createToken(notebook: nb, label: "made before devices")
        let server = try RelayServer(store: store)
        defer {
            try? server.close()
            try? store.close()
        }
        let url = server.url(notebook: nb)
        let client = try HTTPClient()
        defer { try? client.close() }

        _ = try await Fixture.notebook(at: dir.sub("A"), strokes: 5)
        try await Fixture.sync(dir.sub("A"), url, token: laptop)
        let a = try await Self.firstPage(dir.sub("A"))
        #expect(try await Self.devices(client, url, token: tablet) == (200, [["replica": a.replica.description, "device": "laptop"]]))
        #expect(try await Self.devices(client, url, token: nil).0 == 401)

        // The tablet pushes a stroke made under A's replica id, beside one of its own.
        let forged = try Self.newStroke(on: (a.log, a.state), by: a.replica, seed: 5)
        let own = try Self.newStroke(on: (a.log, a.state), by: ReplicaID(0x7AB), seed: 6)
        let before = try store.info(notebook: nb)
        let attack = SyncRequest(replica: ReplicaID(0x7AB), epoch: 0, cursor: 0, push: [LogBatch(log: a.log, ops: [own, forged])])
        let r = try await Self.post(client, url, token: tablet, attack)
        #expect(r.status == 403)
        #expect(r.json["error"] as? String == "forbidden")
        #expect(r.json["replica"] as? String == a.replica.description && r.json["device"] as? String == "laptop")
        let message = r.json["message"] as? String ?? ""
        #expect(message.contains(a.replica.description) && message.contains("\"laptop\"") && message.contains(forged.id.description),
                "\(message)")
        #expect(try store.info(notebook: nb) == before, "nothing stored")
        // The client sees the replica and its owner ([SYNC-57]) and reports a 403 ([SYNC-22]:
        // unauthorized) when it cannot go on without that replica's operations.
        let remote = try HTTPRemote(url: url, options: .init(token: tablet))
        defer { try? remote.close() }
        do {
            _ = try await remote.sync(attack)
            Issue.record("the push was accepted")
        } catch let refusal as OwnerRefusal {
            #expect(refusal.replica == a.replica && refusal.device == "laptop" && refusal.error.code == .unauthorized)
        }
        // A's operations as held are fine from the tablet (duplicates).
        let dup = try await Self.post(client, url, token: tablet,
                                      SyncRequest(replica: ReplicaID(0x7AB), epoch: 0, cursor: 0, push: [LogBatch(log: a.log, frames: a.frames)]))
        #expect(dup.status == 200)
        #expect(try SyncCodec.decodeResponse(dup.body).accepted == 0)

        // Folders B (the tablet) and C (a token made without a device) sync their own work.
        try await Fixture.sync(dir.sub("B"), url, token: tablet)
        try await RelayTrustRestoreTests.draw(dir.sub("B"), 2, seed: 8)
        try await Fixture.sync(dir.sub("B"), url, token: tablet)
        try await Fixture.sync(dir.sub("C"), url, token: legacy)
        try await RelayTrustRestoreTests.draw(dir.sub("C"), 1, seed: 9)
        try await Fixture.sync(dir.sub("C"), url, token: legacy)
        let b = try await Self.firstPage(dir.sub("B")).replica, c = try await Self.firstPage(dir.sub("C")).replica
        let unnamed = "token-" + String(hexString(RelayToken.digest(legacy)).prefix(8))
        let expected = [(a.replica, "laptop"), (b, "tablet"), (c, unnamed)].sorted { $0.0 < $1.0 }
            .map { ["replica": $0.0.description, "device": $0.1] }
        #expect(try await Self.devices(client, url, token: laptop) == (200, expected))
        // And A receives everything.
        try await Fixture.sync(dir.sub("A"), url, token: laptop)
        #expect(try await Fixture.canonical(dir.sub("A")) == Fixture.canonical(dir.sub("C")))
    }

    @Test("[SYNC-51] a fork pushed over HTTP: listed in the answer's forks with the hash held, nothing replaced")
    func forkOverHTTP() async throws {
        let dir = try TempDir()
        let relay = try LocalRelay(dir: dir)
        defer { relay.close() }
        _ = try await Fixture.notebook(at: dir.sub("A"), strokes: 3)
        try await Fixture.sync(dir.sub("A"), relay.url, token: relay.token)
        let a = try await Self.firstPage(dir.sub("A"))
        // Another stroke under A's last id, as a copy restored in place would make it.
        var earlier = PageReplica(page: a.log.page!)
        let heldOps = try a.frames.map { try OperationCodec.decode($0) }
        _ = try earlier.receive(Array(heldOps.dropLast()))
        let fork = try earlier.add(.stroke(HandwritingGenerator.strokes(seed: 77, count: 1)[0]), by: a.replica, wallTime: 5)
        #expect(fork.id == heldOps.last!.id && OperationCodec.frame(fork) != a.frames.last!)
        let client = try HTTPClient()
        defer { try? client.close() }
        let r = try await Self.post(client, relay.url, token: relay.token,
                                    SyncRequest(replica: a.replica, epoch: 0, cursor: 0, push: [LogBatch(log: a.log, ops: [fork])]))
        #expect(r.status == 200)
        let answer = try SyncCodec.decodeResponse(r.body)
        // [SYNC-50] The hash of the held frame's hash form (it is an addStroke on disk).
        let f = OperationCodec.frame(try OperationCodec.decode(a.frames.last!), form: .hash)
        #expect(answer.accepted == 0)
        #expect(answer.forks == [ForkReport(log: a.log, id: fork.id, held: SHA256.hash([f.type] + f.payload))])
        let b = try await Fixture.sync(dir.sub("B"), relay.url, token: relay.token)
        #expect(b.opsApplied > 0)
        #expect(try await Fixture.canonical(dir.sub("A")) == Fixture.canonical(dir.sub("B")), "the relay kept A's own")
    }

    @Test("[SYNC-57] the peer server owns its folder's replica id: a new operation under it is 403; the ones it holds are duplicates")
    func peerOwnsItsReplica() async throws {
        let dir = try TempDir()
        _ = try await Fixture.notebook(at: dir.sub("P"), strokes: 4)
        let p = try await Self.firstPage(dir.sub("P"))
        let served = try await Notebook.open(at: dir.sub("P"), options: Fixture.quiet)
        let server = try PeerServer(notebook: served, token: Fixture.peerToken)
        let client = try HTTPClient()
        let clocks: [LogClock] = try await served.logClocks()

        let forged = try Self.newStroke(on: (p.log, p.state), by: p.replica, seed: 3)
        let r = try await Self.post(client, server.url, token: Fixture.peerToken,
                                    SyncRequest(replica: ReplicaID(0xB0B), epoch: 0, cursor: 0, push: [LogBatch(log: p.log, ops: [forged])]))
        #expect(r.status == 403)
        #expect(r.json["error"] as? String == "forbidden" && r.json["replica"] as? String == p.replica.description)
        #expect((r.json["message"] as? String ?? "").contains(forged.id.description))
        #expect(try await served.logClocks() == clocks, "nothing stored")
        // What it holds, byte for byte, goes through as duplicates.
        let dup = try await Self.post(client, server.url, token: Fixture.peerToken,
                                      SyncRequest(replica: ReplicaID(0xB0B), epoch: 0, cursor: 0, push: [LogBatch(log: p.log, frames: p.frames)]))
        #expect(dup.status == 200)
        #expect(try SyncCodec.decodeResponse(dup.body).accepted == 0)
        // [issue 18] A peer answers with the names its folder knows: none here, an empty list.
        let devices = try await Self.devices(client, server.url, token: Fixture.peerToken)
        #expect(devices.0 == 200 && devices.1.isEmpty, "\(devices)")
        // A folder syncing its own work with it is unaffected.
        try await Fixture.sync(dir.sub("B"), server.url, token: Fixture.peerToken)
        try await RelayTrustRestoreTests.draw(dir.sub("B"), 2, seed: 4)
        let rb = try await Fixture.sync(dir.sub("B"), server.url, token: Fixture.peerToken)
        #expect(rb.opsAccepted == 2)
        try? client.close()
        try server.close()
        try await served.close()
        #expect(try await Fixture.canonical(dir.sub("P")) == Fixture.canonical(dir.sub("B")))
    }
}
