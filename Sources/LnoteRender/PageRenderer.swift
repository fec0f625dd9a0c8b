import CLnoteCairo
import LnoteModel

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Finds an image asset's bytes by its id; nil when the asset is not there.
public typealias AssetLookup = (AssetID) -> [UInt8]?

/// Draws pages with cairo: raster pictures (thumbnails), PDF and SVG.
///
/// One drawing routine for every output. The page is white; its live elements are drawn
/// bottom to top (`PageState.elements` order), each under its transform (16.16 fixed point,
/// applied to the quantized coordinates in 64-bit integers, then scaled to the output):
/// - **A stroke** is drawn fragment by fragment (`ElementRecord.visibleRanges`: erased
///   ranges are gaps), each point with its radius (pressure makes it), as **polylines stroked
///   by cairo with round caps and round joins**: consecutive points go on one polyline while
///   their radii stay within 2 × `Options.radiusTolerance` of each other, and the polyline is
///   `cairo_stroke`d with the middle of that range as its half-width, so every drawn radius is
///   within the tolerance of its point's (a quarter pixel for thumbnails, 0.05 pt for PDF and
///   SVG). A point is left out of its polyline when the chord from the last point kept to
///   the next passes within `Options.flatness` of it and of every point left out since (at
///   most 32 in a row): smooth 240 Hz ink keeps a fraction of its points. Where the radius
///   changes faster (a pressure ramp), the next polyline starts at the
///   last point of the previous one (their round caps overlap there: no seam); a single step
///   whose two radii differ by more than twice the tolerance is a **taper**: the two discs and
///   the quadrilateral joining their outer tangents, filled non-zero (all three wound the
///   same way: their union). A fragment of one point is a disc. A PDF or SVG thus holds a
///   path of `m`/`l` operators and a width per polyline, not a polygon per pair of points,
///   and cairo's rasterizer strokes a polyline much faster than it tessellates thousands of
///   overlapping sub-paths. Radii are scaled by the transform's linear scale (square root
///   of |determinant|) and never drawn thinner than `Options.minRadius` device units. Points
///   within `Options.skipDistance` device units of the last point drawn (and of its radius)
///   add nothing visible and are skipped (never a fragment's last point). A step lying wholly
///   outside the output ends the polyline and is left out. An opaque ink is drawn in its
///   color; a translucent one, and the highlighter (drawn at 90/256 ≈ 35 % of its color's
///   alpha), is drawn opaque in a cairo group, clipped to the
///   stroke's bounds, then painted with its alpha once (`cairo_paint_with_alpha`; in a PDF a
///   vector transparency group): a stroke never darkens where it overlaps itself.
/// - **An image** is its asset's pixels (PNG through cairo's reader, JPEG through
///   `JPEGDecoder`) scaled to its frame, rotated by `rotation` (hundredths of a degree,
///   clockwise on the page, y down) about the frame's center, then placed by the element's
///   transform. An asset that is missing, does not decode (see `ImageAsset`) or would take
///   the page's decoded pixels past `ImageCache.defaultPixelBudget` (64 megapixels, sizes read
///   from the headers before decoding; each asset decoded once a page and released after the
///   last element drawing it) is drawn as
///   a light gray box (#E0E0E0) with a one-device-unit border (#909090) over the same rotated
///   frame: never an error. An element whose transform is singular draws nothing.
///
/// Deterministic: the same state, canvas, options and asset bytes give the same pixels (and
/// the same PDF and SVG bytes, for one cairo build).
public enum PageRenderer {
    /// How a drawing is sized and simplified for its output.
    public struct Options: Sendable, Hashable {
        /// Smallest radius drawn, in device units (pixels, or points for PDF and SVG).
        public var minRadius: Double
        /// Points closer than this (device units) to the last one drawn are skipped.
        public var skipDistance: Double
        /// Largest difference (device units) between the radius a polyline is drawn with and
        /// the radius of each of its points: consecutive points whose radii stay within
        /// twice this are one polyline of one width.
        public var radiusTolerance: Double
        /// Largest distance (device units) between a point left out of a polyline and the
        /// polyline drawn: a point whose neighbours' chord passes this close to it (and to
        /// the points already left out since the last kept one) is not drawn.
        public var flatness: Double
        /// Raster output: ink at least half a pixel wide, points a quarter pixel apart,
        /// widths within half a pixel, lines within a tenth of a pixel (cairo's own tolerance
        /// for curves).
        public static let raster = Options(minRadius: 0.5, skipDistance: 0.25, radiusTolerance: 0.25, flatness: 0.1)
        /// Vector output (points): a hairline is 0.1 pt, points kept 0.2 pt (0.07 mm) apart:
        /// finer than a printer's dot or a screen's pixel at 300 % zoom, and a fifth of the
        /// path data of keeping every 240 Hz sample; widths within 0.1 pt (0.035 mm) and
        /// lines within 0.1 pt (0.035 mm) of every point, under a 600 dpi dot.
        public static let vector = Options(minRadius: 0.05, skipDistance: 0.2, radiusTolerance: 0.05, flatness: 0.1)
        public init(minRadius: Double, skipDistance: Double, radiusTolerance: Double, flatness: Double) {
            self.minRadius = minRadius
            self.skipDistance = skipDistance
            self.radiusTolerance = radiusTolerance
            self.flatness = flatness
        }
    }

    /// What a drawing did with the page's images.
    public struct ImageCounts: Sendable, Hashable {
        /// Images drawn with their pixels.
        public var drawn = 0
        /// Images drawn as a gray box (asset missing or undecodable).
        public var placeholders = 0
        public init() {}
    }

    /// Highlighter opacity, in 1/256 of the color's alpha.
    public static let highlighterAlpha = 90
    static let placeholderFill = RGBA(r: 0xE0, g: 0xE0, b: 0xE0)
    static let placeholderBorder = RGBA(r: 0x90, g: 0x90, b: 0x90)

    /// The picture size for a canvas: the longer side is `maxSide` (at least 1), the other
    /// keeps the aspect ratio (rounded, at least 1). A degenerate canvas is treated as square.
    public static func size(for canvas: CanvasSize, maxSide: Int = 256) -> (width: Int, height: Int) {
        let side = max(1, maxSide)
        let w = Int64(max(1, canvas.width)), h = Int64(max(1, canvas.height))
        if w >= h { return (side, Int(max(1, (Int64(side) * h + w / 2) / w))) }
        return (Int(max(1, (Int64(side) * w + h / 2) / h)), side)
    }

    /// Renders `state` on a canvas of `canvas` (tenths of a point) into an RGBA picture whose
    /// longer side is `maxSide` pixels (clamped to 1...4096), opaque, white background.
    /// - Throws: what cairo reports (out of memory).
    public static func raster(_ state: PageState, canvas: CanvasSize, maxSide: Int = 256,
                              assets: AssetLookup = { _ in nil }) throws -> Thumbnail {
        let (w, h) = size(for: canvas, maxSide: min(max(1, maxSide), 4096))
        // Pixels per tenth of a point, the same on both axes.
        let scale = canvas.width >= canvas.height
            ? Double(w) / Double(max(1, canvas.width))
            : Double(h) / Double(max(1, canvas.height))
        let cv = try CairoCanvas.image(width: w, height: h)
        withoutActuallyEscaping(assets) { assets in
            let images = ImageCache(assets)
            defer { images.close() }
            _ = draw(state, on: cv.cr, view: Viewport(scale: scale, width: Double(w), height: Double(h), options: .raster),
                     images: images)
        }
        try cv.check("drawing the page")
        cairo_surface_flush(cv.surface)
        let stride = Int(cairo_image_surface_get_stride(cv.surface))
        let data = UnsafeRawPointer(cairo_image_surface_get_data(cv.surface)!)
        var pixels = [UInt8](repeating: 255, count: w * h * 4)
        pixels.withUnsafeMutableBufferPointer { out in
            for y in 0..<h {
                let row = (data + y * stride).assumingMemoryBound(to: UInt32.self)
                for x in 0..<w {
                    // Opaque (white background): premultiplied values are the values.
                    let v = row[x], o = (y * w + x) * 4
                    out[o] = UInt8((v >> 16) & 0xff)
                    out[o + 1] = UInt8((v >> 8) & 0xff)
                    out[o + 2] = UInt8(v & 0xff)
                }
            }
        }
        try cv.close()
        return Thumbnail(width: w, height: h, pixels: pixels)
    }

    /// One page of a PDF or SVG: its state and canvas.
    public struct Page: Sendable {
        public var state: PageState
        public var canvas: CanvasSize
        public init(state: PageState, canvas: CanvasSize) {
            self.state = state
            self.canvas = canvas
        }
    }

    /// The size in points cairo is given for a canvas (at least 1 pt a side).
    static func points(_ canvas: CanvasSize) -> (Double, Double) {
        (max(1, Double(canvas.width) / 10), max(1, Double(canvas.height) / 10))
    }

    /// A PDF file with one page per element of `pages`, in order, each the size of its
    /// canvas in points (at least 1 pt), strokes as vector paths, images embedded.
    /// `creationDate` (PDF date text, `D:YYYYMMDDHHmmSS`), when given, replaces the time of
    /// the run in the file's metadata, so that the same pages give the same bytes.
    /// - Throws: `invalidArgument` for no pages; what cairo reports.
    public static func pdf(_ pages: [Page], assets: AssetLookup = { _ in nil }, creationDate: String? = nil)
        throws -> (bytes: [UInt8], images: ImageCounts) {
        guard let first = pages.first else { throw LnoteError(.invalidArgument, "a PDF needs at least one page") }
        let (w0, h0) = points(first.canvas)
        let cv = try CairoCanvas.pdf(width: w0, height: h0)
        if let d = creationDate {
            cairo_pdf_surface_set_metadata(cv.surface, CAIRO_PDF_METADATA_CREATE_DATE, d)
            cairo_pdf_surface_set_metadata(cv.surface, CAIRO_PDF_METADATA_MOD_DATE, d)
        }
        cairo_pdf_surface_set_metadata(cv.surface, CAIRO_PDF_METADATA_CREATOR, "lnote")
        let counts = try withoutActuallyEscaping(assets) { assets in
            let images = ImageCache(assets)
            defer { images.close() }
            var counts = ImageCounts()
            for p in pages {
                let (w, h) = points(p.canvas)
                cairo_pdf_surface_set_size(cv.surface, w, h)
                let c = draw(p.state, on: cv.cr, view: Viewport(scale: 0.1, width: w, height: h, options: .vector), images: images)
                counts.drawn += c.drawn
                counts.placeholders += c.placeholders
                cairo_show_page(cv.cr)
                try cv.check("drawing page \(p.state.page)")
            }
            return counts
        }
        return (try cv.close(), counts)
    }

    /// An SVG file of one page: the root's `width` and `height` are the canvas in points
    /// (`pt`), its `viewBox` `0 0 width height` in points; strokes are `<path>` elements,
    /// images embedded as PNG data.
    /// - Throws: what cairo reports.
    public static func svg(_ page: Page, assets: AssetLookup = { _ in nil }) throws -> (bytes: [UInt8], images: ImageCounts) {
        let (w, h) = points(page.canvas)
        let cv = try CairoCanvas.svg(width: w, height: h)
        cairo_svg_surface_restrict_to_version(cv.surface, CAIRO_SVG_VERSION_1_1)
        cairo_svg_surface_set_document_unit(cv.surface, CAIRO_SVG_UNIT_PT)
        let counts = withoutActuallyEscaping(assets) { assets in
            let images = ImageCache(assets)
            defer { images.close() }
            return draw(page.state, on: cv.cr, view: Viewport(scale: 0.1, width: w, height: h, options: .vector), images: images)
        }
        try cv.check("drawing page \(page.state.page)")
        return (renumberSurfaces(try cv.close()), counts)
    }

    /// cairo names the groups of an SVG `surface<N>` with N a process-wide counter: renumbered
    /// here from 1 in order of first appearance, so that the same page gives the same bytes.
    static func renumberSurfaces(_ svg: [UInt8]) -> [UInt8] {
        let key = Array("surface".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(svg.count)
        var map: [ArraySlice<UInt8>: Int] = [:]
        var i = 0
        svg.withUnsafeBufferPointer { b in
            while i < b.count {
                if b[i] == key[0], i + key.count < b.count, b[i + key.count] >= 0x30, b[i + key.count] <= 0x39,
                   Array(b[i..<(i + key.count)]) == key {
                    var j = i + key.count
                    while j < b.count, b[j] >= 0x30, b[j] <= 0x39 { j += 1 }
                    let digits = svg[(i + key.count)..<j]
                    let n = map[digits] ?? (map.count + 1)
                    map[digits] = n
                    out += key
                    out += Array(String(n).utf8)
                    i = j
                } else {
                    out.append(b[i])
                    i += 1
                }
            }
        }
        return out
    }

    // MARK: - Drawing

    /// The output: device units per tenth of a point, the device area, the options.
    struct Viewport {
        var scale: Double
        var width: Double
        var height: Double
        var options: Options
    }

    /// Paints the page white, then its elements bottom to top. The context's matrix is the
    /// identity (device units) on entry and on return.
    static func draw(_ state: PageState, on cr: OpaquePointer, view: Viewport, images: ImageCache) -> ImageCounts {
        cairo_save(cr)
        cairo_set_source_rgb(cr, 1, 1, 1)
        cairo_paint(cr)
        cairo_set_fill_rule(cr, CAIRO_FILL_RULE_WINDING)
        var counts = ImageCounts()
        images.begin(state)
        for (i, e) in state.elements.enumerated() {
            switch e.content {
            case .stroke(let s):
                drawStroke(s, ranges: e.visibleRanges, transform: e.transform.value, on: cr, view: view)
            case .image(let img):
                switch drawImage(img, transform: e.transform.value, on: cr, view: view, images: images) {
                case .drawn: counts.drawn += 1
                case .placeholder: counts.placeholders += 1
                case .nothing: break
                }
                images.done(img.asset, at: i)
            }
        }
        cairo_restore(cr)
        return counts
    }

    /// A point in device units with its radius.
    struct DevicePoint {
        var x: Double, y: Double, r: Double
    }


    /// The bounds of the path being built, in device units.
    struct Bounds {
        var x0 = Double.infinity, y0 = Double.infinity, x1 = -Double.infinity, y1 = -Double.infinity
        var isEmpty: Bool { x0 > x1 }
        mutating func add(_ p: DevicePoint) {
            x0 = min(x0, p.x - p.r); x1 = max(x1, p.x + p.r)
            y0 = min(y0, p.y - p.r); y1 = max(y1, p.y + p.r)
        }
        func meets(_ v: Viewport) -> Bool { !isEmpty && x1 >= 0 && y1 >= 0 && x0 <= v.width && y0 <= v.height }
    }

    static func drawStroke(_ s: Stroke, ranges: [PointRange], transform t: Transform, on cr: OpaquePointer, view: Viewport) {
        var alpha = Int(s.style.color.a)
        if s.style.tool == .highlighter { alpha = (alpha * highlighterAlpha + 128) >> 8 }
        guard alpha > 0 else { return }
        let lin = t.linearScale
        // Radii beyond the page's diagonal are drawn as that: the page looks the same and
        // cairo's fixed-point coordinates stay in range.
        let maxR = max(1, (view.width * view.width + view.height * view.height).squareRoot())
        func project(_ p: StrokePoint) -> DevicePoint {
            let (x, y) = t.apply(p.x, p.y)
            let r = min(maxR, max(view.options.minRadius, Double(max(0, p.radius)) * view.scale * lin))
            return DevicePoint(x: x * view.scale, y: y * view.scale, r: r)
        }
        // The pieces, in drawing order (drawn once the stroke's bounds are known).
        var runs = Runs(tolerance: view.options.radiusTolerance, flatness: view.options.flatness)
        let skip = view.options.skipDistance
        s.points.withUnsafeBufferPointer { pts in
            for range in ranges {
                let lo = Int(range.from), hi = Int(range.to)
                guard lo < hi, hi <= pts.count else { continue }
                var prev = project(pts[lo])
                runs.start(prev)
                for i in (lo + 1)..<hi {
                    let next = project(pts[i])
                    let dx = next.x - prev.x, dy = next.y - prev.y
                    if i + 1 < hi, dx * dx + dy * dy < skip * skip, abs(next.r - prev.r) < skip { continue }
                    runs.add(prev, next, view)
                    prev = next
                }
                runs.end(view)
            }
        }
        guard !runs.bounds.isEmpty else { return }
        let c = s.style.color
        cairo_save(cr)
        defer { cairo_restore(cr) }
        cairo_set_line_cap(cr, CAIRO_LINE_CAP_ROUND)
        cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND)
        if alpha == 255 {
            cairo_set_source_rgb(cr, Double(c.r) / 255, Double(c.g) / 255, Double(c.b) / 255)
            runs.draw(cr)
            return
        }
        // Translucent: opaque in a group (clipped to the stroke), painted once with its alpha.
        let b = runs.bounds
        cairo_rectangle(cr, (b.x0 - 1).rounded(.down), (b.y0 - 1).rounded(.down),
                        (b.x1 - b.x0 + 2).rounded(.up), (b.y1 - b.y0 + 2).rounded(.up))
        cairo_clip(cr)
        cairo_push_group(cr)
        cairo_set_source_rgb(cr, Double(c.r) / 255, Double(c.g) / 255, Double(c.b) / 255)
        runs.draw(cr)
        cairo_pop_group_to_source(cr)
        cairo_paint_with_alpha(cr, Double(alpha) / 255)
    }

    /// A stroke's visible pieces as drawn: polylines stroked at one width (round caps and
    /// joins), and filled tapers (a quadrilateral between two discs' outer tangents, and the
    /// discs) where one step changes the radius too much for a polyline.
    struct Runs {
        enum Piece {
            /// A polyline (at least two points, or one for a dot), stroked `2 · radius` wide.
            case line([DevicePoint], radius: Double)
            /// A filled taper from the first point to the second; the first point's disc is
            /// left out when the previous taper ended with the same disc.
            case taper(DevicePoint, DevicePoint, startDisc: Bool)
        }
        /// Largest difference allowed between a drawn radius and a point's radius.
        let tolerance: Double
        /// Largest distance allowed between a point left out and the polyline.
        let flatness: Double
        private(set) var pieces: [Piece] = []
        private(set) var bounds = Bounds()
        /// The polyline being built (points kept) and its radius range.
        private var open: [DevicePoint] = []
        private var lo = 0.0, hi = 0.0
        /// The polyline's last point, kept unless the next one makes it redundant, and the
        /// points left out between the last kept point and it.
        private var pending: DevicePoint?
        private var between: [DevicePoint] = []
        /// At most this many points left out in a row (bounds the work per point).
        static let maxBetween = 32
        /// The fragment's first point, drawn as a dot if nothing else of the fragment is.
        private var first: DevicePoint?
        private var drewFragment = false

        init(tolerance: Double, flatness: Double) {
            self.tolerance = tolerance
            self.flatness = flatness
        }

        mutating func start(_ p: DevicePoint) {
            first = p
            drewFragment = false
        }

        /// The piece from `p` to `q` (consecutive points drawn): extends the open polyline
        /// when `q`'s radius keeps its range within twice the tolerance, else starts another.
        /// A piece outside the output ends the polyline and is left out.
        mutating func add(_ p: DevicePoint, _ q: DevicePoint, _ view: Viewport) {
            var b = Bounds()
            b.add(p)
            b.add(q)
            guard b.meets(view) else {
                flush()
                drewFragment = true
                return
            }
            drewFragment = true
            bounds.add(p)
            bounds.add(q)
            if !open.isEmpty, max(hi, q.r) - min(lo, q.r) <= 2 * tolerance {
                lo = min(lo, q.r)
                hi = max(hi, q.r)
                guard let last = pending else {
                    pending = q
                    return
                }
                // `last` can go when the chord from the last kept point to `q` passes within
                // `flatness` of it and of every point already left out since.
                let k = open[open.count - 1]
                if between.count < Runs.maxBetween, Runs.distance(last, k, q) <= flatness,
                   between.allSatisfy({ Runs.distance($0, k, q) <= flatness }) {
                    between.append(last)
                } else {
                    open.append(last)
                    between.removeAll(keepingCapacity: true)
                }
                pending = q
                return
            }
            flush()
            if abs(p.r - q.r) <= 2 * tolerance {
                open = [p]
                pending = q
                lo = min(p.r, q.r)
                hi = max(p.r, q.r)
            } else {
                var again = false
                if case .taper(_, let e, _)? = pieces.last, e.x == p.x, e.y == p.y, e.r == p.r { again = true }
                pieces.append(.taper(p, q, startDisc: !again))
            }
        }

        /// Ends the fragment: closes the open polyline; a fragment of one point is a dot.
        mutating func end(_ view: Viewport) {
            flush()
            if !drewFragment, let p = first {
                var b = Bounds()
                b.add(p)
                if b.meets(view) {
                    pieces.append(.line([p], radius: p.r))
                    bounds.add(p)
                }
            }
            first = nil
        }

        private mutating func flush() {
            if let last = pending { open.append(last) }
            if open.count >= 2 { pieces.append(.line(open, radius: (lo + hi) / 2)) }
            open = []
            pending = nil
            between.removeAll(keepingCapacity: true)
        }

        /// The distance from `p` to the segment from `a` to `b`.
        static func distance(_ p: DevicePoint, _ a: DevicePoint, _ b: DevicePoint) -> Double {
            let dx = b.x - a.x, dy = b.y - a.y
            let len2 = dx * dx + dy * dy
            var t = len2 > 0 ? ((p.x - a.x) * dx + (p.y - a.y) * dy) / len2 : 0
            t = min(1, max(0, t))
            let ex = a.x + t * dx - p.x, ey = a.y + t * dy - p.y
            return (ex * ex + ey * ey).squareRoot()
        }

        /// Polylines longer than this many points are stroked in pieces of `lineChunk` segments.
        static let longLine = 256
        static let lineChunk = 32

        /// Draws every piece in the current source (the caller sets round caps and joins).
        func draw(_ cr: OpaquePointer) {
            for piece in pieces {
                switch piece {
                case .line(let pts, let r):
                    if pts.count == 1 {
                        disc(pts[0], cr)
                        cairo_fill(cr)
                        continue
                    }
                    cairo_set_line_width(cr, 2 * r)
                    // A long polyline in pieces of `chunk` segments sharing their ends: cairo's
                    // stroker intersects every segment of one path with the others, so a
                    // jagged stroke of n points cost O(n²) (40,000 random points: 42 s, a
                    // hostile import stalled). Pieces cost n × chunk. Opaque ink looks the
                    // same (round caps where round joins were); translucent ink is drawn
                    // opaque in a group and painted once (`drawStroke`).
                    let chunk = pts.count > Runs.longLine ? Runs.lineChunk : pts.count
                    var start = 0
                    while start < pts.count - 1 {
                        let end = min(pts.count - 1, start + chunk)
                        cairo_move_to(cr, pts[start].x, pts[start].y)
                        for i in (start + 1)...end { cairo_line_to(cr, pts[i].x, pts[i].y) }
                        cairo_stroke(cr)
                        start = end
                    }
                case .taper(let p, let q, let startDisc):
                    if startDisc { disc(p, cr) }
                    taper(p, q, cr)
                    disc(q, cr)
                    cairo_fill(cr)
                }
            }
        }
    }

    /// Adds a disc (wound like `taper`'s quadrilateral) to the path.
    static func disc(_ p: DevicePoint, _ cr: OpaquePointer) {
        cairo_new_sub_path(cr)
        cairo_arc(cr, p.x, p.y, p.r, 0, 2 * Double.pi)
        cairo_close_path(cr)
    }

    /// Adds the quadrilateral between the discs of `p` and `q`'s outer tangents, wound
    /// positively (as `cairo_arc` winds a disc), so that the non-zero fill with both discs is
    /// their hull. Adds nothing when one disc lies inside the other.
    static func taper(_ p: DevicePoint, _ q: DevicePoint, _ cr: OpaquePointer) {
        let dx = q.x - p.x, dy = q.y - p.y
        let d = (dx * dx + dy * dy).squareRoot()
        guard d > abs(p.r - q.r), d > 0 else { return }
        let ux = dx / d, uy = dy / d
        let s = (p.r - q.r) / d, c = (1 - s * s).squareRoot()
        // Unit vectors from each center to its tangent points: s·u ± c·n, n = (−uy, ux).
        let ax = s * ux - c * uy, ay = s * uy + c * ux
        let bx = s * ux + c * uy, by = s * uy - c * ux
        let quad = [(p.x + p.r * ax, p.y + p.r * ay), (q.x + q.r * ax, q.y + q.r * ay),
                    (q.x + q.r * bx, q.y + q.r * by), (p.x + p.r * bx, p.y + p.r * by)]
        var area = 0.0
        for i in 0..<4 {
            let (x0, y0) = quad[i], (x1, y1) = quad[(i + 1) % 4]
            area += x0 * y1 - x1 * y0
        }
        guard area != 0 else { return }
        let order = area > 0 ? [0, 1, 2, 3] : [0, 3, 2, 1]
        cairo_move_to(cr, quad[order[0]].0, quad[order[0]].1)
        for k in order.dropFirst() { cairo_line_to(cr, quad[k].0, quad[k].1) }
        cairo_close_path(cr)
    }

    enum ImageOutcome { case drawn, placeholder, nothing }

    /// The matrix from an image's frame-local coordinates (origin at the frame's top-left,
    /// tenths of a point) to device units: rotation about the frame's center, then the
    /// element's transform, then `scale`.
    static func imageMatrix(_ img: ImageElement, transform t: Transform, scale: Double) -> cairo_matrix_t {
        let fw = Double(img.frame.width), fh = Double(img.frame.height)
        let cx = Double(img.frame.x) + fw / 2, cy = Double(img.frame.y) + fh / 2
        let angle = Double(img.rotation) * Double.pi / 18_000
        let k = scale / 65536
        var m = cairo_matrix_t()
        cairo_matrix_init(&m, Double(t.a) * k, Double(t.b) * k, Double(t.c) * k, Double(t.d) * k,
                          Double(t.tx) * scale, Double(t.ty) * scale)
        cairo_matrix_translate(&m, cx, cy)
        cairo_matrix_rotate(&m, angle)
        cairo_matrix_translate(&m, -fw / 2, -fh / 2)
        return m
    }

    static func drawImage(_ img: ImageElement, transform t: Transform, on cr: OpaquePointer, view: Viewport,
                          images: ImageCache) -> ImageOutcome {
        let det = Int64(t.a) * Int64(t.d) - Int64(t.b) * Int64(t.c)
        guard det != 0, img.frame.width > 0, img.frame.height > 0 else { return .nothing }
        let fw = Double(img.frame.width), fh = Double(img.frame.height)
        var m = imageMatrix(img, transform: t, scale: view.scale)
        // Cull what lies outside the output.
        var b = Bounds()
        for (u, v) in [(0.0, 0.0), (fw, 0), (0, fh), (fw, fh)] {
            var x = u, y = v
            cairo_matrix_transform_point(&m, &x, &y)
            b.add(DevicePoint(x: x, y: y, r: 0))
        }
        guard b.meets(view) else { return .nothing }
        cairo_save(cr)
        defer { cairo_restore(cr) }
        cairo_set_matrix(cr, &m)
        if let asset = images.asset(img.asset) {
            cairo_scale(cr, fw / Double(asset.width), fh / Double(asset.height))
            cairo_set_source_surface(cr, asset.surface, 0, 0)
            cairo_pattern_set_filter(cairo_get_source(cr), CAIRO_FILTER_GOOD)
            cairo_rectangle(cr, 0, 0, Double(asset.width), Double(asset.height))
            cairo_fill(cr)
            return .drawn
        }
        cairo_rectangle(cr, 0, 0, fw, fh)
        let f = placeholderFill, e = placeholderBorder
        cairo_set_source_rgb(cr, Double(f.r) / 255, Double(f.g) / 255, Double(f.b) / 255)
        cairo_fill_preserve(cr)
        cairo_identity_matrix(cr)
        cairo_set_line_width(cr, 1)
        cairo_set_source_rgb(cr, Double(e.r) / 255, Double(e.g) / 255, Double(e.b) / 255)
        cairo_stroke(cr)
        return .placeholder
    }
}

/// Image assets decoded for the drawing of one page, within a budget of decoded pixels.
///
/// Each asset is decoded at most once per page and its surface released right after the last
/// element of the page that draws it ([PKG-17]): a page never holds more decoded pixels than
/// `pixelBudget`. The size is read from the asset's header (PNG `IHDR`, JPEG `SOF`) before
/// decoding; an asset that would take the page's decoded pixels past the budget is not
/// decoded and is drawn as the placeholder, like one that does not decode.
final class ImageCache {
    /// Decoded pixels one page may use in all: 64 megapixels (256 MiB as ARGB32).
    static let defaultPixelBudget = 64_000_000

    let lookup: AssetLookup
    let pixelBudget: Int
    private var entries: [AssetID: ImageAsset?] = [:]
    /// The index of the last element of the page that draws each asset.
    private var lastUse: [AssetID: Int] = [:]
    /// Pixels decoded for the current page (charged once per asset, by its header).
    private(set) var pagePixels = 0
    /// Pixels of the surfaces held now, and the most held at once since the cache was made.
    private(set) var livePixels = 0
    private(set) var peakLivePixels = 0
    /// Pixels decoded since the cache was made, over every page.
    private(set) var decodedPixels = 0
    /// Why each asset that could not be drawn was not (absent, a decode error, the budget).
    private(set) var failures: [AssetID: LnoteError] = [:]

    init(_ lookup: @escaping AssetLookup, pixelBudget: Int = ImageCache.defaultPixelBudget) {
        self.lookup = lookup
        self.pixelBudget = pixelBudget
    }

    deinit { close() }

    /// Starts a page: releases what the last one held, resets the budget, notes where each
    /// asset is last drawn.
    func begin(_ state: PageState) {
        close()
        pagePixels = 0
        lastUse = [:]
        for (i, e) in state.elements.enumerated() {
            if case .image(let img) = e.content { lastUse[img.asset] = i }
        }
    }

    /// The decoded asset, or nil when it is missing, does not decode or is past the page's
    /// budget of decoded pixels.
    func asset(_ id: AssetID) -> ImageAsset? {
        if let e = entries[id] { return e }
        var decoded: ImageAsset?
        let name = "assets/\(id)"
        if let bytes = lookup(id) {
            do {
                // A size past `ImageLimits` is refused by the decoder itself, before allocating.
                if let (w, h) = ImageAsset.pixelSize(bytes), (1...ImageLimits.maxSide).contains(w),
                   (1...ImageLimits.maxSide).contains(h) {
                    let pixels = w * h
                    guard pagePixels + pixels <= pixelBudget else {
                        throw LnoteError(.limitExceeded, "an image of \(w)x\(h) pixels past the page's budget of "
                                         + "\(pixelBudget) decoded pixels", path: name)
                    }
                    pagePixels += pixels
                }
                let a = try ImageAsset.decode(bytes, name: name)
                decoded = a
                // A PDF embeds an asset drawn on several pages once, though each page decodes it.
                cairo_surface_set_mime_data(a.surface, CAIRO_MIME_TYPE_UNIQUE_ID, strdup("\(id)"),
                                            UInt(id.description.utf8.count), free, nil)
                decodedPixels += a.width * a.height
                livePixels += a.width * a.height
                peakLivePixels = max(peakLivePixels, livePixels)
            } catch let e as LnoteError {
                failures[id] = e
            } catch {
                failures[id] = LnoteError(.corrupt, "\(error)", path: name)
            }
        } else {
            failures[id] = LnoteError(.notFound, "no asset", path: name)
        }
        entries[id] = .some(decoded)
        return decoded
    }

    /// The element at `index` (drawing `id`) is done: the asset's surface is released when no
    /// later element of the page draws it.
    func done(_ id: AssetID, at index: Int) {
        guard lastUse[id] == index, case let a?? = entries[id] else { return }
        livePixels -= a.width * a.height
        a.close()
        entries[id] = .some(nil)
    }

    func close() {
        for case let a? in entries.values { a.close() }
        entries = [:]
        livePixels = 0
    }
}
