#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CLnoteSyscalls
import Foundation
import LnoteModel
import Synchronization

/// The one place where LnoteStore talks to the kernel.
///
/// Every call retries `EINTR`, treats `EBADF` as a programming error (assertion in debug,
/// `LnoteError(.io)` in release), loops on short reads and writes, and turns failures into
/// `LnoteError(.io, …, path:, underlying: "errno 28 (No space left on device)")`.
///
/// Tests drive it to fail through a `FaultPlan` (ENOSPC, EIO, short writes, a simulated
/// crash after N bytes or at the Nth call) and observe it through a `SyscallRecorder`
/// (which files were opened, read, written). Each component of the store receives the
/// `Syscalls` value it must use, so concurrent tests never share a plan.
final class Syscalls: Sendable {
    /// The plain seam: no faults, no recording, real syncs.
    static let live = Syscalls()

    let faults: FaultPlan?
    let recorder: SyscallRecorder?
    /// When false, `fsync`/`fdatasync` are recorded but not performed: ONLY for tests that
    /// check logic over thousands of files and never test durability (the kernel's page
    /// cache still makes every write visible to later reads in the same machine).
    let performsSync: Bool
    private let sequence = Mutex(0)

    init(faults: FaultPlan? = nil, recorder: SyscallRecorder? = nil, performsSync: Bool = true) {
        self.faults = faults
        self.recorder = recorder
        self.performsSync = performsSync
    }

    // MARK: Events and faults

    /// Records the call and asks the fault plan what to do with it. Throws when the plan
    /// says to fail, or when a simulated crash already happened.
    /// `ignoring`: errnos the call treats as success; an injected failure with one of them
    /// is returned, as the real failure would be, for the call to skip itself.
    private func enter(_ kind: SyscallKind, _ path: String, bytes: Int = 0, ignoring: [Int32] = [],
                       forWriting: Bool = false) throws -> Fault? {
        if faults == nil && recorder == nil { return nil }
        let seq = sequence.withLock { s -> Int in
            defer { s += 1 }
            return s
        }
        let event = SyscallEvent(kind: kind, path: path, byteCount: bytes, sequence: seq, forWriting: forWriting)
        recorder?.record(event)
        guard let faults else { return nil }
        if faults.hasCrashed {
            throw LnoteError(.io, "\(kind.rawValue) after a simulated crash", path: path, underlying: "simulated crash")
        }
        guard let fault = faults.decide(event) else { return nil }
        switch fault {
        case .fail(let e):
            if e == EINTR || ignoring.contains(e) { return fault }  // handled by the caller
            throw Syscalls.error(kind.rawValue, path: path, errno: e)
        case .crash:
            if kind == .write { return fault }  // writes some bytes first
            faults.markCrashed()
            throw LnoteError(.io, "simulated crash before \(kind.rawValue)", path: path, underlying: "simulated crash")
        case .short:
            return kind == .write ? fault : nil
        }
    }

    static func error(_ what: String, path: String?, errno e: Int32,
                      file: StaticString = #fileID, line: UInt = #line) -> LnoteError {
        LnoteError(.io, "\(what) failed", path: path, underlying: describe(errno: e), file: file, line: line)
    }

    /// `errno 28 (No space left on device)`
    static func describe(errno e: Int32) -> String {
        "errno \(e) (\(String(cString: strerror(e))))"
    }

    /// Runs `body` until it does not fail with EINTR. `body` returns -1 and sets errno on failure.
    /// A failure whose errno is in `ignoring` is not an error: -1 is returned.
    private func retrying<T: BinaryInteger>(_ what: String, _ path: String, injected: Fault? = nil,
                                            ignoring: [Int32] = [], _ body: () -> T) throws -> T {
        var injectedEINTR: Bool
        if case .fail(let e)? = injected, e == EINTR { injectedEINTR = true } else { injectedEINTR = false }
        while true {
            if injectedEINTR {
                injectedEINTR = false
                continue  // behaves as if the call was interrupted once
            }
            let r = body()
            if r != -1 { return r }
            let e = errno
            if e == EINTR { continue }
            if ignoring.contains(e) { return r }
            if e == EBADF {
                assertionFailure("EBADF from \(what) on \(path): a file descriptor was used after close")
            }
            throw Syscalls.error(what, path: path, errno: e)
        }
    }

    // MARK: Files

    /// `open(2)` of a file inside a notebook ([PKG-22]): `O_CLOEXEC`, `O_NOFOLLOW` and
    /// `O_NONBLOCK` added, and only a regular file accepted (a directory with `O_DIRECTORY`).
    ///
    /// A symlink is never followed: whatever it points to (a private file elsewhere) is
    /// neither read nor copied into the notebook. `O_NONBLOCK` keeps a FIFO from blocking
    /// the open (it has no effect on a regular file); the descriptor's type is then checked
    /// with `fstat` (not a recorded call), so a FIFO, socket or device is closed again
    /// unread. Each is refused with `corrupt` "not a regular file (symlink)" naming the path.
    ///
    /// - Parameter followingSymlinks: only for files outside any notebook that the system
    ///   owns (`/etc/machine-id`): the final symlink is followed; the type is still checked.
    func open(_ path: String, _ flags: Int32, mode: mode_t = 0o644, followingSymlinks: Bool = false) throws -> FileDescriptor {
        let f = try enter(.open, path, forWriting: flags & (O_WRONLY | O_RDWR | O_CREAT | O_TRUNC) != 0)
        let wantsDirectory = flags & O_DIRECTORY != 0
        let extra = O_CLOEXEC | O_NONBLOCK | (followingSymlinks ? 0 : O_NOFOLLOW)
        let fd: Int32
        do {
            fd = try retrying("open", path, injected: f) { Glibc.open(path, flags | extra, mode) }
        } catch let e as LnoteError {
            // ELOOP: a final symlink (O_NOFOLLOW); ENXIO: a FIFO without a reader opened for
            // writing, or a socket; EISDIR, ENOTDIR, EEXIST (O_EXCL over a dangling link):
            // the name holds something other than what was asked for.
            if let e2 = e.errnoCode, [ELOOP, ENXIO, EISDIR, ENOTDIR, EEXIST, EOPNOTSUPP].contains(e2),
               let kind = fileType(atPath: path), kind != (wantsDirectory ? "directory" : "regular file") {
                throw Syscalls.notRegular(path, kind: kind, wantsDirectory: wantsDirectory)
            }
            throw e
        }
        var st = StatBuffer()
        var size: Int? = nil
        if Glibc.fstat(fd, &st) == 0 {
            let kind = Syscalls.typeName(st.st_mode)
            if kind != (wantsDirectory ? "directory" : "regular file") {
                _ = Glibc.close(fd)
                throw Syscalls.notRegular(path, kind: kind, wantsDirectory: wantsDirectory)
            }
            size = max(0, Int(st.st_size))
        }
        let d = FileDescriptor(raw: fd, path: path, io: self)
        d.sizeWhenOpened = size
        return d
    }

    /// Opens a directory read-only (for `fsync` and `flock`), never through a symlink.
    func openDirectory(_ path: String) throws -> FileDescriptor {
        try open(path, O_RDONLY | O_DIRECTORY)
    }

    /// `corrupt`: "not a regular file (symlink)" / "not a directory (FIFO)" ([PKG-22]).
    static func notRegular(_ path: String, kind: String, wantsDirectory: Bool = false,
                           file: StaticString = #fileID, line: UInt = #line) -> LnoteError {
        LnoteError(.corrupt, "not a \(wantsDirectory ? "directory" : "regular file") (\(kind))", path: path,
                   file: file, line: line)
    }

    /// What `lstat` says the name is (a final symlink is not followed): "regular file",
    /// "directory", "symlink", "FIFO", "socket", "character device", "block device"; nil
    /// when it does not exist or cannot be examined. Not a recorded call.
    func fileType(atPath path: String) -> String? {
        var st = StatBuffer()
        guard sysLstat(path, &st) == 0 else { return nil }
        return Syscalls.typeName(st.st_mode)
    }

    static func typeName(_ mode: mode_t) -> String {
        switch mode & S_IFMT {
        case S_IFREG: "regular file"
        case S_IFDIR: "directory"
        case S_IFLNK: "symlink"
        case S_IFIFO: "FIFO"
        case S_IFSOCK: "socket"
        case S_IFCHR: "character device"
        case S_IFBLK: "block device"
        default: "unknown file type"
        }
    }

    /// [PKG-104] The most bytes one read takes from a file (`readToEnd`, `pread`): 2 GiB. A
    /// notebook's files are far smaller; a larger one (a sparse file from a hostile folder or
    /// backup claiming a terabyte) is refused with `limitExceeded` naming it, before anything
    /// is allocated for it, instead of exhausting memory.
    static let maxReadBytes = 1 << 31

    /// Reads from the current position to end of file.
    /// - Throws: `limitExceeded` for a file of more than `limit` bytes ([PKG-104]).
    func readToEnd(_ fd: FileDescriptor, limit: Int = Syscalls.maxReadBytes) throws -> [UInt8] {
        // The file's size, as a hint only (an fstat that fails, or a file that grows, just
        // means more reads): the bytes go straight into the result instead of through a
        // chunk buffer and repeated appends. Not a recorded call: it cannot change the read.
        // The size the open saw, when this read is the descriptor's first (one fstat fewer
        // per file read whole, as a page open reads its snapshot).
        var st = StatBuffer()
        let hint = fd.takeSizeWhenOpened() ?? (Glibc.fstat(fd.raw, &st) == 0 ? max(0, Int(st.st_size)) : 0)
        guard hint <= limit else { throw Syscalls.tooLarge(fd.path, claimed: UInt64(hint), limit: limit) }
        var atEnd = false
        // One byte more than the hint, so that a file of exactly that size ends in one pass.
        var out = try [UInt8](unsafeUninitializedCapacity: hint + 1) { buffer, initialized in
            initialized = 0
            while initialized < buffer.count {
                let want = buffer.count - initialized
                _ = try enter(.read, fd.path, bytes: want)
                let n = try retrying("read", fd.path) {
                    Glibc.read(fd.raw, buffer.baseAddress! + initialized, want)
                }
                if n == 0 {
                    atEnd = true
                    return
                }
                initialized += n
            }
        }
        if atEnd { return out }
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            _ = try enter(.read, fd.path, bytes: chunk.count)
            let n = try retrying("read", fd.path) {
                chunk.withUnsafeMutableBytes { Glibc.read(fd.raw, $0.baseAddress, $0.count) }
            }
            if n == 0 { return out }
            guard out.count + n <= limit else { throw Syscalls.tooLarge(fd.path, claimed: nil, limit: limit) }
            out.append(contentsOf: chunk[0..<n])
        }
    }

    static func tooLarge(_ path: String?, claimed: UInt64?, limit: Int) -> LnoteError {
        LnoteError(.limitExceeded, "a file of " + (claimed.map { "\($0) bytes" } ?? "more")
                       + ", over the \(limit) bytes lnote reads at once: not a file this notebook wrote", path: path)
    }

    /// Reads up to `count` bytes at `offset` (fewer only at end of file).
    /// - Throws: `limitExceeded` for a `count` over `maxReadBytes` ([PKG-104]): callers size
    ///   reads from a file's size, which a hostile file sets.
    func pread(_ fd: FileDescriptor, count: Int, at offset: UInt64) throws -> [UInt8] {
        guard count > 0 else { return [] }
        guard count <= Syscalls.maxReadBytes else {
            throw Syscalls.tooLarge(fd.path, claimed: UInt64(count), limit: Syscalls.maxReadBytes)
        }
        var out = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            _ = try enter(.read, fd.path, bytes: count - done)
            let n = try retrying("pread", fd.path) {
                out.withUnsafeMutableBytes { raw in
                    Glibc.pread(fd.raw, raw.baseAddress! + done, count - done, off_t(offset) + off_t(done))
                }
            }
            if n == 0 { break }
            done += n
        }
        out.removeLast(count - done)
        return out
    }

    /// Writes all of `bytes` at the current position, looping on short writes.
    func write(_ fd: FileDescriptor, _ bytes: [UInt8]) throws {
        try writeLoop(fd, bytes, at: nil)
    }

    /// Writes all of `bytes` at `offset` (`pwrite(2)`), looping on short writes.
    func pwrite(_ fd: FileDescriptor, _ bytes: [UInt8], at offset: UInt64) throws {
        try writeLoop(fd, bytes, at: offset)
    }

    private func writeLoop(_ fd: FileDescriptor, _ bytes: [UInt8], at offset: UInt64?) throws {
        var done = 0
        while done < bytes.count {
            let fault = try enter(.write, fd.path, bytes: bytes.count - done)
            var want = bytes.count - done
            var crashAfter = false
            switch fault {
            case .short(let n)?: want = max(0, min(want, n))
            case .crash(let n)?:
                want = max(0, min(want, n))
                crashAfter = true
            default: break
            }
            var n = 0
            if want > 0 {
                n = try retrying("write", fd.path, injected: fault) {
                    bytes.withUnsafeBytes { raw in
                        if let offset {
                            Glibc.pwrite(fd.raw, raw.baseAddress! + done, want, off_t(offset) + off_t(done))
                        } else {
                            Glibc.write(fd.raw, raw.baseAddress! + done, want)
                        }
                    }
                }
            }
            done += n
            if crashAfter {
                faults?.markCrashed()
                throw LnoteError(.io, "simulated crash after \(done) of \(bytes.count) bytes", path: fd.path,
                                 underlying: "simulated crash")
            }
            if n == 0 && want > 0 {
                // write(2) returning 0 for a non-empty buffer: treat like ENOSPC rather than spin.
                throw Syscalls.error("write", path: fd.path, errno: ENOSPC)
            }
        }
    }

    func fsync(_ fd: FileDescriptor) throws {
        let f = try enter(.fsync, fd.path)
        guard performsSync else { return }
        SyncCallCount.add()
        _ = try retrying("fsync", fd.path, injected: f) { Glibc.fsync(fd.raw) }
    }

    func fdatasync(_ fd: FileDescriptor) throws {
        let f = try enter(.fdatasync, fd.path)
        guard performsSync else { return }
        SyncCallCount.add()
        #if os(Linux)
        _ = try retrying("fdatasync", fd.path, injected: f) { Glibc.fdatasync(fd.raw) }
        #else
        _ = try retrying("fsync", fd.path, injected: f) { Glibc.fsync(fd.raw) }
        #endif
    }

    /// `syncfs(2)`: every file and directory of the file system holding `fd` made durable, as
    /// if each were `fsync`ed (Linux; writeback errors are reported since 5.8). Recorded and
    /// faulted as an `fsync` of `fd`'s path. Returns false where the system has no such call:
    /// the caller then syncs each file.
    func syncFileSystem(_ fd: FileDescriptor) throws -> Bool {
        let f = try enter(.fsync, fd.path)
        guard performsSync else { return true }
        SyncCallCount.add()
        let r = try retrying("syncfs", fd.path, injected: f, ignoring: [ENOSYS]) { lnote_sync_file_system(fd.raw) }
        return r != -1
    }

    /// Starts writing `count` bytes at `offset` back to the device without waiting (Linux
    /// `sync_file_range(SYNC_FILE_RANGE_WRITE)`; nothing elsewhere), so that a later
    /// `fdatasync` has less left to write. Makes nothing durable. A file system or kernel
    /// that does not take the hint (`ENOSYS`, `EINVAL`, `EOPNOTSUPP`, `ESPIPE`) is not an
    /// error; any other failure throws: the data it was writing may be what failed.
    func startWriteback(_ fd: FileDescriptor, offset: UInt64, count: Int) throws {
        let ignored: [Int32] = [ENOSYS, EINVAL, EOPNOTSUPP, ESPIPE]
        let f = try enter(.startWriteback, fd.path, bytes: count, ignoring: ignored)
        if case .fail(let e)? = f, ignored.contains(e) { return }  // as the kernel's own refusal
        guard performsSync, count > 0 else { return }
        _ = try retrying("sync_file_range", fd.path, injected: f, ignoring: ignored) {
            lnote_start_writeback(fd.raw, Int64(clamping: offset), Int64(count))
        }
    }

    func ftruncate(_ fd: FileDescriptor, to length: UInt64) throws {
        let f = try enter(.ftruncate, fd.path, bytes: Int(clamping: length))
        _ = try retrying("ftruncate", fd.path, injected: f) { Glibc.ftruncate(fd.raw, off_t(length)) }
    }

    func fstat(_ fd: FileDescriptor) throws -> FileStat {
        let f = try enter(.stat, fd.path)
        var st = StatBuffer()
        _ = try retrying("fstat", fd.path, injected: f) { Glibc.fstat(fd.raw, &st) }
        return FileStat(st)
    }

    /// `stat(2)`; nil when the path does not exist.
    func stat(_ path: String) throws -> FileStat? {
        let f = try enter(.stat, path)
        var st = StatBuffer()
        // An absent file is the usual answer (a page's missing-operations file): told by its
        // errno, without building an error first.
        // The name itself first (lstat): an absent name is then told in one call. Only a
        // symlink is followed, by a stat, as `stat(2)` would.
        var failure: Int32 = 0, dangling = false
        let r = try retrying("stat", path, injected: f, ignoring: [ENOENT, ENOTDIR]) { () -> Int32 in
            var r = sysLstat(path, &st)
            dangling = false
            if r == 0 && st.st_mode & S_IFMT == S_IFLNK {
                r = sysStat(path, &st)
                dangling = r == -1 && (errno == ENOENT || errno == ENOTDIR)
            }
            failure = r == -1 ? errno : 0
            return r
        }
        if r == -1 {
            guard failure == ENOENT || failure == ENOTDIR else { throw Syscalls.error("stat", path: path, errno: failure) }
            // A dangling symlink is not an absent file: nothing may be created through it,
            // nor may it be taken for a missing log and replaced quietly ([PKG-22]).
            if dangling { throw Syscalls.notRegular(path, kind: "symlink") }
            return nil
        }
        return FileStat(st)
    }

    /// Takes an exclusive `flock` on `fd`, waiting at most `timeout` for another open file
    /// description to release it ([PKG-81]). Returns false when the wait timed out.
    ///
    /// The wait blocks in the kernel (so the lock goes to a waiter as soon as it is free,
    /// instead of whoever polls first), on a helper thread of its own: `flock` cannot time
    /// out, so the caller waits for that thread with a deadline. On timeout the helper thread
    /// keeps `fd` (it is detached from its owner: the caller must not use it any more) and
    /// closes it when its `flock` returns, which releases the lock if it got it then. The
    /// calling thread is a store thread (never one of Swift's cooperative threads).
    func lock(_ fd: FileDescriptor, timeout: Duration) throws -> Bool {
        if try tryLock(fd) { return true }
        let wait = LockWait()
        let raw = fd.raw
        let thread = Thread {
            ThreadName.setCurrent("lnote.flockwait")
            var r: Int32
            repeat { r = sysFlock(raw, LOCK_EX) } while r == -1 && errno == EINTR
            let e = r == 0 ? 0 : errno
            if wait.finish(errno: e) {
                // Abandoned: the caller timed out and gave this thread the descriptor.
                _ = Glibc.close(raw)
            }
        }
        thread.start()
        switch wait.wait(timeout: timeout) {
        case .done(0):
            return true
        case .done(let e):
            if e == EBADF { assertionFailure("EBADF from flock on \(fd.path)") }
            throw Syscalls.error("flock", path: fd.path, errno: e)
        case .abandoned:
            fd.detach()
            return false
        }
    }

    /// Releases a lock taken on `fd` (closing the descriptor also does).
    func unlock(_ fd: FileDescriptor) throws {
        _ = try enter(.flock, fd.path)
        _ = try retrying("flock", fd.path) { sysFlock(fd.raw, LOCK_UN) }
    }

    /// Takes an exclusive, non-blocking `flock` on `fd`. Returns false when another open
    /// file description holds it.
    func tryLock(_ fd: FileDescriptor) throws -> Bool {
        let f = try enter(.flock, fd.path)
        while true {
            if case .fail(let e)? = f, e != EINTR { break }
            if sysFlock(fd.raw, LOCK_EX | LOCK_NB) == 0 { return true }
            let e = errno
            if e == EINTR { continue }
            if e == EWOULDBLOCK { return false }
            if e == EBADF { assertionFailure("EBADF from flock on \(fd.path)") }
            throw Syscalls.error("flock", path: fd.path, errno: e)
        }
        return false
    }

    // MARK: Watching ([PKG-87]: inotify, on a thread of its own)

    /// `inotify_init1(IN_NONBLOCK | IN_CLOEXEC)`; nil when the kernel offers no inotify
    /// (`ENOSYS`) or this user has no instance left (`EMFILE`): the caller polls instead.
    func inotifyInit() throws -> FileDescriptor? {
        _ = try enter(.watch, "inotify")
        let fd = Glibc.inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        if fd >= 0 { return FileDescriptor(raw: fd, path: "inotify", io: self) }
        let e = errno
        if e == ENOSYS || e == EMFILE || e == ENFILE || e == ENOMEM || e == EINVAL { return nil }
        throw Syscalls.error("inotify_init1", path: nil, errno: e)
    }

    /// `inotify_add_watch`; nil when the watch cannot be added because of a limit
    /// (`ENOSPC`: max_user_watches) or the directory vanished (`ENOENT`).
    func inotifyAddWatch(_ fd: FileDescriptor, _ path: String, mask: UInt32) throws -> Int32? {
        _ = try enter(.watch, path)
        let wd = Glibc.inotify_add_watch(fd.raw, path, mask)
        if wd >= 0 { return wd }
        let e = errno
        if e == ENOSPC || e == ENOENT || e == ENOTDIR { return nil }
        throw Syscalls.error("inotify_add_watch", path: path, errno: e)
    }

    /// A pipe whose read end a `poll` watches, to wake a watcher thread.
    func pipe() throws -> (read: FileDescriptor, write: FileDescriptor) {
        var fds: [Int32] = [0, 0]
        _ = try retrying("pipe", "pipe") { Glibc.pipe(&fds) }
        for fd in fds {
            _ = Glibc.fcntl(fd, F_SETFD, FD_CLOEXEC)
            _ = Glibc.fcntl(fd, F_SETFL, O_NONBLOCK)
        }
        return (FileDescriptor(raw: fds[0], path: "pipe", io: self), FileDescriptor(raw: fds[1], path: "pipe", io: self))
    }

    /// Waits until one of `fds` is readable or `timeoutMs` pass (-1: forever). Returns, for
    /// each, whether it is readable (all false on timeout). Retries EINTR.
    func poll(_ fds: [FileDescriptor], timeoutMs: Int32) throws -> [Bool] {
        var pfds = fds.map { pollfd(fd: $0.raw, events: Int16(POLLIN), revents: 0) }
        _ = try retrying("poll", fds.first?.path ?? "poll") { Glibc.poll(&pfds, nfds_t(pfds.count), timeoutMs) }
        return pfds.map { $0.revents != 0 }
    }

    /// What a non-blocking descriptor holds now, up to `max` bytes ([] when nothing: EAGAIN).
    func readAvailable(_ fd: FileDescriptor, max: Int) throws -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: max)
        let n = try retrying("read", fd.path, ignoring: [EAGAIN]) {
            buffer.withUnsafeMutableBytes { Glibc.read(fd.raw, $0.baseAddress, $0.count) }
        }
        guard n > 0 else { return [] }
        buffer.removeLast(max - n)
        return buffer
    }

    /// Writes one byte to a non-blocking descriptor (waking a pipe's reader); a full pipe is
    /// not an error (the reader has a wake-up pending already).
    static func poke(_ fd: Int32) {
        var b: UInt8 = 1
        _ = Glibc.write(fd, &b, 1)
    }

    // MARK: Names

    func rename(_ from: String, _ to: String) throws {
        let f = try enter(.rename, to)
        _ = try retrying("rename \(from)", to, injected: f) { Glibc.rename(from, to) }
    }

    /// Removes a file; a missing file is not an error when `missingOK`.
    func unlink(_ path: String, missingOK: Bool = false) throws {
        let f = try enter(.unlink, path)
        do {
            _ = try retrying("unlink", path, injected: f) { Glibc.unlink(path) }
        } catch let e as LnoteError where missingOK && e.underlying?.hasPrefix("errno \(ENOENT) ") == true {
            return
        }
    }

    /// Removes the entry `name` of the directory `dir` is open on, when it is a regular file:
    /// `fstatat` without following a symlink, then `unlinkat` relative to `dir`, so nothing
    /// outside `dir` and no directory is removed. False when it is missing or not a regular
    /// file. `path` (the entry's path) names it in events and errors.
    func unlinkRegularFile(_ name: String, in dir: FileDescriptor, path: String) throws -> Bool {
        let s = try enter(.stat, path, ignoring: [ENOENT])
        if case .fail(let e)? = s, e == ENOENT { return false }
        var st = StatBuffer()
        guard try retrying("fstatat", path, injected: s, ignoring: [ENOENT], { fstatat(dir.raw, name, &st, AT_SYMLINK_NOFOLLOW) }) == 0,
              st.st_mode & S_IFMT == S_IFREG else { return false }
        let u = try enter(.unlink, path, ignoring: [ENOENT])
        if case .fail(let e)? = u, e == ENOENT { return false }
        return try retrying("unlinkat", path, injected: u, ignoring: [ENOENT]) { unlinkat(dir.raw, name, 0) } == 0
    }

    /// Creates a directory; an existing directory is not an error when `existingOK`.
    func mkdir(_ path: String, mode: mode_t = 0o755, existingOK: Bool = false) throws {
        let f = try enter(.mkdir, path)
        do {
            _ = try retrying("mkdir", path, injected: f) { Glibc.mkdir(path, mode) }
        } catch let e as LnoteError where existingOK && e.underlying?.hasPrefix("errno \(EEXIST) ") == true {
            guard let st = try stat(path), st.isDirectory else { throw e }
        }
    }

    func rmdir(_ path: String) throws {
        let f = try enter(.rmdir, path)
        _ = try retrying("rmdir", path, injected: f) { Glibc.rmdir(path) }
    }

    /// The names in a directory (without `.` and `..`), sorted bytewise.
    func listDirectory(_ path: String) throws -> [String] {
        let f = try enter(.opendir, path)
        if case .fail(let e)? = f, e != EINTR { throw Syscalls.error("opendir", path: path, errno: e) }
        // O_NOFOLLOW|O_DIRECTORY, then fdopendir: a symlink is never listed through ([PKG-22]).
        var dir: OpaquePointer?
        while true {
            let fd = Glibc.open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
            if fd >= 0 {
                dir = Glibc.fdopendir(fd)
                if dir != nil { break }
                let e = errno
                _ = Glibc.close(fd)
                throw Syscalls.error("fdopendir", path: path, errno: e)
            }
            let e = errno
            if e == EINTR { continue }
            if e == ELOOP || e == ENOTDIR, let kind = fileType(atPath: path), kind != "directory" {
                throw Syscalls.notRegular(path, kind: kind, wantsDirectory: true)
            }
            throw Syscalls.error("opendir", path: path, errno: e)
        }
        defer { Glibc.closedir(dir!) }
        var names: [String] = []
        while true {
            errno = 0
            guard let entry = Glibc.readdir(dir!) else {
                let e = errno
                if e != 0 { throw Syscalls.error("readdir", path: path, errno: e) }
                break
            }
            let name = withUnsafePointer(to: entry.pointee.d_name) { p in
                p.withMemoryRebound(to: CChar.self, capacity: 256) { String(cString: $0) }
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
    }

    /// The absolute, symlink-free form of an existing path (`realpath(3)`).
    func realpath(_ path: String) throws -> String {
        _ = try enter(.stat, path)
        guard let p = Glibc.realpath(path, nil) else {
            throw Syscalls.error("realpath", path: path, errno: errno)
        }
        defer { free(p) }
        return String(cString: p)
    }

    /// `lstat(2)`: like `stat` but does not follow a final symlink; nil when absent.
    func lstat(_ path: String) throws -> FileStat? {
        let f = try enter(.stat, path)
        var st = StatBuffer()
        do {
            _ = try retrying("lstat", path, injected: f) { sysLstat(path, &st) }
        } catch let e as LnoteError where e.underlying?.hasPrefix("errno \(ENOENT) ") == true {
            return nil
        }
        return FileStat(st)
    }

    /// Removes a directory tree (used only for temporary package directories); symlinks
    /// are removed, never followed.
    func removeTree(_ path: String) throws {
        for name in try listDirectory(path) {
            let child = DurableFile.join(path, name)
            if let st = try lstat(child), st.isDirectory {
                try removeTree(child)
            } else {
                try unlink(child, missingOK: true)
            }
        }
        try rmdir(path)
    }

    /// Called by `FileDescriptor.close()` only.
    fileprivate func closeRaw(_ fd: Int32, path: String) throws {
        // After a simulated crash the "kernel" still closes descriptors.
        if let faults, faults.hasCrashed {
            _ = Glibc.close(fd)
            return
        }
        let f: Fault?
        do { f = try enter(.close, path) } catch {
            _ = Glibc.close(fd)
            throw error
        }
        if case .fail(let e)? = f, e != EINTR {
            _ = Glibc.close(fd)
            throw Syscalls.error("close", path: path, errno: e)
        }
        // On Linux the descriptor is released even when close reports EINTR: never retry.
        if Glibc.close(fd) == -1 {
            let e = errno
            if e == EINTR { return }
            if e == EBADF { assertionFailure("EBADF from close on \(path): closed twice") }
            throw Syscalls.error("close", path: path, errno: e)
        }
    }
}

/// How many `fsync` and `fdatasync` calls every seam of this process has made (files and
/// directories alike): what a benchmark reports beside a time, since on a real disk those
/// calls, not the bytes, are what a batch of small writes costs.
public enum SyncCallCount {
    private static let count = Atomic<Int>(0)
    static func add() { count.add(1, ordering: .relaxed) }
    /// The calls made so far.
    public static var value: Int { count.load(ordering: .relaxed) }
}

/// The calls the seam makes, as seen by recorders and fault plans.
enum SyscallKind: String, Sendable, CaseIterable {
    case open, read, write, fsync, fdatasync, startWriteback, ftruncate, stat, flock, rename, unlink, mkdir, rmdir, opendir, close, watch

    /// Calls that change what is on disk.
    var mutates: Bool {
        switch self {
        case .write, .fsync, .fdatasync, .ftruncate, .rename, .unlink, .mkdir, .rmdir: true
        default: false
        }
    }
}

/// One call through the seam.
struct SyscallEvent: Sendable, CustomStringConvertible {
    var kind: SyscallKind
    /// The file the call is about (the destination for a rename).
    var path: String
    /// Bytes requested (reads and writes), the length for `ftruncate`.
    var byteCount: Int
    /// 0-based position of the call among all calls through this `Syscalls` value.
    var sequence: Int
    /// An `open` that asks for write access (or to create or truncate).
    var forWriting = false
    var description: String { "#\(sequence) \(kind.rawValue) \(path) \(byteCount)" }
}

/// What a fault plan does to one call.
enum Fault: Sendable {
    /// The call fails with this errno (EINTR: the call is interrupted once, then retried).
    case fail(errno: Int32)
    /// A write transfers at most this many bytes (the seam then loops for the rest).
    case short(Int)
    /// The process "dies": a write first transfers at most this many bytes; any other call
    /// is not performed. Every later call through the same seam throws (except `close`, which
    /// really closes, as the kernel would).
    case crash(afterBytes: Int)
}

/// A test-only plan of failures, consulted before each call.
final class FaultPlan: Sendable {
    let decide: @Sendable (SyscallEvent) -> Fault?
    private let crashed = Mutex(false)

    init(_ decide: @escaping @Sendable (SyscallEvent) -> Fault?) {
        self.decide = decide
    }

    var hasCrashed: Bool { crashed.withLock { $0 } }
    fileprivate func markCrashed() { crashed.withLock { $0 = true } }

    /// A file system mounted read-only: every call that would change it fails with `code`
    /// (EROFS; EACCES for a folder without write permission), an `open` for writing too.
    /// Reads, `flock` and syncs work, as they do there.
    static func readOnlyMedia(_ code: Int32 = EROFS) -> FaultPlan {
        FaultPlan { e in
            switch e.kind {
            case .open: e.forWriting ? .fail(errno: code) : nil
            case .write, .ftruncate, .rename, .unlink, .mkdir, .rmdir: .fail(errno: code)
            default: nil
            }
        }
    }

    /// Fails the `n`th (0-based) call of `kind` whose path contains `pathContains`.
    static func failing(_ kind: SyscallKind, nth n: Int = 0, pathContains: String = "",
                        with fault: Fault) -> FaultPlan {
        let seen = Mutex(0)
        return FaultPlan { e in
            guard e.kind == kind, pathContains.isEmpty || e.path.contains(pathContains) else { return nil }
            let i = seen.withLock { s -> Int in
                defer { s += 1 }
                return s
            }
            return i == n ? fault : nil
        }
    }

    /// Crashes at the `n`th (0-based) call that mutates the disk (write, sync, truncate,
    /// rename, unlink, mkdir, rmdir); a write first transfers `bytes` bytes.
    static func crashing(atMutation n: Int, afterBytes bytes: Int = 0) -> FaultPlan {
        let seen = Mutex(0)
        return FaultPlan { e in
            guard e.kind.mutates else { return nil }
            let i = seen.withLock { s -> Int in
                defer { s += 1 }
                return s
            }
            return i == n ? .crash(afterBytes: bytes) : nil
        }
    }
}

/// Collects the calls made through a seam (test-only).
final class SyscallRecorder: Sendable {
    private let events = Mutex<[SyscallEvent]>([])
    init() {}
    func record(_ e: SyscallEvent) { events.withLock { $0.append(e) } }
    var all: [SyscallEvent] { events.withLock { $0 } }
    func reset() { events.withLock { $0.removeAll() } }
    /// Paths opened or read (opendir included), in order.
    var pathsOpened: [String] { all.filter { $0.kind == .open }.map(\.path) }
}

typealias StatBuffer = stat
private func sysStat(_ path: String, _ st: inout StatBuffer) -> Int32 { stat(path, &st) }
private func sysLstat(_ path: String, _ st: inout StatBuffer) -> Int32 { lstat(path, &st) }
private func sysFlock(_ fd: Int32, _ op: Int32) -> Int32 { flock(fd, op) }

/// What `stat` reports that the store uses.
struct FileStat: Sendable, Equatable {
    var size: UInt64
    var device: UInt64
    var inode: UInt64
    var isDirectory: Bool
    var isRegular: Bool
    /// Hard links: 0 for a file removed or replaced (renamed over) since it was opened.
    var links: UInt64
    var modifiedSeconds: Int64
    /// Nanoseconds within `modifiedSeconds`.
    var modifiedNanoseconds: Int64

    init(_ st: StatBuffer) {
        size = UInt64(max(0, st.st_size))
        device = UInt64(st.st_dev)
        inode = UInt64(st.st_ino)
        isDirectory = (st.st_mode & S_IFMT) == S_IFDIR
        isRegular = (st.st_mode & S_IFMT) == S_IFREG
        links = UInt64(st.st_nlink)
        modifiedSeconds = Int64(st.st_mtim.tv_sec)
        modifiedNanoseconds = Int64(st.st_mtim.tv_nsec)
    }
}

/// An open file descriptor with exactly one owner, released exactly once.
///
/// Call `close()` (which throws: a failed close can mean lost data on some file systems).
/// If an owner forgets, `deinit` closes the descriptor and, in debug builds, stops with
/// an assertion naming the file.
final class FileDescriptor {
    let path: String
    private(set) var raw: Int32
    let io: Syscalls

    fileprivate init(raw: Int32, path: String, io: Syscalls) {
        self.raw = raw
        self.path = path
        self.io = io
    }

    /// The file's size as the open's type check saw it: a hint for a first read to the end,
    /// and the size a page log's tail is read to (`PageLog.readTail`), as a separate `fstat`
    /// right after the open would give it.
    fileprivate var sizeWhenOpened: Int?

    /// `sizeWhenOpened`, once: a later read asks the file again.
    func takeSizeWhenOpened() -> Int? {
        defer { sizeWhenOpened = nil }
        return sizeWhenOpened
    }

    var isOpen: Bool { raw >= 0 }

    /// Gives the descriptor up without closing it (another thread closes it: `Syscalls.lock`
    /// after a timed-out wait).
    fileprivate func detach() { raw = -1 }

    func close() throws {
        guard raw >= 0 else {
            throw LnoteError(.invalidState, "file descriptor closed twice", path: path)
        }
        let fd = raw
        raw = -1
        try io.closeRaw(fd, path: path)
    }

    /// `body(self)`, then `close()`. When `body` throws, the descriptor is closed too and
    /// `body`'s error is the one reported (a failed close after it adds nothing).
    func closing<T>(_ body: (FileDescriptor) throws -> T) throws -> T {
        let result: T
        do {
            result = try body(self)
        } catch {
            if isOpen { try? close() }
            throw error
        }
        try close()
        return result
    }

    deinit {
        if raw >= 0 {
            assertionFailure("leaked file descriptor \(raw) for \(path): call close()")
            _ = Glibc.close(raw)
        }
    }
}

/// One timed wait for a `flock` that a helper thread performs (`Syscalls.lock`).
private final class LockWait: Sendable {
    enum Outcome { case done(Int32), abandoned }
    private enum State { case waiting, done(Int32), abandoned }
    private let state = Mutex(State.waiting)
    private let condition = NSCondition()

    /// The helper thread's result (0 or an errno). Returns true when the waiter gave up
    /// already: the helper then owns the descriptor.
    func finish(errno e: Int32) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        let abandoned = state.withLock { s -> Bool in
            if case .abandoned = s { return true }
            s = .done(e)
            return false
        }
        condition.broadcast()
        return abandoned
    }

    func wait(timeout: Duration) -> Outcome {
        let (seconds, attoseconds) = timeout.components
        let deadline = Date(timeIntervalSinceNow: Double(seconds) + Double(attoseconds) / 1e18)
        condition.lock()
        defer { condition.unlock() }
        while true {
            let done = state.withLock { s -> Int32? in
                if case .done(let e) = s { return e }
                return nil
            }
            if let done { return .done(done) }
            if !condition.wait(until: deadline) {
                // Timed out, unless the helper finished in between.
                return state.withLock { s -> Outcome in
                    if case .done(let e) = s { return .done(e) }
                    s = .abandoned
                    return .abandoned
                }
            }
        }
    }
}
