import Foundation
import LnoteModel
import LnotePostgres
@testable import LnoteRelayPostgres
import LnoteReplication
import LnoteSQLite
import LnoteServer
import LnoteSync
import LnoteTestSupport
import Synchronization
import Testing

/// Issue 18: relay notebooks have names and can be deleted (schema version 5,
/// `notebooks.name`), and presence is judged by the database's clock. Every test runs on
/// both backends.
@Suite struct RelayNotebookAdminTests {
    /// A notebook holding operations of two replicas (one owned by a device), an asset, a
    /// checkpoint and two tokens.
    static func fill(_ store: RelayStore, _ nb: NotebookID, seed: UInt64) throws -> (tokens: [String], ops: Int) {
        var rng = SeededRNG(seed: seed)
        let a = ReplicaID(0xA1)
        let log = LogRef(document: DocumentID(), page: PageID())
        var pa = PageReplica(page: log.page!)
        let ops = try (0..<Int.random(in: 3...9, using: &rng)).map { _ in try pa.add(.stroke(randomStroke(&rng)), by: a, wallTime: 1) }
        _ = try store.sync(SyncRequest(replica: a, epoch: 0, cursor: 0, push: [LogBatch(log: log, ops: ops)]), notebook: nb,
                           device: "desk")
        _ = try store.sync(SyncRequest(replica: ReplicaID(7), epoch: 0, cursor: 0,
                                       push: RelayBackendTests.push(LogRef(document: DocumentID(), page: PageID()),
                                                                    replica: ReplicaID(7), counters: 1...4)), notebook: nb)
        let bytes = randomBytes(Int.random(in: 10...2000, using: &rng), &rng)
        _ = try store.putAsset(bytes, id: AssetID.of(bytes), notebook: nb)
        _ = try store.putCheckpoint(notebook: nb, checkpoint: try checkpoint(log, ops, at: VectorClock([(a, UInt64(ops.count))])))
        let tokens = try ["desk", "phone"].map { try store.createToken(notebook: nb, label: "", device: $0) }
        return (tokens, ops.count + 4)
    }

    /// Rows of `nb` (the internal key) in every table that refers to a notebook.
    static func rows(_ store: RelayStore, nb: Int64) throws -> [String: Int64] {
        try store.database.transaction(.read) { tx in
            var out: [String: Int64] = [:]
            for t in ["ops", "assets", "checkpoints", "tokens", "owners", "chains", "notebooks"] {
                out[t] = try tx.query("SELECT count(*) FROM \(t) WHERE nb = ?1", [.integer(nb)]).first?.first?.int64 ?? -1
            }
            return out
        }
    }

    static func key(_ store: RelayStore, _ id: NotebookID) throws -> Int64 {
        try store.database.transaction(.read) { tx in
            try tx.query("SELECT nb FROM notebooks WHERE id = ?1", [.text(id.description)]).first?.first?.int64 ?? -1
        }
    }

    @Test("[issue 18] [SYNC-85] names: given at creation, listed, changed, removed; unfit names refused", arguments: RelayBackends.all)
    func names(backend: RelayBackendKind) async throws {
        try await withRelay(backend) { store, unnamed, _ in
            let named = try store.createNotebook(name: "Lab notes — 2026")
            #expect(try store.info(notebook: named).name == "Lab notes — 2026")
            #expect(try store.info(notebook: unnamed).name == "")
            #expect(try store.notebooks().map(\.name).sorted() == ["", "Lab notes — 2026"])
            try store.renameNotebook(unnamed, to: "Lab notes — 2026")  // names need not be unique
            try store.renameNotebook(named, to: "Kitchen")
            #expect(try store.info(notebook: named).name == "Kitchen" && store.info(notebook: unnamed).name == "Lab notes — 2026")
            try store.renameNotebook(named, to: "")
            #expect(try store.info(notebook: named).name == "")
            for bad in [" lead", "trail ", "tab\there", "line\nbreak", String(repeating: "é", count: 101)] {
                #expect(throws: LnoteError.self, "\(bad.debugDescription)") { try store.renameNotebook(named, to: bad) }
                #expect(throws: LnoteError.self, "\(bad.debugDescription)") { try store.createNotebook(name: bad) }
            }
            #expect(try store.notebooks().count == 2, "a refused name created nothing")
            #expect(throws: LnoteError(.notFound, "")) { try store.renameNotebook(NotebookID(), to: "x") }
        }
    }

    @Test("[issue 18] [SYNC-85] deleting a notebook removes every row it had and nothing of another; refused while it holds operations unless forced",
          arguments: RelayBackends.all)
    func delete(backend: RelayBackendKind) async throws {
        let seed = UInt64.random(in: 1...1_000_000)
        try await withRelay(backend) { store, nb, _ in
            let other = try store.createNotebook(name: "kept")
            let (tokens, ops) = try Self.fill(store, nb, seed: seed)
            let (otherTokens, _) = try Self.fill(store, other, seed: seed &+ 1)
            let key = try Self.key(store, nb), otherKey = try Self.key(store, other)
            let otherBefore = try Self.rows(store, nb: otherKey)
            #expect(try Self.rows(store, nb: key).values.allSatisfy { $0 > 0 }, "seed \(seed): filled")
            let notified = Mutex<[NotebookID]>([])
            let observer = store.observeChanges { id in notified.withLock { $0.append(id) } }
            defer { store.stopObserving(observer) }

            // Not empty: refused, saying how many, nothing removed.
            #expect { try store.deleteNotebook(nb, onlyIfEmpty: true) } throws: { e in
                (e as? LnoteError)?.code == .invalidState && "\(e)".contains("\(ops) operations")
            }
            #expect(try store.info(notebook: nb).operations == ops, "seed \(seed)")

            let d = try store.deleteNotebook(nb)
            #expect(d.notebook.operations == ops && d.notebook.assets == 1 && d.notebook.checkpoints == 1 && d.notebook.tokens == 2
                    && d.owners == 1 && d.chains == 2, "seed \(seed): \(d)")
            let left = try Self.rows(store, nb: key)
            #expect(left.values.allSatisfy { $0 == 0 }, "seed \(seed): \(left)")
            #expect(try Self.rows(store, nb: otherKey) == otherBefore, "seed \(seed): the other notebook is untouched")
            #expect(try store.notebooks().map(\.id) == [other])
            #expect(Set(notified.withLock { $0 }) == [nb], "long polls held for it are woken (PostgreSQL: by its change feed too)")
            for t in tokens { #expect(try store.access(token: t, notebook: nb).result == .unauthorized) }
            for t in otherTokens { #expect(try store.access(token: t, notebook: other).result == .ok) }
            #expect(throws: LnoteError(.notFound, "")) { try store.endpoint(notebook: nb) }
            #expect(throws: LnoteError(.notFound, "")) { try store.deleteNotebook(nb) }

            // Empty: deleted even when only an empty one may be; its id can be used again.
            let empty = try store.createNotebook()
            #expect(try store.deleteNotebook(empty, onlyIfEmpty: true).notebook.operations == 0)
            try store.createNotebook(id: nb, name: "again")
            #expect(try store.info(notebook: nb).operations == 0 && store.info(notebook: nb).cursor == 0)
            // Sequences are never issued again: the next push goes above what the deleted notebook had.
            let cursor = try store.info(notebook: other).cursor
            _ = try store.sync(SyncRequest(replica: ReplicaID(9), epoch: 0, cursor: 0,
                                           push: RelayBackendTests.push(LogRef(document: DocumentID(), page: PageID()),
                                                                        replica: ReplicaID(9), counters: 1...1)), notebook: nb)
            #expect(try store.info(notebook: nb).cursor > max(cursor, d.notebook.cursor), "seed \(seed)")
        }
    }

    /// A database of `backend` at schema version 4 (before `notebooks.name`), holding one
    /// notebook with operations and a token, as that version wrote it.
    static func version4(_ backend: RelayBackendKind, in dir: String) async throws -> (RelayTestDatabase, NotebookID, String) {
        let database = try await backend.database(in: dir)
        let store: RelayStore
        switch backend {
        case .sqlite: store = try database.open()
        case .postgres:
            let v4 = RelayPostgresSchema(version: 4, migrations: [RelayPostgresSchema.migrationV3toV4])
            store = try RelayStore(database: try RelayPostgresDatabase(url: database.location, poolSize: 1, schema: v4))
        }
        let nb: NotebookID
        let token: String
        do {
            // As version 4 made it: no name.
            nb = NotebookID()
            try store.database.transaction(.write) { tx in
                _ = try tx.execute("INSERT INTO notebooks (id, epoch, created) VALUES (?1, 42, 1)", [.text(nb.description)])
            }
            _ = try store.sync(SyncRequest(replica: ReplicaID(1), epoch: 0, cursor: 0,
                                           push: RelayBackendTests.push(LogRef(document: DocumentID(), page: PageID()),
                                                                        replica: ReplicaID(1), counters: 1...4)), notebook: nb)
            token = try store.createToken(notebook: nb, label: "", device: "desk")
        } catch {
            try? store.close()
            throw error
        }
        try store.close()
        if backend == .sqlite {
            // Back to version 4 as that version wrote it.
            let raw = try SQLiteDatabase(path: database.location)
            defer { try? raw.close() }
            try raw.execute("ALTER TABLE notebooks DROP COLUMN name")
            try raw.execute("PRAGMA user_version = 4")
        }
        return (database, nb, token)
    }

    @Test("[issue 18] [SYNC-85] a version 4 store is upgraded to 5 when opened: data and tokens kept, notebooks unnamed, then named",
          arguments: RelayBackends.all)
    func upgradeFromVersion4(backend: RelayBackendKind) async throws {
        try await withTempDirectory { dir in
            let (database, nb, token) = try await Self.version4(backend, in: dir)
            let store = try database.open()
            defer { try? store.close() }
            #expect(store.opened.upgradedFrom == 4 && store.opened.epochsReset == nil, "\(store.opened)")
            let info = try store.info(notebook: nb)
            #expect(info.operations == 4 && info.name == "")
            #expect(try store.access(token: token, notebook: nb) == Access(.ok, device: "desk"))
            try store.renameNotebook(nb, to: "upgraded")
            #expect(try store.notebooks().map(\.name) == ["upgraded"])
            let again = try database.open()
            #expect(again.opened.upgradedFrom == nil)
            try again.close()
        }
    }

    /// A backend whose clock (`nowMillisecondsSQL`) is `offset` milliseconds off this host's,
    /// as a database server's may be.
    final class ShiftedClock: RelayDatabase, @unchecked Sendable {
        let inner: any RelayDatabase
        let offset: Int64
        init(_ inner: any RelayDatabase, offset: Int64) {
            self.inner = inner
            self.offset = offset
        }
        var location: String { inner.location }
        var tokenInsertionOrder: String { inner.tokenInsertionOrder }
        var nowMillisecondsSQL: String { "(\(inner.nowMillisecondsSQL) + \(offset))" }
        func open(_ relay: RelayOpening) throws -> RelayStore.OpenReport { try inner.open(relay) }
        func transaction<T>(_ mode: RelayTransactionMode, _ body: (any RelayTransaction) throws -> T) throws -> T {
            try inner.transaction(mode, body)
        }
        func allocateSequences(_ count: Int, _ tx: any RelayTransaction) throws -> Int64 { try inner.allocateSequences(count, tx) }
        func publishChange(of notebook: NotebookID, _ tx: any RelayTransaction) throws { try inner.publishChange(of: notebook, tx) }
        func issued(through sequence: Int64) throws { try inner.issued(through: sequence) }
        func close() throws { try inner.close() }
    }

    @Test("[issue 18] presence is written and judged by the database's clock: a host 90 s off it still counts as alive",
          arguments: RelayBackends.all)
    func presenceUsesTheDatabaseClock(backend: RelayBackendKind) async throws {
        try await withTempDirectory { dir in
            let database = try await backend.database(in: dir)
            // The database's clock is 90 s behind this host's (or this host 90 s ahead of it).
            let store = try database.open { ShiftedClock($0, offset: -90_000) }
            defer { try? store.close() }
            let presence = RelayPresence(store: store, port: 9, timing: RelayStatsTests.fast) { 3 }
            defer { presence.close() }
            #expect(await eventually(30) { (try? store.stats())?.longPolls == 3 })
            let s = try store.stats()
            let host = Int64((Date().timeIntervalSince1970 * 1000).rounded())
            let row = try #require(s.processes.first)
            #expect(abs(s.now - (host - 90_000)) < 10_000, "stats judge by the database's clock: \(s.now) vs host \(host)")
            #expect(abs(row.heartbeat - (host - 90_000)) < 10_000 && row.started <= row.heartbeat,
                    "the heartbeat is the database's time, not the host's: \(row.heartbeat) vs host \(host)")
            // By the host's clock the same row would look 90 s old: dead.
            #expect(try store.stats(now: host).relayProcesses == 0)
        }
    }
}
