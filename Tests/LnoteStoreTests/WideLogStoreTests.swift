import Foundation
import Testing
import LnoteModel
import LnoteReplication
@testable import LnoteStore

/// [MERGE-5] A page of a real package whose log names more replicas than a context may.
@Suite("[MERGE-5] a wide page log in a package")
struct WideLogStoreTests {
    @Test("[MERGE-5] a page written by 4,097 replicas is saved, reopened, edited and deleted")
    func widePageInAPackage() async throws {
        let dir = try TempDir("wide")
        defer { dir.remove() }
        let limit = OpValidator.maxClockEntries
        var nb = try await openNotebook(dir.path)
        var d = try await nb.createDocument(title: "Wide")
        let p = await d.pageList[0].id
        let mine = try await d.addStroke(stroke(5), to: p)
        // 4,097 replicas, each having seen nothing, add one stroke each.
        let foreign = (1...(limit + 1)).map { i in
            Op(id: OpID(replica: ReplicaID(UInt64(i)), counter: 1), lamport: 1, context: VectorClock(), wallTime: 1_000,
               body: .add(.stroke(stroke(3, x: Int32(i % 700))), z: ZKey(layer: 1)))
        }
        _ = try await d.receive(foreign, page: p)
        try await d.flush()
        let id = d.id
        try await nb.close()

        // Reopened from the files: every edit still works.
        nb = try await openNotebook(dir.path)
        d = try await nb.openDocument(id)
        #expect(try await d.clock(page: p).entries.count == limit + 2)
        let added = try await d.addStroke(stroke(7), to: p)
        try await d.erase([foreign[10].id, mine], on: p)
        try await d.move([foreign[20].id], dx: 30, dy: 0, on: p)
        try await d.bringToFront([foreign[30].id], on: p)
        let ids = try await d.elementIDs(p)
        #expect(ids.last == foreign[30].id)
        #expect(ids.contains(added) && !ids.contains(foreign[10].id) && !ids.contains(mine))
        try await d.deletePage(p)
        let made = try await d.operations(page: p, notCoveredBy: VectorClock())
            .filter { $0.id.replica == nb.replica && $0.id.counter > 1 }
        #expect(made.count == 4)
        for op in made {
            #expect(OpValidator.violation(of: op) == nil)
            #expect(op.context.entries.count <= limit + 1)
        }
        let state = try await d.pageState(p)
        try await d.flush()
        try await nb.close()

        // A third replica receiving every page operation in reverse order holds the same page.
        var other = PageReplica(page: p)
        let all = try await { () async throws -> [Op] in
            let nb2 = try await openNotebook(dir.path)
            let d2 = try await nb2.openDocument(id)
            let ops = try await d2.operations(page: p, notCoveredBy: VectorClock())
            #expect(try await d2.pageState(p) == state, "the page reads back as it was saved")
            let listed = await d2.pageList.contains { $0.id == p }
            #expect(!listed, "the page is deleted")
            try await nb2.close()
            return ops
        }()
        try other.receive(all.reversed())
        #expect(other.state == state)
    }
}
