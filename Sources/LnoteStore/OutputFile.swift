#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import LnoteModel

/// Durable writes of files outside notebooks (exports, pictures): the store's durable
/// replace ([PKG-20]: temp file in the same directory, write, fsync, rename, fsync the
/// directory) through the syscall seam, for callers outside the store.
public enum OutputFile {
    /// Replaces (or creates) `path` with `bytes`, atomically and durably. On failure `path`
    /// is left as it was.
    /// - Throws: `io` naming the path and errno.
    public static func replace(_ path: String, with bytes: [UInt8]) throws {
        try DurableFile.replace(path, with: bytes, io: .live)
    }

    /// Creates the directory `path` if it is missing (its parent must exist), and makes the
    /// creation durable (fsync of the parent).
    /// - Throws: `io`, and `corrupt` when `path` exists and is not a directory.
    public static func makeDirectory(_ path: String) throws {
        try directory(path, throughSymlink: true)
    }

    /// What `lstat` says `path` is ("regular file", "directory", "symlink", …; a final
    /// symlink is not followed), nil when it does not exist.
    public static func fileType(atPath path: String) -> String? {
        Syscalls.live.fileType(atPath: path)
    }

    /// Like `makeDirectory`, but never through a final symlink: `path` is examined with
    /// `lstat`, so a symlink there is refused like any other non-directory, and it is
    /// created without `existingOK` (a name appearing meanwhile is an error, not followed).
    /// - Throws: `corrupt` "not a directory (symlink)" naming `path`, and `io`.
    public static func makeOwnDirectory(_ path: String) throws {
        try directory(path, throughSymlink: false)
    }

    /// `makeDirectory` (`throughSymlink`: `stat`, and a directory made meanwhile is fine) or
    /// `makeOwnDirectory` (`lstat`, and a name made meanwhile is an error).
    private static func directory(_ path: String, throughSymlink: Bool) throws {
        let io = Syscalls.live
        if let st = try throughSymlink ? io.stat(path) : io.lstat(path) {
            guard st.isDirectory else {
                throw Syscalls.notRegular(path, kind: io.fileType(atPath: path) ?? "unknown", wantsDirectory: true)
            }
            return
        }
        try io.mkdir(path, existingOK: throughSymlink)
        try DurableFile.syncDirectory(DurableFile.split(path).dir, io: io)
    }

    /// Removes the entry `name` of the directory `dir` when, and only when, it is a regular
    /// file. `dir` is opened `O_NOFOLLOW|O_DIRECTORY` (a final symlink is refused), the entry
    /// is examined with `fstatat(AT_SYMLINK_NOFOLLOW)` and removed with `unlinkat` relative
    /// to that descriptor, so nothing outside `dir` and no directory is ever removed.
    /// - Returns: true when a file was removed; false when `name` is missing or is not a
    ///   regular file (a directory, a symlink, …: left alone).
    /// - Throws: `invalidArgument` when `name` is not one entry's name (empty, `.`, `..`, or
    ///   holding a `/`), `corrupt` when `dir` is a symlink or not a directory, and `io`.
    public static func removeRegularFile(_ name: String, in dir: String) throws -> Bool {
        try removeRegularFile(name, in: dir, io: .live)
    }

    /// `removeRegularFile(_:in:)` through the given seam (tests inject faults).
    static func removeRegularFile(_ name: String, in dir: String, io: Syscalls) throws -> Bool {
        guard !name.isEmpty, !name.contains("/"), name != ".", name != ".." else {
            throw LnoteError(.invalidArgument, "\"\(name)\" is not the name of one entry", path: dir)
        }
        let fd = try io.openDirectory(dir)
        return try fd.closing { fd in try io.unlinkRegularFile(name, in: fd, path: DurableFile.join(dir, name)) }
    }
}
