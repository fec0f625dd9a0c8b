import Foundation
import LnoteModel
import LnoteReplication
import LnoteStore

/// Case 13's page on disk (see `Bench.timeTravelFixture`).
struct TimeTravelFixture {
    var notebookPath: String
    var document: DocumentID
    var page: PageID
    /// The history, in order.
    var ops: [Op]
    /// How many of its last operations are the log's tail past the snapshot.
    var tail: Int
    /// The totals of the past snapshots kept ([PKG-98]), ascending.
    var pastTotals: [UInt64]
    /// The greatest of them at or below the middle of the history (0: none).
    var start: UInt64
    /// A pristine copy of the document's package, and the package itself.
    var pristine: String
    var live: String

    func restore() throws { try Files.restoreTree(pristine, to: live) }
}

extension Bench {
    /// 13. Time travel (issue 16): the state of a 2,000-stroke page as of the middle of a
    /// 10,000-operation history, against opening the same page as it is now.
    ///
    /// The history, one author, pen ink: 2,000 strokes added, then 8,000 operations cycling
    /// add, move, erase, partial erase of random live strokes, so the page holds about 2,000
    /// strokes throughout. Compacted where the default threshold compacts (every 4,096
    /// frames), so past snapshots ([PKG-98]) are kept there; on disk as case 4 builds its
    /// page: a snapshot covering all but the last 500 operations, those 500 as the log's tail.
    /// - "as of the middle": `Document.pageState(_:at: .operation(the 5,001st),
    ///   deferringPoints: true)` on an open document whose page is loaded (someone looking at
    ///   it asks for the past): the log's frame headers read, the latest past snapshot the
    ///   moment covers decoded, the operations above it decoded and applied, points decoded
    ///   on first use; baseline: case 4's open of this page (snapshot read and checked, tail
    ///   replayed, element list; points decoded on first use).
    /// - the same with every point decoded, against the open followed by `elements` (every
    ///   point decoded).
    func caseTimeTravel() async throws {
        let f = try await timeTravelFixture()
        let total = f.ops.count, tail = f.tail, start = f.start, pastTotals = f.pastTotals
        let doc = f.document, page = f.page, middle = f.ops[total / 2]
        let pristine = f.pristine, live0 = f.live
        let reopened = try await Notebook.open(at: f.notebookPath, options: OpenPageFixture.storeOptions)
        var open: Document? = nil
        var pastCount = 0, nowCount = 0, pastPoints = 0, nowPoints = 0
        func reopen() async throws {
            if let open { try await open.close() }
            try Files.restoreTree(pristine, to: live0)
            open = try await reopened.openDocument(doc)
        }
        let openNow = Variant(name: "open the page now", setup: { try await reopen() }, body: {
            nowCount = try await open!.elementIDs(page).count
        })
        let openNowWhole = Variant(name: "open the page now, every point decoded", setup: { try await reopen() }, body: {
            nowPoints = try await open!.elements(page).reduce(0) { $0 + $1.content.pointCount }
        })
        var viewing: Document? = nil
        func view() async throws {
            if viewing == nil {
                viewing = try await reopened.openDocument(doc)
                _ = try await viewing!.elementIDs(page)
            }
        }
        let asOf = Variant(name: "the page as of the middle", setup: { try await view() }, body: {
            pastCount = try await viewing!.pageState(page, at: .operation(middle.id), deferringPoints: true).elements.count
        })
        let asOfWhole = Variant(name: "the page as of the middle, every point decoded", setup: { try await view() }, body: {
            pastPoints = try await viewing!.pageState(page, at: .operation(middle.id)).elements.reduce(0) { $0 + $1.content.pointCount }
        })
        let t = try await measure([asOf, openNow, asOfWhole, openNowWhole], runs: options.runs)
        if let open { try await open.close() }
        if let viewing { try await viewing.close() }
        try await reopened.close()

        let kept = pastTotals.map { formatCount(Int($0)) }.joined(separator: ", ")
        let above = formatCount(total / 2 + 1 - Int(start))
        results.rows.append(Row(13, "a \(formatCount(pastCount))-stroke page as of the middle of a \(formatCount(total))-operation history",
                                measured: t[0].median, unit: .seconds,
                                baselineName: "opening the page now (\(formatCount(nowCount)) strokes)", baseline: t[1].median,
                                target: .ratioAtMost(2),
                                note: "pen ink; Document.pageState(_:at: .operation, deferringPoints: true) on a loaded page: the "
                                    + "log's headers read, started from the past snapshot of \(formatCount(Int(start))) operations "
                                    + "(kept: \(kept); [PKG-98]), the \(above) operations above it decoded and applied, points "
                                    + "decoded on first use as the open reads them; baseline: case 4's open of the same page "
                                    + "(snapshot + \(tail)-frame tail, points decoded on first use)",
                                measuredRuns: t[0].runs, baselineRuns: t[1].runs))
        results.rows.append(Row(13, "the same, every point decoded (\(formatCount(pastPoints)) points)",
                                measured: t[2].median, unit: .seconds,
                                baselineName: "opening the page now, every point decoded (\(formatCount(nowPoints)) points)",
                                baseline: t[3].median, target: .ratioAtMost(2),
                                note: "Document.pageState(_:at: .operation): the past snapshot and the operations above it "
                                    + "with every point; baseline: the open followed by Document.elements (every point)",
                                measuredRuns: t[2].runs, baselineRuns: t[3].runs))
    }

    /// Case 13's page, built once: a 2,000-stroke pen page whose 10,000-operation history
    /// erased about 2,000 strokes whole and 2,000 in part (so its snapshot keeps about 2,000
    /// erased records, [SNAP-40]), a 500-frame log tail, and a pristine copy of its package.
    func timeTravelFixture() async throws -> TimeTravelFixture {
        let total = options.size(10_000, quick: 2_000)
        let firstAdds = total / 5
        let dir = try ws.directory("case13")
        let notebook = try await Notebook.open(at: dir + "/notebook", create: true, options: OpenPageFixture.storeOptions)
        let doc = try await notebook.createDocument(title: "time travel")
        let page = await doc.pageList[0].id
        let strokes = source.strokes(.pen, total, stream: 13)
        // The history, made by a replica in memory, received by the document in batches.
        var rng = SplitMix64(seed: options.seed ^ 13)
        var author = PageReplica(page: page)
        let who = ReplicaID(0xB13)
        var ops: [Op] = []
        var live: [ElementID] = []
        var pointCounts: [ElementID: Int] = [:]
        for i in 0..<total {
            let wall = 1_700_000_000_000 + Int64(i) * 1_000
            let kind = i < firstAdds ? 0 : i % 4
            let op: Op
            if kind == 0 || live.isEmpty {
                op = try author.add(.stroke(strokes[i]), by: who, wallTime: wall)
                live.append(op.id)
                pointCounts[op.id] = strokes[i].points.count
            } else {
                let k = Int(rng.next() % UInt64(live.count))
                switch kind {
                case 1: op = try author.move([live[k]], dx: 30, dy: -20, by: who, wallTime: wall)
                case 2: op = try author.make(.erase([live.remove(at: k)]), by: who, wallTime: wall)
                default:
                    let n = UInt32(pointCounts[live[k]]!)
                    op = try author.make(.eraseRange(live[k], [PointRange(0, max(1, n / 2))]), by: who, wallTime: wall)
                }
            }
            ops.append(op)
        }
        // Received 100 at a time, compacted as the default threshold would (every
        // `compactAfterFrames` frames: at 4,100 and 8,200), which keeps past snapshots there
        // ([PKG-98]); then compacted at all but the last 500, as case 4's page is stored.
        let tail = min(500, total / 4)
        let every = StoreOptions().compactAfterFrames
        var sinceCompaction = 0
        for batch in stride(from: 0, to: total - tail, by: 100) {
            let end = min(batch + 100, total - tail)
            _ = try await doc.receive(Array(ops[batch..<end]), page: page)
            sinceCompaction += end - batch
            if sinceCompaction >= every {
                try await doc.compact(page: page)
                sinceCompaction = 0
            }
        }
        try await doc.compact(page: page)
        _ = try await doc.receive(Array(ops[(total - tail)...]), page: page)
        try await doc.flush()
        let pastTotals = (try FileManager.default.contentsOfDirectory(atPath: PackagePaths(folder: notebook.path, id: doc.id).pages))
            .compactMap { PackagePaths.pastName($0) }.filter { $0.page == page }.map(\.total).sorted()
        let start = pastTotals.last { $0 <= UInt64(total / 2 + 1) } ?? 0
        let pristine = dir + "/pristine"
        let live0 = PackagePaths(folder: notebook.path, id: doc.id).root
        try FileManager.default.copyItem(atPath: live0, toPath: pristine)
        try await notebook.close()
        try Files.restoreTree(pristine, to: live0)
        return TimeTravelFixture(notebookPath: dir + "/notebook", document: doc.id, page: page, ops: ops, tail: tail,
                                 pastTotals: pastTotals, start: start, pristine: pristine, live: live0)
    }
}
