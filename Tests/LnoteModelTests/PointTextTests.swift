import Foundation
import Testing
import LnoteModel

/// `lnote show --points` lines written as bytes (`PointText`) say exactly what the strings
/// they replace said: `%.1f`-style tenths without a trailing `.0`, Swift's description of
/// `Double(pressure) / 1000`, whole milliseconds.
@Suite struct PointTextTests {
    /// The line as it was made from strings.
    static func reference(_ p: StrokePoint) -> String {
        func pt(_ q: Int32) -> String {
            let a = abs(Int64(q))
            let whole = (q < 0 ? "-" : "") + String(a / 10)
            return a % 10 == 0 ? whole : whole + "." + String(a % 10)
        }
        return "    \(pt(p.x)) \(pt(p.y)) \(Double(p.pressure) / 1000) \(pt(p.radius)) \(p.t)\n"
    }

    @Test("every pressure, and coordinates, radii and times at their edges and at random, print as the strings did")
    func sameText() {
        var g = SplitMix64(seed: 15)
        var checked = 0
        func check(_ p: StrokePoint) {
            var out: [UInt8] = []
            PointText.line(p, into: &out)
            let expected = Self.reference(p)
            #expect(String(decoding: out, as: UTF8.self) == expected, "seed 15: \(p)")
            checked += 1
        }
        for pressure in 0...UInt16.max {
            check(StrokePoint(x: Int32(pressure) - 30_000, y: -Int32(pressure), pressure: pressure, radius: Int32(pressure % 97), t: UInt32(pressure)))
        }
        let edges: [Int32] = [0, 1, -1, 9, -9, 10, -10, 11, -11, 99, 100, 101, -105, Int32.max, Int32.min, Int32.max - 1, Int32.min + 1]
        for x in edges {
            for t: UInt32 in [0, 9, 10, 1000, UInt32.max] {
                check(StrokePoint(x: x, y: edges[Int(g.next() % UInt64(edges.count))], pressure: UInt16(truncatingIfNeeded: g.next()),
                                  radius: x, t: t))
            }
        }
        for _ in 0..<20_000 {
            check(StrokePoint(x: Int32(truncatingIfNeeded: g.next()), y: Int32(truncatingIfNeeded: g.next() >> UInt64(g.next() % 40)),
                              pressure: UInt16(truncatingIfNeeded: g.next()), radius: Int32(truncatingIfNeeded: g.next() % 5000),
                              t: UInt32(truncatingIfNeeded: g.next() >> UInt64(g.next() % 32))))
        }
        #expect(checked > 85_000)
    }
}
