import Foundation
import Testing
@testable import LnoteModel
import LnoteTestSupport

/// Snapshots read with their points deferred ([SNAP-38]): a deferred read, resolved, is the
/// eager read; damage the deferred read steps over is found when the points are resolved.
@Suite("Deferred points (page snapshot)")
struct DeferredPointsTests {
    /// A random valid state of 0 to ~300 elements (so 1-, 2- and 5-chunk pages occur), with
    /// some strokes replaced by realistic pen handwriting.
    static func state(_ seed: UInt64) -> PageState {
        var m = RandomModel(seed: seed)
        let sizes = [0, 3, 20, 64, 65, 128, 129, 200, 300, 320]
        var s = m.pageState(maxElements: sizes[Int(seed % UInt64(sizes.count))], maxTombstones: 6)
        var options = HandwritingGenerator.Options()
        options.profile = .pen
        var g = HandwritingGenerator(seed: seed ^ 0x5EED, options: options)
        for i in s.elements.indices where s.elements[i].content.stroke != nil && m.chance(0.4) {
            let pen = g.nextStroke()
            guard ContentBounds.problem(.stroke(pen)) == nil else { continue }
            s.elements[i].content = .stroke(pen)
            s.elements[i].erased = m.erased(pointCount: pen.points.count)
        }
        return s
    }

    /// Where the elements section's body is in a snapshot file.
    static func elementsBody(_ b: [UInt8]) -> Range<Int>? {
        var at = PageSnapshot.headerSize
        while at + 6 <= b.count - 4 {
            let tag = UInt16(b[at]) | UInt16(b[at + 1]) << 8
            let len = Int(UInt32(b[at + 2]) | UInt32(b[at + 3]) << 8 | UInt32(b[at + 4]) << 16 | UInt32(b[at + 5]) << 24)
            if tag == PageSnapshot.Section.elements.rawValue { return (at + 6)..<(at + 6 + len) }
            at += 6 + len
        }
        return nil
    }

    /// Recomputes the CRC32C trailer (the length is unchanged).
    static func reseal(_ b: [UInt8]) -> [UInt8] {
        var b = b
        let crc = CRC32C.checksum(b, 0..<(b.count - 4))
        for i in 0..<4 { b[b.count - 4 + i] = UInt8(truncatingIfNeeded: crc >> (8 * UInt32(i))) }
        return b
    }

    @Test("[SNAP-38] a deferred read, resolved, equals the eager read; counts known before; v1 read whole")
    func deferredEqualsEager() throws {
        var deferredPages = 0, chunkCounts = Set<Int>()
        for seed in testSeeds(0xDEFE_0001, count: 220) {
            let state = Self.state(seed)
            let strokes = state.elements.filter { $0.content.stroke != nil }.count
            for version: UInt16 in [2, 1] {
                let bytes = PageSnapshot.encode(state, coveredLogOffset: 77, logIncarnation: 9, version: version)
                let path = "/x/p.content"
                let eager = try PageSnapshot.decode(bytes, path: path)
                for parallel in [true, false] {
                    let lazy = try PageSnapshot.decode(bytes, path: path, parallel: parallel, deferringPoints: true)
                    let ctx = "seed \(seed) v\(version) parallel \(parallel) \(state.elements.count) elements"
                    #expect(lazy.coveredLogOffset == eager.coveredLogOffset && lazy.logIncarnation == eager.logIncarnation, "\(ctx)")
                    #expect(lazy.state.elements.map(\.id) == eager.state.elements.map(\.id), "\(ctx)")
                    #expect(lazy.state.elements.map(\.content.pointCount) == eager.state.elements.map(\.content.pointCount), "\(ctx)")
                    #expect(lazy.state.pointCount == eager.state.pointCount, "\(ctx)")
                    for (l, e) in zip(lazy.state.elements, eager.state.elements) {
                        #expect(l.visibleRanges == e.visibleRanges, "\(ctx) element \(e.id)")
                        #expect(l.isFullyErasedInk == e.isFullyErasedInk, "\(ctx) element \(e.id)")
                    }
                    let expectDeferred = version == 2 && strokes > 0
                    #expect(lazy.state.isResolved == !expectDeferred, "\(ctx): \(strokes) strokes")
                    if expectDeferred { deferredPages += 1; chunkCounts.insert((state.elements.count + 63) / 64) }
                    if version == 1 { #expect(lazy.state == eager.state, "\(ctx)") }
                    // One element first (its chunk alone), then the whole state.
                    if let some = lazy.state.elements.last {
                        #expect(try some.resolved() == eager.state.elements.last!, "\(ctx)")
                    }
                    let resolved = try lazy.state.resolved()
                    #expect(resolved == eager.state, "\(ctx)")
                    #expect(resolved.isResolved, "\(ctx)")
                    #expect(try resolved.resolved() == resolved, "\(ctx)")
                    // Strokes resolved one at a time agree too.
                    for (l, e) in zip(lazy.state.elements, eager.state.elements) {
                        #expect(try l.content.resolved() == e.content, "\(ctx) element \(e.id)")
                    }
                    // The resolved state re-encodes to the same bytes.
                    #expect(PageSnapshot.encode(resolved, coveredLogOffset: 77, logIncarnation: 9, version: version) == bytes, "\(ctx)")
                }
            }
        }
        #expect(deferredPages > 100)
        #expect(chunkCounts.contains(1) && chunkCounts.contains(2) && chunkCounts.contains(5), "chunk counts seen: \(chunkCounts.sorted())")
    }

    @Test("[SNAP-38] point damage under a valid CRC: never found by the eager read and missed by the deferred one")
    func damageUnderValidCRC() throws {
        var cases = 0, foundOnResolve = 0, bothFailed = 0, bothOK = 0
        for seed in testSeeds(0xDEFE_0002, count: 40) {
            var m = RandomModel(seed: seed &+ 1)
            var state = Self.state(seed)
            if state.elements.count < 10 { state = Self.state(seed ^ 0x1234_5678) }
            let original = PageSnapshot.encode(state, coveredLogOffset: 5, logIncarnation: 6)
            guard let body = Self.elementsBody(original), body.count > 8 else { continue }
            let path = "/d/pages/p.content"
            for _ in 0..<40 {
                var b = original
                let at = m.int(body.lowerBound...(body.upperBound - 1))
                b[at] ^= UInt8(1) << UInt8(m.int(0...7))
                b = Self.reseal(b)
                cases += 1
                let ctx = "seed \(seed) flip at \(at) of \(b.count)"
                var eagerError: LnoteError?
                var eagerState: PageState?
                do { eagerState = try PageSnapshot.decode(b, path: path).state } catch let e as LnoteError { eagerError = e }
                let lazy: PageSnapshot.Contents
                do {
                    lazy = try PageSnapshot.decode(b, path: path, deferringPoints: true)
                } catch let e as LnoteError {
                    #expect(eagerError != nil, "\(ctx): deferred read failed (\(e)) where the eager read succeeded")
                    bothFailed += 1
                    continue
                }
                do {
                    let resolved = try lazy.state.resolved()
                    if let eagerError {
                        Issue.record("\(ctx): eager read fails (\(eagerError)) but the deferred read resolves")
                    } else {
                        #expect(resolved == eagerState, "\(ctx): states differ")
                        bothOK += 1
                    }
                } catch let e as LnoteError {
                    foundOnResolve += 1
                    #expect(eagerError != nil, "\(ctx): resolve fails (\(e)) where the eager read succeeded")
                    #expect(e.code == .corrupt, "\(ctx): \(e)")
                    #expect(e.path == path, "\(ctx): \(e)")
                    #expect(e.offset.map { (0..<b.count).contains($0) } == true, "\(ctx): \(e)")
                    if let eagerError {
                        #expect(e.offset == eagerError.offset && e.code == eagerError.code,
                                "\(ctx): eager \(eagerError) vs deferred \(e)")
                    }
                    // Cached: the same error again, from the state and from each stroke.
                    do { _ = try lazy.state.resolved(); Issue.record("\(ctx): second resolve succeeded") } catch let again as LnoteError {
                        #expect(again.code == e.code && again.offset == e.offset && again.message == e.message, "\(ctx): \(again) vs \(e)")
                    }
                    var strokeFailures = 0
                    for el in lazy.state.elements {
                        do { _ = try el.resolved() } catch let s as LnoteError {
                            strokeFailures += 1
                            #expect(s.code == .corrupt && s.path == path, "\(ctx): \(s)")
                        }
                    }
                    #expect(strokeFailures > 0, "\(ctx): the state fails to resolve but every element resolves")
                }
            }
        }
        #expect(cases > 1000)
        #expect(foundOnResolve > 50, "only \(foundOnResolve) damaged point streams found on resolve (\(bothFailed) both failed, \(bothOK) both read)")
    }

    @Test("[SNAP-38] a state copied before resolving shares the decoded chunk")
    func copiesShareChunks() throws {
        let state = Self.state(0xC0FFEE_0042 &* 10 + 7)
        let bytes = PageSnapshot.encode(state, coveredLogOffset: 0, logIncarnation: 0)
        let lazy = try PageSnapshot.decode(bytes, deferringPoints: true).state
        let copy = lazy
        let a = try lazy.resolved(), b = try copy.resolved()
        #expect(a == b)
        #expect(a == (try PageSnapshot.decode(bytes).state))
    }
    /// A page of `n` pen strokes by one replica, each on its own layer.
    static func bigPage(_ n: Int, seed: UInt64) -> PageState {
        var options = HandwritingGenerator.Options()
        options.profile = .pen
        var g = HandwritingGenerator(seed: seed, options: options)
        let r = ReplicaID(0x77)
        var uuid: [UInt8] = []
        var rng = SplitMix64(seed: seed)
        for _ in 0..<16 { uuid.append(UInt8(truncatingIfNeeded: rng.next())) }
        var s = PageState(page: PageID(UUID(bytes: uuid)!), clock: VectorClock([(r, UInt64(n))]), maxLamport: UInt64(n), modified: 5)
        for i in 1...n {
            var st = g.nextStroke()
            while ContentBounds.problem(.stroke(st)) != nil { st = g.nextStroke() }
            s.elements.append(ElementRecord(id: OpID(replica: r, counter: UInt64(i)), lamport: UInt64(i), wallTime: Int64(i),
                                            content: .stroke(st), z: LWWRegister(ZKey(layer: Int64(i)))))
        }
        s.contexts = [ReplicaContext(replica: r, clock: VectorClock([(r, UInt64(n))]), lamports: [LamportRun(from: 1, offset: 0)])]
        return s
    }

    @Test("[SNAP-38] a page big enough for the parallel structure pass: deferred equals eager, damage found in its chunk")
    func bigPageParallel() throws {
        let seed: UInt64 = 0xB16_0001
        let state = Self.bigPage(3200, seed: seed)
        try PageSnapshot.validate(state)
        let bytes = PageSnapshot.encode(state, coveredLogOffset: 1, logIncarnation: 2)
        guard let body = Self.elementsBody(bytes) else { Issue.record("no elements section"); return }
        #expect(body.count >= 4 * PageSnapshot.parallelSectionBytes(version: 2), "seed \(seed): \(body.count) bytes")
        let eager = try PageSnapshot.decode(bytes)
        for parallel in [true, false] {
            let lazy = try PageSnapshot.decode(bytes, path: "/b", parallel: parallel, deferringPoints: true)
            #expect(!lazy.state.isResolved)
            #expect(try lazy.state.resolved() == eager.state, "seed \(seed) parallel \(parallel)")
        }
        // Damage in the middle chunks, resealed: found at the same offset as the eager read's.
        var m = SplitMix64(seed: seed)
        var found = 0
        for _ in 0..<60 {
            var b = bytes
            let at = body.lowerBound + body.count / 3 + Int(m.below(UInt64(body.count / 3)))
            b[at] ^= UInt8(1) << UInt8(m.below(8))
            b = Self.reseal(b)
            let eagerError: LnoteError?
            do { _ = try PageSnapshot.decode(b, path: "/b"); eagerError = nil } catch let e as LnoteError { eagerError = e }
            for parallel in [true, false] {
                guard let lazy = try? PageSnapshot.decode(b, path: "/b", parallel: parallel, deferringPoints: true) else {
                    #expect(eagerError != nil, "seed \(seed) flip at \(at)")
                    continue
                }
                do {
                    let r = try lazy.state.resolved()
                    #expect(eagerError == nil, "seed \(seed) flip at \(at): eager \(String(describing: eagerError)) but resolved")
                    if eagerError == nil { #expect(r == (try PageSnapshot.decode(b).state), "seed \(seed) flip at \(at)") }
                } catch let e as LnoteError {
                    found += 1
                    #expect(e.offset == eagerError?.offset && e.message == eagerError?.message,
                            "seed \(seed) flip at \(at) parallel \(parallel): deferred \(e) vs eager \(String(describing: eagerError))")
                    // The chunk's elements fail alone; the others resolve.
                    let failing = lazy.state.elements.indices.filter { (try? lazy.state.elements[$0].resolved()) == nil }
                    #expect(!failing.isEmpty && failing.count <= PageSnapshot.elementIndexStride
                            && Set(failing.map { $0 / PageSnapshot.elementIndexStride }).count == 1,
                            "seed \(seed) flip at \(at): failing elements \(failing.first ?? -1)...\(failing.last ?? -1)")
                }
            }
        }
        #expect(found > 10)
    }
    @Test("[SNAP-38] resolving from many tasks at once: one outcome per chunk, the eager one")
    func concurrentResolves() async throws {
        let seed: UInt64 = 0xC0C0_0001
        let state = Self.bigPage(700, seed: seed)
        let bytes = PageSnapshot.encode(state, coveredLogOffset: 1, logIncarnation: 2)
        let eager = try PageSnapshot.decode(bytes).state
        let lazy = try PageSnapshot.decode(bytes, deferringPoints: true).state
        let results = await withTaskGroup(of: Bool.self) { group in
            for t in 0..<24 {
                group.addTask {
                    if t % 3 == 0 { return (try? lazy.resolved()) == eager }
                    // Single strokes, in an order of their own.
                    let n = lazy.elements.count
                    for k in 0..<n {
                        let i = (k * (t + 7)) % n
                        guard (try? lazy.elements[i].resolved()) == eager.elements[i] else { return false }
                    }
                    return true
                }
            }
            var out: [Bool] = []
            for await r in group { out.append(r) }
            return out
        }
        #expect(results.allSatisfy { $0 }, "seed \(seed): \(results)")

        // Damaged: every task gets the same error.
        guard let body = Self.elementsBody(bytes) else { return }
        var m = SplitMix64(seed: seed)
        for _ in 0..<30 {
            var b = bytes
            b[body.lowerBound + body.count / 2 + Int(m.below(64))] ^= UInt8(1) << UInt8(m.below(8))
            b = Self.reseal(b)
            guard (try? PageSnapshot.decode(b)) == nil, let damaged = try? PageSnapshot.decode(b, path: "/c", deferringPoints: true) else { continue }
            let errors = await withTaskGroup(of: String.self) { group in
                for _ in 0..<16 {
                    group.addTask {
                        do { _ = try damaged.state.resolved(); return "resolved" } catch { return "\(error)" }
                    }
                }
                var out: Set<String> = []
                for await e in group { out.insert(e) }
                return out
            }
            #expect(errors.count == 1 && !errors.contains("resolved"), "seed \(seed): \(errors)")
            return
        }
        Issue.record("seed \(seed): no damage found that only the points' decode finds")
    }
}
