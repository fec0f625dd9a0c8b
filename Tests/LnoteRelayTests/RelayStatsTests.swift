import Foundation
import LnoteModel
import LnoteReplication
import LnoteRelayPostgres
import LnoteSQLite
@testable import LnoteServer
@testable import LnoteSync
import LnoteTestSupport
import Synchronization
import Testing

/// `RelayStore.stats` and `RelayPresence` (issue 17 item 4): exact counts after known
/// writes on both backends, and the long polls held by several relay processes on one
/// database counted through the database.
@Suite("Relay stats and presence")
struct RelayStatsTests {
    /// Presence written fast enough for a test.
    static let fast = RelayPresence.Timing(heartbeat: .milliseconds(300), minimumInterval: .milliseconds(50),
                                           poll: .milliseconds(20))

    @Test("[issue 17] stats count notebooks, operations, bytes and tokens exactly", arguments: RelayBackends.all)
    func exactCounts(backend: RelayBackendKind) async throws {
        let seed = UInt64.random(in: 1...1_000_000)
        try await withRelay(backend) { store, nb, _ in
            var rng = SeededRNG(seed: seed)
            let empty = try store.stats()
            #expect(empty.notebooks == 1 && empty.operations == 0 && empty.operationBytes == 0 && empty.tokens == 0
                    && empty.relayProcesses == 0 && empty.longPolls == 0, "seed \(seed): \(empty)")
            let other = try store.createNotebook()
            let a = ReplicaID(0xA1)
            let log = LogRef(document: DocumentID(), page: PageID())
            var pa = PageReplica(page: log.page!)
            let ops = try (0..<Int.random(in: 3...12, using: &rng)).map { _ in
                try pa.add(.stroke(randomStroke(&rng)), by: a, wallTime: 1)
            }
            _ = try store.sync(SyncRequest(replica: a, epoch: 0, cursor: 0, push: [LogBatch(log: log, ops: ops)]), notebook: nb)
            // Pushed twice: stored once ([SYNC-7]).
            _ = try store.sync(SyncRequest(replica: a, epoch: 0, cursor: 0, push: [LogBatch(log: log, ops: ops)]), notebook: nb)
            let synthetic = RelayBackendTests.push(LogRef(document: DocumentID(), page: PageID()), replica: ReplicaID(7),
                                                   counters: 1...5)
            _ = try store.sync(SyncRequest(replica: ReplicaID(7), epoch: 0, cursor: 0, push: synthetic), notebook: other)
            let frameBytes = ops.reduce(0) { $0 + OperationCodec.frame($1).encoded.count }
                + synthetic.flatMap(\.frames).reduce(0) { $0 + $1.encoded.count }
            let assetBytes = [randomBytes(Int.random(in: 1...5000, using: &rng), &rng), randomBytes(17, &rng)]
            for bytes in assetBytes { _ = try store.putAsset(bytes, id: AssetID.of(bytes), notebook: nb) }
            _ = try store.putAsset(assetBytes[1], id: AssetID.of(assetBytes[1]), notebook: nb) // the same again
            let cp = try checkpoint(log, ops, at: VectorClock([(a, UInt64(ops.count))]))
            _ = try store.putCheckpoint(notebook: nb, checkpoint: cp)
            var w = ByteWriter()
            ElementCodec.encode(cp.clock, into: &w)
            for device in ["a", "b", "c"] { _ = try store.createToken(notebook: nb, label: "", device: device) }
            _ = try store.createToken(notebook: other, label: "", device: "d")

            let s = try store.stats()
            #expect(s.notebooks == 2, "seed \(seed)")
            #expect(s.operations == Int64(ops.count + 5), "seed \(seed)")
            #expect(s.operationBytes == Int64(frameBytes), "seed \(seed)")
            #expect(s.assets == 2 && s.assetBytes == Int64(assetBytes.reduce(0) { $0 + $1.count }), "seed \(seed)")
            #expect(s.checkpoints == 1 && s.checkpointBytes == Int64(cp.snapshot.count + w.bytes.count), "seed \(seed)")
            #expect(s.tokens == 4, "seed \(seed)")
            #expect(s.lastSequence == Int64(try store.info(notebook: other).cursor), "seed \(seed)")
            #expect(s.location == store.database.location)
        }
    }

    @Test("[issue 17] watchers: long polls held by two relay stores on one PostgreSQL database are counted; gone when they close")
    func watchersAcrossStores() async throws {
        try await withTempDirectory { dir in
            let database = try await RelayBackendKind.postgres.database(in: dir)
            let stores = try (0..<2).map { _ in try database.open() }
            defer { for s in stores { try? s.close() } }
            let nb = try stores[0].createNotebook()
            let servers = try stores.map { try RelayServer(store: $0, configuration: .init(connectionLimit: 64, perIPConnectionLimit: 0)) }
            defer { for s in servers { try? s.close() } }
            let presences = servers.map { server in
                let polls = server.longPolls
                return RelayPresence(store: server.store, port: Int(server.http.port), timing: Self.fast) { polls.waiting }
            }
            defer { for p in presences { p.close() } }
            let reader = try database.open()
            defer { try? reader.close() }
            #expect(await eventually(30) { (try? reader.stats())?.relayProcesses == 2 }, "both processes seen")
            #expect(try reader.stats().longPolls == 0)
            #expect(Set(try reader.stats().processes.map(\.port)) == Set(servers.map { Int64($0.http.port) }))

            // A client syncs, then holds one long poll on each relay (nothing new: both wait).
            var rng = SeededRNG(seed: 1717)
            let a = TestNotebook(replica: ReplicaID(0xA1))
            let doc = try a.createDocument("watched")
            try a.addStroke(LogRef(document: doc, page: try a.addPage(doc)), randomStroke(&rng))
            try await a.sync(try stores[0].endpoint(notebook: nb))
            let token = try stores[0].createToken(notebook: nb, label: "b", device: "b")
            let b = TestNotebook(replica: ReplicaID(0xB2))
            let remotes = try servers.map { try RelayLongPollTests.remote($0.url(notebook: nb), token) }
            defer { for r in remotes { try? r.close() } }
            let session = SyncSession(notebook: b, remote: remotes[0])
            _ = try await session.run()
            let q = try #require(try await session.longPollRequest(wait: 120))
            let polls = remotes.map { r in Task { try? await r.sync(q) } }
            #expect(await eventually(30) { servers.allSatisfy { $0.longPolls.waiting == 1 } }, "each relay holds one")
            #expect(await eventually(30) { (try? reader.stats())?.longPolls == 2 }, "\(String(describing: try? reader.stats()))")
            #expect(try reader.stats().relayProcesses == 2)

            // Relay 0 stops: its polls are answered and its row deleted; relay 1 still counts.
            try servers[0].close()
            presences[0].close()
            _ = await polls[0].value
            let after = try reader.stats()
            #expect(after.relayProcesses == 1 && after.processes.first?.port == Int64(servers[1].http.port), "\(after)")
            #expect(await eventually(30) { (try? reader.stats())?.longPolls == 1 })
            try servers[1].close()
            presences[1].close()
            _ = await polls[1].value
            let gone = try reader.stats()
            #expect(gone.relayProcesses == 0 && gone.longPolls == 0 && gone.staleProcesses == 0, "\(gone)")
        }
    }

    @Test("[issue 17] a process that stops writing is stale after the window: not counted", arguments: RelayBackends.all)
    func staleRows(backend: RelayBackendKind) async throws {
        try await withRelay(backend) { store, _, _ in
            let presence = RelayPresence(store: store, port: 8080, timing: Self.fast) { 3 }
            defer { presence.close() }
            #expect(await eventually(30) { (try? store.stats())?.longPolls == 3 })
            let row = try #require(try store.stats().processes.first)
            #expect(row.pid == Int64(getpid()) && row.port == 8080 && row.host == RelayPresence.hostName() && !row.host.isEmpty)
            // Seen from 61 s later (the row is no longer written): stale, not counted.
            let later = try store.stats(now: row.heartbeat + 61_000)
            #expect(later.relayProcesses == 0 && later.longPolls == 0 && later.staleProcesses == 1, "\(later)")
        }
    }

    @Test("[issue 17] presence that cannot be written is logged at most once per interval and never fails a push")
    func failuresLoggedNotThrown() async throws {
        try await withRelay(.sqlite) { store, nb, database in
            // The table gone (as in a database of an older schema): every write fails.
            let raw = try SQLiteDatabase(path: database.location)
            try raw.execute("DROP TABLE relay_presence")
            try raw.close()
            let logged = Mutex<[String]>([])
            let presence = RelayPresence(store: store, port: 1,
                                         timing: .init(heartbeat: .milliseconds(20), minimumInterval: .milliseconds(5),
                                                       poll: .milliseconds(5), logInterval: .seconds(600)),
                                         log: { line in logged.withLock { $0.append(line) } }) { 0 }
            let log = LogRef(document: DocumentID(), page: PageID())
            for i in 1...20 {
                let r = try store.sync(SyncRequest(replica: ReplicaID(1), epoch: 0, cursor: 0,
                                                   push: RelayBackendTests.push(log, replica: ReplicaID(1),
                                                                                counters: UInt64(i)...UInt64(i))), notebook: nb)
                #expect(r.accepted == 1)
            }
            #expect(await eventually(30) { presence.writes.failed >= 5 })
            presence.close()
            let lines = logged.withLock { $0 }
            #expect(lines.count == 1, "\(lines)")
            #expect(lines.first?.contains(database.location) == true && lines.first?.contains("relay_presence") == true,
                    "\(lines)")
            #expect(try store.info(notebook: nb).operations == 20)
        }
    }
}

extension RelayStatsTests {
    @Test("[issue 17] an SQLite store of schema version 3 (before relay_presence) is upgraded to the current version: data kept, presence works")
    func sqliteUpgradeFromVersion3() async throws {
        try await withTempDirectory { dir in
            let path = dir + "/relay.sqlite"
            var store = try RelayStore(path: path)
            let nb = try store.createNotebook()
            let log = LogRef(document: DocumentID(), page: PageID())
            _ = try store.sync(SyncRequest(replica: ReplicaID(1), epoch: 0, cursor: 0,
                                           push: RelayBackendTests.push(log, replica: ReplicaID(1), counters: 1...4)), notebook: nb)
            try store.close()
            do {
                // Back to version 3 as that version wrote it.
                let raw = try SQLiteDatabase(path: path)
                defer { try? raw.close() }
                try raw.execute("DROP TABLE relay_presence")
                try raw.execute("PRAGMA user_version = 3")
            }
            store = try RelayStore(path: path)
            defer { try? store.close() }
            #expect(store.opened.upgradedFrom == 3 && store.opened.epochsReset == nil)
            #expect(try store.info(notebook: nb).operations == 4)
            let presence = RelayPresence(store: store, port: 9, timing: Self.fast) { 5 }
            defer { presence.close() }
            #expect(await eventually(30) { (try? store.stats())?.longPolls == 5 })
            let raw = try SQLiteDatabase(path: path, options: .init(create: false, readOnly: true))
            defer { try? raw.close() }
            #expect(try raw.query("PRAGMA user_version").first?.first?.int64 == RelayStore.schemaVersion)
        }
    }
}
