import LnoteModel

/// A failure of the PostgreSQL layer: a code to match on, the server's SQLSTATE when it
/// sent one, its message, detail and hint, and the (password-free) connection or SQL it
/// is about.
///
/// Equality compares the code alone, like `LnoteError`, so tests can write
/// `#expect(throws: PGError(.serializationFailure))`. `lnoteError` gives the project-wide
/// error for callers that report failures uniformly; the SQLSTATE stays typed here.
public struct PGError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Code: String, Sendable, Equatable, CaseIterable {
        /// The server cannot be reached, or the connection was lost (the connection is
        /// unusable; a pool drops it). SQLSTATE class 08, 57P01-57P03, or a libpq-side failure.
        case connection
        /// The transaction was aborted by a serialization failure (40001) or a deadlock
        /// (40P01): nothing it did was kept, and running it again may succeed.
        case serializationFailure
        /// A lock could not be had within `lock_timeout` (55P03): the transaction was
        /// aborted, nothing it did was kept, and running it again may succeed.
        case lockTimeout
        /// The server rejected a statement (any other SQLSTATE, e.g. 23505).
        case server
        /// A field's bytes do not match its type (length, UTF-8, boolean value).
        case decoding
        /// A getter asked for a type the field does not have, or for a NULL field's value.
        case typeMismatch
        /// Wrong use: a row or column out of range, an unknown prepared statement, a value
        /// that cannot be sent as its parameter's type.
        case invalidArgument
        /// The connection or pool is closed, or a transaction is in a state that forbids
        /// the operation.
        case invalidState
        /// A wait for a pooled connection ran out of time.
        case timeout
    }

    public var code: Code
    /// The server's primary message, or libpq's for client-side failures (one line).
    public var message: String
    /// Five characters, e.g. `23505`; nil when the failure did not come from the server.
    public var sqlState: String?
    public var detail: String?
    public var hint: String?
    /// The connection (password removed) or SQL excerpt the error is about.
    public var context: String?
    /// Where it was thrown, `File.swift:123`.
    public var location: String

    public init(_ code: Code, _ message: String = "", sqlState: String? = nil, detail: String? = nil,
                hint: String? = nil, context: String? = nil,
                file: StaticString = #fileID, line: UInt = #line) {
        self.code = code
        self.message = message
        self.sqlState = sqlState
        self.detail = detail
        self.hint = hint
        self.context = context
        self.location = "\(file):\(line)"
    }

    /// The code a server error with `sqlState` gets.
    static func code(forSQLState state: String?) -> Code {
        guard let state else { return .server }
        if state == "40001" || state == "40P01" { return .serializationFailure }
        if state == "55P03" { return .lockTimeout }
        if state.hasPrefix("08") || state == "57P01" || state == "57P02" || state == "57P03" { return .connection }
        return .server
    }

    /// 23505: a row with the same key exists.
    public var isUniqueViolation: Bool { sqlState == "23505" }
    /// 40001 or 40P01: the transaction may succeed if run again.
    public var isSerializationFailure: Bool { code == .serializationFailure }
    /// The connection is unreachable or lost.
    public var isConnectionFailure: Bool { code == .connection }
    /// 55P03: a lock was not granted within `lock_timeout`.
    public var isLockTimeout: Bool { code == .lockTimeout }
    /// Running the same transaction again may succeed (serialization failures and lock
    /// timeouts only: after a connection failure the caller decides whether the work was
    /// applied).
    public var isRetryable: Bool { isSerializationFailure || isLockTimeout }

    /// `server: duplicate key value violates unique constraint "t_pkey" [SQLSTATE 23505]
    /// (Key (k)=(1) already exists.) in INSERT INTO t …`
    public var description: String {
        var s = code.rawValue
        if !message.isEmpty { s += ": \(message)" }
        if let sqlState { s += " [SQLSTATE \(sqlState)]" }
        if let detail, !detail.isEmpty { s += " (\(detail))" }
        if let hint, !hint.isEmpty { s += " hint: \(hint)" }
        if let context { s += " in \(context)" }
        return s
    }

    /// The project-wide error: `.database` for failures of the database or its
    /// connection, `.corrupt` for undecodable data, `.invalidArgument` / `.invalidState`
    /// for misuse. `underlying` reads `SQLSTATE 23505: message`.
    public var lnoteError: LnoteError {
        let lnoteCode: LnoteError.Code = switch code {
        case .connection, .serializationFailure, .lockTimeout, .server, .timeout: .database
        case .decoding: .corrupt
        case .typeMismatch, .invalidArgument: .invalidArgument
        case .invalidState: .invalidState
        }
        var e = LnoteError(lnoteCode, "PostgreSQL \(code.rawValue): \(message)", path: context,
                           underlying: sqlState.map { "SQLSTATE \($0)" })
        e.location = location
        return e
    }

    public static func == (l: PGError, r: PGError) -> Bool { l.code == r.code }
}
