import CLnotePQ
import Foundation

/// One `NOTIFY` received on a channel this connection listens to.
public struct PGNotification: Sendable, Equatable {
    public var channel: String
    public var payload: String
    /// The server process of the connection that sent it.
    public var senderPID: Int32

    public init(channel: String, payload: String, senderPID: Int32) {
        self.channel = channel
        self.payload = payload
        self.senderPID = senderPID
    }
}

extension PGConnection {
    /// `LISTEN channel` (the name is quoted, so it is used exactly as given).
    public func listen(_ channel: String) throws {
        try execute("LISTEN \(try quoteIdentifier(channel))")
    }

    /// `UNLISTEN channel`.
    public func unlisten(_ channel: String) throws {
        try execute("UNLISTEN \(try quoteIdentifier(channel))")
    }

    /// Sends a notification (`pg_notify`); inside a transaction it is delivered at commit.
    public func notify(_ channel: String, payload: String = "") throws {
        try execute("SELECT pg_notify($1, $2)", [.text(channel), .text(payload)])
    }

    /// Returns the notifications received so far, or waits up to `timeout` for the first
    /// ones to arrive; an empty array when none came in time.
    ///
    /// Sleeps in poll(2) on the connection's socket (no busy waiting), with the
    /// connection's lock released; then reads what arrived with `PQconsumeInput`.
    /// A connection used for waiting is best dedicated to it: a transaction on another
    /// thread holds the lock and delays the wait past `timeout`.
    /// - Throws: `PGError(.connection)` when the connection is lost while waiting.
    public func waitForNotifications(timeout: Duration) throws -> [PGNotification] {
        let deadline = ContinuousClock.now + timeout
        while true {
            let (received, socket) = try withHandle { conn -> ([PGNotification], Int32) in
                guard PQconsumeInput(conn) == 1 else {
                    throw PGError(.connection, "connection lost while waiting for notifications: \(Self.errorMessage(conn))",
                                  context: description)
                }
                return (Self.drainNotifications(conn), PQsocket(conn))
            }
            if !received.isEmpty { return received }
            let remaining = deadline - ContinuousClock.now
            if remaining <= .zero { return [] }
            guard socket >= 0 else {
                throw PGError(.connection, "connection has no socket", context: description)
            }
            var fd = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
            let (seconds, attoseconds) = remaining.components
            let ms = min(Int64(Int32.max), seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000)
            let r = poll(&fd, 1, Int32(ms))
            if r < 0 && errno != EINTR {
                throw PGError(.connection, "poll on the connection's socket failed: errno \(errno)", context: description)
            }
        }
    }

    /// Asks the server a trivial question (`SELECT 1`) and waits at most `timeout` for the
    /// answer: a cheap check that a connection used only for waiting (`LISTEN`) still
    /// reaches a live server. A server that restarted or ended the session answers with an
    /// error or the end of the stream; one that vanished silently does not answer at all,
    /// which only a bound on the wait can tell. Notifications received meanwhile are kept
    /// for the next `waitForNotifications`.
    /// - Throws: `PGError(.connection)` when the connection is lost or no answer came within
    ///   `timeout` (the connection is then unusable: close it); the server's error otherwise.
    public func checkAlive(timeout: Duration) throws {
        let deadline = ContinuousClock.now + timeout
        try withHandle { conn in
            guard PQsendQuery(conn, "SELECT 1") == 1, PQflush(conn) == 0 else {
                throw PGError(.connection, "cannot send a liveness check: \(Self.errorMessage(conn))", context: description)
            }
            while PQisBusy(conn) == 1 {
                let remaining = deadline - ContinuousClock.now
                guard remaining > .zero else {
                    throw PGError(.connection, "the server did not answer a liveness check within \(timeout)",
                                  context: description)
                }
                var fd = pollfd(fd: PQsocket(conn), events: Int16(POLLIN), revents: 0)
                let (seconds, attoseconds) = remaining.components
                let ms = min(Int64(Int32.max), seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000)
                let r = poll(&fd, 1, Int32(ms))
                if r < 0 && errno != EINTR {
                    throw PGError(.connection, "poll on the connection's socket failed: errno \(errno)", context: description)
                }
                if r > 0 && PQconsumeInput(conn) == 0 {
                    throw PGError(.connection, "connection lost during a liveness check: \(Self.errorMessage(conn))",
                                  context: description)
                }
            }
            var failure: PGError?
            while let result = PQgetResult(conn) {
                if failure == nil && PQresultStatus(result) != PGRES_TUPLES_OK {
                    failure = error(from: result, conn: conn, sql: "SELECT 1")
                }
                PQclear(result)
            }
            if let failure { throw failure }
            guard PQstatus(conn) == CONNECTION_OK else {
                throw PGError(.connection, "connection lost during a liveness check: \(Self.errorMessage(conn))",
                              context: description)
            }
        }
    }

    /// Every notification libpq has parsed; the caller holds the lock.
    private static func drainNotifications(_ conn: OpaquePointer) -> [PGNotification] {
        var out: [PGNotification] = []
        while let n = PQnotifies(conn) {
            defer { PQfreemem(n) }
            out.append(PGNotification(channel: n.pointee.relname.map { String(cString: $0) } ?? "",
                                      payload: n.pointee.extra.map { String(cString: $0) } ?? "",
                                      senderPID: n.pointee.be_pid))
        }
        return out
    }
}
