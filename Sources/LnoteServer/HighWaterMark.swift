#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import LnoteModel
import Synchronization

/// `close(2)`, under a name the mark's own `close` does not hide.
private func closeDescriptor(_ fd: Int32) -> Int32 { close(fd) }

/// The relay's high-water mark ([SYNC-58]): at least the greatest change sequence the
/// relay ever issued, kept in a small file beside its database (`<db>.hwm`), so that a
/// database restored from an older copy is recognised when it is opened.
///
/// The file is 20 bytes, replaced durably each time it changes (a temporary file in the
/// same directory, `O_EXCL`, fsync, rename, fsync of the directory), so it holds the old or
/// the new mark, never a torn one:
///
/// | Offset | Size | Description |
/// |---|---|---|
/// | 0 | 4 | magic `LNHW` |
/// | 4 | 1 | version: 1 |
/// | 5 | 1 | flags: bit 0 *open*: written by a store still open, the value is a reservation |
/// | 6 | 2 | zero |
/// | 8 | 8 | the mark: u64 little-endian |
/// | 16 | 4 | CRC-32C (u32) of bytes 0..<16 |
///
/// **Reservations.** Writing the mark durably at every push that stores operations would
/// add a file replacement (two fsyncs and a rename) to each; so an open store reserves
/// sequences ahead: when a push would issue a sequence above the mark, the mark is first
/// raised to that sequence plus `reservation`, flagged open; pushes below it write
/// nothing. The store that closes last writes the exact sequence, flagged closed. So a
/// closed mark is exact, and an open one found by the next opening means the last store
/// was not closed (a crash, a kill): its value may be ahead of what was issued, and a
/// restore cannot be told apart, so the relay then resets epochs too (one clock
/// comparison per client, once).
///
/// **Several stores.** Every open store holds a shared `flock` on `<db>.hwm.lock` until
/// it closes. A store that opens while another is open (a command beside a running relay)
/// does not judge the mark: the other one did when it opened. The one that closes while
/// no other is open writes the exact mark.
final class HighWaterMark: Sendable {
    let path: String
    /// Sequences reserved ahead of the greatest issued.
    static let reservation: UInt64 = 1 << 16

    private struct State {
        /// What this store last read or wrote: no sequence at or below it needs a write.
        var value: UInt64
        /// The lock file, shared-locked while open; -1 once closed.
        var lock: Int32
    }
    private let state: Mutex<State>
    /// No other store had the database open when this one opened it.
    let alone: Bool

    struct Mark: Equatable {
        var value: UInt64
        var open: Bool
    }

    /// What the file holds.
    enum Reading: Equatable {
        case missing
        case mark(Mark)
        case unreadable(String)
    }

    /// Takes the lock of the mark at `path` (`<path>.lock`): exclusively when no other
    /// store holds it (`alone`), else shared (waiting while another store is opening).
    /// Call `opened(at:)` when the opening is done.
    /// - Throws: `.io` when the lock file cannot be opened or locked.
    init(path: String) throws {
        self.path = path
        let lockPath = path + ".lock"
        let fd = Self.retrying { open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o644) }
        guard fd >= 0 else { throw Self.failure("open the lock of", lockPath) }
        var alone = true
        if Self.retrying({ flock(fd, LOCK_EX | LOCK_NB) }) != 0 {
            guard errno == EWOULDBLOCK, Self.retrying({ flock(fd, LOCK_SH) }) == 0 else {
                let error = Self.failure("lock", lockPath)
                _ = closeDescriptor(fd)
                throw error
            }
            alone = false
        }
        self.alone = alone
        state = Mutex(State(value: 0, lock: fd))
    }

    deinit {
        // A store dropped without `close()`: the lock goes with the descriptor.
        release()
    }

    /// Releases the lock without writing anything (an opening that failed).
    func release() {
        state.withLock { s in
            if s.lock >= 0 { _ = closeDescriptor(s.lock) }
            s.lock = -1
        }
    }

    /// Ends the opening: an `alone` store has written its mark (`reserve`); the lock
    /// becomes shared, so that other stores may open beside this one.
    func opened(at value: UInt64) {
        state.withLock { s in
            s.value = max(s.value, value)
            if alone { _ = Self.retrying { flock(s.lock, LOCK_SH) } }
        }
    }

    /// Makes sure the file holds at least `sequence` before an answer carries it: when it
    /// is above what this store knows the file holds, reserves `sequence + reservation`.
    /// - Throws: `.io` naming the file and errno; nothing is then known to be written.
    func advance(to sequence: UInt64) throws {
        try state.withLock { s in
            guard sequence > s.value else { return }
            s.value = try Self.reserve(beyond: sequence, at: path)
        }
    }

    /// Writes `sequence + reservation` flagged open, unless the file holds more (another
    /// store's reservation).
    /// - Returns: the value the file holds now.
    static func reserve(beyond sequence: UInt64, at path: String) throws -> UInt64 {
        let (target, overflow) = sequence.addingReportingOverflow(reservation)
        var value = overflow ? UInt64.max : target
        if case .mark(let m) = load(path), m.value >= value { value = m.value }
        try store(Mark(value: value, open: true), at: path)
        return value
    }

    /// Releases the lock; when no other store is open, first writes `sequence()` as the
    /// exact mark, flagged closed. Closing twice does nothing.
    /// - Throws: `.io` when the mark cannot be written (the lock is released all the same).
    func close(sequence: () throws -> UInt64) throws {
        try state.withLock { s in
            guard s.lock >= 0 else { return }
            defer {
                _ = closeDescriptor(s.lock)
                s.lock = -1
            }
            guard Self.retrying({ flock(s.lock, LOCK_EX | LOCK_NB) }) == 0 else { return }
            try Self.store(Mark(value: try sequence(), open: false), at: path)
        }
    }

    // MARK: - The file

    static let magic: [UInt8] = Array("LNHW".utf8)
    static let size = 20

    static func encode(_ m: Mark) -> [UInt8] {
        var w = ByteWriter(capacity: size)
        w.append(magic)
        w.append([1, m.open ? 1 : 0, 0, 0])
        w.u64(m.value)
        w.u32(CRC32C.checksum(w.bytes))
        return w.bytes
    }

    static func decode(_ bytes: [UInt8]) -> Reading {
        guard bytes.count == size, Array(bytes[0..<4]) == magic else { return .unreadable("not a high-water mark file") }
        guard bytes[4] == 1, bytes[5] & ~1 == 0, bytes[6] == 0, bytes[7] == 0 else {
            return .unreadable("unknown high-water mark version or flags")
        }
        var r = ByteReader(bytes)
        guard (try? r.bytes(8)) != nil, let v = try? r.u64(), let crc = try? r.u32(),
              crc == CRC32C.checksum(Array(bytes[0..<16])) else {
            return .unreadable("high-water mark CRC mismatch")
        }
        return .mark(Mark(value: v, open: bytes[5] & 1 != 0))
    }

    /// Reads the mark at `path` (at most one byte more than a mark, to see a longer file).
    static func load(_ path: String) -> Reading {
        let fd = retrying { open(path, O_RDONLY | O_CLOEXEC) }
        if fd < 0 {
            let e = errno
            return e == ENOENT ? .missing : .unreadable(describe(e))
        }
        defer { _ = closeDescriptor(fd) }
        var buffer = [UInt8](repeating: 0, count: size + 1)
        var got = 0
        while got < buffer.count {
            let n = buffer.withUnsafeMutableBytes { b in retrying { read(fd, b.baseAddress! + got, b.count - got) } }
            if n < 0 { return .unreadable(describe(errno)) }
            if n == 0 { break }
            got += n
        }
        return decode(Array(buffer[0..<got]))
    }

    /// Replaces the file at `path` durably with `mark`.
    static func store(_ mark: Mark, at path: String) throws {
        let slash = path.lastIndex(of: "/")
        let dir = slash.map { String(path[..<$0]) }.map { $0.isEmpty ? "/" : $0 } ?? "."
        var g = SystemRandomNumberGenerator()
        let temp = path + ".tmp-" + String(UInt32.random(in: 0...UInt32.max, using: &g), radix: 16)
        let fd = retrying { open(temp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644) }
        guard fd >= 0 else { throw failure("create", temp) }
        let bytes = encode(mark)
        let n = bytes.withUnsafeBytes { b in retrying { write(fd, b.baseAddress, b.count) } }
        guard n == bytes.count, retrying({ fsync(fd) }) == 0 else {
            let error = failure(n == bytes.count ? "fsync" : "write", temp)
            _ = closeDescriptor(fd)
            _ = unlink(temp)
            throw error
        }
        _ = closeDescriptor(fd)
        guard rename(temp, path) == 0 else {
            let error = failure("rename", path)
            _ = unlink(temp)
            throw error
        }
        let dfd = retrying { open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        guard dfd >= 0 else { throw failure("open the directory of", dir) }
        defer { _ = closeDescriptor(dfd) }
        guard retrying({ fsync(dfd) }) == 0 else { throw failure("fsync the directory of", dir) }
    }

    private static func describe(_ e: Int32) -> String { "errno \(e) (\(String(cString: strerror(e))))" }

    private static func failure(_ what: String, _ file: String) -> LnoteError {
        LnoteError(.io, "cannot \(what) the relay's high-water mark", path: file, underlying: describe(errno))
    }

    /// Retries a system call interrupted by a signal.
    private static func retrying<T: BinaryInteger>(_ call: () -> T) -> T {
        while true {
            let r = call()
            if r >= 0 || errno != EINTR { return r }
        }
    }
}
