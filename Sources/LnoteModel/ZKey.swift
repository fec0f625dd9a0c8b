/// A dense position key: orders elements in z (bottom to top) and pages in a document.
///
/// A key is a signed `layer` and a `fraction`, compared as (layer, fraction) with the
/// fraction compared byte by byte as a base-256 fraction (a fraction never ends in a
/// zero byte, so distinct fractions are distinct numbers). "On top of everything the
/// author saw" is simply `layer = Lamport timestamp of the operation`, which keeps the
/// keys of ordinary appends a few bytes long; "between" splits fractions.
/// Two elements may hold equal keys (concurrent operations): ties are broken by the
/// `OpRef` of the operation that set the key.
public struct ZKey: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var layer: Int64
    public var fraction: [UInt8]

    public init(layer: Int64, fraction: [UInt8] = []) {
        self.layer = layer
        self.fraction = fraction
    }

    /// True when the fraction does not end in a zero byte.
    public var isValid: Bool { fraction.last != 0 }

    public static func < (l: ZKey, r: ZKey) -> Bool {
        if l.layer != r.layer { return l.layer < r.layer }
        return l.fraction.lexicographicallyPrecedes(r.fraction)
    }

    public var description: String {
        fraction.isEmpty ? "\(layer)" : "\(layer).\(hexString(fraction))"
    }

    /// A key strictly above `lower` and strictly below `upper` (either may be absent:
    /// unbounded). `lower` must be below `upper`. `top` is the layer to use when there is
    /// no upper bound (an operation passes its Lamport timestamp, which exceeds every
    /// layer its author has seen); `bottom` likewise when there is no lower bound.
    public static func between(_ lower: ZKey?, _ upper: ZKey?, top: Int64, bottom: Int64) -> ZKey {
        switch (lower, upper) {
        case (nil, nil):
            return ZKey(layer: top)
        case (let lo?, nil):
            if top > lo.layer { return ZKey(layer: top) }
            return ZKey(layer: lo.layer, fraction: fractionAbove(lo.fraction))
        case (nil, let hi?):
            if bottom < hi.layer { return ZKey(layer: bottom) }
            // Same layer as hi, fraction below hi's: hi's fraction must be non-empty,
            // otherwise step down a layer.
            if hi.fraction.isEmpty {
                // (Int64.min, []) is the least key: none lies below it. As with equal keys,
                // fall back to `hi` itself (the tie is broken by OpRef) instead of trapping.
                guard hi.layer > .min else { return hi }
                return ZKey(layer: hi.layer - 1, fraction: [128])
            }
            return ZKey(layer: hi.layer, fraction: fractionBetween([], hi.fraction))
        case (let lo?, let hi?):
            if lo.layer < hi.layer {
                // Anything in lo's layer above lo's fraction is below hi.
                return ZKey(layer: lo.layer, fraction: fractionAbove(lo.fraction))
            }
            guard lo < hi else {
                // Equal keys (set concurrently, told apart by their OpRefs): no key lies
                // strictly between; the new key equals `lo`'s and its newer OpRef puts it above both.
                return lo
            }
            return ZKey(layer: lo.layer, fraction: fractionBetween(lo.fraction, hi.fraction))
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
