import LnoteModel

/// The content hashes a log holds (the first 16 bytes of each, [SYNC-53]), by replica and
/// counter: read once from the log, then asked for many ranges.
public struct ContentHashTable: Sendable {
    private let byReplica: [ReplicaID: [UInt64: [UInt8]]]
    /// How many hashes it holds.
    public let count: Int

    public init(_ byReplica: [ReplicaID: [UInt64: [UInt8]]]) {
        self.byReplica = byReplica
        count = byReplica.values.reduce(0) { $0 + $1.count }
    }

    /// The hashes of `replica`'s operations `from…to`, in counter order, stopping at the first
    /// the log does not hold (none when `from` is 0 or above `to`).
    public func hashes(replica: ReplicaID, from: UInt64, to: UInt64) -> [[UInt8]] {
        guard from >= 1, from <= to, let byCounter = byReplica[replica] else { return [] }
        var out: [[UInt8]] = []
        var c = from
        while c <= to, let h = byCounter[c] {
            out.append(h)
            if c == .max { break }
            c += 1
        }
        return out
    }
}
