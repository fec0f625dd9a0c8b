import Dispatch
import Foundation
import LnoteModel
import LnoteStore
import Synchronization

/// One relay process serving a database, as it last said in `relay_presence`
/// (`RelayStore.Tables`).
public struct RelayProcessPresence: Sendable, Equatable {
    /// Random, made when the process started serving.
    public var id: String
    public var host: String
    public var pid: Int64
    /// The HTTP port it listens on.
    public var port: Int64
    /// When it first wrote its row, in milliseconds since 1970 by the database's clock
    /// (`RelayDatabase.nowMillisecondsSQL`).
    public var started: Int64
    /// When it last wrote its row, in milliseconds since 1970 by the database's clock.
    public var heartbeat: Int64
    /// The long polls it held then ([SYNC-71]).
    public var longPolls: Int64

    public init(id: String, host: String, pid: Int64, port: Int64, started: Int64, heartbeat: Int64, longPolls: Int64) {
        self.id = id
        self.host = host
        self.pid = pid
        self.port = port
        self.started = started
        self.heartbeat = heartbeat
        self.longPolls = longPolls
    }
}

/// Where a relay process writes its presence row: one statement at a time, each committed
/// on its own, on a connection that requests do not use, so that a presence write never
/// waits for a request's connection nor holds one (`RelayPresence`). Used from one thread.
public protocol RelayPresenceWriter: AnyObject {
    /// Runs one statement (portable SQL, `?N` placeholders) in a transaction of its own.
    /// - Throws: `.database` naming the database when it cannot.
    func run(_ sql: String, _ params: [RelayValue]) throws
    /// Releases the connection. Idempotent.
    func close()
}

/// A backend that gives presence writes a connection of their own (SQLite: a second
/// connection to the file, without fsync at commit; PostgreSQL: one connection outside the
/// pool, in autocommit, so a write takes none of the locks a push takes). A backend that
/// does not conform gets its presence written through `RelayDatabase.transaction`.
public protocol RelayPresenceBackend: RelayDatabase {
    /// A new writer; its connection may be opened lazily.
    func makePresenceWriter() throws -> any RelayPresenceWriter
}

/// A writer through the store's own transactions: for a backend without a connection to
/// spare (an in-memory SQLite database, whose second connection would be another database).
final class TransactionPresenceWriter: RelayPresenceWriter {
    let database: any RelayDatabase
    init(_ database: any RelayDatabase) { self.database = database }
    func run(_ sql: String, _ params: [RelayValue]) throws {
        try database.transaction(.write) { tx in _ = try tx.execute(sql, params) }
    }
    func close() {}
}

/// Tells the other processes sharing a relay's database that this relay process serves it,
/// and how many long polls it holds now (`lnote relay stats` sums them over every process
/// seen lately): a row of `relay_presence` (`RelayStore.Tables`), written by a thread of its
/// own, never by a request.
///
/// The row is written when the count of held long polls has changed (at most once per
/// `Timing.minimumInterval`, 1 s), at each heartbeat (`Timing.heartbeat`, 15 s) whether or
/// not it changed, and deleted by `close()`. A process that dies leaves its row behind; its
/// heartbeat then grows old, and `RelayStore.stats` counts only rows with a recent one
/// (60 s). Rows whose heartbeat is older than an hour are deleted when a relay starts.
/// Times are the database's (`RelayDatabase.nowMillisecondsSQL`), never the host's: a relay
/// on a host whose clock is a minute slow would otherwise look gone to every other one.
///
/// A write that fails (the database unreachable, busy, or of an older schema) is not thrown
/// anywhere: it is told to `log` at most once per minute (with the count of failures in
/// between), and the next write tries again on a new connection. Requests never wait for
/// presence: the count is read from `LongPolls` without blocking them.
public final class RelayPresence: Sendable {
    /// How often the row is written.
    public struct Timing: Sendable {
        /// Written at least this often, changed or not.
        public var heartbeat: Duration = .seconds(15)
        /// A changed count is written at most this often.
        public var minimumInterval: Duration = .seconds(1)
        /// How often the count is looked at.
        public var poll: Duration = .milliseconds(200)
        /// Failures are logged at most this often.
        public var logInterval: Duration = .seconds(60)
        public init(heartbeat: Duration = .seconds(15), minimumInterval: Duration = .seconds(1),
                    poll: Duration = .milliseconds(200), logInterval: Duration = .seconds(60)) {
            self.heartbeat = heartbeat
            self.minimumInterval = minimumInterval
            self.poll = poll
            self.logInterval = logInterval
        }
    }

    /// Rows whose heartbeat is older than this are deleted when a relay process starts.
    public static let forgetAfterMilliseconds: Int64 = 3_600_000

    /// This process's row id: 32 random hex digits.
    public let id: String
    public let host: String
    public let pid: Int64
    public let port: Int64
    public let location: String
    private let timing: Timing
    private let longPolls: @Sendable () -> Int
    private let log: (@Sendable (String) -> Void)?
    private let database: any RelayDatabase
    private let stop = DispatchSemaphore(value: 0)
    private let done = DispatchSemaphore(value: 0)
    private let closed = Atomic<Bool>(false)
    /// Writes that succeeded and failed so far (tests, reports).
    private let counts = Mutex<(written: Int, failed: Int)>((0, 0))

    /// Starts writing this process's presence for `store`, on a thread of its own that runs
    /// until `close()` (call it before closing the store).
    ///
    /// - Parameters:
    ///   - store: the relay's store; its database receives the row.
    ///   - port: the port the relay's HTTP server listens on.
    ///   - longPolls: the long polls held now (`RelayServer.longPolls.waiting`); called
    ///     from the presence thread, so it must not block.
    ///   - log: where failures are told (at most once per `timing.logInterval`).
    public init(store: RelayStore, port: Int, timing: Timing = Timing(), log: (@Sendable (String) -> Void)? = nil,
                longPolls: @escaping @Sendable () -> Int) {
        var g = SystemRandomNumberGenerator()
        id = hexString((0..<16).map { _ in UInt8.random(in: 0...255, using: &g) })
        host = Self.hostName()
        pid = Int64(getpid())
        self.port = Int64(port)
        location = store.database.location
        database = store.database
        self.timing = timing
        self.longPolls = longPolls
        self.log = log
        let thread = Thread { [self] in
            ThreadName.setCurrent("lnote.presence")
            run()
        }
        thread.stackSize = 1 << 20
        thread.start()
    }

    /// This machine's name (`gethostname`: no DNS lookup, which could block the start).
    public static func hostName() -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return "unknown" }
        let name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return name.isEmpty ? "unknown" : name
    }

    /// Presence writes that succeeded and failed since the start.
    public var writes: (written: Int, failed: Int) { counts.withLock { $0 } }

    /// Stops the thread and deletes this process's row (a failure to delete it is logged:
    /// the row then ages out). Waits for a write in progress, at most 15 s: a database that
    /// does not answer does not keep the relay from stopping (the row then ages out).
    /// Idempotent.
    public func close() {
        guard !closed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        stop.signal()
        _ = done.wait(timeout: .now() + 15)
    }

    /// Writes this process's row; `started` stays what the first write gave it.
    static func upsert(now: String) -> String {
        """
        INSERT INTO relay_presence (id, host, pid, port, started, heartbeat, long_polls) VALUES (?1, ?2, ?3, ?4, \(now), \(now), ?5)
        ON CONFLICT (id) DO UPDATE SET heartbeat = excluded.heartbeat, long_polls = excluded.long_polls
        """
    }

    private func run() {
        var writer: (any RelayPresenceWriter)?
        var lastLog: ContinuousClock.Instant?
        var unlogged = 0
        var pruned = false
        func report(_ error: any Error, _ what: String) {
            counts.withLock { $0.failed += 1 }
            let now = ContinuousClock.now
            if let last = lastLog, now - last < timing.logInterval {
                unlogged += 1
                return
            }
            lastLog = now
            let more = unlogged > 0 ? " (\(unlogged) more failures since the last report)" : ""
            unlogged = 0
            log?("cannot \(what) this relay's presence in \(location): \(error)\(more); requests are not affected, "
                 + "`lnote relay stats` may miss this process; failures are reported at most once a minute")
        }
        /// Runs one statement on the writer, made (again) when needed; false when it failed.
        func write(_ sql: String, _ params: [RelayValue], _ what: String) -> Bool {
            do {
                if writer == nil {
                    writer = try (database as? any RelayPresenceBackend)?.makePresenceWriter()
                        ?? TransactionPresenceWriter(database)
                }
                try writer!.run(sql, params)
                counts.withLock { $0.written += 1 }
                return true
            } catch {
                // A new connection next time: this one may be broken.
                writer?.close()
                writer = nil
                report(error, what)
                return false
            }
        }

        var written: Int?
        var lastAttempt: ContinuousClock.Instant?
        while true {
            let count = longPolls()
            let now = ContinuousClock.now
            let due: Bool
            if let last = lastAttempt {
                due = now - last >= timing.heartbeat || (count != written && now - last >= timing.minimumInterval)
            } else {
                due = true
            }
            if due {
                lastAttempt = now
                let clock = database.nowMillisecondsSQL
                if !pruned {
                    pruned = write("DELETE FROM relay_presence WHERE heartbeat < \(clock) - ?1",
                                   [.integer(Self.forgetAfterMilliseconds)], "prune old rows of")
                }
                let params: [RelayValue] = [.text(id), .text(host), .integer(pid), .integer(port), .integer(Int64(count))]
                written = write(Self.upsert(now: clock), params, "record") ? count : nil
            }
            if stop.wait(timeout: .now() + .nanoseconds(Int(timing.poll.components.attoseconds / 1_000_000_000
                                                             + timing.poll.components.seconds * 1_000_000_000))) == .success {
                break
            }
        }
        if lastAttempt != nil {
            _ = write("DELETE FROM relay_presence WHERE id = ?1", [.text(id)], "remove")
        }
        writer?.close()
        done.signal()
    }
}
