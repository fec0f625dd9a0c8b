import Dispatch
import Foundation
import LnoteModel
@testable import LnotePostgres
import LnoteTestSupport
import Synchronization
import Testing

/// Lock timeouts, notices, liveness checks and a transaction's prelude.
@Suite("PGConnection: lock timeouts, notices, liveness, prelude", .postgresCluster, .serialized, .timeLimit(.minutes(3)))
struct PGRobustnessTests {
    @Test("55P03 is a lock timeout, retryable like a serialization failure; other SQLSTATEs are not")
    func lockTimeoutCode() {
        #expect(PGError.code(forSQLState: "55P03") == .lockTimeout)
        #expect(PGError(.lockTimeout).isRetryable)
        #expect(PGError(.serializationFailure).isRetryable)
        #expect(!PGError(.server).isRetryable)
        #expect(PGError(.lockTimeout).lnoteError.code == .database)
    }

    @Test("a lock held past lock_timeout: the statement fails with 55P03 and the transaction is rolled back")
    func lockTimeoutFromServer() throws {
        let url = try SharedCluster.url()
        let holder = try PGConnection(url: url), waiter = try PGConnection(url: url)
        defer { holder.close(); waiter.close() }
        try holder.execute("CREATE TABLE locked_t (k int8)")
        try holder.execute("BEGIN")
        try holder.execute("LOCK TABLE locked_t IN EXCLUSIVE MODE")
        let e = pgError {
            try waiter.transaction(.serializable, prelude: "SET LOCAL lock_timeout = 50; LOCK TABLE locked_t IN EXCLUSIVE MODE") {}
        }
        #expect(e?.code == .lockTimeout)
        #expect(e?.sqlState == "55P03")
        #expect(!waiter.isInTransaction, "rolled back")
        try holder.execute("ROLLBACK")
        try waiter.transaction(.serializable, prelude: "SET LOCAL lock_timeout = 50; LOCK TABLE locked_t IN EXCLUSIVE MODE") {}
        try holder.execute("DROP TABLE locked_t")
    }

    @Test("a prelude's LOCK is granted before the SERIALIZABLE snapshot: the body sees what the holder committed while it waited")
    func preludeLockBeforeSnapshot() async throws {
        let url = try SharedCluster.url()
        let holder = try PGConnection(url: url), waiter = try PGConnection(url: url)
        defer { holder.close(); waiter.close() }
        try holder.execute("CREATE TABLE snap_t (k int8)")
        defer { _ = try? holder.execute("DROP TABLE snap_t") }
        try holder.execute("BEGIN")
        try holder.execute("LOCK TABLE snap_t IN EXCLUSIVE MODE")
        let seen = Task {
            try await blocking {
                try waiter.transaction(.serializable, prelude: "LOCK TABLE snap_t IN EXCLUSIVE MODE") {
                    try waiter.execute("SELECT count(*) FROM snap_t").int64(0, 0)
                }
            }
        }
        let probe = try PGConnection(url: url)
        defer { probe.close() }
        #expect(await eventually(30) {
            (try? probe.execute("""
                SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation WHERE c.relname = 'snap_t' AND NOT l.granted
                """).int64(0, 0)) == 1
        }, "the waiter waits for the lock")
        try holder.execute("INSERT INTO snap_t VALUES (1)")
        try holder.execute("COMMIT")
        #expect(try await seen.value == 1, "the snapshot was taken after the lock was granted")
    }

    @Test("notices: NOTICE is dropped, WARNING goes to the handler, nothing to stderr from libpq")
    func notices() throws {
        let c = try PGConnection(url: SharedCluster.url())
        defer { c.close() }
        let marker = UUID().uuidString
        let got = Mutex<[PGNotices.Notice]>([])
        PGNotices.setWarningHandler { n in if n.message.contains(marker) { got.withLock { $0.append(n) } } }
        defer { PGNotices.setWarningHandler(nil) }
        let dropped = PGNotices.droppedCount
        try c.execute("DO $$ BEGIN RAISE NOTICE 'chatter %', '\(marker)'; RAISE WARNING 'careful %', '\(marker)'; END $$")
        try c.execute("CREATE TABLE IF NOT EXISTS notice_t (k int8)")
        try c.execute("CREATE TABLE IF NOT EXISTS notice_t (k int8)")  // NOTICE: already exists, skipping
        try c.execute("DROP TABLE notice_t")
        let warnings = got.withLock { $0 }
        #expect(warnings.count == 1)
        #expect(warnings.first?.severity == "WARNING")
        #expect(warnings.first?.message == "careful \(marker)")
        #expect(warnings.first?.context == c.description, "names the connection, without a password")
        #expect(PGNotices.droppedCount >= dropped + 2)
    }

    @Test("checkAlive: answers on a live connection, keeps notifications, throws .connection once the backend is ended")
    func liveness() throws {
        let url = try SharedCluster.url()
        let c = try PGConnection(url: url, applicationName: "lnote liveness test", keepalive: .standard)
        defer { c.close() }
        #expect(try c.execute("SHOW application_name").string(0, 0) == "lnote liveness test")
        try c.listen("liveness_ch")
        let other = try PGConnection(url: url)
        defer { other.close() }
        try other.notify("liveness_ch", payload: "kept")
        try c.checkAlive(timeout: .seconds(30))
        #expect(try c.waitForNotifications(timeout: .seconds(30)).map(\.payload) == ["kept"])
        #expect(try other.execute("SELECT pg_terminate_backend($1)", [.int32(c.backendPID)]).bool(0, 0))
        let e = pgError { try c.checkAlive(timeout: .seconds(30)) }
        #expect(e?.code == .connection)
    }
}
