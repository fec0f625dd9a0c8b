/// One point as `lnote show --points` prints it, written as bytes: `    X Y PRESSURE RADIUS T`
/// and a newline. X, Y and the radius in points with one decimal at most (`12.3`, `-0.5`,
/// `7`), the pressure as Swift prints `Double(pressure) / 1000` (`0.5`, `1.0`, `0.125`), the
/// time in whole milliseconds. A page of a million points is printed in a fraction of a
/// second this way; made as `String`s, the line cost about a microsecond.
public enum PointText {
    /// Appends the point's line to `out`.
    public static func line(_ p: StrokePoint, into out: inout [UInt8]) {
        for _ in 0..<4 { out.append(0x20) }
        tenths(p.x, into: &out)
        out.append(0x20)
        tenths(p.y, into: &out)
        out.append(0x20)
        thousandths(p.pressure, into: &out)
        out.append(0x20)
        tenths(p.radius, into: &out)
        out.append(0x20)
        decimal(UInt64(p.t), into: &out)
        out.append(0x0A)
    }

    /// Tenths as a decimal with one digit after the point, none when it is 0: what
    /// `%.1f` (or `%.0f` for a whole number) prints of `q / 10`.
    public static func tenths(_ q: Int32, into out: inout [UInt8]) {
        let a = Int64(q).magnitude
        if q < 0 { out.append(UInt8(ascii: "-")) }
        decimal(a / 10, into: &out)
        if a % 10 != 0 {
            out.append(UInt8(ascii: "."))
            out.append(UInt8(ascii: "0") + UInt8(a % 10))
        }
    }

    /// Thousandths as Swift's `description` of `Double(v) / 1000`: the shortest decimal that
    /// reads back as that double, which for these values is the exact one, with at least one
    /// digit after the point.
    public static func thousandths(_ v: UInt16, into out: inout [UInt8]) {
        decimal(UInt64(v / 1000), into: &out)
        out.append(UInt8(ascii: "."))
        var f = Int(v % 1000)
        if f == 0 {
            out.append(UInt8(ascii: "0"))
            return
        }
        var digits = 3
        while f % 10 == 0 {
            f /= 10
            digits -= 1
        }
        var divisor = 1
        for _ in 1..<digits { divisor *= 10 }
        while divisor > 0 {
            out.append(UInt8(ascii: "0") + UInt8(f / divisor % 10))
            divisor /= 10
        }
    }

    /// Decimal digits of `v`, no sign, no leading zero.
    public static func decimal(_ v: UInt64, into out: inout [UInt8]) {
        let start = out.count
        var rest = v
        repeat {
            out.append(UInt8(ascii: "0") + UInt8(rest % 10))
            rest /= 10
        } while rest > 0
        var i = start, j = out.count - 1
        while i < j {
            out.swapAt(i, j)
            i += 1
            j -= 1
        }
    }
}
