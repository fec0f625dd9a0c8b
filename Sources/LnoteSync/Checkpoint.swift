import LnoteModel

/// A log's snapshot with the clock it covers, kept by a relay so that a newcomer installs
/// it and then pulls only the operations after it (`Protocol/sync-protocol.md` §5).
///
/// Body layout (integers little-endian):
///
/// | Offset | Size | Description |
/// |---|---|---|
/// | 0 | 4 | magic `LNCP` |
/// | 4 | 1 | version (1) |
/// | 5 | 17 or 33 | `LogRef` (§3) |
/// | … | … | `VectorClock` (entry count varint, then replica u64 + counter varint each) |
/// | … | varint | snapshot length L, at most `maxSnapshotSize` |
/// | … | L | snapshot bytes (a page snapshot, or `document.json` for a document log) |
/// | … | 4 | CRC-32C (u32) of every byte before it |
///
/// A body is valid if and only if it decodes completely with no trailing bytes and its
/// CRC matches. The snapshot itself is opaque here: whoever installs it decodes it.
public struct Checkpoint: Sendable, Equatable {
    public var log: LogRef
    /// The operations of `log` the snapshot includes.
    public var clock: VectorClock
    public var snapshot: [UInt8]

    public init(log: LogRef, clock: VectorClock, snapshot: [UInt8]) {
        self.log = log
        self.clock = clock
        self.snapshot = snapshot
    }

    public static let magic: [UInt8] = Array("LNCP".utf8)
    public static let listMagic: [UInt8] = Array("LNCL".utf8)
    public static let version: UInt8 = 1
    /// Largest snapshot accepted (the largest body either side accepts).
    public static let maxSnapshotSize = SyncCodec.maxBodySize
    /// The smallest valid body: magic, version, a document `LogRef`, an empty clock, a zero
    /// length, the CRC.
    public static let minEncodedSize = 4 + 1 + 17 + 1 + 1 + 4

    /// The checkpoint body.
    public func encoded() -> [UInt8] {
        var w = ByteWriter(capacity: 64 + snapshot.count)
        w.append(Self.magic)
        w.u8(Self.version)
        SyncCodec.encode(log, into: &w)
        ElementCodec.encode(clock, into: &w)
        w.lengthPrefixed(snapshot)
        w.u32(CRC32C.checksum(w.bytes))
        return w.bytes
    }

    /// Decodes a checkpoint body.
    ///
    /// - Throws: `.truncated` when the bytes end inside a field, `.corrupt` for a bad magic,
    ///   log kind, clock, CRC mismatch or trailing bytes, `.unsupportedVersion` for another
    ///   version, `.limitExceeded` for a snapshot length over the limit. Offsets are absolute
    ///   (plus `base`).
    public static func decode(_ bytes: [UInt8], base: Int = 0, path: String? = nil) throws -> Checkpoint {
        var r = ByteReader(bytes, base: base, path: path)
        return try decode(&r)
    }

    /// Decodes one checkpoint body that spans exactly the rest of `r`.
    static func decode(_ r: inout ByteReader) throws -> Checkpoint {
        let start = r.position
        let m = try r.bytes(4, "checkpoint magic")
        guard m == magic else { throw r.error(.corrupt, "not a checkpoint (bad magic)", at: r.offset - 4) }
        let at = r.offset
        let v = try r.u8("checkpoint version")
        guard v == version else {
            throw LnoteError(.unsupportedVersion, "checkpoint version \(v); this build reads \(version)",
                             path: r.path, offset: at)
        }
        let log = try SyncCodec.decodeLog(&r)
        let clock = try ElementCodec.decodeClock(&r)
        // The length is capped before anything is allocated; `bytes` checks what remains.
        let snapshot = try r.lengthPrefixed("snapshot", max: maxSnapshotSize)
        let crcAt = r.offset
        let crcEnd = r.position
        let stored = try r.u32("checkpoint CRC")
        try r.expectEnd("checkpoint")
        let computed = r.bytes.withUnsafeBytes { CRC32C.update(0, UnsafeRawBufferPointer(rebasing: $0[start..<crcEnd])) }
        guard stored == computed else {
            throw r.error(.corrupt, "checkpoint CRC mismatch (stored \(stored), computed \(computed))", at: crcAt)
        }
        return Checkpoint(log: log, clock: clock, snapshot: snapshot)
    }

    /// The body of `GET …/checkpoints`: magic `LNCL`, version 1, varint count n, then n ×
    /// (varint length L, L bytes of one checkpoint body). Each checkpoint carries its own CRC.
    public static func encodeList(_ list: [Checkpoint]) -> [UInt8] {
        var w = ByteWriter(capacity: 16)
        w.append(listMagic)
        w.u8(version)
        w.varint(UInt64(list.count))
        for c in list { w.lengthPrefixed(c.encoded()) }
        return w.bytes
    }

    /// Decodes a checkpoint list; every checkpoint is checked as `decode` checks one.
    public static func decodeList(_ bytes: [UInt8], path: String? = nil) throws -> [Checkpoint] {
        var r = ByteReader(bytes, path: path)
        let m = try r.bytes(4, "checkpoint list magic")
        guard m == listMagic else { throw r.error(.corrupt, "not a checkpoint list (bad magic)", at: 0) }
        let at = r.offset
        let v = try r.u8("checkpoint list version")
        guard v == version else {
            throw LnoteError(.unsupportedVersion, "checkpoint list version \(v); this build reads \(version)",
                             path: path, offset: at)
        }
        // Each entry takes at least a one-byte length and a minimal body.
        let n = try r.count("checkpoint count", minSize: 1 + minEncodedSize)
        var out: [Checkpoint] = []
        out.reserveCapacity(n)
        for i in 0..<n {
            let len = try r.count("checkpoint length", minSize: 1)
            let range = try r.skip(len, "checkpoint")
            var inner = ByteReader(bytes, range: range, base: r.base, path: path)
            do {
                out.append(try decode(&inner))
            } catch var e as LnoteError {
                e.index = i
                throw e
            }
        }
        try r.expectEnd("checkpoint list")
        return out
    }
}
