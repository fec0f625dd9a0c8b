import LnoteModel
import LnotePostgres
import LnoteServer
import Synchronization

/// A transaction of `RelayPostgresDatabase` on one pooled connection. Statements are
/// rewritten to `$N` placeholders and prepared on the connection the first time it runs
/// them (named by a hash of the SQL, so every transaction on that connection reuses them);
/// `forEach` reads through a cursor, a batch at a time, and its body may run other statements.
final class PostgresRelayTransaction: RelayTransaction {
    let conn: PGConnection
    /// Opened `.allocating`: it holds the counter's lock, and may allocate sequences.
    let allocates: Bool
    private var statements: [String: PostgresRelayStatement] = [:]

    init(_ conn: PGConnection, allocates: Bool) {
        self.conn = conn
        self.allocates = allocates
    }

    func prepare(_ sql: String) throws -> any RelayStatement {
        if let s = statements[sql] { return s }
        let s = PostgresRelayStatement(conn, sql: RelaySQL.dollarPlaceholders(sql))
        statements[sql] = s
        return s
    }
}

final class PostgresRelayStatement: RelayStatement {
    let conn: PGConnection
    let sql: String
    /// `lnote_` and 24 hex digits of the SQL's SHA-256.
    let name: String

    init(_ conn: PGConnection, sql: String) {
        self.conn = conn
        self.sql = sql
        name = "lnote_" + hexString(Array(SHA256.hash(Array(sql.utf8)).prefix(12)))
    }

    /// Prepares on first use, with the types of the first values (NULL left to the server).
    private func execute(_ params: [RelayValue]) throws -> PGResult {
        if !conn.isPrepared(name) {
            try conn.prepare(name: name, sql: sql, parameterTypes: params.map(\.pgType))
        }
        return try conn.executePrepared(name: name, params.map(\.pg))
    }

    func rows(_ params: [RelayValue]) throws -> [[RelayValue]] {
        let result = try execute(params)
        return try (0..<result.rowCount).map { r in try (0..<result.columnCount).map { c in try RelayValue(result.value(r, c)) } }
    }

    /// One round trip: the prepared statement runs once and the first of its rows is
    /// taken (callers whose query may give several say `LIMIT 1`). `forEach`, through a
    /// cursor, costs three (DECLARE, FETCH, CLOSE).
    func first(_ params: [RelayValue]) throws -> [RelayValue]? {
        let result = try execute(params)
        guard result.rowCount > 0 else { return nil }
        return try (0..<result.columnCount).map { c in try RelayValue(result.value(0, c)) }
    }

    /// Rows fetched at a time by `forEach`.
    static let fetchRows = 256
    /// Names the cursors of `forEach`, unique in the process.
    private static let cursors = Atomic<Int>(0)

    /// Reads the rows through a cursor, `fetchRows` at a time, so that a body that stops
    /// early (a pull under its byte budget) leaves the rest unread on the server, as the
    /// protocol promises; the body may run other statements meanwhile.
    func forEach(_ params: [RelayValue], _ body: ([RelayValue]) throws -> Bool) throws {
        let cursor = "lnote_cursor_\(Self.cursors.add(1, ordering: .relaxed).newValue)"
        try conn.execute("DECLARE \(cursor) NO SCROLL CURSOR FOR \(sql)", params.map(\.pg))
        defer { _ = try? conn.execute("CLOSE \(cursor)") }
        while true {
            let result = try conn.execute("FETCH \(Self.fetchRows) FROM \(cursor)")
            for r in 0..<result.rowCount {
                let row = try (0..<result.columnCount).map { c in try RelayValue(result.value(r, c)) }
                guard try body(row) else { return }
            }
            if result.rowCount < Self.fetchRows { return }
        }
    }

    @discardableResult
    func run(_ params: [RelayValue]) throws -> Int {
        try execute(params).affectedRows
    }
}

extension RelayValue {
    var pg: PGValue {
        switch self {
        case .null: .null
        case .integer(let v): .int64(v)
        case .text(let s): .text(s)
        case .blob(let b): .bytea(b)
        }
    }

    /// The type a statement is prepared with; NULL leaves it to the server.
    var pgType: PGType { pg.type }

    /// int2, int4 and int8 are `.integer`; a boolean is 0 or 1, as SQLite gives it.
    init(_ v: PGValue) {
        switch v {
        case .null: self = .null
        case .int64(let i): self = .integer(i)
        case .int32(let i): self = .integer(Int64(i))
        case .bool(let b): self = .integer(b ? 1 : 0)
        case .text(let s): self = .text(s)
        case .bytea(let b): self = .blob(b)
        }
    }
}
