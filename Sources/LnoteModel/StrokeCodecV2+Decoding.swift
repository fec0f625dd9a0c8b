extension StrokeCodecV2 {
    /// Reads a stream written by `encodePoints(_:width:context:into:)` with the same
    /// `width` and `context`, and advances `context` as the writer did.
    ///
    /// Never allocates for more points than the bits present can hold ([PT2-2]).
    /// - Throws: `LnoteError` with the absolute offset: `truncated` when the bytes end inside
    ///   the stream, `corrupt` for anything that is not the canonical encoding of a point
    ///   list in this context ([PT2-8]).
    public static func decodePoints(_ r: inout ByteReader, width: Int32, context c: inout Context) throws -> [StrokePoint] {
        let (n, countAt) = try pointCount(&r)
        guard n > 0 else { return [] }
        let range = try pointBits(&r, count: n, countAt: countAt)
        let bitsAt = r.base + range.lowerBound
        let l = range.count
        return try r.bytes.withUnsafeBufferPointer { buffer in
            var bits = BitReader(buffer, range)
            let points = try decode(&bits, count: n, width: width, context: &c, base: bitsAt - range.lowerBound, path: r.path)
            // [PT2-7] The bits end in the last byte, its unused bits zero.
            let used = bits.consumed
            if used > 8 * l {
                throw LnoteError(.corrupt, "point bits run past their \(l) bytes", path: r.path, offset: bitsAt + l)
            }
            if used <= 8 * (l - 1) {
                throw LnoteError(.corrupt, "point bits end before their last byte", path: r.path, offset: bitsAt + (used + 7) / 8)
            }
            let padding = used % 8
            if padding != 0 && buffer[range.upperBound - 1] >> UInt8(padding) != 0 {
                throw LnoteError(.corrupt, "non-zero padding after the point bits", path: r.path, offset: bitsAt + l - 1)
            }
            return points
        }
    }

    /// Reads a stream's point count and length and steps over its bits without decoding
    /// them ([SNAP-38]): every check [PT2-2] makes before allocating, none of the bits'.
    /// Returns the point count.
    public static func skipPoints(_ r: inout ByteReader) throws -> Int {
        let (n, countAt) = try pointCount(&r)
        if n > 0 { _ = try pointBits(&r, count: n, countAt: countAt) }
        return n
    }

    /// [PT2-1] [PT2-2] The point count, and the offset it was read at.
    private static func pointCount(_ r: inout ByteReader) throws -> (Int, Int) {
        let countAt = r.offset
        let count = try StrokeCodec.minimalVarint(&r, "point count")
        guard let n = Int(exactly: count), n <= Stroke.maxPoints else {
            throw r.error(.corrupt, "point count \(count) exceeds \(Stroke.maxPoints)", at: countAt)
        }
        return (n, countAt)
    }

    /// [PT2-1] [PT2-2] The length of the bits of `n ≥ 1` points, checked, and their range
    /// in `r.bytes` (the reader is moved past them).
    private static func pointBits(_ r: inout ByteReader, count n: Int, countAt: Int) throws -> Range<Int> {
        let lengthAt = r.offset
        let length = try StrokeCodec.minimalVarint(&r, "point bits length")
        guard length <= UInt64(r.remaining) else {
            throw r.error(.truncated, "point bits of \(length) bytes, \(r.remaining) left", at: lengthAt)
        }
        let l = Int(length)
        // [PT2-2] Points 2 and later cost at least two bits each (x and y are always coded).
        guard l > 0, n <= 2 || n - 2 <= 4 * l else {
            throw r.error(.corrupt, "\(n) points cannot fit in \(l) bytes of point bits", at: countAt)
        }
        return try r.skip(l, "point bits")
    }

    /// The body of `decodePoints`: everything in the bits.
    static func decode(_ bits: inout BitReader, count n: Int, width: Int32, context c: inout Context,
                       base: Int, path: String?) throws -> [StrokePoint] {
        func fail(_ message: String, bit: Int? = nil) -> LnoteError {
            // [PT2-8] A code that starts in the zeros past the `L` bytes is reported where it
            // starts, past the stream's end.
            LnoteError(.corrupt, message, path: path, offset: base + bits.start + (bit ?? bits.consumed) / 8)
        }
        let derived = bits.take(1) == 1
        // [PT2-11] x and y's digitizer grids: index into `coordinateGrids` plus 1 (0: none),
        // phase, and the bit where the channel's grid bits begin (for errors).
        var gridX = (index: 0, phase: Int64(0), at: 0), gridY = gridX
        if c.coordinateGrids && n >= 3 {
            var problem: String?
            (gridX, problem) = readGrid(&bits, preferred: c.lastGrid.x, channel: x)
            if let problem { throw fail(problem, bit: gridX.at) }
            (gridY, problem) = readGrid(&bits, preferred: c.lastGrid.y > 0 ? c.lastGrid.y : gridX.index, channel: y)
            if let problem { throw fail(problem, bit: gridY.at) }
        }
        var modes = SIMD8<UInt64>(repeating: Mode.unitGrid.rawValue)
        var grids = SIMD8<UInt64>(repeating: 1)
        var parameters = SIMD8<UInt64>(repeating: 0)
        var predictor = SIMD8<UInt64>(repeating: Predictor.second.rawValue)
        let coded = SIMD8<Int64>(1, 1, 1, derived ? 0 : 1, 1, 0, 0, 0) .== 1
        if n >= 3 {
            for ch in 0..<5 where coded[ch] {
                let at = bits.consumed
                bits.refill()
                let mode = bits.take(2)
                modes[ch] = mode
                switch Mode(rawValue: mode)! {
                case .linear:
                    guard ch >= pressure else { throw fail("x and y have no linear mode", bit: at) }
                case .sameGrid:
                    grids[ch] = c.grid[ch]
                case .unitGrid:
                    guard c.grid[ch] != 1 else { throw fail("grid 1 written in full where the previous grid is 1", bit: at) }
                case .givenGrid:
                    guard let v = bits.gamma(), v < UInt64(UInt32.max) else { throw fail("grid code out of range", bit: at) }
                    let g = v + 1
                    guard g != c.grid[ch] else { throw fail("grid \(g) written in full where it is the previous one", bit: at) }
                    grids[ch] = g
                }
                // [PT2-12] Pressure's and time's predictor bit, after the mode and grid.
                if c.predictors && mode != Mode.linear.rawValue, let alternative = Predictor.alternative(ch) {
                    predictor[ch] = bits.take(1) == 1 ? alternative.rawValue : Predictor.second.rawValue
                }
                // [PT2-10] The second differences' parameter, after the mode and grid.
                if c.writtenParameters && mode != Mode.linear.rawValue {
                    let k = bits.take(parameterBits)
                    parameters[ch] = k < parameterEscape ? k : parameterEscape + bits.take(parameterBits)
                }
            }
        }
        // The first point, against the previous stroke's.
        var first = c.first
        for ch in 0..<5 where coded[ch] {
            let at = bits.consumed
            guard let u = bits.rice(&c.firstState[ch]) else { throw fail("bad code in the first point", bit: at) }
            first[ch] = c.first[ch] &+ unzigzag(u)
            guard inRange(first[ch], ch) else { throw fail("first point's channel \(ch) out of range", bit: at) }
        }
        if derived { first[radius] = Int64(derivedRadius(width, UInt16(first[pressure]))) }
        var steps = SIMD8<Int64>(repeating: 0)
        if n >= 2 {
            for ch in 0..<5 where coded[ch] {
                let at = bits.consumed
                guard let u = bits.rice(&c.stepState[ch]) else { throw fail("bad code in the first step", bit: at) }
                steps[ch] = unzigzag(u)
                if n == 2 || modes[ch] == Mode.linear.rawValue {
                    // Linear: the last point is the farthest from the first.
                    let (total, o1) = steps[ch].multipliedReportingOverflow(by: Int64(n - 1))
                    let (last, o2) = first[ch].addingReportingOverflow(total)
                    guard !o1, !o2, inRange(last, ch) else { throw fail("channel \(ch) leaves its range", bit: at) }
                }
            }
        }
        // Channel by channel into memory laid out as `StrokePoint` is (x, y, pressure, radius,
        // t at byte offsets 0, 4, 8, 12, 16 of 20: `StrokeCodec.pointLayoutIsPacked`), else
        // into a scratch copy with that layout.
        var points = [StrokePoint](repeating: point(first), count: n)
        let packed = StrokeCodec.pointLayoutIsPacked
        var scratch = [UInt8](repeating: 0, count: packed ? 0 : 20 * n)
        try points.withUnsafeMutableBufferPointer { out in
            try scratch.withUnsafeMutableBytes { copy in
            let words = packed ? UnsafeMutableRawPointer(out.baseAddress!) : copy.baseAddress!
            if !packed { for ch in 0..<5 { store(words, 0, ch, first[ch]) } }
            do {
                for ch in 0..<5 {
                    if !coded[ch] || n < 2 { continue }
                    let g = grids[ch]
                    if n == 2 || modes[ch] == Mode.linear.rawValue {
                        var v = first[ch]
                        for i in 1..<n {
                            v &+= steps[ch]
                            store(words, i, ch, v)
                        }
                        continue
                    }
                    let channelAt = bits.consumed
                    // [PT2-4] The first step is a multiple of the grid.
                    let q = steps[ch]
                    let v = first[ch] &+ Int64(bitPattern: g) &* q
                    store(words, 1, ch, v)
                    let fixed = c.writtenParameters
                    var state = fixed ? UInt32(16) << UInt32(parameters[ch]) : c.secondState[ch]
                    let channelPredictor = Predictor(rawValue: predictor[ch])!
                    guard let summary = secondDifferences(&bits, count: n, grid: Int64(bitPattern: g), step: q, value: v,
                                                          state: &state, fixed: fixed, predictor: channelPredictor,
                                                          into: words, channel: ch) else {
                        throw fail("bad code in channel \(ch)", bit: bits.consumed)
                    }
                    let low = min(first[ch], summary.low), high = max(first[ch], summary.high)
                    let largest = summary.largest
                    if !fixed { c.secondState[ch] = state }
                    c.grid[ch] = g
                    // Steps of at most 2^33 (so nothing above wrapped), values in range.
                    let (span, overflow) = g.multipliedReportingOverflow(by: largest)
                    guard !overflow, span < 1 << 33, inRange(low, ch), inRange(high, ch) else {
                        throw fail("channel \(ch) leaves its range", bit: channelAt)
                    }
                    // [PT2-3] Canonical: a channel with equal steps is linear; the grid is
                    // the greatest common divisor of the steps (1 when all are 0).
                    let steps = stepsCheck(words, count: n, channel: ch, grid: g)
                    guard ch < pressure || steps.varies else { throw fail("channel \(ch) has equal steps but is not linear", bit: channelAt) }
                    guard steps.greatest else {
                        throw fail("channel \(ch)'s grid \(g) is not the greatest common divisor of its steps", bit: channelAt)
                    }
                    if c.predictors, let alternative = Predictor.alternative(ch) {
                        // [PT2-12] Canonical: the predictor the values choose (their steps,
                        // read from the stored values, not divided by the grid: the comparison
                        // is the same).
                        let expected = Predictor.choose(alternative, count: n - 1) {
                            load(words, $0 &+ 1, ch) &- load(words, $0, ch)
                        }
                        guard expected == channelPredictor else {
                            throw fail("channel \(ch)'s predictor \(channelPredictor) is not the one its values choose (\(expected))",
                                       bit: channelAt)
                        }
                    }
                    if fixed {
                        // [PT2-10] Canonical: the parameter that codes them in fewest bits.
                        let best = summary.cost.cheapest
                        guard UInt64(best) == parameters[ch] else {
                            throw fail("channel \(ch)'s parameter \(parameters[ch]) is not the one that codes it in fewest bits (\(best))",
                                       bit: channelAt)
                        }
                    }
                }
                // x and y on their grids: the values from the grid units, then the choice
                // checked as the encoder makes it (canonical).
                if c.coordinateGrids && n >= 3 {
                    for ch in x...y {
                        let g = ch == x ? gridX : gridY
                        let preferred = ch == x ? c.lastGrid.x : (c.lastGrid.y > 0 ? c.lastGrid.y : gridX.index)
                        if g.index > 0 {
                            let grid = coordinateGrids[g.index - 1]
                            for i in 1..<n {
                                let v = value(load(words, i, ch) &- first[ch], grid: grid, phase: g.phase, first: first[ch])
                                guard inRange(v, ch) else { throw fail("channel \(ch) leaves its range on its grid", bit: g.at) }
                                store(words, i, ch, v)
                            }
                        }
                        let expected = chooseGrid(count: n, preferred: preferred) { load(words, $0, ch) }
                        guard expected.index == g.index, expected.phase == g.phase else {
                            throw fail("channel \(ch)'s grid \(gridName(g.index)) phase \(g.phase) is not the one its values "
                                       + "choose (\(gridName(expected.index)) phase \(expected.phase))", bit: g.at)
                        }
                    }
                }
                if derived {
                    for i in 1..<n {
                        let p = words.load(fromByteOffset: 20 * i + 8, as: UInt16.self)
                        store(words, i, radius, Int64(derivedRadius(width, p)))
                    }
                }
            }
            if !packed {
                for i in 0..<n {
                    func w(_ ch: Int) -> UInt32 { words.load(fromByteOffset: 20 * i + 4 * ch, as: UInt32.self) }
                    out[i] = StrokePoint(x: Int32(bitPattern: w(0)), y: Int32(bitPattern: w(1)),
                                         pressure: words.load(fromByteOffset: 20 * i + 8, as: UInt16.self),
                                         radius: Int32(bitPattern: w(3)), t: w(4))
                }
            }
            }
        }
        // [PT2-3] A radius that is the derived one everywhere is not stored.
        if !derived && points.allSatisfy({ $0.radius == derivedRadius(width, $0.pressure) }) {
            throw fail("radius stored where it is derived from pressure", bit: 0)
        }
        c.first = first
        if c.coordinateGrids && n >= 3 { c.lastGrid = Context.LastGrids(x: gridX.index, y: gridY.index) }
        return points
    }

    /// A grid for a person: its index in `G` and its size (`coordinateGrids`' index plus 1,
    /// 0 for none).
    static func gridName(_ index: Int) -> String {
        guard index > 0 else { return "none" }
        let g = coordinateGrids[index - 1]
        return "\(index - 1) (\(g.a)/\(g.q))"
    }

    /// [PT2-11] A channel's grid bits: its grid (index into `coordinateGrids` plus 1, 0 for
    /// none), phase, and the bit where they begin; or why they are refused: an index of 85 or
    /// more, the preferred grid written in full, a phase of `q` or more.
    static func readGrid(_ bits: inout BitReader, preferred: Int, channel ch: Int)
        -> (grid: (index: Int, phase: Int64, at: Int), problem: String?) {
        let at = bits.consumed
        var index = preferred
        if preferred == 0 || bits.take(1) == 0 {
            index = 0
            if bits.take(1) == 1 {
                index = Int(bits.take(gridIndexBits)) + 1
                guard index <= coordinateGrids.count, index != preferred else {
                    return ((index, 0, at), "channel \(ch)'s grid index \(index - 1) out of range or its preferred one")
                }
            }
        }
        var phase: Int64 = 0
        if index > 0 {
            let grid = coordinateGrids[index - 1]
            phase = Int64(bits.take(grid.phaseBits))
            guard phase < grid.q else { return ((index, phase, at), "channel \(ch)'s phase \(phase) is not below \(grid.q)") }
        }
        return ((index, phase, at), nil)
    }

    /// Points 2 to n − 1 of one coded channel ([PT2-6]): reads the residuals of the channel's
    /// predictor (second differences unless [PT2-12] says otherwise), rebuilds each step from
    /// the first step `step` (in grid units) and point 1's `value`, stores the values; returns
    /// their range, the largest step in grid units and what each written parameter would have
    /// cost, or nil for a bad code. The hot loop of decoding: the bit buffer lives in locals.
    /// One copy of the loop per predictor, each with its rule folded in (second differences,
    /// the common case, cost what they did before predictors).
    static func secondDifferences(_ bits: inout BitReader, count n: Int, grid g: Int64, step: Int64, value: Int64,
                                  state: inout UInt32, fixed: Bool = false, predictor: Predictor = .second,
                                  into words: UnsafeMutableRawPointer, channel ch: Int)
        -> (low: Int64, high: Int64, largest: UInt64, cost: ParameterCosts)? {
        switch predictor {
        case .second:
            residuals(&bits, count: n, grid: g, step: step, value: value, state: &state, fixed: fixed, keep: -1, anchor: 0,
                      into: words, channel: ch)
        case .steps:
            residuals(&bits, count: n, grid: g, step: step, value: value, state: &state, fixed: fixed, keep: 0, anchor: 0,
                      into: words, channel: ch)
        case .againstFirst:
            residuals(&bits, count: n, grid: g, step: step, value: value, state: &state, fixed: fixed, keep: 0, anchor: step,
                      into: words, channel: ch)
        }
    }

    /// `secondDifferences`' loop: step `i` is `(q_{i−1} & keep) + anchor + r_i` ([PT2-12]:
    /// `keep` −1 and `anchor` 0 for second differences, 0 and 0 for pressure's steps, 0 and the
    /// first step for time's steps against it). Inlined into each case with its constants.
    @inline(__always)
    private static func residuals(_ bits: inout BitReader, count n: Int, grid g: Int64, step: Int64, value: Int64,
                                  state: inout UInt32, fixed: Bool, keep: Int64, anchor: Int64,
                                  into words: UnsafeMutableRawPointer, channel ch: Int)
        -> (low: Int64, high: Int64, largest: UInt64, cost: ParameterCosts)? {
        var buffer = bits.buffer, count = bits.count, position = bits.position
        let base = bits.base, end = bits.end
        var m = state
        var q = step, v = value
        var low = v, high = v
        var largest = q.magnitude
        // With a written parameter, what each parameter would have cost ([PT2-10]).
        var cost = ParameterCosts()
        // Every channel as a 32-bit word at byte 4·ch of the point's 20 (pressure's high half
        // is the struct's padding), from point 2 on.
        var out = words + (40 &+ 4 &* ch)
        let stop = words + (20 &* n &+ 4 &* ch)
        while out < stop {
            // Away from the end, a word is loaded whatever the buffer holds (no branch on its
            // fill, which the processor cannot predict): the bytes already counted land on
            // themselves (bits above `count` are the stream's own next bits or zeros), and
            // none is counted when 56 or more bits are.
            if end &- position >= 8 {
                let word = UInt64(littleEndian: UnsafeRawPointer(base + position).loadUnaligned(as: UInt64.self))
                buffer |= word &<< UInt64(count)
                let taken = (63 &- count) &>> 3
                position &+= taken
                count &+= taken &<< 3
            } else if count < 56 {
                bits.buffer = buffer; bits.count = count; bits.position = position
                bits.refill()
                buffer = bits.buffer; count = bits.count; position = bits.position
            }
            let k = UInt64(parameter(m))
            let z = buffer.trailingZeroBitCount
            let u: UInt64
            if z < escapeRun {
                u = (UInt64(z) &<< k) | ((buffer &>> UInt64(z &+ 1)) & ((1 &<< k) &- 1))
                let used = UInt64(z &+ 1) &+ k
                buffer &>>= used
                count &-= Int(used)
            } else {
                bits.buffer = buffer; bits.count = count; bits.position = position
                // [PT2-8] 2: a bad code is reported where it begins, so the reader stays there.
                let atCode = bits
                guard let e = bits.escape(k: Int(k), run: z) else { bits = atCode; return nil }
                buffer = bits.buffer; count = bits.count; position = bits.position
                u = e
            }
            // A written parameter ([PT2-10]) stays; an adaptive state follows the values.
            if fixed { cost.add(u) } else { m = m &+ UInt32(truncatingIfNeeded: min(u, stateCap)) &- (m &>> 4) }
            q = (q & keep) &+ anchor &+ unzigzag(u)
            v &+= g &* q
            out.storeBytes(of: UInt32(truncatingIfNeeded: v), as: UInt32.self)
            out += 20
            low = min(low, v)
            high = max(high, v)
            largest = max(largest, q.magnitude)
        }
        bits.buffer = buffer; bits.count = count; bits.position = position
        state = m
        return (low, high, largest, cost)
    }

    /// For a channel whose values (all in range) are stored: whether some step differs from
    /// the first, and whether `g` is the greatest common divisor of the steps (0 → 1). Both
    /// usually settle within a few points.
    static func stepsCheck(_ words: UnsafeMutableRawPointer, count n: Int, channel ch: Int, grid g: UInt64)
        -> (varies: Bool, greatest: Bool) {
        @inline(__always) func value(_ i: Int) -> Int64 { load(words, i, ch) }
        let first = value(1) - value(0)
        var varies = false
        var divisor = first.magnitude
        var previous = value(1)
        for i in 2..<n {
            let v = value(i)
            let d = v - previous
            previous = v
            if d != first { varies = true }
            if divisor != g { divisor = gcd(d.magnitude, divisor) }
            if varies && divisor == g { break }
        }
        return (varies, divisor == g || (divisor == 0 && g == 1))
    }

    /// Channel `ch` of point `i`, stored by `store`.
    @inline(__always) static func load(_ words: UnsafeMutableRawPointer, _ i: Int, _ ch: Int) -> Int64 {
        let w = words.load(fromByteOffset: 20 &* i &+ 4 &* ch, as: UInt32.self)
        switch ch {
        case pressure: return Int64(w & 0xFFFF)
        case time: return Int64(w)
        default: return Int64(Int32(bitPattern: w))
        }
    }

    @inline(__always) static func store(_ words: UnsafeMutableRawPointer, _ i: Int, _ ch: Int, _ v: Int64) {
        if ch == pressure {
            // Pressure is a UInt16 followed by two padding bytes.
            words.storeBytes(of: UInt16(truncatingIfNeeded: v), toByteOffset: 20 &* i &+ 8, as: UInt16.self)
        } else {
            words.storeBytes(of: UInt32(truncatingIfNeeded: v), toByteOffset: 20 &* i &+ 4 &* ch, as: UInt32.self)
        }
    }

    @inline(__always) static func inRange(_ v: Int64, _ ch: Int) -> Bool {
        switch ch {
        case pressure: v >= 0 && v <= Int64(Quantization.pressureMax)
        case time: v >= 0 && v <= Int64(UInt32.max)
        default: v >= Int64(Int32.min) && v <= Int64(Int32.max)
        }
    }

    @inline(__always) static func point(_ v: SIMD8<Int64>) -> StrokePoint {
        StrokePoint(x: Int32(truncatingIfNeeded: v[0]), y: Int32(truncatingIfNeeded: v[1]),
                    pressure: UInt16(truncatingIfNeeded: v[2]), radius: Int32(truncatingIfNeeded: v[3]),
                    t: UInt32(truncatingIfNeeded: v[4]))
    }

    /// Reads a bit stream least significant bit first, 64 bits at a time; past the end it
    /// reads zeros (the caller checks how far it went).
    struct BitReader {
        let base: UnsafePointer<UInt8>
        let start: Int
        let end: Int
        var position: Int
        var buffer: UInt64 = 0
        var count = 0

        init(_ bytes: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) {
            base = bytes.baseAddress ?? UnsafePointer(bitPattern: 1)!
            start = range.lowerBound
            end = range.upperBound
            position = range.lowerBound
        }

        /// Bits read so far.
        var consumed: Int { (position - start) * 8 - count }

        /// At least 56 bits in the buffer.
        @inline(__always) mutating func refill() {
            if count >= 56 { return }
            if end - position >= 8 {
                let word = UInt64(littleEndian: UnsafeRawPointer(base + position).loadUnaligned(as: UInt64.self))
                buffer |= word << UInt64(count)
                let taken = (63 - count) >> 3
                position += taken
                count += taken << 3
            } else {
                while count <= 56 {
                    let b: UInt64 = position < end ? UInt64(base[position]) : 0
                    buffer |= b << UInt64(count)
                    position += 1
                    count += 8
                }
            }
        }

        /// The next `n` bits (n ≤ 56, after `refill`).
        @inline(__always) mutating func take(_ n: Int) -> UInt64 {
            refill()
            let v = buffer & ((1 << UInt64(n)) &- 1)
            buffer >>= UInt64(n)
            count -= n
            return v
        }

        /// An Elias gamma code (a value ≥ 1 of at most 40 bits), or nil.
        mutating func gamma() -> UInt64? {
            refill()
            let zeros = buffer.trailingZeroBitCount
            guard zeros < 40 else { return nil }
            _ = take(zeros + 1)
            return (1 << UInt64(zeros)) | take(zeros)
        }

        /// A value in the adaptive Rice code of state `m` ([PT2-5]), the state updated; nil
        /// for a unary run longer than the escape's or an escape holding a value that needed
        /// none (not canonical).
        @inline(__always) mutating func rice(_ m: inout UInt32) -> UInt64? {
            refill()
            let k = StrokeCodecV2.parameter(m)
            let q = buffer.trailingZeroBitCount
            let u: UInt64
            if q < StrokeCodecV2.escapeRun {
                u = (UInt64(q) << UInt64(k)) | ((buffer >> UInt64(q + 1)) & ((1 << UInt64(k)) &- 1))
                let used = q + 1 + k
                buffer >>= UInt64(used)
                count -= used
            } else {
                guard let e = escape(k: k, run: q) else { return nil }
                u = e
            }
            StrokeCodecV2.update(&m, u)
            return u
        }

        /// The rest of a code whose unary run is `run` zeros long (at least the escape's):
        /// the escape's raw value, or nil when the run is too long or the value needed no
        /// escape.
        @inline(never)
        mutating func escape(k: Int, run: Int) -> UInt64? {
            guard run == StrokeCodecV2.escapeRun else { return nil }
            _ = take(StrokeCodecV2.escapeRun + 1)
            let low = take(20)
            let u = low | take(StrokeCodecV2.escapeBits - 20) << 20
            guard u >> UInt64(k) >= UInt64(StrokeCodecV2.escapeRun) else { return nil }
            return u
        }
    }
}
