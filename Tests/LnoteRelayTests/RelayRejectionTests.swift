import Foundation
import LnoteModel
import LnoteReplication
import LnoteServer
import LnoteSync
import Testing
import LnoteTestSupport

@Suite("Relay rejections")
struct RelayRejectionTests {
    /// A store holding a document and a page with a few operations, plus valid new
    /// operations to put in front of each bad one (so a half-applied push would show).
    struct Fixture {
        var me = ReplicaID(0x77)
        var doc: DocumentReplica
        var page: PageReplica
        var docLog: LogRef { LogRef(document: doc.id) }
        var pageLog: LogRef { LogRef(document: doc.id, page: page.page) }
        var epoch: UInt64 = 0
        var cursor: UInt64 = 0
    }

    func setUp(_ store: RelayStore, _ nb: NotebookID) throws -> Fixture {
        var rng = SeededRNG(seed: 1)
        var f = Fixture(doc: DocumentReplica(id: DocumentID()), page: PageReplica(page: PageID()))
        let create = try f.doc.make(.createDocument(title: "x"), by: f.me, wallTime: 1)
        let add = try f.doc.make(.addPage(f.page.page, position: f.doc.endPosition, canvas: .a4), by: f.me, wallTime: 2)
        let s = try (0..<3).map { _ in try f.page.add(.stroke(randomStroke(&rng)), by: f.me, wallTime: 3) }
        let r = try store.sync(SyncRequest(replica: f.me, epoch: 0, cursor: 0, have: [],
                                           push: [LogBatch(log: f.docLog, ops: [create, add]), LogBatch(log: f.pageLog, ops: s)]),
                               notebook: nb)
        f.epoch = r.epoch
        f.cursor = r.cursor
        return f
    }

    @Test("[SYNC-30] [SYNC-8] [SYNC-22] a bad frame, an op in the wrong log or a missing asset rejects the whole push and changes nothing", arguments: RelayBackends.all)
    func rejectedPushChangesNothing(backend: RelayBackendKind) async throws {
        try await withRelay(backend) { store, nb, database in
            var f = try setUp(store, nb)
            var rng = SeededRNG(seed: 2)
            let goodPage = try f.page.add(.stroke(randomStroke(&rng)), by: f.me, wallTime: 10)
            let goodDoc = try f.doc.make(.setTitle("renamed"), by: f.me, wallTime: 11)
            let valid = [LogBatch(log: f.docLog, ops: [goodDoc]), LogBatch(log: f.pageLog, ops: [goodPage])]
            var other = f.page
            let missing = AssetID.of([9, 9, 9])
            let imageOp = try other.add(.image(ImageElement(asset: missing, frame: QRect(x: 0, y: 0, width: 5, height: 5))),
                                        by: f.me, wallTime: 12)
            let pageOpInDocLog = try other.add(.stroke(randomStroke(&rng)), by: f.me, wallTime: 13)
            var doc2 = f.doc
            let docOpInPageLog = try doc2.make(.setTitle("again"), by: f.me, wallTime: 14)

            // An LnoteError code, or (nil) the asset_missing refusal ([SYNC-22]).
            let cases: [(String, [LogBatch], LnoteError.Code?)] = [
                ("garbage payload", [LogBatch(log: f.pageLog, frames: [Frame(type: 0x01, payload: [1, 2, 3])])], .truncated),
                ("unknown op type", [LogBatch(log: f.pageLog, frames: [Frame(type: 0x7F, payload: [0])])], .corrupt),
                ("page op in a document log", [LogBatch(log: f.docLog, ops: [pageOpInDocLog])], .invalidArgument),
                ("document op in a page log", [LogBatch(log: f.pageLog, ops: [docOpInPageLog])], .invalidArgument),
                ("image without its asset", [LogBatch(log: f.pageLog, ops: [imageOp])], nil),
            ]
            let refusal = SyncRefusal.Reason.assetMissing(asset: missing, operation: imageOp.id, log: f.pageLog)
            let before = try RelayCounts.read(store)
            for (name, bad, code) in cases {
                for withHave in [false, true] {
                    let request = SyncRequest(replica: f.me, epoch: f.epoch, cursor: f.cursor, have: withHave ? [] : nil,
                                              push: valid + bad)
                    do {
                        _ = try store.sync(request, notebook: nb)
                        Issue.record("\(name): accepted")
                    } catch let e as LnoteError {
                        #expect(e.code == code, "\(name): \(e)")
                    } catch let r as SyncRefusal {
                        #expect(code == nil && r.reason == refusal, "\(name): \(r)")
                    }
                    #expect(try RelayCounts.read(store) == before, "\(name): the store changed")
                }
            }
            // Through the async endpoint too (as HTTP calls it).
            let ep = try store.endpoint(notebook: nb)
            do {
                _ = try await ep.sync(SyncRequest(replica: f.me, epoch: f.epoch, cursor: f.cursor,
                                                  push: valid + [LogBatch(log: f.pageLog, ops: [imageOp])]))
                Issue.record("the endpoint accepted an image without its asset")
            } catch let r as SyncRefusal {
                #expect(r.reason == refusal && r.reason.code == .assetMissing, "\(r)")
            }
            #expect(try RelayCounts.read(store) == before)

            // Once the asset is uploaded the same push goes through.
            let assetBytes: [UInt8] = [9, 9, 9]
            try await ep.putAsset(assetBytes, id: missing, document: f.doc.id)
            let ok = try await ep.sync(SyncRequest(replica: f.me, epoch: f.epoch, cursor: f.cursor,
                                                   push: valid + [LogBatch(log: f.pageLog, ops: [imageOp])]))
            #expect(ok.accepted == 3 && !ok.resync)
            f.cursor = ok.cursor
            #expect(try RelayCounts.read(store).ops == before.ops + 3)
        }
    }
}
