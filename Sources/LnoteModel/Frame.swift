/// The record framing shared by journals on disk and operations on the wire:
///
/// | Offset | Size | Description |
/// |---|---|---|
/// | 0 | 4 | `length`: u32 LE, bytes after the CRC field (type + payload), 1...`maxLength` |
/// | 4 | 4 | `crc`: CRC-32C (u32 LE) of bytes 0..<4 (the length field) followed by bytes 8..<8+length |
/// | 8 | 1 | `type` |
/// | 9 | length−1 | `payload` |
///
/// A frame is valid if and only if its length is in range, all its bytes are present,
/// and its CRC matches. Covering the length field by the CRC means a flipped length bit
/// is detected instead of sending the reader to a wrong boundary.
public struct Frame: Hashable, Sendable {
    public var type: UInt8
    public var payload: [UInt8]
    public init(type: UInt8, payload: [UInt8]) {
        self.type = type
        self.payload = payload
    }

    /// The type and the payload's bytes in one call: the synthesized hash fed the payload
    /// to the hasher a byte at a time, which made sets of pushed frames (a folder sync's
    /// receiving side) a quarter of its work.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(type)
        hasher.combine(payload.count)
        payload.withUnsafeBytes { hasher.combine(bytes: $0) }
    }

    public static let headerSize = 8
    /// Largest `length`: 16 MiB (a frame is one operation). A stroke near the point limit can
    /// exceed it in one form and not the other: writers check (`fits`, operation-log.md
    /// [LOG-26]).
    public static let maxLength = 16 << 20

    /// Whether a frame's `length` (type + payload) is at most `maxLength`.
    public var fits: Bool { 1 + payload.count <= Frame.maxLength }

    /// Whether an encoded frame of `count` bytes (header included) has a `length` of at most
    /// `maxLength`.
    public static func fits(encodedCount count: Int) -> Bool { count - headerSize <= maxLength }

    /// Appends the encoded frame to `out`.
    public func encode(into out: inout ByteWriter) {
        Frame.encode(type: type, into: &out) { $0.append(payload) }
    }

    public var encoded: [UInt8] {
        Frame.encoded(type: type, payloadCapacity: payload.count) { $0.append(payload) }
    }

    /// Appends a frame of `type` whose payload `writePayload` appends, without building the
    /// payload apart: the length and CRC are filled in afterwards.
    public static func encode(type: UInt8, into out: inout ByteWriter, payload writePayload: (inout ByteWriter) -> Void) {
        let start = out.count
        out.u32(0)
        out.u32(0)
        out.u8(type)
        writePayload(&out)
        out.patchU32(UInt32(out.count - start - headerSize), at: start)
        let crc = out.bytes.withUnsafeBytes { raw in
            let c = CRC32C.update(0, UnsafeRawBufferPointer(rebasing: raw[start..<start + 4]))
            return CRC32C.update(c, UnsafeRawBufferPointer(rebasing: raw[(start + headerSize)...]))
        }
        out.patchU32(crc, at: start + 4)
    }

    /// The bytes of one frame (see `encode(type:into:payload:)`); `payloadCapacity` is a
    /// guess of the payload's size, so that the buffer rarely grows.
    public static func encoded(type: UInt8, payloadCapacity: Int, payload writePayload: (inout ByteWriter) -> Void) -> [UInt8] {
        var w = ByteWriter(capacity: headerSize + 1 + payloadCapacity)
        encode(type: type, into: &w, payload: writePayload)
        return w.bytes
    }

    public var encodedSize: Int { Frame.headerSize + 1 + payload.count }

    /// What `scan` found at one position.
    public enum ScanResult: Sendable, Equatable {
        /// A valid frame occupying `range` (header included).
        case frame(Frame, range: Range<Int>)
        /// The bytes end inside a frame (or its header): a torn tail.
        case truncated(at: Int)
        /// Bytes that are not a valid frame (bad length or CRC mismatch).
        case corrupt(at: Int, reason: String)
        case end
    }

    /// Reads the frame starting at `position` in `bytes` (never trusting the length field
    /// beyond the bytes present).
    ///
    /// `chain`: in a log with an anchor (`LogAnchor`), the anchor's `chainSeed`, where the CRC
    /// of a log-form frame (type 0x8A) starts. Without one such a frame is never valid: its
    /// CRC cannot be checked, and its operation could not be attributed.
    public static func scan(_ bytes: [UInt8], at position: Int, chain: UInt32? = nil) -> ScanResult {
        switch check(bytes, at: position, chain: chain) {
        case .valid(let range):
            let frame = Frame(type: bytes[position + 8], payload: Array(bytes[(position + 9)..<range.upperBound]))
            return .frame(frame, range: range)
        case .truncated(let at): return .truncated(at: at)
        case .corrupt(let at, let reason): return .corrupt(at: at, reason: reason)
        case .end: return .end
        }
    }

    /// What `scan` finds, without copying the payload: a valid frame's range (header
    /// included), or what is there instead.
    public enum CheckResult: Sendable, Equatable {
        case valid(Range<Int>)
        case truncated(at: Int)
        case corrupt(at: Int, reason: String)
        case end
    }

    /// `scan` without building the frame.
    public static func check(_ bytes: [UInt8], at position: Int, chain: UInt32? = nil) -> CheckResult {
        let n = bytes.count
        if position >= n { return .end }
        guard n - position >= headerSize + 1 else { return .truncated(at: position) }
        let length = Int(UInt32(bytes[position]) | UInt32(bytes[position + 1]) << 8
            | UInt32(bytes[position + 2]) << 16 | UInt32(bytes[position + 3]) << 24)
        guard length >= 1, length <= maxLength else {
            return .corrupt(at: position, reason: "frame length \(length) out of range")
        }
        let end = position + headerSize + length
        guard end <= n else {
            // Only a cut file looks like this; but a corrupt length also does. The caller
            // decides by where it is (a tail) — see `Protocol/operation-log.md`.
            return .truncated(at: position)
        }
        let stored = UInt32(bytes[position + 4]) | UInt32(bytes[position + 5]) << 8
            | UInt32(bytes[position + 6]) << 16 | UInt32(bytes[position + 7]) << 24
        let seed: UInt32
        if bytes[position + 8] == LogAnchor.logFormAddStroke3 {
            guard let chain else {
                return .corrupt(at: position, reason: "a log-form frame (type 0x8a) where no log anchor is in effect")
            }
            seed = chain
        } else {
            seed = 0
        }
        let crc = bytes.withUnsafeBytes { raw -> UInt32 in
            let c = CRC32C.update(seed, UnsafeRawBufferPointer(rebasing: raw[position..<position + 4]))
            return CRC32C.update(c, UnsafeRawBufferPointer(rebasing: raw[(position + 8)..<end]))
        }
        guard crc == stored else {
            return .corrupt(at: position, reason: "CRC mismatch (stored \(hex32(stored)), computed \(hex32(crc)))")
        }
        return .valid(position..<end)
    }

    /// Decodes a buffer that must hold only whole valid frames (a wire body section).
    /// Throws `truncated` or `corrupt` naming the offset (plus `base`) and frame index.
    public static func decodeAll(_ bytes: [UInt8], base: Int = 0, path: String? = nil) throws -> [Frame] {
        var out: [Frame] = []
        var at = 0
        while true {
            switch scan(bytes, at: at) {
            case .end: return out
            case .frame(let f, let r):
                out.append(f)
                at = r.upperBound
            case .truncated(let p):
                throw LnoteError(.truncated, "frame cut off", path: path, offset: base + p, index: out.count)
            case .corrupt(let p, let why):
                throw LnoteError(.corrupt, why, path: path, offset: base + p, index: out.count)
            }
        }
    }
}

func hex32(_ v: UInt32) -> String {
    let s = String(v, radix: 16)
    return "0x" + String(repeating: "0", count: 8 - s.count) + s
}
