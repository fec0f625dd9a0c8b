import LnoteModel

/// A second implementation of the point stream version 2, written from
/// `Protocol/page-snapshot.md` section 3a alone, as the oracle of
/// `StrokeCodecV2ReferenceTests`, `StrokeCodecV2WrittenParametersTests` ([PT2-10]) and
/// `StrokeCodecV2GridTests` ([PT2-11]).
///
/// It is meant to be obviously correct, not fast: values are exact `Int64` (products in
/// `Int128`), bits are written and read one at a time, and the checks of [PT2-2] and
/// [PT2-8] are made one by one, each as soon as what it needs has been read, in the order
/// of 3a.2. Do not optimize it; change it only where it departs from the spec, and say where
/// in the spec's terms.
///
/// Its messages start with the rule they apply (`[PT2-8] 4:`), which the tests use to see
/// that their inputs meet every rule.
enum ReferenceStrokeCodecV2 {
    /// [PT2-2] The largest point count.
    static let maxCount: UInt64 = 1_048_576
    /// The channels in stream order.
    static let x = 0, y = 1, pressure = 2, radius = 3, t = 4
    /// 3a.1: the range of each channel's values.
    static let ranges: [ClosedRange<Int64>] = [
        Int64(Int32.min)...Int64(Int32.max), Int64(Int32.min)...Int64(Int32.max), 0...1000,
        Int64(Int32.min)...Int64(Int32.max), 0...Int64(UInt32.max),
    ]

    /// 3a.1 The context a chunk carries from stroke to stroke, per channel.
    struct Context: Equatable {
        /// The previous stroke's first value.
        var first: [Int64] = [0, 0, 500, 0, 0]
        /// The channel's last grid.
        var grid: [Int64] = [1, 1, 1, 1, 1]
        /// [PT2-5] The Rice states of first values, first steps and second differences.
        var firstState: [UInt32] = Array(repeating: 1024, count: 5)
        var stepState: [UInt32] = Array(repeating: 256, count: 5)
        var secondState: [UInt32] = Array(repeating: 64, count: 5)
        /// [PT2-10] Second differences in a Rice code of a parameter written after each
        /// channel's mode, no state.
        var writtenParameters = false
        /// [PT2-11] A context *with grids*: x and y on a digitizer grid of `G`.
        var grids = false
        /// [PT2-11] The *last grid* of x and of y (indexed by `x`, `y`): an index in `G`, or
        /// none (initially none). Not to be confused with `grid`, [PT2-3]'s integer grid,
        /// which 3a.1 also calls the channel's last grid.
        var lastGrid: [Int?] = [nil, nil]
        /// [PT2-12] A context *with predictors*: pressure and t name theirs per stroke.
        var predictors = false

        /// operation-log.md [LOG-24]: the standalone context of a compact stroke frame; with
        /// written parameters for an `addStroke2` ([LOG-29]); with written parameters and
        /// grids for an `addStroke3` ([PT2-11], [LOG-32]).
        static func standalone(writtenParameters: Bool, grids: Bool = false) -> Context {
            var c = Context()
            c.firstState = [65536, 65536, 4096, 256, 16]
            c.stepState = [128, 128, 256, 64, 128]
            c.writtenParameters = writtenParameters
            c.grids = grids
            return c
        }

        /// 3a.1 The initial context of a chunk; with grids for a version-3 snapshot
        /// ([PT2-11], [SNAP-42]).
        static func chunk(grids: Bool, predictors: Bool = false) -> Context {
            var c = Context()
            c.grids = grids
            c.predictors = predictors
            return c
        }
    }

    // MARK: Digitizer grids [PT2-11]

    /// [PT2-11] A grid of `a/q` tenths of a point.
    struct DigitizerGrid: Equatable, Sendable, CustomStringConvertible {
        let a: Int64
        let q: Int64
        var description: String { "\(a)/\(q)" }
    }

    /// [PT2-11] `G`: every `(a, q)` with `1 ≤ q ≤ 4`, `2q ≤ a ≤ 16q`, `gcd(a, q) = 1`, by
    /// `a/q` descending.
    static let gridList: [DigitizerGrid] = {
        var out: [DigitizerGrid] = []
        for q in Int64(1)...4 {
            for a in (2 * q)...(16 * q) where gcd(a, q) == 1 { out.append(DigitizerGrid(a: a, q: q)) }
        }
        // a₁/q₁ > a₂/q₂ exactly when a₁·q₂ > a₂·q₁.
        return out.sorted { $0.a * $1.q > $1.a * $0.q }
    }()

    /// [PT2-11] The bits of a phase of a grid of `q`: `⌈log₂ q⌉`.
    static func phaseBits(_ q: Int64) -> Int { bitLength(UInt64(q - 1)) }

    /// `⌊x / d⌋` and `⌈x / d⌉` for `d > 0`, exact.
    static func floorDiv(_ x: Int64, _ d: Int64) -> Int64 {
        let q = x / d
        return x % d != 0 && x < 0 ? q - 1 : q
    }

    static func ceilDiv(_ x: Int64, _ d: Int64) -> Int64 { -floorDiv(-x, d) }

    /// [PT2-11] `k_i = ⌈(q·(v_i − v_0) − p) / a⌉`: the only integer that can satisfy
    /// `q·(v_i − v_0) − p ≤ a·k_i < q·(v_i − v_0) − p + q`.
    static func gridStep(_ v: Int64, first v0: Int64, _ grid: DigitizerGrid, phase p: Int64) -> Int64 {
        ceilDiv(grid.q * (v - v0) - p, grid.a)
    }

    /// [PT2-11] The values fit `grid` with phase `p`: every `i` has its `k_i`.
    static func fits(_ values: [Int64], _ grid: DigitizerGrid, phase p: Int64) -> Bool {
        let v0 = values[0]
        for v in values {
            let k = gridStep(v, first: v0, grid, phase: p)
            if grid.a * k >= grid.q * (v - v0) - p + grid.q { return false }
        }
        return true
    }

    /// [PT2-11] The smallest phase with which the values fit `grid`, if any.
    static func smallestPhase(_ values: [Int64], _ grid: DigitizerGrid) -> Int64? {
        for p in 0..<grid.q where fits(values, grid, phase: p) { return p }
        return nil
    }

    /// [PT2-11] The choice: the preferred grid if the values fit it, else the first entry of
    /// `G` (the preferred one skipped) that they fit, else none; with the smallest phase.
    static func gridChoice(_ values: [Int64], preferred: Int?) -> (index: Int, phase: Int64)? {
        if let preferred, let p = smallestPhase(values, gridList[preferred]) { return (preferred, p) }
        for i in gridList.indices where i != preferred {
            if let p = smallestPhase(values, gridList[i]) { return (i, p) }
        }
        return nil
    }

    /// [PT2-11] The values coded in place of `v_i`: `u_i = v_0 + k_i`.
    static func gridUnits(_ values: [Int64], _ grid: DigitizerGrid, phase p: Int64) -> [Int64] {
        values.map { values[0] + gridStep($0, first: values[0], grid, phase: p) }
    }

    /// [PT2-11] A reader's rebuilt value: `v_i = v_0 + ⌊(a·(u_i − v_0) + p) / q⌋`.
    static func rebuilt(_ u: Int64, first v0: Int64, _ grid: DigitizerGrid, phase p: Int64) -> Int64 {
        v0 + floorDiv(grid.a * (u - v0) + p, grid.q)
    }

    /// One channel's part of [PT2-11]'s grid bits, as a writer plans it.
    struct GridPlan: Equatable {
        /// The channel's preferred grid (an index in `G`), if it has one.
        var preferred: Int?
        /// The chosen grid and phase, or none.
        var chosen: Int?
        var phase: Int64 = 0
    }

    /// [PT2-11] The preferred grids and the choice for x and y of a stroke coded against
    /// `context`; nil without grids or for fewer than 3 points.
    static func gridPlans(_ points: [StrokePoint], context: Context) -> [GridPlan]? {
        guard context.grids, points.count >= 3 else { return nil }
        let v = points.map(values)
        var plans: [GridPlan] = []
        for c in [x, y] {
            let preferred = c == x ? context.lastGrid[x] : (context.lastGrid[y] ?? plans[x].chosen)
            let choice = gridChoice(v.map { $0[c] }, preferred: preferred)
            plans.append(GridPlan(preferred: preferred, chosen: choice?.index, phase: choice?.phase ?? 0))
        }
        return plans
    }

    /// What a test's writer writes for one channel's grid in place of [PT2-11]'s choice (to
    /// build streams a reader must refuse): the index (0…127, 85 or more naming no grid) or
    /// none, the phase (up to `2^⌈log₂ q⌉ − 1`), and whether to write the index in full
    /// (`same` 0) even where it is the preferred grid. The coded values are
    /// `v_0 + ⌈(q·(v_i − v_0) − p) / a⌉` whether or not the values fit.
    struct ForcedGrid {
        var index: Int?
        var phase: Int64 = 0
        var inFull = false
    }

    /// [PT2-10] The bits of `u` in the Rice code of parameter `k`.
    static func riceLength(_ u: UInt64, k: Int) -> Int {
        let q = u >> UInt64(k)
        return q < 24 ? Int(q) + 1 + k : 65
    }

    /// [PT2-10] The parameter 0…14 coding `us` in the fewest bits, the smallest on a tie.
    static func bestParameter(_ us: [UInt64]) -> Int {
        var best = 0, bestBits = Int.max
        for k in 0...14 {
            let bits = us.reduce(0) { $0 + riceLength($1, k: k) }
            if bits < bestBits { (best, bestBits) = (k, bits) }
        }
        return best
    }

    /// A point's channels, exact.
    static func values(_ p: StrokePoint) -> [Int64] {
        [Int64(p.x), Int64(p.y), Int64(p.pressure), Int64(p.radius), Int64(p.t)]
    }

    /// 3a.2 1 ([IMP-6]): `width × (500 + pressure) / 2000`, rounded half away from zero.
    static func derivedRadius(width: Int32, pressure: Int64) -> Int64 {
        let n = Int64(width) * (500 + pressure)
        let q = n / 2000, r = n % 2000
        guard 2 * abs(r) >= 2000 else { return q }
        return n < 0 ? q - 1 : q + 1
    }

    /// Section 1: `zigzag(v) = (v << 1) ^ (v >> 63)` and its inverse.
    static func zigzag(_ v: Int64) -> UInt64 { UInt64(bitPattern: (v << 1) ^ (v >> 63)) }
    static func unzigzag(_ u: UInt64) -> Int64 { Int64(bitPattern: u >> 1) ^ -Int64(bitPattern: u & 1) }

    static func gcd(_ a: Int64, _ b: Int64) -> Int64 {
        var (a, b) = (abs(a), abs(b))
        while b != 0 { (a, b) = (b, a % b) }
        return a
    }

    static func bitLength(_ v: UInt64) -> Int { 64 - v.leadingZeroBitCount }

    /// [PT2-5] `k = max(0, bitlength(m) − 5)`.
    static func riceParameter(_ m: UInt32) -> Int { max(0, bitLength(UInt64(m)) - 5) }

    /// [PT2-5] `m ← m + min(u, 65536) − (m >> 4)`.
    static func update(_ m: inout UInt32, _ u: UInt64) {
        m = m &+ UInt32(min(u, 65536)) &- (m >> 4)
    }

    // MARK: Writing

    /// [PTS-4] Bits in stream order, least significant bit of each byte first.
    struct BitWriter {
        private(set) var bits: [Bool] = []

        mutating func write(_ bit: Bool) { bits.append(bit) }

        /// The `width` low bits of `value`, least significant first.
        mutating func write(_ value: UInt64, width: Int) {
            for j in 0..<width { write((value >> UInt64(j)) & 1 == 1) }
        }

        /// The bits packed, the last byte padded with zero bits.
        var bytes: [UInt8] {
            var out = [UInt8](repeating: 0, count: (bits.count + 7) / 8)
            for (i, b) in bits.enumerated() where b { out[i / 8] |= UInt8(1) << UInt8(i % 8) }
            return out
        }
    }

    static func appendVarint(_ value: UInt64, to out: inout [UInt8]) {
        var v = value
        while v >= 0x80 {
            out.append(UInt8(v & 0x7F) | 0x80)
            v >>= 7
        }
        out.append(UInt8(v))
    }

    /// [PT2-4] Elias gamma of `v ≥ 1`: `b − 1` zero bits, a one, the low `b − 1` bits of `v`.
    static func writeGamma(_ v: UInt64, to w: inout BitWriter) {
        let b = bitLength(v)
        for _ in 0..<(b - 1) { w.write(false) }
        w.write(true)
        w.write(v, width: b - 1)
    }

    /// [PT2-5] `u` in the Rice code of state `m`, then the state's update.
    static func writeRice(_ u: UInt64, state m: inout UInt32, to w: inout BitWriter) {
        precondition(u < 1 << 40)
        let k = riceParameter(m)
        let q = u >> UInt64(k)
        if q < 24 {
            for _ in 0..<q { w.write(false) }
            w.write(true)
            w.write(u, width: k)
        } else {
            for _ in 0..<24 { w.write(false) }
            w.write(true)
            w.write(u, width: 40)
        }
        update(&m, u)
    }

    /// [PT2-10] `u` in the Rice code of parameter `k`: as a state whose parameter is `k`,
    /// without the update.
    static func writeRice(_ u: UInt64, parameter k: Int, to w: inout BitWriter) {
        var m = UInt32(16) << UInt32(k)
        precondition(riceParameter(m) == k)
        writeRice(u, state: &m, to: &w)
    }

    /// [PT2-6] The zigzagged second differences of channel `c` in grid units.
    static func secondDifferences(_ v: [[Int64]], channel c: Int, grid: Int64) -> [UInt64] {
        let q = (1..<v.count).map { (v[$0][c] - v[$0 - 1][c]) / grid }
        return (1..<q.count).map { zigzag(q[$0] - q[$0 - 1]) }
    }

    /// [PT2-12] The residuals of predictor `p` (0 or 1) of channel `c` (pressure or t) for
    /// its steps in grid units `q` (q[0] is q_1): for i from 2 to n − 1, q_i − q_{i−1}
    /// (predictor 0), q_i (pressure's 1) or q_i − q_1 (t's 1).
    static func residuals(_ q: [Int64], channel c: Int, predictor p: Int) -> [Int64] {
        (1..<q.count).map { i in
            if p == 0 { return q[i] - q[i - 1] }
            return c == pressure ? q[i] : q[i] - q[0]
        }
    }

    /// [PT2-12] The predictor the steps `q` choose: 1 exactly when its residuals' magnitudes
    /// sum to less than the second differences'.
    static func predictor(_ q: [Int64], channel c: Int) -> Int {
        func sum(_ r: [Int64]) -> Int128 { r.reduce(Int128(0)) { $0 + Int128($1.magnitude) } }
        return sum(residuals(q, channel: c, predictor: 1)) < sum(residuals(q, channel: c, predictor: 0)) ? 1 : 0
    }

    /// [PT2-3] The mode and grid of channel `c` of a stroke of 3 points or more.
    static func mode(_ v: [[Int64]], channel c: Int, contextGrid: Int64) -> (mode: Int, grid: Int64) {
        let steps = (1..<v.count).map { v[$0][c] - v[$0 - 1][c] }
        var g: Int64 = 0
        for d in steps { g = gcd(g, d) }
        if g == 0 { g = 1 }
        if c >= pressure, steps.allSatisfy({ $0 == steps[0] }) { return (3, g) }
        if g == contextGrid { return (0, g) }
        return g == 1 ? (1, g) : (2, g)
    }

    /// The stream of `points` coded against `context`, which it leaves as the stroke does.
    /// `forcedParameters`: with written parameters, the ones to write instead of [PT2-10]'s;
    /// `forcedGrids`: with grids, what to write for x's or y's grid instead of [PT2-11]'s
    /// choice (both to build streams a reader must refuse).
    static func encodedPoints(_ points: [StrokePoint], width: Int32, context: inout Context,
                              forcedParameters: [Int]? = nil, forcedGrids: [ForcedGrid?]? = nil,
                              forcedPredictors: [Int?]? = nil) -> [UInt8] {
        encodedPointsTraced(points, width: width, context: &context, forcedParameters: forcedParameters,
                            forcedGrids: forcedGrids, forcedPredictors: forcedPredictors).bytes
    }

    /// `encodedPoints`, with where x's and y's grid bits begin ([PT2-11]): the byte of the
    /// stream (from its `n`) that holds their first bit, nil where there are none.
    /// `forcedPredictors`: with predictors, the predictor to write for a channel instead of
    /// [PT2-12]'s (indexed by channel; to build streams a reader must refuse).
    static func encodedPointsTraced(_ points: [StrokePoint], width: Int32, context: inout Context,
                                    forcedParameters: [Int]? = nil, forcedGrids: [ForcedGrid?]? = nil,
                                    forcedPredictors: [Int?]? = nil)
        -> (bytes: [UInt8], gridBitsAt: [Int?]) {
        var out: [UInt8] = []
        let n = points.count
        appendVarint(UInt64(n), to: &out)
        guard n >= 1 else { return (out, [nil, nil]) }
        // [PT2-11] With a grid, x or y is coded as the values `u_i` in place of `v_i`.
        var v = points.map(values)
        let derived = v.allSatisfy { $0[radius] == derivedRadius(width: width, pressure: $0[pressure]) }
        let coded = derived ? [x, y, pressure, t] : [x, y, pressure, radius, t]
        var w = BitWriter()
        w.write(derived)
        // [PT2-11] The grid bits, for x then y, between `derived` and the modes.
        var chosenGrid: [Int?] = [nil, nil]
        var gridBitsAt: [Int?] = [nil, nil]
        if context.grids && n >= 3 {
            for c in [x, y] {
                gridBitsAt[c] = w.bits.count
                let preferred = c == x ? context.lastGrid[x] : (context.lastGrid[y] ?? chosenGrid[x])
                let column = v.map { $0[c] }
                let choice = gridChoice(column, preferred: preferred)
                let written = forcedGrids?[c] ?? ForcedGrid(index: choice?.index, phase: choice?.phase ?? 0)
                var same = false
                if let preferred {
                    same = !written.inFull && written.index == preferred
                    w.write(same)
                }
                if !same {
                    w.write(written.index != nil)
                    if let index = written.index { w.write(UInt64(index), width: 7) }
                }
                if let index = written.index, index < gridList.count {
                    let grid = gridList[index]
                    w.write(UInt64(written.phase), width: phaseBits(grid.q))
                    let u = gridUnits(column, grid, phase: written.phase)
                    for i in 0..<n { v[i][c] = u[i] }
                    chosenGrid[c] = index
                }
            }
        }
        var modes = [Int](repeating: -1, count: 5), grids = [Int64](repeating: 1, count: 5)
        var parameters = [Int](repeating: 0, count: 5)
        var predictors = [Int](repeating: 0, count: 5)
        if n >= 3 {
            for c in coded {
                let (m, g) = mode(v, channel: c, contextGrid: context.grid[c])
                (modes[c], grids[c]) = (m, g)
                w.write(UInt64(m), width: 2)
                if m == 2 { writeGamma(UInt64(g - 1), to: &w) }
                if context.predictors && m != 3 && (c == pressure || c == t) {
                    let q = (1..<n).map { (v[$0][c] - v[$0 - 1][c]) / g }
                    predictors[c] = forcedPredictors?[c] ?? predictor(q, channel: c)
                    w.write(predictors[c] == 1)
                }
                if context.writtenParameters && m != 3 {
                    parameters[c] = forcedParameters?[c] ?? bestParameter(secondDifferences(v, channel: c, grid: g))
                    // [PT2-10] 0 to 6 in 3 bits; 7, then the parameter less 7 in 3 bits.
                    if parameters[c] < 7 {
                        w.write(UInt64(parameters[c]), width: 3)
                    } else {
                        w.write(7, width: 3)
                        w.write(UInt64(parameters[c] - 7), width: 3)
                    }
                }
            }
        }
        for c in coded {
            writeRice(zigzag(v[0][c] - context.first[c]), state: &context.firstState[c], to: &w)
        }
        if n >= 2 {
            for c in coded {
                let d1 = v[1][c] - v[0][c]
                let s = n >= 3 && modes[c] != 3 ? d1 / grids[c] : d1
                writeRice(zigzag(s), state: &context.stepState[c], to: &w)
            }
        }
        if n >= 3 {
            for c in coded where modes[c] != 3 {
                let q = (1..<n).map { (v[$0][c] - v[$0 - 1][c]) / grids[c] }
                for r in residuals(q, channel: c, predictor: predictors[c]) {
                    if context.writtenParameters {
                        writeRice(zigzag(r), parameter: parameters[c], to: &w)
                    } else {
                        writeRice(zigzag(r), state: &context.secondState[c], to: &w)
                    }
                }
            }
        }
        let bytes = w.bytes
        appendVarint(UInt64(bytes.count), to: &out)
        for c in 0..<5 { context.first[c] = v[0][c] }
        for c in coded where modes[c] >= 0 && modes[c] != 3 { context.grid[c] = grids[c] }
        if context.grids && n >= 3 { context.lastGrid = chosenGrid }
        return (out + bytes, gridBitsAt.map { $0.map { out.count + $0 / 8 } })
    }

    // MARK: Reading

    struct Fault: Error {
        let code: LnoteError.Code
        let message: String
        let offset: Int
    }

    /// Reads one stream from `r` against `context`, leaving `r` after it and `context` as the
    /// stroke leaves it (on failure both are unspecified).
    /// - Throws: `LnoteError` (`truncated` or `corrupt`) at the absolute offset the spec
    ///   gives, with `r`'s path.
    static func decodePoints(_ r: inout ByteReader, width: Int32, context: inout Context) throws -> [StrokePoint] {
        var source = Source(bytes: r.bytes, base: r.base, position: r.position, end: r.end)
        do {
            let points = try source.points(width: width, context: &context)
            _ = try r.skip(source.position - r.position)
            return points
        } catch let f as Fault {
            throw LnoteError(f.code, f.message, path: r.path, offset: f.offset)
        }
    }

    struct Source {
        let bytes: [UInt8]
        let base: Int
        var position: Int
        let end: Int

        var offset: Int { base + position }

        /// Section 1, [PT2-1]: a varint of 1 to 10 bytes, at most 64 bits, shortest.
        mutating func varint(_ what: String) throws -> UInt64 {
            let start = offset
            var value: UInt64 = 0
            var length = 0
            while true {
                guard position < end else { throw Fault(code: .truncated, message: "varint cut: \(what)", offset: start) }
                let byte = bytes[position]
                position += 1
                length += 1
                if length == 10 && byte > 1 {
                    throw Fault(code: .corrupt, message: "varint too long: \(what)", offset: start)
                }
                value |= UInt64(byte & 0x7F) << UInt64(7 * (length - 1))
                if byte & 0x80 == 0 {
                    guard length == 1 || byte != 0 else {
                        throw Fault(code: .corrupt, message: "varint not shortest: \(what)", offset: start)
                    }
                    return value
                }
            }
        }

        mutating func points(width: Int32, context: inout Context) throws -> [StrokePoint] {
            typealias R = ReferenceStrokeCodecV2
            let countAt = offset
            let count = try varint("point count")
            guard count <= R.maxCount else {
                throw Fault(code: .corrupt, message: "[PT2-2] count: \(count) points", offset: countAt)
            }
            let n = Int(count)
            guard n >= 1 else { return [] }
            let lengthAt = offset
            let length = try varint("bit length L")
            guard length <= UInt64(end - position) else {
                throw Fault(code: .truncated, message: "[PT2-2] L: \(length) bytes, \(end - position) left", offset: lengthAt)
            }
            let l = Int(length)
            guard l > 0, n < 3 || n - 2 <= 4 * l else {
                throw Fault(code: .corrupt, message: "[PT2-2] bits: \(n) points in \(l) bytes", offset: countAt)
            }
            var bits = BitReader(bytes: bytes, start: position, length: l, base: base)
            let v = try bits.values(count: n, width: width, context: &context)
            position += l
            return v.map {
                StrokePoint(x: Int32($0[R.x]), y: Int32($0[R.y]), pressure: UInt16($0[R.pressure]),
                            radius: Int32($0[R.radius]), t: UInt32($0[R.t]))
            }
        }
    }

    /// The bits of one stream, read one at a time.
    struct BitReader {
        let bytes: [UInt8]
        let start: Int
        let length: Int
        let base: Int
        /// Bits read.
        var position = 0

        /// The absolute offset of the byte that holds the next bit.
        var byteAt: Int { base + start + position / 8 }

        /// [PT2-8] 7: the bits past the `L` bytes read as zeros; running past them is
        /// reported once the whole stream is read and checks 1 to 6 passed.
        mutating func bit() throws -> Bool {
            defer { position += 1 }
            guard position < 8 * length else { return false }
            return (bytes[start + position / 8] >> UInt8(position % 8)) & 1 == 1
        }

        mutating func bits(_ width: Int) throws -> UInt64 {
            var v: UInt64 = 0
            for j in 0..<width where try bit() { v |= 1 << UInt64(j) }
            return v
        }

        /// [PT2-5] A Rice value in state `m`; [PT2-8] 2 at the byte where the code begins.
        mutating func rice(_ m: inout UInt32, secondDifference: Bool, fixed: Bool = false) throws -> UInt64 {
            let codeAt = byteAt
            let k = ReferenceStrokeCodecV2.riceParameter(m)
            var zeros = 0
            while !(try bit()) {
                zeros += 1
                guard zeros <= 24 else {
                    throw Fault(code: .corrupt, message: "[PT2-8] 2 unary\(secondDifference ? " dd" : ""): a run of more than 24 zeros", offset: codeAt)
                }
            }
            let u: UInt64
            if zeros < 24 {
                u = UInt64(zeros) << UInt64(k) | (try bits(k))
            } else {
                u = try bits(40)
                guard u >> UInt64(k) >= 24 else {
                    throw Fault(code: .corrupt, message: "[PT2-8] 2 escape\(secondDifference ? " dd" : ""): \(u) with k \(k)",
                                offset: codeAt)
                }
            }
            if !fixed { ReferenceStrokeCodecV2.update(&m, u) }
            return u
        }

        func fault(_ message: String, at offset: Int) -> Fault { Fault(code: .corrupt, message: message, offset: offset) }

        mutating func values(count n: Int, width: Int32, context: inout Context) throws -> [[Int64]] {
            typealias R = ReferenceStrokeCodecV2
            let bitsAt = base + start
            let derived = try bit()
            let coded = derived ? [R.x, R.y, R.pressure, R.t] : [R.x, R.y, R.pressure, R.radius, R.t]
            var modes = [Int](repeating: -1, count: 5), grids = [Int64](repeating: 1, count: 5)
            var parameters = [Int](repeating: 0, count: 5)
            var predictors = [Int](repeating: 0, count: 5)

            // [PT2-11] The grid bits of x then y, checked as they are read.
            var digitizer: [(index: Int, phase: Int64)?] = [nil, nil]
            var gridBitsAt = [0, 0]
            func preferred(_ c: Int) -> Int? {
                c == R.x ? context.lastGrid[R.x] : (context.lastGrid[R.y] ?? digitizer[R.x]?.index)
            }
            if context.grids && n >= 3 {
                for c in [R.x, R.y] {
                    gridBitsAt[c] = byteAt
                    var same = false
                    if let p = preferred(c) {
                        same = try bit()
                        if same { digitizer[c] = (p, 0) }
                    }
                    if !same, try bit() {
                        let index = Int(try bits(7))
                        guard index < R.gridList.count else {
                            throw fault("[PT2-11] index: \(index) ≥ 85 on channel \(c)", at: gridBitsAt[c])
                        }
                        guard index != preferred(c) else {
                            throw fault("[PT2-11] preferred in full: \(index) on channel \(c)", at: gridBitsAt[c])
                        }
                        digitizer[c] = (index, 0)
                    }
                    if let index = digitizer[c]?.index {
                        let q = R.gridList[index].q
                        let phase = Int64(try bits(R.phaseBits(q)))
                        guard phase < q else {
                            throw fault("[PT2-11] phase: \(phase) ≥ q on \(R.gridList[index]), channel \(c)", at: gridBitsAt[c])
                        }
                        digitizer[c] = (index, phase)
                    }
                }
            }

            // 3a.2 2: modes and grids; [PT2-8] 1; [PT2-10] parameters.
            if n >= 3 {
                for c in coded {
                    let modeAt = byteAt
                    let m = Int(try bits(2))
                    switch m {
                    case 3 where c < R.pressure:
                        throw fault("[PT2-8] 1 linear x or y: channel \(c)", at: modeAt)
                    case 0:
                        grids[c] = context.grid[c]
                    case 1:
                        guard context.grid[c] != 1 else { throw fault("[PT2-8] 1 mode 1 on grid 1: channel \(c)", at: modeAt) }
                        grids[c] = 1
                    case 2:
                        var zeros = 0
                        while !(try bit()) {
                            zeros += 1
                            guard zeros < 40 else { throw fault("[PT2-8] 1 gamma: 40 leading zeros", at: modeAt) }
                        }
                        let g = Int64(1 << UInt64(zeros) | (try bits(zeros))) + 1
                        guard g < 1 << 32 else { throw fault("[PT2-8] 1 grid: \(g) ≥ 2³²", at: modeAt) }
                        guard g != context.grid[c] else { throw fault("[PT2-8] 1 grid: \(g) is the context's", at: modeAt) }
                        grids[c] = g
                    default:
                        break
                    }
                    modes[c] = m
                    // [PT2-12] Pressure's and t's predictor, right after the mode and grid.
                    if context.predictors && m != 3 && (c == R.pressure || c == R.t) {
                        predictors[c] = try bit() ? 1 : 0
                    }
                    if context.writtenParameters && m != 3 {
                        parameters[c] = Int(try bits(3))
                        if parameters[c] == 7 { parameters[c] += Int(try bits(3)) }
                    }
                }
            }

            // 3a.2 3: the first point; [PT2-8] 3.
            var v = [[Int64]](repeating: [0, 0, 0, 0, 0], count: n)
            for c in coded {
                let codeAt = byteAt
                let value = context.first[c] + R.unzigzag(try rice(&context.firstState[c], secondDifference: false))
                guard R.ranges[c].contains(value) else {
                    throw fault("[PT2-8] 3 first value: \(value) on channel \(c)", at: codeAt)
                }
                v[0][c] = value
            }

            // 3a.2 4: the first step; [PT2-8] 3 for a linear channel or a 2-point stroke.
            var q1 = [Int64](repeating: 0, count: 5)
            if n >= 2 {
                for c in coded {
                    let codeAt = byteAt
                    let s = R.unzigzag(try rice(&context.stepState[c], secondDifference: false))
                    if n == 2 || modes[c] == 3 {
                        let last = Int128(v[0][c]) + Int128(n - 1) * Int128(s)
                        guard last >= Int128(R.ranges[c].lowerBound), last <= Int128(R.ranges[c].upperBound) else {
                            throw fault("[PT2-8] 3 last value: \(last) on channel \(c)", at: codeAt)
                        }
                        for i in 1..<n { v[i][c] = v[0][c] + Int64(i) * s }
                    } else {
                        q1[c] = s
                    }
                }
            }

            // 3a.2 5: second differences; [PT2-8] 2 as each is read, then 4 and 5 on the
            // whole channel.
            if n >= 3 {
                for c in coded where modes[c] != 3 {
                    let ddAt = byteAt
                    let g = Int128(grids[c])
                    var qs = [q1[c]]
                    var us: [UInt64] = []
                    for _ in 2..<n {
                        let u: UInt64
                        if context.writtenParameters {
                            var m = UInt32(16) << UInt32(parameters[c])
                            u = try rice(&m, secondDifference: true, fixed: true)
                        } else {
                            u = try rice(&context.secondState[c], secondDifference: true)
                        }
                        us.append(u)
                        let r = R.unzigzag(u)
                        // [PT2-12] q_i from the residual of the channel's predictor.
                        if predictors[c] == 0 {
                            qs.append(qs[qs.count - 1] + r)
                        } else {
                            qs.append(c == R.pressure ? r : qs[0] + r)
                        }
                    }
                    var steps: [Int64] = []
                    for i in 1..<n {
                        let q = qs[i - 1]
                        let step = g * Int128(q)
                        guard step.magnitude < 1 << 33 else {
                            throw fault("[PT2-8] 4 step: |\(g)·\(q)| ≥ 2³³ on channel \(c)", at: ddAt)
                        }
                        let value = v[i - 1][c] + Int64(step)
                        guard R.ranges[c].contains(value) else {
                            throw fault("[PT2-8] 4 value: \(value) on channel \(c) at point \(i)", at: ddAt)
                        }
                        v[i][c] = value
                        steps.append(q)
                    }
                    if c >= R.pressure && qs.allSatisfy({ $0 == qs[0] }) {
                        throw fault("[PT2-8] 5 linear: channel \(c) coded in full", at: ddAt)
                    }
                    let divisor = steps.reduce(Int64(0)) { R.gcd($0, $1) }
                    guard divisor == 1 || (divisor == 0 && grids[c] == 1) else {
                        throw fault("[PT2-8] 5 gcd: q of channel \(c) have gcd \(divisor) (grid \(grids[c]))", at: ddAt)
                    }
                    if context.predictors && (c == R.pressure || c == R.t), predictors[c] != R.predictor(steps, channel: c) {
                        throw fault("[PT2-12] predictor: \(predictors[c]) on channel \(c), not \(R.predictor(steps, channel: c))", at: ddAt)
                    }
                    if context.writtenParameters, parameters[c] != R.bestParameter(us) {
                        throw fault("[PT2-8] 5 parameter: \(parameters[c]) on channel \(c), not \(R.bestParameter(us))", at: ddAt)
                    }
                }
            }

            // [PT2-11] Once every channel's second differences are read, for x then y: the
            // values rebuilt from the `u_i` in range, then the grid and phase the choice gives.
            if context.grids && n >= 3 {
                for c in [R.x, R.y] {
                    if let (index, phase) = digitizer[c] {
                        let grid = R.gridList[index]
                        let v0 = v[0][c]
                        for i in 0..<n {
                            let value = R.rebuilt(v[i][c], first: v0, grid, phase: phase)
                            guard R.ranges[c].contains(value) else {
                                throw fault("[PT2-11] rebuilt value: \(value) on channel \(c) at point \(i)", at: gridBitsAt[c])
                            }
                            v[i][c] = value
                        }
                    }
                    let choice = R.gridChoice(v.map { $0[c] }, preferred: preferred(c))
                    guard choice?.index == digitizer[c]?.index, choice?.phase == digitizer[c]?.phase else {
                        throw fault("[PT2-11] choice: \(digitizer[c].map { "\($0)" } ?? "none") on channel \(c), not \(choice.map { "\($0)" } ?? "none")",
                                    at: gridBitsAt[c])
                    }
                }
            }

            // 3a.2 1: the derived radius; [PT2-8] 6.
            for i in 0..<n {
                let d = R.derivedRadius(width: width, pressure: v[i][R.pressure])
                if derived { v[i][R.radius] = d }
            }
            if !derived, v.allSatisfy({ $0[R.radius] == R.derivedRadius(width: width, pressure: $0[R.pressure]) }) {
                throw fault("[PT2-8] 6 derived: the radius is the derived one", at: bitsAt)
            }

            // 3a.2 6: padding; [PT2-8] 7.
            guard position <= 8 * length else {
                throw fault("[PT2-8] 7 past L: the bits run past \(length) bytes", at: bitsAt + length)
            }
            let used = (position + 7) / 8
            guard used == length else {
                throw fault("[PT2-8] 7 unused byte: \(length - used) bytes after the bits", at: bitsAt + used)
            }
            while position < 8 * length {
                guard !(try bit()) else { throw fault("[PT2-8] 7 padding: a bit is set", at: bitsAt + length - 1) }
            }

            // Context: first values, and grids of channels in mode 0, 1 or 2.
            for c in 0..<5 { context.first[c] = v[0][c] }
            for c in coded where modes[c] >= 0 && modes[c] != 3 { context.grid[c] = grids[c] }
            if context.grids && n >= 3 { context.lastGrid = digitizer.map { $0?.index } }
            return v
        }
    }
}
