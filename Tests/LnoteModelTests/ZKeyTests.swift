import Testing
import LnoteModel

@Suite("ZKey")
struct ZKeyTests {
    static func check(_ k: ZKey, below hi: ZKey?, above lo: ZKey?, _ context: String) {
        #expect(k.isValid, "key ends in a zero byte: \(k) — \(context)")
        if let lo { #expect(lo < k, "\(k) not above \(lo) — \(context)") }
        if let hi { #expect(k < hi, "\(k) not below \(hi) — \(context)") }
    }

    /// `between` is strictly between its bounds and never ends in a zero byte, for random
    /// and awkward bounds (equal layers, fractions full of 0x00 and 0xFF, adjacent bytes).
    @Test func betweenIsStrictlyBetween() {
        for seed in testSeeds(0x2E7_0001, count: 4000) {
            var g = SplitMix64(seed: seed)
            func fraction() -> [UInt8] {
                var f = (0..<Int(g.below(5))).map { _ in [0, 1, 127, 128, 254, 255, UInt8(truncatingIfNeeded: g.next())][Int(g.below(7))] }
                while f.last == 0 { f.removeLast() }
                return f
            }
            let layerA = Int64(g.int(in: -3...3)), layerB = Int64(g.int(in: -3...3))
            var a = ZKey(layer: layerA, fraction: fraction()), b = ZKey(layer: layerB, fraction: fraction())
            if b < a { swap(&a, &b) }
            let top = Int64(g.int(in: -4...6)), bottom = Int64(g.int(in: -6...4))
            if a < b {
                Self.check(ZKey.between(a, b, top: top, bottom: bottom), below: b, above: a, "seed \(seed)")
            }
            Self.check(ZKey.between(a, nil, top: top, bottom: bottom), below: nil, above: a, "seed \(seed) above")
            Self.check(ZKey.between(nil, b, top: top, bottom: bottom), below: b, above: nil, "seed \(seed) below")
            Self.check(ZKey.between(nil, nil, top: top, bottom: bottom), below: nil, above: nil, "seed \(seed)")
        }
    }

    /// Thousands of insertions at random places keep a strictly increasing list, and
    /// repeated insertion at one spot (the worst case) grows keys only linearly.
    @Test func randomInsertionsKeepOrder() {
        for seed in testSeeds(0x2E7_0002, count: 6, soakFactor: 10) {
            var g = SplitMix64(seed: seed)
            var keys: [ZKey] = []
            var lamport: Int64 = 0
            for _ in 0..<2000 {
                lamport += Int64(g.below(2))
                let i = Int(g.below(UInt64(keys.count + 1)))
                let lo = i > 0 ? keys[i - 1] : nil
                let hi = i < keys.count ? keys[i] : nil
                let k = ZKey.between(lo, hi, top: lamport, bottom: -lamport)
                Self.check(k, below: hi, above: lo, "seed \(seed)")
                keys.insert(k, at: i)
            }
            #expect(zip(keys, keys.dropFirst()).allSatisfy { $0 < $1 }, "seed \(seed)")
        }
        // Always inserting just above the bottom key.
        var keys = [ZKey(layer: 1), ZKey(layer: 2)]
        for _ in 0..<1000 {
            let k = ZKey.between(keys[0], keys[1], top: 2, bottom: 0)
            Self.check(k, below: keys[1], above: keys[0], "dense")
            keys.insert(k, at: 1)
        }
        #expect(keys.map(\.fraction.count).max()! <= 1001)
    }

    @Test func ordering() {
        #expect(ZKey(layer: 1) < ZKey(layer: 1, fraction: [1]))
        #expect(ZKey(layer: 1, fraction: [255, 255]) < ZKey(layer: 2))
        #expect(ZKey(layer: -5, fraction: [9]) < ZKey(layer: 0))
        #expect(ZKey(layer: 1, fraction: [1, 0, 1]) < ZKey(layer: 1, fraction: [1, 1]))
        #expect(!ZKey(layer: 1, fraction: [1, 0]).isValid)
        // Equal keys: no key strictly between; `between` returns the lower one (ties are
        // broken by the OpRef of the operation that sets it).
        let k = ZKey(layer: 3, fraction: [7])
        #expect(ZKey.between(k, k, top: 9, bottom: 0) == k)
    }

    /// Extreme layers never trap.
    @Test func extremeLayers() {
        let lowest = ZKey(layer: .min)
        // Nothing lies below the least key: `between` falls back to it (as for equal keys).
        #expect(ZKey.between(nil, lowest, top: 0, bottom: .min) == lowest)
        let k = ZKey.between(nil, ZKey(layer: .min, fraction: [1]), top: 0, bottom: .min)
        #expect(k.isValid && k < ZKey(layer: .min, fraction: [1]))
        let highest = ZKey(layer: .max, fraction: [255, 255])
        let above = ZKey.between(highest, nil, top: .max, bottom: 0)
        #expect(highest < above)
    }
}
