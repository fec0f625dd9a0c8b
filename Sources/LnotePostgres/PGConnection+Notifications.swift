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
