import LnoteModel
import LnoteSQLite

/// Reads an export database back and compares it with the notebook, document by document
/// ([EXP-40] … [EXP-44]). Every difference throws `corrupt` ("export verification failed").
final class ExportVerifier {
    let db: SQLiteDatabase
    /// The final path, for messages.
    let target: String
    private(set) var counts = ExportCounts()
    private var checkedAssets = Set<AssetID>()
    private let selectDocument: SQLiteDatabase.Statement
    private let selectPages: SQLiteDatabase.Statement
    private let selectStrokes: SQLiteDatabase.Statement
    private let selectImages: SQLiteDatabase.Statement
    private let selectAsset: SQLiteDatabase.Statement

    init(_ db: SQLiteDatabase, target: String) throws {
        self.db = db
        self.target = target
        selectDocument = try db.prepare("SELECT id, title, created_ms, modified_ms, deleted FROM documents WHERE id = ?1")
        selectPages = try db.prepare("""
            SELECT id, document_id, position, width_pt, height_pt, created_ms, modified_ms, deleted
            FROM pages WHERE document_id = ?1 ORDER BY position
            """)
        selectStrokes = try db.prepare("""
            SELECT page_id, element_id, z, created_ms, tool, color, width_pt, a, b, c, d, tx_pt, ty_pt,
                   point_count, points, radii, erased
            FROM strokes WHERE page_id = ?1 ORDER BY z
            """)
        selectImages = try db.prepare("""
            SELECT page_id, element_id, z, created_ms, asset_id, x_pt, y_pt, width_pt, height_pt, rotation_deg,
                   a, b, c, d, tx_pt, ty_pt
            FROM images WHERE page_id = ?1 ORDER BY z
            """)
        selectAsset = try db.prepare("SELECT size, bytes FROM assets WHERE id = ?1")
    }

    func finalize() {
        for s in [selectDocument, selectPages, selectStrokes, selectImages, selectAsset] { s.finalize() }
    }

    private func fail(_ what: String) -> LnoteError {
        LnoteError(.corrupt, "export verification failed: \(what)", path: target)
    }

    /// [EXP-41] the file is a sound SQLite database of this format.
    func checkFile(meta expected: [(String, String)]) throws {
        let integrity = try db.query("PRAGMA integrity_check").map { $0.first?.string ?? "" }
        guard integrity == ["ok"] else { throw fail("integrity_check: \(integrity.prefix(5).joined(separator: "; "))") }
        let fk = try db.query("PRAGMA foreign_key_check")
        guard fk.isEmpty else { throw fail("\(fk.count) rows violate foreign keys (first: \(fk[0]))") }
        guard try db.query("PRAGMA user_version").first?.first?.int64 == ExportSchema.version else { throw fail("user_version") }
        guard try db.query("PRAGMA application_id").first?.first?.int64 == ExportSchema.applicationID else { throw fail("application_id") }
        guard try db.query("PRAGMA journal_mode").first?.first?.string?.lowercased() == "delete" else { throw fail("journal_mode is not delete") }
        let meta = try db.query("SELECT key, value FROM meta ORDER BY key").map { "\($0[0].string ?? "")=\($0[1].string ?? "")" }
        let want = expected.sorted { $0.0 < $1.0 }.map { "\($0.0)=\($0.1)" }
        guard meta == want else { throw fail("meta is \(meta), expected \(want)") }
    }

    /// [EXP-42] [EXP-43] one document: its row, its pages in order, each page's strokes and
    /// images in z order, every stroke's points decoded and compared with the source, and
    /// the bytes of its assets.
    func check(_ doc: SourceDocument) throws {
        try selectDocument.bind([.text(doc.row.id)])
        defer { try? selectDocument.reset() }
        guard try selectDocument.step() else { throw fail("document \(doc.row.id) is missing") }
        let r = try selectDocument.row()
        let got = DocumentRow(id: r[0].string ?? "", title: r[1].string ?? "", createdMs: r[2].int64 ?? -1,
                              modifiedMs: r[3].int64 ?? -1, deleted: r[4].int64 == 1)
        guard got == doc.row else { throw fail("document \(doc.row.id) is \(got), expected \(doc.row)") }
        counts.documents += 1

        let pageRows = try selectPages.rows([.text(doc.row.id)]).map {
            PageRow(id: $0[0].string ?? "", documentID: $0[1].string ?? "", position: Int($0[2].int64 ?? -1),
                    widthPt: $0[3].double ?? .nan, heightPt: $0[4].double ?? .nan, createdMs: $0[5].int64 ?? -1,
                    modifiedMs: $0[6].int64 ?? -1, deleted: $0[7].int64 == 1)
        }
        guard pageRows.count == doc.pages.count else {
            throw fail("document \(doc.row.id) has \(pageRows.count) pages, the notebook \(doc.pages.count)")
        }
        for (page, got) in zip(doc.pages, pageRows) {
            guard got == page.row else { throw fail("page \(page.row.id) is \(got), expected \(page.row)") }
            try check(page)
            counts.pages += 1
        }
        for (id, bytes) in doc.assets where !checkedAssets.contains(id) {
            try selectAsset.bind([.text(id.description)])
            defer { try? selectAsset.reset() }
            guard try selectAsset.step() else { throw fail("asset \(id) is missing") }
            let size = try selectAsset.int64(at: 0)
            let stored = try selectAsset.blob(at: 1) ?? []
            guard size == Int64(bytes.count), stored == bytes else {
                throw fail("asset \(id): \(stored.count) bytes (size column \(size)) differ from the notebook's \(bytes.count)")
            }
            checkedAssets.insert(id)
            counts.assets += 1
            counts.assetBytes += bytes.count
        }
    }

    private func check(_ page: SourcePage) throws {
        let pid = page.row.id
        let strokes = try selectStrokes.rows([.text(pid)]).map { v in
            StrokeRow(pageID: v[0].string ?? "", elementID: v[1].string ?? "", z: Int(v[2].int64 ?? -1), createdMs: v[3].int64 ?? -1,
                      tool: v[4].string ?? "", color: v[5].string ?? "", widthPt: v[6].double ?? .nan,
                      transform: Self.transform(v, 7), pointCount: Int(v[13].int64 ?? -1),
                      points: v[14].bytes ?? [], radii: v[15].bytes ?? [], erased: v[16].string ?? "")
        }
        guard strokes.count == page.strokes.count else {
            throw fail("page \(pid) has \(strokes.count) strokes, the notebook \(page.strokes.count)")
        }
        for (want, got) in zip(page.strokes, strokes) {
            guard got == want else {
                throw fail("stroke \(want.elementID) on page \(pid) differs (z \(got.z) vs \(want.z), \(got.points.count) vs \(want.points.count) point bytes)")
            }
            // [EXP-43] decode what was read and compare with the notebook's points.
            let samples = try PointBlob.decodePoints(got.points)
            let radii = try PointBlob.decodeRadii(got.radii)
            let source = page.sourcePoints[want.elementID] ?? []
            guard samples.count == source.count, radii.count == source.count, got.pointCount == source.count else {
                throw fail("stroke \(want.elementID): \(samples.count) points and \(radii.count) radii, the notebook has \(source.count)")
            }
            for i in source.indices where PointBlob.quantized(samples[i], radius: radii[i]) != source[i] {
                throw fail("stroke \(want.elementID): point \(i) decodes to \(samples[i]) radius \(radii[i]), the notebook has \(source[i])")
            }
            counts.strokes += 1
            counts.points += source.count
        }
        let images = try selectImages.rows([.text(pid)]).map { v in
            ImageRow(pageID: v[0].string ?? "", elementID: v[1].string ?? "", z: Int(v[2].int64 ?? -1), createdMs: v[3].int64 ?? -1,
                     assetID: v[4].string ?? "", xPt: v[5].double ?? .nan, yPt: v[6].double ?? .nan,
                     widthPt: v[7].double ?? .nan, heightPt: v[8].double ?? .nan, rotationDeg: v[9].double ?? .nan,
                     transform: Self.transform(v, 10))
        }
        guard images == page.images else {
            throw fail("page \(pid): \(images.count) images differ from the notebook's \(page.images.count)")
        }
        counts.images += images.count
    }

    /// [EXP-40] no row beyond those checked: the table counts equal what was compared.
    func checkTotals() throws {
        let want: [(String, Int)] = [("documents", counts.documents), ("pages", counts.pages), ("strokes", counts.strokes),
                                     ("images", counts.images), ("assets", counts.assets)]
        for (table, n) in want {
            let got = try db.query("SELECT COUNT(*) FROM \(table)").first?.first?.int64 ?? -1
            guard got == Int64(n) else { throw fail("\(table) holds \(got) rows, the notebook \(n)") }
        }
    }

    private static func transform(_ v: [SQLiteValue], _ at: Int) -> TransformColumns {
        TransformColumns(a: v[at].double ?? .nan, b: v[at + 1].double ?? .nan, c: v[at + 2].double ?? .nan,
                         d: v[at + 3].double ?? .nan, txPt: v[at + 4].double ?? .nan, tyPt: v[at + 5].double ?? .nan)
    }
}

extension SQLiteDatabase.Statement {
    /// Resets, binds `values`, and collects every row.
    func rows(_ values: [SQLiteValue]) throws -> [[SQLiteValue]] {
        try reset()
        try bind(values)
        var out: [[SQLiteValue]] = []
        while try step() { out.append(try row()) }
        try reset()
        return out
    }
}

/// What an export holds.
public struct ExportCounts: Sendable, Hashable {
    public var documents = 0
    public var pages = 0
    public var strokes = 0
    public var images = 0
    public var assets = 0
    /// Points of all strokes.
    public var points = 0
    /// Bytes of all assets.
    public var assetBytes = 0
    public init() {}
}
