import Dispatch
import Foundation
import LnoteModel
import LnotePostgres
@testable import LnoteRelayPostgres
import LnoteReplication
import LnoteServer
@testable import LnoteSync
import LnoteTestSupport
import Synchronization
import Testing

/// What the PostgreSQL backend adds to the relay (issue 17): several stores (relay
/// processes) on one database, changes seen across them through `NOTIFY`, outages, and the
/// schema's versions. The storage semantics themselves are the parameterized suites'
/// (`RelayBackends.all` runs each on PostgreSQL too).
@Suite("Relay on PostgreSQL: several stores, NOTIFY, outages, schema versions")
struct RelayPostgresTests {
    /// A new empty PostgreSQL database in the process's cluster, dropped when `body` ends.
    static func withDatabase<T>(_ body: (String) async throws -> T) async throws -> T {
        try await withTempDirectory { dir in try await body(try await PostgresTestDatabases.create(for: dir)) }
    }

    static func store(_ url: String, poolSize: Int = 4) throws -> RelayStore {
        try RelayStore(database: try RelayPostgresDatabase(url: url, poolSize: poolSize))
    }

    static func feedStatus(_ store: RelayStore) -> (listening: Bool, connections: Int) {
        (store.database as? RelayPostgresDatabase)?.changeFeedStatus ?? (false, 0)
    }

    @Test("[issue 17] [SYNC-7] four stores on one database, each pushing overlapping ranges twice at once: every operation stored once")
    func fourStoresConcurrently() async throws {
        try await Self.withDatabase { url in
            let stores = try (0..<4).map { _ in try Self.store(url) }
            defer { for s in stores { try? s.close() } }
            let nb = try stores[0].createNotebook()
            let log = LogRef(document: DocumentID(), page: PageID())
            let replicas = (1...3).map { ReplicaID(UInt64($0)) }
            var held: [ReplicaID: UInt64] = [:]
            var accepted = 0
            var rng = SeededRNG(seed: 1717)
            for round in 0..<8 {
                var pushes: [[LogBatch]] = []
                for _ in 0..<8 {
                    var push: [LogBatch] = []
                    for r in replicas {
                        let base = held[r, default: 0]
                        push += RelayBackendTests.push(log, replica: r, counters: (base + 1)...(base + UInt64.random(in: 1...9, using: &rng)))
                    }
                    pushes.append(push)
                }
                for push in pushes {
                    for batch in push {
                        let r = try batch.ops()[0].id.replica
                        held[r] = max(held[r, default: 0], try batch.ops().last!.id.counter)
                    }
                }
                let endpoints = try stores.map { try $0.endpoint(notebook: nb) }
                accepted += try await withThrowingTaskGroup(of: Int.self) { group in
                    for (i, push) in pushes.enumerated() {
                        let ep = endpoints[i % endpoints.count]
                        let request = SyncRequest(replica: replicas[round % 3], epoch: 0, cursor: 0, have: [], push: push)
                        group.addTask { Int(try await ep.sync(request).accepted) }
                    }
                    return try await group.reduce(0, +)
                }
            }
            let total = held.values.reduce(0) { $0 + Int($1) }
            #expect(try RelayCounts.read(stores[3]).ops == Int64(total), "every operation stored once")
            #expect(accepted == total, "each accepted by exactly one push")
            let clock = VectorClock(held.map { ($0.key, $0.value) })
            for s in stores { #expect(try s.clocks(notebook: nb) == [LogClock(log: log, clock: clock)]) }
            let pulled = try stores[1].sync(SyncRequest(replica: ReplicaID(9), epoch: try stores[1].info(notebook: nb).epoch,
                                                        cursor: 0), notebook: nb)
            #expect(pulled.pull.reduce(0) { $0 + $1.frames.count } == total)
        }
    }

    @Test("[issue 17] [SYNC-72] a long poll held by one relay wakes when another relay on the database stores an operation")
    func longPollWokenByAnotherStore() async throws {
        try await Self.withDatabase { url in
            let storeA = try Self.store(url), storeB = try Self.store(url)
            defer { try? storeA.close(); try? storeB.close() }
            let nb = try storeA.createNotebook()
            let server = try RelayServer(store: storeA, configuration: .init(connectionLimit: 64, perIPConnectionLimit: 0))
            defer { try? server.close() }
            #expect(await eventually(30) { Self.feedStatus(storeA).listening }, "store A listens")

            var rng = SeededRNG(seed: 72)
            let a = TestNotebook(replica: ReplicaID(0xA1)), b = TestNotebook(replica: ReplicaID(0xB2))
            let doc = try a.createDocument("across relays")
            let page = LogRef(document: doc, page: try a.addPage(doc))
            try a.addStroke(page, randomStroke(&rng))
            try await a.sync(try storeB.endpoint(notebook: nb))
            let rb = try RelayLongPollTests.remote(server.url(notebook: nb), try storeA.createToken(notebook: nb, label: "b", device: "b"))
            defer { try? rb.close() }
            let sb = SyncSession(notebook: b, remote: rb)
            _ = try await sb.run()
            #expect(b.view == a.view)

            // Held on relay A for up to 120 s (a hang bound, not a timing): B's store ends it.
            let q = try #require(try await sb.longPollRequest(wait: 120))
            let poll = Task { try await rb.sync(q) }
            #expect(await eventually(30) { server.longPolls.waiting == 1 }, "the poll is held")
            let stroke = try a.addStroke(page, randomStroke(&rng))
            let pushed = try await a.sync(try storeB.endpoint(notebook: nb))
            #expect(pushed.opsAccepted == 1)
            let answer = try await poll.value
            #expect(answer.pull.flatMap(\.frames).count == 1, "answered with B's operation, not at the end of its wait")
            _ = try await sb.absorbLongPoll(answer, for: q)
            #expect(b.live(page).contains(stroke))
            #expect(b.view == a.view)
        }
    }

    @Test("[issue 17] the database stopped mid-use: clear errors naming the socket; restarted: later requests succeed, the change feed resumes")
    func outageAndRecovery() async throws {
        let cluster = try await PostgresCluster.start()
        do {
            try await Self.outage(cluster)
        } catch {
            await cluster.remove()
            throw error
        }
        await cluster.remove()
    }

    static func outage(_ cluster: PostgresCluster) async throws {
        let storeA = try Self.store(cluster.url, poolSize: 2), storeB = try Self.store(cluster.url, poolSize: 2)
        defer { try? storeA.close(); try? storeB.close() }
        let seen = Mutex<[NotebookID]>([])
        let observation = storeA.observeChanges { id in seen.withLock { $0.append(id) } }
        defer { storeA.stopObserving(observation) }
        let nb = try storeA.createNotebook()
        let log = LogRef(document: DocumentID(), page: PageID())
        _ = try storeB.sync(SyncRequest(replica: ReplicaID(1), epoch: 0, cursor: 0,
                                        push: RelayBackendTests.push(log, replica: ReplicaID(1), counters: 1...3)), notebook: nb)
        #expect(await eventually(30) { seen.withLock { $0.contains(nb) } }, "A hears of B's push")

        // A transaction in flight when the server stops fails cleanly.
        let inside = DispatchSemaphore(value: 0), stopped = DispatchSemaphore(value: 0)
        let inFlight = Task {
            try await blocking {
                try storeA.database.transaction(.read) { tx in
                    _ = try tx.query("SELECT count(*) FROM ops")
                    inside.signal()
                    stopped.wait()
                    return try tx.query("SELECT count(*) FROM ops").first?.first?.int64
                }
            }
        }
        try await blocking { inside.wait() }
        try await cluster.stop()
        stopped.signal()
        await #expect(throws: LnoteError(.database)) { _ = try await inFlight.value }

        // Later requests fail with the reason, naming the socket's directory, never a password.
        for _ in 0..<3 {
            do {
                _ = try storeA.info(notebook: nb)
                Issue.record("a request succeeded with the database stopped")
            } catch let e as LnoteError {
                #expect(e.code == .database)
                #expect("\(e)".contains(cluster.directory), "names the socket: \(e)")
                #expect("\(e)".contains("cannot be reached"), "says what happened: \(e)")
            }
        }
        let push = RelayBackendTests.push(log, replica: ReplicaID(1), counters: 4...6)
        #expect(throws: LnoteError(.database)) {
            _ = try storeB.sync(SyncRequest(replica: ReplicaID(1), epoch: 0, cursor: 0, push: push), notebook: nb)
        }

        try await cluster.start()
        // The next requests succeed on new connections; nothing of the failed push was kept.
        #expect(try storeA.info(notebook: nb).operations == 3)
        let answer = try storeB.sync(SyncRequest(replica: ReplicaID(1), epoch: 0, cursor: 0, push: push), notebook: nb)
        #expect(answer.accepted == 3)
        // The feed reconnects (with backoff) and hears B's changes again.
        #expect(await eventually(60) { Self.feedStatus(storeA).connections >= 2 && Self.feedStatus(storeA).listening },
                "A's change feed reconnected: \(Self.feedStatus(storeA))")
        seen.withLock { $0.removeAll() }
        _ = try storeB.sync(SyncRequest(replica: ReplicaID(1), epoch: 0, cursor: 0,
                                        push: RelayBackendTests.push(log, replica: ReplicaID(1), counters: 7...7)), notebook: nb)
        #expect(await eventually(30) { seen.withLock { $0.contains(nb) } }, "A hears of B's push after the restart")
        #expect(try storeA.info(notebook: nb).operations == 7)
    }

    @Test("[issue 17] two relays creating the schema of an empty database at once: created once, both open it")
    func migrationRaced() async throws {
        try await withTempDirectory { dir in
            for _ in 0..<4 {
                let url = try await PostgresTestDatabases.create(for: dir)
                let reports = try await blocking { () -> [Int64?] in
                    let results = Mutex<[Int: Result<Int64?, any Error>]>([:])
                    DispatchQueue.concurrentPerform(iterations: 2) { i in
                        let r = Result { () throws -> Int64? in
                            let store = try Self.store(url, poolSize: 1)
                            defer { try? store.close() }
                            _ = try store.createNotebook()
                            return store.opened.upgradedFrom
                        }
                        results.withLock { $0[i] = r }
                    }
                    return try results.withLock { r in try (0..<2).map { try r[$0]!.get() } }
                }
                #expect(reports.filter { $0 == 0 }.count == 1 && reports.filter { $0 == nil }.count == 1,
                        "one created it, the other found it current: \(reports)")
                let store = try Self.store(url)
                defer { try? store.close() }
                #expect(try store.notebooks().count == 2)
                #expect(try (store.database as! RelayPostgresDatabase).storedSchemaVersion() == RelayStore.schemaVersion)
            }
        }
    }

    @Test("[issue 17] a newer schema version is refused; so is a database with other tables and no marker")
    func versions() async throws {
        try await Self.withDatabase { url in
            try Self.store(url).close()
            let conn = try PGConnection(url: url)
            defer { conn.close() }
            try conn.execute("UPDATE relay_meta SET value = $1 WHERE key = 'schema_version'",
                             [.text(String(RelayStore.schemaVersion + 1))])
            #expect(throws: LnoteError(.unsupportedVersion)) { _ = try Self.store(url) }
            try conn.execute("UPDATE relay_meta SET value = 'something else' WHERE key = 'store'")
            #expect(throws: LnoteError(.invalidArgument)) { _ = try Self.store(url) }
        }
        try await Self.withDatabase { url in
            let conn = try PGConnection(url: url)
            defer { conn.close() }
            try conn.execute("CREATE TABLE notes (x text)")
            #expect(throws: LnoteError(.invalidArgument)) { _ = try Self.store(url) }
        }
    }

    @Test("[issue 17] an older schema is upgraded by its migration, once; a new database gets the base then the migrations")
    func migrationToNextVersion() async throws {
        let v4 = RelayPostgresSchema(version: RelayStore.schemaVersion + 1, migrations: RelayPostgresSchema.current.migrations + [
            .init(from: RelayStore.schemaVersion) { try $0.executeScript("CREATE TABLE relay_v4_probe (x bigint)") },
        ])
        func probeExists(_ url: String) throws -> Bool {
            let conn = try PGConnection(url: url)
            defer { conn.close() }
            return try conn.execute("SELECT to_regclass('relay_v4_probe') IS NOT NULL").bool(0, 0)
        }
        try await Self.withDatabase { url in
            let old = try Self.store(url)
            let nb = try old.createNotebook()
            try old.close()
            let upgraded = try RelayStore(database: try RelayPostgresDatabase(url: url, poolSize: 1, schema: v4))
            #expect(upgraded.opened.upgradedFrom == RelayStore.schemaVersion)
            #expect(try upgraded.notebooks().map(\.id) == [nb])
            #expect(try (upgraded.database as! RelayPostgresDatabase).storedSchemaVersion() == RelayStore.schemaVersion + 1)
            try upgraded.close()
            #expect(try probeExists(url))
            let again = try RelayStore(database: try RelayPostgresDatabase(url: url, poolSize: 1, schema: v4))
            #expect(again.opened.upgradedFrom == nil)
            try again.close()
            #expect(throws: LnoteError(.unsupportedVersion)) { _ = try Self.store(url) }
        }
        try await Self.withDatabase { url in
            let fresh = try RelayStore(database: try RelayPostgresDatabase(url: url, poolSize: 1, schema: v4))
            #expect(fresh.opened.upgradedFrom == 0)
            try fresh.close()
            #expect(try probeExists(url))
        }
    }

    @Test("[issue 17] a version 3 database (before relay_presence) is upgraded to the current version: data kept, stats and presence work")
    func upgradeFromVersion3() async throws {
        try await Self.withDatabase { url in
            let v3 = RelayPostgresSchema(version: 3)
            let old = try RelayStore(database: try RelayPostgresDatabase(url: url, poolSize: 1, schema: v3))
            #expect(old.opened.upgradedFrom == 0)
            // As version 3 made it (no name: version 5).
            let nb = NotebookID()
            try old.database.transaction(.write) { tx in
                _ = try tx.execute("INSERT INTO notebooks (id, epoch, created) VALUES (?1, 42, 1)", [.text(nb.description)])
            }
            let log = LogRef(document: DocumentID(), page: PageID())
            _ = try old.sync(SyncRequest(replica: ReplicaID(1), epoch: 0, cursor: 0,
                                         push: RelayBackendTests.push(log, replica: ReplicaID(1), counters: 1...4)), notebook: nb)
            let token = try old.createToken(notebook: nb, label: "", device: "desk")
            try old.close()
            let conn = try PGConnection(url: url)
            defer { conn.close() }
            #expect(try !conn.execute("SELECT to_regclass('relay_presence') IS NOT NULL").bool(0, 0))

            let store = try Self.store(url)
            defer { try? store.close() }
            #expect(store.opened.upgradedFrom == 3)
            #expect(try (store.database as! RelayPostgresDatabase).storedSchemaVersion() == RelayStore.schemaVersion)
            #expect(try store.info(notebook: nb).operations == 4)
            #expect(try store.access(token: token, notebook: nb) == Access(.ok, device: "desk"))
            let presence = RelayPresence(store: store, port: 9, timing: RelayStatsTests.fast) { 2 }
            defer { presence.close() }
            #expect(await eventually(30) { (try? store.stats())?.longPolls == 2 })
            #expect(try store.stats().operations == 4)
            let again = try Self.store(url)
            #expect(again.opened.upgradedFrom == nil)
            try again.close()
        }
    }

    @Test("[issue 17] an unreachable database: a .database error naming the socket, never the password")
    func unreachable() throws {
        let url = "postgresql://lnote:s3cret-pw@/relay?host=/nonexistent-lnote-dir&connect_timeout=2"
        let database = try RelayPostgresDatabase(url: url, poolSize: 1)
        #expect(database.location.contains("host=/nonexistent-lnote-dir") && !database.location.contains("s3cret"),
                "\(database.location)")
        do {
            _ = try RelayStore(database: database)
            Issue.record("opened a store on a database that does not exist")
        } catch let e as LnoteError {
            #expect(e.code == .database)
            #expect("\(e)".contains("/nonexistent-lnote-dir"), "\(e)")
            #expect(!"\(e)".contains("s3cret"), "\(e)")
        }
    }

    @Test("[issue 17] locations leave the password out")
    func redaction() {
        // Every spelling libpq accepts, the password (and a client key's) left out, the rest kept.
        let cases = [
            "postgresql://u:s3cret@db.example:5432/relay?sslmode=require",
            "postgres://db.example/relay?user=u&password=s3cret&sslmode=require",
            "host=db.example user=u password='s3cret and more' dbname=relay",
            "host=db.example user=u password = s3cret dbname=relay",
            "postgresql://u:p?s3cret@db.example/relay",
            "postgresql://u:p#s3cret@db.example/relay",
            "postgresql://u@db.example/relay?sslpassword=s3cret",
            "host=db.example user=u sslpassword=s3cret dbname=relay",
        ]
        for c in cases {
            let shown = RelayPostgresDatabase.redacted(c)
            #expect(!shown.contains("s3cret"), "\(c) → \(shown)")
            #expect(shown.contains("db.example") && shown.contains("relay"), "\(c) → \(shown)")
        }
        #expect(RelayPostgresDatabase.redacted("postgresql:///relay?host=/tmp/x").contains("host=/tmp/x"))
        #expect(!RelayPostgresDatabase.redacted("postgresql://u:s3cret@[::1").contains("s3cret"))
    }
}
