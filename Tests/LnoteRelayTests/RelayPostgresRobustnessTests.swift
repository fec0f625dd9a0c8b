import Dispatch
import Foundation
import LnoteModel
import LnotePostgres
@testable import LnoteRelayPostgres
import LnoteReplication
@testable import LnoteServer
@testable import LnoteSync
import LnoteTestSupport
import Synchronization
import Testing

/// The PostgreSQL backend's robustness: one round trip for `first`, the counter's lock
/// taken only by pushes and bounded by `lock_timeout`, a change feed that survives the loss
/// of its connection, no listening connection without observers, and request threads
/// sized to the pool.
@Suite("Relay on PostgreSQL: locks, lost change feed, request threads")
struct RelayPostgresRobustnessTests {
    static func push(_ log: LogRef, replica: UInt64, _ counters: ClosedRange<UInt64>) -> SyncRequest {
        SyncRequest(replica: ReplicaID(replica), epoch: 0, cursor: 0,
                    push: RelayBackendTests.push(log, replica: ReplicaID(replica), counters: counters))
    }

    /// Backends whose application_name is `name` in the database of `url`.
    static func backends(_ url: String, named name: String) throws -> Int64 {
        let conn = try PGConnection(url: url)
        defer { conn.close() }
        return try conn.execute("""
            SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1
            """, [.text(name)]).int64(0, 0)
    }

    @Test("[issue 17] first(): the first row or nil, on both backends, without a cursor on PostgreSQL", arguments: RelayBackends.all)
    func firstRow(_ backend: RelayBackendKind) async throws {
        try await withRelay(backend) { store, nb, _ in
            let log = LogRef(document: DocumentID(), page: PageID())
            _ = try store.sync(Self.push(log, replica: 7, 1...5), notebook: nb)
            try store.database.transaction(.read) { tx in
                let q = try tx.prepare("SELECT counter FROM ops WHERE replica = ?1 ORDER BY counter LIMIT 1")
                #expect(try q.first([.integer(7)]) == [.integer(1)])
                #expect(try q.first([.integer(8)]) == nil)
                #expect(try q.first([.integer(7)]) == [.integer(1)], "runs again")
                let several = try tx.prepare("SELECT counter FROM ops WHERE replica = ?1 ORDER BY counter DESC")
                #expect(try several.first([.integer(7)]) == [.integer(5)])
            }
            if backend == .postgres {
                // Runs the statement itself, not through a cursor: a cursor can hold only a
                // SELECT, so `UPDATE … RETURNING` through one would fail.
                let nbRow = try store.database.transaction(.write) { tx in
                    try tx.prepare("UPDATE notebooks SET epoch = epoch WHERE id = ?1 RETURNING nb").first([.text(nb.description)])
                }
                #expect(nbRow?.first?.int64 != nil)
            }
        }
    }

    @Test("[issue 17] sequences are allocated only in .allocating transactions, on both backends", arguments: RelayBackends.all)
    func allocatingOnly(_ backend: RelayBackendKind) async throws {
        try await withRelay(backend) { store, _, _ in
            #expect(throws: LnoteError(.invalidState)) {
                try store.database.transaction(.write) { tx in _ = try store.database.allocateSequences(1, tx) }
            }
            let first = try store.database.transaction(.allocating) { tx in try store.database.allocateSequences(2, tx) }
            let next = try store.database.transaction(.allocating) { tx in try store.database.allocateSequences(1, tx) }
            #expect(next == first + 2)
        }
    }

    @Test("[issue 17] the counter's lock held elsewhere: pulls, checkpoints and tokens go on; a push waits, retries, then says why")
    func counterLockHeldElsewhere() async throws {
        try await withTempDirectory { dir in
            let url = try await PostgresTestDatabases.create(for: dir)
            let database = try RelayPostgresDatabase(url: url, poolSize: 4, lockTimeout: .milliseconds(200), maxLockWaits: 2)
            let store = try RelayStore(database: database)
            defer { try? store.close() }
            let nb = try store.createNotebook()
            let log = LogRef(document: DocumentID(), page: PageID())
            let pushed = try store.sync(Self.push(log, replica: 1, 1...3), notebook: nb)
            #expect(pushed.accepted == 3)

            // Another session holds the lock in an open transaction (a stuck writer).
            let holder = try PGConnection(url: url)
            defer { holder.close() }
            try holder.execute("BEGIN")
            try holder.execute("LOCK TABLE relay_counters IN EXCLUSIVE MODE")

            // What allocates nothing does not wait for it.
            let epoch = try store.info(notebook: nb).epoch
            let pulled = try store.sync(SyncRequest(replica: ReplicaID(2), epoch: epoch, cursor: 0), notebook: nb)
            #expect(pulled.pull.flatMap(\.frames).count == 3, "a pull reads")
            _ = try store.createToken(notebook: nb, label: "while locked")
            _ = try store.createNotebook()
            _ = try store.resetEpoch(notebook: nb)

            // A push waits lock_timeout, runs again, and is then refused with the reason.
            do {
                _ = try store.sync(Self.push(log, replica: 1, 4...4), notebook: nb)
                Issue.record("a push stored while the counter was locked elsewhere")
            } catch let e as LnoteError {
                #expect(e.code == .database)
                #expect("\(e)".contains("lock_timeout") && "\(e)".contains("2 waits"), "says why: \(e)")
                #expect(e.underlying == "SQLSTATE 55P03")
            }
            try holder.execute("ROLLBACK")
            #expect(try store.sync(Self.push(log, replica: 1, 4...4), notebook: nb).accepted == 1, "stored once the lock is free")
        }
    }

    @Test("[issue 17] a push whose lock is freed during its waits is stored")
    func lockFreedDuringWaits() async throws {
        try await withTempDirectory { dir in
            let url = try await PostgresTestDatabases.create(for: dir)
            // Up to 100 waits of 100 ms: the holder lets go long before (a bound, not a timing).
            let database = try RelayPostgresDatabase(url: url, poolSize: 2, lockTimeout: .milliseconds(100), maxLockWaits: 100)
            let store = try RelayStore(database: database)
            defer { try? store.close() }
            let nb = try store.createNotebook()
            let log = LogRef(document: DocumentID(), page: PageID())
            let holder = try PGConnection(url: url)
            defer { holder.close() }
            try holder.execute("BEGIN")
            try holder.execute("LOCK TABLE relay_counters IN EXCLUSIVE MODE")
            let push = Task { try await blocking { try store.sync(Self.push(log, replica: 1, 1...2), notebook: nb).accepted } }
            // Wait until the push is seen waiting on the lock, then let go.
            #expect(await eventually(30) {
                (try? holder.execute("""
                    SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
                    WHERE c.relname = 'relay_counters' AND NOT l.granted
                    """).int64(0, 0)) ?? 0 > 0
            }, "the push waits for the lock")
            try holder.execute("ROLLBACK")
            #expect(try await push.value == 2)
        }
    }

    @Test("[issue 17] [SYNC-72] the change feed's backend terminated: it reconnects, and a long poll on A wakes for B's push")
    func changeFeedBackendTerminated() async throws {
        try await withTempDirectory { dir in
            let url = try await PostgresTestDatabases.create(for: dir)
            let databaseA = try RelayPostgresDatabase(url: url, poolSize: 4, feedCheck: (.seconds(1), .seconds(5)),
                                                      schema: .current)
            let storeA = try RelayStore(database: databaseA), storeB = try RelayPostgresTests.store(url)
            defer { try? storeA.close(); try? storeB.close() }
            let nb = try storeA.createNotebook()
            let server = try RelayServer(store: storeA, configuration: .init(connectionLimit: 64, perIPConnectionLimit: 0))
            defer { try? server.close() }
            #expect(await eventually(30) { databaseA.changeFeedBackendPID != nil }, "A listens")
            let pid = try #require(databaseA.changeFeedBackendPID)

            var rng = SeededRNG(seed: 0x72)
            let a = TestNotebook(replica: ReplicaID(0xA1)), b = TestNotebook(replica: ReplicaID(0xB2))
            let doc = try a.createDocument("feed lost")
            let page = LogRef(document: doc, page: try a.addPage(doc))
            try a.addStroke(page, randomStroke(&rng))
            try await a.sync(try storeB.endpoint(notebook: nb))
            let rb = try RelayLongPollTests.remote(server.url(notebook: nb), try storeA.createToken(notebook: nb, label: "b", device: "b"))
            defer { try? rb.close() }
            let sb = SyncSession(notebook: b, remote: rb)
            _ = try await sb.run()
            #expect(b.view == a.view)

            // The listening backend is ended from another session.
            let admin = try PGConnection(url: url)
            defer { admin.close() }
            #expect(try admin.execute("SELECT pg_terminate_backend($1)", [.int32(pid)]).bool(0, 0))
            #expect(await eventually(60) {
                (databaseA.changeFeedStatus?.connections ?? 0) >= 2 && databaseA.changeFeedBackendPID != nil
            }, "A's feed reconnected: \(String(describing: databaseA.changeFeedStatus))")
            #expect(databaseA.changeFeedBackendPID != pid)

            // Held on relay A for up to 120 s (a hang bound, not a timing): B's push ends it.
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
        }
    }

    @Test("[issue 17] a change feed whose server stops answering (its backend frozen, as a silently dropped network) is replaced within the check's bound")
    func changeFeedSilentServer() async throws {
        try await withTempDirectory { dir in
            let url = try await PostgresTestDatabases.create(for: dir)
            let databaseA = try RelayPostgresDatabase(url: url, poolSize: 2, feedCheck: (.seconds(1), .seconds(2)),
                                                      schema: .current)
            let storeA = try RelayStore(database: databaseA), storeB = try RelayPostgresTests.store(url, poolSize: 2)
            defer { try? storeA.close(); try? storeB.close() }
            let nb = try storeA.createNotebook()
            let seen = Mutex<Int>(0)
            let token = storeA.observeChanges { id in if id == nb { seen.withLock { $0 += 1 } } }
            defer { storeA.stopObserving(token) }
            #expect(await eventually(30) { databaseA.changeFeedBackendPID != nil })
            let pid = try #require(databaseA.changeFeedBackendPID)
            // The backend's socket stays open, and nothing answers on it: only the check tells.
            #expect(kill(pid, SIGSTOP) == 0)
            defer { _ = kill(pid, SIGCONT) }
            #expect(await eventually(60) { (databaseA.changeFeedStatus?.connections ?? 0) >= 2 && databaseA.changeFeedBackendPID != nil },
                    "replaced: \(String(describing: databaseA.changeFeedStatus))")
            #expect(databaseA.changeFeedBackendPID != pid)
            _ = kill(pid, SIGCONT)
            let before = seen.withLock { $0 }
            _ = try storeB.sync(Self.push(LogRef(document: DocumentID(), page: PageID()), replica: 3, 1...1), notebook: nb)
            #expect(await eventually(30) { seen.withLock { $0 } > before }, "B's push heard through the new connection")
        }
    }

    @Test("[issue 17] a lost feed wakes every held notebook once it listens again (notifications sent meanwhile are lost)")
    func reconnectWakesEveryNotebook() async throws {
        try await withTempDirectory { dir in
            let url = try await PostgresTestDatabases.create(for: dir)
            let databaseA = try RelayPostgresDatabase(url: url, poolSize: 2, feedCheck: (.seconds(1), .seconds(5)),
                                                      schema: .current)
            let storeA = try RelayStore(database: databaseA)
            defer { try? storeA.close() }
            let notebooks = try (0..<3).map { _ in try storeA.createNotebook() }
            let seen = Mutex<[NotebookID: Int]>([:])
            let token = storeA.observeChanges { id in seen.withLock { $0[id, default: 0] += 1 } }
            defer { storeA.stopObserving(token) }
            #expect(await eventually(30) { databaseA.changeFeedBackendPID != nil })
            let pid = try #require(databaseA.changeFeedBackendPID)
            let admin = try PGConnection(url: url)
            defer { admin.close() }
            _ = try admin.execute("SELECT pg_terminate_backend($1)", [.int32(pid)])
            #expect(await eventually(60) { seen.withLock { s in notebooks.allSatisfy { s[$0] == 1 } } },
                    "each notebook reported once: \(seen.withLock { $0 })")
        }
    }

    @Test("[issue 17] a store without observers (an admin command) holds no listening connection; the first observer starts it")
    func noFeedWithoutObservers() async throws {
        try await withTempDirectory { dir in
            let url = try await PostgresTestDatabases.create(for: dir)
            let database = try RelayPostgresDatabase(url: url, poolSize: 2)
            let store = try RelayStore(database: database)
            defer { try? store.close() }
            let nb = try store.createNotebook()
            _ = try store.createToken(notebook: nb, label: "admin")
            _ = try store.notebooks()
            #expect(database.changeFeedStatus == nil)
            #expect(try Self.backends(url, named: RelayPostgresDatabase.changeFeedApplicationName) == 0)
            #expect(try Self.backends(url, named: RelayPostgresDatabase.applicationName) >= 1, "the pool's are named")

            let token = store.observeChanges { _ in }
            defer { store.stopObserving(token) }
            #expect(await eventually(30) {
                (try? Self.backends(url, named: RelayPostgresDatabase.changeFeedApplicationName)) == 1
            }, "the first observer starts the feed")

            // And a database opened with changeFeed: false never listens.
            let quiet = try RelayStore(database: try RelayPostgresDatabase(url: url, poolSize: 1, changeFeed: false))
            defer { try? quiet.close() }
            let t2 = quiet.observeChanges { _ in }
            quiet.stopObserving(t2)
            #expect((quiet.database as? RelayPostgresDatabase)?.changeFeedStatus == nil)
        }
    }

    @Test("[issue 17] a store's request threads: as many as the pool, never more")
    func requestThreadsFollowThePool() async throws {
        let workers = RelayWorkers(limit: 4, name: "test workers", idleSeconds: 1)
        let running = Mutex<(now: Int, most: Int)>((0, 0))
        let release = DispatchSemaphore(value: 0)
        let done = DispatchSemaphore(value: 0)
        for _ in 0..<12 {
            workers.submit {
                running.withLock { $0.now += 1; $0.most = max($0.most, $0.now) }
                release.wait()
                running.withLock { $0.now -= 1 }
                done.signal()
            }
        }
        #expect(await eventually(30) { running.withLock { $0.now } == 4 }, "four run at once")
        for _ in 0..<12 { release.signal() }
        for _ in 0..<12 { try await blocking { done.wait() } }
        #expect(running.withLock { $0.most } == 4)
        #expect(workers.threadCount <= 4)
        #expect(await eventually(30) { workers.threadCount == 0 }, "idle threads end")
    }

    /// Not an assertion on time: the figures for the report (32 concurrent single-operation
    /// pushes against one store with a pool of 16), through the store's threads and through
    /// a concurrent Dispatch queue as before.
    @Test("[issue 17] 32 concurrent pushes on a pool of 16: store threads vs a concurrent Dispatch queue (figures printed)")
    func concurrentPushFigures() async throws {
        try await withTempDirectory { dir in
            let url = try await PostgresTestDatabases.create(for: dir)
            let store = try RelayStore(database: try RelayPostgresDatabase(url: url, poolSize: 16))
            defer { try? store.close() }
            let nb = try store.createNotebook()
            let endpoint = try store.endpoint(notebook: nb)
            let oldQueue = DispatchQueue(label: "before", attributes: .concurrent)
            let next = Atomic<UInt64>(0)
            func round(_ viaWorkers: Bool) async throws -> Double {
                let start = ContinuousClock.now
                try await withThrowingTaskGroup(of: UInt64.self) { group in
                    for _ in 0..<32 {
                        let replica = next.add(1, ordering: .relaxed).newValue
                        let request = Self.push(LogRef(document: DocumentID(), page: PageID()), replica: replica, 1...1)
                        group.addTask {
                            if viaWorkers { return try await endpoint.sync(request).accepted }
                            return try await withCheckedThrowingContinuation { c in
                                oldQueue.async { c.resume(with: Result { try store.sync(request, notebook: nb).accepted }) }
                            }
                        }
                    }
                    for try await accepted in group { #expect(accepted == 1) }
                }
                let (s, atto) = (ContinuousClock.now - start).components
                return Double(s) + Double(atto) / 1e18
            }
            _ = try await round(true)
            var figures: [String] = []
            for viaWorkers in [false, true, false, true] {
                var total = 0.0
                for _ in 0..<10 { total += try await round(viaWorkers) }
                figures.append("\(viaWorkers ? "store threads (16)" : "concurrent Dispatch queue"): "
                               + "\(Int((320 / total).rounded())) pushes/s, \(String(format: "%.1f", total / 10 * 1000)) ms per 32")
            }
            // Pulls (read transactions, no lock): 32 at once, each the steady state of a client
            // 32 operations behind (a few round trips each, little decoding).
            let info = try store.info(notebook: nb)
            let epoch = info.epoch, behind = info.cursor - 32
            func pulls(_ viaWorkers: Bool) async throws -> Double {
                let start = ContinuousClock.now
                try await withThrowingTaskGroup(of: Int.self) { group in
                    for i in 0..<32 {
                        let request = SyncRequest(replica: ReplicaID(UInt64(100_000 + i)), epoch: epoch, cursor: behind)
                        group.addTask {
                            if viaWorkers { return try await endpoint.sync(request).pull.count }
                            return try await withCheckedThrowingContinuation { c in
                                oldQueue.async { c.resume(with: Result { try store.sync(request, notebook: nb).pull.count }) }
                            }
                        }
                    }
                    for try await logs in group { #expect(logs > 0) }
                }
                let (s, atto) = (ContinuousClock.now - start).components
                return Double(s) + Double(atto) / 1e18
            }
            for viaWorkers in [false, true, false, true] {
                var total = 0.0
                for _ in 0..<10 { total += try await pulls(viaWorkers) }
                figures.append("pulls of 32 operations, \(viaWorkers ? "store threads (16)" : "concurrent Dispatch queue"): "
                               + "\(Int((320 / total).rounded())) pulls/s, \(String(format: "%.1f", total / 10 * 1000)) ms per 32")
            }
            print("concurrentPushFigures:\n  " + figures.joined(separator: "\n  "))
        }
    }
}
