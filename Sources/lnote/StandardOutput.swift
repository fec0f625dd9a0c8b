import Foundation
import Synchronization

/// The CLI's standard output, buffered: one `write(2)` per 64 KiB rather than per line.
///
/// `lnote show --points` of a large page prints hundreds of thousands of lines; written one
/// `write(2)` each, the system calls were most of its time. Every line of every command goes
/// through the one buffer of `Console`, which is flushed when it is full, before anything is
/// written to standard error (so a terminal shows both in the order they were made), and when
/// the command returns or fails (`LnoteCLI.run`). A command that runs until a signal
/// (`serve`, `relay`, `watch`, `sync --watch`) calls `flushEachLine()` through
/// `Signals.trap()`: what it prints is read while it runs.
final class StandardOutput: Sendable {
    static let shared = StandardOutput()
    static let capacity = 64 * 1024

    private struct State {
        var bytes: [UInt8] = []
        var eachLine = false
        /// The first write that failed (its errno): later output is dropped, and the
        /// command ends with a failure that says so (`LnoteCLI.run`).
        var failure: Int32?
        /// The command stopped because of that failure (`lnote watch`), rather than ending
        /// with its work done or failing for another reason.
        var stoppedByFailure = false
    }
    private let state = Mutex(State())

    /// Appends `s`; writes the buffer out when it is full or lines are not held. Written
    /// under the lock, so that lines from several threads come out in the order they were
    /// appended.
    func write(_ s: String) {
        state.withLock { st in
            st.bytes.append(contentsOf: s.utf8)
            if st.eachLine || st.bytes.count >= StandardOutput.capacity { Self.writeOut(&st) }
        }
    }

    /// Appends bytes that are already what is to be printed (lines `PointText` made).
    func write(bytes: [UInt8]) {
        state.withLock { st in
            st.bytes.append(contentsOf: bytes)
            if st.eachLine || st.bytes.count >= StandardOutput.capacity { Self.writeOut(&st) }
        }
    }

    /// Writes out what is held.
    func flush() {
        state.withLock { Self.writeOut(&$0) }
    }

    /// The reason standard output could not be written (strerror), when a write failed:
    /// a full disk, an I/O error. (A closed pipe ends the process with SIGPIPE, as usual.)
    var failure: String? {
        state.withLock { $0.failure }.map { String(cString: strerror($0)) }
    }

    /// The command stops because its output could not be written (`lnote watch`).
    func noteStoppedByFailure() { state.withLock { $0.stoppedByFailure = true } }
    var stoppedByFailure: Bool { state.withLock { $0.stoppedByFailure } }

    /// From now on each write goes out at once (long-running commands); what is held goes now.
    func flushEachLine() {
        state.withLock { $0.eachLine = true }
        flush()
    }

    private static func writeOut(_ st: inout State) {
        guard !st.bytes.isEmpty else { return }
        defer { st.bytes.removeAll(keepingCapacity: true) }
        guard st.failure == nil else { return }
        st.failure = writeAll(st.bytes, to: STDOUT_FILENO)
    }

    /// Writes every byte to `fd` with write(2); the errno of a failure, else nil.
    /// (FileHandle.write(_: Data) traps on an error such as ENOSPC or EIO, which comes after
    /// a command whose work is done, an import's strokes stored, and only its output is lost.)
    static func writeAll(_ bytes: [UInt8], to fd: Int32) -> Int32? {
        bytes.withUnsafeBytes { b in
            var at = 0
            while at < b.count {
                let n = Foundation.write(fd, b.baseAddress! + at, b.count - at)
                if n > 0 { at += n; continue }
                if n < 0 && errno == EINTR { continue }
                if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                    // A descriptor another program made non-blocking (some terminals): wait
                    // until it takes more, as a blocking one would.
                    var p = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                    _ = poll(&p, 1, -1)
                    continue
                }
                return n < 0 ? errno : EIO
            }
            return nil
        }
    }
}
