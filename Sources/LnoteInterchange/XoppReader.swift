import Foundation
import LnoteModel

/// Reads Xournal++ documents (`.xopp`: gzip-compressed XML; plain XML is read too) as
/// Protocol/interchange.md section 3 says: every page with its size, every `<stroke>` of
/// every layer; text, images, LaTeX and eraser strokes are skipped and counted.
public enum XoppReader {
    /// Largest compressed file read.
    public static let maxFileBytes = 64 << 20

    /// Reads a .xopp file. `style` gives what a stroke does not say (none: Xournal++ writes
    /// tool, color and width on every stroke).
    public static func read(contentsOf path: String, style: InkStyle = InkStyle(),
                            inflateLimit: Int = StrokeImport.maxBytes, budget: ImportBudget = ImportBudget()) throws -> ImportedInk {
        try read(XMLInput.read(path, limit: maxFileBytes), path: path, style: style, inflateLimit: inflateLimit, budget: budget)
    }

    public static func read(_ bytes: [UInt8], path: String? = nil, style: InkStyle = InkStyle(),
                            inflateLimit: Int = StrokeImport.maxBytes, budget: ImportBudget = ImportBudget()) throws -> ImportedInk {
        let xml = Gzip.isGzip(bytes) ? try Gzip.inflate(bytes, limit: inflateLimit, path: path) : bytes
        let input = try XMLInput(bytes: xml, path: path.map { Gzip.isGzip(bytes) ? $0 + " (inflated)" : $0 })
        let handler = XoppHandler(style: style)
        handler.budget = budget
        try input.parse(handler)
        guard handler.sawRoot else { throw LnoteError(.invalidArgument, "not a Xournal++ document: no <xournal> element", path: path, offset: 0) }
        return handler.ink
    }

    /// Xournal's named colors (files of Xournal 0.4 and old Xournal++).
    static let namedColors: [String: UInt32] = [
        "black": 0x000000ff, "blue": 0x3333ccff, "red": 0xff0000ff, "green": 0x008000ff, "gray": 0x808080ff,
        "lightblue": 0x00c0ffff, "lightgreen": 0x00ff00ff, "magenta": 0xff00ffff, "orange": 0xff8000ff,
        "yellow": 0xffff00ff, "white": 0xffffffff,
    ]
}

final class XoppHandler: XMLHandler {
    let base: InkStyle
    var ink = ImportedInk()
    var sawRoot = false
    var stroke: (style: InkStyle, widths: [Double], widthsAt: Int, start: Int)?
    var text = ""
    var strokeIndex = 0

    init(style: InkStyle) { base = style }

    override func start(_ name: String, _ a: [String: String]) {
        switch name {
        case "xournal":
            sawRoot = true
        case "page":
            let pageAt = tagStart
            guard checkPageCount(ink.pages.count, at: pageAt) else { return }
            guard let ws = a["width"], let hs = a["height"], let w = XMLInput.number(Substring(ws)), let h = XMLInput.number(Substring(hs)),
                  let qw = try? Quantization.coordinate(w), let qh = try? Quantization.coordinate(h), qw > 0, qh > 0 else {
                return fail("page \(ink.pages.count + 1): width and height must be positive numbers")
            }
            ink.pages.append(ImportedPage(target: ink.pages.isEmpty ? .given : .new, canvas: CanvasSize(width: qw, height: qh), offset: pageAt))
        case "stroke":
            strokeIndex += 1
            guard !ink.pages.isEmpty else { return fail("stroke \(strokeIndex) is outside a <page>") }
            var style = base
            switch a["tool"] ?? "pen" {
            case "pen": style.tool = .pen
            case "highlighter": style.tool = .highlighter
            case "eraser":
                ink.skip("eraser stroke")
                stroke = nil
                return
            default: style.tool = .pen
            }
            if let c = a["color"] {
                if c.hasPrefix("#"), c.count == 9 || c.count == 7, let rgba = RGBA(hex: c) {
                    style.color = rgba
                } else if let v = XoppReader.namedColors[c] {
                    style.color = RGBA(packed: v)
                } else {
                    return fail("stroke \(strokeIndex): color \"\(c)\" is not #rrggbbaa or a Xournal color name")
                }
            }
            var widths: [Double] = []
            if let ws = a["width"] {
                for part in ws.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" }) {
                    guard let w = XMLInput.number(part), w >= 0 else {
                        return fail("stroke \(strokeIndex): width \"\(part.prefix(24))\" is not a number of points")
                    }
                    guard widths.count <= Stroke.maxPoints else { return fail("stroke \(strokeIndex): more than \(Stroke.maxPoints) widths", code: .limitExceeded) }
                    widths.append(w)
                }
                guard let w0 = widths.first, w0 > 0 else { return fail("stroke \(strokeIndex): no positive width", at: attributeOffset("width")) }
                guard let q = try? Quantization.coordinate(w0), q <= ContentBounds.maxRadius else {
                    return fail("stroke \(strokeIndex): width \(w0) pt is larger than \(ContentBounds.maxRadius / 10) pt", at: attributeOffset("width"))
                }
                style.width = max(1, q)
            }
            text = ""
            stroke = (style, widths, a["width"] == nil ? contentStart : attributeOffset("width"), contentStart)
        case "text": ink.skip("text")
        case "image": ink.skip("image")
        case "teximage": ink.skip("LaTeX image")
        default: break
        }
    }

    override func characters(_ string: String) {
        guard stroke != nil else { return }
        text += string
    }

    override func end(_ name: String) {
        guard name == "stroke", let s = stroke else { return }
        stroke = nil
        do {
            let stroke = try XoppStroke.stroke(text, style: s.style, widths: s.widths, widthsAt: s.widthsAt, index: strokeIndex,
                                               textStart: s.start, path: input.path)
            guard count(stroke, what: "stroke \(strokeIndex)", at: s.start) else { return }
            ink.pages[ink.pages.count - 1].strokes.append(stroke)
        } catch let e as LnoteError { fail(e) } catch { fail("\(error)") }
    }
}

/// One `<stroke>`'s coordinates and widths to a stroke ([XCH-8]).
enum XoppStroke {
    /// `widthsAt` is the offset of the `width` attribute (errors about point widths name it),
    /// `textStart` that of the stroke's text.
    static func stroke(_ text: String, style: InkStyle, widths: [Double], widthsAt: Int, index: Int, textStart: Int,
                       path: String?) throws -> Stroke {
        func fault(_ m: String, code: LnoteError.Code = .invalidArgument, at i: Int = 0) -> LnoteError {
            LnoteError(code, "stroke \(index): \(m)", path: path, offset: textStart + i, index: index)
        }
        var coords: [Double] = []
        // The offset of each point's x in the text: where an error about the point is.
        var pointStarts: [Int] = []
        let bytes = Array(text.utf8)
        var i = 0
        while i < bytes.count {
            while i < bytes.count, bytes[i] == 0x20 || bytes[i] == 0x09 || bytes[i] == 0x0A || bytes[i] == 0x0D { i += 1 }
            guard i < bytes.count else { break }
            let start = i
            while i < bytes.count, !(bytes[i] == 0x20 || bytes[i] == 0x09 || bytes[i] == 0x0A || bytes[i] == 0x0D) { i += 1 }
            guard coords.count < 2 * Stroke.maxPoints else { throw fault("more than \(Stroke.maxPoints) points", code: .limitExceeded, at: start) }
            guard let v = XMLInput.number(Substring(decoding: bytes[start..<i], as: UTF8.self)) else {
                throw fault("\"\(String(decoding: bytes[start..<i].prefix(24), as: UTF8.self))\" is not a number", at: start)
            }
            if coords.count % 2 == 0 { pointStarts.append(start) }
            coords.append(v)
        }
        guard !coords.isEmpty, coords.count % 2 == 0 else { throw fault("\(coords.count) coordinates: x y pairs expected") }
        let n = coords.count / 2
        let perPoint = Array(widths.dropFirst())
        guard perPoint.isEmpty || perPoint.count == n || perPoint.count == n - 1 else {
            throw fault("\(perPoint.count) point widths for \(n) points (\(n) or \(n - 1) expected)")
        }
        // [XCH-8] Pressure is the point's width over the stroke's, in thousandths, at most 1000;
        // the radius half the point's width. Without point widths, pressure is unknown (500).
        let w = Int64(style.width)
        var samples: [InputSample] = []
        samples.reserveCapacity(n)
        var tenths: [Int64] = []
        for k in 0..<n {
            samples.append(InputSample(x: coords[2 * k], y: coords[2 * k + 1]))
        }
        if !perPoint.isEmpty {
            for k in 0..<n {
                let wk = perPoint[min(k, perPoint.count - 1)]
                let q: Int32
                do { q = try Quantization.coordinate(wk) } catch {
                    throw LnoteError(.invalidArgument, "stroke \(index): point \(k): width \(wk) is out of range", path: path, offset: widthsAt, index: index)
                }
                tenths.append(Int64(q))
            }
        }
        var stroke: Stroke
        do { stroke = try Stroke(samples: samples, style: style) } catch var e as LnoteError {
            // Stroke(samples:) names the point at fault in its index: the error's offset is its x.
            e.offset = textStart + (e.index.flatMap { $0 < pointStarts.count ? pointStarts[$0] : nil } ?? 0)
            e.path = path; e.index = index
            e.message = "stroke \(index): \(e.message)"
            throw e
        }
        if !tenths.isEmpty {
            var points = stroke.points
            for k in 0..<n {
                let p = min(1000, Interchange.div(1000 * tenths[k], w))
                let r = Interchange.div(tenths[k], 2)
                guard r <= Int64(ContentBounds.maxRadius) else {
                    throw LnoteError(.invalidArgument, "stroke \(index): point \(k): width \(perPoint[min(k, perPoint.count - 1)]) pt is larger than \(ContentBounds.maxRadius / 5) pt",
                                     path: path, offset: widthsAt, index: index)
                }
                points[k].pressure = UInt16(p)
                points[k].radius = Int32(r)
            }
            stroke = Stroke(style: stroke.style, points: points)
        }
        return stroke
    }
}
