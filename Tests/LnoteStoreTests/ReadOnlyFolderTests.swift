import Foundation
import Testing
import LnoteModel
@testable import LnoteStore

/// A notebook folder on read-only media (a backup on a read-only mount, or without write
/// permission): its lock files open read-only for `flock` (which needs no write access), and
/// a lock file that cannot be made is no reason to refuse a reader. Driven through the
/// syscall seam: the tests run as root, for whom permissions do not refuse a write.
@Suite struct ReadOnlyFolderTests {
    /// [PKG-80] [PKG-83] The lock file exists but may not be opened for writing (EROFS): it
    /// is opened read-only and locked; a second holder waits as usual.
    @Test(arguments: [EROFS, EACCES])
    func lockFileOpensReadOnly(_ code: Int32) throws {
        let dir = try TempDir("rolock")
        defer { dir.remove() }
        try FileManager.default.createDirectory(atPath: dir.sub(".lnote"), withIntermediateDirectories: true)
        #expect(FileManager.default.createFile(atPath: dir.sub(".lnote/lock"), contents: nil))
        let io = Syscalls(faults: .failing(.open, nth: 0, pathContains: ".lnote/lock", with: .fail(errno: code)))
        let lock = FileLock.notebook(dir.path, io: io, timeout: .milliseconds(50))
        let held = try lock.acquire()
        // Held: another holder (its own descriptor) does not get it.
        let other = try FileLock.notebook(dir.path, io: .live, timeout: .milliseconds(50)).tryAcquire()
        #expect(other == nil)
        other?.release()
        held.release()
        let again = try #require(try FileLock.notebook(dir.path, io: .live, timeout: .milliseconds(50)).tryAcquire())
        again.release()
    }

    /// [PKG-21] Opening cleans temporary files only when it can take the lock at once; on
    /// read-only media, where no lock file can be made, `tryAcquire` answers nil (nothing is
    /// cleaned) instead of failing the open.
    @Test func lockFileThatCannotBeMadeIsNoLock() throws {
        let dir = try TempDir("rolock")
        defer { dir.remove() }
        try FileManager.default.createDirectory(atPath: dir.sub(".lnote"), withIntermediateDirectories: true)
        let io = Syscalls(faults: FaultPlan { e in e.kind == .open && e.path.hasSuffix(".lnote/lock") ? .fail(errno: EROFS) : nil })
        let none = try FileLock.notebook(dir.path, io: io, timeout: .milliseconds(50)).tryAcquire()
        #expect(none == nil)
        none?.release()
        // A writer still fails, with the reason.
        #expect(throws: LnoteError.self) { try FileLock.notebook(dir.path, io: io, timeout: .milliseconds(50)).acquire() }
    }
}
