import CLnoteZlib

/// Writes 8-bit RGBA PNG files.
///
/// The file is the signature, one `IHDR` (color type 6, bit depth 8, no interlace), one
/// `IDAT` and `IEND`, each chunk with its CRC-32 (the zlib/PNG polynomial, `CRC32`). Each
/// row is preceded by filter byte 0 (None). The `IDAT` payload is a zlib stream compressed
/// by zlib at level 1: a 256-pixel thumbnail of a page of handwriting, about 370 KB of
/// pixels, takes 5 to 25 KB, compressed in under a millisecond (level 6 saves 8 % more for
/// 2.6 times the time, on a save's path). If zlib fails (it only can for want of memory),
/// the stream holds the pixels in stored deflate blocks (BTYPE 00, at most 65,535 bytes
/// each), which any PNG reader accepts too. For a given zlib version, the same pixels give
/// the same bytes.
public enum PNGEncoder {
    public static let signature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
    /// Largest stored deflate block.
    public static let maxStoredBlock = 65_535

    public static func encode(_ t: Thumbnail) -> [UInt8] {
        var out = signature
        var ihdr: [UInt8] = []
        appendBE32(&ihdr, UInt32(t.width))
        appendBE32(&ihdr, UInt32(t.height))
        ihdr += [8, 6, 0, 0, 0]   // bit depth, color type RGBA, deflate, adaptive filters, no interlace
        chunk(&out, "IHDR", ihdr)

        let rowBytes = t.width * 4
        var raw = [UInt8](repeating: 0, count: (rowBytes + 1) * t.height)   // filter byte 0 (None) per row
        raw.withUnsafeMutableBytes { dst in
            t.pixels.withUnsafeBytes { src in
                for y in 0..<t.height {
                    let from = UnsafeRawBufferPointer(rebasing: src[(y * rowBytes)..<((y + 1) * rowBytes)])
                    UnsafeMutableRawBufferPointer(rebasing: dst[(y * (rowBytes + 1) + 1)...]).copyMemory(from: from)
                }
            }
        }
        chunk(&out, "IDAT", zlibCompressed(raw) ?? zlibStored(raw))
        chunk(&out, "IEND", [])
        return out
    }

    /// A zlib stream (RFC 1950) of `data` compressed by zlib at `level` (0 to 9); nil if zlib
    /// fails.
    public static func zlibCompressed(_ data: [UInt8], level: Int32 = 1) -> [UInt8]? {
        let bound = Int(compressBound(uLong(data.count)))
        var out = [UInt8](repeating: 0, count: bound)
        var length = uLongf(bound)
        let status = out.withUnsafeMutableBufferPointer { dst in
            data.withUnsafeBufferPointer { src in
                compress2(dst.baseAddress, &length, src.baseAddress, uLong(src.count), level)
            }
        }
        guard status == Z_OK else { return nil }
        out.removeSubrange(Int(length)...)
        return out
    }

    /// A zlib stream (RFC 1950) holding `data` in stored deflate blocks (RFC 1951 §3.2.4).
    public static func zlibStored(_ data: [UInt8]) -> [UInt8] {
        let blocks = max(1, (data.count + maxStoredBlock - 1) / maxStoredBlock)
        var out = [UInt8](repeating: 0, count: 2 + 5 * blocks + data.count + 4)
        // CMF 0x78: deflate, 32 KB window. FLG 0x01: no dictionary, level 0, (0x7801 % 31 == 0).
        out[0] = 0x78
        out[1] = 0x01
        out.withUnsafeMutableBytes { dst in
            data.withUnsafeBytes { src in
                var at = 0, o = 2
                for k in 0..<blocks {
                    let n = min(maxStoredBlock, data.count - at)
                    dst[o] = k == blocks - 1 ? 1 : 0   // BFINAL, BTYPE = 00, padded to the byte
                    dst[o + 1] = UInt8(n & 0xff)
                    dst[o + 2] = UInt8(n >> 8)
                    dst[o + 3] = UInt8(~n & 0xff)
                    dst[o + 4] = UInt8((~n >> 8) & 0xff)
                    o += 5
                    if n > 0 {
                        UnsafeMutableRawBufferPointer(rebasing: dst[o..<(o + n)])
                            .copyMemory(from: UnsafeRawBufferPointer(rebasing: src[at..<(at + n)]))
                    }
                    o += n
                    at += n
                }
            }
        }
        let adler = adler32(data)
        let end = out.count
        out[end - 4] = UInt8(adler >> 24)
        out[end - 3] = UInt8((adler >> 16) & 0xff)
        out[end - 2] = UInt8((adler >> 8) & 0xff)
        out[end - 1] = UInt8(adler & 0xff)
        return out
    }

    /// Adler-32 (RFC 1950 §8.2).
    public static func adler32(_ data: [UInt8]) -> UInt32 {
        data.withUnsafeBufferPointer { p in
            var a: UInt32 = 1, b: UInt32 = 0
            var i = 0
            while i < p.count {
                // 5552 bytes is the most that cannot overflow 32 bits before the modulo.
                let end = min(p.count, i + 5552)
                while i < end {
                    a &+= UInt32(p[i])
                    b &+= a
                    i += 1
                }
                a %= 65521
                b %= 65521
            }
            return b << 16 | a
        }
    }

    static func chunk(_ out: inout [UInt8], _ type: String, _ data: [UInt8]) {
        appendBE32(&out, UInt32(data.count))
        let typeBytes = Array(type.utf8)
        out.append(contentsOf: typeBytes)
        out.append(contentsOf: data)
        appendBE32(&out, CRC32.checksum(data, continuing: CRC32.checksum(typeBytes)))
    }

    static func appendBE32(_ out: inout [UInt8], _ v: UInt32) {
        out += [UInt8(v >> 24), UInt8((v >> 16) & 0xff), UInt8((v >> 8) & 0xff), UInt8(v & 0xff)]
    }
}

/// CRC-32 as PNG and zlib use it (reflected polynomial 0xEDB88320, initial and final
/// value 0xFFFFFFFF). Not CRC-32C, which the logs use (a different polynomial).
public enum CRC32 {
    static let table: [UInt32] = (0..<256).map { n -> UInt32 in
        var c = UInt32(n)
        for _ in 0..<8 { c = c & 1 != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        return c
    }

    /// Continues a CRC: pass the previous result as `crc` (0 to start).
    public static func checksum(_ bytes: some Collection<UInt8>, continuing crc: UInt32 = 0) -> UInt32 {
        if let fast = bytes.withContiguousStorageIfAvailable({ update(~crc, $0) }) { return ~fast }
        return ~Array(bytes).withUnsafeBufferPointer { update(~crc, $0) }
    }

    // Raw pointers keep this fast in debug builds (a 256 px thumbnail is ~190 KB).
    static func update(_ start: UInt32, _ bytes: UnsafeBufferPointer<UInt8>) -> UInt32 {
        table.withUnsafeBufferPointer { t in
            var c = start
            for b in bytes { c = t[Int((c ^ UInt32(b)) & 0xff)] ^ (c >> 8) }
            return c
        }
    }
}
