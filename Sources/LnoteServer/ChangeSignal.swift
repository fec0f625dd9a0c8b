import Foundation
import Synchronization
import LnoteModel
import LnoteSync

/// Tells a server that the notebook it serves may have gained operations, so that the long
/// polls it holds are answered at once ([SYNC-72]).
///
/// The signal only says "look again": the server recomputes each held answer and keeps
/// waiting when nothing the client lacks arrived. Spurious and repeated calls are harmless.
///
/// `lnote serve` uses `FolderLogSignal` (its folder's logs growing, through inotify). When
/// the store's `Notebook.changes` (an `AsyncSequence` of change events, other processes'
/// appends included) is available, serving a notebook that way is one adapter: a type whose
/// `start` runs a task doing `for await _ in notebook.changes { changed() }` and whose
/// `stop` cancels it, passed as `PeerServer(notebook:token:configuration:changes:)`.
public protocol ChangeSignal: Sendable {
    /// Starts calling `changed` (from any thread) whenever the notebook may have gained
    /// operations. Called once.
    func start(_ changed: @escaping @Sendable () -> Void) throws
    /// Stops calling. Idempotent.
    func stop()
}

/// A notebook folder's logs growing (appends by this process or another, packages
/// created): inotify on the folder (`FolderWatch`), or, where inotify is missing, a poll of
/// the logs' sizes and times every `pollInterval`.
public final class FolderLogSignal: ChangeSignal {
    public let folder: String
    public let pollInterval: Duration
    private let running = Mutex<Running?>(nil)

    private enum Running {
        case inotify(FolderWatch)
        case polling(Task<Void, Never>)
    }

    public init(folder: String, pollInterval: Duration = .milliseconds(500)) {
        self.folder = folder
        self.pollInterval = pollInterval
    }

    /// "inotify", "polling every …", or "stopped": how changes are noticed now.
    public var mode: String {
        running.withLock { r in
            switch r {
            case .inotify: "inotify"
            case .polling: "polling every \(pollInterval)"
            case nil: "stopped"
            }
        }
    }

    public func start(_ changed: @escaping @Sendable () -> Void) throws {
        let how: Running
        if let watch = try? FolderWatch(folders: [folder], onChange: changed) {
            how = .inotify(watch)
        } else {
            let folder = folder, every = pollInterval
            how = .polling(Task.detached {
                var last = SyncWatcher.folderFingerprint(folder)
                while !Task.isCancelled {
                    try? await Task.sleep(for: every)
                    let now = SyncWatcher.folderFingerprint(folder)
                    if now != last {
                        last = now
                        changed()
                    }
                }
            })
        }
        running.withLock { $0 = how }
    }

    public func stop() {
        switch running.withLock({ r -> Running? in defer { r = nil }; return r }) {
        case .inotify(let w): w.close()
        case .polling(let t): t.cancel()
        case nil: break
        }
    }
}

/// Callbacks told which relay notebook changed (`RelayStore.observeChanges`).
final class ChangeObservers: Sendable {
    private let list = Mutex<(next: Int, callbacks: [Int: @Sendable (NotebookID) -> Void])>((0, [:]))

    func add(_ callback: @escaping @Sendable (NotebookID) -> Void) -> Int {
        list.withLock { l in
            l.next += 1
            l.callbacks[l.next] = callback
            return l.next
        }
    }

    func remove(_ token: Int) { _ = list.withLock { $0.callbacks.removeValue(forKey: token) } }

    /// Calls every callback, outside the lock.
    func notify(_ notebook: NotebookID) {
        for c in list.withLock({ Array($0.callbacks.values) }) { c(notebook) }
    }
}
