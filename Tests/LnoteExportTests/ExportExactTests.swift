import Foundation
import Testing
import LnoteModel
import LnoteSQLite
import LnoteStore
import LnoteTestSupport
@testable import LnoteExport

// Protocol/sqlite-export.md [EXP-23], [EXP-27] … [EXP-29]: strokes whose values binary32
// cannot hold exactly are exported with an `exact` BLOB, in a format-2 file.

/// A notebook of one document and one page: a 20-hour stroke (times past 2^24 ms, not
/// multiples of 8), a stroke reaching 9,000,000.3 pt and −9,999,999.9 pt, a stroke at exactly
/// 9,000,000 pt (exact in binary32: no `exact` BLOB), and ordinary handwriting.
struct FarFixture {
    var folder: String
    var document: DocumentID
    var page: PageID
    var long: ElementID
    var far: ElementID
    var round: ElementID
    /// Every stroke on the page, bottom to top, with its points.
    var strokes: [(id: ElementID, points: [StrokePoint])]

    static let longPoints = [StrokePoint(x: 10, y: 10, t: 0), StrokePoint(x: 20, y: 15, t: 16),
                             StrokePoint(x: 30, y: 20, pressure: 700, t: 16_777_217),
                             StrokePoint(x: 40, y: 25, pressure: 300, radius: 25, t: 36_000_005),
                             StrokePoint(x: 50, y: 30, pressure: 1000, radius: 7, t: 72_000_001)]
    static let farPoints = [StrokePoint(x: 0, y: 0, t: 0), StrokePoint(x: 90_000_003, y: -45, pressure: 500, radius: 12, t: 40),
                            StrokePoint(x: 90_000_000, y: -99_999_999, t: 80)]

    static func make(in dir: TempDir, seed: UInt64) async throws -> FarFixture {
        let folder = dir.sub("far")
        let nb = try await Notebook.open(at: folder, create: true)
        let d = try await nb.createDocument(title: "far and long")
        let p = await d.pageList[0].id
        let ink = HandwritingGenerator.strokes(seed: seed, count: 3)
        _ = try await d.addStrokes([ink[0]], to: p)
        let long = try await d.addStroke(Stroke(points: longPoints), to: p)
        let round = try await d.addStroke(Stroke(points: [StrokePoint(x: 90_000_000, y: 0), StrokePoint(x: -90_000_000, y: 10, t: 5)]), to: p)
        let far = try await d.addStroke(Stroke(points: farPoints), to: p)
        _ = try await d.addStrokes(Array(ink[1...]), to: p)
        let strokes = try await d.elements(p).compactMap { e in e.content.stroke.map { (id: e.id, points: $0.points) } }
        try await nb.close()
        return FarFixture(folder: folder, document: d.id, page: p, long: long, far: far, round: round, strokes: strokes)
    }
}

/// The `exact` bytes of `points` as Protocol/sqlite-export.md [EXP-27] lays them out, written
/// independently of `PointBlob`.
func specExact(_ points: [StrokePoint]) -> [UInt8] {
    func le(_ v: UInt32) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: v >> (8 * UInt32($0))) } }
    return points.flatMap { p in
        le(UInt32(bitPattern: p.x)) + le(UInt32(bitPattern: p.y)) + le(UInt32(p.pressure)) + le(p.t) + le(UInt32(bitPattern: p.radius))
    }
}

/// The nearest binary32 of each stored value, as [EXP-21] defines `points` and `radii`.
func specFloats(_ p: StrokePoint) -> [Float] {
    [Float(Double(p.x) / 10), Float(Double(p.y) / 10), Float(Double(p.pressure) / 1000), Float(p.t), Float(Double(p.radius) / 10)]
}

/// True when every value of `p` comes back from its float ([EXP-23]), computed from the spec.
func specFloatsAreExact(_ p: StrokePoint) -> Bool {
    let f = specFloats(p)
    return Int64((Double(f[0]) * 10).rounded()) == Int64(p.x) && Int64((Double(f[1]) * 10).rounded()) == Int64(p.y)
        && Int64((Double(f[2]) * 1000).rounded()) == Int64(p.pressure) && Double(f[3]) == Double(p.t)
        && Int64((Double(f[4]) * 10).rounded()) == Int64(p.radius)
}

@Suite("SQLite export: exact samples") struct ExportExactTests {
    /// [EXP-23] [EXP-27] [EXP-28] [EXP-29] [EXP-3] [EXP-43] A legal notebook whose strokes
    /// binary32 cannot hold (20 hours long, 9,000,000.3 pt away) exports, verifies, and reads
    /// back exactly: the file is format 2, those two strokes carry an `exact` BLOB laid out as
    /// the spec says (decoded here independently), every other stroke has NULL, and `points`
    /// still holds the nearest floats (within 0.5 pt and 4 ms of the truth here). `lnote
    /// export` says so on stderr.
    @Test func exactSamplesSurviveTheExport() async throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let seed = UInt64.random(in: 0...UInt64.max)
        let f = try await FarFixture.make(in: dir, seed: seed)
        let file = dir.sub("far.sqlite")
        let summary = try await SQLiteExport.export(folder: f.folder, to: file, options: fixedOptions())
        #expect(summary.formatVersion == 2 && summary.counts.exactStrokes == 2, "seed \(seed): \(summary)")
        #expect(summary.counts.strokes == f.strokes.count && summary.counts.points == f.strokes.reduce(0) { $0 + $1.points.count })

        let db = try openExport(file)
        defer { try? db.close() }
        #expect(try count(db, "PRAGMA user_version") == 2)
        #expect(try db.query("SELECT value FROM meta WHERE key = 'format_version'").first?.first == .text("2"))
        #expect(try db.query("PRAGMA table_info(strokes)").map { $0[1].string ?? "" }.last == "exact")
        let rows = try db.query("SELECT element_id, point_count, points, radii, exact FROM strokes WHERE page_id = ?1 ORDER BY z",
                                [.text(f.page.description)])
        try #require(rows.count == f.strokes.count, "seed \(seed)")
        for (row, (id, source)) in zip(rows, f.strokes) {
            #expect(row[0].string == id.description, "seed \(seed)")
            let points = row[2].bytes ?? [], radii = row[3].bytes ?? []
            // [EXP-28] the BLOB exists exactly for the strokes with an inexact value.
            let needsExact = id == f.long || id == f.far
            #expect(needsExact == !source.allSatisfy(specFloatsAreExact), "seed \(seed) stroke \(id)")
            if needsExact {
                // [EXP-27] byte for byte, from an encoder written from the spec.
                #expect(row[4].bytes == specExact(source), "seed \(seed) stroke \(id)")
            } else {
                #expect(row[4] == .null, "seed \(seed) stroke \(id)")
            }
            // [EXP-21] [EXP-29] `points` and `radii` keep the nearest floats: a float-only
            // reader sees an approximation, here within 0.5 pt and 4 ms.
            for (i, p) in source.enumerated() {
                let want = specFloats(p)
                let got = [le32(points, 16 * i), le32(points, 16 * i + 4), le32(points, 16 * i + 8), le32(points, 16 * i + 12),
                           le32(radii, 4 * i)]
                #expect(got.map(\.bitPattern) == want.map(\.bitPattern), "seed \(seed) stroke \(id) point \(i)")
                #expect(abs(Double(got[0]) - Double(p.x) / 10) <= 0.5 && abs(Double(got[1]) - Double(p.y) / 10) <= 0.5)
                #expect(abs(Double(got[3]) - Double(p.t)) <= 4)
            }
            // [EXP-29] a reader that knows the column gets the store's integers back.
            let decoded = try PointBlob.decode(points: points, radii: radii, exact: row[4].bytes, pointCount: Int(row[1].int64 ?? -1))
            #expect(decoded == source, "seed \(seed) stroke \(id)")
        }
        // The floats alone would have lost the values: the 20-hour stroke's last time reads
        // 72,000,000 ms, the far point 9,000,000 pt.
        let long = try #require(rows.first { $0[0].string == f.long.description })
        #expect(le32(long[2].bytes ?? [], 16 * 4 + 12) == 72_000_000)
        let far = try #require(rows.first { $0[0].string == f.far.description })
        #expect(le32(far[2].bytes ?? [], 16) == 9_000_000)

        // The CLI: the summary line on stdout as always, the note on stderr (section 6).
        let cli = try await runCLI(Subprocess.product("lnote"), ["export", f.folder, "--sqlite", dir.sub("cli.sqlite")])
        #expect(cli.code == 0, "\(cli.errText)")
        #expect(cli.outText == "exported 1 documents, 1 pages, \(f.strokes.count) strokes (\(summary.counts.points) points), 0 images, 0 assets, "
                + "\(try ExportFiles.size(dir.sub("cli.sqlite"))) bytes to \(dir.sub("cli.sqlite"))\n", "\(cli.outText)")
        #expect(cli.errText == "lnote: note: 2 strokes hold values 32-bit floats cannot (beyond 2^20 pt or 2^24 ms): their exact samples "
                + "are in strokes.exact, and the file is format 2 (readers of format 1 refuse it)\n", "\(cli.errText)")
    }

    /// [EXP-27] the test vector of Protocol/sqlite-export.md: x 9,000,000.3 pt, y −4.5 pt,
    /// pressure 0.5, t 72,000,001 ms, radius 1.2 pt.
    @Test func exactTestVector() throws {
        let e = PointBlob.encode([StrokePoint(x: 90_000_003, y: -45, pressure: 500, radius: 12, t: 72_000_001)])
        #expect(e.exact == [0x83, 0x4a, 0x5d, 0x05, 0xd3, 0xff, 0xff, 0xff, 0xf4, 0x01, 0x00, 0x00,
                            0x01, 0xa2, 0x4a, 0x04, 0x0c, 0x00, 0x00, 0x00])
        #expect(e.points == [0x40, 0x54, 0x09, 0x4b, 0x00, 0x00, 0x90, 0xc0, 0x00, 0x00, 0x00, 0x3f, 0x40, 0x54, 0x89, 0x4c])
        #expect(e.radii == [0x9a, 0x99, 0x99, 0x3f])
    }

    /// [EXP-3] [EXP-28] An ordinary notebook's export is format 1 exactly as before the
    /// `exact` column existed: user_version and format_version 1, no `exact` column, the
    /// `strokes` table created by the format-1 DDL.
    @Test func ordinaryExportsStayFormat1() async throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let seed = UInt64.random(in: 0...UInt64.max)
        let f = try await Fixture.make(in: dir, seed: seed)
        let file = dir.sub("out.sqlite")
        let summary = try await SQLiteExport.export(folder: f.folder, to: file, options: fixedOptions(includeDeleted: true))
        #expect(summary.formatVersion == 1 && summary.counts.exactStrokes == 0, "seed \(seed)")
        let db = try openExport(file)
        defer { try? db.close() }
        #expect(try count(db, "PRAGMA user_version") == 1)
        #expect(try db.query("SELECT value FROM meta WHERE key = 'format_version'").first?.first == .text("1"))
        #expect(try db.query("PRAGMA table_info(strokes)").map { $0[1].string ?? "" } == ExportSchema.strokeColumns(version: 1))
        #expect(!ExportSchema.strokeColumns(version: 1).contains("exact"))
        let sql = try db.query("SELECT sql FROM sqlite_master WHERE name = 'strokes'").first?.first?.string ?? ""
        #expect(ExportSchema.ddl.contains(sql) && !sql.isEmpty, "\(sql)")
    }

    // `||` makes TEXT in SQLite: the tamperings that splice bytes cast back to BLOB.
    enum ExactTamper: String, CaseIterable, Sendable {
        case partialRecord, missingRecord, extraRecord, pressureTooHigh, disagreesWithPoints, disagreesWithRadii,
             notABlob, dropped, pointCountTooHigh, onAnExactStroke
    }

    /// [EXP-24] [EXP-29] [EXP-43] The verifier reads `exact` as any reader must: a BLOB whose
    /// length is not a multiple of 20, whose record count is not point_count, with a pressure
    /// above 1000, or that `points`/`radii` do not approximate, is rejected with the row
    /// (page_id, element_id) and the byte offset; NULLing it, or adding one to a stroke that
    /// needs none, fails the comparison. Nothing is left at the target.
    @Test func malformedExactBlobsAreRejected() async throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let seed = UInt64.random(in: 0...UInt64.max)
        let f = try await FarFixture.make(in: dir, seed: seed)
        let n = FarFixture.longPoints.count
        let row = "strokes row (page_id \(f.page), element_id \(f.long))"
        var accepted = 0
        for tamper in ExactTamper.allCases {
            let on = "WHERE page_id = '\(f.page)' AND element_id = '\(tamper == .onAnExactStroke ? f.round : f.long)'"
            // (what the SQL does, the error's offset, words the message must hold)
            let (sql, offset, words): (String, Int?, [String]) = switch tamper {
            case .partialRecord: ("UPDATE strokes SET exact = substr(exact, 1, length(exact) - 3) \(on)", 20 * (n - 1),
                                  [row, "exact BLOB of 97 bytes is not a multiple of 20"])
            case .missingRecord: ("UPDATE strokes SET exact = substr(exact, 1, length(exact) - 20) \(on)", 20 * (n - 1),
                                  [row, "exact BLOB holds 4 records, point_count is 5"])
            case .extraRecord: ("UPDATE strokes SET exact = CAST(exact || substr(exact, 1, 20) AS BLOB) \(on)", 20 * n,
                                [row, "exact BLOB holds 6 records, point_count is 5"])
            // Record 1's pressure (bytes 28 … 31) set to 1001.
            case .pressureTooHigh: ("UPDATE strokes SET exact = CAST(substr(exact, 1, 28) || x'e9030000' || substr(exact, 33) AS BLOB) \(on)", 28,
                                    [row, "exact record 1 has pressure 1001"])
            // Record 3's x (bytes 60 … 63) becomes 41 tenths: its float is no longer points' x.
            case .disagreesWithPoints: ("UPDATE strokes SET exact = CAST(substr(exact, 1, 60) || x'29000000' || substr(exact, 65) AS BLOB) \(on)", 48,
                                        [row, "points record 3 is not the nearest binary32 of exact record 3"])
            // Record 2's radius (bytes 56 … 59) becomes 11 tenths.
            case .disagreesWithRadii: ("UPDATE strokes SET exact = CAST(substr(exact, 1, 56) || x'0b000000' || substr(exact, 61) AS BLOB) \(on)", 8,
                                       [row, "radii record 2 is not the nearest binary32 of exact record 2"])
            case .notABlob: ("UPDATE strokes SET exact = 'text' \(on)", nil, [row, "exact must be a BLOB or NULL"])
            case .dropped: ("UPDATE strokes SET exact = NULL \(on)", nil, ["stroke \(f.long) on page \(f.page) differs"])
            case .pointCountTooHigh: ("UPDATE strokes SET point_count = point_count + 1 \(on)", 16 * n,
                                      [row, "points BLOB holds 5 samples, point_count is 6"])
            // A consistent `exact` BLOB where none is needed ([EXP-28]).
            case .onAnExactStroke: ("UPDATE strokes SET exact = x'\(hex(specExact([StrokePoint(x: 90_000_000, y: 0), StrokePoint(x: -90_000_000, y: 10, t: 5)])))' \(on)",
                                    nil, ["stroke \(f.round) on page \(f.page) differs", "exact 40 vs NULL bytes"])
            }
            var options = fixedOptions()
            options.beforeVerification = { db in
                try db.execute(sql)
                #expect(db.changes == 1, "tamper \(sql) changed \(db.changes) rows")
            }
            let file = dir.sub("bad.sqlite")
            do {
                try await SQLiteExport.export(folder: f.folder, to: file, options: options)
                accepted += 1
                Issue.record("\(tamper) was accepted (seed \(seed))")
            } catch let e as LnoteError {
                #expect(e.code == .corrupt, "\(tamper): \(e)")
                #expect(e.message.hasPrefix("export verification failed: "), "\(tamper): \(e)")
                for w in words { #expect(e.message.contains(w), "\(tamper): \(e) should say \(w)") }
                #expect(e.offset == offset, "\(tamper): \(e)")
                #expect(e.path == file, "\(tamper): \(e)")
            }
            #expect(dir.entries() == ["far"], "\(tamper)")
        }
        ReliabilityReport.record(family: "abuse", detail: "malformed strokes.exact BLOBs in an export (ExportExactTests)",
                                 cases: ExactTamper.allCases.count, corrupted: accepted)
    }

    /// [EXP-27] [EXP-29] the decoder alone: lengths, counts and pressures with their offsets.
    @Test func exactDecoderNamesOffsets() throws {
        let pts = [StrokePoint(x: 90_000_003, y: 1, t: 0), StrokePoint(x: 2, y: 3, t: 20_000_001)]
        let e = PointBlob.encode(pts)
        let exact = try #require(e.exact)
        #expect(try PointBlob.decodeExact(exact) == pts)
        for cut in [1, 19, 21, 39] {
            let error = #expect(throws: LnoteError(.corrupt)) { try PointBlob.decodeExact(Array(exact.prefix(cut))) }
            #expect(error?.offset == cut - cut % 20, "cut \(cut)")
        }
        var high = exact
        high[28] = 0xe9; high[29] = 0x03
        let highError = #expect(throws: LnoteError(.corrupt)) { try PointBlob.decodeExact(high) }
        #expect(highError?.offset == 28)
        let short = #expect(throws: LnoteError(.corrupt)) {
            try PointBlob.decode(points: e.points, radii: e.radii, exact: Array(exact.prefix(20)), pointCount: 2)
        }
        #expect(short?.offset == 20)
        // Without `exact`, the same floats decode to the nearest grid values: not the stored ones.
        #expect(try PointBlob.decode(points: e.points, radii: e.radii, exact: nil, pointCount: 2) != pts)
    }

    /// [EXP-28] [EXP-29] Property, seeded: strokes mixing values binary32 holds and values it
    /// does not (coordinates up to ±10,000,000 pt, times up to 24 h) get an `exact` BLOB if and
    /// only if one of their values is inexact, and decode to the same quantized integers;
    /// a notebook of such strokes exports (verified) and reads back the same integers.
    @Test func exactAndFloatValuesRoundTrip() async throws {
        let seed = UInt64.random(in: 0...UInt64.max)
        var rng = SplitMix64(seed: seed)
        func coordinate() -> Int32 {
            let limit = [1_000, 10_485_759, 100_000_000][rng.int(in: 0...2)]
            return Int32(rng.int(in: -limit...limit))
        }
        func stroke() -> [StrokePoint] {
            var t: UInt32 = 0
            return (0..<rng.int(in: 1...40)).map { i in
                if i > 0 {
                    t += rng.int(in: 0...9) == 0 ? UInt32(rng.int(in: 0...(86_400_000 - Int(t)) / 2)) : UInt32(rng.int(in: 0...20))
                }
                return StrokePoint(x: coordinate(), y: coordinate(), pressure: UInt16(rng.int(in: 0...1000)),
                                   radius: Int32(rng.int(in: 0...100_000)), t: t)
            }
        }
        var withExact = 0
        for _ in 0..<400 {
            let pts = stroke()
            let e = PointBlob.encode(pts)
            let inexact = !pts.allSatisfy(specFloatsAreExact)
            #expect((e.exact != nil) == inexact, "seed \(seed)")
            #expect(e.exact == nil || e.exact == specExact(pts), "seed \(seed)")
            #expect(e.points == pts.flatMap { p in specFloats(p)[0..<4].flatMap { leBytes($0.bitPattern) } }, "seed \(seed)")
            #expect(try PointBlob.decode(points: e.points, radii: e.radii, exact: e.exact, pointCount: pts.count) == pts, "seed \(seed)")
            if inexact { withExact += 1 }
        }
        #expect(withExact > 0 && withExact < 400, "seed \(seed): \(withExact) of 400 strokes inexact")

        // Through a real export.
        let dir = try TempDir()
        defer { dir.remove() }
        let nb = try await Notebook.open(at: dir.sub("nb"), create: true)
        let d = try await nb.createDocument(title: "mixed")
        var pages: [PageID] = [await d.pageList[0].id]
        pages.append(try await d.addPage(.last))
        var want: [PageID: [ElementID: [StrokePoint]]] = [:]
        for _ in 0..<24 {
            let p = pages[rng.int(in: 0...1)], pts = stroke()
            want[p, default: [:]][try await d.addStroke(Stroke(points: pts), to: p)] = pts
        }
        try await nb.close()
        let file = dir.sub("mixed.sqlite")
        let summary = try await SQLiteExport.export(folder: dir.sub("nb"), to: file)
        let expectedExact = want.values.flatMap(\.values).filter { !$0.allSatisfy(specFloatsAreExact) }.count
        #expect(summary.counts.exactStrokes == expectedExact, "seed \(seed)")
        #expect(summary.formatVersion == (expectedExact > 0 ? 2 : 1), "seed \(seed)")
        let db = try openExport(file)
        defer { try? db.close() }
        let exactColumn = summary.formatVersion == 2 ? "exact" : "NULL"
        var read = 0
        for r in try db.query("SELECT page_id, element_id, points, radii, \(exactColumn), point_count FROM strokes") {
            let page = try #require(PageID(r[0].string ?? ""), "seed \(seed)")
            let id = try #require(ElementID(parsing: r[1].string ?? ""), "seed \(seed)")
            let got = try PointBlob.decode(points: r[2].bytes ?? [], radii: r[3].bytes ?? [], exact: r[4].bytes, pointCount: Int(r[5].int64 ?? -1))
            #expect(got == want[page]?[id], "seed \(seed) stroke \(id)")
            read += 1
        }
        #expect(read == 24, "seed \(seed)")
    }
}

func leBytes(_ v: UInt32) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: v >> (8 * UInt32($0))) } }

func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }
