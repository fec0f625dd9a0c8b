import Foundation
import Testing
@testable import LnoteModel

/// [SNAP-32] The element index: written exactly for pages of more than 64 elements, checked
/// by every reader, and never able to change what a snapshot decodes to.
@Suite("Page snapshot element index")
struct PageSnapshotIndexTests {
    /// A valid random page with `count` elements whose strokes are generated handwriting,
    /// so that big pages reach the size where decoding goes parallel.
    static func page(seed: UInt64, count: Int) -> PageState {
        var m = RandomModel(seed: seed)
        var state = m.pageState(maxElements: 0)
        var generator = HandwritingGenerator(seed: seed)
        let replica = ReplicaID(0xA1)
        for i in 0..<count {
            let stroke = generator.nextStroke()
            state.elements.append(ElementRecord(id: OpID(replica: replica, counter: UInt64(i + 1)), lamport: UInt64(i + 1),
                                                wallTime: Int64(i), content: .stroke(stroke),
                                                transform: LWWRegister(.identity, frontier: []),
                                                z: LWWRegister(ZKey(layer: 1), frontier: []),
                                                erased: [], frontier: []))
        }
        return PageSnapshot.canonicalized(state)
    }

    /// (tag, offset of the section header, body range) of every section.
    static func sections(_ b: [UInt8]) -> [(tag: UInt16, at: Int, body: Range<Int>)] {
        var out: [(UInt16, Int, Range<Int>)] = []
        var i = PageSnapshot.headerSize
        while i < b.count - 4 {
            let tag = UInt16(b[i]) | UInt16(b[i + 1]) << 8
            let size = Int(b[i + 2]) | Int(b[i + 3]) << 8 | Int(b[i + 4]) << 16 | Int(b[i + 5]) << 24
            out.append((tag, i, (i + 6)..<(i + 6 + size)))
            i += 6 + size
        }
        return out
    }

    enum Outcome: Equatable {
        case state(PageState)
        case failure(LnoteError.Code, Int?, Int?, String)
    }

    static func outcome(_ b: [UInt8], parallel: Bool) -> Outcome {
        do {
            return .state(try PageSnapshot.decode(b, path: "p.content", parallel: parallel).state)
        } catch let e as LnoteError {
            return .failure(e.code, e.offset, e.index, e.message)
        } catch {
            return .failure(.invalidState, nil, nil, "\(error)")
        }
    }

    @Test("[SNAP-32] the index is there exactly above 64 elements, and big pages decode the same on several cores")
    func indexPresenceAndParallelDecoding() throws {
        for (n, seed) in [(0, 1), (1, 2), (64, 3), (65, 4), (128, 5), (129, 6), (700, 7)] as [(Int, UInt64)] {
            let state = Self.page(seed: seed, count: n)
            let bytes = PageSnapshot.encode(state, coveredLogOffset: 40, logIncarnation: 9)
            let secs = Self.sections(bytes)
            let index = secs.first { $0.tag == 0x0005 }
            #expect((index != nil) == (n > 64), "n \(n)")
            #expect(Self.outcome(bytes, parallel: true) == .state(state), "n \(n)")
            #expect(Self.outcome(bytes, parallel: false) == .state(state), "n \(n)")
            guard let index, let elements = secs.first(where: { $0.tag == 0x0002 }) else { continue }
            // The parallel path itself (whatever the section size and core count) gives the records.
            var ir = ByteReader(bytes, range: index.body)
            let offsets = try PageSnapshot.elementIndexOffsets(&ir)
            var er = ByteReader(bytes, range: elements.body)
            er.shortestVarints = true
            let count = try er.count("element count", minSize: 7)
            let parallel = PageSnapshot.decodeElementsInParallel(er, count: count, bodyStart: elements.body.lowerBound,
                                                                   index: offsets, version: PageSnapshot.version,
                                                                   replicas: .init(PageSnapshot.canonicalized(state).clock))
            #expect(parallel == state.elements, "n \(n)")
        }
    }

    @Test("[SNAP-32] a wrong, missing or needless index is corrupt, at the index")
    func damagedIndex() throws {
        let state = Self.page(seed: 11, count: 300)
        let bytes = PageSnapshot.encode(state, coveredLogOffset: 40, logIncarnation: 9)
        let secs = Self.sections(bytes)
        let index = try #require(secs.first { $0.tag == 0x0005 })
        // An offset one byte off (the last delta byte of the first entry, then of the last).
        for at in [index.body.lowerBound + 2, index.body.upperBound - 1] {
            var b = bytes
            b[at] = b[at] ^ 0x01
            b = PageSnapshotTests.reseal(b)
            let e = expectDecodeFailure([.corrupt], "offset byte \(at)") { _ = try PageSnapshot.decode(b) }
            #expect(e.map { index.body.contains($0.offset ?? -1) } == true, "\(String(describing: e))")
            #expect(Self.outcome(b, parallel: true) == Self.outcome(b, parallel: false))
        }
        // A stride other than 64.
        var b = bytes
        b[index.body.lowerBound] = 32
        b = PageSnapshotTests.reseal(b)
        expectDecodeFailure([.corrupt], "stride 32") { _ = try PageSnapshot.decode(b) }
        // No index on a page of 300 elements.
        var cut = Array(bytes[..<index.at]) + Array(bytes[index.body.upperBound...])
        cut = PageSnapshotTests.reseal(cut)
        let missing = expectDecodeFailure([.corrupt], "index removed") { _ = try PageSnapshot.decode(cut) }
        #expect(missing?.message.contains("elementIndex") == true)
        // An index on a small page.
        let small = PageSnapshot.encode(Self.page(seed: 12, count: 3), coveredLogOffset: 0, logIncarnation: 1)
        var extra = Array(small[..<(small.count - 4)]) + [0x05, 0x00, 3, 0, 0, 0, 64, 1, 10] + [0, 0, 0, 0]
        extra = PageSnapshotTests.reseal(extra)
        expectDecodeFailure([.corrupt], "index on a small page") { _ = try PageSnapshot.decode(extra) }
    }

    /// Every entry of the index checked, not only those at the edges of the parallel path's
    /// groups: an entry inside a group one byte off was accepted by the parallel path (which
    /// only checked where groups end) and refused by the serial one; read with its points
    /// deferred ([SNAP-38]), the chunk would then have been decoded from the wrong offset.
    @Test("[SNAP-32] [SNAP-38] every index entry one byte off is corrupt, on every path, points deferred or not")
    func everyIndexEntryIsChecked() throws {
        let state = Self.page(seed: 31, count: 900)  // 15 chunks: more than the groups of 2 cores
        let bytes = PageSnapshot.encode(state, coveredLogOffset: 40, logIncarnation: 9)
        let secs = Self.sections(bytes)
        let index = try #require(secs.first { $0.tag == 0x0005 })
        let elements = try #require(secs.first { $0.tag == 0x0002 })
        #expect(elements.body.count >= 4 * PageSnapshot.parallelSectionBytes(version: PageSnapshot.version),
                "big enough for the parallel path with points deferred")
        for at in (index.body.lowerBound + 1)..<index.body.upperBound {
            var b = bytes
            b[at] ^= 0x01
            b = PageSnapshotTests.reseal(b)
            let serial = Self.outcome(b, parallel: false)
            guard case .failure(let code, _, _, _) = serial, code == .corrupt else {
                Issue.record("byte \(at) of the index flipped: the serial read accepts it (\(serial))")
                continue
            }
            #expect(Self.outcome(b, parallel: true) == serial, "byte \(at)")
            for parallel in [true, false] {
                do {
                    let c = try PageSnapshot.decode(b, path: "p.content", parallel: parallel, deferringPoints: true)
                    Issue.record("byte \(at), parallel \(parallel): the deferred read accepts it (\(c.state.elements.count) elements)")
                } catch let e as LnoteError {
                    #expect(Outcome.failure(e.code, e.offset, e.index, e.message) == serial, "byte \(at), parallel \(parallel)")
                }
            }
        }
    }

    @Test("[SNAP-32] damage inside a big elements section gives the same outcome with and without the parallel path")
    func parallelAndSerialAgreeOnDamage() {
        let state = Self.page(seed: 21, count: 400)
        let bytes = PageSnapshot.encode(state, coveredLogOffset: 40, logIncarnation: 9)
        let elements = Self.sections(bytes).first { $0.tag == 0x0002 }!
        #expect(elements.body.count >= PageSnapshot.parallelSectionBytes(version: PageSnapshot.version),
                "the page must be big enough to go parallel")
        for seed in testSeeds(0x51A31, count: 60) {
            var rng = SplitMix64(seed: seed)
            var b = bytes
            for _ in 0..<rng.int(in: 1...3) {
                let at = elements.body.lowerBound + Int(rng.below(UInt64(elements.body.count)))
                b[at] = UInt8(truncatingIfNeeded: rng.next())
            }
            b = PageSnapshotTests.reseal(b)
            let p = Self.outcome(b, parallel: true), s = Self.outcome(b, parallel: false)
            #expect(p == s, "seed \(seed)")
        }
    }

    /// A deferred stroke's bounds are checked from its count and width alone, without the
    /// stroke being made ([SNAP-38]): the error must stay the one an eager read gives.
    @Test("[SNAP-19] [SNAP-38] a stroke width out of bounds: the same error, offset and message with points deferred or not")
    func deferredStrokeWidthAgrees() throws {
        for (k, width) in [Int32(0), ContentBounds.maxRadius + 1].enumerated() {
            // A page read in one piece, and one big enough for the parallel path.
            for count in [3, 400] {
                var state = Self.page(seed: 70 + UInt64(k), count: count)
                let i = count / 2
                guard case .stroke(var s) = state.elements[i].content else {
                    Issue.record("element \(i) is not a stroke")
                    continue
                }
                s.style.width = width
                state.elements[i].content = .stroke(s)
                let bytes = PageSnapshot.encode(state, coveredLogOffset: 40, logIncarnation: 9)
                let eager = Self.outcome(bytes, parallel: false)
                guard case .failure(.corrupt, let offset, _, let message) = eager else {
                    Issue.record("width \(width), \(count) strokes: the eager read gives \(eager)")
                    continue
                }
                #expect(offset != nil)
                #expect(message.contains("element \(state.elements[i].id): a stroke width of \(width) tenths of a point"), "\(message)")
                // Refused by the read itself, not only when the points are decoded.
                for parallel in [true, false] {
                    do {
                        _ = try PageSnapshot.decode(bytes, path: "p.content", parallel: parallel, deferringPoints: true)
                        Issue.record("width \(width), \(count) strokes, parallel \(parallel): the deferred read accepts it")
                    } catch let e as LnoteError {
                        #expect(Outcome.failure(e.code, e.offset, e.index, e.message) == eager,
                                "width \(width), \(count) strokes, parallel \(parallel)")
                    }
                }
            }
        }
    }

    /// The outcome of a read with the points deferred ([SNAP-38]), then every point decoded.
    static func deferredOutcome(_ b: [UInt8], parallel: Bool) -> Outcome {
        do {
            // Resolved: a deferred stroke is `==` only to one of the same read.
            return .state(try PageSnapshot.decode(b, path: "p.content", parallel: parallel, deferringPoints: true).state.resolved())
        } catch let e as LnoteError {
            return .failure(e.code, e.offset, e.index, e.message)
        } catch {
            return .failure(.invalidState, nil, nil, "\(error)")
        }
    }

    /// A section too small for several cores, but with an index, is read by the same
    /// in-place path on one thread (ids checked by a sort, not a hash table): on any failure
    /// it gives way to the record-by-record read, so outcomes and errors are that read's.
    @Test("[SNAP-20] [SNAP-22] [SNAP-32] a small indexed section read in place on one thread: same records, same errors")
    func smallSectionInPlace() throws {
        for n in [65, 200] {
            // Distinct layers, so that a duplicated id keeps the z order and only [SNAP-22] fails.
            var state = Self.page(seed: UInt64(n), count: n)
            for i in state.elements.indices { state.elements[i].z = LWWRegister(ZKey(layer: Int64(i + 1))) }
            state = PageSnapshot.canonicalized(state)
            let bytes = PageSnapshot.encode(state, coveredLogOffset: 40, logIncarnation: 9)
            let secs = Self.sections(bytes)
            let index = try #require(secs.first { $0.tag == 0x0005 })
            let elements = try #require(secs.first { $0.tag == 0x0002 })
            var ir = ByteReader(bytes, range: index.body)
            let offsets = try PageSnapshot.elementIndexOffsets(&ir)
            var er = ByteReader(bytes, range: elements.body)
            er.shortestVarints = true
            let count = try er.count("element count", minSize: 7)
            let inPlace = PageSnapshot.decodeElementsInParallel(er, count: count, bodyStart: elements.body.lowerBound,
                                                                  index: offsets, version: PageSnapshot.version, replicas: .init(state.clock),
                                                                  parallel: false)
            #expect(inPlace == state.elements, "n \(n)")
            #expect(Self.deferredOutcome(bytes, parallel: true) == Self.deferredOutcome(bytes, parallel: false), "n \(n)")

            // The same id twice, in different chunks: refused at the second, by every path.
            var dup = state
            dup.elements[n - 2].id = dup.elements[3].id
            let dupBytes = PageSnapshot.encode(dup, coveredLogOffset: 40, logIncarnation: 9)
            let serial = Self.outcome(dupBytes, parallel: false)
            guard case .failure(.corrupt, _, let at, let message) = serial else {
                Issue.record("n \(n): a duplicated id is accepted (\(serial))")
                continue
            }
            #expect(message.contains("duplicate") && at == n - 2, "n \(n): \(message), index \(String(describing: at))")
            #expect(Self.outcome(dupBytes, parallel: true) == serial, "n \(n)")
            #expect(Self.deferredOutcome(dupBytes, parallel: true) == serial, "n \(n)")

            // Random damage under a resealed CRC: the in-place read and the record-by-record one agree.
            for seed in testSeeds(0x5A11 + UInt64(n), count: 12) {
                var rng = SplitMix64(seed: seed)
                var b = bytes
                for _ in 0..<rng.int(in: 1...3) {
                    let at = elements.body.lowerBound + Int(rng.below(UInt64(elements.body.count)))
                    b[at] = UInt8(truncatingIfNeeded: rng.next())
                }
                b = PageSnapshotTests.reseal(b)
                #expect(Self.deferredOutcome(b, parallel: true) == Self.deferredOutcome(b, parallel: false), "n \(n) seed \(seed)")
                #expect(Self.outcome(b, parallel: true) == Self.outcome(b, parallel: false), "n \(n) seed \(seed)")
            }
        }
    }
}
