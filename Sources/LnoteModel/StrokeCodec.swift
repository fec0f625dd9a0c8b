/// Encodes a stroke's point stream compactly and losslessly.
///
/// The layout is specified byte by byte in `Protocol/page-snapshot.md` ("Point stream",
/// [PTS-1] … [PTS-11]). In short:
///
/// - a varint point count `n`;
/// - the first point in plain varints;
/// - for `n ≥ 2`, the first step (point 1 minus point 0) per channel in zigzag varints;
/// - for `n ≥ 3`, a varint byte length and a bit stream holding, for every later point and
///   each of the five channels (x, y, pressure, radius, t), the second difference of the
///   channel (delta-of-delta, modulo 2³²), zigzag-mapped and written as an adaptive
///   Golomb-Rice code whose parameter follows a running mean of the channel's recent values.
///
/// Smooth handwriting sampled at 240 Hz has second differences of a few tenths of a point,
/// so most values cost one to four bits: about 1.5 to 2 bytes per point in total.
///
/// The encoding is canonical: every point list has exactly one encoding, and the decoder
/// rejects every other byte string (a longer-than-needed varint, non-zero padding, a
/// needless escape, a stream longer than its values), so `encode(decode(b)) == b` whenever
/// `decode(b)` succeeds. Arithmetic is modulo 2³², so any `Int32`/`UInt32` values
/// round-trip, including jumps from `Int32.min` to `Int32.max` and decreasing times ([PTS-9]).
public enum StrokeCodec {
    /// Unary quotients at least this long are escaped: the value follows in 32 raw bits ([PTS-6]).
    static let escapeLength: UInt32 = 24
    /// The adaptive state halves when this many values have been counted ([PTS-7]).
    static let resetCount: UInt64 = 8
    /// Initial sum of the adaptive state (with a count of 1) ([PTS-7]).
    static let initialSum: UInt64 = 2

    typealias Channels = (UInt32, UInt32, UInt32, UInt32, UInt32)

    /// Appends the encoding of `points` to `w`. A deterministic function of the points.
    public static func encodePoints(_ points: [StrokePoint], into w: inout ByteWriter) {
        w.varint(UInt64(points.count))
        guard let first = points.first else { return }
        w.svarint(Int64(first.x))
        w.svarint(Int64(first.y))
        w.varint(UInt64(first.pressure))
        w.svarint(Int64(first.radius))
        w.varint(UInt64(first.t))
        guard points.count > 1 else { return }

        let second = channelValues(points[1])
        let firstValues = channelValues(first)
        let delta: Channels = (second.0 &- firstValues.0, second.1 &- firstValues.1, second.2 &- firstValues.2,
                               second.3 &- firstValues.3, second.4 &- firstValues.4)
        w.svarint(Int64(Int32(bitPattern: delta.0)))
        w.svarint(Int64(Int32(bitPattern: delta.1)))
        w.svarint(Int64(Int32(bitPattern: delta.2)))
        w.svarint(Int64(Int32(bitPattern: delta.3)))
        w.svarint(Int64(Int32(bitPattern: delta.4)))
        guard points.count > 2 else { return }

        points.withUnsafeBufferPointer { encodeStream($0, into: &w) }
    }

    /// [PTS-3] [PTS-5] Appends `L` and the bit stream of points 2 and later.
    @inline(never)
    static func encodeStream(_ points: UnsafeBufferPointer<StrokePoint>, into w: inout ByteWriter) {
        if pointLayoutIsPacked {
            encodeStream(points, packed: true, into: &w)
        } else {
            encodeStream(points, packed: false, into: &w)
        }
    }

    /// `encodeStream`, reading x to radius as one 16-byte word (`packed`, see
    /// `SecondDifferences.next`) or field by field. The bit writer is a local, not an
    /// argument, so that its state can stay in registers.
    ///
    /// The shared count of [PTS-7] runs 1, 2, …, 7, then 4, 5, 6, 7 over and over: points
    /// are coded four at a time with the counts 4 to 7 as constants (the table row and the
    /// halving are then known at compile time), the first points and the last ones one at
    /// a time.
    @inline(__always)
    static func encodeStream(_ points: UnsafeBufferPointer<StrokePoint>, packed: Bool, into w: inout ByteWriter) {
        let n = points.count
        let p = points.baseAddress!
        let table = riceParameterTable
        // About 1.5 bytes a point, and room for the reserve of a group of four points.
        var bits = BitWriter(capacity: n * 2 + 160)
        var sums = RiceSums()
        var diffs = SecondDifferences(p[0], p[1])
        var count: UInt64 = 1
        var i = 2
        while i < n {
            if count == 4 && n &- i >= 4 {
                repeat {
                    // Four points: 4 × 5 flushes of at most 7 bytes, then 8 bytes stored.
                    bits.reserve(148)
                    encodePoint(diffs.next(p + i, packed: packed), count: 4, table, &sums, &bits)
                    encodePoint(diffs.next(p + (i &+ 1), packed: packed), count: 5, table, &sums, &bits)
                    encodePoint(diffs.next(p + (i &+ 2), packed: packed), count: 6, table, &sums, &bits)
                    encodePoint(diffs.next(p + (i &+ 3), packed: packed), count: 7, table, &sums, &bits)
                    i &+= 4
                } while n &- i >= 4
                continue
            }
            // Five flushes of at most 7 bytes, then 8 bytes stored.
            bits.reserve(36)
            encodePoint(diffs.next(p + i, packed: packed), count: count, table, &sums, &bits)
            count = count == 7 ? 4 : count &+ 1
            i &+= 1
        }
        w.varint(UInt64(bits.byteCount))
        bits.finish { w.append($0) }
    }

    /// [PTS-5] The zigzagged second differences of successive points, from the two points
    /// before each kept in registers (one load of a point per point instead of three).
    struct SecondDifferences {
        /// x, y, pressure, radius of the last point, and their last step (d_{i−1}).
        var last: SIMD4<UInt32>, step: SIMD4<UInt32>
        var lastT: UInt32, stepT: UInt32
        /// `SecondDifferences.pressureMask`, kept in a register.
        let mask = SecondDifferences.pressureMask()

        /// All ones but the high 16 bits of the pressure lane. Not inlined, so that the
        /// compiler applies it with one AND rather than blending in a separate 16-bit load.
        @inline(never) static func pressureMask() -> SIMD4<UInt32> { SIMD4(.max, .max, 0xFFFF, .max) }

        /// Ready for point 2, from points 0 and 1.
        @inline(__always) init(_ p0: StrokePoint, _ p1: StrokePoint) {
            last = StrokeCodec.vector(p1)
            step = last &- StrokeCodec.vector(p0)
            lastT = p1.t
            stepT = p1.t &- p0.t
        }

        /// The values of [PTS-5] of the point at `p` (x, y, pressure, radius; t), the next
        /// point after the last one seen.
        ///
        /// `packed` (`pointLayoutIsPacked`): x to radius are loaded as one 16-byte word whose
        /// third lane holds the pressure in its low 16 bits and the 2 padding bytes (of any
        /// value) above: the mask clears them, giving `vector(p.pointee)`. The differences,
        /// modulo 2³² per lane, and the zigzag are the scalar ones lane by lane.
        @inline(__always) mutating func next(_ p: UnsafePointer<StrokePoint>, packed: Bool)
            -> (SIMD4<UInt32>, UInt32) {
            let v: SIMD4<UInt32>
            if packed {
                v = UnsafeRawPointer(p).loadUnaligned(as: SIMD4<UInt32>.self) & mask
            } else {
                v = StrokeCodec.vector(p.pointee)
            }
            let t = p.pointee.t
            let d = v &- last, dt = t &- lastT
            let dd = SIMD4<Int32>(truncatingIfNeeded: d &- step)
            // zigzag32 lane by lane: (s << 1) ^ (s >> 31), the right shift arithmetic.
            let u = SIMD4<UInt32>(truncatingIfNeeded: (dd &<< 1) ^ (dd &>> 31))
            let ut = zigzag32(dt &- stepT)
            (last, step, lastT, stepT) = (v, d, t, dt)
            return (u, ut)
        }
    }

    /// [PTS-5] [PTS-6] Codes a point's values `u` (x, y, pressure, radius; t) with the
    /// shared `count` (1...7). Room for 5 flushes (36 bytes) MUST have been reserved.
    ///
    /// The common case, every sum below 256 (k from the table), every quotient below 16 (no
    /// escape) and the five codes fitting in the accumulator after its pending bits, gathers
    /// the five codes into a copy of the accumulator and stores it with one flush; anything
    /// else codes each value on its own, flushing after each. The codes are gathered before
    /// the check, value by value, so that few values are alive at once; a failed check
    /// takes back their sums and drops the copy.
    @inline(__always)
    static func encodePoint(_ values: (SIMD4<UInt32>, UInt32), count: UInt64, _ table: UnsafePointer<UInt8>,
                            _ s: inout RiceSums, _ bits: inout BitWriter) {
        let u0 = UInt64(values.0[0]), u1 = UInt64(values.0[1]), u2 = UInt64(values.0[2])
        let u3 = UInt64(values.0[3]), u4 = UInt64(values.1)
        if (s.s0 | s.s1 | s.s2 | s.s3 | s.s4) < 256 {
            // 2u + 1 for each value, four at once (u < 2³², so 2u + 1 < 2³³ is exact as UInt64
            // only if computed wide: the lanes are widened first).
            let wide = SIMD4<UInt64>(truncatingIfNeeded: values.0) &<< 1 | 1
            let row = table + Int(truncatingIfNeeded: count) &* 256
            var g = CodeGatherer(acc: bits.cursor.acc, filled: bits.cursor.filled)
            g.add(wide[0], &s.s0, u0, row)
            g.add(wide[1], &s.s1, u1, row)
            g.add(wide[2], &s.s2, u2, row)
            g.add(wide[3], &s.s3, u3, row)
            g.add(u4 &<< 1 | 1, &s.s4, u4, row)
            // Quotients below 16 and every bit inside the accumulator (end ≤ 63, so that
            // the flush keeps end & 7 bits): one test. With end ≤ 63, the bits are below bit
            // 63, so testing it changes nothing; but it needs the bits, which are then
            // gathered value by value before the test rather than sunk after it, where the
            // values would all be alive at once.
            let acc = g.codes &- g.terminators
            if (g.quotients &>> 4) | (g.end &>> 6) | (acc &>> 63) == 0 {
                bits.cursor.acc = acc
                bits.cursor.filled = g.end
                bits.flush()
                if count &+ 1 == resetCount { s.halve() }
                return
            }
            s.s0 &-= u0
            s.s1 &-= u1
            s.s2 &-= u2
            s.s3 &-= u3
            s.s4 &-= u4
        }
        (s, bits.cursor) = encodePointSlowly(u0, u1, u2, u3, u4, count: count, table, s, bits.cursor, bits.buffer)
    }

    /// The codes of one point's values gathered into the bit writer's accumulator, as
    /// `encodePoint` builds them.
    ///
    /// The code of u with parameter k, q = u >> k, is ((((u mod 2^k) << 1) | 1) << q) − 1
    /// ([PTS-6]: q one-bits, a zero, the k low bits). With w = 2u + 1 it is
    /// ((w mod 2^(k+1)) << q) − 1, and w >> (k + 1) = q: the table gives k + 1 and
    /// 2^(k+1) − 1, which saves the shift and the OR of the terminator. Placed at bit `end`
    /// (before the value), the code is (w mod 2^(k+1)) << (end + q) minus 1 << end: the
    /// codes are summed in `codes` and the 1 << end in `terminators`, subtracted once at the
    /// end (the codes do not overlap, so their sum is their OR, and the total is below 2⁶⁴
    /// whenever the final `end` is at most 63). Shifts by 64 or more wrap, giving garbage,
    /// but then `end` exceeds 63 and `encodePoint` drops the result.
    struct CodeGatherer {
        var codes: UInt64, terminators: UInt64 = 0, end: UInt64, quotients: UInt64 = 0

        /// Starts after the `filled` pending bits of `acc`.
        @inline(__always) init(acc: UInt64, filled: UInt64) {
            codes = acc
            end = filled
        }

        /// Gathers the code of u with `sum` < 256 from `w` = 2u + 1, the width and its mask
        /// from the table row of the shared count (garbage if a quotient reaches 16).
        @inline(__always) mutating func add(_ w: UInt64, _ sum: inout UInt64, _ u: UInt64,
                                            _ row: UnsafePointer<UInt8>) {
            let width = UInt64(row[riceWidthOffset &+ Int(truncatingIfNeeded: sum)])
            let mask = UInt64(row[riceWideMaskOffset &+ Int(truncatingIfNeeded: sum)])
            let q = w &>> width
            terminators |= 1 &<< end
            end &+= q
            codes &+= (w & mask) &<< end
            end &+= width
            quotients |= q
            sum &+= u
        }
    }

    /// The rare case of `encodePoint`: each value coded and flushed on its own. On values,
    /// not `inout`, so that the caller's state can stay in registers.
    @inline(never)
    static func encodePointSlowly(_ u0: UInt64, _ u1: UInt64, _ u2: UInt64, _ u3: UInt64, _ u4: UInt64,
                                  count: UInt64, _ table: UnsafePointer<UInt8>, _ sums: RiceSums,
                                  _ cursor: BitCursor, _ buffer: UnsafeMutableRawPointer) -> (RiceSums, BitCursor) {
        var s = sums, bits = cursor
        encodeValue(u0, sum: s.s0, count: count, table, &bits, buffer)
        encodeValue(u1, sum: s.s1, count: count, table, &bits, buffer)
        encodeValue(u2, sum: s.s2, count: count, table, &bits, buffer)
        encodeValue(u3, sum: s.s3, count: count, table, &bits, buffer)
        encodeValue(u4, sum: s.s4, count: count, table, &bits, buffer)
        s.update(u0, u1, u2, u3, u4, count: count)
        return (s, bits)
    }

    /// [PTS-6] Writes `u` with the parameter of `sum` and `count`: q = u >> k one-bits, a
    /// zero-bit and the k low bits (at most 55 bits), or the escape (24 one-bits then 32 raw
    /// bits), then flushes.
    @inline(__always)
    static func encodeValue(_ u: UInt64, sum: UInt64, count: UInt64, _ table: UnsafePointer<UInt8>,
                            _ bits: inout BitCursor, _ buffer: UnsafeMutableRawPointer) {
        let k = riceParameter(sum: sum, count: count, table)
        let q = u &>> k
        if q < UInt64(escapeLength) {
            let low = u & ((1 &<< k) &- 1)
            bits.append((((low &<< 1) | 1) &<< q) &- 1, count: q &+ 1 &+ k)
        } else {
            bits.append(0xFF_FFFF | (u &<< 24), count: 56)
        }
        bits.flush(to: buffer)
    }

    /// The encoding of `points` alone.
    public static func encodedPoints(_ points: [StrokePoint]) -> [UInt8] {
        var w = ByteWriter(capacity: 16 + points.count * 2)
        encodePoints(points, into: &w)
        return w.bytes
    }

    /// Reads a point stream written by `encodePoints`.
    ///
    /// Never allocates more than the remaining bytes can justify.
    /// - Throws: `LnoteError` with the absolute offset: `truncated` when the bytes end
    ///   inside the stream (or the count cannot fit in what remains), `corrupt` for anything
    ///   that is not the canonical encoding of a valid point list.
    public static func decodePoints(_ r: inout ByteReader) throws -> [StrokePoint] {
        guard let h = quickHeader(r) else { return try decodePointsChecked(&r) }
        // Neither can throw: `quickHeader` saw the bytes.
        _ = try r.skip(h.headerBytes, "point stream header")
        let range = try r.skip(h.length, "point bit stream")
        return try decodeStream(r, range, count: h.n, first: h.first, second: h.second, delta: h.delta)
    }

    /// The header of a stream of 3 points or more read straight from the bytes, every value
    /// as `decodePointsChecked` reads it; nil when anything is unusual (fewer than 3 points,
    /// a varint of more than 5 bytes or not in its shortest form, a value out of range, too
    /// few bytes), for `decodePointsChecked` to read it again and name the fault.
    @inline(__always)
    static func quickHeader(_ r: ByteReader)
        -> (n: Int, first: StrokePoint, second: Channels, delta: Channels, headerBytes: Int, length: Int)? {
        r.bytes.withUnsafeBufferPointer { bytes in
            let start = r.position, end = r.end
            var i = start
            /// A varint of at most 5 bytes in its shortest form (a last byte that is not 0).
            @inline(__always) func varint() -> UInt64? {
                var value: UInt64 = 0
                var shift: UInt64 = 0
                while i < end && shift < 35 {
                    let b = bytes[i]
                    i &+= 1
                    value |= UInt64(b & 0x7F) &<< shift
                    if b < 0x80 { return b != 0 || shift == 0 ? value : nil }
                    shift &+= 7
                }
                return nil
            }
            @inline(__always) func int32() -> UInt32? {
                guard let v = varint(), let s = Int32(exactly: unzigzag(v)) else { return nil }
                return UInt32(bitPattern: s)
            }
            guard let count = varint(), count >= 3, count <= UInt64(Stroke.maxPoints) else { return nil }
            let n = Int(count)
            // [PTS-2]
            guard (n - 2) * 5 <= max(0, end - i - 11) * 8 else { return nil }
            guard let x0 = int32(), let y0 = int32(), let p0 = varint(), p0 <= UInt64(Quantization.pressureMax),
                  let r0 = int32(), let t0 = varint(), let t = UInt32(exactly: t0) else { return nil }
            let first = StrokePoint(x: Int32(bitPattern: x0), y: Int32(bitPattern: y0), pressure: UInt16(p0),
                                    radius: Int32(bitPattern: r0), t: t)
            guard let d0 = int32(), let d1 = int32(), let d2 = int32(), let d3 = int32(), let d4 = int32() else { return nil }
            let v0 = channelValues(first)
            let v1: Channels = (v0.0 &+ d0, v0.1 &+ d1, v0.2 &+ d2, v0.3 &+ d3, v0.4 &+ d4)
            guard v1.2 <= UInt32(Quantization.pressureMax) else { return nil }
            // [PTS-3]
            guard let lengthValue = varint(), lengthValue <= UInt64(end - i), (n - 2) * 5 <= Int(lengthValue) * 8 else {
                return nil
            }
            return (n, first, v1, (d0, d1, d2, d3, d4), i - start, Int(lengthValue))
        }
    }

    /// Decodes the bit stream at `range` of `r`'s bytes (points 0 and 1 given), with the
    /// absolute offset of a fault.
    static func decodeStream(_ r: ByteReader, _ range: Range<Int>, count n: Int, first: StrokePoint,
                             second: Channels, delta: Channels) throws -> [StrokePoint] {
        let result = r.bytes.withUnsafeBytes { raw in
            // `length` ≥ 1 here ((n − 2)·5 ≤ 8·length with n ≥ 3), so the bytes are not empty.
            let bits = BitReader(raw.baseAddress!, range: range)
            return Result { () throws(BitStreamFault) in
                try decodeStream(bits, count: n, first: first, second: second, delta: delta)
            }
        }
        switch result {
        case let .success(points): return points
        case let .failure(fault): throw streamError(fault, range: range, base: r.base, path: r.path)
        }
    }

    /// `decodePoints` with every check of the header: the path of any stream whose header
    /// `quickHeader` does not take, and the one that names a fault.
    static func decodePointsChecked(_ r: inout ByteReader) throws -> [StrokePoint] {
        let countAt = r.offset
        let count = try minimalVarint(&r, "point count")
        guard let n = Int(exactly: count), n <= Stroke.maxPoints else {
            throw r.error(.corrupt, "point count \(count) exceeds \(Stroke.maxPoints)", at: countAt)
        }
        // [PTS-2] The first point and the first step take at least 5 bytes each, the
        // stream length 1, and each later point at least 5 bits: a count the remaining
        // bytes cannot hold is cut off.
        guard n <= 2 || (n - 2) * 5 <= max(0, r.remaining - 11) * 8 else {
            throw r.error(.truncated, "\(n) points cannot fit in the \(r.remaining) bytes left", at: countAt)
        }
        guard n > 0 else { return [] }
        let x0 = try minimalInt32(&r, "first x")
        let y0 = try minimalInt32(&r, "first y")
        let pAt = r.offset
        let p0 = try minimalVarint(&r, "first pressure")
        guard p0 <= UInt64(Quantization.pressureMax) else {
            throw r.error(.corrupt, "pressure \(p0) exceeds \(Quantization.pressureMax)", at: pAt)
        }
        let r0 = try minimalInt32(&r, "first radius")
        let tAt = r.offset
        let t0v = try minimalVarint(&r, "first t")
        guard let t0 = UInt32(exactly: t0v) else { throw r.error(.corrupt, "t \(t0v) does not fit 32 bits", at: tAt) }
        let first = StrokePoint(x: x0, y: y0, pressure: UInt16(p0), radius: r0, t: t0)
        guard n > 1 else { return [first] }

        let stepAt = r.offset
        let delta: Channels = (UInt32(bitPattern: try minimalInt32(&r, "first step x")),
                               UInt32(bitPattern: try minimalInt32(&r, "first step y")),
                               UInt32(bitPattern: try minimalInt32(&r, "first step pressure")),
                               UInt32(bitPattern: try minimalInt32(&r, "first step radius")),
                               UInt32(bitPattern: try minimalInt32(&r, "first step t")))
        let v0 = channelValues(first)
        let v1: Channels = (v0.0 &+ delta.0, v0.1 &+ delta.1, v0.2 &+ delta.2, v0.3 &+ delta.3, v0.4 &+ delta.4)
        try checkPressure(v1, index: 1, at: stepAt, path: r.path)
        guard n > 2 else { return [first, point(v1)] }

        let lengthAt = r.offset
        let lengthValue = try minimalVarint(&r, "point bit stream length")
        guard let length = Int(exactly: lengthValue), length <= r.remaining else {
            throw r.error(.truncated, "point bit stream of \(lengthValue) bytes, \(r.remaining) left", at: lengthAt)
        }
        // [PTS-3] Five values of at least one bit per point: n is now bounded by the bytes
        // present, so allocating n points is justified.
        guard (n - 2) * 5 <= length * 8 else {
            throw r.error(.corrupt, "bit stream of \(length) bytes cannot hold \(n - 2) points", at: lengthAt)
        }
        let range = try r.skip(length, "point bit stream")
        return try decodeStream(r, range, count: n, first: first, second: v1, delta: delta)
    }

    /// [PTS-5] [PTS-8] Decodes points 2..<n from `reader` (points 0 and 1 given), then
    /// checks the stream's end: `decodeStreamQuickly`, which gives up on any fault (rare:
    /// only damaged streams have one), else `decodeStreamExactly`, which names the fault.
    static func decodeStream(_ reader: BitReader, count n: Int, first: StrokePoint, second: Channels,
                             delta firstStep: Channels) throws(BitStreamFault) -> [StrokePoint] {
        if let points = decodeStreamQuickly(reader, count: n, first: first, second: second) { return points }
        return try decodeStreamExactly(reader, count: n, first: first, second: second, delta: firstStep)
    }

    /// The points of a valid stream, exactly as `decodeStreamExactly` gives them, or nil
    /// when the stream has any fault (pressure, overflow, needless escape, end).
    ///
    /// In two passes over the output: `decodeValues` reads the values (the zigzagged second
    /// differences), five 32-bit words per point, into the memory of the points to come
    /// (a point's 20 bytes hold its five values), then `integrate` turns each point's
    /// values into the point, in place.
    static func decodeStreamQuickly(_ reader: BitReader, count n: Int, first: StrokePoint,
                                    second: Channels) -> [StrokePoint]? {
        guard MemoryLayout<StrokePoint>.stride == 5 * MemoryLayout<UInt32>.stride else { return nil }
        var valid = true
        let points = [StrokePoint](unsafeUninitializedCapacity: n) { out, initialized in
            let o = out.baseAddress!
            o[0] = first
            o[1] = point(second)
            let values = UnsafeMutableRawPointer(o + 2).bindMemory(to: UInt32.self, capacity: 5 * (n - 2))
            valid = decodeValues(values, points: n - 2, reader)
            if valid {
                // The values' memory is the points' again.
                UnsafeMutableRawPointer(values).bindMemory(to: StrokePoint.self, capacity: n - 2)
                valid = integrate(o, count: n)
            }
            // StrokePoint is a trivial type: a partial array is dropped without harm.
            initialized = valid ? n : 2
        }
        return valid ? points : nil
    }

    /// Pass 1: reads the `m` points' values into `values` (x, y, pressure, radius, t for
    /// each point) and checks the stream's end; false on any fault but pressure.
    ///
    /// Points go through `decodeValuesQuickly` (four at a time with the counts 4 to 7 as
    /// constants when the count allows, as in `encodeStream`); where it cannot decode one,
    /// `decodeRunExactly` decodes it and the next ones until the quick path can take over.
    static func decodeValues(_ values: UnsafeMutablePointer<UInt32>, points m: Int, _ reader: BitReader) -> Bool {
        let table = riceParameterTable
        var reader = reader
        var bits = reader.quickCursor
        var sums = RiceSums()
        var count: UInt64 = 1
        var j = 0
        while j < m {
            quick: while true {
                if count == 4 && m &- j >= 4 {
                    let v = values + 5 &* j
                    guard decodeValuesQuickly(v, count: 4, table, &sums, &bits) else { break quick }
                    guard decodeValuesQuickly(v + 5, count: 5, table, &sums, &bits) else {
                        (j, count) = (j &+ 1, 5)
                        break quick
                    }
                    guard decodeValuesQuickly(v + 10, count: 6, table, &sums, &bits) else {
                        (j, count) = (j &+ 2, 6)
                        break quick
                    }
                    guard decodeValuesQuickly(v + 15, count: 7, table, &sums, &bits) else {
                        (j, count) = (j &+ 3, 7)
                        break quick
                    }
                    j &+= 4
                } else {
                    guard j < m, decodeValuesQuickly(values + 5 &* j, count: count, table, &sums, &bits) else {
                        break quick
                    }
                    count = count == 7 ? 4 : count &+ 1
                    j &+= 1
                }
            }
            guard j < m else { break }
            reader.adopt(bits)
            guard let run = decodeRunExactly(values, from: j, points: m, riceCount: count, sums, reader) else {
                return false
            }
            (j, count, sums, reader) = run
            bits = reader.quickCursor
        }
        reader.adopt(bits)
        do throws(BitStreamFault) { try reader.finish() } catch { return false }
        return true
    }

    /// [PTS-6] [PTS-7] Reads one point's five values into `v` with the shared `count`
    /// (1...7), or returns false having changed nothing but the counted bits.
    ///
    /// It needs 8 stream bytes or more left and every sum below 256 (k from the table, at
    /// most 7); it tops the window up once, reads the five codes without a test, then checks
    /// that they fit the counted bits and that their unary runs are below 16 (no escape; no
    /// value can overflow with k ≤ 7).
    @inline(__always)
    static func decodeValuesQuickly(_ v: UnsafeMutablePointer<UInt32>, count: UInt64, _ table: UnsafePointer<UInt8>,
                                    _ s: inout RiceSums, _ bits: inout QuickBitCursor) -> Bool {
        guard bits.canRefill && (s.s0 | s.s1 | s.s2 | s.s3 | s.s4) < 256 else { return false }
        bits.refill()
        let kRow = table + Int(truncatingIfNeeded: count) &* 256
        let mRow = kRow + riceMaskOffset
        var w = bits.acc
        // The bits of the point read so far (but one per value, added at the end), and the
        // unary runs ORed together.
        var used: UInt64 = 0, runs: UInt64 = 0
        /// The next value, with `sum`: garbage if the check below fails. (A single shift by
        /// the code's length, with the low bits taken apart, measured slower.)
        @inline(__always) func next(_ sum: UInt64) -> UInt64 {
            let k = UInt64(kRow[Int(truncatingIfNeeded: sum)]), mask = UInt64(mRow[Int(truncatingIfNeeded: sum)])
            // The trailing one-bits of w are the trailing zero-bits of w + 1.
            let ones = UInt64((w &+ 1).trailingZeroBitCount)
            let rest = w &>> (ones &+ 1)
            w = rest &>> k
            used &+= ones &+ k
            runs |= ones
            return (ones &<< k) | (rest & mask)
        }
        let u0 = next(s.s0), u1 = next(s.s1), u2 = next(s.s2), u3 = next(s.s3), u4 = next(s.s4)
        used &+= 5
        guard runs < 16 && used <= bits.available else { return false }
        bits.consume(used, leaving: w)
        v[0] = UInt32(truncatingIfNeeded: u0)
        v[1] = UInt32(truncatingIfNeeded: u1)
        v[2] = UInt32(truncatingIfNeeded: u2)
        v[3] = UInt32(truncatingIfNeeded: u3)
        v[4] = UInt32(truncatingIfNeeded: u4)
        s.update(u0, u1, u2, u3, u4, count: count)
        return true
    }

    /// Reads the values of points `j`… with `RiceState.decode`, at least one point, until
    /// the quick path can take over again (8 stream bytes or more left and every sum below
    /// 256) or the last point; nil on any fault. On values, not `inout`, so that the
    /// caller's state can stay in registers.
    @inline(never)
    static func decodeRunExactly(_ values: UnsafeMutablePointer<UInt32>, from j: Int, points m: Int,
                                 riceCount: UInt64, _ sums: RiceSums, _ reader: BitReader)
        -> (next: Int, riceCount: UInt64, sums: RiceSums, reader: BitReader)? {
        var bits = reader, j = j
        var c = RiceCount(count: riceCount)
        var s0 = RiceState(sum: sums.s0), s1 = RiceState(sum: sums.s1), s2 = RiceState(sum: sums.s2)
        var s3 = RiceState(sum: sums.s3), s4 = RiceState(sum: sums.s4)
        do throws(BitStreamFault) {
            repeat {
                let v = values + 5 * j
                v[0] = try s0.decode(c, from: &bits)
                v[1] = try s1.decode(c, from: &bits)
                v[2] = try s2.decode(c, from: &bits)
                v[3] = try s3.decode(c, from: &bits)
                v[4] = try s4.decode(c, from: &bits)
                c.advance()
                j += 1
            } while j < m && (!bits.quickCursor.canRefill || (s0.sum | s1.sum | s2.sum | s3.sum | s4.sum) >= 256)
        } catch {
            return nil
        }
        return (j, c.count, RiceSums(s0: s0.sum, s1: s1.sum, s2: s2.sum, s3: s3.sum, s4: s4.sum), bits)
    }

    /// Pass 2: turns the values stored in points 2..<n (as `decodeValues` left them) into
    /// points, from the two points before each: v_i = 2·v_{i−1} − v_{i−2} + unzigzag(u).
    /// False if a pressure exceeds 1000.
    ///
    /// `packed`: whether x, y, pressure, radius may be stored as four 32-bit words at once
    /// (`pointLayoutIsPacked`; a parameter so that tests can compare both ways).
    static func integrate(_ o: UnsafeMutablePointer<StrokePoint>, count n: Int,
                          packed: Bool = pointLayoutIsPacked) -> Bool {
        var vb = vector(o[0]), va = vector(o[1])
        var tb = o[0].t, ta = o[1].t
        // Pressure lane above 1000, as a signed comparison of values with the sign bit flipped.
        let flip = SIMD4<UInt32>(repeating: 0x8000_0000)
        let bound = SIMD4<Int32>(.max, .max, Int32(bitPattern: UInt32(Quantization.pressureMax) ^ 0x8000_0000), .max)
        var above = SIMDMask<SIMD4<Int32>>()
        /// Point i from its values and the two points before it.
        @inline(__always) func next(_ i: Int, packed: Bool) {
            let raw = UnsafeMutableRawPointer(o + i)
            let u = raw.loadUnaligned(as: SIMD4<UInt32>.self)
            let ut = raw.loadUnaligned(fromByteOffset: 16, as: UInt32.self)
            let v = (va &+ va &- vb) &+ ((u &>> 1) ^ (SIMD4<UInt32>() &- (u & 1)))
            let t = (ta &+ ta &- tb) &+ unzigzag32(ut)
            above .|= SIMD4<Int32>(truncatingIfNeeded: v ^ flip) .> bound
            if packed {
                // x, y, pressure and its padding (zero for a valid pressure), radius.
                raw.storeBytes(of: v, as: SIMD4<UInt32>.self)
                raw.storeBytes(of: t, toByteOffset: 16, as: UInt32.self)
            } else {
                o[i] = point((v[0], v[1], v[2], v[3], t))
            }
            (vb, va, tb, ta) = (va, v, ta, t)
        }
        if packed {
            for i in 2..<n { next(i, packed: true) }
        } else {
            for i in 2..<n { next(i, packed: false) }
        }
        return !any(above)
    }

    /// x, y, pressure, radius of `p`.
    @inline(__always)
    static func vector(_ p: StrokePoint) -> SIMD4<UInt32> {
        SIMD4(UInt32(bitPattern: p.x), UInt32(bitPattern: p.y), UInt32(p.pressure), UInt32(bitPattern: p.radius))
    }

    /// Whether `StrokePoint` has x, y, pressure, radius, t at offsets 0, 4, 8, 12, 16 (the
    /// pressure's 2 padding bytes after it), so that `integrate` may store x to radius as
    /// four 32-bit words at once.
    static let pointLayoutIsPacked: Bool =
        MemoryLayout<StrokePoint>.offset(of: \.x) == 0 && MemoryLayout<StrokePoint>.offset(of: \.y) == 4
            && MemoryLayout<StrokePoint>.offset(of: \.pressure) == 8 && MemoryLayout<StrokePoint>.offset(of: \.radius) == 12
            && MemoryLayout<StrokePoint>.offset(of: \.t) == 16 && MemoryLayout<StrokePoint>.size == 20

    /// [PTS-5] [PTS-8] Decodes points 2..<n from `reader` (points 0 and 1 given) value by
    /// value, then checks the stream's end; throws the first fault with its position. The
    /// reader is copied into a local so that its state stays in registers.
    static func decodeStreamExactly(_ reader: BitReader, count n: Int, first: StrokePoint, second: Channels,
                                    delta firstStep: Channels) throws(BitStreamFault) -> [StrokePoint] {
        var fault: BitStreamFault?
        let points = [StrokePoint](unsafeUninitializedCapacity: n) { out, initialized in
            out[0] = first
            out[1] = point(second)
            initialized = 2
            var bits = reader
            var prev = second, delta = firstStep
            var s0 = RiceState(), s1 = RiceState(), s2 = RiceState(), s3 = RiceState(), s4 = RiceState()
            var c = RiceCount()
            do throws(BitStreamFault) {
                for i in 2..<n {
                    let startBit = bits.consumedBits
                    delta.0 = delta.0 &+ unzigzag32(try s0.decode(c, from: &bits))
                    delta.1 = delta.1 &+ unzigzag32(try s1.decode(c, from: &bits))
                    delta.2 = delta.2 &+ unzigzag32(try s2.decode(c, from: &bits))
                    delta.3 = delta.3 &+ unzigzag32(try s3.decode(c, from: &bits))
                    delta.4 = delta.4 &+ unzigzag32(try s4.decode(c, from: &bits))
                    prev = (prev.0 &+ delta.0, prev.1 &+ delta.1, prev.2 &+ delta.2, prev.3 &+ delta.3, prev.4 &+ delta.4)
                    guard prev.2 <= UInt32(Quantization.pressureMax) else {
                        throw BitStreamFault.pressure(prev.2, index: i, bit: startBit)
                    }
                    out[i] = point(prev)
                    c.advance()
                }
                try bits.finish()
                initialized = n
            } catch {
                fault = error
            }
        }
        if let fault { throw fault }
        return points
    }

    /// The `LnoteError` for a bit stream fault, with the absolute offset [PTS-8] asks for.
    @inline(never)
    static func streamError(_ fault: BitStreamFault, range: Range<Int>, base: Int, path: String?) -> LnoteError {
        func at(_ bit: Int) -> Int { base + range.lowerBound + (bit >> 3) }
        switch fault {
        case .endsInsideValue:
            return LnoteError(.corrupt, "point bit stream ends inside a value", path: path, offset: base + range.upperBound)
        case let .overflow(bit):
            return LnoteError(.corrupt, "point value overflows 32 bits", path: path, offset: at(bit))
        case let .needlessEscape(u, bit):
            return LnoteError(.corrupt, "escaped point value \(u) should have been coded inline", path: path, offset: at(bit))
        case let .pressure(p, index, bit):
            return LnoteError(.corrupt, "pressure \(p) exceeds \(Quantization.pressureMax) at point \(index)",
                              path: path, offset: at(bit))
        case let .unusedBytes(bit):
            return LnoteError(.corrupt, "point bit stream has unused bytes", path: path, offset: at(bit))
        case .padding:
            return LnoteError(.corrupt, "point bit stream padding is not zero", path: path, offset: base + range.upperBound - 1)
        }
    }

    /// [PTS-8] Rejects a reconstructed pressure above 1000; `offset` is where the point's
    /// codes begin.
    static func checkPressure(_ v: Channels, index: Int, at offset: Int, path: String?) throws {
        guard v.2 <= UInt32(Quantization.pressureMax) else {
            throw LnoteError(.corrupt, "pressure \(v.2) exceeds \(Quantization.pressureMax) at point \(index)",
                             path: path, offset: offset)
        }
    }

    @inline(__always)
    static func point(_ v: Channels) -> StrokePoint {
        StrokePoint(x: Int32(bitPattern: v.0), y: Int32(bitPattern: v.1),
                    pressure: UInt16(truncatingIfNeeded: v.2), radius: Int32(bitPattern: v.3), t: v.4)
    }

    /// A varint in its shortest form ([PTS-10]: the encoding is canonical).
    static func minimalVarint(_ r: inout ByteReader, _ what: String) throws -> UInt64 {
        let at = r.offset
        let v = try r.varint(what)
        let minimal = v == 0 ? 1 : (64 - v.leadingZeroBitCount + 6) / 7
        guard r.offset - at == minimal else {
            throw r.error(.corrupt, "\(what) is not in its shortest varint form", at: at)
        }
        return v
    }

    static func minimalInt32(_ r: inout ByteReader, _ what: String) throws -> Int32 {
        let at = r.offset
        guard let v = Int32(exactly: unzigzag(try minimalVarint(&r, what))) else {
            throw r.error(.corrupt, "\(what) does not fit 32 bits", at: at)
        }
        return v
    }

    @inline(__always)
    static func channelValues(_ p: StrokePoint) -> Channels {
        (UInt32(bitPattern: p.x), UInt32(bitPattern: p.y), UInt32(p.pressure), UInt32(bitPattern: p.radius), p.t)
    }
}

