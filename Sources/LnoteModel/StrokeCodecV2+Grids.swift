/// Digitizer grids of x and y (issue 15; a prototype for the next point-stream version, not
/// written by any format yet: `Context.coordinateGrids` is false in every context a snapshot
/// or frame uses).
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

    /// `⌈n / d⌉` for `d > 0`.
    @inline(__always) static func ceilDiv(_ n: Int64, _ d: Int64) -> Int64 {
        n >= 0 ? (n + d - 1) / d : -((-n) / d)
    }

    /// `⌊n / d⌋` for `d > 0`.
    @inline(__always) static func floorDiv(_ n: Int64, _ d: Int64) -> Int64 {
        n >= 0 ? n / d : -((-n + d - 1) / d)
    }

    /// The smallest phase with which `n` values (`value(i)`, at most 2³² apart) fit `grid`,
    /// or nil. With `k`, the grid units `k_i` of that phase are stored there.
    static func fit(count n: Int, grid g: CoordinateGrid, k: UnsafeMutablePointer<Int64>? = nil,
                    _ value: (Int) -> Int64) -> Int64? {
        let v0 = value(0)
        phases: for p in 0..<g.q {
            for i in 0..<n {
                let low = g.q &* (value(i) &- v0) &- p
                let ki = ceilDiv(low, g.a)
                guard g.a &* ki < low &+ g.q else { continue phases }
                k?[i] = ki
            }
            return p
        }
        return nil
    }

    /// The value of grid units `k` (`k_0 = 0` at `v0`).
    @inline(__always) static func value(_ k: Int64, grid g: CoordinateGrid, phase p: Int64, first v0: Int64) -> Int64 {
        v0 &+ floorDiv(g.a &* k &+ p, g.q)
    }

    /// Bits of a grid's index in `coordinateGrids`.
    static let gridIndexBits = 7

    /// The canonical grid of a channel (an index into `coordinateGrids` plus 1, 0 for none)
    /// and its phase: the `preferred` grid when it fits, else the first of `coordinateGrids`
    /// that fits, else none.
    static func chooseGrid(count n: Int, preferred: Int, _ value: (Int) -> Int64) -> (index: Int, phase: Int64) {
        if preferred > 0, let p = fit(count: n, grid: coordinateGrids[preferred - 1], value) { return (preferred, p) }
        for (j, g) in coordinateGrids.enumerated() where j + 1 != preferred {
            if let p = fit(count: n, grid: g, value) { return (j + 1, p) }
        }
        return (0, 0)
    }

    /// The grid a channel prefers: x its last one; y its last one, or else the grid x has in
    /// this stroke.
    static func preferredGrid(_ ch: Int, context c: Context, x chosen: Int) -> Int {
        ch == x ? c.lastGrid.x : (c.lastGrid.y > 0 ? c.lastGrid.y : chosen)
    }
}
