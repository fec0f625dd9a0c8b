@inline(__always) func zigzag32(_ v: UInt32) -> UInt32 {
    let s = Int32(bitPattern: v)
    return UInt32(bitPattern: (s &<< 1) ^ (s &>> 31))
}

@inline(__always) func unzigzag32(_ u: UInt32) -> UInt32 {
    (u &>> 1) ^ (0 &- (u & 1))
}

/// The parameter k of [PTS-7] for every count 0...7 (row) and sum 0...255 (column), then at
/// `riceMaskOffset` the masks 2^k − 1 in the same layout, then for the encoder at
/// `riceWidthOffset` the widths k + 1 and at `riceWideMaskOffset` the masks 2^(k+1) − 1: most
/// sums of handwriting are small, and a table look-up is cheaper than the computation. Built
/// once, never freed (8 KiB); immutable after its lazy, thread-safe initialization.
nonisolated(unsafe) let riceParameterTable: UnsafePointer<UInt8> = {
    let table = UnsafeMutablePointer<UInt8>.allocate(capacity: 4 * 8 * 256)
    for count in 0..<8 {
        for sum in 0..<256 {
            let k = count == 0 ? 0 : UInt8(RiceCount.computedParameter(sum: UInt64(sum), count: UInt64(count)))
            table[count * 256 + sum] = k
            table[riceMaskOffset + count * 256 + sum] = UInt8((1 << k) - 1)
            table[riceWidthOffset + count * 256 + sum] = k + 1
            table[riceWideMaskOffset + count * 256 + sum] = UInt8((1 << (k + 1)) - 1)
        }
    }
    return UnsafePointer(table)
}()

/// Where the masks start in `riceParameterTable`.
let riceMaskOffset = 8 * 256
/// Where the widths k + 1 start in `riceParameterTable`.
let riceWidthOffset = 2 * 8 * 256
/// Where the masks 2^(k+1) − 1 start in `riceParameterTable`.
let riceWideMaskOffset = 3 * 8 * 256

/// [PTS-7] The parameter for any `sum` and `count` 1...7.
@inline(__always)
func riceParameter(sum: UInt64, count: UInt64, _ table: UnsafePointer<UInt8>) -> UInt64 {
    if sum < 256 { return UInt64(table[Int(truncatingIfNeeded: count &* 256 &+ sum)]) }
    return RiceCount.computedParameter(sum: sum, count: count)
}

/// The five channels' sums of [PTS-7] (x, y, pressure, radius, t), for coders that keep the
/// shared count apart.
struct RiceSums {
    var s0 = StrokeCodec.initialSum, s1 = StrokeCodec.initialSum, s2 = StrokeCodec.initialSum
    var s3 = StrokeCodec.initialSum, s4 = StrokeCodec.initialSum

    /// [PTS-7] After coding a point's values with the shared `count`: every sum += u,
    /// halved when count + 1 reaches 8.
    @inline(__always)
    mutating func update(_ u0: UInt64, _ u1: UInt64, _ u2: UInt64, _ u3: UInt64, _ u4: UInt64, count: UInt64) {
        let halve: UInt64 = count &+ 1 == StrokeCodec.resetCount ? 1 : 0
        s0 = (s0 &+ u0) &>> halve
        s1 = (s1 &+ u1) &>> halve
        s2 = (s2 &+ u2) &>> halve
        s3 = (s3 &+ u3) &>> halve
        s4 = (s4 &+ u4) &>> halve
    }

    /// [PTS-7] Halves every sum (count + 1 reached 8).
    @inline(__always) mutating func halve() {
        s0 &>>= 1
        s1 &>>= 1
        s2 &>>= 1
        s3 &>>= 1
        s4 &>>= 1
    }
}

/// The `count` half of the adaptive Golomb-Rice state of [PTS-7], shared by the five
/// channels: every channel starts at count 1 and codes exactly one value per point, so
/// their counts are always equal (1, 2, …, 7, then 4, 5, 6, 7, 4, …). Its derived values are
/// computed once per point instead of once per value.
struct RiceCount {
    private let table: UnsafePointer<UInt8>
    /// 1...7 between points: it halves to 4 when it reaches `StrokeCodec.resetCount` (8).
    private(set) var count: UInt64
    /// The table row of `count`.
    private var row: UnsafePointer<UInt8>
    private var leadingZeros: Int
    /// 1 when this point's updates halve the sums (count + 1 reaches 8), else 0.
    private(set) var halve: UInt64

    init(count: UInt64 = 1) {
        table = riceParameterTable
        self.count = count
        row = table + Int(count) * 256
        leadingZeros = count.leadingZeroBitCount
        halve = (count &+ 1) / StrokeCodec.resetCount
    }

    /// [PTS-7] After every channel coded its value: count += 1, halved when it reaches 8.
    @inline(__always) mutating func advance() {
        count = (count &+ 1) &>> halve
        row = table + Int(truncatingIfNeeded: count) &* 256
        leadingZeros = count.leadingZeroBitCount
        // 1 exactly when count + 1 reaches resetCount, since count < resetCount (a constant:
        // the division is a shift).
        halve = (count &+ 1) / StrokeCodec.resetCount
    }

    /// [PTS-7] The smallest k in 0...31 with count·2^(k+1) ≥ sum: from the table for sums
    /// below 256, else computed as in `computedParameter` (sum > 2·count there).
    @inline(__always) func parameter(_ sum: UInt64) -> UInt64 {
        if sum < 256 { return UInt64(row[Int(truncatingIfNeeded: sum)]) }
        let j0 = UInt64(truncatingIfNeeded: leadingZeros &- sum.leadingZeroBitCount)
        let k = (count &<< j0) >= sum ? j0 &- 1 : j0
        return min(k, 31)
    }

    /// The smallest k in 0...31 with `count << (k + 1) >= sum`, for count ≥ 1, without a
    /// loop: if sum ≤ 2·count, k = 0. Otherwise j0 = lzcnt(count) − lzcnt(sum) ≥ 1 is the
    /// shift that gives count sum's bit length, and count << j0 either reaches sum (the
    /// smallest shift is j0) or falls short (count << (j0 + 1) has more bits than sum: the
    /// shift is j0 + 1); k is the shift minus 1, capped at 31.
    static func computedParameter(sum: UInt64, count: UInt64) -> UInt64 {
        if sum <= count &<< 1 { return 0 }
        let j0 = UInt64(truncatingIfNeeded: count.leadingZeroBitCount &- sum.leadingZeroBitCount)
        let k = (count &<< j0) >= sum ? j0 &- 1 : j0
        return min(k, 31)
    }
}

/// One channel's `sum` of the adaptive Golomb-Rice coder of [PTS-5] … [PTS-7].
struct RiceState {
    var sum: UInt64 = StrokeCodec.initialSum

    /// [PTS-7] After coding `u`: sum += u, halved when the shared count reaches 8.
    @inline(__always) mutating func update(_ u: UInt32, _ c: RiceCount) {
        sum = (sum &+ UInt64(u)) &>> c.halve
    }

    /// [PTS-6] [PTS-8] Reads one value. A fault names the bit where the value begins,
    /// worked out only when thrown from the bits just consumed.
    ///
    /// The window is refilled only when the value does not fit in the bits it counts (about
    /// once every twenty small values): a refill leaves at least 56 bits, the longest code,
    /// unless the stream has fewer left, so a value that still does not fit is cut off.
    @inline(__always) mutating func decode(_ c: RiceCount, from bits: inout BitReader) throws(BitStreamFault) -> UInt32 {
        let k = c.parameter(sum)
        let escape = UInt64(StrokeCodec.escapeLength)
        var window = bits.window
        var ones = UInt64((~window).trailingZeroBitCount)
        var used = ones < escape ? ones &+ 1 &+ k : 56
        if used > bits.availableBits {
            bits.refill()
            window = bits.window
            ones = UInt64((~window).trailingZeroBitCount)
            used = ones < escape ? ones &+ 1 &+ k : 56
            guard used <= bits.availableBits else { throw .endsInsideValue }
        }
        bits.consume(used)
        let u: UInt32
        if ones < escape {
            let low = (window &>> (ones &+ 1)) & ((1 &<< k) &- 1)
            // ones < 24 and k ≤ 31: the value has at most 55 bits; it must fit 32.
            let wide = (ones &<< k) | low
            guard wide &>> 32 == 0 else { throw .overflow(bit: bits.consumedBits &- Int(used)) }
            u = UInt32(truncatingIfNeeded: wide)
        } else {
            u = UInt32(truncatingIfNeeded: window &>> 24)
            guard UInt64(u) &>> k >= escape else { throw .needlessEscape(u, bit: bits.consumedBits &- 56) }
        }
        update(u, c)
        return u
    }
}
