import CLnoteCairo
import LnoteModel

/// Pictures of a page with some of its elements outlined, and several such pictures side by
/// side: what `lnote conflicts --render` writes (merge-semantics.md [MERGE-55] – [MERGE-58]).
///
/// A panel is the page drawn as `raster` draws it, then, for each highlighted element, an
/// outline over it in `highlightColor`:
/// - an element live in the panel's state: a rectangle `highlightWidth` pixels wide around
///   its bounds (a stroke's points under its transform, each with its radius; an image's
///   rotated frame under its transform), `highlightMargin` pixels out, filled inside with the
///   same color at `highlightFillAlpha`;
/// - an element erased in that state whose tombstone keeps its record: its ink drawn again
///   at a quarter of its alpha (a ghost; an image's frame as the placeholder's border) and
///   the same rectangle dashed (6 pixels on, 4 off), not filled;
/// - an element the state does not know: nothing.
/// Deterministic as `raster`: the same panels give the same bytes (for one cairo build); no
/// text is drawn, so no font the machine has changes a byte.
extension PageRenderer {
    /// One panel: a page state to draw, its canvas, the assets its images show, the elements
    /// to outline, and a label naming it (for callers' messages; not drawn).
    public struct HighlightedPage: Sendable {
        public var label: String
        public var state: PageState
        public var canvas: CanvasSize
        public var assets: [AssetID: [UInt8]]
        public var highlighted: [ElementID]
        public init(label: String, state: PageState, canvas: CanvasSize, assets: [AssetID: [UInt8]] = [:],
                    highlighted: [ElementID]) {
            self.label = label
            self.state = state
            self.canvas = canvas
            self.assets = assets
            self.highlighted = highlighted
        }
    }

    /// How one highlighted element was outlined in a panel (device pixels).
    public struct Outline: Sendable, Hashable {
        public enum Style: String, Sendable { case live, erased }
        public var element: ElementID
        public var style: Style
        /// The outline's rectangle (margin included), before clipping to the picture.
        public var x0: Double, y0: Double, x1: Double, y1: Double
    }

    /// What `highlightedPictures` made: one PNG per panel, the panels side by side, and the
    /// outlines drawn in each panel.
    public struct HighlightedPictures: Sendable {
        public var panels: [[UInt8]]
        public var combined: [UInt8]
        public var outlines: [[Outline]]
    }

    /// The outlines' color: a magenta no ink preset uses.
    public static let highlightColor = RGBA(r: 0xE6, g: 0x00, b: 0xB4)
    /// The outline's width, in pixels.
    public static let highlightWidth = 3.0
    /// How far the outline lies outside the element's bounds, in pixels.
    public static let highlightMargin = 5.0
    /// The opacity of the fill inside a live element's outline.
    public static let highlightFillAlpha = 0.12
    /// The combined picture: space between and around panels.
    static let combinedGap = 12

    /// Draws each panel (its longer side `maxSide` pixels, clamped to 1...4096) with its
    /// highlights, as PNG, then one PNG with every panel left to right in order, each in a
    /// one-pixel gray frame, on a light gray background, without text. A combined picture
    /// wider than 32,000 pixels is scaled down to that width.
    /// - Throws: `invalidArgument` for no panels; what cairo reports.
    public static func highlightedPictures(_ panels: [HighlightedPage], maxSide: Int) throws -> HighlightedPictures {
        guard !panels.isEmpty else { throw LnoteError(.invalidArgument, "no picture to draw") }
        let side = min(max(1, maxSide), 4096)
        // Every panel's size is known before any is drawn, so each is painted into the
        // combined picture as soon as it is drawn and its surface freed: one panel's pixels
        // at a time besides the combined picture's.
        let sizes = panels.map { size(for: $0.canvas, maxSide: side) }
        let gap = combinedGap
        let fullW = sizes.reduce(gap) { $0 + $1.0 + gap }
        let fullH = gap + (sizes.map(\.1).max() ?? 1) + gap
        let f = min(1.0, 32_000.0 / Double(fullW))
        let cw = max(1, Int((Double(fullW) * f).rounded(.up))), ch = max(1, Int((Double(fullH) * f).rounded(.up)))
        let all = try CairoCanvas.image(width: cw, height: ch)
        defer { _ = try? all.close() }
        let cr = all.cr
        cairo_scale(cr, f, f)
        cairo_set_source_rgb(cr, 0xF2 / 255.0, 0xF2 / 255.0, 0xF2 / 255.0)
        cairo_paint(cr)
        var pngs: [[UInt8]] = []
        var outlines: [[Outline]] = []
        var x = gap
        for (p, (w, h)) in zip(panels, sizes) {
            let scale = p.canvas.width >= p.canvas.height
                ? Double(w) / Double(max(1, p.canvas.width))
                : Double(h) / Double(max(1, p.canvas.height))
            let cv = try CairoCanvas.image(width: w, height: h)
            defer { _ = try? cv.close() }
            let view = Viewport(scale: scale, width: Double(w), height: Double(h), options: .raster)
            let assets = p.assets
            let images = ImageCache { assets[$0] }
            defer { images.close() }
            _ = draw(p.state, on: cv.cr, view: view, images: images)
            outlines.append(drawHighlights(p, on: cv.cr, view: view))
            try cv.check("drawing the highlights of page \(p.state.page)")
            pngs.append(try png(cv.surface))
            // A one-pixel frame, then the panel. No text: the index names the panels in
            // order, and text would depend on the fonts the machine has ([MERGE-58]).
            cairo_set_source_rgb(cr, 0.6, 0.6, 0.6)
            cairo_rectangle(cr, Double(x) - 1, Double(gap) - 1, Double(w) + 2, Double(h) + 2)
            cairo_fill(cr)
            cairo_set_source_surface(cr, cv.surface, Double(x), Double(gap))
            cairo_paint(cr)
            cairo_set_source_rgb(cr, 0, 0, 0)
            x += w + gap
        }
        try all.check("drawing the combined picture")
        let combined = try png(all.surface)
        return HighlightedPictures(panels: pngs, combined: combined, outlines: outlines)
    }

    /// Outlines the panel's highlighted elements (each once, in the order given).
    static func drawHighlights(_ p: HighlightedPage, on cr: OpaquePointer, view: Viewport) -> [Outline] {
        var live: [ElementID: ElementRecord] = [:]
        for e in p.state.elements { live[e.id] = e }
        var erased: [ElementID: ElementRecord] = [:]
        for t in p.state.tombstones where t.isErased { if let r = t.record { erased[t.id] = r } }
        var done = Set<ElementID>()
        var out: [Outline] = []
        let c = highlightColor
        let (r, g, b) = (Double(c.r) / 255, Double(c.g) / 255, Double(c.b) / 255)
        for id in p.highlighted where done.insert(id).inserted {
            let record: ElementRecord, style: Outline.Style
            if let e = live[id] {
                record = e
                style = .live
            } else if let e = erased[id] {
                record = e
                style = .erased
                drawGhost(e, on: cr, view: view)
            } else {
                continue
            }
            var box = deviceBounds(record, view: view)
            guard !box.isEmpty else { continue }
            let m = highlightMargin
            box.x0 -= m; box.y0 -= m; box.x1 += m; box.y1 += m
            out.append(Outline(element: id, style: style, x0: box.x0, y0: box.y0, x1: box.x1, y1: box.y1))
            // Far outside the picture: cairo's fixed-point coordinates stay in range.
            let lim = 4 * max(view.width, view.height) + 64
            let x0 = max(-lim, box.x0), y0 = max(-lim, box.y0), x1 = min(lim, box.x1), y1 = min(lim, box.y1)
            guard x0 <= x1, y0 <= y1 else { continue }
            cairo_save(cr)
            cairo_rectangle(cr, x0, y0, x1 - x0, y1 - y0)
            if style == .live {
                cairo_set_source_rgba(cr, r, g, b, highlightFillAlpha)
                cairo_fill_preserve(cr)
            } else {
                var dash: [Double] = [6, 4]
                cairo_set_dash(cr, &dash, 2, 0)
            }
            cairo_set_source_rgb(cr, r, g, b)
            cairo_set_line_width(cr, highlightWidth)
            cairo_set_line_join(cr, CAIRO_LINE_JOIN_MITER)
            cairo_stroke(cr)
            cairo_restore(cr)
        }
        return out
    }

    /// An erased element drawn faintly: its ink at a quarter of its alpha, every point (the
    /// erased ranges too); an image as its frame's outline in the placeholder's border color.
    static func drawGhost(_ e: ElementRecord, on cr: OpaquePointer, view: Viewport) {
        switch e.content {
        case .stroke(var s):
            guard s.isResolved, s.pointCount > 0 else { return }
            s.style.color.a = UInt8((Int(s.style.color.a) + 3) / 4)
            drawStroke(s, ranges: [PointRange(0, UInt32(s.pointCount))], transform: e.transform.value, on: cr, view: view)
        case .image(let img):
            let det = Int64(e.transform.value.a) * Int64(e.transform.value.d) - Int64(e.transform.value.b) * Int64(e.transform.value.c)
            guard det != 0, img.frame.width > 0, img.frame.height > 0 else { return }
            var m = imageMatrix(img, transform: e.transform.value, scale: view.scale)
            // Culled like `drawImage`: a frame wholly outside the output draws nothing.
            let fw = Double(img.frame.width), fh = Double(img.frame.height)
            var bounds = Bounds()
            for (u, v) in [(0.0, 0.0), (fw, 0), (0, fh), (fw, fh)] {
                var x = u, y = v
                cairo_matrix_transform_point(&m, &x, &y)
                bounds.add(DevicePoint(x: x, y: y, r: 0))
            }
            guard bounds.meets(view) else { return }
            cairo_save(cr)
            cairo_set_matrix(cr, &m)
            cairo_rectangle(cr, 0, 0, fw, fh)
            cairo_identity_matrix(cr)
            let b = placeholderBorder
            cairo_set_source_rgb(cr, Double(b.r) / 255, Double(b.g) / 255, Double(b.b) / 255)
            cairo_set_line_width(cr, 1)
            cairo_stroke(cr)
            cairo_restore(cr)
        }
    }

    /// An element's bounds in device units: a stroke's every point under its transform, each
    /// with its drawn radius; an image's rotated frame under its transform. Empty for a
    /// stroke without points (or not decoded) and for a singular transform.
    static func deviceBounds(_ e: ElementRecord, view: Viewport) -> Bounds {
        var b = Bounds()
        let t = e.transform.value
        let det = Int64(t.a) * Int64(t.d) - Int64(t.b) * Int64(t.c)
        guard det != 0 else { return b }
        switch e.content {
        case .stroke(let s):
            guard s.isResolved else { return b }
            let lin = t.linearScale
            for p in s.points {
                let (x, y) = t.apply(p.x, p.y)
                let r = max(view.options.minRadius, Double(max(0, p.radius)) * view.scale * lin)
                b.add(DevicePoint(x: x * view.scale, y: y * view.scale, r: r))
            }
        case .image(let img):
            guard img.frame.width > 0, img.frame.height > 0 else { return b }
            var m = imageMatrix(img, transform: t, scale: view.scale)
            let fw = Double(img.frame.width), fh = Double(img.frame.height)
            for (u, v) in [(0.0, 0.0), (fw, 0), (0, fh), (fw, fh)] {
                var x = u, y = v
                cairo_matrix_transform_point(&m, &x, &y)
                b.add(DevicePoint(x: x, y: y, r: 0))
            }
        }
        return b
    }

    /// The surface as a PNG file (cairo's writer).
    static func png(_ surface: OpaquePointer) throws -> [UInt8] {
        cairo_surface_flush(surface)
        let sink = ByteSink()
        let status = withExtendedLifetime(sink) {
            cairo_surface_write_to_png_stream(surface, ByteSink.write, Unmanaged.passUnretained(sink).toOpaque())
        }
        guard status == CAIRO_STATUS_SUCCESS else { throw CairoCanvas.error(status, "cannot write the PNG") }
        return sink.bytes
    }
}
