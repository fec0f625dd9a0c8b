import Foundation
import Synchronization
import LnoteModel

/// Tells when the operation logs of notebook folders change — appends by any process,
/// packages created, renamed into place or removed, a folder removed — so that a sync
/// watcher (`SyncWatcher`, `lnote sync --watch`) or a server answering long polls
/// (`lnote serve`) sleeps between changes.
///
/// Built on `FolderWatcher`: inotify on each folder, on each `<UUID>.lnote/` package in it and
/// its `pages/` (packages that appear are added as they come); where inotify is missing, a
/// poll every `pollInterval` that compares the logs' sizes and times (`fingerprint`), so
/// that `onChange` always means that something changed. The `.lnote/` metadata folder is not
/// watched: a sync writing its bookkeeping is no change of the notebook. `onChange` runs on
/// the watcher's thread, possibly several times for one write (an append, then a
/// snapshot): callers coalesce.
public final class LogWatch: Sendable {
    public let folders: [String]
    public let pollInterval: Duration
    private let io: Syscalls
    /// Set once, right after the watcher is made (its callback needs `self`).
    private let watcher = Mutex<FolderWatcher?>(nil)
    /// The last fingerprint of every folder, for polling and for events the kernel dropped;
    /// nil once an event was told (no fingerprint equals it).
    private let last = Mutex<Int?>(nil)
    private let onChange: @Sendable () -> Void

    /// Starts watching.
    /// - Parameters:
    ///   - folders: notebook folders (each must exist).
    ///   - pollInterval: how often to look where inotify is missing.
    ///   - forcePolling: poll even where inotify works (tests).
    ///   - onChange: called on the watcher's thread after each batch of changes to logs or
    ///     packages.
    /// - Throws: `notFound` for a folder that does not exist.
    public init(folders: [String], pollInterval: Duration = .milliseconds(500), forcePolling: Bool = false,
                onChange: @escaping @Sendable () -> Void) throws {
        let io = Syscalls.live
        for f in folders where try io.stat(f) == nil { throw LnoteError(.notFound, "no such folder", path: f) }
        self.folders = folders
        self.pollInterval = pollInterval
        self.io = io
        self.onChange = onChange
        last.withLock { $0 = Self.fingerprint(folders: folders) }
        var directories = folders
        for f in folders { directories += Self.packageDirectories(in: f, io: io) }
        let w = FolderWatcher(io: io, directories: directories, pollInterval: pollInterval, forcePolling: forcePolling) {
            [weak self] changed in self?.handle(changed)
        }
        watcher.withLock { $0 = w }
    }

    deinit { close() }

    /// "inotify" or "polling every …": how changes are noticed now.
    public var mode: String {
        watcher.withLock { $0?.isPolling == false ? "inotify" : "polling every \(pollInterval)" }
    }

    /// Stops watching; `onChange` is not called afterwards. Idempotent.
    public func close() {
        watcher.withLock { w in
            w?.stop()
            w = nil
        }
    }

    private func handle(_ changed: Set<String>?) {
        guard let changed else {
            // Polling, or events the kernel dropped: compare, and watch what appeared.
            let now = Self.fingerprint(folders: folders)
            let moved = last.withLock { l in defer { l = now }; return l != now }
            if moved {
                for f in folders { for d in Self.packageDirectories(in: f, io: io) { watch(d) } }
                onChange()
            }
            return
        }
        var fire = false
        for path in changed {
            let (dir, name) = DurableFile.split(path)
            if folders.contains(path) {
                fire = true  // the folder itself went (or came back)
            } else if folders.contains(dir) {
                guard PackagePaths.documentID(fromName: name) != nil else { continue }
                if let st = try? io.stat(path), st.isDirectory {
                    // Both, in this order, in one batch: the package's watch is in place
                    // before `pages/` is tried, so a `pages/` made in between is either found
                    // then or told by the package's watch.
                    watch(path)
                    watch(path + "/pages")
                }
                fire = true
            } else if name == "pages" {
                watch(path)
                fire = true
            } else if name.hasSuffix(".log") && !DurableFile.isTemporaryName(name) {
                fire = true
            }
        }
        if fire {
            // The fingerprint is only compared by polls and after dropped events: leave it
            // stale (the next such comparison then tells a change once, which callers
            // coalesce) rather than rescan the whole folder on every event.
            last.withLock { $0 = nil }
            onChange()
        }
    }

    private func watch(_ directory: String) {
        watcher.withLock { $0?.watch(directory) }
    }

    /// Each package of a folder and its `pages/`.
    static func packageDirectories(in folder: String, io: Syscalls) -> [String] {
        var out: [String] = []
        for name in ((try? io.listDirectory(folder)) ?? []).sorted() where PackagePaths.documentID(fromName: name) != nil {
            let package = DurableFile.join(folder, name)
            out.append(package)
            if (try? io.stat(package + "/pages")) != nil { out.append(package + "/pages") }
        }
        return out
    }

    /// A hash of what the logs of notebook folders are now: each package's name, and the
    /// size and modification time of its `document.log`, `document.json` and page logs.
    /// Equal fingerprints: nothing was appended (a poll's test where inotify is missing).
    public static func fingerprint(folders: [String]) -> Int {
        let io = Syscalls.live
        var h = Hasher()
        for folder in folders {
            h.combine(folder)
            for package in packageDirectories(in: folder, io: io) {
                h.combine(package)
                var files = [package + "/document.log", package + "/document.json"]
                if package.hasSuffix("/pages") {
                    files = ((try? io.listDirectory(package)) ?? []).sorted()
                        .filter { $0.hasSuffix(".log") && !DurableFile.isTemporaryName($0) }
                        .map { DurableFile.join(package, $0) }
                }
                for f in files {
                    guard let st = try? io.stat(f) else { continue }
                    h.combine(f)
                    h.combine(st.size)
                    h.combine(st.modifiedSeconds)
                    h.combine(st.modifiedNanoseconds)
                }
            }
        }
        return h.finalize()
    }
}
