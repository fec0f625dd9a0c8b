import Testing
import LnoteModel
import LnoteTestSupport

/// The frame codec shared by logs and the wire (`Frame.swift`): round trips and damage.
@Suite("Frames")
struct FrameTests {
    static func frames(_ g: inout SplitMix64) -> [Frame] {
        (0..<(1 + Int(g.below(5)))).map { _ in
            Frame(type: UInt8(truncatingIfNeeded: g.next()),
                  payload: (0..<Int(g.below(40))).map { _ in UInt8(truncatingIfNeeded: g.next()) })
        }
    }

    @Test func roundTripAndTruncation() throws {
        var cases = 0, undetected = 0
        for seed in testSeeds(0xF4A_0001, count: 100) {
            var g = SplitMix64(seed: seed)
            let fs = Self.frames(&g)
            var w = ByteWriter()
            var starts: [Int] = []
            for f in fs { starts.append(w.count); f.encode(into: &w) }
            let bytes = w.bytes
            #expect(try Frame.decodeAll(bytes) == fs, "seed \(seed)")
            for cut in 0..<bytes.count where !starts.contains(cut) {
                let e = expectDecodeFailure([.truncated], "seed \(seed) cut \(cut)") {
                    _ = try Frame.decodeAll(Array(bytes[0..<cut]), base: 1000)
                }
                // The torn frame is the last one starting before the cut.
                let torn = starts.last { $0 < cut }!
                let located = e?.offset == 1000 + torn && e?.index == starts.firstIndex(of: torn)
                #expect(located, "seed \(seed) cut \(cut)")
                cases += 1
                if !isExpectedFailure(e, [.truncated]) || !located { undetected += 1 }
            }
        }
        ReliabilityReport.record(family: "every-byte cuts", detail: "frames cut at every byte (FrameTests)",
                                 cases: cases, corrupted: undetected)
    }

    @Test func damageIsDetected() {
        var cases = 0, undetected = 0
        for seed in testSeeds(0xF4A_0002, count: 1000) {
            var g = SplitMix64(seed: seed)
            var bytes = Self.frames(&g).flatMap(\.encoded)
            let i = Int(g.below(UInt64(bytes.count)))
            bytes[i] ^= UInt8(1 << g.below(8))
            let e = expectDecodeFailure([.corrupt, .truncated], "seed \(seed) flip at \(i)") { _ = try Frame.decodeAll(bytes) }
            cases += 1
            if !isExpectedFailure(e, [.corrupt, .truncated]) { undetected += 1 }
        }
        ReliabilityReport.record(family: "bit flips", detail: "frames, one flipped bit (FrameTests)", cases: cases, corrupted: undetected)
    }
}
