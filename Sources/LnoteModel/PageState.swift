/// A last-writer-wins register that remembers which writes were concurrent.
///
/// `frontier` holds the causally maximal operations that wrote the register (those no
/// later write has seen), sorted ascending by `OpRef`; the last one is the winner and
/// `value` is what it wrote. An empty frontier means the register still holds the value
/// it was created with. More than one entry means concurrent writes: a conflict to report.
public struct LWWRegister<Value: Hashable & Sendable>: Hashable, Sendable {
    public var value: Value
    /// The frontier as kept (indexed when large); `frontier` reads it as a list.
    package var writes: Frontier
    public var frontier: [OpRef] {
        get { writes.refs }
        set { writes = Frontier(newValue) }
    }
    public init(_ value: Value, frontier: [OpRef] = []) {
        self.value = value
        self.writes = Frontier(frontier)
    }
    public var winner: OpRef? { writes.last }
    public var isConflicted: Bool { writes.count > 1 }
}

/// One live element of a page with its replication metadata.
public struct ElementRecord: Hashable, Sendable {
    /// The id of the operation that added it.
    public var id: ElementID
    /// The Lamport timestamp of the add operation.
    public var lamport: UInt64
    /// Author's wall-clock time of the add, ms since 1970 (informational, never compared).
    public var wallTime: Int64
    public var content: ElementContent
    public var transform: LWWRegister<Transform>
    public var z: LWWRegister<ZKey>
    /// Erased point ranges (normalized union), for strokes: what `rangeErasures` and
    /// `rangeRestores` leave erased ([MERGE-20], [MERGE-71], `RangeHistory.erased`).
    public var erased: [PointRange]
    /// Each partial erase applied to the stroke with its ranges (clamped to the stroke), sorted
    /// by ref ([MERGE-71]). A page read from a snapshot written before `rangeRestores` existed
    /// holds, for each, the ranges of it that no restore had taken back (what is left of an
    /// erase taken back whole is not listed): the same erased points, now and after any later
    /// operation.
    public var rangeErasures: [RangeErasure]
    /// Each range restore applied to the stroke that can take something back, sorted by ref
    /// ([MERGE-71], page-snapshot.md [SNAP-44]).
    public var rangeRestores: [RangeRestore]
    /// The causally maximal move, reorder and partial-erase operations on the element, all
    /// kinds together (sorted). Kept so that a later whole erase can tell, whatever the
    /// delivery order, which edits it was concurrent with.
    public var frontier: [OpRef] {
        get { edits.refs }
        set { edits = Frontier(newValue) }
    }
    /// `frontier` as kept (indexed when large).
    package var edits: Frontier

    public init(id: ElementID, lamport: UInt64, wallTime: Int64, content: ElementContent,
                transform: LWWRegister<Transform> = LWWRegister(.identity), z: LWWRegister<ZKey>,
                erased: [PointRange] = [], frontier: [OpRef] = [], rangeErasures: [RangeErasure] = [],
                rangeRestores: [RangeRestore] = []) {
        self.id = id
        self.lamport = lamport
        self.wallTime = wallTime
        self.content = content
        self.transform = transform
        self.z = z
        self.erased = erased
        self.edits = Frontier(frontier)
        self.rangeErasures = rangeErasures
        self.rangeRestores = rangeRestores
    }

    /// The record of a stroke a plain add made ([LOG-28]): its Lamport timestamp its counter,
    /// identity transform, no history. Built here, where the registers' type is concrete: from
    /// another module the generic `LWWRegister.init` looks its type up at run time, once per
    /// stroke of a replayed log.
    package init(plainAdd id: ElementID, wallTime: Int64, stroke: consuming Stroke, z: ZKey) {
        self.init(id: id, lamport: id.counter, wallTime: wallTime, content: .stroke(stroke), z: LWWRegister(z))
    }

    public var addRef: OpRef { OpRef(id: id, lamport: lamport) }

    /// The visible point fragments of a stroke (its points minus the erased ranges);
    /// an image is one fragment `[0, 0)` when present.
    public var visibleRanges: [PointRange] {
        switch content {
        case .stroke(let s): erased.complement(within: s.pointCount)
        case .image: [PointRange(0, 0)]
        }
    }

    /// A stroke whose every point is erased draws nothing, but stays an element.
    public var isFullyErasedInk: Bool {
        if case .stroke(let s) = content { return erased.complement(within: s.pointCount).isEmpty }
        return false
    }

    /// Bottom-to-top order: the element's position, its z key with its own id as the last
    /// step's tag ([MERGE-11]). Distinct elements never tie.
    public static func zLess(_ l: ElementRecord, _ r: ElementRecord) -> Bool {
        ZKey.positionLess(l.z.value, l.id, r.z.value, r.id)
    }
}

/// One partial erase of a stroke ([MERGE-20]) and its ranges, clamped to the stroke. What of it
/// still holds is those minus the ranges of every range restore that had seen it
/// (`RangeHistory.kept`, [MERGE-71]).
public struct RangeErasure: Hashable, Sendable {
    public var ref: OpRef
    /// Normalized, never empty.
    public var ranges: [PointRange]
    public init(ref: OpRef, ranges: [PointRange]) {
        self.ref = ref
        self.ranges = ranges
    }
}

/// One whole erase of an element: the operation, and its context: the clock of the log at
/// its author just before it, the author's own entry included (`counter − 1`, absent when 0).
public struct Erasure: Hashable, Sendable {
    public var ref: OpRef
    public var clock: VectorClock
    /// The restores that took this erase back, sorted ([MERGE-70]): for each replica, the first
    /// of its restores that had seen the erase (its smallest counter). It holds while empty.
    /// An operation had seen it taken back when its context covers one of them, and a context
    /// that covers a later restore of a replica covers its first: the other restores add
    /// nothing to any answer, and keeping them all made the list grow as the square of a
    /// stroke's erase and undo cycles.
    public var cancelledBy: [OpID]
    public init(ref: OpRef, clock: VectorClock, cancelledBy: [OpID] = []) {
        self.ref = ref
        self.clock = clock
        self.cancelledBy = cancelledBy
    }

    /// True while no restore that had seen it took it back.
    public var holds: Bool { cancelledBy.isEmpty }

    /// `ids` sorted, keeping for each replica only its smallest counter: the `cancelledBy` a
    /// list of every restore that took the erase back reduces to ([MERGE-70], page-snapshot.md
    /// [SNAP-40]: snapshots written before the rule hold whole lists).
    public static func firstRestores<S: Sequence>(_ ids: S) -> [OpID] where S.Element == OpID {
        var out: [OpID] = []
        for id in ids.sorted() where out.last?.replica != id.replica { out.append(id) }
        return out
    }
}

/// The erase history of an element that was erased whole at least once ([MERGE-21],
/// [MERGE-70]): enough to ignore late operations on it, to report the operations that were
/// concurrent with an erase, and to bring it back when a restore takes back every erase.
///
/// The element is *erased* while one of its erasures holds; it is then absent from the live
/// elements and `record` keeps it whole (content, registers, ranges), still edited by
/// concurrent operations, for a restore to bring back ([MERGE-30]). Once every erasure is
/// taken back the element is live again, `record` and `frontier` are empty, and the
/// tombstone stays for its history.
public struct Tombstone: Hashable, Sendable {
    public var id: ElementID
    /// The erases (more than one when erased concurrently), sorted by ref.
    public var erasures: [Erasure] {
        get { erasureTable.sorted }
        set { erasureTable = Erasures(newValue) }
    }
    /// `erasures` as kept (in the order they came, indexed when many).
    package var erasureTable: Erasures
    /// While erased: the causally maximal move, reorder, partial-erase and range-restore
    /// operations on the element (all kinds together, sorted), still maintained after the
    /// erase. Those that some holding erasure's clock does not cover were concurrent with it:
    /// the operations the erase won against. Empty while the element is live.
    public var frontier: [OpRef] {
        get { edits.refs }
        set { edits = Frontier(newValue) }
    }
    /// `frontier` as kept (indexed when large).
    package var edits: Frontier
    /// While erased: the element as it would be drawn if restored (its own `frontier` empty:
    /// the tombstone's is the one kept). nil while live, and for an erased element whose
    /// content this replica never held (a page read from a format-2 snapshot of a page
    /// installed from a checkpoint, [MERGE-30]).
    public var record: ElementRecord?
    public init(id: ElementID, erasures: [Erasure], frontier: [OpRef] = [], record: ElementRecord? = nil) {
        self.id = id
        self.erasureTable = Erasures(erasures)
        self.edits = Frontier(frontier)
        self.record = record
    }

    /// True while some erasure holds.
    public var isErased: Bool { erasureTable.holding > 0 }

    /// Frontier operations that at least one holding erasure had not seen.
    public var concurrent: [OpRef] {
        // Not covered by every holding erasure's clock: not covered by their meet.
        let held = erasures.filter(\.holds)
        guard let first = held.first else { return [] }
        let seenByAll = held.dropFirst().reduce(first.clock) { $0.meet($1.clock) }
        return frontier.filter { !seenByAll.covers($0.id) }
    }
}

/// For each replica that wrote to a log: the clock of its latest operation there (its
/// context plus the operation itself), what that replica had seen when it last wrote; and
/// the Lamport timestamp of each of its operations, as runs.
///
/// The clock clears erase conflicts ([MERGE-53]). The timestamps let the merge check that an
/// operation's timestamp exceeds those of the operations its context covers ([MERGE-43]).
public struct ReplicaContext: Hashable, Sendable {
    public var replica: ReplicaID
    public var clock: VectorClock
    /// Runs of counters with the same `lamport − counter`, by increasing `from`: counter `c`
    /// (1 ≤ c ≤ clock[replica]) has `c + offset` of the last run with `from ≤ c`, the greatest
    /// Lamport timestamp among the replica's operations 1…c. The first run starts at 1; two
    /// consecutive runs have different offsets.
    public var lamports: [LamportRun]

    public init(replica: ReplicaID, clock: VectorClock, lamports: [LamportRun] = []) {
        self.replica = replica
        self.clock = clock
        self.lamports = lamports
    }

    /// The greatest Lamport timestamp among this replica's operations 1…`counter`, if recorded.
    public func lamport(of counter: UInt64) -> UInt64? {
        guard counter >= 1, counter <= clock[replica], let first = lamports.first, first.from <= counter else { return nil }
        var lo = 0, hi = lamports.count  // the last run with from <= counter
        while hi - lo > 1 {
            let mid = (lo + hi) / 2
            if lamports[mid].from <= counter { lo = mid } else { hi = mid }
        }
        let (v, overflow) = counter.addingReportingOverflow(lamports[lo].offset)
        return overflow ? nil : v
    }

    /// Records operation `counter` (the next one of this replica) with Lamport timestamp
    /// `lamport`: what is kept for a counter is the greatest timestamp among the replica's
    /// operations up to it ([SNAP-16]), so that one operation with a timestamp below its
    /// predecessor's (which [MERGE-43] ignores) cannot lower what a later check compares with.
    public mutating func recordLamport(_ lamport: UInt64, of counter: UInt64) {
        let previous = counter > 1 ? (self.lamport(of: counter - 1) ?? 0) : 0
        let kept = max(lamport, previous)
        let offset = kept &- counter  // kept ≥ counter: lamport ≥ counter for every valid operation ([LOG-4])
        if lamports.last?.offset != offset { lamports.append(LamportRun(from: counter, offset: offset)) }
    }
}

/// A run of a replica's counters whose Lamport timestamps are `counter + offset`.
public struct LamportRun: Hashable, Sendable {
    public var from: UInt64
    public var offset: UInt64
    public init(from: UInt64, offset: UInt64) {
        self.from = from
        self.offset = offset
    }
}

/// The materialized, replicated state of one page: what a snapshot stores.
///
/// Two replicas that applied the same set of operations hold equal `PageState`s, and the
/// snapshot codec turns equal states into identical bytes.
public struct PageState: Hashable, Sendable {
    public var page: PageID
    /// The operations applied (pending ones excluded).
    public var clock: VectorClock
    /// The greatest Lamport timestamp applied.
    public var maxLamport: UInt64
    /// Greatest author wall time among applied operations (ms since 1970).
    public var modified: Int64
    /// Live elements, bottom to top (sorted by `ElementRecord.zLess`).
    public var elements: [ElementRecord]
    /// Every element ever erased whole, sorted by id ([MERGE-30]: never dropped): those erased
    /// now and those restored since ([MERGE-70]).
    public var tombstones: [Tombstone]
    /// For each replica that wrote to this log, the clock of its latest operation here,
    /// sorted by replica ([MERGE-53]).
    public var contexts: [ReplicaContext]

    public init(page: PageID, clock: VectorClock = VectorClock(), maxLamport: UInt64 = 0, modified: Int64 = 0,
                elements: [ElementRecord] = [], tombstones: [Tombstone] = [], contexts: [ReplicaContext] = []) {
        self.page = page
        self.clock = clock
        self.maxLamport = maxLamport
        self.modified = modified
        self.elements = elements
        self.tombstones = tombstones
        self.contexts = contexts
    }

    /// The assets of the page's images, live and kept by tombstones ([MERGE-30]: a restore may
    /// bring any of them back, so each is referenced).
    public var imageAssets: [AssetID] {
        elements.compactMap(\.content.image?.asset) + tombstones.compactMap { $0.record?.content.image?.asset }
    }

    /// Total points of all live strokes.
    public var pointCount: Int { elements.reduce(0) { $0 + $1.content.pointCount } }

    /// False when some stroke (live, or kept by a tombstone) still has its points deferred ([SNAP-38]).
    public var isResolved: Bool {
        elements.allSatisfy(\.content.isResolved) && tombstones.allSatisfy { $0.record?.content.isResolved ?? true }
    }

    /// The state with every deferred stroke's points decoded and checked ([SNAP-38]), the
    /// chunks of a snapshot decoded on every core. Itself when nothing is deferred.
    /// - Throws: `corrupt`, naming the snapshot and the byte offset of the first record
    ///   (in file order) whose points do not decode.
    public func resolved() throws -> PageState {
        guard !isResolved else { return self }
        var out = self
        try DeferredPoints.resolve(&out.elements)
        for i in out.tombstones.indices {
            guard let r = out.tombstones[i].record, !r.content.isResolved else { continue }
            var kept = [r]
            try DeferredPoints.resolve(&kept)
            out.tombstones[i].record = kept[0]
        }
        return out
    }
}

/// A page's canvas size in tenths of a point.
public struct CanvasSize: Hashable, Sendable, CustomStringConvertible {
    public var width: Int32
    public var height: Int32
    public init(width: Int32, height: Int32) {
        self.width = width
        self.height = height
    }
    /// A4 portrait: 595.3 × 841.9 pt.
    public static let a4 = CanvasSize(width: 5953, height: 8419)
    public var description: String { "\(Quantization.points(width))x\(Quantization.points(height))" }
}
