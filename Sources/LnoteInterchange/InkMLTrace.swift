import LnoteModel

/// The points of one `<trace>`: its text split into points and values, difference
/// prefixes resolved, channels converted ([XCH-3], [XCH-4], [XCH-5]), then one stroke.
enum InkMLTrace {
    /// How a channel's values are written at this point: explicit (`!`, the default), first
    /// differences (`'`) or second differences (`"`); a prefix holds until another one.
    enum Mode { case explicit, first, second }

    /// The bytes that end a value.
    static let valueEnds: Set<UInt8> = [0x20, 0x09, 0x0A, 0x0D, UInt8(ascii: ","), UInt8(ascii: "!"), UInt8(ascii: "'"),
                                        UInt8(ascii: "\""), UInt8(ascii: "-"), UInt8(ascii: "+")]

    struct ChannelState {
        var mode = Mode.explicit
        var last: Double?
        var velocity: Double = 0
    }

    static func stroke(_ text: String, format: [InkChannel], resolutions: [String: (Double, String)], style: InkStyle,
                       traceIndex: Int, textStart: Int, path: String?) throws -> Stroke {
        let bytes = Array(text.utf8)
        func fault(_ m: String, code: LnoteError.Code = .invalidArgument, at i: Int) -> LnoteError {
            LnoteError(code, "trace \(traceIndex): \(m)", path: path, offset: textStart + i, index: traceIndex)
        }
        // Conversions, one per channel used (nil: the channel is read and dropped).
        enum Use { case x, y, t, f, w, other }
        var uses: [Use] = []
        var factors: [Double] = []
        for c in format {
            let use: Use
            var factor = 1.0
            switch c.name {
            case "X", "Y", "W":
                use = c.name == "X" ? .x : c.name == "Y" ? .y : .w
                if let u = c.units {
                    guard let f = Units.length(u) else { throw fault("channel \(c.name): unsupported units \"\(u)\"", at: 0) }
                    factor = f
                } else if let r = resolutions[c.name] {
                    let (res, u) = r
                    guard u.hasPrefix("1/"), let f = Units.length(String(u.dropFirst(2))) else {
                        throw fault("channel \(c.name): unsupported resolution units \"\(u)\"", at: 0)
                    }
                    factor = f / res
                }
            case "T":
                use = .t
                switch c.units ?? "ms" {
                case "ms": factor = 1
                case "s": factor = 1000
                default: throw fault("channel T: unsupported units \"\(c.units ?? "")\"", at: 0)
                }
            case "F":
                use = .f
            default:
                use = .other
            }
            uses.append(use)
            factors.append(factor)
        }
        let required = format.filter { !$0.intermittent }.count
        var states = [ChannelState](repeating: ChannelState(), count: format.count)
        var samples: [InputSample] = []
        var values: [Double?] = []
        values.reserveCapacity(format.count)

        var widths: [Double?] = []
        // The offset of each point in the text: where an error about the point is.
        var pointStarts: [Int] = []
        var i = 0
        var pointStart = 0
        func finishPoint(at end: Int) throws {
            let k = samples.count
            guard values.count >= required else {
                throw fault("point \(k): \(values.count) values for \(required) channels", at: pointStart)
            }
            var s = InputSample(x: 0, y: 0)
            var w: Double?
            for (c, v) in values.enumerated() {
                let ch = format[c]
                switch uses[c] {
                case .x, .y:
                    guard let v else { throw fault("point \(k): \(ch.name) cannot be unknown", at: pointStart) }
                    let pt = factors[c] == 1 ? v : v * factors[c]
                    if uses[c] == .x { s.x = pt } else { s.y = pt }
                case .t:
                    s.t = v.map { factors[c] == 1 ? $0 : $0 * factors[c] }
                case .f:
                    guard let v else { break }
                    var p = v
                    if let max = ch.max {
                        let min = ch.min ?? 0
                        guard max > min else { throw fault("channel F: max \(max) is not above min \(min)", at: 0) }
                        p = (v - min) / (max - min)
                    }
                    guard p >= 0 && p <= 1 else { throw fault("point \(k): pressure \(v) is outside the channel's range", at: pointStart) }
                    s.pressure = p
                case .w:
                    guard let v else { break }
                    guard v >= 0 else { throw fault("point \(k): width \(v) is negative", at: pointStart) }
                    w = factors[c] == 1 ? v : v * factors[c]
                case .other:
                    break
                }
            }
            guard samples.count < Stroke.maxPoints else {
                throw fault("more than \(Stroke.maxPoints) points", code: .limitExceeded, at: pointStart)
            }
            samples.append(s)
            widths.append(w)
            pointStarts.append(pointStart)
            values.removeAll(keepingCapacity: true)
        }

        func isSpace(_ b: UInt8) -> Bool { b == 0x20 || b == 0x09 || b == 0x0A || b == 0x0D }
        while true {
            while i < bytes.count, isSpace(bytes[i]) { i += 1 }
            if values.isEmpty { pointStart = i }  // a point starts at its first value
            if i == bytes.count || bytes[i] == UInt8(ascii: ",") {
                if values.isEmpty && i == bytes.count && samples.isEmpty { break }
                if values.isEmpty { throw fault("point \(samples.count) is empty", at: i) }
                try finishPoint(at: i)
                if i == bytes.count { break }
                i += 1
                pointStart = i
                continue
            }
            // One value: prefixes, then a number or one of ? T F *.
            let c = values.count
            guard c < format.count else { throw fault("point \(samples.count): more values than the \(format.count) channels", at: i) }
            let tokenStart = i
            var mode: Mode?
            while i < bytes.count {
                switch bytes[i] {
                case UInt8(ascii: "!"): mode = .explicit
                case UInt8(ascii: "'"): mode = .first
                case UInt8(ascii: "\""): mode = .second
                default: break
                }
                if bytes[i] == UInt8(ascii: "!") || bytes[i] == UInt8(ascii: "'") || bytes[i] == UInt8(ascii: "\"") { i += 1 } else { break }
            }
            if let mode { states[c].mode = mode }
            guard i < bytes.count else { throw fault("a value prefix without a value", at: tokenStart) }
            let b = bytes[i]
            var value: Double?
            if b == UInt8(ascii: "?") {
                i += 1
                value = nil
            } else if b == UInt8(ascii: "T") || b == UInt8(ascii: "F") {
                i += 1
                value = b == UInt8(ascii: "T") ? 1 : 0
            } else {
                let start = i
                while i < bytes.count {
                    let d = bytes[i]
                    let isNum = (0x30...0x39).contains(d) || d == UInt8(ascii: ".") || d == UInt8(ascii: "e") || d == UInt8(ascii: "E")
                    let isSign = d == UInt8(ascii: "-") || d == UInt8(ascii: "+")
                    if isSign {
                        // A sign starts a value, unless it is an exponent's.
                        if i > start, bytes[i - 1] != UInt8(ascii: "e") && bytes[i - 1] != UInt8(ascii: "E") { break }
                    } else if !isNum { break }
                    i += 1
                }
                // A value ends at white space, a comma, a prefix or a sign: anything else
                // (`0x1p3`, `12abc`) makes the whole run not a number.
                let ends = InkMLTrace.valueEnds
                let clean = i == bytes.count || ends.contains(bytes[i])
                guard i > start, clean, let v = XMLInput.number(Substring(decoding: bytes[start..<i], as: UTF8.self)) else {
                    var end = min(bytes.count, max(i, start + 1))
                    while end < bytes.count, !ends.contains(bytes[end]) { end += 1 }
                    let shown = String(decoding: bytes[start..<end].prefix(24), as: UTF8.self)
                    throw fault("point \(samples.count): \"\(shown)\" is not a number", at: start)
                }
                value = v
            }
            // Differences are resolved in the channel's own units.
            if var v = value {
                var st = states[c]
                switch st.mode {
                case .explicit:
                    if let last = st.last { st.velocity = v - last }
                case .first:
                    guard let last = st.last else { throw fault("point \(samples.count): a difference without a previous value", at: tokenStart) }
                    st.velocity = v
                    v = last + v
                case .second:
                    guard let last = st.last else { throw fault("point \(samples.count): a difference without a previous value", at: tokenStart) }
                    st.velocity += v
                    v = last + st.velocity
                }
                guard v.isFinite else { throw fault("point \(samples.count): value out of range", at: tokenStart) }
                st.last = v
                states[c] = st
                value = v
            }
            values.append(value)
        }
        guard !samples.isEmpty else { throw fault("a trace without points", at: 0) }
        var stroke: Stroke
        do {
            stroke = try Stroke(samples: samples, style: style)
        } catch var e as LnoteError {
            // Stroke(samples:) names the point at fault in its index.
            e.offset = textStart + (e.index.flatMap { $0 < pointStarts.count ? pointStarts[$0] : nil } ?? 0)
            e.path = path
            e.index = traceIndex
            e.message = "trace \(traceIndex): \(e.message)"
            throw e
        }
        // [XCH-5] A W channel gives each point's radius: half the width, in tenths of a point.
        if widths.contains(where: { $0 != nil }) {
            var points = stroke.points
            for (k, w) in widths.enumerated() {
                guard let w else { continue }
                let tenths: Int32
                do { tenths = try Quantization.coordinate(w) } catch {
                    throw LnoteError(.invalidArgument, "trace \(traceIndex): point \(k): width \(w) is out of range",
                                     path: path, offset: textStart + pointStarts[k], index: traceIndex)
                }
                let r = Interchange.div(Int64(tenths), 2)
                guard r <= Int64(ContentBounds.maxRadius) else {
                    throw LnoteError(.invalidArgument, "trace \(traceIndex): point \(k): width \(w) is larger than \(ContentBounds.maxRadius / 5) pt",
                                     path: path, offset: textStart + pointStarts[k], index: traceIndex)
                }
                points[k].radius = Int32(r)
            }
            stroke = Stroke(style: stroke.style, points: points)
        }
        return stroke
    }
}

/// Arithmetic shared by the readers and the writer.
enum Interchange {
    /// `n / d` rounded half away from zero, exactly (`d > 0`): import-jsonl.md's `div`.
    static func div(_ n: Int64, _ d: Int64) -> Int64 {
        let q = n / d, r = n % d
        return 2 * r.magnitude >= d.magnitude ? q + (n < 0 ? -1 : 1) : q
    }
}
