import Foundation
import LnoteModel
@testable import LnotePostgres
import LnoteTestSupport
import Testing

@Suite("PostgreSQL failures")
struct PGFailureTests {
    @Test("SQLSTATEs map to codes: 40001/40P01 retryable, class 08 and 57P0x connection")
    func classification() {
        #expect(PGError.code(forSQLState: "40001") == .serializationFailure)
        #expect(PGError.code(forSQLState: "40P01") == .serializationFailure)
        #expect(PGError.code(forSQLState: "08006") == .connection)
        #expect(PGError.code(forSQLState: "57P01") == .connection)
        #expect(PGError.code(forSQLState: "23505") == .server)
        #expect(PGError.code(forSQLState: nil) == .server)
        #expect(PGError(.serializationFailure).isRetryable)
        #expect(!PGError(.connection).isRetryable)
        #expect(PGError(.decoding).lnoteError.code == .corrupt)
        #expect(PGError(.typeMismatch).lnoteError.code == .invalidArgument)
    }

    @Test("an unreachable server is a connection error naming the URL without its password")
    func unreachable() throws {
        let dir = "/tmp/lnote-pg-nonexistent-\(getpid())"
        for url in ["postgresql://lnote:s3cret-pw@/postgres?host=\(dir)&connect_timeout=2",
                    "host=\(dir) user=lnote password=s3cret-pw dbname=postgres connect_timeout=2"] {
            let e = pgError { _ = try PGConnection(url: url) }
            #expect(e?.code == .connection)
            #expect(e?.isConnectionFailure == true)
            let text = "\(e.map { "\($0)" } ?? "")"
            #expect(text.contains(dir), "\(text)")
            #expect(text.contains("No such file or directory"), "\(text)")
            #expect(!text.contains("s3cret"), "\(text)")
            #expect(e?.lnoteError.code == .database)
            #expect(!(e?.lnoteError.description.contains("s3cret") ?? true))
        }
        let bad = pgError { _ = try PGConnection(url: "postgresql://u:s3cret@/db?nosuchoption=1") }
        #expect(bad?.code == .invalidArgument)
        #expect(!(bad?.description.contains("s3cret") ?? true))
        #expect(try PGConnection.redacted("postgresql://u:pw@/db?host=/x") == "user=u dbname=db host=/x")
    }

    @Test("a cluster that cannot start throws, saying why and how to fix it")
    func clusterStartFailure() async throws {
        do {
            let cluster = try await PostgresCluster.start(binDirectory: "/nonexistent/postgresql/bin")
            await cluster.remove()
            Issue.record("a cluster started without binaries")
        } catch let failure as PostgresCluster.Failure {
            #expect(failure.message.contains("initdb"))
            #expect(failure.message.contains("scripts/setup.sh --deps-only"))
            #expect(failure.description.contains("=== initdb"))  // the log's tail
        }
    }

    @Test("outage: calls fail as connection failures while the server is down; the pool recovers",
          .timeLimit(.minutes(2)))
    func outage() async throws {
        let cluster = try await PostgresCluster.start()
        do {
            try await outage(cluster)
        } catch {
            await cluster.remove()
            throw error
        }
        await cluster.remove()
    }

    private func outage(_ cluster: PostgresCluster) async throws {
        let pool = PGPool(url: cluster.url, size: 2)
        defer { pool.close() }
        _ = try await blocking { try pool.withConnection { try $0.execute("CREATE TABLE o (v int8)") } }
        let held = try PGConnection(url: cluster.url)
        defer { held.close() }
        #expect(held.isHealthy)

        try await cluster.stop()

        // A connection kept open across the outage fails its next statement.
        let onHeld = await thrown { try held.execute("INSERT INTO o VALUES (1)") }
        #expect((onHeld as? PGError)?.code == .connection, "\(String(describing: onHeld))")
        #expect((onHeld as? PGError)?.context?.contains(cluster.directory) == true)
        #expect(!held.isHealthy)
        // The pool finds its idle connection broken and cannot open another: the error
        // names the socket it tried.
        let onPool = await thrown { _ = try pool.withConnection { try $0.execute("INSERT INTO o VALUES (2)") } }
        #expect((onPool as? PGError)?.code == .connection, "\(String(describing: onPool))")
        #expect("\(String(describing: onPool))".contains(cluster.directory))
        #expect(pool.openConnections == 0)

        try await cluster.start()

        _ = try await blocking { try pool.withConnection { try $0.execute("INSERT INTO o VALUES (3)") } }
        let rows = try await blocking { try pool.withConnection { try $0.execute("SELECT v FROM o").rows() } }
        #expect(rows == [[.int64(3)]])
        // The dead connection stays dead (no silent reconnect behind a caller's back).
        #expect((await thrown { try held.execute("SELECT 1") } as? PGError)?.code == .connection)
    }
}

/// What `body` throws when run on a dispatch thread, or nil.
func thrown(_ body: @escaping @Sendable () throws -> Void) async -> (any Error)? {
    do {
        try await blocking(body)
        return nil
    } catch {
        return error
    }
}
