import LnoteModel

/// A page's tombstones ([MERGE-30]: never dropped), by id.
///
/// One array, in the order the tombstones came (a snapshot's, sorted by id, then those of the
/// erases applied since), found through an `OpIDTable`. Opening a page with many erased
/// elements moves the decoded array in whole, without a tombstone copied or an id hashed by
/// SipHash, and `sorted` hands it back out without a copy while no erase has come out of id
/// order (a `Dictionary` copied every tombstone in, and sorted them all out again).
struct TombstoneTable: Sendable {
    private var list: [Tombstone]
    private var slotOf: OpIDTable
    /// True while `list` is sorted by id.
    private var inOrder: Bool

    /// A table of `tombstones` (a `PageState`'s: sorted by id when it comes from a snapshot or a
    /// replica; a state built by hand may not be). Ids MUST be unique.
    init(sorted tombstones: consuming [Tombstone]) {
        var list: [Tombstone] = []
        swap(&list, &tombstones)
        var slotOf = OpIDTable(minimumCapacity: list.count)
        var inOrder = true
        // Through the buffer: reading an id does not copy (retain and release) its tombstone.
        list.withUnsafeBufferPointer { b in
            for i in b.indices {
                precondition(!slotOf.contains(b[i].id), "tombstone \(b[i].id) given twice")
                if i > 0, !(b[i - 1].id < b[i].id) { inOrder = false }
                slotOf.set(b[i].id, Int32(i))
            }
        }
        self.list = list
        self.slotOf = slotOf
        self.inOrder = inOrder
    }

    var isEmpty: Bool { list.isEmpty }

    /// The tombstone of `id`. Setting one stores it, in place of the one there or as a new one
    /// (a tombstone is never removed: setting nil is a programming error).
    subscript(id: ElementID) -> Tombstone? {
        get {
            guard let s = slotOf[id] else { return nil }
            return list[Int(s)]
        }
        set {
            guard let t = newValue else { preconditionFailure("tombstone \(id) removed") }
            precondition(t.id == id, "tombstone \(t.id) stored as \(id)")
            if let s = slotOf[id] {
                list[Int(s)] = t
            } else {
                if let last = list.last, !(last.id < id) { inOrder = false }
                slotOf.set(id, Int32(list.count))
                list.append(t)
            }
        }
    }

    /// Changes the tombstone of `id` in place (no copy of it, or of what it holds, is made);
    /// nil when there is none.
    @discardableResult
    mutating func modify<R>(_ id: ElementID, _ change: (inout Tombstone) throws -> R) rethrows -> R? {
        guard let s = slotOf[id] else { return nil }
        return try change(&list[Int(s)])
    }

    /// Changes every tombstone for which `change` returns a new value (in place).
    mutating func update(_ change: (Tombstone) throws -> Tombstone?) rethrows {
        for i in list.indices {
            if let t = try change(list[i]) { list[i] = t }
        }
    }

    /// Every tombstone, sorted by id: the array itself while it is in order.
    var sorted: [Tombstone] {
        inOrder ? list : list.sorted { $0.id < $1.id }
    }
}
