#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Synchronization
import CLnoteSyscalls
import LnoteStore

/// SIGINT and SIGTERM, trapped: servers and watchers stop cleanly on either. `trap()`
/// installs a handler before it returns (a C handler that writes the signal's number to a
/// pipe), so a signal that comes at any moment after it is never lost nor kills the process
/// half-way; a thread of its own reads the pipe, and `wait()` returns the first signal.
/// (A Dispatch signal source registers asynchronously: a signal sent right after the
/// server printed its URL could fall in the gap and be ignored, and a test then waited for
/// an exit that never came.)
final class Signals: Sendable {
    private let fired = Mutex<(signal: Int32?, waiter: CheckedContinuation<Int32, Never>?)>((nil, nil))

    static func trap() -> Signals {
        // A command that waits for a signal runs for long: its lines go out as they are made.
        StandardOutput.shared.flushEachLine()
        let s = Signals()
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0, lnote_trap_signals(fds[1]) == 0 else {
            // Without a pipe or a handler the default action stays: the process ends on the signal.
            return s
        }
        let readEnd = fds[0]
        let reader = Thread {
            ThreadName.setCurrent("lnote.signals")
            var byte: UInt8 = 0
            while true {
                let n = read(readEnd, &byte, 1)
                if n == 1 { s.deliver(Int32(byte)) } else if n < 0 && errno == EINTR { continue } else { return }
            }
        }
        reader.start()
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

    /// Ends `wait()` as a signal would, with 0: the command stops for a reason of its own
    /// (its standard output can no longer be written).
    func interrupt() { deliver(0) }

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
