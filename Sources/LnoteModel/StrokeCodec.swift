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

    /// [PTS-3] [PTS-5] Appends `L` and the bit stream of points 2 and later. The bit writer
    /// is a local, not an argument, so that its state can stay in registers.
    static func encodeStream(_ points: UnsafeBufferPointer<StrokePoint>, into w: inout ByteWriter) {
        var bits = BitWriter(capacity: points.count * 2 + 64)
        var s0 = RiceState(), s1 = RiceState(), s2 = RiceState(), s3 = RiceState(), s4 = RiceState()
        var c = RiceCount()
        // Second differences straight from three points in memory (loads are cheap) rather
        // than a running previous point and step, which would not fit in registers.
        for i in 2..<points.count {
            // A point takes at most 5 × 56 bits: at most 5 words stored.
            bits.reserve(40)
            let p2 = channelValues(points[i]), p1 = channelValues(points[i &- 1]), p0 = channelValues(points[i &- 2])
            s0.encode(zigzag32((p2.0 &- p1.0) &- (p1.0 &- p0.0)), c, into: &bits)
            s1.encode(zigzag32((p2.1 &- p1.1) &- (p1.1 &- p0.1)), c, into: &bits)
            s2.encode(zigzag32((p2.2 &- p1.2) &- (p1.2 &- p0.2)), c, into: &bits)
            s3.encode(zigzag32((p2.3 &- p1.3) &- (p1.3 &- p0.3)), c, into: &bits)
            s4.encode(zigzag32((p2.4 &- p1.4) &- (p1.4 &- p0.4)), c, into: &bits)
            c.advance()
        }
        w.varint(UInt64(bits.byteCount))
        bits.finish { w.append($0) }
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
        let result = r.bytes.withUnsafeBytes { raw in
            // `length` ≥ 1 here ((n − 2)·5 ≤ 8·length with n ≥ 3), so the bytes are not empty.
            let bits = BitReader(raw.baseAddress!, range: range)
            return Result { () throws(BitStreamFault) in
                try decodeStream(bits, count: n, first: first, second: v1, delta: delta)
            }
        }
        switch result {
        case let .success(points): return points
        case let .failure(fault): throw streamError(fault, range: range, base: r.base, path: r.path)
        }
    }

    /// [PTS-5] [PTS-8] Decodes points 2..<n from `reader` (points 0 and 1 given), then
    /// checks the stream's end. The reader is copied into a local so that its state stays
    /// in registers.
    static func decodeStream(_ reader: BitReader, count n: Int, first: StrokePoint, second: Channels,
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

