import Foundation
import LnoteModel
@testable import LnoteReplication

/// Operations no correct replica makes, but that the validator lets through: a hostile or
/// damaged replica's. Each is well formed (its Lamport timestamp is the one its context
/// gives, its keys are within bounds) and deliverable (its context is what its author
/// holds, or less), and names things at random: elements erased, not yet seen, never added;
/// extreme transforms, keys and ranges; lists with repeats.
extension Simulation {
    /// Every element id added anywhere so far (seen or not by anyone in particular).
    var everyElementID: [ElementID] {
        var out = Set<ElementID>()
        for r in replicas { for ops in r.pageLogs.values { for op in ops where op.addedKey != nil { out.insert(op.id) } } }
        return out.sorted()
    }

    mutating func randomKey(lamport: UInt64, tags: [ElementID]) -> ZKey {
        let bound = Int64(lamport)
        let layer: Int64 = [bound, -bound, 0, Int64.random(in: -bound...bound, using: &rng)].randomElement(using: &rng)!
        func fraction(nonEmpty: Bool) -> [UInt8] {
            var f = (0..<Int.random(in: nonEmpty ? 1...3 : 0...3, using: &rng)).map { _ in [0, 1, 128, 255, UInt8.random(in: 0...255, using: &rng)].randomElement(using: &rng)! }
            while f.last == 0 { f.removeLast() }
            if nonEmpty && f.isEmpty { f = [1] }
            return f
        }
        let depth = Bool.random(using: &rng) ? 0 : Int.random(in: 0..<10, using: &rng) == 0 ? ZKey.maxDepth : Int.random(in: 1...3, using: &rng)
        var path: [ZKey.Step] = []
        for i in 0..<depth {
            let tag = tags.randomElement(using: &rng) ?? OpID(replica: ReplicaID(99), counter: 1)
            path.append(ZKey.Step(fraction: fraction(nonEmpty: i > 0), tag: tag))
        }
        return ZKey(layer: layer, path: path, fraction: fraction(nonEmpty: depth > 0))
    }

    /// A transform at the bounds of [LOG-23].
    mutating func extremeTransform() -> Transform {
        let m = OpValidator.maxMatrixCoefficient, t = Int32(OpValidator.coordinateLimit)
        let coefficients: [Int32] = [-m, m, 0, -1, 1, 65536]
        let translations: [Int32] = [-t, t, 0, -1, 1]
        return Transform(a: coefficients.randomElement(using: &rng)!, b: coefficients.randomElement(using: &rng)!,
                         c: coefficients.randomElement(using: &rng)!, d: coefficients.randomElement(using: &rng)!,
                         tx: translations.randomElement(using: &rng)!, ty: translations.randomElement(using: &rng)!)
    }

    /// A random hostile page operation by replica `i` on one of the pages it knows.
    mutating func hostilePageEdit(at i: Int) throws {
        guard replicas[i].joined else { return }
        let known = Array(Set(replicas[i].doc.state.pages.map(\.id)).union(replicas[i].pageLogs.keys)).sorted()
        guard let p = known.randomElement(using: &rng) else { return }
        var page = replicas[i].page(p)
        let me = replicas[i].id
        // Its context: what it holds, or a random causal cut below it (another replica's past).
        var context = page.clock
        if Bool.random(using: &rng) {
            let pastOps = (replicas[i].pageLogs[p] ?? []).filter { page.clock.covers($0.id) && $0.id.replica != me }
            if let past = pastOps.randomElement(using: &rng) { context = past.clock }
        }
        context[me] = page.clock[me]
        let id = OpID(replica: me, counter: page.clock[me] + 1)
        guard let lamport = OpValidator.lamport(id: id, context: context) else { return }
        let ids = everyElementID + [OpID(replica: ReplicaID(99), counter: 7)]
        func some() -> [ElementID] { (0..<Int.random(in: 1...3, using: &rng)).map { _ in ids.randomElement(using: &rng)! } }
        let body: Op.Body
        switch Int.random(in: 0..<8, using: &rng) {
        case 0: body = .add(.stroke(randomStroke()), z: randomKey(lamport: lamport, tags: ids))
        case 1: body = .erase(some())
        case 2:
            let bounds: [UInt32] = [0, 1, 2, 5, UInt32.max - 1, UInt32.max]
            let from = bounds.dropLast().randomElement(using: &rng)!
            let to = bounds.filter { $0 > from }.randomElement(using: &rng)!
            body = .eraseRange(some()[0], [PointRange(from, to), PointRange(0, 1)])
        case 3: body = .move(some().map { ElementTransform($0, extremeTransform()) })
        case 4: body = .reorder(some().map { ElementZ($0, randomKey(lamport: lamport, tags: ids)) })
        // Restores of elements live, erased, unseen or never added, by authors that may have
        // seen them erased or restored already ([MERGE-42], [MERGE-70], [MERGE-71]).
        case 6: body = .restore(some())
        case 7:
            let bounds: [UInt32] = [0, 1, 2, 5, UInt32.max - 1, UInt32.max]
            let from = bounds.dropLast().randomElement(using: &rng)!
            let to = bounds.filter { $0 > from }.randomElement(using: &rng)!
            body = .restoreRange(some()[0], [PointRange(from, to), PointRange(1, 3)])
        default: body = .reorder(some().map { ElementZ($0, ZKey(layer: Int64(lamport))) })
        }
        wall += 1
        let op = Op(id: id, lamport: lamport, context: context, wallTime: [Int64.min, Int64.max, wall].randomElement(using: &rng)!, body: body)
        precondition(OpValidator.violation(of: op) == nil, "the simulation built an invalid operation: \(OpValidator.violation(of: op)!)")
        _ = try page.receive([op])
        replicas[i].pages[p] = page
        replicas[i].pageLogs[p, default: []].append(op)
        made += 1
    }

    /// A random hostile document operation: pages named without having been seen, page ids
    /// added twice, extreme positions and canvases.
    mutating func hostileDocEdit(at i: Int) throws {
        guard replicas[i].joined else { return }
        var doc = replicas[i].doc
        let me = replicas[i].id
        var context = doc.clock
        if Bool.random(using: &rng), let past = replicas[i].docLog.filter({ $0.id.replica != me }).randomElement(using: &rng) {
            context = past.clock
        }
        context[me] = doc.clock[me]
        let id = OpID(replica: me, counter: doc.clock[me] + 1)
        guard let lamport = OpValidator.lamport(id: id, context: context) else { return }
        var pageIDs = Set<PageID>()
        for r in replicas { for pg in r.doc.state.pages { pageIDs.insert(pg.id) } }
        let pid = pageIDs.sorted().randomElement(using: &rng) ?? PageID(newPageUUID(i))
        let pages = doc.state.pages.map(\.added.id)
        let body: Op.Body
        switch Int.random(in: 0..<6, using: &rng) {
        case 0: body = .addPage(pid, position: randomKey(lamport: lamport, tags: pages), canvas: CanvasSize(width: Int32(OpValidator.coordinateLimit), height: 1))
        case 1: body = .deletePage(pid, seen: [VectorClock(), replicas[i].page(pid).clock].randomElement(using: &rng)!)
        case 2: body = .restorePage(pid)
        case 3: body = .movePage(pid, position: randomKey(lamport: lamport, tags: pages))
        case 4: body = .createDocument(title: "again")
        default: body = .setCanvas(pid, CanvasSize(width: 1, height: Int32(OpValidator.coordinateLimit)))
        }
        wall += 1
        let op = Op(id: id, lamport: lamport, context: context, wallTime: wall, body: body)
        precondition(OpValidator.violation(of: op) == nil, "the simulation built an invalid operation: \(OpValidator.violation(of: op)!)")
        _ = try doc.receive([op])
        replicas[i].doc = doc
        replicas[i].docLog.append(op)
        made += 1
    }
}
