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

    /// [SHR-2] A translation is written in its short form, any other transform in full.
    @Test func transformForms() {
        var w = ByteWriter()
        ElementCodec.encode(Transform.translation(3, -2), into: &w)
        #expect(w.bytes == [0x00, 0x06, 0x03])
        w = ByteWriter()
        ElementCodec.encode(Transform(a: 1, b: 0, c: 0, d: 1, tx: 0, ty: 0), into: &w)
        #expect(w.bytes == [0x01, 0x02, 0x00, 0x00, 0x02, 0x00, 0x00])
    }

    @Test func rejections() {
        // Zero replica id, zero counter.
        var r = ByteReader([0, 0, 0, 0, 0, 0, 0, 0, 1])
        expectDecodeFailure([.corrupt], "zero replica") { _ = try ElementCodec.decodeOpID(&r) }
        r = ByteReader([1, 0, 0, 0, 0, 0, 0, 0, 0])
        expectDecodeFailure([.corrupt], "zero counter") { _ = try ElementCodec.decodeOpID(&r) }
        // Clock entries out of order.
        r = ByteReader([2, 2, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 1])
        expectDecodeFailure([.corrupt], "clock order") { _ = try ElementCodec.decodeClock(&r) }
        // Z fraction ending in zero.
        r = ByteReader([2, 2, 5, 0])
        expectDecodeFailure([.corrupt], "z fraction") { _ = try ElementCodec.decodeZKey(&r) }
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
