#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Synchronization
import LnoteModel

/// Tells when the operation logs of notebook folders change, through inotify read on a
/// thread of its own, so that a watcher sleeps between changes (no polling, no CPU).
///
/// Watched in each folder: the folder itself (packages created, renamed into place, moved
/// or removed; the folder removed or moved away), each `<UUID>.lnote/` package (its `document.log`, its `pages/` appearing)
/// and each `pages/` directory (the page logs). Any event on a file whose name ends in
/// `.log`, and any package appearing or going, calls `onChange` — on the watch's thread,
/// possibly several times for one write (an append, then a snapshot): callers coalesce.
/// The `.lnote/` metadata folder (remote states, quarantine, the lock) is not watched: a
/// sync writing its bookkeeping is no change of the notebook.
///
/// `init` throws where inotify is missing (another OS, `inotify_init1` failing, no watch
/// left: `fs.inotify.max_user_watches`); callers then poll
/// (`SyncWatcher.folderFingerprint`). All inotify system calls are in this file.
public final class FolderWatch: Sendable {
    private let reader: Reader

    /// Starts watching.
    /// - Parameters:
    ///   - folders: notebook folders (each must exist).
    ///   - onChange: called on the watch's thread after each batch of events that touched a log.
    /// - Throws: `.io` when inotify cannot be used (its errno in `underlying`), `.notFound`
    ///   for a folder that does not exist.
    public init(folders: [String], onChange: @escaping @Sendable () -> Void) throws {
        #if os(Linux)
        let fd = inotify_init1(Int32(IN_CLOEXEC))
        guard fd >= 0 else { throw Self.failure("inotify_init1", path: folders.first ?? "", errno: errno) }
        var pipeFDs: [Int32] = [-1, -1]
        guard pipe(&pipeFDs) == 0 else {
            let e = errno
            Glibc.close(fd)
            throw Self.failure("pipe", path: folders.first ?? "", errno: e)
        }
        for p in pipeFDs { _ = fcntl(p, F_SETFD, FD_CLOEXEC) }
        let reader = Reader(inotify: fd, wakeRead: pipeFDs[0], wakeWrite: pipeFDs[1], onChange: onChange)
        do {
            for folder in folders { try reader.addFolder(folder) }
        } catch {
            reader.closeDescriptors()
            throw error
        }
        self.reader = reader
        let thread = Thread { Thread.current.name = "lnote.folder-watch"; reader.loop() }
        thread.start()
        #else
        throw LnoteError(.io, "inotify is not available on this system", path: folders.first)
        #endif
    }

    deinit { close() }

    /// Stops the thread, which then closes the descriptors. Idempotent.
    public func close() { reader.stop() }

    static func failure(_ call: String, path: String, errno e: Int32) -> LnoteError {
        LnoteError(e == ENOENT ? .notFound : .io, "\(call) failed", path: path,
                   underlying: "errno \(e) (\(String(cString: strerror(e))))")
    }

    /// The descriptors, the watch table and the loop; the table is touched by the thread
    /// that created the watch, then by the loop only (after `thread.start()`).
    final class Reader: @unchecked Sendable {
        enum Kind { case folder, package, pages }
        let inotify: Int32
        let wakeRead: Int32
        let wakeWrite: Int32
        let onChange: @Sendable () -> Void
        private var watches: [Int32: (path: String, kind: Kind)] = [:]
        private let stopped = Atomic<Bool>(false)

        init(inotify: Int32, wakeRead: Int32, wakeWrite: Int32, onChange: @escaping @Sendable () -> Void) {
            self.inotify = inotify
            self.wakeRead = wakeRead
            self.wakeWrite = wakeWrite
            self.onChange = onChange
        }

        #if os(Linux)
        static let folderMask = UInt32(IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE_SELF | IN_MOVE_SELF
                                       | IN_ONLYDIR)
        static let packageMask = UInt32(IN_MODIFY | IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM | IN_ONLYDIR)

        func add(_ path: String, _ kind: Kind, required: Bool) throws {
            let wd = inotify_add_watch(inotify, path, kind == .folder ? Self.folderMask : Self.packageMask)
            guard wd >= 0 else {
                let e = errno
                // A package removed while it is being added is no failure; anything else is.
                if !required && (e == ENOENT || e == ENOTDIR) { return }
                throw FolderWatch.failure("inotify_add_watch", path: path, errno: e)
            }
            watches[wd] = (path, kind)
        }

        func addFolder(_ folder: String) throws {
            try add(folder, .folder, required: true)
            for name in (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? [] where Self.isPackage(name) {
                try addPackage(folder + "/" + name)
            }
        }

        func addPackage(_ package: String) throws {
            try add(package, .package, required: false)
            var st = stat()
            if stat(package + "/pages", &st) == 0 { try add(package + "/pages", .pages, required: false) }
        }

        static func isPackage(_ name: String) -> Bool {
            name.hasSuffix(".lnote") && name != ".lnote" && !name.hasPrefix(".")
        }

        /// Reads events until `stop()`; calls `onChange` once per read that touched a log.
        func loop() {
            defer { release() }
            var buffer = [UInt8](repeating: 0, count: 64 * 1024)
            var fds = [pollfd(fd: inotify, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
            while !stopped.load(ordering: .relaxed) {
                let r = poll(&fds, 2, -1)
                if r < 0 {
                    if errno == EINTR { continue }
                    return
                }
                if fds[1].revents != 0 { return }
                guard fds[0].revents != 0 else { continue }
                let n = buffer.withUnsafeMutableBytes { read(inotify, $0.baseAddress, $0.count) }
                if n < 0 {
                    if errno == EINTR || errno == EAGAIN { continue }
                    return
                }
                if handle(buffer, count: n) { onChange() }
            }
        }

        /// Parses one read's events (`struct inotify_event`: wd, mask, cookie, len, name);
        /// true when one of them touched a log or a package.
        func handle(_ buffer: [UInt8], count: Int) -> Bool {
            var changed = false
            var offset = 0
            let header = MemoryLayout<inotify_event>.size
            while offset + header <= count {
                let (wd, mask, length) = buffer.withUnsafeBytes { raw in
                    (raw.loadUnaligned(fromByteOffset: offset, as: Int32.self),
                     raw.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self),
                     Int(raw.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self)))
                }
                let nameBytes = buffer[(offset + header)..<min(count, offset + header + length)]
                let name = String(decoding: nameBytes.prefix { $0 != 0 }, as: UTF8.self)
                offset += header + length
                if mask & UInt32(IN_Q_OVERFLOW) != 0 {
                    // Events were lost: count it as a change, and watch what appeared meanwhile.
                    changed = true
                    for (_, w) in watches where w.kind == .folder { rescan(w.path) }
                    continue
                }
                if mask & UInt32(IN_IGNORED) != 0 {
                    watches[wd] = nil
                    continue
                }
                guard let w = watches[wd] else { continue }
                if mask & UInt32(IN_DELETE_SELF | IN_MOVE_SELF) != 0 {
                    // The folder itself went away: whoever watches it must find out.
                    if w.kind == .folder { changed = true }
                    continue
                }
                let isDirectory = mask & UInt32(IN_ISDIR) != 0
                let appeared = mask & UInt32(IN_CREATE | IN_MOVED_TO) != 0
                switch w.kind {
                case .folder:
                    guard Self.isPackage(name) else { continue }
                    if appeared && isDirectory { try? addPackage(w.path + "/" + name) }
                    changed = true
                case .package:
                    if name == "pages" && isDirectory && appeared {
                        try? add(w.path + "/pages", .pages, required: false)
                        changed = true
                    } else if name.hasSuffix(".log") {
                        changed = true
                    }
                case .pages:
                    if name.hasSuffix(".log") { changed = true }
                }
            }
            return changed
        }

        private func rescan(_ folder: String) {
            let known = Set(watches.values.map(\.path))
            for name in (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? [] where Self.isPackage(name) {
                let package = folder + "/" + name
                if !known.contains(package) { try? addPackage(package) }
                else if !known.contains(package + "/pages") {
                    var st = stat()
                    if stat(package + "/pages", &st) == 0 { try? add(package + "/pages", .pages, required: false) }
                }
            }
        }
        #endif

        func stop() {
            guard !stopped.exchange(true, ordering: .relaxed) else { return }
            var byte: UInt8 = 1
            _ = write(wakeWrite, &byte, 1)
            release()
        }

        /// Both the loop (when it ends) and `stop()` release; the second closes the
        /// descriptors, so neither writes to nor polls a descriptor the other closed.
        private let holders = Atomic<Int>(2)

        private func release() {
            if holders.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 { closeDescriptors() }
        }

        /// Closes the three descriptors (also by `init` when a watch could not be added).
        func closeDescriptors() {
            Glibc.close(inotify)
            Glibc.close(wakeRead)
            Glibc.close(wakeWrite)
        }
    }
}
