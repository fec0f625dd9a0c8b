import Foundation
import LnoteModel

/// Reads W3C InkML (https://www.w3.org/TR/InkML/) into strokes, as Protocol/interchange.md
/// section 2 says: channels X and Y (and optionally T, F and W) of each `<trace>`, in the
/// units their `<channel>` or `<channelProperties>` give, converted to points and quantized
/// by import-jsonl.md section 2 (`Stroke(samples:style:)`), so an InkML point and a JSON
/// line's point with the same values become the same integers.
public enum InkMLReader {
    /// Reads an InkML file. `style` is the ink of traces whose brush says nothing.
    ///
    /// - Throws: `notFound`/`io` for an unreadable file, `limitExceeded` for one over
    ///   256 MiB or a trace over `Stroke.maxPoints` points, `invalidArgument` naming the file
    ///   and the byte offset for anything else ([XCH-1] to [XCH-8]).
    public static func read(contentsOf path: String, style: InkStyle = InkStyle(), budget: ImportBudget = ImportBudget()) throws -> ImportedInk {
        try read(XMLInput.read(path, limit: XMLInput.maxBytes), path: path, style: style, budget: budget)
    }

    /// Reads InkML held in memory.
    /// `budget`: the strokes and points one import may add ([XCH-12]).
    public static func read(_ bytes: [UInt8], path: String? = nil, style: InkStyle = InkStyle(),
                            budget: ImportBudget = ImportBudget()) throws -> ImportedInk {
        let input = try XMLInput(bytes: bytes, path: path)
        let handler = InkMLHandler(style: style)
        handler.budget = budget
        try input.parse(handler)
        guard handler.sawInk else {
            throw LnoteError(.invalidArgument, "not InkML: no <ink> element", path: path, offset: 0)
        }
        return handler.ink
    }
}

/// One channel of a trace format.
struct InkChannel: Sendable {
    var name: String
    var units: String?
    var min: Double?
    var max: Double?
    /// In `<intermittentChannels>`: a point may leave it out (at its end).
    var intermittent = false
}

/// The InkML SAX handler: definitions (trace formats, contexts, brushes), page groups and
/// traces.
final class InkMLHandler: XMLHandler {
    let base: InkStyle
    var ink = ImportedInk(pages: [ImportedPage(target: .given)])
    var sawInk = false

    init(style: InkStyle) { base = style }

    // Definitions.
    static let defaultFormat = [InkChannel(name: "X"), InkChannel(name: "Y")]
    var currentFormat = InkMLHandler.defaultFormat
    var formats: [String: [InkChannel]] = [:]
    var contexts: [String: (format: [InkChannel], brush: String?)] = [:]
    var contextBrush: String?
    /// `resolution` channel properties: channel name to (value, units).
    var resolutions: [String: (Double, String)] = [:]
    var brushes: [String: InkStyleOverride] = [:]

    // Being read.
    var stack: [String] = []
    var building: [InkChannel]?
    var buildingID: String?
    var inIntermittent = false
    var contextID: String?
    var contextFormatBefore: [InkChannel]?
    var brushID: String?
    var brush = InkStyleOverride()
    /// Each open traceGroup: the brush its brushRef names and the context its contextRef
    /// names (nil where it names none).
    var groups: [(brush: String?, context: (format: [InkChannel], brush: String?)?)] = []
    /// The offset of the start tag of the open top-level traceGroup (a page's element).
    var groupAt = 0
    var page = 0
    var pageGroupDepth: Int?
    var annotationType: String?
    var text = ""
    var textStart = 0
    var traceIndex = 0
    var trace: (format: [InkChannel], style: InkStyle, start: Int)?

    static func ref(_ s: String?) -> String? {
        guard let s else { return nil }
        return s.hasPrefix("#") ? String(s.dropFirst()) : s
    }

    override func start(_ name: String, _ a: [String: String]) {
        let local = name.split(separator: ":").last.map(String.init) ?? name
        defer { stack.append(local) }
        switch local {
        case "ink":
            sawInk = true
        case "traceFormat":
            building = []
            buildingID = a["xml:id"]
            if let r = Self.ref(a["href"]), let f = formats[r] { building = f }
        case "intermittentChannels":
            inIntermittent = true
        case "channel":
            guard building != nil else { return }
            guard let n = a["name"], !n.isEmpty else { return fail("a <channel> without a name") }
            var c = InkChannel(name: n, units: a["units"], intermittent: inIntermittent)
            if let v = a["min"] { guard let d = XMLInput.number(Substring(v)) else { return fail("channel \(n): min \"\(v)\" is not a number") }; c.min = d }
            if let v = a["max"] { guard let d = XMLInput.number(Substring(v)) else { return fail("channel \(n): max \"\(v)\" is not a number") }; c.max = d }
            building!.append(c)
        case "channelProperty":
            guard a["name"] == "resolution", let ch = a["channel"], let v = a["value"] else { return }
            guard let d = XMLInput.number(Substring(v)), d > 0 else { return fail("channel \(ch): resolution \"\(v)\" is not a positive number") }
            resolutions[ch] = (d, a["units"] ?? "")
        case "context":
            contextID = a["xml:id"]
            contextFormatBefore = currentFormat
            if let r = Self.ref(a["contextRef"]), let c = contexts[r] { currentFormat = c.format; contextBrush = c.brush }
            if let r = Self.ref(a["traceFormatRef"]) {
                guard let f = formats[r] else { return fail("traceFormatRef \"#\(r)\" names no trace format") }
                currentFormat = f
            }
            if let b = Self.ref(a["brushRef"]) { contextBrush = b }
        case "brush":
            brushID = a["xml:id"]
            brush = InkStyleOverride()
            if let r = Self.ref(a["brushRef"]), let b = brushes[r] { brush = b }
        case "brushProperty":
            guard brushID != nil || stack.last == "brush", let n = a["name"], let v = a["value"] else { return }
            brushProperty(n, v, units: a["units"])
        case "traceGroup":
            if stack == ["ink"] { groupAt = tagStart }
            var context: (format: [InkChannel], brush: String?)? = nil
            if let r = Self.ref(a["contextRef"]) {
                guard let c = contexts[r] else { return fail("traceGroup: contextRef \"#\(r)\" names no context") }
                context = c
            }
            groups.append((Self.ref(a["brushRef"]), context))
        case "annotation":
            annotationType = a["type"]
            text = ""
        case "trace":
            traceIndex += 1
            // [XCH-5] The trace's context: its contextRef, else that of the nearest enclosing
            // traceGroup with one, else the current context.
            var format = currentFormat
            var brushName = contextBrush
            if let r = Self.ref(a["contextRef"]) {
                guard let c = contexts[r] else { return fail("trace \(traceIndex): contextRef \"#\(r)\" names no context") }
                format = c.format
                brushName = c.brush ?? brushName
            } else if let c = groups.last(where: { $0.context != nil })?.context {
                format = c.format
                brushName = c.brush ?? brushName
            }
            if let b = groups.last(where: { $0.brush != nil })?.brush { brushName = b }
            if let b = Self.ref(a["brushRef"]) { brushName = b }
            var style = base
            if let brushName {
                guard let b = brushes[brushName] else { return fail("trace \(traceIndex): brushRef \"#\(brushName)\" names no brush") }
                b.apply(to: &style)
            }
            if let type = a["type"], type != "penDown" {
                ink.skip("\(type) trace")
                trace = nil
                return
            }
            text = ""
            trace = (format, style, contentStart)
        default:
            break
        }
    }

    func brushProperty(_ name: String, _ value: String, units: String?) {
        switch name {
        case "width":
            guard let w = XMLInput.number(Substring(value)), w > 0 else {
                return fail("brush width \"\(value)\" is not a positive number", at: attributeOffset("value"))
            }
            guard let f = Units.length(units ?? "pt") else { return fail("brush width: unsupported units \"\(units ?? "")\"", at: attributeOffset("units")) }
            guard let q = try? Quantization.coordinate(f == 1 ? w : w * f), q <= ContentBounds.maxRadius else {
                return fail("brush width \(value) \(units ?? "pt") is larger than \(ContentBounds.maxRadius / 10) pt", at: attributeOffset("value"))
            }
            brush.width = max(1, q)
        case "color":
            guard value.count == 7, let c = RGBA(hex: value) else { return fail("brush color \"\(value)\" is not #rrggbb") }
            brush.color = RGBA(r: c.r, g: c.g, b: c.b, a: brush.color?.a ?? 255)
            if let a = brush.alpha { brush.color!.a = a }
        case "transparency":
            guard let t = Int(value), (0...255).contains(t) else { return fail("brush transparency \"\(value)\" is not 0 to 255") }
            brush.alpha = UInt8(255 - t)
            if brush.color != nil { brush.color!.a = UInt8(255 - t) }
        case "lnoteTool":
            guard let t = ToolKind(name: value) else { return fail("brush lnoteTool \"\(value)\" is not pen, pencil, marker or highlighter") }
            brush.tool = t
        default:
            break
        }
    }

    override func characters(_ string: String) {
        if trace != nil || annotationType != nil {
            guard text.utf8.count + string.utf8.count <= XMLInput.maxBytes else { return fail("text too long", code: .limitExceeded) }
            text += string
        }
    }

    override func end(_ name: String) {
        let local = name.split(separator: ":").last.map(String.init) ?? name
        stack.removeLast()
        switch local {
        case "traceFormat":
            if let f = building {
                guard f.contains(where: { $0.name == "X" }), f.contains(where: { $0.name == "Y" }) else {
                    return fail("a trace format needs channels X and Y")
                }
                if let id = buildingID { formats[id] = f }
                // A format outside <definitions> (or inside a context) is the one traces use next.
                if !stack.contains("definitions") || stack.contains("context") { currentFormat = f }
            }
            building = nil
            buildingID = nil
        case "intermittentChannels":
            inIntermittent = false
        case "context":
            if let id = contextID { contexts[id] = (currentFormat, contextBrush) }
            // A context inside <definitions> only defines; elsewhere it applies to what follows.
            if stack.contains("definitions"), let before = contextFormatBefore { currentFormat = before; contextBrush = nil }
            contextID = nil
        case "brush":
            if let id = brushID { brushes[id] = brush }
            brushID = nil
        case "traceGroup":
            groups.removeLast()
            if pageGroupDepth == stack.count { pageGroupDepth = nil; page = 0 }
        case "annotation":
            defer { annotationType = nil }
            // [XCH-6] A page: an <annotation type="page"> directly in a <traceGroup> directly in <ink>.
            guard stack.count == 2, stack[0] == "ink", stack[1] == "traceGroup" else { return }
            if annotationType == "page" {
                if pageGroupDepth == 1 { return }
                pageGroupDepth = 1
                if ink.pages.count == 1, ink.pages[0].strokes.isEmpty, ink.pages[0].canvas == nil, !startedPageGroup {
                    page = 0
                } else {
                    guard checkPageCount(ink.pages.count, at: groupAt) else { return }
                    ink.pages.append(ImportedPage(target: .new, offset: groupAt))
                    page = ink.pages.count - 1
                }
                startedPageGroup = true
            } else if annotationType == "canvas", pageGroupDepth == 1 {
                let parts = text.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" })
                guard parts.count == 2, let w = XMLInput.number(parts[0]), let h = XMLInput.number(parts[1]),
                      let qw = try? Quantization.coordinate(w), let qh = try? Quantization.coordinate(h), qw > 0, qh > 0 else {
                    return fail("canvas annotation \"\(text)\" is not two positive sizes in points")
                }
                ink.pages[page].canvas = CanvasSize(width: qw, height: qh)
            }
        case "trace":
            guard let t = trace else { return }
            trace = nil
            do {
                let stroke = try InkMLTrace.stroke(text, format: t.format, resolutions: resolutions, style: t.style,
                                                   traceIndex: traceIndex, textStart: t.start, path: input.path)
                guard count(stroke, what: "trace \(traceIndex)", at: t.start) else { return }
                ink.pages[page].strokes.append(stroke)
            } catch let e as LnoteError {
                fail(e)
            } catch {
                fail("\(error)")
            }
        default:
            break
        }
    }

    var startedPageGroup = false
}

/// What a brush says about the ink (each part optional).
struct InkStyleOverride: Sendable {
    var width: Int32?
    var color: RGBA?
    var alpha: UInt8?
    var tool: ToolKind?

    func apply(to s: inout InkStyle) {
        if let width { s.width = width }
        if let color { s.color = color } else if let alpha { s.color.a = alpha }
        if let tool { s.tool = tool }
    }
}

/// Unit conversions of Protocol/interchange.md [XCH-3].
enum Units {
    /// Points per unit of length, nil for a unit lnote does not know.
    static func length(_ u: String) -> Double? {
        switch u {
        case "pt": 1
        case "in": 72
        case "cm": 72 / 2.54
        case "mm": 72 / 25.4
        case "m": 7200 / 2.54
        case "himetric": 72 / 2540
        case "px": 0.75
        default: nil
        }
    }
}
