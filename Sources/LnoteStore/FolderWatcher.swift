#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import Synchronization
import LnoteModel

/// Tells when files change in some directories: how an open document or notebook with
/// subscribers learns that another process appended to a log ([PKG-87]), without asking.
///
/// Linux inotify, read on a thread of its own that sleeps in `poll` between events (no CPU
/// while nothing happens). Where inotify is missing (no instance or no watch left), the
/// thread wakes every `pollInterval` and reports "anything may have changed" instead.
/// `onChange` receives the paths (`directory/name`) that changed, or nil when it cannot say
/// (polling, or the kernel's queue overflowed): the receiver then looks at everything. It
/// runs on the watcher's thread and must return quickly (start a task).
final class FolderWatcher: Sendable {
    private struct State {
        /// The write end of the thread's wake-up pipe (the thread owns and closes it).
        var wake: Int32?
        var toWatch: [String] = []
        var stopped = false
    }
    private let state = Mutex(State())
    private let io: Syscalls
    /// True once the watcher fell back to polling (for tests and reports).
    private let pollingFlag = Mutex(false)

    /// What changes in a directory, and the directory itself removed or moved (told as its
    /// own path).
    /// What changes a file or directory: a write (IN_MODIFY: appends, truncations), entries
    /// made, renamed or removed, the directory itself going. Not IN_CLOSE_WRITE: a process
    /// that opens a log for writing and closes it unchanged (a server reading it to answer a
    /// sync) changed nothing, and telling it as a change woke every watcher, and every long
    /// poll, once per log read.
    static let mask = UInt32(IN_MODIFY) | UInt32(IN_CREATE) | UInt32(IN_MOVED_TO) | UInt32(IN_MOVED_FROM)
        | UInt32(IN_DELETE) | UInt32(IN_DELETE_SELF) | UInt32(IN_MOVE_SELF)

    init(io: Syscalls, directories: [String], pollInterval: Duration, forcePolling: Bool = false,
         onChange: @escaping @Sendable (Set<String>?) -> Void) {
        self.io = io
        state.withLock { $0.toWatch = directories }
        let (s, a) = pollInterval.components
        let intervalMs = Int32(clamping: s * 1000 + a / 1_000_000_000_000_000)
        let thread = Thread { [self] in
            ThreadName.setCurrent("lnote.watch")
            guard let (readEnd, writeEnd) = try? io.pipe() else { return }
            let go = state.withLock { st -> Bool in
                st.wake = writeEnd.raw
                return !st.stopped
            }
            if go {
                self.loop(wakeRead: readEnd, intervalMs: max(1, intervalMs), forcePolling: forcePolling, onChange: onChange)
            }
            state.withLock { $0.wake = nil }
            try? writeEnd.close()
            try? readEnd.close()
        }
        thread.start()
    }

    /// True when inotify could not be used and the watcher polls.
    var isPolling: Bool { pollingFlag.withLock { $0 } }

    /// Watches one more directory (a document package that appeared). Directories asked
    /// for together are added in order, in one pass of the watcher's thread; one that does
    /// not exist (yet) is skipped.
    func watch(_ directory: String) {
        state.withLock { s in
            guard !s.stopped else { return }
            s.toWatch.append(directory)
            if let w = s.wake { Syscalls.poke(w) }
        }
    }

    /// Stops the thread (it closes its descriptors); `onChange` is not called afterwards
    /// (except, at most, by a call already running).
    func stop() {
        state.withLock { s in
            guard !s.stopped else { return }
            s.stopped = true
            if let w = s.wake { Syscalls.poke(w) }
        }
    }

    deinit { stop() }

    private func loop(wakeRead: FileDescriptor, intervalMs: Int32, forcePolling: Bool,
                      onChange: @Sendable (Set<String>?) -> Void) {
        let inotify = forcePolling ? nil : (try? io.inotifyInit()) ?? nil
        var polling = inotify == nil
        var directories: [Int32: String] = [:]
        defer { if let inotify { try? inotify.close() } }
        while true {
            let (stopped, add) = state.withLock { s -> (Bool, [String]) in
                defer { s.toWatch = [] }
                return (s.stopped, s.toWatch)
            }
            if stopped { return }
            if let inotify {
                for dir in add {
                    guard let wd = (try? io.inotifyAddWatch(inotify, dir, mask: FolderWatcher.mask)) ?? nil else {
                        // No watch left (or the directory is gone): look at everything, regularly.
                        if (try? io.stat(dir)) != nil { polling = true }
                        continue
                    }
                    directories[wd] = dir
                }
            }
            pollingFlag.withLock { $0 = polling }
            let fds = [wakeRead] + (inotify.map { [$0] } ?? [])
            guard let ready = try? io.poll(fds, timeoutMs: polling ? intervalMs : -1) else { return }
            if ready[0] { _ = try? io.readAvailable(wakeRead, max: 4096) }
            if state.withLock({ $0.stopped }) { return }
            var changed = Set<String>()
            var unknown = false
            if let inotify, ready.count > 1, ready[1] {
                while true {
                    guard let bytes = try? io.readAvailable(inotify, max: 64 << 10), !bytes.isEmpty else { break }
                    var at = 0
                    while at + 16 <= bytes.count {
                        func u32(_ o: Int) -> UInt32 {
                            UInt32(bytes[o]) | UInt32(bytes[o + 1]) << 8 | UInt32(bytes[o + 2]) << 16 | UInt32(bytes[o + 3]) << 24
                        }
                        let wd = Int32(bitPattern: u32(at)), mask = u32(at + 4), length = Int(u32(at + 12))
                        let nameBytes = bytes[(at + 16)..<min(bytes.count, at + 16 + length)].prefix { $0 != 0 }
                        at += 16 + length
                        if mask & UInt32(IN_Q_OVERFLOW) != 0 { unknown = true; continue }
                        if mask & UInt32(IN_IGNORED) != 0 { directories[wd] = nil; continue }
                        guard let dir = directories[wd] else { continue }
                        changed.insert(nameBytes.isEmpty ? dir : DurableFile.join(dir, String(decoding: nameBytes, as: UTF8.self)))
                    }
                }
            }
            if polling { unknown = true }
            if unknown {
                onChange(nil)
            } else if !changed.isEmpty {
                onChange(changed)
            }
        }
    }
}
