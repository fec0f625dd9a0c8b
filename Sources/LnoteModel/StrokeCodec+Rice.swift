@inline(__always) func zigzag32(_ v: UInt32) -> UInt32 {
    let s = Int32(bitPattern: v)
    return UInt32(bitPattern: (s &<< 1) ^ (s &>> 31))
}

@inline(__always) func unzigzag32(_ u: UInt32) -> UInt32 {
    (u &>> 1) ^ (0 &- (u & 1))
}

/// One channel's state of the adaptive Golomb-Rice coder of [PTS-5] … [PTS-7].
struct RiceState {
    var sum: UInt64 = StrokeCodec.initialSum
    /// 1...7 between values: it halves to 4 when it reaches `StrokeCodec.resetCount` (8).
    var count: UInt64 = 1

    /// [PTS-7] The smallest k in 0...31 with count·2^(k+1) ≥ sum.
    @inline(__always) var parameter: UInt64 { RiceState.parameter(sum: sum, count: count) }

    /// The smallest k in 0...31 with `count << (k + 1) >= sum`, for `count` in 1...7,
    /// without a loop or a branch. Let j0 = lzcnt(count) − lzcnt(sum), the shift that gives
    /// count sum's bit length. If j0 ≤ 0, sum < 2·count and k = 0. Otherwise count << j0
    /// either reaches sum (the smallest shift is j0) or falls short (count << (j0 + 1) has
    /// more bits than sum: the shift is j0 + 1); k is the shift minus 1, capped at 31.
    @inline(__always) static func parameter(sum: UInt64, count: UInt64) -> UInt64 {
        if sum <= count &<< 1 { return 0 }
        let j0 = UInt64(count.leadingZeroBitCount &- sum.leadingZeroBitCount)
        let k = (count &<< j0) >= sum ? j0 &- 1 : j0
        return min(k, 31)
    }

    /// [PTS-7] After coding `u`: sum += u, count += 1, both halved when count reaches 8.
    @inline(__always) mutating func update(_ u: UInt32) {
        let n = count &+ 1
        let halve = n &>> 3 // 1 exactly when n == resetCount (8), since n ≤ 8
        sum = (sum &+ UInt64(u)) &>> halve
        count = n &>> halve
    }

    /// [PTS-6] Writes `u`: q = u >> k one-bits, a zero-bit and the k low bits in one
    /// write of at most 55 bits, or the escape (24 one-bits then 32 raw bits) in one of 56.
    @inline(__always) mutating func encode(_ u: UInt32, into bits: inout BitWriter) {
        let k = parameter
        let v = UInt64(u)
        let q = v &>> k
        if q < UInt64(StrokeCodec.escapeLength) {
            let low = v & ((1 &<< k) &- 1)
            bits.write(((1 &<< q) &- 1) | (low &<< (q &+ 1)), count: q &+ 1 &+ k)
        } else {
            bits.write(0xFF_FFFF | (v &<< 24), count: 56)
        }
        update(u)
    }

    /// [PTS-6] [PTS-8] Reads one value. A fault names the bit where the value begins,
    /// worked out only when thrown from the bits just consumed.
    @inline(__always) mutating func decode(from bits: inout BitReader) throws(BitStreamFault) -> UInt32 {
        bits.refill()
        let k = parameter
        let window = bits.window
        let ones = UInt64((~window).trailingZeroBitCount)
        let u: UInt32
        if ones < UInt64(StrokeCodec.escapeLength) {
            let used = ones &+ 1 &+ k
            guard used <= bits.availableBits else { throw .endsInsideValue }
            let low = (window &>> (ones &+ 1)) & ((1 &<< k) &- 1)
            // ones < 24 and k ≤ 31: the value has at most 55 bits; it must fit 32.
            let wide = (ones &<< k) | low
            bits.consume(used)
            guard wide &>> 32 == 0 else { throw .overflow(bit: bits.consumedBits &- Int(used)) }
            u = UInt32(truncatingIfNeeded: wide)
        } else {
            guard bits.availableBits >= 56 else { throw .endsInsideValue }
            u = UInt32(truncatingIfNeeded: window &>> 24)
            bits.consume(56)
            guard UInt64(u) &>> k >= UInt64(StrokeCodec.escapeLength) else {
                throw .needlessEscape(u, bit: bits.consumedBits &- 56)
            }
        }
        update(u)
        return u
    }
}
