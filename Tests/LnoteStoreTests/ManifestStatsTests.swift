import Foundation
import Synchronization
import Testing
import LnoteModel
import LnoteReplication
@testable import LnoteStore

/// A wall clock for tests that advances one second per reading.
final class Ticker: Sendable {
    let now = Mutex<Int64>(1_700_000_000_000)
    var options: StoreOptions {
        testOptions { $0.now = { [self] in now.withLock { $0 += 1000; return $0 } } }
    }
}

/// Per-page counts: where they come from (snapshot summaries), how a stale manifest heals,
/// and what old document.json files still open.
@Suite("Manifest and page counts from snapshot summaries")
struct ManifestStatsTests {
    /// The manifest a package's files call for, recomputed from scratch with full snapshot
    /// decodes (not with the summary reader under test).
    static func groundTruth(_ paths: PackagePaths) throws -> (pageCount: Int, elementCount: Int, modified: Int64) {
        let (_, state, _) = try DocumentFile.decode(try #require(fileBytes(paths.document)), path: "")
        var elements = 0
        var modified = state.modified
        let live = state.pages.filter { !$0.deleted.value }
        for p in live {
            guard let bytes = fileBytes(paths.content(p.id)) else { continue }
            let s = try PageSnapshot.decode(bytes).state
            elements += s.elements.count
            modified = max(modified, s.modified)
        }
        return (live.count, elements, modified)
    }

    /// [PKG-13][PKG-52] A crash at each disk mutation of a save after a page edit (page
    /// snapshot, manifest; the thumbnail is drawn after it, [PKG-103]): `list` still shows the manifest as it is and writes
    /// nothing; opening the document makes it exactly what document.json and the page
    /// snapshots call for.
    @Test("[PKG-13] a manifest left stale by a crash after a page snapshot is made exact on open")
    func crashBetweenSnapshotAndManifest() async throws {
        var step = 0
        var sawStale = false
        while true {
            let dir = try TempDir("heal")
            defer { dir.remove() }
            let ticker = Ticker()
            let nb0 = try await openNotebook(dir.path, options: ticker.options)
            let d0 = try await nb0.createDocument(title: "Heal")
            let p0 = try #require(await d0.pageList.first?.id)
            let p1 = try await d0.addPage(), p2 = try await d0.addPage()
            for (i, p) in [p0, p1, p2].enumerated() { try await d0.addStrokes((0..<(i + 1)).map { stroke(3 + $0) }, to: p) }
            let paths = d0.paths
            try await nb0.close()

            let crash = ArmedCrash(at: step)
            // Pictures are drawn by the close below, after the check of what the flush did ([PKG-103]).
            var options = ticker.options
            options.thumbnailDelay = .seconds(3600)
            let nb = try await openNotebook(dir.path, io: Syscalls(faults: crash.plan), options: options)
            let d = try await nb.openDocument(paths.id)
            try await d.addStrokes([stroke(4), stroke(5)], to: p1)
            crash.arm()
            var completed = true
            do { try await d.flush() } catch { completed = false }
            let crashedInFlush = crash.crashed
            try? await nb.close()
            #expect(completed == !crashedInFlush, "step \(step)")

            let before = try #require(fileBytes(paths.manifest))
            let truth = try Self.groundTruth(paths)
            let stale = try !Notebook.manifestIsCurrent(paths, io: .live)
            let verified = try Verify.run(folder: dir.path)
            #expect(verified.problems.contains { $0.kind == .staleManifest } == stale, "step \(step): \(verified.problems)")
            if stale {
                sawStale = true
                let listed = try Notebook.list(at: dir.path)
                #expect(listed.first?.elementCount != truth.elementCount || listed.first?.modified != truth.modified,
                        "step \(step): list shows the stale manifest")
                #expect(fileBytes(paths.manifest) == before, "step \(step): list never writes")
            }
            let nb2 = try await openNotebook(dir.path)
            let d2 = try await nb2.openDocument(paths.id)
            let m = try ManifestFile.decode(try #require(fileBytes(paths.manifest)), path: "")
            #expect(m.pageCount == truth.pageCount && m.elementCount == truth.elementCount && m.modified == truth.modified,
                    "step \(step): \(m) vs \(truth)")
            #expect(try Notebook.manifestIsCurrent(paths, io: .live), "step \(step)")
            #expect(try await nb2.list().first?.elementCount == truth.elementCount, "step \(step)")
            // The manifest counts snapshots: strokes only in a log tail count once their page
            // is opened (it replays the tail) and saved.
            #expect(try await d2.elements(p1).count == 4, "step \(step)")
            try await d2.close()
            #expect(try Self.groundTruth(paths).elementCount == 1 + 2 + 3 + 2, "step \(step)")
            #expect(try await nb2.list().first?.elementCount == 8, "step \(step)")
            try await nb2.close()
            #expect(try Verify.run(folder: dir.path).problems.isEmpty, "step \(step)")
            if completed { break }
            step += 1
        }
        #expect(sawStale, "some crash point fell between the page snapshot and the manifest")
        #expect(step >= 8, "snapshot, thumbnail and manifest were each written")
    }

    /// [PKG-12] document.json files written when pages still carried `elementCount` and
    /// `modified` open: the fields are ignored, the counts come from the snapshots, and the
    /// next rewrite drops them.
    @Test("[PKG-12] an old document.json with per-page elementCount and modified opens")
    func oldDocumentJSONOpens() async throws {
        let dir = try TempDir("old")
        defer { dir.remove() }
        let nb = try await openNotebook(dir.path)
        let d = try await nb.createDocument(title: "Old")
        let p0 = try #require(await d.pageList.first?.id)
        let p1 = try await d.addPage()
        try await d.addStrokes([stroke(), stroke(4)], to: p0)
        try await d.addStroke(stroke(), to: p1)
        let listBefore = await d.pageList
        let stateBefore = await d.state
        let paths = d.paths
        try await d.close()
        // Rewrite document.json as the previous layout had it (wrong values on purpose:
        // they must not be used).
        var json = try #require(try JSONSerialization.jsonObject(with: Data(fileBytes(paths.document)!)) as? [String: Any])
        var pages = try #require(json["pages"] as? [[String: Any]])
        for i in pages.indices {
            pages[i]["elementCount"] = 99
            pages[i]["modified"] = 42
        }
        json["pages"] = pages
        let old = Array(try JSONSerialization.data(withJSONObject: json, options: [.sortedKeys, .prettyPrinted]))
        try writeFile(paths.document, old)
        let d2 = try await nb.openDocument(paths.id)
        #expect(await d2.pageList == listBefore)
        #expect(await d2.state == stateBefore)
        #expect(try await nb.list().first?.elementCount == 3)
        try await d2.flush()
        #expect(fileBytes(paths.document) == old, "nothing changed: not rewritten")
        try await d2.setTitle("New")
        try await d2.close()
        let text = String(decoding: try #require(fileBytes(paths.document)), as: UTF8.self)
        #expect(!text.contains("elementCount") && !text.contains("\"modified\" : 42"))
        #expect(try await nb.list().first?.elementCount == 3)
        try await nb.close()
        #expect(try Verify.run(folder: dir.path).problems.isEmpty)
    }

    /// [PKG-12] After reopening, `pageList` and `deletedPages` give each page's element
    /// count and modification time without loading the pages, equal to what the loaded
    /// pages said; the summary of every snapshot equals `PageStats` of its decoded state.
    @Test("[PKG-12] page counts of pages that are not loaded come from their snapshots")
    func pageListAfterReopen() async throws {
        let seed = testSeed()
        var rng = SeededRNG(seed: seed)
        let dir = try TempDir("counts")
        defer { dir.remove() }
        let ticker = Ticker()
        let nb = try await openNotebook(dir.path, options: ticker.options)
        let d = try await nb.createDocument(title: "Counts")
        for _ in 0..<5 { try await d.addPage() }
        var pageIDs = await d.pageList.map(\.id)
        // The page to delete is chosen first so that one live page (the next one) always gets
        // ink: with 0...6 strokes everywhere, every live page came out empty for 1 seed in
        // 7^5 = 16,807 (e.g. 18532), and then no page had a modification time to check.
        let deletedIndex = Int.random(in: 0..<pageIDs.count, using: &rng)
        let inked = (deletedIndex + 1) % pageIDs.count
        for (i, p) in pageIDs.enumerated() {
            let n = Int.random(in: (i == inked ? 1 : 0)...6, using: &rng)
            let ids = try await d.addStrokes((0..<n).map { stroke(2 + $0) }, to: p)
            if !ids.isEmpty, Bool.random(using: &rng) { try await d.erase([ids[Int.random(in: 0..<ids.count, using: &rng)]], on: p) }
        }
        let deleted = pageIDs[deletedIndex]
        try await d.deletePage(deleted)
        pageIDs.removeAll { $0 == deleted }
        let list = await d.pageList, gone = await d.deletedPages
        let paths = d.paths
        try await nb.close()

        for p in pageIDs + [deleted] {
            let counts = try PageCounts.read(paths.content(p), page: p, io: .live)
            if let bytes = fileBytes(paths.content(p)) {
                let stats = PageStats(try PageSnapshot.decode(bytes).state)
                #expect(counts == PageCounts(elementCount: stats.elementCount, modified: stats.modified), "seed \(seed)")
            } else {
                #expect(counts == .empty, "seed \(seed)")
            }
        }
        let rec = SyscallRecorder()
        let nb2 = try await openNotebook(dir.path, io: Syscalls(recorder: rec), options: ticker.options)
        let d2 = try await nb2.openDocument(paths.id)
        rec.reset()
        #expect(await d2.pageList == list, "seed \(seed)")
        #expect(rec.pathsOpened.isEmpty, "seed \(seed): the live pages' counts were read at open: \(rec.pathsOpened)")
        #expect(await d2.deletedPages == gone, "seed \(seed)")
        #expect(list.map(\.elementCount).reduce(0, +) == (try await nb2.list().first?.elementCount), "seed \(seed)")
        #expect(list.contains { $0.modified > 0 }, "seed \(seed)")
        try await nb2.close()
    }

    /// [PKG-12] A page whose counts cannot be read (an I/O error on its snapshot, here a
    /// deleted page, whose counts are read when listed) shows in the listing with the error
    /// and zero counts, without failing the listing; the next listing reads it again.
    @Test("[PKG-12] an unreadable snapshot shows as counts unknown, and is read again next time")
    func unreadableCountsAreReported() async throws {
        let dir = try TempDir("unread")
        defer { dir.remove() }
        let nb = try await openNotebook(dir.path)
        let d = try await nb.createDocument(title: "U")
        let p = try await d.addPage()
        try await d.addStrokes([stroke(), stroke(3), stroke(4)], to: p)
        try await d.deletePage(p)
        let paths = d.paths
        try await nb.close()

        let plan = FaultPlan.failing(.read, nth: 0, pathContains: paths.content(p), with: .fail(errno: EIO))
        let nb2 = try await openNotebook(dir.path, io: Syscalls(faults: plan))
        let d2 = try await nb2.openDocument(paths.id)
        let first = try #require(await d2.deletedPages.first)
        #expect(first.id == p && first.elementCount == 0)
        #expect(first.countsError?.code == .io)
        #expect(first.countsError?.path == paths.content(p))
        #expect(await d2.pageList.allSatisfy { $0.countsError == nil })
        let again = try #require(await d2.deletedPages.first)
        #expect(again.countsError == nil && again.elementCount == 3, "read again, and this time it worked")
        try await nb2.close()
    }

    /// [PKG-12] A snapshot whose first bytes are damaged counts as an empty page until the
    /// page is opened (which quarantines it, rebuilds it from the log and snapshots it again).
    @Test("[PKG-12] a damaged snapshot counts as empty, then is rebuilt and counted")
    func damagedSnapshotCounts() async throws {
        let dir = try TempDir("dmg")
        defer { dir.remove() }
        let nb = try await openNotebook(dir.path)
        let d = try await nb.createDocument(title: "D")
        let p = try #require(await d.pageList.first?.id)
        try await d.addStrokes([stroke(), stroke(3), stroke(4)], to: p)
        let paths = d.paths
        try await d.close()
        var bytes = try #require(fileBytes(paths.content(p)))
        bytes[PageSnapshot.headerSize] = 0x07  // the page section's tag
        try writeFile(paths.content(p), bytes)
        #expect(try PageCounts.read(paths.content(p), page: p, io: .live) == .empty)
        let d2 = try await nb.openDocument(paths.id)
        #expect(try await nb.list().first?.elementCount == 0, "counted as empty")
        #expect(try await d2.elements(p).count == 3, "rebuilt from the log")
        #expect(await d2.recoveryReports.contains { $0.quarantinedCopy != nil })
        try await d2.flush()
        #expect(try await nb.list().first?.elementCount == 3)
        try await nb.close()
    }

    /// [PKG-13] 5 A live page's snapshot in a newer format ([SNAP-7]) has counts this lnote
    /// cannot know: they are not taken as zero. The manifest keeps the element count its writer
    /// wrote through edits of the other pages, takes a new title and page, and reconcile and
    /// verify find nothing to heal; the page listing reports the counts as unknown.
    @Test("[PKG-13] a snapshot in a newer format: the manifest keeps its element count")
    func newerSnapshotKeepsManifest() async throws {
        let dir = try TempDir("newer")
        defer { dir.remove() }
        let nb = try await openNotebook(dir.path)
        let d = try await nb.createDocument(title: "N")
        let p0 = try #require(await d.pageList.first?.id)
        let p1 = try await d.addPage()
        try await d.addStrokes([stroke(), stroke(3), stroke(4)], to: p0)
        try await d.addStrokes([stroke(5)], to: p1)
        let paths = d.paths
        try await nb.close()
        var bytes = try #require(fileBytes(paths.content(p0)))
        bytes[8] = UInt8(PageSnapshot.version + 1)  // the version field, u16 LE ([SNAP-4])
        try writeFile(paths.content(p0), bytes)
        let manifest = try #require(fileBytes(paths.manifest))
        #expect(try ManifestFile.decode(manifest, path: "").elementCount == 4)

        #expect(throws: LnoteError.self) { try PageCounts.read(paths.content(p0), page: p0, io: .live) }
        do {
            _ = try PageCounts.read(paths.content(p0), page: p0, io: .live)
        } catch let e as LnoteError {
            #expect(e.code == .unsupportedVersion && e.offset == 8 && e.path == paths.content(p0))
        }
        #expect(try Notebook.manifestIsCurrent(paths, io: .live), "nothing for reconcile to rebuild")
        #expect(!(try Verify.run(folder: dir.path).problems.contains { $0.kind == .staleManifest || $0.path == paths.manifest }))

        let nb2 = try await openNotebook(dir.path)
        #expect(try await nb2.reconcile().isEmpty)
        let d2 = try await nb2.openDocument(paths.id)
        #expect(fileBytes(paths.manifest) == manifest, "opening did not recount the page as empty")
        let old = try ManifestFile.decode(manifest, path: "")
        try await d2.addStrokes([stroke(6)], to: p1)
        try await d2.flush()
        let edited = try ManifestFile.decode(try #require(fileBytes(paths.manifest)), path: "")
        #expect(edited.elementCount == 4 && edited.modified >= old.modified, "the count kept, not recounted as 1 + 1")
        let listed = try #require(await d2.pageList.first { $0.id == p0 })
        #expect(listed.countsError?.code == .unsupportedVersion, "the listing says the counts are unknown")
        #expect(try await nb2.list().first?.elementCount == 4)
        // A change of document.json (a title, a page) still reaches the manifest: it is not
        // left naming another document.json.
        try await d2.setTitle("Renamed")
        _ = try await d2.addPage()
        try await d2.flush()
        let renamed = try ManifestFile.decode(try #require(fileBytes(paths.manifest)), path: "")
        #expect(renamed.title == "Renamed" && renamed.pageCount == 3 && renamed.elementCount == 4)
        #expect(renamed.source == ManifestFile.fingerprint(try #require(fileBytes(paths.document))))
        let after = try #require(fileBytes(paths.manifest))
        try await nb2.close()
        #expect(fileBytes(paths.manifest) == after, "closing finds it current")
        #expect(try Notebook.manifestIsCurrent(paths, io: .live))
        #expect(!(try Verify.run(folder: dir.path).problems.contains { $0.kind == .staleManifest || $0.path == paths.manifest }))
        let nb3 = try await openNotebook(dir.path)
        #expect(try await nb3.reconcile().isEmpty)
        #expect(try await nb3.list().first?.title == "Renamed")
        try await nb3.close()
        #expect(fileBytes(paths.manifest) == after)
    }
}
