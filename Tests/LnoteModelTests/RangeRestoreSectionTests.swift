import Foundation
import Testing
@testable import LnoteModel

/// The range-restore section of a page snapshot (page-snapshot.md [SNAP-44]) and the rule that
/// computes a stroke's erased ranges from its partial erases and range restores
/// (merge-semantics.md [MERGE-71]): round trips, its bytes, every refusal with its offset, and
/// the sweep against the rule's words on random histories.
@Suite("Range-restore snapshot section")
struct RangeRestoreSectionTests {
    typealias H = EraseHistorySnapshotTests
    static let a = H.a, b = H.b, c = H.c
    static let tag = PageSnapshot.Section.rangeRestores.rawValue

    /// Stroke a.1 (10 points): b.2 erased [0, 6), c.3 erased [4, 9); a.4 (having seen b.2 only)
    /// took back [1, 3) and [4, 5). Left erased: [0, 1), [3, 9).
    static let e1 = RangeErasure(ref: H.ref(b, 2, 5), ranges: [PointRange(0, 6)])
    static let e2 = RangeErasure(ref: H.ref(c, 3, 6), ranges: [PointRange(4, 9)])
    static let r1 = RangeRestore(ref: H.ref(a, 4, 8), ranges: [PointRange(1, 3), PointRange(4, 5)], seen: [H.id(b, 2)])
    static let stroke = ElementRecord(id: H.id(a, 1), lamport: 1, wallTime: 1, content: H.stroke(10), z: LWWRegister(ZKey(layer: 1)),
                                      erased: [PointRange(0, 1), PointRange(3, 9)], frontier: [H.ref(c, 3, 6), H.ref(a, 4, 8)],
                                      rangeErasures: [e1, e2], rangeRestores: [r1])
    static var page: PageState { H.page(elements: [stroke]) }

    static func body(_ bytes: [UInt8]) -> (range: Range<Int>, sectionStart: Int)? {
        guard let s = H.sections(bytes).first(where: { $0.tag == tag }) else { return nil }
        return (s.range.lowerBound + 6..<s.range.upperBound, s.range.lowerBound)
    }

    /// `state` encoded with the range-restore section's body replaced by `body` (lengths and
    /// CRC fixed); the offset where the new body starts.
    static func withBody(_ state: PageState, _ body: [UInt8]) -> (bytes: [UInt8], at: Int) {
        var bytes = PageSnapshot.encode(state, coveredLogOffset: 0, logIncarnation: 0)
        let b = Self.body(bytes)!
        bytes.removeLast(PageSnapshot.trailerSize)
        bytes.replaceSubrange(b.range, with: body)
        withUnsafeBytes(of: UInt32(body.count).littleEndian) { for i in 0..<4 { bytes[b.sectionStart + 2 + i] = $0[i] } }
        withUnsafeBytes(of: UInt64(bytes.count + PageSnapshot.trailerSize).littleEndian) { for i in 0..<8 { bytes[12 + i] = $0[i] } }
        let crc = CRC32C.checksum(bytes)
        withUnsafeBytes(of: crc.littleEndian) { bytes.append(contentsOf: $0) }
        return (bytes, b.range.lowerBound)
    }

    /// `state` encoded (it has no range restore) with a range-restore section of `body`
    /// appended; where the section starts and where its body ends.
    static func appended(_ state: PageState, _ body: [UInt8]) -> (bytes: [UInt8], at: Int, end: Int) {
        var bytes = PageSnapshot.encode(state, coveredLogOffset: 0, logIncarnation: 0)
        bytes.removeLast(PageSnapshot.trailerSize)
        let at = bytes.count
        bytes += [UInt8(tag & 0xFF), UInt8(tag >> 8)]
        withUnsafeBytes(of: UInt32(body.count).littleEndian) { bytes.append(contentsOf: $0) }
        bytes += body
        let end = bytes.count
        withUnsafeBytes(of: UInt64(bytes.count + PageSnapshot.trailerSize).littleEndian) { for i in 0..<8 { bytes[12 + i] = $0[i] } }
        let crc = CRC32C.checksum(bytes)
        withUnsafeBytes(of: crc.littleEndian) { bytes.append(contentsOf: $0) }
        return (bytes, at, end)
    }

    @Test("[SNAP-44] [MERGE-71] a stroke's partial erases and range restores round-trip; the section comes last and is written only when a restore is kept")
    func roundTrip() throws {
        try PageSnapshot.validate(Self.page)
        for version: UInt16 in [1, 2, 3, 4] {
            let bytes = PageSnapshot.encode(Self.page, coveredLogOffset: 1, logIncarnation: 2, version: version)
            #expect(H.sections(bytes).map(\.tag).suffix(2) == [H.tag, Self.tag], "version \(version)")
            #expect(try PageSnapshot.decode(bytes).state == Self.page, "version \(version)")
            let deferred = try PageSnapshot.decode(bytes, deferringPoints: true).state.elements[0]
            #expect(deferred.rangeRestores == [Self.r1] && deferred.rangeErasures == [Self.e1, Self.e2] && deferred.erased == Self.stroke.erased)
        }
        var none = Self.page
        none.elements[0].rangeRestores = []
        none.elements[0].erased = [PointRange(0, 9)]
        let bytes = PageSnapshot.encode(none, coveredLogOffset: 1, logIncarnation: 2)
        #expect(!H.sections(bytes).map(\.tag).contains(Self.tag))
        // What each partial erase keeps: b.2 less the restore that saw it, c.3 whole.
        #expect(Self.stroke.keptRangeErasures == [RangeErasure(ref: Self.e1.ref, ranges: [PointRange(0, 1), PointRange(3, 4), PointRange(5, 6)]),
                                                  Self.e2])
    }

    @Test("[SNAP-44] the section's bytes: element count, then per element its id and restores, each its ref, ranges and the partial erases it had seen")
    func bytes() throws {
        let encoded = PageSnapshot.encode(Self.page, coveredLogOffset: 1, logIncarnation: 2)
        let body = Array(encoded[Self.body(encoded)!.range])
        // page-snapshot.md [SNAP-44]'s example, byte for byte.
        let hex = """
            01 a1 00 00 00 00 00 00 00 01 01 a1 00 00 00 00 00 00 00 04 08
            02 01 02 01 01 01 b2 00 00 00 00 00 00 00 02
            """
        let expected = hex.split(whereSeparator: { $0 == " " || $0 == "\n" }).map { UInt8($0, radix: 16)! }
        #expect(body == expected && body.count == 36)
    }

    @Test("[SNAP-44] refusals: a form the section does not allow, a partial erase it does not name, points outside the erases, erased ranges the rule does not give")
    func refusals() throws {
        func encoded(_ f: (inout ElementRecord) -> Void) -> [UInt8] {
            var s = Self.page
            f(&s.elements[0])
            return PageSnapshot.encode(s, coveredLogOffset: 0, logIncarnation: 0)
        }
        func sectionEnd(_ bytes: [UInt8]) -> Int { Self.body(bytes)!.range.upperBound }
        // Checked once the restores are read: at the section's end.
        let cases: [(String, (inout ElementRecord) -> Void)] = [
            ("erased ranges not what the rule leaves", { $0.erased = [PointRange(0, 9)] }),
            ("a restore naming what is not a partial erase of the stroke", { $0.rangeRestores[0].seen = [H.id(Self.b, 7)] }),
            ("a restore naming a partial erase that is not before it", { $0.rangeRestores[0].ref = H.ref(Self.a, 4, 5) }),
            ("a restore with points no partial erase holds", { $0.rangeRestores[0].ranges = [PointRange(1, 3), PointRange(9, 10)] }),
            // The page clock has 10 operations of each replica.
            ("a restore the page clock does not cover", { $0.rangeRestores[0].ref = H.ref(Self.a, 11, 8) }),
            ("a partial erase the page clock does not cover", { $0.rangeErasures[1].ref = H.ref(Self.c, 12, 6) }),
            ("one replica's partial erases not in the order of their counters", {
                $0.rangeErasures = [RangeErasure(ref: H.ref(Self.b, 3, 5), ranges: [PointRange(0, 6)]),
                                    RangeErasure(ref: H.ref(Self.b, 2, 6), ranges: [PointRange(4, 9)])]
                $0.rangeRestores[0].seen = [H.id(Self.b, 3)]
            }),
        ]
        for (what, f) in cases {
            let bytes = encoded(f)
            // A partial-erase list's own checks ([SNAP-41]) are made when the erase history is read.
            let listCheck = what.hasPrefix("a partial erase the page clock") || what.hasPrefix("one replica's partial erases")
            let history = H.sections(bytes).first { $0.tag == H.tag }!.range.upperBound
            H.expectCorrupt(bytes, at: listCheck ? history : sectionEnd(bytes), what)
        }
        // The form, at the byte where it breaks.
        let page = Self.page
        let valid = PageSnapshot.encode(page, coveredLogOffset: 0, logIncarnation: 0)
        let good = Array(valid[Self.body(valid)!.range])
        // The element's restore count (after 1 + 9 bytes) zero.
        var zero = good
        zero[10] = 0
        H.expectCorrupt(Self.withBody(page, zero).bytes, at: Self.withBody(page, zero).at + 1, "an element without restores")
        // Element count zero.
        H.expectCorrupt(Self.withBody(page, [0]).bytes, at: Self.withBody(page, [0]).at, "a section that holds nothing")
        // Seen count zero: count byte after the ref (10 bytes) and the ranges (5 bytes).
        // (Padded: a section shorter than the least an element takes is refused at its count.)
        var noSeen = Array(good[0..<26])
        noSeen += [0] + [UInt8](repeating: 0, count: 9)
        H.expectCorrupt(Self.withBody(page, noSeen).bytes, at: Self.withBody(page, noSeen).at + 26, "a restore naming no partial erase")
        // Seen twice of one replica.
        var twice = Array(good[0..<26])
        var w = ByteWriter()
        w.varint(2); w.u64(Self.b.rawValue); w.varint(1); w.u64(Self.b.rawValue); w.varint(2)
        twice += w.bytes
        H.expectCorrupt(Self.withBody(page, twice).bytes, at: Self.withBody(page, twice).at + 36, "a replica named twice")
        // A count larger than the bytes left.
        var big = good
        big[0] = 9
        H.expectCorrupt(Self.withBody(page, big).bytes, at: Self.withBody(page, big).at, "more elements than bytes")
        // Restores of an element the page does not hold (a.2), on a page whose a.1 has none
        // and is whole without them: refused for that alone, after the section's last list.
        var noRestores = Self.page
        noRestores.elements[0].rangeRestores = []
        noRestores.elements[0].erased = [PointRange(0, 9)]
        var other = good
        other[9] = 2 // a.2
        let stray = Self.appended(noRestores, other)
        H.expectCorrupt(stray.bytes, at: stray.end, "restores of an element the page does not hold")
        do {
            _ = try PageSnapshot.decode(stray.bytes)
            Issue.record("restores of an element the page does not hold were read")
        } catch let e as LnoteError {
            #expect(e.message.contains("neither live nor kept by a tombstone"), "\(e)")
        }
        // Without an erase history (the partial erases dropped, so none is written): the section alone.
        var bare = Self.page
        bare.elements[0].rangeErasures = []
        bare.elements[0].rangeRestores = []
        bare.elements[0].erased = []
        let alone = Self.appended(bare, good)
        H.expectCorrupt(alone.bytes, at: alone.at, "a range-restore section without an erase history")
    }

    /// The rule in its words: a point is erased when some partial erase holds it that no range
    /// restore holding it had seen.
    static func byDefinition(_ es: [RangeErasure], _ rs: [RangeRestore], points n: UInt32) -> [PointRange] {
        var erased: [PointRange] = []
        for p in 0..<n {
            let held = es.contains { e in
                e.ranges.contains { $0.from <= p && p < $0.to }
                    && !rs.contains { r in r.ranges.contains { $0.from <= p && p < $0.to } && r.hasSeen(e.ref.id) }
            }
            if held { erased.append(PointRange(p, p + 1)) }
        }
        return erased.normalizedUnion()
    }

    @Test("[MERGE-71] the erased ranges computed from the trie of restores are what the rule's words give, on random histories of several replicas")
    func sweepMatchesTheRule() {
        let seed = UInt64(ProcessInfo.processInfo.environment["LNOTE_SEED"] ?? "") ?? 0x5EE9
        var rng = SplitMix64(seed: seed)
        let replicas = (1...4).map { ReplicaID(UInt64($0)) }
        var withRestores = 0
        for k in 0..<400 {
            let n = UInt32.random(in: 1...40, using: &rng)
            func ranges() -> [PointRange] {
                (0..<Int.random(in: 1...3, using: &rng)).map { _ in
                    let f = UInt32.random(in: 0..<n, using: &rng)
                    return PointRange(f, min(n, f + UInt32.random(in: 1...12, using: &rng)))
                }.normalizedUnion()
            }
            var counters = [ReplicaID: UInt64]()
            var es: [RangeErasure] = [], rs: [RangeRestore] = []
            var lamport: UInt64 = 1
            for _ in 0..<Int.random(in: 1...12, using: &rng) {
                let who = replicas.randomElement(using: &rng)!
                counters[who, default: 0] += 1
                lamport += 1
                let ref = OpRef(id: OpID(replica: who, counter: counters[who]!), lamport: lamport)
                if Bool.random(using: &rng) || es.isEmpty {
                    es.append(RangeErasure(ref: ref, ranges: ranges()))
                } else {
                    // A random view: for each replica, a prefix of its partial erases.
                    let seen = RangeHistory.seen(among: es) { id in
                        id.counter <= UInt64.random(in: 0...(counters[id.replica] ?? 0), using: &rng) || id.replica == who
                    }
                    guard !seen.isEmpty else { continue }
                    let cut = RangeHistory.reach(of: ranges(), seen: seen, among: es)
                    guard !cut.isEmpty else { continue }
                    rs.append(RangeRestore(ref: ref, ranges: cut, seen: seen))
                    withRestores += 1
                }
            }
            let expected = Self.byDefinition(es, rs, points: n)
            #expect(RangeHistory.erased(es, rs) == expected, "seed \(seed) case \(k): \(es) \(rs) — rerun with LNOTE_SEED=\(seed)")
            // Added one restore at a time, each looking again only at what reaches its span.
            var erased = PointRange.union(of: es.map(\.ranges))
            var so: [RangeRestore] = []
            for r in rs {
                so.append(r)
                erased = RangeHistory.erased(after: r, before: erased, es, so)
            }
            #expect(erased == expected, "seed \(seed) case \(k): one restore at a time — rerun with LNOTE_SEED=\(seed)")
        }
        #expect(withRestores > 200, "the histories held restores: \(withRestores)")
    }

    @Test("[MERGE-71] a restore received in one pass keeps what the seen list, the reach and the recomputation give one after the other, whatever the erases' order and the context")
    func receivedMatchesTheThreeSteps() {
        let seed = UInt64(ProcessInfo.processInfo.environment["LNOTE_SEED"] ?? "") ?? 0x9EC1
        var rng = SplitMix64(seed: seed)
        let replicas = (1...4).map { ReplicaID(UInt64($0)) }
        var kept = 0, refused = 0
        for k in 0..<500 {
            let n = UInt32.random(in: 1...40, using: &rng)
            // Some ranges reach past the stroke: clamped, they can be left empty.
            func ranges() -> [PointRange] {
                (0..<Int.random(in: 0...3, using: &rng)).map { _ in
                    let f = UInt32.random(in: 0..<(n + 6), using: &rng)
                    return PointRange(f, f + UInt32.random(in: 1...12, using: &rng))
                }.map { PointRange(min($0.from, n), min($0.to, n)) }.normalizedUnion()
            }
            var counters = [ReplicaID: UInt64]()
            var es: [RangeErasure] = [], rs: [RangeRestore] = []
            var lamport: UInt64 = 1
            for _ in 0..<Int.random(in: 1...14, using: &rng) {
                let who = replicas.randomElement(using: &rng)!
                counters[who, default: 0] += 1
                lamport += 1
                let ref = OpRef(id: OpID(replica: who, counter: counters[who]!), lamport: lamport)
                if Bool.random(using: &rng) || es.isEmpty {
                    let r = ranges()
                    if !r.isEmpty { es.append(RangeErasure(ref: ref, ranges: r)) }
                    continue
                }
                // A context that need not cover a replica's earlier erases when it covers a
                // later one, and erases in any order (a batch sorts them only at its end).
                let covered = Set(es.filter { _ in Bool.random(using: &rng) }.map(\.ref.id))
                let order = es.shuffled(using: &rng)
                let asked = ranges()
                let before = RangeHistory.erased(order, rs)
                let got = RangeHistory.received(asked, ref: ref, covers: { covered.contains($0) }, order, rs, before: before)
                // The three steps, as the replica took them before.
                let seen = RangeHistory.seen(among: order, covers: { covered.contains($0) })
                let cut = seen.isEmpty ? [] : RangeHistory.reach(of: asked, seen: seen, among: order)
                guard !cut.isEmpty else {
                    #expect(got == nil, "seed \(seed) case \(k): kept a restore the steps leave out — rerun with LNOTE_SEED=\(seed)")
                    refused += 1
                    continue
                }
                let restore = RangeRestore(ref: ref, ranges: cut, seen: seen)
                let erased = RangeHistory.erased(after: restore, before: before, order, rs + [restore])
                #expect(got?.restore == restore && got?.erased == erased,
                        "seed \(seed) case \(k): \(order) \(rs) \(asked) — rerun with LNOTE_SEED=\(seed)")
                rs.append(restore)
                kept += 1
            }
        }
        #expect(kept > 300 && refused > 100, "restores kept \(kept), left out \(refused)")
    }

    @Test("[MERGE-71] a restore's ranges taken from a long list in place give what one pass over both lists gives")
    func subtractInPlace() {
        let seed = UInt64(ProcessInfo.processInfo.environment["LNOTE_SEED"] ?? "") ?? 0x5B7
        var rng = SplitMix64(seed: seed)
        func list(_ count: Int, span: UInt32) -> [PointRange] {
            (0..<count).map { _ in
                let f = UInt32.random(in: 0..<span, using: &rng)
                return PointRange(f, f + UInt32.random(in: 1...20, using: &rng))
            }.normalizedUnion()
        }
        for k in 0..<300 {
            let value = list(Int.random(in: 0...400, using: &rng), span: 4_000)
            let cut = list(Int.random(in: 0...30, using: &rng), span: 4_200)
            var inPlace = value
            RangeHistory.subtract(cut, from: &inPlace)
            #expect(inPlace == value.subtractingNormalized(cut), "seed \(seed) case \(k) — rerun with LNOTE_SEED=\(seed)")
        }
    }

    @Test("[MERGE-71] a long path of small restores with a big restore under each of its nodes: the unions alive at once do not hold R · (m + 1) ranges")
    func trieWalkStaysLinear() {
        // Each replica X_i erases the whole stroke, then one point; a big restore of m gaps
        // had seen every X_i.1; small restore r_j had seen X_i.2 for every i ≥ j (and X_i.1
        // for i < j). Walked from the last node back, the big restore's union waited at every
        // node of the path: R · (m + 1) ranges at once.
        let r = 40, m = 150, n = UInt32(2 * m + 1)
        let xs = (1...r).map { ReplicaID(UInt64(0x100 + $0)) }
        var es: [RangeErasure] = []
        for (i, x) in xs.enumerated() {
            es.append(RangeErasure(ref: OpRef(id: OpID(replica: x, counter: 1), lamport: UInt64(2 + i)), ranges: [PointRange(0, n)]))
            es.append(RangeErasure(ref: OpRef(id: OpID(replica: x, counter: 2), lamport: UInt64(1_000 + i)),
                                   ranges: [PointRange(UInt32(2 * i), UInt32(2 * i + 1))]))
        }
        let gaps = (0..<UInt32(m)).map { PointRange(2 * $0 + 1, 2 * $0 + 2) }
        var rs = [RangeRestore(ref: OpRef(id: OpID(replica: ReplicaID(0xB), counter: 1), lamport: 500),
                               ranges: gaps, seen: xs.map { OpID(replica: $0, counter: 1) })]
        for j in 0..<r {
            let seen = xs.enumerated().map { OpID(replica: $0.element, counter: $0.offset >= j ? 2 : 1) }
            rs.append(RangeRestore(ref: OpRef(id: OpID(replica: ReplicaID(0xC), counter: UInt64(j + 1)), lamport: UInt64(2_000 + j)),
                                   ranges: [PointRange(UInt32(2 * j + 1), UInt32(2 * j + 2))], seen: seen))
        }
        var peak = 0
        let erased = RangeHistory.erased(es, rs, peak: &peak)
        #expect(erased == Self.byDefinition(es, rs, points: n))
        let history = es.reduce(0) { $0 + $1.ranges.count } + rs.reduce(0) { $0 + $1.ranges.count }
        #expect(peak <= history, "\(peak) ranges waiting at once; the history holds \(history) (R · (m + 1) = \(r * (m + 1)))")
    }

    @Test("[SNAP-44] [SYNC-59] a claimed history with a partial erase taken back whole by a restore is not the state of the operations without them; a page written the old way is")
    func sameStateIsExactBetweenKeptHistories() throws {
        // The history the operations give: a.1 erased [0, 2) by b.1.
        let real = RangeErasure(ref: H.ref(Self.b, 1, 2), ranges: [PointRange(0, 2)])
        var expected = H.page(elements: [ElementRecord(id: H.id(Self.a, 1), lamport: 1, wallTime: 1, content: H.stroke(10),
                                                       z: LWWRegister(ZKey(layer: 1)), erased: [PointRange(0, 2)],
                                                       frontier: [real.ref], rangeErasures: [real])])
        // A claim adding b.5, taken back whole by c.1, whose bound covers b's later erases too.
        var claim = expected
        claim.elements[0].rangeErasures.append(RangeErasure(ref: H.ref(Self.b, 5, 3), ranges: [PointRange(5, 6)]))
        claim.elements[0].rangeRestores = [RangeRestore(ref: H.ref(Self.c, 1, 4), ranges: [PointRange(5, 6)], seen: [H.id(Self.b, 5)])]
        #expect(!PageSnapshot.sameState(expected, as: claim))
        // Between pages this replica wrote, compared by what each erase keeps: the same.
        #expect(PageSnapshot.sameState(expected, as: claim, anyForm: true))
        // The same claim written the old way (each erase's remainder, no restores) is the same state.
        claim.elements[0].rangeErasures = [real]
        claim.elements[0].rangeRestores = []
        #expect(PageSnapshot.sameState(expected, as: claim))
        // And a history with restores against the same erases' remainders, the old way, is.
        expected.elements[0].rangeErasures.append(RangeErasure(ref: H.ref(Self.b, 5, 3), ranges: [PointRange(5, 6)]))
        expected.elements[0].rangeRestores = [RangeRestore(ref: H.ref(Self.c, 1, 4), ranges: [PointRange(5, 6)], seen: [H.id(Self.b, 5)])]
        #expect(PageSnapshot.sameState(expected, as: claim))
        // Not the other way: a claim that keeps restores must equal what the operations give.
        #expect(!PageSnapshot.sameState(claim, as: expected))
        // A legacy claim whose erase keeps something else is not the same state.
        var wrong = claim
        wrong.elements[0].rangeErasures = [RangeErasure(ref: real.ref, ranges: [PointRange(0, 1)])]
        #expect(!PageSnapshot.sameState(expected, as: wrong) && !PageSnapshot.sameState(expected, as: wrong, anyForm: true))
    }
}
