import Foundation
import LnoteModel
import LnotePostgres
import LnoteServer
import LnoteStore
import Synchronization

/// `LISTEN lnote_relay` on a connection of its own, on a thread of its own (never Swift
/// concurrency's shared threads: libpq blocks), calling `changed` for each notebook another
/// relay process (or this one) reports.
///
/// A lost connection is noticed within a bounded time: at once when the server ends the
/// session (a restart, `pg_terminate_backend`: the socket reports the end of the stream);
/// within `check.interval + check.timeout` when it vanishes silently (a dropped network, a
/// frozen host), by a `SELECT 1` every `check.interval` that must be answered within
/// `check.timeout`; and, on TCP, by keepalives (`PGKeepalive.standard`) while idle.
///
/// When the connection is lost or cannot be made, it tries again after a pause that doubles
/// up to two seconds. Notifications sent meanwhile are lost, so after a reconnection every
/// notebook is reported as changed, once, after `LISTEN` took effect: held long polls look
/// again, and nothing is missed. `stop()` ends the thread within about a quarter of a
/// second (or the connect timeout or the check's timeout, when one is under way) and waits
/// for it.
final class PostgresChangeFeed: @unchecked Sendable {
    let url: String
    let location: String
    let check: (interval: Duration, timeout: Duration)
    let changed: @Sendable (NotebookID) -> Void
    private let stopped = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)
    /// Signalled once, when the first attempt listens or fails.
    private let firstAttempt = DispatchSemaphore(value: 0)
    private let state = Mutex<(listening: Bool, connections: Int, pid: Int32?, lastError: String?)>((false, 0, nil, nil))

    init(url: String, location: String, check: (interval: Duration, timeout: Duration),
         changed: @escaping @Sendable (NotebookID) -> Void) {
        self.url = url
        self.location = location
        self.check = check
        self.changed = changed
    }

    var status: (listening: Bool, connections: Int) { state.withLock { ($0.listening, $0.connections) } }
    var backendPID: Int32? { state.withLock { $0.listening ? $0.pid : nil } }

    /// Starts the thread and waits until its first connection listens, or failed (then every
    /// notebook is reported once a later one listens), or `timeout` passed: a change committed
    /// after this returns is reported, whatever the order of its commit and the `LISTEN`.
    func start(waitingUpTo timeout: Duration) {
        start()
        let (seconds, attoseconds) = timeout.components
        _ = firstAttempt.wait(timeout: .now() + .nanoseconds(Int(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)))
    }

    func start() {
        let thread = Thread { [self] in
            ThreadName.setCurrent("lnote.pgfeed")
            run()
        }
        thread.start()
    }

    func stop() {
        stopped.store(true, ordering: .releasing)
        _ = finished.wait(timeout: .now() + 30)
    }

    private var isStopped: Bool { stopped.load(ordering: .acquiring) }

    private func run() {
        defer { finished.signal() }
        var pause = 0.05
        var missed = false
        var first = true
        defer { if first { firstAttempt.signal() } }
        while !isStopped {
            do {
                let conn = try PGConnection(url: url, connectTimeoutSeconds: 5,
                                            applicationName: RelayPostgresDatabase.changeFeedApplicationName,
                                            keepalive: .standard)
                defer {
                    conn.close()
                    state.withLock { $0.listening = false; $0.pid = nil }
                }
                try conn.listen(RelayPostgresDatabase.channel)
                pause = 0.05
                if missed {
                    missed = false
                    let r = try conn.execute("SELECT id FROM notebooks")
                    for i in 0..<r.rowCount {
                        if let id = NotebookID(try r.string(i, 0)) { changed(id) }
                    }
                }
                // Counted once the notebooks were reported: a test that sees the count
                // knows that the next report is a notification.
                let pid = conn.backendPID
                state.withLock { $0.listening = true; $0.connections += 1; $0.pid = pid }
                if first { first = false; firstAttempt.signal() }
                var checked = ContinuousClock.now
                while !isStopped {
                    for n in try conn.waitForNotifications(timeout: .milliseconds(250))
                    where n.channel == RelayPostgresDatabase.channel {
                        if let id = NotebookID(n.payload) { changed(id) }
                    }
                    if ContinuousClock.now - checked >= check.interval {
                        try conn.checkAlive(timeout: check.timeout)
                        checked = ContinuousClock.now
                    }
                }
            } catch {
                // Whatever was sent before a LISTEN took effect is reported at the next one.
                missed = true
                if first { first = false; firstAttempt.signal() }
                state.withLock { $0.lastError = "\(error)" }
                let until = Date().addingTimeInterval(pause)
                while !isStopped && Date() < until { usleep(20_000) }
                pause = min(pause * 2, 2)
            }
        }
    }
}
