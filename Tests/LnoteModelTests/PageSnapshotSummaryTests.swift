import Testing
import LnoteModel

/// The summary read of page-snapshot.md §4.6: element count and modification time from a
/// prefix of the file, with no CRC check.
@Suite("Page snapshot summary read")
struct PageSnapshotSummaryTests {
    static func expected(_ s: PageState, _ bytes: [UInt8], covered: UInt64, incarnation: UInt64) -> PageSnapshot.Summary {
        PageSnapshot.Summary(page: s.page, coveredLogOffset: covered, logIncarnation: incarnation,
                             length: UInt64(bytes.count), elementCount: s.elements.count, modified: s.modified)
    }

    /// The summary of an encoded state is its live element count and `modified`, whether
    /// the reader is given the whole file or only its first `summaryReadSize` bytes.
    @Test("[SNAP-31] the summary is the state's element count and modified time")
    func matchesTheStateForRandomPages() throws {
        for seed in testSeeds(0x5077_0001, count: 200) {
            var m = RandomModel(seed: seed)
            let s = m.pageState(maxElements: m.int(0...40))
            let covered = m.u64(), incarnation = m.u64()
            let bytes = PageSnapshot.encode(s, coveredLogOffset: covered, logIncarnation: incarnation)
            let want = Self.expected(s, bytes, covered: covered, incarnation: incarnation)
            #expect(try PageSnapshot.summary(prefix: bytes) == want, "seed \(seed)")
            let prefix = Array(bytes.prefix(PageSnapshot.summaryReadSize))
            #expect(try PageSnapshot.summary(prefix: prefix, path: "p") == want, "seed \(seed)")
        }
    }

    /// Every prefix shorter than the bytes the summary needs throws `truncated` at its end;
    /// every longer one gives the same summary. The bytes needed end at the element count.
    @Test("[SNAP-31] a prefix too short is truncated at its end; a long enough one gives the summary")
    func truncationAtEveryPrefixLength() throws {
        for seed in testSeeds(0x5077_0002, count: 16) {
            var m = RandomModel(seed: seed)
            let s = m.pageState(maxElements: 6)
            let bytes = PageSnapshot.encode(s, coveredLogOffset: 7, logIncarnation: 8)
            let want = Self.expected(s, bytes, covered: 7, incarnation: 8)
            // Header, page section header and body, elements section header, count varint.
            let pageSize = Int(bytes[54]) | Int(bytes[55]) << 8 | Int(bytes[56]) << 16 | Int(bytes[57]) << 24
            var countBytes = 1
            while bytes[52 + 6 + pageSize + 6 + countBytes - 1] & 0x80 != 0 { countBytes += 1 }
            let needed = 52 + 6 + pageSize + 6 + countBytes
            for cut in 0...bytes.count {
                let prefix = Array(bytes[0..<cut])
                if cut < needed {
                    let e = expectDecodeFailure([.truncated], "seed \(seed) cut at \(cut) of \(bytes.count)") {
                        _ = try PageSnapshot.summary(prefix: prefix)
                    }
                    if let e, e.offset != cut { Issue.record("seed \(seed) cut at \(cut): offset \(String(describing: e.offset))") }
                } else {
                    #expect(try PageSnapshot.summary(prefix: prefix) == want, "seed \(seed) cut at \(cut)")
                }
            }
        }
    }

    /// Random bytes, random bytes behind a valid magic, and damaged prefixes of real files:
    /// every outcome is a summary or an `LnoteError` with an offset inside the input.
    @Test("[SNAP-31] random and damaged bytes give a summary or an error with an offset")
    func randomBytesNeverCrash() {
        var rejected = 0, summarized = 0
        for seed in testSeeds(0x5077_0003, count: 40) {
            var m = RandomModel(seed: seed)
            let original = PageSnapshot.encode(m.pageState(), coveredLogOffset: 1, logIncarnation: 2)
            for round in 0..<150 {
                var b: [UInt8]
                switch round % 3 {
                case 0: b = (0..<m.int(0...120)).map { _ in UInt8(m.int(0...255)) }
                case 1: b = PageSnapshot.magic + (0..<m.int(0...200)).map { _ in UInt8(m.int(0...255)) }
                default:
                    b = Array(original.prefix(m.int(0...original.count)))
                    for _ in 0..<m.int(1...4) where !b.isEmpty {
                        let i = m.int(0...(b.count - 1))
                        b[i] = m.chance(0.5) ? b[i] ^ (1 << UInt8(m.int(0...7))) : m.pick([0x00, 0x01, 0x7F, 0x80, 0xFF])
                    }
                }
                do {
                    _ = try PageSnapshot.summary(prefix: b, path: "x")
                    summarized += 1
                } catch let e as LnoteError {
                    rejected += 1
                    if let o = e.offset { #expect(o >= 0 && o <= b.count, "seed \(seed) round \(round): \(e)") }
                    else { Issue.record("seed \(seed) round \(round): no offset: \(e)") }
                    #expect(e.path == "x", "seed \(seed) round \(round)")
                } catch {
                    Issue.record("seed \(seed) round \(round): \(error)")
                }
            }
        }
        #expect(rejected > 0 && summarized > 0, "rejected \(rejected), summarized \(summarized)")
    }

    /// Damage inside a resealed file: whenever the full decoder accepts the file, the summary
    /// agrees with the state it decodes.
    @Test("[SNAP-31] whenever the full decoder accepts a file, the summary agrees with it")
    func agreesWithDecodeOnResealedMutations() throws {
        var agreed = 0
        for seed in testSeeds(0x5077_0004, count: 40) {
            var m = RandomModel(seed: seed)
            let original = PageSnapshot.encode(m.pageState(), coveredLogOffset: 3, logIncarnation: 4)
            for _ in 0..<60 {
                var b = original
                for _ in 0..<m.int(1...3) {
                    let i = m.int(20...(b.count - 5))
                    b[i] = m.chance(0.5) ? b[i] ^ (1 << UInt8(m.int(0...7))) : m.pick([0x00, 0x01, 0x7F, 0x80, 0xFF])
                }
                b = PageSnapshotTests.reseal(b)
                guard let c = try? PageSnapshot.decode(b) else { continue }
                agreed += 1
                #expect(try PageSnapshot.summary(prefix: b) == Self.expected(c.state, b, covered: c.coveredLogOffset,
                                                                             incarnation: c.logIncarnation), "seed \(seed)")
            }
        }
        #expect(agreed > 0)
    }

    /// Counts no section can hold are refused before anything is allocated for them.
    @Test("[SNAP-31] counts no section can hold, misplaced sections, newer versions are refused")
    func hugeCountsAreCorrupt() throws {
        func file(page: [UInt8], elements: [UInt8]) -> [UInt8] {
            var w = ByteWriter()
            w.append(PageSnapshot.magic)
            w.u16(1)
            w.u16(0)
            w.u64(UInt64(52 + 6 + page.count + 6 + elements.count + 4))
            w.append([UInt8](repeating: 0x11, count: 16))
            w.u64(40)
            w.u64(9)
            w.u16(1)
            w.u32(UInt32(page.count))
            w.append(page)
            w.u16(2)
            w.u32(UInt32(elements.count))
            w.append(elements)
            w.u32(0)  // CRC: not checked by a summary
            return w.bytes
        }
        func varint(_ v: UInt64) -> [UInt8] {
            var w = ByteWriter()
            w.varint(v)
            return w.bytes
        }
        // A valid minimal page: empty clock, max Lamport 0, modified 5, no elements.
        let ok = file(page: [0, 0, 10], elements: [0])
        #expect(try PageSnapshot.summary(prefix: ok).elementCount == 0)
        #expect(try PageSnapshot.summary(prefix: ok).modified == 5)
        // Clock entry count 2^62 in a 12-byte section.
        let clock = file(page: varint(1 << 62) + [0, 0], elements: [0])
        let e1 = expectDecodeFailure([.corrupt], "huge clock") { _ = try PageSnapshot.summary(prefix: clock) }
        #expect(e1?.offset == 58)
        // Element count 2^40 with 10 bytes of section.
        let elements = file(page: [0, 0, 10], elements: varint(1 << 40) + [UInt8](repeating: 0, count: 4))
        let e2 = expectDecodeFailure([.corrupt], "huge element count") { _ = try PageSnapshot.summary(prefix: elements) }
        #expect(e2?.offset == 52 + 6 + 3 + 6)
        // A page section whose size runs past the file's length.
        var long = ok
        long[54] = 0xFF
        expectDecodeFailure([.corrupt], "page section too long") { _ = try PageSnapshot.summary(prefix: long) }
        // Something else where the page section must be.
        var tag = ok
        tag[52] = 3
        expectDecodeFailure([.corrupt], "wrong first tag") { _ = try PageSnapshot.summary(prefix: tag) }
        // A newer version and an unknown incompatible flag.
        var newer = ok
        newer[8] = UInt8(PageSnapshot.version + 1)
        expectDecodeFailure([.unsupportedVersion], "newer version") { _ = try PageSnapshot.summary(prefix: newer) }
        var flagged = ok
        flagged[11] = 0x01
        expectDecodeFailure([.unsupportedVersion], "incompatible flag") { _ = try PageSnapshot.summary(prefix: flagged) }
        // Bytes past the recorded length.
        expectDecodeFailure([.corrupt], "trailing bytes") { _ = try PageSnapshot.summary(prefix: ok + [0]) }
        // The page section is consumed exactly.
        let extra = file(page: [0, 0, 10, 0], elements: [0])
        expectDecodeFailure([.corrupt], "page section with a spare byte") { _ = try PageSnapshot.summary(prefix: extra) }
    }
}
