import Foundation
import Testing
import LnoteModel
import LnoteReplication
@testable import LnoteStore

/// [LOG-28] at the store level with several replicas' plain adds in the tail, an
/// erase of a plain-added element, a waiting operation at snapshot time (so the tail starts
/// with frames the snapshot covers), and the page edited after a listing open: every file
/// and state equal to an eager open doing the same.
@Suite("A listed page's tail of plain adds, then edits: equal to an eager open", .serialized)
struct PlainTailStoreTests {
    static func build(_ dir: TempDir, seed: UInt64, tailSteps: Int, pendingAtSnapshot: Bool)
        async throws -> (DocumentID, PageID, PackagePaths, [Op]) {
        var g = SeededRNG(seed: seed)
        let nb = try await openNotebook(dir.path)
        let d = try await nb.createDocument(title: "plain tail \(seed)")
        let p = await d.pageList[0].id
        let strokes = DeferredPointsStoreTests.penStrokes(800, seed: seed)
        var k = 0
        func next() -> Stroke { defer { k += 1 }; return strokes[k % strokes.count] }
        var b = PageReplica(page: p), c = PageReplica(page: p), e = PageReplica(page: p)
        let rb = ReplicaID(0xB000 + seed), rc = ReplicaID(0xC000 + seed), re = ReplicaID(0xE000 + seed)
        var withheld: [Op] = []
        _ = try await d.addStrokes((0..<Int.random(in: 1...10, using: &g)).map { _ in next() }, to: p)
        if pendingAtSnapshot {
            let c1 = try c.add(.stroke(next()), by: rc, wallTime: 5)
            let c2 = try c.add(.stroke(next()), by: rc, wallTime: 6)
            withheld.append(c1)
            _ = try await d.receive([c2], page: p)
            _ = try await d.addStrokes((0..<5).map { _ in next() }, to: p)
        }
        try await d.flush()
        let older = fileBytes(d.paths.content(p))!
        for step in 0..<tailSteps {
            let ids = try await d.elementIDs(p)
            let roll = Int.random(in: 0..<100, using: &g)
            switch roll {
            case 0..<35:
                _ = try await d.addStrokes((0..<Int.random(in: 1...3, using: &g)).map { _ in next() }, to: p)
            case 35..<55:
                // B never sees anything: its adds are plain.
                let op = try b.add(.stroke(next()), by: rb, wallTime: 1_700_000_000_100 + Int64(step))
                _ = try await d.receive([op], page: p)
            case 55..<62 where !pendingAtSnapshot:
                let op = try c.add(.stroke(next()), by: rc, wallTime: 1_700_000_000_200 + Int64(step))
                _ = try await d.receive([op], page: p)
            case 62..<75 where !ids.isEmpty:
                try await d.erase([ids[Int.random(in: 0..<ids.count, using: &g)]], on: p)
            case 75..<82 where !ids.isEmpty:
                let t = ids[Int.random(in: 0..<ids.count, using: &g)]
                if let el = try await d.element(t, on: p), el.content.pointCount > 2 {
                    try await d.eraseRange(t, [PointRange(1, 2)], on: p)
                }
            case 82..<88 where !ids.isEmpty:
                try await d.move([ids[Int.random(in: 0..<ids.count, using: &g)]], dx: 2, dy: 3, on: p)
            default:
                // E sees everything, then adds (not plain) or erases B's element.
                _ = try e.receive(try await d.operations(page: p, notCoveredBy: e.clock).map {
                    try DeferredPointsStoreTests.resolvedOp($0)
                })
                let op = try e.add(.stroke(next()), by: re, wallTime: 1_700_000_000_300 + Int64(step))
                _ = try await d.receive([op], page: p)
            }
        }
        let paths = d.paths, id = d.id
        try await nb.close()
        try writeFile(paths.content(p), older)
        return (id, p, paths, withheld)
    }

    struct Seen: Equatable {
        var listedIDs: [ElementID]
        var stateAtOpen: PageState
        var conflictsAtOpen: [Conflict]
        var stateAfter: PageState
        var conflictsAfter: [Conflict]
        var ops: [String]
        var content: [UInt8]?
        var log: [UInt8]?
        var undecodable: [String]
    }

    static func openAndEdit(_ dir: TempDir, _ doc: DocumentID, _ p: PageID, paths: PackagePaths, listing: Bool,
                            withheld: [Op], seed: UInt64) async throws -> Seen {
        let nb = try await openNotebook(dir.path)
        let d = try await nb.openDocument(doc)
        let ids = listing ? try await d.elementIDs(p) : try await d.pageState(p).elements.map(\.id)
        // Edit first, before anything else resolves (an edit resolves the listed page).
        var g = SeededRNG(seed: seed ^ 0x66)
        let strokes = DeferredPointsStoreTests.penStrokes(4, seed: seed ^ 0x99)
        _ = try await d.addStrokes(Array(strokes.prefix(2)), to: p)
        let stateAtOpen = try await d.pageState(p)
        let conflictsAtOpen = try await d.conflicts(page: p)
        let live = try await d.elementIDs(p)
        try await d.erase([live[Int.random(in: 0..<live.count, using: &g)]], on: p)
        let live2 = try await d.elementIDs(p)
        try await d.move([live2[Int.random(in: 0..<live2.count, using: &g)]], dx: -1, dy: 1, on: p)
        if !withheld.isEmpty { _ = try await d.receive(withheld, page: p) }
        // A foreign replica that saw nothing, now (plain, concurrent).
        var f = PageReplica(page: p)
        let op = try f.add(.stroke(strokes[3]), by: ReplicaID(0xF000 + seed), wallTime: 9)
        _ = try await d.receive([op], page: p)
        let stateAfter = try await d.pageState(p)
        let conflictsAfter = try await d.conflicts(page: p)
        let ops = try await d.operations(page: p, notCoveredBy: VectorClock()).map { "\($0.id) \($0.lamport) \($0.context)" }
        let undecodable = await d.recoveryReports.flatMap(\.undecodable).map { "\($0)" }
        try await nb.close()
        return Seen(listedIDs: ids, stateAtOpen: stateAtOpen, conflictsAtOpen: conflictsAtOpen, stateAfter: stateAfter,
                    conflictsAfter: conflictsAfter, ops: ops, content: fileBytes(paths.content(p)),
                    log: fileBytes(paths.log(p)), undecodable: undecodable)
    }

    @Test("[LOG-28] 24 seeds: a page opened listed then edited, and opened eagerly then edited the same way, give equal ids, states, conflicts, operations, log and snapshot bytes; the shortcut ran")
    func listedEditedEqualsEager() async throws {
        var seedsWithShortcut = 0
        for seed in UInt64(1)...24 {
            let dir = try TempDir("plain-tail")
            defer { dir.remove() }
            let pending = seed % 3 == 0
            let tail = seed % 2 == 0 ? 12 : 50
            let (doc, p, paths, withheld) = try await Self.build(dir, seed: seed, tailSteps: tail, pendingAtSnapshot: pending)
            let content = fileBytes(paths.content(p))!, log = fileBytes(paths.log(p))!
            let before = Document.listingOpenStats.withLock { $0 }
            let listed = try await Self.openAndEdit(dir, doc, p, paths: paths, listing: true, withheld: withheld, seed: seed)
            let after = Document.listingOpenStats.withLock { $0 }
            try writeFile(paths.content(p), content)
            try writeFile(paths.log(p), log)
            let eager = try await Self.openAndEdit(dir, doc, p, paths: paths, listing: false, withheld: withheld, seed: seed)
            if after.direct > before.direct { seedsWithShortcut += 1 }
            #expect(listed.listedIDs == eager.listedIDs, "seed \(seed)")
            #expect(listed.stateAtOpen == eager.stateAtOpen, "seed \(seed)")
            #expect(listed.conflictsAtOpen == eager.conflictsAtOpen, "seed \(seed)")
            #expect(listed.stateAfter == eager.stateAfter, "seed \(seed)")
            #expect(listed.conflictsAfter == eager.conflictsAfter, "seed \(seed)")
            #expect(listed.ops == eager.ops, "seed \(seed)")
            #expect(listed.log == eager.log, "seed \(seed): log bytes")
            #expect(listed.content == eager.content, "seed \(seed): content bytes")
            #expect(listed.undecodable == eager.undecodable, "seed \(seed)")
        }
        // The comparison proves something only where the shortcut ran.
        #expect(seedsWithShortcut >= 8, "the listing open applied plain adds from their bytes in \(seedsWithShortcut) of 24 seeds")
    }
}
