#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import LnoteModel

/// An exclusive `flock` on a lock file ([PKG-80]): `<UUID>.lnote/lock` for a document,
/// `.lnote/lock` for the notebook folder's own files.
///
/// Every acquisition opens the file afresh (`O_RDWR | O_CREAT`, or `O_RDONLY` when it may
/// not be written: read-only media), so each holder is its own
/// open file description: two holders in one process exclude each other exactly as two
/// processes do, and closing the descriptor releases the lock. The kernel releases it too
/// when the process dies, so a holder killed with SIGKILL blocks nobody. The file is never
/// written nor removed.
struct FileLock: Sendable {
    let path: String
    let io: Syscalls
    /// How long `acquire` waits for another holder ([PKG-81]).
    let timeout: Duration

    /// A held lock; `release()` it exactly once (closing its descriptor).
    final class Held {
        private var fd: FileDescriptor?
        fileprivate init(_ fd: FileDescriptor) { self.fd = fd }

        func release() {
            guard let fd else { return }
            self.fd = nil
            try? fd.close()
        }

        deinit {
            if fd != nil {
                assertionFailure("a lock was not released")
                release()
            }
        }
    }

    /// Takes the lock, waiting at most `timeout` for the holder to release it.
    /// - Throws: `invalidState` naming the lock file after the wait (another process holds
    ///   it: busy, or stuck); `io` when the file cannot be opened (its directory is gone).
    func acquire() throws -> Held {
        try acquire(create: true)!
    }

    /// `acquire`; with `create` false, nil when the lock file does not exist (nobody ever
    /// wrote under this lock: a reader that must change nothing, `verify`, then goes on
    /// without it).
    func acquire(create: Bool) throws -> Held? {
        let fd: FileDescriptor
        do {
            fd = try openForLocking(create: create)
        } catch let e as LnoteError where !create && e.isNotFound {
            return nil
        }
        let got: Bool
        do {
            got = try io.lock(fd, timeout: timeout)
        } catch {
            try? fd.close()
            throw error
        }
        guard got else {
            // The waiting thread owns the descriptor now (see `Syscalls.lock`).
            throw LnoteError(.invalidState, "another process held the lock for more than \(timeout) (it is busy or stuck)",
                             path: path, underlying: Syscalls.describe(errno: EWOULDBLOCK))
        }
        return Held(fd)
    }

    /// Takes the lock only if it is free now; nil when another holder has it.
    func tryAcquire() throws -> Held? {
        let fd: FileDescriptor
        do {
            fd = try openForLocking(create: true)
        } catch let e as LnoteError where e.isReadOnly {
            // A folder nobody may write (read-only media): no lock file can be made, and no
            // writer can need one. Nil: as if another holder had it (nothing is cleaned up).
            return nil
        }
        do {
            if try io.tryLock(fd) { return Held(fd) }
        } catch {
            try? fd.close()
            throw error
        }
        try? fd.close()
        return nil
    }

    /// The lock file opened for `flock`: read-write (created when `create`), or read-only
    /// when it exists but may not be written (read-only media, a backup without write
    /// permission): `flock` needs no write access, and a reader of such a folder locks as
    /// any other; a writer fails at its first write, with that write's error.
    private func openForLocking(create: Bool) throws -> FileDescriptor {
        do {
            return try io.open(path, create ? O_RDWR | O_CREAT : O_RDWR)
        } catch let e as LnoteError where e.isReadOnly {
            return try io.open(path, O_RDONLY)
        }
    }

    /// Runs `body` holding the lock.
    func withLock<T>(_ body: () throws -> T) throws -> T {
        let held = try acquire()
        defer { held.release() }
        return try body()
    }

    /// The notebook lock of a folder ([PKG-83]).
    static func notebook(_ folder: String, io: Syscalls, timeout: Duration) -> FileLock {
        FileLock(path: DurableFile.join(DurableFile.join(folder, ".lnote"), "lock"), io: io, timeout: timeout)
    }

    /// The document lock of a package ([PKG-82]).
    static func document(_ paths: PackagePaths, io: Syscalls, timeout: Duration) -> FileLock {
        FileLock(path: paths.lock, io: io, timeout: timeout)
    }
}

extension PackagePaths {
    /// `lock`: the document lock ([PKG-80]), an empty file.
    public var lock: String { root + "/lock" }
}
