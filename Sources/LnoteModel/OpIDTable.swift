/// A hash table from operation ids to small integers (an element's slot), or a set of ids.
///
/// Opening a page looks up or inserts every element id a few times (the snapshot's [SNAP-22]
/// uniqueness check, the replica's id → slot table, the replay's applied set), and Swift's
/// `Dictionary` pays for a whole SipHash round (`Hasher`) on each: about 70 ns an id, 8 % of
/// a pen page's open. An id is two 64-bit integers, so this table mixes them with
/// MurmurHash3's 64-bit finalizer instead (the seeded replica's mix, xored with the counter,
/// mixed again), keyed by a seed drawn once per process, and takes a slot from the *high*
/// bits of the result: every input bit reaches them, so ids chosen by a hostile peer cannot
/// be aimed at one bucket without the seed (the low bits of a product depend only on the low
/// bits of its factors: ids differing only in high counter bits would all share a slot).
///
/// Open addressing with linear probing over power-of-two arrays, at most 70 % full; a removal
/// shifts the entries after it back (no tombstones), so lookups stay short however many
/// removals a long-lived page sees.
package struct OpIDTable: Sendable {
    /// Per slot: replica, counter.
    private var keys: [UInt64]
    /// Per slot: the value, or `empty`.
    private var values: [Int32]
    private var mask: Int
    /// 64 − log2(slots): a hash's top bits name its home slot.
    private var shift: Int
    package private(set) var count: Int

    private static let empty: Int32 = -1
    private static let seed: UInt64 = {
        var g = SystemRandomNumberGenerator()
        return g.next()
    }()

    /// A table that holds `minimumCapacity` ids without growing.
    package init(minimumCapacity: Int = 0) {
        var size = 16
        while size * 7 < max(minimumCapacity, 1) * 10 { size *= 2 }
        keys = [UInt64](repeating: 0, count: 2 * size)
        values = [Int32](repeating: Self.empty, count: size)
        mask = size - 1
        shift = 64 - size.trailingZeroBitCount
        count = 0
    }

    @inline(__always)
    private static func mix(_ k: UInt64) -> UInt64 {
        var k = k
        k = (k ^ (k >> 33)) &* 0xFF51_AFD7_ED55_8CCD
        k = (k ^ (k >> 33)) &* 0xC4CE_B9FE_1A85_EC53
        return k ^ (k >> 33)
    }

    @inline(__always)
    private func home(_ id: OpID) -> Int {
        Int(truncatingIfNeeded: Self.mix(Self.mix(id.replica.rawValue ^ Self.seed) ^ id.counter) >> UInt64(shift))
    }

    /// The longest run of occupied slots (tests: the spread of ids).
    var longestRun: Int {
        var longest = 0, run = 0
        for v in values + values {  // twice: a run may wrap around the end
            run = v == Self.empty ? 0 : run + 1
            longest = max(longest, min(run, values.count))
        }
        return longest
    }

    /// The slot holding `id`, or the empty slot where it would go.
    @inline(__always)
    private func probe(_ id: OpID) -> (slot: Int, found: Bool) {
        var i = home(id)
        return values.withUnsafeBufferPointer { v in
            keys.withUnsafeBufferPointer { k in
                while true {
                    if v[i] == Self.empty { return (i, false) }
                    if k[2 * i] == id.replica.rawValue && k[2 * i + 1] == id.counter { return (i, true) }
                    i = (i + 1) & mask
                }
            }
        }
    }

    package subscript(id: OpID) -> Int32? {
        let (s, found) = probe(id)
        return found ? values[s] : nil
    }

    package func contains(_ id: OpID) -> Bool { probe(id).found }

    /// Sets the value of `id` (a value MUST be ≥ 0).
    package mutating func set(_ id: OpID, _ value: Int32) {
        precondition(value >= 0, "OpIDTable values are not negative")
        var (s, found) = probe(id)
        if !found, (count + 1) * 10 > values.count * 7 {
            grow()
            s = probe(id).slot
        }
        if !found {
            keys[2 * s] = id.replica.rawValue
            keys[2 * s + 1] = id.counter
            count += 1
        }
        values[s] = value
    }

    /// Adds `id` as a set member; false when it was there already.
    @discardableResult
    package mutating func insert(_ id: OpID) -> Bool {
        if contains(id) { return false }
        set(id, 0)
        return true
    }

    /// Removes `id` and returns its value; nil when it was not there.
    @discardableResult
    package mutating func removeValue(forKey id: OpID) -> Int32? {
        let (s, found) = probe(id)
        guard found else { return nil }
        let removed = values[s]
        // Backward shift: move each later entry of the run into the hole when its home does
        // not lie cyclically between the hole and it.
        var hole = s
        var j = s
        while true {
            j = (j + 1) & mask
            if values[j] == Self.empty { break }
            let h = home(OpID(replica: ReplicaID(keys[2 * j]), counter: keys[2 * j + 1]))
            let stays = hole <= j ? (hole < h && h <= j) : (hole < h || h <= j)
            if stays { continue }
            keys[2 * hole] = keys[2 * j]
            keys[2 * hole + 1] = keys[2 * j + 1]
            values[hole] = values[j]
            hole = j
        }
        values[hole] = Self.empty
        count -= 1
        return removed
    }

    private mutating func grow() {
        var bigger = OpIDTable(minimumCapacity: values.count)  // twice the slots at 70 %
        while bigger.values.count <= values.count { bigger = OpIDTable(minimumCapacity: bigger.values.count) }
        for i in values.indices where values[i] != Self.empty {
            bigger.set(OpID(replica: ReplicaID(keys[2 * i]), counter: keys[2 * i + 1]), values[i])
        }
        self = bigger
    }
}
