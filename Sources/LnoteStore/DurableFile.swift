#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import LnoteModel

/// Whole-file writes that are atomic and durable, and the helpers around them.
///
/// A durable replace ([PKG-20]) is: create `.<name>.tmp-<16 hex>` in the same directory
/// with `O_CREAT|O_EXCL`, write every byte, `fsync` it, close it, `rename` it over the
/// destination, then `fsync` the directory. A crash leaves either the old file or the new
/// one under the final name, plus at worst a temporary file that readers never look at
/// ([PKG-21]) and that is removed when the notebook or document is next opened.
enum DurableFile {
    /// True for names made by `temporaryName(for:)`: `.<name>.tmp-<hex>` ([PKG-21]).
    static func isTemporaryName(_ name: String) -> Bool {
        name.hasPrefix(".") && name.contains(".tmp-")
    }

    /// A fresh temporary name for `name` in the same directory.
    static func temporaryName(for name: String) -> String {
        var g = SystemRandomNumberGenerator()
        let r = UInt64.random(in: 0...UInt64.max, using: &g)
        let hex = String(r, radix: 16)
        return ".\(name).tmp-" + String(repeating: "0", count: 16 - hex.count) + hex
    }

    /// Replaces (or creates) the file at `path` with `bytes`, atomically and durably.
    ///
    /// On failure before the rename the destination is untouched and the temporary file is
    /// removed (best effort: after a crash it stays, invisible to readers). A failure of the
    /// final directory `fsync` is reported although the new content is already in place.
    /// `mode`: the new file's permissions (0600 for files holding secrets).
    static func replace(_ path: String, with bytes: [UInt8], io: Syscalls, mode: mode_t = 0o644) throws {
        let (dir, name) = split(path)
        let temp = join(dir, temporaryName(for: name))
        let fd = try io.open(temp, O_WRONLY | O_CREAT | O_EXCL, mode: mode)
        do {
            try io.write(fd, bytes)
            try io.fsync(fd)
            try fd.close()
            try io.rename(temp, path)
        } catch {
            if fd.isOpen { try? fd.close() }
            try? io.unlink(temp, missingOK: true)
            throw error
        }
        try syncDirectory(dir, io: io)
    }

    /// `fsync` of a directory, making renames and creations in it durable.
    static func syncDirectory(_ dir: String, io: Syscalls) throws {
        try io.openDirectory(dir).closing { try io.fsync($0) }
    }

    /// The whole content of a file.
    /// `followingSymlinks`: only for system files outside notebooks (see `Syscalls.open`).
    static func read(_ path: String, io: Syscalls, followingSymlinks: Bool = false) throws -> [UInt8] {
        try io.open(path, O_RDONLY, followingSymlinks: followingSymlinks).closing { try io.readToEnd($0) }
    }

    /// The content of a file, or nil when it does not exist.
    static func readIfExists(_ path: String, io: Syscalls, followingSymlinks: Bool = false) throws -> [UInt8]? {
        do {
            return try read(path, io: io, followingSymlinks: followingSymlinks)
        } catch let e as LnoteError where e.isNotFound {
            return nil
        }
    }

    /// At most the first `count` bytes of a file (fewer when it is shorter), or nil when it
    /// does not exist. Allocates `count` bytes at most, whatever the file's size (a sparse
    /// file of a terabyte from a hostile folder reads as its first bytes).
    static func readPrefixIfExists(_ path: String, count: Int, io: Syscalls) throws -> [UInt8]? {
        do {
            return try io.open(path, O_RDONLY, followingSymlinks: false).closing { try io.pread($0, count: count, at: 0) }
        } catch let e as LnoteError where e.isNotFound {
            return nil
        }
    }

    /// The content of a file of at most `limit` bytes, or nil when it does not exist.
    /// - Throws: `limitExceeded` (nothing allocated for it) when the file is larger.
    static func readIfExists(_ path: String, io: Syscalls, limit: Int) throws -> [UInt8]? {
        do {
            return try io.open(path, O_RDONLY, followingSymlinks: false).closing { fd in
                let size = try io.fstat(fd).size
                guard size <= UInt64(limit) else {
                    throw LnoteError(.limitExceeded, "\(size) bytes, more than the \(limit) allowed", path: path)
                }
                // One byte more than the size told: a file that grew since is refused too.
                let bytes = try io.pread(fd, count: Int(size) + 1, at: 0)
                guard bytes.count <= limit else {
                    throw LnoteError(.limitExceeded, "more than the \(limit) bytes allowed", path: path)
                }
                return bytes
            }
        } catch let e as LnoteError where e.isNotFound {
            return nil
        }
    }

    /// Removes the temporary files left in `dir` by interrupted replaces. Returns their names.
    @discardableResult
    static func removeTemporaryFiles(in dir: String, io: Syscalls) throws -> [String] {
        let names = try io.listDirectory(dir).filter(isTemporaryName)
        for n in names { try io.unlink(join(dir, n), missingOK: true) }
        if !names.isEmpty { try syncDirectory(dir, io: io) }
        return names
    }

    /// `("/a/b", "c.json")` for `/a/b/c.json`; `(".", name)` for a bare name.
    static func split(_ path: String) -> (dir: String, name: String) {
        guard let slash = path.lastIndex(of: "/") else { return (".", path) }
        let dir = String(path[..<slash])
        return (dir.isEmpty ? "/" : dir, String(path[path.index(after: slash)...]))
    }

    static func join(_ dir: String, _ name: String) -> String {
        dir.hasSuffix("/") ? dir + name : dir + "/" + name
    }
}

extension LnoteError {
    /// The errno of an `.io` error the seam made (`underlying` "errno 28 (…)"), else nil.
    public var errnoCode: Int32? {
        guard code == .io, let u = underlying, u.hasPrefix("errno ") else { return nil }
        return Int32(u.dropFirst(6).prefix { $0.isNumber })
    }

    /// The seam's refusal of a name that is not a regular file or directory ([PKG-22]).
    public var isNotRegularFile: Bool {
        code == .corrupt && (message.hasPrefix("not a regular file (") || message.hasPrefix("not a directory ("))
    }

    /// An `.io` error that a full disk or quota caused (ENOSPC, EDQUOT).
    var isDiskFull: Bool { errnoCode == ENOSPC || errnoCode == EDQUOT }

    /// An `.io` error of a file system or file this process may not write (EROFS, EACCES,
    /// EPERM): a notebook on read-only media, or a backup without write permission.
    public var isReadOnly: Bool { errnoCode == EROFS || errnoCode == EACCES || errnoCode == EPERM }

    /// An `.io` error whose cause is ENOENT.
    var isNotFound: Bool {
        code == .notFound || (code == .io && underlying?.hasPrefix("errno \(ENOENT) ") == true)
    }
}
