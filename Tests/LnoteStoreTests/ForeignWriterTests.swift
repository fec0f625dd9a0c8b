import Foundation
import Glibc
import Synchronization
import Testing
import LnoteModel
import LnoteReplication
@testable import LnoteStore

// A second implementation of the writer's side of Protocol/document-package.md §10, written
// from the spec text: §5 (log header, frames, CRC-32C; operation-log.md §2; the anchor and
// log-form frames of §5.4 and operation-log.md §3.4, which it reads and never writes), §1 (paths),
// §3.3 (replica.json), [PKG-20] (durable replace, to create a log), [PKG-80] … [PKG-84].
// It makes its own system calls (Glibc) and never calls lnote's PageLog, Document or
// Notebook to read or write; it borrows only the operation payload encoding
// (`OperationCodec`), which operation-log.md §3 specifies and these tests do not check.
// lnote is the other process: a `Notebook` on the same folder, used through its API.

// MARK: - Bytes, CRC-32C

/// CRC-32C as operation-log.md §2 defines it: Castagnoli, reflected polynomial 0x82F63B78,
/// init and final XOR 0xFFFFFFFF. A plain byte-at-a-time table, independent of lnote's.
private enum ForeignCRC {
    static let table: [UInt32] = (0..<256).map { i in
        var c = UInt32(i)
        for _ in 0..<8 { c = (c & 1) != 0 ? (c >> 1) ^ 0x82F6_3B78 : c >> 1 }
        return c
    }

    static func checksum<S: Sequence<UInt8>>(_ parts: S...) -> UInt32 {
        var c: UInt32 = 0xFFFF_FFFF
        for part in parts {
            for b in part { c = table[Int((c ^ UInt32(b)) & 0xFF)] ^ (c >> 8) }
        }
        return c ^ 0xFFFF_FFFF
    }
}

private func le16(_ v: UInt16) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8)] }
private func le32(_ v: UInt32) -> [UInt8] { (0..<4).map { UInt8((v >> (8 * UInt32($0))) & 0xFF) } }
private func le64(_ v: UInt64) -> [UInt8] { (0..<8).map { UInt8((v >> (8 * UInt64($0))) & 0xFF) } }
private func readLE32(_ b: [UInt8], _ at: Int) -> UInt32 {
    (0..<4).reduce(UInt32(0)) { $0 | UInt32(b[at + $1]) << (8 * UInt32($1)) }
}
private func readLE16(_ b: [UInt8], _ at: Int) -> UInt16 { UInt16(b[at]) | UInt16(b[at + 1]) << 8 }
private func readLE64(_ b: [UInt8], _ at: Int) -> UInt64 {
    (0..<8).reduce(UInt64(0)) { $0 | UInt64(b[at + $1]) << (8 * UInt64($1)) }
}
private func hex(_ bytes: some Sequence<UInt8>) -> String {
    bytes.map { String(format: "%02x", $0) }.joined()
}
private func unhex(_ s: String) -> [UInt8] {
    let cs = Array(s.filter { !$0.isWhitespace })
    return stride(from: 0, to: cs.count, by: 2).map { UInt8(String(cs[$0..<$0 + 2]), radix: 16)! }
}

/// §5.1 [PKG-30]: the 40-byte log header.
private enum ForeignHeader {
    static let size = 40
    static let magic = Array("LNOTELOG".utf8)
    static let pageKind: UInt8 = 1

    static func encode(kind: UInt8, owner: UUID, incarnation: UInt64) -> [UInt8] {
        var h = magic + le16(1) + [kind, 0]
        h += withUnsafeBytes(of: owner.uuid) { Array($0) }  // RFC 4122 byte order
        h += le64(incarnation)
        h += le32(ForeignCRC.checksum(h))
        return h
    }

    /// Nil when valid for a page log of `owner`; else why not.
    static func problem(_ b: [UInt8], owner: UUID) -> String? {
        guard b.count >= size else { return "shorter than 40 bytes" }
        guard Array(b[0..<8]) == magic else { return "bad magic" }
        guard readLE32(b, 36) == ForeignCRC.checksum(b[0..<36]) else { return "bad header CRC" }
        guard readLE16(b, 8) == 1 || readLE16(b, 8) == 2 else { return "version \(readLE16(b, 8))" }
        guard b[10] == pageKind, b[11] == 0 else { return "kind \(b[10]) flags \(b[11])" }
        guard Array(b[12..<28]) == withUnsafeBytes(of: owner.uuid, { Array($0) }) else { return "another owner" }
        guard readLE64(b, 28) != 0 else { return "incarnation 0" }
        return nil
    }
}

/// §5.4 [PKG-110]: a version-2 page log's anchor, the valid frame of type 0x30 at offset 40
/// whose payload is a non-zero u64 writer and a shortest svarint base wall time; and
/// operation-log.md §3.4 [LOG-33]: frames of type 0x8A, checked from the anchor's CRC field and
/// read as the writer's addStroke3 (0x0A).
private struct ForeignAnchor {
    var bytes: [UInt8]
    var writer: UInt64
    var base: Int64

    /// A shortest-form LEB128 varint at `p`: (value, bytes), or nil.
    static func varint(_ b: [UInt8], _ p: Int) -> (UInt64, Int)? {
        var v: UInt64 = 0
        for i in 0..<10 where p + i < b.count {
            let byte = b[p + i]
            if i == 9 && byte > 1 { return nil }
            v |= UInt64(byte & 0x7F) << (7 * UInt64(i))
            if byte & 0x80 == 0 { return i > 0 && byte == 0 ? nil : (v, i + 1) }
        }
        return nil
    }

    static func zigzag(_ n: Int64) -> UInt64 { UInt64(bitPattern: (n << 1) ^ (n >> 63)) }
    static func unzigzag(_ v: UInt64) -> Int64 { Int64(bitPattern: (v >> 1) ^ (0 &- (v & 1))) }
    static func leb(_ v: UInt64) -> [UInt8] {
        var v = v, out: [UInt8] = []
        repeat {
            let byte = UInt8(v & 0x7F)
            v >>= 7
            out.append(v == 0 ? byte : byte | 0x80)
        } while v != 0
        return out
    }

    /// The anchor of a log whose first 40 bytes are a valid header, from its bytes.
    static func of(_ b: [UInt8]) -> ForeignAnchor? {
        guard readLE16(b, 8) == 2, b.count >= 40 + 9, let length = ForeignFrame.valid(b, at: 40, anchor: nil), b[48] == 0x30,
              length >= 9 else { return nil }
        let end = 48 + length
        let writer = readLE64(b, 49)
        guard writer != 0, let (v, n) = varint(b, 57), 57 + n == end else { return nil }
        return ForeignAnchor(bytes: Array(b[40..<end]), writer: writer, base: unzigzag(v))
    }

    /// The addStroke3 payload a log-form payload stands for, or nil when it does not expand.
    func expand(_ payload: [UInt8]) -> [UInt8]? {
        guard let (counter, n1) = ForeignAnchor.varint(payload, 0), counter != 0, counter <= 1 << 62,
              let (d, n2) = ForeignAnchor.varint(payload, n1) else { return nil }
        let (wall, overflow) = base.addingReportingOverflow(ForeignAnchor.unzigzag(d))
        guard !overflow else { return nil }
        return le64(writer) + ForeignAnchor.leb(counter) + ForeignAnchor.leb(ForeignAnchor.zigzag(wall)) + Array(payload[(n1 + n2)...])
    }
}

/// operation-log.md §2 [LOG-10]: `[length u32][crc u32][type u8][payload]`, length = the
/// bytes after the CRC field, CRC over bytes 0..<4 then 8..<8+length.
private enum ForeignFrame {
    static let maxLength = 16_777_216

    static func encode(type: UInt8, payload: [UInt8]) -> [UInt8] {
        let length = le32(UInt32(1 + payload.count))
        let crc = ForeignCRC.checksum(length, [type], payload)
        return length + le32(crc) + [type] + payload
    }

    /// The frame's bytes of `op` (add: type 0x01, operation-log.md §3, which readers keep
    /// accepting beside lnote's own `addStroke`, [LOG-22]); the payload bytes come from
    /// `OperationCodec`'s hash form, the add encoding.
    static func encode(_ op: Op) -> [UInt8] {
        guard case .add = op.body else { fatalError("the foreign writer only adds") }
        return encode(type: 0x01, payload: OperationCodec.frame(op, form: .hash).payload)
    }

    /// The length of the valid frame at `p`, or nil. A frame of type 0x8A is valid only
    /// against an anchor, its CRC starting with the anchor's CRC field ([LOG-33]).
    static func valid(_ b: [UInt8], at p: Int, anchor: ForeignAnchor?) -> Int? {
        guard b.count - p >= 9 else { return nil }
        let length = Int(readLE32(b, p))
        guard length >= 1, length <= maxLength, b.count - p - 8 >= length else { return nil }
        let prefix: [UInt8]
        if b[p + 8] == 0x8A {
            guard let anchor else { return nil }
            prefix = Array(anchor.bytes[4..<8])
        } else {
            prefix = []
        }
        let crc = ForeignCRC.checksum(prefix[...], b[p..<p + 4], b[(p + 8)..<(p + 8 + length)])
        return crc == readLE32(b, p + 4) ? length : nil
    }

    enum Tail: Equatable { case none, torn(at: Int), damage(at: Int) }

    /// [PKG-37] Frames from `start` to the first position that is not a valid frame; the
    /// anchor and its copies passed over, log-form frames read as the addStroke3 they stand
    /// for ([PKG-110]); `base`: for the payload base a log-form frame reports offsets from.
    static func scan(_ b: [UInt8], from start: Int, anchor: ForeignAnchor?)
        -> (frames: [(offset: Int, type: UInt8, payload: [UInt8], shift: Int)], end: Int, tail: Tail) {
        var frames: [(offset: Int, type: UInt8, payload: [UInt8], shift: Int)] = []
        var p = start
        while p < b.count {
            if let length = valid(b, at: p, anchor: anchor) {
                let payload = Array(b[(p + 9)..<(p + 8 + length)])
                if let anchor, Array(b[p..<(p + 8 + length)]) == anchor.bytes {
                    // The anchor, or a copy of it: no operation.
                } else if let anchor, b[p + 8] == 0x8A, let expanded = anchor.expand(payload) {
                    frames.append((p, 0x0A, expanded, expanded.count - payload.count))
                } else {
                    frames.append((p, b[p + 8], payload, 0))
                }
                p += 8 + length
                continue
            }
            // "A torn tail that starts with a frame whose length is in range and whose bytes
            // are all present but whose CRC fails was written whole and damaged later."
            if b.count - p >= 8 {
                let length = Int(readLE32(b, p))
                if length >= 1, length <= maxLength, b.count - p - 8 >= length { return (frames, p, .damage(at: p)) }
            }
            // "it searches forward, byte by byte, for the next position where a valid frame starts"
            for q in (p + 1)..<b.count where valid(b, at: q, anchor: anchor) != nil { return (frames, p, .damage(at: q)) }
            return (frames, p, .torn(at: p))
        }
        return (frames, p, .none)
    }
}

// MARK: - System calls

private struct ForeignError: Error, CustomStringConvertible {
    var description: String
    init(_ message: String, errno e: Int32? = nil) {
        description = e.map { message + ": " + String(cString: strerror($0)) } ?? message
    }
}

private struct FileIdentity: Equatable {
    var device: UInt64, inode: UInt64, size: Int64, mtime: Int, mtimeNanos: Int
    init(_ st: stat) {
        device = UInt64(st.st_dev); inode = UInt64(st.st_ino); size = Int64(st.st_size)
        mtime = Int(st.st_mtim.tv_sec); mtimeNanos = Int(st.st_mtim.tv_nsec)
    }
}

private func statPath(_ path: String) throws -> FileIdentity? {
    var st = stat()
    if stat(path, &st) != 0 {
        if errno == ENOENT { return nil }
        throw ForeignError("stat \(path)", errno: errno)
    }
    return FileIdentity(st)
}

private func fstatFD(_ fd: Int32) throws -> FileIdentity {
    var st = stat()
    guard fstat(fd, &st) == 0 else { throw ForeignError("fstat", errno: errno) }
    return FileIdentity(st)
}

private func preadAll(_ fd: Int32, from offset: Int, to end: Int) throws -> [UInt8] {
    guard end > offset else { return [] }
    var out = [UInt8](repeating: 0, count: end - offset)
    var done = 0
    while done < out.count {
        let n = out.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + done, $0.count - done, off_t(offset + done)) }
        if n < 0 { if errno == EINTR { continue }; throw ForeignError("pread", errno: errno) }
        if n == 0 { break }  // the file got shorter meanwhile
        done += n
    }
    return Array(out[0..<done])
}

private func pwriteAll(_ fd: Int32, _ bytes: [UInt8], at offset: Int) throws {
    var done = 0
    while done < bytes.count {
        let n = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress! + done, $0.count - done, off_t(offset + done)) }
        if n < 0 { if errno == EINTR { continue }; throw ForeignError("pwrite", errno: errno) }
        done += n
    }
}

private func syncDirectory(_ path: String) throws {
    let dfd = open(path, O_RDONLY | O_DIRECTORY)
    guard dfd >= 0 else { throw ForeignError("open \(path)", errno: errno) }
    defer { close(dfd) }
    guard fsync(dfd) == 0 else { throw ForeignError("fsync \(path)", errno: errno) }
}

// MARK: - The foreign writer

/// One process of "another implementation" writing page logs of one document.
private final class ForeignWriter {
    let folder: String
    let document: UUID
    var wallTime: Int64 = 1_800_000_000_000
    private var rng: SeededRNG

    init(folder: String, document: DocumentID, seed: UInt64 = 0xF0_4E16) {
        self.folder = folder
        self.document = document.uuid
        rng = SeededRNG(seed: seed)
    }

    // §1: `<folder>/<UUID>.lnote/…`, UUIDs uppercase with hyphens.
    var package: String { folder + "/" + document.uuidString + ".lnote" }
    var lockPath: String { package + "/lock" }
    var replicaPath: String { folder + "/.lnote/replica.json" }
    func logPath(_ page: UUID) -> String { package + "/pages/" + page.uuidString + ".log" }

    // MARK: [PKG-80] the document lock

    /// A hold: its own open file description.
    struct Hold { fileprivate let fd: Int32 }

    /// "opens the file with O_RDWR | O_CREAT (mode 0644) for each hold, takes the lock"
    /// (waiting in the kernel, [PKG-81]).
    func lock() throws -> Hold {
        if replicaIdentity == nil { try openFolder() }
        return try lock(lockPath)
    }

    private func lock(_ lockPath: String) throws -> Hold {
        let fd = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw ForeignError("open \(lockPath)", errno: errno) }
        while flock(fd, LOCK_EX) != 0 {
            if errno == EINTR { continue }
            let e = errno
            close(fd)
            throw ForeignError("flock", errno: e)
        }
        return Hold(fd: fd)
    }

    func release(_ hold: Hold) {
        _ = flock(hold.fd, LOCK_UN)
        close(hold.fd)
    }

    // MARK: [PKG-84] step 1: replica.json

    private(set) var replica: UInt64 = 0
    private var replicaIdentity: FileIdentity?

    /// [PKG-89] [PKG-92]: replica.json is "read at open under the [notebook] lock". Taken
    /// before any document lock ([PKG-80]: a holder of the notebook lock never waits for a
    /// document lock).
    func openFolder() throws {
        let hold = try lock(folder + "/.lnote/lock")
        defer { release(hold) }
        try refreshReplica()
    }

    private func refreshReplica() throws {
        let id = try statPath(replicaPath)
        guard let id else { throw ForeignError("no .lnote/replica.json: the folder was never opened") }
        if id == replicaIdentity { return }
        let fd = open(replicaPath, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw ForeignError("open replica.json", errno: errno) }
        defer { close(fd) }
        let bytes = try preadAll(fd, from: 0, to: Int(try fstatFD(fd).size))
        // §3.3: {"format": 1, "replica": 16 hex, "fingerprint": {device, inode, path, machine?}, "previous": […]}
        guard let json = try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any],
              (json["format"] as? NSNumber)?.intValue == 1,
              let text = json["replica"] as? String, text.count == 16,
              text.allSatisfy({ $0.isHexDigit && !$0.isUppercase }),
              let value = UInt64(text, radix: 16), value != 0 else {
            throw ForeignError("replica.json does not decode: \(String(decoding: bytes, as: UTF8.self))")
        }
        // [PKG-60]: a fingerprint that differs means a copy, which must not write under this
        // id. This writer does not mint; it only checks that it may use the id.
        guard let fp = json["fingerprint"] as? [String: Any],
              let device = (fp["device"] as? NSNumber)?.uint64Value,
              let inode = (fp["inode"] as? NSNumber)?.uint64Value,
              let path = fp["path"] as? String else {
            throw ForeignError("replica.json has no fingerprint.device/inode/path: \(String(decoding: bytes, as: UTF8.self))")
        }
        guard let here = try statPath(folder) else { throw ForeignError("no folder \(folder)") }
        let resolved = realpath(folder, nil).map { p in defer { free(p) }; return String(cString: p) } ?? folder
        guard device == here.device, inode == here.inode, path == resolved else {
            throw ForeignError("replica.json's fingerprint (\(device), \(inode), \(path)) is not this folder's (\(here.device), \(here.inode), \(resolved))")
        }
        replica = value
        replicaIdentity = id
    }

    // MARK: [PKG-84] step 2: one page log, brought up to date

    struct LogView {
        var fd: Int32
        var identity: FileIdentity
        /// The end of the last whole frame read.
        var end: Int
        /// The log's anchor, if any ([PKG-110]).
        var anchor: ForeignAnchor?
        /// What the log holds: per replica, the greatest counter.
        var clock: [UInt64: UInt64] = [:]
        var ops: [Op] = []
    }

    private var logs: [UUID: LogView] = [:]
    /// What the last catch-up did, for the tests.
    private(set) var lastCut: (offset: Int, bytes: Int)?
    private(set) var lastReadBytes = 0
    /// How many times a log was read from its header (opened, or found replaced or shorter).
    private(set) var fullReads = 0

    /// A fresh reading of a page log by a process that never saw it: no lock, no cut.
    func readOnly(page: UUID) throws -> (ops: [Op], end: Int, size: Int) {
        let fd = open(logPath(page), O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw ForeignError("open \(logPath(page))", errno: errno) }
        defer { close(fd) }
        let size = Int(try fstatFD(fd).size)
        let bytes = try preadAll(fd, from: 0, to: size)
        if let problem = ForeignHeader.problem(bytes, owner: page) { throw ForeignError("header: \(problem)") }
        let scan = ForeignFrame.scan(bytes, from: ForeignHeader.size, anchor: ForeignAnchor.of(bytes))
        if case .damage(let at) = scan.tail { throw ForeignError("damage at \(at)") }
        let ops = try scan.frames.map {
            try OperationCodec.decode(Frame(type: $0.type, payload: $0.payload), base: $0.offset + 9 - $0.shift)
        }
        return (ops, scan.end, size)
    }

    /// "the file at the log's path must be the one it has open (same device and inode) and no
    /// shorter than what it read, else it reads the log again from the files; the frames past
    /// what it read are read (only those bytes) and applied; a partial frame after them is a
    /// dead writer's torn tail … and is cut ([PKG-37]); damage is salvaged ([PKG-38])".
    /// Under the document lock only. Nil when the page has no log yet.
    private func catchUp(page: UUID) throws -> LogView? {
        lastCut = nil
        lastReadBytes = 0
        let path = logPath(page)
        // The log alone is not the whole state when the page's state holds operations its
        // log lacks (`.missing`, [PKG-51]) or a checkpoint base ([PKG-46]): counters and
        // Lamport timestamps allocated from the log alone would then be wrong. §10 does not
        // say how a writer allocates then; this writer refuses.
        for other in [".missing", ".base"] {
            let name = package + "/pages/" + page.uuidString + other
            if try statPath(name) != nil { throw ForeignError("\(name) exists: allocation from the log alone is unsafe") }
        }
        guard let atPath = try statPath(path) else {
            if let old = logs.removeValue(forKey: page) { close(old.fd) }
            return nil
        }
        var view: LogView
        if let old = logs[page], old.identity.device == atPath.device, old.identity.inode == atPath.inode,
           Int(try fstatFD(old.fd).size) >= old.end {
            view = old
        } else {
            if let old = logs.removeValue(forKey: page) { close(old.fd) }
            fullReads += 1
            let fd = open(path, O_RDWR | O_CLOEXEC)
            guard fd >= 0 else { throw ForeignError("open \(path)", errno: errno) }
            let header = try preadAll(fd, from: 0, to: ForeignHeader.size)
            if let problem = ForeignHeader.problem(header, owner: page) {
                close(fd)
                throw ForeignError("\(path): header \(problem) (salvage is not part of this writer)")
            }
            view = LogView(fd: fd, identity: try fstatFD(fd), end: ForeignHeader.size)
            let size = Int(try fstatFD(fd).size)
            view.anchor = ForeignAnchor.of(try preadAll(fd, from: 0, to: min(size, ForeignHeader.size + 27)))
        }
        let size = Int(try fstatFD(view.fd).size)
        let tail = try preadAll(view.fd, from: view.end, to: size)
        lastReadBytes = tail.count
        // Scan the new bytes as a buffer that starts at `view.end`.
        let scan = ForeignFrame.scan(tail, from: 0, anchor: view.anchor)
        for f in scan.frames {
            let op = try OperationCodec.decode(Frame(type: f.type, payload: f.payload), base: view.end + f.offset + 9 - f.shift, path: path)
            guard op.body.isPageOperation else { throw ForeignError("a document operation in a page log") }
            let r = op.id.replica.rawValue
            // [LOG-2]: a replica's counters in one log are 1, 2, 3, … (everything here is in
            // causal order; a writer that buffers out-of-order operations would wait instead).
            guard op.id.counter == (view.clock[r] ?? 0) + 1 else {
                throw ForeignError("\(path): \(op.id) after counter \(view.clock[r] ?? 0)")
            }
            for (other, c) in op.context.entries where other != op.id.replica {
                guard (view.clock[other.rawValue] ?? 0) >= c else { throw ForeignError("\(op.id) waits for \(other).\(c)") }
            }
            view.clock[r] = op.id.counter
            view.ops.append(op)
        }
        let end = view.end + scan.end
        switch scan.tail {
        case .none: break
        case .damage(let at):
            throw ForeignError("\(path): damage at \(view.end + at) (salvage is not part of this writer)")
        case .torn:
            // [PKG-37] "truncated to the end of the last valid frame and synced before anything is appended"
            guard ftruncate(view.fd, off_t(end)) == 0 else { throw ForeignError("ftruncate", errno: errno) }
            guard fdatasync(view.fd) == 0 else { throw ForeignError("fdatasync", errno: errno) }
            lastCut = (end, size - end)
        }
        view.end = end
        view.identity = try fstatFD(view.fd)
        logs[page] = view
        return view
    }

    /// [PKG-32] A log "is created whole with its header by a durable replace ([PKG-20])".
    private func createLog(page: UUID) throws -> LogView {
        let pages = package + "/pages"
        if mkdir(pages, 0o755) == 0 {
            try syncDirectory(package)
        } else if errno != EEXIST {
            throw ForeignError("mkdir \(pages)", errno: errno)
        }
        var incarnation: UInt64 = 0
        while incarnation == 0 { incarnation = rng.next() }
        let header = ForeignHeader.encode(kind: ForeignHeader.pageKind, owner: page, incarnation: incarnation)
        let name = page.uuidString + ".log"
        let temporary = pages + "/." + name + ".tmp-" + hex(le64(rng.next()))
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw ForeignError("open \(temporary)", errno: errno) }
        do {
            try pwriteAll(fd, header, at: 0)
            guard fsync(fd) == 0 else { throw ForeignError("fsync", errno: errno) }
        } catch {
            close(fd)
            unlink(temporary)
            throw error
        }
        close(fd)
        guard rename(temporary, pages + "/" + name) == 0 else {
            let e = errno
            unlink(temporary)
            throw ForeignError("rename", errno: e)
        }
        try syncDirectory(pages)
        let log = open(pages + "/" + name, O_RDWR | O_CLOEXEC)
        guard log >= 0 else { throw ForeignError("open \(name)", errno: errno) }
        let view = LogView(fd: log, identity: try fstatFD(log), end: ForeignHeader.size)
        logs[page] = view
        return view
    }

    // MARK: [PKG-84] steps 3 and 4

    /// Under a hold the caller took: brings the page up to date, allocates one id per
    /// stroke, writes the frames at the log's end and makes them durable. With `dieAfter`
    /// the writer is killed during the write: only that many bytes of the frames reach the
    /// file, nothing is synced, and the process's memory (its views of the logs) is gone.
    @discardableResult
    func append(_ strokes: [Stroke], to page: UUID, under hold: Hold, dieAfter: Int? = nil) throws -> [Op] {
        try refreshReplica()
        var view = try catchUp(page: page) ?? createLog(page: page)
        let replica = ReplicaID(replica)
        var ops: [Op] = []
        var bytes: [UInt8] = []
        var clock = view.clock
        for s in strokes {
            // "allocates the operation's counter (clock[replica] + 1) and Lamport timestamp
            // from that state": [LOG-4] the Lamport timestamp is the number of operations
            // the author had applied in that log, plus one.
            let counter = (clock[replica.rawValue] ?? 0) + 1
            let lamport = clock.values.reduce(0, +) + 1
            let context = VectorClock(clock.map { (ReplicaID($0.key), $0.value) })
            // [MERGE-10] "On top": layer = the operation's Lamport timestamp.
            let op = Op(id: OpID(replica: replica, counter: counter), lamport: lamport, context: context,
                        wallTime: wallTime, body: .add(.stroke(s), z: ZKey(layer: Int64(lamport))))
            wallTime += 1
            ops.append(op)
            bytes += ForeignFrame.encode(op)
            clock[replica.rawValue] = counter
        }
        if let dieAfter {
            try pwriteAll(view.fd, Array(bytes.prefix(dieAfter)), at: view.end)
            for (_, v) in logs { close(v.fd) }
            logs = [:]
            replicaIdentity = nil
            return ops
        }
        // [PKG-34] "pwrite at the offset just past the last good frame and then fdatasync"
        do {
            try pwriteAll(view.fd, bytes, at: view.end)
            guard fdatasync(view.fd) == 0 else { throw ForeignError("fdatasync", errno: errno) }
        } catch {
            _ = ftruncate(view.fd, off_t(view.end))
            throw error
        }
        view.end += bytes.count
        view.clock = clock
        view.ops += ops
        view.identity = try fstatFD(view.fd)
        logs[page] = view
        return ops
    }

    /// One whole section: lock, append, release.
    @discardableResult
    func append(_ strokes: [Stroke], to page: UUID) throws -> [Op] {
        let hold = try lock()
        defer { release(hold) }
        return try append(strokes, to: page, under: hold)
    }

    deinit { for (_, v) in logs { close(v.fd) } }
}

// MARK: - Tests

@Suite("Another implementation writing beside lnote, from document-package.md §10 alone")
struct ForeignWriterTests {
    @Test("[PKG-30] [LOG-10] the foreign writer's CRC-32C, header and frame give the spec's test vectors")
    func specVectors() throws {
        #expect(ForeignCRC.checksum(Array("123456789".utf8)) == 0xE306_9283)
        let header = ForeignHeader.encode(kind: 1, owner: UUID(uuidString: "00112233-4455-6677-8899-AABBCCDDEEFF")!,
                                          incarnation: 0x0102_0304_0506_0708)
        #expect(hex(header) == "4c4e4f54454c4f47" + "0100" + "01" + "00" + "00112233445566778899aabbccddeeff" + "0807060504030201" + "13f643cd")
        // operation-log.md §3's move vector: the frame built from its payload bytes.
        let payload = unhex("b200000000000000 01 02 e8a7abfef962 01 a100000000000000 01 01 a100000000000000 01 00 64 00")
        #expect(hex(ForeignFrame.encode(type: 0x04, payload: payload)) == "28000000" + "169e641c" + "04" + hex(payload))
        // And the foreign frames are byte for byte lnote's add form of the same operation
        // (lnote itself writes the addStroke form; both decode to the operation).
        let op = Op(id: OpID(replica: ReplicaID(0xA1), counter: 3), lamport: 3, context: VectorClock([(ReplicaID(0xA1), UInt64(2))]),
                    wallTime: 1_700_000_000_000, body: .add(.stroke(marked(7)), z: ZKey(layer: 3)))
        #expect(ForeignFrame.encode(op) == OperationCodec.encode(op, form: .hash))
        #expect(try OperationCodec.decode(Frame.decodeAll(ForeignFrame.encode(op))[0]) == op)
    }

    @Test("[PKG-84] [PKG-80] [PKG-87] a foreign writer appends under the document lock; lnote's next read shows its operations with their ids, and lnote's next counter follows them")
    func foreignAppendsAreSeen() async throws {
        let dir = try TempDir("foreign")
        defer { dir.remove() }
        let nb = try await openNotebook(dir.path)
        let d = try await nb.createDocument(title: "Foreign")
        let p = try #require(await d.pageList.first?.id)
        var ids: [ElementID] = []
        for m in 1...3 { ids.append(try await d.addStroke(marked(m), to: p)) }
        #expect(try await d.elements(p).compactMap(marker(of:)) == [1, 2, 3])

        let fw = ForeignWriter(folder: dir.path, document: d.id)
        let written = try fw.append([marked(101), marked(102)], to: p.uuid)
        #expect(fw.replica == nb.replica.rawValue, "replica.json names the folder's id")
        #expect(written.map(\.id) == [OpID(replica: nb.replica, counter: 4), OpID(replica: nb.replica, counter: 5)])
        #expect(written.map(\.lamport) == [4, 5])

        let seen = try await d.elements(p)
        #expect(seen.compactMap(marker(of:)) == [1, 2, 3, 101, 102])
        #expect(seen.map(\.id) == ids + written.map(\.id))
        let own = try await d.addStroke(marked(4), to: p)
        #expect(own == OpID(replica: nb.replica, counter: 6), "no id allocated twice")
        #expect(try await d.elements(p).compactMap(marker(of:)) == [1, 2, 3, 101, 102, 4])

        // The log as a third party reads it: counters 1…6 in log order, Lamport = counter.
        let log = try fw.readOnly(page: p.uuid)
        #expect(log.ops.map(\.id.counter) == Array(1...UInt64(6)))
        #expect(log.ops.map(\.lamport) == Array(1...UInt64(6)))
        #expect(log.end == log.size)
        let open = try Verify.run(folder: dir.path)
        #expect(open.problems.isEmpty, "\(open.problems)")
        try await nb.close()
        let closed = try Verify.run(folder: dir.path)
        #expect(closed.problems.isEmpty, "\(closed.problems)")
    }

    @Test("[PKG-81] [PKG-82] lnote's append waits for the lock a foreign writer holds, and completes once it is released; with a short lockTimeout it fails with invalidState naming the lock file")
    func lnoteWaitsForTheForeignLock() async throws {
        let dir = try TempDir("foreignlock")
        defer { dir.remove() }
        let nb = try await openNotebook(dir.path, options: testOptions { $0.lockTimeout = .seconds(8) })
        let d = try await nb.createDocument(title: "Held")
        let p = try #require(await d.pageList.first?.id)
        try await d.addStroke(marked(1), to: p)
        let fw = ForeignWriter(folder: dir.path, document: d.id)
        let logPath = fw.logPath(p.uuid)
        let sizeBefore = try #require(try statPath(logPath)).size

        let hold = try fw.lock()
        let done = Mutex<ContinuousClock.Instant?>(nil)
        let clock = ContinuousClock()
        let writer = Task {
            let id = try await d.addStroke(marked(2), to: p)
            done.withLock { $0 = ContinuousClock.now }
            return id
        }
        try await Task.sleep(for: .milliseconds(600))
        #expect(done.withLock { $0 } == nil, "lnote appended while the foreign writer held the lock")
        #expect(try #require(try statPath(logPath)).size == sizeBefore, "lnote wrote the log without the lock")
        // Still holding the lock, the foreign writer appends: lnote must see it before it allocates.
        let foreign = try fw.append([marked(101)], to: p.uuid, under: hold)
        #expect(foreign.map(\.id.counter) == [2])
        let released = clock.now
        fw.release(hold)
        let id = try await writer.value
        #expect(try #require(done.withLock { $0 }) >= released, "completed only after the release")
        #expect(id == OpID(replica: nb.replica, counter: 3))
        #expect(try await d.elements(p).compactMap(marker(of:)) == [1, 101, 2])

        // A lock never released: a bounded wait, then invalidState naming the lock file.
        let impatient = try await openNotebook(dir.path, options: testOptions { $0.lockTimeout = .milliseconds(300) })
        let di = try await impatient.openDocument(d.id)
        let stuck = try fw.lock()
        let t0 = clock.now
        do {
            try await di.addStroke(marked(3), to: p)
            Issue.record("an append went through while the foreign writer held the lock")
        } catch let e as LnoteError {
            #expect(e.code == .invalidState, "\(e)")
            #expect(e.path.map { $0.hasSuffix("/\(d.id).lnote/lock") } == true, "names the lock file: \(e)")
        }
        let waited = clock.now - t0
        #expect(waited >= .milliseconds(280) && waited < .seconds(5), "waited \(waited)")
        fw.release(stuck)
        try await impatient.close()
        try await nb.close()
        let report = try Verify.run(folder: dir.path)
        #expect(report.problems.isEmpty, "\(report.problems)")
    }

    @Test("[PKG-84] [PKG-37] [PKG-85] a foreign writer killed mid-append leaves a partial frame: lnote readers see whole frames only, lnote's next append cuts it")
    func partialFrameOfAForeignWriter() async throws {
        let dir = try TempDir("foreigntorn")
        defer { dir.remove() }
        let nb = try await openNotebook(dir.path)
        let d = try await nb.createDocument(title: "Torn")
        let p = try #require(await d.pageList.first?.id)
        try await d.addStroke(marked(1), to: p)
        try await d.addStroke(marked(2), to: p)
        #expect(try await d.elements(p).compactMap(marker(of:)) == [1, 2])

        // Two frames in one append; the writer dies with the first whole and half of the second.
        let fw = ForeignWriter(folder: dir.path, document: d.id)
        let hold = try fw.lock()
        let first = ForeignFrame.encode(Op(id: OpID(replica: nb.replica, counter: 3), lamport: 3,
                                           context: VectorClock([(nb.replica, UInt64(2))]), wallTime: fw.wallTime,
                                           body: .add(.stroke(marked(101)), z: ZKey(layer: 3))))
        let ops = try fw.append([marked(101), marked(102)], to: p.uuid, under: hold, dieAfter: first.count + 20)
        fw.release(hold)  // the kernel's doing, when a process dies
        #expect(ForeignFrame.encode(ops[0]) == first)
        let logPath = fw.logPath(p.uuid)
        let size = try #require(try statPath(logPath)).size

        // Readers: the handle that had the page loaded, and a fresh process.
        #expect(try await d.elements(p).compactMap(marker(of:)) == [1, 2, 101])
        let reader = try await openNotebook(dir.path)
        let dr = try await reader.openDocument(d.id)
        #expect(try await dr.elements(p).compactMap(marker(of:)) == [1, 2, 101])
        #expect(try #require(try statPath(logPath)).size == size, "a reader cut the tail")

        // lnote's next append, under the lock: the partial frame is cut, then the append.
        let id = try await d.addStroke(marked(3), to: p)
        #expect(id == OpID(replica: nb.replica, counter: 4), "the dead writer's unfinished id is free again")
        let reports = await d.recoveryReports
        #expect(reports.contains { $0.tornTail?.bytes == 20 }, "\(reports)")
        #expect(try await d.elements(p).compactMap(marker(of:)) == [1, 2, 101, 3])
        // The reader had read only whole frames: it reads the new one where the partial was.
        #expect(try await dr.elements(p).compactMap(marker(of:)) == [1, 2, 101, 3])
        let log = try fw.readOnly(page: p.uuid)
        #expect(log.ops.map(\.id.counter) == [UInt64(1), 2, 3, 4])
        #expect(log.end == log.size)
        try await reader.close()
        try await nb.close()
        let report = try Verify.run(folder: dir.path)
        #expect(report.problems.isEmpty, "\(report.problems)")
    }

    @Test("[PKG-84] [PKG-87] [LOG-2] 50 rounds of foreign and lnote appends to one page in seeded order: each operation once, counters 1…N in log order, the same elements after reopening")
    func interleavedAppends() async throws {
        let seed = testSeed()
        print("seed \(seed) (LNOTE_SEED=\(seed) reruns it)")
        var rng = SeededRNG(seed: seed)
        let dir = try TempDir("foreignmix")
        defer { dir.remove() }
        let nb = try await openNotebook(dir.path)
        let d = try await nb.createDocument(title: "Mix")
        let p = try await d.addPage()
        let fw = ForeignWriter(folder: dir.path, document: d.id, seed: seed)
        var expected: [Int] = []
        var next = 1
        var rounds: [String] = []
        for _ in 0..<50 {
            let foreign = rng.int(in: 0...1) == 0
            let batch = (0..<(1 + rng.int(in: 0...2))).map { _ in defer { next += 1 }; return foreign ? 10_000 + next : next }
            rounds.append((foreign ? "F" : "L") + "\(batch.count)")
            if foreign {
                try fw.append(batch.map(marked), to: p.uuid)
            } else {
                _ = try await d.addStrokes(batch.map(marked), to: p)
            }
            expected += batch
            switch rng.int(in: 0...9) {
            case 0...3:
                let seen = try await d.elements(p).compactMap(marker(of:))
                #expect(seen == expected, "seed \(seed), rounds \(rounds)")
            case 4: try await d.flush()  // a snapshot under the lock, between foreign appends
            default: break
            }
        }
        print("rounds: \(rounds.joined(separator: " "))")
        // lnote only ever appended ([PKG-32]): the foreign writer read the log from its header
        // at most once (when lnote created it), then only the bytes past what it had read.
        #expect(fw.fullReads <= 1, "seed \(seed)")
        let n = UInt64(expected.count)
        let elements = try await d.elements(p)
        #expect(elements.compactMap(marker(of:)) == expected, "seed \(seed)")
        #expect(Set(elements.compactMap(marker(of:))).count == expected.count, "each operation once")
        let ops = try await d.operations(page: p, notCoveredBy: VectorClock())
        #expect(ops.map(\.id.counter) == Array(1...n), "seed \(seed)")
        #expect(Set(ops.map(\.id.replica)) == [nb.replica])
        let log = try fw.readOnly(page: p.uuid)
        #expect(log.ops.map(\.id.counter) == Array(1...n), "seed \(seed)")
        #expect(log.ops.map(\.lamport) == Array(1...n), "[LOG-4] one replica: Lamport = counter")
        #expect(log.end == log.size)
        try await nb.close()

        let again = try await openNotebook(dir.path)
        let da = try await again.openDocument(d.id)
        #expect(try await da.elements(p) == elements, "seed \(seed)")
        try await again.close()
        let report = try Verify.run(folder: dir.path)
        #expect(report.problems.isEmpty, "seed \(seed): \(report.problems)")
    }

    @Test("[PKG-85] [PKG-32] [PKG-87] a page with no files: the foreign writer creates its log, lnote reads it and appends after it")
    func foreignWriterCreatesTheLog() async throws {
        let dir = try TempDir("foreigncreate")
        defer { dir.remove() }
        let nb = try await openNotebook(dir.path)
        let d = try await nb.createDocument(title: "Empty page")
        let p = try await d.addPage()
        #expect(try await d.elements(p).isEmpty)  // loaded while it has no log
        let fw = ForeignWriter(folder: dir.path, document: d.id)
        #expect(try statPath(fw.logPath(p.uuid)) == nil, "the new page has no log yet")
        let ops = try fw.append([marked(101)], to: p.uuid)
        #expect(ops.map(\.id) == [OpID(replica: nb.replica, counter: 1)])
        #expect(try await d.elements(p).compactMap(marker(of:)) == [101], "the log that appeared is read")
        let id = try await d.addStroke(marked(1), to: p)
        #expect(id == OpID(replica: nb.replica, counter: 2))
        try fw.append([marked(102)], to: p.uuid)
        #expect(fw.lastReadBytes > 0, "the foreign writer read lnote's frame")
        #expect(try await d.elements(p).compactMap(marker(of:)) == [101, 1, 102])
        try await nb.close()
        let report = try Verify.run(folder: dir.path)
        #expect(report.problems.isEmpty, "\(report.problems)")
    }
}
