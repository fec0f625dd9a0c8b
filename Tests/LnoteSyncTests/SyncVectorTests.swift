import Foundation
import Testing
import LnoteModel
import LnoteReplication
import LnoteSync
import LnoteTestSupport

/// [SYNC-31] The sync bodies of `Protocol/sync-protocol.md` §3.1 come from real operations:
/// the request and response built here with the real encoder, from operations made through
/// the merge's own API (which computes their Lamport timestamps and z keys), are the spec's
/// blocks byte for byte, and the spec's blocks decode back to them. `LNOTE_RECORD_GOLDEN=1`
/// prints the blocks instead of comparing, after an intended change.
@Suite struct SyncVectorTests {
    static let a = ReplicaID(0xA1), b = ReplicaID(0xB2)
    static let document = DocumentID(UUID(uuidString: "D0C00000-0000-4000-8000-000000000001")!)
    static let page = PageID(UUID(uuidString: "9A9E0000-0000-4000-8000-000000000002")!)
    static let page2 = PageID(UUID(uuidString: "9A9E0000-0000-4000-8000-000000000003")!)
    static let t0: Int64 = 1_700_000_000_000
    static let epoch: UInt64 = 0x0123_4567_89AB_CDEF

    /// The story of §3.1: `a1` made the document and its page and synced; `b2` placed an
    /// image on the page and synced; `a1`, offline, renamed the document and added a
    /// second page, then syncs by clocks and pushes both operations in the same request.
    static func bodies() throws -> (request: SyncRequest, response: SyncResponse) {
        var da = DocumentReplica(id: document)
        _ = try da.make(.createDocument(title: "Notes"), by: a, wallTime: t0)
        _ = try da.make(.addPage(page, position: da.endPosition, canvas: .a4), by: a, wallTime: t0 + 1000)
        var pb = PageReplica(page: page)
        let image = try pb.add(.image(ImageElement(asset: AssetID.of(Array("lnote".utf8)),
                                                   frame: QRect(x: 500, y: 600, width: 2000, height: 1500))),
                               by: b, wallTime: t0 + 2000)
        let rename = try da.make(.setTitle("Lecture"), by: a, wallTime: t0 + 3000)
        let second = try da.make(.addPage(page2, position: da.endPosition, canvas: .a4), by: a, wallTime: t0 + 4000)
        let docLog = LogRef(document: document), pageLog = LogRef(document: document, page: page)
        let request = SyncRequest(replica: a, epoch: 0, cursor: 0, have: [LogClock(log: docLog, clock: da.clock)],
                                  push: [LogBatch(log: docLog, ops: [rename, second])])
        let response = SyncResponse(epoch: epoch, cursor: 5, accepted: 2, pull: [LogBatch(log: pageLog, ops: [image])],
                                    clocks: [LogClock(log: docLog, clock: da.clock), LogClock(log: pageLog, clock: pb.clock)])
        return (request, response)
    }

    @Test("[SYNC-31] [SYNC-30] the spec's SyncRequest and SyncResponse are what the encoder writes, and decode back")
    func requestAndResponseVectors() throws {
        let (request, response) = try Self.bodies()
        let q = SyncCodec.encode(request), r = SyncCodec.encode(response)
        if ProcessInfo.processInfo.environment["LNOTE_RECORD_GOLDEN"] == "1" {
            print("sync-request:\n\(SpecVectors.hexDump(q))\n")
            for b in request.push { for f in b.frames { print("  frame \(f.encodedSize) bytes: \(try OperationCodec.decode(f))") } }
            print("sync-response:\n\(SpecVectors.hexDump(r))\n")
            for b in response.pull { for f in b.frames { print("  frame \(f.encodedSize) bytes: \(try OperationCodec.decode(f))") } }
            return
        }
        let specQ = try SpecVectors.bytes("sync-request", in: "sync-protocol.md")
        let specR = try SpecVectors.bytes("sync-response", in: "sync-protocol.md")
        #expect(specQ == q, "the spec's request differs; actual:\n\(SpecVectors.hexDump(q))")
        #expect(specR == r, "the spec's response differs; actual:\n\(SpecVectors.hexDump(r))")
        #expect(try SyncCodec.decodeRequest(specQ) == request)
        #expect(try SyncCodec.decodeResponse(specR) == response)
        // What the blocks show: two frames pushed in one batch, one pulled, `resync` clear.
        let decodedQ = try SyncCodec.decodeRequest(specQ), decodedR = try SyncCodec.decodeResponse(specR)
        #expect(try decodedQ.push.flatMap { try $0.ops() }.map(\.body.name) == ["setTitle", "addPage"])
        #expect(try decodedQ.push.flatMap { try $0.ops() }.map(\.lamport) == [3, 4])
        #expect(decodedR.clocks?.count == 2 && !decodedR.resync)
        #expect(try decodedR.pull.flatMap { try $0.ops() }.flatMap(\.referencedAssets) == [AssetID.of(Array("lnote".utf8))])
        // Flags of §3: the request's bit 0 (have), the response's bit 0 (clocks), bit 1 clear.
        #expect(specQ[29] == 1)
        let flagsAt = 21 + 1  // after the one-byte varint `accepted` (2)
        #expect(specR[21] == 2 && specR[flagsAt] == 1)
    }

    /// [SYNC-44] [SYNC-45] The checkpoint body and list, field by field as the tables of §5
    /// give them: the version is one byte, at offset 4 of both; a document `LogRef` is 17
    /// bytes, a page one 33; the CRC covers every byte before it.
    @Test("[SYNC-44] [SYNC-45] checkpoint body and list follow the spec's tables byte for byte")
    func checkpointLayout() throws {
        func le(_ v: UInt64, _ n: Int) -> [UInt8] { (0..<n).map { UInt8(truncatingIfNeeded: v >> (8 * $0)) } }
        let pageLog = LogRef(document: Self.document, page: Self.page)
        let c = Checkpoint(log: pageLog, clock: VectorClock([(Self.b, UInt64(1))]), snapshot: [0xAA, 0xBB, 0xCC])
        var body = Array("LNCP".utf8) + [1]                                  // magic, version (u8)
        body += Self.document.uuid.bytes + [1] + Self.page.uuid.bytes         // LogRef, 33 bytes
        body += [1] + le(0xB2, 8) + [1]                                      // {b2: 1}
        body += [3, 0xAA, 0xBB, 0xCC]                                        // varint L, snapshot
        body += le(UInt64(CRC32C.checksum(body)), 4)                         // CRC-32C of all before
        #expect(c.encoded() == body)
        let smallest = Checkpoint(log: LogRef(document: Self.document), clock: VectorClock(), snapshot: [])
        var small = Array("LNCP".utf8) + [1] + Self.document.uuid.bytes + [0] + [0] + [0]
        small += le(UInt64(CRC32C.checksum(small)), 4)
        #expect(smallest.encoded() == small && small.count == 28 && Checkpoint.minEncodedSize == 28)
        #expect(try Checkpoint.decode(body) == c)

        let list = Array("LNCL".utf8) + [1] + [2] + [UInt8(body.count)] + body + [UInt8(small.count)] + small
        #expect(Checkpoint.encodeList([c, smallest]) == list)
        #expect(try Checkpoint.decodeList(list) == [c, smallest])
        // Another version, in either: refused as such, at offset 4.
        for (name, bytes) in [("body", body), ("list", list)] {
            var v = bytes
            v[4] = 2
            do {
                if name == "body" { _ = try Checkpoint.decode(v) } else { _ = try Checkpoint.decodeList(v) }
                Issue.record("\(name): version 2 accepted")
            } catch let e as LnoteError {
                #expect(e.code == .unsupportedVersion && e.offset == 4, "\(name): \(e)")
            }
        }
    }
}
