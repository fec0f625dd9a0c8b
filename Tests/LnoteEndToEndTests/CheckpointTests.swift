import Foundation
import Testing
import LnoteModel
import LnoteReplication
import LnoteStore
import LnoteSync
import LnoteServer

/// Checkpoints over real HTTP on loopback (`Protocol/sync-protocol.md` §5, [SYNC-40]..[SYNC-43]).
@Suite struct CheckpointTests {
    static func firstPage(_ path: String) async throws -> (DocumentID, PageID) {
        let nb = try await Notebook.open(at: path, options: Fixture.quiet)
        let doc = try await nb.documentIDs()[0]
        let pid = try await nb.openDocument(doc).pageList[0].id
        try await nb.close()
        return (doc, pid)
    }

    static func addStrokes(_ path: String, count: Int, seed: UInt64) async throws {
        let nb = try await Notebook.open(at: path, options: Fixture.quiet)
        let d = try await nb.openDocument(try await nb.documentIDs()[0])
        _ = try await d.addStrokes(HandwritingGenerator.strokes(seed: seed, count: count), to: await d.pageList[0].id)
        try await nb.close()
    }

    static func fileSize(_ path: String) throws -> Int {
        (try FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.intValue ?? 0
    }

    /// Syncs folder `from` with folder `to` in one process, as `lnote sync A B` does.
    static func folderSync(_ from: String, _ to: String) async throws -> SyncReport {
        let a = try await Notebook.open(at: from, create: true, options: Fixture.quiet)
        let b = try await Notebook.open(at: to, create: true, options: Fixture.quiet)
        do {
            let r = try await SyncSession(notebook: a, remote: LocalRemote(key: to, endpoint: NotebookEndpoint(notebook: b))).run()
            try await a.close()
            try await b.close()
            return r
        } catch {
            try? await a.close()
            try? await b.close()
            throw error
        }
    }

    /// [SYNC-40] [SYNC-41] [SYNC-42] A page of 2,000 strokes (half erased again) synced to
    /// a relay leaves a checkpoint there; a newcomer installs it and pulls only the tail, converges, and
    /// keeps syncing both ways; it does not upload the checkpoint it installed.
    @Test func newcomerInstallsCheckpointAndPullsOnlyTheTail() async throws {
        let dir = try TempDir()
        let relay = try LocalRelay(dir: dir)
        defer { relay.close() }
        let a = dir.sub("A"), b = dir.sub("B")
        _ = try await Fixture.notebook(at: a, strokes: 2000, seed: 11)
        let (doc, pid) = try await Self.firstPage(a)
        // Half the ink is erased again (kept whole in the checkpoint's tombstones, [MERGE-30]).
        let nbA = try await Notebook.open(at: a, options: Fixture.quiet)
        let dA = try await nbA.openDocument(doc)
        let live = try await dA.elements(pid).map(\.id)
        for chunk in stride(from: 0, to: 1000, by: 100) { try await dA.erase(Array(live[chunk..<chunk + 100]), on: pid) }
        let total = Int(try await dA.clock(page: pid).total)
        try await nbA.close()
        #expect(total > 2000)

        let r1 = try await Fixture.sync(a, relay.url, token: relay.token)
        #expect(r1.opsSent == total + 2)
        #expect(r1.checkpointsSent == 1)
        let held = try relay.store.checkpoints(notebook: relay.notebook)
        #expect(held.map(\.log) == [LogRef(document: doc, page: pid)])
        #expect(held.first?.clock.total == UInt64(total))
        // Nothing new: no second upload.
        #expect(try await Fixture.sync(a, relay.url, token: relay.token).checkpointsSent == 0)

        // A few strokes more at A, below the interval: they stay operations (the tail).
        try await Self.addStrokes(a, count: 20, seed: 12)
        let r2 = try await Fixture.sync(a, relay.url, token: relay.token)
        #expect(r2.opsSent == 20)
        #expect(r2.checkpointsSent == 0)

        let logSize = try Self.fileSize(PackagePaths(folder: a, id: doc).log(pid))
        let r3 = try await Fixture.sync(b, relay.url, token: relay.token)
        #expect(r3.checkpointsInstalled == 1)
        #expect(r3.checkpointsRejected == 0)
        #expect(r3.opsReceived == 2 + 20, "the document log (createDocument, addPage) and the 20-operation tail")
        // The checkpoint keeps the erased strokes whole ([MERGE-30]: a restore may bring any
        // back), in the version-1 record form ([SNAP-40]): about the log's size, not a third less.
        #expect(r3.bytesReceived < logSize * 5 / 4, "received \(r3.bytesReceived) bytes; the page log is \(logSize)")
        #expect(r3.checkpointsSent == 0, "the installed checkpoint is not uploaded back")
        #expect(try await Fixture.canonical(a) == Fixture.canonical(b))

        // The newcomer's folder is sound, and records the base of its page ([PKG-46]).
        let nb = try await Notebook.open(at: b, options: Fixture.quiet)
        let report = try await nb.verify()
        #expect(report.problems.isEmpty, "\(report.problems)")
        let d = try await nb.openDocument(doc)
        #expect(try await d.baseClock(page: pid)?.total == UInt64(total))
        #expect(try await d.clock(page: pid).total == UInt64(total + 20))
        try await nb.close()

        // Both ways afterwards: B's edit reaches A, A's reaches B.
        try await Self.addStrokes(b, count: 3, seed: 13)
        #expect(try await Fixture.sync(b, relay.url, token: relay.token).opsSent == 3)
        #expect(try await Fixture.sync(a, relay.url, token: relay.token).opsReceived == 3)
        try await Self.addStrokes(a, count: 2, seed: 14)
        try await Fixture.sync(a, relay.url, token: relay.token)
        #expect(try await Fixture.sync(b, relay.url, token: relay.token).opsReceived == 2)
        #expect(try await Fixture.canonical(a) == Fixture.canonical(b))

        // 300 more operations at B: past the interval since the installed checkpoint.
        try await Self.addStrokes(b, count: 300, seed: 15)
        #expect(try await Fixture.sync(b, relay.url, token: relay.token).checkpointsSent == 1)
        #expect(try relay.store.checkpoints(notebook: relay.notebook).first?.clock.total == UInt64(total + 325))

        // A third machine joins from the newer checkpoint: no tail at all in that page.
        #expect(try await Fixture.sync(a, relay.url, token: relay.token).opsReceived == 300)
        let c = dir.sub("C")
        let r4 = try await Fixture.sync(c, relay.url, token: relay.token)
        #expect(r4.checkpointsInstalled == 1)
        #expect(r4.opsReceived == 2)
        #expect(try await Fixture.canonical(a) == Fixture.canonical(c))
    }

    /// [SYNC-43] A replica installed from a checkpoint lacks the operations before it: a
    /// folder-to-folder sync with an empty folder fails with a clear error in both
    /// directions, and the empty folder receives nothing of that page (no silent loss).
    @Test func installedReplicaRefusesToServeHistoryItLacks() async throws {
        let dir = try TempDir()
        let relay = try LocalRelay(dir: dir)
        defer { relay.close() }
        let a = dir.sub("A"), b = dir.sub("B")
        _ = try await Fixture.notebook(at: a, strokes: 300, seed: 21)
        #expect(try await Fixture.sync(a, relay.url, token: relay.token).checkpointsSent == 1)
        #expect(try await Fixture.sync(b, relay.url, token: relay.token).checkpointsInstalled == 1)

        for (from, to) in [(b, dir.sub("C")), (dir.sub("D"), b)] {
            do {
                _ = try await Self.folderSync(from, to)
                Issue.record("sync \(from) → \(to) succeeded with a replica lacking history")
            } catch let e as LnoteError {
                #expect(e.code == .invalidState)
                #expect(e.message.contains("history before checkpoint clock"), "\(e)")
            }
        }
        // A relay still serves the installed replica's peers: C joins through it.
        try await Fixture.sync(dir.sub("C"), relay.url, token: relay.token)
        #expect(try await Fixture.canonical(a) == Fixture.canonical(dir.sub("C")))

        // A folder that already holds the history (A) syncs with B folder to folder.
        try await Self.addStrokes(b, count: 4, seed: 22)
        let r = try await Self.folderSync(b, a)
        #expect(r.opsSent == 4)
        #expect(try await Fixture.canonical(a) == Fixture.canonical(b))
    }

    /// [PKG-46] A damaged snapshot of an installed page is rebuilt from the checkpoint kept
    /// in its `.base` file plus its whole log: nothing is lost, and syncing goes on.
    @Test func damagedInstalledSnapshotHealsFromTheRelay() async throws {
        let dir = try TempDir()
        let relay = try LocalRelay(dir: dir)
        defer { relay.close() }
        let a = dir.sub("A"), b = dir.sub("B")
        _ = try await Fixture.notebook(at: a, strokes: 300, seed: 31)
        let (doc, pid) = try await Self.firstPage(a)
        try await Fixture.sync(a, relay.url, token: relay.token)
        try await Fixture.sync(b, relay.url, token: relay.token)
        try await Self.addStrokes(b, count: 5, seed: 32)

        let content = PackagePaths(folder: b, id: doc).content(pid)
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: content)))
        bytes[bytes.count / 2] ^= 0x55
        try Data(bytes).write(to: URL(fileURLWithPath: content))

        let r = try await Fixture.sync(b, relay.url, token: relay.token)
        #expect(r.opsSent == 5)
        #expect(try await Fixture.sync(a, relay.url, token: relay.token).opsReceived == 5)
        #expect(try await Fixture.canonical(a) == Fixture.canonical(b))
        let nb = try await Notebook.open(at: b, options: Fixture.quiet)
        #expect(try await nb.openDocument(doc).clock(page: pid).total == 305)
        try await nb.close()
        let quarantined = try FileManager.default.contentsOfDirectory(atPath: PackagePaths(folder: b, id: doc).pages)
            .filter { $0.contains(".corrupt-") }
        #expect(quarantined.count == 1)
    }
}
