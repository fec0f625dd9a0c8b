import Foundation
import Testing
import LnoteModel
@testable import LnoteInterchange

/// [XCH-9] InkML out and in gives back the same quantized points and ink.
@Suite("Interchange: InkML round trip")
struct RoundTripTests {
    /// Seeded strokes of both generator profiles, spread over pages, written and read back:
    /// every point's x, y, t, pressure and radius, every stroke's tool, color and width, each
    /// page's canvas, are the same.
    @Test(arguments: HandwritingGenerator.Profile.allCases)
    func generatedStrokes(_ profile: HandwritingGenerator.Profile) throws {
        let seed = testSeed()
        var rng = SplitMix64(seed: seed)
        var options = HandwritingGenerator.Options()
        options.profile = profile
        options.pointsPerStroke = 2...120
        var generator = HandwritingGenerator(seed: rng.next(), options: options)
        var pages: [InkMLWriter.Page] = []
        for _ in 0..<rng.int(in: 1...3) {
            var strokes = generator.strokes(rng.int(in: 1...12))
            // Every ink: tools, colors with alpha, widths; negative coordinates; extreme pressures.
            for k in strokes.indices {
                let tool = ToolKind.allCases[rng.int(in: 0...3)]
                strokes[k].style = InkStyle(tool: tool, color: RGBA(packed: UInt32(truncatingIfNeeded: rng.next())),
                                            width: Int32(rng.int(in: 1...400)))
                var pts = strokes[k].points
                for i in pts.indices where rng.chance(0.1) {
                    pts[i].x = Int32(rng.int(in: -100_000...100_000))
                    pts[i].pressure = [0, 1, 999, 1000][rng.int(in: 0...3)]
                    pts[i].radius = Int32(rng.int(in: 0...5000))
                }
                strokes[k] = Stroke(style: strokes[k].style, points: pts)
            }
            pages.append(InkMLWriter.Page(canvas: CanvasSize(width: Int32(rng.int(in: 1...20000)), height: Int32(rng.int(in: 1...20000))),
                                          strokes: strokes))
        }
        let text = InkMLWriter.write(pages)
        let ink = try InkMLReader.read(Array(text.utf8), path: "round-trip.inkml")
        try #require(ink.pages.count == pages.count, "seed \(seed)")
        for (p, q) in zip(pages, ink.pages) {
            #expect(q.canvas == p.canvas, "seed \(seed)")
            try #require(q.strokes.count == p.strokes.count, "seed \(seed)")
            for (a, b) in zip(p.strokes, q.strokes) {
                #expect(a.style == b.style, "seed \(seed)")
                #expect(a.points == b.points, "seed \(seed): first difference at \(String(describing: zip(a.points, b.points).first { $0 != $1 }))")
            }
        }
        #expect(ink.pages.first?.target == .given && ink.pages.dropFirst().allSatisfy { $0.target == .new }, "seed \(seed)")
    }

    /// [XCH-2] [XCH-9] [XCH-12] One stroke whose trace is more than libxml2's default limit
    /// of 10,000,000 bytes of text in one node comes back whole: 360,000 seeded points with
    /// every channel, about 11 MB of trace text.
    @Test func traceOverTenMegabytes() throws {
        let seed = testSeed()
        var rng = SplitMix64(seed: seed)
        var points: [StrokePoint] = []
        points.reserveCapacity(360_000)
        var t: UInt32 = 0
        for _ in 0..<360_000 {
            points.append(StrokePoint(x: Int32(rng.int(in: -900_000...900_000)), y: Int32(rng.int(in: -900_000...900_000)),
                                      pressure: UInt16(rng.int(in: 0...1000)), radius: Int32(rng.int(in: 0...5000)), t: t))
            t += UInt32(rng.int(in: 0...3))
        }
        let stroke = Stroke(style: InkStyle(tool: .pen, color: .black, width: 20), points: points)
        let text = InkMLWriter.write([InkMLWriter.Page(canvas: CanvasSize(width: 6120, height: 7920), strokes: [stroke])])
        #expect(text.utf8.count > 10_000_000, "seed \(seed): \(text.utf8.count) bytes")
        let ink = try InkMLReader.read(Array(text.utf8), path: "long.inkml")
        let back = try #require(ink.pages.first?.strokes.first, "seed \(seed)")
        #expect(back.points.count == points.count, "seed \(seed)")
        #expect(back.points == points, "seed \(seed): first difference at \(String(describing: zip(back.points, points).first { $0 != $1 }))")
    }

    /// [XCH-10] What is exported is what the page shows: a partly erased stroke becomes one
    /// trace per visible fragment (times relative to its first point), a moved one carries
    /// its translation.
    @Test func visibleFragmentsAndMoves() throws {
        let pts = (0..<6).map { StrokePoint(x: Int32($0 * 10), y: 5, pressure: 500, radius: 10, t: UInt32($0 * 4)) }
        let s = Stroke(style: InkStyle(), points: pts)
        var e = ElementRecord(id: ElementID(replica: ReplicaID(1), counter: 1), lamport: 1, wallTime: 0, content: .stroke(s),
                              z: LWWRegister(ZKey(layer: 0)))
        e.erased = [PointRange(2, 4)]
        e.transform = LWWRegister(.translation(7, -3))
        let out = try InkMLWriter.visibleStrokes([e])
        #expect(out.count == 2)
        #expect(out[0].points.map(\.x) == [7, 17] && out[1].points.map(\.x) == [47, 57])
        #expect(out.allSatisfy { $0.points.allSatisfy { $0.y == 2 } })
        #expect(out[1].points.map(\.t) == [0, 4])
    }

    /// [XCH-10] A scaled and mirrored element: points and radius through the matrix; one
    /// scaled past the coordinate limit is refused, naming the element, rather than clamped.
    @Test func scaledAndMirroredElements() throws {
        let pts = [StrokePoint(x: 100, y: 50, pressure: 500, radius: 10, t: 0), StrokePoint(x: 1_000_000, y: 0, pressure: 500, radius: 10, t: 4)]
        var e = ElementRecord(id: ElementID(replica: ReplicaID(1), counter: 7), lamport: 1, wallTime: 0,
                              content: .stroke(Stroke(style: InkStyle(), points: pts)), z: LWWRegister(ZKey(layer: 0)))
        e.transform = LWWRegister(Transform(a: -2 * Transform.one, b: 0, c: 0, d: 2 * Transform.one, tx: 5, ty: 0))
        let out = try InkMLWriter.visibleStrokes([e])
        #expect(out[0].points.map(\.x) == [-195, -1_999_995] && out[0].points.map(\.y) == [100, 0])
        #expect(out[0].points.map(\.radius) == [20, 20])  // |det| = 4: radius × 2
        e.transform = LWWRegister(Transform(a: -256 * Transform.one, b: 0, c: 0, d: 256 * Transform.one, tx: 0, ty: 0))
        do {
            _ = try InkMLWriter.visibleStrokes([e])
            Issue.record("a point scaled past the coordinate limit was exported")
        } catch let err as LnoteError {
            #expect(err.code == .limitExceeded && err.message.contains("element \(e.id)") && err.message.contains("point 1"), "\(err)")
        }
    }
}
