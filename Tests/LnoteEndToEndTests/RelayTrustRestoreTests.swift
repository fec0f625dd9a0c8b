import Foundation
import Testing
import LnoteModel
import LnoteReplication
import LnoteStore
import LnoteSync
import LnoteServer

/// [SYNC-58] The issue's reproduction, through a real relay and two notebook folders: a
/// relay database copied, more syncs, the copy restored over it, then both clients syncing.
/// Before the relay kept a high-water mark, "A's strokes made after the copy are never
/// pushed again, and A receives only 1 of B's 4 new strokes": the restored database hands
/// out again the change sequences A's cursor already passed, under the same epoch.
@Suite struct RelayTrustRestoreTests {
    /// A relay on a fixed port (the clients' remote is its URL), restartable over its file.
    final class Relay: @unchecked Sendable {
        let path: String
        var store: RelayStore
        var server: RelayServer
        let notebook: NotebookID
        let port: UInt16

        init(path: String) throws {
            self.path = path
            store = try RelayStore(path: path)
            notebook = try store.createNotebook()
            server = try RelayServer(store: store)
            port = server.http.port
        }

        var url: String { server.url(notebook: notebook) }

        func stop() throws {
            try server.close()
            try store.close()
        }

        func start() throws {
            store = try RelayStore(path: path)
            var config = HTTPServer.Configuration()
            config.port = port
            server = try RelayServer(store: store, configuration: config)
        }
    }

    /// Adds `n` strokes to the first page of the folder's only document.
    static func draw(_ folder: String, _ n: Int, seed: UInt64) async throws {
        let nb = try await Notebook.open(at: folder, options: Fixture.quiet)
        let d = try await nb.openDocument(try await nb.documentIDs()[0])
        let pid = await d.pageList[0].id
        _ = try await d.addStrokes(HandwritingGenerator.strokes(seed: seed, count: n), to: pid)
        try await nb.close()
    }

    /// The strokes on the first page of the folder's only document.
    static func strokes(_ folder: String) async throws -> Int {
        let nb = try await Notebook.open(at: folder, options: Fixture.quiet)
        let d = try await nb.openDocument(try await nb.documentIDs()[0])
        let n = try await d.pageState(await d.pageList[0].id).elements.count
        try await nb.close()
        return n
    }

    static func copy(_ from: String, _ to: String) throws {
        let fm = FileManager.default
        for suffix in ["", "-wal", "-shm"] where fm.fileExists(atPath: to + suffix) { try fm.removeItem(atPath: to + suffix) }
        #expect(!fm.fileExists(atPath: from + "-wal"), "the store was closed: its WAL is checkpointed")
        try fm.copyItem(atPath: from, toPath: to)
    }

    @Test("[SYNC-58] a relay restored from an older copy: every client's strokes reach it again and every client receives everything")
    func restoredRelay() async throws {
        let dir = try TempDir()
        let (a, b) = (dir.sub("A"), dir.sub("B"))
        let relay = try Relay(path: dir.sub("relay.sqlite"))
        let tokenA = try relay.store.createToken(notebook: relay.notebook, label: "A")
        let tokenB = try relay.store.createToken(notebook: relay.notebook, label: "B")
        _ = try await Fixture.notebook(at: a, strokes: 6)
        try await Fixture.sync(a, relay.url, token: tokenA)
        try await Fixture.sync(b, relay.url, token: tokenB)
        #expect(try await Self.strokes(b) == 6)

        // The operator copies the database.
        try relay.stop()
        try Self.copy(relay.path, dir.sub("backup.sqlite"))
        try relay.start()
        // A draws 3 strokes and syncs them.
        try await Self.draw(a, 3, seed: 31)
        #expect(try await Fixture.sync(a, relay.url, token: tokenA).opsAccepted == 3)

        // The copy is restored over the database: A's 3 strokes are gone from the relay.
        try relay.stop()
        try Self.copy(dir.sub("backup.sqlite"), relay.path)
        try relay.start()
        guard case .belowMark(let sequence, let mark) = relay.store.opened.epochsReset else {
            Issue.record("restore not detected: \(String(describing: relay.store.opened.epochsReset))")
            return
        }
        #expect(sequence + 3 == mark)

        // B draws 4 strokes and syncs; then A, then B again.
        try await Self.draw(b, 4, seed: 47)
        try await Fixture.sync(b, relay.url, token: tokenB)
        let ra = try await Fixture.sync(a, relay.url, token: tokenA)
        #expect(ra.opsAccepted == 3, "A pushes again the strokes the relay lost")
        try await Fixture.sync(b, relay.url, token: tokenB)

        #expect(try await Self.strokes(a) == 13, "A receives B's 4 strokes")
        #expect(try await Self.strokes(b) == 13, "B receives A's 3 strokes")
        #expect(try await Fixture.canonical(a) == Fixture.canonical(b))
        // The relay holds every operation of both.
        let folder = try await Notebook.open(at: a, options: Fixture.quiet)
        let clocks: [LogClock] = try await folder.logClocks()
        try await folder.close()
        #expect(try relay.store.clocks(notebook: relay.notebook) == clocks.filter { !$0.clock.isEmpty })
        try relay.stop()
    }

    /// [SYNC-57] [SYNC-58] After a restore, a device that holds another device's operations the
    /// relay lost is refused (403: that replica is owned) when it pushes them; it pushes its
    /// own without them, and the owner brings its own back.
    @Test("[SYNC-57] [SYNC-58] a device holding another's lost operations still pushes its own after a restore")
    func ownersDoNotBlockAfterARestore() async throws {
        let dir = try TempDir()
        let (a, b) = (dir.sub("A"), dir.sub("B"))
        let relay = try Relay(path: dir.sub("relay.sqlite"))
        let tokenA = try relay.store.createToken(notebook: relay.notebook, label: "A", device: "laptop")
        let tokenB = try relay.store.createToken(notebook: relay.notebook, label: "B", device: "desktop")
        _ = try await Fixture.notebook(at: a, strokes: 3)
        try await Fixture.sync(a, relay.url, token: tokenA)
        try await Fixture.sync(b, relay.url, token: tokenB)
        try await Self.draw(b, 1, seed: 5)
        try await Fixture.sync(b, relay.url, token: tokenB)  // desktop owns B's replica now
        try relay.stop()
        try Self.copy(relay.path, dir.sub("backup.sqlite"))
        try relay.start()
        try await Self.draw(b, 4, seed: 6)
        try await Fixture.sync(b, relay.url, token: tokenB)
        try await Fixture.sync(a, relay.url, token: tokenA)
        #expect(try await Self.strokes(a) == 8)
        // The relay loses B's 4 strokes; A holds them and draws 2 of its own.
        try relay.stop()
        try Self.copy(dir.sub("backup.sqlite"), relay.path)
        try relay.start()
        try await Self.draw(a, 2, seed: 7)
        let ra = try await Fixture.sync(a, relay.url, token: tokenA)
        #expect(ra.opsAccepted == 2, "A's own strokes reach the relay")
        #expect(ra.withheldReplicas.count == 1, "B's operations were left out: \(ra.withheldReplicas)")
        try await Fixture.sync(b, relay.url, token: tokenB)
        try await Fixture.sync(a, relay.url, token: tokenA)
        let (na, nb) = (try await Self.strokes(a), try await Self.strokes(b))
        #expect(na == 10 && nb == 10)
        let (ca, cb) = (try await Fixture.canonical(a), try await Fixture.canonical(b))
        #expect(ca == cb)
        try relay.stop()
    }
}
