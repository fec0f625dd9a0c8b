import Foundation
import Testing
@testable import LnoteModel
@testable import LnoteReplication

/// Range restores kept beside the partial erases ([MERGE-71], page-snapshot.md [SNAP-44]):
/// the same state as subtracting each restore from every partial erase it had seen, with a
/// history that grows with the operations' bytes instead of their product.
@Suite("Range restores kept beside the partial erases")
struct RangeRestoreHistoryTests {
    typealias M = MergeRuleTests
    static let a = M.a, b = M.b, c = M.c

    /// [MERGE-71] in its words, as lnote applied it before: each partial erase keeps its ranges
    /// less those of every range restore whose context covers it. `ops` in a causal order.
    static func perErase(_ ops: [Op], stroke id: ElementID, points n: UInt32) -> [RangeErasure] {
        var kept: [RangeErasure] = []
        for op in ops.sorted(by: { $0.ref < $1.ref }) {
            switch op.body {
            case .eraseRange(let e, let ranges) where e == id:
                let clamped = ranges.map { PointRange(min($0.from, n), min($0.to, n)) }.normalizedUnion()
                if !clamped.isEmpty { kept.append(RangeErasure(ref: op.ref, ranges: clamped)) }
            case .restoreRange(let e, let ranges) where e == id:
                let cut = ranges.normalizedUnion()
                for i in kept.indices where op.context.covers(kept[i].ref.id) { kept[i].ranges = kept[i].ranges.subtracting(cut) }
                kept.removeAll { $0.ranges.isEmpty }
            default: break
            }
        }
        return kept.sorted { $0.ref < $1.ref }
    }

    /// Three replicas partially erasing and restoring one stroke, exchanging with each other
    /// at random (so restores see some partial erases and not others).
    static func history(seed: UInt64, points n: Int, steps: Int) throws -> (M.Page, ElementID) {
        var rng = SplitMix64(seed: seed)
        var p = M.Page()
        let s = try p.add(a, M.stroke(n))
        try p.syncAll()
        let who = [a, b, c]
        for _ in 0..<steps {
            let w = who.randomElement(using: &rng)!
            switch Int.random(in: 0..<10, using: &rng) {
            case 0..<4:
                let f = UInt32.random(in: 0..<UInt32(n), using: &rng)
                let ranges = [PointRange(f, min(UInt32(n), f + UInt32.random(in: 1...8, using: &rng)))]
                try p.make(w, .eraseRange(s.id, ranges + (Bool.random(using: &rng) ? [PointRange(0, 1)] : [])))
            case 4..<7:
                let f = UInt32.random(in: 0..<UInt32(n), using: &rng)
                let g = UInt32.random(in: 0..<UInt32(n), using: &rng)
                try p.make(w, .restoreRange(s.id, [PointRange(f, min(UInt32(n), f + UInt32.random(in: 1...10, using: &rng))),
                                                   PointRange(g, min(UInt32(n), g + 1))]))
            default:
                try p.send(w, who.filter { $0 != w }.randomElement(using: &rng)!)
            }
        }
        try p.syncAll()
        return (p, s.id)
    }

    @Test("[MERGE-71] random partial erases and range restores of three replicas leave what subtracting each restore from the erases it had seen leaves, in every delivery order")
    func sameAsPerErase() throws {
        let first = UInt64(ProcessInfo.processInfo.environment["LNOTE_SEED"] ?? "") ?? 0x7100
        var restoresKept = 0, partlyTakenBack = 0
        for seed in first..<(first + 60) {
            let n = 5 + Int(seed % 30)
            let (p, id) = try Self.history(seed: seed, points: n, steps: 30)
            let ops = RestoreRuleTests.all(p)
            let expected = Self.perErase(ops, stroke: id, points: UInt32(n))
            let union = PointRange.union(of: expected.map(\.ranges))
            for who in [Self.a, Self.b, Self.c] {
                let e = try #require(p.r[who]!.element(id))
                #expect(e.keptRangeErasures == expected, "seed \(seed), replica \(who) — rerun with LNOTE_SEED=\(seed)")
                #expect(e.erased == union, "seed \(seed), replica \(who) — rerun with LNOTE_SEED=\(seed)")
                #expect(p.r[who]!.state == p.r[Self.a]!.state, "seed \(seed): replicas differ")
            }
            let e = p.r[Self.a]!.element(id)!
            restoresKept += e.rangeRestores.count
            if e.rangeErasures.contains(where: { x in !expected.contains(x) }) { partlyTakenBack += 1 }
            // The state survives its snapshot, and so does one written the old way.
            let state = p.r[Self.a]!.state
            let bytes = PageSnapshot.encode(state, coveredLogOffset: 0, logIncarnation: 0)
            #expect(try PageSnapshot.decode(bytes).state == state, "seed \(seed)")
            // Every order of delivery gives the same state.
            _ = try RestoreRuleTests.everyOrder(ops, expected: state, seed: seed, count: 6)
        }
        #expect(restoresKept > 100 && partlyTakenBack > 20, "the histories restored: \(restoresKept) kept, \(partlyTakenBack) strokes partly taken back")
    }

    @Test("[MERGE-71] [SNAP-44] a page written before restores were kept (each erase's remainder, no restores) is the same state, and stays so under later operations")
    func writtenTheOldWay() throws {
        let first = UInt64(ProcessInfo.processInfo.environment["LNOTE_SEED"] ?? "") ?? 0x7200
        var compared = 0
        for seed in first..<(first + 40) {
            let n = 8 + Int(seed % 20)
            var (p, id) = try Self.history(seed: seed, points: n, steps: 24)
            let now = p.r[Self.a]!.state
            guard now.elements.contains(where: { !$0.rangeRestores.isEmpty }) else { continue }
            compared += 1
            // As lnote wrote it before [SNAP-44]: what of each erase is left, no restores.
            var old = now
            for i in old.elements.indices {
                old.elements[i].rangeErasures = old.elements[i].keptRangeErasures
                old.elements[i].rangeRestores = []
            }
            let oldBytes = PageSnapshot.encode(old, coveredLogOffset: 0, logIncarnation: 0)
            #expect(!RestoreRuleTests.sectionTags(oldBytes).contains(PageSnapshot.Section.rangeRestores.rawValue))
            let read = try PageSnapshot.decode(oldBytes).state
            #expect(read != now && PageSnapshot.sameState(now, as: read) && PageSnapshot.sameState(now, as: read, anyForm: true), "seed \(seed)")
            #expect(read.canonicalJSON() == now.canonicalJSON(), "seed \(seed)")
            // Both carry on alike: more erases and restores, by all three.
            var upgraded = PageReplica(state: read)
            let before = p.r[Self.a]!.clock
            var rng = SplitMix64(seed: seed ^ 0xFFFF)
            for _ in 0..<8 {
                let w = [Self.a, Self.b, Self.c].randomElement(using: &rng)!
                let f = UInt32.random(in: 0..<UInt32(n), using: &rng)
                let body: Op.Body = Bool.random(using: &rng)
                    ? .eraseRange(id, [PointRange(f, min(UInt32(n), f + 3))]) : .restoreRange(id, [PointRange(0, min(UInt32(n), f + 2))])
                try p.make(w, body)
                try p.syncAll()
            }
            try upgraded.receive(RestoreRuleTests.all(p).filter { !before.covers($0.id) })
            let fresh = p.r[Self.a]!.state
            // Read the old way, then edited: both forms in one page, the same state by what each
            // erase keeps (a page this replica wrote itself).
            #expect(PageSnapshot.sameState(fresh, as: upgraded.state, anyForm: true), "seed \(seed)")
            #expect(upgraded.element(id)?.erased == fresh.elements.first { $0.id == id }?.erased, "seed \(seed)")
            #expect(upgraded.state.canonicalJSON() == fresh.canonicalJSON(), "seed \(seed)")
            // A different history is not the same state.
            var other = read
            if let i = other.elements.firstIndex(where: { $0.rangeErasures.count > 0 }) {
                other.elements[i].rangeErasures[0].ranges = [PointRange(0, UInt32(n))]
                #expect(!PageSnapshot.sameState(now, as: other) && !PageSnapshot.sameState(now, as: other, anyForm: true), "seed \(seed)")
            }
        }
        #expect(compared >= 10, "pages with restores compared: \(compared)")
    }

    @Test("[MERGE-71] K partial erases of a whole stroke and one restore of m gaps keep K + m ranges, not K · (m + 1)")
    func historyGrowsWithTheOperations() throws {
        let n = 20_001, k = 120, m = 5_000
        for replicas in [1, k] {
            // k erases of the whole stroke, by one replica or by k of them.
            var r = PageReplica(page: M.page)
            let add = try r.add(M.stroke(n), by: Self.a, wallTime: 1)
            for i in 0..<k {
                let who = ReplicaID(UInt64(0x100 + (replicas == 1 ? 0 : i)))
                _ = try r.make(.eraseRange(add.id, [PointRange(0, UInt32(n))]), by: who, wallTime: 2)
            }
            let gaps: [PointRange] = (0..<UInt32(m)).map { (i: UInt32) -> PointRange in PointRange(2 * i + 1, 2 * i + 2) }
            _ = try r.make(.restoreRange(add.id, gaps), by: Self.b, wallTime: 3)
            let e = try #require(r.element(add.id))
            let held = e.rangeErasures.reduce(0) { $0 + $1.ranges.count } + e.rangeRestores.reduce(0) { $0 + $1.ranges.count + $1.seen.count }
            #expect(held <= k + m + replicas, "\(held) ranges and names kept (\(replicas) replicas)")
            #expect(e.erased == [PointRange(0, UInt32(n))].subtracting(gaps))
            let bytes = PageSnapshot.encode(r.state, coveredLogOffset: 0, logIncarnation: 0)
            #expect(bytes.count < 40 * (k + m) + 20 * n, "\(bytes.count) snapshot bytes")
            #expect(try PageSnapshot.decode(bytes).state == r.state)
            // What each erase keeps is still there to ask for: m + 1 ranges each.
            #expect(e.keptRangeErasures.first?.ranges.count == m + 1)
        }
    }
}
