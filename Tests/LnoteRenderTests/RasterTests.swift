import Testing
import LnoteModel
import LnoteRender

/// What `PageRenderer.raster` and cairo's PNG writer must keep that `PageRendererTests` does
/// not already check: sizes on every aspect, transforms (whole-pixel moves, scales), stacking
/// order, determinism of the PNG bytes, PNG structure read by an independent reader
/// (`DecodedPNG`), compression, and huge canvases. (These properties were once checked on the
/// hand-made rasterizer and PNG writer cairo replaced.)
@Suite struct RasterTests {
    typealias P = Pages

    @Test func sizeKeepsTheCanvasAspectRatio() throws {
        #expect(PageRenderer.size(for: .a4) == (181, 256))        // 5953/8419·256 = 181.01…
        #expect(PageRenderer.size(for: CanvasSize(width: 8419, height: 5953)) == (256, 181))
        #expect(PageRenderer.size(for: P.square, maxSide: 100) == (100, 100))
        #expect(PageRenderer.size(for: CanvasSize(width: 100_000, height: 10), maxSide: 64) == (64, 1))
        #expect(PageRenderer.size(for: CanvasSize(width: 0, height: -5), maxSide: 0) == (1, 1))
        let t = try PageRenderer.raster(PageState(page: PageID()), canvas: CanvasSize(width: 8419, height: 5953))
        #expect(t.width == 256 && t.height == 181 && t.pixels.count == 256 * 181 * 4)
        let png = try DecodedPNG(t.cairoPNG())
        #expect(png.width == 256 && png.height == 181)
        // maxSide is clamped to 1...4096.
        let huge = try PageRenderer.raster(PageState(page: PageID()), canvas: .a4, maxSide: 1_000_000)
        #expect(max(huge.width, huge.height) == 4096)
        let tiny = try PageRenderer.raster(PageState(page: PageID()), canvas: .a4, maxSide: 0)
        #expect(tiny.width == 1 && tiny.height == 1)
    }

    @Test func translatedElementMovesItsPixels() throws {
        let s = P.line(y: 200, x0: 200, x1: 400, radius: 30)
        let a = try PageRenderer.raster(P.state([(.stroke(s), .identity, [])]), canvas: P.square, maxSide: 100)
        let b = try PageRenderer.raster(P.state([(.stroke(s), .translation(300, 500), [])]), canvas: P.square, maxSide: 100)
        // Moving by (30 px, 50 px) shifts the picture (whole pixels: the same coverage).
        var differing = 0
        for y in 0..<100 {
            for x in 0..<100 {
                let src = (x >= 30 && y >= 50) ? a.pixel(x - 30, y - 50) : P.white
                if !P.near(b.pixel(x, y), src, 2) { differing += 1 }
            }
        }
        #expect(differing == 0, "\(differing) pixels differ from the shifted picture")
        #expect(P.dark(a.pixel(30, 20)) && b.pixel(30, 20) == P.white && P.dark(b.pixel(60, 70)))
        // A scale by 2 about the origin doubles coordinates and the radius (3 px → 6 px).
        let big = try PageRenderer.raster(P.state([(.stroke(s), Transform(a: 2 * 65536, b: 0, c: 0, d: 2 * 65536, tx: 0, ty: 0), [])]),
                                          canvas: P.square, maxSide: 100)
        #expect(P.dark(big.pixel(60, 40)) && P.dark(big.pixel(60, 45)) && big.pixel(60, 20) == P.white && big.pixel(60, 48) == P.white)
        #expect(a.pixel(30, 24) == P.white, "the unscaled line is 3 px a side")
    }

    @Test func orderAndOpacity() throws {
        let red = InkStyle(tool: .pen, color: RGBA(r: 255, g: 0, b: 0))
        let hi = InkStyle(tool: .highlighter, color: RGBA(r: 255, g: 255, b: 0))
        let below = P.line(y: 500, x0: 100, x1: 900, style: red)
        let over = P.line(y: 500, x0: 100, x1: 900, style: hi)
        // The top element wins where both are opaque.
        let t1 = try PageRenderer.raster(P.strokes([P.line(y: 500, x0: 100, x1: 900), below]), canvas: P.square, maxSide: 100)
        #expect(t1.pixel(50, 50) == RGBA(r: 255, g: 0, b: 0))
        let t1b = try PageRenderer.raster(P.strokes([below, P.line(y: 500, x0: 100, x1: 900)]), canvas: P.square, maxSide: 100)
        #expect(t1b.pixel(50, 50) == RGBA(r: 0, g: 0, b: 0))
        // A highlighter over red ink lets the red through, tinted.
        let t3 = try PageRenderer.raster(P.strokes([below, over]), canvas: P.square, maxSide: 100)
        let p = t3.pixel(50, 50)
        #expect(p.r == 255 && p.g > 50 && p.g < 120 && p.b == 0, "\(p)")
    }

    /// Same state, same PNG bytes (seeded handwriting), and the picture holds ink.
    @Test func sameStateSameBytes() throws {
        let seed = UInt64.random(in: 0...UInt64.max)
        let state = P.strokes(HandwritingGenerator.strokes(seed: seed, count: 200))
        let a = try PageRenderer.raster(state, canvas: .a4).cairoPNG()
        let b = try PageRenderer.raster(state, canvas: .a4).cairoPNG()
        #expect(a == b, "seed \(seed)")
        #expect(try PageRenderer.raster(state, canvas: .a4).pixels.contains { $0 < 128 }, "seed \(seed)")
    }

    /// cairo's PNG, read by an independent reader (every chunk's CRC, zlib's Adler-32, the five
    /// row filters): the signature, IHDR first, IEND last with its known CRC, the same pixels.
    @Test func pngStructureReadIndependently() throws {
        let t = try PageRenderer.raster(P.strokes([P.line(y: 500, x0: 100, x1: 900)]), canvas: P.square, maxSide: 100)
        let png = try t.cairoPNG()
        #expect(Array(png[0..<8]) == DecodedPNG.signature)
        #expect(Array(png[8..<16]) == [0, 0, 0, 13] + Array("IHDR".utf8))
        #expect(Array(png.suffix(12)) == [0, 0, 0, 0] + Array("IEND".utf8) + [0xAE, 0x42, 0x60, 0x82])
        let d = try DecodedPNG(png)
        #expect(d.width == 100 && d.height == 100 && d.chunkTypes.first == "IHDR" && d.chunkTypes.last == "IEND")
        #expect(d.pixels == t.pixels)
        // A flipped bit anywhere in a chunk is caught by its CRC.
        var bad = png
        bad[40] ^= 0x10
        #expect(throws: DecodedPNG.Failure.self) { try DecodedPNG(bad) }
        // A translucent picture keeps its alpha.
        let clear = Thumbnail(width: 2, height: 1, pixels: [10, 20, 30, 255, 200, 100, 50, 0])
        let c = try DecodedPNG(clear.cairoPNG())
        #expect(c.pixels[0..<4] == [10, 20, 30, 255] && c.pixels[7] == 0)
    }

    /// [PKG-17] A picture is compressed: a page of handwriting takes a fraction of its pixels'
    /// bytes, and inflates (with zlib) to exactly its pixels.
    @Test func picturesAreCompressed() throws {
        let t = try PageRenderer.raster(P.strokes(HandwritingGenerator.strokes(seed: 7, count: 300)), canvas: .a4, maxSide: 256)
        let png = try t.cairoPNG()
        #expect(png.count * 4 < t.pixels.count, "\(png.count) bytes for \(t.pixels.count) bytes of pixels")
        #expect(try DecodedPNG(png).pixels == t.pixels)
        #expect(t.pixels.contains { $0 != 255 }, "the page drew something")
    }

    /// A huge canvas (the largest coordinates allowed) draws at the picture's size, with ink
    /// where it lies; a large picture's PNG still reads back.
    @Test func hugeCanvases() throws {
        let lim = Int32(Quantization.coordinateLimit)
        let huge = CanvasSize(width: lim, height: lim)
        let s = P.line(y: lim / 2, x0: 0, x1: lim, radius: lim / 200)
        let t = try PageRenderer.raster(P.strokes([s]), canvas: huge, maxSide: 200)
        #expect(t.width == 200 && t.height == 200)
        #expect(P.dark(t.pixel(100, 100)) && t.pixel(100, 10) == P.white && t.pixel(100, 190) == P.white)
        let big = try PageRenderer.raster(P.strokes([P.line(y: 5000, x0: 0, x1: 10000)]),
                                          canvas: CanvasSize(width: 10000, height: 10000), maxSide: 1500)
        #expect(try DecodedPNG(big.cairoPNG()).pixels == big.pixels)
    }
}
