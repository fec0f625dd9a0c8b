import Foundation
import LnoteModel
@testable import LnoteReplication

/// The seeded generator the model ships (SplitMix64): one definition for every test.
typealias SeededRNG = SplitMix64

/// Replicas of one page and one document, exchanging operations by hand.
struct Simulation {
    struct Replica {
        var id: ReplicaID
        var page: PageReplica
        var doc: DocumentReplica
        /// Every operation this replica holds (made or received), in arrival order.
        var pageLog: [Op] = []
        var docLog: [Op] = []
    }

    var replicas: [Replica]
    var rng: SeededRNG
    var made = 0
    var wall: Int64 = 1_700_000_000_000
    let pageID = PageID(UUID(uuidString: "00000000-0000-0000-0000-0000000000AA")!)

    init(replicaCount: Int, seed: UInt64) {
        rng = SeededRNG(seed: seed)
        let docID = DocumentID(UUID(uuidString: "00000000-0000-0000-0000-0000000000DD")!)
        replicas = (1...replicaCount).map { i in
            Replica(id: ReplicaID(UInt64(i)), page: PageReplica(page: PageID(UUID(uuidString: "00000000-0000-0000-0000-0000000000AA")!)),
                    doc: DocumentReplica(id: docID))
        }
        // Replica 0 creates the document with two pages; everyone receives it.
        let op = try! replicas[0].doc.make(.createDocument(title: "sim"), by: replicas[0].id, wallTime: wall)
        replicas[0].docLog.append(op)
        for i in 1..<replicas.count {
            try! replicas[i].doc.receive([op])
            replicas[i].docLog.append(op)
        }
    }

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

    /// One random local page edit at replica `i` (all kinds). Returns false when nothing applied.
    mutating func localPageEdit(at i: Int) throws {
        wall += 1
        var r = replicas[i]
        let live = r.page.elements.map(\.id)
        let kind = live.isEmpty ? 0 : Int.random(in: 0...7, using: &rng)
        let op: Op
        switch kind {
        case 0, 1:
            let pos = live.isEmpty ? 0 : Int.random(in: 0...2, using: &rng)
            switch pos {
            case 1: op = try r.page.add(.stroke(randomStroke()), by: r.id, wallTime: wall, above: live.randomElement(using: &rng)!)
            case 2: op = try r.page.add(.stroke(randomStroke()), by: r.id, wallTime: wall, below: live.randomElement(using: &rng)!)
            default: op = try r.page.add(.stroke(randomStroke()), by: r.id, wallTime: wall)
            }
        case 2:
            let ids = Set((0..<Int.random(in: 1...2, using: &rng)).map { _ in live.randomElement(using: &rng)! }).sorted()
            op = try r.page.make(.erase(ids), by: r.id, wallTime: wall)
        case 3:
            let id = live.randomElement(using: &rng)!
            let n = r.page.element(id)!.content.pointCount
            let from = UInt32.random(in: 0..<UInt32(n), using: &rng)
            let to = UInt32.random(in: (from + 1)...UInt32(n), using: &rng)
            op = try r.page.make(.eraseRange(id, [PointRange(from, to)]), by: r.id, wallTime: wall)
        case 4, 5:
            let ids = Set((0..<Int.random(in: 1...3, using: &rng)).map { _ in live.randomElement(using: &rng)! }).sorted()
            op = try r.page.move(ids, dx: Int32.random(in: -100...100, using: &rng), dy: Int32.random(in: -100...100, using: &rng),
                                 by: r.id, wallTime: wall)
        case 6:
            op = try r.page.bringToFront([live.randomElement(using: &rng)!], by: r.id, wallTime: wall)
        default:
            op = try r.page.sendToBack([live.randomElement(using: &rng)!], by: r.id, wallTime: wall)
        }
        r.pageLog.append(op)
        replicas[i] = r
        made += 1
    }

    /// One random document edit at replica `i`.
    mutating func localDocEdit(at i: Int) throws {
        wall += 1
        var r = replicas[i]
        let pages = r.doc.state.pages
        let kind = pages.isEmpty ? 0 : Int.random(in: 0...5, using: &rng)
        let op: Op
        switch kind {
        case 0:
            let after = pages.isEmpty || Bool.random(using: &rng) ? nil : pages.randomElement(using: &rng)!.id
            let pos = after == nil && Bool.random(using: &rng) ? r.doc.endPosition : try r.doc.position(after: after)
            var g = rng
            let u = UUID(uuid: (UInt8(i), 0, 0, 0, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, UInt8.random(in: 0...255, using: &g), UInt8.random(in: 0...255, using: &g)))
            rng = g
            guard r.doc.page(PageID(u)) == nil else { return }
            op = try r.doc.make(.addPage(PageID(u), position: pos, canvas: .a4), by: r.id, wallTime: wall)
        case 1:
            op = try r.doc.make(.deletePage(pages.randomElement(using: &rng)!.id, seen: r.page.clock), by: r.id, wallTime: wall)
        case 2:
            op = try r.doc.make(.restorePage(pages.randomElement(using: &rng)!.id), by: r.id, wallTime: wall)
        case 3:
            let p = pages.randomElement(using: &rng)!.id
            let after = Bool.random(using: &rng) ? nil : pages.randomElement(using: &rng)!.id
            guard after != p else { return }
            op = try r.doc.make(.movePage(p, position: try r.doc.position(after: after)), by: r.id, wallTime: wall)
        case 4:
            op = try r.doc.make(.setTitle("t\(Int.random(in: 0...99, using: &rng))"), by: r.id, wallTime: wall)
        default:
            op = try r.doc.make(.setCanvas(pages.randomElement(using: &rng)!.id,
                                           CanvasSize(width: Int32.random(in: 100...9000, using: &rng), height: 8419)),
                                by: r.id, wallTime: wall)
        }
        r.docLog.append(op)
        replicas[i] = r
        made += 1
    }

    enum Order { case inOrder, reversed, shuffled }

    /// Delivers what `from` has and `to` lacks, possibly reordered, duplicated or partial.
    mutating func deliver(from: Int, to: Int, order: Order, duplicate: Bool, only: Int?) throws {
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
        let pageOps = pick(replicas[from].pageLog) { dst.page.contains($0) }
        let docOps = pick(replicas[from].docLog) { dst.doc.contains($0) }
        for op in pageOps where !dst.pageLog.contains(where: { $0.id == op.id }) { dst.pageLog.append(op) }
        for op in docOps where !dst.docLog.contains(where: { $0.id == op.id }) { dst.docLog.append(op) }
        // Deliver in random batch sizes.
        var rest = pageOps[...]
        while !rest.isEmpty {
            let n = Int.random(in: 1...max(1, rest.count), using: &rng)
            try dst.page.receive(Array(rest.prefix(n)))
            rest = rest.dropFirst(n)
        }
        try dst.doc.receive(docOps)
        replicas[to] = dst
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
