extension PageSnapshot {
    // MARK: - The id table of a version-5 element index ([SNAP-45])

    /// The ids of a page's element records, bottom to top, as runs of one replica's
    /// consecutive counters: what a version-5 element index holds after its offsets, so that
    /// a page can be listed without parsing its records.
    struct IDTable {
        struct Run {
            var replica: ReplicaID
            /// The first id's counter (at least 1).
            var first: UInt64
            var count: Int
            /// The absolute offset of the run's first byte (its replica field); 0 for a
            /// table made from records.
            var offset: Int = 0
        }
        var runs: [Run] = []

        /// The runs of `ids`, each as long as it can be (the one way to write them).
        init(ids: some Sequence<ElementID>) {
            for id in ids {
                if let last = runs.last, last.replica == id.replica, last.first &+ UInt64(last.count) == id.counter,
                   last.first &+ UInt64(last.count) != 0 {
                    runs[runs.count - 1].count += 1
                } else {
                    runs.append(Run(replica: id.replica, first: id.counter, count: 1))
                }
            }
        }

        init(runs: [Run]) { self.runs = runs }

        /// How many ids the runs hold.
        var count: Int { runs.reduce(0) { $0 + $1.count } }

        /// The ids, bottom to top.
        var ids: [ElementID] {
            var out: [ElementID] = []
            out.reserveCapacity(count)
            for run in runs {
                for k in 0..<UInt64(run.count) { out.append(ElementID(replica: run.replica, counter: run.first + k)) }
            }
            return out
        }

        /// True when no id is in two runs ([SNAP-22] read from the table): the runs sorted by
        /// replica and first counter do not overlap.
        var idsAreUnique: Bool {
            let sorted = runs.sorted { ($0.replica, $0.first) < ($1.replica, $1.first) }
            for i in sorted.indices.dropFirst() where sorted[i].replica == sorted[i - 1].replica {
                // `first + count - 1` does not overflow: the reader checks every run's last counter.
                if sorted[i].first <= sorted[i - 1].first + UInt64(sorted[i - 1].count - 1) { return false }
            }
            return true
        }

        /// The first run that does not give the ids of `records` in order (its index and the
        /// index of the first id it gets wrong), nil when every id matches. The counts are
        /// known to agree (the reader checks the table against the element count).
        func firstMismatch(_ records: UnsafeBufferPointer<ElementRecord>) -> (run: Int, element: Int)? {
            var i = 0
            for (k, run) in runs.enumerated() {
                for c in 0..<run.count {
                    guard i < records.count else { return (k, i) }
                    let id = records[i].id
                    if id.replica != run.replica || id.counter != run.first + UInt64(c) { return (k, i) }
                    i += 1
                }
            }
            return i == records.count ? nil : (runs.count - 1, i)
        }
    }

    /// Writes the id table ([SNAP-45]): the run count, then each run's replica (as a record
    /// writes it, [SNAP-34]), first counter and length.
    static func encodeIDTable(_ table: IDTable, replicas: ReplicaTable, into b: inout ByteWriter) {
        b.varint(UInt64(table.runs.count))
        for run in table.runs {
            if let i = replicas.index[run.replica] {
                b.varint(UInt64(i))
            } else {
                b.varint(UInt64(replicas.replicas.count))
                b.u64(run.replica.rawValue)
            }
            b.varint(run.first)
            b.varint(UInt64(run.count))
        }
    }

    /// Reads an id table ([SNAP-45]) for `n` element records, with every check of the table
    /// on its own: a replica as a record's ([SNAP-34]), a first counter of at least 1, a length
    /// of at least 1 whose last counter fits 64 bits and that does not take the ids past `n`,
    /// runs that are maximal (one that continues the previous is `corrupt` at its replica
    /// field), and lengths adding up to `n` (`corrupt` at the run count). Whether the ids are
    /// the records' is checked by the caller once both are known.
    static func decodeIDTable(_ r: inout ByteReader, elements n: Int, replicas: ReplicaTable) throws -> IDTable {
        let countAt = r.offset
        // A run takes at least 3 bytes (replica, counter, length).
        let k = try r.count("id table run count", minSize: 3)
        guard k >= 1, k <= n else {
            throw r.error(.corrupt, "id table of \(k) runs for \(n) elements", at: countAt)
        }
        var runs: [IDTable.Run] = []
        runs.reserveCapacity(k)
        var total = 0
        for _ in 0..<k {
            let at = r.offset
            let index = try r.varint("id table replica index")
            let replica: ReplicaID
            if index < UInt64(replicas.replicas.count) {
                replica = replicas.replicas[Int(index)]
            } else if index == UInt64(replicas.replicas.count) {
                let raw = try r.u64("id table replica id")
                guard raw != 0, !replicas.contains(ReplicaID(raw)) else {
                    throw r.error(.corrupt, "id table replica written in full but zero or in the page clock", at: at)
                }
                replica = ReplicaID(raw)
            } else {
                throw r.error(.corrupt, "id table replica index \(index) beyond the page clock's \(replicas.replicas.count)", at: at)
            }
            let firstAt = r.offset
            let first = try r.varint("id table first counter")
            guard first != 0 else { throw r.error(.corrupt, "id table counter 0", at: firstAt) }
            let lengthAt = r.offset
            let length = try r.varint("id table run length")
            guard length >= 1, length - 1 <= UInt64.max - first, let count = Int(exactly: length), count <= n - total else {
                throw r.error(.corrupt, "id table run of \(length) ids from counter \(first) does not fit", at: lengthAt)
            }
            if let last = runs.last, last.replica == replica, last.first + UInt64(last.count - 1) < UInt64.max,
               last.first + UInt64(last.count) == first {
                throw r.error(.corrupt, "id table run continues the previous one", at: at)
            }
            total += count
            runs.append(IDTable.Run(replica: replica, first: first, count: count, offset: at))
        }
        guard total == n else {
            throw r.error(.corrupt, "id table holds \(total) ids for \(n) elements", at: countAt)
        }
        return IDTable(runs: runs)
    }

    /// [SNAP-45] The table's ids are the records', in order: `corrupt` at the first byte of
    /// the first run that differs, with the index of the first element it gets wrong.
    static func checkIDTable(_ table: IDTable, against records: [ElementRecord], path: String?) throws {
        guard let (k, i) = records.withUnsafeBufferPointer({ table.firstMismatch($0) }) else { return }
        throw LnoteError(.corrupt, "id table run \(k) does not give the id of element \(i)", path: path,
                         offset: table.runs[k].offset, index: i)
    }
}
