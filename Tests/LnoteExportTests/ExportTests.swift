import Foundation
import Testing
import LnoteModel
import LnoteSQLite
import LnoteStore
import LnoteTestSupport
@testable import LnoteExport

// Protocol/sqlite-export.md: each test names the statements it checks.

@Suite("SQLite export") struct ExportTests {
    /// [EXP-2] [EXP-10] [EXP-11] [EXP-40] counts match the notebook, with and without deleted
    /// content; [EXP-3] `user_version` is 1 and [EXP-4] `application_id` is "lnot".
    @Test func countsMatch() async throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let seed = UInt64.random(in: 0...UInt64.max)
        let f = try await Fixture.make(in: dir, seed: seed)
        let file = dir.sub("out.sqlite")
        let summary = try await SQLiteExport.export(folder: f.folder, to: file, options: fixedOptions())
        #expect(summary.counts.documents == 2, "seed \(seed)")
        #expect(summary.counts.pages == f.livePageCount, "seed \(seed)")
        #expect(summary.counts.strokes == f.strokes(f.elements), "seed \(seed)")
        #expect(summary.counts.images == f.images(f.elements), "seed \(seed)")
        #expect(summary.counts.points == f.points(f.elements), "seed \(seed)")
        // Only imageA is on live pages (imageB's page is deleted).
        #expect(summary.counts.assets == 1, "seed \(seed)")
        #expect(summary.fileBytes == (try FileManager.default.attributesOfItem(atPath: file)[.size] as? Int), "seed \(seed)")

        let db = try openExport(file)
        defer { try? db.close() }
        #expect(try count(db, "SELECT COUNT(*) FROM documents") == 2)
        #expect(try count(db, "SELECT COUNT(*) FROM pages") == Int64(f.livePageCount))
        #expect(try count(db, "SELECT COUNT(*) FROM strokes") == Int64(f.strokes(f.elements)))
        #expect(try count(db, "SELECT COUNT(*) FROM images") == Int64(f.images(f.elements)))
        #expect(try count(db, "SELECT COUNT(*) FROM pages WHERE id = ?1", [.text(f.deletedPage.description)]) == 0)
        #expect(try count(db, "SELECT COUNT(*) FROM documents WHERE deleted = 1") == 0)
        #expect(try count(db, "PRAGMA user_version") == 1)
        #expect(try count(db, "PRAGMA application_id") == 0x6C6E_6F74)
        let meta = try db.query("SELECT key, value FROM meta ORDER BY key").map { "\($0[0].string ?? "")=\($0[1].string ?? "")" }
        #expect(meta == ["exported_at_ms=1700000000000", "format_version=1", "generator=lnote", "include_deleted=0",
                         "source_folder=\(URL(fileURLWithPath: f.folder).resolvingSymlinksInPath().path)",
                         "source_replica=\(summary.sourceReplica)"], "seed \(seed)")
        // [EXP-11] live page order.
        for (doc, order) in f.pageOrder {
            let rows = try db.query("SELECT id, position FROM pages WHERE document_id = ?1 ORDER BY position", [.text(doc.description)])
            #expect(rows.map { $0[0].string ?? "" } == order.map(\.description), "seed \(seed)")
            #expect(rows.map { $0[1].int64 ?? -1 } == (0..<Int64(order.count)).map { $0 })
        }

        // With deleted content: the deleted page comes after the live ones, the deleted document is there.
        let all = dir.sub("all.sqlite")
        let s2 = try await SQLiteExport.export(folder: f.folder, to: all, options: fixedOptions(includeDeleted: true))
        #expect(s2.counts.documents == 3, "seed \(seed)")
        #expect(s2.counts.pages == f.livePageCount + 2, "seed \(seed)")
        #expect(s2.counts.strokes == f.strokes(f.allElements), "seed \(seed)")
        #expect(s2.counts.images == f.images(f.allElements), "seed \(seed)")
        #expect(s2.counts.assets == 2, "seed \(seed)")
        let db2 = try openExport(all)
        defer { try? db2.close() }
        let dp = try db2.query("SELECT position, deleted FROM pages WHERE id = ?1", [.text(f.deletedPage.description)])
        #expect(dp.first == [.integer(3), .integer(1)], "seed \(seed)")
        #expect(try count(db2, "SELECT deleted FROM documents WHERE id = ?1", [.text(f.deletedDocument.description)]) == 1)
        #expect(try db2.query("SELECT value FROM meta WHERE key = 'include_deleted'").first?.first == .text("1"))
    }

    /// [EXP-20] [EXP-21] [EXP-22] [EXP-25] [EXP-30] a stroke's BLOB decodes (independently of
    /// the library's decoder) to the notebook's points; erased ranges and transforms are kept.
    @Test func strokeBlobsDecodeToTheSourcePoints() async throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let seed = UInt64.random(in: 0...UInt64.max)
        let f = try await Fixture.make(in: dir, seed: seed)
        let file = dir.sub("out.sqlite")
        try await SQLiteExport.export(folder: f.folder, to: file, options: fixedOptions())
        let db = try openExport(file)
        defer { try? db.close() }
        var checked = 0
        for (page, records) in f.elements {
            for e in records {
                guard let s = e.content.stroke else { continue }
                let rows = try db.query("SELECT points, radii, point_count, erased, tool, color, width_pt, tx_pt, ty_pt, a, d FROM strokes WHERE page_id = ?1 AND element_id = ?2",
                                        [.text(page.description), .text(e.id.description)])
                try #require(rows.count == 1, "seed \(seed)")
                let r = rows[0]
                let blob = r[0].bytes ?? []
                #expect(blob.count == 16 * s.points.count, "seed \(seed)")
                #expect((r[1].bytes ?? []).count == 4 * s.points.count)
                #expect(r[2].int64 == Int64(s.points.count))
                for (i, p) in s.points.enumerated() {
                    let x = le32(blob, 16 * i), y = le32(blob, 16 * i + 4), pr = le32(blob, 16 * i + 8), t = le32(blob, 16 * i + 12)
                    let rad = le32(r[1].bytes ?? [], 4 * i)
                    // Within float precision of the dequantized values...
                    #expect(abs(Double(x) - Double(p.x) / 10) <= Double(x.ulp), "seed \(seed) point \(i)")
                    #expect(abs(Double(y) - Double(p.y) / 10) <= Double(y.ulp), "seed \(seed) point \(i)")
                    #expect(abs(Double(pr) - Double(p.pressure) / 1000) <= Double(pr.ulp), "seed \(seed) point \(i)")
                    #expect(Double(t) == Double(p.t), "seed \(seed) point \(i)")
                    #expect(abs(Double(rad) - Double(p.radius) / 10) <= Double(rad.ulp), "seed \(seed) point \(i)")
                    // ... and exactly back to the quantized integers.
                    #expect(Int32((Double(x) * 10).rounded()) == p.x && Int32((Double(y) * 10).rounded()) == p.y, "seed \(seed)")
                }
                let want = "[" + e.erased.map { "[\($0.from),\($0.to)]" }.joined(separator: ",") + "]"
                #expect(r[3].string == want, "seed \(seed)")
                #expect(r[4].string == s.style.tool.description && r[5].string == s.style.color.description)
                #expect(r[6].double == Double(s.style.width) / 10)
                #expect(r[7].double == Double(e.transform.value.tx) / 10 && r[8].double == Double(e.transform.value.ty) / 10)
                #expect(r[9].double == 1 && r[10].double == 1)
                checked += 1
            }
        }
        #expect(checked == f.strokes(f.elements))
        // The partial erase and the move specifically.
        let er = try db.query("SELECT erased FROM strokes WHERE page_id = ?1 AND element_id = ?2",
                              [.text(f.erasedStroke.page.description), .text(f.erasedStroke.element.description)])
        #expect(er.first?.first == .text("[[2,7],[10,12]]"), "seed \(seed)")
        let mv = try db.query("""
            SELECT tx_pt, ty_pt FROM strokes WHERE page_id = ?3 AND element_id = ?1
            UNION ALL SELECT tx_pt, ty_pt FROM images WHERE page_id = ?3 AND element_id = ?2
            """, [.text(f.moved.stroke.description), .text(f.moved.image.description), .text(f.moved.page.description)])
        #expect(mv == [[.real(5.5), .real(-3.1)], [.real(5.5), .real(-3.1)]], "seed \(seed)")
        let img = try db.query("SELECT x_pt, y_pt, width_pt, height_pt, rotation_deg FROM images WHERE page_id = ?2 AND element_id = ?1",
                               [.text(f.moved.image.description), .text(f.moved.page.description)])
        #expect(img.first == [.real(10), .real(20), .real(150), .real(90), .real(45)])
    }

    /// [EXP-12] z is 0-based, bottom to top, across strokes and images, and matches the store's
    /// order; [EXP-13] element ids are the OpIDs of the adds, as `<replica hex>.<counter>`.
    @Test func zOrderIsPreserved() async throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let seed = UInt64.random(in: 0...UInt64.max)
        let f = try await Fixture.make(in: dir, seed: seed)
        let file = dir.sub("out.sqlite")
        try await SQLiteExport.export(folder: f.folder, to: file, options: fixedOptions())
        let db = try openExport(file)
        defer { try? db.close() }
        for (page, records) in f.elements {
            let rows = try db.query("""
                SELECT element_id, z FROM strokes WHERE page_id = ?1 UNION ALL
                SELECT element_id, z FROM images WHERE page_id = ?1 ORDER BY z
                """, [.text(page.description)])
            #expect(rows.map { $0[0].string ?? "" } == records.map(\.id.description), "seed \(seed) page \(page)")
            #expect(rows.map { $0[1].int64 ?? -1 } == (0..<Int64(records.count)).map { $0 }, "seed \(seed)")
        }
        // The reorders are in the file: one stroke brought to the front, one sent to the back.
        let top = try db.query("SELECT element_id FROM strokes WHERE page_id = ?1 ORDER BY z", [.text(f.moved.page.description)])
        #expect(top.first?.first == .text(f.reordered.back.description), "seed \(seed)")
        #expect(top.last?.first == .text(f.reordered.front.description), "seed \(seed)")
    }

    /// [EXP-26] assets are stored once each, byte-equal to the package files.
    @Test func assetsAreByteEqual() async throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let seed = UInt64.random(in: 0...UInt64.max)
        let f = try await Fixture.make(in: dir, seed: seed)
        let file = dir.sub("out.sqlite")
        try await SQLiteExport.export(folder: f.folder, to: file, options: fixedOptions(includeDeleted: true))
        let db = try openExport(file)
        defer { try? db.close() }
        let rows = try db.query("SELECT id, size, bytes FROM assets ORDER BY id")
        #expect(rows.count == f.assets.count)
        for r in rows {
            let id = try #require(AssetID(hex: r[0].string ?? ""))
            #expect(r[2].bytes == f.assets[id], "seed \(seed)")
            #expect(r[1].int64 == Int64(f.assets[id]?.count ?? -1))
            #expect(AssetID.of(r[2].bytes ?? []) == id)
        }
        #expect(try count(db, "SELECT COUNT(*) FROM images WHERE asset_id NOT IN (SELECT id FROM assets)") == 0)
    }

    /// [EXP-1] [EXP-5] re-exporting replaces the file by a rename (a new inode), leaves no
    /// temporary file, and the file is a rollback-journal database (no WAL beside it).
    @Test func reExportOverwritesAtomically() async throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let seed = UInt64.random(in: 0...UInt64.max)
        let f = try await Fixture.make(in: dir, seed: seed)
        let file = dir.sub("out.sqlite")
        let first = try await SQLiteExport.export(folder: f.folder, to: file, options: fixedOptions())
        let inode1 = try FileManager.default.attributesOfItem(atPath: file)[.systemFileNumber] as? UInt64
        let nb = try await Notebook.open(at: f.folder)
        let d = try await nb.openDocument(f.liveDocuments[1])
        try await d.addStrokes(HandwritingGenerator.strokes(seed: seed &+ 1, count: 3), to: f.pageOrder[f.liveDocuments[1]]![0])
        try await nb.close()
        let second = try await SQLiteExport.export(folder: f.folder, to: file, options: fixedOptions())
        #expect(second.counts.strokes == first.counts.strokes + 3, "seed \(seed)")
        let inode2 = try FileManager.default.attributesOfItem(atPath: file)[.systemFileNumber] as? UInt64
        #expect(inode1 != nil && inode1 != inode2)
        #expect(dir.entries() == ["notebook", "out.sqlite"])
        // SQLite header bytes 18 and 19: 1 = rollback journal, 2 = WAL.
        let header = try [UInt8](Data(contentsOf: URL(fileURLWithPath: file)).prefix(20))
        #expect(header[18] == 1 && header[19] == 1)
        let db = try openExport(file)
        defer { try? db.close() }
        #expect(try count(db, "SELECT COUNT(*) FROM strokes") == Int64(second.counts.strokes))
    }

    enum Tamper: String, CaseIterable, Sendable {
        case deleteStroke, flipPointByte, truncatePoints, moveToTop, changeAssetByte, dropPage, extraDocument, changeTitle,
             changeMeta, changeErased, changeTransform, changeUserVersion, changeApplicationID
        var sql: String {
            switch self {
            case .deleteStroke: "DELETE FROM strokes WHERE rowid = (SELECT MAX(rowid) FROM strokes)"
            // The replaced byte always differs from the one it replaces, whatever the seed made.
            // `||` makes TEXT in SQLite: splices cast back to BLOB, so that the byte is what differs.
            case .flipPointByte: "UPDATE strokes SET points = CAST(substr(points, 1, 20) || (CASE WHEN substr(points, 21, 1) = x'7F' THEN x'80' ELSE x'7F' END) || substr(points, 22) AS BLOB) WHERE rowid = (SELECT MIN(rowid) FROM strokes)"
            case .truncatePoints: "UPDATE strokes SET points = substr(points, 1, length(points) - 16), point_count = point_count - 1 WHERE rowid = 3"
            case .moveToTop: "UPDATE strokes SET z = z + 1000 WHERE rowid = (SELECT MIN(rowid) FROM strokes)"
            case .changeAssetByte: "UPDATE assets SET bytes = CAST((CASE WHEN substr(bytes, 1, 1) = x'00' THEN x'01' ELSE x'00' END) || substr(bytes, 2) AS BLOB)"
            case .dropPage: "PRAGMA foreign_keys = OFF; DELETE FROM pages WHERE position = 0"
            case .extraDocument: "INSERT INTO documents VALUES ('X', 'x', 0, 0, 0)"
            case .changeTitle: "UPDATE documents SET title = title || ' '"
            case .changeMeta: "UPDATE meta SET value = 'someone' WHERE key = 'generator'"
            case .changeErased: "UPDATE strokes SET erased = '[[0,1]]' WHERE erased = '[]' AND rowid = (SELECT MIN(rowid) FROM strokes WHERE erased = '[]')"
            case .changeTransform: "UPDATE images SET tx_pt = tx_pt + 0.1"
            case .changeUserVersion: "PRAGMA user_version = 2"
            case .changeApplicationID: "PRAGMA application_id = 1"
            }
        }
    }

    /// [EXP-1] [EXP-42] [EXP-43] [EXP-44] [EXP-41] [EXP-3] whatever is wrong in the written
    /// file — rows, BLOBs, assets, a `meta` row, a dangling foreign key (a page deleted under
    /// its strokes), an unknown `user_version` or `application_id` — verification throws,
    /// the temporary file is removed, and the target keeps its previous content. [EXP-6] The
    /// notebook's lock is released after the failure.
    @Test(arguments: Tamper.allCases) func failedVerificationLeavesNoFile(_ tamper: Tamper) async throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let seed = UInt64.random(in: 0...UInt64.max)
        let f = try await Fixture.make(in: dir, seed: seed)
        var options = fixedOptions()
        let sql = tamper.sql
        options.beforeVerification = { db in
            try db.execute(sql)
            #expect(db.changes > 0 || sql.hasPrefix("PRAGMA"), "tamper \(sql) changed nothing")
        }
        let file = dir.sub("out.sqlite")
        let error = await #expect(throws: LnoteError(.corrupt)) { try await SQLiteExport.export(folder: f.folder, to: file, options: options) }
        #expect(error?.message.hasPrefix("export verification failed") == true, "\(String(describing: error))")
        #expect(error?.message.contains("must be BLOBs") == false, "the tampering changed a type, not the bytes: \(String(describing: error))")
        #expect(dir.entries() == ["notebook"], "seed \(seed)")
        // Over an existing export: it stays as it was.
        try await SQLiteExport.export(folder: f.folder, to: file, options: fixedOptions())
        let before = try Data(contentsOf: URL(fileURLWithPath: file))
        await #expect(throws: LnoteError(.corrupt)) { try await SQLiteExport.export(folder: f.folder, to: file, options: options) }
        #expect(try Data(contentsOf: URL(fileURLWithPath: file)) == before)
        #expect(dir.entries() == ["notebook", "out.sqlite"], "seed \(seed)")
        // The notebook's lock was released.
        let nb = try await Notebook.open(at: f.folder)
        try await nb.close()
    }

    /// [EXP-6] A missing directory and a directory as target fail without writing; a folder
    /// another handle has open is exported beside it (folders are shared, document-package.md
    /// §10).
    @Test func badTargetsAndLockedNotebooks() async throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let nb = try await Notebook.open(at: dir.sub("nb"), create: true)
        let d = try await nb.createDocument(title: "open")
        try await d.addStroke(Stroke(points: [StrokePoint(x: 0, y: 0), StrokePoint(x: 30, y: 3, t: 5)]), to: await d.pageList[0].id)
        await #expect(throws: LnoteError(.notFound)) { try await SQLiteExport.export(nb, to: dir.sub("missing/x.sqlite")) }
        await #expect(throws: LnoteError(.invalidArgument)) { try await SQLiteExport.export(nb, to: dir.sub("nb")) }
        #expect(dir.entries() == ["nb"])
        let summary = try await SQLiteExport.export(folder: dir.sub("nb"), to: dir.sub("x.sqlite"))
        #expect(summary.description.hasPrefix("1 documents, 1 pages, 1 strokes"), "\(summary)")
        try await nb.close()
        try FileManager.default.removeItem(atPath: dir.sub("x.sqlite"))
        if getuid() != 0 {
            // A read-only directory: SQLite cannot create the temporary file.
            let ro = dir.sub("ro")
            try FileManager.default.createDirectory(atPath: ro, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o555])
            await #expect(throws: LnoteError.self) { try await SQLiteExport.export(folder: dir.sub("nb"), to: ro + "/x.sqlite") }
            #expect(((try? FileManager.default.contentsOfDirectory(atPath: ro)) ?? ["?"]).isEmpty)
            try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: ro)
        }
    }

    /// [EXP-20] [EXP-23] PointBlob round-trips every point in the exact range through its
    /// floats alone (no `exact` BLOB), seeded; [EXP-24] a `points` BLOB whose length is not a
    /// multiple of 16, or a `radii` BLOB not a multiple of 4, is refused.
    @Test func pointBlobRoundTrips() throws {
        let seed = UInt64.random(in: 0...UInt64.max)
        var rng = SplitMix64(seed: seed)
        for _ in 0..<200 {
            let limit: Int32 = [1_000, 100_000, 10_485_759][rng.int(in: 0...2)]
            let pts = (0..<rng.int(in: 0...50)).map { _ in
                StrokePoint(x: Int32(rng.int(in: -Int(limit)...Int(limit))), y: Int32(rng.int(in: -Int(limit)...Int(limit))),
                            pressure: UInt16(rng.int(in: 0...1000)), radius: Int32(rng.int(in: 0...Int(limit))),
                            t: UInt32(rng.int(in: 0...(1 << 24))))
            }
            let e = PointBlob.encode(pts)
            #expect(e.points.count == 16 * pts.count && e.radii.count == 4 * pts.count)
            #expect(e.exact == nil, "seed \(seed)")
            let s = try PointBlob.decodePoints(e.points), rad = try PointBlob.decodeRadii(e.radii)
            #expect(zip(s, rad).map { PointBlob.quantized($0, radius: $1) } == pts.map { Optional($0) }, "seed \(seed)")
            #expect(try PointBlob.decode(points: e.points, radii: e.radii, exact: nil, pointCount: pts.count) == pts, "seed \(seed)")
        }
        #expect(throws: LnoteError(.corrupt)) { try PointBlob.decodePoints([UInt8](repeating: 0, count: 17)) }
        #expect(throws: LnoteError(.corrupt)) { try PointBlob.decodeRadii([1, 2, 3]) }
        // [EXP-21] the test vector of Protocol/sqlite-export.md.
        let vector = PointBlob.encode([StrokePoint(x: 123, y: -45, pressure: 500, radius: 12, t: 16)])
        #expect(vector.points == [0xcd, 0xcc, 0x44, 0x41, 0x00, 0x00, 0x90, 0xc0, 0x00, 0x00, 0x00, 0x3f, 0x00, 0x00, 0x80, 0x41])
        #expect(vector.radii == [0x9a, 0x99, 0x99, 0x3f])
        #expect(vector.exact == nil)
        // [EXP-23] Just past the exact range the floats alone would lose the value: 2^24 + 1 ms,
        // and 1,048,576.2 pt (no binary32 within 0.05 pt); such strokes get an `exact` BLOB.
        #expect(PointBlob.encode([StrokePoint(x: 0, y: 0, t: (1 << 24) + 1)]).exact != nil)
        #expect(PointBlob.encode([StrokePoint(x: 10_485_762, y: 0)]).exact != nil)
        #expect(PointBlob.encode([StrokePoint(x: 0, y: 0, radius: -10_485_762)]).exact != nil)
    }

    /// [EXP-6] Exporting a notebook whose documents were closed cleanly writes nothing in the
    /// folder: every file keeps its bytes, no file appears; a page that was never written
    /// (no snapshot, no log) is exported as an empty page without creating its files.
    @Test func exportWritesNothingInTheFolder() async throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let seed = UInt64.random(in: 0...UInt64.max)
        let f = try await Fixture.make(in: dir, seed: seed)
        let nb = try await Notebook.open(at: f.folder)
        let d = try await nb.openDocument(f.liveDocuments[0])
        let blank = try await d.addPage()
        try await nb.close()
        func snapshot() throws -> [String: Data] {
            var out: [String: Data] = [:]
            let all = FileManager.default.enumerator(atPath: f.folder)?.allObjects as? [String] ?? []
            for rel in all {
                var isDir: ObjCBool = false
                _ = FileManager.default.fileExists(atPath: f.folder + "/" + rel, isDirectory: &isDir)
                out[rel] = isDir.boolValue ? Data() : try Data(contentsOf: URL(fileURLWithPath: f.folder + "/" + rel))
            }
            return out
        }
        let before = try snapshot()
        #expect(!before.keys.contains { $0.contains(blank.description) }, "the new page has no files")
        let file = dir.sub("out.sqlite")
        try await SQLiteExport.export(folder: f.folder, to: file, options: fixedOptions())
        let after = try snapshot()
        #expect(after.keys.sorted() == before.keys.sorted(), "seed \(seed)")
        for (k, v) in before where after[k] != v { Issue.record("\(k) changed (seed \(seed))") }
        let db = try openExport(file)
        defer { try? db.close() }
        #expect(try count(db, "SELECT COUNT(*) FROM pages WHERE id = ?1", [.text(blank.description)]) == 1)
        #expect(try count(db, "SELECT COUNT(*) FROM strokes WHERE page_id = ?1", [.text(blank.description)]) == 0)
    }

    /// The CLI: one summary line on stdout; usage errors exit 2.
    @Test func cliExports() async throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let seed = UInt64.random(in: 0...UInt64.max)
        let f = try await Fixture.make(in: dir, seed: seed)
        let lnote = Subprocess.product("lnote")
        let file = dir.sub("cli.sqlite")
        let r = try await runCLI(lnote, ["export", f.folder, "--sqlite", file, "--include-deleted"])
        #expect(r.code == 0, "\(r.errText)")
        let lines = r.outText.split(separator: "\n")
        #expect(lines.count == 1)
        #expect(lines.first?.hasPrefix("exported 3 documents, \(f.livePageCount + 2) pages, \(f.strokes(f.allElements)) strokes") == true, "\(r.outText)")
        #expect(r.outText.contains("\(f.images(f.allElements)) images, 2 assets"))
        #expect(FileManager.default.fileExists(atPath: file))
        let usage = try await runCLI(lnote, ["export", f.folder])
        #expect(usage.code == 2, "\(usage.errText)")
        let missing = try await runCLI(lnote, ["export", dir.sub("nope"), "--sqlite", dir.sub("y.sqlite")])
        #expect(missing.code == 1)
        #expect(!FileManager.default.fileExists(atPath: dir.sub("y.sqlite")))
    }
}

/// Runs `lnote` without blocking a cooperative thread.
func runCLI(_ exe: String, _ args: [String]) async throws -> (code: Int32, outText: String, errText: String) {
    let r = try await Subprocess.run(exe, args)
    return (r.code, r.outText, r.errText)
}
