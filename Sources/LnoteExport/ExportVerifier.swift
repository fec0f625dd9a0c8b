import LnoteModel
import LnoteSQLite

/// Reads an export database back and compares it with the notebook, document by document
/// ([EXP-40] … [EXP-44]). Every difference throws `corrupt` ("export verification failed").
final class ExportVerifier {
    let db: SQLiteDatabase
    /// The final path, for messages.
    let target: String
    /// The format the writer produced ([EXP-3]): the file must say so and have its columns.
    let version: Int64
    private(set) var counts = ExportCounts()
    private var checkedAssets = Set<AssetID>()
    private let selectDocument: SQLiteDatabase.Statement
    private let selectPages: SQLiteDatabase.Statement
    private let selectStrokes: SQLiteDatabase.Statement
    private let selectImages: SQLiteDatabase.Statement
    private let selectAsset: SQLiteDatabase.Statement

    init(_ db: SQLiteDatabase, target: String, version: Int64) throws {
        self.db = db
        self.target = target
        self.version = version
        // [EXP-41] the strokes table has the columns of its version (format 2 adds `exact`),
        // checked before any statement names them.
        let columns = try db.query("PRAGMA table_info(strokes)").map { $0[1].string ?? "" }
        let want = ExportSchema.strokeColumns(version: version)
        guard columns == want else {
            throw LnoteError(.corrupt, "export verification failed: strokes has columns \(columns), format \(version) has \(want)",
                             path: target)
        }
        selectDocument = try db.prepare("SELECT id, title, created_ms, modified_ms, deleted FROM documents WHERE id = ?1")
        selectPages = try db.prepare("""
            SELECT id, document_id, position, width_pt, height_pt, created_ms, modified_ms, deleted
            FROM pages WHERE document_id = ?1 ORDER BY position
            """)
        selectStrokes = try db.prepare("""
            SELECT page_id, element_id, z, created_ms, tool, color, width_pt, a, b, c, d, tx_pt, ty_pt,
                   point_count, points, radii, erased, \(version == ExportSchema.exactVersion ? "exact" : "NULL")
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
        let userVersion = try db.query("PRAGMA user_version").first?.first?.int64
        guard userVersion == version else { throw fail("user_version is \(userVersion.map(String.init) ?? "?"), expected \(version)") }
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
        let rows = try selectStrokes.rows([.text(pid)])
        guard rows.count == page.strokes.count else {
            throw fail("page \(pid) has \(rows.count) strokes, the notebook \(page.strokes.count)")
        }
        for (want, v) in zip(page.strokes, rows) {
            let pointCount = v[13].int64 ?? -1
            // [EXP-24] [EXP-29] decode the row as any reader must, before comparing it: a
            // malformed BLOB is reported with its row and byte offset.
            let points: [StrokePoint]
            do {
                guard case .blob(let pb) = v[14], case .blob(let rb) = v[15] else {
                    throw LnoteError(.corrupt, "points and radii must be BLOBs")
                }
                let exact: [UInt8]?
                switch v[17] {
                case .null: exact = nil
                case .blob(let b): exact = b
                default: throw LnoteError(.corrupt, "exact must be a BLOB or NULL, not \(v[17])")
                }
                guard let n = Int(exactly: pointCount), n >= 0 else { throw LnoteError(.corrupt, "point_count is \(pointCount)") }
                points = try PointBlob.decode(points: pb, radii: rb, exact: exact, pointCount: n)
            } catch var e as LnoteError {
                e.message = "export verification failed: strokes row (page_id \(v[0].string ?? "?"), element_id \(v[1].string ?? "?")): \(e.message)"
                e.path = target
                throw e
            }
            let got = StrokeRow(pageID: v[0].string ?? "", elementID: v[1].string ?? "", z: Int(v[2].int64 ?? -1), createdMs: v[3].int64 ?? -1,
                                tool: v[4].string ?? "", color: v[5].string ?? "", widthPt: v[6].double ?? .nan,
                                transform: Self.transform(v, 7), pointCount: Int(pointCount),
                                points: v[14].bytes ?? [], radii: v[15].bytes ?? [], erased: v[16].string ?? "", exact: v[17].bytes)
            guard got == want else {
                throw fail("stroke \(want.elementID) on page \(pid) differs (z \(got.z) vs \(want.z), \(got.points.count) vs \(want.points.count) point bytes, exact \(got.exact?.count.description ?? "NULL") vs \(want.exact?.count.description ?? "NULL") bytes)")
            }
            // [EXP-43] what was read, decoded, is the notebook's points.
            let source = page.sourcePoints[want.elementID] ?? []
            guard points.count == source.count else {
                throw fail("stroke \(want.elementID): \(points.count) points, the notebook has \(source.count)")
            }
            if let i = source.indices.first(where: { points[$0] != source[$0] }) {
                throw fail("stroke \(want.elementID): point \(i) decodes to \(points[i]), the notebook has \(source[i])")
            }
            counts.strokes += 1
            counts.points += source.count
            if want.exact != nil { counts.exactStrokes += 1 }
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
    /// Strokes with an `exact` BLOB: a value binary32 cannot hold ([EXP-28]).
    public var exactStrokes = 0
    public init() {}
}
