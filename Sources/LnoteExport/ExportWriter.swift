import LnoteModel
import LnoteSQLite

/// Inserts rows into a fresh export database, inside the one transaction the caller opened.
final class ExportWriter {
    let db: SQLiteDatabase
    private let insertDocument: SQLiteDatabase.Statement
    private let insertPage: SQLiteDatabase.Statement
    private let insertStroke: SQLiteDatabase.Statement
    private let insertImage: SQLiteDatabase.Statement
    private let insertAsset: SQLiteDatabase.Statement
    private(set) var writtenAssets = Set<AssetID>()
    /// 1 until a stroke needs an `exact` BLOB, then 2 ([EXP-3], [EXP-28]).
    private(set) var version = ExportSchema.version
    /// Prepared when the `exact` column is added.
    private var insertExactStroke: SQLiteDatabase.Statement?

    /// Creates the schema and prepares the inserts.
    init(_ db: SQLiteDatabase) throws {
        self.db = db
        try db.execute(ExportSchema.ddl)
        try db.execute("PRAGMA user_version = \(ExportSchema.version)")
        try db.execute("PRAGMA application_id = \(ExportSchema.applicationID)")
        insertDocument = try db.prepare("INSERT INTO documents (id, title, created_ms, modified_ms, deleted) VALUES (?1, ?2, ?3, ?4, ?5)")
        insertPage = try db.prepare("""
            INSERT INTO pages (id, document_id, position, width_pt, height_pt, created_ms, modified_ms, deleted)
            VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
            """)
        insertStroke = try db.prepare("""
            INSERT INTO strokes (page_id, element_id, z, created_ms, tool, color, width_pt, a, b, c, d, tx_pt, ty_pt,
                                 point_count, points, radii, erased)
            VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)
            """)
        insertImage = try db.prepare("""
            INSERT INTO images (page_id, element_id, z, created_ms, asset_id, x_pt, y_pt, width_pt, height_pt, rotation_deg,
                                a, b, c, d, tx_pt, ty_pt)
            VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)
            """)
        insertAsset = try db.prepare("INSERT INTO assets (id, size, bytes) VALUES (?1, ?2, ?3)")
    }

    func writeMeta(_ pairs: [(String, String)]) throws {
        let s = try db.prepare("INSERT INTO meta (key, value) VALUES (?1, ?2)")
        defer { s.finalize() }
        for (k, v) in pairs { try s.run([.text(k), .text(v)]) }
    }

    /// Writes a document, its pages, strokes, images, and the assets not written yet.
    /// Assets go first: images reference them.
    func write(_ doc: SourceDocument) throws {
        for a in doc.assets where !writtenAssets.contains(a.id) {
            try insertAsset.run([.text(a.id.description), .integer(Int64(a.bytes.count)), .blob(a.bytes)])
            writtenAssets.insert(a.id)
        }
        let r = doc.row
        try insertDocument.run([.text(r.id), .text(r.title), .integer(r.createdMs), .integer(r.modifiedMs), .integer(r.deleted ? 1 : 0)])
        for page in doc.pages {
            let p = page.row
            try insertPage.run([.text(p.id), .text(p.documentID), .integer(Int64(p.position)), .real(p.widthPt), .real(p.heightPt),
                                .integer(p.createdMs), .integer(p.modifiedMs), .integer(p.deleted ? 1 : 0)])
            for s in page.strokes {
                let values = Self.values(s)
                if let exact = s.exact {
                    try exactStrokeInsert().run(values + [.blob(exact)])
                } else {
                    try insertStroke.run(values)
                }
            }
            for i in page.images {
                try insertImage.run([.text(i.pageID), .text(i.elementID), .integer(Int64(i.z)), .integer(i.createdMs),
                                     .text(i.assetID), .real(i.xPt), .real(i.yPt), .real(i.widthPt), .real(i.heightPt),
                                     .real(i.rotationDeg)] + Self.values(i.transform))
            }
        }
    }

    /// The insert with the `exact` column, adding the column and moving the file to format 2
    /// the first time a stroke needs it.
    private func exactStrokeInsert() throws -> SQLiteDatabase.Statement {
        if let s = insertExactStroke { return s }
        try insertStroke.reset()
        try db.execute(ExportSchema.addExactColumn)
        try db.execute("PRAGMA user_version = \(ExportSchema.exactVersion)")
        try db.execute("UPDATE meta SET value = '\(ExportSchema.exactVersion)' WHERE key = 'format_version'")
        guard db.changes == 1 else { throw LnoteError(.invalidState, "the export's meta has no format_version row") }
        let s = try db.prepare("""
            INSERT INTO strokes (page_id, element_id, z, created_ms, tool, color, width_pt, a, b, c, d, tx_pt, ty_pt,
                                 point_count, points, radii, erased, exact)
            VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18)
            """)
        insertExactStroke = s
        version = ExportSchema.exactVersion
        return s
    }

    /// A stroke's 17 format-1 columns, in `insertStroke`'s order.
    static func values(_ s: StrokeRow) -> [SQLiteValue] {
        [.text(s.pageID), .text(s.elementID), .integer(Int64(s.z)), .integer(s.createdMs), .text(s.tool), .text(s.color),
         .real(s.widthPt)] + values(s.transform) + [.integer(Int64(s.pointCount)), .blob(s.points), .blob(s.radii), .text(s.erased)]
    }

    static func values(_ t: TransformColumns) -> [SQLiteValue] {
        [.real(t.a), .real(t.b), .real(t.c), .real(t.d), .real(t.txPt), .real(t.tyPt)]
    }

    func finalize() {
        for s in [insertDocument, insertPage, insertStroke, insertImage, insertAsset] + [insertExactStroke].compactMap({ $0 }) {
            s.finalize()
        }
    }
}
