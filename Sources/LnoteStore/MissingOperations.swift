import LnoteModel
import LnoteReplication

/// A set of operation ids as ranges of counters per replica: the operations a log's state
/// holds that the log itself does not ([PKG-51]), lost to damage or to a deleted log.
public struct OpRanges: Sendable, Hashable, CustomStringConvertible {
    /// Per replica, disjoint and non-adjacent ranges in ascending order.
    public private(set) var ranges: [ReplicaID: [ClosedRange<UInt64>]] = [:]

    public init() {}

    /// Every id `clock` covers that `held` does not say is held.
    ///
    /// - Parameters:
    ///   - held: the counters held per replica (a log's operations).
    ///   - base: a checkpoint base clock whose operations count as held ([PKG-46]).
    init(clock: VectorClock, held: [ReplicaID: Set<UInt64>], base: VectorClock?) {
        for e in clock.entries {
            let have = held[e.replica] ?? []
            let from = (base?[e.replica] ?? 0) + 1
            guard from <= e.counter else { continue }
            // The gaps between the held counters, in time proportional to what is held (a
            // clock read from a snapshot may claim far more than any log holds).
            var runs: [ClosedRange<UInt64>] = []
            var next = from
            for c in have.filter({ $0 >= from && $0 <= e.counter }).sorted() {
                if c > next { runs.append(next...(c - 1)) }
                next = c + 1
            }
            if next <= e.counter { runs.append(next...e.counter) }
            if !runs.isEmpty { ranges[e.replica] = runs }
        }
    }

    public var isEmpty: Bool { ranges.isEmpty }
    /// How many ids.
    public var count: Int { ranges.values.reduce(0) { $0 + $1.reduce(0) { $0 + $1.count } } }

    public func contains(_ id: OpID) -> Bool {
        ranges[id.replica]?.contains { $0.contains(id.counter) } ?? false
    }

    /// The least missing counter of a replica.
    public func first(of replica: ReplicaID) -> UInt64? { ranges[replica]?.first?.lowerBound }

    /// `clock` lowered, for each replica, to just below its first missing counter: the
    /// operations 1…k a log holds without a gap ([PKG-49]).
    public func truncating(_ clock: VectorClock) -> VectorClock {
        var out = clock
        for (r, runs) in ranges {
            if let f = runs.first?.lowerBound, out[r] >= f { out[r] = f - 1 }
        }
        return out
    }

    /// Removes one id (it is held again).
    mutating func remove(_ id: OpID) {
        guard var runs = ranges[id.replica], let i = runs.firstIndex(where: { $0.contains(id.counter) }) else { return }
        let r = runs[i]
        var pieces: [ClosedRange<UInt64>] = []
        if r.lowerBound < id.counter { pieces.append(r.lowerBound...(id.counter - 1)) }
        if id.counter < r.upperBound { pieces.append((id.counter + 1)...r.upperBound) }
        runs.replaceSubrange(i...i, with: pieces)
        ranges[id.replica] = runs.isEmpty ? nil : runs
    }

    /// `(replica, range)` pairs sorted by replica, then counter.
    public var sorted: [(replica: ReplicaID, counters: ClosedRange<UInt64>)] {
        ranges.keys.sorted().flatMap { r in ranges[r]!.map { (r, $0) } }
    }

    public var description: String {
        sorted.map { "\($0.replica).\($0.counters.lowerBound)" + ($0.counters.count > 1 ? "…\($0.counters.upperBound)" : "") }
            .joined(separator: ", ")
    }

    // MARK: - The file ([PKG-51])

    static let magic: [UInt8] = Array("LNMO".utf8)
    static let version: UInt8 = 1

    /// `pages/<page>.missing` / `document.missing`:
    ///
    /// | Offset | Size | Description |
    /// |---|---|---|
    /// | 0 | 4 | magic `LNMO` |
    /// | 4 | 1 | version (1) |
    /// | 5 | varint | n, the number of ranges |
    /// | … | … | n × (u64 replica, varint first counter ≥ 1, varint count ≥ 1) sorted by replica then counter, disjoint |
    /// | … | 4 | CRC-32C (u32 LE) of every byte before it |
    func encoded() -> [UInt8] {
        var w = ByteWriter()
        w.append(Self.magic)
        w.u8(Self.version)
        let all = sorted
        w.varint(UInt64(all.count))
        for (r, c) in all {
            w.u64(r.rawValue)
            w.varint(c.lowerBound)
            w.varint(c.upperBound - c.lowerBound + 1)
        }
        w.u32(CRC32C.checksum(w.bytes))
        return w.bytes
    }

    static func decode(_ bytes: [UInt8], path: String) throws -> OpRanges {
        var r = ByteReader(bytes, path: path)
        guard try r.bytes(4, "magic") == magic else { throw r.error(.corrupt, "not a missing-operations file (bad magic)", at: 0) }
        let v = try r.u8("version")
        guard v == version else {
            throw LnoteError(.unsupportedVersion, "missing-operations file version \(v); this build reads \(version)", path: path, offset: 4)
        }
        let n = try r.count("range count", max: r.remaining / 14)
        var out = OpRanges()
        var last: (ReplicaID, UInt64)?
        for _ in 0..<n {
            let at = r.offset
            let replica = ReplicaID(try r.u64("replica"))
            let first = try r.varint("first counter")
            let count = try r.varint("count")
            guard replica.rawValue != 0, first != 0, count != 0, first <= UInt64.max - (count - 1) else {
                throw r.error(.corrupt, "zero replica, counter or count in a range", at: at)
            }
            if let (lr, lu) = last, (lr, lu) >= (replica, first) {
                throw r.error(.corrupt, "ranges not sorted or overlapping", at: at)
            }
            let upper = first + (count - 1)
            out.ranges[replica, default: []].append(first...upper)
            last = (replica, upper)
        }
        let crcAt = r.offset
        let end = r.position
        let stored = try r.u32("CRC")
        try r.expectEnd("missing-operations file")
        guard stored == CRC32C.checksum(bytes, 0..<end) else { throw r.error(.corrupt, "CRC mismatch", at: crcAt) }
        return out
    }
}
