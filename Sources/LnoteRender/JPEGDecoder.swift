import CLnoteJPEG
import LnoteModel

/// A decoded picture: opaque 8-bit pixels as cairo's ARGB32 words (memory order b, g, r, a
/// on a little-endian machine), row-major, top row first, `width * 4` bytes a row.
public struct DecodedImage: Sendable, Hashable {
    public let width: Int
    public let height: Int
    public let bgra: [UInt8]

    /// The red, green and blue of pixel (x, y).
    public func rgb(_ x: Int, _ y: Int) -> (r: UInt8, g: UInt8, b: UInt8) {
        let w = bgra.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: (y * width + x) * 4, as: UInt32.self) }
        return (UInt8((w >> 16) & 0xff), UInt8((w >> 8) & 0xff), UInt8(w & 0xff))
    }
}

/// Decodes JPEG image assets with libjpeg-turbo's TurboJPEG API.
///
/// The header is read first (`tjDecompressHeader3`) and its size checked against
/// `ImageLimits` before any pixel buffer is allocated: a header is a length field, never
/// trusted to allocate. Grayscale and YCbCr JPEGs decode to BGRA; CMYK ones, which
/// TurboJPEG does not convert to RGB, are refused. The result is the same for the same bytes
/// (one decoder build, its default integer DCT).
public enum JPEGDecoder {
    /// The first bytes of every JPEG file (SOI, then a marker).
    public static let signature: [UInt8] = [0xFF, 0xD8, 0xFF]

    /// cairo's ARGB32 word in memory order: b, g, r, a on a little-endian machine.
    #if _endian(big)
    static let nativeFormat = TJPF_ARGB
    #else
    static let nativeFormat = TJPF_BGRA
    #endif

    /// The width and height the JPEG's frame header says, without decoding; nil when the
    /// header cannot be read.
    static func size(_ bytes: [UInt8]) -> (width: Int, height: Int)? {
        guard let handle = tjInitDecompress() else { return nil }
        defer { tjDestroy(handle) }
        var width: Int32 = 0, height: Int32 = 0, subsampling: Int32 = 0, colorspace: Int32 = 0
        let header = bytes.withUnsafeBufferPointer {
            tjDecompressHeader3(handle, $0.baseAddress, UInt($0.count), &width, &height, &subsampling, &colorspace)
        }
        return header == 0 ? (Int(width), Int(height)) : nil
    }

    /// Decodes `bytes`.
    /// - Parameter name: how errors name the input (an asset path or id).
    /// - Throws: `corrupt` (with libjpeg-turbo's message) for bytes that are not a JPEG it
    ///   can decode, `limitExceeded` for a picture beyond `ImageLimits`.
    public static func decode(_ bytes: [UInt8], name: String? = nil) throws -> DecodedImage {
        guard bytes.count >= signature.count, Array(bytes.prefix(3)) == signature else {
            throw LnoteError(.corrupt, "not a JPEG file (no SOI marker)", path: name, offset: 0)
        }
        guard let handle = tjInitDecompress() else {
            throw LnoteError(.limitExceeded, "cannot start a JPEG decoder", path: name)
        }
        defer { tjDestroy(handle) }
        func failure(_ what: String) -> LnoteError {
            LnoteError(.corrupt, "\(what): \(String(cString: tjGetErrorStr2(handle)))", path: name)
        }
        var width: Int32 = 0, height: Int32 = 0, subsampling: Int32 = 0, colorspace: Int32 = 0
        let header = bytes.withUnsafeBufferPointer {
            tjDecompressHeader3(handle, $0.baseAddress, UInt($0.count), &width, &height, &subsampling, &colorspace)
        }
        guard header == 0 else { throw failure("unreadable JPEG header") }
        try ImageLimits.check(width: Int(width), height: Int(height), name: name)
        if colorspace == Int32(TJCS_CMYK.rawValue) || colorspace == Int32(TJCS_YCCK.rawValue) {
            throw LnoteError(.corrupt, "a CMYK JPEG (only grayscale and color JPEGs are drawn)", path: name)
        }
        let w = Int(width), h = Int(height)
        // [PKG-17] Decoding costs a pass over the picture per scan: a progressive JPEG of
        // thousands of tiny scans (a few hundred bytes each) took minutes a draw within the
        // pixel limits. Counted before anything is allocated.
        let scans = scanCount(bytes)
        guard scans <= ImageLimits.maxScans, scans * w * h <= ImageLimits.maxScanPixels else {
            throw LnoteError(.limitExceeded, "a JPEG of \(scans) scans at \(w)x\(h) pixels (at most \(ImageLimits.maxScans) scans "
                             + "and \(ImageLimits.maxScanPixels) pixels over all scans: its decoding time is bounded)", path: name)
        }
        var out = [UInt8](repeating: 0, count: w * h * 4)
        let status = out.withUnsafeMutableBufferPointer { dst in
            bytes.withUnsafeBufferPointer { src in
                tjDecompress2(handle, src.baseAddress, UInt(src.count), dst.baseAddress, width, width * 4, height,
                              Int32(nativeFormat.rawValue), Int32(TJFLAG_LIMITSCANS))
            }
        }
        // A warning (a truncated scan, extra bytes) still gives a picture; an error does not.
        if status != 0, tjGetErrorCode(handle) == Int32(TJERR_FATAL.rawValue) { throw failure("undecodable JPEG") }
        return DecodedImage(width: w, height: h, bgra: out)
    }

    /// The start-of-scan markers (`FF DA`) in the bytes: entropy-coded data stuffs every
    /// `FF` it holds (`FF 00`), so none is a coded byte; one inside a metadata segment (an
    /// embedded thumbnail) counts too, which only errs on the side of the limit.
    static func scanCount(_ bytes: [UInt8]) -> Int {
        bytes.withUnsafeBufferPointer { b in
            var n = 0, i = 0
            let end = b.count - 1
            while i < end {
                if b[i] == 0xFF && b[i + 1] == 0xDA { n += 1; i += 2 } else { i += 1 }
            }
            return n
        }
    }
}

/// The largest pictures an image asset may decode to: cairo's 32,767 pixels a side, and
/// 50 megapixels (200 MB of pixels) in all.
public enum ImageLimits {
    public static let maxSide = 32_767
    public static let maxPixels = 50_000_000
    /// A JPEG's scans (start-of-scan markers): a baseline picture has 1, a progressive one
    /// about 10 (libjpeg's default script), rarely more than 20.
    public static let maxScans = 100
    /// Scans × pixels: what decoding a JPEG costs (20 scans of the largest picture).
    public static let maxScanPixels = 1_000_000_000

    static func check(width: Int, height: Int, name: String?) throws {
        guard width >= 1, height >= 1 else {
            throw LnoteError(.corrupt, "an image of \(width)x\(height) pixels", path: name)
        }
        guard width <= maxSide, height <= maxSide, width * height <= maxPixels else {
            throw LnoteError(.limitExceeded, "an image of \(width)x\(height) pixels (at most \(maxSide) a side and "
                             + "\(maxPixels) pixels)", path: name)
        }
    }
}
