/// A dense position key: orders elements in z (bottom to top) and pages in a document.
///
/// A key is a signed `layer`, a `path` of steps, and a final `fraction`. What is ordered is
/// not the key alone but the key *of an item*, its **position**: the layer, then the steps
/// `path + [(fraction, item id)]`, where the item's id (the element's id, or the id of the
/// operation that added the page) is the last step's tag. Positions compare by layer, then
/// step by step, each step by its fraction (bytes compared lexicographically as a base-256
/// fraction: a fraction never ends in a zero byte) and then by its tag; a position that is
/// a prefix of another is below it. Distinct items never have equal positions, and between
/// any two positions there is room for a third ([MERGE-11], [MERGE-13]).
///
/// "On top of everything the author saw" is `layer = the operation's Lamport timestamp`
/// with an empty path and fraction, which keeps the keys of ordinary appends two bytes long;
/// "between" splits fractions, and when two neighbours share a fraction (concurrent adds
/// on top, told apart only by their tags) it goes one step deeper, under the lower one.
public struct ZKey: Hashable, Sendable, CustomStringConvertible {
    /// One step of a path: a fraction and the item whose position the step extends.
    public struct Step: Hashable, Sendable {
        public var fraction: [UInt8]
        public var tag: OpID
        public init(fraction: [UInt8], tag: OpID) {
            self.fraction = fraction
            self.tag = tag
        }
    }

    public var layer: Int64
    public var path: [Step]
    public var fraction: [UInt8]

    /// Most steps in a path ([SHR-6]).
    public static let maxDepth = 32
    /// Most bytes in one fraction ([SHR-6]).
    public static let maxFractionBytes = 4096

    public init(layer: Int64, path: [Step] = [], fraction: [UInt8] = []) {
        self.layer = layer
        self.path = path
        self.fraction = fraction
    }

    /// [SHR-6]: no fraction ends in a zero byte; every fraction after the first step of the
    /// position (path steps 2 and on, and the final fraction when the path is not empty) is
    /// not empty; at most `maxDepth` steps and `maxFractionBytes` bytes per fraction.
    public var isValid: Bool { validityProblem == nil }

    /// What makes the key invalid, or nil.
    public var validityProblem: String? {
        guard path.count <= ZKey.maxDepth else { return "z key path of \(path.count) steps (at most \(ZKey.maxDepth))" }
        // The path's fractions, then the final one: checked in place (this runs for every
        // element a snapshot or an operation carries; gathering the fractions into a new
        // array cost two allocations each time).
        for i in 0...path.count {
            if let problem = Self.fractionProblem(i < path.count ? path[i].fraction : fraction, step: i) { return problem }
        }
        return nil
    }

    /// What is wrong with the fraction of step `i` (0-based; the final fraction is step
    /// `path.count`), or nil.
    @inline(__always)
    private static func fractionProblem(_ f: [UInt8], step i: Int) -> String? {
        if f.count > maxFractionBytes { return "z key fraction of \(f.count) bytes (at most \(maxFractionBytes))" }
        if f.last == 0 { return "z key fraction ends in a zero byte" }
        if i > 0 && f.isEmpty { return "z key step \(i + 1) has an empty fraction" }
        return nil
    }

    /// Text form ([PKG-11]): the layer; each path step as `/<fraction hex>:<tag>`; the final
    /// fraction as `.<hex>` when not empty. `5`, `-3.80ff`, `7/:00000000000000a1.3.80`.
    public var description: String {
        var s = "\(layer)"
        for step in path { s += "/" + hexString(step.fraction) + ":" + step.tag.description }
        if !fraction.isEmpty { s += "." + hexString(fraction) }
        return s
    }

    /// Parses `description`'s form; nil for anything else, an invalid key included.
    public init?(parsing text: String) {
        var segments = text.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        let head = segments.removeFirst()
        var path: [Step] = []
        var final: Substring = ""
        if segments.isEmpty {
            let parts = head.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
            guard let layer = Int64(parts[0]) else { return nil }
            self.layer = layer
            if parts.count == 2 { guard !parts[1].isEmpty else { return nil }; final = parts[1] }
        } else {
            guard let layer = Int64(head) else { return nil }
            self.layer = layer
            for (i, seg) in segments.enumerated() {
                // `<hex>:<16 hex>.<counter>` and, on the last segment only, `.<hex>`.
                let halves = seg.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
                guard halves.count == 2, let f = hexBytes(halves[0]) else { return nil }
                let idParts = halves[1].split(separator: ".", omittingEmptySubsequences: false)
                guard idParts.count == 2 || (idParts.count == 3 && i == segments.count - 1),
                      let tag = OpID(parsing: idParts[0] + "." + idParts[1]) else { return nil }
                path.append(Step(fraction: f, tag: tag))
                if idParts.count == 3 { guard !idParts[2].isEmpty else { return nil }; final = idParts[2] }
            }
        }
        guard let f = hexBytes(final) else { return nil }
        self.path = path
        self.fraction = f
        guard isValid else { return nil }
    }

    // MARK: - Positions

    /// Step `i` of the position of item `tag` with this key.
    @inline(__always)
    func step(_ i: Int, tag: OpID) -> Step {
        i < path.count ? path[i] : Step(fraction: fraction, tag: tag)
    }

    /// True when the position of item `lt` with key `l` is below that of item `rt` with key `r`.
    public static func positionLess(_ l: ZKey, _ lt: OpID, _ r: ZKey, _ rt: OpID) -> Bool {
        if l.layer != r.layer { return l.layer < r.layer }
        if l.path.isEmpty && r.path.isEmpty {  // the usual case, without building steps
            if l.fraction != r.fraction { return l.fraction.lexicographicallyPrecedes(r.fraction) }
            return lt < rt
        }
        let n = l.path.count + 1, m = r.path.count + 1
        for i in 0..<min(n, m) {
            let a = l.step(i, tag: lt), b = r.step(i, tag: rt)
            if a.fraction != b.fraction { return a.fraction.lexicographicallyPrecedes(b.fraction) }
            if a.tag != b.tag { return a.tag < b.tag }
        }
        return n < m
    }

    /// A key that puts item `tag` strictly above the position `(lower, lowerTag)` and
    /// strictly below `(upper, upperTag)` ([MERGE-13]); either bound may be absent
    /// (unbounded). `top` is the layer to use when there is no upper bound (the operation's
    /// Lamport timestamp, which exceeds every layer its author has seen); `bottom` (minus
    /// that timestamp) likewise when there is no lower bound. The bounds must be in order.
    public static func between(_ lower: (key: ZKey, tag: OpID)?, _ upper: (key: ZKey, tag: OpID)?,
                               for tag: OpID, top: Int64, bottom: Int64) -> ZKey {
        switch (lower, upper) {
        case (nil, nil):
            return ZKey(layer: top)
        case (let lo?, nil):
            if top > lo.key.layer { return ZKey(layer: top) }
            return ZKey(layer: lo.key.layer, fraction: fractionAbove(lo.key.step(0, tag: lo.tag).fraction))
        case (nil, let hi?):
            if bottom < hi.key.layer { return ZKey(layer: bottom) }
            let first = hi.key.step(0, tag: hi.tag).fraction
            if !first.isEmpty { return ZKey(layer: hi.key.layer, fraction: fractionBetween([], first)) }
            // Only for keys no valid operation carries (|layer| > its Lamport timestamp).
            return ZKey(layer: hi.key.layer > .min ? hi.key.layer - 1 : .min)
        case (let lo?, let hi?):
            if lo.key.layer != hi.key.layer {
                // Anything in lo's layer above lo's first step is below hi (whose layer is greater).
                return ZKey(layer: lo.key.layer, fraction: fractionAbove(lo.key.step(0, tag: lo.tag).fraction))
            }
            let n = lo.key.path.count + 1, m = hi.key.path.count + 1
            var i = 0
            while i < n, i < m, lo.key.step(i, tag: lo.tag) == hi.key.step(i, tag: hi.tag) { i += 1 }
            let prefix = Array((0..<i).map { lo.key.step($0, tag: lo.tag) })
            if i == n {
                // lo is a prefix of hi: go below hi's next step (whose fraction is not empty
                // in a valid key), still under lo.
                let g = i < m ? hi.key.step(i, tag: hi.tag).fraction : []
                return ZKey(layer: lo.key.layer, path: prefix, fraction: g.isEmpty ? [] : fractionBetween([], g))
            }
            let a = lo.key.step(i, tag: lo.tag)
            let b = i < m ? hi.key.step(i, tag: hi.tag) : a
            if a.fraction != b.fraction && a.fraction.lexicographicallyPrecedes(b.fraction) {
                return ZKey(layer: lo.key.layer, path: prefix, fraction: fractionBetween(a.fraction, b.fraction))
            }
            // Same fraction, lo's tag below hi's: one step deeper, under lo's step i, above
            // whatever lo holds there.
            let below = i + 1 < n ? fractionAbove(lo.key.step(i + 1, tag: lo.tag).fraction) : [128]
            return ZKey(layer: lo.key.layer, path: prefix + [a], fraction: below)
        }
    }

    /// A fraction greater than `a` (no upper bound), as short as possible.
    public static func fractionAbove(_ a: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        for d in a {
            if d < 255 { out.append(d + 1); return out }
            out.append(255)
        }
        out.append(128)
        return out
    }

    /// A fraction strictly between `a` and `b` (requires a < b as fractions).
    public static func fractionBetween(_ a: [UInt8], _ b: [UInt8]) -> [UInt8] {
        precondition(a.lexicographicallyPrecedes(b), "fractionBetween needs a < b")
        var out: [UInt8] = []
        var i = 0
        while true {
            let da = i < a.count ? Int(a[i]) : 0
            let db = i < b.count ? Int(b[i]) : 0
            if da == db {
                out.append(UInt8(da))
                i += 1
                continue
            }
            if db - da > 1 {
                out.append(UInt8((da + db) / 2))
                return out
            }
            // db == da + 1: keep da and go above the rest of a, which stays below b.
            out.append(UInt8(da))
            i += 1
            let rest = i < a.count ? Array(a[i...]) : []
            return out + fractionAbove(rest)
        }
    }
}

/// Lowercase hex digits of `bytes`.
func hexBytes(_ s: some StringProtocol) -> [UInt8]? {
    let hex = Array(s.utf8)
    guard hex.count % 2 == 0 else { return nil }
    func digit(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        default: nil
        }
    }
    var out: [UInt8] = []
    out.reserveCapacity(hex.count / 2)
    var i = 0
    while i < hex.count {
        guard let h = digit(hex[i]), let l = digit(hex[i + 1]) else { return nil }
        out.append(h << 4 | l)
        i += 2
    }
    return out
}
