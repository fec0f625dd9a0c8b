import LnoteModel

/// Writes strokes as W3C InkML, as Protocol/interchange.md section 4 says: one trace per
/// stroke (per visible fragment of a partly erased one), channels X, Y (pt), T (ms), F
/// (0…1) and W (pt, twice the radius), each value the decimal text of lnote's integer, so
/// that `InkMLReader` gives back the same quantized points ([XCH-9]).
public enum InkMLWriter {
    /// One page to write.
    public struct Page: Sendable {
        public var canvas: CanvasSize
        public var strokes: [Stroke]
        public init(canvas: CanvasSize, strokes: [Stroke]) {
            self.canvas = canvas
            self.strokes = strokes
        }
    }

    /// The InkML text of `pages`, each a `<traceGroup>` marked as a page.
    public static func write(_ pages: [Page]) -> String {
        var brushes: [InkStyle: Int] = [:]
        var brushOrder: [InkStyle] = []
        for p in pages {
            for s in p.strokes where brushes[s.style] == nil {
                brushes[s.style] = brushOrder.count
                brushOrder.append(s.style)
            }
        }
        var out = """
        <?xml version="1.0" encoding="UTF-8"?>
        <ink xmlns="http://www.w3.org/2003/InkML">
          <definitions>
            <context xml:id="lnote">
              <inkSource xml:id="lnoteSource">
                <traceFormat>
                  <channel name="X" type="decimal" units="pt"/>
                  <channel name="Y" type="decimal" units="pt"/>
                  <channel name="T" type="integer" units="ms"/>
                  <channel name="F" type="decimal" min="0" max="1"/>
                  <channel name="W" type="decimal" units="pt"/>
                </traceFormat>
              </inkSource>
            </context>

        """
        for (i, style) in brushOrder.enumerated() {
            let c = style.color
            out += "    <brush xml:id=\"b\(i)\">"
            out += "<brushProperty name=\"width\" value=\"\(tenths(style.width))\" units=\"pt\"/>"
            out += "<brushProperty name=\"color\" value=\"#\(hex(c.r))\(hex(c.g))\(hex(c.b))\"/>"
            out += "<brushProperty name=\"transparency\" value=\"\(255 - Int(c.a))\"/>"
            out += "<brushProperty name=\"lnoteTool\" value=\"\(style.tool)\"/></brush>\n"
        }
        out += "  </definitions>\n"
        for (n, p) in pages.enumerated() {
            out += "  <traceGroup>\n    <annotation type=\"page\">\(n + 1)</annotation>\n"
            out += "    <annotation type=\"canvas\">\(tenths(p.canvas.width)) \(tenths(p.canvas.height))</annotation>\n"
            for s in p.strokes {
                out += "    <trace contextRef=\"#lnote\" brushRef=\"#b\(brushes[s.style]!)\">"
                var first = true
                for q in s.points {
                    if !first { out += ", " }
                    first = false
                    out += tenths(q.x); out += " "
                    out += tenths(q.y); out += " "
                    out += String(q.t); out += " "
                    out += thousandths(q.pressure); out += " "
                    out += tenths(Int32(clamping: 2 * Int64(q.radius)))
                }
                out += "</trace>\n"
            }
            out += "  </traceGroup>\n"
        }
        out += "</ink>\n"
        return out
    }

    /// The strokes a page shows, as they are drawn: each visible fragment of a partly erased
    /// stroke on its own, every point through the element's transform ([XCH-10]).
    ///
    /// - Throws: `limitExceeded` naming the element when its transform (a scale, up to 256)
    ///   takes a point past ±10,000,000 pt or a radius past 10,000 pt: InkML written that way
    ///   could not be read back ([XCH-9]), so nothing is written.
    public static func visibleStrokes(_ elements: [ElementRecord]) throws -> [Stroke] {
        var out: [Stroke] = []
        for e in elements {
            guard case .stroke(let s) = e.content else { continue }
            let t = e.transform.value
            let points = s.points
            for r0 in e.visibleRanges where !r0.isEmpty {
                var frag = Array(points[Int(r0.from)..<Int(r0.to)])
                let t0 = frag[0].t
                for k in frag.indices {
                    var p = frag[k]
                    if t != .identity {
                        let x = Int64(t.a) * Int64(p.x) + Int64(t.c) * Int64(p.y)
                        let y = Int64(t.b) * Int64(p.x) + Int64(t.d) * Int64(p.y)
                        let nx = Interchange.div(x, 65536) + Int64(t.tx), ny = Interchange.div(y, 65536) + Int64(t.ty)
                        // [XCH-10] |det| in binary64: (a·d − b·c) ⊘ 2^32, every step one binary64 operation.
                        let det = (Double(t.a) * Double(t.d) - Double(t.b) * Double(t.c)) / (65536.0 * 65536.0)
                        let r = (Double(p.radius) * abs(det).squareRoot()).rounded(.toNearestOrAwayFromZero)
                        let limit = Int64(Quantization.coordinateLimit)
                        guard abs(nx) <= limit, abs(ny) <= limit, r <= Double(ContentBounds.maxRadius) else {
                            throw LnoteError(.limitExceeded,
                                             "element \(e.id): its transform puts point \(Int(r0.from) + k) at (\(nx), \(ny)) tenths with radius \(r), "
                                             + "beyond ±\(limit) tenths or a radius of \(ContentBounds.maxRadius): InkML could not hold it")
                        }
                        p.x = Int32(nx)
                        p.y = Int32(ny)
                        p.radius = Int32(r)
                    }
                    p.t -= t0
                    frag[k] = p
                }
                out.append(Stroke(style: s.style, points: frag))
            }
        }
        return out
    }

    /// Tenths as decimal points: `12.3`, `-0.5`, `7`.
    static func tenths(_ q: Int32) -> String {
        let a = abs(Int64(q))
        let whole = (q < 0 ? "-" : "") + String(a / 10)
        return a % 10 == 0 ? whole : whole + "." + String(a % 10)
    }

    /// Thousandths as a decimal fraction: `0.5`, `0.123`, `1`, `0`.
    static func thousandths(_ q: UInt16) -> String {
        if q % 1000 == 0 { return String(q / 1000) }
        var frac = String(q % 1000)
        while frac.count < 3 { frac = "0" + frac }
        while frac.hasSuffix("0") { frac.removeLast() }
        return String(q / 1000) + "." + frac
    }

    static func hex(_ b: UInt8) -> String {
        let s = String(b, radix: 16)
        return s.count == 1 ? "0" + s : s
    }
}
