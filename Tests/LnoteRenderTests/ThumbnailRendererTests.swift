import Testing
import LnoteModel
import LnoteRender

/// A page state with the given elements bottom to top (ids and z keys in that order).
func page(_ contents: [(ElementContent, Transform, [PointRange])]) -> PageState {
    let rep = ReplicaID(7)
    let elements = contents.enumerated().map { i, c in
        ElementRecord(id: OpID(replica: rep, counter: UInt64(i + 1)), lamport: UInt64(i + 1), wallTime: 0,
                      content: c.0, transform: LWWRegister(c.1), z: LWWRegister(ZKey(layer: Int64(i))),
                      erased: c.2)
    }
    return PageState(page: PageID(), elements: elements)
}

/// A horizontal stroke at height `y` (tenths of a point) from x0 to x1, `n` points.
func line(y: Int32, x0: Int32, x1: Int32, n: Int = 41, radius: Int32 = 40,
          style: InkStyle = InkStyle(tool: .pen, color: .black)) -> Stroke {
    Stroke(style: style, points: (0..<n).map { i in
        StrokePoint(x: x0 + Int32(Int64(x1 - x0) * Int64(i) / Int64(n - 1)), y: y, radius: radius)
    })
}

let white = RGBA(r: 255, g: 255, b: 255)
/// A square 1000×1000 canvas rendered at 100 px: 10 tenths of a point per pixel.
let square = CanvasSize(width: 1000, height: 1000)

func isDark(_ c: RGBA) -> Bool { Int(c.r) + Int(c.g) + Int(c.b) < 3 * 100 }

@Suite struct ThumbnailRendererTests {
    @Test func sizeKeepsTheCanvasAspectRatio() {
        #expect(ThumbnailRenderer.size(for: .a4) == (181, 256))        // 5953/8419·256 = 181.01…
        #expect(ThumbnailRenderer.size(for: CanvasSize(width: 8419, height: 5953)) == (256, 181))
        #expect(ThumbnailRenderer.size(for: square, maxSide: 100) == (100, 100))
        #expect(ThumbnailRenderer.size(for: CanvasSize(width: 100_000, height: 10), maxSide: 64) == (64, 1))
        let t = ThumbnailRenderer.render(PageState(page: PageID()), canvas: .a4)
        #expect(t.width == 181 && t.height == 256 && t.pixels.count == 181 * 256 * 4)
        let png = try? DecodedPNG(t.png())
        #expect(png?.width == 181 && png?.height == 256)
    }

    @Test func emptyPageIsWhiteAndOpaque() {
        let t = ThumbnailRenderer.render(PageState(page: PageID()), canvas: square, maxSide: 50)
        #expect(t.pixels.allSatisfy { $0 == 255 })
    }

    @Test func strokeDarkensItsPixelsAndLeavesCornersWhite() throws {
        let t = ThumbnailRenderer.render(page([(.stroke(line(y: 500, x0: 100, x1: 900)), .identity, [])]),
                                         canvas: square, maxSide: 100)
        // y = 500 tenths → 50 px; radius 40 → 4 px.
        for x in stride(from: 12, through: 88, by: 4) {
            #expect(isDark(t.pixel(x, 50)), "x \(x)")
            #expect(isDark(t.pixel(x, 48)) && isDark(t.pixel(x, 52)), "x \(x)")
            #expect(t.pixel(x, 40) == white && t.pixel(x, 60) == white, "x \(x)")
        }
        for (x, y) in [(0, 0), (99, 0), (0, 99), (99, 99), (50, 10), (50, 90)] {
            #expect(t.pixel(x, y) == white, "(\(x), \(y))")
        }
        // Round caps: the line reaches past its end points by about the radius, not further.
        #expect(isDark(t.pixel(7, 50)) && t.pixel(3, 50) == white)
        // The PNG carries the same pixels.
        let png = try DecodedPNG(t.png())
        #expect(png.pixels == t.pixels)
    }

    @Test func erasedRangeLeavesAGap() {
        let s = line(y: 500, x0: 100, x1: 900)   // 41 points, 20 tenths apart: point i at x = 100 + 20 i
        let whole = ThumbnailRenderer.render(page([(.stroke(s), .identity, [])]), canvas: square, maxSide: 100)
        // Erase points 15..<26 (x 400…600): visible fragments end at x 380 and start at x 620.
        let cut = ThumbnailRenderer.render(page([(.stroke(s), .identity, [PointRange(15, 26)])]), canvas: square, maxSide: 100)
        #expect(isDark(whole.pixel(50, 50)))
        for x in 44...56 { #expect(cut.pixel(x, 50) == white, "x \(x)") }
        #expect(isDark(cut.pixel(30, 50)) && isDark(cut.pixel(70, 50)))
        // A single visible point still draws a dot.
        let dot = ThumbnailRenderer.render(page([(.stroke(s), .identity, [PointRange(0, 20), PointRange(21, 41)])]),
                                           canvas: square, maxSide: 100)
        #expect(isDark(dot.pixel(50, 50)) && dot.pixel(30, 50) == white && dot.pixel(70, 50) == white)
        // Fully erased: nothing.
        let none = ThumbnailRenderer.render(page([(.stroke(s), .identity, [PointRange(0, 41)])]), canvas: square, maxSide: 100)
        #expect(none.pixels.allSatisfy { $0 == 255 })
    }

    @Test func translatedElementMovesItsPixels() {
        let s = line(y: 200, x0: 200, x1: 400, radius: 30)
        let a = ThumbnailRenderer.render(page([(.stroke(s), .identity, [])]), canvas: square, maxSide: 100)
        let b = ThumbnailRenderer.render(page([(.stroke(s), .translation(300, 500), [])]), canvas: square, maxSide: 100)
        // Moving by (30 px, 50 px) shifts the picture exactly (whole pixels).
        var shifted = true
        for y in 0..<100 {
            for x in 0..<100 {
                let src = (x >= 30 && y >= 50) ? a.pixel(x - 30, y - 50) : white
                if b.pixel(x, y) != src { shifted = false }
            }
        }
        #expect(shifted)
        #expect(isDark(a.pixel(30, 20)) && b.pixel(30, 20) == white && isDark(b.pixel(60, 70)))
        // A scale by 2 about the origin doubles coordinates and the radius.
        let big = ThumbnailRenderer.render(page([(.stroke(s), Transform(a: 2 * 65536, b: 0, c: 0, d: 2 * 65536, tx: 0, ty: 0), [])]),
                                           canvas: square, maxSide: 100)
        #expect(isDark(big.pixel(60, 40)) && isDark(big.pixel(60, 45)) && big.pixel(60, 20) == white)
    }

    @Test func imageIsAGrayBoxWithABorder() {
        let img = ImageElement(asset: AssetID.of([1, 2, 3]), frame: QRect(x: 200, y: 200, width: 400, height: 300))
        let t = ThumbnailRenderer.render(page([(.image(img), .translation(100, 0), [])]), canvas: square, maxSide: 100)
        // Box x 30..<70, y 20..<50.
        #expect(t.pixel(50, 35) == RGBA(r: 0xE0, g: 0xE0, b: 0xE0))
        #expect(t.pixel(30, 35) == RGBA(r: 0x90, g: 0x90, b: 0x90) && t.pixel(69, 35) == RGBA(r: 0x90, g: 0x90, b: 0x90))
        #expect(t.pixel(50, 20) == RGBA(r: 0x90, g: 0x90, b: 0x90) && t.pixel(50, 49) == RGBA(r: 0x90, g: 0x90, b: 0x90))
        #expect(t.pixel(29, 35) == white && t.pixel(70, 35) == white && t.pixel(50, 50) == white)
    }

    @Test func orderAndOpacity() {
        let red = InkStyle(tool: .pen, color: RGBA(r: 255, g: 0, b: 0))
        let hi = InkStyle(tool: .highlighter, color: RGBA(r: 255, g: 255, b: 0))
        let below = line(y: 500, x0: 100, x1: 900, style: red)
        let over = line(y: 500, x0: 100, x1: 900, style: hi)
        // Top wins when opaque.
        let t1 = ThumbnailRenderer.render(page([(.stroke(line(y: 500, x0: 100, x1: 900)), .identity, []), (.stroke(below), .identity, [])]),
                                          canvas: square, maxSide: 100)
        #expect(t1.pixel(50, 50) == RGBA(r: 255, g: 0, b: 0))
        // A highlighter over white is a pale tint, and translucent over ink; its own segments
        // overlapping do not darken it (one blend per stroke).
        let t2 = ThumbnailRenderer.render(page([(.stroke(over), .identity, [])]), canvas: square, maxSide: 100)
        let p = t2.pixel(50, 50)
        #expect(p.r == 255 && p.g == 255 && p.b > 140 && p.b < 190, "\(p)")
        #expect(t2.pixel(20, 50) == p && t2.pixel(80, 50) == p)
        let t3 = ThumbnailRenderer.render(page([(.stroke(below), .identity, []), (.stroke(over), .identity, [])]),
                                          canvas: square, maxSide: 100)
        #expect(t3.pixel(50, 50).r == 255 && t3.pixel(50, 50).g > 50 && t3.pixel(50, 50).g < 120)
    }

    @Test func sameStateSameBytes() {
        let seed = UInt64.random(in: 0...UInt64.max)
        let strokes = HandwritingGenerator.strokes(seed: seed, count: 200)
        let state = page(strokes.map { (.stroke($0), .identity, []) })
        let a = ThumbnailRenderer.render(state, canvas: .a4).png()
        let b = ThumbnailRenderer.render(state, canvas: .a4).png()
        #expect(a == b, "seed \(seed)")
        #expect(ThumbnailRenderer.render(state, canvas: .a4).pixels.contains { $0 < 128 }, "seed \(seed)")
    }

    @Test func farAwayAndDegenerateInputDoNotTrap() {
        let lim = Int32(Quantization.coordinateLimit)
        let s = Stroke(points: [StrokePoint(x: -lim, y: -lim, radius: 0), StrokePoint(x: lim, y: lim, radius: 1_000_000)])
        let img = ImageElement(asset: AssetID.of([]), frame: QRect(x: lim, y: -lim, width: Int32.max, height: 0))
        let t = Transform(a: Int32.max, b: Int32.min, c: 0, d: -65536, tx: lim, ty: -lim)
        _ = ThumbnailRenderer.render(page([(.stroke(s), t, []), (.image(img), t, []), (.stroke(s), .identity, [PointRange(5, 9)])]),
                                     canvas: CanvasSize(width: 0, height: -5), maxSide: 0)
        _ = ThumbnailRenderer.render(page([(.stroke(Stroke(points: [])), .identity, [])]), canvas: .a4, maxSide: 1_000_000)
    }
}

@Suite struct PNGEncoderTests {
    @Test func crc32MatchesKnownVectors() {
        #expect(CRC32.checksum(Array("123456789".utf8)) == 0xCBF4_3926)   // the CRC-32 check value
        #expect(CRC32.checksum([UInt8]()) == 0)
        #expect(CRC32.checksum(Array("IEND".utf8)) == 0xAE42_6082)        // every PNG ends with these bytes
        #expect(CRC32.checksum(Array("6789".utf8), continuing: CRC32.checksum(Array("12345".utf8))) == 0xCBF4_3926)
        #expect(PNGEncoder.adler32(Array("Wikipedia".utf8)) == 0x11E6_0398)
    }

    @Test func structureOfASmallFile() throws {
        let t = Thumbnail(width: 2, height: 1, pixels: [1, 2, 3, 4, 5, 6, 7, 8])
        let png = t.png()
        #expect(Array(png[0..<8]) == [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
        #expect(Array(png[8..<16]) == [0, 0, 0, 13] + Array("IHDR".utf8))
        #expect(Array(png.suffix(12)) == [0, 0, 0, 0] + Array("IEND".utf8) + [0xAE, 0x42, 0x60, 0x82])
        let d = try DecodedPNG(png)
        #expect(d.width == 2 && d.height == 1 && d.chunkTypes == ["IHDR", "IDAT", "IEND"] && d.pixels == t.pixels)
        // A flipped bit anywhere in a chunk is caught by its CRC.
        var bad = png
        bad[40] ^= 0x10
        #expect(throws: DecodedPNG.Failure.self) { try DecodedPNG(bad) }
    }

    /// [PKG-17] A thumbnail is compressed: a page of handwriting takes a fraction of its
    /// pixels' bytes, and inflates (with zlib) to exactly its pixels.
    @Test func thumbnailsAreCompressed() throws {
        let strokes = HandwritingGenerator.strokes(seed: 7, count: 300)
        let t = ThumbnailRenderer.render(page(strokes.map { (.stroke($0), .identity, []) }), canvas: .a4, maxSide: 256)
        let png = t.png()
        #expect(png.count * 4 < t.pixels.count, "\(png.count) bytes for \(t.pixels.count) bytes of pixels")
        #expect(try DecodedPNG(png).pixels == t.pixels)
        #expect(t.pixels.contains { $0 != 255 }, "the page drew something")
    }

    /// The zlib stream round-trips whatever the data: empty, compressible, incompressible.
    @Test func zlibStreamsRoundTrip() throws {
        var rng = SplitMix64(seed: 0x21B)
        for data in [[], [UInt8](repeating: 0, count: 100_000), (0..<70_000).map { _ in UInt8(truncatingIfNeeded: rng.next()) }] {
            let z = try #require(PNGEncoder.zlibCompressed(data))
            #expect(try DecodedPNG.inflate(z, size: data.count) == data, "\(data.count) bytes")
        }
    }

    @Test func storedBlocksSplitAt65535() throws {
        for n in [0, 1, 65_534, 65_535, 65_536, 3 * 65_535 + 7] {
            var rng = SplitMix64(seed: UInt64(n))
            let data = (0..<n).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            let z = PNGEncoder.zlibStored(data)
            #expect(try DecodedPNG.inflateStored(z) == data, "n \(n)")
            let blocks = max(1, (n + 65_534) / 65_535)
            #expect(z.count == 2 + 5 * blocks + n + 4, "n \(n)")
        }
        // A large picture spans several blocks and still decodes.
        let big = ThumbnailRenderer.render(page([(.stroke(line(y: 5000, x0: 0, x1: 10000)), .identity, [])]),
                                           canvas: CanvasSize(width: 10000, height: 10000), maxSide: 300)
        #expect(try DecodedPNG(big.png()).pixels == big.pixels)
    }
}
