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
    }
    private let state = Mutex(State())

    /// Appends `s`; writes the buffer out when it is full or lines are not held. Written
    /// under the lock, so that lines from several threads come out in the order they were
    /// appended.
    func write(_ s: String) {
        state.withLock { st in
            st.bytes.append(contentsOf: s.utf8)
            if st.eachLine || st.bytes.count >= StandardOutput.capacity { Self.writeOut(&st.bytes) }
        }
    }

    /// Appends bytes that are already what is to be printed (lines `PointText` made).
    func write(bytes: [UInt8]) {
        state.withLock { st in
            st.bytes.append(contentsOf: bytes)
            if st.eachLine || st.bytes.count >= StandardOutput.capacity { Self.writeOut(&st.bytes) }
        }
    }

    /// Writes out what is held.
    func flush() {
        state.withLock { Self.writeOut(&$0.bytes) }
    }

    /// From now on each write goes out at once (long-running commands); what is held goes now.
    func flushEachLine() {
        state.withLock { $0.eachLine = true }
        flush()
    }

    private static func writeOut(_ bytes: inout [UInt8]) {
        guard !bytes.isEmpty else { return }
        FileHandle.standardOutput.write(Data(bytes))
        bytes.removeAll(keepingCapacity: true)
    }
}
