import LnoteModel
import LnoteSync

/// A set of operation ids as clocks per log: in one log a replica's counters run 1…n without
/// gaps ([LOG-2]), so "replica r up to n in log L" names exactly the operations 1…n.
struct OpSet: Sendable, Equatable {
    var logs: [LogRef: VectorClock] = [:]

    init() {}
    init(_ clocks: [LogClock]) {
        for c in clocks { logs[c.log, default: VectorClock()].merge(c.clock) }
    }

    /// Only the entries of `replicas`.
    func restricted(to replicas: Set<ReplicaID>) -> OpSet {
        var out = OpSet()
        for (log, clock) in logs {
            let c = VectorClock(clock.entries.filter { replicas.contains($0.replica) }.map { ($0.replica, $0.counter) })
            if !c.isEmpty { out.logs[log] = c }
        }
        return out
    }

    mutating func merge(_ other: OpSet) {
        for (log, clock) in other.logs { logs[log, default: VectorClock()].merge(clock) }
    }

    var count: UInt64 { logs.values.reduce(0) { $0 + $1.total } }

    /// How many operations of this set `other` lacks.
    func missing(from other: OpSet) -> UInt64 {
        var n: UInt64 = 0
        for (log, clock) in logs {
            let held = other.logs[log] ?? VectorClock()
            for e in clock.entries where e.counter > held[e.replica] { n += e.counter - held[e.replica] }
        }
        return n
    }

    /// A few of the operations `other` lacks, for messages: `log: replica.from…to`.
    func describeMissing(from other: OpSet, limit: Int = 3) -> String {
        var out: [String] = []
        for (log, clock) in logs.sorted(by: { $0.key < $1.key }) {
            let held = other.logs[log] ?? VectorClock()
            for e in clock.entries where e.counter > held[e.replica] {
                out.append("\(log): \(e.replica).\(held[e.replica] + 1)…\(e.counter)")
                if out.count == limit { return out.joined(separator: ", ") + ", …" }
            }
        }
        return out.joined(separator: ", ")
    }
}
