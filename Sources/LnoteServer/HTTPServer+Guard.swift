import CLnoteMicroHTTPD
import Foundation
import LnoteStore
import Synchronization

/// The server's defences against clients that hold its connections or its memory
/// (`Protocol/sync-protocol.md` [SYNC-76]..[SYNC-79]): a deadline for each request's headers, a
/// minimum rate for its body, a cap on the connections still waiting for their headers (so that
/// the rest stay free for requests past admission), and a budget for the bodies of all requests
/// in flight.
///
/// libmicrohttpd has a per-connection idle timeout, which every byte resets, and no total
/// deadline. So the guard tracks each connection from libmicrohttpd's connection notifier
/// (opened, closed) with its socket; the request callbacks move it from phase to phase, and a
/// watchdog thread `shutdown()`s the socket of a connection past its deadline, which
/// libmicrohttpd then sees as the client's end and closes. A socket is shut down only under
/// the lock that the close notification takes before libmicrohttpd closes it, so a descriptor
/// number reused by another connection is never touched.
final class ConnectionGuard: Sendable {
    struct Limits: Sendable {
        var headerTimeout: Duration
        var bodyGrace: Duration
        var bodyMinimumBytesPerSecond: Int
        /// Most connections waiting for their headers at once.
        var maxAwaitingHeaders: Int
        /// libmicrohttpd's connection limit: past it, new connections are refused.
        var connectionLimit: Int
        var bodyBudget: Int
    }

    enum Phase {
        /// Waiting for a request's headers, since the connection opened or its last request ended.
        case awaitingHeaders(since: ContinuousClock.Instant)
        /// Headers in; the admission hook runs.
        case admitting
        /// Admitted; its body is read (`received` bytes since `since`).
        case body(since: ContinuousClock.Instant, received: Int)
        /// Handled or answered: no deadline (a long poll may be held for minutes).
        case busy
        /// Shut down by the guard; waiting for libmicrohttpd to close it.
        case cut
    }

    struct Entry {
        let fd: Int32
        var phase: Phase
    }

    let limits: Limits
    private let entries = Mutex<[Int: Entry]>([:])
    private let reserved = Atomic<Int>(0)
    private let peak = Atomic<Int>(0)
    /// Connections shut down for a missed deadline or a rate below the minimum.
    let timedOut = Atomic<Int>(0)
    /// Connections shut down to make room for a new one while waiting for their headers.
    let evicted = Atomic<Int>(0)
    /// Requests refused because their body did not fit in the budget.
    let overBudget = Atomic<Int>(0)
    private let running = Atomic<Bool>(true)

    init(limits: Limits) { self.limits = limits }

    static func key(_ connection: OpaquePointer) -> Int { Int(bitPattern: UnsafeRawPointer(connection)) }

    // MARK: Connections

    /// A connection opened: it waits for headers. When more connections than allowed are
    /// waiting, or the server reaches its connection limit (the next connection would be
    /// refused), the ones waiting longest are shut down ([SYNC-78]).
    func opened(_ connection: OpaquePointer, fd: Int32) {
        let now = ContinuousClock.now
        entries.withLock { entries in
            let key = Self.key(connection)
            entries[key] = Entry(fd: fd, phase: .awaitingHeaders(since: now))
            makeRoom(&entries, sparing: key)
        }
    }

    /// Shuts down the connections that have waited longest for their headers, as many as are
    /// over the limit of waiting ones or would leave no room for the next connection; never
    /// `sparing` (the connection that just started waiting, which has had no time to send).
    private func makeRoom(_ entries: inout [Int: Entry], sparing: Int) {
        var waiting: [(key: Int, since: ContinuousClock.Instant)] = []
        var live = 0
        for (key, entry) in entries {
            if case .awaitingHeaders(let since) = entry.phase, key != sparing { waiting.append((key, since)) }
            if case .cut = entry.phase {} else { live += 1 }
        }
        let excess = max(waiting.count + 1 - limits.maxAwaitingHeaders, live - (limits.connectionLimit - 1), 0)
        guard excess > 0 else { return }
        waiting.sort { $0.since < $1.since }
        for victim in waiting.prefix(excess) {
            evicted.add(1, ordering: .relaxed)  // counted before the cut, as in `sweep`
            Self.cut(&entries, victim.key)
        }
    }

    /// libmicrohttpd closes the connection (its socket is closed after this returns).
    func closed(_ connection: OpaquePointer) {
        _ = entries.withLock { $0.removeValue(forKey: Self.key(connection)) }
    }

    /// Moves a connection to `phase`, unless the guard has cut it.
    func set(_ connection: OpaquePointer, _ phase: Phase) {
        entries.withLock { entries in
            let key = Self.key(connection)
            guard let entry = entries[key] else { return }
            if case .cut = entry.phase { return }
            entries[key]?.phase = phase
            if case .awaitingHeaders = phase { makeRoom(&entries, sparing: key) }
        }
    }

    /// `n` more bytes of the connection's body arrived.
    func received(_ connection: OpaquePointer, _ n: Int) {
        entries.withLock { entries in
            let key = Self.key(connection)
            guard case .body(let since, let received)? = entries[key]?.phase else { return }
            entries[key]?.phase = .body(since: since, received: received + n)
        }
    }

    /// Connections waiting for their headers now.
    var awaitingHeaders: Int {
        entries.withLock { $0.values.count { if case .awaitingHeaders = $0.phase { true } else { false } } }
    }

    /// Shuts down every connection past its deadline ([SYNC-76], [SYNC-77]).
    func sweep(now: ContinuousClock.Instant = .now) {
        entries.withLock { entries in
            for (key, entry) in entries where isLate(entry.phase, now: now) {
                // Counted before the cut: whoever sees the connection closed sees it counted.
                timedOut.add(1, ordering: .relaxed)
                Self.cut(&entries, key)
            }
        }
    }

    private func isLate(_ phase: Phase, now: ContinuousClock.Instant) -> Bool {
        switch phase {
        case .awaitingHeaders(let since):
            return now - since > limits.headerTimeout
        case .body(let since, let received):
            let late = now - since - limits.bodyGrace
            guard late > .zero else { return false }
            let seconds = Double(late.components.seconds) + Double(late.components.attoseconds) / 1e18
            return Double(received) < seconds * Double(limits.bodyMinimumBytesPerSecond)
        case .admitting, .busy, .cut:
            return false
        }
    }

    private static func cut(_ entries: inout [Int: Entry], _ key: Int) {
        guard let entry = entries[key] else { return }
        entries[key]?.phase = .cut
        // libmicrohttpd sees the end of the stream and closes the connection itself.
        _ = Glibc.shutdown(entry.fd, Int32(SHUT_RDWR))
    }

    /// Runs `sweep` every `tick` on a thread of its own until `stop()`.
    func startWatchdog() {
        let tick = max(min(limits.headerTimeout / 4, .seconds(1)), .milliseconds(20))
        let thread = Thread { [self] in
            ThreadName.setCurrent("lnote.watchdog")
            while running.load(ordering: .relaxed) {
                let c = tick.components
                usleep(UInt32(c.seconds * 1_000_000 + c.attoseconds / 1_000_000_000_000))
                sweep()
            }
        }
        thread.start()
    }

    func stop() { running.store(false, ordering: .relaxed) }

    // MARK: Body budget ([SYNC-79])

    /// Reserves `n` bytes of the budget; false (and nothing reserved) when they do not fit.
    func reserve(_ n: Int) -> Bool {
        guard n > 0 else { return true }
        var current = reserved.load(ordering: .relaxed)
        while true {
            guard n <= limits.bodyBudget - current else {
                return false
            }
            let (exchanged, original) = reserved.compareExchange(expected: current, desired: current + n,
                                                                 ordering: .relaxed)
            if exchanged {
                var p = peak.load(ordering: .relaxed)
                while p < current + n {
                    let (done, seen) = peak.compareExchange(expected: p, desired: current + n, ordering: .relaxed)
                    if done { break }
                    p = seen
                }
                return true
            }
            current = original
        }
    }

    func release(_ n: Int) {
        if n > 0 { reserved.subtract(n, ordering: .relaxed) }
    }

    var bodyBytesInFlight: Int { reserved.load(ordering: .relaxed) }
    var peakBodyBytesInFlight: Int { peak.load(ordering: .relaxed) }
}

/// MHD_OPTION_NOTIFY_CONNECTION: a connection opened or closed.
let connectionNotifyCallback: MHD_NotifyConnectionCallback = { cls, connection, _, code in
    guard let cls, let connection else { return }
    let server = Unmanaged<ServerContext>.fromOpaque(cls).takeUnretainedValue()
    if code.rawValue == 0 { // MHD_CONNECTION_NOTIFY_STARTED
        server.guardian.opened(connection, fd: clnote_mhd_connection_fd(connection))
    } else {
        server.guardian.closed(connection)
    }
}
