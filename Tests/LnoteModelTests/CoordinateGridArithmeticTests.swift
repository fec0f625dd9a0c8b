import Foundation
import Testing
@testable import LnoteModel

/// [PT2-11] The grid arithmetic's fast paths (remainders and quotients by multiplication below
/// 2³¹ or 2³², divisions above) against plain integer arithmetic at and around their limits,
/// for every grid of `G`; and strokes on every grid and phase that span the whole 32-bit
/// range, coded alone and in a chunk, against the reference codec written from the spec.
@Suite struct CoordinateGridArithmeticTests {
    typealias Ref = ReferenceStrokeCodecV2

    /// Values at and around the fast paths' limits, and seeded others.
    static func samples(seed: UInt64) -> [Int64] {
        var out: [Int64] = [0, 1, 2, 3, 63, 64, 65]
        for limit in [Int64(1) << 31, 1 << 32, 1 << 33, 1 << 34] {
            for d in [-2, -1, 0, 1, 2] as [Int64] { out += [limit + d, -(limit + d)] }
        }
        var g = SplitMix64(seed: seed)
        for _ in 0..<200 { out.append(Int64(bitPattern: g.next()) >> Int64(g.next() % 40 + 24)) }
        return out.flatMap { [$0, -$0] }
    }

    /// `⌊x / d⌋` in exact arithmetic (binary64 is exact below 2⁵³).
    static func floor(_ x: Int64, _ d: Int64) -> Int64 { Int64((Double(x) / Double(d)).rounded(.down)) }

    @Test("[PT2-11] remainders and quotients of every grid at and around the fast paths' limits")
    func fastPathsAgreeWithDivision() {
        let seed = testSeeds(0x6_41D5, count: 1)[0]
        for x in Self.samples(seed: seed) {
            for g in StrokeCodecV2.coordinateGrids {
                let r = x - g.a * Self.floor(x, g.a)
                #expect(g.remainder(x) == r, "seed \(seed): \(x) mod \(g.a)")
                #expect(g.ceilDivA(x) == -Self.floor(-x, g.a), "seed \(seed): ⌈\(x) / \(g.a)⌉")
                #expect(g.floorDivQ(x) == Self.floor(x, g.q), "seed \(seed): ⌊\(x) / \(g.q)⌋")
            }
        }
    }

    /// Points whose x and y are on `grid` with `phase` from a first value near `Int32.min`
    /// up to values near `Int32.max` (steps of up to 2³² − 1 tenths, [PT2-9]).
    static func stroke(grid g: StrokeCodecV2.CoordinateGrid, phase p: Int64, rng: inout SplitMix64) -> [StrokePoint] {
        let v0 = Int64(Int32.min) + Int64(rng.next() % 16)
        let top = (Int64(Int32.max) - v0) * g.q / g.a - 1
        var ks: [Int64] = [0, top, 1, top / 2, top - 1, 2]
        for _ in 0..<6 { ks.append(Int64(rng.next() % UInt64(top))) }
        return ks.map { k in
            let v = Int32(v0 + Self.floor(g.a * k + p, g.q))
            return StrokePoint(x: v, y: v, pressure: 500, radius: 0, t: 0)
        }
    }

    @Test("[PT2-11] strokes on every grid and phase spanning the 32-bit range round-trip, as the reference codes them")
    func fullRangeStrokes() throws {
        let seed = testSeeds(0x6_41D5, count: 1)[0]
        var rng = SplitMix64(seed: seed)
        var chunk = StrokeCodecV2.Context.chunkWithGrids, refChunk = Ref.Context.chunk(grids: true)
        var chunkBytes = ByteWriter(), refChunkBytes: [UInt8] = [], strokes: [[StrokePoint]] = []
        for g in StrokeCodecV2.coordinateGrids {
            for p in 0..<g.q {
                let points = Self.stroke(grid: g, phase: p, rng: &rng)
                var alone = StrokeCodecV2.Context.standaloneWithGrids, refAlone = Ref.Context.standalone(writtenParameters: true, grids: true)
                var w = ByteWriter()
                StrokeCodecV2.encodePoints(points, width: 20, context: &alone, into: &w)
                #expect(w.bytes == Ref.encodedPoints(points, width: 20, context: &refAlone), "seed \(seed): \(g.a)/\(g.q) phase \(p) alone")
                var r = ByteReader(w.bytes)
                var back = StrokeCodecV2.Context.standaloneWithGrids
                #expect(try StrokeCodecV2.decodePoints(&r, width: 20, context: &back) == points, "seed \(seed): \(g.a)/\(g.q) phase \(p)")
                StrokeCodecV2.encodePoints(points, width: 20, context: &chunk, into: &chunkBytes)
                refChunkBytes += Ref.encodedPoints(points, width: 20, context: &refChunk)
                strokes.append(points)
            }
        }
        // The whole run as one chunk context carried from stroke to stroke: the reference's
        // bytes, and it decodes back.
        #expect(chunkBytes.bytes == refChunkBytes, "seed \(seed): the chunk")
        var r = ByteReader(chunkBytes.bytes)
        var back = StrokeCodecV2.Context.chunkWithGrids
        for (i, points) in strokes.enumerated() {
            #expect(try StrokeCodecV2.decodePoints(&r, width: 20, context: &back) == points, "seed \(seed): stroke \(i) of the chunk")
        }
        #expect(r.isAtEnd && back == chunk)
    }
}
