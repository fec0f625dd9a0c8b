/// The bounds of what an element holds (operation-log.md [LOG-23]): every value a renderer,
/// an exporter or the merge computes with stays inside 32 bits, and every stroke a pen could
/// draw fits. One definition for every door: the operation validator (log replay, sync
/// bodies, local edits) and the page snapshot reader (a snapshot holds only what operations
/// carried, so a value beyond these cannot be explained by any and is corrupt).
public enum ContentBounds {
    /// Coordinates, frames and translations: ±10,000,000 pt, in tenths.
    public static let coordinateLimit = Int64(Quantization.coordinateLimit)
    /// Largest point radius and stroke width: 10,000 pt, in tenths.
    public static let maxRadius: Int32 = 100_000
    /// Longest stroke: 24 hours, in milliseconds.
    public static let maxStrokeDuration: UInt32 = 86_400_000
    /// Largest matrix coefficient: 256.0 in 16.16 fixed point.
    public static let maxMatrixCoefficient: Int32 = 1 << 24
    /// Largest image rotation: ±360°, in hundredths of a degree.
    public static let maxRotation: Int32 = 36_000

    /// What puts `content` out of bounds, or nil.
    public static func problem(_ content: ElementContent) -> String? {
        problem(content, allowingDeferred: false)
    }

    /// `problem(_:)`; with `allowingDeferred`, a stroke whose points are deferred
    /// (page-snapshot.md [SNAP-38]) is checked for its count and style only, its points being
    /// checked when they are decoded. Without it such a stroke is a problem: an operation or a
    /// written snapshot never holds one.
    package static func problem(_ content: ElementContent, allowingDeferred: Bool) -> String? {
        switch content {
        case .stroke(let s):
            if let problem = strokeProblem(count: s.pointCount, width: s.style.width) { return problem }
            guard s.isResolved else { return allowingDeferred ? nil : "a stroke whose points were never decoded" }
            guard s.points[0].t == 0 else { return "a stroke whose first point is at \(s.points[0].t) ms, not 0" }
            // One pass without branches over every point of the stroke (it runs on every
            // append and every decode); the point at fault is looked for only when one is.
            guard pointsOutOfBounds(s.points) else { return nil }
            var previous: UInt32 = 0
            for (i, p) in s.points.enumerated() {
                guard coordinate(p.x), coordinate(p.y) else { return "point \(i) beyond ±\(coordinateLimit) tenths of a point" }
                guard p.radius >= 0, p.radius <= maxRadius else { return "point \(i) with radius \(p.radius)" }
                guard p.t >= previous, p.t <= maxStrokeDuration else { return "point \(i) at \(p.t) ms (times never decrease, at most 24 h)" }
                guard p.pressure <= Quantization.pressureMax else { return "point \(i) with pressure \(p.pressure)" }
                previous = p.t
            }
            return nil
        case .image(let img):
            let f = img.frame
            guard coordinate(f.x), coordinate(f.y), f.width > 0, f.height > 0, coordinate(f.width), coordinate(f.height) else {
                return "an image frame (\(f.x), \(f.y), \(f.width), \(f.height))"
            }
            guard abs(Int64(img.rotation)) <= Int64(maxRotation) else { return "an image rotation of \(img.rotation) hundredths of a degree" }
            return nil
        }
    }

    /// What `problem(_:allowingDeferred: true)` finds in a stroke of `count` points and base
    /// width `width` whose points are deferred, said without making the stroke (a decoder
    /// checks it before it builds one).
    @inline(__always)
    package static func strokeProblem(count: Int, width: Int32) -> String? {
        guard count >= 1, count <= Stroke.maxPoints else { return "a stroke of \(count) points" }
        guard width > 0, width <= maxRadius else { return "a stroke width of \(width) tenths of a point" }
        return nil
    }

    /// What puts a transform out of bounds, or nil.
    public static func problem(_ t: Transform) -> String? {
        guard coordinate(t.tx), coordinate(t.ty) else { return "a translation beyond ±\(coordinateLimit) tenths of a point" }
        // Four plain comparisons, not an array of the coefficients (an allocation on every
        // element decoded).
        @inline(__always) func inRange(_ v: Int32) -> Bool { abs(Int64(v)) <= Int64(maxMatrixCoefficient) }
        guard inRange(t.a), inRange(t.b), inRange(t.c), inRange(t.d) else {
            return "a matrix coefficient beyond ±\(maxMatrixCoefficient) (256.0)"
        }
        return nil
    }

    @inline(__always)
    static func coordinate(_ v: Int32) -> Bool { abs(Int64(v)) <= coordinateLimit }

    /// True when some point is out of bounds: a coordinate beyond the limit, a radius below 0
    /// or above the limit, a pressure above 1000, a time going back or beyond 24 hours. A
    /// value `v` lies in `-L...L` exactly when `UInt32(bitPattern: v &+ L) <= 2L`.
    @inline(__always)
    public static func pointsOutOfBounds(_ points: [StrokePoint]) -> Bool {
        let l = UInt32(coordinateLimit), span = 2 * UInt32(coordinateLimit)
        let rMax = UInt32(maxRadius), tMax = maxStrokeDuration, pMax = Quantization.pressureMax
        return points.withUnsafeBufferPointer { b -> Bool in
            var bad: UInt32 = 0
            var previous: UInt32 = 0
            for p in b {
                let x = UInt32(bitPattern: p.x) &+ l, y = UInt32(bitPattern: p.y) &+ l
                bad |= (x > span ? 1 : 0) | (y > span ? 1 : 0) | (UInt32(bitPattern: p.radius) > rMax ? 1 : 0)
                    | (p.t < previous ? 1 : 0) | (p.t > tMax ? 1 : 0) | (p.pressure > pMax ? 1 : 0)
                previous = p.t
            }
            return bad != 0
        }
    }
}
