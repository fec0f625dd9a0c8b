import Foundation
import Testing
import LnoteModel
import LnoteReplication
import LnoteStore
import LnoteSync
import LnoteServer

/// The pushes the issue "Trust nothing that arrives" reproduced, written byte by byte
/// (`Attacker`), sent over real HTTP to both servers: each is refused 400 naming the
/// operation, the rule and the byte offset of the operation in the body, and nothing of
/// the request is stored (`Protocol/sync-protocol.md` §6, [SYNC-30], [LOG-4], [LOG-21],
/// [MERGE-12]).
@Suite struct RelayTrustHostileTests {
    static let attacker: UInt64 = 0xE1

    /// One server under attack: where to post, and a view of everything it holds.
    struct Target {
        var name: String
        var url: String
        var token: String
        var holds: @Sendable () async throws -> String
    }

    /// A hostile case: valid operations first (a half-stored push would show), then the bad one.
    struct Case {
        var name: String
        var push: [Attacker.Batch]
        /// The bad frame: batch, frame index.
        var bad: (batch: Int, frame: Int)
        var counter: UInt64
        var rule: String
        /// Where in the frame's payload the error is reported: the Lamport field for
        /// [LOG-4], the payload's start otherwise.
        var offsetInPayload: Int
    }

    static func cases() -> [Case] {
        let r = attacker
        let lamportAt = 8 + 1 // replica u64, one-byte counter
        func doc() -> UUID { UUID() }
        var out: [Case] = []
        // Page log: an add whose Lamport timestamp is 2^64 − 1.
        let d1 = doc(), p1 = UUID()
        out.append(Case(name: "add with Lamport 2^64-1",
                        push: [Attacker.Batch(document: d1, page: nil, frames: [
                                   Attacker.createDocument(replica: r, counter: 1, lamport: 1, title: "ok"),
                                   Attacker.addPage(replica: r, counter: 2, lamport: 2, page: p1, layer: 2)]),
                               Attacker.Batch(document: d1, page: p1, frames: [
                                   Attacker.add(replica: r, counter: 1, lamport: 1, layer: 1),
                                   Attacker.add(replica: r, counter: 2, lamport: UInt64.max, layer: 1, context: [])])],
                        bad: (1, 1), counter: 2, rule: "[LOG-4]", offsetInPayload: lamportAt))
        // Page log: an add whose z layer exceeds its Lamport timestamp.
        let d2 = doc(), p2 = UUID()
        out.append(Case(name: "add with z layer above its Lamport timestamp",
                        push: [Attacker.Batch(document: d2, page: p2, frames: [
                                   Attacker.add(replica: r, counter: 1, lamport: 1, layer: 1),
                                   Attacker.add(replica: r, counter: 2, lamport: 2, layer: 1_000_000)])],
                        bad: (0, 1), counter: 2, rule: "[MERGE-12]", offsetInPayload: 0))
        // The same on the document log.
        let d3 = doc()
        out.append(Case(name: "createDocument with Lamport 2^64-1",
                        push: [Attacker.Batch(document: d3, page: nil, frames: [
                                   Attacker.createDocument(replica: r, counter: 1, lamport: UInt64.max, title: "x")])],
                        bad: (0, 0), counter: 1, rule: "[LOG-4]", offsetInPayload: lamportAt))
        let d4 = doc()
        out.append(Case(name: "addPage with a position above its Lamport timestamp",
                        push: [Attacker.Batch(document: d4, page: nil, frames: [
                                   Attacker.createDocument(replica: r, counter: 1, lamport: 1, title: "ok"),
                                   Attacker.addPage(replica: r, counter: 2, lamport: 2, page: UUID(), layer: 9)])],
                        bad: (0, 1), counter: 2, rule: "[MERGE-12]", offsetInPayload: 0))
        return out
    }

    func attack(_ target: Target) async throws {
        let client = try HTTPClient()
        defer { try? client.close() }
        func post(_ body: [UInt8]) async throws -> (Int, [String: Any]) {
            var req = HTTPRequest.post(target.url + "/sync", body: body)
            req.setBearerToken(target.token)
            let r = try await client.send(req)
            let json = (try? JSONSerialization.jsonObject(with: Data(r.body))) as? [String: Any] ?? [:]
            return (r.status, json)
        }
        // The encoder is right: the same operations with valid timestamps are stored.
        let d = UUID(), p = UUID()
        let valid = Attacker.request(replica: Self.attacker, push: [
            Attacker.Batch(document: d, page: nil, frames: [Attacker.createDocument(replica: Self.attacker, counter: 1, lamport: 1, title: "ok"),
                                                            Attacker.addPage(replica: Self.attacker, counter: 2, lamport: 2, page: p, layer: 2)]),
            Attacker.Batch(document: d, page: p, frames: [Attacker.add(replica: Self.attacker, counter: 1, lamport: 1, layer: 1)])])
        let (ok, _) = try await post(valid.body)
        #expect(ok == 200, "\(target.name): the attacker's encoder makes valid bodies")

        let before = try await target.holds()
        for c in Self.cases() {
            let (body, offsets) = Attacker.request(replica: Self.attacker, push: c.push)
            let (status, json) = try await post(body)
            let message = json["message"] as? String ?? ""
            #expect(status == 400, "\(target.name), \(c.name): \(status) \(message)")
            #expect(json["error"] as? String == "bad_request", "\(target.name), \(c.name)")
            #expect(message.contains(Attacker.opID(Self.attacker, c.counter)), "\(target.name), \(c.name): \(message)")
            #expect(message.contains(c.rule), "\(target.name), \(c.name): \(message)")
            let offset = offsets[c.bad.batch][c.bad.frame] + 9 + c.offsetInPayload
            #expect(message.contains("at offset \(offset)"), "\(target.name), \(c.name): expected offset \(offset): \(message)")
            #expect(try await target.holds() == before, "\(target.name), \(c.name): something was stored")
        }
        // Still serving.
        let (again, _) = try await post(valid.body)
        #expect(again == 200)
    }

    @Test("[SYNC-30] [LOG-4] [MERGE-12] the relay refuses the issue's pushes: 400 naming operation, rule and offset; nothing stored")
    func relay() async throws {
        let dir = try TempDir()
        let relay = try LocalRelay(dir: dir)
        defer { relay.close() }
        let store = relay.store, nb = relay.notebook
        try await attack(Target(name: "relay", url: relay.url, token: relay.token, holds: {
            let info = try store.info(notebook: nb)
            return "\(info.operations) \(info.cursor) \(try store.clocks(notebook: nb).map { "\($0.log) \($0.clock)" })"
        }))
    }

    @Test("[SYNC-30] [LOG-4] [MERGE-12] the peer server refuses the issue's pushes: 400 naming operation, rule and offset; nothing stored")
    func peer() async throws {
        let dir = try TempDir()
        _ = try await Fixture.notebook(at: dir.sub("P"), strokes: 3)
        let served = try await Notebook.open(at: dir.sub("P"), options: Fixture.quiet)
        let server = try PeerServer(notebook: served, token: Fixture.peerToken)
        do {
            try await attack(Target(name: "peer", url: server.url, token: Fixture.peerToken, holds: {
                let clocks: [LogClock] = try await served.logClocks()
                let docs = try await served.documentIDs()
                return "\(docs.sorted { $0.description < $1.description }) \(clocks.map { "\($0.log) \($0.clock)" })"
            }))
        } catch {
            Issue.record("\(error)")
        }
        try server.close()
        try await served.close()
    }
}
