import Testing
import CLnoteZlib
import LnoteModel
@testable import LnoteRender

/// [PKG-17]: one page's drawing decodes at most `ImageCache.defaultPixelBudget` pixels of
/// images (sizes read from the headers first); images past it are placeholders, each asset is
/// decoded once a page and released after its last element.
@Suite struct ImageBudgetTests {
    typealias P = Pages

    /// A `side`×`side` PNG of one color: 1-bit palette, every row zero (a few KB encoded, like
    /// the hostile assets of the review: 1.3 MB for eight 7000×7000 ones).
    static func uniformPNG(side: Int, color: (UInt8, UInt8, UInt8)) throws -> [UInt8] {
        func be32(_ v: Int) -> [UInt8] { [UInt8(v >> 24 & 0xff), UInt8(v >> 16 & 0xff), UInt8(v >> 8 & 0xff), UInt8(v & 0xff)] }
        func chunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
            let body = Array(type.utf8) + data
            let crc = body.withUnsafeBufferPointer { crc32(0, $0.baseAddress, uInt($0.count)) }
            return be32(data.count) + body + be32(Int(crc))
        }
        let raw = [UInt8](repeating: 0, count: side * (1 + (side + 7) / 8))
        var out = [UInt8](repeating: 0, count: raw.count / 100 + 1024)
        var outLen = uLongf(out.count)
        let status = out.withUnsafeMutableBufferPointer { o in
            raw.withUnsafeBufferPointer { compress2(o.baseAddress, &outLen, $0.baseAddress, uLong($0.count), 9) }
        }
        #expect(status == Z_OK)
        return ImageAsset.pngSignature
            + chunk("IHDR", be32(side) + be32(side) + [1, 3, 0, 0, 0])
            + chunk("PLTE", [color.0, color.1, color.2])
            + chunk("IDAT", Array(out.prefix(Int(outLen))))
            + chunk("IEND", [])
    }

    /// Eight images in a 4×2 grid of 200×400 frames on a 1000×1000 canvas (centers at pixels
    /// (15 + 24 i, 25) and (15 + 24 i, 75) of a 100×100 picture), assets `ids` in order.
    static func grid(_ ids: [AssetID]) -> PageState {
        P.state(ids.enumerated().map { i, id in
            (.image(ImageElement(asset: id, frame: QRect(x: Int32(50 + (i % 4) * 240), y: Int32(i < 4 ? 50 : 550),
                                                          width: 200, height: 400), rotation: 0)), .identity, [])
        })
    }
    static func center(_ i: Int) -> (Int, Int) { (15 + 24 * (i % 4), i < 4 ? 25 : 75) }

    @Test func pageOfHugeImagesStaysWithinTheDecodedPixelBudget() throws {
        // 5000×5000 = 25 MP each: two fit in 64 MP, the third would not.
        let png = try Self.uniformPNG(side: 5000, color: (255, 0, 0))
        #expect(png.count < 100_000)
        let ids = (0..<8).map { AssetID.of([UInt8($0)]) }
        let lookup: AssetLookup = { ids.contains($0) ? png : nil }
        let state = Self.grid(ids)

        // The renderer's own counters.
        let cv = try CairoCanvas.image(width: 100, height: 100)
        let cache = ImageCache(lookup)
        let counts = PageRenderer.draw(state, on: cv.cr, view: .init(scale: 0.1, width: 100, height: 100, options: .raster),
                                       images: cache)
        #expect(counts.drawn == 2 && counts.placeholders == 6, "\(counts)")
        #expect(cache.decodedPixels == 50_000_000)
        #expect(cache.peakLivePixels == 25_000_000, "each surface is released after its only element")
        #expect(cache.livePixels == 0)
        for id in ids[2...] { #expect(cache.failures[id]?.code == .limitExceeded, "\(id)") }
        cache.close()
        _ = try cv.close()

        // The pixels: the first two images are drawn, the rest are the placeholder.
        let t = try PageRenderer.raster(state, canvas: P.square, maxSide: 100, assets: lookup)
        let gray = RGBA(r: 0xE0, g: 0xE0, b: 0xE0), red = RGBA(r: 255, g: 0, b: 0)
        for i in 0..<8 {
            let (x, y) = Self.center(i)
            #expect(t.pixel(x, y) == (i < 2 ? red : gray), "image \(i): \(t.pixel(x, y))")
        }
    }

    @Test func anAssetDrawnTwiceIsDecodedOnceAndChargedOnce() throws {
        let png = try Self.uniformPNG(side: 5000, color: (0, 0, 255))
        let id = AssetID.of(png)
        let other = AssetID.of([9])
        let otherPNG = try Self.uniformPNG(side: 5000, color: (0, 255, 0))
        // Elements: id, other, id, other, id: 50 MP of distinct assets, within the budget.
        let state = Self.grid([id, other, id, other, id])
        let lookup: AssetLookup = { $0 == id ? png : $0 == other ? otherPNG : nil }
        let cv = try CairoCanvas.image(width: 100, height: 100)
        let cache = ImageCache(lookup)
        let counts = PageRenderer.draw(state, on: cv.cr, view: .init(scale: 0.1, width: 100, height: 100, options: .raster),
                                       images: cache)
        #expect(counts.drawn == 5 && counts.placeholders == 0, "\(counts)")
        #expect(cache.decodedPixels == 50_000_000 && cache.livePixels == 0)
        cache.close()
        _ = try cv.close()
        // A JPEG's size is read from its header too.
        let jpeg = try P.jpeg(P.redBlue(40, 20))
        #expect(ImageAsset.pixelSize(jpeg)! == (40, 20))
        #expect(ImageAsset.pixelSize(png)! == (5000, 5000))
        #expect(ImageAsset.pixelSize(Array("text".utf8)) == nil)
    }
}
