import Foundation
import Testing
@testable import LnoteModel

/// Version 5's id table ([SNAP-45]) and the listing read that leaves the element records
/// unparsed ([SNAP-46]).
@Suite("Page snapshot id table and records read on first use")
struct PageSnapshotIDTableTests {
    /// The sections of a snapshot: tag, the offset of its header, its body.
    static func sections(_ b: [UInt8]) -> [(tag: UInt16, at: Int, body: Range<Int>)] {
        var out: [(UInt16, Int, Range<Int>)] = []
        var at = PageSnapshot.headerSize
        while at + 6 <= b.count - 4 {
            let tag = UInt16(b[at]) | UInt16(b[at + 1]) << 8
            let size = Int(b[at + 2]) | Int(b[at + 3]) << 8 | Int(b[at + 4]) << 16 | Int(b[at + 5]) << 24
            out.append((tag, at, (at + 6)..<(at + 6 + size)))
            at += 6 + size
        }
        return out
    }

    /// `bytes` with the body of section `tag` replaced (its size field rewritten), resealed.
    static func replacing(_ tag: UInt16, in bytes: [UInt8], with body: [UInt8]) -> [UInt8] {
        let s = sections(bytes).first { $0.tag == tag }!
        var b = bytes
        b.replaceSubrange(s.body, with: body)
        withUnsafeBytes(of: UInt32(body.count).littleEndian) { for i in 0..<4 { b[s.at + 2 + i] = $0[i] } }
        return PageSnapshotTests.reseal(b)
    }

    static let b0 = ReplicaID(0xB0)

    /// The vector's page: 130 one-point strokes of replica `b0`, counters 1 to 100 then 131 to
    /// 160 (a gap: two runs), each on the next layer, Lamport timestamp = counter.
    static var vectorPage: PageState {
        var s = PageState(page: PageID(UUID(uuidString: "00112233-4455-6677-8899-AABBCCDDEEFF")!))
        s.clock = VectorClock([(b0, UInt64(160))])
        s.maxLamport = 160
        s.modified = 1_700_000_000_000
        s.contexts = [ReplicaContext(replica: b0, clock: s.clock, lamports: [LamportRun(from: 1, offset: 0)])]
        let counters = Array(1...100) + Array(131...160)
        for (i, c) in counters.enumerated() {
            let dot = Stroke(points: [StrokePoint(x: Int32(10 * i), y: 50, pressure: 500, radius: 0, t: 0)])
            s.elements.append(ElementRecord(id: OpID(replica: b0, counter: UInt64(c)), lamport: UInt64(c),
                                            wallTime: 1_700_000_000_000, content: .stroke(dot),
                                            z: LWWRegister(ZKey(layer: Int64(i + 1), path: [], fraction: []))))
        }
        return s
    }

    /// [SNAP-45] The spec's vector: the element index section of the page above, byte for
    /// byte; and the file it is in reads back.
    @Test("[SNAP-45] the element index section of version 5 (the spec's vector)")
    func indexSectionVector() throws {
        let state = Self.vectorPage
        try PageSnapshot.validate(state)
        let bytes = PageSnapshot.encode(state, coveredLogOffset: 0, logIncarnation: 0)
        #expect(bytes[8] == 5)
        let index = try #require(Self.sections(bytes).first { $0.tag == 0x0005 })
        let section = Array(bytes[index.at..<index.body.upperBound])
        let fromSpec = try #require(parseHexDump(try specVector("index-section-v5")))
        #expect(fromSpec == section, "the spec's vector differs; actual:\n\(hexDump(section))")
        #expect(try PageSnapshot.decode(bytes).state == state)
        // Version 4 writes the same section without the table (its last 8 bytes).
        let v4 = PageSnapshot.encode(state, coveredLogOffset: 0, logIncarnation: 0, version: 4)
        let index4 = try #require(Self.sections(v4).first { $0.tag == 0x0005 })
        #expect(Array(v4[index4.body]) == Array(bytes[index.body].dropLast(8)))
    }

    /// [SNAP-45] Each way a table can be wrong, refused as `corrupt` where the spec says.
    @Test("[SNAP-45] id tables refused at the field the spec names")
    func refusals() throws {
        let bytes = PageSnapshot.encode(Self.vectorPage, coveredLogOffset: 0, logIncarnation: 0)
        let index = Self.sections(bytes).first { $0.tag == 0x0005 }!
        let body = Array(bytes[index.body])
        // stride 64, m = 2, two deltas (one byte each here? read them: everything before the table).
        let tableAt = body.count - 8
        #expect(Array(body[tableAt...]) == [0x02, 0x00, 0x01, 0x64, 0x00, 0x83, 0x01, 0x1E])
        let head = Array(body[..<tableAt])
        let t = index.body.lowerBound + tableAt
        let cases: [(String, [UInt8], Int, Int?)] = [
            ("no run", [0x00], t, nil),
            ("more runs than elements", [0x83, 0x01] + [UInt8](repeating: 0, count: 400), t, nil),
            ("runs that cannot fit", [0x04, 0x00, 0x01, 0x64], t, nil),
            ("replica index past the clock", [0x02, 0x02, 0x01, 0x64, 0x00, 0x83, 0x01, 0x1E], t + 1, nil),
            ("replica in full, named by the clock", [0x02, 0x01, 0xB0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0x64, 0x00, 0x83, 0x01, 0x1E], t + 1, nil),
            ("replica in full, zero", [0x02, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0x64, 0x00, 0x83, 0x01, 0x1E], t + 1, nil),
            ("first counter 0", [0x02, 0x00, 0x00, 0x64, 0x00, 0x83, 0x01, 0x1E], t + 2, nil),
            ("length 0", [0x02, 0x00, 0x01, 0x00, 0x00, 0x83, 0x01, 0x1E], t + 3, nil),
            ("past the element count", [0x02, 0x00, 0x01, 0x64, 0x00, 0x83, 0x01, 0x1F], t + 7, nil),
            ("past 2^64 - 1", [0x01, 0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01, 0x02, 0, 0, 0], t + 12, nil),
            ("a run that continues the previous", [0x03, 0x00, 0x01, 0x32, 0x00, 0x33, 0x32, 0x00, 0x83, 0x01, 0x1E], t + 4, nil),
            ("fewer ids than elements", [0x02, 0x00, 0x01, 0x64, 0x00, 0x83, 0x01, 0x1D], t, nil),
            ("a varint not in its shortest form", [0x02, 0x80, 0x00, 0x01, 0x64, 0x00, 0x83, 0x01, 0x1E], t + 1, nil),
            ("bytes after the table", [0x02, 0x00, 0x01, 0x64, 0x00, 0x83, 0x01, 0x1E, 0x00], t + 8, nil),
            // Well formed, but not the records' ids: the second run starts one too late.
            ("ids that are not the records'", [0x02, 0x00, 0x01, 0x64, 0x00, 0x84, 0x01, 0x1E], t + 4, 100),
            ("ids that are not the records', first run", [0x02, 0x00, 0x02, 0x64, 0x00, 0x83, 0x01, 0x1E], t + 1, 0),
        ]
        for (what, table, offset, element) in cases {
            let b = Self.replacing(0x0005, in: bytes, with: head + table)
            for unparsed in [false, true] {
                let e = expectDecodeFailure([.corrupt], "\(what) (unparsed: \(unparsed))") {
                    let c = try PageSnapshot.decode(b, deferringPoints: true, leavingRecordsUnbuilt: unparsed)
                    try c.unbuilt?.build()
                }
                #expect(e?.offset == offset, "\(what) (unparsed: \(unparsed)): \(String(describing: e))")
                if let element { #expect(e?.index == element, "\(what): \(String(describing: e))") }
            }
        }
    }

    /// A random page that a listing read may leave unparsed: more than 64 elements, none
    /// erased, no tombstone; several replicas with scattered counters (runs of one) on odd
    /// seeds, one author's strokes (long runs) on even ones.
    static func qualifyingPage(seed: UInt64) -> PageState {
        if seed % 2 == 1 {
            var m = RandomModel(seed: seed)
            var s = m.pageState(maxElements: 300, maxTombstones: 0)
            for i in s.elements.indices { s.elements[i].erased = [] }
            s = PageSnapshot.canonicalized(s)
            if s.elements.count > 64 { return s }
            return qualifyingPage(seed: seed &+ 2)
        }
        var g = SplitMix64(seed: seed)
        var s = vectorPage
        var pen = HandwritingGenerator.Options()
        pen.profile = .pen
        let strokes = HandwritingGenerator.strokes(seed: seed, count: 65 + Int(g.next() % 200), options: pen)
        s.elements = strokes.enumerated().map { i, st in
            ElementRecord(id: OpID(replica: b0, counter: UInt64(i + 1)), lamport: UInt64(i + 1), wallTime: 1_700_000_000_000 + Int64(i),
                          content: .stroke(st), z: LWWRegister(ZKey(layer: Int64(i + 1), path: [], fraction: [])))
        }
        s.clock = VectorClock([(b0, UInt64(strokes.count))])
        s.maxLamport = UInt64(strokes.count)
        s.contexts = [ReplicaContext(replica: b0, clock: s.clock, lamports: [LamportRun(from: 1, offset: 0)])]
        return s
    }

    /// What a read gives once every point is decoded: the elements, or the error's code,
    /// offset and index.
    enum Outcome: Equatable, CustomStringConvertible {
        case records([ElementRecord])
        case failed(LnoteError.Code, Int?, Int?)
        var description: String {
            switch self {
            case .records(let r): "\(r.count) records, ids \(r.first?.id.description ?? "-") … \(r.last?.id.description ?? "-")"
            case .failed(let c, let o, let i): "\(c) at \(o.map(String.init) ?? "-") (element \(i.map(String.init) ?? "-"))"
            }
        }
    }

    static func outcome(_ body: () throws -> [ElementRecord]) -> Outcome {
        do {
            var records = try body()
            try DeferredPoints.resolve(&records)
            return .records(records)
        } catch let e as LnoteError {
            return .failed(e.code, e.offset, e.index)
        } catch {
            return .failed(.corrupt, nil, nil)
        }
    }

    /// [SNAP-46] On random pages, and on every byte of their element index and a sample of
    /// their records replaced (CRC resealed): a listing read that leaves the records unparsed
    /// ends, once they are read, exactly where an eager read ends (the same records, or the
    /// same error at the same offset); whatever it listed before that is the eager read's ids.
    @Test("[SNAP-46] records read on first use: the same records or the same error as an eager read")
    func unparsedMatchesEager() throws {
        var cases = 0, unparsed = 0
        for seed in testSeeds(0x1D7A_B1E5, count: 2) {
            var g = SplitMix64(seed: seed)
            let state = Self.qualifyingPage(seed: seed)
            let bytes = PageSnapshot.encode(state, coveredLogOffset: 3, logIncarnation: 4)
            let index = try #require(Self.sections(bytes).first { $0.tag == 0x0005 }, "seed \(seed)")
            let elements = try #require(Self.sections(bytes).first { $0.tag == 0x0002 }, "seed \(seed)")
            // Every byte of the index section (header included), the elements' count and the
            // last chunk's start, and a sample of the records.
            var positions = Array(index.at..<index.body.upperBound) + Array(elements.body.lowerBound..<(elements.body.lowerBound + 3))
            for _ in 0..<100 { positions.append(elements.body.lowerBound + Int(g.next() % UInt64(elements.body.count))) }
            var variants: [[UInt8]] = [bytes]
            for i in positions {
                for v in [bytes[i] ^ 0x01, bytes[i] &+ 1, UInt8(truncatingIfNeeded: g.next())] where v != bytes[i] {
                    var b = bytes
                    b[i] = v
                    variants.append(PageSnapshotTests.reseal(b))
                }
            }
            for (k, b) in variants.enumerated() {
                cases += 1
                let eager = Self.outcome { try PageSnapshot.decode(b, deferringPoints: true).state.elements }
                var listed: [ElementID]?
                let lazy = Self.outcome {
                    let c = try PageSnapshot.decode(b, deferringPoints: true, leavingRecordsUnbuilt: true)
                    guard let u = c.unbuilt else { return c.state.elements }
                    #expect(c.state.elements.isEmpty)
                    listed = u.ids
                    return try u.build().records
                }
                if listed != nil { unparsed += 1 }
                #expect(lazy == eager, "seed \(seed), variant \(k): \(lazy) against \(eager)")
                if case .records(let r) = eager, let listed {
                    #expect(listed == r.map(\.id), "seed \(seed), variant \(k)")
                }
                if k == 0 {
                    #expect(listed == state.elements.map(\.id), "seed \(seed): the intact page was not listed unparsed")
                }
            }
        }
        // Most variants are intact enough to be listed unparsed.
        #expect(unparsed * 3 > cases, "\(unparsed) of \(cases) read unparsed")
    }

    /// [SNAP-46] Pages that do not qualify are read as usual: 64 elements or fewer, a
    /// tombstone, an erased range (with its erase history), and version 4.
    @Test("[SNAP-46] small pages, pages with erasures and version-4 files are read as usual")
    func onlyQualifyingPagesAreUnparsed() throws {
        let page = Self.qualifyingPage(seed: 2)
        func listed(_ s: PageState, version: UInt16 = PageSnapshot.version) throws -> Bool {
            let b = PageSnapshot.encode(s, coveredLogOffset: 0, logIncarnation: 0, version: version)
            let c = try PageSnapshot.decode(b, deferringPoints: true, leavingRecordsUnbuilt: true)
            let eager = Self.outcome { try PageSnapshot.decode(b, deferringPoints: true).state.elements }
            #expect(Self.outcome { try c.unbuilt?.build().records ?? c.state.elements } == eager)
            #expect(eager == .records(s.elements))
            return c.unbuilt != nil
        }
        #expect(try listed(page))
        #expect(try !listed(page, version: 4))
        var small = page
        small.elements = Array(small.elements.prefix(64))
        #expect(try !listed(small))
        var erased = page
        let id = erased.elements[3].id
        erased.elements[3].erased = [PointRange(0, 1)]
        erased.elements[3].rangeErasures = [RangeErasure(ref: OpRef(id: OpID(replica: Self.b0, counter: 1), lamport: 1),
                                                         ranges: [PointRange(0, 1)])]
        #expect(PageSnapshot.needsEraseHistory(erased), "\(id)")
        #expect(try !listed(erased))
        var tombstone = page
        tombstone.tombstones = [Tombstone(id: OpID(replica: Self.b0, counter: 9_999),
                                          erasures: [Erasure(ref: OpRef(id: OpID(replica: Self.b0, counter: 2), lamport: 2),
                                                             clock: VectorClock([(Self.b0, UInt64(2))]))])]
        #expect(try !listed(tombstone))
        // Erased ranges without an erase history (a page of before restores, [PKG-99]): an
        // eager read says so, and the page is then read from its log. A listing read cannot
        // see them (the records are not parsed), so reading its records refuses them, which
        // makes the store read the page again eagerly.
        var noHistory = page
        noHistory.elements[3].erased = [PointRange(0, 1)]
        let b = PageSnapshot.encode(noHistory, coveredLogOffset: 0, logIncarnation: 0)
        #expect(try PageSnapshot.decode(b, deferringPoints: true).lacksEraseHistory)
        let c = try PageSnapshot.decode(b, deferringPoints: true, leavingRecordsUnbuilt: true)
        let u = try #require(c.unbuilt)
        expectDecodeFailure([.corrupt], "erased ranges without a history") { try u.build() }
    }
}
