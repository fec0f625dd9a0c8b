import CLnoteZlib
import LnoteRender

/// A test-side PNG reader for what cairo writes (8-bit RGB or RGBA, not interlaced), written
/// from the PNG specification apart from cairo and libpng: checks the signature, every
/// chunk's CRC (zlib's `crc32`), IHDR, inflates the zlib stream (with zlib, which checks its
/// Adler-32), and undoes the five row filters. Pixels come out as RGBA (alpha 255 for RGB). Throws a
/// description on anything else.
struct DecodedPNG {
    var width: Int
    var height: Int
    var chunkTypes: [String]
    var pixels: [UInt8]

    struct Failure: Error, CustomStringConvertible { var description: String }

    static func be32(_ b: [UInt8], _ at: Int) -> UInt32 {
        UInt32(b[at]) << 24 | UInt32(b[at + 1]) << 16 | UInt32(b[at + 2]) << 8 | UInt32(b[at + 3])
    }

    static let signature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]

    /// The CRC-32 of a chunk's type and data (zlib's).
    static func crc(_ b: [UInt8]) -> UInt32 {
        UInt32(b.withUnsafeBufferPointer { crc32(0, $0.baseAddress, uInt($0.count)) })
    }

    init(_ bytes: [UInt8]) throws {
        guard bytes.count >= 8, Array(bytes[0..<8]) == DecodedPNG.signature else { throw Failure(description: "bad signature") }
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
            guard DecodedPNG.crc(typed) == DecodedPNG.be32(bytes, at + 8 + len) else {
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
        guard h[8] == 8, h[9] == 2 || h[9] == 6, Array(h[10...]) == [0, 0, 0], width > 0, height > 0 else {
            throw Failure(description: "unexpected IHDR \(h)")
        }
        chunkTypes = types
        let bpp = h[9] == 6 ? 4 : 3
        let row = width * bpp
        let raw = try DecodedPNG.inflate(idat, size: (row + 1) * height)
        guard raw.count == (row + 1) * height else { throw Failure(description: "raw size \(raw.count) for \(width)x\(height)") }
        // Undo the filters (PNG specification §9): each byte from its left (a), up (b) and
        // up-left (c) neighbours of the reconstructed rows.
        var prior = [UInt8](repeating: 0, count: row)
        var px: [UInt8] = []
        px.reserveCapacity(width * height * 4)
        for y in 0..<height {
            let filter = raw[y * (row + 1)]
            var cur = Array(raw[(y * (row + 1) + 1)..<((y + 1) * (row + 1))])
            for i in 0..<row {
                let a = i >= bpp ? Int(cur[i - bpp]) : 0, b = Int(prior[i]), c = i >= bpp ? Int(prior[i - bpp]) : 0
                let add: Int
                switch filter {
                case 0: add = 0
                case 1: add = a
                case 2: add = b
                case 3: add = (a + b) / 2
                case 4:
                    let p = a + b - c, pa = abs(p - a), pb = abs(p - b), pc = abs(p - c)
                    add = pa <= pb && pa <= pc ? a : pb <= pc ? b : c
                default: throw Failure(description: "row \(y) filter \(filter)")
                }
                cur[i] = UInt8(truncatingIfNeeded: Int(cur[i]) + add)
            }
            for x in 0..<width {
                px += cur[(x * bpp)..<(x * bpp + 3)]
                px.append(bpp == 4 ? cur[x * bpp + 3] : 255)
            }
            prior = cur
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
}
