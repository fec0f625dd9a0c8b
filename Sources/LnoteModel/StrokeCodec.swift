/// Encodes a stroke's point stream compactly and losslessly.
///
/// The layout is specified byte by byte in `Protocol/page-snapshot.md` ("Point stream",
/// [PTS-1] … [PTS-11]). In short:
///
/// - a varint point count `n`;
/// - the first point in plain varints;
/// - for `n ≥ 2`, the first step (point 1 minus point 0) per channel in zigzag varints;
/// - for `n ≥ 3`, the byte lengths `H` and `G` of two streams, then the streams. Points 2
///   and later go in blocks of eight; for each block and each of the five channels (x, y,
///   pressure, radius, t), the second differences of the channel (delta-of-delta, modulo
///   2³², zigzag-mapped) are bit-packed at the narrowest of 16 widths that holds them all
///   (the packed values, `G` bytes), and the width's code is written, relative to the
///   channel's code in the block before, in a short prefix code (the width stream, `H`
///   bytes).
///
/// Smooth handwriting sampled at 240 Hz has second differences of a few tenths of a point,
/// so most values take one to four bits: about 1.5 to 1.7 bytes per point in total. A block
/// is packed and unpacked with a few shifts per value and no test per value
/// (`StrokeCodec+Encoding.swift`, `StrokeCodec+Decoding.swift`).
///
/// The encoding is canonical: every point list has exactly one encoding, and the decoder
/// rejects every other byte string (a longer-than-needed varint, a width wider than
/// needed, non-zero padding, a longer prefix code than needed, a stream longer than its
/// contents), so `encode(decode(b)) == b` whenever `decode(b)` succeeds. Arithmetic is
/// modulo 2³², so any `Int32`/`UInt32` values round-trip, including jumps from `Int32.min`
/// to `Int32.max` and decreasing times ([PTS-9]).
public enum StrokeCodec {
    /// Points per block ([PTS-6]).
    static let blockPoints = 8

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

        points.withUnsafeBufferPointer { encodeBlocks($0, into: &w) }
    }

    /// The encoding of `points` alone.
    public static func encodedPoints(_ points: [StrokePoint]) -> [UInt8] {
        var w = ByteWriter(capacity: 24 + points.count * 2)
        encodePoints(points, into: &w)
        return w.bytes
    }

    /// Reads a point stream written by `encodePoints`.
    ///
    /// Never allocates more than the remaining bytes can justify ([PTS-2], [PTS-3]).
    /// - Throws: `LnoteError` with the absolute offset: `truncated` when the bytes end
    ///   inside the stream (or the count cannot fit in what remains), `corrupt` for anything
    ///   that is not the canonical encoding of a valid point list.
    public static func decodePoints(_ r: inout ByteReader) throws -> [StrokePoint] {
        guard let h = quickHeader(r) else { return try decodePointsChecked(&r) }
        // Neither can throw: `quickHeader` saw the bytes.
        _ = try r.skip(h.headerBytes, "point stream header")
        let widths = try r.skip(h.widthBytes, "width stream")
        let packed = try r.skip(h.packedBytes, "packed values")
        return try decodeBlocks(r, widths: widths, packed: packed, count: h.n, first: h.first, second: h.second,
                                delta: h.delta)
    }

    /// The header of a stream of 3 points or more read straight from the bytes, every value
    /// as `decodePointsChecked` reads it; nil when anything is unusual (fewer than 3 points,
    /// a varint of more than 5 bytes or not in its shortest form, a value out of range, too
    /// few bytes), for `decodePointsChecked` to read it again and name the fault.
    @inline(__always)
    static func quickHeader(_ r: ByteReader)
        -> (n: Int, first: StrokePoint, second: Channels, delta: Channels, headerBytes: Int, widthBytes: Int,
            packedBytes: Int)? {
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
            let blocks = blockCount(n)
            // [PTS-2]
            guard blocks * 5 <= max(0, end - i - 12) * 8 else { return nil }
            guard let x0 = int32(), let y0 = int32(), let p0 = varint(), p0 <= UInt64(Quantization.pressureMax),
                  let r0 = int32(), let t0 = varint(), let t = UInt32(exactly: t0) else { return nil }
            let first = StrokePoint(x: Int32(bitPattern: x0), y: Int32(bitPattern: y0), pressure: UInt16(p0),
                                    radius: Int32(bitPattern: r0), t: t)
            guard let d0 = int32(), let d1 = int32(), let d2 = int32(), let d3 = int32(), let d4 = int32() else { return nil }
            let v0 = channelValues(first)
            let v1: Channels = (v0.0 &+ d0, v0.1 &+ d1, v0.2 &+ d2, v0.3 &+ d3, v0.4 &+ d4)
            guard v1.2 <= UInt32(Quantization.pressureMax) else { return nil }
            // [PTS-3]
            guard let h = varint(), let g = varint(), h &+ g <= UInt64(end - i), blocks * 5 <= Int(h) * 8 else {
                return nil
            }
            return (n, first, v1, (d0, d1, d2, d3, d4), i - start, Int(h), Int(g))
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
        // [PTS-2] The first point and the first step take at least 5 bytes each, H and G 1
        // each, and each block at least 5 bits of the width stream: a count the remaining
        // bytes cannot hold is cut off.
        guard n <= 2 || blockCount(n) * 5 <= max(0, r.remaining - 12) * 8 else {
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
        guard v1.2 <= UInt32(Quantization.pressureMax) else {
            throw r.error(.corrupt, "pressure \(v1.2) exceeds \(Quantization.pressureMax) at point 1", at: stepAt)
        }
        guard n > 2 else { return [first, point(v1)] }

        // [PTS-3]
        let lengthsAt = r.offset
        let h = try minimalVarint(&r, "width stream length")
        let g = try minimalVarint(&r, "packed values length")
        guard h <= UInt64(r.remaining), g <= UInt64(r.remaining) - h else {
            throw r.error(.truncated, "width stream of \(h) bytes and packed values of \(g) bytes, \(r.remaining) left",
                          at: lengthsAt)
        }
        // Five codes of at least one bit per block: n is now bounded by the bytes present,
        // so allocating n points is justified.
        guard blockCount(n) * 5 <= Int(h) * 8 else {
            throw r.error(.corrupt, "width stream of \(h) bytes cannot hold \(blockCount(n)) blocks", at: lengthsAt)
        }
        let widths = try r.skip(Int(h), "width stream")
        let packed = try r.skip(Int(g), "packed values")
        return try decodeBlocks(r, widths: widths, packed: packed, count: n, first: first, second: v1, delta: delta)
    }

    /// The blocks of `n` points ([PTS-6]).
    @inline(__always) static func blockCount(_ n: Int) -> Int { (n - 2 + blockPoints - 1) / blockPoints }

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

    /// x, y, pressure, radius of `p`.
    @inline(__always)
    static func vector(_ p: StrokePoint) -> SIMD4<UInt32> {
        SIMD4(UInt32(bitPattern: p.x), UInt32(bitPattern: p.y), UInt32(p.pressure), UInt32(bitPattern: p.radius))
    }

    /// Whether `StrokePoint` has x, y, pressure, radius, t at offsets 0, 4, 8, 12, 16 (the
    /// pressure's 2 padding bytes after it), so that x to radius may be loaded and stored as
    /// four 32-bit words at once.
    static let pointLayoutIsPacked: Bool =
        MemoryLayout<StrokePoint>.offset(of: \.x) == 0 && MemoryLayout<StrokePoint>.offset(of: \.y) == 4
            && MemoryLayout<StrokePoint>.offset(of: \.pressure) == 8 && MemoryLayout<StrokePoint>.offset(of: \.radius) == 12
            && MemoryLayout<StrokePoint>.offset(of: \.t) == 16 && MemoryLayout<StrokePoint>.size == 20
}

@inline(__always) func zigzag32(_ v: UInt32) -> UInt32 {
    let s = Int32(bitPattern: v)
    return UInt32(bitPattern: (s &<< 1) ^ (s &>> 31))
}

@inline(__always) func unzigzag32(_ u: UInt32) -> UInt32 {
    (u &>> 1) ^ (0 &- (u & 1))
}
