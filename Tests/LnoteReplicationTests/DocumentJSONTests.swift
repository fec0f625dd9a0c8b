import Foundation
import Testing
import LnoteModel
import LnoteReplication

/// [JSON-11] The document's canonical JSON: its layout, every kind of conflict in the
/// specified order, and no `null`.
@Suite struct DocumentJSONTests {
    static let a = ReplicaID(1), b = ReplicaID(2)

    @Test("[JSON-11] [JSON-1] document JSON: pages in order, deleted pages without index, conflicts in order, no null")
    func layout() throws {
        var da = DocumentReplica(id: DocumentID(UUID(uuidString: "00000000-0000-0000-0000-0000000000DD")!))
        var ops: [Op] = []
        func doc(_ body: Op.Body, _ who: ReplicaID, _ d: inout DocumentReplica) throws { ops.append(try d.make(body, by: who, wallTime: 5)) }
        try doc(.createDocument(title: "t"), Self.a, &da)
        let p1 = PageID(UUID(uuidString: "00000000-0000-0000-0000-000000000001")!)
        let p2 = PageID(UUID(uuidString: "00000000-0000-0000-0000-000000000002")!)
        try doc(.addPage(p1, position: da.endPosition, canvas: .a4), Self.a, &da)
        try doc(.addPage(p2, position: try da.position(after: p1, by: Self.a), canvas: .a4), Self.a, &da)
        var db = da
        // Concurrent title, canvas and page moves; b deletes p2 while a draws on it.
        try doc(.setTitle("A"), Self.a, &da); try doc(.setTitle("B"), Self.b, &db)
        try doc(.setCanvas(p1, CanvasSize(width: 1, height: 1)), Self.a, &da)
        try doc(.setCanvas(p1, CanvasSize(width: 2, height: 2)), Self.b, &db)
        try doc(.movePage(p1, position: try da.position(after: p2, moving: p1, by: Self.a)), Self.a, &da)
        try doc(.movePage(p1, position: try db.position(after: nil, moving: p1, by: Self.b)), Self.b, &db)
        try doc(.deletePage(p2, seen: VectorClock()), Self.b, &db)
        try da.receive(ops); try db.receive(ops)
        #expect(da.state == db.state)

        var pa = PageReplica(page: p1), pb = PageReplica(page: p1)
        let x = try pa.add(.stroke(Stroke(points: [StrokePoint(x: 1, y: 1)])), by: Self.a, wallTime: 6)
        let y = try pa.add(.stroke(Stroke(points: [StrokePoint(x: 2, y: 2)])), by: Self.a, wallTime: 6)
        let z = try pa.add(.stroke(Stroke(points: [StrokePoint(x: 3, y: 3)])), by: Self.a, wallTime: 6)
        try pb.receive([x, y, z])
        let pageOps = [x, y, z,
                       try pa.move([x.id], dx: 1, dy: 0, by: Self.a, wallTime: 7), try pb.move([x.id], dx: 2, dy: 0, by: Self.b, wallTime: 7),
                       try pa.bringToFront([x.id], by: Self.a, wallTime: 7), try pb.sendToBack([x.id], by: Self.b, wallTime: 7),
                       try pa.make(.erase([z.id]), by: Self.a, wallTime: 7), try pb.move([z.id], dx: 1, dy: 1, by: Self.b, wallTime: 7)]
        try pa.receive(pageOps); try pb.receive(pageOps)
        var p2page = PageReplica(page: p2)
        try p2page.add(.stroke(Stroke(points: [StrokePoint(x: 0, y: 0)])), by: Self.a, wallTime: 8)

        let text = da.state.canonicalJSON(pages: [p1: pa.state, p2: p2page.state])
        #expect(text == db.state.canonicalJSON(pages: [p1: pb.state, p2: p2page.state]))
        #expect(!text.contains("null"))
        let json = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        #expect(Set(json.keys) == ["document", "title", "titleFrontier", "deleted", "deletedFrontier", "created", "modified",
                                   "clock", "maxLamport", "pages", "conflicts"])
        #expect(json["title"] as? String == "B" && json["deleted"] as? Bool == false)
        let pages = try #require(json["pages"] as? [[String: Any]])
        #expect(pages.map { $0["page"] as? String } == [p1.description, p2.description])
        #expect(pages[0]["index"] as? Int == 1 && pages[1]["index"] == nil)
        #expect(pages[0]["deletedSeen"] == nil && (pages[1]["deletedSeen"] as? [String: Any])?.isEmpty == true)
        #expect(pages[1]["deleted"] as? Bool == true && (pages[0]["adds"] as? [String])?.count == 1)
        #expect(((pages[0]["state"] as? [String: Any])?["elements"] as? [Any])?.count == 2)
        let conflicts = try #require(json["conflicts"] as? [[String: Any]])
        #expect(conflicts.map { $0["kind"] as? String } == ["title", "pageOrder", "canvas", "pageDelete", "move", "reorder", "erase"])
        #expect(conflicts[0]["page"] == nil && conflicts[0]["element"] == nil)
        #expect(conflicts[1]["page"] as? String == p1.description && conflicts[1]["element"] == nil)
        #expect(conflicts[4]["element"] as? String == x.id.description && conflicts[6]["element"] as? String == z.id.description)
        #expect(conflicts[6]["winner"] as? String == pageOps[7].ref.description)
        for c in conflicts { #expect(Set(c.keys).isSubset(of: ["kind", "page", "element", "ops", "winner"])) }
    }
}
