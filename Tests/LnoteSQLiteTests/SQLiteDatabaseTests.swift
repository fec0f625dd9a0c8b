import Foundation
import LnoteModel
import LnoteSQLite
import Testing

/// A fresh directory under the system temp dir, removed by `body`'s end.
func withTempDirectory<T>(_ body: (String) throws -> T) throws -> T {
    let dir = FileManager.default.temporaryDirectory
        .appendingPathComponent("lnote-sqlite-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: dir) }
    return try body(dir)
}

/// The seeded generator the model ships (SplitMix64): one definition for every test.
typealias SeededRNG = SplitMix64

func randomBytes(_ n: Int, _ rng: inout SeededRNG) -> [UInt8] {
    (0..<n).map { _ in UInt8.random(in: 0...255, using: &rng) }
}

@Suite("SQLiteDatabase")
struct SQLiteDatabaseTests {
    @Test("typed values round-trip through bind and column reads")
    func roundTrips() throws {
        try withTempDirectory { dir in
            let db = try SQLiteDatabase(path: dir + "/t.sqlite")
            try db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, i INTEGER, r REAL, s TEXT, b BLOB)")
            let seed = UInt64.random(in: 0...UInt64.max)
            var rng = SeededRNG(seed: seed)
            let big = randomBytes(100_000, &rng)
            let cases: [(Int64, Double, String, [UInt8]?)] = [
                (0, 0, "", []),
                (Int64.max, -1.5e300, "héllo ✍️ 日本", [0]),
                (Int64.min, .pi, "with\u{0}nul", big),
                (42, 0.1, "plain", nil),
            ]
            let insert = try db.prepare("INSERT INTO t (i, r, s, b) VALUES (?, ?, ?, ?)")
            var ids: [Int64] = []
            for (i, r, s, b) in cases {
                try insert.reset()
                try insert.bind(i, at: 1)
                try insert.bind(r, at: 2)
                try insert.bind(s, at: 3)
                if let b { try insert.bind(b, at: 4) } else { try insert.bindNull(at: 4) }
                #expect(try insert.step() == false)
                #expect(db.changes == 1)
                ids.append(db.lastInsertRowID)
            }
            #expect(ids == [1, 2, 3, 4])
            let select = try db.prepare("SELECT i, r, s, b FROM t WHERE id = ?")
            for (n, (i, r, s, b)) in cases.enumerated() {
                try select.reset()
                try select.bind(ids[n], at: 1)
                #expect(try select.step())
                #expect(try select.int64(at: 0) == i)
                #expect(try select.double(at: 1) == r)
                #expect(try select.string(at: 2) == s, "seed \(seed)")
                #expect(try select.blob(at: 3) == b, "row \(n), seed \(seed)")
                #expect(try select.isNull(at: 3) == (b == nil))
                #expect(try select.step() == false)
            }
            // Empty blob stays a blob, NULL stays NULL.
            let rows = try db.query("SELECT typeof(b) FROM t ORDER BY id")
            #expect(rows.map { $0[0] } == [.text("blob"), .text("blob"), .text("blob"), .text("null")])
            // SQLiteValue path and named parameters.
            try db.execute("INSERT INTO t (i, s) VALUES (?1, ?2)", [.integer(7), .text("seven")])
            let named = try db.prepare("SELECT s FROM t WHERE i = :i")
            try named.bind(.integer(7), named: ":i")
            #expect(try named.allRows() == [[.text("seven")]])
            try db.close()
        }
    }

    @Test("constraint violations throw .database naming the SQLite code, message and SQL")
    func constraintErrors() throws {
        try withTempDirectory { dir in
            let path = dir + "/c.sqlite"
            let db = try SQLiteDatabase(path: path)
            try db.execute("CREATE TABLE u (k TEXT UNIQUE NOT NULL)")
            try db.execute("INSERT INTO u VALUES (?)", ["a"])
            do {
                try db.execute("INSERT INTO u VALUES (?)", ["a"])
                Issue.record("duplicate insert did not throw")
            } catch let e as LnoteError {
                #expect(e.code == .database)
                #expect(e.path == path)
                #expect(e.underlying?.hasPrefix("SQLITE_CONSTRAINT_UNIQUE (2067): UNIQUE constraint failed") == true, "\(e)")
                #expect(e.message.contains("INSERT INTO u"), "\(e)")
            }
            #expect(throws: LnoteError(.database)) { try db.execute("INSERT INTO u VALUES (NULL)") }
            do {
                try db.execute("SELEC nonsense")
                Issue.record("syntax error did not throw")
            } catch let e as LnoteError {
                #expect(e.underlying?.hasPrefix("SQLITE_ERROR (1):") == true, "\(e)")
                #expect(e.message.contains("SELEC nonsense"))
            }
            // Misuse of the wrapper is .invalidArgument, not a crash.
            let s = try db.prepare("SELECT k FROM u WHERE k = ?")
            #expect(throws: LnoteError(.invalidArgument)) { try s.bind(.integer(1), at: 2) }
            #expect(throws: LnoteError(.invalidArgument)) { try s.bind([.integer(1), .integer(2)]) }
            #expect(throws: LnoteError(.invalidArgument)) { _ = try s.int64(at: 5) }
            #expect(throws: LnoteError(.invalidArgument)) { _ = try db.prepare("SELECT 1; SELECT 2") }
            // The statement still works after the failed calls.
            try s.bind(.text("a"), at: 1)
            #expect(try s.allRows() == [[.text("a")]])
            try db.close()
        }
    }

    @Test("transaction commits on return, rolls back on throw, nests as savepoints")
    func transactions() throws {
        struct Boom: Error {}
        try withTempDirectory { dir in
            let db = try SQLiteDatabase(path: dir + "/tx.sqlite")
            try db.execute("CREATE TABLE t (x INTEGER)")
            let n = try db.transaction { () -> Int in
                try db.execute("INSERT INTO t VALUES (1)")
                try db.execute("INSERT INTO t VALUES (2)")
                return 2
            }
            #expect(n == 2)
            #expect(throws: Boom.self) {
                try db.transaction {
                    try db.execute("INSERT INTO t VALUES (3)")
                    throw Boom()
                }
            }
            #expect(db.isInTransaction == false)
            #expect(try db.query("SELECT x FROM t ORDER BY x") == [[.integer(1)], [.integer(2)]])
            // A failing inner block undoes only its own rows.
            try db.transaction {
                try db.execute("INSERT INTO t VALUES (10)")
                #expect(throws: Boom.self) {
                    try db.transaction {
                        try db.execute("INSERT INTO t VALUES (11)")
                        throw Boom()
                    }
                }
                try db.execute("INSERT INTO t VALUES (12)")
            }
            #expect(try db.query("SELECT x FROM t WHERE x >= 10 ORDER BY x") == [[.integer(10)], [.integer(12)]])
            // A constraint failure inside the body rolls the whole transaction back.
            try db.execute("CREATE TABLE u (k INTEGER UNIQUE)")
            #expect(throws: LnoteError(.database)) {
                try db.transaction {
                    try db.execute("INSERT INTO u VALUES (1)")
                    try db.execute("INSERT INTO u VALUES (1)")
                }
            }
            #expect(try db.query("SELECT count(*) FROM u") == [[.integer(0)]])
            try db.close()
        }
    }

    @Test("WAL mode and synchronous level are applied and survive reopening")
    func walAndReopen() throws {
        try withTempDirectory { dir in
            let path = dir + "/w.sqlite"
            let db = try SQLiteDatabase(path: path, options: .init(synchronous: .normal))
            #expect(try db.query("PRAGMA journal_mode") == [[.text("wal")]])
            #expect(try db.query("PRAGMA synchronous") == [[.integer(1)]]) // NORMAL
            #expect(try db.query("PRAGMA foreign_keys") == [[.integer(1)]])
            try db.execute("CREATE TABLE t (b BLOB)")
            try db.execute("INSERT INTO t VALUES (?)", [.blob([1, 2, 3])])
            #expect(FileManager.default.fileExists(atPath: path + "-wal"))
            try db.close()
            try db.close() // idempotent

            let again = try SQLiteDatabase(path: path)
            #expect(try again.query("PRAGMA journal_mode") == [[.text("wal")]])
            #expect(try again.query("PRAGMA synchronous") == [[.integer(2)]]) // FULL
            #expect(try again.query("SELECT b FROM t") == [[.blob([1, 2, 3])]])
            try again.close()

            let delete = try SQLiteDatabase(path: dir + "/d.sqlite", options: .init(journalMode: .delete))
            #expect(try delete.query("PRAGMA journal_mode") == [[.text("delete")]])
            try delete.close()

            #expect(throws: LnoteError(.database)) {
                _ = try SQLiteDatabase(path: dir + "/missing.sqlite", options: .init(create: false))
            }
        }
    }

    @Test("a write lock held by another connection gives SQLITE_BUSY after the busy timeout")
    func busy() throws {
        try withTempDirectory { dir in
            let path = dir + "/busy.sqlite"
            let a = try SQLiteDatabase(path: path)
            let b = try SQLiteDatabase(path: path, options: .init(busyTimeoutMilliseconds: 0))
            try a.execute("CREATE TABLE t (x)")
            try a.execute("BEGIN IMMEDIATE")
            do {
                try b.transaction { try b.execute("INSERT INTO t VALUES (1)") }
                Issue.record("second writer did not get SQLITE_BUSY")
            } catch let e as LnoteError {
                #expect(e.code == .database)
                #expect(e.underlying?.hasPrefix("SQLITE_BUSY") == true, "\(e)")
            }
            #expect(!b.isInTransaction)
            // WAL: a reader is not blocked by the writer.
            #expect(try b.query("SELECT count(*) FROM t") == [[.integer(0)]])
            try a.execute("COMMIT")
            try b.transaction { try b.execute("INSERT INTO t VALUES (1)") }
            #expect(try a.query("SELECT count(*) FROM t") == [[.integer(1)]])
            try a.close()
            try b.close()
        }
    }

    @Test("close finalizes live statements; later use throws .invalidState")
    func closeFinalizes() throws {
        try withTempDirectory { dir in
            let db = try SQLiteDatabase(path: dir + "/c.sqlite")
            try db.execute("CREATE TABLE t (x)")
            let s = try db.prepare("SELECT x FROM t")
            let i = try db.prepare("INSERT INTO t VALUES (1)")
            try i.run()
            #expect(try s.step())
            try db.close() // must not fail with SQLITE_BUSY despite the open statements
            #expect(db.isClosed)
            #expect(throws: LnoteError(.invalidState)) { _ = try s.step() }
            #expect(throws: LnoteError(.invalidState)) { try db.execute("SELECT 1") }
            #expect(throws: LnoteError(.invalidState)) { try db.transaction {} }
            s.finalize() // harmless after close
        }
        // deinit closes a connection the caller forgot: the file can be reopened.
        try withTempDirectory { dir in
            do {
                let db = try SQLiteDatabase(path: dir + "/f.sqlite")
                try db.execute("CREATE TABLE t (x)")
                _ = try db.prepare("SELECT x FROM t")
            }
            let db = try SQLiteDatabase(path: dir + "/f.sqlite")
            #expect(try db.query("SELECT count(*) FROM t") == [[.integer(0)]])
            try db.close()
        }
    }

    @Test("a file of random bytes fails to open with SQLITE_NOTADB")
    func randomFile() throws {
        let seed = UInt64.random(in: 0...UInt64.max)
        var rng = SeededRNG(seed: seed)
        try withTempDirectory { dir in
            let path = dir + "/junk.sqlite"
            try Data(randomBytes(8192, &rng)).write(to: URL(fileURLWithPath: path))
            do {
                _ = try SQLiteDatabase(path: path)
                Issue.record("opening random bytes succeeded, seed \(seed)")
            } catch let e as LnoteError {
                #expect(e.code == .database, "seed \(seed)")
                #expect(e.path == path)
                #expect(e.underlying?.hasPrefix("SQLITE_NOTADB (26)") == true, "\(e), seed \(seed)")
            }
        }
    }

    @Test("a database whose pages were overwritten throws .database, never crashes")
    func corruptPages() throws {
        let seed = UInt64.random(in: 0...UInt64.max)
        var rng = SeededRNG(seed: seed)
        try withTempDirectory { dir in
            let path = dir + "/corrupt.sqlite"
            let db = try SQLiteDatabase(path: path, options: .init(journalMode: .delete))
            try db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, b BLOB)")
            try db.execute("CREATE INDEX tb ON t(b)")
            try db.transaction {
                for _ in 0..<200 { try db.execute("INSERT INTO t (b) VALUES (?)", [.blob(randomBytes(300, &rng))]) }
            }
            try db.close()
            var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
            let pageSize = 4096
            #expect(bytes.count > 4 * pageSize)
            // Keep page 1 (header and schema); scramble every other page.
            for i in pageSize..<bytes.count { bytes[i] = UInt8.random(in: 0...255, using: &rng) }
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            var sawError = false
            do {
                let broken = try SQLiteDatabase(path: path, options: .init(journalMode: .delete))
                defer { try? broken.close() }
                _ = try broken.query("SELECT count(*), sum(length(b)) FROM t")
                _ = try broken.query("PRAGMA integrity_check")
                _ = try broken.query("SELECT * FROM t ORDER BY b")
            } catch let e as LnoteError {
                sawError = true
                #expect(e.code == .database, "seed \(seed)")
                #expect(e.underlying?.hasPrefix("SQLITE_") == true, "\(e), seed \(seed)")
            }
            #expect(sawError, "corrupted pages read without error, seed \(seed)")
        }
    }

    @Test("a connection is safe to share between threads")
    func sharedBetweenThreads() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("lnote-sqlite-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let db = try SQLiteDatabase(path: dir + "/mt.sqlite")
        try db.execute("CREATE TABLE t (w INTEGER, n INTEGER)")
        try await withThrowingTaskGroup(of: Void.self) { group in
            for w in 0..<4 {
                group.addTask {
                    for n in 0..<50 {
                        try db.transaction {
                            try db.execute("INSERT INTO t VALUES (?, ?)", [.integer(Int64(w)), .integer(Int64(n))])
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(try db.query("SELECT count(*), count(DISTINCT w) FROM t") == [[.integer(200), .integer(4)]])
        try db.close()
    }
}
