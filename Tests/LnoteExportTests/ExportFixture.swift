import Foundation
import Testing
import LnoteModel
import LnoteSQLite
import LnoteStore
@testable import LnoteExport

/// A temporary directory removed by `remove()`.
struct TempDir {
    let path: String
    init() throws {
        var template = Array((NSTemporaryDirectory() + "/lnote-export-XXXXXX").utf8CString)
        guard let p = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw LnoteError(.io, "mkdtemp failed")
        }
        path = String(cString: p)
    }
    func sub(_ name: String) -> String { path + "/" + name }
    func remove() { try? FileManager.default.removeItem(atPath: path) }
    /// Names in the directory (hidden ones included), sorted.
    func entries() -> [String] { ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted() }
}

/// A notebook built with the store API: two live documents, one deleted document, a deleted
/// page, images sharing an asset, a partial erase, a whole erase, a move and a reorder.
struct Fixture {
    var folder: String
    var seed: UInt64
    /// Live pages' elements (bottom to top), by page, as the store reports them.
    var elements: [PageID: [ElementRecord]] = [:]
    /// Every page's elements, deleted pages and documents included.
    var allElements: [PageID: [ElementRecord]] = [:]
    var liveDocuments: [DocumentID] = []
    var deletedDocument: DocumentID!
    var deletedPage: PageID!
    /// Live page order per live document.
    var pageOrder: [DocumentID: [PageID]] = [:]
    var assets: [AssetID: [UInt8]] = [:]
    var erasedStroke: (page: PageID, element: ElementID, ranges: [PointRange])!
    var moved: (page: PageID, stroke: ElementID, image: ElementID, dx: Int32, dy: Int32)!
    /// On `moved.page`: the stroke brought to the front and the one sent to the back.
    var reordered: (front: ElementID, back: ElementID)!

    static func bytes(_ n: Int, _ rng: inout SplitMix64) -> [UInt8] { (0..<n).map { _ in UInt8(truncatingIfNeeded: rng.next()) } }

    static func make(in dir: TempDir, seed: UInt64) async throws -> Fixture {
        var rng = SplitMix64(seed: seed)
        var gen = HandwritingGenerator(seed: seed, options: {
            var o = HandwritingGenerator.Options()
            o.pointsPerStroke = 20...120
            return o
        }())
        var f = Fixture(folder: dir.sub("notebook"), seed: seed)
        var store = StoreOptions()
        store.autosave = false
        let nb = try await Notebook.open(at: f.folder, create: true, options: store)
        let imageA = bytes(3000, &rng), imageB = bytes(1234, &rng)
        f.assets[AssetID.of(imageA)] = imageA
        f.assets[AssetID.of(imageB)] = imageB

        // Document 1: three pages; the second is deleted; edits on the first.
        let d1 = try await nb.createDocument(title: "Alpha ✍️")
        let p1 = await d1.pageList[0].id
        let s1 = try await d1.addStrokes(gen.strokes(6), to: p1)
        let img1 = try await d1.addImage(imageA, frame: QRect(x: 100, y: 200, width: 1500, height: 900), rotation: 4500, to: p1)
        let s2 = try await d1.addStrokes(gen.strokes(4), to: p1)
        f.erasedStroke = (p1, s1[1], [PointRange(2, 7), PointRange(10, 12)])
        try await d1.eraseRange(s1[1], f.erasedStroke.ranges, on: p1)
        try await d1.erase([s2[0]], on: p1)
        f.moved = (p1, s1[2], img1, 55, -31)
        try await d1.move([s1[2], img1], dx: 55, dy: -31, on: p1)
        try await d1.bringToFront([s1[0]], on: p1)
        try await d1.sendToBack([s2[3]], on: p1)
        f.reordered = (s1[0], s2[3])
        let p2 = try await d1.addPage(.last)
        _ = try await d1.addStrokes(gen.strokes(3), to: p2)
        _ = try await d1.addImage(imageB, frame: QRect(x: 0, y: 0, width: 400, height: 400), to: p2)
        try await d1.deletePage(p2)
        f.deletedPage = p2
        let p3 = try await d1.addPage(.last, canvas: CanvasSize(width: 4000, height: 3000))
        _ = try await d1.addImage(imageA, frame: QRect(x: -50, y: 10, width: 300, height: 300), to: p3)
        _ = try await d1.addStrokes(gen.strokes(5), to: p3)
        // An empty page, never written: no files.
        let p4 = try await d1.addPage(.first)
        try await d1.movePage(p3, to: .first)
        f.pageOrder[d1.id] = await d1.pageList.map(\.id)
        for p in [p1, p3, p4] { f.elements[p] = try await d1.elements(p) }
        for p in [p1, p2, p3, p4] { f.allElements[p] = try await d1.elements(p) }
        try await d1.close()

        // Document 2: one page of strokes.
        let d2 = try await nb.createDocument(title: "Beta")
        let q1 = await d2.pageList[0].id
        _ = try await d2.addStrokes(gen.strokes(7), to: q1)
        f.pageOrder[d2.id] = [q1]
        f.elements[q1] = try await d2.elements(q1)
        f.allElements[q1] = f.elements[q1]
        try await d2.close()

        // Document 3: deleted.
        let d3 = try await nb.createDocument(title: "Gone")
        let r1 = await d3.pageList[0].id
        _ = try await d3.addStrokes(gen.strokes(2), to: r1)
        f.allElements[r1] = try await d3.elements(r1)
        try await d3.close()
        try await nb.deleteDocument(d3.id)
        f.deletedDocument = d3.id
        f.liveDocuments = [d1.id, d2.id]
        try await nb.close()
        return f
    }

    var livePageCount: Int { pageOrder.values.reduce(0) { $0 + $1.count } }
    func strokes(_ map: [PageID: [ElementRecord]]) -> Int { map.values.joined().filter { $0.content.stroke != nil }.count }
    func images(_ map: [PageID: [ElementRecord]]) -> Int { map.values.joined().filter { $0.content.image != nil }.count }
    func points(_ map: [PageID: [ElementRecord]]) -> Int { map.values.joined().reduce(0) { $0 + $1.content.pointCount } }
}

func count(_ db: SQLiteDatabase, _ sql: String, _ b: [SQLiteValue] = []) throws -> Int64 {
    try db.query(sql, b).first?.first?.int64 ?? -1
}

func openExport(_ path: String) throws -> SQLiteDatabase {
    try SQLiteDatabase(path: path, options: .init(create: false, readOnly: true))
}

/// Little-endian binary32 at `at`, decoded independently of `PointBlob`.
func le32(_ b: [UInt8], _ at: Int) -> Float {
    var v: UInt32 = 0
    for k in 0..<4 { v |= UInt32(b[at + k]) << (8 * UInt32(k)) }
    return Float(bitPattern: v)
}

/// The fixed clock of these tests.
func fixedOptions(includeDeleted: Bool = false) -> SQLiteExport.Options {
    var o = SQLiteExport.Options()
    o.includeDeleted = includeDeleted
    o.now = { 1_700_000_000_000 }
    return o
}
