import Foundation
import Synchronization
import Testing
import LnoteModel
@testable import LnoteStore
import LnoteServer
import LnoteSync
import LnoteTestSupport

/// [PKG-96] A new folder's first pull from `lnote serve` creates the received documents as one
/// batch: every staged file synced before any package is renamed into place, the folder synced
/// once after the renames, the cursor saved only after that; and a crash at each step of it
/// leaves a folder that opens undamaged and converges on the next sync with nothing lost.
@Suite struct FirstSyncBatchTests {
    /// Five documents, one of them with three pages, served by a real `PeerServer`.
    static func served(_ dir: TempDir) async throws -> (path: String, notebook: Notebook, server: PeerServer) {
        let a = dir.sub("A")
        let nb = try await Notebook.open(at: a, create: true, options: Fixture.quiet)
        var gen = HandwritingGenerator(seed: 96)
        for i in 0..<5 {
            let d = try await nb.createDocument(title: "document \(i)")
            var pages = [await d.pageList[0].id]
            if i == 2 { pages += [try await d.addPage(), try await d.addPage()] }
            for p in pages { _ = try await d.addStrokes(gen.strokes(2 + i), to: p) }
            try await d.close()
        }
        let server = try PeerServer(notebook: nb, token: Fixture.peerToken)
        return (a, nb, server)
    }

    /// Pulls into `b` (a new folder) through a seam with `plan`; true when the sync completed.
    static func pull(_ b: String, from url: String, plan: FaultPlan?, recorder: SyscallRecorder? = nil,
                     arm: (() -> Void)? = nil) async throws -> Bool {
        let nb = try await Notebook(path: b, create: true, options: Fixture.quiet, io: Syscalls(faults: plan, recorder: recorder))
        arm?()
        do {
            let remote = try HTTPRemote(url: url, options: .init(token: Fixture.peerToken))
            defer { try? remote.close() }
            _ = try await SyncSession(notebook: nb, remote: remote).run()
            try await nb.close()
            return true
        } catch {
            try? await nb.close()
            return false
        }
    }

    @Test("[PKG-96] [PKG-97] a first pull syncs every staged file before the first rename, the folder once after, then saves the cursor")
    func batchOrder() async throws {
        let dir = try TempDir()
        let (a, served, server) = try await Self.served(dir)
        defer { try? server.close() }
        let b = dir.sub("B")
        let recorder = SyscallRecorder()
        // Only the pull's calls: the folder's creation is recorded before `arm`.
        let done = try await Self.pull(b, from: server.url, plan: nil, recorder: recorder, arm: { recorder.reset() })
        #expect(done)
        let events = recorder.all
        let packageRenames = events.indices.filter { events[$0].kind == .rename && events[$0].path.hasSuffix(PackagePaths.suffix) }
        #expect(packageRenames.count == 5, "one rename per received document: \(packageRenames.count)")
        let staged = events.indices.filter { events[$0].path.contains(".lnote.tmp-") }
        let stagedWrites = staged.filter { events[$0].kind == .write }
        let firstRename = try #require(packageRenames.first), lastRename = try #require(packageRenames.last)
        // 5 document logs, 7 page logs, 7 snapshots, 5 document.json, 5 manifests: 29 files,
        // enough for one syncfs of the folder's file system (recorded as an fsync of the folder)
        // rather than an fsync per file and staged directory.
        #expect(stagedWrites.count >= 29)
        // [PKG-97] No thumbnail is rendered on install.
        #expect(!staged.contains { events[$0].path.contains("/thumbnails/") && events[$0].kind.mutates },
                "a received page's thumbnail waits until it is asked for")
        let syncs = events.indices.filter { (events[$0].kind == .fsync || events[$0].kind == .fdatasync) && $0 < firstRename }
        let batchSync = try #require(syncs.last)
        #expect(events[batchSync].path == b, "the batch is synced by one syncfs: \(events[batchSync])")
        #expect(stagedWrites.allSatisfy { $0 < batchSync }, "every file is written before the batch's sync")
        #expect(!syncs.contains { events[$0].path.contains(".lnote.tmp-") }, "no staged file synced one by one")
        let folderSyncs = events.indices.filter { $0 > lastRename && events[$0].kind == .fsync && events[$0].path == b }
        #expect(folderSyncs.count == 1, "the folder is synced once after the renames")
        let cursor = events.indices.filter { events[$0].path.contains("/.lnote/remotes/") && events[$0].kind.mutates }
        #expect(!cursor.isEmpty && cursor.allSatisfy { $0 > folderSyncs.first! }, "the cursor is saved after the batch is durable")
        let fsyncs = events.filter { $0.kind == .fsync || $0.kind == .fdatasync }.count
        let files = Set(stagedWrites.map { events[$0].path }).count
        try server.close()
        try await served.close()
        #expect(try await Fixture.canonical(a) == Fixture.canonical(b))
        // The whole pull, the clock cache and the cursor included (6 here), for the report.
        #expect(fsyncs < files, "the batch costs fewer syncs than files: \(fsyncs) for \(files)")
        print("FirstSyncBatchTests: first pull of 5 documents: \(fsyncs) fsync/fdatasync calls for \(files) file writes")
    }

    /// A crash point: the n-th call (0-based) for which `matches` is true, once armed.
    struct CrashPoint: Sendable {
        var name: String
        var nth: Int = 0
        var matches: @Sendable (SyscallEvent) -> Bool
    }

    static let points: [CrashPoint] = [
        CrashPoint(name: "while staging (a page log half written)") { $0.kind == .write && $0.path.contains(".lnote.tmp-") && $0.path.hasSuffix(".log") && $0.path.contains("/pages/") },
        // The first sync of the pull is the batch's syncfs (recorded as an fsync of the folder).
        CrashPoint(name: "after staging, at the batch's sync") { ($0.kind == .fsync || $0.kind == .fdatasync) && !$0.path.contains("/.lnote/") },
        CrashPoint(name: "after the syncs, at the first rename") { $0.kind == .rename && $0.path.hasSuffix(PackagePaths.suffix) },
        CrashPoint(name: "mid-renames (the third)", nth: 2) { $0.kind == .rename && $0.path.hasSuffix(PackagePaths.suffix) },
        // The folder's first fsync in the pull is the batch's syncfs; the second follows the renames.
        CrashPoint(name: "after the renames, at the folder sync", nth: 1) { $0.kind == .fsync && !$0.path.contains(".lnote") },
        CrashPoint(name: "before the cursor is saved") { $0.path.contains("/.lnote/remotes/") && $0.kind.mutates },
    ]

    @Test("[PKG-96] [PKG-52] [SYNC-7] a crash at each step of a batched first pull reopens undamaged and converges, nothing lost")
    func crashAtEachStepOfABatchedPull() async throws {
        let dir = try TempDir()
        let (a, served, server) = try await Self.served(dir)
        defer { try? server.close() }
        // The named steps, then mutations of the pull chosen at random (seeded).
        let seed = ProcessInfo.processInfo.environment["LNOTE_SEED"].flatMap(UInt64.init) ?? UInt64.random(in: 0...UInt64(UInt32.max))
        var rng = SplitMix64(seed: seed)
        let counter = Mutex(0)
        let armed = Mutex(false)
        let counting = FaultPlan { e in
            if e.kind.mutates, armed.withLock({ $0 }) { counter.withLock { $0 += 1 } }
            return nil
        }
        #expect(try await Self.pull(dir.sub("count"), from: server.url, plan: counting, arm: { armed.withLock { $0 = true } }))
        let mutations = counter.withLock { $0 }
        var cases: [(String, @Sendable (SyscallEvent) -> Bool, Int)] = Self.points.map { ($0.name, $0.matches, $0.nth) }
        for _ in 0..<8 {
            let n = Int(rng.next() % UInt64(mutations))
            cases.append(("mutation \(n) of \(mutations)", { $0.kind.mutates }, n))
        }
        var checked = 0, lost = 0, corrupted = 0
        for (i, (name, matches, nth)) in cases.enumerated() {
            let context = "\(name) (seed \(seed))"
            let b = dir.sub("B\(i)")
            let seen = Mutex(0)
            let on = Mutex(false)
            let plan = FaultPlan { e in
                guard on.withLock({ $0 }), matches(e) else { return nil }
                let k = seen.withLock { s -> Int in
                    defer { s += 1 }
                    return s
                }
                return k == nth ? .crash(afterBytes: 3) : nil
            }
            let completed = try await Self.pull(b, from: server.url, plan: plan, arm: { on.withLock { $0 = true } })
            #expect(!completed || seen.withLock { $0 } <= nth, "\(context): the sync completed past its crash")
            #expect(completed || seen.withLock { $0 } > nth, "\(context): the sync failed without a crash")
            // Each named step is reached by every first pull.
            #expect(i >= Self.points.count || !completed, "\(context): the crash point was never reached")

            // Reopened without faults: no staged directory is left, nothing is damaged.
            let reopened = try await Notebook.open(at: b, options: Fixture.quiet)
            let leftovers = try FileManager.default.contentsOfDirectory(atPath: b).filter { $0.contains(".tmp-") }
            #expect(leftovers.isEmpty, "\(context): \(leftovers)")
            var damaged = false
            for id in try await reopened.documentIDs() {
                if try await reopened.openDocument(id).recoveryReports.contains(where: \.hasDamage) { damaged = true }
            }
            try await reopened.close()
            #expect(!damaged, "\(context): damage reported after reopening")
            let bad = try Verify.run(folder: b).problems.filter { ![.tornTail, .orphanAsset].contains($0.kind) }
            #expect(bad.isEmpty, "\(context): \(bad)")

            // The next sync brings everything: the same notebook, every operation in its log.
            try await Fixture.sync(b, server.url, token: Fixture.peerToken)
            let same = try await Fixture.canonical(b) == Fixture.canonical(a)
            #expect(same, "\(context): differs from the served notebook after the next sync")
            let nbB = try await Notebook.open(at: b, options: Fixture.quiet)
            let clocksB: [NotebookLogClock] = try await nbB.logClocks()
            try await nbB.close()
            let clocksA: [NotebookLogClock] = try await served.logClocks()
            let held = clocksA.map { "\($0.document) \($0.page.map(\.description) ?? "-") \($0.clock)" }
                == clocksB.map { "\($0.document) \($0.page.map(\.description) ?? "-") \($0.clock)" }
            #expect(held, "\(context): the logs do not hold what the served logs hold")
            if !same || !held { lost += 1 } else if damaged || !bad.isEmpty || !leftovers.isEmpty { corrupted += 1 }
            checked += 1
            try? FileManager.default.removeItem(atPath: b)
        }
        try server.close()
        try await served.close()
        ReliabilityReport.record(family: "syscall faults",
                                 detail: "crash at each step of a batched first pull over HTTP (\(Self.points.count) named steps, "
                                     + "8 seeded mutations; FirstSyncBatchTests)",
                                 cases: checked, lost: lost, corrupted: corrupted)
    }
}
