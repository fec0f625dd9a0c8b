/// Version 2 of the point stream, the one snapshot format versions 2 to 4 and the compact
/// stroke frames write (`Protocol/page-snapshot.md` section 3a, [PT2-1] … [PT2-12]).
///
/// Built for real pen recordings (issue 15): short strokes, points 1 to 5 pt apart on a
/// digitizer grid, channels that are often absent. In short:
///
/// - a varint point count `n`, then (for `n ≥ 1`) a varint byte length `L` and `L` bytes of a
///   bit stream, least significant bit first;
/// - in the bits: whether the radius is the one the import derives from pressure and width
///   (then it is not stored); for `n ≥ 3` a mode per channel: the channel's grid (the
///   greatest common divisor of its steps: the same as the previous stroke's, 1, or given),
///   or, for pressure, radius and time, "linear" (every step equal to the first: an absent
///   time channel, a constant pressure);
/// - the first point as differences from the previous stroke's first point, the first step,
///   then the second differences of each channel's steps divided by its grid, channel after
///   channel;
/// - every value in an adaptive Rice code whose parameter follows a running mean of the
///   values of its kind (one state per channel and kind, carried from stroke to stroke).
///
/// The previous stroke, the grids and the Rice states are the `Context`: a snapshot starts a
/// new one at every 64th element record so that chunks of records decode independently.
///
/// Decoding reads 64 bits at a time and takes a few operations per value, with no
/// allocation but the points. The encoding is canonical: every point list has exactly one
/// encoding in a given context, and the decoder rejects every other bit string, so
/// `encode(decode(b)) == b` whenever `decode(b)` succeeds.
public enum StrokeCodecV2 {
    /// Channels in stream order.
    static let x = 0, y = 1, pressure = 2, radius = 3, time = 4

    /// A unary run this long is an escape: 40 raw bits follow ([PT2-5]).
    static let escapeRun = 24
    static let escapeBits = 40
    /// How far one value moves a Rice state (so that one huge jump does not make the next
    /// hundred values expensive).
    static let stateCap: UInt64 = 1 << 16
    /// Initial Rice states (16 × an expected mean) for first-point differences, first steps
    /// and second differences.
    static let initialFirst: UInt32 = 16 * 64
    static let initialStep: UInt32 = 16 * 16
    static let initialSecond: UInt32 = 16 * 4

    /// What a stroke's stream is coded against: the previous stroke of the same chunk.
    public struct Context: Sendable, Hashable {
        /// The previous stroke's first point, per channel.
        var first: SIMD8<Int64> = [0, 0, 500, 0, 0, 0, 0, 0]
        /// The grid each channel used last (1 before any).
        var grid: SIMD8<UInt64> = SIMD8(repeating: 1)
        /// Rice states: first-point differences, first steps, second differences.
        var firstState = SIMD8<UInt32>(repeating: StrokeCodecV2.initialFirst)
        var stepState = SIMD8<UInt32>(repeating: StrokeCodecV2.initialStep)
        var secondState = SIMD8<UInt32>(repeating: StrokeCodecV2.initialSecond)
        /// Each channel's second differences in a Rice code of one parameter written after
        /// its mode (0 to 14, the one that codes them in fewest bits), instead of the adaptive
        /// second-difference state: what an `addStroke2` frame's stroke is coded with
        /// ([PT2-10]). A stroke alone has no values before it for a state to learn from.
        var writtenParameters = false
        /// x and y may sit on a digitizer grid named in the stream ([PT2-11],
        /// `StrokeCodecV2+Grids`): a context *with grids* (`addStroke3` frames, version-3
        /// snapshot chunks).
        var coordinateGrids = false
        /// The digitizer grid x and y used last.
        package var lastGrid = LastGrids()
        /// Pressure and time may be coded by their *predictors* ([PT2-12]): pressure's steps
        /// themselves, time's steps against its first step, each chosen per stroke against
        /// second differences (a context *with predictors*: version-4 snapshot chunks). Never
        /// with `writtenParameters` (no context has both: a written parameter is chosen for
        /// second differences, [PT2-10], and the encoder would not apply a predictor there).
        var predictors = false
        public init() {}

        /// x's and y's last digitizer grids: an index into `coordinateGrids` plus 1, 0 for none.
        package struct LastGrids: Sendable, Hashable {
            package var x = 0
            package var y = 0
        }

        /// The context of a stroke coded alone, in an `addStroke` operation frame
        /// (`Protocol/operation-log.md` [LOG-24]): the default first point and grids, and
        /// Rice states tuned for one stroke with nothing before it. The first point is coded
        /// against (0, 0, 500, 0, 0), so its x and y are page coordinates (a few thousand
        /// tenths); its time is always 0.
        public static let standalone: Context = {
            var c = Context()
            // x, y, pressure, radius, t: 16 × the expected magnitude of each value.
            c.firstState = [16 * 4096, 16 * 4096, 16 * 256, 16 * 16, 16, 16, 16, 16]
            c.stepState = [16 * 8, 16 * 8, 16 * 16, 16 * 4, 16 * 8, 16, 16, 16]
            return c
        }()

        /// The context of a stroke coded alone in an `addStroke2` frame
        /// (`Protocol/operation-log.md` [LOG-29]): `standalone` with written parameters.
        public static let standaloneWithParameters: Context = {
            var c = standalone
            c.writtenParameters = true
            return c
        }()

        /// The context of a stroke coded alone in an `addStroke3` frame
        /// (`Protocol/operation-log.md` [LOG-32]): `standaloneWithParameters` with grids
        /// ([PT2-11]).
        public static let standaloneWithGrids: Context = {
            var c = standaloneWithParameters
            c.coordinateGrids = true
            return c
        }()

        /// The standalone context of a compact stroke frame of `version`: 1 `addStroke`
        /// (`standalone`), 2 `addStroke2` (`standaloneWithParameters`), 3 `addStroke3`
        /// (`standaloneWithGrids`).
        public static func frame(version: Int) -> Context {
            switch version {
            case 1: return standalone
            case 2: return standaloneWithParameters
            case 3: return standaloneWithGrids
            default: preconditionFailure("no compact stroke frame version \(version)")
            }
        }

        /// The context at the start of a chunk of a version-3 snapshot ([SNAP-42]): the
        /// initial context with grids ([PT2-11]).
        public static let chunkWithGrids: Context = {
            var c = Context()
            c.coordinateGrids = true
            return c
        }()

        /// The context at the start of a chunk of a version-4 snapshot ([SNAP-43]): the
        /// initial context with grids ([PT2-11]) and predictors ([PT2-12]).
        public static let chunkWithPredictors: Context = {
            var c = chunkWithGrids
            c.predictors = true
            return c
        }()
    }

    /// A written parameter ([PT2-10]): 3 bits for 0 to 6; 7 in them says 3 more bits follow,
    /// the parameter less 7 (7 to 14).
    static let parameterBits = 3
    static let parameterEscape: UInt64 = 7
    /// The parameters a written one can name: 0 to 14.
    static let parameterCount = 15

    /// [PT2-10] What each Rice parameter `k` in 0…14 would cost a channel's second
    /// differences: `q + 1 + k` bits a value with `q = u >> k`, or 65 for an escape
    /// (`q ≥ 24`). Plain integer work in one fixed buffer (SIMD lanes cost microseconds a value
    /// in a debug build, which the test suite runs).
    struct ParameterCosts {
        private var bits: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64,
                           UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)

        @inline(__always) mutating func add(_ u: UInt64) {
            withUnsafeMutableBytes(of: &bits) { raw in
                let cost = raw.baseAddress!.assumingMemoryBound(to: UInt64.self)
                var q = u
                for k in 0..<StrokeCodecV2.parameterCount {
                    cost[k] &+= q < UInt64(StrokeCodecV2.escapeRun) ? q &+ 1 &+ UInt64(k)
                                                                     : UInt64(StrokeCodecV2.escapeRun + 1 + StrokeCodecV2.escapeBits)
                    q &>>= 1
                }
            }
        }

        /// The parameter of the least cost, the smallest on a tie.
        var cheapest: Int {
            withUnsafeBytes(of: bits) { raw in
                let cost = raw.baseAddress!.assumingMemoryBound(to: UInt64.self)
                var best = 0
                for k in 1..<StrokeCodecV2.parameterCount where cost[k] < cost[best] { best = k }
                return best
            }
        }
    }

    /// Channel modes, two bits each ([PT2-3]).
    enum Mode: UInt64 {
        case sameGrid = 0, unitGrid = 1, givenGrid = 2, linear = 3
    }

    @inline(__always) static func values(_ p: StrokePoint) -> SIMD8<Int64> {
        [Int64(p.x), Int64(p.y), Int64(p.pressure), Int64(p.radius), Int64(p.t), 0, 0, 0]
    }

    /// The Rice parameter of a state: about log2 of the running mean.
    @inline(__always) static func parameter(_ m: UInt32) -> Int {
        let bits = 32 - m.leadingZeroBitCount
        return bits > 5 ? bits - 5 : 0
    }

    @inline(__always) static func update(_ m: inout UInt32, _ u: UInt64) {
        m = m &+ UInt32(truncatingIfNeeded: min(u, stateCap)) &- (m &>> 4)
    }

    /// `Stroke.radius(width:pressure:)` ([IMP-6]), with a division by a constant for the
    /// usual non-negative width.
    @inline(__always) static func derivedRadius(_ width: Int32, _ pressure: UInt16) -> Int32 {
        guard width >= 0 else { return Stroke.radius(width: width, pressure: pressure) }
        return Int32(clamping: (Int64(width) &* (500 &+ Int64(pressure)) &+ 1000) / 2000)
    }

    /// The inverse of odd `o` modulo 2⁶⁴ (Newton's iteration: each step doubles the correct
    /// low bits, from 3 for `o` itself), as a signed value: `(o·k) &* inverse == k` for every
    /// `k`, so an exact multiple of `o` is divided by one multiplication.
    static func oddInverse(_ o: UInt64) -> Int64 {
        precondition(o & 1 == 1)
        var x = o
        for _ in 0..<5 { x = x &* (2 &- o &* x) }
        return Int64(bitPattern: x)
    }

    static func gcd(_ a: UInt64, _ b: UInt64) -> UInt64 {
        var a = a, b = b
        while b != 0 { (a, b) = (b, a % b) }
        return a
    }

    // MARK: Encoding

    /// Appends the stream of `points` (a stroke of ink `width`) to `w`, coded against and
    /// then advancing `context`. A deterministic function of the points, width and context.
    public static func encodePoints(_ points: [StrokePoint], width: Int32, context c: inout Context,
                                    into w: inout ByteWriter) {
        let n = points.count
        w.varint(UInt64(n))
        guard n > 0 else { return }
        let derived = points.allSatisfy { $0.radius == derivedRadius(width, $0.pressure) }
        // Each coded channel's n − 1 steps, channel after channel, in one scratch buffer (on
        // the stack for short strokes): no allocation per channel.
        let stream = withUnsafeTemporaryAllocation(of: Int64.self, capacity: max(1, 5 * (n - 1))) { scratch in
            encodeBits(points, derived: derived, steps: scratch.baseAddress!, context: &c)
        }
        w.varint(UInt64(stream.count))
        w.append(stream)
    }

    /// The bits of `encodePoints` ([PT2-1] 3a.2), with `steps` room for 5 × (n − 1) values.
    static func encodeBits(_ points: [StrokePoint], derived: Bool, steps: UnsafeMutablePointer<Int64>,
                           context c: inout Context) -> [UInt8] {
        let n = points.count
        var bits = RiceWriter(capacity: 16 + n * 3)
        bits.put(derived ? 1 : 0, 1)
        let v0 = values(points[0])
        var modes = SIMD8<UInt64>(repeating: Mode.unitGrid.rawValue)
        var grids = SIMD8<UInt64>(repeating: 1)
        var parameters = SIMD8<UInt64>(repeating: 0)
        var predictor = SIMD8<UInt64>(repeating: Predictor.second.rawValue)
        let coded = SIMD8<Int64>(1, 1, 1, derived ? 0 : 1, 1, 0, 0, 0) .== 1
        let hasSteps = n >= 2
        @inline(__always) func row(_ ch: Int) -> UnsafeMutablePointer<Int64> { steps + ch * (n - 1) }
        // [PT2-11] x and y's digitizer grids, right after `derived` (index into
        // `coordinateGrids` plus 1, 0 for none; phase).
        var gridX = (index: 0, phase: Int64(0)), gridY = gridX
        if c.coordinateGrids && n >= 3 {
            points.withUnsafeBufferPointer { p in
                gridX = chooseGrid(count: n, preferred: c.lastGrid.x) { Int64(p[$0].x) }
                writeGrid(gridX, preferred: c.lastGrid.x, into: &bits)
                let preferredY = c.lastGrid.y > 0 ? c.lastGrid.y : gridX.index
                gridY = chooseGrid(count: n, preferred: preferredY) { Int64(p[$0].y) }
                writeGrid(gridY, preferred: preferredY, into: &bits)
            }
            c.lastGrid = Context.LastGrids(x: gridX.index, y: gridY.index)
        }
        if hasSteps {
            points.withUnsafeBufferPointer { p in
                // One loop per channel, so that no point pays a switch on the channel.
                @inline(__always) func differences(_ d: UnsafeMutablePointer<Int64>, _ value: (StrokePoint) -> Int64) {
                    var previous = value(p[0])
                    for i in 1..<n {
                        let v = value(p[i])
                        d[i - 1] = v &- previous
                        previous = v
                    }
                }
                differences(row(x)) { Int64($0.x) }
                differences(row(y)) { Int64($0.y) }
                differences(row(pressure)) { Int64($0.pressure) }
                if coded[radius] { differences(row(radius)) { Int64($0.radius) } }
                differences(row(time)) { Int64($0.t) }
                // On a grid, the steps are in grid units ([PT2-11]).
                if gridX.index > 0 || gridY.index > 0 {
                    withUnsafeTemporaryAllocation(of: Int64.self, capacity: n) { k in
                        if gridX.index > 0 {
                            _ = fit(count: n, grid: coordinateGrids[gridX.index - 1], k: k.baseAddress!) { Int64(p[$0].x) }
                            for i in 1..<n { row(x)[i - 1] = k[i] &- k[i - 1] }
                        }
                        if gridY.index > 0 {
                            _ = fit(count: n, grid: coordinateGrids[gridY.index - 1], k: k.baseAddress!) { Int64(p[$0].y) }
                            for i in 1..<n { row(y)[i - 1] = k[i] &- k[i - 1] }
                        }
                    }
                }
            }
        }
        if n >= 3 {
            for ch in 0..<5 where coded[ch] {
                let d = row(ch)
                if ch >= pressure && (1..<(n - 1)).allSatisfy({ d[$0] == d[0] }) {
                    modes[ch] = Mode.linear.rawValue
                    bits.put(Mode.linear.rawValue, 2)
                    continue
                }
                var g: UInt64 = 0
                // The step first: a step that is a multiple of the grid so far costs one
                // remainder, not three.
                for i in 0..<(n - 1) where g != 1 { g = gcd(d[i].magnitude, g) }
                if g == 0 { g = 1 }
                grids[ch] = g
                if g == c.grid[ch] {
                    modes[ch] = Mode.sameGrid.rawValue
                    bits.put(Mode.sameGrid.rawValue, 2)
                } else if g == 1 {
                    modes[ch] = Mode.unitGrid.rawValue
                    bits.put(Mode.unitGrid.rawValue, 2)
                } else {
                    modes[ch] = Mode.givenGrid.rawValue
                    bits.put(Mode.givenGrid.rawValue, 2)
                    bits.gamma(g - 1)
                }
                if g != 1 {
                    // The steps in grid units. Exact quotients: every step is a multiple of
                    // the grid, so a shift and a multiplication by the inverse of its odd
                    // part divide it (no division instruction per step).
                    let shift = Int64(g.trailingZeroBitCount)
                    let inverse = oddInverse(g &>> UInt64(shift))
                    for i in 0..<(n - 1) { d[i] = (d[i] &>> shift) &* inverse }
                }
                if c.predictors, let alternative = Predictor.alternative(ch) {
                    // [PT2-12] The channel's predictor: its alternative when the residuals'
                    // magnitudes sum to less than the second differences'.
                    let chosen = Predictor.choose(alternative, count: n - 1) { d[$0] }
                    predictor[ch] = chosen.rawValue
                    bits.put(chosen == .second ? 0 : 1, 1)
                }
                if c.writtenParameters {
                    // [PT2-10] The second differences' best parameter.
                    var cost = ParameterCosts()
                    for i in 0..<(n - 2) { cost.add(zigzag(d[i &+ 1] &- d[i])) }
                    let k = UInt64(cost.cheapest)
                    parameters[ch] = k
                    if k < parameterEscape {
                        bits.put(k, parameterBits)
                    } else {
                        bits.put(parameterEscape, parameterBits)
                        bits.put(k - parameterEscape, parameterBits)
                    }
                }
            }
        }
        for ch in 0..<5 where coded[ch] {
            bits.rice(zigzag(v0[ch] &- c.first[ch]), &c.firstState[ch])
        }
        if hasSteps {
            for ch in 0..<5 where coded[ch] {
                // In grid units for a channel in mode 0, 1 or 2 (divided above).
                bits.rice(zigzag(row(ch)[0]), &c.stepState[ch])
            }
        }
        if n >= 3 {
            for ch in 0..<5 where coded[ch] && modes[ch] != Mode.linear.rawValue {
                let d = row(ch)
                if c.writtenParameters {
                    var state = UInt32(16) << UInt32(parameters[ch])
                    bits.riceRun(count: n - 2, state: &state, fixed: true) { zigzag(d[$0 &+ 1] &- d[$0]) }
                } else {
                    var state = c.secondState[ch]
                    switch Predictor(rawValue: predictor[ch])! {
                    case .second: bits.riceRun(count: n - 2, state: &state) { zigzag(d[$0 &+ 1] &- d[$0]) }
                    case .steps: bits.riceRun(count: n - 2, state: &state) { zigzag(d[$0 &+ 1]) }
                    case .againstFirst:
                        let first = d[0]
                        bits.riceRun(count: n - 2, state: &state) { zigzag(d[$0 &+ 1] &- first) }
                    }
                    c.secondState[ch] = state
                }
                c.grid[ch] = grids[ch]
            }
        }
        c.first = v0
        return bits.finish()
    }

    /// [PT2-12] What a channel's values 2 to n − 1 are coded as, in grid units `q_i`: second
    /// differences `q_i − q_{i−1}` ([PT2-6]), or, in a context with predictors, pressure's steps
    /// `q_i` or time's steps against the first `q_i − q_1`.
    enum Predictor: UInt64 {
        case second = 0, steps = 1, againstFirst = 2

        /// The alternative to second differences of channel `ch`, nil for x, y and radius.
        static func alternative(_ ch: Int) -> Predictor? {
            switch ch {
            case StrokeCodecV2.pressure: .steps
            case StrokeCodecV2.time: .againstFirst
            default: nil
            }
        }

        /// The residual of step `i ≥ 1` (grid units) given the previous step and the first.
        @inline(__always) func residual(_ step: Int64, previous: Int64, first: Int64) -> Int64 {
            switch self {
            case .second: step &- previous
            case .steps: step
            case .againstFirst: step &- first
            }
        }

        /// [PT2-12] The predictor of a channel whose `count` steps are `step(0) … step(count − 1)`
        /// (any common scale: grid units or not, the comparison is the same): `alternative`
        /// exactly when the magnitudes of its residuals of steps 1 to count − 1 sum to less than
        /// those of the second differences (exact: steps are below 2^34, at most 2^20 of them).
        @inline(__always)
        static func choose(_ alternative: Predictor, count: Int, step: (Int) -> Int64) -> Predictor {
            var second: UInt64 = 0, other: UInt64 = 0
            let first = step(0)
            var previous = first
            for i in 1..<count {
                let d = step(i)
                second &+= (d &- previous).magnitude
                other &+= alternative.residual(d, previous: previous, first: first).magnitude
                previous = d
            }
            return other < second ? alternative : .second
        }
    }

    /// [PT2-11] A channel's grid bits: `same` when it has a preferred grid, then, unless the
    /// preferred one is chosen, `on` and the 7-bit index; then the phase.
    static func writeGrid(_ g: (index: Int, phase: Int64), preferred: Int, into bits: inout RiceWriter) {
        if preferred > 0 { bits.put(g.index == preferred ? 1 : 0, 1) }
        if preferred == 0 || g.index != preferred {
            bits.put(g.index > 0 ? 1 : 0, 1)
            if g.index > 0 { bits.put(UInt64(g.index - 1), gridIndexBits) }
        }
        if g.index > 0 {
            let grid = coordinateGrids[g.index - 1]
            if grid.phaseBits > 0 { bits.put(UInt64(g.phase), grid.phaseBits) }
        }
    }

    /// A bit stream written least significant bit first, over the module's `BitWriter`:
    /// pending bits in a register, 8-byte stores, no array appends.
    struct RiceWriter: ~Copyable {
        var writer: BitWriter

        init(capacity: Int) { writer = BitWriter(capacity: capacity) }

        /// The low `n` bits of `v` (n ≤ 32; fewer than 32 bits wait between calls).
        @inline(__always) mutating func put(_ v: UInt64, _ n: Int) {
            writer.cursor.append(v, count: UInt64(n))
            if writer.cursor.filled >= 32 {
                writer.reserve(8)
                writer.flush()
            }
        }

        /// `v ≥ 1` as Elias gamma: `b − 1` zeros, a one, then the low `b − 1` bits of `v`,
        /// where `b` is its bit length.
        mutating func gamma(_ v: UInt64) {
            let b = 64 - v.leadingZeroBitCount
            put(1 << UInt64(b - 1), b)
            if b > 1 { put(v & ((1 << UInt64(b - 1)) - 1), b - 1) }
        }

        /// `u` in the adaptive Rice code of state `m` ([PT2-5]), then the state updated.
        @inline(__always) mutating func rice(_ u: UInt64, _ m: inout UInt32) {
            let k = StrokeCodecV2.parameter(m)
            let q = u >> UInt64(k)
            if q < UInt64(StrokeCodecV2.escapeRun) {
                let low = u & ((1 << UInt64(k)) &- 1)
                let n = Int(q) &+ 1 &+ k
                if n <= 32 {
                    put((1 << q) | low &<< (q &+ 1), n)
                } else {
                    put(1 << q, Int(q) + 1)
                    put(low, k)
                }
            } else {
                put(1 << UInt64(StrokeCodecV2.escapeRun), StrokeCodecV2.escapeRun + 1)
                put(u & ((1 << 20) - 1), 20)
                put(u >> 20, StrokeCodecV2.escapeBits - 20)
            }
            StrokeCodecV2.update(&m, u)
        }

        /// `rice(value(i), &m)` for `i` in `0..<count`: the hot loop of encoding, with the
        /// pending bits in locals.
        /// `fixed`: the state's parameter stays (a written parameter, [PT2-10]).
        @inline(__always) mutating func riceRun(count: Int, state m: inout UInt32, fixed: Bool = false, _ value: (Int) -> UInt64) {
            var acc = writer.cursor.acc, filled = writer.cursor.filled
            for i in 0..<count {
                let u = value(i)
                let k = UInt64(StrokeCodecV2.parameter(m))
                let q = u &>> k
                let n = q &+ 1 &+ k
                if q < UInt64(StrokeCodecV2.escapeRun) && n <= 32 {
                    acc |= ((1 &<< q) | (u & ((1 &<< k) &- 1)) &<< (q &+ 1)) &<< filled
                    filled &+= n
                    if filled >= 32 {
                        writer.cursor.acc = acc; writer.cursor.filled = filled
                        writer.reserve(8)
                        writer.flush()
                        acc = writer.cursor.acc; filled = writer.cursor.filled
                    }
                    if !fixed { StrokeCodecV2.update(&m, u) }
                } else {
                    writer.cursor.acc = acc; writer.cursor.filled = filled
                    let kept = m
                    rice(u, &m)
                    if fixed { m = kept }
                    acc = writer.cursor.acc; filled = writer.cursor.filled
                }
            }
            writer.cursor.acc = acc; writer.cursor.filled = filled
        }

        mutating func finish() -> [UInt8] {
            writer.finish { Array($0) }
        }
    }
}
