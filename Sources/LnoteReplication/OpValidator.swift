import LnoteModel

/// Decides whether an operation may enter a log: the rules that hold for one operation on
/// its own, whatever the log already holds. Every door applies them: the frame decoder
/// (so log replay, sync bodies, folder sync and checkpoints), the merge's `receive`, and
/// local edits (`make`). The merge never traps on an operation that passes.
public enum OpValidator {
    /// The greatest Lamport timestamp ([LOG-4]): 2⁶². Layers and "one more" stay within
    /// `Int64` and `UInt64`.
    public static let maxLamport: UInt64 = 1 << 62

    // [LOG-23] Bounds on what an operation carries.
    /// Most entries in a context or a clock an operation carries.
    public static let maxClockEntries = 4096
    /// Coordinates, frames and translations: ±10,000,000 pt, in tenths.
    public static let coordinateLimit = Int64(Quantization.coordinateLimit)
    /// Largest point radius and stroke width: 10,000 pt, in tenths.
    public static let maxRadius: Int32 = 100_000
    /// Longest stroke: 24 hours, in milliseconds.
    public static let maxStrokeDuration: UInt32 = 86_400_000
    /// Largest matrix coefficient: 256.0 in 16.16 fixed point.
    public static let maxMatrixCoefficient: Int32 = 1 << 24

    /// The Lamport timestamp an operation with this id and context must carry ([LOG-4]):
    /// the number of operations its author had applied in the log, plus one, that is its
    /// counter plus the other entries of its context. Nil when it would exceed `maxLamport`.
    public static func lamport(id: OpID, context: VectorClock) -> UInt64? {
        var sum = id.counter
        for e in context.entries where e.replica != id.replica {
            let (s, overflow) = sum.addingReportingOverflow(e.counter)
            guard !overflow, s <= maxLamport else { return nil }
            sum = s
        }
        return sum <= maxLamport ? sum : nil
    }

    /// A rule an operation breaks.
    public struct Violation: Hashable, Sendable, CustomStringConvertible {
        public enum Rule: String, Sendable {
            case log2 = "LOG-2", log3 = "LOG-3", log4 = "LOG-4", log23 = "LOG-23", shr6 = "SHR-6", merge12 = "MERGE-12"
        }
        public var rule: Rule
        public var op: OpID
        public var message: String
        public var description: String { "operation \(op) breaks [\(rule.rawValue)]: \(message)" }
    }

    /// Throws `corrupt`, naming the operation and the rule, for an operation no correct
    /// replica makes (see `violation(of:)`).
    public static func validate(_ op: Op) throws {
        if let v = violation(of: op) { throw LnoteError(.corrupt, v.description) }
    }

    /// The first rule `op` breaks, or nil: [LOG-2] (non-zero id), [LOG-3] (the context's own
    /// entry is `counter − 1`), [LOG-4] (the Lamport timestamp), [SHR-6] and [MERGE-12] (z
    /// keys and page positions).
    public static func violation(of op: Op) -> Violation? {
        func refuse(_ rule: Violation.Rule, _ message: String) -> Violation {
            Violation(rule: rule, op: op.id, message: message)
        }
        guard op.id.replica.rawValue != 0, op.id.counter != 0 else {
            return refuse(.log2, "zero replica id or counter")
        }
        guard op.context[op.id.replica] == op.id.counter - 1 else {
            return refuse(.log3, "its context holds \(op.context[op.id.replica]) of its author's operations, not \(op.id.counter - 1)")
        }
        guard let expected = lamport(id: op.id, context: op.context) else {
            return refuse(.log4, "its context covers more than \(maxLamport) operations")
        }
        guard op.lamport == expected else {
            return refuse(.log4, "Lamport timestamp \(op.lamport), its context gives \(expected)")
        }
        if let problem = boundsProblem(op) { return refuse(.log23, problem) }
        let bound = Int64(op.lamport)
        func check(_ z: ZKey, _ what: String) -> Violation? {
            if let problem = z.validityProblem { return refuse(.shr6, "\(what) \(z): \(problem)") }
            guard z.layer <= bound, z.layer >= -bound else {
                return refuse(.merge12, "\(what) \(z) has a layer outside ±\(bound)")
            }
            return nil
        }
        switch op.body {
        case .add(_, let z): return check(z, "z key")
        case .reorder(let zs): return zs.lazy.compactMap { check($0.z, "z key of \($0.element)") }.first
        case .addPage(_, let z, _), .movePage(_, let z): return check(z, "position")
        default: return nil
        }
    }

    /// [LOG-23] What makes `op`'s content out of bounds, or nil.
    static func boundsProblem(_ op: Op) -> String? {
        func coordinate(_ v: Int32) -> Bool { abs(Int64(v)) <= coordinateLimit }
        func clock(_ c: VectorClock, _ what: String) -> String? {
            c.entries.count <= maxClockEntries ? nil : "\(what) of \(c.entries.count) entries (at most \(maxClockEntries))"
        }
        if let p = clock(op.context, "a context") { return p }
        func transform(_ t: Transform) -> String? {
            guard coordinate(t.tx), coordinate(t.ty) else { return "a translation beyond ±\(coordinateLimit) tenths of a point" }
            guard [t.a, t.b, t.c, t.d].allSatisfy({ abs(Int64($0)) <= Int64(maxMatrixCoefficient) }) else {
                return "a matrix coefficient beyond ±\(maxMatrixCoefficient) (256.0)"
            }
            return nil
        }
        func list(_ n: Int, _ what: String) -> String? { n == 0 ? "no \(what)" : nil }
        func text(_ t: String) -> String? {
            for u in t.unicodeScalars where u.value < 0x20 || (0x7F...0x9F).contains(u.value) || u.value == 0x2028 || u.value == 0x2029 {
                return "a title with the control character U+\(String(u.value, radix: 16, uppercase: true))"
            }
            return nil
        }
        func canvas(_ c: CanvasSize) -> String? {
            c.width > 0 && c.height > 0 && Int64(c.width) <= coordinateLimit && Int64(c.height) <= coordinateLimit
                ? nil : "a canvas of \(c.width) × \(c.height) tenths of a point"
        }
        switch op.body {
        case .add(.stroke(let s), _):
            guard !s.points.isEmpty, s.points.count <= Stroke.maxPoints else { return "a stroke of \(s.points.count) points" }
            guard s.style.width > 0, s.style.width <= maxRadius else { return "a stroke width of \(s.style.width) tenths of a point" }
            guard s.points[0].t == 0 else { return "a stroke whose first point is at \(s.points[0].t) ms, not 0" }
            // One pass without branches over every point of the stroke (it runs on every
            // append and every decode); the point at fault is looked for only when one is.
            guard !pointsOutOfBounds(s.points) else {
                var previous: UInt32 = 0
                for (i, p) in s.points.enumerated() {
                    guard coordinate(p.x), coordinate(p.y) else { return "point \(i) beyond ±\(coordinateLimit) tenths of a point" }
                    guard p.radius >= 0, p.radius <= maxRadius else { return "point \(i) with radius \(p.radius)" }
                    guard p.t >= previous, p.t <= maxStrokeDuration else { return "point \(i) at \(p.t) ms (times never decrease, at most 24 h)" }
                    previous = p.t
                }
                return nil
            }
            return nil
        case .add(.image(let img), _):
            let f = img.frame
            guard coordinate(f.x), coordinate(f.y), f.width > 0, f.height > 0, coordinate(f.width), coordinate(f.height) else {
                return "an image frame (\(f.x), \(f.y), \(f.width), \(f.height))"
            }
            guard abs(img.rotation) <= 36_000 else { return "an image rotation of \(img.rotation) hundredths of a degree" }
            return nil
        case .erase(let ids): return list(ids.count, "element to erase")
        case .eraseRange(_, let ranges): return list(ranges.count, "range to erase")
        case .move(let ts): return list(ts.count, "element to move") ?? ts.lazy.compactMap { transform($0.transform) }.first
        case .reorder(let zs): return list(zs.count, "element to reorder")
        case .createDocument(let t), .setTitle(let t): return text(t)
        case .addPage(_, _, let c), .setCanvas(_, let c): return canvas(c)
        case .deletePage(_, let seen): return clock(seen, "a page clock")
        case .restorePage, .movePage, .deleteDocument, .restoreDocument: return nil
        }
    }

    /// True when some point is out of [LOG-23]'s bounds: a coordinate beyond the limit, a
    /// radius below 0 or above the limit, a time going back or beyond 24 hours. A value `v`
    /// lies in `-L...L` exactly when `UInt32(bitPattern: v &+ L) <= 2L`.
    @inline(__always)
    static func pointsOutOfBounds(_ points: [StrokePoint]) -> Bool {
        let l = UInt32(coordinateLimit), span = 2 * UInt32(coordinateLimit)
        let rMax = UInt32(maxRadius), tMax = maxStrokeDuration
        return points.withUnsafeBufferPointer { b -> Bool in
            var bad: UInt32 = 0
            var previous: UInt32 = 0
            for p in b {
                let x = UInt32(bitPattern: p.x) &+ l, y = UInt32(bitPattern: p.y) &+ l
                bad |= (x > span ? 1 : 0) | (y > span ? 1 : 0) | (UInt32(bitPattern: p.radius) > rMax ? 1 : 0)
                    | (p.t < previous ? 1 : 0) | (p.t > tMax ? 1 : 0)
                previous = p.t
            }
            return bad != 0
        }
    }
}
