import Foundation
import LnoteModel
import LnoteReplication

extension Document {
    // MARK: - Points decoded on first use ([PKG-42], page-snapshot.md [SNAP-38])

    /// A loaded page, up to date with its log, whose strokes all have their points.
    ///
    /// A page is loaded with the points of its snapshot and of its log tail deferred only to
    /// be listed (`loadedPageDeferred`: `openPage`, `elementIDs`, `element(_:on:)`); loaded
    /// here, it is read eagerly. Everything else — its elements and state, an edit made on
    /// it, its clock offered to a peer, operations received into it, a checkpoint, a
    /// snapshot — first decodes and checks every point (chunks and frames on every core): a
    /// deferred operation whose points turn out damaged must not be built on, offered or
    /// compared before the load that would have rejected it has. Damage found here is
    /// handled as at any load (`setAsideDamagedPoints`).
    func loadedPage(_ pid: PageID, allowUnknown: Bool = false) throws -> LoadedPage {
        // A page not loaded yet is loaded eagerly: its points are needed now, and one pass
        // over the records costs less than a structural pass and a decode after it.
        let lp = try loadedPageDeferred(pid, allowUnknown: allowUnknown, deferring: false)
        guard !lp.replica.isResolved else { return lp }
        do {
            let unparsed = lp.replica.hasUnbuiltRecords
            try lp.replica.resolve()
            // The images of records a listing open left unparsed ([SNAP-46]), as an eager open
            // notes those of its snapshot.
            if unparsed { noteAssets(Set(lp.replica.elements.compactMap(\.content.image?.asset)), page: pid) }
            return lp
        } catch let e as LnoteError where e.code == .corrupt {
            return try locked {
                try setAsideDamagedPoints(pid)
                let reloaded = try loadedPageDeferred(pid, allowUnknown: allowUnknown, deferring: false)
                try reloaded.replica.resolve()  // loaded eagerly: nothing left to decode
                return reloaded
            }
        }
    }

    /// Resolves a page's points before its snapshot is written. False when they were damaged:
    /// the page was then set aside, nothing is written, and its next use loads it again
    /// eagerly (which quarantines a damaged snapshot or reports a damaged frame, [PKG-42]);
    /// its log holds every operation it applied. Not loaded again here: this runs inside
    /// eviction and close, which walk the loaded pages.
    func resolveForSnapshot(_ lp: LoadedPage) throws -> Bool {
        guard !lp.replica.isResolved else { return true }
        do {
            try lp.replica.resolve()
            return true
        } catch let e as LnoteError where e.code == .corrupt {
            try setAsideDamagedPoints(lp.id)
            return false
        }
    }

    /// A page whose deferred points do not decode ([SNAP-38], [LOG-27]): its log is synced
    /// and the page forgotten, and it is marked to be loaded again with every point decoded
    /// at load. That load finds the damage where an eager load always did and handles it the
    /// same way, with the same report: a damaged snapshot is quarantined and the page rebuilt
    /// from its log ([PKG-42]), a damaged frame reported and skipped as undecodable.
    func setAsideDamagedPoints(_ pid: PageID) throws {
        precondition(lockDepth > 0, "setting a page aside needs the document lock")
        eagerPages.insert(pid)
        snapshotCounts[pid] = nil
        guard let lp = pages[pid], !lp.replica.isResolved else { return }
        try syncNow(.page(pid), lp.log)
        pages[pid] = nil
        try lp.log.close()
        // What a subscriber listed may change when the page is loaded again (a damaged frame's
        // stroke dropped, the page rebuilt from its log): read it again.
        hub.publish([Change(kind: .reloaded, origin: .merge, document: id, page: pid)])
    }
}
