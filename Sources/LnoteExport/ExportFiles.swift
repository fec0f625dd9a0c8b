#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import LnoteModel

/// The few file calls the export makes around SQLite (temporary name, fsync, rename,
/// unlink), all here, each retrying EINTR and throwing `io` with errno.
enum ExportFiles {
    static func split(_ path: String) -> (dir: String, name: String) {
        guard let slash = path.lastIndex(of: "/") else { return (".", path) }
        let dir = String(path[..<slash])
        return (dir.isEmpty ? "/" : dir, String(path[path.index(after: slash)...]))
    }

    /// `<dir>/.<name>.export-<16 hex>.tmp`: hidden, beside the target (same file system, so
    /// the final rename is atomic), and unused.
    static func temporaryPath(for target: String) throws -> String {
        let (dir, name) = split(target)
        for _ in 0..<16 {
            let p = "\(dir)/.\(name).export-\(hexString(UInt64.random(in: .min ... .max).bigEndianBytes)).tmp"
            if !exists(p) && !exists(p + "-journal") { return p }
        }
        throw LnoteError(.alreadyExists, "no free temporary name beside the export", path: target)
    }

    static func exists(_ path: String) -> Bool {
        var st = stat()
        return lstat(path, &st) == 0
    }

    static func isDirectory(_ path: String) -> Bool {
        var st = stat()
        return stat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR
    }

    static func size(_ path: String) throws -> Int {
        var st = stat()
        guard stat(path, &st) == 0 else { throw error("stat", path) }
        return Int(st.st_size)
    }

    /// fsyncs a file or a directory.
    static func sync(_ path: String, directory: Bool) throws {
        let fd = retry { open(path, directory ? O_RDONLY | O_DIRECTORY : O_RDONLY) }
        guard fd >= 0 else { throw error("open", path) }
        defer { _ = close(fd) }
        guard retry({ fsync(fd) }) == 0 else { throw error("fsync", path) }
    }

    static func rename(_ from: String, _ to: String) throws {
        #if canImport(Glibc)
        let r = Glibc.rename(from, to)
        #else
        let r = Darwin.rename(from, to)
        #endif
        guard r == 0 else { throw error("rename to \(to)", from) }
    }

    /// Removes a file if present (cleanup: errors other than ENOENT are reported).
    static func unlinkIfPresent(_ path: String) throws {
        guard unlink(path) == 0 || errno == ENOENT else { throw error("unlink", path) }
    }

    private static func retry(_ call: () -> Int32) -> Int32 {
        while true {
            let r = call()
            if r >= 0 || errno != EINTR { return r }
        }
    }

    private static func error(_ what: String, _ path: String) -> LnoteError {
        let e = errno
        return LnoteError(e == ENOENT ? .notFound : .io, "\(what) failed", path: path,
                          underlying: "errno \(e) (\(String(cString: strerror(e))))")
    }
}

extension UInt64 {
    var bigEndianBytes: [UInt8] { (0..<8).map { UInt8(truncatingIfNeeded: self >> (56 - 8 * $0)) } }
}
