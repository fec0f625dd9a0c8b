import Testing
import LnoteModel
import LnoteTestSupport

@Suite("Page snapshot faults")
struct PageSnapshotFaultTests {
    /// [SNAP-4] [SNAP-5] A snapshot cut at any byte throws `truncated` (or `corrupt` when
    /// the cut falls inside the magic's look-alike) with an offset, and never crashes.
    @Test func truncationAtEveryOffset() {
        var cases = 0, undetected = 0
        for seed in testSeeds(0xFA17_0001, count: 12) {
            var m = RandomModel(seed: seed)
            let bytes = PageSnapshot.encode(m.pageState(maxElements: 5), coveredLogOffset: 99, logIncarnation: 5)
            for cut in 0..<bytes.count {
                let e = expectDecodeFailure([.truncated], "seed \(seed) cut at \(cut) of \(bytes.count)") {
                    _ = try PageSnapshot.decode(Array(bytes[0..<cut]))
                }
                if let e, e.offset != cut { Issue.record("seed \(seed) cut at \(cut): offset \(String(describing: e.offset))") }
                cases += 1
                if !isExpectedFailure(e, [.truncated]) || e?.offset != cut { undetected += 1 }
            }
        }
        ReliabilityReport.record(family: "every-byte cuts", detail: "page snapshot cut at every byte (PageSnapshotFaultTests)",
                                 cases: cases, corrupted: undetected)
    }

    /// [SNAP-6] Flipped bits anywhere are caught (by the length check or the CRC).
    @Test func bitFlipsAreDetected() {
        var cases = 0, undetected = 0
        for seed in testSeeds(0xFA17_0002, count: 40) {
            var m = RandomModel(seed: seed)
            let original = PageSnapshot.encode(m.pageState(), coveredLogOffset: m.u64(), logIncarnation: m.u64())
            for _ in 0..<100 {
                var b = original
                let flips = m.int(1...4)
                for _ in 0..<flips {
                    let i = m.int(0...(b.count - 1))
                    if m.chance(0.7) { b[i] ^= 1 << UInt8(m.int(0...7)) } else { b[i] = UInt8(m.int(0...255)) }
                }
                guard b != original else { continue }
                cases += 1
                let e = expectDecodeFailure([.corrupt, .truncated], "seed \(seed), \(flips) changes") { _ = try PageSnapshot.decode(b) }
                if !isExpectedFailure(e, [.corrupt, .truncated]) { undetected += 1 }
            }
        }
        #expect(cases > 3000)
        ReliabilityReport.record(family: "bit flips", detail: "page snapshot, 1-4 changed bytes (PageSnapshotFaultTests)",
                                 cases: cases, corrupted: undetected)
    }

    /// [SNAP-27] [SNAP-28] Structure-aware fuzzing: change bytes *inside* the CRC-protected
    /// area and reseal, so the parser and its invariant checks see the damage. Every outcome
    /// is a clean throw with an offset — `corrupt` (never `truncated`: the envelope is whole)
    /// or `unsupportedVersion` — or a state that passes `validate` (every value satisfies
    /// sections 2 to 4.4) and re-encodes to a snapshot that decodes to the same state.
    @Test func resealedMutationsNeverCrash() {
        var decoded = 0, rejected = 0
        for seed in testSeeds(0xFA17_0003, count: 60) {
            var m = RandomModel(seed: seed)
            let original = PageSnapshot.encode(m.pageState(), coveredLogOffset: 3, logIncarnation: 4)
            for _ in 0..<80 {
                var b = original
                for _ in 0..<m.int(1...3) {
                    let i = m.int(20...(b.count - 5))
                    switch m.int(0...2) {
                    case 0: b[i] ^= 1 << UInt8(m.int(0...7))
                    case 1: b[i] = UInt8(m.int(0...255))
                    default: b[i] = m.pick([0x00, 0x01, 0x7F, 0x80, 0xFF])
                    }
                }
                b = PageSnapshotTests.reseal(b)
                do {
                    let c = try PageSnapshot.decode(b)
                    decoded += 1
                    do { try PageSnapshot.validate(c.state) } catch {
                        Issue.record("seed \(seed): decoded state fails validate: \(error)")
                    }
                    let again = PageSnapshot.encode(c.state, coveredLogOffset: c.coveredLogOffset, logIncarnation: c.logIncarnation)
                    #expect(try PageSnapshot.decode(again).state == c.state, "seed \(seed)")
                } catch let e as LnoteError {
                    rejected += 1
                    #expect([.corrupt, .unsupportedVersion].contains(e.code), "seed \(seed): \(e)")
                    if let o = e.offset { #expect(o >= 0 && o <= b.count, "seed \(seed): \(e)") }
                    else { Issue.record("seed \(seed): no offset: \(e)") }
                } catch {
                    Issue.record("seed \(seed): \(error)")
                }
            }
        }
        #expect(rejected > 0 && decoded > 0, "decoded \(decoded), rejected \(rejected)")
    }

    /// [SNAP-27] [SNAP-28] Random bytes are refused; so are random bodies in a valid
    /// envelope (as `corrupt` or `unsupportedVersion`, with an offset), unless they happen to
    /// form a valid snapshot, whose state then passes `validate`.
    @Test func randomBytesAreRejected() {
        for seed in testSeeds(0xFA17_0004, count: 2000) {
            var g = SplitMix64(seed: seed)
            let n = Int(g.below(300))
            var b = (0..<n).map { _ in UInt8(truncatingIfNeeded: g.next()) }
            expectDecodeFailure([.corrupt, .truncated], "seed \(seed)") { _ = try PageSnapshot.decode(b) }
            // The same bytes after a valid header and before a valid CRC.
            var w = ByteWriter()
            w.append(PageSnapshot.magic)
            w.u16(1); w.u16(0); w.u64(0)
            w.append(b)
            w.u32(0)
            b = w.bytes
            if b.count >= 56 {
                b = PageSnapshotTests.reseal(b)
                do {
                    let c = try PageSnapshot.decode(b)
                    try PageSnapshot.validate(c.state)
                } catch let e as LnoteError {
                    #expect([.corrupt, .unsupportedVersion].contains(e.code) && e.offset != nil, "seed \(seed): \(e)")
                } catch {
                    Issue.record("seed \(seed): \(error)")
                }
            }
        }
    }
}
