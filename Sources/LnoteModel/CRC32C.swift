/// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as used by iSCSI, ext4 and
/// LevelDB: better error detection than zlib's CRC-32 for short records, and defined
/// here in pure Swift so the codecs need no C library.
///
/// Check value: `CRC32C.checksum(Array("123456789".utf8)) == 0xE3069283`.
public enum CRC32C {
    static let tables: [[UInt32]] = {
        var t = [[UInt32]](repeating: [UInt32](repeating: 0, count: 256), count: 8)
        for i in 0..<256 {
            var c = UInt32(i)
            for _ in 0..<8 { c = c & 1 != 0 ? (c >> 1) ^ 0x82F6_3B78 : c >> 1 }
            t[0][i] = c
        }
        for i in 0..<256 {
            for k in 1..<8 { t[k][i] = (t[k - 1][i] >> 8) ^ t[0][Int(t[k - 1][i] & 0xff)] }
        }
        return t
    }()

    /// Continues a CRC over more bytes (`crc` is a previous result, or 0 to start).
    public static func update(_ crc: UInt32, _ bytes: UnsafeRawBufferPointer) -> UInt32 {
        var c = ~crc
        let n = bytes.count
        var i = 0
        tables.withUnsafeBufferPointer { tt in
            let t0 = tt[0], t1 = tt[1], t2 = tt[2], t3 = tt[3], t4 = tt[4], t5 = tt[5], t6 = tt[6], t7 = tt[7]
            while n - i >= 8 {
                let lo = c ^ (UInt32(bytes[i]) | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2]) << 16 | UInt32(bytes[i + 3]) << 24)
                let hi = UInt32(bytes[i + 4]) | UInt32(bytes[i + 5]) << 8 | UInt32(bytes[i + 6]) << 16 | UInt32(bytes[i + 7]) << 24
                c = t7[Int(lo & 0xff)] ^ t6[Int((lo >> 8) & 0xff)] ^ t5[Int((lo >> 16) & 0xff)] ^ t4[Int(lo >> 24)]
                    ^ t3[Int(hi & 0xff)] ^ t2[Int((hi >> 8) & 0xff)] ^ t1[Int((hi >> 16) & 0xff)] ^ t0[Int(hi >> 24)]
                i += 8
            }
            while i < n {
                c = t0[Int((c ^ UInt32(bytes[i])) & 0xff)] ^ (c >> 8)
                i += 1
            }
        }
        return ~c
    }

    public static func checksum(_ bytes: [UInt8]) -> UInt32 {
        bytes.withUnsafeBytes { update(0, $0) }
    }

    public static func checksum(_ bytes: [UInt8], _ range: Range<Int>) -> UInt32 {
        bytes.withUnsafeBytes { update(0, UnsafeRawBufferPointer(rebasing: $0[range])) }
    }
}
