/// Writes 8-bit RGBA PNG files without a compression library.
///
/// The file is the signature, one `IHDR` (color type 6, bit depth 8, no interlace), one
/// `IDAT` and `IEND`, each chunk with its CRC-32 (the zlib/PNG polynomial, `CRC32`). Each
/// row is preceded by filter byte 0 (None). The `IDAT` payload is a zlib stream (header
/// `78 01`, Adler-32 trailer) whose deflate data is made of *stored* blocks (BTYPE 00, at
/// most 65,535 bytes each).
///
/// Why stored blocks: a thumbnail is derived and small (256 px: about 260 KB raw), any PNG
/// reader accepts stored deflate, and a real compressor would mean either a C library in the
/// store's dependency chain or a few hundred lines of Huffman code to get right. Stored
/// blocks are a dozen lines whose output is trivially deterministic. A later version may
/// compress; readers will not notice.
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
        var raw: [UInt8] = []
        raw.reserveCapacity((rowBytes + 1) * t.height)
        for y in 0..<t.height {
            raw.append(0)   // filter: None
            raw += t.pixels[(y * rowBytes)..<((y + 1) * rowBytes)]
        }
        chunk(&out, "IDAT", zlibStored(raw))
        chunk(&out, "IEND", [])
        return out
    }

    /// A zlib stream (RFC 1950) holding `data` in stored deflate blocks (RFC 1951 §3.2.4).
    public static func zlibStored(_ data: [UInt8]) -> [UInt8] {
        // CMF 0x78: deflate, 32 KB window. FLG 0x01: no dictionary, level 0, (0x7801 % 31 == 0).
        var out: [UInt8] = [0x78, 0x01]
        out.reserveCapacity(data.count + data.count / maxStoredBlock * 5 + 11)
        var at = 0
        repeat {
            let n = min(maxStoredBlock, data.count - at)
            let final = at + n == data.count
            out.append(final ? 1 : 0)   // BFINAL, BTYPE = 00, padded to the byte
            out += [UInt8(n & 0xff), UInt8(n >> 8), UInt8(~n & 0xff), UInt8((~n >> 8) & 0xff)]
            out += data[at..<(at + n)]
            at += n
        } while at < data.count
        appendBE32(&out, adler32(data))
        return out
    }

    /// Adler-32 (RFC 1950 §8.2).
    public static func adler32(_ data: [UInt8]) -> UInt32 {
        var a: UInt32 = 1, b: UInt32 = 0
        var i = 0
        while i < data.count {
            // 5552 bytes is the most that cannot overflow 32 bits before the modulo.
            let end = min(data.count, i + 5552)
            while i < end {
                a += UInt32(data[i])
                b += a
                i += 1
            }
            a %= 65521
            b %= 65521
        }
        return b << 16 | a
    }

    static func chunk(_ out: inout [UInt8], _ type: String, _ data: [UInt8]) {
        appendBE32(&out, UInt32(data.count))
        let typed = Array(type.utf8) + data
        out += typed
        appendBE32(&out, CRC32.checksum(typed))
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
    public static func checksum<C: Collection>(_ bytes: C, continuing crc: UInt32 = 0) -> UInt32 where C.Element == UInt8 {
        var c = ~crc
        for b in bytes { c = table[Int((c ^ UInt32(b)) & 0xff)] ^ (c >> 8) }
        return ~c
    }
}
