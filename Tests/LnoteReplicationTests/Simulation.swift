import Foundation
import LnoteModel
@testable import LnoteReplication

/// The seeded generator the model ships (SplitMix64): one definition for every test.
typealias SeededRNG = SplitMix64

/// Replicas of one document and its pages, exchanging operations by hand, as the store and
/// sync do: each replica keeps every operation it holds in arrival order (its logs), and at
/// random moments is reloaded from its snapshots (what compaction and a restart do).
struct Simulation {
    struct Replica {
        var id: ReplicaID
        var doc: DocumentReplica
        var pages: [PageID: PageReplica] = [:]
        /// Every operation this replica holds (made or received), in arrival order: its logs.
        var docLog: [Op] = []
        var pageLogs: [PageID: [Op]] = [:]
        /// A replica that has not joined yet holds nothing and makes nothing.
        var joined = false
        /// It receives from the first step it joined, but writes only from this step on.
        var silentUntil = 0

        func page(_ p: PageID) -> PageReplica { pages[p] ?? PageReplica(page: p) }
        var pageIDs: [PageID] { pageLogs.keys.sorted() }
    }

    var replicas: [Replica]
    var rng: SeededRNG
    var made = 0
    var step = 0
    var wall: Int64 = 1_700_000_000_000
    let docID = DocumentID(UUID(uuidString: "00000000-0000-0000-0000-0000000000DD")!)
    /// Every add above / below, to front or to back, checked where its author asked ([MERGE-10], [MERGE-15]).
    var placementFailures: [String] = []
    /// Hostile replicas take part: an honest edit may then be refused because of what they
    /// wrote (a stroke moved to the edge of the coordinate range cannot move further).
    var hostile = false
    /// Page edits lean towards erases, partial erases, restores and range restores
    /// ([MERGE-70], [MERGE-71]) rather than moves and reorders.
    var restoreBias = false
    /// Local restores made (each brings back every element it names, [MERGE-70]) and local
    /// range restores that took back some erased point ([MERGE-71]): so that a property run
    /// can tell it exercised them.
    var restoresMade = 0
    var restoreRangesThatTookBack = 0

    /// - Parameters:
    ///   - lateJoiners: how many of the replicas (the last ones) join only when first
    ///     delivered to; the others hold the document from the start.
    init(replicaCount: Int, seed: UInt64, lateJoiners: Int = 0, silentUntil: [Int] = []) {
        rng = SeededRNG(seed: seed)
        replicas = (1...replicaCount).map { i in
            Replica(id: ReplicaID(UInt64(i)), doc: DocumentReplica(id: DocumentID(UUID(uuidString: "00000000-0000-0000-0000-0000000000DD")!)))
        }
        for i in replicas.indices where i < silentUntil.count { replicas[i].silentUntil = silentUntil[i] }
        // Replica 0 creates the document with two pages; the early replicas receive it.
        try! makeDoc(at: 0, .createDocument(title: "sim"))
        for _ in 0..<2 { try! makeDoc(at: 0, .addPage(PageID(newPageUUID(0)), position: replicas[0].doc.endPosition, canvas: .a4)) }
        replicas[0].joined = true
        for i in 1..<replicas.count where i < replicaCount - lateJoiners {
            try! deliver(from: 0, to: i, order: .inOrder, duplicate: false, only: nil)
        }
    }

    mutating func newPageUUID(_ i: Int) -> UUID {
        UUID(uuid: (UInt8(i), 0, 0, 0, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0,
                    UInt8.random(in: 0...255, using: &rng), UInt8.random(in: 0...255, using: &rng)))
    }

    private mutating func makeDoc(at i: Int, _ body: Op.Body) throws {
        wall += 1
        let op = try replicas[i].doc.make(body, by: replicas[i].id, wallTime: wall)
        replicas[i].docLog.append(op)
        made += 1
    }

    func canWrite(_ i: Int) -> Bool { replicas[i].joined && step >= replicas[i].silentUntil }

    mutating func randomStroke() -> Stroke {
        let n = Int.random(in: 1...12, using: &rng)
        var x = Int32.random(in: 0...5000, using: &rng), y = Int32.random(in: 0...5000, using: &rng)
        var pts: [StrokePoint] = []
        for i in 0..<n {
            x += Int32.random(in: -30...30, using: &rng)
            y += Int32.random(in: -30...30, using: &rng)
            pts.append(StrokePoint(x: x, y: y, pressure: UInt16.random(in: 0...1000, using: &rng),
                                   radius: Int32.random(in: 1...40, using: &rng), t: UInt32(i * 4)))
        }
        return Stroke(style: InkStyle(tool: ToolKind.allCases.randomElement(using: &rng)!, color: .black, width: 20), points: pts)
    }

    /// One random local page edit at replica `i` (all kinds), on one of its live pages; a
    /// document edit when it has none.
    mutating func localPageEdit(at i: Int) throws {
        do {
            try honestPageEdit(at: i)
        } catch let e as LnoteError where hostile && e.code == .invalidArgument {
            return
        }
    }

    private mutating func honestPageEdit(at i: Int) throws {
        guard canWrite(i) else { return }
        let live = replicas[i].doc.livePages.map(\.id)
        guard let p = live.randomElement(using: &rng) else { return try localDocEdit(at: i) }
        wall += 1
        let me = replicas[i].id
        var page = replicas[i].page(p)
        let ids = page.elements.map(\.id)
        // Elements this replica sees erased and whose content it holds: what it may restore ([MERGE-70]).
        let restorable = page.state.tombstones.filter { $0.isErased && $0.record != nil }.map(\.id)
        // 0-2 add, 3 erase, 4 eraseRange, 5-6 move, 7 bring to front, 8 send to back,
        // 9 restore, 10 restoreRange.
        let kinds = restoreBias ? [0, 0, 1, 2, 3, 3, 3, 4, 4, 4, 5, 6, 7, 8, 9, 9, 9, 9, 9, 9, 10, 10, 10] : Array(0...10)
        var kind = ids.isEmpty ? (restorable.isEmpty || Bool.random(using: &rng) ? 0 : 9) : kinds.randomElement(using: &rng)!
        if kind == 9 && restorable.isEmpty { kind = 0 }
        let op: Op
        func position(_ id: ElementID, in r: PageReplica) -> Int { r.elements.firstIndex { $0.id == id }! }
        switch kind {
        case 0, 1, 2:
            let pos = ids.isEmpty ? 0 : Int.random(in: 0...2, using: &rng)
            switch pos {
            case 1:
                let x = ids.randomElement(using: &rng)!
                do {
                    op = try page.add(.stroke(randomStroke()), by: me, wallTime: wall, above: x)
                } catch let e as LnoteError where e.code == .limitExceeded {
                    return  // a hostile neighbour 32 steps deep ([MERGE-13])
                }
                if position(op.id, in: page) != position(x, in: page) + 1 {
                    placementFailures.append("\(op.id) added above \(x) did not land just above it")
                }
            case 2:
                let x = ids.randomElement(using: &rng)!
                do {
                    op = try page.add(.stroke(randomStroke()), by: me, wallTime: wall, below: x)
                } catch let e as LnoteError where e.code == .limitExceeded {
                    return  // a hostile neighbour 32 steps deep ([MERGE-13])
                }
                if position(op.id, in: page) + 1 != position(x, in: page) {
                    placementFailures.append("\(op.id) added below \(x) did not land just below it")
                }
            default:
                op = try page.add(.stroke(randomStroke()), by: me, wallTime: wall)
                if page.elements.last?.id != op.id { placementFailures.append("\(op.id) added on top is not on top") }
            }
        case 3:
            let erased = Set((0..<Int.random(in: 1...2, using: &rng)).map { _ in ids.randomElement(using: &rng)! }).sorted()
            op = try page.make(.erase(erased), by: me, wallTime: wall)
        case 4:
            let id = ids.randomElement(using: &rng)!
            let n = page.element(id)!.content.pointCount
            let from = UInt32.random(in: 0..<UInt32(n), using: &rng)
            let to = UInt32.random(in: (from + 1)...UInt32(n), using: &rng)
            op = try page.make(.eraseRange(id, [PointRange(from, to)]), by: me, wallTime: wall)
        case 5, 6:
            let moved = Set((0..<Int.random(in: 1...3, using: &rng)).map { _ in ids.randomElement(using: &rng)! }).sorted()
            op = try page.move(moved, dx: Int32.random(in: -100...100, using: &rng), dy: Int32.random(in: -100...100, using: &rng),
                               by: me, wallTime: wall)
        case 7:
            let chosen = Set((0..<Int.random(in: 1...2, using: &rng)).map { _ in ids.randomElement(using: &rng)! })
            let before = page.elements.map(\.id).filter { chosen.contains($0) }
            op = try page.bringToFront(Array(chosen), by: me, wallTime: wall)
            if Array(page.elements.map(\.id).suffix(before.count)) != before {
                placementFailures.append("\(op.id) brought \(before) to front, top is \(page.elements.suffix(before.count).map(\.id))")
            }
        case 8:
            let chosen = Set((0..<Int.random(in: 1...2, using: &rng)).map { _ in ids.randomElement(using: &rng)! })
            let before = page.elements.map(\.id).filter { chosen.contains($0) }
            op = try page.sendToBack(Array(chosen), by: me, wallTime: wall)
            if Array(page.elements.map(\.id).prefix(before.count)) != before {
                placementFailures.append("\(op.id) sent \(before) to back, bottom is \(page.elements.prefix(before.count).map(\.id))")
            }
        case 9:
            // [MERGE-70] A local restore takes back every erase its author saw: each element it
            // names is live again, exactly as its tombstone kept it.
            let chosen = Set((0..<Int.random(in: 1...2, using: &rng)).map { _ in restorable.randomElement(using: &rng)! }).sorted()
            let kept = chosen.map { page.tombstone($0)!.record! }
            op = try page.make(.restore(chosen), by: me, wallTime: wall)
            restoresMade += 1
            for k in kept {
                guard let e = page.element(k.id) else {
                    placementFailures.append("\(op.id) restored \(k.id), which is still erased")
                    continue
                }
                if e.content != k.content || e.transform != k.transform || e.z != k.z || e.erased != k.erased
                    || e.rangeErasures != k.rangeErasures || e.rangeRestores != k.rangeRestores || page.isRestorable(k.id) || page.tombstone(k.id)?.record != nil {
                    placementFailures.append("\(op.id) restored \(k.id) other than its tombstone kept it")
                }
            }
        default:
            // [MERGE-71] A local range restore, of a partially erased stroke when there is one:
            // afterwards none of its points is erased for its author.
            let partial = ids.filter { !(page.element($0)!.erased.isEmpty) }
            let id = (partial.isEmpty || Int.random(in: 0..<4, using: &rng) == 0 ? ids : partial).randomElement(using: &rng)!
            let n = page.element(id)!.content.pointCount
            var ranges: [PointRange] = []
            for _ in 0..<Int.random(in: 1...2, using: &rng) {
                let from = UInt32.random(in: 0..<UInt32(n), using: &rng)
                ranges.append(PointRange(from, UInt32.random(in: (from + 1)...UInt32(n), using: &rng)))
            }
            let erasedBefore = page.element(id)!.erased
            op = try page.make(.restoreRange(id, ranges), by: me, wallTime: wall)
            let after = page.element(id)!.erased
            if after.subtracting(ranges) != after || after != erasedBefore.subtracting(ranges) {
                placementFailures.append("\(op.id) restored \(ranges) of \(id): erased \(erasedBefore) became \(after)")
            }
            if after != erasedBefore { restoreRangesThatTookBack += 1 }
        }
        replicas[i].pages[p] = page
        replicas[i].pageLogs[p, default: []].append(op)
        made += 1
    }

    /// One random document edit at replica `i`: add, delete, restore, move a page, retitle,
    /// change a canvas.
    mutating func localDocEdit(at i: Int) throws {
        guard canWrite(i) else { return }
        do {
            try honestDocEdit(at: i)
        } catch let e as LnoteError where e.code == .limitExceeded {
            return  // a hostile neighbour 32 steps deep leaves no room ([MERGE-13])
        }
    }

    private mutating func honestDocEdit(at i: Int) throws {
        let pages = replicas[i].doc.state.pages
        let kind = pages.isEmpty ? 0 : Int.random(in: 0...5, using: &rng)
        switch kind {
        case 0:
            let after = pages.isEmpty || Bool.random(using: &rng) ? nil : pages.randomElement(using: &rng)!.id
            let pos = after == nil && Bool.random(using: &rng) ? replicas[i].doc.endPosition : try replicas[i].doc.position(after: after, by: replicas[i].id)
            let p = PageID(newPageUUID(i))
            guard replicas[i].doc.page(p) == nil else { return }
            try makeDoc(at: i, .addPage(p, position: pos, canvas: .a4))
        case 1:
            // [MERGE-2] A delete names a live page, a restore a deleted one.
            let p = pages.randomElement(using: &rng)!
            guard !p.deleted.value else { return }
            try makeDoc(at: i, .deletePage(p.id, seen: replicas[i].page(p.id).clock))
        case 2:
            let p = pages.randomElement(using: &rng)!
            guard p.deleted.value else { return }
            try makeDoc(at: i, .restorePage(p.id))
        case 3:
            let p = pages.randomElement(using: &rng)!.id
            let after = Bool.random(using: &rng) ? nil : pages.randomElement(using: &rng)!.id
            guard after != p else { return }
            try makeDoc(at: i, .movePage(p, position: try replicas[i].doc.position(after: after, moving: p, by: replicas[i].id)))
        case 4:
            try makeDoc(at: i, .setTitle("t\(Int.random(in: 0...99, using: &rng))"))
        default:
            try makeDoc(at: i, .setCanvas(pages.randomElement(using: &rng)!.id,
                                          CanvasSize(width: Int32.random(in: 100...9000, using: &rng), height: 8419)))
        }
    }

    enum Order { case inOrder, reversed, shuffled }

    /// Delivers what `from` holds and `to` lacks, possibly reordered, duplicated or partial,
    /// in random batch sizes; the receiver logs each operation once, in arrival order.
    mutating func deliver(from: Int, to: Int, order: Order, duplicate: Bool, only: Int?) throws {
        guard replicas[from].joined else { return }
        func pick(_ all: [Op], _ has: (OpID) -> Bool) -> [Op] {
            var ops = all.filter { !has($0.id) }
            if let only { ops = Array(ops.prefix(only)) }
            switch order {
            case .inOrder: break
            case .reversed: ops.reverse()
            case .shuffled: ops.shuffle(using: &rng)
            }
            if duplicate { ops += ops.prefix(ops.count / 2 + 1) }
            return ops
        }
        var dst = replicas[to]
        let docOps = pick(replicas[from].docLog) { dst.doc.contains($0) }
        try receive(docOps, into: &dst.doc, log: &dst.docLog)
        for p in replicas[from].pageIDs {
            var page = dst.page(p)
            let ops = pick(replicas[from].pageLogs[p]!) { page.contains($0) }
            guard !ops.isEmpty else { continue }
            var log = dst.pageLogs[p] ?? []
            try receive(ops, into: &page, log: &log)
            dst.pages[p] = page
            dst.pageLogs[p] = log
        }
        if !docOps.isEmpty { dst.joined = true }
        replicas[to] = dst
    }

    private mutating func receive<R: SimReplica>(_ ops: [Op], into r: inout R, log: inout [Op]) throws {
        for op in ops where !log.contains(where: { $0.id == op.id }) { log.append(op) }
        var rest = ops[...]
        while !rest.isEmpty {
            let n = Int.random(in: 1...max(1, rest.count), using: &rng)
            _ = try r.receive(Array(rest.prefix(n)))
            rest = rest.dropFirst(n)
        }
    }

    /// What a store does when it compacts and later reopens: the replica continues from its
    /// snapshot's state (encoded and decoded) and its waiting operations.
    mutating func reload(_ i: Int) throws {
        for (p, page) in replicas[i].pages {
            let bytes = PageSnapshot.encode(page.state, coveredLogOffset: 0, logIncarnation: 0)
            let decoded = try PageSnapshot.decode(bytes).state
            replicas[i].pages[p] = PageReplica(state: decoded, pending: page.pending)
        }
        let d = replicas[i].doc
        replicas[i].doc = DocumentReplica(state: d.state, pending: d.pending)
    }

    mutating func fullSync() throws {
        for _ in 0..<2 {
            for a in replicas.indices {
                for b in replicas.indices where a != b {
                    try deliver(from: a, to: b, order: .inOrder, duplicate: false, only: nil)
                }
            }
        }
    }
}

/// What the simulation needs of both kinds of replica.
protocol SimReplica {
    mutating func receive(_ ops: [Op]) throws -> [Op]
}
extension PageReplica: SimReplica {}
extension DocumentReplica: SimReplica {}
