import CLnoteCairo
import LnoteModel

/// What lnote's own pictures (thumbnails, PDF and SVG export) can draw of an image asset.
public enum DrawableImage {
    /// Why those pictures would draw the placeholder box for `bytes` (decoded as they would
    /// be: neither PNG nor JPEG, damaged, or beyond `ImageLimits`); nil when they draw it.
    public static func problem(with bytes: [UInt8]) -> String? {
        do {
            try ImageAsset.decode(bytes, name: "image").close()
            return nil
        } catch let e as LnoteError {
            return e.message
        } catch {
            return "\(error)"
        }
    }
}

/// An image asset decoded into a cairo image surface, owned and released exactly once.
///
/// PNG assets go through cairo's PNG reader (`cairo_image_surface_create_from_png_stream`),
/// after their `IHDR` size is checked against `ImageLimits` (cairo would allocate whatever
/// the header says); JPEG assets through `JPEGDecoder`. Anything else is refused: the
/// renderer then draws the placeholder box.
final class ImageAsset {
    /// The `cairo_surface_t *` (an image surface).
    let surface: OpaquePointer
    let width: Int
    let height: Int
    private var released = false

    private init(surface: OpaquePointer) {
        self.surface = surface
        width = Int(cairo_image_surface_get_width(surface))
        height = Int(cairo_image_surface_get_height(surface))
    }

    deinit { close() }

    /// Releases the surface (again: nothing).
    func close() {
        guard !released else { return }
        released = true
        cairo_surface_destroy(surface)
    }

    /// The PNG signature.
    static let pngSignature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]

    /// The width and height a PNG (`IHDR`) or JPEG (`SOF`, read by TurboJPEG's header reader)
    /// says it has, read without decoding; nil for bytes whose header does not say.
    static func pixelSize(_ bytes: [UInt8]) -> (width: Int, height: Int)? {
        if bytes.starts(with: pngSignature) {
            guard bytes.count >= 24, Array(bytes[12..<16]) == Array("IHDR".utf8) else { return nil }
            func be32(_ o: Int) -> Int { Int(bytes[o]) << 24 | Int(bytes[o + 1]) << 16 | Int(bytes[o + 2]) << 8 | Int(bytes[o + 3]) }
            return (be32(16), be32(20))
        }
        if bytes.starts(with: JPEGDecoder.signature) { return JPEGDecoder.size(bytes) }
        return nil
    }

    /// Decodes a PNG or JPEG asset.
    /// - Parameter name: how errors name the asset.
    /// - Throws: `corrupt` for bytes that are neither or do not decode (`truncated` for a PNG
    ///   cut short), `limitExceeded` for a picture beyond `ImageLimits`.
    static func decode(_ bytes: [UInt8], name: String) throws -> ImageAsset {
        if bytes.starts(with: pngSignature) { return try png(bytes, name: name) }
        if bytes.starts(with: JPEGDecoder.signature) { return try jpeg(JPEGDecoder.decode(bytes, name: name), name: name) }
        throw LnoteError(.corrupt, "an image asset that is neither PNG nor JPEG", path: name, offset: 0)
    }

    private static func png(_ bytes: [UInt8], name: String) throws -> ImageAsset {
        // Signature (8), IHDR length (4) and type (4), then width and height, big-endian.
        guard bytes.count >= 24 else { throw LnoteError(.truncated, "a PNG cut inside its header", path: name, offset: bytes.count) }
        guard Array(bytes[12..<16]) == Array("IHDR".utf8) else {
            throw LnoteError(.corrupt, "a PNG whose first chunk is not IHDR", path: name, offset: 12)
        }
        func be32(_ o: Int) -> Int { Int(bytes[o]) << 24 | Int(bytes[o + 1]) << 16 | Int(bytes[o + 2]) << 8 | Int(bytes[o + 3]) }
        try ImageLimits.check(width: be32(16), height: be32(20), name: name)
        let source = ByteSource(bytes)
        let surface = withExtendedLifetime(source) {
            cairo_image_surface_create_from_png_stream(ByteSource.read, Unmanaged.passUnretained(source).toOpaque())!
        }
        let status = cairo_surface_status(surface)
        guard status == CAIRO_STATUS_SUCCESS else {
            cairo_surface_destroy(surface)
            if status == CAIRO_STATUS_READ_ERROR {
                throw LnoteError(.truncated, "a PNG cut short", path: name, offset: bytes.count)
            }
            var e = CairoCanvas.error(status, "an undecodable PNG")
            e.path = name
            e.code = status == CAIRO_STATUS_NO_MEMORY ? .limitExceeded : .corrupt
            throw e
        }
        return ImageAsset(surface: surface)
    }

    private static func jpeg(_ image: DecodedImage, name: String) throws -> ImageAsset {
        let surface = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, Int32(image.width), Int32(image.height))!
        let status = cairo_surface_status(surface)
        guard status == CAIRO_STATUS_SUCCESS else {
            cairo_surface_destroy(surface)
            var e = CairoCanvas.error(status, "cannot hold a \(image.width)x\(image.height) image")
            e.path = name
            throw e
        }
        cairo_surface_flush(surface)
        let stride = Int(cairo_image_surface_get_stride(surface))
        let data = cairo_image_surface_get_data(surface)!
        let rowBytes = image.width * 4
        image.bgra.withUnsafeBufferPointer { src in
            for y in 0..<image.height {
                // TurboJPEG's BGRA is cairo's ARGB32 on a little-endian machine; alpha 255, so
                // premultiplication changes nothing.
                (data + y * stride).update(from: src.baseAddress! + y * rowBytes, count: rowBytes)
            }
        }
        cairo_surface_mark_dirty(surface)
        return ImageAsset(surface: surface)
    }
}

extension Thumbnail {
    /// Reads a PNG or JPEG file into RGBA pixels (straight alpha), with the decoders image
    /// assets go through (cairo's PNG reader, `JPEGDecoder`).
    /// - Parameter name: how errors name the input.
    /// - Throws: as `ImageAsset.decode`.
    public init(decoding bytes: [UInt8], name: String = "picture") throws {
        let asset = try ImageAsset.decode(bytes, name: name)
        defer { asset.close() }
        let w = asset.width, h = asset.height
        cairo_surface_flush(asset.surface)
        let stride = Int(cairo_image_surface_get_stride(asset.surface))
        let format = cairo_image_surface_get_format(asset.surface)
        let data = UnsafeRawPointer(cairo_image_surface_get_data(asset.surface)!)
        var px = [UInt8](repeating: 255, count: w * h * 4)
        for y in 0..<h {
            let row = (data + y * stride).assumingMemoryBound(to: UInt32.self)
            for x in 0..<w {
                let v = row[x], o = (y * w + x) * 4
                let a = format == CAIRO_FORMAT_ARGB32 ? (v >> 24) : 255
                @inline(__always) func un(_ c: UInt32) -> UInt8 { a == 0 ? 0 : UInt8(min(255, (c * 255 + a / 2) / a)) }
                px[o] = un((v >> 16) & 0xff)
                px[o + 1] = un((v >> 8) & 0xff)
                px[o + 2] = un(v & 0xff)
                px[o + 3] = UInt8(a)
            }
        }
        self.init(width: w, height: h, pixels: px)
    }
}
