import Foundation
import Synchronization
import LnoteModel

/// Keeps a notebook in step with a remote: syncs when local data changes and on an
/// interval, backs off while the remote is unreachable, and resumes when it returns.
///
/// The watcher does not know about folders: it is given a `sync` closure (one complete sync)
/// and a `fingerprint` closure (a value that changes when local data changes, polled).
/// An app can also call `notifyChanged()` after an edit.
public final class SyncWatcher: Sendable {
    public enum Event: Sendable {
        case synced(SyncReport)
        /// The sync failed; the next attempt is in `retryIn` (doubling up to the maximum).
        case failed(LnoteError, retryIn: Duration)
    }

    public let interval: Duration
    public let poll: Duration
    public let minBackoff: Duration
    public let maxBackoff: Duration
    private let fingerprint: @Sendable () -> Int
    private let sync: @Sendable () async throws -> SyncReport
    private let changed = Mutex(false)

    public init(interval: Duration = .seconds(30), poll: Duration = .milliseconds(500),
                minBackoff: Duration = .seconds(1), maxBackoff: Duration = .seconds(60),
                fingerprint: @escaping @Sendable () -> Int,
                sync: @escaping @Sendable () async throws -> SyncReport) {
        self.interval = interval
        self.poll = poll
        self.minBackoff = minBackoff
        self.maxBackoff = maxBackoff
        self.fingerprint = fingerprint
        self.sync = sync
    }

    /// Asks for a sync at the next poll (unless backing off).
    public func notifyChanged() { changed.withLock { $0 = true } }

    /// Runs until the surrounding task is cancelled (or `maxSyncs` syncs were attempted).
    public func run(maxSyncs: Int? = nil, events: @Sendable (Event) -> Void) async {
        let clock = ContinuousClock()
        var next = clock.now
        var backoff: Duration? = nil
        var last = fingerprint()
        var attempts = 0
        while !Task.isCancelled {
            let localChange = changed.withLock { $0 } || fingerprint() != last
            if clock.now >= next || (backoff == nil && localChange) {
                changed.withLock { $0 = false }
                attempts += 1
                // Taken before the sync: an edit made while it runs then shows as a change
                // at the next poll. (The sync's own writes, operations received, show too:
                // one more exchange, which finds nothing new, is the price of never missing
                // an edit.)
                let before = fingerprint()
                do {
                    let report = try await sync()
                    backoff = nil
                    last = before
                    next = clock.now + interval
                    events(.synced(report))
                } catch {
                    let e = error as? LnoteError ?? LnoteError(.network, "\(error)")
                    let wait = backoff.map { min($0 * 2, maxBackoff) } ?? minBackoff
                    backoff = wait
                    next = clock.now + wait
                    events(.failed(e, retryIn: wait))
                }
                if let maxSyncs, attempts >= maxSyncs { return }
            }
            try? await Task.sleep(for: poll)
        }
    }

    /// A fingerprint of a notebook folder's logs and metadata (names, sizes, modification
    /// times of every `.lnote` package's files): cheap to poll, changes on every edit.
    public static func folderFingerprint(_ path: String) -> Int {
        var h = Hasher()
        let fm = FileManager.default
        guard let names = try? fm.contentsOfDirectory(atPath: path) else { return 0 }
        for name in names.sorted() where name.hasSuffix(".lnote") {
            let pkg = path + "/" + name
            for sub in ["document.log", "document.json"] { hash(pkg + "/" + sub, &h) }
            if let pages = try? fm.contentsOfDirectory(atPath: pkg + "/pages") {
                for p in pages.sorted() where p.hasSuffix(".log") { hash(pkg + "/pages/" + p, &h) }
            }
            h.combine(name)
        }
        return h.finalize()
    }

    private static func hash(_ file: String, _ h: inout Hasher) {
        var st = stat()
        guard stat(file, &st) == 0 else { return }
        h.combine(file)
        h.combine(st.st_size)
        h.combine(st.st_mtim.tv_sec)
        h.combine(st.st_mtim.tv_nsec)
    }
}
