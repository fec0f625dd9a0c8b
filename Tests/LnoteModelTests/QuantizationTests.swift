import Testing
import LnoteModel

@Suite("Quantization")
struct QuantizationTests {
    /// quantize(dequantize(q)) == q over a sweep of coordinates, including the limits.
    @Test func coordinateRoundTrip() throws {
        var qs: [Int32] = Array(-5000...5000)
        let lim = Quantization.coordinateLimit
        qs += [lim, -lim, lim - 1, -lim + 1, 1_234_567, -7_654_321]
        var g = SplitMix64(seed: 0x9A)
        for _ in 0..<20_000 { qs.append(Int32(g.int(in: Int(-lim)...Int(lim)))) }
        for q in qs {
            #expect(try Quantization.coordinate(Quantization.points(q)) == q, "q = \(q)")
        }
    }

    /// [IMP-3] dequantize(quantize(p)) is within half a step of p; halves round away from
    /// zero; NaN, infinities and magnitudes beyond 10,000,000 pt are refused.
    @Test func coordinateError() throws {
        var g = SplitMix64(seed: 0x9B)
        for _ in 0..<20_000 {
            let p = g.double(-1_000_000, 1_000_000) * (g.chance(0.5) ? 1 : 0.001)
            let back = Quantization.points(try Quantization.coordinate(p))
            #expect(abs(back - p) <= 0.05 + 1e-9, "p = \(p)")
        }
        #expect(throws: LnoteError(.invalidArgument)) { try Quantization.coordinate(.nan) }
        #expect(throws: LnoteError(.invalidArgument)) { try Quantization.coordinate(.infinity) }
        #expect(throws: LnoteError(.invalidArgument)) { try Quantization.coordinate(10_000_001) }
        #expect(try Quantization.coordinate(10_000_000) == Quantization.coordinateLimit)
        // Halves round away from zero.
        #expect(try Quantization.coordinate(0.25) == 3)
        #expect(try Quantization.coordinate(-0.25) == -3)
    }

    /// [IMP-3] Pressure to thousandths: a round trip for every step, within half a step,
    /// clamped to 0...1, NaN refused.
    @Test func pressure() throws {
        for q in UInt16(0)...1000 {
            #expect(try Quantization.pressure(Quantization.pressure(q)) == q, "q = \(q)")
        }
        var g = SplitMix64(seed: 0x9C)
        for _ in 0..<10_000 {
            let p = g.unit()
            #expect(abs(Quantization.pressure(try Quantization.pressure(p)) - p) <= 0.0005 + 1e-12)
        }
        #expect(try Quantization.pressure(-3) == 0)
        #expect(try Quantization.pressure(7) == 1000)
        #expect(throws: LnoteError(.invalidArgument)) { try Quantization.pressure(Double.nan) }
    }

    /// [IMP-3] Times round half away from zero to whole milliseconds; infinities are refused.
    @Test func milliseconds() throws {
        #expect(try Quantization.milliseconds(4.5) == 5)
        #expect(try Quantization.milliseconds(-4.5) == -5)
        #expect(throws: LnoteError(.invalidArgument)) { try Quantization.milliseconds(.infinity) }
    }
}
