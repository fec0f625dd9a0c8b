import Foundation
import Testing
import LnoteModel

@Suite("Page snapshot")
struct PageSnapshotTests {
    /// [SNAP-1] [SNAP-13] Everything in a PageState survives a round trip.
    @Test func randomStatesRoundTrip() throws {
        for seed in testSeeds(0x5A9_0001, count: 300) {
            var m = RandomModel(seed: seed)
            let state = m.pageState()
            do {
                try PageSnapshot.validate(state)
            } catch {
                Issue.record("generator broke an invariant, seed \(seed): \(error)")
                continue
            }
            let offset = m.u64Varied(), incarnation = m.u64()
            let bytes = PageSnapshot.encode(state, coveredLogOffset: offset, logIncarnation: incarnation)
            do {
                let c = try PageSnapshot.decode(bytes, path: "seed-\(seed).content")
                #expect(c.state == state, "seed \(seed)")
                #expect(c.coveredLogOffset == offset && c.logIncarnation == incarnation, "seed \(seed)")
            } catch {
                Issue.record("seed \(seed): \(error)")
            }
        }
    }

    /// [SNAP-2] Equal states give identical bytes: encoding twice, and encoding the same
    /// state with every set listed in another order.
    @Test func determinism() {
        for seed in testSeeds(0x5A9_0002, count: 200) {
            var m = RandomModel(seed: seed)
            let state = m.pageState()
            let a = PageSnapshot.encode(state, coveredLogOffset: 7, logIncarnation: 9)
            let b = PageSnapshot.encode(state, coveredLogOffset: 7, logIncarnation: 9)
            #expect(a == b, "seed \(seed)")
            let scrambled = m.scrambled(state)
            let c = PageSnapshot.encode(scrambled, coveredLogOffset: 7, logIncarnation: 9)
            #expect(a == c, "seed \(seed): scrambled order changes the bytes")
            #expect(PageSnapshot.canonicalized(scrambled) == state, "seed \(seed)")
            #expect(state.canonicalJSON() == scrambled.canonicalJSON(), "seed \(seed): JSON differs")
        }
    }

    /// A second writer, built from the spec's tables without the canonical sorting, agrees
    /// with the encoder on canonical states.
    @Test func independentWriterAgrees() {
        for seed in testSeeds(0x5A9_0003, count: 100) {
            var m = RandomModel(seed: seed)
            let state = m.pageState()
            #expect(RawSnapshotWriter.encode(state) == PageSnapshot.encode(state, coveredLogOffset: 0, logIncarnation: 0, version: 1),
                    "seed \(seed)")
        }
    }

    @Test func emptyPage() throws {
        let state = PageState(page: PageID(UUID(uuidString: "00000000-0000-0000-0000-000000000001")!))
        let bytes = PageSnapshot.encode(state, coveredLogOffset: 0, logIncarnation: 0)
        // Header, four empty sections (page: 3 bytes, others: 1 byte), CRC.
        #expect(bytes.count == 52 + 4 * 6 + 3 + 1 + 1 + 1 + 4)
        #expect(try PageSnapshot.decode(bytes).state == state)
    }

    /// The handwriting of a realistic page: snapshot size stays close to the point codec's.
    @Test func realisticPageSize() throws {
        let strokes = HandwritingGenerator.strokes(seed: 3, count: 300)
        let r = ReplicaID(0xA1)
        var state = PageState(page: PageID(), clock: vc((r, 300)), maxLamport: 300, modified: 1_700_000_000_000,
                              contexts: [ReplicaContext(replica: r, clock: vc((r, 300)), lamports: [LamportRun(from: 1, offset: 0)])])
        for (i, s) in strokes.enumerated() {
            state.elements.append(ElementRecord(id: OpID(replica: r, counter: UInt64(i + 1)), lamport: UInt64(i + 1),
                                                wallTime: 1_700_000_000_000 + Int64(i) * 900, content: .stroke(s),
                                                z: LWWRegister(ZKey(layer: Int64(i + 1)))))
        }
        let bytes = PageSnapshot.encode(state, coveredLogOffset: 123_456, logIncarnation: 42)
        let perPoint = Double(bytes.count) / Double(state.pointCount)
        #expect(perPoint <= 2.5, "\(perPoint) bytes per point for a whole page")
        #expect(try PageSnapshot.decode(bytes).state == state)
    }

    // MARK: Envelope

    /// Re-computes the length field and CRC after editing a snapshot.
    static func reseal(_ b: [UInt8]) -> [UInt8] {
        var b = b
        let length = UInt64(b.count)
        withUnsafeBytes(of: length.littleEndian) { for i in 0..<8 { b[12 + i] = $0[i] } }
        let crc = CRC32C.checksum(b, 0..<(b.count - 4))
        withUnsafeBytes(of: crc.littleEndian) { for i in 0..<4 { b[b.count - 4 + i] = $0[i] } }
        return b
    }

    static func sample(_ seed: UInt64 = 11) -> (PageState, [UInt8]) {
        var m = RandomModel(seed: seed)
        let s = m.pageState()
        return (s, PageSnapshot.encode(s, coveredLogOffset: 1, logIncarnation: 2))
    }

    /// Inserts a section before the CRC (i.e. after the known ones) and reseals.
    static func withExtraSection(_ bytes: [UInt8], tag: UInt16, body: [UInt8]) -> [UInt8] {
        var b = Array(bytes.dropLast(4))
        withUnsafeBytes(of: tag.littleEndian) { b.append(contentsOf: $0) }
        withUnsafeBytes(of: UInt32(body.count).littleEndian) { b.append(contentsOf: $0) }
        b += body
        b += [0, 0, 0, 0]
        return reseal(b)
    }

    /// [SNAP-3] Bad magic is `corrupt` at the first differing byte.
    @Test func badMagic() {
        var (_, b) = Self.sample()
        b[3] ^= 0x20
        let e = expectDecodeFailure([.corrupt], "magic") { _ = try PageSnapshot.decode(b) }
        #expect(e?.offset == 3)
        expectDecodeFailure([.corrupt], "not a snapshot") { _ = try PageSnapshot.decode(Array("{\"json\": true}".utf8)) }
    }

    /// [SNAP-7] A newer major version is refused as `unsupportedVersion` (when intact),
    /// version 0 is `corrupt`. [SNAP-9] The CRC is checked before the version: the same
    /// change without a matching CRC is damage (`corrupt`), never `unsupportedVersion`.
    @Test func versions() {
        let (_, b) = Self.sample()
        var v2 = b
        v2[8] = UInt8(PageSnapshot.version + 1)  // (named v2 when 2 was the newer version)
        let e = expectDecodeFailure([.unsupportedVersion], "v2") { _ = try PageSnapshot.decode(Self.reseal(v2)) }
        #expect(e?.offset == 8)
        // Without a matching CRC, the same change is damage.
        expectDecodeFailure([.corrupt], "v2 unsealed") { _ = try PageSnapshot.decode(v2) }
        var v0 = b
        v0[8] = 0
        expectDecodeFailure([.corrupt], "v0") { _ = try PageSnapshot.decode(Self.reseal(v0)) }
    }

    /// [SNAP-8] Unknown compatible flags are ignored; unknown incompatible flags refused.
    @Test func flags() throws {
        let (state, b) = Self.sample()
        var compatible = b
        compatible[10] = 0x01
        #expect(try PageSnapshot.decode(Self.reseal(compatible)).state == state)
        var incompatible = b
        incompatible[11] = 0x01
        expectDecodeFailure([.unsupportedVersion], "incompatible flag") { _ = try PageSnapshot.decode(Self.reseal(incompatible)) }
    }

    /// [SNAP-11] Unknown sections are skipped unless critical; [SNAP-10] order is enforced;
    /// [SNAP-12] the four version-1 sections must all be there, each consumed exactly.
    @Test func unknownSections() throws {
        let (state, b) = Self.sample()
        let skippable = Self.withExtraSection(b, tag: 0x0042, body: [1, 2, 3, 4, 5])
        #expect(try PageSnapshot.decode(skippable).state == state)
        let empty = Self.withExtraSection(b, tag: 0x7FFF, body: [])
        #expect(try PageSnapshot.decode(empty).state == state)
        let critical = Self.withExtraSection(b, tag: 0x8042, body: [1])
        expectDecodeFailure([.unsupportedVersion], "critical section") { _ = try PageSnapshot.decode(critical) }
        // A section repeated (tag not increasing).
        let repeated = Self.withExtraSection(b, tag: 0x0004, body: [0])
        expectDecodeFailure([.corrupt], "repeated section") { _ = try PageSnapshot.decode(repeated) }
        // A missing section: drop the contexts section (the last one) and reseal.
        let sections = try Self.sectionRanges(b)
        let last = sections.last!
        #expect(last.tag == 4)
        let dropped = Self.reseal(Array(b[0..<last.range.lowerBound]) + Array(b[last.range.upperBound...]))
        expectDecodeFailure([.corrupt], "missing section") { _ = try PageSnapshot.decode(dropped) }
        // Bytes left inside a known section.
        var grown = Array(b[0..<last.range.upperBound]) + [0] + Array(b[last.range.upperBound...])
        let len = UInt32(last.range.count - 6 + 1)
        withUnsafeBytes(of: len.littleEndian) { for i in 0..<4 { grown[last.range.lowerBound + 2 + i] = $0[i] } }
        expectDecodeFailure([.corrupt], "section trailing bytes") { _ = try PageSnapshot.decode(Self.reseal(grown)) }
    }

    /// The section layout of a snapshot (tag and whole range, header included).
    static func sectionRanges(_ b: [UInt8]) throws -> [(tag: UInt16, range: Range<Int>)] {
        var r = ByteReader(b, range: 52..<(b.count - 4))
        var out: [(UInt16, Range<Int>)] = []
        while !r.isAtEnd {
            let start = r.offset
            let tag = try r.u16()
            let len = try r.u32()
            _ = try r.skip(Int(len))
            out.append((tag, start..<r.offset))
        }
        return out
    }

    /// [SNAP-5] Trailing bytes and a wrong length field.
    @Test func lengthField() {
        let (_, b) = Self.sample()
        let e = expectDecodeFailure([.corrupt], "trailing byte") { _ = try PageSnapshot.decode(b + [0]) }
        #expect(e?.offset == b.count)
        var small = b
        small[12] = 10; for i in 13..<20 { small[i] = 0 }
        expectDecodeFailure([.corrupt], "length below minimum") { _ = try PageSnapshot.decode(small) }
    }

    /// [SNAP-20] [SNAP-21] [SNAP-22] [SNAP-23] [SNAP-24] [SNAP-25] [SNAP-26] Invariant
    /// violations in an intact file are `corrupt` (and `validate` refuses the state): z order,
    /// every kind of ref list unsorted or with a duplicate, duplicate ids, erased ranges that
    /// touch, are empty or end past 2³², a tombstone of a live element, tombstones, erasures
    /// and contexts out of order.
    @Test func invariantViolations() throws {
        let replica = ReplicaID(0xA1)
        func element(_ c: UInt64, z: Int64) -> ElementRecord {
            ElementRecord(id: OpID(replica: replica, counter: c), lamport: c, wallTime: 0,
                          content: .stroke(Stroke(points: [StrokePoint(x: 1, y: 2)])), z: LWWRegister(ZKey(layer: z)))
        }
        var base = PageState(page: PageID(), clock: vc((replica, 5)), maxLamport: 5,
                             contexts: [ReplicaContext(replica: replica, clock: vc((replica, 5)), lamports: [LamportRun(from: 1, offset: 0)])])
        base.elements = [element(1, z: 1), element(2, z: 2)]
        try PageSnapshot.validate(base)

        // Each bad state is written by hand-building the bytes the encoder would write
        // for it without canonicalizing: encode a canonical state and swap in parts.
        func expectRejected(_ bad: PageState, _ what: String) {
            #expect(throws: LnoteError(.invalidArgument), "validate: \(what)") { try PageSnapshot.validate(bad) }
            let bytes = RawSnapshotWriter.encode(bad)
            expectDecodeFailure([.corrupt], what) { _ = try PageSnapshot.decode(bytes) }
        }
        var s = base
        s.elements.swapAt(0, 1)
        expectRejected(s, "elements out of z order")
        s = base
        s.elements[1].id = s.elements[0].id
        s.elements[1].z.value = ZKey(layer: 1)
        s.elements[1].lamport = 1
        s.elements[1].z.frontier = [OpRef(id: OpID(replica: replica, counter: 9), lamport: 9)]
        expectRejected(s, "duplicate element id")
        s = base
        s.elements[0].transform.frontier = [OpRef(id: OpID(replica: replica, counter: 4), lamport: 4),
                                            OpRef(id: OpID(replica: replica, counter: 3), lamport: 3)]
        expectRejected(s, "unsorted frontier")
        s = base
        s.elements[0].erased = [PointRange(0, 1), PointRange(1, 2)]
        expectRejected(s, "adjacent erased ranges")
        s = base
        s.elements[0].erased = [PointRange(3, 3)]
        expectRejected(s, "empty erased range")
        s = base
        s.tombstones = [Tombstone(id: OpID(replica: replica, counter: 4), erasures: []),]
        expectRejected(s, "tombstone without erasures")
        s = base
        let er = Erasure(ref: OpRef(id: OpID(replica: replica, counter: 5), lamport: 5), clock: VectorClock())
        s.tombstones = [Tombstone(id: OpID(replica: replica, counter: 4), erasures: [er]),
                        Tombstone(id: OpID(replica: replica, counter: 3), erasures: [er])]
        expectRejected(s, "tombstones out of order")
        s = base
        s.tombstones = [Tombstone(id: OpID(replica: replica, counter: 1), erasures: [er])]
        expectRejected(s, "tombstone of a live element")
        s = base
        s.elements[1].z.value = ZKey(layer: 2, path: [ZKey.Step(fraction: [], tag: OpID(replica: replica, counter: 1))], fraction: [])
        expectRejected(s, "z key with an empty fraction after its first step")
        // [SNAP-26] Contexts: sorted, one per replica of the clock, each the clock of its latest
        // operation, with Lamport runs from 1, increasing, each changing the offset.
        let other = ReplicaID(0xB2)
        s = base
        s.clock = vc((replica, 5), (other, 1))
        s.contexts = [ReplicaContext(replica: other, clock: vc((other, 1)), lamports: [LamportRun(from: 1, offset: 0)]),
                      base.contexts[0]]
        expectRejected(s, "contexts out of order")
        s = base
        s.contexts = [ReplicaContext(replica: ReplicaID(0), clock: VectorClock(), lamports: [LamportRun(from: 1, offset: 0)])]
        expectRejected(s, "zero context replica")
        s = base
        s.contexts = []
        expectRejected(s, "a replica of the clock without a context")
        s = base
        s.contexts[0].clock = vc((replica, 4))
        expectRejected(s, "a context that is not the clock of the replica's latest operation")
        s = base
        s.contexts[0].clock = vc((replica, 5), (other, 1))
        expectRejected(s, "a context beyond the page clock")
        for runs in [[LamportRun(from: 2, offset: 0)],
                     [LamportRun(from: 1, offset: 0), LamportRun(from: 3, offset: 0)],
                     [LamportRun(from: 1, offset: 0), LamportRun(from: 6, offset: 1)]] {
            s = base
            s.contexts[0].lamports = runs
            expectRejected(s, "lamport runs \(runs)")
        }
        // [SNAP-26] Running maxima: never decreasing, never past max lamport (5 here).
        for runs in [[LamportRun(from: 1, offset: 2), LamportRun(from: 3, offset: 0)],
                     [LamportRun(from: 1, offset: 1)],
                     [LamportRun(from: 1, offset: 0), LamportRun(from: 5, offset: 1)]] {
            s = base
            s.contexts[0].lamports = runs
            expectRejected(s, "lamport runs \(runs)")
        }
        s = base
        s.contexts[0].lamports = [LamportRun(from: 1, offset: 1), LamportRun(from: 4, offset: 0)]  // 2, 3, 4, 4, 5: allowed
        try PageSnapshot.validate(s)
        #expect(try PageSnapshot.decode(RawSnapshotWriter.encode(s)).state == s)
        // [SNAP-19] What no operation carries: content and transforms beyond [LOG-23]'s
        // bounds, a clock counting more than 2^62 operations.
        let lim = Int32(ContentBounds.coordinateLimit)
        let beyond: [(String, (inout ElementRecord) -> Void)] = [
            ("a stroke without points", { $0.content = .stroke(Stroke(points: [])) }),
            ("x beyond the limit", { $0.content = .stroke(Stroke(points: [StrokePoint(x: lim + 1, y: 0)])) }),
            ("a first point not at 0 ms", { $0.content = .stroke(Stroke(points: [StrokePoint(x: 0, y: 0, t: 3)])) }),
            ("a time going back", { $0.content = .stroke(Stroke(points: [StrokePoint(x: 0, y: 0), StrokePoint(x: 0, y: 0, t: 9),
                                                                         StrokePoint(x: 0, y: 0, t: 8)])) }),
            ("a radius beyond the limit", { $0.content = .stroke(Stroke(points: [StrokePoint(x: 0, y: 0, radius: ContentBounds.maxRadius + 1)])) }),
            ("a zero width", { $0.content = .stroke(Stroke(style: InkStyle(tool: .pen, color: .black, width: 0), points: [StrokePoint(x: 0, y: 0)])) }),
            ("an empty image frame", { $0.content = .image(ImageElement(asset: AssetID.of([1]), frame: QRect(x: 0, y: 0, width: 0, height: 1))) }),
            ("a rotation beyond 360°", { $0.content = .image(ImageElement(asset: AssetID.of([1]), frame: QRect(x: 0, y: 0, width: 1, height: 1),
                                                                             rotation: ContentBounds.maxRotation + 1)) }),
            ("a translation beyond the limit", { $0.transform.value = .translation(0, -lim - 1) }),
            ("a scale beyond 256", { $0.transform.value = Transform(a: ContentBounds.maxMatrixCoefficient + 1, b: 0, c: 0, d: 65536, tx: 0, ty: 0) }),
        ]
        for (what, change) in beyond {
            s = base
            change(&s.elements[1])
            expectRejected(s, what)
            // Reported at the element record: its id is what starts there.
            let bytes = RawSnapshotWriter.encode(s)
            let e = try #require(expectDecodeFailure([.corrupt], what) { _ = try PageSnapshot.decode(bytes) })
            var at = ByteReader(bytes)
            _ = try at.skip(try #require(e.offset), "to the element")
            #expect(try ElementCodec.decodeOpID(&at) == s.elements[1].id, "\(what): \(e)")
        }
        s = base
        s.clock = vc((replica, 5), (other, VectorClock.maxTotal))
        s.contexts.append(ReplicaContext(replica: other, clock: vc((other, VectorClock.maxTotal)), lamports: [LamportRun(from: 1, offset: 0)]))
        s.maxLamport = VectorClock.maxTotal
        expectRejected(s, "a clock of 2^62 + 5 operations")
        s = base
        s.maxLamport = VectorClock.maxTotal + 1
        expectRejected(s, "a max lamport past 2^62")
        #expect(vc((replica, UInt64.max), (other, 2)).total == .max)
        // [SNAP-21] The other ref lists: z frontier, edit frontier, a tombstone's frontier.
        let r3 = OpRef(id: OpID(replica: replica, counter: 3), lamport: 3)
        let r4 = OpRef(id: OpID(replica: replica, counter: 4), lamport: 4)
        s = base
        s.elements[0].z.frontier = [r4, r3]
        expectRejected(s, "unsorted z frontier")
        s = base
        s.elements[1].frontier = [r3, r3]
        expectRejected(s, "duplicate in an edit frontier")
        s = base
        s.tombstones = [Tombstone(id: OpID(replica: replica, counter: 4), erasures: [er], frontier: [r4, r3])]
        expectRejected(s, "unsorted tombstone frontier")
        // [SNAP-25] Erasures strictly increasing by ref.
        let er4 = Erasure(ref: OpRef(id: OpID(replica: replica, counter: 4), lamport: 4), clock: VectorClock())
        s = base
        s.tombstones = [Tombstone(id: OpID(replica: replica, counter: 3), erasures: [er, er4])]
        expectRejected(s, "erasures out of order")
        s.tombstones = [Tombstone(id: OpID(replica: replica, counter: 3), erasures: [er, er])]
        expectRejected(s, "duplicate erasure")
        // [SNAP-23] A range whose end does not fit UInt32 (gap 2^32 - 1, length 2).
        let wide = RawSnapshotWriter.encode(base, rawErased: [0: [(UInt64(UInt32.max), 2)]])
        expectDecodeFailure([.corrupt], "erased range past 2^32") { _ = try PageSnapshot.decode(wide) }
        let fits = RawSnapshotWriter.encode(base, rawErased: [0: [(UInt64(UInt32.max) - 2, 2)]])
        #expect(try PageSnapshot.decode(fits).state.elements[0].erased == [PointRange(UInt32.max - 2, UInt32.max)])
    }

    /// Replaces the count that starts the body of section `tag` with `v` (fixing the
    /// section's size and resealing); returns the file and the count's offset.
    static func withCount(_ b: [UInt8], section tag: UInt16, _ v: UInt64) throws -> ([UInt8], Int) {
        let range = try #require(try sectionRanges(b).first { $0.tag == tag }?.range)
        let body = range.lowerBound + 6
        var r = ByteReader(b, range: body..<range.upperBound)
        _ = try r.varint()
        var w = ByteWriter()
        w.varint(v)
        var out = Array(b[..<body]) + w.bytes + Array(b[r.offset...])
        let size = UInt32(range.count - 6 - (r.offset - body) + w.count)
        withUnsafeBytes(of: size.littleEndian) { for i in 0..<4 { out[range.lowerBound + 2 + i] = $0[i] } }
        return (reseal(out), body)
    }

    /// [SNAP-26] A field of a context record that does not read (a run start or offset, a run
    /// count: cut short or not in its shortest form after a byte flip) is reported with the
    /// context's index, as element and tombstone records are; the checks of the context's
    /// values carried it already.
    @Test func contextFieldErrorsNameTheirContext() throws {
        var named = 0
        for seed in testSeeds(0x5A9_0026, count: 6) {
            let (state, bytes) = Self.sample(seed)
            guard !state.contexts.isEmpty else { continue }
            for i in 20..<(bytes.count - 4) {
                for flip: UInt8 in [0x80, 0xFF] {
                    var b = bytes
                    b[i] ^= flip
                    do {
                        _ = try PageSnapshot.decode(Self.reseal(b))
                    } catch let e as LnoteError {
                        let contextField = ["context replica", "lamport run", "lamport offset"].contains { e.message.contains($0) }
                        guard contextField else { continue }
                        #expect(e.index != nil, "seed \(seed), byte \(i) ^ \(flip): \(e)")
                        named += 1
                    }
                }
            }
        }
        #expect(named > 10, "only \(named) context field errors were produced")
    }

    /// [SNAP-14] [SNAP-15] [SNAP-16] [SNAP-27] A count that the bytes left in its section
    /// cannot hold (28 bytes per element, 22 per tombstone, 12 per context at least) is
    /// `corrupt` at the count itself, before any record is read (so before anything is
    /// allocated for it), never `truncated`; a count within the bound is not refused for
    /// itself (the records that are not there are).
    @Test func countsAreCheckedAgainstTheirSection() throws {
        for seed in testSeeds(0x5A9_0004, count: 40) {
            var m = RandomModel(seed: seed)
            let state = m.pageState(maxElements: 6, maxTombstones: 3)
            // The layout of version 1 (28 bytes per element record); version 2's 7 are
            // checked by `PageSnapshotV2Tests.countsAreCheckedAgainstTheirSection`.
            let b = PageSnapshot.encode(state, coveredLogOffset: 1, logIncarnation: 2, version: 1)
            for (tag, minSize, actual) in [(UInt16(2), 28, state.elements.count), (3, 22, state.tombstones.count),
                                           (4, 12, state.contexts.count)] {
                let range = try #require(try Self.sectionRanges(b).first { $0.tag == tag }?.range)
                for v in [UInt64(1) << 62, UInt64.max] {
                    let (bad, at) = try Self.withCount(b, section: tag, v)
                    let e = expectDecodeFailure([.corrupt], "seed \(seed): section \(tag) count \(v)") { _ = try PageSnapshot.decode(bad) }
                    #expect(e?.offset == at, "seed \(seed): section \(tag): \(String(describing: e))")
                }
                // Just above the bound, and at it: the varint of the count takes 1 to 3 bytes here.
                var bound = 0
                for len in 1...3 {
                    let remaining = range.count - 6 - len
                    let n = remaining / minSize
                    var w = ByteWriter()
                    w.varint(UInt64(n + 1))
                    if w.count == len { bound = n; break }
                }
                let (over, at) = try Self.withCount(b, section: tag, UInt64(bound + 1))
                let e = expectDecodeFailure([.corrupt], "seed \(seed): section \(tag) count \(bound + 1)") { _ = try PageSnapshot.decode(over) }
                #expect(e?.offset == at, "seed \(seed): section \(tag) count \(bound + 1): \(String(describing: e))")
                if bound > actual {
                    let (within, at) = try Self.withCount(b, section: tag, UInt64(bound))
                    let e = expectDecodeFailure([.corrupt], "seed \(seed): section \(tag) count \(bound)") { _ = try PageSnapshot.decode(within) }
                    #expect((e?.offset ?? 0) > at, "seed \(seed): section \(tag) count \(bound) refused for itself: \(String(describing: e))")
                }
            }
        }
    }
}

/// Writes the snapshot layout for a state exactly as given (no canonical sorting), so
/// tests can produce intact files that break invariants.
enum RawSnapshotWriter {
    /// `rawErased` replaces the erased ranges of the elements at those indices by raw
    /// `(gap, length)` pairs.
    static func encode(_ s: PageState, rawErased: [Int: [(UInt64, UInt64)]] = [:]) -> [UInt8] {
        var w = ByteWriter()
        w.append(PageSnapshot.magic)
        w.u16(1); w.u16(0); w.u64(0)
        w.append(s.page.uuid.bytes)
        w.u64(0); w.u64(0)
        func section(_ tag: UInt16, _ body: (inout ByteWriter) -> Void) {
            var b = ByteWriter()
            body(&b)
            w.u16(tag); w.u32(UInt32(b.count)); w.append(b.bytes)
        }
        func refs(_ r: [OpRef], _ b: inout ByteWriter) {
            b.varint(UInt64(r.count))
            for x in r { ElementCodec.encode(x, into: &b) }
        }
        section(1) { b in
            ElementCodec.encode(s.clock, into: &b); b.varint(s.maxLamport); b.svarint(s.modified)
        }
        section(2) { b in
            b.varint(UInt64(s.elements.count))
            for (i, e) in s.elements.enumerated() {
                ElementCodec.encode(e.id, into: &b); b.varint(e.lamport); b.svarint(e.wallTime)
                ElementCodec.encode(e.transform.value, into: &b); refs(e.transform.frontier, &b)
                ElementCodec.encode(e.z.value, into: &b); refs(e.z.frontier, &b)
                if let raw = rawErased[i] {
                    b.varint(UInt64(raw.count))
                    for (gap, length) in raw { b.varint(gap); b.varint(length) }
                } else {
                    b.varint(UInt64(e.erased.count))
                    var prev: UInt32 = 0
                    for r in e.erased {
                        b.varint(UInt64(r.from &- prev)); b.varint(UInt64(r.to &- r.from)); prev = r.to
                    }
                }
                refs(e.frontier, &b)
                ElementCodec.encode(e.content, into: &b)
            }
        }
        section(3) { b in
            b.varint(UInt64(s.tombstones.count))
            for t in s.tombstones {
                ElementCodec.encode(t.id, into: &b)
                b.varint(UInt64(t.erasures.count))
                for e in t.erasures { ElementCodec.encode(e.ref, into: &b); ElementCodec.encode(e.clock, into: &b) }
                refs(t.frontier, &b)
            }
        }
        section(4) { b in
            b.varint(UInt64(s.contexts.count))
            for c in s.contexts {
                b.u64(c.replica.rawValue); ElementCodec.encode(c.clock, into: &b)
                b.varint(UInt64(c.lamports.count))
                var from: UInt64 = 0
                for run in c.lamports { b.varint(run.from &- from); b.varint(run.offset); from = run.from }
            }
        }
        w.u32(0)
        return PageSnapshotTests.reseal(w.bytes)
    }
}
