#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import LnoteModel

/// A temporary directory for one benchmark run, removed at the end.
final class Workspace {
    let root: String
    /// A directory on tmpfs (/dev/shm) for building large fixtures quickly (fsync is free
    /// there); nil when there is none. Fixtures built there are copied to `root` before
    /// anything is measured on them.
    let scratch: String?

    init() throws {
        root = try Workspace.makeTemporaryDirectory(in: NSTemporaryDirectory())
        var st = stat()
        if stat("/dev/shm", &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR, access("/dev/shm", W_OK) == 0 {
            scratch = try? Workspace.makeTemporaryDirectory(in: "/dev/shm")
        } else {
            scratch = nil
        }
    }

    static func makeTemporaryDirectory(in parent: String) throws -> String {
        var template = Array((parent.hasSuffix("/") ? parent : parent + "/").utf8CString.dropLast()) + Array("lnote-bench-XXXXXX".utf8CString)
        guard let p = mkdtemp(&template) else {
            throw LnoteError(.io, "mkdtemp failed", path: parent, underlying: String(cString: strerror(errno)))
        }
        return String(cString: p)
    }

    func path(_ name: String) -> String { root + "/" + name }

    /// A fresh directory under the workspace.
    func directory(_ name: String) throws -> String {
        let p = path(name)
        try FileManager.default.createDirectory(atPath: p, withIntermediateDirectories: true)
        return p
    }

    func remove() {
        try? FileManager.default.removeItem(atPath: root)
        if let scratch { try? FileManager.default.removeItem(atPath: scratch) }
    }
}

/// Plain POSIX file helpers for the baselines (the library's own are internal).
enum Files {
    static func fail(_ what: String, _ path: String) -> LnoteError {
        LnoteError(.io, "\(what) failed", path: path, underlying: String(cString: strerror(errno)))
    }

    /// The whole content of a file.
    static func read(_ path: String) throws -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw fail("open", path) }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw fail("fstat", path) }
        let size = Int(st.st_size)
        var out = [UInt8](repeating: 0, count: size)
        var done = 0
        try out.withUnsafeMutableBytes { buf in
            while done < size {
                let n = Glibc.read(fd, buf.baseAddress! + done, size - done)
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { throw fail("read", path) }
                done += n
            }
        }
        return out
    }

    static func size(_ path: String) throws -> Int {
        var st = stat()
        guard stat(path, &st) == 0 else { throw fail("stat", path) }
        return Int(st.st_size)
    }

    /// The baseline "atomic rewrite": temp file in the same directory, write, fsync, rename,
    /// fsync the directory (what lnote's own snapshots do).
    static func durableReplace(_ path: String, with bytes: [UInt8]) throws {
        let dir = (path as NSString).deletingLastPathComponent
        let temp = dir + "/." + (path as NSString).lastPathComponent + ".tmp"
        let fd = open(temp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw fail("open", temp) }
        var done = 0
        try bytes.withUnsafeBytes { buf in
            while done < bytes.count {
                let n = write(fd, buf.baseAddress! + done, bytes.count - done)
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { close(fd); throw fail("write", temp) }
                done += n
            }
        }
        guard fsync(fd) == 0 else { close(fd); throw fail("fsync", temp) }
        close(fd)
        guard rename(temp, path) == 0 else { throw fail("rename", temp) }
        let dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard dfd >= 0 else { throw fail("open", dir) }
        defer { close(dfd) }
        guard fsync(dfd) == 0 else { throw fail("fsync", dir) }
    }

    /// Replaces `destination` (a directory) with a copy of `source`.
    static func restoreTree(_ source: String, to destination: String) throws {
        let fm = FileManager.default
        if fm.fileExists(atPath: destination) { try fm.removeItem(atPath: destination) }
        try fm.copyItem(atPath: source, toPath: destination)
    }
}

/// Resident memory of this process, from /proc/self/status.
enum Memory {
    /// (VmRSS, VmHWM) in bytes.
    static func status() -> (rss: Int, hwm: Int) {
        let text = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
        func kb(_ key: String) -> Int {
            guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix(key + ":") }) else { return 0 }
            return (Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "0") ?? 0) * 1024
        }
        return (kb("VmRSS"), kb("VmHWM"))
    }

    /// Resets the peak (VmHWM) to the current RSS (Linux ≥ 4.0: `echo 5 > /proc/self/clear_refs`).
    static func resetPeak() -> Bool {
        let fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        return write(fd, "5", 1) == 1
    }
}

extension Files {
    /// Median time of `fdatasync` after appending 300 bytes to a file in `dir` (50 rounds):
    /// what one durable journal append costs on this disk, for the machine description.
    static func fdatasyncProbe(in dir: String) throws -> Double {
        let path = dir + "/fdatasync-probe"
        let fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw fail("open", path) }
        defer {
            close(fd)
            unlink(path)
        }
        let chunk = [UInt8](repeating: 0x2A, count: 300)
        let clock = ContinuousClock()
        var times: [Double] = []
        for _ in 0..<50 {
            guard chunk.withUnsafeBytes({ write(fd, $0.baseAddress!, $0.count) }) == chunk.count else { throw fail("write", path) }
            let start = clock.now
            guard fdatasync(fd) == 0 else { throw fail("fdatasync", path) }
            times.append(seconds(clock.now - start))
        }
        return Timing.median(times)
    }
}
