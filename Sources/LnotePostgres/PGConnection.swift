// PGConnection: one libpq connection.
//
// Threading model: the class is `@unchecked Sendable`. Every libpq call made through it runs
// under one recursive lock owned by the connection, so "run, then read the error message"
// sequences are atomic and two threads never use the `PGconn *` at once. `transaction { }`
// holds the lock for the whole body: other threads' calls wait until it ends, calls made
// inside the body from the same thread proceed. `waitForNotifications` releases the lock
// while it sleeps in poll(2). Calls block the calling thread (libpq is blocking): call them
// from dispatch queues or threads, not from Swift concurrency's shared pool.
import CLnotePQ
import Foundation

/// One open connection to a PostgreSQL server.
///
/// Statements are sent with `PQexecParams` / `PQexecPrepared`, parameters and results in
/// binary format with explicit type OIDs. Every failure throws `PGError` (see its codes);
/// `context` names the connection without its password. Call `close()` when done; `deinit`
/// closes a connection that was not closed.
public final class PGConnection: @unchecked Sendable, CustomStringConvertible {
    /// The connection's parameters as `key=value` pairs, password left out.
    public let description: String

    /// Guards `handle`, `prepared` and every libpq call (see the threading model above).
    private let lock = NSRecursiveLock()
    /// nil once closed.
    private var handle: OpaquePointer?
    /// Statements prepared on this connection, by name, with the parameter types the
    /// server settled on.
    private var prepared: [String: PreparedStatement] = [:]

    private struct PreparedStatement {
        var sql: String
        var parameterTypes: [PGType]
    }

    /// PostgreSQL's limit on the parameters of one statement.
    static let maxParameters = 65_535

    /// Receives the connection's notices (`PGNotices`); kept alive as long as the connection.
    private let notices: PGNotices.Sink

    /// Connects to `url` (a `postgresql://` URI or a `key=value` conninfo string) and waits
    /// until the connection is ready.
    ///
    /// The client encoding is set to UTF8. Unless `url` sets them, `connectTimeoutSeconds`
    /// bounds how long an unreachable server can hold the call, `applicationName` names the
    /// connection in `pg_stat_activity` (libpq's `fallback_application_name`), and
    /// `keepalive` sets TCP keepalives (ignored on a Unix socket). Notices are given to
    /// `PGNotices` (NOTICE and below dropped, WARNING logged), not printed by libpq.
    /// - Throws: `PGError(.invalidArgument)` when `url` cannot be parsed;
    ///   `PGError(.connection)` with libpq's reason when the server cannot be reached or
    ///   refuses the connection. Neither message contains the password.
    public init(url: String, connectTimeoutSeconds: Int = 10, applicationName: String? = nil,
                keepalive: PGKeepalive? = nil) throws {
        description = try Self.redacted(url)
        notices = PGNotices.Sink(context: description)
        // With expand_dbname, the URL's own settings override earlier entries and later
        // entries override the URL: the timeout, name and keepalives are defaults, the
        // encoding is forced.
        var keywords = ["connect_timeout"], values = [String(max(connectTimeoutSeconds, 1))]
        if let applicationName {
            keywords.append("fallback_application_name")
            values.append(applicationName)
        }
        if let keepalive {
            keywords += ["keepalives", "keepalives_idle", "keepalives_interval", "keepalives_count", "tcp_user_timeout"]
            values += ["1", String(keepalive.idleSeconds), String(keepalive.intervalSeconds), String(keepalive.count),
                       String(keepalive.userTimeoutMilliseconds)]
        }
        keywords += ["dbname", "client_encoding"]
        values += [url, "UTF8"]
        let conn = Self.withCStrings(keywords) { k in
            Self.withCStrings(values) { v in PQconnectdbParams(k, v, 1) }
        }
        guard let conn else {
            throw PGError(.connection, "out of memory allocating a connection", context: description)
        }
        guard PQstatus(conn) == CONNECTION_OK else {
            let message = Self.errorMessage(conn)
            PQfinish(conn)
            throw PGError(.connection, "cannot connect: \(message)", context: description)
        }
        // Installed once connected: libpq reports the notices of the start-up itself through
        // its default processor, and there are none on a successful start.
        notices.install(on: conn)
        handle = conn
    }

    deinit {
        if let handle { PQfinish(handle) }
    }

    /// Closes the connection (`PQfinish`). Calling it again does nothing; later calls on
    /// the connection throw `PGError(.invalidState)`.
    public func close() {
        lock.lock()
        defer { lock.unlock() }
        guard let conn = handle else { return }
        handle = nil
        prepared.removeAll()
        PQfinish(conn)
    }

    public var isClosed: Bool {
        lock.lock(); defer { lock.unlock() }
        return handle == nil
    }

    /// Whether the connection is open and usable as far as can be told without blocking.
    ///
    /// Input already waiting on the socket is read first, so a server that has shut down
    /// or dropped the connection since the last statement is noticed here (its goodbye
    /// message and the end of the stream are waiting). A hung server is not detected.
    public var isHealthy: Bool {
        lock.lock(); defer { lock.unlock() }
        guard let conn = handle, PQstatus(conn) == CONNECTION_OK else { return false }
        var fd = pollfd(fd: PQsocket(conn), events: Int16(POLLIN), revents: 0)
        // Bounded: a stream of notifications cannot keep this loop going.
        for _ in 0..<8 {
            let ready = poll(&fd, 1, 0)
            if ready < 0 && errno == EINTR { continue }
            guard ready > 0 else { break }
            if PQconsumeInput(conn) == 0 { return false }
            if PQstatus(conn) != CONNECTION_OK { return false }
        }
        return PQstatus(conn) == CONNECTION_OK
    }

    /// Open, healthy-looking and not inside a transaction: safe to hand to someone else.
    var isReusable: Bool {
        lock.lock(); defer { lock.unlock() }
        guard let conn = handle else { return false }
        return PQstatus(conn) == CONNECTION_OK && PQtransactionStatus(conn) == PQTRANS_IDLE
    }

    /// The server's process id for this connection.
    public var backendPID: Int32 {
        lock.lock(); defer { lock.unlock() }
        return handle.map { PQbackendPID($0) } ?? 0
    }

    /// The server version as a number, e.g. 150018 for 15.18 (0 when closed).
    public var serverVersion: Int {
        lock.lock(); defer { lock.unlock() }
        return handle.map { Int(PQserverVersion($0)) } ?? 0
    }

    // MARK: - Statements

    /// Runs one statement with positional parameters (`$1`, `$2`, ...) and returns its rows.
    ///
    /// Each parameter is sent in binary format with its own type (`PGValue.type`); NULL is
    /// sent untyped, so the server infers its type from the statement.
    /// - Throws: `PGError(.server)` or `.serializationFailure` with the SQLSTATE when the
    ///   server rejects the statement; `.connection` when the connection is lost;
    ///   `.invalidArgument` for more than 65535 parameters or text holding NUL.
    @discardableResult
    public func execute(_ sql: String, _ params: [PGValue] = []) throws -> PGResult {
        let types = params.map { $0.type }
        let encoded = try Self.encode(params, as: types)
        return try withHandle { conn in
            let oids = types.map { $0.rawValue }
            let result = Self.withParameters(encoded) { values, lengths, formats in
                PQexecParams(conn, sql, Int32(encoded.count), oids, values, lengths, formats, 1)
            }
            return try check(result, conn: conn, sql: sql)
        }
    }

    /// Runs a script of one or more statements separated by `;` (`PQexec`, no parameters),
    /// discarding any rows: for schema set-up. Without an explicit transaction in it, the
    /// script runs as one transaction, and execution stops at the first error.
    public func executeScript(_ sql: String) throws {
        try withHandle { conn in
            _ = try check(PQexec(conn, sql), conn: conn, sql: sql)
        }
    }

    /// Prepares `sql` on this connection under `name`, once: preparing the same name with
    /// the same SQL again does nothing, so callers can prepare before each use.
    ///
    /// `parameterTypes` may fix some or all parameter types; the server infers the rest,
    /// and `executePrepared` converts each value to the type settled on (an `.int64` is
    /// sent as int4 when it fits, and so on).
    /// - Throws: `PGError(.invalidArgument)` when `name` is empty or already names other
    ///   SQL on this connection; the server's error when the SQL does not compile.
    public func prepare(name: String, sql: String, parameterTypes: [PGType] = []) throws {
        guard !name.isEmpty else {
            throw PGError(.invalidArgument, "a prepared statement needs a name", context: Self.excerpt(sql))
        }
        try withHandle { conn in
            if let existing = prepared[name] {
                guard existing.sql == sql else {
                    throw PGError(.invalidArgument,
                                  "statement \"\(name)\" is already prepared with other SQL: \(Self.excerpt(existing.sql))",
                                  context: Self.excerpt(sql))
                }
                return
            }
            let oids = parameterTypes.map { $0.rawValue }
            _ = try check(PQprepare(conn, name, sql, Int32(oids.count), oids), conn: conn, sql: sql)
            let description = try check(PQdescribePrepared(conn, name), conn: conn, sql: sql)
            let count = Int(PQnparams(description.handle))
            let types = (0..<count).map { PGType(rawValue: PQparamtype(description.handle, Int32($0))) }
            prepared[name] = PreparedStatement(sql: sql, parameterTypes: types)
        }
    }

    /// Whether `name` is prepared on this connection.
    public func isPrepared(_ name: String) -> Bool {
        lock.lock(); defer { lock.unlock() }
        return prepared[name] != nil
    }

    /// Runs the statement prepared as `name` with `params`, each converted to the
    /// parameter type the server settled on.
    /// - Throws: `PGError(.invalidArgument)` for an unknown name, a wrong parameter count
    ///   or a value that does not fit its parameter's type; otherwise as `execute`.
    @discardableResult
    public func executePrepared(name: String, _ params: [PGValue] = []) throws -> PGResult {
        try withHandle { conn in
            guard let statement = prepared[name] else {
                throw PGError(.invalidArgument, "no statement prepared as \"\(name)\" on this connection",
                              context: description)
            }
            guard params.count == statement.parameterTypes.count else {
                throw PGError(.invalidArgument,
                              "statement \"\(name)\" takes \(statement.parameterTypes.count) parameters, \(params.count) given",
                              context: Self.excerpt(statement.sql))
            }
            let encoded = try Self.encode(params, as: statement.parameterTypes)
            let result = Self.withParameters(encoded) { values, lengths, formats in
                PQexecPrepared(conn, name, Int32(encoded.count), values, lengths, formats, 1)
            }
            return try check(result, conn: conn, sql: statement.sql)
        }
    }

    /// `identifier` quoted for SQL (`"my table"`), by libpq's `PQescapeIdentifier`.
    public func quoteIdentifier(_ identifier: String) throws -> String {
        try withHandle { conn in
            let bytes = Array(identifier.utf8)
            guard let p = PQescapeIdentifier(conn, identifier, bytes.count) else {
                throw PGError(.invalidArgument, "cannot quote identifier: \(Self.errorMessage(conn))")
            }
            defer { PQfreemem(p) }
            return String(cString: p)
        }
    }

    // MARK: - Internal

    /// Runs `body` under the lock with the open handle.
    func withHandle<T>(_ body: (OpaquePointer) throws -> T) throws -> T {
        lock.lock()
        defer { lock.unlock() }
        guard let conn = handle else {
            throw PGError(.invalidState, "connection is closed", context: description)
        }
        return try body(conn)
    }

    /// Holds the lock across `body` (a transaction).
    func locked<T>(_ body: () throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }

    /// Wraps a successful result, or throws the error it (or the connection) carries and
    /// frees it. The caller holds the lock.
    func check(_ result: OpaquePointer?, conn: OpaquePointer, sql: String) throws -> PGResult {
        guard let result else {
            // libpq returns no result only when it could not even allocate one, or the
            // connection is gone.
            let lost = PQstatus(conn) != CONNECTION_OK
            throw PGError(lost ? .connection : .server, Self.errorMessage(conn),
                          context: lost ? "\(description), running \(Self.excerpt(sql))" : Self.excerpt(sql))
        }
        let status = PQresultStatus(result)
        if status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK || status == PGRES_EMPTY_QUERY {
            return PGResult(handle: result)
        }
        defer { PQclear(result) }
        if status == PGRES_FATAL_ERROR || status == PGRES_NONFATAL_ERROR || status == PGRES_BAD_RESPONSE {
            throw error(from: result, conn: conn, sql: sql)
        }
        throw PGError(.invalidArgument,
                      "unsupported result status \(String(cString: PQresStatus(status))) (COPY and pipelines are not supported)",
                      context: Self.excerpt(sql))
    }

    /// The error a failed result reports: SQLSTATE, primary message, detail and hint. A
    /// failure that left the connection unusable is a `.connection` error whatever it says,
    /// and names the connection as well as the statement.
    func error(from result: OpaquePointer, conn: OpaquePointer, sql: String) -> PGError {
        func field(_ code: Character) -> String? {
            PQresultErrorField(result, Int32(code.asciiValue!)).map { String(cString: $0) }
        }
        let sqlState = field("C")
        var message = Self.oneLine(field("M") ?? "")
        if message.isEmpty { message = Self.oneLine(PQresultErrorMessage(result).map { String(cString: $0) } ?? "") }
        if message.isEmpty { message = Self.errorMessage(conn) }
        var code = PGError.code(forSQLState: sqlState)
        if PQstatus(conn) != CONNECTION_OK { code = .connection }
        let context = code == .connection ? "\(description), running \(Self.excerpt(sql))" : Self.excerpt(sql)
        return PGError(code, message, sqlState: sqlState, detail: field("D"), hint: field("H"), context: context)
    }

    /// `PQerrorMessage`, on one line.
    static func errorMessage(_ conn: OpaquePointer) -> String {
        let text = oneLine(PQerrorMessage(conn).map { String(cString: $0) } ?? "")
        return text.isEmpty ? "unknown libpq error" : text
    }

    /// libpq's multi-line messages joined into one line.
    static func oneLine(_ text: String) -> String {
        text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty }.joined(separator: " ")
    }

    /// Each value in binary format for its parameter type; nil for NULL.
    static func encode(_ params: [PGValue], as types: [PGType]) throws -> [[UInt8]?] {
        guard params.count <= maxParameters else {
            throw PGError(.invalidArgument, "\(params.count) parameters; PostgreSQL takes at most \(maxParameters)")
        }
        return try params.indices.map { try params[$0].encoded(as: types[$0], parameter: $0) }
    }

    /// Calls `body` with libpq's three parallel parameter arrays (values, lengths,
    /// formats: all binary). The values live in one buffer for the duration of the call;
    /// an empty value gets a valid pointer with length 0, NULL gets a null pointer.
    static func withParameters<R>(
        _ params: [[UInt8]?],
        _ body: (UnsafePointer<UnsafePointer<CChar>?>?, UnsafePointer<Int32>?, UnsafePointer<Int32>?) -> R
    ) -> R {
        var storage: [UInt8] = []
        storage.reserveCapacity(params.reduce(1) { $0 + ($1?.count ?? 0) })
        var offsets: [Int?] = []
        var lengths: [Int32] = []
        for p in params {
            if let p {
                offsets.append(storage.count)
                storage += p
            } else {
                offsets.append(nil)
            }
            lengths.append(Int32(clamping: p?.count ?? 0))
        }
        storage.append(0) // never empty, so its base address is never nil
        let formats = [Int32](repeating: 1, count: params.count)
        return storage.withUnsafeBufferPointer { buffer in
            let base = UnsafeRawPointer(buffer.baseAddress!).assumingMemoryBound(to: CChar.self)
            let values: [UnsafePointer<CChar>?] = offsets.map { $0.map { base + $0 } }
            return body(values, lengths, formats)
        }
    }

    /// Runs `body` with NUL-terminated copies of `strings`, followed by a null pointer.
    static func withCStrings<R>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> R) -> R {
        let copies: [UnsafeMutablePointer<CChar>?] = strings.map { strdup($0) }
        defer { for c in copies { free(c) } }
        let pointers: [UnsafePointer<CChar>?] = copies.map { $0.map { UnsafePointer($0) } } + [nil]
        return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
    }

    /// The connection string's settings as `key=value` pairs, without the passwords
    /// (`password`, and `sslpassword`, which unlocks a client key).
    /// - Throws: `PGError(.invalidArgument)` when libpq cannot parse it (libpq's reason is
    ///   left out: it may quote the string, password included).
    public static func redacted(_ url: String) throws -> String {
        var errmsg: UnsafeMutablePointer<CChar>?
        guard let options = PQconninfoParse(url, &errmsg) else {
            if let errmsg { PQfreemem(errmsg) }
            throw PGError(.invalidArgument, "the PostgreSQL connection string cannot be parsed (not shown: it may hold a password)")
        }
        defer { PQconninfoFree(options) }
        var parts: [String] = []
        var p = options
        while let keyword = p.pointee.keyword {
            let key = String(cString: keyword)
            // libpq marks its secret settings with the display character "*"; the names stay
            // as a fallback for a libpq that does not.
            let secret = p.pointee.dispchar.map { String(cString: $0) == "*" } ?? false
            if let value = p.pointee.val, !secret, key != "password", key != "sslpassword" {
                parts.append("\(key)=\(String(cString: value))")
            }
            p += 1
        }
        return parts.isEmpty ? "(default connection)" : parts.joined(separator: " ")
    }

    /// The SQL as it appears in error messages: one line, at most 200 characters.
    static func excerpt(_ sql: String) -> String {
        let oneLine = sql.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
            .joined(separator: " ")
        return oneLine.count > 200 ? String(oneLine.prefix(200)) + "…" : oneLine
    }
}
