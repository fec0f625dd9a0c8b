/// Digitizer grids of x and y (`Protocol/page-snapshot.md` [PT2-11]; issue 15): what a context
/// *with grids* adds to the stream, the context of `addStroke3` frames and of version-3
/// snapshot chunks.
///
/// A pen's coordinates often sit on a grid that is not an integer grid at 0.1 pt: 0.75 pt with
/// an offset (steps of 7, 8, 15, 22, 23 tenths), 0.25 pt, 1/3 pt. Values `v_i` fit the grid of
/// `a/q` units (`a > q ≥ 1`, coprime) with phase `p` (`0 ≤ p < q`) when
/// `v_i = v_0 + ⌊(a·k_i + p)/q⌋` for integers `k_i` (`k_0 = 0`): the `k_i` are then coded in
/// the channel's place (as `v_0 + k_i`, so the first value is coded as before) and the values
/// rebuilt exactly, with no model of how the pen's coordinates were rounded. A grid is at most
/// one `k` per value (`a > q`), so the `k_i` are a function of the values, the grid and the
/// phase. Canonical choice: the context's grid when it fits, else the first grid of
/// `coordinateGrids` that fits (coarsest first), else none; the smallest phase that fits.
extension StrokeCodecV2 {
    package struct CoordinateGrid: Hashable, Sendable {
        /// The grid is `a / q` units.
        package let a: Int64
        package let q: Int64
        /// `⌊2⁶⁴ / a⌋ + 1`: `x mod a` for `x < 2³²` by two multiplications (Lemire's fastmod).
        let inverse: UInt64
        /// The same for `q`.
        let inverseQ: UInt64
        /// `⌊a / q⌋`: two different values on the grid are at least this far apart.
        let whole: Int64

        init(a: Int64, q: Int64) {
            self.a = a
            self.q = q
            inverse = UInt64.max / UInt64(a) &+ 1
            inverseQ = UInt64.max / UInt64(q) &+ 1
            whole = a / q
        }

        /// `⌊m / d⌋` for `m < 2³²` (Lemire's fastdiv) by one multiplication, with `inverse` = `⌊2⁶⁴ / d⌋ + 1`.
        @inline(__always) static func quotient(_ m: UInt64, _ d: Int64, _ inverse: UInt64) -> Int64 {
            d == 1 ? Int64(m) : Int64(inverse.multipliedFullWidth(by: m).high)
        }

        /// `⌊x / d⌋` (`d` being `a` or `q`, with its inverse).
        @inline(__always) static func floorDiv(_ x: Int64, _ d: Int64, _ inverse: UInt64) -> Int64 {
            let m = x.magnitude
            guard m < 1 << 31 else { return StrokeCodecV2.floorDiv(x, d) }
            if x >= 0 { return quotient(m, d, inverse) }
            return -quotient(m &+ UInt64(d) &- 1, d, inverse)
        }

        /// `⌈x / a⌉`.
        @inline(__always) func ceilDivA(_ x: Int64) -> Int64 { -CoordinateGrid.floorDiv(-x, a, inverse) }

        /// `⌊x / q⌋`.
        @inline(__always) func floorDivQ(_ x: Int64) -> Int64 { CoordinateGrid.floorDiv(x, q, inverseQ) }

        /// `x mod a` in `0 ..< a`, for any `x` (a division only past 2³²).
        @inline(__always) func remainder(_ x: Int64) -> Int64 {
            let m = x.magnitude
            guard m < 1 << 32 else {
                let r = x % a
                return r < 0 ? r &+ a : r
            }
            let r = Int64((inverse &* m).multipliedFullWidth(by: UInt64(a)).high)
            return x < 0 && r != 0 ? a &- r : r
        }
        /// Bits of a written phase: ⌈log₂ q⌉.
        var phaseBits: Int { q <= 1 ? 0 : 64 - (q - 1).leadingZeroBitCount }
    }

    /// The grids a stroke may name: every reduced `a/q` with `q ≤ 4` and `2 ≤ a/q ≤ 16`
    /// units (0.2 to 1.6 pt), coarsest first. Finer ones gain little and fit short strokes of
    /// gridless ink by chance.
    package static let coordinateGrids: [CoordinateGrid] = {
        var out: [CoordinateGrid] = []
        for q in Int64(1)...4 {
            for a in (2 * q)...(16 * q) where gcd(UInt64(a), UInt64(q)) == 1 {
                out.append(CoordinateGrid(a: a, q: q))
            }
        }
        // a/q descending: compare a·q' with a'·q (distinct reduced fractions never tie).
        return out.sorted { $0.a * $1.q > $1.a * $0.q }
    }()

    /// `⌊n / d⌋` for `d > 0`.
    @inline(__always) static func floorDiv(_ n: Int64, _ d: Int64) -> Int64 {
        n >= 0 ? n / d : -((-n + d - 1) / d)
    }

    /// The smallest phase with which `n` values (`value(i)`, at most 2³² apart) fit `grid`,
    /// or nil. With `k`, the grid units `k_i` of that phase are stored there.
    ///
    /// One remainder a value, whatever the phase: with `r_i = q·(v_i − v_0) mod a`, the
    /// values fit with phase `p` exactly when every `r_i` is in `[0, p]` or in `(a + p − q, a)`
    /// (the interval `[q·(v_i − v_0) − p, … + q)` then holds a multiple of `a`). As `a ≥ 2q`, a
    /// remainder below `q` must be at most `p`, one above `a − q` must exceed `a + p − q`, and
    /// any other fits no phase: the smallest phase is the largest remainder below `q`, if it
    /// leaves room for the smallest one above `a − q`.
    ///
    /// `far`: a point to try first (the one farthest from the first, where a grid slightly
    /// coarser or finer than the pen's has drifted most).
    static func fit(count n: Int, grid g: CoordinateGrid, k: UnsafeMutablePointer<Int64>? = nil, far: Int = 0,
                    _ value: (Int) -> Int64) -> Int64? {
        let v0 = value(0)
        let a = g.a, q = g.q
        if far > 0 {
            let r = g.remainder(q &* (value(far) &- v0))
            guard r < q || r > a &- q else { return nil }
        }
        var low: Int64 = 0, high = a
        for i in 1..<max(1, n) {
            let r = g.remainder(q &* (value(i) &- v0))
            if r < q {
                if r > low { low = r }
            } else if r > a &- q {
                if r < high { high = r }
            } else {
                return nil
            }
            guard low <= high &- a &+ q &- 1 else { return nil }
        }
        if let k {
            k[0] = 0
            for i in 1..<max(1, n) { k[i] = g.ceilDivA(q &* (value(i) &- v0) &- low) }
        }
        return low
    }

    /// The value of grid units `k` (`k_0 = 0` at `v0`).
    @inline(__always) static func value(_ k: Int64, grid g: CoordinateGrid, phase p: Int64, first v0: Int64) -> Int64 {
        v0 &+ g.floorDivQ(g.a &* k &+ p)
    }

    /// Bits of a grid's index in `coordinateGrids`.
    static let gridIndexBits = 7

    /// The canonical grid of a channel (an index into `coordinateGrids` plus 1, 0 for none)
    /// and its phase: the `preferred` grid when it fits, else the first of `coordinateGrids`
    /// that fits, else none.
    ///
    /// Only grids no coarser than the smallest step can fit: two different values on grid
    /// `a/q` differ by at least `⌊a/q⌋` (`⌊x + y⌋ ≥ ⌊x⌋ + ⌊y⌋`), so a step of 1 tenth rules
    /// out every grid without a remainder taken (gridless ink pays one pass over its steps).
    static func chooseGrid(count n: Int, preferred: Int, _ value: (Int) -> Int64) -> (index: Int, phase: Int64) {
        if preferred > 0, let p = fit(count: n, grid: coordinateGrids[preferred - 1], value) { return (preferred, p) }
        var step = Int64.max
        let v0 = value(0)
        var previous = v0, far = 0, farthest: UInt64 = 0
        for i in 1..<max(1, n) {
            let v = value(i)
            let d = (v &- previous).magnitude
            if d != 0 && d < step.magnitude { step = Int64(d) }
            let span = (v &- v0).magnitude
            if span > farthest { (far, farthest) = (i, span) }
            previous = v
        }
        return coordinateGrids.withUnsafeBufferPointer { grids in
            var j = 0
            while j < grids.count && grids[j].whole > step { j += 1 }
            while j < grids.count {
                if j + 1 != preferred, let p = fit(count: n, grid: grids[j], far: far, value) { return (j + 1, p) }
                j += 1
            }
            return (0, 0)
        }
    }

}
