import Foundation
import LnoteModel
import LnoteReplication
import LnoteServer
import LnoteSync
import Synchronization
import Testing
import LnoteTestSupport

/// What `RelayDatabase` promises beyond what the other suites check through the relay: a
/// write body that runs again after a serialization failure changes nothing twice, two
/// stores sharing one database store each operation once, and the shared SQL stays
/// portable.
@Suite("Relay backends: retries, two stores on one database, portable SQL")
struct RelayBackendTests {
    /// The serialization failure a `RetryingDatabase` simulates.
    struct SimulatedSerializationFailure: Error {}

    /// A backend whose write transactions fail once each, as PostgreSQL's do under
    /// `SERIALIZABLE`, and run their body again: at the `failAt`-th statement of the body
    /// (1-based; a body with fewer fails at its end), or at the end when nil (a failed
    /// commit). The rollback is the inner backend's: the body throws inside its transaction.
    final class RetryingDatabase: RelayDatabase, @unchecked Sendable {
        let inner: any RelayDatabase
        let failAt: Int?
        /// Write bodies run, and failures simulated.
        let counts = Mutex<(runs: Int, failures: Int)>((0, 0))

        init(_ inner: any RelayDatabase, failAt: Int?) {
            self.inner = inner
            self.failAt = failAt
        }

        var location: String { inner.location }
        var tokenInsertionOrder: String { inner.tokenInsertionOrder }
        var nowMillisecondsSQL: String { inner.nowMillisecondsSQL }
        func open(_ relay: RelayOpening) throws -> RelayStore.OpenReport { try inner.open(relay) }
        func allocateSequences(_ count: Int, _ tx: any RelayTransaction) throws -> Int64 {
            try inner.allocateSequences(count, (tx as? FailingTransaction)?.inner ?? tx)
        }
        func publishChange(of notebook: NotebookID, _ tx: any RelayTransaction) throws {
            try inner.publishChange(of: notebook, (tx as? FailingTransaction)?.inner ?? tx)
        }
        func startChangeFeed(_ changed: @escaping @Sendable (NotebookID) -> Void) throws { try inner.startChangeFeed(changed) }
        func issued(through sequence: Int64) throws { try inner.issued(through: sequence) }
        func close() throws { try inner.close() }

        func transaction<T>(_ mode: RelayTransactionMode, _ body: (any RelayTransaction) throws -> T) throws -> T {
            guard mode.writes else { return try inner.transaction(mode, body) }
            var failed = false
            while true {
                counts.withLock { $0.runs += 1 }
                do {
                    return try inner.transaction(mode) { tx in
                        let failing = FailingTransaction(tx, failAt: failed ? nil : failAt)
                        let result = try body(failing)
                        if !failed { throw SimulatedSerializationFailure() }
                        return result
                    }
                } catch is SimulatedSerializationFailure where !failed {
                    failed = true
                    counts.withLock { $0.failures += 1 }
                }
            }
        }
    }

    /// Throws `SimulatedSerializationFailure` at its `failAt`-th statement.
    final class FailingTransaction: RelayTransaction {
        let inner: any RelayTransaction
        let failAt: Int?
        var statements = 0

        init(_ inner: any RelayTransaction, failAt: Int?) {
            self.inner = inner
            self.failAt = failAt
        }

        func step() throws {
            statements += 1
            if statements == failAt { throw SimulatedSerializationFailure() }
        }

        func prepare(_ sql: String) throws -> any RelayStatement { FailingStatement(try inner.prepare(sql), tx: self) }
        func query(_ sql: String, _ params: [RelayValue]) throws -> [[RelayValue]] {
            try step()
            return try inner.query(sql, params)
        }
        func execute(_ sql: String, _ params: [RelayValue]) throws -> Int {
            try step()
            return try inner.execute(sql, params)
        }
    }

    final class FailingStatement: RelayStatement {
        let inner: any RelayStatement
        let tx: FailingTransaction
        init(_ inner: any RelayStatement, tx: FailingTransaction) {
            self.inner = inner
            self.tx = tx
        }
        func rows(_ params: [RelayValue]) throws -> [[RelayValue]] {
            try tx.step()
            return try inner.rows(params)
        }
        func forEach(_ params: [RelayValue], _ body: ([RelayValue]) throws -> Bool) throws {
            try tx.step()
            try inner.forEach(params, body)
        }
        func first(_ params: [RelayValue]) throws -> [RelayValue]? {
            try tx.step()
            return try inner.first(params)
        }
        func run(_ params: [RelayValue]) throws -> Int {
            try tx.step()
            return try inner.run(params)
        }
    }

    /// What a store answered and holds after the same calls; nothing random in it.
    struct Transcript: Equatable {
        var answers: [String] = []
        var infos: [RelayNotebookInfo] = []
        var digests: [LogDigests] = []
        var clocks: [LogClock] = []
        var owners: [String] = []
        var tokens: [String] = []
        var checkpoints: [Checkpoint] = []
        var notified = 0
        var counts: RelayCounts?
    }

    /// Runs the same calls against each store, in step: a notebook, tokens, a client's
    /// syncs (with an asset and a device, so owners are claimed), a checkpoint, an asset
    /// stored twice, a token revoked, an epoch reset, a sync after it.
    static func drive(_ stores: [RelayStore], client a: TestNotebook, page: LogRef,
                      round: (Int) throws -> Void) async throws -> [Transcript] {
        var ts = stores.map { _ in Transcript() }
        let notified = Mutex([Int](repeating: 0, count: stores.count))
        let observers = stores.indices.map { i in stores[i].observeChanges { _ in notified.withLock { $0[i] += 1 } } }
        defer { for (s, o) in zip(stores, observers) { s.stopObserving(o) } }
        let nb = NotebookID(UUID(uuidString: "6A1B3C4D-0000-4000-8000-00000000F00D")!)
        for store in stores {
            try store.createNotebook(id: nb)
            #expect(throws: LnoteError(.alreadyExists)) { try store.createNotebook(id: nb) }
            _ = try store.createToken(notebook: nb, label: "one", device: "tablet")
            _ = try store.createToken(notebook: nb, label: "two")
        }
        let endpoints = try stores.map { try $0.endpoint(notebook: nb, device: "pen") }
        for r in 0..<3 {
            try round(r)
            for (i, ep) in endpoints.enumerated() {
                let s = try await a.sync(ep, key: "store \(i)")
                ts[i].answers.append("sent \(s.opsSent) accepted \(s.opsAccepted) received \(s.opsReceived) "
                                     + "assets \(s.assetsSent) round trips \(s.roundTrips)")
                var info = try stores[i].info(notebook: nb)
                info.epoch = 0
                ts[i].infos.append(info)
            }
        }
        for (i, store) in stores.enumerated() {
            ts[i].answers.append("checkpoint kept \(try store.putCheckpoint(notebook: nb, checkpoint: a.checkpoint(page)))")
            ts[i].answers.append("asset new \(try store.putAsset([1, 2, 3], id: AssetID.of([1, 2, 3]), notebook: nb))")
            ts[i].answers.append("asset new \(try store.putAsset([1, 2, 3], id: AssetID.of([1, 2, 3]), notebook: nb))")
            let first = try #require(try store.listTokens(notebook: nb).first)
            try store.revokeToken(notebook: nb, id: first.id)
            let epoch = try store.resetEpoch(notebook: nb)
            ts[i].answers.append("epoch stored \(try store.info(notebook: nb).epoch == epoch)")
            let s = try await a.sync(endpoints[i], key: "store \(i)")
            ts[i].answers.append("after the reset: accepted \(s.opsAccepted) round trips \(s.roundTrips)")
            for var info in try store.notebooks() {
                info.epoch = 0
                ts[i].infos.append(info)
            }
            ts[i].digests = try store.sync(SyncRequest(replica: ReplicaID(0x99), epoch: 0, cursor: 0, have: [], digests: []),
                                           notebook: nb).digests ?? []
            ts[i].clocks = try store.clocks(notebook: nb)
            ts[i].owners = try store.owners(notebook: nb).map { "\($0.replica) \($0.device)" }
            ts[i].tokens = try store.listTokens(notebook: nb).map { "\($0.label) \($0.deviceNamed ? $0.device : "unnamed")" }
            ts[i].checkpoints = try store.checkpoints(notebook: nb)
            // Change notices arrive on the feed's own thread (PostgreSQL: a NOTIFY read by the
            // listening connection after the commit): read the count once it has stopped moving.
            var seen = notified.withLock { $0[i] }
            var stable = 0
            for _ in 0..<100 where stable < 4 {
                try await Task.sleep(for: .milliseconds(50))
                let now = notified.withLock { $0[i] }
                stable = now == seen ? stable + 1 : 0
                seen = now
            }
            ts[i].notified = seen
            ts[i].counts = try RelayCounts.read(store)
        }
        return ts
    }

    @Test("[issue 17] a write body run again after a serialization failure changes nothing twice",
          arguments: RelayBackends.all, [nil, 1, 2, 3, 5, 8, 13] as [Int?])
    func retriedWrites(backend: RelayBackendKind, failAt: Int?) async throws {
        try await withTempDirectory { dir in
            let plain = try await backend.database(in: dir, name: "plain").open()
            defer { try? plain.close() }
            let retrying = try await backend.database(in: dir, name: "retrying").open { RetryingDatabase($0, failAt: failAt) }
            defer { try? retrying.close() }

            var rng = SeededRNG(seed: 17)
            let a = TestNotebook(replica: ReplicaID(0xA17))
            let doc = try a.createDocument("retried")
            let page = LogRef(document: doc, page: try a.addPage(doc))
            _ = try a.addImage(page, randomBytes(300, &rng))
            let ts = try await Self.drive([plain, retrying], client: a, page: page) { _ in
                for _ in 0..<4 { _ = try a.addStroke(page, randomStroke(&rng)) }
            }
            let db = try #require(retrying.database as? RetryingDatabase)
            let counts = db.counts.withLock { $0 }
            #expect(counts.failures > 10, "every write failed once: \(counts)")
            #expect(ts[1] == ts[0])
            #expect((ts[0].counts?.ops ?? 0) >= 15 && ts[0].owners.count == 1 && ts[0].checkpoints.count == 1,
                    "\(ts[0])")
        }
    }

    /// A push of page operations of one replica.
    static func push(_ log: LogRef, replica: ReplicaID, counters: ClosedRange<UInt64>) -> [LogBatch] {
        [LogBatch(log: log, ops: counters.map { syntheticOp(replica: replica.rawValue, counter: $0, page: true) })]
    }

    @Test("[issue 17] [SYNC-7] the same pushes stored at once through two stores on one database: each operation once",
          arguments: RelayBackends.all)
    func twoStoresOneDatabase(backend: RelayBackendKind) async throws {
        try await withTempDirectory { dir in
            let database = try await backend.database(in: dir)
            let one = try database.open()
            defer { try? one.close() }
            let two = try database.open()
            defer { try? two.close() }
            let nb = try one.createNotebook()
            #expect(throws: LnoteError(.alreadyExists)) { try two.createNotebook(id: nb) }
            let log = LogRef(document: DocumentID(), page: PageID())
            let replicas = (1...3).map { ReplicaID(UInt64($0)) }
            var accepted = 0
            var rng = SeededRNG(seed: 70)
            var held: [ReplicaID: UInt64] = [:]
            for round in 0..<20 {
                // Each store pushes a range of every replica from the same counter: they overlap.
                var pushes: [[LogBatch]] = [[], []]
                for r in replicas {
                    let base = held[r, default: 0]
                    for i in 0..<2 {
                        let to = base + UInt64.random(in: 1...12, using: &rng)
                        pushes[i] += Self.push(log, replica: r, counters: (base + 1)...to)
                        held[r] = max(held[r, default: 0], to)
                    }
                }
                let endpoints = [try one.endpoint(notebook: nb), try two.endpoint(notebook: nb)]
                let answers = try await withThrowingTaskGroup(of: SyncResponse.self) { group in
                    for i in 0..<2 {
                        let request = SyncRequest(replica: replicas[round % 3], epoch: 0, cursor: 0, have: [], push: pushes[i])
                        let ep = endpoints[i]
                        group.addTask { try await ep.sync(request) }
                    }
                    return try await group.reduce(into: [SyncResponse]()) { $0.append($1) }
                }
                accepted += answers.reduce(0) { $0 + Int($1.accepted) }
            }
            let total = held.values.reduce(0) { $0 + Int($1) }
            let counts = try RelayCounts.read(one)
            #expect(counts.ops == Int64(total), "every operation stored once")
            #expect(accepted == total, "each accepted by exactly one of the stores")
            let clock = VectorClock(held.map { ($0.key, $0.value) })
            #expect(try one.clocks(notebook: nb) == [LogClock(log: log, clock: clock)])
            #expect(try two.clocks(notebook: nb) == [LogClock(log: log, clock: clock)])
            // Chains are whole: the digests equal those of a store that got each operation once.
            let digests = try two.sync(SyncRequest(replica: ReplicaID(9), epoch: 0, cursor: 0, have: [], digests: []),
                                       notebook: nb).digests
            let fresh = try await backend.database(in: dir, name: "fresh").open()
            defer { try? fresh.close() }
            let nb2 = try fresh.createNotebook()
            var batches: [LogBatch] = []
            for r in replicas { batches += Self.push(log, replica: r, counters: 1...held[r]!) }
            _ = try fresh.sync(SyncRequest(replica: ReplicaID(9), epoch: 0, cursor: 0, push: batches), notebook: nb2)
            let expected = try fresh.sync(SyncRequest(replica: ReplicaID(9), epoch: 0, cursor: 0, have: [], digests: []),
                                          notebook: nb2).digests
            #expect(digests == expected)
            // Sequences are unique and a pull since 0 gives every operation once.
            let pulled = try one.sync(SyncRequest(replica: ReplicaID(9), epoch: try one.info(notebook: nb).epoch, cursor: 0),
                                      notebook: nb)
            #expect(pulled.pull.reduce(0) { $0 + $1.frames.count } == total)
        }
    }

    @Test("placeholders ?N become $N outside quoted text and comments")
    func dollarPlaceholders() {
        #expect(RelaySQL.dollarPlaceholders("SELECT a FROM t WHERE b = ?1 AND c > ?12") == "SELECT a FROM t WHERE b = $1 AND c > $12")
        #expect(RelaySQL.dollarPlaceholders("SELECT '?1', \"?2\" -- ?3\nFROM t WHERE x = ?4")
                == "SELECT '?1', \"?2\" -- ?3\nFROM t WHERE x = $4")
        #expect(RelaySQL.dollarPlaceholders("SELECT 'it''s ?1' WHERE y = ?2") == "SELECT 'it''s ?1' WHERE y = $2")
        #expect(RelaySQL.dollarPlaceholders("SELECT ? , ?x") == "SELECT ? , ?x")
    }

    /// The files whose SQL every backend runs.
    static let sharedFiles = ["RelayStore.swift", "RelayStore+Assets.swift", "RelayStore+Chains.swift",
                              "RelayStore+Checkpoints.swift", "RelayStore+Owners.swift", "RelayStore+Quarantine.swift",
                              "RelayStore+Schema.swift", "RelayStore+Sync.swift", "TokenStore.swift",
                              "RelayStore+Stats.swift", "RelayPresence.swift", "RelayCopy.swift", "RelayStore+View.swift"]

    @Test("[issue 17] the relay's shared SQL uses nothing one of SQLite and PostgreSQL lacks")
    func portableSQL() throws {
        let server = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Sources/LnoteServer")
        let forbidden = ["rowid", "INSERT OR", "PRAGMA", "typeof", "ifnull", "sqlite_", "RETURNING", "AUTOINCREMENT",
                         "WITHOUT ROWID", "REPLACE INTO", "GLOB", "strftime", "datetime(", "last_insert", "changes()",
                         // Clocks differ too: each backend gives its own (RelayDatabase.nowMillisecondsSQL).
                         "julianday", "clock_timestamp", "unixepoch", "extract(", "statement_timestamp", "current_timestamp"]
        for file in Self.sharedFiles {
            let text = try String(contentsOf: server.appendingPathComponent(file), encoding: .utf8)
            for (n, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                let code = line.trimmingCharacters(in: .whitespaces)
                if code.hasPrefix("//") { continue }
                for word in forbidden where code.range(of: word, options: .caseInsensitive) != nil {
                    Issue.record("\(file):\(n + 1): \(word) in shared SQL: \(code)")
                }
            }
            #expect(!text.contains("import LnoteSQLite"), "\(file) imports LnoteSQLite")
        }
    }
}
