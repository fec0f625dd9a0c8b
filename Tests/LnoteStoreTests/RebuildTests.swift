import Foundation
import Testing
import LnoteModel
import LnoteReplication
@testable import LnoteStore

/// [MERGE-1] with real files: three notebook folders edit one document (every kind of edit,
/// pages deleted and restored, small compaction thresholds and few loaded pages so that
/// snapshots are written and read back all the time, folders closed and reopened at random),
/// exchanging operations partially and in random orders. Then, after a full exchange: every
/// folder prints the same document; every page rebuilt from its log alone (its snapshot and
/// document.json deleted) equals the state its snapshot held; and so does a replica fed the
/// page's log operations in one batch.
@Suite struct RebuildTests {
    static var seedCount: Int { Int(ProcessInfo.processInfo.environment["LNOTE_SEEDS"] ?? "") ?? 6 }

    struct Folder {
        var path: String
        var notebook: Notebook
    }

    /// Everything `from` holds of document `id` that `to` lacks, log by log; `onlyOne` sends a
    /// single random log.
    static func exchange(_ from: Notebook, _ to: Notebook, _ id: DocumentID, onlyOne: Bool, rng: inout SeededRNG) async throws {
        guard try await from.documentIDs().contains(id) else { return }
        let src = try await from.openDocument(id)
        let has = try await to.documentIDs().contains(id)
        var logs: [PageID?] = [nil] + (try await src.pageLogs()).map { Optional($0) }
        if onlyOne, !has { logs = [nil] }
        if onlyOne { logs = [logs.randomElement(using: &rng)!] }
        for p in logs {
            let theirs: VectorClock
            if try await to.documentIDs().contains(id) {
                theirs = try await to.openDocument(id).clock(page: p)
            } else {
                theirs = VectorClock()
            }
            var ops = try await src.operations(page: p, notCoveredBy: theirs)
            if ops.isEmpty { continue }
            if Bool.random(using: &rng) { ops.shuffle(using: &rng) }
            _ = try await to.receive(ops, document: id, page: p)
        }
    }

    /// The document and every page it lists, as one canonical text.
    static func canonical(_ nb: Notebook, _ id: DocumentID) async throws -> String {
        let d = try await nb.openDocument(id)
        var pages: [PageID: PageState] = [:]
        for p in await d.state.pages { pages[p.id] = try await d.pageState(p.id) }
        return await d.state.canonicalJSON(pages: pages, style: .compact)
    }

    static func randomEdit(_ d: Document, rng: inout SeededRNG) async throws {
        let state = await d.state
        let live = state.pages.filter { !$0.deleted.value }
        let roll = Int.random(in: 0..<100, using: &rng)
        if roll < 8 || live.isEmpty {
            switch Int.random(in: 0..<5, using: &rng) {
            case 0: _ = try await d.addPage(live.isEmpty || Bool.random(using: &rng) ? .last : .after(live.randomElement(using: &rng)!.id))
            case 1 where live.count > 1: try await d.deletePage(live.randomElement(using: &rng)!.id)
            case 2: if let p = state.pages.first(where: \.deleted.value) { try await d.restorePage(p.id) }
            case 3 where live.count > 1:
                let p = live.randomElement(using: &rng)!.id
                try await d.movePage(p, to: Bool.random(using: &rng) ? .first : .last)
            default: try await d.setTitle("t\(Int.random(in: 0..<100, using: &rng))")
            }
            return
        }
        let page = live.randomElement(using: &rng)!.id
        let ids = try await d.elements(page).map(\.id)
        guard !ids.isEmpty, roll >= 40 else {
            let n = Int.random(in: 1...4, using: &rng)
            let strokes = (0..<n).map { _ in stroke(Int.random(in: 1...12, using: &rng), x: Int32.random(in: 0...3000, using: &rng)) }
            if !ids.isEmpty, Bool.random(using: &rng) {
                let x = ids.randomElement(using: &rng)!
                try await d.addStroke(strokes[0], to: page, above: Bool.random(using: &rng) ? x : nil, below: nil)
            } else {
                try await d.addStrokes(strokes, to: page)
            }
            return
        }
        let some = Array(Set((0..<Int.random(in: 1...2, using: &rng)).map { _ in ids.randomElement(using: &rng)! }))
        switch Int.random(in: 0..<5, using: &rng) {
        case 0: try await d.erase(some, on: page)
        case 1:
            let e = try await d.elements(page).first { $0.id == some[0] }!
            let n = UInt32(e.content.pointCount)
            let from = UInt32.random(in: 0..<n, using: &rng)
            try await d.eraseRange(some[0], [PointRange(from, UInt32.random(in: (from + 1)...n, using: &rng))], on: page)
        case 2: try await d.move(some, dx: Int32.random(in: -50...50, using: &rng), dy: 3, on: page)
        case 3: try await d.bringToFront(some, on: page)
        default: try await d.sendToBack(some, on: page)
        }
    }

    @Test("[MERGE-1] [PKG-42] folders that exchanged everything agree, and every page rebuilt from its log equals its snapshot")
    func rebuiltPagesEqualSnapshots() async throws {
        let base = UInt64(ProcessInfo.processInfo.environment["LNOTE_SEED"] ?? "") ?? 0x5EB_0001
        for seed in base..<(base + UInt64(Self.seedCount)) {
            let failure = try await Self.run(seed: seed)
            #expect(failure == nil, "seed \(seed): \(failure ?? "") — rerun with LNOTE_SEED=\(seed) LNOTE_SEEDS=1")
            if failure != nil { break }
        }
    }

    static func run(seed: UInt64) async throws -> String? {
        var rng = SeededRNG(seed: seed)
        let dir = try TempDir("rebuild")
        defer { dir.remove() }
        let options = testOptions { o in
            o.compactAfterFrames = Int.random(in: 2...12, using: &rng)
            o.maxLoadedPages = Int.random(in: 1...3, using: &rng)
        }
        var folders: [Folder] = []
        for i in 0..<3 {
            let path = dir.sub("f\(i)")
            folders.append(Folder(path: path, notebook: try await openNotebook(path, io: fastIO, options: options)))
        }
        let id = try await folders[0].notebook.createDocument(title: "rebuild").id
        for step in 0..<Int.random(in: 120...200, using: &rng) {
            let i = Int.random(in: 0..<3, using: &rng)
            let roll = Int.random(in: 0..<100, using: &rng)
            if roll < 55 {
                guard try await folders[i].notebook.documentIDs().contains(id) else { continue }
                do {
                    try await randomEdit(try await folders[i].notebook.openDocument(id), rng: &rng)
                } catch let e as LnoteError where e.code == .invalidArgument || e.code == .notFound || e.code == .invalidState {
                    continue  // an edit the state does not allow (a page deleted meanwhile): skipped
                }
            } else if roll < 88 {
                var j = Int.random(in: 0..<3, using: &rng)
                if j == i { j = (i + 1) % 3 }
                try await exchange(folders[i].notebook, folders[j].notebook, id, onlyOne: Bool.random(using: &rng), rng: &rng)
            } else {
                // A restart: everything saved, the folder closed and opened again.
                try await folders[i].notebook.close()
                folders[i].notebook = try await openNotebook(folders[i].path, io: fastIO, options: options)
            }
            _ = step
        }
        for _ in 0..<2 {
            for i in 0..<3 { for j in 0..<3 where i != j { try await exchange(folders[i].notebook, folders[j].notebook, id, onlyOne: false, rng: &rng) } }
        }
        var texts: [String] = []
        for f in folders { texts.append(try await canonical(f.notebook, id)) }
        if Set(texts).count != 1 { return "the three folders differ after a full exchange" }
        // The schedule did something: several pages, ink, tombstones.
        let d0 = try await folders[0].notebook.openDocument(id)
        var ops = 0, tombstones = 0
        for p in try await d0.pageLogs() {
            ops += Int(try await d0.pageState(p).clock.total)
            tombstones += try await d0.pageState(p).tombstones.count
        }
        if ops < 40 || tombstones == 0 { return "a schedule too poor to test anything: \(ops) page operations, \(tombstones) tombstones" }
        for i in 0..<3 {
            // What each page's log alone gives, in one batch.
            let d = try await folders[i].notebook.openDocument(id)
            for p in try await d.pageLogs() {
                var fresh = PageReplica(page: p)
                try fresh.receive(try await d.operations(page: p, notCoveredBy: VectorClock()))
                if fresh.state != (try await d.pageState(p)) { return "folder \(i): page \(p) differs from its log replayed in one batch" }
            }
            try await folders[i].notebook.close()
            // Snapshots and document.json deleted: everything is rebuilt from the logs.
            let package = folders[i].path + "/" + id.description + ".lnote"
            try? FileManager.default.removeItem(atPath: package + "/document.json")
            for name in listNames(package + "/pages") where name.hasSuffix(".content") {
                try FileManager.default.removeItem(atPath: package + "/pages/" + name)
            }
            folders[i].notebook = try await openNotebook(folders[i].path, io: fastIO, options: options)
            let rebuilt = try await canonical(folders[i].notebook, id)
            if rebuilt != texts[0] { return "folder \(i): the document rebuilt from its logs differs from its snapshots" }
            try await folders[i].notebook.close()
        }
        return nil
    }
}
