import CLnotePQ
import Foundation
import Synchronization

/// TCP keepalive settings of a connection (libpq's `keepalives_*` and `tcp_user_timeout`;
/// ignored on a Unix socket): with them a connection whose peer vanished without a word (a
/// dropped network, a powered-off host) fails within about
/// `idleSeconds + intervalSeconds * count` while idle, and within `userTimeoutMilliseconds`
/// while data it sent is unacknowledged, instead of after the kernel's two hours.
public struct PGKeepalive: Sendable, Equatable {
    public var idleSeconds: Int
    public var intervalSeconds: Int
    public var count: Int
    public var userTimeoutMilliseconds: Int

    public init(idleSeconds: Int = 10, intervalSeconds: Int = 5, count: Int = 3, userTimeoutMilliseconds: Int = 30_000) {
        self.idleSeconds = max(1, idleSeconds)
        self.intervalSeconds = max(1, intervalSeconds)
        self.count = max(1, count)
        self.userTimeoutMilliseconds = max(0, userTimeoutMilliseconds)
    }

    /// Dead within about 25 s idle, 30 s busy.
    public static let standard = PGKeepalive()
}

/// What becomes of the server's notices (`RAISE NOTICE`, "relation … already exists,
/// skipping", warnings): libpq's default prints every one of them to stderr, which fills a
/// relay's log with chatter about idempotent schema statements.
///
/// Every `PGConnection` installs a notice receiver (`PQsetNoticeReceiver`, a C function that
/// captures nothing: the connection's `Sink` comes through libpq's `void *` argument). It
/// drops DEBUG, LOG, INFO and NOTICE, and gives WARNING (and any severity it does not know)
/// to the warning handler: by default one line on stderr, where a relay process logs.
public enum PGNotices {
    /// One notice the server sent.
    public struct Notice: Sendable, Equatable, CustomStringConvertible {
        /// Not localized: `WARNING`, `NOTICE`, ….
        public var severity: String
        public var message: String
        public var sqlState: String?
        /// The connection, password left out.
        public var context: String

        public var description: String {
            "PostgreSQL \(severity): \(message)" + (sqlState.map { " [SQLSTATE \($0)]" } ?? "") + " (\(context))"
        }
    }

    private static let handler = Mutex<(@Sendable (Notice) -> Void)?>(nil)
    private static let dropped = Atomic<Int>(0)

    /// Replaces where warnings go (nil: stderr, the default). Process-wide.
    public static func setWarningHandler(_ handler: (@Sendable (Notice) -> Void)?) {
        Self.handler.withLock { $0 = handler }
    }

    /// Notices dropped as chatter since the process started (for tests).
    public static var droppedCount: Int { dropped.load(ordering: .relaxed) }

    /// The severities dropped.
    static let chatter: Set<String> = ["DEBUG", "LOG", "INFO", "NOTICE"]

    static func deliver(_ notice: Notice) {
        if chatter.contains(notice.severity) {
            dropped.add(1, ordering: .relaxed)
            return
        }
        if let h = handler.withLock({ $0 }) {
            h(notice)
        } else {
            // write(2), not FileHandle.write: that traps when stderr cannot be written (a full
            // disk). A notice that cannot be written is dropped.
            let line = Array((notice.description + "\n").utf8)
            _ = line.withUnsafeBytes { Foundation.write(STDERR_FILENO, $0.baseAddress, $0.count) }
        }
    }

    /// The `void *` libpq gives the receiver: the connection's context, kept alive by the
    /// connection (which outlives its `PGconn *`).
    final class Sink: @unchecked Sendable {
        let context: String
        init(context: String) { self.context = context }

        func install(on conn: OpaquePointer) {
            PQsetNoticeReceiver(conn, PGNotices.receiver, Unmanaged.passUnretained(self).toOpaque())
        }
    }

    /// Called by libpq on the thread running the statement, with a result holding only the
    /// notice's fields.
    static let receiver: PQnoticeReceiver = { arg, result in
        guard let arg, let result else { return }
        let sink = Unmanaged<Sink>.fromOpaque(arg).takeUnretainedValue()
        func field(_ code: Character) -> String? {
            PQresultErrorField(result, Int32(code.asciiValue!)).map { String(cString: $0) }
        }
        // 'V' (not localized) from servers 9.6 on; 'S' (localized) otherwise.
        let severity = field("V") ?? field("S") ?? "WARNING"
        let message = PGConnection.oneLine(field("M") ?? "")
        PGNotices.deliver(Notice(severity: severity, message: message, sqlState: field("C"), context: sink.context))
    }
}
