import LnoteModel

// What drawing needs of an element's transform (16.16 fixed point, translation in tenths of
// a point): `PageRenderer`'s strokes and its highlights' bounds.
extension Transform {
    /// How much the linear part scales lengths (square root of |determinant|).
    var linearScale: Double {
        let det = (Double(a) * Double(d) - Double(b) * Double(c)) / (65536.0 * 65536.0)
        return abs(det).squareRoot()
    }

    /// The transform applied to (x, y), in tenths of a point (exact in Int64: |a·x| < 2^31 · 2^31).
    func apply(_ x: Int32, _ y: Int32) -> (Double, Double) {
        let xx = Int64(a) * Int64(x) + Int64(c) * Int64(y)
        let yy = Int64(b) * Int64(x) + Int64(d) * Int64(y)
        return (Double(xx) / 65536.0 + Double(tx), Double(yy) / 65536.0 + Double(ty))
    }
}
