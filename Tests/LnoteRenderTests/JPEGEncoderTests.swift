import Foundation
import Testing
import LnoteModel
@testable import LnoteRender

/// A seed from LNOTE_SEED or a random one (printed by each test that uses it on failure).
private func jpegSeed() -> UInt64 {
    if let s = ProcessInfo.processInfo.environment["LNOTE_SEED"], let v = UInt64(s) { return v }
    return UInt64.random(in: 0...UInt64.max)
}

/// A page of seeded handwriting on A4, rendered at 256 px.
private func handwritingThumbnail(seed: UInt64, strokes: Int = 120) throws -> Thumbnail {
    let rep = ReplicaID(3)
    let elements = HandwritingGenerator.strokes(seed: seed, count: strokes).enumerated().map { i, s in
        ElementRecord(id: OpID(replica: rep, counter: UInt64(i + 1)), lamport: UInt64(i + 1), wallTime: 0,
                      content: .stroke(s), transform: LWWRegister(.identity), z: LWWRegister(ZKey(layer: Int64(i))),
                      erased: [])
    }
    return try PageRenderer.raster(PageState(page: PageID(), elements: elements), canvas: .a4, maxSide: 256)
}

/// The marker segments of a JPEG header up to SOS: (marker, offset of FF, payload).
private func segments(_ j: [UInt8]) -> [(marker: UInt8, at: Int, payload: [UInt8])] {
    var out: [(UInt8, Int, [UInt8])] = []
    var at = 2
    while at + 3 < j.count, j[at] == 0xFF, j[at + 1] != 0xDA {
        let len = Int(j[at + 2]) << 8 | Int(j[at + 3])
        out.append((j[at + 1], at, Array(j[(at + 4)..<(at + 2 + len)])))
        at += 2 + len
    }
    return out
}

@Suite("JPEGEncoder: thumbnails as baseline JPEG through TurboJPEG")
struct JPEGEncoderTests {
    /// [PKG-17] A JPEG's decoding costs a pass over the picture per scan: more than 100 scans
    /// (or 10⁹ scan pixels) is refused before anything is allocated, as beyond the limits
    /// (drawn as a placeholder), rather than taking minutes a draw. The count errs on the side
    /// of the limit: start-of-scan markers inside a comment count too.
    @Test("[PKG-17] a JPEG of more than 100 scans is beyond the limits; one scan decodes")
    func scanLimit() throws {
        let t = try handwritingThumbnail(seed: 7)
        let jpeg = try JPEGEncoder.encode(t)
        #expect(JPEGDecoder.scanCount(jpeg) == 1)
        #expect(try JPEGDecoder.decode(jpeg).width == t.width)
        let markers = [UInt8](repeating: 0, count: 0) + (0..<101).flatMap { _ in [UInt8(0xFF), 0xDA] }
        let comment: [UInt8] = [0xFF, 0xFE, UInt8((markers.count + 2) >> 8), UInt8((markers.count + 2) & 0xFF)] + markers
        let many = Array(jpeg.prefix(2)) + comment + Array(jpeg.dropFirst(2))
        #expect(JPEGDecoder.scanCount(many) == 102)
        do {
            _ = try JPEGDecoder.decode(many, name: "many.jpg")
            Issue.record("a JPEG of 102 scans was decoded")
        } catch let e as LnoteError {
            #expect(e.code == .limitExceeded && e.message.contains("102 scans") && e.path == "many.jpg", "\(e)")
        }
    }

    @Test("[PKG-103] a rendered page round-trips through JPEG within a tolerance (seeded)")
    func roundTrip() throws {
        let seed = jpegSeed()
        let t = try handwritingThumbnail(seed: seed)
        let jpeg = try JPEGEncoder.encode(t)
        let back = try JPEGEncoder.decode(jpeg)
        #expect(back.width == t.width && back.height == t.height, "seed \(seed)")
        var sum = 0, big = 0
        for i in stride(from: 0, to: t.pixels.count, by: 4) {
            #expect(back.pixels[i + 3] == 255)
            for c in 0..<3 {
                let d = abs(Int(t.pixels[i + c]) - Int(back.pixels[i + c]))
                sum += d
                if d > 64 { big += 1 }
            }
        }
        let mean = Double(sum) / Double(t.width * t.height * 3)
        // Black ink on white at quality 80, 4:2:0: errors only near edges.
        #expect(mean < 4, "mean error \(mean), seed \(seed)")
        #expect(Double(big) / Double(t.width * t.height * 3) < 0.01, "\(big) channel values off by more than 64, seed \(seed)")
        // A white area stays white (within JPEG's rounding): the top margin of the page.
        for x in 0..<t.width where t.pixel(x, 2) == RGBA(r: 255, g: 255, b: 255) {
            #expect(back.pixel(x, 2).r >= 250, "x \(x), seed \(seed)")
        }
        // Small: a 181×256 thumbnail of a written page is a few KiB, not the 185 KB of its pixels.
        #expect(jpeg.count < 40_000, "\(jpeg.count) bytes, seed \(seed)")
    }

    @Test("[PKG-103] baseline sequential (SOF0), 3 components at 4:2:0, JFIF first, SOI … EOI")
    func baseline420() throws {
        let t = try handwritingThumbnail(seed: 11, strokes: 10)
        let jpeg = try JPEGEncoder.encode(t)
        #expect(jpeg.prefix(2) == [0xFF, 0xD8] && jpeg.suffix(2) == [0xFF, 0xD9])
        let segs = segments(jpeg)
        #expect(segs.first?.marker == 0xE0 && segs.first?.payload.prefix(5) == [0x4A, 0x46, 0x49, 0x46, 0x00])  // "JFIF\0"
        #expect(!segs.contains { [0xC1, 0xC2, 0xC3].contains($0.marker) }, "no extended or progressive frame")
        let sof = try #require(segs.first { $0.marker == 0xC0 })
        // precision 8, height, width, 3 components: Y 2×2, Cb 1×1, Cr 1×1.
        #expect(sof.payload[0] == 8)
        #expect(Int(sof.payload[1]) << 8 | Int(sof.payload[2]) == t.height)
        #expect(Int(sof.payload[3]) << 8 | Int(sof.payload[4]) == t.width)
        #expect(sof.payload[5] == 3)
        #expect(sof.payload[7] == 0x22 && sof.payload[10] == 0x11 && sof.payload[13] == 0x11)
    }

    @Test("[PKG-103] translucent pixels are composited over white: the picture is opaque")
    func whiteBackground() throws {
        // 16×16: transparent, half-transparent red, opaque blue quadrants.
        var px: [UInt8] = []
        for y in 0..<16 {
            for x in 0..<16 {
                switch (x < 8, y < 8) {
                case (true, true): px += [0, 0, 0, 0]
                case (false, true): px += [255, 0, 0, 128]
                default: px += [0, 0, 255, 255]
                }
            }
        }
        let back = try JPEGEncoder.decode(try JPEGEncoder.encode(Thumbnail(width: 16, height: 16, pixels: px), quality: 95))
        func near(_ a: RGBA, _ b: RGBA, _ tol: Int) -> Bool {
            abs(Int(a.r) - Int(b.r)) <= tol && abs(Int(a.g) - Int(b.g)) <= tol && abs(Int(a.b) - Int(b.b)) <= tol
        }
        #expect(near(back.pixel(2, 2), RGBA(r: 255, g: 255, b: 255), 6), "\(back.pixel(2, 2))")
        #expect(near(back.pixel(13, 2), RGBA(r: 255, g: 127, b: 127), 24), "\(back.pixel(13, 2))")
        #expect(near(back.pixel(4, 13), RGBA(r: 0, g: 0, b: 255), 24), "\(back.pixel(4, 13))")
    }

    @Test("[PKG-103] a comment goes in one COM segment right after APP0 and is read back; the picture is unchanged")
    func comment() throws {
        let t = try handwritingThumbnail(seed: 5, strokes: 20)
        let text = Array("lnote-thumbnail 1 ".utf8) + Array(repeating: UInt8(ascii: "a"), count: 64)
        let plain = try JPEGEncoder.encode(t)
        let stamped = try JPEGEncoder.encode(t, comment: text)
        #expect(stamped.count == plain.count + 4 + text.count)
        let segs = segments(stamped)
        #expect(segs.map(\.marker).prefix(2) == [0xE0, 0xFE])
        #expect(segs[1].payload == text)
        #expect(try JPEGEncoder.comments(in: stamped) == [text])
        #expect(try JPEGEncoder.comments(in: plain) == [])
        #expect(try JPEGEncoder.decode(stamped) == JPEGEncoder.decode(plain))
        // An empty comment and the largest one.
        #expect(try JPEGEncoder.comments(in: JPEGEncoder.encode(t, comment: [])) == [[]])
        let largest = [UInt8](repeating: 0x41, count: JPEGEncoder.maxCommentBytes)
        #expect(try JPEGEncoder.comments(in: JPEGEncoder.encode(t, comment: largest)) == [largest])
        // The first comment taken ends the walk: a prefix cut in the scan, or in a later
        // segment, still yields it; one not taken is passed over; none taken reads to SOS.
        let cut = Array(stamped.prefix(segs[0].payload.count + 8 + text.count + 10))
        #expect(try JPEGEncoder.firstComment(in: cut) { $0.count == 82 }.map(Array.init) == text)
        #expect(throws: LnoteError(.truncated)) { try JPEGEncoder.firstComment(in: cut) { _ in false } }
        #expect(try JPEGEncoder.firstComment(in: stamped) { $0.count == 1 } == nil)
    }

    @Test("bad arguments and bad bytes are typed errors, never a crash (seeded truncations and flips)")
    func errors() throws {
        let t = try handwritingThumbnail(seed: 9, strokes: 10)
        #expect(throws: LnoteError(.invalidArgument)) { try JPEGEncoder.encode(t, quality: 0) }
        #expect(throws: LnoteError(.invalidArgument)) { try JPEGEncoder.encode(t, quality: 101) }
        #expect(throws: LnoteError(.invalidArgument)) {
            try JPEGEncoder.encode(t, comment: [UInt8](repeating: 0, count: JPEGEncoder.maxCommentBytes + 1))
        }
        #expect(throws: LnoteError(.corrupt)) { try JPEGEncoder.decode(Array("not a jpeg".utf8)) }
        #expect(throws: LnoteError(.corrupt)) { try JPEGEncoder.comments(in: t.cairoPNG()) }
        let jpeg = try JPEGEncoder.encode(t, comment: Array("hello".utf8))
        do {
            _ = try JPEGEncoder.comments(in: Array(jpeg.prefix(30)))
            Issue.record("a header cut before its scan must not pass")
        } catch let e as LnoteError {
            #expect(e.code == .truncated && e.offset != nil, "\(e)")
        }
        // A too-large declared size is refused before anything is allocated from it.
        #expect(throws: LnoteError(.limitExceeded)) { try JPEGEncoder.decode(jpeg, maxPixels: 100) }

        let seed = jpegSeed()
        var rng = SplitMix64(seed: seed)
        for _ in 0..<200 {
            var bytes = jpeg
            if Bool.random(using: &rng) {
                bytes = Array(bytes.prefix(Int.random(in: 0..<bytes.count, using: &rng)))
            } else {
                for _ in 0..<Int.random(in: 1...8, using: &rng) {
                    bytes[Int.random(in: 0..<bytes.count, using: &rng)] ^= UInt8.random(in: 1...255, using: &rng)
                }
            }
            // Either outcome is fine; what matters is a value or an LnoteError, and no trap.
            do { _ = try JPEGEncoder.comments(in: bytes) } catch is LnoteError {} catch { Issue.record("seed \(seed): \(error)") }
            do { _ = try JPEGEncoder.decode(bytes) } catch is LnoteError {} catch { Issue.record("seed \(seed): \(error)") }
        }
    }
}
