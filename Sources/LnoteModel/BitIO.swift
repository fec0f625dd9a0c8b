/// Packs bits least significant first into bytes ([PTS-4]), 64 bits at a time.
///
/// The writer owns its buffer (hence `~Copyable`): bits gather in a 64-bit accumulator that
/// is stored as 8 little-endian bytes whenever it fills, so a typical value costs a shift
/// and an OR. The caller reserves room before writing (`reserve(_:)`, once per point): the
/// hot `write` checks nothing, which is why both stay internal to the codec.
struct BitWriter: ~Copyable {
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

    /// Makes room for `bytes` more bytes of stores (a flush writes 8 bytes at once, so a
    /// caller about to write `b` bits asks for `b / 8 + 8`).
    @inline(__always) mutating func reserve(_ bytes: Int) {
        if capacity - stored < bytes { grow(stored + bytes) }
    }

    private mutating func grow(_ needed: Int) {
        let newCapacity = max(needed, capacity * 2)
        let bigger = UnsafeMutableRawPointer.allocate(byteCount: newCapacity, alignment: 8)
        bigger.copyMemory(from: buffer, byteCount: stored)
        buffer.deallocate()
        buffer = bigger
        capacity = newCapacity
    }

    /// Appends the `count` (0...64) low bits of `value`, least significant first. The bits
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

/// Reads bits least significant first from bytes `start..<end` of a buffer, through a
/// 64-bit window refilled 8 bytes at a time (one bounds check per refill).
///
/// Offsets in errors are absolute: `origin` is the offset of byte 0 of the buffer in the
/// file or message (`ByteReader.base`). The reader is only valid inside the
/// `withUnsafeBytes` call that produced `bytes`.
struct BitReader {
    let bytes: UnsafeRawPointer
    let origin: Int
    let start: Int
    let end: Int
    let path: String?
    /// The next byte not yet counted in `available`.
    private var position: Int
    /// The window: bit 0 is the next unread bit; `available` bits (0...64) are counted.
    /// Bits above `available` are zero or, after a word load, the true next bits of the
    /// stream (loaded again, identically, by the next refill).
    private var acc: UInt64 = 0
    private var available: UInt64 = 0

    init(_ bytes: UnsafeRawPointer, range: Range<Int>, origin: Int, path: String?) {
        self.bytes = bytes
        self.origin = origin
        self.start = range.lowerBound
        self.end = range.upperBound
        self.path = path
        self.position = range.lowerBound
    }

    /// Bits consumed since the start of the stream.
    @inline(__always) var consumedBits: Int { (position &- start) &<< 3 &- Int(available) }

    /// Absolute offset of the byte holding the bit `bit` of the stream.
    func offset(ofBit bit: Int) -> Int { origin + start + bit >> 3 }

    func error(_ code: LnoteError.Code, _ message: String, at: Int) -> LnoteError {
        LnoteError(code, message, path: path, offset: at)
    }

    /// The error for a stream that ends inside a code ([PTS-8]).
    func endError() -> LnoteError {
        error(.corrupt, "point bit stream ends inside a value", at: origin + end)
    }

    /// Tops the window up to at least 56 counted bits, or to every bit left.
    @inline(__always) mutating func refill() {
        guard available < 56 else { return }
        if end &- position >= 8 {
            let word = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: position, as: UInt64.self))
            acc |= word &<< available
            let taken = (63 &- available) &>> 3
            position &+= Int(taken)
            available &+= taken &<< 3
        } else {
            refillTail()
        }
    }

    private mutating func refillTail() {
        while available <= 56 && position < end {
            acc |= UInt64(bytes.load(fromByteOffset: position, as: UInt8.self)) &<< available
            position += 1
            available += 8
        }
    }

    /// The counted bits, for a value's fields: unary run, low bits, escape.
    @inline(__always) var window: UInt64 { acc }
    @inline(__always) var availableBits: UInt64 { available }

    /// Drops `count` (≤ `availableBits`, < 64) bits.
    @inline(__always) mutating func consume(_ count: UInt64) {
        acc &>>= count
        available &-= count
    }

    /// [PTS-8] The stream must end exactly: no whole unread byte, and zero padding bits.
    func finish() throws {
        let left = (end - position) * 8 + Int(available)
        guard left < 8 else {
            throw error(.corrupt, "point bit stream has unused bytes", at: offset(ofBit: consumedBits))
        }
        // left < 8 means every byte is counted: the window holds exactly the padding.
        guard acc & ((1 &<< available) &- 1) == 0 else {
            throw error(.corrupt, "point bit stream padding is not zero", at: origin + end - 1)
        }
    }
}
