import CLnoteZlib
import LnoteRender

/// A test-side PNG reader for what `PNGEncoder` writes: checks the signature, every chunk's
/// CRC, IHDR, inflates the zlib stream (with zlib, which checks its Adler-32; streams of
/// stored blocks also with `inflateStored`, an independent reader), removes the filter bytes
/// (which must be 0). Throws a description on anything else.
struct DecodedPNG {
    var width: Int
    var height: Int
    var chunkTypes: [String]
    var pixels: [UInt8]

    struct Failure: Error, CustomStringConvertible { var description: String }

    static func be32(_ b: [UInt8], _ at: Int) -> UInt32 {
        UInt32(b[at]) << 24 | UInt32(b[at + 1]) << 16 | UInt32(b[at + 2]) << 8 | UInt32(b[at + 3])
    }

    init(_ bytes: [UInt8]) throws {
        guard bytes.count >= 8, Array(bytes[0..<8]) == PNGEncoder.signature else { throw Failure(description: "bad signature") }
        var at = 8
        var types: [String] = []
        var ihdr: [UInt8]?
        var idat: [UInt8] = []
        while at < bytes.count {
            guard at + 12 <= bytes.count else { throw Failure(description: "truncated chunk at \(at)") }
            let len = Int(DecodedPNG.be32(bytes, at))
            guard at + 12 + len <= bytes.count else { throw Failure(description: "chunk length past the end at \(at)") }
            let typed = Array(bytes[(at + 4)..<(at + 8 + len)])
            let type = String(decoding: typed[0..<4], as: UTF8.self)
            guard CRC32.checksum(typed) == DecodedPNG.be32(bytes, at + 8 + len) else {
                throw Failure(description: "CRC mismatch in \(type) at \(at)")
            }
            types.append(type)
            let data = Array(typed[4...])
            if type == "IHDR" { ihdr = data }
            if type == "IDAT" { idat += data }
            at += 12 + len
            if type == "IEND" { break }
        }
        guard at == bytes.count else { throw Failure(description: "bytes after IEND") }
        guard types.first == "IHDR", types.last == "IEND", let h = ihdr, h.count == 13 else { throw Failure(description: "bad chunk order \(types)") }
        width = Int(DecodedPNG.be32(h, 0))
        height = Int(DecodedPNG.be32(h, 4))
        guard Array(h[8...]) == [8, 6, 0, 0, 0], width > 0, height > 0 else { throw Failure(description: "unexpected IHDR \(h)") }
        chunkTypes = types
        let row = width * 4
        let raw = try DecodedPNG.inflate(idat, size: (row + 1) * height)
        guard raw.count == (row + 1) * height else { throw Failure(description: "raw size \(raw.count) for \(width)x\(height)") }
        var px: [UInt8] = []
        px.reserveCapacity(row * height)
        for y in 0..<height {
            guard raw[y * (row + 1)] == 0 else { throw Failure(description: "row \(y) filter \(raw[y * (row + 1)])") }
            px += raw[(y * (row + 1) + 1)..<((y + 1) * (row + 1))]
        }
        pixels = px
    }

    /// Inflates any zlib stream of exactly `size` bytes of data (zlib checks the Adler-32).
    static func inflate(_ z: [UInt8], size: Int) throws -> [UInt8] {
        var out = [UInt8](repeating: 0, count: size + 1)
        var length = uLongf(out.count)
        let status = out.withUnsafeMutableBufferPointer { dst in
            z.withUnsafeBufferPointer { src in uncompress(dst.baseAddress, &length, src.baseAddress, uLong(src.count)) }
        }
        guard status == Z_OK else { throw Failure(description: "zlib stream does not inflate: status \(status)") }
        guard Int(length) == size else { throw Failure(description: "inflated \(length) bytes, expected \(size)") }
        out.removeLast()
        return out
    }

    /// Inflates a zlib stream of stored blocks; returns the data and checks the Adler-32.
    static func inflateStored(_ z: [UInt8]) throws -> [UInt8] {
        guard z.count >= 6, z[0] & 0x0f == 8, (UInt16(z[0]) << 8 | UInt16(z[1])) % 31 == 0, z[1] & 0x20 == 0 else {
            throw Failure(description: "bad zlib header")
        }
        var at = 2
        var out: [UInt8] = []
        while true {
            guard at + 5 <= z.count else { throw Failure(description: "truncated block header") }
            let head = z[at]
            guard head & 0x06 == 0 else { throw Failure(description: "not a stored block") }
            let len = Int(z[at + 1]) | Int(z[at + 2]) << 8
            let nlen = Int(z[at + 3]) | Int(z[at + 4]) << 8
            guard len == ~nlen & 0xffff else { throw Failure(description: "LEN/NLEN mismatch") }
            at += 5
            guard at + len <= z.count else { throw Failure(description: "block past the end") }
            out += z[at..<(at + len)]
            at += len
            if head & 1 == 1 { break }
        }
        guard at + 4 == z.count else { throw Failure(description: "bad trailer length") }
        // Independent Adler-32 (not the encoder's).
        var a: UInt32 = 1, b: UInt32 = 0
        for byte in out { a = (a + UInt32(byte)) % 65521; b = (b + a) % 65521 }
        guard b << 16 | a == be32(z, at) else { throw Failure(description: "Adler-32 mismatch") }
        return out
    }
}
