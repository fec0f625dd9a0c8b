/// A vector clock: for each replica, the greatest counter of its operations that are
/// known (in one log, counters have no gaps, so this is "all of them up to").
///
/// Entries with a zero counter are never stored, so equal clocks are equal values.
public struct VectorClock: Hashable, Sendable, CustomStringConvertible {
    /// Sorted by replica id; counters are never zero.
    public private(set) var entries: [(replica: ReplicaID, counter: UInt64)]

    public init() { entries = [] }

    /// Builds a clock from pairs; zero counters are dropped, duplicates keep the maximum.
    public init(_ pairs: some Sequence<(ReplicaID, UInt64)>) {
        entries = []
        for (r, c) in pairs { self[r] = max(self[r], c) }
    }

    public subscript(replica: ReplicaID) -> UInt64 {
        get {
            if let i = index(of: replica) { return entries[i].counter }
            return 0
        }
        set {
            let at = position(of: replica)
            let present = at < entries.count && entries[at].replica == replica
            switch (present, newValue) {
            case (true, 0): entries.remove(at: at)
            case (true, _): entries[at].counter = newValue
            case (false, 0): break
            case (false, _): entries.insert((replica, newValue), at: at)
            }
        }
    }

    /// Where `replica`'s entry is, or would be inserted (a binary search: a clock of a log
    /// written by many replicas costs no scan per operation).
    private func position(of replica: ReplicaID) -> Int {
        var lo = 0, hi = entries.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if entries[mid].replica < replica { lo = mid + 1 } else { hi = mid }
        }
        return lo
    }

    private func index(of replica: ReplicaID) -> Int? {
        let lo = position(of: replica)
        return lo < entries.count && entries[lo].replica == replica ? lo : nil
    }

    public var isEmpty: Bool { entries.isEmpty }
    public var replicas: [ReplicaID] { entries.map(\.replica) }

    /// True when the operation `id` is included in this clock.
    public func covers(_ id: OpID) -> Bool { self[id.replica] >= id.counter }

    /// True when every entry of `other` is included in this clock.
    public func covers(_ other: VectorClock) -> Bool {
        other.entries.allSatisfy { self[$0.replica] >= $0.counter }
    }

    /// Raises each entry to the maximum of both clocks.
    public mutating func merge(_ other: VectorClock) {
        // A few entries: in place. Many (which may each be an insertion moving the entries
        // above it): one pass over both sorted lists.
        guard other.entries.count > 16 else {
            for e in other.entries where e.counter > self[e.replica] { self[e.replica] = e.counter }
            return
        }
        var out: [(replica: ReplicaID, counter: UInt64)] = []
        out.reserveCapacity(entries.count + other.entries.count)
        var i = 0, j = 0
        let a = entries, b = other.entries
        while i < a.count || j < b.count {
            if j == b.count || (i < a.count && a[i].replica < b[j].replica) {
                out.append(a[i]); i += 1
            } else if i == a.count || b[j].replica < a[i].replica {
                out.append(b[j]); j += 1
            } else {
                out.append((a[i].replica, max(a[i].counter, b[j].counter))); i += 1; j += 1
            }
        }
        entries = out
    }

    public func merged(_ other: VectorClock) -> VectorClock {
        var c = self
        c.merge(other)
        return c
    }

    /// Records that `id` is known (raising its replica's entry to at least its counter).
    public mutating func include(_ id: OpID) {
        if self[id.replica] < id.counter { self[id.replica] = id.counter }
    }

    /// The entry-wise minimum of both clocks.
    public func meet(_ other: VectorClock) -> VectorClock {
        VectorClock(entries.map { ($0.replica, min($0.counter, other[$0.replica])) })
    }

    public enum Order: Sendable, Equatable { case equal, before, after, concurrent }

    /// How this clock relates to `other` in the happened-before order.
    public func compare(_ other: VectorClock) -> Order {
        let a = covers(other), b = other.covers(self)
        switch (a, b) {
        case (true, true): return .equal
        case (true, false): return .after
        case (false, true): return .before
        case (false, false): return .concurrent
        }
    }

    /// The most operations one log may hold, 2^62: the greatest Lamport timestamp
    /// (operation-log.md [LOG-4]), so that layers and "one more" stay within `Int64`.
    public static let maxTotal: UInt64 = 1 << 62

    /// Sum of all counters: the number of operations the clock covers in one log.
    /// Saturates at `UInt64.max` (a clock read from a damaged or hostile file can hold any
    /// counters; readers refuse one beyond `maxTotal`).
    public var total: UInt64 {
        var sum: UInt64 = 0
        for e in entries {
            let (s, overflow) = sum.addingReportingOverflow(e.counter)
            if overflow { return .max }
            sum = s
        }
        return sum
    }

    /// `{replica:counter, ...}` in replica order.
    public var description: String {
        "{" + entries.map { "\($0.replica):\($0.counter)" }.joined(separator: ", ") + "}"
    }

    public static func == (l: VectorClock, r: VectorClock) -> Bool {
        l.entries.count == r.entries.count
            && zip(l.entries, r.entries).allSatisfy { $0.replica == $1.replica && $0.counter == $1.counter }
    }

    public func hash(into h: inout Hasher) {
        h.combine(entries.count)
        for e in entries {
            h.combine(e.replica)
            h.combine(e.counter)
        }
    }
}
