import Foundation
import Testing
@testable import LnoteModel

/// The erase-history section of a page snapshot (page-snapshot.md [SNAP-40], [SNAP-41]): what
/// restores need — each tombstone's record and restores, each stroke's partial erases — round
/// trips exactly, is written exactly when it holds something, and every way it can contradict
/// the rest of the file is refused as `corrupt` with the byte offset of the problem.
@Suite("Erase-history snapshot section")
struct EraseHistorySnapshotTests {
    static let a = ReplicaID(0xA1), b = ReplicaID(0xB2), c = ReplicaID(0xC3)
    static func id(_ r: ReplicaID, _ n: UInt64) -> OpID { OpID(replica: r, counter: n) }
    static func ref(_ r: ReplicaID, _ n: UInt64, _ lamport: UInt64) -> OpRef { OpRef(id: id(r, n), lamport: lamport) }
    static let tag = PageSnapshot.Section.eraseHistory.rawValue

    static func stroke(_ n: Int, x: Int32 = 0) -> ElementContent {
        .stroke(Stroke(style: InkStyle(tool: .pen, color: .black, width: 20),
                       points: (0..<n).map { StrokePoint(x: x + Int32($0) * 10, y: Int32($0), t: UInt32($0 * 4)) }))
    }
    static let image = ElementContent.image(ImageElement(asset: AssetID.of([7]), frame: QRect(x: 0, y: 0, width: 100, height: 50)))

    /// A page of three replicas, ten operations each; every element and tombstone is added to it.
    static func page(elements: [ElementRecord] = [], tombstones: [Tombstone] = []) -> PageState {
        let replicas = [a, b, c]
        return PageState(page: PageID(UUID(uuidString: "00000000-0000-0000-0000-00000000E40E")!),
                         clock: VectorClock(replicas.map { ($0, UInt64(10)) }), maxLamport: 30, modified: 1_700_000_000_000,
                         elements: elements.sorted(by: ElementRecord.canonicalLess), tombstones: tombstones.sorted { $0.id < $1.id },
                         contexts: replicas.map { ReplicaContext(replica: $0, clock: VectorClock([($0, UInt64(10))]),
                                                                 lamports: [LamportRun(from: 1, offset: 0)]) })
    }

    // The pieces of the pages below.

    /// Live stroke a.1 (10 points), partially erased twice: [0, 2) and [1, 2) ∪ [5, 7).
    static let partial1 = RangeErasure(ref: ref(b, 2, 5), ranges: [PointRange(0, 2)])
    static let partial2 = RangeErasure(ref: ref(c, 3, 6), ranges: [PointRange(1, 2), PointRange(5, 7)])
    static let live = ElementRecord(id: id(a, 1), lamport: 1, wallTime: 1, content: stroke(10), z: LWWRegister(ZKey(layer: 1)),
                                    erased: [PointRange(0, 2), PointRange(5, 7)], frontier: [ref(c, 3, 6)],
                                    rangeErasures: [partial1, partial2])
    /// Stroke a.2 (6 points), erased whole, kept with a partial erase of its own and a move.
    static let keptPartial = RangeErasure(ref: ref(a, 3, 7), ranges: [PointRange(2, 4)])
    static let kept = ElementRecord(id: id(a, 2), lamport: 2, wallTime: 2, content: stroke(6, x: 100),
                                    transform: LWWRegister(.translation(5, -5), frontier: [ref(b, 7, 15)]),
                                    z: LWWRegister(ZKey(layer: 2, fraction: [0x80]), frontier: [ref(c, 4, 9)]),
                                    erased: [PointRange(2, 4)], rangeErasures: [keptPartial])
    /// a.2's tombstone: a first erasure taken back by two restores, a second one that holds.
    static let erased = Tombstone(
        id: id(a, 2),
        erasures: [Erasure(ref: ref(a, 5, 12), clock: VectorClock([(a, UInt64(4)), (b, UInt64(3))]), cancelledBy: [id(b, 6), id(c, 7)]),
                   Erasure(ref: ref(c, 8, 20), clock: VectorClock([(a, UInt64(5)), (c, UInt64(7))]))],
        frontier: [ref(b, 7, 15)], record: kept)
    /// Stroke b.1, erased and restored: live again, its tombstone without record or frontier.
    static let restoredLive = ElementRecord(id: id(b, 1), lamport: 1, wallTime: 3, content: stroke(4, x: 200),
                                            transform: LWWRegister(.translation(1, 1), frontier: [ref(c, 5, 11)]),
                                            z: LWWRegister(ZKey(layer: 1)), frontier: [ref(c, 5, 11)])
    static let restored = Tombstone(id: id(b, 1), erasures: [Erasure(ref: ref(a, 6, 13), clock: VectorClock([(a, UInt64(5)), (b, UInt64(1))]),
                                                                     cancelledBy: [id(c, 9)])])
    /// Image c.2, erased, kept.
    static let keptImage = ElementRecord(id: id(c, 2), lamport: 2, wallTime: 4, content: image, z: LWWRegister(ZKey(layer: -2)))
    static let erasedImage = Tombstone(id: id(c, 2), erasures: [Erasure(ref: ref(b, 8, 21), clock: VectorClock([(b, UInt64(7)), (c, UInt64(2))]))],
                                       record: keptImage)
    /// A tombstone from a checkpoint of before restores: no record.
    static let legacy = Tombstone(id: id(c, 6), erasures: [Erasure(ref: ref(a, 9, 25), clock: VectorClock([(a, UInt64(8)), (c, UInt64(6))]))],
                                  frontier: [ref(b, 9, 24)])

    static var rich: PageState {
        page(elements: [live, restoredLive, ElementRecord(id: id(c, 1), lamport: 1, wallTime: 5, content: image, z: LWWRegister(ZKey(layer: 3)))],
             tombstones: [erased, restored, erasedImage, legacy])
    }

    // MARK: - Helpers

    /// Sections of a snapshot: tag and the range of the whole section (header included).
    static func sections(_ b: [UInt8]) -> [(tag: UInt16, range: Range<Int>)] {
        var at = PageSnapshot.headerSize
        var out: [(UInt16, Range<Int>)] = []
        while at + PageSnapshot.sectionHeaderSize <= b.count - PageSnapshot.trailerSize {
            let tag = UInt16(b[at]) | UInt16(b[at + 1]) << 8
            let len = (0..<4).reduce(0) { $0 | Int(b[at + 2 + $1]) << (8 * $1) }
            out.append((tag, at..<(at + PageSnapshot.sectionHeaderSize + len)))
            at += PageSnapshot.sectionHeaderSize + len
        }
        return out
    }

    /// The body of the erase-history section, nil when the snapshot has none.
    static func historyBody(_ b: [UInt8]) -> [UInt8]? {
        sections(b).first { $0.tag == tag }.map { Array(b[($0.range.lowerBound + PageSnapshot.sectionHeaderSize)..<$0.range.upperBound]) }
    }

    /// `b` with its erase-history section's body replaced by `body` (the section added last
    /// when absent), length and CRC fixed; and the file offset where the body starts.
    static func withHistory(_ b: [UInt8], body: [UInt8]) -> (bytes: [UInt8], at: Int) {
        let crcAt = b.count - PageSnapshot.trailerSize
        let range = sections(b).first { $0.tag == tag }?.range ?? crcAt..<crcAt
        var w = ByteWriter()
        w.u16(tag)
        w.u32(UInt32(body.count))
        w.append(body)
        var out = Array(b[..<range.lowerBound]) + w.bytes + Array(b[range.upperBound..<crcAt]) + [0, 0, 0, 0]
        withUnsafeBytes(of: UInt64(out.count).littleEndian) { for i in 0..<8 { out[12 + i] = $0[i] } }
        let crc = CRC32C.checksum(out, 0..<(out.count - 4))
        withUnsafeBytes(of: crc.littleEndian) { for i in 0..<4 { out[out.count - 4 + i] = $0[i] } }
        return (out, range.lowerBound + PageSnapshot.sectionHeaderSize)
    }

    /// An erase-history body written piece by piece, remembering where each piece starts.
    struct Body {
        var w = ByteWriter()
        var marks: [String: Int] = [:]
        mutating func mark(_ name: String) { marks[name] = w.count }
        mutating func varint(_ v: UInt64) { w.varint(v) }
        mutating func u8(_ v: UInt8) { w.u8(v) }
        mutating func restores(_ ids: [OpID]) {
            w.varint(UInt64(ids.count))
            for (k, i) in ids.enumerated() { mark("restore\(k)"); ElementCodec.encode(i, into: &w) }
        }
        mutating func record(_ r: ElementRecord?) {
            guard let r else { return w.u8(0) }
            w.u8(1)
            PageSnapshot.encode(r, into: &w)
        }
        mutating func list(_ element: OpID, _ partials: [RangeErasure], name: String) {
            mark(name)
            ElementCodec.encode(element, into: &w)
            w.varint(UInt64(partials.count))
            for (k, x) in partials.enumerated() {
                mark("\(name).\(k)")
                ElementCodec.encode(x.ref, into: &w)
                PageSnapshot.encodeRanges(x.ranges, into: &w)
            }
        }
        var bytes: [UInt8] { w.bytes }
    }

    /// The small page the refusals start from: live stroke a.1 with partial erase `partial1`,
    /// erased stroke a.2 kept (no partial erase), and b.1 restored and live.
    static var small: PageState {
        var k = kept
        k.erased = []
        k.rangeErasures = []
        var e = erased
        e.record = k
        var l = live
        l.erased = [PointRange(0, 2)]
        l.rangeErasures = [partial1]
        return page(elements: [l, restoredLive], tombstones: [e, restored])
    }

    /// The body `small` encodes to, with the changes asked for.
    static func smallBody(count: UInt64 = 2, flag1: UInt8 = 1, record1: ElementRecord? = nil, restores1: [[OpID]]? = nil,
                          restores2: [OpID] = [id(c, 9)], flag2: UInt8 = 0, record2: ElementRecord? = nil,
                          lists: [(OpID, [RangeErasure])] = [(id(a, 1), [partial1])]) -> Body {
        var out = Body()
        out.mark("count")
        out.varint(count)
        out.mark("t0")
        for rs in restores1 ?? [[id(b, 6), id(c, 7)], []] { out.restores(rs) }
        out.mark("flag0")
        if flag1 == 1 { out.record(record1 ?? small.tombstones[0].record) } else { out.u8(flag1) }
        out.mark("t1")
        out.restores(restores2)
        out.mark("flag1")
        if flag2 == 1 { out.record(record2) } else { out.u8(flag2) }
        out.mark("lists")
        out.varint(UInt64(lists.count))
        for (k, (element, partials)) in lists.enumerated() { out.list(element, partials, name: "list\(k)") }
        out.mark("end")
        return out
    }

    /// Decoding `bytes` fails with `corrupt` at `offset`.
    static func expectCorrupt(_ bytes: [UInt8], at offset: Int?, _ what: String, index: Int? = nil,
                              sourceLocation: SourceLocation = #_sourceLocation) {
        for deferring in [false, true] {
            let e = expectDecodeFailure([.corrupt], "\(what) (deferring \(deferring))", sourceLocation: sourceLocation) {
                _ = try PageSnapshot.decode(bytes, deferringPoints: deferring)
            }
            if let offset {
                #expect(e?.offset == offset, "\(what): \(String(describing: e))", sourceLocation: sourceLocation)
            }
            if let index {
                #expect(e?.index == index, "\(what): \(String(describing: e))", sourceLocation: sourceLocation)
            }
        }
    }

    // MARK: - Round trips

    @Test("[SNAP-40] records, restores, restored tombstones and partial erases on live and kept strokes round-trip, in both versions")
    func roundTrip() throws {
        let s = Self.rich
        try PageSnapshot.validate(s)
        for version: UInt16 in [1, 2] {
            let bytes = PageSnapshot.encode(s, coveredLogOffset: 7, logIncarnation: 8, version: version)
            let tags = Self.sections(bytes).map(\.tag)
            #expect(tags.last == Self.tag, "the erase history is the last section: \(tags)")
            let decoded = try PageSnapshot.decode(bytes)
            #expect(decoded.state == s, "version \(version)")
            #expect(!decoded.lacksEraseHistory)
            let lazy = try PageSnapshot.decode(bytes, deferringPoints: true)
            #expect(try lazy.state.resolved() == s && !lazy.lacksEraseHistory, "version \(version), points deferred")
            // What each piece came back as.
            let t = decoded.state.tombstones
            #expect(t.map(\.id) == [Self.id(Self.a, 2), Self.id(Self.b, 1), Self.id(Self.c, 2), Self.id(Self.c, 6)])
            #expect(t[0].record == Self.kept && t[0].erasures[0].cancelledBy == [Self.id(Self.b, 6), Self.id(Self.c, 7)] && t[0].isErased)
            #expect(t[1].record == nil && t[1].frontier.isEmpty && !t[1].isErased && decoded.state.elements.contains { $0.id == t[1].id })
            #expect(t[2].record == Self.keptImage && t[3].record == nil && t[3].isErased)
            #expect(decoded.state.elements.first { $0.id == Self.live.id }?.rangeErasures == [Self.partial1, Self.partial2])
            // Identical bytes again, from the decoded state and from a scrambled copy.
            #expect(PageSnapshot.encode(decoded.state, coveredLogOffset: 7, logIncarnation: 8, version: version) == bytes)
            var scrambled = s
            scrambled.tombstones.reverse()
            scrambled.tombstones[scrambled.tombstones.count - 1].erasures[0].cancelledBy = [Self.id(Self.c, 7), Self.id(Self.b, 6), Self.id(Self.c, 7)]
            let i = scrambled.elements.firstIndex { $0.id == Self.live.id }!
            scrambled.elements[i].rangeErasures = [RangeErasure(ref: Self.partial2.ref, ranges: [PointRange(5, 7), PointRange(1, 2)]),
                                                   Self.partial1, RangeErasure(ref: Self.ref(Self.a, 9, 29), ranges: [PointRange(3, 3)])]
            #expect(PageSnapshot.encode(scrambled, coveredLogOffset: 7, logIncarnation: 8, version: version) == bytes,
                    "version \(version): canonical order, duplicates and empty partial erases dropped")
        }
        #expect(Self.tag & PageSnapshot.criticalTagBit != 0, "critical: a reader that does not know it refuses the file")
    }

    @Test("[SNAP-40] the section's bytes: per tombstone its restores per erasure and its record, then the partial-erase lists by element id")
    func layout() throws {
        let bytes = PageSnapshot.encode(Self.small, coveredLogOffset: 0, logIncarnation: 0)
        #expect(Self.historyBody(bytes) == Self.smallBody().bytes)
        // A kept record is written without its frontier (the tombstone's is the one kept).
        var s = Self.small
        s.tombstones[0].record!.frontier = [Self.ref(Self.b, 7, 15)]
        #expect(PageSnapshot.encode(s, coveredLogOffset: 0, logIncarnation: 0) == bytes)
    }

    @Test("[SNAP-40] seeded random pages with erase histories round-trip and encode canonically")
    func randomRoundTrips() throws {
        var checked = 0
        for seed in testSeeds(0xE5A5_0040, count: 150) {
            var m = RandomModel(seed: seed)
            let s = Self.withHistory(m.pageState(), &m)
            do {
                try PageSnapshot.validate(s)
            } catch {
                Issue.record("seed \(seed): the generated state is invalid: \(error)")
                continue
            }
            for version: UInt16 in [1, 2] {
                let bytes = PageSnapshot.encode(s, coveredLogOffset: 1, logIncarnation: 2, version: version)
                let decoded = try PageSnapshot.decode(bytes)
                #expect(decoded.state == s, "seed \(seed), version \(version)")
                #expect(PageSnapshot.needsEraseHistory(s) == (Self.historyBody(bytes) != nil), "seed \(seed)")
                let unknown = !s.tombstones.isEmpty || s.elements.contains { !$0.erased.isEmpty }
                #expect(decoded.lacksEraseHistory == (unknown && !PageSnapshot.needsEraseHistory(s)), "seed \(seed)")
                #expect(try PageSnapshot.decode(bytes, deferringPoints: true).state.resolved() == s, "seed \(seed)")
            }
            checked += PageSnapshot.needsEraseHistory(s) ? 1 : 0
        }
        #expect(checked > 60 || isSoak || ProcessInfo.processInfo.environment["LNOTE_SEED"] != nil)
    }

    /// `s` with an erase history added at random: tombstones get records (their ids, content
    /// within bounds, partial erases), some erasures get restores (a tombstone all taken back
    /// loses its frontier and record), strokes get partial erases whose union is their erased ranges.
    static func withHistory(_ state: PageState, _ m: inout RandomModel) -> PageState {
        var s = state
        let replicas = s.clock.replicas.isEmpty ? [a] : s.clock.replicas
        let clock = s.clock
        func partials(_ n: Int) -> [RangeErasure] {
            // A page that applied no operation has none.
            guard n > 0, !clock.replicas.isEmpty else { return [] }
            var out: [OpRef: [PointRange]] = [:]
            for _ in 0..<m.int(1...3) {
                let from = UInt32(m.int(0...(n - 1)))
                // An operation the clock covers, whose Lamport timestamp grows with its counter
                // ([SNAP-41]: one replica's partial erases in the order of their counters).
                let r = replicas[m.int(0...(replicas.count - 1))]
                let counter = UInt64(m.int(1...Int(max(1, min(clock[r], 1_000)))))
                let ref = OpRef(id: OpID(replica: r, counter: counter), lamport: 2 * counter + 1)
                out[ref, default: []].append(PointRange(from, UInt32(m.int(Int(from + 1)...n))))
            }
            return out.map { RangeErasure(ref: $0.key, ranges: $0.value.normalizedUnion()) }.sorted { $0.ref < $1.ref }
        }
        for i in s.elements.indices where m.chance(0.4) {
            let p = partials(s.elements[i].content.stroke?.pointCount ?? 0)
            s.elements[i].rangeErasures = p
            if !p.isEmpty { s.elements[i].erased = p.flatMap(\.ranges).normalizedUnion() }
        }
        for i in s.tombstones.indices {
            for k in s.tombstones[i].erasures.indices where m.chance(0.3) {
                s.tombstones[i].erasures[k].cancelledBy = Erasure.firstRestores((0..<m.int(1...3)).map { _ in m.opID(from: replicas) })
            }
            if s.tombstones[i].isErased {
                guard m.chance(0.7) else { continue }
                let content = m.boundedContent()
                let p = m.chance(0.5) ? partials(content.stroke?.pointCount ?? 0) : []
                s.tombstones[i].record = ElementRecord(
                    id: s.tombstones[i].id, lamport: m.u64Varied(), wallTime: m.i64Varied(), content: content,
                    transform: LWWRegister(m.boundedTransform(), frontier: m.refs(from: replicas, max: 2)),
                    z: LWWRegister(m.zKey(tags: replicas), frontier: m.refs(from: replicas, max: 2)),
                    erased: p.flatMap(\.ranges).normalizedUnion(), rangeErasures: p)
            } else {
                s.tombstones[i].frontier = []
            }
        }
        return s
    }

    // MARK: - When the section is written

    @Test("[SNAP-40] no section when nothing is to hold: a tombstone without record reads back as lacking the erase history")
    func absentWhenNothingToHold() throws {
        // A page without tombstones or erased ranges: no section, nothing lacking.
        let plain = Self.page(elements: [Self.restoredLive])
        let b0 = PageSnapshot.encode(plain, coveredLogOffset: 0, logIncarnation: 0)
        #expect(Self.historyBody(b0) == nil)
        #expect(try !PageSnapshot.decode(b0).lacksEraseHistory)
        // Legacy: a tombstone without record, nothing restored, no partial erase known.
        var old = Self.live
        old.rangeErasures = []
        for s in [Self.page(tombstones: [Self.legacy]), Self.page(elements: [old]), Self.page(elements: [old], tombstones: [Self.legacy])] {
            #expect(!PageSnapshot.needsEraseHistory(s))
            for version: UInt16 in [1, 2] {
                let bytes = PageSnapshot.encode(s, coveredLogOffset: 0, logIncarnation: 0, version: version)
                #expect(Self.historyBody(bytes) == nil, "no 0x8006 section")
                let decoded = try PageSnapshot.decode(bytes)
                #expect(decoded.state == s && decoded.lacksEraseHistory)
            }
        }
        // One thing to hold is enough: a restore, a record, or a partial erase.
        for s in [Self.page(elements: [Self.restoredLive], tombstones: [Self.restored]),
                  Self.page(tombstones: [Self.erasedImage, Self.legacy]),
                  Self.page(elements: [Self.live])] {
            #expect(PageSnapshot.needsEraseHistory(s))
            let bytes = PageSnapshot.encode(s, coveredLogOffset: 0, logIncarnation: 0)
            #expect(Self.historyBody(bytes) != nil)
            let decoded = try PageSnapshot.decode(bytes)
            #expect(decoded.state == s && !decoded.lacksEraseHistory)
        }
    }

    // MARK: - Refusals

    @Test("[SNAP-40] [SNAP-27] the section's tombstone count must equal the tombstone section's")
    func countMismatch() {
        let base = PageSnapshot.encode(Self.small, coveredLogOffset: 0, logIncarnation: 0)
        for n: UInt64 in [0, 1, 3, 1 << 40] {
            let body = Self.smallBody(count: n)
            let (bytes, at) = Self.withHistory(base, body: body.bytes)
            Self.expectCorrupt(bytes, at: at + body.marks["count"]!, "count \(n)")
        }
    }

    @Test("[SNAP-40] a record flag other than 0 or 1, a record of another id or with a frontier, a record on a restored tombstone")
    func recordRefusals() {
        let base = PageSnapshot.encode(Self.small, coveredLogOffset: 0, logIncarnation: 0)
        for flag: UInt8 in [2, 0x80, 0xFF] {
            let body = Self.smallBody(flag1: flag)
            let (bytes, at) = Self.withHistory(base, body: body.bytes)
            Self.expectCorrupt(bytes, at: at + body.marks["flag0"]!, "record flag \(flag)", index: 0)
        }
        var other = Self.small.tombstones[0].record!
        other.id = Self.id(Self.a, 3)
        var withFrontier = Self.small.tombstones[0].record!
        withFrontier.frontier = [Self.ref(Self.b, 7, 15)]
        for (what, r) in [("another id", other), ("a frontier", withFrontier)] {
            let body = Self.smallBody(record1: r)
            let (bytes, at) = Self.withHistory(base, body: body.bytes)
            Self.expectCorrupt(bytes, at: at + body.marks["flag0"]!, "record with \(what)", index: 0)
        }
        // b.1 is restored (its one erasure taken back): it keeps no record.
        let body = Self.smallBody(flag2: 1, record2: Self.restoredLive)
        let (bytes, at) = Self.withHistory(base, body: body.bytes)
        Self.expectCorrupt(bytes, at: at + body.marks["flag1"]!, "record on a restored tombstone", index: 1)
        // The same states built by hand and encoded are refused alike.
        var s = Self.small
        s.tombstones[1].record = Self.restoredLive
        #expect(throws: LnoteError.self) { try PageSnapshot.validate(s) }
        let encoded = PageSnapshot.encode(s, coveredLogOffset: 0, logIncarnation: 0)
        Self.expectCorrupt(encoded, at: at + body.marks["flag1"]!, "encoded record on a restored tombstone", index: 1)
        s = Self.small
        s.tombstones[0].record!.id = Self.id(Self.a, 3)
        #expect(throws: LnoteError.self) { try PageSnapshot.validate(s) }
        Self.expectCorrupt(PageSnapshot.encode(s, coveredLogOffset: 0, logIncarnation: 0), at: at + body.marks["flag0"]!, "encoded record of another id")
    }

    @Test("[SNAP-40] restores of an erasure strictly increasing; a restored tombstone keeps no frontier")
    func restoreListRefusals() {
        let base = PageSnapshot.encode(Self.small, coveredLogOffset: 0, logIncarnation: 0)
        for list in [[Self.id(Self.c, 9), Self.id(Self.c, 9)], [Self.id(Self.c, 9), Self.id(Self.b, 9)]] {
            let body = Self.smallBody(restores2: list)
            let (bytes, at) = Self.withHistory(base, body: body.bytes)
            Self.expectCorrupt(bytes, at: at + body.marks["restore1"]!, "restores \(list)", index: 1)
        }
        // A restored tombstone with a frontier (written by hand: the encoder writes what it is given).
        var s = Self.small
        s.tombstones[1].frontier = [Self.ref(Self.c, 5, 11)]
        #expect(throws: LnoteError.self) { try PageSnapshot.validate(s) }
        let bytes = PageSnapshot.encode(s, coveredLogOffset: 0, logIncarnation: 0)
        let at = Self.sections(bytes).first { $0.tag == Self.tag }!.range.lowerBound + PageSnapshot.sectionHeaderSize
        Self.expectCorrupt(bytes, at: at + Self.smallBody().marks["t1"]!, "restored tombstone with a frontier", index: 1)
        // [SNAP-24] An erased tombstone whose element is also live.
        s = Self.small
        s.tombstones[1].erasures[0].cancelledBy = []
        Self.expectCorrupt(PageSnapshot.encode(s, coveredLogOffset: 0, logIncarnation: 0), at: nil, "erased and live", index: 1)
        #expect(throws: LnoteError.self) { try PageSnapshot.validate(s) }
    }

    @Test("[SNAP-40] partial-erase lists: increasing by element and by ref, at least one erase with at least one range, of a known element")
    func partialEraseListRefusals() {
        let base = PageSnapshot.encode(Self.small, coveredLogOffset: 0, logIncarnation: 0)
        let p1 = Self.partial1, a1 = Self.id(Self.a, 1)
        let half = RangeErasure(ref: Self.ref(Self.c, 3, 6), ranges: [PointRange(1, 2)])
        // Not increasing by ref (reversed, or the same ref twice): refused at the second ref.
        for list in [[half, p1], [p1, p1]] {
            let body = Self.smallBody(lists: [(a1, list)])
            let (bytes, at) = Self.withHistory(base, body: body.bytes)
            Self.expectCorrupt(bytes, at: at + body.marks["list0.1"]!, "partial erases \(list.map(\.ref))")
        }
        // Elements not increasing: refused at the second list.
        let b1 = Self.id(Self.b, 1)
        for lists in [[(a1, [p1]), (a1, [p1])], [(b1, [p1]), (a1, [p1])]] {
            let body = Self.smallBody(lists: lists)
            let (bytes, at) = Self.withHistory(base, body: body.bytes)
            Self.expectCorrupt(bytes, at: at + body.marks["list1"]!, "lists of \(lists.map(\.0))")
        }
        // A list without partial erases, and a partial erase without ranges.
        var body = Self.smallBody(lists: [(a1, []), (b1, [p1])])
        var (bytes, at) = Self.withHistory(base, body: body.bytes)
        Self.expectCorrupt(bytes, at: at + body.marks["list0"]!, "empty list")
        // Alone, the empty list is shorter than any list can be: the list count is refused (11·m ≤ bytes left).
        body = Self.smallBody(lists: [(a1, [])])
        (bytes, at) = Self.withHistory(base, body: body.bytes)
        Self.expectCorrupt(bytes, at: at + body.marks["lists"]!, "a list count the section cannot hold")
        body = Self.smallBody(lists: [(a1, [p1, RangeErasure(ref: Self.ref(Self.c, 3, 6), ranges: [])])])
        (bytes, at) = Self.withHistory(base, body: body.bytes)
        Self.expectCorrupt(bytes, at: at + body.marks["list0.1"]!, "partial erase without ranges")
        // A list for an element neither live nor kept: unknown, or a tombstone without a record.
        for stray in [Self.id(Self.c, 5), Self.id(Self.a, 2)] {
            var s = Self.small
            s.tombstones[0].record = nil
            let legacyBase = PageSnapshot.encode(s, coveredLogOffset: 0, logIncarnation: 0)
            var b = Self.Body()
            b.varint(2)
            b.restores([Self.id(Self.b, 6), Self.id(Self.c, 7)]); b.restores([]); b.u8(0)
            b.restores([Self.id(Self.c, 9)]); b.u8(0)
            b.varint(2)
            b.list(a1, [p1], name: "l0")
            b.list(stray, [RangeErasure(ref: Self.ref(Self.c, 3, 6), ranges: [PointRange(0, 1)])], name: "l1")
            let (bytes, at) = Self.withHistory(legacyBase, body: b.bytes)
            Self.expectCorrupt(bytes, at: at + b.bytes.count, "partial erases of \(stray)")
        }
    }

    @Test("[SNAP-41] the union of a stroke's partial erases must equal its erased ranges, every range within its points")
    func unionRefusals() {
        let base = PageSnapshot.encode(Self.small, coveredLogOffset: 0, logIncarnation: 0)
        let a1 = Self.id(Self.a, 1)
        let cases: [(String, [RangeErasure])] = [
            ("less than erased", [RangeErasure(ref: Self.partial1.ref, ranges: [PointRange(0, 1)])]),
            ("more than erased", [Self.partial1, RangeErasure(ref: Self.ref(Self.c, 3, 6), ranges: [PointRange(4, 5)])]),
            ("beyond the stroke's points", [Self.partial1, RangeErasure(ref: Self.ref(Self.c, 3, 6), ranges: [PointRange(9, 11)])]),
        ]
        for (what, list) in cases {
            let body = Self.smallBody(lists: [(a1, list)])
            let (bytes, at) = Self.withHistory(base, body: body.bytes)
            Self.expectCorrupt(bytes, at: at + body.marks["end"]!, what)
        }
        // A kept record whose partial erases do not add up, written by encoding the state.
        var s = Self.small
        s.tombstones[0].record!.rangeErasures = [Self.keptPartial]
        #expect(throws: LnoteError.self) { try PageSnapshot.validate(s) }
        #expect(PageSnapshot.rangeErasureProblem(s.tombstones[0].record!, clock: s.clock) != nil)
        let bytes = PageSnapshot.encode(s, coveredLogOffset: 0, logIncarnation: 0)
        let body = Self.historyBody(bytes)!
        Self.expectCorrupt(bytes, at: Self.sections(bytes).last!.range.upperBound, "kept record: \(body.count) bytes")
        // A live stroke whose erased ranges are more than its partial erases (encoded as is).
        s = Self.small
        s.elements[s.elements.firstIndex { $0.id == a1 }!].erased = [PointRange(0, 3)]
        #expect(throws: LnoteError.self) { try PageSnapshot.validate(s) }
        let b2 = PageSnapshot.encode(s, coveredLogOffset: 0, logIncarnation: 0)
        Self.expectCorrupt(b2, at: Self.sections(b2).last!.range.upperBound, "live stroke")
    }

    @Test("[SNAP-40] a section present that holds nothing is refused")
    func emptySectionRefused() {
        // No tombstones, no partial erases.
        let plain = PageSnapshot.encode(Self.page(elements: [Self.restoredLive]), coveredLogOffset: 0, logIncarnation: 0)
        var (bytes, _) = Self.withHistory(plain, body: [0, 0])
        Self.expectCorrupt(bytes, at: bytes.count - PageSnapshot.trailerSize, "empty section")
        // A legacy tombstone: no restore, no record.
        let old = PageSnapshot.encode(Self.page(tombstones: [Self.legacy]), coveredLogOffset: 0, logIncarnation: 0)
        (bytes, _) = Self.withHistory(old, body: [1, 0, 0, 0])
        Self.expectCorrupt(bytes, at: bytes.count - PageSnapshot.trailerSize, "section of a legacy tombstone")
        // The same bodies with one restore are accepted.
        var quiet = Self.legacy
        quiet.frontier = []
        let oldQuiet = PageSnapshot.encode(Self.page(tombstones: [quiet]), coveredLogOffset: 0, logIncarnation: 0)
        var b = Self.Body()
        b.varint(1); b.restores([Self.id(Self.b, 1)]); b.u8(0); b.varint(0)
        (bytes, _) = Self.withHistory(oldQuiet, body: b.bytes)
        #expect(throws: Never.self) { _ = try PageSnapshot.decode(bytes) }
        // And bytes left over after the lists.
        let body = Self.smallBody().bytes + [0]
        let base = PageSnapshot.encode(Self.small, coveredLogOffset: 0, logIncarnation: 0)
        let (extra, _) = Self.withHistory(base, body: body)
        expectDecodeFailure([.corrupt], "a byte after the lists") { _ = try PageSnapshot.decode(extra) }
    }

    @Test("[SNAP-40] [SNAP-27] the section cut short inside the CRC is corrupt, never truncated, at every length")
    func cutSections() {
        let base = PageSnapshot.encode(Self.small, coveredLogOffset: 0, logIncarnation: 0)
        let body = Self.smallBody().bytes
        for n in 0..<body.count {
            let (bytes, _) = Self.withHistory(base, body: Array(body.prefix(n)))
            expectDecodeFailure([.corrupt], "body cut at \(n) of \(body.count)") { _ = try PageSnapshot.decode(bytes) }
        }
    }
}
