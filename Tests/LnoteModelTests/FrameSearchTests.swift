import Testing
@testable import LnoteModel

/// [PKG-37] The search for the next valid frame after damage answers what trying every
/// position with `Frame.scan` answers, at a bounded cost per position.
@Suite("The search for the next frame after damage")
struct FrameSearchTests {
    /// The reference: every position tried with a full CRC.
    static func naiveNext(_ bytes: [UInt8], after p: Int) -> Int? {
        var q = p + 1
        while q <= bytes.count - Frame.headerSize - 1 {
            if case .frame = Frame.scan(bytes, at: q) { return q }
            q += 1
        }
        return nil
    }

    static func frame(_ length: Int, _ g: inout SplitMix64) -> [UInt8] {
        Frame(type: UInt8(truncatingIfNeeded: g.next()),
              payload: (0..<(length - 1)).map { _ in UInt8(truncatingIfNeeded: g.next()) }).encoded
    }

    /// Bytes mixing valid frames (short, around `directLimit`, long), random garbage, runs
    /// whose every other position announces a long frame that fits, and flipped bits.
    static func damagedBytes(_ g: inout SplitMix64) -> [UInt8] {
        var out: [UInt8] = []
        let limit = FrameSearch.directLimit
        for _ in 0..<Int.random(in: 4...24, using: &g) {
            switch Int.random(in: 0..<6, using: &g) {
            case 0: out += frame(Int.random(in: 1...40, using: &g), &g)
            case 1: out += frame(Int.random(in: (limit - 2)...(limit + 2), using: &g), &g)
            case 2: out += frame(Int.random(in: (limit + 3)...9000, using: &g), &g)
            case 3: out += (0..<Int.random(in: 1...600, using: &g)).map { _ in UInt8(truncatingIfNeeded: g.next()) }
            case 4:
                // Length fields of about 1–8 KiB at even positions, small at odd ones.
                for _ in 0..<Int.random(in: 1...300, using: &g) {
                    out += [UInt8.random(in: 0...255, using: &g), UInt8.random(in: 2...31, using: &g), 0, 0]
                }
            default:
                // A valid long frame with one bit flipped: a candidate whose CRC fails.
                var f = frame(Int.random(in: (limit + 1)...5000, using: &g), &g)
                let bit = Int.random(in: 0..<(f.count * 8), using: &g)
                f[bit / 8] ^= 1 << (bit % 8)
                out += f
            }
        }
        return out
    }

    @Test("[PKG-37] random damaged bytes: the same next frame as trying every position, from any start and across successive searches")
    func agreesWithTryingEveryPosition() {
        var found = 0, longFound = 0
        for seed in testSeeds(0xF5EA_2C4, count: 40, soakFactor: 10) {
            var g = SplitMix64(seed: seed)
            let bytes = Self.damagedBytes(&g)
            // Successive searches with one FrameSearch, as a scan over several damaged
            // ranges makes them.
            var search = FrameSearch(bytes)
            var p = Int.random(in: -1..<max(0, bytes.count / 4), using: &g)
            while true {
                let expected = Self.naiveNext(bytes, after: p)
                let got = search.next(after: p)
                #expect(got == expected, "seed \(seed): after \(p) of \(bytes.count) bytes")
                guard let next = expected, got == expected else { break }
                found += 1
                if case .frame(let f, _) = Frame.scan(bytes, at: next), f.payload.count >= FrameSearch.directLimit { longFound += 1 }
                p = next + Int.random(in: 0...3, using: &g)
            }
            // A fresh search from a few random starts, and one search from starts in any order.
            var reused = FrameSearch(bytes)
            for _ in 0..<8 {
                let p = Int.random(in: -1..<bytes.count, using: &g)
                var fresh = FrameSearch(bytes)
                #expect(fresh.next(after: p) == Self.naiveNext(bytes, after: p), "seed \(seed): fresh search after \(p)")
                #expect(reused.next(after: p) == Self.naiveNext(bytes, after: p), "seed \(seed): reused search after \(p)")
            }
        }
        // The frames found include long ones, whose CRC came from the prefixes.
        #expect(found >= 40 && longFound >= 10, "\(found) frames found, \(longFound) long")
    }

    @Test("x^(8n) from its byte tables equals the square-and-multiply one, 0 … 2^24")
    func powerTables() {
        var g = SplitMix64(seed: 0x8F0)
        var ns = [0, 1, 2, 255, 256, 257, 65_535, 65_536, 65_537, (1 << 24) - 1, 1 << 24]
        for _ in 0..<2000 { ns.append(Int.random(in: 0...(1 << 24), using: &g)) }
        for n in ns {
            #expect(CRC32C.xPower8N(n) == CRC32C.xPower8NBySquaring(n), "n = \(n)")
        }
    }

    /// Four MiB where 5 positions in 8 announce a frame that fits (of 8 bytes, 2 KiB or
    /// 512 KiB), then one valid 64 KiB frame: trying each position with a full CRC costs
    /// about 500 GiB of CRC, hours; the search finds the frame for at most 200 bytes of CRC
    /// per byte searched.
    @Test("[PKG-37] 4 MiB crafted so that most positions announce a long frame that fits: the frame after it is found for ≤ 200 bytes of CRC a byte")
    func craftedCandidatesCostLittle() {
        var g = SplitMix64(seed: 0xC4AF7)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(4 << 20 + 70_000)
        while bytes.count < 4 << 20 { bytes += [0, 0, 8, 0, 0, 8, 0, 0] }
        let at = bytes.count
        bytes += Self.frame(65_536, &g)
        var search = FrameSearch(bytes)
        let found = search.next(after: 0)
        #expect(found == at)
        #expect(search.bytesHashed <= 200 * bytes.count, "\(search.bytesHashed) bytes of CRC for \(bytes.count) searched")
    }

    @Test("[PKG-37] edges: a 9-byte frame as the last bytes, a long frame ending on a checkpoint at the end, buffers too short for a frame")
    func edges() {
        var g = SplitMix64(seed: 0xED6E)
        // The smallest frame (length 1) ending the bytes.
        let small = [UInt8](repeating: 0xFF, count: 3) + Self.frame(1, &g)
        var a = FrameSearch(small)
        #expect(small.count == 12 && a.next(after: -1) == 3)
        // A frame of length 640 (a multiple of the stride) after 5 bytes that announce nothing
        // that fits: the prefix CRC it needs ends exactly at the end of the bytes, on a checkpoint.
        let long = [UInt8](repeating: 0xFF, count: 5) + Self.frame(640, &g)
        var b = FrameSearch(long)
        #expect(b.next(after: 0) == 5 && b.bytesHashed > 4 + 640 - 64, "\(b.bytesHashed) bytes: not the prefix path")
        #expect(b.next(after: -1) == 5)
        for n in 0..<12 {
            let bytes = Array(small.prefix(n))
            var c = FrameSearch(bytes)
            #expect(c.next(after: -1) == Self.naiveNext(bytes, after: -1), "\(n) bytes")
        }
    }
}
