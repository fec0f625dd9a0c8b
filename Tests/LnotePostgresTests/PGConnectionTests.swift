import Foundation
import LnoteModel
@testable import LnotePostgres
import LnoteTestSupport
import Synchronization
import Testing

@Suite("PGConnection against a throwaway cluster", .postgresCluster, .serialized, .timeLimit(.minutes(3)))
struct PGConnectionTests {
    @Test("every type round-trips: negatives, extremes, empty, NULL, 1 MiB bytea")
    func typesRoundTrip() throws {
        let c = try PGConnection(url: SharedCluster.url())
        defer { c.close() }
        try c.execute("CREATE TABLE types (id int8 PRIMARY KEY, i8 int8, i4 int4, b bool, t text, y bytea)")
        let seed = UInt64.random(in: 0...UInt64.max)
        var rng = SplitMix64(seed: seed)
        let big = (0..<(1 << 20)).map { _ in UInt8.random(in: 0...255, using: &rng) }
        let rows: [[PGValue]] = [
            [.int64(0), .int32(0), .bool(false), .text(""), .bytea([])],
            [.int64(-1), .int32(-1), .bool(true), .text("héllo ✍️ 日本"), .bytea([0])],
            [.int64(.min), .int32(.min), .bool(true), .text("a\nb\tc'\"\\"), .bytea([0xFF, 0, 0x7F])],
            [.int64(.max), .int32(.max), .bool(false), .text(String(repeating: "x", count: 10_000)), .bytea(big)],
            [.null, .null, .null, .null, .null],
        ]
        for (id, row) in rows.enumerated() {
            let r = try c.execute("INSERT INTO types VALUES ($1, $2, $3, $4, $5, $6)", [.int64(Int64(id))] + row)
            #expect(r.affectedRows == 1)
        }
        let result = try c.execute("SELECT i8, i4, b, t, y FROM types ORDER BY id")
        #expect(result.rowCount == rows.count)
        #expect(result.columnCount == 5)
        #expect(try result.columnName(3) == "t")
        #expect(try result.columnType(4) == .bytea)
        #expect(try result.rows() == rows, "seed \(seed)")

        // Typed getters on the same fields.
        #expect(try result.int64(2, 0) == .min)
        #expect(try result.int64(3, 1) == Int64(Int32.max))  // int4 widens
        #expect(try result.int32(2, 1) == .min)
        #expect(try result.bool(1, 2) == true)
        #expect(try result.string(1, 3) == "héllo ✍️ 日本")
        #expect(try result.bytes(0, 4) == [])
        #expect(try result.bytes(3, 4) == big, "seed \(seed)")
        #expect(try result.isNull(4, 0) && result.isNull(4, 4))
        #expect(try !result.isNull(0, 4))  // empty bytea is not NULL

        // Parameters alone, without a table.
        let p = try c.execute("SELECT $1::int8, $2::int4, $3, $4::text, $5::bytea",
                              [.int64(-42), .int32(-7), .bool(true), .null, .bytea([])])
        #expect(try p.rows() == [[.int64(-42), .int32(-7), .bool(true), .null, .bytea([])]])
    }

    @Test("getters check row, column, type and NULL; bad binary data throws instead of trapping")
    func gettersCheck() throws {
        let c = try PGConnection(url: SharedCluster.url())
        defer { c.close() }
        let r = try c.execute("SELECT 'abc'::text, NULL::int8, 7::int2, 1::int4")
        #expect(pgError { _ = try r.int64(0, 0) }?.code == .typeMismatch)
        #expect(pgError { _ = try r.int64(0, 1) }?.code == .typeMismatch)  // NULL
        #expect(pgError { _ = try r.bytes(0, 0) }?.code == .typeMismatch)
        #expect(pgError { _ = try r.string(1, 0) }?.code == .invalidArgument)  // row 1 of 1
        #expect(pgError { _ = try r.string(0, 9) }?.code == .invalidArgument)
        #expect(pgError { _ = try r.int32(0, 3 - 1) }?.code == .typeMismatch)  // int2 is not int4
        #expect(try r.int64(0, 2) == 7)
        #expect(try r.value(0, 1) == .null)
        #expect(pgError { _ = try c.execute("SELECT $1::text", [.text("a\u{0}b")]) }?.code == .invalidArgument)

        // Decoders given bytes that do not fit their type.
        func decode(_ bytes: [UInt8], _ body: (UnsafeRawBufferPointer) throws -> Void) -> PGError? {
            pgError { try bytes.withUnsafeBytes { try body($0) } }
        }
        #expect(decode([1, 2, 3]) { _ = try PGBinary.int64($0, type: .int8) }?.code == .decoding)
        #expect(decode([1, 2, 3, 4, 5, 6, 7, 8]) { _ = try PGBinary.int64($0, type: .int4) }?.code == .decoding)
        #expect(decode([]) { _ = try PGBinary.int64($0, type: .int2) }?.code == .decoding)
        #expect(decode([2]) { _ = try PGBinary.bool($0, type: .bool) }?.code == .decoding)
        #expect(decode([0, 1]) { _ = try PGBinary.bool($0, type: .bool) }?.code == .decoding)
        #expect(decode([0xC3, 0x28]) { _ = try PGBinary.string($0, type: .text) }?.code == .decoding)
        #expect(decode([0, 0, 0, 1]) { _ = try PGBinary.value($0, type: PGType(rawValue: 1184)) }?.code == .typeMismatch)
        let minusTwo = try [UInt8]([0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFE]).withUnsafeBytes {
            try PGBinary.int64($0, type: .int8)
        }
        #expect(minusTwo == -2)
    }

    @Test("prepared statements are cached per connection and reused")
    func preparedStatements() throws {
        let c = try PGConnection(url: SharedCluster.url())
        defer { c.close() }
        try c.execute("CREATE TABLE prep (k int4 PRIMARY KEY, v text)")
        let sql = "INSERT INTO prep VALUES ($1, $2)"
        for i in 0..<100 {
            try c.prepare(name: "ins", sql: sql)  // after the first time: a lookup
            // An .int64 is narrowed to the int4 parameter the server inferred.
            try c.executePrepared(name: "ins", [.int64(Int64(i)), .text("v\(i)")])
        }
        #expect(c.isPrepared("ins"))
        #expect(try c.execute("SELECT count(*) FROM prep").int64(0, 0) == 100)
        let server = try c.execute("SELECT count(*) FROM pg_prepared_statements WHERE name = 'ins'")
        #expect(try server.int64(0, 0) == 1)

        #expect(pgError { try c.prepare(name: "ins", sql: "SELECT 1") }?.code == .invalidArgument)
        #expect(pgError { try c.executePrepared(name: "nope") }?.code == .invalidArgument)
        #expect(pgError { try c.executePrepared(name: "ins", [.int64(1)]) }?.code == .invalidArgument)
        #expect(pgError { try c.executePrepared(name: "ins", [.int64(1 << 40), .text("x")]) }?.code == .invalidArgument)
        #expect(pgError { try c.executePrepared(name: "ins", [.text("1"), .text("x")]) }?.code == .invalidArgument)
        #expect(pgError { try c.prepare(name: "bad", sql: "SELEC 1") }?.sqlState == "42601")

        try c.prepare(name: "get", sql: "SELECT v FROM prep WHERE k = $1", parameterTypes: [.int4])
        #expect(try c.executePrepared(name: "get", [.int32(42)]).string(0, 0) == "v42")
        #expect(try c.executePrepared(name: "get", [.int32(1000)]).rowCount == 0)
    }

    @Test("a transaction commits on return and leaves nothing when its body throws")
    func transactions() throws {
        struct Boom: Error {}
        let c = try PGConnection(url: SharedCluster.url())
        defer { c.close() }
        try c.executeScript("CREATE TABLE tx (v int8); CREATE INDEX tx_v ON tx (v)")
        #expect(pgError { try c.executeScript("CREATE TABLE tx2 (v int8); SELECT * FROM nowhere") }?.sqlState == "42P01")
        #expect(try c.execute("SELECT count(*) FROM pg_tables WHERE tablename = 'tx2'").int64(0, 0) == 0)
        let n = try c.transaction(.repeatableRead) {
            try c.execute("INSERT INTO tx VALUES (1), (2)").affectedRows
        }
        #expect(n == 2)
        #expect(throws: Boom.self) {
            try c.transaction {
                try c.execute("INSERT INTO tx VALUES (3)")
                throw Boom()
            }
        }
        #expect(!c.isInTransaction)
        #expect(try c.execute("SELECT count(*) FROM tx").int64(0, 0) == 2)

        // A statement error the body swallows aborts the transaction: it is rolled back
        // and reported rather than "committed" with nothing in it.
        let swallowed = pgError {
            try c.transaction {
                try c.execute("INSERT INTO tx VALUES (4)")
                _ = try? c.execute("SELECT * FROM no_such_table")
            }
        }
        #expect(swallowed?.code == .invalidState)
        #expect(try c.execute("SELECT count(*) FROM tx").int64(0, 0) == 2)

        #expect(pgError { try c.transaction { try c.transaction {} } }?.code == .invalidState)
        #expect(!c.isInTransaction)
    }

    @Test("a unique violation is recognised by its SQLSTATE")
    func uniqueViolation() throws {
        let c = try PGConnection(url: SharedCluster.url())
        defer { c.close() }
        try c.execute("CREATE TABLE uniq (k text PRIMARY KEY)")
        try c.execute("INSERT INTO uniq VALUES ($1)", [.text("a")])
        let e = pgError { try c.execute("INSERT INTO uniq VALUES ($1)", [.text("a")]) }
        #expect(e?.isUniqueViolation == true)
        #expect(e?.sqlState == "23505")
        #expect(e?.code == .server)
        #expect(e?.isRetryable == false)
        #expect(e?.detail?.contains("already exists") == true)
        #expect(e?.description.contains("SQLSTATE 23505") == true)
        #expect(e?.lnoteError.code == .database)
        #expect(e?.lnoteError.underlying == "SQLSTATE 23505")
        // The connection is still usable.
        #expect(try c.execute("SELECT count(*) FROM uniq").int64(0, 0) == 1)
    }

    @Test("concurrent SERIALIZABLE transactions: the loser gets a retryable serialization failure")
    func serializationFailure() throws {
        let url = try SharedCluster.url()
        let a = try PGConnection(url: url), b = try PGConnection(url: url)
        defer { a.close(); b.close() }
        try a.execute("CREATE TABLE ser (k text, v int8)")

        // Write skew: both read the same predicate, both insert into it; b commits first.
        func interleave() throws {
            _ = try a.execute("SELECT count(*) FROM ser WHERE k = 'x'")
            try b.transaction(.serializable) {
                _ = try b.execute("SELECT count(*) FROM ser WHERE k = 'x'")
                try b.execute("INSERT INTO ser VALUES ('x', 2)")
            }
            try a.execute("INSERT INTO ser VALUES ('x', 1)")
        }
        let e = pgError { try a.transaction(.serializable) { try interleave() } }
        #expect(e?.code == .serializationFailure)
        #expect(e?.isRetryable == true)
        #expect(e?.sqlState == "40001")
        #expect(!a.isInTransaction)
        #expect(try a.execute("SELECT v FROM ser ORDER BY v").rows() == [[.int64(2)]])

        // maxAttempts re-runs the body: the second attempt meets no competitor.
        var attempts = 0
        try a.transaction(.serializable, maxAttempts: 3) {
            attempts += 1
            if attempts == 1 { try interleave() } else { try a.execute("INSERT INTO ser VALUES ('x', 1)") }
        }
        #expect(attempts == 2)
        #expect(try a.execute("SELECT v FROM ser ORDER BY v").rows() == [[.int64(1)], [.int64(2)], [.int64(2)]])
    }

    @Test("LISTEN/NOTIFY: an empty wait times out with nothing; a notification ends the wait")
    func listenNotify() async throws {
        let url = try SharedCluster.url()
        let listener = try PGConnection(url: url), sender = try PGConnection(url: url)
        defer { listener.close(); sender.close() }
        try listener.listen("lnote changes")  // quoted: a space is fine
        #expect(try listener.waitForNotifications(timeout: .milliseconds(200)).isEmpty)
        #expect(try listener.waitForNotifications(timeout: .zero).isEmpty)

        try sender.notify("lnote changes", payload: "page 7")
        try sender.notify("other channel", payload: "not for us")
        let got = try await blocking { try listener.waitForNotifications(timeout: .seconds(30)) }
        #expect(got == [PGNotification(channel: "lnote changes", payload: "page 7", senderPID: sender.backendPID)])

        // A wait already sleeping is woken by a notification sent from another thread.
        DispatchQueue.global().asyncAfter(deadline: .now() + 0.1) {
            try? sender.notify("lnote changes", payload: "later")
        }
        let waited = try await blocking {
            var all: [PGNotification] = []
            // Upper bound only: the wait ends when the notification arrives.
            let end = ContinuousClock.now + .seconds(60)
            while all.isEmpty && ContinuousClock.now < end {
                all += try listener.waitForNotifications(timeout: .seconds(60))
            }
            return all
        }
        #expect(waited.map(\.payload) == ["later"])

        try listener.unlisten("lnote changes")
        try sender.notify("lnote changes", payload: "after unlisten")
        #expect(try listener.waitForNotifications(timeout: .milliseconds(200)).isEmpty)
    }

    @Test("a pool of 4 connections serves 8 threads without error")
    func poolUnderConcurrency() async throws {
        let pool = PGPool(url: try SharedCluster.url(), size: 4)
        defer { pool.close() }
        try pool.withConnection { try $0.execute("CREATE TABLE pooled (worker int8, i int8)") }
        let tally = Tally()
        @Sendable func work(_ worker: Int) {
            for i in 0..<25 {
                do {
                    try pool.withConnection { c in
                        tally.enter()
                        defer { tally.leave() }
                        try c.prepare(name: "ins", sql: "INSERT INTO pooled VALUES ($1, $2)")
                        try c.transaction {
                            try c.executePrepared(name: "ins", [.int64(Int64(worker)), .int64(Int64(i))])
                        }
                    }
                } catch {
                    tally.record("worker \(worker) call \(i): \(error)")
                }
            }
        }
        try await blocking { DispatchQueue.concurrentPerform(iterations: 8) { work($0) } }
        // And 8 real threads at once, so that callers do wait for a free connection.
        try await blocking {
            let group = DispatchGroup()
            for w in 8..<16 {
                group.enter()
                Thread { work(w); group.leave() }.start()
            }
            group.wait()
        }
        #expect(tally.errors == [])
        #expect(tally.maxInUse <= 4)
        #expect(pool.openConnections <= 4)
        let count = try pool.withConnection { try $0.execute("SELECT count(*), count(DISTINCT worker) FROM pooled") }
        #expect(try count.int64(0, 0) == 16 * 25)
        #expect(try count.int64(0, 1) == 16)
    }
}

/// Connections in use at once (the most seen) and errors, shared by worker threads.
final class Tally: Sendable {
    private let state = Mutex<(inUse: Int, maxInUse: Int, errors: [String])>((0, 0, []))

    func enter() {
        state.withLock { s in
            s.inUse += 1
            s.maxInUse = max(s.maxInUse, s.inUse)
        }
    }

    func leave() { state.withLock { $0.inUse -= 1 } }
    func record(_ error: String) { state.withLock { $0.errors.append(error) } }
    var maxInUse: Int { state.withLock { $0.maxInUse } }
    var errors: [String] { state.withLock { $0.errors } }
}
