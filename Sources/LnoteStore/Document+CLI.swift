import LnoteModel
import LnoteReplication

// Two small reads the command-line tool needs and the rest of the API did not offer:
// every conflict of a document whatever pages happen to be loaded, and a compaction that
// says what it folded.

extension Document {
    /// Every conflict of the document: the document-level ones ([MERGE-65]), computed with
    /// the clock of every page (so a page deleted while edited elsewhere is reported even
    /// when it was not loaded), then each page's ([MERGE-50]), pages in document order
    /// (deleted ones included). Loads every page that has files.
    public func allConflicts() throws -> [Conflict] {
        try checkUsable()
        try refreshDocument()
        var clocks: [PageID: VectorClock] = [:]
        var pageConflicts: [Conflict] = []
        for p in doc.state.pages {
            // A page with no files is empty: nothing to load (and nothing to create).
            if pages[p.id] == nil, try !pageHasFiles(p.id) { continue }
            let lp = try loadedPage(p.id)
            clocks[p.id] = lp.replica.clock
            pageConflicts += lp.replica.conflicts()
        }
        return doc.conflicts(pageClocks: clocks) + pageConflicts
    }

    /// Compacts one page now, like `compact(page:)`, and reports what the snapshot took in:
    /// the frames and bytes of log past the offset the old snapshot covered. `written` is
    /// false when the snapshot already matched the page (nothing to do).
    @discardableResult
    public func compactReporting(page pid: PageID) async throws -> PageCompaction {
        try checkUsable()
        if pages[pid] == nil, try !pageHasFiles(pid) {
            // An empty page with no files yet: nothing to fold, and nothing to create.
            guard doc.page(pid) != nil else { throw LnoteError(.notFound, "no page \(pid) in document \(id)", path: paths.root) }
            return PageCompaction(page: pid, frames: 0, bytes: 0, written: false)
        }
        return try locked {
            let lp = try loadedPage(pid)
            var out = PageCompaction(page: pid, frames: lp.framesSinceSnapshot, bytes: lp.bytesSinceSnapshot, written: false)
            if lp.dirty {
                try snapshot(lp)
                // Not written when it had to wait ([PKG-23], a salvage pending, [PKG-38]).
                out.written = !lp.dirty
            }
            return out
        }
    }
}

extension Document {
    /// Scans the page's whole log, not only the part past its snapshot that opening the page
    /// reads, and salvages damage found anywhere in it as opening does ([PKG-38]: the damaged
    /// file kept aside as `.corrupt-N`, the log rewritten with every valid frame, what the
    /// damage took recorded as missing, [PKG-51]). Returns the salvage's report (also in
    /// `recoveryReports`) when the log was rewritten; nil when there was nothing to salvage,
    /// or when the salvage could not be written (a full disk: the report, in
    /// `recoveryReports`, then says `salvagePending` and the log is as it was).
    /// `lnote verify --repair` runs it on every page log (`pageLogs()`).
    @discardableResult
    public func salvageWholeLog(page pid: PageID) async throws -> RecoveryReport? {
        try checkUsable()
        if pages[pid] == nil, try !pageHasFiles(pid) { return nil }
        return try locked {
            // Also the log of a page whose `addPage` has not arrived ([SYNC-84]).
            let lp = try loadedPage(pid, allowUnknown: true)
            let before = reports.count
            _ = try readAllFrames(lp)
            return Document.salvageMade(reports[before...])
        }
    }

    /// `salvageWholeLog(page:)` for `document.log`: damage before the offset `document.json`
    /// covers is salvaged too.
    @discardableResult
    public func salvageWholeDocumentLog() async throws -> RecoveryReport? {
        try checkUsable()
        return try locked {
            let before = reports.count
            _ = try readAllDocumentFrames()
            return Document.salvageMade(reports[before...])
        }
    }

    /// The report of a salvage that rewrote its log, among those just made.
    private static func salvageMade(_ made: ArraySlice<RecoveryReport>) -> RecoveryReport? {
        made.last { $0.newIncarnation != nil && $0.salvagePending == nil }
    }
}

/// What `Document.compactReporting(page:)` did.
public struct PageCompaction: Sendable, Hashable {
    public var page: PageID
    /// Log frames past the old snapshot's covered offset (replayed on every open until now).
    public var frames: Int
    /// Their size in bytes.
    public var bytes: UInt64
    /// True when a new snapshot was written.
    public var written: Bool
}
