import Foundation

/// A bounded pool of connections to one server, for blocking callers (dispatch queues,
/// threads).
///
/// Connections are opened on demand, at most `size` at a time; a caller that finds all of
/// them in use waits (up to `checkoutTimeout`). A connection is checked before it is handed
/// out (`PGConnection.isHealthy`) and when it comes back: one that is broken, or was left
/// inside a transaction, is closed and dropped, and a new one is opened on next use. So
/// during a database outage calls fail with `PGError(.connection)`, and once the server is
/// back the next calls succeed without restarting anything.
public final class PGPool: @unchecked Sendable {
    public let size: Int
    /// How long `withConnection` waits for a free connection before throwing `.timeout`.
    public let checkoutTimeout: Duration
    private let url: String
    private let connectTimeoutSeconds: Int
    private let applicationName: String?
    private let keepalive: PGKeepalive?

    /// Guards `idle`, `open` and `closed`; waiters sleep on it.
    private let condition = NSCondition()
    private var idle: [PGConnection] = []
    /// Connections that exist (idle, in use, or being opened).
    private var open = 0
    private var closed = false

    /// A pool of at most `size` connections to `url`; none is opened until first use. Each
    /// connection is opened with `applicationName` and `keepalive` (`PGConnection.init`).
    public init(url: String, size: Int, checkoutTimeout: Duration = .seconds(30), connectTimeoutSeconds: Int = 10,
                applicationName: String? = nil, keepalive: PGKeepalive? = nil) {
        precondition(size >= 1, "a pool holds at least one connection")
        self.url = url
        self.size = size
        self.checkoutTimeout = checkoutTimeout
        self.connectTimeoutSeconds = connectTimeoutSeconds
        self.applicationName = applicationName
        self.keepalive = keepalive
    }

    deinit {
        for c in idle { c.close() }
    }

    /// Runs `body` with a connection of its own, then returns the connection to the pool.
    ///
    /// - Throws: what `body` throws; `PGError(.connection)` when no connection can be
    ///   opened; `.timeout` when every connection stayed busy for `checkoutTimeout`;
    ///   `.invalidState` after `close()`.
    @discardableResult
    public func withConnection<T>(_ body: (PGConnection) throws -> T) throws -> T {
        let connection = try checkout()
        defer { checkin(connection) }
        return try body(connection)
    }

    /// Connections that exist now (idle or in use), at most `size`.
    public var openConnections: Int {
        condition.lock(); defer { condition.unlock() }
        return open
    }

    /// Closes the idle connections and refuses new checkouts; connections in use are
    /// closed when they come back. Calling it again does nothing.
    public func close() {
        condition.lock()
        closed = true
        let toClose = idle
        open -= idle.count
        idle = []
        condition.broadcast()
        condition.unlock()
        for c in toClose { c.close() }
    }

    // MARK: - Internal

    private func checkout() throws -> PGConnection {
        let deadline = Date().addingTimeInterval(Self.seconds(checkoutTimeout))
        condition.lock()
        while true {
            if closed {
                condition.unlock()
                throw PGError(.invalidState, "connection pool is closed")
            }
            if let c = idle.popLast() {
                condition.unlock()
                // Checked outside the lock: it may read from the socket.
                if c.isHealthy { return c }
                c.close()
                condition.lock()
                open -= 1
                continue
            }
            if open < size {
                open += 1
                condition.unlock()
                do {
                    return try PGConnection(url: url, connectTimeoutSeconds: connectTimeoutSeconds,
                                            applicationName: applicationName, keepalive: keepalive)
                } catch {
                    condition.lock()
                    open -= 1
                    condition.signal()
                    condition.unlock()
                    throw error
                }
            }
            if !condition.wait(until: deadline) && idle.isEmpty && open >= size {
                condition.unlock()
                throw PGError(.timeout, "all \(size) pooled connections stayed busy for \(checkoutTimeout)")
            }
        }
    }

    private func checkin(_ connection: PGConnection) {
        let keep = connection.isReusable
        if !keep { connection.close() }
        condition.lock()
        if keep && !closed {
            idle.append(connection)
        } else {
            open -= 1
            if keep { connection.close() }
        }
        condition.signal()
        condition.unlock()
    }

    private static func seconds(_ d: Duration) -> Double {
        let (s, atto) = d.components
        return Double(s) + Double(atto) / 1e18
    }
}
