/// The drawing tool a stroke was made with.
public enum ToolKind: UInt8, Sendable, CaseIterable, CustomStringConvertible {
    case pen = 0, pencil = 1, marker = 2, highlighter = 3
    public var description: String {
        switch self {
        case .pen: "pen"
        case .pencil: "pencil"
        case .marker: "marker"
        case .highlighter: "highlighter"
        }
    }
    public init?(name: String) {
        guard let t = ToolKind.allCases.first(where: { $0.description == name }) else { return nil }
        self = t
    }
}

/// A color with 8-bit red, green, blue and alpha channels.
public struct RGBA: Hashable, Sendable, CustomStringConvertible {
    /// `0xRRGGBBAA`. One stored word, not four bytes: with four, a stroke (its style holds
    /// a color) has enough fields for the compiler to handle it by address, and building one
    /// compiled to a copy and a destroy (a retain and a release of its points' source).
    public private(set) var packed: UInt32
    public var r: UInt8 {
        get { UInt8(packed >> 24) }
        set { packed = packed & 0x00FF_FFFF | UInt32(newValue) << 24 }
    }
    public var g: UInt8 {
        get { UInt8((packed >> 16) & 0xFF) }
        set { packed = packed & 0xFF00_FFFF | UInt32(newValue) << 16 }
    }
    public var b: UInt8 {
        get { UInt8((packed >> 8) & 0xFF) }
        set { packed = packed & 0xFFFF_00FF | UInt32(newValue) << 8 }
    }
    public var a: UInt8 {
        get { UInt8(packed & 0xFF) }
        set { packed = packed & 0xFFFF_FF00 | UInt32(newValue) }
    }
    public init(r: UInt8, g: UInt8, b: UInt8, a: UInt8 = 255) {
        packed = UInt32(r) << 24 | UInt32(g) << 16 | UInt32(b) << 8 | UInt32(a)
    }
    public static let black = RGBA(r: 0, g: 0, b: 0)
    /// `#rrggbbaa`
    public var description: String { "#" + hexString([r, g, b, a]) }
    public init?(hex: String) {
        var s = Substring(hex)
        if s.hasPrefix("#") { s = s.dropFirst() }
        guard s.count == 6 || s.count == 8, let v = UInt32(s, radix: 16) else { return nil }
        let full = s.count == 6 ? v << 8 | 0xff : v
        self.init(r: UInt8(full >> 24), g: UInt8((full >> 16) & 0xff), b: UInt8((full >> 8) & 0xff), a: UInt8(full & 0xff))
    }
    public init(packed v: UInt32) { packed = v }
}

/// How a stroke is drawn: tool, color and base width (tenths of a point).
public struct InkStyle: Hashable, Sendable {
    public var tool: ToolKind
    public var color: RGBA
    /// Base width in tenths of a point.
    public var width: Int32
    public init(tool: ToolKind = .pen, color: RGBA = .black, width: Int32 = 20) {
        self.tool = tool; self.color = color; self.width = width
    }
}

/// One sample of a stroke, quantized (see `Quantization`).
public struct StrokePoint: Hashable, Sendable {
    /// Tenths of a point, y down.
    public var x: Int32
    public var y: Int32
    /// Thousandths, 0...1000.
    public var pressure: UInt16
    /// Drawn radius, tenths of a point.
    public var radius: Int32
    /// Milliseconds since the stroke's first point (the first point has 0).
    public var t: UInt32

    public init(x: Int32, y: Int32, pressure: UInt16 = 500, radius: Int32 = 10, t: UInt32 = 0) {
        self.x = x; self.y = y; self.pressure = pressure; self.radius = radius; self.t = t
    }
}

/// A stroke: its ink style and its points, in the order they were drawn.
/// Immutable once added: erasing part of it records erased point ranges instead.
public struct Stroke: Hashable, Sendable {
    public var style: InkStyle
    /// The points. Empty while `isResolved` is false: a stroke read from a snapshot with
    /// its points deferred ([SNAP-38]) holds them undecoded until `resolved()`.
    public var points: [StrokePoint] {
        get { storedPoints }
        // Points given replace deferred ones.
        set {
            storedPoints = newValue
            deferred = nil
        }
        _modify {
            deferred = nil
            yield &storedPoints
        }
    }
    /// What `points` reads. (Not a stored `points` with an observer: with one, building a
    /// stroke compiled to a copy of it and a destroy, which for a deferred stroke retains
    /// and releases the source that every stroke of its snapshot shares.)
    private var storedPoints: [StrokePoint]
    /// Where the undecoded points of a deferred stroke are; nil once they are in `points`.
    package var deferred: DeferredPoints.Slot?

    public init(style: InkStyle = InkStyle(), points: [StrokePoint]) {
        self.style = style
        self.storedPoints = points
        self.deferred = nil
    }

    package init(style: InkStyle, deferred: DeferredPoints.Slot) {
        self.style = style
        self.storedPoints = []
        self.deferred = deferred
    }

    /// False for a stroke read with its points deferred ([SNAP-38]) and not yet resolved:
    /// its `points` are then empty, and `pointCount` says how many it has.
    public var isResolved: Bool { deferred == nil }

    /// Where this stroke's deferred points come from (nil when resolved).
    package var deferredSource: DeferredPoints? { deferred?.source }

    /// The number of points, known without decoding them.
    public var pointCount: Int { deferred?.count ?? points.count }

    /// The stroke with its points decoded and checked (itself when it is resolved).
    /// - Throws: `corrupt`, naming the snapshot file and the byte offset, when the deferred
    ///   points do not decode or break [SNAP-19]'s bounds.
    public func resolved() throws -> Stroke {
        guard let d = deferred else { return self }
        return Stroke(style: style, points: try d.source.points(of: d))
    }

    /// Maximum points in one stroke (a minute of 240 Hz sampling is 14,400).
    public static let maxPoints = 1 << 20
}

/// An axis-aligned rectangle in tenths of a point.
public struct QRect: Hashable, Sendable {
    public var x: Int32, y: Int32, width: Int32, height: Int32
    public init(x: Int32, y: Int32, width: Int32, height: Int32) {
        self.x = x; self.y = y; self.width = width; self.height = height
    }
}

/// An image placed on a page, referring to an asset by content address.
public struct ImageElement: Hashable, Sendable {
    public var asset: AssetID
    public var frame: QRect
    /// Rotation in hundredths of a degree, clockwise.
    public var rotation: Int32
    public init(asset: AssetID, frame: QRect, rotation: Int32 = 0) {
        self.asset = asset; self.frame = frame; self.rotation = rotation
    }
}

/// What an element is.
public enum ElementContent: Hashable, Sendable {
    case stroke(Stroke)
    case image(ImageElement)

    public var stroke: Stroke? { if case .stroke(let s) = self { s } else { nil } }
    public var image: ImageElement? { if case .image(let i) = self { i } else { nil } }
    /// Number of points (0 for an image).
    public var pointCount: Int { stroke?.pointCount ?? 0 }

    /// False for a stroke whose points are still deferred ([SNAP-38]).
    public var isResolved: Bool { stroke?.isResolved ?? true }

    /// The content with its points decoded and checked (see `Stroke.resolved()`).
    public func resolved() throws -> ElementContent {
        guard case .stroke(let s) = self, !s.isResolved else { return self }
        return .stroke(try s.resolved())
    }
}

/// A 2-D affine transform in integers: `a b c d` in 1/65536 (16.16 fixed point),
/// `tx ty` in tenths of a point. `x' = a·x + c·y + tx`, `y' = b·x + d·y + ty`.
public struct Transform: Hashable, Sendable, CustomStringConvertible {
    public var a: Int32, b: Int32, c: Int32, d: Int32, tx: Int32, ty: Int32
    public static let one: Int32 = 65536
    public static let identity = Transform(a: one, b: 0, c: 0, d: one, tx: 0, ty: 0)
    public init(a: Int32, b: Int32, c: Int32, d: Int32, tx: Int32, ty: Int32) {
        self.a = a; self.b = b; self.c = c; self.d = d; self.tx = tx; self.ty = ty
    }
    public static func translation(_ dx: Int32, _ dy: Int32) -> Transform {
        Transform(a: one, b: 0, c: 0, d: one, tx: dx, ty: dy)
    }
    public var isTranslation: Bool { a == Transform.one && b == 0 && c == 0 && d == Transform.one }
    /// This transform followed by a translation (wrapping is impossible within the coordinate limit
    /// and is reported as out of range).
    public func translated(by dx: Int32, _ dy: Int32) throws -> Transform {
        let (nx, o1) = tx.addingReportingOverflow(dx)
        let (ny, o2) = ty.addingReportingOverflow(dy)
        guard !o1, !o2, abs(Int64(nx)) <= Int64(Quantization.coordinateLimit),
              abs(Int64(ny)) <= Int64(Quantization.coordinateLimit) else {
            throw LnoteError(.invalidArgument, "translation out of range")
        }
        var t = self
        t.tx = nx
        t.ty = ny
        return t
    }
    public var description: String {
        isTranslation ? "translate(\(tx), \(ty))" : "matrix(\(a), \(b), \(c), \(d), \(tx), \(ty))"
    }
}

/// A half-open range of point indices `[from, to)` in a stroke's original points.
public struct PointRange: Hashable, Sendable, Comparable, CustomStringConvertible {
    public var from: UInt32
    public var to: UInt32
    public init(_ from: UInt32, _ to: UInt32) {
        self.from = from; self.to = to
    }
    public var isEmpty: Bool { from >= to }
    public var count: Int { isEmpty ? 0 : Int(to - from) }
    public static func < (l: PointRange, r: PointRange) -> Bool { (l.from, l.to) < (r.from, r.to) }
    public var description: String { "[\(from), \(to))" }
}

extension PointRange {
    /// The normalized union of several lists, merged two by two: O(n log k) for k lists of n
    /// ranges in all, where sorting them together was O(n log n) again for every range restore
    /// of a stroke with many erased ranges. Equal to `lists.flatMap { $0 }.normalizedUnion()`.
    public static func union(of lists: [[PointRange]]) -> [PointRange] {
        var level = lists.map { $0.isNormalized ? $0 : $0.normalizedUnion() }
        guard !level.isEmpty else { return [] }
        while level.count > 1 {
            var next: [[PointRange]] = []
            next.reserveCapacity((level.count + 1) / 2)
            var i = 0
            while i + 1 < level.count {
                next.append(level[i].unionNormalized(level[i + 1]))
                i += 2
            }
            if i < level.count { next.append(level[i]) }
            level = next
        }
        return level[0]
    }
}

extension Array where Element == PointRange {
    /// Sorted, disjoint, non-adjacent, non-empty ranges covering the union of `self`.
    public func normalizedUnion() -> [PointRange] {
        let sorted = self.filter { !$0.isEmpty }.sorted()
        var out: [PointRange] = []
        for r in sorted {
            if let last = out.last, r.from <= last.to {
                out[out.count - 1].to = Swift.max(last.to, r.to)
            } else {
                out.append(r)
            }
        }
        return out
    }

    /// True when `self` is its own `normalizedUnion()`: non-empty ranges, each starting past
    /// the end of the one before (sorted, disjoint, non-adjacent). Checked without allocating.
    public var isNormalized: Bool {
        var previous: PointRange?
        for r in self {
            guard !r.isEmpty else { return false }
            if let previous, r.from <= previous.to { return false }
            previous = r
        }
        return true
    }

    /// The points of `self` that `other` does not cover, normalized.
    public func subtracting(_ other: [PointRange]) -> [PointRange] {
        (isNormalized ? self : normalizedUnion()).subtractingNormalized(other.isNormalized ? other : other.normalizedUnion())
    }

    /// `subtracting` of two normalized lists (`isNormalized`; not checked): one walk of `self`,
    /// finding where each range's cuts begin by a binary search in `cut` from the last place,
    /// so O(n log m) plus the pieces made (a rescan of `cut` for each range was O(n·m): seconds
    /// for a restore of 100,000 ranges over an erase of as many).
    public func subtractingNormalized(_ cut: [PointRange]) -> [PointRange] {
        assert(isNormalized && cut.isNormalized, "subtractingNormalized of lists that are not normalized")
        var out: [PointRange] = []
        out.reserveCapacity(count)
        var j = 0
        for r in self {
            // The first cut at or after j that ends past r.from (cuts are sorted and disjoint,
            // so their ends increase).
            var lo = j, hi = cut.count
            while lo < hi {
                let mid = (lo + hi) / 2
                if cut[mid].to > r.from { hi = mid } else { lo = mid + 1 }
            }
            j = lo
            var from = r.from
            var k = j
            while k < cut.count && cut[k].from < r.to {
                if cut[k].from > from { out.append(PointRange(from, cut[k].from)) }
                from = Swift.max(from, cut[k].to)
                k += 1
            }
            if from < r.to { out.append(PointRange(from, r.to)) }
        }
        return out
    }

    /// `(self + other).normalizedUnion()` for two normalized lists (not checked): a merge in
    /// one pass, O(n + m), where sorting both again cost O((n + m) log(n + m)) for every
    /// partial erase of a stroke already holding many erased ranges.
    public func unionNormalized(_ other: [PointRange]) -> [PointRange] {
        assert(isNormalized && other.isNormalized, "unionNormalized of lists that are not normalized")
        guard !other.isEmpty else { return self }
        guard !isEmpty else { return other }
        var out: [PointRange] = []
        out.reserveCapacity(count + other.count)
        var i = 0, j = 0
        while i < count || j < other.count {
            let next: PointRange
            if j == other.count || (i < count && self[i] < other[j]) {
                next = self[i]
                i += 1
            } else {
                next = other[j]
                j += 1
            }
            if let last = out.last, next.from <= last.to {
                out[out.count - 1].to = Swift.max(last.to, next.to)
            } else {
                out.append(next)
            }
        }
        return out
    }

    /// The complement of these (normalized) ranges within `0..<count`: the visible fragments.
    public func complement(within count: Int) -> [PointRange] {
        var out: [PointRange] = []
        var at: UInt32 = 0
        let n = UInt32(clamping: count)
        for r in self.normalizedUnion() {
            let lo = Swift.min(r.from, n)
            if lo > at { out.append(PointRange(at, lo)) }
            at = Swift.max(at, Swift.min(r.to, n))
        }
        if at < n { out.append(PointRange(at, n)) }
        return out
    }
}
