import Dispatch
import Foundation
import Synchronization

/// SIGINT and SIGTERM, trapped: servers and watchers stop cleanly on either. `trap()` is
/// called before anything starts, so a signal that comes early is not lost (nor kills the
/// process half-way); `wait()` returns the first signal that arrived.
final class Signals: Sendable {
    private let fired = Mutex<(signal: Int32?, waiter: CheckedContinuation<Int32, Never>?)>((nil, nil))
    nonisolated(unsafe) private static var sources: [any DispatchSourceSignal] = []

    static func trap() -> Signals {
        let s = Signals()
        let queue = DispatchQueue(label: "lnote.signals")
        queue.sync {
            for sig in [SIGINT, SIGTERM] {
                signal(sig, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: sig, queue: queue)
                source.setEventHandler { s.deliver(sig) }
                source.resume()
                sources.append(source)
            }
        }
        return s
    }

    private func deliver(_ sig: Int32) {
        let waiter = fired.withLock { f -> CheckedContinuation<Int32, Never>? in
            guard f.signal == nil else { return nil }
            f.signal = sig
            defer { f.waiter = nil }
            return f.waiter
        }
        waiter?.resume(returning: sig)
    }

    func wait() async -> Int32 {
        await withCheckedContinuation { c in
            let already = fired.withLock { f -> Int32? in
                if let s = f.signal { return s }
                f.waiter = c
                return nil
            }
            if let already { c.resume(returning: already) }
        }
    }
}
