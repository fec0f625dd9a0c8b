/// The block encoder of the point stream ([PTS-5] … [PTS-7]) and the tables it shares with
/// the decoder.
extension StrokeCodec {
    /// [PTS-3] [PTS-6] [PTS-7] Appends `H`, `G`, the width stream and the packed values of
    /// points 2 and later.
    ///
    /// A full block, when x to radius can be loaded as one 16-byte word
    /// (`pointLayoutIsPacked`), has the values of those four channels computed four at a
    /// time, a point at a time (`vectorValues`), into a scratch area from which each
    /// channel's eight values are then packed; t, and every channel of the last block or of
    /// another layout, has its values computed from the points themselves (`packGroup`).
    @inline(never)
    static func encodeBlocks(_ points: UnsafeBufferPointer<StrokePoint>, into w: inout ByteWriter) {
        let n = points.count
        let p = points.baseAddress!
        let t = BlockTables.shared
        let vectors = pointLayoutIsPacked
        // About 1.5 bytes a point, and a block's worst case (five groups of 32 bytes, then
        // the 8 bytes of a word store) reserved before each block.
        var values = BitWriter(capacity: n * 2 + 200)
        // Five codes of one to seven bits per block.
        var codes = BitWriter(capacity: blockCount(n) + 16)
        var c0: UInt64 = 0, c1: UInt64 = 0, c2: UInt64 = 0, c3: UInt64 = 0, c4: UInt64 = 0
        withUnsafeTemporaryAllocation(of: SIMD4<UInt32>.self, capacity: blockPoints) { area in
            let scratch = UnsafeMutableRawPointer(area.baseAddress!)
            var i = 2
            while i < n {
                let count = min(n &- i, blockPoints)
                values.reserve(5 * 32 + 8)
                codes.reserve(8)
                let q = p + i
                if vectors && count == blockPoints {
                    let all = vectorValues(q, into: scratch)
                    packLane(scratch, 0, all: UInt64(all[0]), previous: &c0, t, &values, &codes)
                    packLane(scratch, 1, all: UInt64(all[1]), previous: &c1, t, &values, &codes)
                    packLane(scratch, 2, all: UInt64(all[2]), previous: &c2, t, &values, &codes)
                    packLane(scratch, 3, all: UInt64(all[3]), previous: &c3, t, &values, &codes)
                } else {
                    packGroup(q, count: count, previous: &c0, t, &values, &codes) { UInt32(bitPattern: $0.pointee.x) }
                    packGroup(q, count: count, previous: &c1, t, &values, &codes) { UInt32(bitPattern: $0.pointee.y) }
                    packGroup(q, count: count, previous: &c2, t, &values, &codes) { UInt32($0.pointee.pressure) }
                    packGroup(q, count: count, previous: &c3, t, &values, &codes) { UInt32(bitPattern: $0.pointee.radius) }
                }
                packGroup(q, count: count, previous: &c4, t, &values, &codes) { $0.pointee.t }
                codes.flush()
                i &+= blockPoints
            }
        }
        w.varint(UInt64(codes.byteCount))
        w.varint(UInt64(values.byteCount))
        codes.finish { w.append($0) }
        values.finish { w.append($0) }
    }

    /// [PTS-5] The values of x, y, pressure, radius of the eight points at `q` (the two
    /// points before `q` exist), stored as eight 16-byte words at `scratch` (one per point,
    /// the channels in its lanes); returns their OR, lane by lane.
    ///
    /// Each point is loaded as one 16-byte word whose third lane holds the pressure in its
    /// low 16 bits and the 2 padding bytes (of any value) above, which the mask clears; the
    /// differences, modulo 2³² per lane, and the zigzag are the scalar ones lane by lane.
    @inline(__always)
    static func vectorValues(_ q: UnsafePointer<StrokePoint>, into scratch: UnsafeMutableRawPointer) -> SIMD4<UInt32> {
        let mask = SIMD4<UInt32>(.max, .max, 0xFFFF, .max)
        let raw = UnsafeRawPointer(q)
        @inline(__always) func load(_ k: Int) -> SIMD4<UInt32> {
            raw.loadUnaligned(fromByteOffset: k &* 20, as: SIMD4<UInt32>.self) & mask
        }
        var before = load(-1)
        var step = before &- load(-2)
        var all = SIMD4<UInt32>()
        for j in 0..<8 {
            let v = load(j)
            let d = v &- before
            let dd = SIMD4<Int32>(truncatingIfNeeded: d &- step)
            let u = SIMD4<UInt32>(truncatingIfNeeded: (dd &<< 1) ^ (dd &>> 31))
            scratch.storeBytes(of: u, toByteOffset: j &* 16, as: SIMD4<UInt32>.self)
            all |= u
            (before, step) = (v, d)
        }
        return all
    }

    /// [PTS-6] [PTS-7] Packs lane `lane` of the eight words `vectorValues` stored at
    /// `scratch`, whose OR is `all`, as `packGroup` does a full block's values.
    @inline(__always)
    static func packLane(_ scratch: UnsafeMutableRawPointer, _ lane: Int, all: UInt64, previous: inout UInt64,
                         _ t: BlockTables, _ values: inout BitWriter, _ codes: inout BitWriter) {
        let s = UnsafeRawPointer(scratch + 4 &* lane)
        @inline(__always) func v(_ j: Int) -> UInt64 { UInt64(s.load(fromByteOffset: j &* 16, as: UInt32.self)) }
        packValues((v(0), v(1), v(2), v(3), v(4), v(5), v(6), v(7)), all: all, count: blockPoints, previous: &previous,
                   t, &values, &codes)
    }

    /// [PTS-5] [PTS-6] [PTS-7] Packs the values of one channel (`value`) of the `count`
    /// points at `q` (the two points before `q` exist) at the narrowest width that holds
    /// them, into `ceil(count·W / 8)` bytes of `values`, and appends the width's code,
    /// relative to `previous`, to `codes`. Room for 40 bytes in `values` and for the code
    /// in `codes` MUST have been reserved.
    @inline(__always)
    static func packGroup(_ q: UnsafePointer<StrokePoint>, count: Int, previous: inout UInt64, _ t: BlockTables,
                          _ values: inout BitWriter, _ codes: inout BitWriter,
                          _ value: (UnsafePointer<StrokePoint>) -> UInt32) {
        @inline(__always) func u(_ j: Int) -> UInt64 {
            let a = value(q + (j &- 2)), b = value(q + (j &- 1)), c = value(q + j)
            return UInt64(zigzag32(c &- b &- (b &- a)))
        }
        let v0: UInt64, v1: UInt64, v2: UInt64, v3: UInt64, v4: UInt64, v5: UInt64, v6: UInt64, v7: UInt64
        if count == blockPoints {
            (v0, v1, v2, v3, v4, v5, v6, v7) = (u(0), u(1), u(2), u(3), u(4), u(5), u(6), u(7))
        } else {
            // The last block: zeros after its points.
            (v0, v1, v2, v3, v4, v5, v6, v7) = (u(0), count > 1 ? u(1) : 0, count > 2 ? u(2) : 0, count > 3 ? u(3) : 0,
                                                count > 4 ? u(4) : 0, count > 5 ? u(5) : 0, count > 6 ? u(6) : 0, 0)
        }
        packValues((v0, v1, v2, v3, v4, v5, v6, v7), all: v0 | v1 | v2 | v3 | v4 | v5 | v6 | v7, count: count,
                   previous: &previous, t, &values, &codes)
    }

    /// [PTS-6] [PTS-7] Packs the eight values `v` (the first `count` of them real, the
    /// others 0), whose OR is `all`, at the narrowest width that holds them, into
    /// `ceil(count·W / 8)` bytes of `values`, and appends the width's code, relative to
    /// `previous`, to `codes`.
    @inline(__always)
    static func packValues(_ v: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64), all: UInt64,
                           count: Int, previous: inout UInt64, _ t: BlockTables, _ values: inout BitWriter,
                           _ codes: inout BitWriter) {
        let (v0, v1, v2, v3, v4, v5, v6, v7) = v
        let code = UInt64(t.codeOfLength[64 &- all.leadingZeroBitCount])
        let width = UInt64(t.widthOfCode[Int(truncatingIfNeeded: code)])
        let bytes = (count &* Int(truncatingIfNeeded: width) &+ 7) &>> 3
        if width <= 8 {
            // Eight values of at most 8 bits: one word, built from the last value down with
            // one shift count (the values after `count` are 0, so the bytes after the
            // group's are 0 and the next group overwrites them).
            var word = v7
            word = word &<< width | v6
            word = word &<< width | v5
            word = word &<< width | v4
            word = word &<< width | v3
            word = word &<< width | v2
            word = word &<< width | v1
            word = word &<< width | v0
            values.storeWord(word, advancing: bytes)
        } else {
            packWide((v0, v1, v2, v3, v4, v5, v6, v7), width: width, bytes: bytes, &values)
        }
        let entry = UInt64(t.prefixOfChange[Int(truncatingIfNeeded: code &- previous &+ 15)])
        // Pattern, then for the 7-bit case (bit 16 set) the code in bits 3 to 6.
        let pattern = (entry & 0xFF) | (code &<< 3) & (0 &- (entry &>> 16))
        codes.append(pattern, count: (entry &>> 8) & 0xFF)
        previous = code
    }

    /// The rare group wider than 8 bits (a jump): its eight values in 32-bit stores, then
    /// the group's size kept (the bytes after it are 0, as the values after `count` are).
    @inline(never)
    static func packWide(_ v: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64), width: UInt64,
                         bytes: Int, _ values: inout BitWriter) {
        let start = values.cursor.stored
        var acc: UInt64 = 0, filled: UInt64 = 0
        for value in [v.0, v.1, v.2, v.3, v.4, v.5, v.6, v.7] {
            acc |= value &<< filled
            filled &+= width
            if filled >= 32 {
                values.storeWord(acc, advancing: 4)
                acc &>>= 32
                filled &-= 32
            }
        }
        values.storeWord(acc, advancing: 0)
        values.cursor.stored = start &+ bytes
    }
}

/// The constants of [PTS-6] and [PTS-7] as look-up tables, built once, never freed, and
/// immutable after their lazy, thread-safe initialization.
struct BlockTables {
    /// The width of each code 0...15.
    let widthOfCode: UnsafePointer<UInt8>
    /// The smallest value whose presence makes each code needed: 0 for code 0, else
    /// 2^width(code − 1) ([PTS-8] 4: a narrower code would hold a group below it).
    let floorOfCode: UnsafePointer<UInt64>
    /// The code for each bit length 0...64 (only 0...32 occur: values are 32-bit).
    let codeOfLength: UnsafePointer<UInt8>
    /// The prefix code of a change `code − previous` in −15...15 (index change + 15): the
    /// pattern's bits in bits 0...7, its length in bits 8...15, and bit 16 set for the
    /// 7-bit case, whose pattern gets the code in bits 3 to 6.
    let prefixOfChange: UnsafePointer<UInt32>
    /// For each value of the next 7 bits of the width stream, the code they begin: its
    /// length in bits, and the code as `(previous & keep) + add` (wrapping: −1 from 0 gives
    /// a value above 15); `add` is the code itself for the 7-bit case, where `keep` is 0.
    let lengthOfPrefix: UnsafePointer<UInt8>
    let keepOfPrefix: UnsafePointer<UInt64>
    let addOfPrefix: UnsafePointer<UInt64>

    /// Widths of the codes 13, 14, 15 ([PTS-6]); codes 0...12 are their own widths.
    static let wideWidths: [UInt8] = [16, 24, 32]

    static func width(ofCode c: Int) -> Int { c < 13 ? c : Int(wideWidths[c - 13]) }

    nonisolated(unsafe) static let shared: BlockTables = {
        let widths = UnsafeMutablePointer<UInt8>.allocate(capacity: 16)
        let floors = UnsafeMutablePointer<UInt64>.allocate(capacity: 16)
        for c in 0..<16 {
            widths[c] = UInt8(width(ofCode: c))
            floors[c] = c == 0 ? 0 : 1 << UInt64(width(ofCode: c - 1))
        }
        let codes = UnsafeMutablePointer<UInt8>.allocate(capacity: 65)
        for length in 0...64 { codes[length] = UInt8((0..<16).first { width(ofCode: $0) >= length } ?? 15) }
        let prefixes = UnsafeMutablePointer<UInt32>.allocate(capacity: 31)
        for change in -15...15 {
            let entry: UInt32 = switch change {
            case 0: 0 | 1 << 8
            case 1: 0b01 | 2 << 8
            case -1: 0b011 | 3 << 8
            default: 0b111 | 7 << 8 | 1 << 16
            }
            prefixes[change + 15] = entry
        }
        let lengths = UnsafeMutablePointer<UInt8>.allocate(capacity: 128)
        let keeps = UnsafeMutablePointer<UInt64>.allocate(capacity: 128)
        let adds = UnsafeMutablePointer<UInt64>.allocate(capacity: 128)
        for bits in 0..<128 {
            if bits & 1 == 0 {
                (lengths[bits], keeps[bits], adds[bits]) = (1, .max, 0)
            } else if bits & 2 == 0 {
                (lengths[bits], keeps[bits], adds[bits]) = (2, .max, 1)
            } else if bits & 4 == 0 {
                (lengths[bits], keeps[bits], adds[bits]) = (3, .max, .max)
            } else {
                (lengths[bits], keeps[bits], adds[bits]) = (7, 0, UInt64(bits >> 3))
            }
        }
        return BlockTables(widthOfCode: widths, floorOfCode: floors, codeOfLength: codes, prefixOfChange: prefixes,
                           lengthOfPrefix: lengths, keepOfPrefix: keeps, addOfPrefix: adds)
    }()
}
