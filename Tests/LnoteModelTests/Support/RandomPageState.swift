import Foundation
import LnoteModel

/// Seeded random values that respect the model's invariants, for property tests.
///
/// `RandomModel(seed:).pageState()` is a `PageState` that `PageSnapshot.validate` accepts:
/// elements in canonical z order with unique ids, sorted frontiers, normalized erased
/// ranges, tombstones sorted by id and disjoint from live elements, contexts sorted by
/// replica. It deliberately
/// produces the awkward cases too: equal z keys (ties broken by the element ids), keys with
/// paths, extreme integers, empty and single-point strokes,
/// huge jumps between points, long fractions, negative wall times.
///
/// Copy it freely into other test targets.
struct RandomModel {
    var rng: SplitMix64

    init(seed: UInt64) { rng = SplitMix64(seed: seed) }

    mutating func u64() -> UInt64 { rng.next() }
    mutating func int(_ r: ClosedRange<Int>) -> Int { rng.int(in: r) }
    mutating func chance(_ p: Double) -> Bool { rng.chance(p) }
    mutating func pick<T>(_ a: [T]) -> T { a[Int(rng.below(UInt64(a.count)))] }

    /// An Int32, often small, sometimes extreme.
    mutating func int32() -> Int32 {
        switch int(0...9) {
        case 0: return pick([Int32.min, Int32.max, 0, -1, 1, Int32.min + 1, Int32.max - 1])
        case 1: return Int32(truncatingIfNeeded: u64())
        default: return Int32(int(-20_000...20_000))
        }
    }

    mutating func uint32() -> UInt32 {
        switch int(0...9) {
        case 0: return pick([UInt32.max, 0, 1, UInt32.max - 1])
        case 1: return UInt32(truncatingIfNeeded: u64())
        default: return UInt32(int(0...100_000))
        }
    }

    /// A varint-sized value: usually small, sometimes up to 64 bits.
    mutating func u64Varied() -> UInt64 {
        switch int(0...9) {
        case 0: return pick([UInt64.max, 0, 1, 1 << 63, 127, 128, 16383, 16384])
        case 1: return u64()
        default: return UInt64(int(0...5000))
        }
    }

    mutating func i64Varied() -> Int64 {
        switch int(0...9) {
        case 0: return pick([Int64.min, Int64.max, 0, -1, 1_700_000_000_000])
        case 1: return Int64(bitPattern: u64())
        default: return Int64(int(-1_000_000...1_800_000_000_000))
        }
    }

    mutating func replica() -> ReplicaID {
        chance(0.3) ? ReplicaID(UInt64(int(1...300))) : ReplicaID(u64() | 1)
    }

    mutating func opID(from replicas: [ReplicaID]) -> OpID {
        OpID(replica: pick(replicas), counter: chance(0.1) ? u64() | 1 : UInt64(int(1...400)))
    }

    mutating func opRef(from replicas: [ReplicaID]) -> OpRef {
        OpRef(id: opID(from: replicas), lamport: chance(0.1) ? u64Varied() : UInt64(int(0...400)))
    }

    mutating func refs(from replicas: [ReplicaID], max: Int) -> [OpRef] {
        var out = Set<OpRef>()
        for _ in 0..<int(0...max) { out.insert(opRef(from: replicas)) }
        return out.sorted()
    }

    mutating func clock(from replicas: [ReplicaID]) -> VectorClock {
        var pairs: [(ReplicaID, UInt64)] = []
        for r in replicas where chance(0.7) { pairs.append((r, chance(0.1) ? u64() | 1 : UInt64(int(1...500)))) }
        return VectorClock(pairs)
    }

    mutating func zKey(tags: [ReplicaID] = [ReplicaID(1)]) -> ZKey {
        let layer: Int64 = chance(0.1) ? pick([Int64.min, Int64.max, -1, 0]) : Int64(int(0...12))
        func fraction(nonEmpty: Bool) -> [UInt8] {
            var fraction: [UInt8] = []
            if nonEmpty || chance(0.5) {
                for _ in 0..<int(1...(chance(0.05) ? 300 : 4)) { fraction.append(UInt8(int(0...255))) }
                if fraction.last == 0 { fraction[fraction.count - 1] = UInt8(int(1...255)) }
            }
            return fraction
        }
        let depth = chance(0.8) ? 0 : int(1...(chance(0.1) ? ZKey.maxDepth : 3))
        let path = (0..<depth).map { i in ZKey.Step(fraction: fraction(nonEmpty: i > 0), tag: opID(from: tags)) }
        return ZKey(layer: layer, path: path, fraction: fraction(nonEmpty: depth > 0))
    }

    mutating func transform() -> Transform {
        switch int(0...3) {
        case 0: return .identity
        case 1: return .translation(int32(), int32())
        default: return Transform(a: int32(), b: int32(), c: int32(), d: int32(), tx: int32(), ty: int32())
        }
    }

    mutating func point() -> StrokePoint {
        StrokePoint(x: int32(), y: int32(), pressure: UInt16(int(0...1000)), radius: int32(), t: uint32())
    }

    /// Points: realistic handwriting, random walks, or adversarial extremes.
    mutating func points() -> [StrokePoint] {
        switch int(0...5) {
        case 0:
            return (0..<int(0...3)).map { _ in point() }
        case 1:
            return (0..<int(1...60)).map { _ in point() }
        case 2:
            let n = int(2...80)
            var p = point()
            var out: [StrokePoint] = []
            for _ in 0..<n {
                out.append(p)
                p.x = p.x &+ Int32(int(-30...30)); p.y = p.y &+ Int32(int(-30...30))
                p.pressure = UInt16(int(0...1000)); p.radius = p.radius &+ Int32(int(-2...2))
                p.t = p.t &+ UInt32(int(0...9))
            }
            return out
        default:
            var g = HandwritingGenerator(seed: u64())
            var s = g.nextStroke().points
            if s.count > 120 { s.removeLast(s.count - 120) }
            return s
        }
    }

    mutating func content() -> ElementContent {
        if chance(0.75) {
            let style = InkStyle(tool: pick(ToolKind.allCases), color: RGBA(packed: UInt32(truncatingIfNeeded: u64())),
                                 width: int32())
            return .stroke(Stroke(style: style, points: points()))
        }
        var digest: [UInt8] = []
        for _ in 0..<32 { digest.append(UInt8(int(0...255))) }
        return .image(ImageElement(asset: AssetID(digest: digest)!,
                                   frame: QRect(x: int32(), y: int32(), width: int32(), height: int32()),
                                   rotation: int32()))
    }

    /// Content within [LOG-23]'s bounds (what an operation can carry, so what a snapshot
    /// holds, [SNAP-19]): `content()` with every value pulled into range, extremes kept at
    /// the limits.
    mutating func boundedContent() -> ElementContent {
        let l = Int32(ContentBounds.coordinateLimit), rMax = ContentBounds.maxRadius
        func c(_ v: Int32) -> Int32 { min(max(v, -l), l) }
        func positive(_ v: Int32, _ top: Int32) -> Int32 { v == .min ? top : min(max(abs(v), 1), top) }
        switch content() {
        case .stroke(var s):
            if s.points.isEmpty { s.points = [point()] }
            let times = s.points.map { $0.t % (ContentBounds.maxStrokeDuration + 1) }.sorted()
            for i in s.points.indices {
                s.points[i].x = c(s.points[i].x); s.points[i].y = c(s.points[i].y)
                s.points[i].radius = min(max(s.points[i].radius, 0), rMax)
                s.points[i].t = times[i] - times[0]
            }
            s.style.width = positive(s.style.width, rMax)
            return .stroke(s)
        case .image(var img):
            img.frame = QRect(x: c(img.frame.x), y: c(img.frame.y), width: positive(img.frame.width, l), height: positive(img.frame.height, l))
            img.rotation = img.rotation % (ContentBounds.maxRotation + 1)
            return .image(img)
        }
    }

    /// A transform within [LOG-23]'s bounds.
    mutating func boundedTransform() -> Transform {
        let l = Int32(ContentBounds.coordinateLimit), m = ContentBounds.maxMatrixCoefficient
        var t = transform()
        func c(_ v: Int32, _ lim: Int32) -> Int32 { min(max(v, -lim), lim) }
        t.tx = c(t.tx, l); t.ty = c(t.ty, l)
        t.a = c(t.a, m); t.b = c(t.b, m); t.c = c(t.c, m); t.d = c(t.d, m)
        return t
    }

    mutating func erased(pointCount: Int) -> [PointRange] {
        guard chance(0.4) else { return [] }
        var ranges: [PointRange] = []
        let bound = UInt32(chance(0.1) ? Int(UInt32.max) : max(pointCount, 1) + 5)
        for _ in 0..<int(1...5) {
            let a = UInt32(truncatingIfNeeded: u64() % UInt64(bound))
            let b = UInt32(truncatingIfNeeded: u64() % UInt64(bound))
            ranges.append(PointRange(min(a, b), max(a, b)))
        }
        return ranges.normalizedUnion()
    }

    /// A page state satisfying every snapshot invariant.
    mutating func pageState(maxElements: Int = 8, maxTombstones: Int = 4) -> PageState {
        var uuid: [UInt8] = []
        for _ in 0..<16 { uuid.append(UInt8(int(0...255))) }
        let replicas = (0..<int(1...4)).map { _ in replica() }
        // At most 2^62 operations and a max lamport at most 2^62 ([SNAP-19]).
        let pageClock = VectorClock(clock(from: replicas).entries.map { ($0.replica, $0.counter & (1 << 59 - 1) | 1) })
        var state = PageState(page: PageID(UUID(bytes: uuid)!), clock: pageClock,
                              maxLamport: min(u64Varied(), VectorClock.maxTotal), modified: i64Varied())
        var ids = Set<OpID>()
        // A small pool of z keys and setter refs, so that ties happen.
        let zPool = (0..<3).map { _ in zKey(tags: replicas) }
        let refPool = (0..<3).map { _ in opRef(from: replicas) }
        for _ in 0..<int(0...maxElements) {
            let id = opID(from: replicas)
            guard ids.insert(id).inserted else { continue }
            let c = boundedContent()
            var zFrontier = refs(from: replicas, max: 2)
            if chance(0.3) { zFrontier = [pick(refPool)] }
            let e = ElementRecord(
                id: id, lamport: chance(0.5) ? pick(refPool).lamport : u64Varied(), wallTime: i64Varied(), content: c,
                transform: LWWRegister(boundedTransform(), frontier: refs(from: replicas, max: 3)),
                z: LWWRegister(chance(0.5) ? pick(zPool) : zKey(tags: replicas), frontier: zFrontier),
                erased: erased(pointCount: c.pointCount),
                frontier: refs(from: replicas, max: 3))
            state.elements.append(e)
        }
        state.elements.sort(by: ElementRecord.canonicalLess)
        for _ in 0..<int(0...maxTombstones) {
            let id = opID(from: replicas)
            guard ids.insert(id).inserted else { continue }
            var erasureRefs = Set<OpRef>()
            for _ in 0..<int(1...3) { erasureRefs.insert(opRef(from: replicas)) }
            let erasures = erasureRefs.sorted().map { Erasure(ref: $0, clock: clock(from: replicas)) }
            state.tombstones.append(Tombstone(id: id, erasures: erasures, frontier: refs(from: replicas, max: 3)))
        }
        state.tombstones.sort { $0.id < $1.id }
        // One context per replica of the clock: the clock of its latest operation (within the
        // page clock, naming that operation), and Lamport runs from counter 1.
        for e in state.clock.entries {
            var pairs: [(ReplicaID, UInt64)] = []
            for other in state.clock.entries where other.replica != e.replica && chance(0.6) {
                pairs.append((other.replica, UInt64(int(1...Int(min(other.counter, 1_000_000))))))
            }
            pairs.append((e.replica, e.counter))
            // Running maxima: `counter + offset` never overflows and never decreases (a run's
            // offset is at least the previous one's minus 1); the page's max lamport is at
            // least every value.
            let room = VectorClock.maxTotal - e.counter
            var runs = [LamportRun(from: 1, offset: min(u64Varied(), room))]
            while chance(0.4), runs.last!.from < e.counter {
                let last = runs.last!
                let from = last.from + 1 + UInt64(int(0...Int(min(e.counter - last.from - 1, 1000))))
                let step = u64Varied() % (1 << 40)
                var offset = last.offset > 0 && chance(0.3) ? last.offset - 1 : (room - last.offset < step ? room : last.offset + step)
                if offset == last.offset { guard offset < room else { break }; offset += 1 }
                runs.append(LamportRun(from: from, offset: offset))
            }
            state.maxLamport = max(state.maxLamport, e.counter + runs.last!.offset,
                                   runs.dropFirst().map { $0.from - 1 }.enumerated().map { $1 + runs[$0].offset }.max() ?? 0)
            state.contexts.append(ReplicaContext(replica: e.replica, clock: VectorClock(pairs), lamports: runs))
        }
        return state
    }

    /// The same state with every set listed in a shuffled order and erased ranges split
    /// into overlapping pieces: not canonical, but equal in meaning.
    mutating func scrambled(_ s: PageState) -> PageState {
        var out = s
        out.elements = shuffled(out.elements)
        for i in out.elements.indices {
            out.elements[i].transform.frontier = shuffled(out.elements[i].transform.frontier)
            out.elements[i].z.frontier = shuffled(out.elements[i].z.frontier)
            out.elements[i].frontier = shuffled(out.elements[i].frontier)
            if let dup = out.elements[i].frontier.first, chance(0.5) { out.elements[i].frontier.append(dup) }
            var pieces: [PointRange] = []
            for r in out.elements[i].erased {
                if r.count >= 2 {
                    let mid = r.from + UInt32(r.count / 2)
                    pieces.append(PointRange(r.from, mid + 1 > r.to ? r.to : mid + 1))
                    pieces.append(PointRange(mid, r.to))
                } else {
                    pieces.append(r)
                }
                if chance(0.3) { pieces.append(PointRange(r.from, r.from)) }
            }
            out.elements[i].erased = shuffled(pieces)
        }
        out.tombstones = shuffled(out.tombstones)
        for i in out.tombstones.indices {
            out.tombstones[i].erasures = shuffled(out.tombstones[i].erasures)
            out.tombstones[i].frontier = shuffled(out.tombstones[i].frontier)
        }
        out.contexts = shuffled(out.contexts)
        // Rebuild the clocks from pairs in another order.
        out.clock = VectorClock(shuffled(out.clock.entries.map { ($0.replica, $0.counter) }))
        return out
    }

    mutating func shuffled<T>(_ a: [T]) -> [T] {
        var a = a
        if a.count < 2 { return a }
        for i in stride(from: a.count - 1, to: 0, by: -1) {
            let j = Int(rng.below(UInt64(i + 1)))
            a.swapAt(i, j)
        }
        return a
    }
}
