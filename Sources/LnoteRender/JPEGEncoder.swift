import CLnoteJPEG
import LnoteModel

/// Thumbnails as baseline JPEG through libjpeg-turbo's TurboJPEG API ([PKG-17]).
///
/// A thumbnail is opaque: its RGBA pixels are composited over white first (a pixel of
/// alpha `a` becomes `(c·a + 255·(255 − a) + 127) / 255` per channel), then compressed as
/// 3-component YCbCr, 4:2:0 chroma subsampling, baseline sequential DCT (SOF0, standard
/// Huffman tables), quality 80 by default. An optional comment is stored as one JPEG `COM`
/// segment (marker `FF FE`) placed right after the JFIF `APP0` segment TurboJPEG writes
/// first, before any table or frame header: where a reader walking the segments from the
/// start finds it without decoding anything.
///
/// Every TurboJPEG handle and buffer is released on every path (`defer`). Failures throw
/// `LnoteError`: `invalidArgument` for a quality outside 1…100 or a comment longer than a
/// segment holds, `limitExceeded` for a side past 65,535 pixels (JPEG's limit), `io` with
/// TurboJPEG's message in `underlying` when the library itself fails; decoding bytes that
/// are not a JPEG TurboJPEG reads is `corrupt`.
public enum JPEGEncoder {
    /// The quality thumbnails are written at.
    public static let defaultQuality = 80
    /// The most bytes a `COM` segment's payload holds (its length field counts itself).
    public static let maxCommentBytes = 65_533
    /// JPEG's largest side.
    public static let maxSide = 65_535

    /// Encodes `t` as a baseline JPEG (see the type's discussion).
    /// - Parameters:
    ///   - quality: 1…100.
    ///   - comment: bytes of a `COM` segment to insert, or nil for none.
    /// - Returns: the JPEG file's bytes, starting with `FF D8` and ending with `FF D9`.
    /// - Throws: `invalidArgument`, `limitExceeded` or `io` (see the type's discussion).
    public static func encode(_ t: Thumbnail, quality: Int = defaultQuality, comment: [UInt8]? = nil) throws -> [UInt8] {
        guard (1...100).contains(quality) else {
            throw LnoteError(.invalidArgument, "JPEG quality \(quality) is not between 1 and 100")
        }
        guard t.width <= maxSide, t.height <= maxSide else {
            throw LnoteError(.limitExceeded, "a JPEG side is at most \(maxSide) pixels, not \(t.width)x\(t.height)")
        }
        if let comment, comment.count > maxCommentBytes {
            throw LnoteError(.invalidArgument, "a JPEG comment holds at most \(maxCommentBytes) bytes, not \(comment.count)")
        }
        let rgb = opaqueRGB(t)
        guard let handle = tjInitCompress() else {
            throw LnoteError(.io, "TurboJPEG could not create a compressor", underlying: lastError(nil))
        }
        defer { tjDestroy(handle) }
        var buffer: UnsafeMutablePointer<UInt8>? = nil
        var size: UInt = 0
        defer { if let buffer { tjFree(buffer) } }
        let status = rgb.withUnsafeBufferPointer { src in
            tjCompress2(handle, src.baseAddress, Int32(t.width), Int32(t.width * 3), Int32(t.height),
                        Int32(TJPF_RGB.rawValue), &buffer, &size, Int32(TJSAMP_420.rawValue), Int32(quality),
                        TJFLAG_ACCURATEDCT)
        }
        guard status == 0, let buffer, size >= 4 else {
            throw LnoteError(.io, "TurboJPEG could not compress a \(t.width)x\(t.height) picture", underlying: lastError(handle))
        }
        let jpeg = Array(UnsafeBufferPointer(start: buffer, count: Int(size)))
        guard let comment else { return jpeg }
        return try inserting(comment: comment, into: jpeg)
    }

    /// The pixels composited over white, 3 bytes a pixel.
    static func opaqueRGB(_ t: Thumbnail) -> [UInt8] {
        let n = t.width * t.height
        return [UInt8](unsafeUninitializedCapacity: n * 3) { out, count in
            t.pixels.withUnsafeBufferPointer { p in
                for i in 0..<n {
                    let a = Int(p[i * 4 + 3])
                    for c in 0..<3 {
                        let v = Int(p[i * 4 + c])
                        out[i * 3 + c] = a == 255 ? UInt8(v) : UInt8((v * a + 255 * (255 - a) + 127) / 255)
                    }
                }
            }
            count = n * 3
        }
    }

    /// `jpeg` with a `COM` segment holding `comment` inserted after SOI and the `APP0`
    /// segment that follows it, if any.
    /// - Throws: `corrupt` when `jpeg` does not start with SOI or its APP0 length runs past
    ///   the end; `invalidArgument` for a comment longer than `maxCommentBytes`.
    public static func inserting(comment: [UInt8], into jpeg: [UInt8]) throws -> [UInt8] {
        guard comment.count <= maxCommentBytes else {
            throw LnoteError(.invalidArgument, "a JPEG comment holds at most \(maxCommentBytes) bytes, not \(comment.count)")
        }
        guard jpeg.count >= 4, jpeg[0] == 0xFF, jpeg[1] == 0xD8 else {
            throw LnoteError(.corrupt, "not a JPEG (no start-of-image marker)", offset: 0)
        }
        var at = 2
        if jpeg.count >= 6, jpeg[2] == 0xFF, jpeg[3] == 0xE0 {
            let length = Int(jpeg[4]) << 8 | Int(jpeg[5])
            guard length >= 2, 4 + length <= jpeg.count else {
                throw LnoteError(.corrupt, "APP0 segment length \(length) runs past the end of the JPEG", offset: 4)
            }
            at = 4 + length
        }
        let length = comment.count + 2
        var out: [UInt8] = []
        out.reserveCapacity(jpeg.count + length + 2)
        out += jpeg[..<at]
        out += [0xFF, 0xFE, UInt8(length >> 8), UInt8(length & 0xFF)]
        out += comment
        out += jpeg[at...]
        return out
    }

    /// The payloads of the `COM` segments of a JPEG's header, in order: the marker segments
    /// from SOI up to the first start-of-scan (`FF DA`), each `FF`, a marker byte, a 2-byte
    /// big-endian length counting itself and the payload. Fill bytes (`FF` before a marker)
    /// are skipped; nothing after SOS is read.
    /// - Throws: `corrupt` with the byte offset when the bytes are not a JPEG header (no SOI,
    ///   a byte other than `FF` where a marker is due, a length below 2 or past the end);
    ///   `truncated` when the bytes end before SOS.
    public static func comments(in jpeg: [UInt8], path: String? = nil) throws -> [[UInt8]] {
        var out: [[UInt8]] = []
        try walkComments(in: jpeg, path: path) { payload in
            out.append(Array(payload))
            return false
        }
        return out
    }

    /// The first `COM` payload of a JPEG's header that `accept` takes, found as `comments(in:)`
    /// walks, which stops there: nothing after it is read or copied (a stored picture's stamp
    /// sits in its first segment, so a prefix of the file is enough). nil when the walk
    /// reaches SOS or EOI without one.
    /// - Throws: as `comments(in:)`, for a fault met before such a payload.
    public static func firstComment(in jpeg: [UInt8], path: String? = nil,
                                    where accept: (ArraySlice<UInt8>) -> Bool) throws -> ArraySlice<UInt8>? {
        var found: ArraySlice<UInt8>?
        try walkComments(in: jpeg, path: path) { payload in
            guard accept(payload) else { return false }
            found = payload
            return true
        }
        return found
    }

    /// Walks a JPEG's header segments, handing each `COM` payload to `body` until it returns true.
    private static func walkComments(in jpeg: [UInt8], path: String?, _ body: (ArraySlice<UInt8>) -> Bool) throws {
        guard jpeg.count >= 2, jpeg[0] == 0xFF, jpeg[1] == 0xD8 else {
            throw LnoteError(.corrupt, "not a JPEG (no start-of-image marker)", path: path, offset: 0)
        }
        var at = 2
        while true {
            guard at < jpeg.count else { throw LnoteError(.truncated, "the JPEG ends before its scan", path: path, offset: at) }
            guard jpeg[at] == 0xFF else {
                throw LnoteError(.corrupt, "expected a marker, found byte \(jpeg[at])", path: path, offset: at)
            }
            var m = at + 1
            while m < jpeg.count, jpeg[m] == 0xFF { m += 1 }  // fill bytes
            guard m < jpeg.count else { throw LnoteError(.truncated, "the JPEG ends inside a marker", path: path, offset: m) }
            let marker = jpeg[m]
            if marker == 0xDA || marker == 0xD9 { return }  // SOS, or EOI of an empty stream
            // Markers without a length: TEM and RSTn (never expected here, but standalone).
            if marker == 0x01 || (0xD0...0xD7).contains(marker) {
                at = m + 1
                continue
            }
            guard m + 2 < jpeg.count else { throw LnoteError(.truncated, "the JPEG ends inside a segment length", path: path, offset: m + 1) }
            let length = Int(jpeg[m + 1]) << 8 | Int(jpeg[m + 2])
            guard length >= 2 else {
                throw LnoteError(.corrupt, "segment length \(length) is below 2", path: path, offset: m + 1)
            }
            let end = m + 1 + length
            guard end <= jpeg.count else {
                throw LnoteError(.truncated, "segment length \(length) runs past the end of the JPEG", path: path, offset: m + 1)
            }
            if marker == 0xFE, body(jpeg[(m + 3)..<end]) { return }
            at = end
        }
    }

    /// Decodes a JPEG into opaque RGBA pixels (alpha 255): for tests and for readers of
    /// stored pictures.
    /// - Throws: `corrupt` (with TurboJPEG's message) when TurboJPEG cannot read it;
    ///   `limitExceeded` when it declares more than `maxPixels` pixels (nothing is allocated
    ///   from its header before that check).
    public static func decode(_ jpeg: [UInt8], path: String? = nil, maxPixels: Int = 16 << 20) throws -> Thumbnail {
        guard let handle = tjInitDecompress() else {
            throw LnoteError(.io, "TurboJPEG could not create a decompressor", path: path, underlying: lastError(nil))
        }
        defer { tjDestroy(handle) }
        var w: Int32 = 0, h: Int32 = 0, sub: Int32 = 0, space: Int32 = 0
        let header = jpeg.withUnsafeBufferPointer {
            tjDecompressHeader3(handle, $0.baseAddress, UInt($0.count), &w, &h, &sub, &space)
        }
        guard header == 0, w > 0, h > 0 else {
            throw LnoteError(.corrupt, "not a JPEG TurboJPEG reads", path: path, underlying: lastError(handle))
        }
        guard Int(w) * Int(h) <= maxPixels else {
            throw LnoteError(.limitExceeded, "a \(w)x\(h) JPEG is past the \(maxPixels) pixels allowed", path: path)
        }
        var pixels = [UInt8](repeating: 0, count: Int(w) * Int(h) * 4)
        let status = jpeg.withUnsafeBufferPointer { src in
            pixels.withUnsafeMutableBufferPointer { dst in
                tjDecompress2(handle, src.baseAddress, UInt(src.count), dst.baseAddress, w, w * 4, h,
                              Int32(TJPF_RGBA.rawValue), TJFLAG_ACCURATEDCT)
            }
        }
        guard status == 0 else {
            throw LnoteError(.corrupt, "TurboJPEG could not decode the JPEG", path: path, underlying: lastError(handle))
        }
        return Thumbnail(width: Int(w), height: Int(h), pixels: pixels)
    }

    /// TurboJPEG's message for the last failure of `handle` (or of creating one).
    static func lastError(_ handle: tjhandle?) -> String {
        guard let s = tjGetErrorStr2(handle) else { return "TurboJPEG: unknown error" }
        return "TurboJPEG: " + String(cString: s)
    }
}

extension Thumbnail {
    /// This thumbnail as a baseline JPEG at `JPEGEncoder.defaultQuality` (see `JPEGEncoder`).
    public func jpeg(comment: [UInt8]? = nil) throws -> [UInt8] { try JPEGEncoder.encode(self, comment: comment) }
}
