import Foundation
import LnoteModel
import LnotePostgres
import LnoteServer
import Synchronization

/// `LISTEN lnote_relay` on a connection of its own, on a thread of its own (never Swift
/// concurrency's shared threads: libpq blocks), calling `changed` for each notebook another
/// relay process (or this one) reports.
///
/// When the connection is lost or cannot be made, it tries again after a pause that doubles
/// up to two seconds. Notifications sent meanwhile are lost, so after a reconnection every
/// notebook is reported as changed: held long polls look again, and nothing is missed.
/// `stop()` ends the thread within about a quarter of a second (or the connect timeout,
/// when a connection attempt is under way) and waits for it.
final class PostgresChangeFeed: @unchecked Sendable {
    let url: String
    let location: String
    let changed: @Sendable (NotebookID) -> Void
    private let stopped = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)
    private let state = Mutex<(listening: Bool, connections: Int, lastError: String?)>((false, 0, nil))

    init(url: String, location: String, changed: @escaping @Sendable (NotebookID) -> Void) {
        self.url = url
        self.location = location
        self.changed = changed
    }

    var status: (listening: Bool, connections: Int) { state.withLock { ($0.listening, $0.connections) } }

    func start() {
        let thread = Thread { [self] in run() }
        thread.name = "lnote relay change feed"
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
        while !isStopped {
            do {
                let conn = try PGConnection(url: url, connectTimeoutSeconds: 5)
                defer {
                    conn.close()
                    state.withLock { $0.listening = false }
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
                state.withLock { $0.listening = true; $0.connections += 1 }
                while !isStopped {
                    for n in try conn.waitForNotifications(timeout: .milliseconds(250))
                    where n.channel == RelayPostgresDatabase.channel {
                        if let id = NotebookID(n.payload) { changed(id) }
                    }
                }
            } catch {
                missed = true
                state.withLock { $0.lastError = "\(error)" }
                let until = Date().addingTimeInterval(pause)
                while !isStopped && Date() < until { usleep(20_000) }
                pause = min(pause * 2, 2)
            }
        }
    }
}
