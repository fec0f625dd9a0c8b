import Foundation
import Testing
import LnoteModel
import LnoteReplication
@testable import LnoteSync
@testable import LnoteScenario
import LnoteTestSupport

/// A folder-like remote that says it holds long polls: its endpoint answers at once (the
/// holding is the servers' part, `RelayLongPollTests`), which is all the client side needs.
struct PollingLocalRemote: SyncRemote {
    let inner: LocalRemote
    var key: String { inner.key }
    var supportsLongPolls: Bool { true }
    var traffic: (sent: Int, received: Int) { (0, 0) }
    func sync(_ request: SyncRequest) async throws -> SyncResponse { try await inner.sync(request) }
    func missingAssets(_ ids: [AssetID], document: DocumentID) async throws -> [AssetID] { try await inner.missingAssets(ids, document: document) }
    func putAsset(_ bytes: [UInt8], id: AssetID, document: DocumentID) async throws { try await inner.putAsset(bytes, id: id, document: document) }
    func getAsset(_ id: AssetID, document: DocumentID) async throws -> [UInt8] { try await inner.getAsset(id, document: document) }
}

@Suite struct SyncLongPollTests {
    let doc = DocumentID(UUID(uuidString: "5CE4A210-0000-4000-8000-000000000001")!)
    let page = PageID(UUID(uuidString: "5CE4A210-0000-4000-8000-000000000100")!)

    /// [SYNC-70] [SYNC-31] [SYNC-30] The request of §7.1 is what the encoder writes and
    /// decodes back; `Wait` outside 1...3600 and an unknown flag bit make the body invalid at
    /// their offset; bodies without bit 3 (before long polls) still decode, with no wait.
    @Test("[SYNC-70] [SYNC-31] [SYNC-30] the wait vector of §7.1, invalid waits, old bodies")
    func waitVector() throws {
        let q = SyncRequest(replica: ReplicaID(0xB2), epoch: 0x0123_4567_89AB_CDEF, cursor: 5, wait: 30)
        let bytes = SyncCodec.encode(q)
        if ProcessInfo.processInfo.environment["LNOTE_RECORD_GOLDEN"] == "1" {
            print("sync-request-wait:\n\(SpecVectors.hexDump(bytes))\n")
            return
        }
        let spec = try SpecVectors.bytes("sync-request-wait", in: "sync-protocol.md")
        #expect(spec == bytes, "the spec's block differs; actual:\n\(SpecVectors.hexDump(bytes))")
        #expect(try SyncCodec.decodeRequest(spec) == q)
        // The table's offsets: flags at 0x1d (bit 3 alone), the varint at 0x1e, no push after.
        #expect(spec.count == 32 && spec[0x1d] == 0x08 && spec[0x1e] == 30 && spec[0x1f] == 0)

        for bad: UInt64 in [0, 3601, 1 << 40] {
            var w = ByteWriter()
            w.varint(bad)
            let body = Array(spec[..<0x1e]) + w.bytes + [0]
            #expect {
                try SyncCodec.decodeRequest(body)
            } throws: { e in
                (e as? LnoteError)?.code == .corrupt && (e as? LnoteError)?.offset == 0x1e
            }
        }
        for limit: UInt32 in [1, 3600] {
            let ok = SyncRequest(replica: ReplicaID(0xB2), epoch: 1, cursor: 1, wait: limit)
            #expect(try SyncCodec.decodeRequest(SyncCodec.encode(ok)).wait == limit)
        }
        var unknown = spec
        unknown[0x1d] = 0x18
        #expect {
            try SyncCodec.decodeRequest(unknown)
        } throws: { e in
            (e as? LnoteError)?.offset == 0x1d
        }
        // The request of §3.1 (flags 0x01) is still valid, with no wait.
        let old = try SpecVectors.bytes("sync-request", in: "sync-protocol.md")
        #expect(try SyncCodec.decodeRequest(old).wait == nil)
        // Every combination of the older flags, with and without a wait, round-trips.
        let log = LogRef(document: doc, page: page)
        for flags in 0..<16 {
            let r = SyncRequest(replica: ReplicaID(7), epoch: 3, cursor: 2,
                                have: flags & 1 != 0 ? [LogClock(log: log, clock: VectorClock([(ReplicaID(7), UInt64(1))]))] : nil,
                                digests: flags & 2 != 0 ? [] : nil,
                                hashRanges: flags & 4 != 0 ? [HashRange(log: log, replica: ReplicaID(7), from: 1, to: 2)] : nil,
                                wait: flags & 8 != 0 ? 45 : nil)
            let b = SyncCodec.encode(r)
            #expect(b[29] == UInt8(flags))
            #expect(try SyncCodec.decodeRequest(b) == r, "flags \(flags)")
        }
    }

    func stroke(_ k: Int) -> Stroke {
        Stroke(points: (0..<8).map { StrokePoint(x: Int32(k * 100 + $0), y: Int32($0 * 3), t: UInt32($0 * 4)) })
    }

    func nodes() async throws -> (MemoryNode, MemoryNode) {
        let t = MemoryTransport()
        let a = try await t.makeNode(replica: ReplicaID(1), label: "a", document: doc) as! MemoryNode
        let b = try await t.makeNode(replica: ReplicaID(2), label: "b", document: doc) as! MemoryNode
        _ = try await a.perform(.createDocument(title: "t"), wallTime: 1)
        _ = try await a.perform(.addPage(page, after: nil), wallTime: 2)
        return (a, b)
    }

    /// [SYNC-75] The client's side: no long poll before a first sync; then one from the
    /// saved epoch and cursor, with no push; its answer stored as a steady exchange (the
    /// pull applied, the cursor saved); an answer of another epoch dropped; `resync`
    /// forgetting the cursor, so that the next sync compares clocks.
    @Test("[SYNC-75] long-poll requests come from the saved cursor, their answers are stored")
    func requestsAndAnswers() async throws {
        let (a, server) = try await nodes()
        let endpoint = NotebookEndpoint(notebook: server, epoch: 0xE1)
        let remote = PollingLocalRemote(inner: LocalRemote(key: "r", endpoint: endpoint))
        let session = SyncSession(notebook: a, remote: remote)
        #expect(try await session.longPollRequest(wait: 30) == nil, "no cursor before the first sync")
        _ = try await session.run()
        let q = try #require(try await session.longPollRequest(wait: 30))
        #expect(q.epoch == 0xE1 && q.wait == 30 && q.push.isEmpty && q.have == nil && q.replica == ReplicaID(1))
        #expect(try await session.longPollRequest(wait: 0)?.wait == 1, "clamped into 1...3600")

        // Another client's stroke reaches the server; the long poll's answer brings it.
        _ = try await server.perform(.add(page, stroke(1), below: nil, above: nil), wallTime: 3)
        let answer = try await remote.sync(q)
        #expect(answer.pull.count == 1)
        let report = try await session.absorbLongPoll(answer, for: q)
        #expect(report.opsReceived == 1 && report.opsApplied == 1 && report.roundTrips == 1)
        #expect(try await a.view() == server.view())
        let next = try #require(try await session.longPollRequest(wait: 30))
        #expect(next.cursor == answer.cursor && next.cursor > q.cursor)

        // Stored again (a duplicate answer, an older cursor): nothing new, the cursor it names.
        let again = try await session.absorbLongPoll(answer, for: q)
        #expect(again.opsApplied == 0)

        // The answer to a request of another epoch than the saved one (a comparison ran
        // meanwhile) is dropped, and the cursor kept.
        let stale = SyncRequest(replica: ReplicaID(1), epoch: 0x99, cursor: 1, wait: 30)
        #expect(try await session.absorbLongPoll(answer, for: stale).opsReceived == 0)
        #expect(try await session.longPollRequest(wait: 30) == next)
        // An answer in another epoch than its request's: the server changed epochs, the
        // cursor is forgotten (as with `resync`).
        var foreign = answer
        foreign.epoch = 0xE2
        _ = try await session.absorbLongPoll(foreign, for: next)
        #expect(try await session.longPollRequest(wait: 30) == nil)
        _ = try await session.run()
        let afterComparison = try #require(try await session.longPollRequest(wait: 30))

        // `resync` forgets the cursor: the next sync is a clock comparison.
        var resync = SyncResponse(epoch: 0xE1, cursor: 0, accepted: 0, pull: [])
        resync.resync = true
        _ = try await session.absorbLongPoll(resync, for: afterComparison)
        #expect(try await session.longPollRequest(wait: 30) == nil)
        let compared = try await session.run()
        #expect(compared.roundTrips == 1, "a comparison, nothing to push")
        #expect(try await session.longPollRequest(wait: 30) != nil)
    }

    /// [SYNC-75] A round started by a local change while long polls bring the remote's
    /// changes (`pullWithoutPush` false) makes no exchange when there is nothing to push,
    /// and one push exchange when there is.
    @Test("[SYNC-75] push-only rounds reach the remote only with something to push")
    func pushOnlyRounds() async throws {
        let (a, server) = try await nodes()
        let remote = LocalRemote(key: "r", endpoint: NotebookEndpoint(notebook: server))
        _ = try await SyncSession(notebook: a, remote: remote).run()
        var session = SyncSession(notebook: a, remote: remote)
        session.pullWithoutPush = false
        #expect(try await session.run().roundTrips == 0)
        _ = try await a.perform(.add(page, stroke(2), below: nil, above: nil), wallTime: 4)
        let pushed = try await session.run()
        #expect(pushed.roundTrips == 1 && pushed.opsAccepted == 1)
        #expect(try await session.run().roundTrips == 0)
    }
}
