import Testing
import LnoteModel

/// The shared encodings of `Protocol/page-snapshot.md` ("Shared encodings").
@Suite("Shared encodings")
struct ElementCodecTests {
    @Test func roundTrips() throws {
        for seed in testSeeds(0xE1E_0001, count: 500) {
            var m = RandomModel(seed: seed)
            let replicas = [m.replica(), m.replica()]
            let content = m.content(), z = m.zKey(), t = m.transform()
            let ref = m.opRef(from: replicas), clock = m.clock(from: replicas)
            var w = ByteWriter()
            ElementCodec.encode(content, into: &w)
            ElementCodec.encode(z, into: &w)
            ElementCodec.encode(t, into: &w)
            ElementCodec.encode(ref, into: &w)
            ElementCodec.encode(clock, into: &w)
            var r = ByteReader(w.bytes)
            #expect(try ElementCodec.decodeContent(&r) == content, "seed \(seed)")
            #expect(try ElementCodec.decodeZKey(&r) == z, "seed \(seed)")
            #expect(try ElementCodec.decodeTransform(&r) == t, "seed \(seed)")
            #expect(try ElementCodec.decodeOpRef(&r) == ref, "seed \(seed)")
            #expect(try ElementCodec.decodeClock(&r) == clock, "seed \(seed)")
            #expect(r.isAtEnd, "seed \(seed)")
        }
    }

    /// [SHR-1] Writers write every varint in its shortest form (one byte per started 7 bits,
    /// at least one); a varint longer than 10 bytes or overflowing 64 bits is `corrupt` at
    /// its first byte; readers of the shared encodings accept a longer-than-needed varint.
    @Test func varints() throws {
        for seed in testSeeds(0xE1E_0002, count: 20) {
            var g = SplitMix64(seed: seed)
            for _ in 0..<500 {
                let v = g.next() >> UInt64(g.int(in: 0...63))
                var w = ByteWriter()
                w.varint(v)
                let bits = 64 - v.leadingZeroBitCount
                #expect(w.count == max(1, (bits + 6) / 7), "seed \(seed): \(v)")
                var r = ByteReader(w.bytes)
                #expect(try r.varint() == v && r.isAtEnd)
            }
        }
        var r = ByteReader([UInt8](repeating: 0x80, count: 10) + [0x01])
        var e = expectDecodeFailure([.corrupt], "11 bytes") { _ = try r.varint() }
        #expect(e?.offset == 0)
        r = ByteReader([UInt8](repeating: 0xFF, count: 9) + [0x02])
        e = expectDecodeFailure([.corrupt], "65 bits") { _ = try r.varint() }
        #expect(e?.offset == 0)
        r = ByteReader([UInt8](repeating: 0xFF, count: 9) + [0x01])
        #expect(try r.varint() == UInt64.max)
        // An OpID whose counter 5 is written in three bytes instead of one.
        r = ByteReader([0xA1, 0, 0, 0, 0, 0, 0, 0, 0x85, 0x80, 0x00])
        #expect(try ElementCodec.decodeOpID(&r) == OpID(replica: ReplicaID(0xA1), counter: 5) && r.isAtEnd)
    }

    /// [SHR-2] A translation is written in its short form, any other transform in full.
    @Test func transformForms() {
        var w = ByteWriter()
        ElementCodec.encode(Transform.translation(3, -2), into: &w)
        #expect(w.bytes == [0x00, 0x06, 0x03])
        w = ByteWriter()
        ElementCodec.encode(Transform(a: 1, b: 0, c: 0, d: 1, tx: 0, ty: 0), into: &w)
        #expect(w.bytes == [0x01, 0x02, 0x00, 0x00, 0x02, 0x00, 0x00])
    }

    @Test("[SHR-3] [SHR-5] [SHR-6] [SHR-8] [SHR-9] malformed shared encodings are corrupt, at their offset")
    func rejections() throws {
        // Zero replica id, zero counter.
        var r = ByteReader([0, 0, 0, 0, 0, 0, 0, 0, 1])
        expectDecodeFailure([.corrupt], "zero replica") { _ = try ElementCodec.decodeOpID(&r) }
        r = ByteReader([1, 0, 0, 0, 0, 0, 0, 0, 0])
        expectDecodeFailure([.corrupt], "zero counter") { _ = try ElementCodec.decodeOpID(&r) }
        // Clock entries out of order.
        r = ByteReader([2, 2, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 1])
        expectDecodeFailure([.corrupt], "clock order") { _ = try ElementCodec.decodeClock(&r) }
        // [SHR-6] Z keys: a fraction ending in zero (at the key), more than 32 steps (at k),
        // a fraction length above 4096 (at the length), an empty fraction after the first
        // step (at the key), steps cut off (truncated, at k).
        r = ByteReader([2, 0, 2, 5, 0])
        var e = expectDecodeFailure([.corrupt], "z fraction") { _ = try ElementCodec.decodeZKey(&r) }
        #expect(e?.offset == 0)
        r = ByteReader([2, 33] + [UInt8](repeating: 0, count: 400))
        e = expectDecodeFailure([.corrupt], "z depth") { _ = try ElementCodec.decodeZKey(&r) }
        #expect(e?.offset == 1)
        r = ByteReader([2, 0, 0x81, 0x20] + [UInt8](repeating: 1, count: 4097))
        e = expectDecodeFailure([.corrupt], "z fraction length") { _ = try ElementCodec.decodeZKey(&r) }
        #expect(e?.offset == 2)
        r = ByteReader([2, 1, 0, 0xa1, 0, 0, 0, 0, 0, 0, 0, 1, 0])
        e = expectDecodeFailure([.corrupt], "z empty final fraction under a step") { _ = try ElementCodec.decodeZKey(&r) }
        #expect(e?.offset == 0)
        r = ByteReader([2, 2, 0, 0xa1, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0x80])
        e = expectDecodeFailure([.truncated], "z steps cut off") { _ = try ElementCodec.decodeZKey(&r) }
        #expect(e?.offset == 1)
        r = ByteReader([2, 1, 0, 0xa1, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0x80])
        #expect(try ElementCodec.decodeZKey(&r) == ZKey(layer: 1, path: [ZKey.Step(fraction: [], tag: OpID(replica: ReplicaID(0xa1), counter: 1))], fraction: [0x80]))
        // Unknown element kind, unknown tool, unknown transform kind.
        r = ByteReader([9])
        expectDecodeFailure([.corrupt], "kind") { _ = try ElementCodec.decodeContent(&r) }
        r = ByteReader([1, 9, 0, 0, 0, 0, 0, 0])
        expectDecodeFailure([.corrupt], "tool") { _ = try ElementCodec.decodeContent(&r) }
        r = ByteReader([2, 0, 0])
        expectDecodeFailure([.corrupt], "transform kind") { _ = try ElementCodec.decodeTransform(&r) }
        // Int32 overflow in a rect.
        var w = ByteWriter()
        w.svarint(Int64(Int32.max) + 1)
        r = ByteReader(w.bytes)
        expectDecodeFailure([.corrupt], "int32") { _ = try ElementCodec.decodeRect(&r) }
    }
}
