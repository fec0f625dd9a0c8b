import LnoteModel

/// A rendered page: 8-bit RGBA pixels, row-major, top row first, no padding.
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

    /// This thumbnail as a PNG file (see `PNGEncoder`).
    public func png() -> [UInt8] { PNGEncoder.encode(self) }
}

/// Rasterizes a page into a small picture: the derived `thumbnails/<page>.png`.
///
/// White background, then each live element bottom to top (`PageState.elements` order):
/// - a stroke draws each visible fragment (`ElementRecord.visibleRanges`; erased ranges are
///   gaps) as round-capped segments between consecutive points, the radius interpolated
///   along the segment from the points' radii, scaled to the picture (never thinner than
///   half a pixel so that fine ink stays visible), antialiased by distance to the segment.
///   Points within a quarter pixel of the previous drawn point are skipped (not the last).
///   A stroke is first drawn into a coverage mask (maximum over its segments) and then
///   blended once in its color, so a translucent ink does not darken where its own
///   segments overlap. The color's alpha is used; a highlighter is drawn at 35 % of it.
/// - an image is a light gray rectangle with a darker one-pixel border: the axis-aligned
///   bounds of its frame under the element's transform (the image's own `rotation` is
///   ignored and the asset is not decoded).
///
/// Deterministic: the same state, canvas and size give the same bytes (float math in a fixed
/// order, quantized to 8-bit coverage before blending in integers).
public enum ThumbnailRenderer {
    /// Highlighter opacity, in 1/256.
    static let highlighterAlpha = 90   // ≈ 35 %
    static let imageFill = RGBA(r: 0xE0, g: 0xE0, b: 0xE0)
    static let imageBorder = RGBA(r: 0x90, g: 0x90, b: 0x90)

    /// The picture size for a canvas: the longer side is `maxSide`, the other keeps the aspect
    /// ratio (rounded, at least 1). A degenerate canvas is treated as square.
    public static func size(for canvas: CanvasSize, maxSide: Int = 256) -> (width: Int, height: Int) {
        let side = max(1, maxSide)
        let w = Int64(max(1, canvas.width)), h = Int64(max(1, canvas.height))
        if w >= h {
            return (side, Int(max(1, (Int64(side) * h + w / 2) / w)))
        }
        return (Int(max(1, (Int64(side) * w + h / 2) / h)), side)
    }

    /// Renders `state` on a canvas of `canvas` (tenths of a point) into a picture whose longer
    /// side is `maxSide` pixels (at least 1; clamped to 4096).
    public static func render(_ state: PageState, canvas: CanvasSize, maxSide: Int = 256) -> Thumbnail {
        let (w, h) = size(for: canvas, maxSide: min(max(1, maxSide), 4096))
        // Pixels per tenth of a point, the same on both axes.
        let scale = canvas.width >= canvas.height
            ? Double(w) / Double(max(1, canvas.width))
            : Double(h) / Double(max(1, canvas.height))
        var r = Raster(width: w, height: h)
        for e in state.elements {
            let t = e.transform.value
            switch e.content {
            case .stroke(let s):
                var alpha = Int(s.style.color.a)
                if s.style.tool == .highlighter { alpha = (alpha * highlighterAlpha + 128) >> 8 }
                if alpha == 0 { continue }
                r.beginStroke()
                let lin = t.linearScale
                for range in e.visibleRanges {
                    let lo = Int(range.from), hi = Int(range.to)
                    guard lo < hi, hi <= s.points.count else { continue }
                    var prev = project(s.points[lo], t, scale, lin)
                    if lo + 1 == hi { r.capsule(prev, prev) }
                    for i in (lo + 1)..<hi {
                        let next = project(s.points[i], t, scale, lin)
                        // Points closer than a quarter pixel to the last one drawn add nothing
                        // visible at this size (samples at 240 Hz often are): skip them, but
                        // always end the fragment on its last point.
                        let dx = next.x - prev.x, dy = next.y - prev.y
                        if i + 1 < hi, dx * dx + dy * dy < 0.0625, abs(next.r - prev.r) < 0.25 { continue }
                        r.capsule(prev, next)
                        prev = next
                    }
                }
                r.endStroke(color: s.style.color, alpha: alpha)
            case .image(let img):
                r.imageBox(bounds(img.frame, t, scale), fill: imageFill, border: imageBorder)
            }
        }
        return Thumbnail(width: w, height: h, pixels: r.pixels)
    }

    /// A point in pixels with its radius in pixels.
    struct PixelPoint {
        var x: Double, y: Double, r: Double
    }


    static func project(_ p: StrokePoint, _ t: Transform, _ scale: Double, _ lin: Double) -> PixelPoint {
        let (x, y) = t.apply(p.x, p.y)
        return PixelPoint(x: x * scale, y: y * scale, r: max(0.5, Double(max(0, p.radius)) * scale * lin))
    }

    /// Pixel bounds (x0, y0, x1, y1; doubles) of a transformed frame.
    static func bounds(_ f: QRect, _ t: Transform, _ scale: Double) -> (Double, Double, Double, Double) {
        let x1 = Int32(clamping: Int64(f.x) + Int64(f.width)), y1 = Int32(clamping: Int64(f.y) + Int64(f.height))
        let corners = [t.apply(f.x, f.y), t.apply(x1, f.y), t.apply(f.x, y1), t.apply(x1, y1)]
        var lo = corners[0], hi = corners[0]
        for c in corners.dropFirst() {
            lo = (min(lo.0, c.0), min(lo.1, c.1))
            hi = (max(hi.0, c.0), max(hi.1, c.1))
        }
        return (lo.0 * scale, lo.1 * scale, hi.0 * scale, hi.1 * scale)
    }
}

/// The pixel buffer and the current stroke's coverage mask.
struct Raster {
    let width: Int, height: Int
    var pixels: [UInt8]
    var mask: [UInt8]
    // Bounds of the pixels the current stroke touched (inclusive; empty when minX > maxX).
    var minX = 0, minY = 0, maxX = -1, maxY = -1

    init(width: Int, height: Int) {
        self.width = width
        self.height = height
        pixels = [UInt8](repeating: 255, count: width * height * 4)
        mask = [UInt8](repeating: 0, count: width * height)
    }

    mutating func beginStroke() {
        minX = width; minY = height; maxX = -1; maxY = -1
    }

    /// Clamps a pixel coordinate range [lo, hi] (doubles) to the picture; nil when outside.
    static func span(_ lo: Double, _ hi: Double, _ n: Int) -> (Int, Int)? {
        let a = max(0, min(Double(n), (lo - 0.5).rounded(.down)))
        let b = max(-1, min(Double(n - 1), (hi + 0.5).rounded(.up)))
        let ia = Int(a), ib = Int(b)
        return ia <= ib ? (ia, ib) : nil
    }

    /// Adds a round-capped segment from `p` to `q` to the coverage mask.
    mutating func capsule(_ p: ThumbnailRenderer.PixelPoint, _ q: ThumbnailRenderer.PixelPoint) {
        let rmax = max(p.r, q.r)
        guard let (x0, x1) = Raster.span(min(p.x, q.x) - rmax, max(p.x, q.x) + rmax, width),
              let (y0, y1) = Raster.span(min(p.y, q.y) - rmax, max(p.y, q.y) + rmax, height) else { return }
        let dx = q.x - p.x, dy = q.y - p.y
        let len2 = dx * dx + dy * dy
        var touched = false
        let w = width
        mask.withUnsafeMutableBufferPointer { mask in
            for y in y0...y1 {
                let cy = Double(y) + 0.5
                for x in x0...x1 {
                    let cx = Double(x) + 0.5
                    var t = 0.0
                    if len2 > 0 {
                        t = ((cx - p.x) * dx + (cy - p.y) * dy) / len2
                        t = t < 0 ? 0 : (t > 1 ? 1 : t)
                    }
                    let ex = p.x + t * dx - cx, ey = p.y + t * dy - cy
                    let r = p.r + (q.r - p.r) * t + 0.5
                    let d2 = ex * ex + ey * ey
                    if d2 >= r * r { continue }
                    let cov = r - d2.squareRoot()
                    let m = cov >= 1 ? 255 : UInt8((cov * 255).rounded())
                    let i = y * w + x
                    if m > mask[i] { mask[i] = m }
                    touched = true
                }
            }
        }
        if touched {
            minX = min(minX, x0); maxX = max(maxX, x1)
            minY = min(minY, y0); maxY = max(maxY, y1)
        }
    }

    /// Blends the current stroke's mask in `color` at opacity `alpha` (0...255), clears it.
    mutating func endStroke(color: RGBA, alpha: Int) {
        guard minX <= maxX, minY <= maxY else { return }
        let src = (Int(color.r), Int(color.g), Int(color.b))
        for y in minY...maxY {
            for x in minX...maxX {
                let i = y * width + x
                let m = Int(mask[i])
                if m == 0 { continue }
                mask[i] = 0
                blend(i * 4, src, (m * alpha + 127) / 255)
            }
        }
    }

    /// `dst = src·a + dst·(1−a)` in integers; the picture stays opaque.
    @inline(__always)
    mutating func blend(_ o: Int, _ src: (Int, Int, Int), _ a: Int) {
        guard a > 0 else { return }
        let ia = 255 - a
        pixels[o] = UInt8((src.0 * a + Int(pixels[o]) * ia + 127) / 255)
        pixels[o + 1] = UInt8((src.1 * a + Int(pixels[o + 1]) * ia + 127) / 255)
        pixels[o + 2] = UInt8((src.2 * a + Int(pixels[o + 2]) * ia + 127) / 255)
    }

    /// An image placeholder: pixels whose centers fall inside the box, filled, with a border.
    mutating func imageBox(_ b: (Double, Double, Double, Double), fill: RGBA, border: RGBA) {
        // Pixel x is inside when x + 0.5 ∈ [x0, x1); at least one pixel when the box is tiny.
        func range(_ lo: Double, _ hi: Double, _ n: Int) -> (Int, Int)? {
            var a = (lo - 0.5).rounded(.up), c = (hi - 0.5).rounded(.up) - 1
            if c < a { c = a }
            a = max(0, a)
            c = min(Double(n - 1), c)
            guard a <= c, a < Double(n), c >= 0 else { return nil }
            return (Int(a), Int(c))
        }
        guard let (x0, x1) = range(b.0, b.2, width), let (y0, y1) = range(b.1, b.3, height) else { return }
        // Border lines are those of the unclipped box (a box cut by the edge has no border there).
        let bx0 = Int(max(-1, min(Double(width), (b.0 - 0.5).rounded(.up))))
        let by0 = Int(max(-1, min(Double(height), (b.1 - 0.5).rounded(.up))))
        let bx1 = Int(max(-1, min(Double(width), max((b.2 - 0.5).rounded(.up) - 1, (b.0 - 0.5).rounded(.up)))))
        let by1 = Int(max(-1, min(Double(height), max((b.3 - 0.5).rounded(.up) - 1, (b.1 - 0.5).rounded(.up)))))
        for y in y0...y1 {
            for x in x0...x1 {
                let c = (x == bx0 || x == bx1 || y == by0 || y == by1) ? border : fill
                let o = (y * width + x) * 4
                pixels[o] = c.r; pixels[o + 1] = c.g; pixels[o + 2] = c.b; pixels[o + 3] = 255
            }
        }
    }
}
