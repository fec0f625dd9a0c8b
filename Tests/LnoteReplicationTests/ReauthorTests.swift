import Foundation
import Testing
import LnoteModel
@testable import LnoteReplication

/// [SYNC-54] A replica restored from an older copy reused its ids; it gives up its versions
/// of the forked operations, takes the other side's, and makes its own work again under a new
/// replica id: nothing either side drew is lost, and both converge.
@Suite struct ReauthorTests {
    static let a = ReplicaID(0xA), n = ReplicaID(0xB0), r = ReplicaID(0xC)
    static let page = PageID(UUID(uuidString: "00000000-0000-0000-0000-0000000000AA")!)
    static func stroke(_ x: Int32) -> ElementContent { .stroke(Stroke(points: [StrokePoint(x: x, y: 0), StrokePoint(x: x + 5, y: 3, t: 4)])) }

    @Test("[SYNC-54] a restored replica's divergent page work is made again under a new id, on top of the other side's")
    func restoredReplicaPage() throws {
        var original = PageReplica(page: Self.page)
        let s1 = try original.add(Self.stroke(0), by: Self.a, wallTime: 1)
        let backup = original  // the copy taken here is restored later
        let s2 = try original.add(Self.stroke(10), by: Self.a, wallTime: 2)
        let moveS1 = try original.move([s1.id], dx: 7, dy: 0, by: Self.a, wallTime: 3)
        // The remote holds the original's work; another replica drew there too.
        var remote = PageReplica(page: Self.page)
        try remote.receive([s1, s2, moveS1])
        let other = try remote.add(Self.stroke(20), by: Self.r, wallTime: 4)
        // The restored copy carries on under the same id: its A.2 and A.3 are other operations.
        var restored = backup
        let t2 = try restored.add(Self.stroke(30), by: Self.a, wallTime: 5, below: s1.id)
        let eraseS1 = try restored.make(.erase([s1.id]), by: Self.a, wallTime: 6)
        let moveT2 = try restored.move([t2.id], dx: 0, dy: 9, by: Self.a, wallTime: 7)
        #expect(t2.id == s2.id && eraseS1.id == moveS1.id, "the ids were reused")
        #expect(ContentHash.of(t2) != ContentHash.of(s2))
        // Repair: drop the divergent operations, take the remote's, make them again as n.
        var repaired = backup
        try repaired.receive([s1, s2, moveS1, other])
        let outcome = Reauthor.page([t2, eraseS1, moveT2], on: &repaired, as: Self.n, wallTime: 8)
        #expect(outcome.skipped.isEmpty && outcome.ops.map(\.id.replica) == [Self.n, Self.n, Self.n])
        let t2again = try #require(outcome.elements[t2.id])
        let e = try #require(repaired.element(t2again))
        #expect(e.content == Self.stroke(30) && e.transform.value == .translation(0, 9))
        #expect(repaired.element(s1.id) == nil, "the restored copy's erase is made again")
        #expect(repaired.element(s2.id) != nil && repaired.element(other.id) != nil, "the remote's work is kept")
        // t2 was added just below s1; its key is kept (it is valid for the new operation).
        #expect(outcome.ops[0].addedKey == t2.addedKey)
        // The remote takes the new operations: both sides converge.
        try remote.receive(outcome.ops)
        #expect(remote.state == repaired.state)
    }

    @Test("[SYNC-54] edits of elements the other side erased are skipped, with why; keys that no longer fit go on top")
    func skipsWhatIsGone() throws {
        var base = PageReplica(page: Self.page)
        let s1 = try base.add(Self.stroke(0), by: Self.r, wallTime: 1)
        var mine = base
        let move = try mine.move([s1.id], dx: 1, dy: 1, by: Self.a, wallTime: 2)
        var theirs = base
        let erase = try theirs.make(.erase([s1.id]), by: Self.r, wallTime: 3)
        var repaired = base
        try repaired.receive([erase])
        let outcome = Reauthor.page([move], on: &repaired, as: Self.n, wallTime: 4)
        #expect(outcome.ops.isEmpty && outcome.skipped.map(\.op) == [move.id])
        // A key whose layer exceeds what the new operation may carry is replaced by on top.
        #expect(Reauthor.fit(ZKey(layer: 50), lamport: 3, top: ZKey(layer: 3)) == ZKey(layer: 3))
        #expect(Reauthor.fit(ZKey(layer: -2), lamport: 3, top: ZKey(layer: -3)) == ZKey(layer: -2))
    }

    @Test("[SYNC-54] document work made again: titles, pages (an existing page is not added twice), deletes with the current page clock")
    func restoredReplicaDocument() throws {
        let id = DocumentID(UUID())
        var base = DocumentReplica(id: id)
        let create = try base.make(.createDocument(title: "t"), by: Self.a, wallTime: 1)
        let p = PageID(), q = PageID()
        var original = base
        let addP = try original.make(.addPage(p, position: original.endPosition, canvas: .a4), by: Self.a, wallTime: 2)
        var restored = base
        let addQ = try restored.make(.addPage(q, position: restored.endPosition, canvas: .a4), by: Self.a, wallTime: 3)
        let title = try restored.make(.setTitle("mine"), by: Self.a, wallTime: 4)
        let deleteQ = try restored.make(.deletePage(q, seen: VectorClock()), by: Self.a, wallTime: 5)
        #expect(addQ.id == addP.id)
        var repaired = base
        try repaired.receive([create, addP])
        let clock = VectorClock([(Self.n, UInt64(1))])
        let outcome = Reauthor.document([addQ, title, deleteQ], on: &repaired, as: Self.n, wallTime: 6) { _ in clock }
        #expect(outcome.skipped.isEmpty && outcome.ops.count == 3)
        #expect(repaired.state.pages.map(\.id).sorted() == [p, q].sorted() && repaired.state.title.value == "mine")
        #expect(repaired.page(q)?.deleted.value == true && repaired.page(q)?.deletedSeen == clock)
    }
}
