import Testing
import LnoteModel

/// An item's position: its key with its id as the last step's tag ([MERGE-11]).
struct Position: CustomStringConvertible {
    var key: ZKey
    var tag: OpID
    static func < (l: Position, r: Position) -> Bool { ZKey.positionLess(l.key, l.tag, r.key, r.tag) }
    var bound: (key: ZKey, tag: OpID) { (key, tag) }
    var description: String { "\(key)#\(tag)" }
}

@Suite("ZKey")
struct ZKeyTests {
    static func tag(_ n: UInt64, _ r: UInt64 = 1) -> OpID { OpID(replica: ReplicaID(r), counter: n) }

    static func check(_ k: ZKey, tag: OpID, below hi: Position?, above lo: Position?, _ context: String) {
        #expect(k.isValid, "invalid key \(k): \(k.validityProblem ?? "") — \(context)")
        let p = Position(key: k, tag: tag)
        if let lo { #expect(lo < p, "\(p) not above \(lo) — \(context)") }
        if let hi { #expect(p < hi, "\(p) not below \(hi) — \(context)") }
    }

    /// A random valid key: awkward fractions (0x00, 0xFF, adjacent bytes), sometimes a path
    /// whose tags come from a small pool, so that equal fractions with different tags,
    /// prefixes and deep paths all occur.
    static func randomKey(_ g: inout SplitMix64) -> ZKey {
        func fraction(nonEmpty: Bool) -> [UInt8] {
            var f = (0..<Int(g.below(4))).map { _ in [0, 1, 127, 128, 254, 255, UInt8(truncatingIfNeeded: g.next())][Int(g.below(7))] }
            while f.last == 0 { f.removeLast() }
            if nonEmpty && f.isEmpty { f = [[1, 128, 255][Int(g.below(3))]] }
            return f
        }
        let depth = g.chance(0.6) ? 0 : Int(g.below(3)) + 1
        var path: [ZKey.Step] = []
        for i in 0..<depth { path.append(ZKey.Step(fraction: fraction(nonEmpty: i > 0), tag: tag(g.below(4) + 1))) }
        return ZKey(layer: Int64(g.int(in: -2...2)), path: path, fraction: fraction(nonEmpty: depth > 0))
    }

    /// [MERGE-13] `between` is strictly between its bounds, whatever they are: distinct
    /// positions with equal keys, equal fractions with different tags, one a prefix of the
    /// other, empty fractions; and never invalid.
    @Test("[MERGE-13] [SHR-6] between two distinct positions there is always a third")
    func betweenIsStrictlyBetween() {
        for seed in testSeeds(0x2E7_0001, count: 6000) {
            var g = SplitMix64(seed: seed)
            var a = Position(key: Self.randomKey(&g), tag: Self.tag(g.below(4) + 1))
            var b = g.chance(0.3) ? Position(key: a.key, tag: Self.tag(g.below(4) + 1)) : Position(key: Self.randomKey(&g), tag: Self.tag(g.below(4) + 1))
            if g.chance(0.2) {  // b just above a, one step deeper, as a tie-breaking insert makes it
                b = Position(key: ZKey(layer: a.key.layer, path: a.key.path + [ZKey.Step(fraction: a.key.fraction, tag: a.tag)],
                                       fraction: [UInt8(g.int(in: 1...255))]), tag: Self.tag(9))
            }
            if b < a { swap(&a, &b) }
            let top = Int64(g.int(in: -3...5)), bottom = Int64(g.int(in: -5...3))
            let me = Self.tag(100 + g.below(5), 7)
            let context = "seed \(seed): \(a) .. \(b)"
            if a < b {
                Self.check(ZKey.between(a.bound, b.bound, for: me, top: top, bottom: bottom), tag: me, below: b, above: a, context)
            }
            if top > a.key.layer {
                Self.check(ZKey.between(a.bound, nil, for: me, top: top, bottom: bottom), tag: me, below: nil, above: a, context)
            }
            if bottom < b.key.layer || !b.key.path.isEmpty || !b.key.fraction.isEmpty {
                Self.check(ZKey.between(nil, b.bound, for: me, top: top, bottom: bottom), tag: me, below: b, above: nil, context)
            }
        }
    }

    /// Thousands of insertions at random places, many of them concurrent (two replicas
    /// inserting at the same spot with the same key, told apart only by their ids), keep a
    /// strictly increasing list; each insert lands exactly where it was asked; paths stay
    /// shallow; repeated insertion at one spot grows keys only linearly.
    @Test("[MERGE-11] [MERGE-13] inserts land where asked, also between concurrent twins")
    func randomInsertionsKeepOrder() {
        for seed in testSeeds(0x2E7_0002, count: 6, soakFactor: 10) {
            var g = SplitMix64(seed: seed)
            var items: [Position] = []
            var next: UInt64 = 0
            var lamport: Int64 = 0
            for _ in 0..<2000 {
                lamport += 1
                let i = Int(g.below(UInt64(items.count + 1)))
                let lo = i > 0 ? items[i - 1] : nil
                let hi = i < items.count ? items[i] : nil
                next += 1
                let me = Self.tag(next, g.below(3) + 1)
                let k = ZKey.between(lo?.bound, hi?.bound, for: me, top: lamport, bottom: -lamport)
                Self.check(k, tag: me, below: hi, above: lo, "seed \(seed)")
                let item = Position(key: k, tag: me)
                // A concurrent twin: another replica made the same insert with the same key.
                if g.chance(0.2) {
                    next += 1
                    let twin = Position(key: k, tag: Self.tag(next, 9))
                    items.insert(contentsOf: twin < item ? [twin, item] : [item, twin], at: i)
                } else {
                    items.insert(item, at: i)
                }
                #expect(items.indices.dropFirst().allSatisfy { items[$0 - 1] < items[$0] }, "seed \(seed)")
            }
            #expect(items.map(\.key.path.count).max()! <= 8, "seed \(seed): paths grow deep")
        }
        // Always inserting just above the bottom item.
        var items = [Position(key: ZKey(layer: 1), tag: Self.tag(1)), Position(key: ZKey(layer: 2), tag: Self.tag(2))]
        for n in 0..<1000 {
            let me = Self.tag(UInt64(n) + 10)
            let k = ZKey.between(items[0].bound, items[1].bound, for: me, top: 2, bottom: 0)
            Self.check(k, tag: me, below: items[1], above: items[0], "dense")
            items.insert(Position(key: k, tag: me), at: 1)
        }
        #expect(items.map(\.key.fraction.count).max()! <= 1001)
    }

    /// The issue's case: two concurrent adds on top share a key; an add just below the upper
    /// one must land between them, and one just above the lower one too.
    @Test("[MERGE-13] an add below the upper of two tied keys lands between them")
    func betweenTiedTwins() {
        let lower = Position(key: ZKey(layer: 3), tag: Self.tag(1, 1))
        let upper = Position(key: ZKey(layer: 3), tag: Self.tag(1, 2))
        #expect(lower < upper)
        for me in [Self.tag(2, 1), Self.tag(2, 2), Self.tag(5, 3)] {
            let k = ZKey.between(lower.bound, upper.bound, for: me, top: 4, bottom: -4)
            Self.check(k, tag: me, below: upper, above: lower, "twins")
            #expect(k.path == [ZKey.Step(fraction: [], tag: lower.tag)] && k.fraction == [128])
        }
    }

    @Test("[SHR-6] positions compare by layer, then steps (fraction, then tag), a prefix first")
    func ordering() {
        let t = Self.tag(1), u = Self.tag(2)
        #expect(Position(key: ZKey(layer: 1), tag: t) < Position(key: ZKey(layer: 1, fraction: [1]), tag: t))
        #expect(Position(key: ZKey(layer: 1, fraction: [255, 255]), tag: u) < Position(key: ZKey(layer: 2), tag: t))
        #expect(Position(key: ZKey(layer: -5, fraction: [9]), tag: u) < Position(key: ZKey(layer: 0), tag: t))
        #expect(Position(key: ZKey(layer: 1, fraction: [1, 0, 1]), tag: u) < Position(key: ZKey(layer: 1, fraction: [1, 1]), tag: t))
        // Equal keys: the tag decides.
        #expect(Position(key: ZKey(layer: 1), tag: t) < Position(key: ZKey(layer: 1), tag: u))
        // Under a step: above the step's owner, below the next step of the same fraction.
        let deeper = Position(key: ZKey(layer: 1, path: [ZKey.Step(fraction: [], tag: t)], fraction: [1]), tag: Self.tag(9))
        #expect(Position(key: ZKey(layer: 1), tag: t) < deeper)
        #expect(deeper < Position(key: ZKey(layer: 1), tag: u))
        #expect(!ZKey(layer: 1, fraction: [1, 0]).isValid)
        #expect(!ZKey(layer: 1, path: [ZKey.Step(fraction: [], tag: t)], fraction: []).isValid)
        #expect(!ZKey(layer: 1, path: [ZKey.Step(fraction: [], tag: t), ZKey.Step(fraction: [], tag: u)], fraction: [1]).isValid)
        #expect(ZKey(layer: 1, path: [ZKey.Step(fraction: [], tag: t)], fraction: [1]).isValid)
        #expect(!ZKey(layer: 1, path: Array(repeating: ZKey.Step(fraction: [1], tag: t), count: ZKey.maxDepth + 1), fraction: [1]).isValid)
    }

    @Test("[PKG-11] text form round-trips and rejects anything else")
    func textForm() {
        for seed in testSeeds(0x2E7_0003, count: 2000) {
            var g = SplitMix64(seed: seed)
            let k = Self.randomKey(&g)
            #expect(ZKey(parsing: k.description) == k, "seed \(seed): \(k)")
        }
        #expect(ZKey(layer: -3, fraction: [0x80, 0xff]).description == "-3.80ff")
        #expect(ZKey(layer: 7, path: [ZKey.Step(fraction: [], tag: OpID(replica: ReplicaID(0xa1), counter: 3))],
                     fraction: [0x80]).description == "7/:00000000000000a1.3.80")
        for bad in ["", "x", "5.", "5.8", "5.80.", "5.00", "5/80", "5/:00000000000000a1.3", "5/:00000000000000a1.3.",
                    "5.80/:00000000000000a1.3.80", "5/zz:00000000000000a1.3.80", "5/:00000000000000a1.0.80",
                    "99999999999999999999"] {
            #expect(ZKey(parsing: bad) == nil, "\"\(bad)\" parsed")
        }
    }

    /// Extreme layers never trap.
    @Test func extremeLayers() {
        let t = Self.tag(1), me = Self.tag(2)
        let lowest = Position(key: ZKey(layer: .min), tag: t)
        _ = ZKey.between(nil, lowest.bound, for: me, top: 0, bottom: .min)
        let k = ZKey.between(nil, (ZKey(layer: .min, fraction: [1]), t), for: me, top: 0, bottom: .min)
        #expect(k.isValid && Position(key: k, tag: me) < Position(key: ZKey(layer: .min, fraction: [1]), tag: t))
        let highest = Position(key: ZKey(layer: .max, fraction: [255, 255]), tag: t)
        let above = ZKey.between(highest.bound, nil, for: me, top: .max, bottom: 0)
        #expect(highest < Position(key: above, tag: me))
    }
}
