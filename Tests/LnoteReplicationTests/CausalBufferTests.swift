import Foundation
import Testing
import LnoteModel
@testable import LnoteReplication

/// [MERGE-40] The causal buffer releases exactly what causal delivery allows, in whatever
/// order and batches the operations arrive, at a cost linear in what it releases.
@Suite("Causal buffer")
struct CausalBufferTests {
    static func op(_ replica: UInt64, _ counter: UInt64, _ context: [(UInt64, UInt64)]) -> Op {
        Op(id: OpID(replica: ReplicaID(replica), counter: counter), lamport: counter + UInt64(context.count),
           context: VectorClock(context.map { (ReplicaID($0.0), $0.1) }), wallTime: 0,
           body: .erase([OpID(replica: ReplicaID(replica), counter: counter)]))
    }

    /// `count` seeds from `base`, or the one in `LNOTE_SEED` (decimal or 0x-hex) to replay a failure.
    static func seeds(_ base: UInt64, count: Int) -> [UInt64] {
        if let s = ProcessInfo.processInfo.environment["LNOTE_SEED"],
           let v = s.hasPrefix("0x") ? UInt64(s.dropFirst(2), radix: 16) : UInt64(s) { return [v] }
        var g = SplitMix64(seed: base)
        return (0..<count).map { _ in g.next() }
    }

    /// A clock the buffer reads and `apply` advances, checking that each operation applied
    /// is deliverable at that moment.
    final class Clock {
        var counters: [ReplicaID: UInt64] = [:]
        var applied: [OpID] = []
        var violations: [String] = []
        func counter(_ r: ReplicaID) -> UInt64 { counters[r] ?? 0 }
        func apply(_ op: Op) {
            if counter(op.id.replica) != op.id.counter - 1 { violations.append("\(op.id) applied after \(counter(op.id.replica))") }
            for e in op.context.entries where counter(e.replica) < e.counter {
                violations.append("\(op.id) applied before \(e.replica).\(e.counter)")
            }
            counters[op.id.replica] = op.id.counter
            applied.append(op.id)
        }
    }

    /// The release rule itself, by passes over everything waiting until nothing moves (the
    /// former implementation): what must be released, whatever the order.
    static func reference(_ batches: [[Op]], moves: [Int: ReplicaID] = [:]) -> (applied: Set<OpID>, waiting: Set<OpID>) {
        var counters: [ReplicaID: UInt64] = [:]
        var waiting: [OpID: Op] = [:]
        var applied = Set<OpID>()
        func ready(_ op: Op) -> Bool {
            counters[op.id.replica, default: 0] == op.id.counter - 1
                && op.context.entries.allSatisfy { counters[$0.replica, default: 0] >= $0.counter }
        }
        for (b, batch) in batches.enumerated() {
            // A local edit before the batch: the clock moves without the buffer.
            if let r = moves[b] { counters[r, default: 0] += 1 }
            for op in batch where counters[op.id.replica, default: 0] < op.id.counter && waiting[op.id] == nil { waiting[op.id] = op }
            var progress = true
            while progress {
                progress = false
                for (id, op) in waiting.sorted(by: { $0.key < $1.key }) where waiting[id] != nil {
                    if counters[id.replica, default: 0] >= id.counter { waiting[id] = nil; continue }
                    if ready(op) {
                        counters[id.replica] = id.counter
                        applied.insert(id)
                        waiting[id] = nil
                        progress = true
                    }
                }
            }
        }
        return (applied, Set(waiting.keys))
    }

    @Test("[MERGE-40] random histories delivered in random orders and batches, with duplicates, operations whose past never arrives and local edits between batches: released and dropped as the rule says, each when deliverable")
    func releasesWhatTheRuleAllows() {
        for seed in Self.seeds(0xCB0F, count: 60) {
            var g = SplitMix64(seed: seed)
            let replicas = Int.random(in: 2...6, using: &g)
            // Each replica's knowledge; an operation's context is what its author knew.
            var known = [[UInt64]](repeating: [UInt64](repeating: 0, count: replicas), count: replicas)
            var history: [Op] = []
            for _ in 0..<Int.random(in: 1...80, using: &g) {
                let r = Int.random(in: 0..<replicas, using: &g)
                if Bool.random(using: &g) {
                    // Learn everything another replica knows (a sync).
                    let other = Int.random(in: 0..<replicas, using: &g)
                    for k in 0..<replicas { known[r][k] = max(known[r][k], known[other][k]) }
                }
                let counter = known[r][r] + 1
                let context = (0..<replicas).compactMap { k in known[r][k] > 0 ? (UInt64(k + 1), known[r][k]) : nil }
                history.append(Self.op(UInt64(r + 1), counter, context))
                known[r][r] = counter
            }
            // Some operations never arrive; some arrive twice.
            var arriving = history.filter { _ in Int.random(in: 0..<10, using: &g) != 0 }
            for _ in 0..<Int.random(in: 0...5, using: &g) where !arriving.isEmpty { arriving.append(arriving.randomElement(using: &g)!) }
            arriving.shuffle(using: &g)
            var batches: [[Op]] = []
            while !arriving.isEmpty {
                let n = Int.random(in: 1...arriving.count, using: &g)
                batches.append(Array(arriving.prefix(n)))
                arriving.removeFirst(n)
            }
            // Local edits between batches: a replica's next operation made here, which may be
            // one that waits in the buffer (a peer sent it first, with another context).
            var moves: [Int: ReplicaID] = [:]
            for b in batches.indices where Int.random(in: 0..<4, using: &g) == 0 {
                moves[b] = ReplicaID(UInt64(Int.random(in: 1...replicas, using: &g)))
            }
            let expected = Self.reference(batches, moves: moves)
            var buffer = CausalBuffer()
            let clock = Clock()
            for (b, batch) in batches.enumerated() {
                if let r = moves[b] {
                    clock.counters[r, default: 0] += 1
                    buffer.clockMovedOutside()
                }
                buffer.deliver(batch, counter: clock.counter, apply: clock.apply)
            }
            #expect(clock.violations.isEmpty, "seed \(seed): \(clock.violations.prefix(3))")
            #expect(clock.applied.count == Set(clock.applied).count, "seed \(seed): an operation applied twice")
            #expect(Set(clock.applied) == expected.applied, "seed \(seed)")
            #expect(Set(buffer.operations.map(\.id)) == expected.waiting, "seed \(seed)")
        }
    }

    /// N replicas, each operation waiting for the next replica's (the relay's replica order
    /// fetches them in the worst order): one pass over the waiting replicas released one of
    /// them, N² log N (40 s for 16,000 operations in a release build).
    @Test("[MERGE-40] 20,000 operations each waiting for the next one's: all released for a few dependency checks each")
    func chainReleasesInLinearWork() {
        let n: UInt64 = 20_000
        var ops: [Op] = []
        for i in 1...n {
            let first: (UInt64, UInt64) = (0xA000_0000, 1)
            let context = i < n ? [first, (i + 1, UInt64(1))] : [first]
            ops.append(Self.op(i, 1, context))
        }
        var buffer = CausalBuffer()
        let clock = Clock()
        buffer.deliver(ops, counter: clock.counter, apply: clock.apply)
        #expect(clock.applied.isEmpty && buffer.count == Int(n))
        // The operation they all need arrives last.
        buffer.deliver([Self.op(0xA000_0000, 1, [])], counter: clock.counter, apply: clock.apply)
        #expect(clock.applied.count == Int(n) + 1 && buffer.isEmpty && clock.violations.isEmpty)
        // Two checks an operation when it is filed (its author's previous counter, met; the
        // next replica's operation, not), two when it is woken (that one, its other entry).
        #expect(buffer.dependencyChecks <= 4 * Int(n) + 2, "\(buffer.dependencyChecks) checks for \(n) operations")
    }

    @Test("two buffers holding the same operations are equal, whatever filed them")
    func equalityIgnoresTheIndex() {
        let a = Self.op(1, 2, [(1, 1)]), b = Self.op(2, 1, [(1, 2)])
        var x = CausalBuffer(), y = CausalBuffer()
        let clock = Clock()
        x.deliver([a, b], counter: clock.counter, apply: clock.apply)
        _ = y.insert(b)
        _ = y.insert(a)
        #expect(x == y && x.hashValue == y.hashValue)
    }

    /// Operations that can never be delivered wait while many small deliveries go through:
    /// each drain looks at what it was given and what that woke, not at everything waiting
    /// (looking at every filed dependency on each drain was 25 s for 20,000 of each).
    @Test("[MERGE-40] 3,000 operations that never become deliverable, then 3,000 deliveries of one operation each: work linear in both")
    func manyWaitingManySmallDeliveries() {
        var buffer = CausalBuffer()
        let clock = Clock()
        let stuck = (1...3000).map { i in Self.op(UInt64(i), 1, [(0xDEAD, 1)]) }  // 0xDEAD.1 never comes
        buffer.deliver(stuck, counter: clock.counter, apply: clock.apply)
        let before = buffer.dependencyChecks
        for i in 1...3000 { buffer.deliver([Self.op(0x10_0000 + UInt64(i), 1, [])], counter: clock.counter, apply: clock.apply) }
        #expect(clock.applied.count == 3000 && buffer.count == 3000)
        #expect(buffer.dependencyChecks - before <= 10 * 3000, "\(buffer.dependencyChecks - before) checks for 3,000 deliveries")
    }

    struct Refused: Error {}

    @Test("[MERGE-40] an apply that throws: the operations it held up are released by the next delivery, none twice")
    func applyThatThrows() {
        var buffer = CausalBuffer()
        let clock = Clock()
        let a = Self.op(1, 1, []), b = Self.op(2, 1, [(1, 1)]), c = Self.op(1, 2, [(1, 1)])
        buffer.deliver([b, c], counter: clock.counter, apply: clock.apply)
        #expect(clock.applied.isEmpty)
        var refuse = true
        #expect(throws: Refused.self) {
            try buffer.deliver([a], counter: clock.counter) { op in
                if refuse && op.id == a.id { throw Refused() }
                clock.apply(op)
            }
        }
        refuse = false
        buffer.deliver([a], counter: clock.counter, apply: clock.apply)
        #expect(Set(clock.applied) == [a.id, b.id, c.id] && clock.applied.count == 3 && buffer.isEmpty && clock.violations.isEmpty)
    }
}
