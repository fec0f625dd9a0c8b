import Foundation
import LnoteModel
import LnotePostgres
import LnoteReplication
import LnoteRelayPostgres
import LnoteSQLite
@testable import LnoteServer
@testable import LnoteSync
import LnoteTestSupport
import Synchronization
import Testing

/// `RelayCopy` (issue 17 item 4): a relay's whole data moved between backends, verified, the
/// sequences continued and the epochs kept ([SYNC-58]); refusals.
@Suite("Relay copy between backends")
struct RelayCopyTests {
    /// Fills `store` with seeded random notebooks: real strokes and synthetic operations over
    /// several logs and replicas (devices own them), assets, a checkpoint, tokens (one that
    /// expires). Returns the tokens made, by notebook.
    static func fill(_ store: RelayStore, _ rng: inout SeededRNG) throws -> [NotebookID: [String]] {
        var tokens: [NotebookID: [String]] = [:]
        for n in 0..<Int.random(in: 2...4, using: &rng) {
            let nb = try store.createNotebook()
            let devices = (0..<Int.random(in: 1...3, using: &rng)).map { "device-\(n)-\($0)" }
            for (i, d) in devices.enumerated() {
                tokens[nb, default: []].append(try store.createToken(notebook: nb, label: "t\(i)", device: d,
                                                                      expiresIn: i == 1 ? .seconds(86_400) : nil))
            }
            for (i, d) in devices.enumerated() {
                let replica = ReplicaID(UInt64(0x100 * (n + 1) + i))
                let log = LogRef(document: DocumentID(), page: PageID())
                var page = PageReplica(page: log.page!)
                let ops = try (0..<Int.random(in: 1...9, using: &rng)).map { _ in
                    try page.add(.stroke(randomStroke(&rng)), by: replica, wallTime: 1)
                }
                _ = try store.sync(SyncRequest(replica: replica, epoch: 0, cursor: 0, push: [LogBatch(log: log, ops: ops)]),
                                   notebook: nb, device: d)
                if i == 0 {
                    _ = try store.putCheckpoint(notebook: nb, checkpoint: try checkpoint(log, ops, at: VectorClock([(replica, UInt64(ops.count))])))
                }
                let synthetic = RelayBackendTests.push(LogRef(document: DocumentID(), page: PageID()), replica: replica,
                                                       counters: 1...UInt64.random(in: 1...20, using: &rng))
                _ = try store.sync(SyncRequest(replica: replica, epoch: 0, cursor: 0, push: synthetic), notebook: nb, device: d)
            }
            // The first notebook holds at least one asset, so every seed has assets to copy.
            for _ in 0..<Int.random(in: (n == 0 ? 1 : 0)...3, using: &rng) {
                let bytes = randomBytes(Int.random(in: 1...3000, using: &rng), &rng)
                _ = try store.putAsset(bytes, id: AssetID.of(bytes), notebook: nb)
            }
        }
        return tokens
    }

    /// Everything a client can see of a notebook through a store: its info, every operation
    /// pulled from cursor 0 with its log, clocks, checkpoints, tokens, owners.
    static func view(_ store: RelayStore, _ nb: NotebookID) throws -> String {
        let info = try store.info(notebook: nb)
        let pulled = try store.sync(SyncRequest(replica: ReplicaID(0xFFFF), epoch: info.epoch, cursor: 0), notebook: nb)
        let pull = pulled.pull.map { "\($0.log): \($0.frames.map { hexString($0.encoded) })" }
        let tokens = try store.listTokens(notebook: nb).map { "\($0.id) \($0.device) \($0.label) \($0.created) \(String(describing: $0.expires))" }
        return "\(info)\n\(pulled.cursor)\n\(pull)\n\(try store.clocks(notebook: nb))\n\(try store.checkpoints(notebook: nb))\n\(tokens)"
    }

    @Test("[issue 17] [SYNC-58] copy SQLite → PostgreSQL → SQLite: everything carried, verified, sequences continue, epochs kept")
    func roundTrip() async throws {
        let seed = UInt64.random(in: 1...1_000_000)
        try await withTempDirectory { dir in
            var rng = SeededRNG(seed: seed)
            let path = dir + "/source.sqlite"
            var tokens: [NotebookID: [String]] = [:]
            do {
                let s = try RelayStore(path: path)
                tokens = try Self.fill(s, &rng)
                try s.close()
            }
            // Sequences handed out beyond the last held (an operation dropped from quarantine,
            // a reservation): the copy continues after those too.
            do {
                let raw = try SQLiteDatabase(path: path)
                try raw.execute("UPDATE sqlite_sequence SET seq = seq + 100 WHERE name = 'ops'")
                try raw.close()
            }
            let source = try RelayCopy.openSource(try RelayCopy.sqliteSource(path: path))
            defer { try? source.close() }
            #expect(source.opened.epochsReset == nil, "seed \(seed): \(String(describing: source.opened.epochsReset))")
            let pg = try await RelayBackendKind.postgres.database(in: dir)
            let target = try pg.open()
            defer { try? target.close() }
            let report = try RelayCopy.copy(from: source, to: target, batchRows: 3)
            #expect(report.verified, "seed \(seed): \(report.differences)")
            #expect(report.batches > 7, "read in batches of 3: \(report.batches)")
            let issued = try source.database.transaction(.read) { try (source.database as! RelaySQLiteDatabase).issuedSequence($0) }
            #expect(report.sourceIssued == issued && report.targetIssued == issued, "seed \(seed)")
            #expect(report.tables.map(\.table) == RelayCopy.tables)
            #expect(report.tables.first { $0.table == "ops" }!.source > 10)
            for table in ["owners", "chains", "checkpoints", "assets", "tokens"] {
                #expect(report.tables.first { $0.table == table }!.target > 0, "\(table) copied (seed \(seed))")
            }
            for nb in try source.notebooks().map(\.id) {
                #expect(try Self.view(source, nb) == Self.view(target, nb), "seed \(seed), notebook \(nb)")
                for t in tokens[nb]! { #expect(try target.access(token: t, notebook: nb).result == .ok) }
            }
            // A push to the copy gets a sequence above every one the source issued, and a
            // client's cursor from the source still works: it pulls exactly the new operation.
            let nb = try source.notebooks()[0].id
            let info = try source.info(notebook: nb)
            let log = LogRef(document: DocumentID(), page: PageID())
            let r = try target.sync(SyncRequest(replica: ReplicaID(0xBEEF), epoch: info.epoch, cursor: info.cursor,
                                                push: RelayBackendTests.push(log, replica: ReplicaID(0xBEEF), counters: 1...1)),
                                    notebook: nb)
            #expect(!r.resync, "the epoch is the source's: no clock comparison")
            #expect(try target.info(notebook: nb).cursor > UInt64(issued), "seed \(seed)")
            let other = try target.sync(SyncRequest(replica: ReplicaID(0xCAFE), epoch: info.epoch, cursor: info.cursor), notebook: nb)
            #expect(!other.resync && other.pull.flatMap(\.frames).count == 1, "seed \(seed)")
            // A notebook made on the target after the copy gets a key of its own.
            let fresh = try target.createNotebook()
            #expect(try target.info(notebook: fresh).operations == 0)

            // And back, into a new SQLite file: the PostgreSQL side is the source now.
            let back = try RelayStore(path: dir + "/back.sqlite")
            defer { try? back.close() }
            let again = try RelayCopy.copy(from: target, to: back)
            #expect(again.verified, "seed \(seed): \(again.differences)")
            #expect(again.targetIssued == (try target.database.transaction(.read) {
                try (target.database as! RelayPostgresDatabase).issuedSequence($0) }))
            for nb in try target.notebooks().map(\.id) {
                #expect(try Self.view(target, nb) == Self.view(back, nb), "seed \(seed), notebook \(nb)")
            }
        }
    }

    @Test("[issue 17] a non-empty target is refused and left as it was", arguments: RelayBackends.all)
    func nonEmptyTarget(backend: RelayBackendKind) async throws {
        try await withTempDirectory { dir in
            var rng = SeededRNG(seed: 5)
            let source = try RelayStore(path: dir + "/source.sqlite")
            defer { try? source.close() }
            _ = try Self.fill(source, &rng)
            let database = try await backend.database(in: dir, name: "target")
            let target = try database.open()
            defer { try? target.close() }
            let nb = try target.createNotebook()
            do {
                _ = try RelayCopy.copy(from: source, to: target)
                Issue.record("copied into a target holding a notebook")
            } catch let e as LnoteError {
                #expect(e.code == .alreadyExists)
                #expect(e.description.contains("not empty") && e.description.contains("1 notebooks")
                        && e.description.contains("empty database"), "\(e)")
            }
            #expect(try target.notebooks().map(\.id) == [nb])
            #expect(try target.stats().operations == 0)
        }
    }

    @Test("[issue 17] a missing, empty, corrupt or foreign source is refused with a clear error, and nothing is created")
    func badSources() async throws {
        try await withTempDirectory { dir in
            let missing = dir + "/missing.sqlite"
            #expect(throws: LnoteError(.notFound)) { _ = try RelayCopy.sqliteSource(path: missing) }
            #expect(!FileManager.default.fileExists(atPath: missing), "the missing source was not created")
            FileManager.default.createFile(atPath: dir + "/empty.sqlite", contents: Data())
            #expect(throws: LnoteError(.notFound)) { _ = try RelayCopy.sqliteSource(path: dir + "/empty.sqlite") }

            var rng = SeededRNG(seed: 99)
            let corrupt = dir + "/corrupt.sqlite"
            FileManager.default.createFile(atPath: corrupt, contents: Data(randomBytes(8192, &rng)))
            do {
                _ = try RelayCopy.openSource(try RelayCopy.sqliteSource(path: corrupt))
                Issue.record("opened a corrupt file as a source")
            } catch let e as LnoteError {
                #expect(e.code == .database && e.description.contains(corrupt), "\(e)")
            }
            // An SQLite database of something else.
            let foreign = dir + "/foreign.sqlite"
            do {
                let raw = try SQLiteDatabase(path: foreign)
                try raw.execute("CREATE TABLE notes (x TEXT)")
                try raw.close()
            }
            do {
                _ = try RelayCopy.openSource(try RelayCopy.sqliteSource(path: foreign))
                Issue.record("opened a foreign file as a source")
            } catch let e as LnoteError {
                #expect(e.code == .notFound && e.description.contains("holds no relay store"), "\(e)")
            }
            // An empty PostgreSQL database: refused, and no schema is created in it.
            let pg = try await RelayBackendKind.postgres.database(in: dir)
            do {
                _ = try RelayCopy.openSource(try RelayPostgresDatabase(url: pg.location, poolSize: 1))
                Issue.record("opened an empty PostgreSQL database as a source")
            } catch let e as LnoteError {
                #expect(e.code == .notFound && e.description.contains("holds no relay store"), "\(e)")
            }
            let probe = try RelayPostgresDatabase(url: pg.location, poolSize: 1)
            defer { try? probe.close() }
            #expect(try probe.storedSchemaVersion() == nil)
        }
    }

    @Test("[issue 17] a source that a running relay serves is refused: writes after the copy would be lost", arguments: RelayBackends.all)
    func servedSource(backend: RelayBackendKind) async throws {
        try await withTempDirectory { dir in
            let database = try await backend.database(in: dir, name: "source")
            let relay = try database.open()
            defer { try? relay.close() }
            _ = try relay.createNotebook()
            let presence = RelayPresence(store: relay, port: 4000, timing: RelayStatsTests.fast) { 0 }
            #expect(await eventually(30) { (try? relay.stats())?.relayProcesses == 1 })
            let target = try RelayStore(path: dir + "/target.sqlite")
            defer { try? target.close() }
            // A second store on the source, as `lnote relay copy` in another process opens it.
            let source = try database.open()
            defer { try? source.close() }
            do {
                _ = try RelayCopy.copy(from: source, to: target)
                Issue.record("copied a source a relay serves")
            } catch let e as LnoteError {
                #expect(e.code == .invalidArgument, "\(e)")
                #expect(e.description.contains(backend == .sqlite ? "open in another relay process" : "serve the copy's source"), "\(e)")
            }
            presence.close()
            #expect(try target.stats().notebooks == 0, "nothing copied")
        }
    }
}

extension RelayCopyTests {
    @Test("[issue 17] a copy report with any difference is not verified, and says what differs")
    func reportDifferences() {
        let nb = NotebookID()
        let side = RelayCopyNotebookCheck.Side(operations: 3, cursor: 9, epoch: 7, checksum: [1, 2, 3])
        var r = RelayCopyReport(source: "a.sqlite", target: "host=/x dbname=y")
        r.tables = [RelayCopyTableCount(table: "ops", source: 3, target: 3)]
        r.notebooks = [RelayCopyNotebookCheck(notebook: nb, source: side, target: side)]
        r.sourceIssued = 9
        r.targetIssued = 9
        #expect(r.verified && r.differences.isEmpty)
        var fewer = r
        fewer.tables[0].target = 2
        #expect(!fewer.verified && fewer.differences == ["ops: 3 rows in the source, 2 in the target"])
        var other = r
        other.notebooks[0].target?.checksum = [9]
        #expect(!other.verified && other.differences.first?.contains("notebook \(nb)") == true)
        var missing = r
        missing.notebooks[0].target = nil
        #expect(!missing.verified && missing.differences == ["notebook \(nb) is missing from the target"])
        var behind = r
        behind.targetIssued = 8
        #expect(!behind.verified && behind.differences.first?.contains("below the source's 9") == true)
        var epoch = r
        epoch.notebooks[0].target?.epoch = 8
        #expect(!epoch.verified && epoch.differences.first?.contains("epochs differ") == true)
    }
}
