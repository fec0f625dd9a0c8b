import LnoteModel

/// What a reader of an interchange format gives: the input's pages in order, each with the
/// strokes it holds (already quantized by `Stroke(samples:style:)`, the rules of
/// Protocol/import-jsonl.md section 2), and what it skipped.
public struct ImportedInk: Sendable {
    public var pages: [ImportedPage]
    /// What the input held that lnote does not import, by kind (`"image"`, `"text"`, ...).
    public var skipped: [String: Int]

    public init(pages: [ImportedPage] = [], skipped: [String: Int] = [:]) {
        self.pages = pages
        self.skipped = skipped
    }

    public var strokeCount: Int { pages.reduce(0) { $0 + $1.strokes.count } }
    public var pointCount: Int { pages.reduce(0) { $0 + $1.strokes.reduce(0) { $0 + $1.points.count } } }
    public var skippedCount: Int { skipped.values.reduce(0, +) }

    mutating func skip(_ kind: String) { skipped[kind, default: 0] += 1 }
}

/// One page of an input.
public struct ImportedPage: Sendable {
    /// Where the page's strokes go.
    public enum Target: Sendable, Hashable {
        /// The page the command names, or a new page when it names none (JSON lines without
        /// `"page"`, the first page of an InkML or .xopp file).
        case given
        /// The page at this 1-based position among the document's live pages, created at the
        /// end when the document has fewer ([IMP-10]).
        case position(Int)
        /// A page of the document by id ([IMP-10]).
        case id(PageID)
        /// A new page appended to the document (the second and later pages of a file).
        case new
    }

    public var target: Target
    /// The page size the input says (xopp's `<page width height>`, InkML's canvas annotation).
    public var canvas: CanvasSize?
    public var strokes: [Stroke]
    /// Where the input first names this page: the byte offset of that line or element, and
    /// for JSON lines the line number (errors about the page name them).
    public var offset: Int?
    public var line: Int?

    public init(target: Target, canvas: CanvasSize? = nil, strokes: [Stroke] = [], offset: Int? = nil, line: Int? = nil) {
        self.target = target
        self.canvas = canvas
        self.strokes = strokes
        self.offset = offset
        self.line = line
    }

    /// The smallest canvas holding every point's ink (x + radius, y + radius), at least
    /// `canvas`; and whether some ink lies left of or above the page (x − radius < 0 or
    /// y − radius < 0), where no canvas can grow.
    public func fitting(_ canvas: CanvasSize) -> (canvas: CanvasSize, inkBeforeOrigin: Bool) {
        var w = Int64(canvas.width), h = Int64(canvas.height)
        var before = false
        for s in strokes {
            for p in s.points {
                let r = Int64(max(0, p.radius))
                w = max(w, Int64(p.x) + r)
                h = max(h, Int64(p.y) + r)
                if Int64(p.x) - r < 0 || Int64(p.y) - r < 0 { before = true }
            }
        }
        let limit = Int64(Quantization.coordinateLimit)
        return (CanvasSize(width: Int32(min(w, limit)), height: Int32(min(h, limit))), before)
    }
}

/// The formats `lnote import` reads.
public enum InterchangeFormat: String, Sendable, CaseIterable {
    case jsonl, inkml, xopp

    /// By the file name: `-` and `.jsonl` are JSON lines, `.inkml` and `.xml` InkML, `.xopp`
    /// Xournal++; nil for anything else.
    public init?(path: String) {
        let lower = path.lowercased()
        if path == "-" || lower.hasSuffix(".jsonl") { self = .jsonl }
        else if lower.hasSuffix(".inkml") || lower.hasSuffix(".xml") { self = .inkml }
        else if lower.hasSuffix(".xopp") { self = .xopp }
        else { return nil }
    }
}
