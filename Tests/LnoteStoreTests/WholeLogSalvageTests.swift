import Foundation
import Synchronization
import Testing
import LnoteModel
@testable import LnoteStore

/// [PKG-38] Damage before the offset a snapshot (or document.json) covers: opening never reads
/// it, `Document.salvageWholeLog(page:)` and `salvageWholeDocumentLog()` (what
/// `lnote verify --repair` runs) do, and salvage it as opening would.
@Suite("Whole-log salvage: damage before what a snapshot covers")
struct WholeLogSalvageTests {
    /// A notebook of one document whose page log holds `strokes` frames, all covered by the
    /// page's snapshot, the payload of the second frame of the page log and of the first of
    /// document.log then damaged. Returns the paths, the page and the damaged logs' bytes.
    func damagedBeforeTheSnapshots(_ dir: TempDir, strokes: Int = 4)
        async throws -> (paths: PackagePaths, page: PageID, pageLog: [UInt8], documentLog: [UInt8]) {
        let nb = try await openNotebook(dir.path)
        let d = try await nb.createDocument(title: "W")
        let p = try #require(await d.pageList.first?.id)
        for i in 0..<strokes { try await d.addStroke(stroke(4, x: Int32(10 * i)), to: p) }
        let paths = d.paths
        try await nb.close()
        #expect(try PageSnapshot.decode(try #require(fileBytes(paths.content(p)))).coveredLogOffset
                    == UInt64(try #require(fileBytes(paths.log(p))).count), "the snapshot covers the whole log")
        func damage(_ path: String, frame: Int) throws -> [UInt8] {
            var b = try #require(fileBytes(path))
            let frames = DeferredPointsStoreTests.frames(b)
            #expect(frames.count > frame + 1, "valid frames follow the damaged one")
            b[Int(frames[frame].offset) + 10] ^= 0x40  // a payload byte: the CRC fails
            try writeFile(path, b)
            return b
        }
        return (paths, p, try damage(paths.log(p), frame: 1), try damage(paths.documentLog, frame: 0))
    }

    @Test("[PKG-38] an open does not see the damage; the whole-log salvage does, once, and the page is unchanged")
    func salvagesWhatAnOpenDoesNotRead() async throws {
        let dir = try TempDir("whole")
        defer { dir.remove() }
        let (paths, p, pageLog, documentLog) = try await damagedBeforeTheSnapshots(dir)
        let nb = try await openNotebook(dir.path)
        let d = try await nb.openDocument(paths.id)
        #expect(try await d.elements(p).count == 4)
        #expect(await d.recoveryReports.allSatisfy(\.isClean), "opening read from the snapshots' offsets")
        #expect(fileBytes(paths.log(p)) == pageLog && fileBytes(paths.documentLog) == documentLog)

        let documentReport = try #require(try await d.salvageWholeDocumentLog())
        #expect(documentReport.newIncarnation != nil && documentReport.quarantinedCopy == paths.documentLog + ".corrupt-1")
        let pageReport = try #require(try await d.salvageWholeLog(page: p))
        #expect(pageReport.newIncarnation != nil && pageReport.quarantinedCopy == paths.log(p) + ".corrupt-1")
        #expect(pageReport.problems.first?.offset.map { $0 > LogHeader.size } == true, "\(pageReport)")
        #expect(fileBytes(paths.log(p) + ".corrupt-1") == pageLog, "the damaged file kept as it was")
        let pageAgain = try await d.salvageWholeLog(page: p), documentAgain = try await d.salvageWholeDocumentLog()
        #expect(pageAgain == nil && documentAgain == nil, "a salvaged log has nothing left to salvage")
        #expect(try await d.elements(p).count == 4, "the snapshot still holds what the damaged frame held")
        try await nb.close()
        let r = try Verify.run(folder: dir.path)
        #expect(r.problems.filter { $0.kind == .corruptFrame }.isEmpty, "\(r.problems)")
        #expect(r.problems.contains { $0.kind == .missingOperations && $0.path == paths.log(p) }, "[PKG-51]: \(r.problems)")
    }

    /// On a full disk the salvage cannot be written ([PKG-38], salvage pending): nothing on
    /// disk changes and the call says nothing was salvaged (the report, in `recoveryReports`,
    /// says `salvagePending`).
    @Test("[PKG-38] a whole-log salvage that cannot be written changes nothing and reports none made")
    func pendingSalvageIsNotAReport() async throws {
        let dir = try TempDir("whole-full")
        defer { dir.remove() }
        let (paths, p, pageLog, _) = try await damagedBeforeTheSnapshots(dir)
        let before = treeSnapshot(dir.path)
        let full = Mutex(false)
        let plan = FaultPlan { ev in
            guard full.withLock({ $0 }) else { return nil }
            return ev.kind == .write || (ev.kind == .open && ev.path.contains(".tmp-")) ? .fail(errno: ENOSPC) : nil
        }
        let nb = try await openNotebook(dir.path, io: Syscalls(faults: plan))
        let d = try await nb.openDocument(paths.id)
        full.withLock { $0 = true }
        let made = try await d.salvageWholeLog(page: p)
        #expect(made == nil)
        #expect(await d.recoveryReports.contains { $0.salvagePending != nil && $0.path == paths.log(p) })
        #expect(fileBytes(paths.log(p)) == pageLog && fileBytes(paths.log(p) + ".corrupt-1") == nil)
        #expect(try await d.elements(p).count == 4)
        try? await nb.close()
        #expect(treeSnapshot(dir.path).filter { $0.key.hasSuffix(".log") } == before.filter { $0.key.hasSuffix(".log") })
    }
}
