import LnoteModel

/// Decides whether an operation may enter a log: the rules that hold for one operation on
/// its own, whatever the log already holds. Every door applies them: the frame decoder
/// (so log replay, sync bodies, folder sync and checkpoints), the merge's `receive`, and
/// local edits (`make`). The merge never traps on an operation that passes.
public enum OpValidator {
    /// The greatest Lamport timestamp ([LOG-4]): 2⁶². Layers and "one more" stay within
    /// `Int64` and `UInt64`.
    public static let maxLamport: UInt64 = VectorClock.maxTotal

    // [LOG-23] Bounds on what an operation carries (those of element content and transforms
    // are `ContentBounds`', shared with the page snapshot reader).
    /// Most entries in a context or a clock an operation carries.
    public static let maxClockEntries = 4096
    /// Most elements (or ranges) one `erase`, `eraseRange`, `move` or `reorder` names.
    public static let maxListCount = 100_000
    /// Longest title, in bytes of UTF-8.
    public static let maxTitleBytes = 4096
    public static let coordinateLimit = ContentBounds.coordinateLimit
    public static let maxRadius = ContentBounds.maxRadius
    public static let maxStrokeDuration = ContentBounds.maxStrokeDuration
    public static let maxMatrixCoefficient = ContentBounds.maxMatrixCoefficient

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
    ///
    /// `allowingDeferred`: a stroke whose points are deferred ([LOG-27]) passes, its points
    /// checked by the same bounds when they are decoded. Only operations replayed from a
    /// page's own log may hold one; anywhere else such a stroke is refused (it would be
    /// written without its points).
    public static func validate(_ op: Op, allowingDeferred: Bool = false) throws {
        if let v = violation(of: op, allowingDeferred: allowingDeferred) { throw LnoteError(.corrupt, v.description) }
    }

    /// The first rule `op` breaks, or nil: [LOG-2] (non-zero id), [LOG-3] (the context's own
    /// entry is `counter − 1`), [LOG-4] (the Lamport timestamp), [SHR-6] and [MERGE-12] (z
    /// keys and page positions).
    public static func violation(of op: Op, allowingDeferred: Bool = false) -> Violation? {
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
        if let problem = boundsProblem(op, allowingDeferred: allowingDeferred) { return refuse(.log23, problem) }
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

    /// [LOG-23] What puts a title out of bounds (too long, or a control character that
    /// would break a line or reach a terminal), or nil. Also checked on a title read from a
    /// document.json, which holds only what operations carried.
    public static func titleProblem(_ t: String) -> String? {
        PrintableText.problem(t, maxBytes: maxTitleBytes, what: "a title")
    }

    /// [LOG-23] What puts a canvas out of bounds, or nil.
    public static func canvasProblem(_ c: CanvasSize) -> String? {
        c.width > 0 && c.height > 0 && Int64(c.width) <= coordinateLimit && Int64(c.height) <= coordinateLimit
            ? nil : "a canvas of \(c.width) × \(c.height) tenths of a point"
    }

    /// [LOG-23] What makes `op`'s content out of bounds, or nil.
    static func boundsProblem(_ op: Op, allowingDeferred: Bool = false) -> String? {
        func clock(_ c: VectorClock, _ what: String) -> String? {
            c.entries.count <= maxClockEntries ? nil : "\(what) of \(c.entries.count) entries (at most \(maxClockEntries))"
        }
        // A context names at most 4096 replicas besides its author, whose own entry the
        // encoding leaves implicit ([LOG-3]) and memory holds (`counter − 1`).
        let named = op.context.entries.count - (op.context[op.id.replica] > 0 ? 1 : 0)
        if named > maxClockEntries { return "a context of \(named) entries (at most \(maxClockEntries))" }
        func list(_ n: Int, _ what: String) -> String? {
            n == 0 ? "no \(what)" : n > maxListCount ? "\(n) of \(what) (at most \(maxListCount))" : nil
        }
        switch op.body {
        case .add(let content, _): return ContentBounds.problem(content, allowingDeferred: allowingDeferred)
        case .erase(let ids): return list(ids.count, "element to erase")
        case .eraseRange(_, let ranges): return list(ranges.count, "range to erase")
        case .restore(let ids): return list(ids.count, "element to restore")
        case .restoreRange(_, let ranges): return list(ranges.count, "range to restore")
        case .move(let ts): return list(ts.count, "element to move") ?? ts.lazy.compactMap { ContentBounds.problem($0.transform) }.first
        case .reorder(let zs): return list(zs.count, "element to reorder")
        case .createDocument(let t), .setTitle(let t): return titleProblem(t)
        case .addPage(_, _, let c), .setCanvas(_, let c): return canvasProblem(c)
        case .deletePage(_, let seen): return clock(seen, "a page clock")
        case .restorePage, .movePage, .deleteDocument, .restoreDocument: return nil
        }
    }
}
