import Foundation
import LnoteModel
import LnoteReplication

/// A structure-aware input for the merge: fuzz bytes read as a script of edits by three
/// replicas of one page, with partial syncs between them, so that nearly every input makes
/// *valid* operations (concurrent adds, moves, erases, point-range erases and reorders of the
/// same few elements) rather than bytes the decoder refuses.
///
/// Each step takes a command byte: `replica = b % 3`, `action = (b / 3) % 8`, and reads its
/// arguments from the following bytes (a missing byte reads as 0). Edits are made through
/// `PageReplica`'s local API (so they are what an app would send); an edit the replica refuses
/// (an element it does not see, no room for a key) is skipped. A sync delivers to one replica
/// a prefix of another's operations, so that replicas see one another's edits at different
/// times and edit concurrently.
///
/// `run` then delivers every operation made to two fresh replicas in two orders — the order
/// made, and a permutation in batches of 1 to 4 chosen from a hash of the input (causal gaps
/// wait in the buffer) — plus
/// every operation again to the first (duplicates), and checks [MERGE-1]: same state, same
/// conflicts, nothing left pending; and that the three authors, once each has received
/// everything, hold that same state.
public struct MergeScript {
    public static let replicas = [ReplicaID(0xA1), ReplicaID(0xB2), ReplicaID(0xC3)]
    public static let page = PageID(UUID(uuid: (0, 0, 0, 0, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, 2)))
    /// Most commands read from one input: a bound on the work per input.
    public static let maxSteps = 512

    var bytes: [UInt8]
    var at = 0

    public init(_ bytes: [UInt8]) { self.bytes = bytes }

    mutating func next() -> UInt8 {
        defer { at += 1 }
        return at < bytes.count ? bytes[at] : 0
    }

    var exhausted: Bool { at >= bytes.count }

    /// The operations the script makes, in the order made, and the authors' replicas.
    public mutating func operations() -> (ops: [Op], authors: [PageReplica]) {
        var authors = Self.replicas.map { _ in PageReplica(page: Self.page) }
        var logs: [[Op]] = Self.replicas.map { _ in [] }
        var all: [Op] = []
        var wall: Int64 = 1_700_000_000_000
        var steps = 0
        while !exhausted, steps < Self.maxSteps {
            steps += 1
            let b = next()
            let r = Int(b) % 3
            let me = Self.replicas[r]
            wall += Int64(next() % 4)
            var a = authors[r]
            let live = a.elements.map(\.id)
            func pick() -> ElementID? { live.isEmpty ? nil : live[Int(next()) % live.count] }
            var made: Op?
            switch (Int(b) / 3) % 8 {
            case 0, 1:
                let n = 1 + Int(next() % 6)
                var t: UInt32 = 0
                let pts = (0..<n).map { _ -> StrokePoint in
                    t += UInt32(next() % 8)
                    return StrokePoint(x: Int32(Int8(bitPattern: next())) * 10, y: Int32(Int8(bitPattern: next())) * 10,
                                       pressure: UInt16(next()) * 3, radius: Int32(next() % 40), t: t)
                }
                let stroke = ElementContent.stroke(Stroke(style: InkStyle(width: 1 + Int32(next() % 60)), points: pts))
                let where_ = next() % 3
                let other = pick()
                made = try? a.add(stroke, by: me, wallTime: wall,
                                  above: where_ == 1 ? other : nil, below: where_ == 2 ? other : nil)
            case 2:
                if let e = pick() {
                    made = try? a.move([e], dx: Int32(Int8(bitPattern: next())), dy: Int32(Int8(bitPattern: next())), by: me, wallTime: wall)
                }
            case 3:
                if let e = pick() { made = try? a.make(.erase([e]), by: me, wallTime: wall) }
            case 4:
                if let e = pick(), let s = a.element(e)?.content.stroke {
                    let from = UInt32(Int(next()) % s.points.count)
                    let to = from + 1 + UInt32(Int(next()) % (s.points.count - Int(from)))
                    made = try? a.make(.eraseRange(e, [PointRange(from, to)]), by: me, wallTime: wall)
                }
            case 5:
                if let e = pick() {
                    made = next() & 1 == 0 ? try? a.bringToFront([e], by: me, wallTime: wall)
                                           : try? a.sendToBack([e], by: me, wallTime: wall)
                }
            case 6:
                if let e = pick(), let other = pick(), other != e, let z = try? a.key(adjacentTo: other, above: next() & 1 == 0, for: e) {
                    made = try? a.make(.reorder([ElementZ(e, z)]), by: me, wallTime: wall)
                }
            default:
                // Sync: this replica receives a prefix of another's operations (its own and
                // those it received), in its order.
                let from = (r + 1 + Int(next() % 2)) % 3
                let log = logs[from]
                let n = log.isEmpty ? 0 : Int(next()) % (log.count + 1)
                if n > 0 {
                    let fresh = log.prefix(n).filter { !a.contains($0.id) }
                    if let got = try? a.receive(Array(fresh)) { logs[r] += got }
                }
            }
            if let made {
                logs[r].append(made)
                all.append(made)
            }
            authors[r] = a
        }
        return (all, authors)
    }

    /// A permutation of `ops` in batches, chosen by a generator seeded with a hash of the whole
    /// input (the script usually reads every byte, so the order must come from all of them).
    func shuffledBatches(_ ops: [Op]) -> [[Op]] {
        var h: UInt64 = 0xCBF2_9CE4_8422_2325  // FNV-1a
        for b in bytes { h = (h ^ UInt64(b)) &* 0x100_0000_01B3 }
        var g = SplitMix64(seed: h)
        var order = ops
        if order.count > 1 {
            for i in stride(from: order.count - 1, to: 0, by: -1) { order.swapAt(i, g.int(in: 0...i)) }
        }
        var out: [[Op]] = []
        var at = 0
        while at < order.count {
            let n = min(order.count - at, g.int(in: 1...4))
            out.append(Array(order[at..<(at + n)]))
            at += n
        }
        return out
    }

    /// Runs the script and checks convergence; returns what failed, or nil.
    public static func run(_ bytes: [UInt8]) -> String? {
        var script = MergeScript(bytes)
        let (ops, made) = script.operations()
        var authors = made
        guard !ops.isEmpty else { return nil }
        var first = PageReplica(page: page), second = PageReplica(page: page)
        do {
            try first.receive(ops)
            // Delivered again: duplicates change nothing ([MERGE-40]).
            try first.receive(ops.reversed())
            for batch in script.shuffledBatches(ops) { try second.receive(batch) }
        } catch {
            return "a valid operation was refused: \(error)"
        }
        guard first.pending.isEmpty, second.pending.isEmpty else { return "operations left waiting after every one was delivered" }
        guard first.state == second.state else { return "two delivery orders of the same operations give different states" }
        guard first.conflicts() == second.conflicts() else { return "two delivery orders give different conflicts" }
        for i in authors.indices {
            guard (try? authors[i].receive(ops)) != nil else { return "author \(i) refused the others' operations" }
            guard authors[i].state == first.state else { return "author \(i) does not converge with a replica that received everything" }
        }
        let snapshot = PageSnapshot.encode(first.state, coveredLogOffset: 0, logIncarnation: 0)
        guard (try? PageSnapshot.decode(snapshot))?.state == first.state else { return "a merged state does not survive its snapshot" }
        return nil
    }
}
