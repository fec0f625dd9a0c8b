import Foundation
import Testing
import LnoteModel
import LnoteReplication
@testable import LnoteServer
@testable import LnoteSync
import LnoteTestSupport

/// A push's operations are looked up by runs of counters and inserted several to a
/// statement (one statement each was a round trip to PostgreSQL, under the relay's lock).
/// Checked here: an insert some of whose rows another process stored first says which, and
/// lookups find exactly the ids asked, whatever their gaps.
@Suite struct RelayBatchPushTests {
    struct Row: RelayInsertable {
        var loggedID: LoggedOpID
        var frameBytes: [UInt8]
        var frameSize: Int { frameBytes.count }
        var hash: [UInt8]
    }

    @Test("[SYNC-51] rows another process stored first are reported with what it holds; the others are stored; lookups find exactly the ids asked", arguments: RelayBackends.all)
    func insertsAndLookups(backend: RelayBackendKind) async throws {
        try await withRelay(backend) { store, notebook, _ in
            let log = LogRef(document: DocumentID(), page: PageID())
            let a = ReplicaID(0xA1)
            func row(_ counter: UInt64, _ tag: UInt8) -> Row {
                Row(loggedID: LoggedOpID(log: log, id: OpID(replica: a, counter: counter)), frameBytes: [tag, UInt8(counter % 251)],
                    hash: [UInt8](repeating: tag, count: 31) + [UInt8(counter % 251)])
            }
            func key(_ r: Row) -> [RelayValue] {
                [.integer(0), .blob(log.document.uuid.bytes), RelayStore.pageColumn(log),
                 .integer(Int64(bitPattern: a.rawValue)), .integer(Int64(r.loggedID.id.counter))]
            }
            // Counters with gaps of every size, more than one statement's worth.
            var counters: [UInt64] = []
            var c: UInt64 = 1
            for k in 0..<300 {
                counters.append(c)
                c += [1, 1, 2, 8, 9, 40, 1_000][k % 7]
            }
            let taken = Set(counters.enumerated().filter { $0.offset % 5 == 2 }.map(\.element))
            try store.database.transaction(.allocating) { tx in
                let (nb, _) = try store.row(of: notebook, tx)
                func keyed(_ r: Row) -> [RelayValue] { [.integer(nb)] + key(r).dropFirst() }
                // Another process's rows, stored first, with other sequences and other content.
                let earlier = counters.filter { taken.contains($0) }.map { (x: row($0, 0xEE), seq: Int64(1_000_000 + $0)) }
                #expect(try store.insertNew(earlier, nb: nb, key: keyed, tx).isEmpty)
                let mine = counters.enumerated().map { (x: row($0.element, 0x11), seq: Int64(10 + $0.offset)) }
                let lost = try store.insertNew(mine, nb: nb, key: keyed, tx)
                #expect(Set(lost.keys) == Set(mine.filter { taken.contains($0.x.loggedID.id.counter) }.map(\.seq)))
                for (seq, held) in lost {
                    let counter = mine.first { $0.seq == seq }!.x.loggedID.id.counter
                    #expect(held == row(counter, 0xEE).hash, "seq \(seq)")
                }
                // Lookups: every id asked and held, with its sequence and hash; none other.
                let asked = counters.filter { $0 % 3 != 0 } + [c + 5, c + 500]
                let found = try store.heldRows(asked.map { LoggedOpID(log: log, id: OpID(replica: a, counter: $0)) }, nb: nb, tx)
                #expect(found.count == asked.count - 2)
                for counter in asked where counter < c {
                    let f = found[LoggedOpID(log: log, id: OpID(replica: a, counter: counter))]
                    let expected = taken.contains(counter) ? (Int64(1_000_000 + counter), row(counter, 0xEE).hash)
                                                          : (Int64(10 + counters.firstIndex(of: counter)!), row(counter, 0x11).hash)
                    #expect(f?.seq == expected.0 && f?.hash == expected.1, "counter \(counter)")
                }
            }
        }
    }
}
