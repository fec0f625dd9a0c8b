import Foundation
import LnoteModel
import LnoteReplication
import LnoteSQLite
import LnoteStore

extension Bench {
    /// 2. The article's SQLite case: 100 strokes × 3,400 points made durable.
    ///
    /// lnote: a document with autosave off; each run adds the strokes to a fresh, already
    /// loaded page with `addStrokes` (one frame per stroke, one write, one `fdatasync`).
    /// SQLite: a fresh database per run; one transaction inserting one BLOB per stroke (16
    /// B/point, built inside the timed run as lnote's encoding is), `synchronous=FULL`, in
    /// WAL mode and in rollback-journal (DELETE) mode. Also timed: the same strokes written
    /// as one page snapshot (encode + durable replace).
    func caseSQLite() async throws {
        let strokeCount = 100, pointsPerStroke = 3400
        let strokes = source.generated(strokeCount, points: pointsPerStroke, stream: 2)
        let dir = try ws.directory("case2")

        var storeOptions = StoreOptions()
        storeOptions.autosave = false
        storeOptions.compactAfterBytes = .max
        storeOptions.compactAfterFrames = .max
        let notebook = try await Notebook.open(at: dir + "/notebook", create: true, options: storeOptions)
        let doc = try await notebook.createDocument(title: "case 2", firstPage: nil)
        var page: PageID? = nil
        var logBytes: [Int] = []

        let lnote = Variant(name: "lnote journal append", setup: {
            if let page { try await doc.closePage(page) }
            let p = try await doc.addPage()
            _ = try await doc.elements(p)  // load it: the log exists and is open
            page = p
        }, body: {
            try await doc.addStrokes(strokes, to: page!)
        })

        func sqlite(_ mode: SQLiteDatabase.Options.JournalMode) -> Variant {
            var db: SQLiteDatabase? = nil
            var n = 0
            let path = dir + "/strokes-\(mode.rawValue)"
            return Variant(name: "SQLite \(mode.rawValue)", setup: {
                try db?.close()
                for suffix in ["", "-wal", "-shm", "-journal"] { try? FileManager.default.removeItem(atPath: "\(path)-\(n)\(suffix)") }
                n += 1
                let d = try SQLiteDatabase(path: "\(path)-\(n)", options: .init(journalMode: mode, synchronous: .full))
                try d.execute("CREATE TABLE strokes (id INTEGER PRIMARY KEY, page BLOB NOT NULL, z INTEGER NOT NULL, points BLOB NOT NULL)")
                db = d
            }, body: {
                let d = db!
                let pageID = PageID().uuid.bytes
                try d.transaction {
                    let insert = try d.prepare("INSERT INTO strokes (page, z, points) VALUES (?1, ?2, ?3)")
                    defer { insert.finalize() }
                    for (z, s) in strokes.enumerated() {
                        try insert.run([.blob(pageID), .integer(Int64(z)), .blob(Naive.encode(s.points))])
                    }
                }
            })
        }

        // The same strokes as one page snapshot: encode the page, durable replace.
        var replica = PageReplica(page: PageID())
        for (i, s) in strokes.enumerated() { _ = try replica.add(.stroke(s), by: ReplicaID(0xB0), wallTime: Int64(i)) }
        let state = replica.state
        var snapshotSize = 0
        let snapshot = Variant(name: "lnote one snapshot", body: {
            let bytes = PageSnapshot.encode(state, coveredLogOffset: 40, logIncarnation: 1)
            try Files.durableReplace(dir + "/page.content", with: bytes)
            snapshotSize = bytes.count
        })

        // What the append costs without any I/O: building the operations and their frames.
        let encodeOnly = Variant(name: "lnote encoding only", body: {
            var r = PageReplica(page: PageID())
            var bytes = 0
            for (i, s) in strokes.enumerated() {
                bytes += OperationCodec.encode(try r.add(.stroke(s), by: ReplicaID(0xB0), wallTime: Int64(i))).count
            }
            precondition(bytes > 0)
        })

        let t = try await measure([lnote, sqlite(.wal), sqlite(.delete), snapshot, encodeOnly], runs: options.runs)
        if let page { logBytes.append(try Files.size(PackagePaths(folder: notebook.path, id: doc.id).log(page))) }
        try await notebook.close()

        let what = "\(strokeCount) × \(formatCount(pointsPerStroke)) pts"
        let blobBytes = strokeCount * pointsPerStroke * Naive.bytesPerPoint
        results.rows.append(Row(2, "journal append, \(what)", measured: t[0].median, unit: .seconds,
                                baselineName: "SQLite WAL, synchronous=FULL", baseline: t[1].median, target: .ratioAtMost(0.25),
                                note: "lnote appends \(formatBytes(Double(logBytes.first ?? 0))) (page log incl. 40 B header) with one fdatasync; "
                                    + "SQLite writes \(formatBytes(Double(blobBytes))) of BLOBs per transaction",
                                measuredRuns: t[0].runs, baselineRuns: t[1].runs))
        results.rows.append(Row(2, "journal append, \(what)", measured: t[0].median, unit: .seconds,
                                baselineName: "SQLite rollback journal, FULL", baseline: t[2].median, target: .ratioAtMost(0.25),
                                measuredRuns: t[0].runs, baselineRuns: t[2].runs))
        results.rows.append(Row(2, "CPU on one core: operations + frames, \(what)", measured: t[4].median, unit: .seconds,
                                baselineName: "journal append", baseline: t[0].median, target: .report,
                                note: "PageReplica.add + OperationCodec.encode of the 100 strokes, no I/O, serially on one core: "
                                    + "the work the append spreads over the cores (`addStrokes` encodes a batch of this size in "
                                    + "parallel), so it can exceed the append's time",
                                measuredRuns: t[4].runs, baselineRuns: t[0].runs))
        results.rows.append(Row(2, "one snapshot, \(what)", measured: t[3].median, unit: .seconds,
                                baselineName: "SQLite WAL, synchronous=FULL", baseline: t[1].median, target: .report,
                                note: "encode + temp/fsync/rename/fsync dir of a \(formatBytes(Double(snapshotSize))) snapshot",
                                measuredRuns: t[3].runs, baselineRuns: t[1].runs))
    }
}
