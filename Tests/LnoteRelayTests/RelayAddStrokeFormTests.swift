import Foundation
import LnoteModel
import LnoteReplication
import LnoteServer
import LnoteSync
import Testing
import LnoteTestSupport

/// The relay store and the forms of a stroke add (operation-log.md [LOG-22], [LOG-24],
/// [LOG-29]; sync-protocol.md [SYNC-50], [SYNC-51], [SYNC-53]): what an older client pushed
/// as `add` or `addStroke` and a newer one pushes as `addStroke3` is one operation.
@Suite("Relay and addStroke")
struct RelayAddStrokeFormTests {
    static let a = ReplicaID(0xA1), b = ReplicaID(0xB2)

    /// [SYNC-50] [SYNC-51] The relay holds an older client's `add` frames; the same
    /// operations pushed as `addStroke` are duplicates (not forks, nothing stored); a
    /// different stroke under a held id, in the compact form, is a fork reported with the
    /// held hash; hash ranges answer the hash-form hashes either way.
    @Test("[SYNC-50] [SYNC-51] one operation in two forms is a duplicate, a compact fork is a fork", arguments: RelayBackends.all)
    func formsAtTheRelay(backend: RelayBackendKind) async throws {
        try await withRelay(backend) { store, nb, _ in
            var rng = SeededRNG(seed: 2406)
            let log = LogRef(document: DocumentID(), page: PageID())
            var mine = PageReplica(page: log.page!), other = PageReplica(page: log.page!)
            let ops = try (0..<4).map { _ in try mine.add(.stroke(randomStroke(&rng)), by: Self.a, wallTime: 1) }
            let old = ops.map { OperationCodec.frame($0, form: .hash) }
            #expect(old.allSatisfy { $0.type == 0x01 } && ops.allSatisfy { OperationCodec.frame($0).type == 0x0A })
            let first = try store.sync(SyncRequest(replica: Self.a, epoch: 0, cursor: 0, push: [LogBatch(log: log, frames: old)]),
                                       notebook: nb)
            #expect(first.accepted == 4 && first.forks.isEmpty)

            let again = try store.sync(SyncRequest(replica: Self.a, epoch: 0, cursor: 0, push: [LogBatch(log: log, ops: ops)]),
                                       notebook: nb)
            #expect(again.accepted == 0 && again.forks.isEmpty, "the compact form of held operations: duplicates")
            let v1 = ops.map { OperationCodec.frame($0, form: .writtenV1) }
            #expect(v1.allSatisfy { $0.type == 0x06 })
            let older = try store.sync(SyncRequest(replica: Self.a, epoch: 0, cursor: 0, push: [LogBatch(log: log, frames: v1)]),
                                       notebook: nb)
            #expect(older.accepted == 0 && older.forks.isEmpty, "the addStroke (0x06) form of held operations: duplicates")

            let fork = try other.add(.stroke(randomStroke(&rng)), by: Self.a, wallTime: 2)
            #expect(fork.id == ops[0].id && fork != ops[0] && OperationCodec.frame(fork).type == 0x0A)
            let forked = try store.sync(SyncRequest(replica: Self.a, epoch: 0, cursor: 0, push: [LogBatch(log: log, ops: [fork])]),
                                        notebook: nb)
            let held = SHA256.hash([0x01] + old[0].payload)
            #expect(forked.accepted == 0 && forked.forks == [ForkReport(log: log, id: fork.id, held: held)])

            // [SYNC-53] The hashes the relay answers are the hash-form hashes.
            let asked = try store.sync(SyncRequest(replica: Self.b, epoch: 0, cursor: 0,
                                                   hashRanges: [HashRange(log: log, replica: Self.a, from: 1, to: 4)]),
                                       notebook: nb)
            #expect(asked.hashes?.first?.hashes == ops.map { Array(ContentHash.of($0).prefix(16)) },
                    "\(String(describing: asked.hashes))")
        }
    }
}
