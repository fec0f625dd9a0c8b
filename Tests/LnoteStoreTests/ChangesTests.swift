import Foundation
import Synchronization
import Testing
import LnoteModel
import LnoteReplication
@testable import LnoteStore

@Suite("Changes: Document.changes and Notebook.changes")
struct ChangesTests {
    /// The ids of the operations a log file holds now (test side: the file's bytes).
    static func idsInFile(_ path: String) -> Set<OpID> {
        guard let bytes = fileBytes(path), bytes.count >= LogHeader.size else { return [] }
        return Set(LogScanner.scanFile(bytes).frames
            .compactMap { OperationCodec.id(of: $0.frame) })
    }

    @Test("[PKG-95] every event describes the state it is told against: local edits, merges (durable first) and another handle's appends, seeded")
    func eventsDescribeTheState() async throws {
        let seed = testSeed()
        print("seed \(seed) (LNOTE_SEED=\(seed) reruns it)")
        var rng = SeededRNG(seed: seed)
        let dir = try TempDir("events")
        defer { dir.remove() }
        let a = try await openNotebook(dir.path)
        let b = try await openNotebook(dir.path)
        let da = try await a.createDocument(title: "Events")
        let p0 = try #require(await da.pageList.first?.id)
        let db = try await b.openDocument(da.id)
        let peer = ReplicaID(0x7e57)
        let paths = da.paths
        // Merge events must find their operations in the log file already.
        let notDurable = Mutex<[String]>([])
        let stream = await da.changes
        let events = Mutex<[Change]>([])
        let consumer = Task {
            for await c in stream {
                if c.origin == .merge {
                    let file = c.page.map { paths.log($0) } ?? paths.documentLog
                    let held = ChangesTests.idsInFile(file)
                    for op in c.operations where !held.contains(op) { notDurable.withLock { $0.append("\(c)") } }
                }
                events.withLock { $0.append(c) }
            }
        }
        // Operation ids are per log (a replica's counters are per log): origins are kept per
        // log, nil for the document log.
        var origin: [PageID?: [OpID: Change.Origin]] = [:]
        var pages = [p0]
        var clocks: [PageID?: VectorClock] = [:]
        /// Records the origin of every operation the logs gained since the last call.
        func learn(_ o: Change.Origin) async throws {
            for log in [nil] + pages as [PageID?] {
                let since = clocks[log] ?? VectorClock()
                for op in try await da.operations(page: log, notCoveredBy: since) where origin[log]?[op.id] == nil { origin[log, default: [:]][op.id] = o }
                clocks[log] = try await da.clock(page: log)
            }
        }
        for step in 0..<60 {
            let page = pages[rng.int(in: 0...(pages.count - 1))]
            let live = try await da.elements(page).map(\.id)
            let deleted = await da.state.pages.first { $0.id == page }?.deleted.value ?? false
            switch rng.int(in: 0...9) {
            case 0...2:
                // Another handle (as another process would) edits a page both have loaded.
                guard !deleted else { continue }
                if live.isEmpty || rng.int(in: 0...2) > 0 {
                    try await db.addStroke(marked(step), to: page)
                } else {
                    try await db.erase([live[rng.int(in: 0...(live.count - 1))]], on: page)
                }
                try await learn(.otherProcess)
            case 3:
                // A merge from a peer: an operation made on the state this handle holds.
                guard !deleted else { continue }
                var r = PageReplica(state: try await da.pageState(page))
                let op: Op
                if live.isEmpty || rng.int(in: 0...1) == 0 {
                    op = try r.add(.stroke(marked(1000 + step)), by: peer, wallTime: 1)
                } else {
                    op = try r.move([live[rng.int(in: 0...(live.count - 1))]], dx: 5, dy: 5, by: peer, wallTime: 1)
                }
                try await da.receive([op], page: page)
                try await learn(.merge)
            case 4:
                var r = DocumentReplica(state: await da.state)
                try await da.receive([try r.make(.setTitle("peer \(step)"), by: peer, wallTime: 1)])
                try await learn(.merge)
            case 5:
                guard !deleted else { continue }
                try await da.addStroke(marked(step), to: page)
                if let e = live.first {
                    switch rng.int(in: 0...3) {
                    case 0: try await da.move([e], dx: 3, dy: -3, on: page)
                    case 1: try await da.bringToFront([e], on: page)
                    case 2: try await da.eraseRange(e, [PointRange(1, 2)], on: page)
                    default: try await da.erase([e], on: page)
                    }
                }
                try await learn(.local)
            case 6:
                let byOther = rng.int(in: 0...1) == 0
                let p = byOther ? try await db.addPage() : try await da.addPage()
                pages.append(p)
                try await learn(byOther ? .otherProcess : .local)
                _ = try await da.elements(p)  // loaded: its changes are told element by element
                _ = try await db.elements(p)
            case 7:
                if deleted { try await da.restorePage(page) } else if pages.count > 1 { try await da.deletePage(page) }
                try await learn(.local)
            case 8:
                try await db.setTitle("title \(step)")
                try await learn(.otherProcess)
            default:
                try await da.movePage(page, to: .first)
                try await learn(.local)
            }
        }
        // Quiet: every other-handle append has been read (the handle reads before each read).
        _ = await da.pageList
        for p in pages { _ = try await da.elements(p) }
        try await Task.sleep(for: .milliseconds(300))
        consumer.cancel()
        _ = await consumer.value
        let all = events.withLock { $0 }
        #expect(notDurable.withLock { $0 }.isEmpty, "merge events before their frames were written: \(notDurable.withLock { $0 })")
        #expect(!all.contains { $0.kind == .missed })
        // Each event's operations came from where the event says ([PKG-95]).
        let elementKinds: Set<Change.Kind> = [.elementsAdded, .elementsErased, .elementsPartlyErased, .elementsMoved, .elementsReordered]
        for c in all where c.kind != .reloaded {
            let log = elementKinds.contains(c.kind) ? c.page : nil
            for op in c.operations {
                #expect(origin[log]?[op] == c.origin, "seed \(seed): \(c) but operation \(op) came from \(String(describing: origin[log]?[op]))")
            }
        }
        // Replaying the events gives the state: live pages, title, live elements of each page.
        var livePages: Set<PageID> = [p0]
        var title = "Events"
        var elements: [PageID: Set<ElementID>] = [:]
        // Element ids are per page (a replica's counters are per log): moves are kept per page.
        var lastMove: [PageID: [ElementID: OpID]] = [:]
        for c in all {
            switch c.kind {
            case .pageAdded, .pageRestored: livePages.insert(c.page!)
            case .pageRemoved: livePages.remove(c.page!)
            case .documentRetitled: title = c.title!
            case .elementsAdded: elements[c.page!, default: []].formUnion(c.elements)
            case .elementsErased: elements[c.page!, default: []].subtract(c.elements)
            case .elementsMoved: for e in c.elements { lastMove[c.page!, default: [:]][e] = c.operations.last! }
            default: break
            }
        }
        #expect(Set(await da.pageList.map(\.id)) == livePages, "seed \(seed)")
        #expect(await da.title == title, "seed \(seed)")
        for p in pages {
            let state = try await da.pageState(p)
            #expect(Set(state.elements.map(\.id)) == elements[p] ?? [], "seed \(seed): page \(p)")
            for e in state.elements { if let op = lastMove[p]?[e.id] { #expect(e.transform.winner?.id == op, "seed \(seed): page \(p) element \(e.id)") } }
        }
        try await a.close()
        try await b.close()
    }

    @Test("[PKG-95] a slow consumer never blocks writers: the oldest events are dropped and counted in `missed`")
    func slowConsumer() async throws {
        let dir = try TempDir("slow")
        defer { dir.remove() }
        let nb = try await openNotebook(dir.path, options: testOptions { $0.changeBufferCapacity = 8 })
        let d = try await nb.createDocument(title: "Slow")
        let p = try #require(await d.pageList.first?.id)
        var iterator = await d.changes.makeAsyncIterator()
        var ids: [ElementID] = []
        for i in 0..<50 { ids.append(try await d.addStroke(marked(i), to: p)) }  // nobody reads meanwhile
        let first = await iterator.next()
        #expect(first?.kind == .missed && first?.missed == 42)
        var rest: [ElementID] = []
        for _ in 0..<8 { rest += await iterator.next()?.elements ?? [] }
        #expect(rest == Array(ids.suffix(8)))
        try await nb.close()
        #expect(await iterator.next() == nil, "the stream ends when the document closes")
    }

    @Test("[PKG-87] [PKG-95] Document.changes hears another handle's appends without being asked", arguments: [false, true])
    func liveWithoutAsking(polling: Bool) async throws {
        let dir = try TempDir("live")
        defer { dir.remove() }
        let a = try await openNotebook(dir.path, options: testOptions { $0.forcePolling = polling; $0.pollInterval = .milliseconds(50) })
        let b = try await openNotebook(dir.path)
        let da = try await a.createDocument(title: "Live")
        let p = try #require(await da.pageList.first?.id)
        let q = try await da.addPage()
        _ = try await da.elements(p)
        let events = EventCollector(await da.changes)
        let db = try await b.openDocument(da.id)
        let id = try await db.addStroke(marked(1), to: p)
        #expect(await events.wait { $0.contains { $0.kind == .elementsAdded && $0.elements == [id] && $0.origin == .otherProcess } },
                "polling \(polling): \(events.all)")
        // A page this handle has not loaded is told as changed.
        try await db.addStroke(marked(2), to: q)
        #expect(await events.wait { $0.contains { $0.kind == .pageChanged && $0.page == q } }, "polling \(polling): \(events.all)")
        try await db.setTitle("From b")
        #expect(await events.wait { $0.contains { $0.kind == .documentRetitled && $0.title == "From b" && $0.origin == .otherProcess } })
        events.stop()
        try await a.close()
        try await b.close()
    }

    @Test("[PKG-95] Notebook.changes tells documents created, retitled, deleted and restored by any handle, with their origin")
    func notebookChanges() async throws {
        let dir = try TempDir("nbchanges")
        defer { dir.remove() }
        let a = try await openNotebook(dir.path)
        let b = try await openNotebook(dir.path)
        let existing = try await a.createDocument(title: "Before")
        let events = EventCollector(await a.changes)
        let mine = try await a.createDocument(title: "Mine")
        #expect(await events.wait { $0.contains { $0.kind == .documentCreated && $0.document == mine.id && $0.origin == .local && $0.title == "Mine" } },
                "\(events.all)")
        let theirs = try await b.createDocument(title: "Theirs")
        #expect(await events.wait { $0.contains { $0.kind == .documentCreated && $0.document == theirs.id && $0.origin == .otherProcess } },
                "\(events.all)")
        let onB = try await b.openDocument(existing.id)
        try await onB.setTitle("Renamed elsewhere")
        #expect(await events.wait { $0.contains { $0.kind == .documentRetitled && $0.document == existing.id && $0.title == "Renamed elsewhere"
            && $0.origin == .otherProcess } }, "\(events.all)")
        try await a.deleteDocument(existing.id)
        #expect(await events.wait { $0.contains { $0.kind == .documentDeleted && $0.document == existing.id && $0.origin == .local } },
                "\(events.all)")
        try await b.restoreDocument(existing.id)
        #expect(await events.wait { $0.contains { $0.kind == .documentRestored && $0.document == existing.id && $0.origin == .otherProcess } },
                "\(events.all)")
        let p = try await mine.addPage()
        #expect(await events.wait { $0.contains { $0.kind == .pageAdded && $0.page == p && $0.origin == .local } }, "\(events.all)")
        // Received by sync in this process: a merge.
        let src = try await openNotebook(dir.sub("elsewhere"))
        let far = try await src.createDocument(title: "From afar")
        try await a.receive(try await far.operations(notCoveredBy: VectorClock()), document: far.id, page: nil)
        #expect(await events.wait { $0.contains { $0.kind == .documentCreated && $0.document == far.id && $0.origin == .merge } },
                "\(events.all)")
        var r = DocumentReplica(state: await far.state)
        let retitle = try r.make(.setTitle("Merged"), by: ReplicaID(0x99), wallTime: 1)
        try await a.receive([retitle], document: far.id, page: nil)
        #expect(await events.wait { $0.contains { $0.kind == .documentRetitled && $0.document == far.id && $0.origin == .merge } },
                "\(events.all)")
        // One operation id in two documents' logs (counters are per log): this process
        // retitles X while another retitles Y, both as their third operation. Each is told,
        // with its own origin.
        let x = try await a.createDocument(title: "X"), y = try await a.createDocument(title: "Y")
        let yOnB = try await b.openDocument(y.id)
        async let local: Void = x.setTitle("X again")
        async let other: Void = yOnB.setTitle("Y elsewhere")
        _ = try await (local, other)
        #expect(try await x.operations(notCoveredBy: VectorClock()).last?.id == yOnB.operations(notCoveredBy: VectorClock()).last?.id,
                "the same id in both logs")
        #expect(await events.wait { all in
            all.contains { $0.kind == .documentRetitled && $0.document == x.id && $0.origin == .local }
                && all.contains { $0.kind == .documentRetitled && $0.document == y.id && $0.origin == .otherProcess }
        }, "\(events.all)")
        events.stop()
        try await src.close()
        try await a.close()
        try await b.close()
    }

    /// A notebook folder `nb` in `dir` holding one package with its `pages/`, for `LogWatch`.
    static func notebookFolder(in dir: TempDir) throws -> (folder: String, package: String) {
        let folder = dir.path + "/nb"
        let package = folder + "/" + UUID().uuidString + ".lnote"
        try FileManager.default.createDirectory(atPath: package + "/pages", withIntermediateDirectories: true)
        return (folder, package)
    }

    /// `LogWatch` on its own ([PKG-87], sync-protocol.md [SYNC-72]): appends to a page log
    /// and a document log are reported, also in a package that appeared after it started;
    /// a file that is no log is not; the folder removed is; `close` stops it. Through
    /// inotify, and by polling the logs' fingerprint.
    @Test("[PKG-87] LogWatch reports log writes, new packages and a removed folder; inotify and polling",
          arguments: [false, true])
    func logWatch(polling: Bool) async throws {
        let dir = try TempDir("logwatch")
        defer { dir.remove() }
        let (folder, package) = try Self.notebookFolder(in: dir)
        let calls = Mutex(0)
        let watch = try LogWatch(folders: [folder], pollInterval: .milliseconds(20), forcePolling: polling) {
            calls.withLock { $0 += 1 }
        }
        func eventually(_ condition: () -> Bool) async -> Bool {
            for _ in 0..<300 where !condition() { try? await Task.sleep(for: .milliseconds(10)) }
            return condition()
        }
        #expect(await eventually { watch.mode == (polling ? "polling every 0.02 seconds" : "inotify") }, "\(watch.mode)")
        FileManager.default.createFile(atPath: package + "/thumbnail.png", contents: Data([0]))
        try await Task.sleep(for: .milliseconds(100))
        #expect(calls.withLock { $0 } == 0, "a file that is no log")
        FileManager.default.createFile(atPath: package + "/document.log", contents: Data([0]))
        #expect(await eventually { calls.withLock { $0 } >= 1 })
        var n = calls.withLock { $0 }
        FileManager.default.createFile(atPath: package + "/pages/p.log", contents: Data([0]))
        #expect(await eventually { calls.withLock { $0 } > n })
        // A package that appears later (renamed into place, as [PKG-2] makes them).
        let staged = folder + "/.staged.tmp-1", later = folder + "/" + UUID().uuidString + ".lnote"
        try FileManager.default.createDirectory(atPath: staged + "/pages", withIntermediateDirectories: true)
        try FileManager.default.moveItem(atPath: staged, toPath: later)
        #expect(await eventually { calls.withLock { $0 } > n })
        try await Task.sleep(for: .milliseconds(100))
        n = calls.withLock { $0 }
        FileManager.default.createFile(atPath: later + "/pages/q.log", contents: Data([0]))
        #expect(await eventually { calls.withLock { $0 } > n }, "a log in the new package")
        n = calls.withLock { $0 }
        try FileManager.default.removeItem(atPath: folder)
        #expect(await eventually { calls.withLock { $0 } > n }, "the folder removed")
        watch.close()
        watch.close()
        try await Task.sleep(for: .milliseconds(50))
        let m = calls.withLock { $0 }
        try FileManager.default.createDirectory(atPath: package + "/pages", withIntermediateDirectories: true)
        FileManager.default.createFile(atPath: package + "/pages/r.log", contents: Data([0]))
        try await Task.sleep(for: .milliseconds(100))
        #expect(calls.withLock { $0 } == m, "closed: no more calls")
        #expect(throws: LnoteError.self) { try LogWatch(folders: [dir.path + "/missing"]) {} }
    }

    /// A log opened for writing and closed unchanged (what a server answering a sync does to
    /// every log it serves) is no change: it woke every watcher and long poll once per log
    /// read, and made the watch rescan the whole folder each time.
    @Test("[PKG-87] a log opened for writing and closed without a write is not a change", arguments: [false, true])
    func logOpenedAndClosedUnchangedIsNoChange(polling: Bool) async throws {
        let dir = try TempDir("logwatch-open")
        defer { dir.remove() }
        let (folder, package) = try Self.notebookFolder(in: dir)
        let log = package + "/pages/p.log"
        FileManager.default.createFile(atPath: log, contents: Data([1, 2, 3]))
        let calls = Mutex(0)
        let watch = try LogWatch(folders: [folder], pollInterval: .milliseconds(20), forcePolling: polling) {
            calls.withLock { $0 += 1 }
        }
        defer { watch.close() }
        try await Task.sleep(for: .milliseconds(100))
        let before = calls.withLock { $0 }
        for _ in 0..<20 {
            let fd = open(log, O_RDWR)
            #expect(fd >= 0)
            close(fd)
        }
        try await Task.sleep(for: .milliseconds(150))
        #expect(calls.withLock { $0 } == before, "opening and closing a log changed nothing")
        // An append still is a change.
        let fd = open(log, O_WRONLY | O_APPEND)
        #expect(write(fd, [UInt8(4)], 1) == 1)
        close(fd)
        var told = false
        for _ in 0..<300 where !told {
            try await Task.sleep(for: .milliseconds(10))
            told = calls.withLock { $0 } > before
        }
        #expect(told, "an append is a change")
    }
}
