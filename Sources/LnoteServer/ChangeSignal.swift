import Foundation
import Synchronization
import LnoteModel
import LnoteStore
import LnoteSync

/// Tells a server that the notebook it serves may have gained operations, so that the long
/// polls it holds are answered at once ([SYNC-72]).
///
/// The signal only says "look again": the server recomputes each held answer and keeps
/// waiting when nothing the client lacks arrived. Spurious and repeated calls are harmless.
///
/// `lnote serve` uses `FolderLogSignal` (its folder's logs growing, in any process, through
/// inotify). `Notebook.changes` would not do: it tells document-level changes only, and an
/// element appended to a page is what a long poll waits for.
public protocol ChangeSignal: Sendable {
    /// Starts calling `changed` (from any thread) whenever the notebook may have gained
    /// operations. Called once.
    func start(_ changed: @escaping @Sendable () -> Void) throws
    /// Stops calling. Idempotent.
    func stop()
}

/// A notebook folder's logs growing (appends by this process or another, packages
/// created): `LogWatch` on the folder (inotify; where it is missing, a poll of the logs'
/// sizes and times every `pollInterval`).
public final class FolderLogSignal: ChangeSignal {
    public let folder: String
    public let pollInterval: Duration
    private let watch = Mutex<LogWatch?>(nil)

    public init(folder: String, pollInterval: Duration = .milliseconds(500)) {
        self.folder = folder
        self.pollInterval = pollInterval
    }

    /// "inotify", "polling every …", or "stopped": how changes are noticed now.
    public var mode: String { watch.withLock { $0?.mode ?? "stopped" } }

    /// - Throws: `notFound` when the folder does not exist.
    public func start(_ changed: @escaping @Sendable () -> Void) throws {
        let w = try LogWatch(folders: [folder], pollInterval: pollInterval, onChange: changed)
        watch.withLock { $0 = w }
    }

    public func stop() {
        watch.withLock { w in
            w?.close()
            w = nil
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
