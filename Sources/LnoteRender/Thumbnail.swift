import LnoteModel

/// A rendered page: 8-bit RGBA pixels, row-major, top row first, no padding.
///
/// Made by `PageRenderer.raster` (cairo) or read from a file (`init(decoding:)`); written as
/// PNG by `cairoPNG()` and as JPEG by `jpeg(comment:)`.
public struct Thumbnail: Sendable, Hashable {
    public let width: Int
    public let height: Int
    /// `width * height * 4` bytes: r, g, b, a per pixel.
    public let pixels: [UInt8]

    public init(width: Int, height: Int, pixels: [UInt8]) {
        precondition(width > 0 && height > 0 && pixels.count == width * height * 4, "thumbnail size mismatch")
        self.width = width
        self.height = height
        self.pixels = pixels
    }

    /// The RGBA value of pixel (x, y).
    public func pixel(_ x: Int, _ y: Int) -> RGBA {
        let i = (y * width + x) * 4
        return RGBA(r: pixels[i], g: pixels[i + 1], b: pixels[i + 2], a: pixels[i + 3])
    }
}
