import Foundation
import LnoteModel

// TEMPORARY (branch `store` only): the page snapshot codec and SHA-256 are being written in
// LnoteModel by the snapshot helper (`PageSnapshot.encode/decode`, `AssetID.of(bytes)`).
// This file stands in for them with the same call shapes so the store can be built and
// tested now; it is deleted when that work is merged into main. Its byte format is NOT the
// specified snapshot format (Protocol/page-snapshot.md); nothing outside tests should
// depend on it.

/// Stand-in for LnoteModel's `PageSnapshot` (see the note at the top of this file).
enum PageSnapshot {
    static let magic: [UInt8] = Array("LNSHIM01".utf8)

    static func encode(_ state: PageState, coveredLogOffset: UInt64, logIncarnation: UInt64) -> [UInt8] {
        var w = ByteWriter(capacity: 256)
        w.append(magic)
        w.u64(coveredLogOffset)
        w.u64(logIncarnation)
        w.append(state.page.uuid.bytes)
        ElementCodec.encode(state.clock, into: &w)
        w.varint(state.maxLamport)
        w.svarint(state.modified)
        w.varint(UInt64(state.elements.count))
        for e in state.elements {
            ElementCodec.encode(e.id, into: &w)
            w.varint(e.lamport)
            w.svarint(e.wallTime)
            ElementCodec.encode(e.content, into: &w)
            ElementCodec.encode(e.transform.value, into: &w)
            refs(e.transform.frontier, &w)
            ElementCodec.encode(e.z.value, into: &w)
            refs(e.z.frontier, &w)
            w.varint(UInt64(e.erased.count))
            for r in e.erased {
                w.varint(UInt64(r.from))
                w.varint(UInt64(r.to))
            }
            refs(e.frontier, &w)
        }
        w.varint(UInt64(state.tombstones.count))
        for t in state.tombstones {
            ElementCodec.encode(t.id, into: &w)
            w.varint(UInt64(t.erasures.count))
            for e in t.erasures {
                ElementCodec.encode(e.ref, into: &w)
                ElementCodec.encode(e.clock, into: &w)
            }
            refs(t.frontier, &w)
        }
        w.varint(UInt64(state.contexts.count))
        for c in state.contexts {
            w.u64(c.replica.rawValue)
            ElementCodec.encode(c.clock, into: &w)
        }
        let crc = w.bytes.withUnsafeBytes { CRC32C.update(0, $0) }
        w.u32(crc)
        return w.bytes
    }

    private static func refs(_ rs: [OpRef], _ w: inout ByteWriter) {
        w.varint(UInt64(rs.count))
        for r in rs { ElementCodec.encode(r, into: &w) }
    }

    private static func refs(_ r: inout ByteReader) throws -> [OpRef] {
        let n = try r.count("refs", max: r.remaining / 10)
        return try (0..<n).map { _ in try ElementCodec.decodeOpRef(&r) }
    }

    static func decode(_ bytes: [UInt8], path: String?) throws
        -> (state: PageState, coveredLogOffset: UInt64, logIncarnation: UInt64) {
        guard bytes.count >= magic.count + 20 + 4 else {
            throw LnoteError(.truncated, "snapshot too short", path: path, offset: bytes.count)
        }
        guard Array(bytes[0..<8]) == magic else { throw LnoteError(.corrupt, "bad snapshot magic", path: path, offset: 0) }
        let body = bytes.count - 4
        let stored = UInt32(bytes[body]) | UInt32(bytes[body + 1]) << 8 | UInt32(bytes[body + 2]) << 16 | UInt32(bytes[body + 3]) << 24
        let crc = bytes.withUnsafeBytes { CRC32C.update(0, UnsafeRawBufferPointer(rebasing: $0[0..<body])) }
        guard crc == stored else { throw LnoteError(.corrupt, "snapshot CRC mismatch", path: path, offset: body) }
        var r = ByteReader(bytes, range: 8..<body, path: path)
        let covered = try r.u64("covered offset")
        let incarnation = try r.u64("incarnation")
        let page = PageID(UUID(bytes: try r.bytes(16, "page id"))!)
        var s = PageState(page: page)
        s.clock = try ElementCodec.decodeClock(&r)
        s.maxLamport = try r.varint()
        s.modified = try r.svarint()
        let n = try r.count("elements", max: r.remaining / 10)
        for _ in 0..<n {
            let id = try ElementCodec.decodeOpID(&r)
            let lamport = try r.varint()
            let wall = try r.svarint()
            let content = try ElementCodec.decodeContent(&r)
            let t = LWWRegister(try ElementCodec.decodeTransform(&r), frontier: try refs(&r))
            let z = LWWRegister(try ElementCodec.decodeZKey(&r), frontier: try refs(&r))
            let m = try r.count("ranges", max: r.remaining / 2)
            var erased: [PointRange] = []
            for _ in 0..<m {
                let f = try r.varint(), to = try r.varint()
                guard let f32 = UInt32(exactly: f), let t32 = UInt32(exactly: to) else {
                    throw r.error(.corrupt, "range out of bounds")
                }
                erased.append(PointRange(f32, t32))
            }
            s.elements.append(ElementRecord(id: id, lamport: lamport, wallTime: wall, content: content,
                                            transform: t, z: z, erased: erased, frontier: try refs(&r)))
        }
        let tn = try r.count("tombstones", max: r.remaining / 10)
        for _ in 0..<tn {
            let id = try ElementCodec.decodeOpID(&r)
            let en = try r.count("erasures", max: r.remaining / 10)
            var es: [Erasure] = []
            for _ in 0..<en {
                let ref = try ElementCodec.decodeOpRef(&r)
                es.append(Erasure(ref: ref, clock: try ElementCodec.decodeClock(&r)))
            }
            s.tombstones.append(Tombstone(id: id, erasures: es, frontier: try refs(&r)))
        }
        let cn = try r.count("contexts", max: r.remaining / 9)
        for _ in 0..<cn {
            let rep = ReplicaID(try r.u64())
            s.contexts.append(ReplicaContext(replica: rep, clock: try ElementCodec.decodeClock(&r)))
        }
        try r.expectEnd("snapshot")
        return (s, covered, incarnation)
    }
}

extension AssetID {
    /// Stand-in for LnoteModel's `AssetID.of(_:)`: the SHA-256 of the bytes.
    static func of(_ bytes: [UInt8]) -> AssetID { AssetID(digest: SHA256Shim.hash(bytes))! }
}

/// FIPS 180-4 SHA-256 (stand-in until LnoteModel's lands).
enum SHA256Shim {
    static let k: [UInt32] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
        0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
        0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
        0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
        0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
        0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
        0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
    ]

    static func hash(_ message: [UInt8]) -> [UInt8] {
        var h: [UInt32] = [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]
        var m = message
        let bitLength = UInt64(message.count) &* 8
        m.append(0x80)
        while m.count % 64 != 56 { m.append(0) }
        for i in (0..<8).reversed() { m.append(UInt8((bitLength >> (UInt64(i) * 8)) & 0xff)) }
        var w = [UInt32](repeating: 0, count: 64)
        for chunk in stride(from: 0, to: m.count, by: 64) {
            for i in 0..<16 {
                let j = chunk + i * 4
                w[i] = UInt32(m[j]) << 24 | UInt32(m[j + 1]) << 16 | UInt32(m[j + 2]) << 8 | UInt32(m[j + 3])
            }
            for i in 16..<64 {
                let s0 = w[i - 15].rotr(7) ^ w[i - 15].rotr(18) ^ (w[i - 15] >> 3)
                let s1 = w[i - 2].rotr(17) ^ w[i - 2].rotr(19) ^ (w[i - 2] >> 10)
                w[i] = w[i - 16] &+ s0 &+ w[i - 7] &+ s1
            }
            var a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7]
            for i in 0..<64 {
                let s1 = e.rotr(6) ^ e.rotr(11) ^ e.rotr(25)
                let ch = (e & f) ^ (~e & g)
                let t1 = hh &+ s1 &+ ch &+ k[i] &+ w[i]
                let s0 = a.rotr(2) ^ a.rotr(13) ^ a.rotr(22)
                let maj = (a & b) ^ (a & c) ^ (b & c)
                let t2 = s0 &+ maj
                hh = g; g = f; f = e; e = d &+ t1; d = c; c = b; b = a; a = t1 &+ t2
            }
            h[0] = h[0] &+ a; h[1] = h[1] &+ b; h[2] = h[2] &+ c; h[3] = h[3] &+ d
            h[4] = h[4] &+ e; h[5] = h[5] &+ f; h[6] = h[6] &+ g; h[7] = h[7] &+ hh
        }
        return h.flatMap { v in [UInt8(v >> 24), UInt8((v >> 16) & 0xff), UInt8((v >> 8) & 0xff), UInt8(v & 0xff)] }
    }
}

private extension UInt32 {
    func rotr(_ n: UInt32) -> UInt32 { (self >> n) | (self << (32 - n)) }
}
