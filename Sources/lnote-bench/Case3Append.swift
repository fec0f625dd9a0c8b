import Foundation
import LnoteModel
import LnoteReplication
import LnoteStore

extension Bench {
    /// 3. One 160-point stroke added to a 2,000-stroke page: the journal append (one frame,
    /// one `fdatasync`) against rewriting the page's snapshot atomically.
    func caseAppend() async throws {
        let pageStrokes = options.size(2000, quick: 500)
        let dir = try ws.directory("case3")
        var storeOptions = StoreOptions()
        storeOptions.autosave = false
        let notebook = try await Notebook.open(at: dir + "/notebook", create: true, options: storeOptions)
        let doc = try await notebook.createDocument(title: "case 3")
        let page = await doc.pageList[0].id
        try await doc.addStrokes(source.handwriting(pageStrokes, stream: 3), to: page)
        try await doc.flush()
        let logPath = PackagePaths(folder: notebook.path, id: doc.id).log(page)

        let added = source.generated(1 + options.runs + 1, points: 160, stream: 31)
        var next = 0
        // Frame sizes are read from the log's growth, outside the timed body.
        var frameBytes: [Int] = []
        var before = try Files.size(logPath)
        func noteGrowth() throws {
            let now = try Files.size(logPath)
            if now != before { frameBytes.append(now - before) }
            before = now
        }
        let append = Variant(name: "journal append", setup: { try noteGrowth() }, body: {
            try await doc.addStroke(added[next], to: page)
            next += 1
        })

        var state = try await doc.pageState(page)
        var snapshotBytes: [UInt8] = []
        let rewritePath = dir + "/rewrite.content"
        let rewrite = Variant(name: "snapshot rewrite", setup: {
            state = try await doc.pageState(page)
        }, body: {
            snapshotBytes = PageSnapshot.encode(state, coveredLogOffset: 40, logIncarnation: 1)
            try Files.durableReplace(rewritePath, with: snapshotBytes)
        })
        // The I/O alone, from bytes already encoded: the rewrite's floor.
        let rewriteIO = Variant(name: "snapshot rewrite, I/O only", body: {
            try Files.durableReplace(rewritePath, with: snapshotBytes)
        })
        snapshotBytes = PageSnapshot.encode(state, coveredLogOffset: 40, logIncarnation: 1)
        let t = try await measure([append, rewrite, rewriteIO], runs: options.runs)
        try noteGrowth()
        try await notebook.close()

        let frame = Timing.median(frameBytes.map(Double.init))
        let what = "one 160-pt stroke on a \(formatCount(pageStrokes))-stroke page"
        results.rows.append(Row(3, "bytes written, \(what)", measured: frame, unit: .bytes,
                                baselineName: "snapshot rewrite", baseline: Double(snapshotBytes.count),
                                target: .ratioAtMost(0.01),
                                note: "target: ≥ 100 × fewer bytes; the frame size is the log's growth per append"))
        results.rows.append(Row(3, "durable time, \(what)", measured: t[0].median, unit: .seconds,
                                baselineName: "snapshot rewrite (encode + temp, fsync, rename, fsync dir)", baseline: t[1].median,
                                target: .ratioAtMost(0.1),
                                note: "target: ≥ 10 × less time; the append is `Document.addStroke` (encode, write, fdatasync)",
                                measuredRuns: t[0].runs, baselineRuns: t[1].runs))
        results.rows.append(Row(3, "durable time, \(what)", measured: t[0].median, unit: .seconds,
                                baselineName: "snapshot rewrite, I/O only", baseline: t[2].median, target: .report,
                                note: "the rewrite without encoding (bytes already encoded): its floor on this disk",
                                measuredRuns: t[0].runs, baselineRuns: t[2].runs))
    }
}
