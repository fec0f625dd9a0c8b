import LnoteModel
import Synchronization

/// A page's live elements: what `PageReplica` looks them up by (id) and lists them in (z
/// order, bottom to top).
///
/// The records sit in one dense array (`slots`) that never has holes: a removed record's slot
/// takes the last record. An id finds its slot through `index`, an id → slot table built the
/// first time an id is looked up, not when the table is made: opening a page to list it
/// (a snapshot's records, then a log tail's adds on top) looks up no id, and building the
/// table for a 2,500-element page was a sixth of that open. The z order is `order`, a
/// list of slots bottom to top, or nil when the slots already are in z order. That is the
/// usual case (a snapshot's records come in z order, new strokes go on top), and then
/// building the table moves the snapshot's array in without copying a record and `ordered`
/// hands the array out without copying one either: opening a page and listing its elements
/// costs one small hash entry per element instead of a record moved into a dictionary and
/// copied out again. An erase or a reorder gives the table an explicit order; slots move by
/// at most one record per removal, so no operation costs more than a scan of 4-byte slot
/// numbers.
///
/// A listing open starts the table from a version-5 snapshot's records not parsed yet
/// (`UnbuiltRecords`, page-snapshot.md [SNAP-46]): they take the first slots,
/// `0 ..< prefix.count`, and `slots` holds the records after them. Counting, listing ids,
/// looking ids up and adding on top read only their ids and top key. Reading them can fail
/// (a file whose records do not decode), so the table's holder reads them through
/// `buildUnbuilt()`, which throws, before any other use; reading a record then gives the
/// records built (once, shared by copies), and any other change first moves them into
/// `slots` (`flatten`), which keeps every slot number.
struct ElementTable: Sendable {
    /// The records past the unbuilt prefix (every record when there is none): slot `s` is
    /// `slots[s - prefixCount]`.
    private(set) var slots: [ElementRecord]
    /// The snapshot's records not built yet, in slots `0 ..< prefixCount`, in z order.
    private var prefix: UnbuiltRecords?
    /// The id → slot table, or nil until an id is first looked up. Shared by copies of the
    /// table until one of them changes (then that one takes its own, `mutableIndex`).
    private var index: SlotIndex
    /// Slots bottom to top; nil when that is `0 ..< slots.count`.
    private var order: [Int32]?
    /// Slots of records inserted during a batch below the top, not yet in `order`: placed
    /// all at once by `settle()` (a sort and one merge) rather than each by an insertion
    /// moving every slot above it. Empty outside a batch; `order` is non-nil while not.
    private var unplaced: [Int32] = []

    /// A table of `ordered`, which MUST be sorted by `ElementRecord.zLess` with unique ids,
    /// with room for `reserving` more records (those a log tail is about to add: growing the
    /// array later moves every record to new memory).
    ///
    /// With `unbuilt` (then `ordered` MUST be empty), the table starts from those records,
    /// built when first read.
    init(ordered: consuming [ElementRecord], reserving: Int = 0, unbuilt: UnbuiltRecords? = nil) {
        var records: [ElementRecord] = []
        swap(&records, &ordered)
        precondition(unbuilt == nil || records.isEmpty, "an unbuilt prefix under built records")
        if records.capacity < records.count + reserving { records.reserveCapacity(records.count + reserving) }
        self.slots = records
        self.prefix = unbuilt
        self.index = SlotIndex()
        self.order = nil
    }

    /// How many slots the unbuilt prefix takes (0 without one).
    private var prefixCount: Int { prefix?.count ?? 0 }

    /// The id → slot table of the prefix's ids and `slots` (what `index` holds once built).
    private static func table(prefix: UnbuiltRecords?, slots: [ElementRecord]) -> OpIDTable {
        let p = prefix?.count ?? 0
        let n = p + slots.count
        var t = OpIDTable(minimumCapacity: n + n / 4 + 16)
        if let prefix {
            prefix.ids.withUnsafeBufferPointer { b in
                for i in b.indices { t.set(b[i], Int32(i)) }
            }
        }
        // Through the buffer: reading an id does not copy (retain and release) its record.
        slots.withUnsafeBufferPointer { b in
            for i in b.indices { t.set(b[i].id, Int32(p + i)) }
        }
        return t
    }

    /// The slot of a live element (builds the id table the first time).
    private func slot(of id: ElementID) -> Int32? {
        index.table.withLock { t in
            if t == nil { t = Self.table(prefix: prefix, slots: slots) }
            return t![id]
        }
    }

    /// The record in slot `s` (builds the prefix's records the first time one of them is read).
    private func record(slot s: Int) -> ElementRecord {
        let p = prefixCount
        return s < p ? prefix!.records[s] : slots[s - p]
    }

    /// The id of the record in slot `s` (builds nothing).
    private func id(slot s: Int) -> ElementID {
        let p = prefixCount
        return s < p ? prefix!.ids[s] : slots[s - p].id
    }

    /// Moves the prefix's records into `slots` (built if they were not), ahead of those
    /// already there: every slot keeps its number, so the id table and the order stay right.
    /// Nothing when there is no prefix.
    private mutating func flatten() {
        guard var unbuilt = prefix.take() else { return }
        var all = UnbuiltRecords.take(&unbuilt)
        let n = all.count + slots.count
        if all.capacity < n + n / 4 + 64 { all.reserveCapacity(n + n / 4 + 64) }
        all.append(contentsOf: slots)
        slots = all
    }

    /// Runs `change` on this table's own id table (built if `build`, else left nil when not
    /// built yet: a later lookup builds it from the slots). A table shared with a copy is
    /// copied first.
    private mutating func mutableIndex<R>(build: Bool, _ change: (inout OpIDTable?) -> R) -> R {
        if !isKnownUniquelyReferenced(&index) {
            index = SlotIndex(index.table.withLock { $0 })
        }
        let current = slots, unbuilt = prefix
        return index.table.withLock { t in
            if build && t == nil { t = Self.table(prefix: unbuilt, slots: current) }
            return change(&t)
        }
    }

    var count: Int { prefixCount + slots.count }

    /// Decodes the points of every record read with them deferred ([SNAP-38]).
    mutating func resolvePoints() throws {
        flatten()
        try DeferredPoints.resolve(&slots)
    }

    subscript(id: ElementID) -> ElementRecord? {
        guard let s = slot(of: id) else { return nil }
        return record(slot: Int(s))
    }

    func contains(_ id: ElementID) -> Bool { slot(of: id) != nil }

    /// The records bottom to top. Without a copy when the slots are in z order.
    var ordered: [ElementRecord] {
        assert(unplaced.isEmpty, "ElementTable read in z order during a batch")
        let all = prefix.map { $0.records + slots } ?? slots
        guard let order else { return all }
        return order.map { all[Int($0)] }
    }

    /// The ids bottom to top (without building the prefix's records).
    var orderedIDs: [ElementID] {
        assert(unplaced.isEmpty, "ElementTable read in z order during a batch")
        guard let order else { return (prefix?.ids ?? []) + slots.map(\.id) }
        return order.map { id(slot: Int($0)) }
    }

    /// The z position (0 = bottom) of a live element.
    func position(of id: ElementID) -> Int? {
        assert(unplaced.isEmpty, "ElementTable read in z order during a batch")
        guard let s = slot(of: id) else { return nil }
        guard let order else { return Int(s) }
        return order.firstIndex(of: s)
    }

    /// The record at z position `i` (0 = bottom).
    func record(atPosition i: Int) -> ElementRecord {
        assert(unplaced.isEmpty, "ElementTable read in z order during a batch")
        return record(slot: order.map { Int($0[i]) } ?? i)
    }

    /// Changes a live record in place (its id and z key MUST NOT change: use `reposition`).
    /// False when `id` is not live.
    @discardableResult
    mutating func update(_ id: ElementID, _ change: (inout ElementRecord) -> Void) -> Bool {
        guard let s = slot(of: id) else { return false }
        flatten()
        change(&slots[Int(s)])
        return true
    }

    /// True when `r` goes above the record at z position `i` (compared in place, without a
    /// copy of that record).
    private func isAbove(_ r: ElementRecord, position i: Int) -> Bool { isAbove(r.z.value, r.id, position: i) }

    /// True when key `z` and id `id` go above the record at z position `i`.
    private func isAbove(_ z: ZKey, _ id: ElementID, position i: Int) -> Bool {
        let s = order.map { Int($0[i]) } ?? i
        let p = prefixCount
        if s < p {
            let unbuilt = prefix!
            // The prefix's top without building its records (what adding on top asks).
            if s == p - 1 { return ZKey.positionLess(unbuilt.top.z, unbuilt.top.id, z, id) }
            return unbuilt.records.withUnsafeBufferPointer { b in ZKey.positionLess(b[s].z.value, b[s].id, z, id) }
        }
        // The keys and ids, not the records, are handed over: a record passed whole is copied.
        return slots.withUnsafeBufferPointer { b in ZKey.positionLess(b[s - p].z.value, b[s - p].id, z, id) }
    }

    /// True when a record with key `z` and id `id` would go on top of every record (between
    /// batches: nothing unplaced).
    func goesOnTop(_ z: ZKey, _ id: ElementID) -> Bool {
        assert(unplaced.isEmpty, "ElementTable read in z order during a batch")
        return count == 0 || isAbove(z, id, position: count - 1)
    }

    /// True while the table starts from records not parsed yet ([SNAP-46]): until they are
    /// moved into `slots`, whether or not they were built since.
    var hasUnbuilt: Bool { prefix != nil }

    /// Reads the records not parsed yet, when there are some and they were not read: their
    /// source of deferred points (nil when there is nothing to read or no point to defer).
    /// Once it returned, every reader of the table may read them.
    /// - Throws: `corrupt`, naming the snapshot and the byte offset, when they do not decode
    ///   or do not match what the open listed ([SNAP-46]).
    @discardableResult
    func buildUnbuilt() throws -> DeferredPoints? {
        guard let prefix else { return nil }
        return try prefix.build().source
    }

    /// Inserts a record whose id is not live, where its position puts it.
    /// (Consumed: the record moves into its slot without a copy of its arrays' references.)
    /// With `deferring` (a batch, ended by `settle()`), a record that does not go on top is
    /// only noted, and placed in the z order with the batch's others when it settles.
    mutating func insert(deferring: Bool = false, _ r: consuming ElementRecord) {
        let s = Int32(count)
        let id = r.id
        if !unplaced.isEmpty {
            // Some records wait: the top is not known without them; this one waits too.
            slots.append(r)
            mutableIndex(build: false) { $0?.set(id, s) }
            unplaced.append(s)
            return
        }
        if count == 0 || isAbove(r, position: count - 1) {
            slots.append(r)
            mutableIndex(build: false) { $0?.set(id, s) }
            order?.append(s)
            return
        }
        // Below the top: the records are needed where they are (the slot numbers do not change).
        flatten()
        if deferring {
            if order == nil { order = Array(0 ..< s) }
            slots.append(r)
            mutableIndex(build: false) { $0?.set(id, s) }
            unplaced.append(s)
            return
        }
        var o = order ?? Array(0 ..< s)
        // Taken out, not shared: inserting into an order still held here would copy it whole.
        order = nil
        var lo = 0, hi = o.count
        slots.withUnsafeBufferPointer { b in
            // By key and id in place, not by record (a record handed over is copied).
            while lo < hi {
                let mid = (lo + hi) / 2
                let m = Int(o[mid])
                if ZKey.positionLess(b[m].z.value, b[m].id, r.z.value, r.id) { lo = mid + 1 } else { hi = mid }
            }
        }
        slots.append(r)
        mutableIndex(build: false) { $0?.set(id, s) }
        o.insert(s, at: lo)
        order = o
    }

    /// `insert` of `make(0)`, `make(1)`, … `make(count - 1)` in turn (ids not live and
    /// distinct). While the table has no id table yet and its slots are in z order, a record
    /// that goes on top (a stroke added in order, the usual case) is only appended: no id
    /// table to update, checked once for the whole run rather than once per record.
    mutating func insert(count: Int, _ make: (Int) -> ElementRecord) {
        if !isKnownUniquelyReferenced(&index) { index = SlotIndex(index.table.withLock { $0 }) }
        let unindexed = index.table.withLock { $0 == nil }
        for k in 0..<count {
            let r = make(k)
            // (`self.count`: the table's, not the records to insert.)
            if unindexed && order == nil && (self.count == 0 || isAbove(r, position: self.count - 1)) {
                slots.append(consume r)
            } else {
                insert(consume r)
            }
        }
    }

    /// Places the records a batch left unplaced ([`insert(deferring:_:)`]) in the z order:
    /// a few each by a binary search, many sorted among themselves and merged with the order
    /// in one pass. Records are compared by key and id in place (a record handed over whole
    /// is copied: its arrays retained and released).
    mutating func settle() {
        guard !unplaced.isEmpty else { return }
        flatten()
        var added = unplaced
        unplaced = []
        var o = order ?? Array(0 ..< Int32(slots.count - added.count))
        order = nil
        let many = added.count > 16
        slots.withUnsafeBufferPointer { b in
            func less(_ x: Int32, _ y: Int32) -> Bool {
                ZKey.positionLess(b[Int(x)].z.value, b[Int(x)].id, b[Int(y)].z.value, b[Int(y)].id)
            }
            guard many else {
                for s in added {
                    var lo = 0, hi = o.count
                    while lo < hi {
                        let mid = (lo + hi) / 2
                        if less(o[mid], s) { lo = mid + 1 } else { hi = mid }
                    }
                    o.insert(s, at: lo)
                }
                return
            }
            added.sort(by: less)
            var out: [Int32] = []
            out.reserveCapacity(o.count + added.count)
            var i = 0, j = 0
            while i < o.count || j < added.count {
                if j == added.count || (i < o.count && less(o[i], added[j])) {
                    out.append(o[i]); i += 1
                } else {
                    out.append(added[j]); j += 1
                }
            }
            o = out
        }
        order = many && o.elementsEqual(0 ..< Int32(o.count)) ? nil : o
    }

    /// Removes a live record and returns it; nil when `id` is not live.
    mutating func remove(_ id: ElementID) -> ElementRecord? {
        settle()
        flatten()
        guard let s = mutableIndex(build: true, { $0!.removeValue(forKey: id) }) else { return nil }
        let last = Int32(slots.count - 1)
        if order == nil && s == last {
            return slots.removeLast()
        }
        var o = order ?? Array(0 ... last)
        order = nil
        removalWork &+= o.count
        // Take the slot out of the order, then let the last record fill its slot.
        o.remove(at: o.firstIndex(of: s)!)
        let removed: ElementRecord
        if s == last {
            removed = slots.removeLast()
        } else {
            let moved = slots.removeLast()
            removed = slots[Int(s)]
            let movedID = moved.id
            slots[Int(s)] = moved
            mutableIndex(build: true) { $0!.set(movedID, s) }
            o[o.firstIndex(of: last)!] = s
        }
        order = o.elementsEqual(0 ..< Int32(o.count)) ? nil : o
        return removed
    }

    /// Removes the live records of `ids` (distinct) together and returns them, in the order of
    /// `ids` (nil for an id not live). What `remove` of each in turn gives, for one pass over
    /// the order instead of one per record: an erase or a reorder of k of a page's E elements
    /// cost k·E ([MERGE-21], [MERGE-15]; a 50,000-element reorder took 0.8 s).
    mutating func remove(all ids: [ElementID]) -> [ElementRecord?] {
        guard ids.count > 8 else { return ids.map { remove($0) } }
        settle()
        flatten()
        let n = slots.count
        var taken: [(at: Int, slot: Int32)] = []
        mutableIndex(build: true) { t in
            for (k, id) in ids.enumerated() {
                if let s = t!.removeValue(forKey: id) { taken.append((k, s)) }
            }
        }
        var out = [ElementRecord?](repeating: nil, count: ids.count)
        guard !taken.isEmpty else { return out }
        var gone = [Bool](repeating: false, count: n)
        for (k, s) in taken {
            out[k] = slots[Int(s)]
            gone[Int(s)] = true
        }
        removalWork &+= n
        // The slots keep no holes: each hole below the new end takes a record from above it.
        let end = n - taken.count
        var moved: [Int32: Int32] = [:]
        var from = n - 1
        for hole in taken.map({ Int($0.slot) }).sorted() where hole < end {
            while gone[from] { from -= 1 }
            let id = slots[from].id
            slots.swapAt(hole, from)
            moved[Int32(from)] = Int32(hole)
            mutableIndex(build: true) { $0!.set(id, Int32(hole)) }
            from -= 1
        }
        slots.removeLast(taken.count)
        let o = (order ?? Array(0 ..< Int32(n))).compactMap { s -> Int32? in
            gone[Int(s)] ? nil : (moved[s] ?? s)
        }
        order = o.elementsEqual(0 ..< Int32(o.count)) ? nil : o
        return out
    }

    /// Slots of the z order scanned by removals (kept for tests to bound the work).
    private(set) var removalWork = 0

    /// Changes a live record in a way that may move it in z order.
    mutating func reposition(_ id: ElementID, _ change: (inout ElementRecord) -> Void) {
        guard var r = remove(id) else { return }
        change(&r)
        insert(r)
    }
}

/// The id → slot table of an `ElementTable`, built on first lookup. A class, so that a
/// lookup (which does not change the table) can build it; its lock makes that safe for copies
/// of a table read from several threads. Copies share it until one changes (`mutableIndex`).
final class SlotIndex: Sendable {
    let table: Mutex<OpIDTable?>
    init(_ table: OpIDTable? = nil) { self.table = Mutex(table) }
}
