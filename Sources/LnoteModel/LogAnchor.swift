/// The anchor of a version-2 page log, and the *log form* of the `addStroke3` frames of its
/// writer (document-package.md [PKG-110]–[PKG-114], operation-log.md §3.4 [LOG-33]).
///
/// A log's add-stroke frames are mostly one replica's, and each carried that replica's
/// 8-byte id and a 6-byte wall time: on real pens (short strokes of about 15 points) a fifth
/// of the frame. An anchor, the first frame of a version-2 page log, names a *writer* and a
/// *base wall time* once; a log-form frame (type 0x8A) is the writer's `addStroke3` frame
/// without the replica id and with its wall time written relative to the base.
///
/// A log-form frame cannot be read without its anchor, so its CRC starts from the anchor's:
/// the CRC-32C of the anchor frame's CRC field (4 bytes, as stored) followed by the frame's
/// length field, type and payload. A frame read against another anchor, or with none, fails
/// its CRC like damage, and is never given to another writer. Readers expand log-form frames
/// into the `addStroke3` frames they stand for (`expand`), so that everything past the scan
/// of a log (replay, sync, the wire) sees standard frames only; a log-form frame never
/// travels.
public struct LogAnchor: Hashable, Sendable {
    /// The anchor frame's type: log-only, never an operation.
    public static let type: UInt8 = 0x30
    /// The log form of `addStroke3` (0x0A).
    public static let logFormAddStroke3: UInt8 = 0x8A
    static let addStroke3: UInt8 = 0x0A
    /// An anchor frame's largest size: header, type, writer, a 10-byte svarint.
    public static let maxFrameSize = Frame.headerSize + 1 + 8 + 10
    /// The largest counter a log-form frame may carry (operation-log.md [LOG-4]'s bound).
    static let maxCounter: UInt64 = 1 << 62

    /// The replica whose `addStroke3` frames this log may hold in log form; never 0.
    public let writer: UInt64
    /// What log-form frames' wall times are relative to (ms since 1970).
    public let baseWallTime: Int64
    /// The anchor frame's bytes as written (a standard frame of type 0x30).
    public let frame: [UInt8]
    /// The CRC-32C of the anchor's CRC field: where a log-form frame's CRC starts.
    public let chainSeed: UInt32

    /// The anchor naming `writer` (non-zero) and `baseWallTime`.
    public init(writer: UInt64, baseWallTime: Int64) {
        precondition(writer != 0, "an anchor's writer is a replica id, never 0")
        self.writer = writer
        self.baseWallTime = baseWallTime
        frame = Frame.encoded(type: LogAnchor.type, payloadCapacity: 18) { w in
            w.u64(writer)
            w.svarint(baseWallTime)
        }
        chainSeed = frame.withUnsafeBytes { CRC32C.update(0, UnsafeRawBufferPointer(rebasing: $0[4..<8])) }
    }

    /// The anchor a valid frame holds, or nil when it is not one: another type, a zero
    /// writer, a wall time not in its shortest form, bytes after it.
    public static func parse(_ frame: Frame) -> LogAnchor? {
        guard frame.type == type else { return nil }
        var r = ByteReader(frame.payload)
        r.shortestVarints = true
        guard let writer = try? r.u64("writer"), writer != 0, let base = try? r.svarint("base wall time"), r.isAtEnd else {
            return nil
        }
        return LogAnchor(writer: writer, baseWallTime: base)
    }

    /// The log form of `encoded`, a whole standard frame, when it is an `addStroke3` of this
    /// anchor's writer whose wall time differs from the base by an amount an svarint holds;
    /// nil otherwise (the frame is then written as it is).
    public func logForm(_ encoded: [UInt8]) -> [UInt8]? {
        let h = Frame.headerSize
        guard encoded.count > h + 9, encoded[h] == LogAnchor.addStroke3 else { return nil }
        var r = ByteReader(encoded, range: (h + 1)..<encoded.count)
        r.shortestVarints = true
        guard let replica = try? r.u64(), replica == writer, let counter = try? r.varint(), counter != 0,
              counter <= LogAnchor.maxCounter, let wall = try? r.svarint() else { return nil }
        let (delta, overflow) = wall.subtractingReportingOverflow(baseWallTime)
        guard !overflow else { return nil }
        let rest = r.offset
        var w = ByteWriter(capacity: encoded.count)
        w.u32(0)
        w.u32(0)
        w.u8(LogAnchor.logFormAddStroke3)
        w.varint(counter)
        w.svarint(delta)
        w.append(encoded[rest...])
        w.patchU32(UInt32(w.count - h), at: 0)
        let crc = w.bytes.withUnsafeBytes { raw in
            let c = CRC32C.update(chainSeed, UnsafeRawBufferPointer(rebasing: raw[0..<4]))
            return CRC32C.update(c, UnsafeRawBufferPointer(rebasing: raw[h...]))
        }
        w.patchU32(crc, at: 4)
        return w.bytes
    }

    /// The `addStroke3` frame a valid log-form frame's payload stands for, and how many bytes
    /// longer the expanded payload's header is than the log form's (its fields after the wall
    /// time are the same bytes): nil when the counter or the wall time is not in its shortest
    /// form, the counter is 0 or above 2⁶², the wall time overflows, or the expanded frame
    /// would be longer than a frame may be (`Frame.maxLength`: it could not be sent). Such a
    /// frame is left as it is (type 0x8A), which every operation decoder refuses as an
    /// unknown type.
    public func expand(_ payload: [UInt8]) -> (frame: Frame, shift: Int)? {
        expand(payload, payload: 0..<payload.count)
    }

    /// `expand` of the payload at `range` of `bytes` (a log read whole: no copy of it first).
    public func expand(_ bytes: [UInt8], payload range: Range<Int>) -> (frame: Frame, shift: Int)? {
        var r = ByteReader(bytes, range: range)
        guard let (counter, wall, shift) = logFormHeader(&r, payloadCount: range.count) else { return nil }
        let rest = r.offset
        var w = ByteWriter(capacity: range.count + shift)
        w.u64(writer)
        w.varint(counter)
        w.svarint(wall)
        w.append(bytes[rest..<range.upperBound])
        return (Frame(type: LogAnchor.addStroke3, payload: w.bytes), shift)
    }

    /// The header of a log-form frame's payload of `payloadCount` bytes, read from `r` (which
    /// is left just past it, at the fields the two forms share): its counter, its wall time,
    /// and the bytes the `addStroke3` header it stands for is longer by (writer, counter and
    /// wall time in full); nil on `expand`'s conditions.
    package func logFormHeader(_ r: inout ByteReader, payloadCount: Int) -> (counter: UInt64, wall: Int64, shift: Int)? {
        r.shortestVarints = true
        let start = r.offset
        guard let counter = try? r.varint(), counter != 0, counter <= LogAnchor.maxCounter,
              let delta = try? r.svarint() else { return nil }
        let (wall, overflow) = baseWallTime.addingReportingOverflow(delta)
        guard !overflow else { return nil }
        let shift = 8 + ByteWriter.varintSize(counter) + ByteWriter.varintSize(zigzag(wall)) - (r.offset - start)
        guard 1 + payloadCount + shift <= Frame.maxLength else { return nil }
        return (counter, wall, shift)
    }
}
