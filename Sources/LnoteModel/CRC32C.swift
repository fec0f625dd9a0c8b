import CLnoteCRC32C

/// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as used by iSCSI, ext4 and
/// LevelDB: better error detection than zlib's CRC-32 for short records.
///
/// Computed with the processor's CRC32 instruction where it has one (SSE 4.2 on x86-64,
/// the CRC extension on 64-bit ARM; a few lines of C in `CLnoteCRC32C`, since Swift cannot
/// reach it), about five times faster than the table: snapshots and journals are checked
/// whole on every read. The table-driven Swift loop (`softwareUpdate`) is the fallback
/// and the reference the tests compare the instruction against.
///
/// Check value: `CRC32C.checksum(Array("123456789".utf8)) == 0xE3069283`.
public enum CRC32C {
    /// Whether `update` uses the processor's CRC32 instruction.
    public static let usesHardware = lnote_crc32c_hw_available() != 0

    /// Slicing-by-8 tables, one flat block of 8 × 256 entries: table k maps a byte to its
    /// CRC contribution k bytes further on. Built once, never freed (8 KiB); immutable after
    /// its lazy, thread-safe initialization.
    nonisolated(unsafe) static let table: UnsafePointer<UInt32> = {
        let t = UnsafeMutablePointer<UInt32>.allocate(capacity: 8 * 256)
        for i in 0..<256 {
            var c = UInt32(i)
            for _ in 0..<8 { c = c & 1 != 0 ? (c >> 1) ^ 0x82F6_3B78 : c >> 1 }
            t[i] = c
        }
        for k in 1..<8 {
            for i in 0..<256 { t[k * 256 + i] = (t[(k - 1) * 256 + i] >> 8) ^ t[Int(t[(k - 1) * 256 + i] & 0xff)] }
        }
        return UnsafePointer(t)
    }()

    /// Continues a CRC over more bytes (`crc` is a previous result, or 0 to start).
    public static func update(_ crc: UInt32, _ bytes: UnsafeRawBufferPointer) -> UInt32 {
        guard usesHardware, let base = bytes.baseAddress else { return softwareUpdate(crc, bytes) }
        return ~lnote_crc32c_hw(~crc, base, bytes.count)
    }

    /// `update` with the slicing-by-8 tables, whatever the processor.
    public static func softwareUpdate(_ crc: UInt32, _ bytes: UnsafeRawBufferPointer) -> UInt32 {
        var c = ~crc
        guard let base = bytes.baseAddress else { return crc }
        let n = bytes.count
        let t = table
        @inline(__always) func at(_ k: Int, _ v: UInt64) -> UInt32 { t[k &* 256 &+ Int(truncatingIfNeeded: v & 0xff)] }
        var i = 0
        while n &- i >= 8 {
            // Eight bytes at once, little-endian: the CRC so far folds into the low four.
            let w = UInt64(littleEndian: base.loadUnaligned(fromByteOffset: i, as: UInt64.self)) ^ UInt64(c)
            c = at(7, w) ^ at(6, w &>> 8) ^ at(5, w &>> 16) ^ at(4, w &>> 24)
                ^ at(3, w &>> 32) ^ at(2, w &>> 40) ^ at(1, w &>> 48) ^ at(0, w &>> 56)
            i &+= 8
        }
        while i < n {
            c = t[Int(truncatingIfNeeded: (c ^ UInt32(base.load(fromByteOffset: i, as: UInt8.self))) & 0xff)] ^ (c >> 8)
            i &+= 1
        }
        return ~c
    }

    /// The CRC of `a` followed by `b`, from `crcA` = CRC(a), `crcB` = CRC(b) and the length
    /// of `b` (as zlib's `crc32_combine` does): CRC(a) is multiplied by x^(8·lengthB)
    /// modulo the polynomial and added to CRC(b). Lets a big buffer be checked in parts on
    /// several cores.
    public static func combine(_ crcA: UInt32, _ crcB: UInt32, lengthB: Int) -> UInt32 {
        multiplyModP(xPower8N(lengthB), crcA) ^ crcB
    }

    /// a·b modulo the CRC polynomial, both in the reflected bit order (bit 31 is x⁰).
    static func multiplyModP(_ a: UInt32, _ b: UInt32) -> UInt32 {
        var m: UInt32 = 1 << 31, p: UInt32 = 0, b = b
        while true {
            if a & m != 0 {
                p ^= b
                if a & (m &- 1) == 0 { break }
            }
            m >>= 1
            b = b & 1 != 0 ? (b >> 1) ^ 0x82F6_3B78 : b >> 1
            if m == 0 { break }
        }
        return p
    }

    /// x^(2^k) modulo the polynomial for k = 0…31 (reflected).
    static let xPowers: [UInt32] = {
        var t = [UInt32](repeating: 0, count: 32)
        var p: UInt32 = 1 << 30  // x¹
        for k in 0..<32 {
            t[k] = p
            p = multiplyModP(p, p)
        }
        return t
    }()

    /// x^(8·n) modulo the polynomial: for n ≤ 2^24 (any frame's length) from three tables
    /// indexed by n's low bytes and n >> 16, at most two multiplications (the search after log
    /// damage, `FrameSearch`, asks one per long candidate); by square-and-multiply beyond.
    static func xPower8N(_ n: Int) -> UInt32 {
        guard n >= 0, n <= 1 << 24 else { return xPower8NBySquaring(n) }
        let t = powerTables
        var p = t[n & 0xff]
        let b1 = (n >> 8) & 0xff, b2 = n >> 16
        if b1 != 0 { p = multiplyModP(p, t[257 + b1]) }
        if b2 != 0 { p = multiplyModP(p, t[514 + b2]) }
        return p
    }

    /// Three tables of x^(8·b·256^k) for b in 0…256, k = 0, 1, 2, one after the other (257
    /// entries each: b = 256 is reached only by n = 2^24, in the third).
    static let powerTables: [UInt32] = {
        var t = [UInt32](repeating: 0, count: 3 * 257)
        for k in 0..<3 {
            let unit = xPower8NBySquaring(1 << (8 * k))  // x^(8·256^k)
            var p: UInt32 = 1 << 31  // x⁰
            for b in 0...256 {
                t[k * 257 + b] = p
                p = multiplyModP(p, unit)
            }
        }
        return t
    }()

    /// x^(8·n) modulo the polynomial, by square-and-multiply over n's bits.
    static func xPower8NBySquaring(_ n: Int) -> UInt32 {
        var p: UInt32 = 1 << 31  // x⁰
        var n = UInt64(n), k = 3
        while n != 0 {
            if n & 1 != 0 { p = multiplyModP(xPowers[k & 31], p) }
            n >>= 1
            k += 1
        }
        return p
    }

    /// The CRC of a big buffer computed in parts on several cores, or serially when small.
    public static func checksumInParallel(_ bytes: [UInt8], _ range: Range<Int>, minimumBytes: Int = 256 * 1024) -> UInt32 {
        guard range.count >= minimumBytes, Parallel.processors > 1 else { return checksum(bytes, range) }
        let parts = Parallel.processors
        let bounds = (0...parts).map { range.lowerBound + range.count * $0 / parts }
        let crcs = Parallel.map(parts) { i in checksum(bytes, bounds[i]..<bounds[i + 1]) }
        var crc = crcs[0]
        for i in 1..<parts { crc = combine(crc, crcs[i], lengthB: bounds[i + 1] - bounds[i]) }
        return crc
    }

    public static func checksum(_ bytes: [UInt8]) -> UInt32 {
        bytes.withUnsafeBytes { update(0, $0) }
    }

    public static func checksum(_ bytes: [UInt8], _ range: Range<Int>) -> UInt32 {
        bytes.withUnsafeBytes { update(0, UnsafeRawBufferPointer(rebasing: $0[range])) }
    }
}
