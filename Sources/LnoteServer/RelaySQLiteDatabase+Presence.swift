import LnoteModel
import LnoteSQLite

extension RelaySQLiteDatabase: RelayPresenceBackend {
    /// A second connection to the file, `synchronous = NORMAL` (a presence row need not
    /// survive a power cut, so its commit does not fsync) with a 2 s busy timeout: it holds
    /// SQLite's write lock for one small statement, and never the relay's connection. An
    /// in-memory database has no second connection: its presence goes through its
    /// transactions.
    public func makePresenceWriter() throws -> any RelayPresenceWriter {
        if inMemory { return TransactionPresenceWriter(self) }
        return SQLitePresenceWriter(path: path)
    }
}

/// `RelayPresenceWriter` on a connection of its own, opened at the first write (and again
/// after a failure).
final class SQLitePresenceWriter: RelayPresenceWriter {
    let path: String
    private var db: SQLiteDatabase?

    init(path: String) { self.path = path }

    func run(_ sql: String, _ params: [RelayValue]) throws {
        if db == nil {
            db = try SQLiteDatabase(path: path, options: .init(create: false, journalMode: .wal, synchronous: .normal,
                                                               busyTimeoutMilliseconds: 2_000))
        }
        do {
            try db!.execute(sql, params.map(\.sqlite))
        } catch let e as LnoteError {
            throw e.path == nil ? LnoteError(e.code, e.message, path: path) : e
        }
    }

    func close() {
        try? db?.close()
        db = nil
    }
}
