// The point codec as it was before the second speed round (commit c1a368f), renamed, kept
// only so that `lnote-bench --codec` can time the old and the new side by side in one run.
// Do not optimize it: it is the baseline.
import LnoteModel

/// Packs bits least significant first into bytes ([PTS-4]), 64 bits at a time.
///
/// The writer owns its buffer (hence `~Copyable`): bits gather in a 64-bit accumulator that
/// is stored as 8 little-endian bytes whenever it fills, so a typical value costs a shift,
/// an OR and a well-predicted branch. The caller reserves room before writing (`reserve(_:)`, once per point): the
/// hot `write` checks nothing, which is why both stay internal to the codec.
struct BaselineBitWriter: ~Copyable {
    private var buffer: UnsafeMutableRawPointer
    private var capacity: Int
    /// Bytes stored so far (whole 64-bit words until `finish`).
    private var stored: Int = 0
    /// Pending bits, the oldest in bit 0; `filled` of them (0...63) are meaningful, the
    /// bits above are zero.
    private var acc: UInt64 = 0
    private var filled: UInt64 = 0

    /// A writer with room for `capacity` bytes before it first grows.
    init(capacity: Int) {
        self.capacity = max(capacity, 64)
        buffer = UnsafeMutableRawPointer.allocate(byteCount: self.capacity, alignment: 8)
    }

    deinit { buffer.deallocate() }

    /// Makes room for `bytes` more bytes of stores (a write stores 8 bytes at once, so a
    /// caller about to write `b` bits asks for `b / 8 + 8`).
    @inline(__always) mutating func reserve(_ bytes: Int) {
        if capacity &- stored < bytes {
            (buffer, capacity) = BaselineBitWriter.grown(buffer, stored: stored, capacity: capacity, needed: stored + bytes)
        }
    }

    /// A bigger buffer holding the `stored` bytes of `buffer`, which it frees. Static, on
    /// scalars, and not inlined, so that the writer's state can stay in registers.
    @inline(never)
    private static func grown(_ buffer: UnsafeMutableRawPointer, stored: Int, capacity: Int,
                              needed: Int) -> (UnsafeMutableRawPointer, Int) {
        let newCapacity = max(needed, capacity * 2)
        let bigger = UnsafeMutableRawPointer.allocate(byteCount: newCapacity, alignment: 8)
        bigger.copyMemory(from: buffer, byteCount: stored)
        buffer.deallocate()
        return (bigger, newCapacity)
    }

    /// Appends the `count` (0...56) low bits of `value`, least significant first. The bits
    /// of `value` above `count` MUST be zero, and room MUST have been reserved.
    @inline(__always) mutating func write(_ value: UInt64, count: UInt64) {
        acc |= value &<< filled
        let total = filled &+ count
        if total >= 64 {
            buffer.storeBytes(of: acc.littleEndian, toByteOffset: stored, as: UInt64.self)
            stored &+= 8
            // The bits of `value` that did not fit: value >> (64 - filled), which is 0 when
            // filled is 0 (written as two shifts so that no shift reaches 64).
            acc = (value &>> 1) &>> (63 &- filled)
            filled = total &- 64
        } else {
            filled = total
        }
    }

    /// The number of bytes `finish` will return.
    var byteCount: Int { stored + Int((filled + 7) >> 3) }

    /// Pads the last byte with zero bits and calls `body` with the bytes.
    mutating func finish<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        reserve(8)
        buffer.storeBytes(of: acc.littleEndian, toByteOffset: stored, as: UInt64.self)
        stored += Int((filled + 7) >> 3)
        acc = 0
        filled = 0
        return try body(UnsafeRawBufferPointer(start: buffer, count: stored))
    }
}

/// A defect of a point bit stream ([PTS-8], [PTS-10]), located by bit position in the
/// stream. Thrown by the hot decoding loop as a typed error (no allocation, nothing that
/// keeps the reader in memory) and turned into an `LnoteError` with an absolute offset by
/// `BaselineStrokeCodec.decodePoints`.
enum BaselineBitStreamFault: Error {
    /// The stream ends inside a code.
    case endsInsideValue
    /// An inline value `(q << k) | low` above 32 bits; the value's first bit.
    case overflow(bit: Int)
    /// An escape holding a value with `u >> k < 24`; the value's first bit.
    case needlessEscape(UInt32, bit: Int)
    /// A reconstructed pressure above 1000 at point `index`; the point's first bit.
    case pressure(UInt32, index: Int, bit: Int)
    /// A whole unused byte after the last code; the first unread bit.
    case unusedBytes(bit: Int)
    /// Non-zero padding bits in the last byte.
    case padding
}

/// Reads bits least significant first from bytes `start..<end` of a buffer, through a
/// 64-bit window refilled 8 bytes at a time (one bounds check per refill).
///
/// Only valid inside the `withUnsafeBytes` call that produced `bytes`. Positions are bit
/// counts from `start`; the caller turns them into absolute offsets.
struct BaselineBitReader {
    let bytes: UnsafeRawPointer
    let start: Int
    let end: Int
    /// The next byte not yet counted in `available`.
    private var position: Int
    /// The window: bit 0 is the next unread bit; `available` bits (0...64) are counted.
    /// Bits above `available` are zero or, after a word load, the true next bits of the
    /// stream (loaded again, identically, by the next refill).
    private var acc: UInt64 = 0
    private var available: UInt64 = 0

    init(_ bytes: UnsafeRawPointer, range: Range<Int>) {
        self.bytes = bytes
        self.start = range.lowerBound
        self.end = range.upperBound
        self.position = range.lowerBound
    }

    /// Bits consumed since the start of the stream.
    @inline(__always) var consumedBits: Int { (position &- start) &<< 3 &- Int(available) }

    /// Tops the window up to at least 56 counted bits, or to every bit left.
    ///
    /// Away from the end it loads 8 bytes whatever the window holds (a branch on the
    /// window's fill measured slower): the bytes already counted land on themselves (an OR
    /// of equal bits), and it counts the whole bytes that fit, none when 56 or more bits
    /// are already counted.
    @inline(__always) mutating func refill() {
        if end &- position >= 8 {
            let word = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: position, as: UInt64.self))
            acc |= word &<< available
            let taken = (63 &- available) &>> 3
            position &+= Int(taken)
            available &+= taken &<< 3
        } else {
            (acc, position, available) = BaselineBitReader.tail(bytes, end: end, acc: acc, position: position,
                                                        available: available)
        }
    }

    /// Near the end: byte by byte, up to 64 counted bits (the word path is never taken
    /// again once fewer than 8 bytes remain). Static, on scalars, and not inlined, so that
    /// the reader's state can stay in registers in the hot loop.
    @inline(never)
    private static func tail(_ bytes: UnsafeRawPointer, end: Int, acc: UInt64, position: Int,
                             available: UInt64) -> (UInt64, Int, UInt64) {
        var (acc, position, available) = (acc, position, available)
        while available <= 56 && position < end {
            acc |= UInt64(bytes.load(fromByteOffset: position, as: UInt8.self)) &<< available
            position += 1
            available += 8
        }
        return (acc, position, available)
    }

    /// The window; its low `availableBits` bits are the next bits of the stream.
    @inline(__always) var window: UInt64 { acc }
    @inline(__always) var availableBits: UInt64 { available }

    /// Drops `count` (≤ `availableBits`, < 64) bits.
    @inline(__always) mutating func consume(_ count: UInt64) {
        acc &>>= count
        available &-= count
    }

    /// [PTS-8] The stream must end exactly: no whole unread byte, and zero padding bits.
    func finish() throws(BaselineBitStreamFault) {
        let left = (end - position) * 8 + Int(available)
        guard left < 8 else { throw .unusedBytes(bit: consumedBits) }
        // left < 8 means every byte is counted: the window holds exactly the padding.
        guard acc & ((1 &<< available) &- 1) == 0 else { throw .padding }
    }
}
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
enum BaselineStrokeCodec {
    /// Unary quotients at least this long are escaped: the value follows in 32 raw bits ([PTS-6]).
    static let escapeLength: UInt32 = 24
    /// The adaptive state halves when this many values have been counted ([PTS-7]).
    static let resetCount: UInt64 = 8
    /// Initial sum of the adaptive state (with a count of 1) ([PTS-7]).
    static let initialSum: UInt64 = 2

    typealias Channels = (UInt32, UInt32, UInt32, UInt32, UInt32)

    /// Appends the encoding of `points` to `w`. A deterministic function of the points.
    static func encodePoints(_ points: [StrokePoint], into w: inout ByteWriter) {
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
        var bits = BaselineBitWriter(capacity: points.count * 2 + 64)
        var s0 = BaselineRiceState(), s1 = BaselineRiceState(), s2 = BaselineRiceState(), s3 = BaselineRiceState(), s4 = BaselineRiceState()
        var c = BaselineRiceCount()
        // Second differences straight from three points in memory (loads are cheap) rather
        // than a running previous point and step, which would not fit in registers.
        for i in 2..<points.count {
            // A point takes at most 5 × 56 bits: at most 5 words stored.
            bits.reserve(40)
            let p2 = channelValues(points[i]), p1 = channelValues(points[i &- 1]), p0 = channelValues(points[i &- 2])
            s0.encode(baselineZigzag32((p2.0 &- p1.0) &- (p1.0 &- p0.0)), c, into: &bits)
            s1.encode(baselineZigzag32((p2.1 &- p1.1) &- (p1.1 &- p0.1)), c, into: &bits)
            s2.encode(baselineZigzag32((p2.2 &- p1.2) &- (p1.2 &- p0.2)), c, into: &bits)
            s3.encode(baselineZigzag32((p2.3 &- p1.3) &- (p1.3 &- p0.3)), c, into: &bits)
            s4.encode(baselineZigzag32((p2.4 &- p1.4) &- (p1.4 &- p0.4)), c, into: &bits)
            c.advance()
        }
        w.varint(UInt64(bits.byteCount))
        bits.finish { w.append($0) }
    }

    /// The encoding of `points` alone.
    static func encodedPoints(_ points: [StrokePoint]) -> [UInt8] {
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
    static func decodePoints(_ r: inout ByteReader) throws -> [StrokePoint] {
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
            let bits = BaselineBitReader(raw.baseAddress!, range: range)
            return Result { () throws(BaselineBitStreamFault) in
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
    static func decodeStream(_ reader: BaselineBitReader, count n: Int, first: StrokePoint, second: Channels,
                             delta firstStep: Channels) throws(BaselineBitStreamFault) -> [StrokePoint] {
        var fault: BaselineBitStreamFault?
        let points = [StrokePoint](unsafeUninitializedCapacity: n) { out, initialized in
            out[0] = first
            out[1] = point(second)
            initialized = 2
            var bits = reader
            var prev = second, delta = firstStep
            var s0 = BaselineRiceState(), s1 = BaselineRiceState(), s2 = BaselineRiceState(), s3 = BaselineRiceState(), s4 = BaselineRiceState()
            var c = BaselineRiceCount()
            do throws(BaselineBitStreamFault) {
                for i in 2..<n {
                    let startBit = bits.consumedBits
                    delta.0 = delta.0 &+ baselineUnzigzag32(try s0.decode(c, from: &bits))
                    delta.1 = delta.1 &+ baselineUnzigzag32(try s1.decode(c, from: &bits))
                    delta.2 = delta.2 &+ baselineUnzigzag32(try s2.decode(c, from: &bits))
                    delta.3 = delta.3 &+ baselineUnzigzag32(try s3.decode(c, from: &bits))
                    delta.4 = delta.4 &+ baselineUnzigzag32(try s4.decode(c, from: &bits))
                    prev = (prev.0 &+ delta.0, prev.1 &+ delta.1, prev.2 &+ delta.2, prev.3 &+ delta.3, prev.4 &+ delta.4)
                    guard prev.2 <= UInt32(Quantization.pressureMax) else {
                        throw BaselineBitStreamFault.pressure(prev.2, index: i, bit: startBit)
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
    static func streamError(_ fault: BaselineBitStreamFault, range: Range<Int>, base: Int, path: String?) -> LnoteError {
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

@inline(__always) func baselineZigzag32(_ v: UInt32) -> UInt32 {
    let s = Int32(bitPattern: v)
    return UInt32(bitPattern: (s &<< 1) ^ (s &>> 31))
}

@inline(__always) func baselineUnzigzag32(_ u: UInt32) -> UInt32 {
    (u &>> 1) ^ (0 &- (u & 1))
}

/// The parameter k of [PTS-7] for every count 0...7 (row) and sum 0...255 (column): most
/// sums of handwriting are small, and a table look-up is cheaper than the computation.
/// Built once, never freed (2 KiB); immutable after its lazy, thread-safe initialization.
nonisolated(unsafe) let baselineRiceParameterTable: UnsafePointer<UInt8> = {
    let table = UnsafeMutablePointer<UInt8>.allocate(capacity: 8 * 256)
    for count in 0..<8 {
        for sum in 0..<256 {
            table[count * 256 + sum] = count == 0
                ? 0 : UInt8(BaselineRiceCount.computedParameter(sum: UInt64(sum), count: UInt64(count)))
        }
    }
    return UnsafePointer(table)
}()

/// The `count` half of the adaptive Golomb-Rice state of [PTS-7], shared by the five
/// channels: every channel starts at count 1 and codes exactly one value per point, so
/// their counts are always equal (1, 2, …, 7, then 4, 5, 6, 7, 4, …). Its derived values are
/// computed once per point instead of once per value.
struct BaselineRiceCount {
    private let table: UnsafePointer<UInt8>
    /// 1...7 between points: it halves to 4 when it reaches `BaselineStrokeCodec.resetCount` (8).
    private(set) var count: UInt64
    /// The table row of `count`.
    private var row: UnsafePointer<UInt8>
    private var leadingZeros: Int
    /// 1 when this point's updates halve the sums (count + 1 reaches 8), else 0.
    private(set) var halve: UInt64

    init(count: UInt64 = 1) {
        table = baselineRiceParameterTable
        self.count = count
        row = table + Int(count) * 256
        leadingZeros = count.leadingZeroBitCount
        halve = (count &+ 1) / BaselineStrokeCodec.resetCount
    }

    /// [PTS-7] After every channel coded its value: count += 1, halved when it reaches 8.
    @inline(__always) mutating func advance() {
        count = (count &+ 1) &>> halve
        row = table + Int(truncatingIfNeeded: count) &* 256
        leadingZeros = count.leadingZeroBitCount
        // 1 exactly when count + 1 reaches resetCount, since count < resetCount (a constant:
        // the division is a shift).
        halve = (count &+ 1) / BaselineStrokeCodec.resetCount
    }

    /// [PTS-7] The smallest k in 0...31 with count·2^(k+1) ≥ sum: from the table for sums
    /// below 256, else computed as in `computedParameter` (sum > 2·count there).
    @inline(__always) func parameter(_ sum: UInt64) -> UInt64 {
        if sum < 256 { return UInt64(row[Int(truncatingIfNeeded: sum)]) }
        let j0 = UInt64(truncatingIfNeeded: leadingZeros &- sum.leadingZeroBitCount)
        let k = (count &<< j0) >= sum ? j0 &- 1 : j0
        return min(k, 31)
    }

    /// The smallest k in 0...31 with `count << (k + 1) >= sum`, for count ≥ 1, without a
    /// loop: if sum ≤ 2·count, k = 0. Otherwise j0 = lzcnt(count) − lzcnt(sum) ≥ 1 is the
    /// shift that gives count sum's bit length, and count << j0 either reaches sum (the
    /// smallest shift is j0) or falls short (count << (j0 + 1) has more bits than sum: the
    /// shift is j0 + 1); k is the shift minus 1, capped at 31.
    static func computedParameter(sum: UInt64, count: UInt64) -> UInt64 {
        if sum <= count &<< 1 { return 0 }
        let j0 = UInt64(truncatingIfNeeded: count.leadingZeroBitCount &- sum.leadingZeroBitCount)
        let k = (count &<< j0) >= sum ? j0 &- 1 : j0
        return min(k, 31)
    }
}

/// One channel's `sum` of the adaptive Golomb-Rice coder of [PTS-5] … [PTS-7].
struct BaselineRiceState {
    var sum: UInt64 = BaselineStrokeCodec.initialSum

    /// [PTS-7] After coding `u`: sum += u, halved when the shared count reaches 8.
    @inline(__always) mutating func update(_ u: UInt32, _ c: BaselineRiceCount) {
        sum = (sum &+ UInt64(u)) &>> c.halve
    }

    /// [PTS-6] Writes `u`: q = u >> k one-bits, a zero-bit and the k low bits in one
    /// write of at most 55 bits, or the escape (24 one-bits then 32 raw bits) in one of 56.
    @inline(__always) mutating func encode(_ u: UInt32, _ c: BaselineRiceCount, into bits: inout BaselineBitWriter) {
        let k = c.parameter(sum)
        let v = UInt64(u)
        let q = v &>> k
        if q < UInt64(BaselineStrokeCodec.escapeLength) {
            // q one-bits, a zero, the low bits: (low << (q + 1)) | (2^q − 1), computed as
            // (((low << 1) | 1) << q) − 1.
            let low = v & ((1 &<< k) &- 1)
            bits.write((((low &<< 1) | 1) &<< q) &- 1, count: q &+ 1 &+ k)
        } else {
            bits.write(0xFF_FFFF | (v &<< 24), count: 56)
        }
        update(u, c)
    }

    /// [PTS-6] [PTS-8] Reads one value. A fault names the bit where the value begins,
    /// worked out only when thrown from the bits just consumed.
    ///
    /// The window is refilled only when the value does not fit in the bits it counts (about
    /// once every twenty small values): a refill leaves at least 56 bits, the longest code,
    /// unless the stream has fewer left, so a value that still does not fit is cut off.
    @inline(__always) mutating func decode(_ c: BaselineRiceCount, from bits: inout BaselineBitReader) throws(BaselineBitStreamFault) -> UInt32 {
        let k = c.parameter(sum)
        let escape = UInt64(BaselineStrokeCodec.escapeLength)
        var window = bits.window
        var ones = UInt64((~window).trailingZeroBitCount)
        var used = ones < escape ? ones &+ 1 &+ k : 56
        if used > bits.availableBits {
            bits.refill()
            window = bits.window
            ones = UInt64((~window).trailingZeroBitCount)
            used = ones < escape ? ones &+ 1 &+ k : 56
            guard used <= bits.availableBits else { throw .endsInsideValue }
        }
        bits.consume(used)
        let u: UInt32
        if ones < escape {
            let low = (window &>> (ones &+ 1)) & ((1 &<< k) &- 1)
            // ones < 24 and k ≤ 31: the value has at most 55 bits; it must fit 32.
            let wide = (ones &<< k) | low
            guard wide &>> 32 == 0 else { throw .overflow(bit: bits.consumedBits &- Int(used)) }
            u = UInt32(truncatingIfNeeded: wide)
        } else {
            u = UInt32(truncatingIfNeeded: window &>> 24)
            guard UInt64(u) &>> k >= escape else { throw .needlessEscape(u, bit: bits.consumedBits &- 56) }
        }
        update(u, c)
        return u
    }
}
