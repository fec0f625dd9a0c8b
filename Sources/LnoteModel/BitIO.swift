/// The position of a `BitWriter`: plain values, so that code outside the hot loop can take
/// and return them by value (which keeps them in registers in the loop).
struct BitCursor {
    /// Whole bytes stored so far.
    var stored: Int = 0
    /// Pending bits, the oldest in bit 0; `filled` of them (0...63) are meaningful, the
    /// bits above are zero. At most 7 right after a flush.
    var acc: UInt64 = 0
    var filled: UInt64 = 0

    /// Appends the `count` low bits of `value`, least significant first. The bits of `value`
    /// above `count` MUST be zero, and the pending bits plus `count` MUST stay below 64.
    @inline(__always) mutating func append(_ value: UInt64, count: UInt64) {
        acc |= value &<< filled
        filled &+= count
    }

    /// Stores the pending whole bytes at `buffer + stored`, keeping the 0...7 bits of the
    /// last incomplete one. Room for 8 bytes MUST have been reserved.
    @inline(__always) mutating func flush(to buffer: UnsafeMutableRawPointer) {
        buffer.storeBytes(of: acc.littleEndian, toByteOffset: stored, as: UInt64.self)
        stored &+= Int(truncatingIfNeeded: filled &>> 3)
        acc &>>= filled & 56
        filled &= 7
    }
}

/// Packs bits least significant first into bytes ([PTS-4]).
///
/// The writer owns its buffer (hence `~Copyable`). Codes gather in a 64-bit accumulator
/// with `append` (a shift, an OR and an add: no test), and `flush` stores the accumulator's
/// 8 bytes at once and keeps only the 0...7 bits of the last, incomplete byte: after a
/// flush, up to 56 bits can be appended before the next one. The caller reserves room
/// before writing (`reserve(_:)`, once per point): `append` and `flush` check nothing, which
/// is why they stay internal to the codec.
struct BitWriter: ~Copyable {
    private(set) var buffer: UnsafeMutableRawPointer
    private var capacity: Int
    var cursor = BitCursor()

    /// A writer with room for `capacity` bytes before it first grows.
    init(capacity: Int) {
        self.capacity = max(capacity, 64)
        buffer = UnsafeMutableRawPointer.allocate(byteCount: self.capacity, alignment: 8)
    }

    deinit { buffer.deallocate() }

    /// Makes room for `bytes` more bytes of stores (a flush stores 8 bytes and keeps up to
    /// 7 of them pending, so `f` flushes ask for `7·f + 1`).
    @inline(__always) mutating func reserve(_ bytes: Int) {
        if capacity &- cursor.stored < bytes {
            (buffer, capacity) = BitWriter.grown(buffer, stored: cursor.stored, capacity: capacity,
                                                 needed: cursor.stored + bytes)
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

    /// `BitCursor.append` on the writer's cursor.
    @inline(__always) mutating func append(_ value: UInt64, count: UInt64) {
        cursor.append(value, count: count)
    }

    /// `BitCursor.flush` into the writer's buffer.
    @inline(__always) mutating func flush() {
        cursor.flush(to: buffer)
    }

    /// Stores the 8 bytes of `word` at the next byte and keeps `advancing` of them (the
    /// others are overwritten by the next store, or dropped by `finish`). Only between
    /// whole bytes (no pending bits); room for 8 bytes MUST have been reserved.
    @inline(__always) mutating func storeWord(_ word: UInt64, advancing: Int) {
        buffer.storeBytes(of: word.littleEndian, toByteOffset: cursor.stored, as: UInt64.self)
        cursor.stored &+= advancing
    }

    /// The number of bytes `finish` will return.
    var byteCount: Int { cursor.stored + Int((cursor.filled + 7) >> 3) }

    /// Pads the last byte with zero bits and calls `body` with the bytes.
    mutating func finish<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        reserve(8)
        let count = byteCount
        buffer.storeBytes(of: cursor.acc.littleEndian, toByteOffset: cursor.stored, as: UInt64.self)
        cursor = BitCursor(stored: count)
        return try body(UnsafeRawBufferPointer(start: buffer, count: count))
    }
}

/// Reads bits least significant first from bytes `start..<end` of a buffer, through a
/// 64-bit window refilled 8 bytes at a time (one bounds check per refill).
///
/// Only valid inside the `withUnsafeBytes` call that produced `bytes`. Positions are bit
/// counts from `start`; the caller turns them into absolute offsets.
struct BitReader {
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
            (acc, position, available) = BitReader.tail(bytes, end: end, acc: acc, position: position,
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
}
