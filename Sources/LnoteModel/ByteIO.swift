/// Appends little-endian integers, varints and byte strings to a growing buffer.
public struct ByteWriter: Sendable {
    public private(set) var bytes: [UInt8]

    public init(capacity: Int = 0) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    public var count: Int { bytes.count }

    public mutating func u8(_ v: UInt8) { bytes.append(v) }
    public mutating func u16(_ v: UInt16) { le(v) }
    public mutating func u32(_ v: UInt32) { le(v) }
    public mutating func u64(_ v: UInt64) { le(v) }
    public mutating func i32(_ v: Int32) { le(UInt32(bitPattern: v)) }
    public mutating func i64(_ v: Int64) { le(UInt64(bitPattern: v)) }

    @inline(__always) private mutating func le<T: FixedWidthInteger>(_ v: T) {
        var x = v.littleEndian
        withUnsafeBytes(of: &x) { bytes.append(contentsOf: $0) }
    }

    /// LEB128 unsigned varint (1 to 10 bytes).
    public mutating func varint(_ v: UInt64) {
        var x = v
        while x >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: x) | 0x80)
            x >>= 7
        }
        bytes.append(UInt8(x))
    }

    /// Zigzag-encoded signed varint.
    public mutating func svarint(_ v: Int64) { varint(zigzag(v)) }

    /// The bytes `varint(v)` writes: 1 to 10.
    public static func varintSize(_ v: UInt64) -> Int { v == 0 ? 1 : (64 - v.leadingZeroBitCount + 6) / 7 }

    public mutating func append(_ b: some Sequence<UInt8>) { bytes.append(contentsOf: b) }

    /// A varint length followed by the bytes.
    public mutating func lengthPrefixed(_ b: [UInt8]) {
        varint(UInt64(b.count))
        bytes.append(contentsOf: b)
    }

    public mutating func string(_ s: String) { lengthPrefixed(Array(s.utf8)) }

    /// Overwrites 4 bytes at `at` with `v` little-endian (for back-patched lengths and CRCs).
    public mutating func patchU32(_ v: UInt32, at: Int) {
        var x = v.littleEndian
        withUnsafeBytes(of: &x) { for i in 0..<4 { bytes[at + i] = $0[i] } }
    }
}

@inline(__always) public func zigzag(_ v: Int64) -> UInt64 { UInt64(bitPattern: (v << 1) ^ (v >> 63)) }
@inline(__always) public func unzigzag(_ u: UInt64) -> Int64 { Int64(bitPattern: u >> 1) ^ -Int64(bitPattern: u & 1) }

/// A bounds-checked reader over bytes. Every read that would go past the end throws
/// `truncated` with the absolute offset; lengths are checked against what remains
/// before anything is allocated.
public struct ByteReader {
    public let bytes: [UInt8]
    /// Offset of `bytes[0]` in the file or message being decoded, for error reports.
    public let base: Int
    public private(set) var position: Int
    public let end: Int
    public var path: String?
    /// When set, a varint not in its shortest form is `corrupt` (operations have one
    /// encoding, [LOG-22]: their content hashes must not depend on who wrote them).
    public var shortestVarints = false

    public init(_ bytes: [UInt8], base: Int = 0, path: String? = nil) {
        self.bytes = bytes
        self.base = base
        self.position = 0
        self.end = bytes.count
        self.path = path
    }

    /// A reader over `bytes[range]` that reports offsets as they are in `bytes` plus `base`.
    public init(_ bytes: [UInt8], range: Range<Int>, base: Int = 0, path: String? = nil) {
        self.bytes = bytes
        self.base = base
        self.position = range.lowerBound
        self.end = range.upperBound
        self.path = path
    }

    public var remaining: Int { end - position }
    public var isAtEnd: Bool { position >= end }
    /// The absolute offset of the next byte.
    public var offset: Int { base + position }

    public func error(_ code: LnoteError.Code, _ message: String, at: Int? = nil,
                      file: StaticString = #fileID, line: UInt = #line) -> LnoteError {
        LnoteError(code, message, path: path, offset: at ?? offset, file: file, line: line)
    }

    @inline(__always) private mutating func need(_ n: Int, _ what: String) throws {
        guard n >= 0, n <= remaining else {
            throw error(.truncated, "\(what) needs \(n) bytes, \(remaining) left")
        }
    }

    public mutating func u8(_ what: String = "byte") throws -> UInt8 {
        try need(1, what)
        defer { position += 1 }
        return bytes[position]
    }

    private mutating func le<T: FixedWidthInteger>(_ t: T.Type, _ what: String) throws -> T {
        let n = MemoryLayout<T>.size
        try need(n, what)
        var v: T = 0
        for i in 0..<n { v |= T(truncatingIfNeeded: bytes[position + i]) << (8 * i) }
        position += n
        return v
    }

    public mutating func u16(_ what: String = "u16") throws -> UInt16 { try le(UInt16.self, what) }
    public mutating func u32(_ what: String = "u32") throws -> UInt32 { try le(UInt32.self, what) }
    public mutating func u64(_ what: String = "u64") throws -> UInt64 { try le(UInt64.self, what) }
    public mutating func i32(_ what: String = "i32") throws -> Int32 { Int32(bitPattern: try le(UInt32.self, what)) }
    public mutating func i64(_ what: String = "i64") throws -> Int64 { Int64(bitPattern: try le(UInt64.self, what)) }

    /// LEB128 varint; rejects encodings longer than 10 bytes or overflowing 64 bits.
    /// `what` names the value in errors; it is only built when one is thrown.
    public mutating func varint(_ what: @autoclosure () -> String = "varint") throws -> UInt64 {
        let start = position
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            guard position < end else { throw error(.truncated, "\(what()) is cut off", at: base + start) }
            let b = bytes[position]
            position += 1
            if shift == 63 && b > 1 { throw error(.corrupt, "\(what()) overflows 64 bits", at: base + start) }
            result |= UInt64(b & 0x7f) << shift
            if b & 0x80 == 0 {
                if shortestVarints && b == 0 && shift > 0 {
                    throw error(.corrupt, "\(what()) is not in its shortest form", at: base + start)
                }
                return result
            }
            shift += 7
            if shift > 63 { throw error(.corrupt, "\(what()) is longer than 10 bytes", at: base + start) }
        }
    }

    public mutating func svarint(_ what: @autoclosure () -> String = "svarint") throws -> Int64 { unzigzag(try varint(what())) }

    /// A varint that must fit in `Int` and be at most `max`.
    /// A count of items each at least `minSize` bytes long, at most `max`: `corrupt` when the
    /// bytes left cannot hold them (the data is whole, so its count is wrong: checked before
    /// anything is allocated), `limitExceeded` when they could but there are more than `max`.
    /// `what` is only built for an error message.
    public mutating func count(_ what: @autoclosure () -> String, max: Int = .max, minSize: Int) throws -> Int {
        precondition(minSize > 0)
        let at = offset
        let v = try varint(what())
        guard let n = Int(exactly: v), n <= remaining / minSize else {
            throw error(.corrupt, "\(what()) \(v) cannot fit in the \(remaining) bytes left", at: at)
        }
        guard n <= max else { throw error(.limitExceeded, "\(what()) \(v) exceeds the limit \(max)", at: at) }
        return n
    }

    /// A count bounded by `max` alone: `limitExceeded` beyond it.
    public mutating func count(_ what: String, max: Int) throws -> Int {
        let at = offset
        let v = try varint(what)
        guard let n = Int(exactly: v), n <= max else {
            throw error(.limitExceeded, "\(what) \(v) exceeds the limit \(max)", at: at)
        }
        return n
    }

    /// Exactly `n` bytes (checked against what remains before copying).
    public mutating func bytes(_ n: Int, _ what: String = "bytes") throws -> [UInt8] {
        try need(n, what)
        defer { position += n }
        return Array(bytes[position..<position + n])
    }

    /// The range of the next `n` bytes, consumed without copying.
    public mutating func skip(_ n: Int, _ what: String = "bytes") throws -> Range<Int> {
        try need(n, what)
        defer { position += n }
        return position..<position + n
    }

    /// A varint length (capped by `max` and by what remains) followed by that many bytes.
    public mutating func lengthPrefixed(_ what: String, max: Int) throws -> [UInt8] {
        let n = try count("\(what) length", max: max, minSize: 1)
        return try bytes(n, what)
    }

    /// A length-prefixed UTF-8 string; invalid UTF-8 is `corrupt`.
    public mutating func string(_ what: String, max: Int = 1 << 16) throws -> String {
        let at = offset
        let b = try lengthPrefixed(what, max: max)
        guard let s = String(validating: b, as: UTF8.self) else {
            throw error(.corrupt, "\(what) is not valid UTF-8", at: at)
        }
        return s
    }

    /// Throws `corrupt` when bytes remain: decoders reject trailing garbage.
    /// `what` is only built when the check fails (it is often an interpolation).
    public func expectEnd(_ what: @autoclosure () -> String) throws {
        guard isAtEnd else { throw error(.corrupt, "\(remaining) unexpected trailing bytes after \(what())") }
    }
}
