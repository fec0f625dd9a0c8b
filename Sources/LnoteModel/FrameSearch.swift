/// The search for the next position where a valid frame starts, after damage ([PKG-37]).
///
/// Done naively, each candidate position whose length field announces a frame that fits in
/// the bytes costs a CRC over that frame, up to 16 MiB: bytes crafted so that every position
/// is such a candidate cost (bytes × 16 MiB) of CRC work, hours for one damaged log from a
/// backup or another folder. Bounding that work instead would give up on ordinary damage in
/// big logs (about 1 random position in 256 has a length field in range, a candidate wherever
/// the frame it announces fits) and drop valid frames.
///
/// So the search answers exactly what the naive one does, at a bounded cost per position:
/// - a candidate of at most `directLimit` bytes is checked directly;
/// - a longer one gets its CRC from CRCs of prefixes of the bytes, combined as zlib's
///   `crc32_combine` does: with P(i) the CRC of the bytes from a fixed start to i, the CRC
///   of the range [a, b) is P(b) ⊕ P(a)·x^(8·(b−a)) modulo the polynomial. P is kept every
///   `stride` bytes (at most 4 bytes per 64 searched, built from the first long candidate as
///   far as candidates reach) and continued from there over at most `stride − 1` bytes;
///   x^(8·n) comes from `CRC32C.xPower8N`'s tables.
///
/// A candidate thus costs at most a few hundred bytes of CRC and three multiplications modulo
/// the polynomial, whatever its length.
public struct FrameSearch {
    public static let directLimit = 512
    public static let stride = 64

    /// The bytes searched (shared with the caller's array, not copied).
    public let bytes: [UInt8]
    /// Where prefix CRCs start (the first position the checkpoints cover), or −1 before the
    /// first long candidate.
    private var start = -1
    /// checkpoints[k] is the CRC of bytes[start ..< start + k·stride]; built only as far as
    /// a candidate needed (a long candidate near the damage does not pay for the whole rest).
    private var checkpoints: [UInt32] = []
    /// Bytes run through the CRC so far (direct checks, checkpoints, continuations): what
    /// tests bound.
    public private(set) var bytesHashed = 0

    /// The anchor's `chainSeed` in a log with an anchor: where a log-form frame's CRC starts
    /// (`Frame.scan(_:at:chain:)`); nil: no log-form frame is valid.
    public let chain: UInt32?

    public init(_ bytes: [UInt8], chain: UInt32? = nil) {
        self.bytes = bytes
        self.chain = chain
    }

    /// The first position after `p` (−1 or more) where a valid frame starts, or nil.
    ///
    /// Positions are tried in order, as the naive search does; searches with growing `p`
    /// (later damage in the same bytes) reuse the checkpoints, a smaller `p` builds them again.
    public mutating func next(after p: Int) -> Int? {
        precondition(p >= -1, "a search starts at −1 or after")
        let n = bytes.count
        var q = p + 1
        let limit = n - Frame.headerSize - 1
        guard q <= limit else { return nil }
        let bytes = self.bytes
        return bytes.withUnsafeBytes { raw -> Int? in
            guard let base = raw.baseAddress else { return nil }
            while q <= limit {
                let length = Int(raw.loadUnaligned(fromByteOffset: q, as: UInt32.self).littleEndian)
                if length >= 1, length <= Frame.maxLength, length <= n - q - Frame.headerSize,
                   chain != nil || raw[q + Frame.headerSize] != LogAnchor.logFormAddStroke3 {
                    let stored = raw.loadUnaligned(fromByteOffset: q + 4, as: UInt32.self).littleEndian
                    if crc(raw, base, at: q, length: length) == stored { return q }
                }
                q += 1
            }
            return nil
        }
    }

    /// The CRC a frame of `length` at `q` must carry: of its length field and of the bytes
    /// after its CRC field.
    private mutating func crc(_ raw: UnsafeRawBufferPointer, _ base: UnsafeRawPointer, at q: Int, length: Int) -> UInt32 {
        let seed = raw[q + Frame.headerSize] == LogAnchor.logFormAddStroke3 ? chain ?? 0 : 0
        let head = CRC32C.update(seed, UnsafeRawBufferPointer(start: base + q, count: 4))
        bytesHashed += 4
        if length <= FrameSearch.directLimit {
            bytesHashed += length
            return CRC32C.update(head, UnsafeRawBufferPointer(start: base + q + Frame.headerSize, count: length))
        }
        if start < 0 || q + Frame.headerSize < start {
            start = q + Frame.headerSize
            checkpoints = [0]
        }
        let from = prefix(raw, base, q + Frame.headerSize)
        let to = prefix(raw, base, q + Frame.headerSize + length)
        // CRC(head ‖ range) = head·X ⊕ CRC(range), CRC(range) = to ⊕ from·X, X = x^(8·length).
        return CRC32C.multiplyModP(CRC32C.xPower8N(length), head ^ from) ^ to
    }

    /// The CRC of bytes[start ..< i] (start ≤ i ≤ count): from the last checkpoint at or
    /// before i, built first up to there if needed.
    private mutating func prefix(_ raw: UnsafeRawBufferPointer, _ base: UnsafeRawPointer, _ i: Int) -> UInt32 {
        let k = (i - start) / FrameSearch.stride
        if k >= checkpoints.count {
            var c = checkpoints[checkpoints.count - 1]
            var at = start + (checkpoints.count - 1) * FrameSearch.stride
            checkpoints.reserveCapacity(k + 1)
            while checkpoints.count <= k {
                c = CRC32C.update(c, UnsafeRawBufferPointer(start: base + at, count: FrameSearch.stride))
                at += FrameSearch.stride
                checkpoints.append(c)
                bytesHashed += FrameSearch.stride
            }
        }
        let at = start + k * FrameSearch.stride
        bytesHashed += i - at
        return CRC32C.update(checkpoints[k], UnsafeRawBufferPointer(start: base + at, count: i - at))
    }
}
