import LnoteModel
import LnotePostgres
import LnoteServer

extension RelayPostgresDatabase: RelayPresenceBackend {
    /// One connection outside the pool, each statement in autocommit: a presence write takes
    /// no connection a request could use, and none of the locks a push takes (a push locks
    /// `relay_counters` first).
    public func makePresenceWriter() throws -> any RelayPresenceWriter {
        try checkOpen()
        return PostgresPresenceWriter(self)
    }
}

/// `RelayPresenceWriter` on its own connection, opened at the first write and again after a
/// failure (the server restarted, the connection dropped).
final class PostgresPresenceWriter: RelayPresenceWriter {
    let database: RelayPostgresDatabase
    private var conn: PGConnection?

    init(_ database: RelayPostgresDatabase) { self.database = database }

    func run(_ sql: String, _ params: [RelayValue]) throws {
        try database.checkOpen()
        do {
            if conn == nil {
                conn = try PGConnection(url: database.url, connectTimeoutSeconds: 5,
                                        applicationName: RelayPostgresDatabase.presenceApplicationName, keepalive: .standard)
                // A commit that hangs (a frozen backend, a lost synchronous standby) must not
                // hold the relay's stop: each presence statement gives up after 5 s.
                _ = try conn!.execute("SET statement_timeout = 5000", [])
            }
            try conn!.execute(RelaySQL.dollarPlaceholders(sql), params.map(\.pg))
        } catch let e as PGError {
            close()
            throw database.lnoteError(e)
        }
    }

    func close() {
        conn?.close()
        conn = nil
    }
}
