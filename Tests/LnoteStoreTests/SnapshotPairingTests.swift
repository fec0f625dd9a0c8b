import Foundation
import Testing
import LnoteModel
import LnoteReplication
@testable import LnoteStore

/// Where the frames of a log end (the header's end first), read with the scanner.
func frameEnds(_ log: [UInt8]) -> [Int] {
    [LogHeader.size] + LogScanner.scanFile(log).frames.map { Int($0.end) }
}

/// A snapshot and its log: which log offset a snapshot covers, for which incarnation, and
/// what a reader does when that does not describe the log on disk.
@Suite("Snapshots paired with their logs")
struct SnapshotPairingTests {
    /// A closed notebook with one document whose first page holds `n` strokes made by this
    /// folder, flushed (its snapshot covers the whole log).
    func sample(_ dir: TempDir, strokes n: Int) async throws -> (id: DocumentID, paths: PackagePaths, page: PageID,
                                                                replica: ReplicaID, states: [PageState]) {
        let nb = try await openNotebook(dir.path)
        let d = try await nb.createDocument(title: "S")
        let p = await d.pageList[0].id
        var states: [PageState] = [try await d.pageState(p)]
        for i in 0..<n {
            try await d.addStroke(stroke(3 + i, x: Int32(10 * i)), to: p)
            states.append(try await d.pageState(p))
        }
        try await d.flush()
        let replica = nb.replica
        try await nb.close()
        return (d.id, d.paths, p, replica, states)
    }

    /// [SNAP-29] [PKG-33] With the log's incarnation, a snapshot is followed by the log from
    /// its covered offset only (what lies before it is taken as already in the snapshot);
    /// with any other incarnation the whole log is replayed onto the snapshot's state.
    @Test("[SNAP-29] [PKG-33] the covered offset counts only for the incarnation the snapshot names")
    func offsetCountsOnlyForItsIncarnation() async throws {
        let dir = try TempDir("pair")
        defer { dir.remove() }
        let (id, paths, p, _, states) = try await sample(dir, strokes: 3)
        // A concurrent stroke from another replica, received after the three.
        let nb = try await openNotebook(dir.path)
        let d = try await nb.openDocument(id)
        var other = PageReplica(page: p)
        let b = try other.add(.stroke(stroke(4, x: 500)), by: ReplicaID(0xB2), wallTime: 1_700_000_009_000)
        _ = try await d.receive([b], page: p)
        try await d.flush()
        let all = try await d.pageState(p)
        try await nb.close()
        #expect(all.elements.count == 4)
        let log = fileBytes(paths.log(p))!
        let incarnation = try LogHeader.decode(log).incarnation
        let without = states[3]  // the three strokes, not the other replica's
        func reopened(_ snapshot: [UInt8]) async throws -> [ElementID] {
            try writeFile(paths.content(p), snapshot)
            let nb = try await openNotebook(dir.path)
            let d = try await nb.openDocument(id)
            let ids = try await d.elements(p).map(\.id)
            #expect(await d.recoveryReports.isEmpty)
            try await nb.close()
            return ids
        }
        // Covering the whole log of this incarnation: nothing is replayed, so the stroke the
        // snapshot lacks stays out (the snapshot is trusted for what lies before its offset).
        #expect(try await reopened(PageSnapshot.encode(without, coveredLogOffset: UInt64(log.count), logIncarnation: incarnation))
                == without.elements.map(\.id))
        // Covering the header only: everything is replayed onto it.
        #expect(try await reopened(PageSnapshot.encode(without, coveredLogOffset: 40, logIncarnation: incarnation))
                == all.elements.map(\.id))
        // Another incarnation: the offset means nothing, the whole log is replayed onto it.
        #expect(try await reopened(PageSnapshot.encode(without, coveredLogOffset: UInt64(log.count), logIncarnation: incarnation ^ 1))
                == all.elements.map(\.id))
        // A new incarnation is chosen at random for each new log.
        #expect(Set((0..<50).map { _ in LogHeader(kind: .page, owner: UUID()).incarnation }).count == 50)
    }

    /// [PKG-47] [PKG-70] A page log cut by a copy tool (at a frame boundary or inside a frame)
    /// behind a snapshot that covers more of it: verify reports the pair; opening sets the
    /// snapshot aside (kept as `.corrupt-1`), rebuilds the page from the log, and reports
    /// which operations only the snapshot held (this replica's own included); the next save
    /// writes a snapshot that pairs with the log again.
    @Test("[PKG-47] [PKG-70] a snapshot covering past the end of its log is set aside; the page is what the log gives",
          arguments: [false, true])
    func snapshotPastTheEndOfItsLog(cutInsideAFrame: Bool) async throws {
        let dir = try TempDir("pair")
        defer { dir.remove() }
        let (id, paths, p, me, states) = try await sample(dir, strokes: 5)
        let log = fileBytes(paths.log(p))!
        let ends = frameEnds(log)
        #expect(ends.count == 6 && ends.last == log.count)
        let content = fileBytes(paths.content(p))!
        #expect(try PageSnapshot.decode(content).coveredLogOffset == UInt64(log.count))
        // Keep three frames (and, in the second case, half of the fourth).
        let cut = cutInsideAFrame ? (ends[3] + ends[4]) / 2 : ends[3]
        try writeFile(paths.log(p), Array(log.prefix(cut)))

        let problems = try Verify.run(folder: dir.path).problems(.unpairedSnapshot)
        #expect(problems.map(\.path) == [paths.content(p)], "\(problems)")

        let nb = try await openNotebook(dir.path)
        let d = try await nb.openDocument(id)
        #expect(try await d.pageState(p) == states[3], "the page is what the log gives")
        let report = try #require(await d.recoveryReports.first { $0.path == paths.content(p) })
        #expect(report.quarantinedCopy == paths.content(p) + ".corrupt-1")
        #expect(fileBytes(paths.content(p) + ".corrupt-1") == content)
        #expect(report.problems.count == 1 && report.problems[0].offset == 36)
        #expect(report.lostOperations.count == 1 && report.lostOperations[0].replica == me
                && report.lostOperations[0].counters == 4...5)
        #expect(report.lostOwnOperations == 2)
        #expect(report.problems[0].message.contains("2 operations only the snapshot held"), "\(report)")
        // The cut frame is a torn tail, reported by the log's own report.
        let logReport = await d.recoveryReports.first { $0.path == paths.log(p) }
        #expect((logReport?.tornTail != nil) == cutInsideAFrame)
        try await d.addStroke(stroke(2, x: 900), to: p)
        let after = try await d.pageState(p)
        try await nb.close()
        #expect(try PageSnapshot.decode(fileBytes(paths.content(p))!).coveredLogOffset == UInt64(fileBytes(paths.log(p))!.count))
        let r = try Verify.run(folder: dir.path)
        #expect(r.problems.filter { $0.kind != .quarantinedFile }.isEmpty, "\(r.problems)")
        let nb2 = try await openNotebook(dir.path)
        let d2 = try await nb2.openDocument(id)
        #expect(try await d2.pageState(p) == after)
        #expect(await d2.recoveryReports.isEmpty)
        try await nb2.close()
    }

    /// [PKG-47] The operations a cut log lost come back from a peer that has them: a folder
    /// that received another folder's strokes loses them from its log; reopened, its page
    /// lacks them (none was its own) until it receives them again.
    @Test("[PKG-47] what only the set-aside snapshot held comes back from a peer")
    func lostOperationsComeBackFromAPeer() async throws {
        let dir = try TempDir("pair")
        defer { dir.remove() }
        let a = try await openNotebook(dir.sub("a"))
        let da = try await a.createDocument(title: "P")
        let p = await da.pageList[0].id
        for i in 0..<4 { try await da.addStroke(stroke(3, x: Int32(i)), to: p) }
        let docOps = try await da.operations(notCoveredBy: VectorClock())
        let pageOps = try await da.operations(page: p, notCoveredBy: VectorClock())
        let full = try await da.pageState(p)
        let b = try await openNotebook(dir.sub("b"))
        try await b.receive(docOps, document: da.id, page: nil)
        try await b.receive(pageOps, document: da.id, page: p)
        let bPaths = PackagePaths(folder: b.path, id: da.id)
        try await b.close()
        let log = fileBytes(bPaths.log(p))!
        try writeFile(bPaths.log(p), Array(log.prefix(frameEnds(log)[2])))
        let b2 = try await openNotebook(dir.sub("b"))
        let db = try await b2.openDocument(da.id)
        #expect(try await db.elements(p).map(\.id) == pageOps.prefix(2).map(\.id))
        let report = try #require(await db.recoveryReports.first { $0.path == bPaths.content(p) })
        #expect(report.lostOwnOperations == 0 && report.lostOperations.map(\.counters) == [3...4])
        let out = try await db.receive(pageOps, page: p)
        #expect(out.appended == 2)
        #expect(try await db.pageState(p) == full)
        try await b2.close()
        try await a.close()
    }

    /// [PKG-47] The case a cut snapshot offset made dangerous: after the cut, frames were
    /// appended past the snapshot's offset, which now falls inside a valid last frame. A
    /// scan from that offset would take the frame for a torn tail and cut it; the reader
    /// checks the whole log first, keeps the frame, and sets the snapshot aside.
    @Test("[PKG-47] a snapshot offset inside a valid last frame never cuts that frame")
    func offsetInsideAValidLastFrame() async throws {
        let dir = try TempDir("pair")
        defer { dir.remove() }
        let (id, paths, p, _, states) = try await sample(dir, strokes: 4)
        let log = fileBytes(paths.log(p))!
        let ends = frameEnds(log)
        // The log loses its last two frames, then gets a big frame from another replica that
        // runs past the snapshot's offset (the end of the old log).
        var other = PageReplica(page: p)
        var points: [StrokePoint] = []
        for i in 0..<400 {
            let x = Int32((i * 7919) % 1000), y = Int32((i * 104_729) % 997)
            points.append(StrokePoint(x: x, y: y, pressure: UInt16((i * 31) % 1000), radius: Int32(i % 17), t: UInt32(i * 4)))
        }
        let scribble = Stroke(points: points)
        let big = try other.add(.stroke(scribble), by: ReplicaID(0xB2), wallTime: 1_700_000_009_000)
        var w = ByteWriter()
        OperationCodec.frame(big).encode(into: &w)
        let rebuilt = Array(log.prefix(ends[2])) + w.bytes
        #expect(ends[2] < log.count && rebuilt.count > log.count, "the old end falls inside the new frame")
        try writeFile(paths.log(p), rebuilt)
        #expect(try Verify.run(folder: dir.path).problems(.unpairedSnapshot).first?.offset == log.count)

        let nb = try await openNotebook(dir.path)
        let d = try await nb.openDocument(id)
        var expected = PageReplica(state: states[2])
        _ = try expected.receive([big])
        #expect(try await d.pageState(p) == expected.state)
        let kept = fileBytes(paths.log(p))!
        #expect(kept.count == rebuilt.count && AssetID.of(kept) == AssetID.of(rebuilt), "no valid frame was cut")
        #expect(await d.recoveryReports.contains { $0.path == paths.content(p) && $0.quarantinedCopy != nil })
        try await nb.close()
    }

    /// [SNAP-15] A page keeps every tombstone for as long as it exists: elements erased whole
    /// stay tombstones through compaction, reopening from the snapshot, reopening from the
    /// whole log, and later edits.
    @Test("[SNAP-15] tombstones survive compaction, reopening and later edits")
    func tombstonesAreKept() async throws {
        let dir = try TempDir("pair")
        defer { dir.remove() }
        let nb = try await openNotebook(dir.path, options: testOptions { $0.compactAfterFrames = 3 })
        let d = try await nb.createDocument(title: "T")
        let p = await d.pageList[0].id
        var ids: [ElementID] = []
        for i in 0..<8 { ids.append(try await d.addStroke(stroke(3, x: Int32(i)), to: p)) }
        try await d.erase([ids[1], ids[4]], on: p)
        try await d.erase([ids[6]], on: p)
        let erased = Set([ids[1], ids[4], ids[6]])
        for i in 0..<5 { try await d.addStroke(stroke(2, x: Int32(100 + i)), to: p) }
        let paths = d.paths
        try await nb.close()
        let snapshot = try PageSnapshot.decode(fileBytes(paths.content(p))!).state
        #expect(Set(snapshot.tombstones.map(\.id)) == erased)
        for fromWholeLog in [false, true] {
            if fromWholeLog { try FileManager.default.removeItem(atPath: paths.content(p)) }
            let nb = try await openNotebook(dir.path)
            let d = try await nb.openDocument(d.id)
            try await d.addStroke(stroke(2), to: p)
            try await d.compact(page: p)
            #expect(Set(try await d.pageState(p).tombstones.map(\.id)) == erased, "from the whole log: \(fromWholeLog)")
            try await nb.close()
            #expect(Set(try PageSnapshot.decode(fileBytes(paths.content(p))!).state.tombstones.map(\.id)) == erased)
        }
    }

    /// [PKG-47] The same rule for document.json: covering past the end of document.log
    /// (same incarnation), it is set aside and the document rebuilt from its log; a page
    /// whose addPage the log lost is no longer in the document.
    @Test("[PKG-47] a document.json covering past the end of document.log is set aside")
    func documentJSONPastTheEndOfItsLog() async throws {
        let dir = try TempDir("pair")
        defer { dir.remove() }
        let nb = try await openNotebook(dir.path)
        let d = try await nb.createDocument(title: "D")
        let first = await d.pageList[0].id
        let before = await d.state
        let second = try await d.addPage()
        try await d.setTitle("Later")
        let paths = d.paths
        try await nb.close()
        let docJSON = fileBytes(paths.document)!
        let log = fileBytes(paths.documentLog)!
        try writeFile(paths.documentLog, Array(log.prefix(frameEnds(log)[2])))  // createDocument, first addPage
        #expect(try Verify.run(folder: dir.path).problems(.unpairedSnapshot).map(\.path) == [paths.document])

        let nb2 = try await openNotebook(dir.path)
        let d2 = try await nb2.openDocument(d.id)
        #expect(await d2.state == before)
        #expect(await d2.pageList.map(\.id) == [first])
        let report = try #require(await d2.recoveryReports.first { $0.path == paths.document })
        #expect(report.quarantinedCopy == paths.document + ".corrupt-1" && fileBytes(paths.document + ".corrupt-1") == docJSON)
        #expect(report.lostOwnOperations == 2)
        try await nb2.close()
        let r = try Verify.run(folder: dir.path)
        #expect(r.problems(.unpairedSnapshot).isEmpty)
        // The second page's files are kept, as page files of a page the document lacks.
        #expect(r.waiting.allSatisfy { $0.path.contains(second.description) })
    }
}
