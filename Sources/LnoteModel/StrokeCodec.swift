/// Encodes a stroke's point stream compactly and losslessly.
///
/// PLACEHOLDER ENCODING (delta + zigzag varints); replaced by the packed encoding
/// specified in `Protocol/page-snapshot.md`.
public enum StrokeCodec {
    public static func encodePoints(_ points: [StrokePoint], into w: inout ByteWriter) {
        w.varint(UInt64(points.count))
        var px: Int64 = 0, py: Int64 = 0, pp: Int64 = 0, pr: Int64 = 0, pt: Int64 = 0
        for p in points {
            w.svarint(Int64(p.x) - px); px = Int64(p.x)
            w.svarint(Int64(p.y) - py); py = Int64(p.y)
            w.svarint(Int64(p.pressure) - pp); pp = Int64(p.pressure)
            w.svarint(Int64(p.radius) - pr); pr = Int64(p.radius)
            w.svarint(Int64(p.t) - pt); pt = Int64(p.t)
        }
    }

    public static func decodePoints(_ r: inout ByteReader) throws -> [StrokePoint] {
        let n = try r.count("point count", max: min(Stroke.maxPoints, r.remaining / 5))
        var out: [StrokePoint] = []
        out.reserveCapacity(n)
        var px: Int64 = 0, py: Int64 = 0, pp: Int64 = 0, pr: Int64 = 0, pt: Int64 = 0
        for _ in 0..<n {
            let at = r.offset
            px += try r.svarint(); py += try r.svarint(); pp += try r.svarint()
            pr += try r.svarint(); pt += try r.svarint()
            guard let x = Int32(exactly: px), let y = Int32(exactly: py), let p = UInt16(exactly: pp), p <= 1000,
                  let rad = Int32(exactly: pr), let t = UInt32(exactly: pt) else {
                throw r.error(.corrupt, "point value out of range", at: at)
            }
            out.append(StrokePoint(x: x, y: y, pressure: p, radius: rad, t: t))
        }
        return out
    }
}
