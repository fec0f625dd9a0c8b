import Foundation
import Synchronization
import Testing
import LnoteModel
import LnoteReplication
@testable import LnoteStore

/// Collects a change stream on a task of its own, for tests that wait for events.
final class EventCollector: Sendable {
    private let events = Mutex<[Change]>([])
    private let task: Mutex<Task<Void, Never>?> = Mutex(nil)

    init(_ stream: ChangeStream) {
        let t = Task { [self] in
            for await c in stream { self.events.withLock { $0.append(c) } }
        }
        task.withLock { $0 = t }
    }

    var all: [Change] { events.withLock { $0 } }

    /// Waits until `done(all)` holds (true) or `seconds` pass (false).
    func wait(seconds: Double = 5, until done: ([Change]) -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + .milliseconds(Int64(seconds * 1000))
        while ContinuousClock.now < deadline {
            if done(all) { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return done(all)
    }

    func stop() { task.withLock { $0?.cancel() } }
}

/// A stroke whose first point's x says which writer made it and when.
func marked(_ marker: Int) -> Stroke {
    Stroke(points: (0..<6).map { StrokePoint(x: Int32(marker) &* 3 + Int32($0), y: Int32($0) * 5, t: UInt32($0) * 8) })
}

func marker(of e: ElementRecord) -> Int? {
    guard case .stroke(let s) = e.content, let p = s.points.first else { return nil }
    return Int(p.x) / 3
}

@Suite("Several processes and handles on one folder: locks, catching up, leases, threads")
struct ConcurrencyTests {
    @Test("[PKG-61] [PKG-87] two notebooks open on one folder; each sees the other's edits at its next read, reading only the new bytes")
    func twoHandlesSeeEachOther() async throws {
        let dir = try TempDir("two")
        defer { dir.remove() }
        let rec = SyscallRecorder()
        let a = try await openNotebook(dir.path, io: Syscalls(recorder: rec))
        let b = try await openNotebook(dir.path)
        #expect(a.replica == b.replica, "one folder, one replica id")
        let da = try await a.createDocument(title: "T")
        let p = try #require(await da.pageList.first?.id)
        try await da.addStroke(marked(1), to: p)
        let db = try await b.openDocument(da.id)
        #expect(try await db.elements(p).map { marker(of: $0) } == [1])
        let logPath = da.paths.log(p)
        let before = try #require(FileManager.default.attributesOfItem(atPath: logPath)[.size] as? Int)
        try await db.addStroke(marked(2), to: p)
        let after = try #require(FileManager.default.attributesOfItem(atPath: logPath)[.size] as? Int)
        rec.reset()
        #expect(try await da.elements(p).map { marker(of: $0) } == [1, 2])
        // Only the new frame was read ([PKG-87]).
        let reads = rec.all.filter { $0.kind == .read && $0.path == logPath }.map(\.byteCount)
        #expect(reads == [after - before], "reads of the page log: \(reads)")
        try await db.setTitle("B's title")
        #expect(await da.title == "B's title")
        try await a.close()
        try await b.close()
    }

    @Test("[PKG-84] [LOG-2] two handles of one replica appending to one page at once: counters 1…N in log order, Lamport timestamps increasing, every stroke once")
    func concurrentAppendsOfOneReplica() async throws {
        let seed = testSeed()
        print("seed \(seed) (LNOTE_SEED=\(seed) reruns it)")
        var rng = SeededRNG(seed: seed)
        let dir = try TempDir("appends")
        defer { dir.remove() }
        let a = try await openNotebook(dir.path)
        let b = try await openNotebook(dir.path)
        let da = try await a.createDocument(title: "Race")
        let p = try #require(await da.pageList.first?.id)
        let db = try await b.openDocument(da.id)
        let perWriter = 40 + rng.int(in: 0...40)
        // Batches of 1 to 3 strokes, so that appends of several frames interleave too.
        var plans: [[[Int]]] = [[], []]
        for w in 0..<2 {
            var i = 0
            while i < perWriter {
                let n = min(perWriter - i, 1 + rng.int(in: 0...2))
                plans[w].append((i..<(i + n)).map { 1000 * (w + 1) + $0 })
                i += n
            }
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (w, d) in [da, db].enumerated() {
                let batches = plans[w]
                group.addTask { for batch in batches { _ = try await d.addStrokes(batch.map(marked), to: p) } }
            }
            try await group.waitForAll()
        }
        try await a.close()
        try await b.close()
        let c = try await openNotebook(dir.path)
        let d = try await c.openDocument(da.id)
        let ops = try await d.operations(page: p, notCoveredBy: VectorClock())
        #expect(ops.map(\.id.counter) == Array(1...UInt64(2 * perWriter)), "seed \(seed)")
        #expect(Set(ops.map(\.id.replica)) == [c.replica])
        #expect(ops.map(\.lamport) == Array(1...UInt64(2 * perWriter)), "seed \(seed)")
        let markers = try await d.elements(p).compactMap(marker(of:))
        #expect(markers.count == 2 * perWriter && Set(markers) == Set(plans.flatMap { $0.flatMap { $0 } }), "seed \(seed)")
        let report = try await c.verify()
        #expect(report.problems.isEmpty, "\(report.problems)")
        try await c.close()
    }

    @Test("[PKG-80] [PKG-81] a writer waits for the document lock at most lockTimeout, then fails naming it; [PKG-85] readers are not kept waiting")
    func boundedWait() async throws {
        let dir = try TempDir("wait")
        defer { dir.remove() }
        let nb = try await openNotebook(dir.path, options: testOptions { $0.lockTimeout = .milliseconds(300) })
        let d = try await nb.createDocument(title: "Held")
        let p = try #require(await d.pageList.first?.id)
        try await d.addStroke(marked(1), to: p)
        let lock = FileLock(path: d.paths.lock, io: .live, timeout: .seconds(1))
        let held = try lock.acquire()
        let clock = ContinuousClock()
        let start = clock.now
        do {
            try await d.addStroke(marked(2), to: p)
            Issue.record("an append went through while another holder had the lock")
        } catch let e as LnoteError {
            #expect(e.code == .invalidState && e.path == d.paths.lock, "\(e)")
        }
        let waited = clock.now - start
        #expect(waited >= .milliseconds(280) && waited < .seconds(3), "waited \(waited)")
        // A reader is not kept waiting by the lock: it reads while the lock is still held
        // (released only below), where waiting for it would fail after lockTimeout.
        #expect(try await d.elements(p).map { marker(of: $0) } == [1])
        // A writer that starts waiting gets the lock as soon as it is released.
        let writer = Task { try await d.addStroke(marked(3), to: p) }
        try await Task.sleep(for: .milliseconds(100))
        held.release()
        _ = try await writer.value
        #expect(try await d.elements(p).map { marker(of: $0) } == [1, 3])
        try await nb.close()
    }

    @Test("[PKG-85] [PKG-86] a reader opens and reads with the lock held elsewhere, and writes nothing")
    func readersWriteNothing() async throws {
        let dir = try TempDir("reader")
        defer { dir.remove() }
        let a = try await openNotebook(dir.path)
        let da = try await a.createDocument(title: "R")
        let p = try #require(await da.pageList.first?.id)
        for i in 0..<5 { try await da.addStroke(marked(i), to: p) }
        try await da.flush()
        try await da.addStroke(marked(5), to: p)  // past the snapshot: the reader replays it
        let held = try FileLock(path: da.paths.lock, io: .live, timeout: .seconds(1)).acquire()
        let rec = SyscallRecorder()
        let b = try await openNotebook(dir.path, io: Syscalls(recorder: rec), options: testOptions { $0.lockTimeout = .milliseconds(200) })
        rec.reset()
        let db = try await b.openDocument(da.id)
        #expect(try await db.elements(p).compactMap(marker(of:)) == Array(0...5))
        #expect(await db.pageList.count == 1)
        let mutations = rec.all.filter { $0.kind.mutates }
        #expect(mutations.isEmpty, "a reader wrote: \(mutations)")
        held.release()
        try await a.close()
        try await b.close()
    }

    @Test("[PKG-37] [PKG-85] a partial frame at a log's end is left alone by readers and cut by the next writer")
    func partialTail() async throws {
        let dir = try TempDir("tail")
        defer { dir.remove() }
        let a = try await openNotebook(dir.path)
        let da = try await a.createDocument(title: "Tail")
        let p = try #require(await da.pageList.first?.id)
        try await da.addStroke(marked(1), to: p)
        try await a.close()
        // Half of a real frame at the end: what a reader sees during an append, or a dead
        // writer left.
        let frame = OperationCodec.encode(Op(id: OpID(replica: ReplicaID(7), counter: 1), lamport: 2,
                                                 context: VectorClock(), wallTime: 0, body: .add(.stroke(marked(9)), z: ZKey(layer: 2))))
        let path = da.paths.log(p)
        let handle = try #require(FileHandle(forWritingAtPath: path))
        handle.seekToEndOfFile()
        handle.write(Data(frame.prefix(frame.count / 2)))
        try handle.close()
        let size = try #require(FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)
        let reader = try await openNotebook(dir.path)
        let dr = try await reader.openDocument(da.id)
        #expect(try await dr.elements(p).compactMap(marker(of:)) == [1])
        #expect(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int == size, "a reader cut the tail")
        // The writer, under the lock, knows nobody is writing: the tail is cut, then appended after.
        try await dr.addStroke(marked(2), to: p)
        #expect(try await dr.elements(p).compactMap(marker(of:)) == [1, 2])
        #expect(await dr.recoveryReports.contains { $0.tornTail?.bytes == frame.count / 2 })
        try await reader.close()
        let report = try Verify.run(folder: dir.path)
        #expect(report.problems.isEmpty, "\(report.problems)")
    }

    @Test("[PKG-87] a log another handle rewrote is read again, and `reloaded` says so")
    func rewrittenLogIsReread() async throws {
        let dir = try TempDir("rewrite")
        defer { dir.remove() }
        let a = try await openNotebook(dir.path)
        let da = try await a.createDocument(title: "W")
        let p = try #require(await da.pageList.first?.id)
        for i in 0..<4 { try await da.addStroke(marked(i), to: p) }
        let events = EventCollector(await da.changes)
        // Damage in the page log's last frame, written whole and flipped later (not a torn
        // tail): whoever reads it next salvages the log (a new file). The lost operation is
        // this replica's own, so the folder mints a new id ([PKG-56]); nothing waits for it,
        // being the last.
        let path = da.paths.log(p)
        var bytes = try #require(fileBytes(path))
        let frames = LogScanner.scanFile(bytes).frames
        bytes[Int(frames[3].offset) + 6] ^= 0xFF
        let b = try await openNotebook(dir.path)
        let db = try await b.openDocument(da.id)
        try writeFile(path, bytes)
        let read = try await db.elements(p).compactMap(marker(of:))
        let reports = await db.recoveryReports
        #expect(read == [0, 1, 2], "\(read) \(reports)")
        #expect(reports.contains { $0.quarantinedCopy != nil })
        // The other handle notices the new file at its next read.
        #expect(try await da.elements(p).compactMap(marker(of:)) == [0, 1, 2])
        #expect(await events.wait { $0.contains { $0.kind == .reloaded && $0.page == p } })
        try await da.addStroke(marked(4), to: p)
        #expect(try await db.elements(p).compactMap(marker(of:)) == [0, 1, 2, 4])
        #expect(try await da.elements(p).map(\.id.replica) == [da.replica, da.replica, da.replica, db.replica], "the new id stamps it")
        events.stop()
        try await a.close()
        try await b.close()
    }

    @Test("[PKG-89] [PKG-83] a replica id one handle mints is the one the other handle's next append uses")
    func mintedIDIsAdopted() async throws {
        let dir = try TempDir("mint")
        defer { dir.remove() }
        let a = try await openNotebook(dir.path)
        let b = try await openNotebook(dir.path)
        let da = try await a.createDocument(title: "M")
        let p = try #require(await da.pageList.first?.id)
        let old = a.replica
        let change = try await b.remintReplica(reason: "test")
        #expect(change.old == old && b.replica == change.new)
        let id = try await da.addStroke(marked(1), to: p)
        #expect(id.replica == change.new)
        #expect(a.replica == change.new && a.previousReplicas.contains(old))
        // Both mint at once: one id wins, nobody writes under an id the file does not hold.
        async let x = a.remintReplica(reason: "a")
        async let y = b.remintReplica(reason: "b")
        _ = try await (x, y)
        let file = try StoreJSON.decode(Notebook.ReplicaFile.self, try #require(fileBytes(dir.sub(".lnote/replica.json"))), path: "")
        let id2 = try await da.addStroke(marked(2), to: p)
        #expect(id2.replica.description == file.replica)
        try await a.close()
        try await b.close()
    }

    @Test("[PKG-90] two handles receiving the same new document at once make one package holding everything")
    func sameNewDocumentTwice() async throws {
        let dir = try TempDir("recv")
        defer { dir.remove() }
        let src = try await openNotebook(dir.sub("src"))
        let ds = try await src.createDocument(title: "From afar")
        let p = try #require(await ds.pageList.first?.id)
        for i in 0..<3 { try await ds.addStroke(marked(i), to: p) }
        let docOps = try await ds.operations(notCoveredBy: VectorClock())
        let pageOps = try await ds.operations(page: p, notCoveredBy: VectorClock())
        let a = try await openNotebook(dir.sub("dst"))
        let b = try await openNotebook(dir.sub("dst"))
        try await withThrowingTaskGroup(of: Void.self) { group in
            for nb in [a, b] {
                group.addTask {
                    try await nb.receive(docOps, document: ds.id, page: nil)
                    try await nb.receive(pageOps, document: ds.id, page: p)
                }
            }
            try await group.waitForAll()
        }
        try await a.close()
        try await b.close()
        #expect(listNames(dir.sub("dst")).filter { $0.hasSuffix(".lnote") && $0 != ".lnote" } == ["\(ds.id).lnote"])
        let c = try await openNotebook(dir.sub("dst"))
        let d = try await c.openDocument(ds.id)
        #expect(try await d.pageState(p) == ds.pageState(p))
        #expect(try await d.operations(page: p, notCoveredBy: VectorClock()).count == 3, "each operation once")
        #expect(try await c.verify().problems.isEmpty)
        try await c.close()
        try await src.close()
    }

    @Test("[PKG-91] [PKG-2] [PKG-83] a package another process is creating is left alone; a dead creator's is removed")
    func stagedPackages() async throws {
        let dir = try TempDir("staged")
        defer { dir.remove() }
        let nb = try await openNotebook(dir.path)
        try await nb.close()
        let staged = dir.sub(".\(DocumentID()).lnote.tmp-0123456789abcdef")
        try FileManager.default.createDirectory(atPath: staged, withIntermediateDirectories: false)
        let held = try FileLock(path: staged + "/lock", io: .live, timeout: .seconds(1)).acquire()
        let again = try await openNotebook(dir.path)
        try await again.close()
        #expect(FileManager.default.fileExists(atPath: staged), "a live creator's package was removed")
        held.release()
        let third = try await openNotebook(dir.path)
        try await third.close()
        #expect(!FileManager.default.fileExists(atPath: staged), "a dead creator's package was kept")
    }

    @Test("[PKG-88] [PKG-93] after two handles edit the same pages and close, snapshots pair with their logs and the manifest is current")
    func savesOfTwoHandles() async throws {
        let dir = try TempDir("saves")
        defer { dir.remove() }
        let a = try await openNotebook(dir.path)
        let b = try await openNotebook(dir.path)
        let da = try await a.createDocument(title: "S")
        let p0 = try #require(await da.pageList.first?.id)
        let p1 = try await da.addPage()
        let db = try await b.openDocument(da.id)
        for i in 0..<6 {
            try await (i % 2 == 0 ? da : db).addStroke(marked(i), to: i % 3 == 0 ? p0 : p1)
            if i % 2 == 1 { try await (i % 4 == 1 ? da : db).flush() }
        }
        try await db.setTitle("Saved by two")
        try await a.close()
        try await b.close()
        let report = try Verify.run(folder: dir.path)
        #expect(report.problems.isEmpty, "\(report.problems)")
        #expect(try Notebook.manifestIsCurrent(da.paths, io: .live))
        let list = try Notebook.list(at: dir.path)
        #expect(list.first?.title == "Saved by two" && list.first?.elementCount == 6)
    }

    @Test("[PKG-94] openDocument of one id from many tasks at once gives one handle; the last lease given back closes it")
    func concurrentOpens() async throws {
        let dir = try TempDir("opens")
        defer { dir.remove() }
        let nb = try await openNotebook(dir.path)
        let created = try await nb.createDocument(title: "Once")  // one lease, given back
        let id = created.id
        try await created.close()
        #expect(await created.isClosed)
        let handles = try await withThrowingTaskGroup(of: Document.self) { group in
            for _ in 0..<32 { group.addTask { try await nb.openDocument(id) } }
            var out: [Document] = []
            for try await d in group { out.append(d) }
            return out
        }
        let first = handles[0]
        #expect(handles.allSatisfy { $0 === first })
        let p = try #require(await first.pageList.first?.id)
        for d in handles.dropLast() { try await d.close() }
        #expect(await !first.isClosed, "closed while a lease was out")
        try await first.addStroke(marked(1), to: p)
        try await handles.last!.close()
        #expect(await first.isClosed)
        // Two opens at once, one closing the handle as soon as it has it: the other's lease
        // keeps it open (the lease is set before either caller gets the handle).
        for round in 0..<200 {
            async let quick: Void = { try await nb.openDocument(id).close() }()
            let kept = try await nb.openDocument(id)
            try await quick
            #expect(await !kept.isClosed, "round \(round): closed under a holder")
            try await kept.addStroke(marked(round), to: p)
            try await kept.close()
        }
        try await nb.close()
    }

    @Test("[PKG-84] [LOG-23] a batch refused halfway leaves nothing: no id applied here and allocated again by another handle")
    func refusedBatchAllocatesNothing() async throws {
        let dir = try TempDir("batch")
        defer { dir.remove() }
        let a = try await openNotebook(dir.path), b = try await openNotebook(dir.path)
        let da = try await a.createDocument(title: "Batch")
        let p = try #require(await da.pageList.first?.id)
        let db = try await b.openDocument(da.id)
        try await da.addStroke(marked(1), to: p)
        let beyond = Stroke(points: [StrokePoint(x: 0, y: 0), StrokePoint(x: 200_000_000, y: 0, t: 5)])
        await #expect(throws: LnoteError(.invalidArgument)) { try await da.addStrokes([marked(2), beyond], to: p) }
        #expect(try await da.elements(p).compactMap(marker(of:)) == [1], "nothing of the refused batch")
        let other = try await db.addStroke(marked(3), to: p)
        let mine = try await da.addStroke(marked(4), to: p)
        #expect(other != mine)
        let shownA = try await da.elements(p).map(\.id), shownB = try await db.elements(p).map(\.id)
        #expect(shownA == shownB && Set(shownA).count == 3, "\(shownA) \(shownB)")
        #expect(try await da.elements(p).compactMap(marker(of:)) == [1, 3, 4])
        try await a.close()
        try await b.close()
        #expect(try Verify.run(folder: dir.path).problems.isEmpty)
    }

    @Test("[PKG-64] [PKG-87] clocks cached while another handle appends are never below what the log holds")
    func clockCacheBesideAWriter() async throws {
        let dir = try TempDir("clockcache")
        defer { dir.remove() }
        let a = try await openNotebook(dir.path), b = try await openNotebook(dir.path)
        let d = try await a.createDocument(title: "Cache")
        let p = try #require(await d.pageList.first?.id)
        try await d.addStroke(marked(0), to: p)
        let writer = Task { for i in 1...80 { try await d.addStroke(marked(i), to: p) } }
        var reads = 0
        while !Task.isCancelled {
            _ = try await b.logClocks()  // reads, and caches, while the writer appends
            reads += 1
            if reads > 2000 { break }
            if await { () async -> Bool in (try? await d.clock(page: p))?[a.replica] == 81 }() { break }
        }
        try await writer.value
        // Nothing appends now: a cached clock must be what the log holds.
        let truth = try await d.clock(page: p)
        for round in 0..<3 {
            let listed = try await b.logClocks().first { $0.document == d.id && $0.page == p }?.clock
            #expect(listed == truth, "round \(round) after \(reads) reads: \(String(describing: listed)) but the log holds \(truth)")
        }
        try await a.close()
        try await b.close()
    }

    @Test("[PKG-94] deleting, restoring, syncing and closing while an app holds a document never close it under the app")
    func leasesKeepTheAppsHandle() async throws {
        let dir = try TempDir("lease")
        defer { dir.remove() }
        let nb = try await openNotebook(dir.path)
        let app = try await nb.createDocument(title: "App")
        let p = try #require(await app.pageList.first?.id)
        try await nb.deleteDocument(app.id)
        try await app.addStroke(marked(1), to: p)
        try await nb.restoreDocument(app.id)
        _ = try await nb.frames(document: app.id, page: p, notCoveredBy: VectorClock())
        _ = try await nb.logClocks()
        #expect(await !app.isClosed)
        try await app.addStroke(marked(2), to: p)
        // The app closes while the notebook's own work holds a lease: that work goes on.
        let started = Mutex(false)
        let sync = Task {
            try await nb.withDocument(app.id) { d in
                started.withLock { $0 = true }
                try await Task.sleep(for: .milliseconds(200))
                try await d.addStroke(marked(3), to: p)
                return try await d.elements(p).count
            }
        }
        while !started.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(5)) }
        try await app.close()
        #expect(try await sync.value == 3)
        #expect(await app.isClosed, "the last lease closes it")
        let again = try await nb.openDocument(app.id)
        #expect(try await again.elements(p).compactMap(marker(of:)) == [1, 2, 3])
        try await nb.close()
    }

    /// A notebook dropped without `close()` while it holds open documents: its deinit runs on
    /// its own thread and releases the documents, whose deinits run on theirs. The executor
    /// must outlive the job that releases it (a crash in `lnote-bench` case 9 before).
    @Test("a notebook and its documents dropped without close() deinit on their threads without crashing")
    func droppedWithoutClosing() async throws {
        let dir = try TempDir("dropped")
        defer { dir.remove() }
        let setup = try await openNotebook(dir.path)
        let id = try await setup.createDocument(title: "Dropped").id
        try await setup.close()
        func openAndDrop(_ round: Int) async throws {
            let nb = try await openNotebook(dir.path)
            let d = try await nb.openDocument(id)
            let p = try #require(await d.pageList.first?.id)
            try await d.addStroke(marked(round), to: p)
            _ = try await d.elements(p)
        }
        for round in 0..<30 { try await openAndDrop(round) }
        try await Task.sleep(for: .milliseconds(100))  // the deinits, on their threads
        let nb = try await openNotebook(dir.path)
        let d = try await nb.openDocument(id)
        #expect(try await d.elements(try #require(await d.pageList.first?.id)).count == 30, "every stroke was durable")
        try await nb.close()
    }

    @Test("documents and notebooks run on threads of their own, never on Swift's cooperative threads")
    func storeThreads() async throws {
        let dir = try TempDir("threads")
        defer { dir.remove() }
        let nb = try await openNotebook(dir.path)
        let d = try await nb.createDocument(title: "Threads")
        let notebookThread = await nb.currentThreadName(), documentThread = await d.currentThreadName()
        #expect(notebookThread == "lnote.notebook", "\(String(describing: notebookThread))")
        #expect(documentThread == "lnote.document", "\(String(describing: documentThread))")
        try await nb.close()
    }

    @Test("a store thread carries its name from its first job, whichever thread made it (Dispatch workers, Swift tasks)")
    func storeThreadNamedBeforeFirstJob() async throws {
        // Foundation's Thread.name set from inside a new thread loses a race with start()
        // (the CI saw "oot.default-qos", a Dispatch worker's name, on a notebook thread).
        @Sendable func makeAndAsk(_ i: Int) async throws -> String? {
            let executor = StoreExecutor(name: "lnote.t\(i % 10)")
            return try await executor.run { ThreadName.current }
        }
        for i in 0..<3000 {
            let fromDispatch = try await withCheckedThrowingContinuation { (c: CheckedContinuation<String?, Error>) in
                DispatchQueue.global().async {
                    Task { do { c.resume(returning: try await makeAndAsk(i)) } catch { c.resume(throwing: error) } }
                }
            }
            #expect(fromDispatch == "lnote.t\(i % 10)", "executor \(i): \(String(describing: fromDispatch))")
            let fromTask = try await Task.detached { try await makeAndAsk(i) }.value
            #expect(fromTask == "lnote.t\(i % 10)", "executor \(i): \(String(describing: fromTask))")
        }
    }

    @Test("a thread's name longer than Linux keeps is cut at a character boundary")
    func threadNameCut() async throws {
        let names = ["lnote.document", "lnote.exactly15", "lnote.sixteen16x", "lnote.é日本語の名前", "ééééééééé", "日本語日本語"]
        for name in names {
            let got = try await StoreExecutor(name: "lnote.probe").run { () -> String? in
                ThreadName.setCurrent(name)
                return ThreadName.current
            }
            let kept = try #require(got, "\(name)")
            #expect(kept.utf8.count <= ThreadName.maxBytes, "\(name) -> \(kept)")
            #expect(name.hasPrefix(kept), "\(name) -> \(kept)")
            #expect(kept.utf8.count > ThreadName.maxBytes - 4 || kept == name, "\(name) -> \(kept): cut more than one character")
        }
    }
}
