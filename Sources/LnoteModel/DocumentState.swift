/// One page of a document as the document log knows it: position, canvas and deletion.
public struct PageRecord: Hashable, Sendable {
    public var id: PageID
    /// The `addPage` operations of this page, sorted ([MERGE-62]): one, unless a page id was
    /// added twice (which only a faulty or hostile replica does). The least is *the* add:
    /// its id is the page's tag in the page order.
    public var adds: [OpRef]
    /// The least author wall time of the adds (ms since 1970).
    public var created: Int64
    /// Written by the adds and by `movePage`.
    public var position: LWWRegister<ZKey>
    /// Written by the adds and by `setCanvas`.
    public var canvas: LWWRegister<CanvasSize>
    /// Deleted pages keep their content and can be restored.
    public var deleted: LWWRegister<Bool>
    /// When deleted: the page-log clock the winning delete had seen. Page operations it
    /// does not cover were concurrent with the delete (a conflict to report).
    public var deletedSeen: VectorClock?

    public init(id: PageID, adds: [OpRef], created: Int64, position: LWWRegister<ZKey>,
                canvas: LWWRegister<CanvasSize>, deleted: LWWRegister<Bool> = LWWRegister(false),
                deletedSeen: VectorClock? = nil) {
        self.id = id
        self.adds = adds
        self.created = created
        self.position = position
        self.canvas = canvas
        self.deleted = deleted
        self.deletedSeen = deletedSeen
    }

    /// The least `addPage` of the page: its id tags the page's position.
    public var added: OpRef { adds[0] }

    /// Document order: the page's position, its position key with `added`'s id as the last
    /// step's tag ([MERGE-62]). Distinct pages never tie.
    public static func orderLess(_ l: PageRecord, _ r: PageRecord) -> Bool {
        ZKey.positionLess(l.position.value, l.added.id, r.position.value, r.added.id)
    }
}

/// The replicated state of a document's metadata: title, page order, deletions.
public struct DocumentState: Hashable, Sendable {
    public var id: DocumentID
    public var clock: VectorClock
    public var maxLamport: UInt64
    /// Wall time of the document's creation (ms since 1970), from its first operation.
    public var created: Int64
    /// Greatest author wall time among document operations.
    public var modified: Int64
    public var title: LWWRegister<String>
    public var deleted: LWWRegister<Bool>
    /// All pages, deleted ones included, in document order.
    public var pages: [PageRecord]
    /// For each replica that wrote to the document log, the clock of its latest operation
    /// there and its operations' Lamport timestamps ([MERGE-43]), sorted by replica.
    public var contexts: [ReplicaContext]

    public init(id: DocumentID, clock: VectorClock = VectorClock(), maxLamport: UInt64 = 0, created: Int64 = 0,
                modified: Int64 = 0, title: LWWRegister<String> = LWWRegister(""),
                deleted: LWWRegister<Bool> = LWWRegister(false), pages: [PageRecord] = [],
                contexts: [ReplicaContext] = []) {
        self.id = id
        self.clock = clock
        self.maxLamport = maxLamport
        self.created = created
        self.modified = modified
        self.title = title
        self.deleted = deleted
        self.pages = pages
        self.contexts = contexts
    }

    /// Pages that are not deleted, in order.
    public var livePages: [PageRecord] { pages.filter { !$0.deleted.value } }
}
