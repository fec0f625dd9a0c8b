import Foundation
import LnoteModel
import LnoteReplication
import LnoteSQLite
import LnoteServer
import LnoteSync
import Testing
import LnoteTestSupport

@Suite("Relay store: tokens, files, versions")
struct RelayStoreTests {
    @Test("[SYNC-25] tokens: unknown → unauthorized, another notebook's → forbidden, revoked → unauthorized", arguments: RelayBackends.all)
    func tokens(backend: RelayBackendKind) async throws {
        try await withRelay(backend) { store, nb1, _ in
            let nb2 = try store.createNotebook()
            let t1 = try store.createToken(notebook: nb1, label: "laptop")
            let t1b = try store.createToken(notebook: nb1, label: "tablet")
            let t2 = try store.createToken(notebook: nb2, label: "other")
            for t in [t1, t1b, t2] { #expect(RelayToken.isWellFormed(t), "\(t)") }
            #expect(Set([t1, t1b, t2]).count == 3)

            #expect(try store.authorize(token: t1, notebook: nb1) == .ok)
            #expect(try store.authorize(token: t1b, notebook: nb1) == .ok)
            #expect(try store.authorize(token: t2, notebook: nb2) == .ok)
            #expect(try store.authorize(token: t2, notebook: nb1) == .forbidden)
            #expect(try store.authorize(token: t1, notebook: nb2) == .forbidden)
            #expect(try store.authorize(token: t1, notebook: NotebookID()) == .forbidden)
            #expect(try store.authorize(token: RelayToken.generate(), notebook: nb1) == .unauthorized)
            #expect(try store.authorize(token: nil, notebook: nb1) == .unauthorized)
            #expect(try store.authorize(token: "", notebook: nb1) == .unauthorized)
            #expect(try store.authorize(token: t1.uppercased(), notebook: nb1) == .unauthorized)
            #expect(try store.authorize(token: String(t1.dropLast()), notebook: nb1) == .unauthorized)
            #expect(try store.authorize(token: String(repeating: "a", count: 10_000), notebook: nb1) == .unauthorized)

            let listed = try store.listTokens(notebook: nb1)
            #expect(listed.map(\.label) == ["laptop", "tablet"])
            #expect(listed[0].id == String(hexString(RelayToken.digest(t1)).prefix(16)))
            #expect(!listed.contains { t1.hasPrefix($0.id) || t1b.hasPrefix($0.id) }, "ids are not token prefixes")

            #expect(throws: LnoteError(.notFound)) { try store.revokeToken(notebook: nb2, id: listed[0].id) }
            #expect(throws: LnoteError(.invalidArgument)) { try store.revokeToken(notebook: nb1, id: "abc") }
            try store.revokeToken(notebook: nb1, id: listed[0].id)
            #expect(try store.authorize(token: t1, notebook: nb1) == .unauthorized)
            #expect(try store.authorize(token: t1b, notebook: nb1) == .ok)
            #expect(try store.listTokens(notebook: nb1).map(\.label) == ["tablet"])
        }
    }

    @Test("[SYNC-25] only the SHA-256 of a token reaches the file")
    func tokensStoredHashed() async throws {
        try await withTempDirectory { dir in
            let path = dir + "/relay.sqlite"
            let store = try RelayStore(path: path)
            let nb = try store.createNotebook()
            var tokens: [String] = []
            for i in 0..<5 { tokens.append(try store.createToken(notebook: nb, label: "device \(i)")) }
            // Read the files while the store is open (WAL holds recent commits) and after close.
            func fileBytes() -> [UInt8] {
                [path, path + "-wal", path + "-journal"].flatMap { p in
                    (FileManager.default.contents(atPath: p)).map { [UInt8]($0) } ?? []
                }
            }
            let open = fileBytes()
            try store.close()
            let closed = fileBytes()
            for (name, bytes) in [("open", open), ("closed", closed)] {
                for t in tokens {
                    #expect(!contains(bytes, Array(t.utf8)), "\(name): token text found in the database")
                    #expect(!contains(bytes, Array(t.uppercased().utf8)), "\(name): token text found in the database")
                    var raw: [UInt8] = []
                    var it = Array(t.utf8).makeIterator()
                    while let h = it.next(), let l = it.next() {
                        raw.append(UInt8(String(decoding: [h, l], as: UTF8.self), radix: 16)!)
                    }
                    #expect(!contains(bytes, raw), "\(name): token bytes found in the database")
                }
            }
            // The search does find what is stored: the digests.
            for t in tokens { #expect(contains(closed, RelayToken.digest(t))) }
        }
    }

    @Test("constant-time comparison agrees with ==")
    func constantTimeEqual() {
        var rng = SeededRNG(seed: 4)
        for _ in 0..<200 {
            let a = randomBytes(Int.random(in: 0...4, using: &rng), &rng)
            let b = Bool.random(using: &rng) ? a : randomBytes(Int.random(in: 0...4, using: &rng), &rng)
            #expect(RelayToken.constantTimeEqual(a, b) == (a == b))
        }
    }

    @Test("[SYNC-2] reopening the store keeps epoch and cursor: clients continue in one exchange",
          arguments: RelayBackends.all)
    func reopen(backend: RelayBackendKind) async throws {
        try await withTempDirectory { dir in
            let database = try await backend.database(in: dir)
            var rng = SeededRNG(seed: 8)
            let a = TestNotebook(replica: ReplicaID(1)), b = TestNotebook(replica: ReplicaID(2))
            let doc = try a.createDocument("persist")
            let page = LogRef(document: doc, page: try a.addPage(doc))
            for _ in 0..<4 { try a.addStroke(page, randomStroke(&rng)) }
            let nb: NotebookID
            let info: RelayNotebookInfo
            let token: String
            do {
                let store = try database.open()
                nb = try store.createNotebook()
                token = try store.createToken(notebook: nb, label: "a")
                try await a.sync(store.endpoint(notebook: nb))
                try store.putCheckpoint(notebook: nb, checkpoint: a.checkpoint(page))
                info = try store.info(notebook: nb)
                try store.close()
                #expect(throws: LnoteError(.invalidState)) { _ = try store.info(notebook: nb) }
                try store.close() // a second close does nothing
            }
            let store = try database.open()
            defer { try? store.close() }
            #expect(try store.info(notebook: nb) == info)
            #expect(info.operations == 6 && info.tokens == 1 && info.checkpoints == 1 && info.cursor > 0)
            #expect(try store.authorize(token: token, notebook: nb) == .ok)
            #expect(try store.notebooks() == [info])
            let ep = try store.endpoint(notebook: nb)
            try a.addStroke(page, randomStroke(&rng))
            let ra = try await a.sync(ep)
            #expect(ra.roundTrips == 1, "same epoch, same cursor: steady state")
            #expect(ra.opsAccepted == 1)
            try await b.sync(ep)
            #expect(a.view == b.view)
            #expect(try store.checkpoints(notebook: nb).count == 1)
        }
    }

    @Test("a newer schema version is refused; so is an SQLite file that is not a relay store")
    func versions() async throws {
        try await withTempDirectory { dir in
            let path = dir + "/relay.sqlite"
            try RelayStore(path: path).close()
            let raw = try SQLiteDatabase(path: path)
            #expect(try raw.query("PRAGMA user_version").first?.first?.int64 == RelayStore.schemaVersion)
            try raw.execute("PRAGMA user_version = \(RelayStore.schemaVersion + 1)")
            try raw.close()
            #expect(throws: LnoteError(.unsupportedVersion)) { _ = try RelayStore(path: path) }

            let foreign = dir + "/other.sqlite"
            let db = try SQLiteDatabase(path: foreign)
            try db.execute("CREATE TABLE notes (x TEXT)")
            try db.close()
            #expect(throws: LnoteError(.invalidArgument)) { _ = try RelayStore(path: foreign) }

            let garbage = dir + "/garbage.sqlite"
            _ = FileManager.default.createFile(atPath: garbage, contents: Data(repeating: 0x5A, count: 4096))
            #expect(throws: LnoteError(.database)) { _ = try RelayStore(path: garbage) }
        }
    }
}
