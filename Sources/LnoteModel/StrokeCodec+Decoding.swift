/// The block decoder of the point stream ([PTS-5] … [PTS-8]): a quick path that gives up on
/// any fault, and an exact one that names it.
extension StrokeCodec {
    /// Decodes points 2..<n from the width stream and packed values at `widths` and `packed`
    /// in `r`'s bytes (points 0 and 1 given): `decodeBlocksQuickly`, which gives up on any
    /// fault (rare: only damaged streams have one), else `decodeBlocksExactly`, which names
    /// the first fault in the order [PTS-8] gives.
    static func decodeBlocks(_ r: ByteReader, widths: Range<Int>, packed: Range<Int>, count n: Int,
                             first: StrokePoint, second: Channels, delta: Channels) throws -> [StrokePoint] {
        let quick = r.bytes.withUnsafeBytes { raw in
            decodeBlocksQuickly(raw, widths: widths, packed: packed, count: n, first: first, second: second)
        }
        if let quick { return quick }
        let points = try decodeBlocksExactly(r, widths: widths, packed: packed, count: n, first: first,
                                             second: second, delta: delta)
        // Only a layout other than the one the quick path needs gets here.
        assert(!pointLayoutIsPacked, "the quick decoder refused a valid stream")
        return points
    }

    /// The points of a valid stream, exactly as `decodeBlocksExactly` gives them, or nil
    /// when the stream has any fault.
    ///
    /// In two passes over the output: `unpackBlocks` writes the values (the zigzagged second
    /// differences), five 32-bit words per point, into the memory of the points to come (a
    /// point's 20 bytes hold its five values), then `integrate` turns each point's values
    /// into the point, in place, x to radius as one 16-byte word (`pointLayoutIsPacked`,
    /// which this path needs).
    static func decodeBlocksQuickly(_ raw: UnsafeRawBufferPointer, widths: Range<Int>, packed: Range<Int>,
                                    count n: Int, first: StrokePoint, second: Channels) -> [StrokePoint]? {
        guard pointLayoutIsPacked, let base = raw.baseAddress else { return nil }
        var valid = true
        let points = [StrokePoint](unsafeUninitializedCapacity: n) { out, initialized in
            let o = out.baseAddress!
            o[0] = first
            o[1] = point(second)
            valid = unpackBlocks(base, bufferEnd: raw.count, widths: widths, packed: packed,
                                 into: UnsafeMutableRawPointer(o + 2), points: n - 2)
                && integrate(o, count: n)
            // StrokePoint is a trivial type: a partial array is dropped without harm.
            initialized = valid ? n : 2
        }
        return valid ? points : nil
    }

    /// Pass 1: reads the codes and groups of every block and writes the values of the `m`
    /// points after points 0 and 1 at `slots` (x, y, pressure, radius, t as 32-bit words,
    /// 20 bytes a point); false on any fault but pressure, which `integrate` checks.
    ///
    /// A block whose widths are all 8 or less and whose bytes are followed by 8 more in the
    /// buffer is unpacked from one word load per group (`unpackNarrow`, or `unpackPartial`
    /// for a last block of fewer than 8 points); any other block (a jump, the end of the
    /// buffer, a fault) goes through `unpackCarefully`.
    static func unpackBlocks(_ base: UnsafeRawPointer, bufferEnd: Int, widths: Range<Int>, packed: Range<Int>,
                             into slots: UnsafeMutableRawPointer, points m: Int) -> Bool {
        let t = BlockTables.shared
        var codes = BitReader(base, range: widths)
        var at = packed.lowerBound
        let end = packed.upperBound
        var c0: UInt64 = 0, c1: UInt64 = 0, c2: UInt64 = 0, c3: UInt64 = 0, c4: UInt64 = 0
        var bad: UInt64 = 0
        var slot = slots
        var left = m
        while left > 0 {
            // [PTS-7] Five codes: at most 35 bits, which a refill provides unless the stream
            // ends first.
            codes.refill()
            var window = codes.window, used: UInt64 = 0
            @inline(__always) func next(_ previous: inout UInt64) {
                let bits = Int(truncatingIfNeeded: window & 127)
                let length = UInt64(t.lengthOfPrefix[bits])
                let code = (previous & t.keepOfPrefix[bits]) &+ t.addOfPrefix[bits]
                // Out of 0...15, or a 7-bit code within 1 of the previous one.
                bad |= (code &>> 4) | (length == 7 && code &- previous &+ 1 <= 2 ? 1 : 0)
                previous = code & 15
                window &>>= length
                used &+= length
            }
            next(&c0)
            next(&c1)
            next(&c2)
            next(&c3)
            next(&c4)
            guard bad == 0, used <= codes.availableBits else { return false }
            codes.consume(used)
            let w0 = Int(t.widthOfCode[Int(truncatingIfNeeded: c0)]), w1 = Int(t.widthOfCode[Int(truncatingIfNeeded: c1)])
            let w2 = Int(t.widthOfCode[Int(truncatingIfNeeded: c2)]), w3 = Int(t.widthOfCode[Int(truncatingIfNeeded: c3)])
            let w4 = Int(t.widthOfCode[Int(truncatingIfNeeded: c4)])
            let narrow = (w0 | w1 | w2 | w3 | w4) <= 8
            if left >= 8 {
                let size = w0 &+ w1 &+ w2 &+ w3 &+ w4
                if narrow && at &+ size <= end && at &+ size &+ 8 <= bufferEnd {
                    var p = base + at
                    unpackNarrow(&p, width: w0, code: c0, t, slot, &bad)
                    unpackNarrow(&p, width: w1, code: c1, t, slot + 4, &bad)
                    unpackNarrow(&p, width: w2, code: c2, t, slot + 8, &bad)
                    unpackNarrow(&p, width: w3, code: c3, t, slot + 12, &bad)
                    unpackNarrow(&p, width: w4, code: c4, t, slot + 16, &bad)
                    at &+= size
                    guard bad == 0 else { return false }
                    slot += 8 &* 20
                    left &-= 8
                    continue
                }
            } else {
                // The last block, `left` points.
                @inline(__always) func bytes(_ w: Int) -> Int { (left &* w &+ 7) &>> 3 }
                let size = bytes(w0) &+ bytes(w1) &+ bytes(w2) &+ bytes(w3) &+ bytes(w4)
                if narrow && at &+ size <= end && at &+ size &+ 8 <= bufferEnd {
                    var p = base + at
                    unpackPartial(&p, width: w0, count: left, code: c0, t, slot, &bad)
                    unpackPartial(&p, width: w1, count: left, code: c1, t, slot + 4, &bad)
                    unpackPartial(&p, width: w2, count: left, code: c2, t, slot + 8, &bad)
                    unpackPartial(&p, width: w3, count: left, code: c3, t, slot + 12, &bad)
                    unpackPartial(&p, width: w4, count: left, code: c4, t, slot + 16, &bad)
                    at &+= size
                    guard bad == 0 else { return false }
                    break
                }
            }
            // A jump, the end of the buffer, or a fault.
            let count = min(left, 8)
            guard unpackCarefully(base, at: &at, end: end, code: c0, count: count, t, slot),
                  unpackCarefully(base, at: &at, end: end, code: c1, count: count, t, slot + 4),
                  unpackCarefully(base, at: &at, end: end, code: c2, count: count, t, slot + 8),
                  unpackCarefully(base, at: &at, end: end, code: c3, count: count, t, slot + 12),
                  unpackCarefully(base, at: &at, end: end, code: c4, count: count, t, slot + 16) else {
                return false
            }
            slot += 8 &* 20
            left &-= 8
        }
        // [PTS-8] 7: both streams end exactly.
        let unread = (widths.upperBound &- widths.lowerBound) &* 8 &- codes.consumedBits
        guard unread < 8, at == end else { return false }
        codes.refill()
        return codes.window & ((1 &<< UInt64(unread)) &- 1) == 0
    }

    /// [PTS-6] The eight values of a full block's group of `width` ≤ 8 bits at `p` (one word
    /// load: 8 readable bytes there), stored as 32-bit words at `field` and every 20 bytes
    /// after; `bad` records a code wider than needed.
    @inline(__always)
    static func unpackNarrow(_ p: inout UnsafeRawPointer, width: Int, code: UInt64, _ t: BlockTables,
                             _ field: UnsafeMutableRawPointer, _ bad: inout UInt64) {
        var word = UInt64(littleEndian: p.loadUnaligned(as: UInt64.self))
        let w = UInt64(truncatingIfNeeded: width)
        let mask = (1 &<< w) &- 1
        var all: UInt64 = 0
        for j in 0..<8 {
            // One shift count for the whole group.
            let u = word & mask
            word &>>= w
            all |= u
            field.storeBytes(of: UInt32(truncatingIfNeeded: u), toByteOffset: j &* 20, as: UInt32.self)
        }
        // The group's bits are all in use (8 values × w bits = w bytes), so only the code's
        // width can be wrong: wider than needed when every value is below its floor.
        bad |= all < t.floorOfCode[Int(truncatingIfNeeded: code)] ? 1 : 0
        p += width
    }

    /// [PTS-6] [PTS-8] 4, 5: the group of `count` < 8 values of `width` ≤ 8 bits at `p`
    /// (one word load: 8 readable bytes there), stored as `unpackNarrow` does; `bad`
    /// records a code wider than needed or non-zero padding bits.
    @inline(__always)
    static func unpackPartial(_ p: inout UnsafeRawPointer, width: Int, count: Int, code: UInt64, _ t: BlockTables,
                              _ field: UnsafeMutableRawPointer, _ bad: inout UInt64) {
        let bytes = (count &* width &+ 7) &>> 3
        // count·width ≤ 56 bits: fewer than 8 bytes, whose bits are kept.
        var word = UInt64(littleEndian: p.loadUnaligned(as: UInt64.self)) & ((1 &<< UInt64(bytes &* 8)) &- 1)
        let w = UInt64(truncatingIfNeeded: width)
        let mask = (1 &<< w) &- 1
        var all: UInt64 = 0
        for j in 0..<count {
            let u = word & mask
            word &>>= w
            all |= u
            field.storeBytes(of: UInt32(truncatingIfNeeded: u), toByteOffset: j &* 20, as: UInt32.self)
        }
        // What is left of the word is the group's padding.
        bad |= (all < t.floorOfCode[Int(truncatingIfNeeded: code)] ? 1 : 0) | word
        p += bytes
    }

    /// [PTS-6] [PTS-8] 3 to 5: the group of `count` values with `code` at `at` (any width,
    /// any count, near the end of the buffer or not), stored as `unpackNarrow` does; false
    /// if it runs past `end`, its code is wider than needed or its unused bits are not
    /// zero. Not inlined: it runs once per stroke or per jump.
    @inline(never)
    static func unpackCarefully(_ base: UnsafeRawPointer, at: inout Int, end: Int, code: UInt64, count: Int,
                                _ t: BlockTables, _ field: UnsafeMutableRawPointer) -> Bool {
        let width = Int(t.widthOfCode[Int(truncatingIfNeeded: code)])
        let bytes = (count * width + 7) >> 3
        guard bytes <= end - at else { return false }
        // The group copied into zeros: 32 bytes at most, and room for a word load at the
        // last value's byte.
        var buffer: (UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0)
        return withUnsafeMutableBytes(of: &buffer) { local in
            local.baseAddress!.copyMemory(from: base + at, byteCount: bytes)
            let mask: UInt64 = (1 << UInt64(width)) - 1
            var used: UInt64 = 0, unused: UInt64 = 0
            for j in 0..<8 {
                let bit = j * width
                let word = UInt64(littleEndian: local.loadUnaligned(fromByteOffset: bit >> 3, as: UInt64.self))
                let u = (word >> UInt64(bit & 7)) & mask
                if j < count {
                    field.storeBytes(of: UInt32(truncatingIfNeeded: u), toByteOffset: j * 20, as: UInt32.self)
                    used |= u
                } else {
                    // Bits after the group's values: its padding, then the zeros of the copy.
                    unused |= u
                }
            }
            at += bytes
            return used >= t.floorOfCode[Int(truncatingIfNeeded: code)] && unused == 0
        }
    }

    /// Pass 2: turns the values stored in points 2..<n (as `unpackBlocks` left them) into
    /// points, from the two points before each: v_i = 2·v_{i−1} − v_{i−2} + unzigzag(u).
    /// False if a pressure exceeds 1000.
    ///
    /// x, y, pressure, radius are loaded and stored as four 32-bit words at once (the
    /// pressure's with its padding, zero for a valid pressure): the caller checked
    /// `pointLayoutIsPacked`.
    static func integrate(_ o: UnsafeMutablePointer<StrokePoint>, count n: Int) -> Bool {
        var vb = vector(o[0]), va = vector(o[1])
        var tb = o[0].t, ta = o[1].t
        // Pressure lane above 1000, as a signed comparison of values with the sign bit flipped.
        let flip = SIMD4<UInt32>(repeating: 0x8000_0000)
        let bound = SIMD4<Int32>(.max, .max, Int32(bitPattern: UInt32(Quantization.pressureMax) ^ 0x8000_0000), .max)
        var above = SIMDMask<SIMD4<Int32>>()
        for i in 2..<n {
            let raw = UnsafeMutableRawPointer(o + i)
            let u = raw.loadUnaligned(as: SIMD4<UInt32>.self)
            let ut = raw.loadUnaligned(fromByteOffset: 16, as: UInt32.self)
            let v = (va &+ va &- vb) &+ ((u &>> 1) ^ (SIMD4<UInt32>() &- (u & 1)))
            let t = (ta &+ ta &- tb) &+ unzigzag32(ut)
            above .|= SIMD4<Int32>(truncatingIfNeeded: v ^ flip) .> bound
            raw.storeBytes(of: v, as: SIMD4<UInt32>.self)
            raw.storeBytes(of: t, toByteOffset: 16, as: UInt32.self)
            (vb, va, tb, ta) = (va, v, ta, t)
        }
        return !any(above)
    }

    /// [PTS-5] … [PTS-8] Decodes points 2..<n value by value, checking everything in the
    /// order [PTS-8] gives, and throws the first fault with its absolute offset.
    static func decodeBlocksExactly(_ r: ByteReader, widths: Range<Int>, packed: Range<Int>, count n: Int,
                                    first: StrokePoint, second: Channels, delta: Channels) throws -> [StrokePoint] {
        func fault(_ message: String, at offset: Int) -> LnoteError {
            LnoteError(.corrupt, message, path: r.path, offset: r.base + offset)
        }
        return try r.bytes.withUnsafeBytes { raw -> [StrokePoint] in
            let base = raw.baseAddress!
            let t = BlockTables.shared
            var points = [first, point(second)]
            points.reserveCapacity(n)
            var codes = BitReader(base, range: widths)
            var at = packed.lowerBound
            var previous = [Int](repeating: 0, count: 5)
            var v = [second.0, second.1, second.2, second.3, second.4]
            var d = [delta.0, delta.1, delta.2, delta.3, delta.4]
            var values = [[UInt32]](repeating: [], count: 5)
            var i = 2
            while i < n {
                let count = min(n - i, blockPoints)
                // [PTS-7] [PTS-8] 1, 2: the block's five codes.
                var blockCodes = [Int]()
                for c in 0..<5 {
                    let codeAt = widths.lowerBound + codes.consumedBits >> 3
                    codes.refill()
                    let window = codes.window, available = codes.availableBits
                    let length: UInt64 = window & 1 == 0 ? 1 : window & 2 == 0 ? 2 : window & 4 == 0 ? 3 : 7
                    guard length <= available else {
                        throw fault("width stream ends inside a code", at: widths.upperBound)
                    }
                    let p = previous[c]
                    let code = switch length {
                    case 1: p
                    case 2: p + 1
                    case 3: p - 1
                    default: Int((window >> 3) & 15)
                    }
                    guard (0...15).contains(code) else {
                        throw fault("width code \(code) is out of range", at: codeAt)
                    }
                    guard length < 7 || abs(code - p) > 1 else {
                        throw fault("width code \(code) is written in 7 bits after \(p)", at: codeAt)
                    }
                    codes.consume(length)
                    previous[c] = code
                    blockCodes.append(code)
                }
                // [PTS-6] [PTS-8] 3 to 5: the five groups.
                var pressureAt = at
                for c in 0..<5 {
                    let code = blockCodes[c]
                    let width = BlockTables.width(ofCode: code)
                    let bytes = (count * width + 7) / 8
                    if c == 2 { pressureAt = at }
                    guard bytes <= packed.upperBound - at else {
                        throw fault("packed values end inside a group", at: packed.upperBound)
                    }
                    func bit(_ k: Int) -> UInt64 { UInt64(raw[at + k / 8] >> UInt8(k % 8)) & 1 }
                    var all: UInt64 = 0
                    values[c] = (0..<count).map { j in
                        var value: UInt64 = 0
                        for k in 0..<width { value |= bit(j * width + k) << UInt64(k) }
                        all |= value
                        return UInt32(value)
                    }
                    guard all >= t.floorOfCode[code] else {
                        throw fault("width code \(code) is wider than the group needs", at: at)
                    }
                    guard (count * width..<bytes * 8).allSatisfy({ bit($0) == 0 }) else {
                        throw fault("group padding bits are not zero", at: at + bytes - 1)
                    }
                    at += bytes
                }
                // [PTS-5] [PTS-8] 6: the block's points.
                for j in 0..<count {
                    for c in 0..<5 {
                        d[c] = d[c] &+ unzigzag32(values[c][j])
                        v[c] = v[c] &+ d[c]
                    }
                    guard v[2] <= UInt32(Quantization.pressureMax) else {
                        throw fault("pressure \(v[2]) exceeds \(Quantization.pressureMax) at point \(i + j)", at: pressureAt)
                    }
                    points.append(point((v[0], v[1], v[2], v[3], v[4])))
                }
                i += count
            }
            // [PTS-8] 7: both streams end exactly.
            let unread = (widths.count) * 8 - codes.consumedBits
            if unread >= 8 {
                throw fault("width stream has unused bytes", at: widths.upperBound - unread / 8)
            }
            if unread > 0, raw[widths.upperBound - 1] >> UInt8(8 - unread) != 0 {
                throw fault("width stream padding bits are not zero", at: widths.upperBound - 1)
            }
            guard at == packed.upperBound else {
                throw fault("packed values have unused bytes", at: at)
            }
            return points
        }
    }
}
