import Testing
import LnoteModel

@Suite("CRC-32C and SHA-256")
struct ChecksumTests {
    /// RFC 3720 appendix B.4 vectors and the usual check value.
    @Test func crc32cVectors() {
        #expect(CRC32C.checksum(Array("123456789".utf8)) == 0xE306_9283)
        #expect(CRC32C.checksum([]) == 0)
        #expect(CRC32C.checksum([UInt8](repeating: 0, count: 32)) == 0x8A91_36AA)
        #expect(CRC32C.checksum([UInt8](repeating: 0xFF, count: 32)) == 0x62A8_AB43)
        #expect(CRC32C.checksum((0..<32).map { UInt8($0) }) == 0x46DD_794E)
        #expect(CRC32C.checksum((0..<32).map { UInt8(31 - $0) }) == 0x113F_DB5C)
    }

    /// Incremental updates over any split equal the one-shot checksum, and the range form agrees.
    @Test func crc32cIncremental() {
        var g = SplitMix64(seed: 0xC8C)
        for len in [0, 1, 7, 8, 9, 15, 16, 17, 63, 64, 65, 200] {
            let bytes = (0..<len).map { _ in UInt8(truncatingIfNeeded: g.next()) }
            let whole = CRC32C.checksum(bytes)
            for split in 0...len {
                let a = CRC32C.checksum(Array(bytes[0..<split]))
                let c = bytes.withUnsafeBytes { CRC32C.update(a, UnsafeRawBufferPointer(rebasing: $0[split...])) }
                #expect(c == whole, "length \(len) split \(split)")
            }
            if len > 2 { #expect(CRC32C.checksum(bytes, 1..<(len - 1)) == CRC32C.checksum(Array(bytes[1..<(len - 1)]))) }
        }
    }

    /// combine(CRC(a), CRC(b), |b|) is CRC(a + b) for every split, and the parallel
    /// checksum of a big buffer equals the serial one.
    @Test func crc32cCombineAndParallel() {
        let seed: UInt64 = 0xC0B1
        var g = SplitMix64(seed: seed)
        for len in [0, 1, 2, 5, 8, 31, 64, 100, 1000] {
            let bytes = (0..<len).map { _ in UInt8(truncatingIfNeeded: g.next()) }
            let whole = CRC32C.checksum(bytes)
            for split in 0...len {
                let a = CRC32C.checksum(Array(bytes[0..<split])), b = CRC32C.checksum(Array(bytes[split...]))
                #expect(CRC32C.combine(a, b, lengthB: len - split) == whole, "seed \(seed) length \(len) split \(split)")
            }
        }
        let big = (0..<(600 * 1024 + 13)).map { _ in UInt8(truncatingIfNeeded: g.next()) }
        for range in [0..<big.count, 7..<(big.count - 5), 1..<300_000] {
            #expect(CRC32C.checksumInParallel(big, range, minimumBytes: 1) == CRC32C.checksum(big, range), "seed \(seed) \(range)")
        }
    }

    /// The processor's CRC32 instruction (when `update` uses it) and the table give the same
    /// CRC for every length, alignment and starting value.
    @Test func crc32cHardwareMatchesTable() {
        let seed: UInt64 = 0xC4C4
        var g = SplitMix64(seed: seed)
        let bytes = (0..<5000).map { _ in UInt8(truncatingIfNeeded: g.next()) }
        #expect(CRC32C.softwareUpdate(0, UnsafeRawBufferPointer(start: nil, count: 0)) == 0)
        bytes.withUnsafeBytes { raw in
            for _ in 0..<2000 {
                let start = Int(g.next() % 64), length = Int(g.next() % 300) + (g.next() % 8 == 0 ? 4000 : 0)
                let part = UnsafeRawBufferPointer(rebasing: raw[start..<min(raw.count, start + length)])
                let initial = UInt32(truncatingIfNeeded: g.next())
                #expect(CRC32C.update(initial, part) == CRC32C.softwareUpdate(initial, part),
                        "seed \(seed) start \(start) length \(part.count) hardware \(CRC32C.usesHardware)")
            }
        }
    }

    /// FIPS 180-4 example vectors.
    @Test func sha256Vectors() {
        #expect(hexString(SHA256.hash(Array("abc".utf8)))
            == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(hexString(SHA256.hash(Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)))
            == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        #expect(hexString(SHA256.hash([]))
            == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(hexString(SHA256.hash(Array("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu".utf8)))
            == "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1")
    }

    @Test func sha256MillionA() {
        // Fed in uneven pieces to exercise the incremental path too.
        var h = SHA256()
        var fed = 0
        var piece = 1
        while fed < 1_000_000 {
            let n = min(piece, 1_000_000 - fed)
            h.update([UInt8](repeating: UInt8(ascii: "a"), count: n))
            fed += n
            piece = piece * 3 % 1999 + 1
        }
        let expected = "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"
        #expect(hexString(h.finalize()) == expected)
        #expect(hexString(SHA256.hash([UInt8](repeating: UInt8(ascii: "a"), count: 1_000_000))) == expected)
    }

    /// Every length around the padding boundaries, split anywhere, agrees with one shot.
    @Test func sha256IncrementalSplits() {
        var g = SplitMix64(seed: 0x5AA)
        for len in [0, 1, 55, 56, 57, 63, 64, 65, 119, 120, 121, 128, 300] {
            let bytes = (0..<len).map { _ in UInt8(truncatingIfNeeded: g.next()) }
            let whole = SHA256.hash(bytes)
            for split in stride(from: 0, through: len, by: max(1, len / 13)) {
                var h = SHA256()
                h.update(Array(bytes[0..<split]))
                let mid = h.finalize() // finalize does not disturb the running state
                h.update(Array(bytes[split...]))
                #expect(h.finalize() == whole, "length \(len) split \(split)")
                #expect(mid == SHA256.hash(Array(bytes[0..<split])))
            }
        }
    }

    @Test func assetIDOf() {
        let id = AssetID.of(Array("abc".utf8))
        #expect(id.description == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(AssetID(hex: id.description) == id)
    }
}
