import Foundation
import LnoteModel
import LnoteReplication

extension Document {
    // MARK: - Points decoded on first use ([PKG-42], page-snapshot.md [SNAP-38])

    /// A loaded page whose strokes all have their points: a page is loaded with the points
    /// of its snapshot and of its log tail deferred, and they are decoded (on every core) the
    /// first time something reads them. Points that turn out damaged then are handled as
    /// damage found at load ([PKG-42]): `setAsideDamagedPoints`.
    func resolvedPage(_ pid: PageID, allowUnknown: Bool = false) throws -> LoadedPage {
        let lp = try loadedPage(pid, allowUnknown: allowUnknown)
        guard !lp.replica.isResolved else { return lp }
        do {
            try lp.replica.resolve()
            return lp
        } catch let e as LnoteError where e.code == .corrupt {
            return try locked {
                if pages[pid] === lp { try setAsideDamagedPoints(lp, e) }
                let rebuilt = try loadedPage(pid, allowUnknown: allowUnknown)
                try rebuilt.replica.resolve()
                return rebuilt
            }
        }
    }

    /// Resolves a page's points before its snapshot is written. False when they were damaged:
    /// the page was then set aside (`setAsideDamagedPoints`), its next use loads it again, and
    /// the caller's `lp` is no longer the loaded page.
    func resolveForSnapshot(_ lp: LoadedPage) throws -> Bool {
        guard !lp.replica.isResolved else { return true }
        do {
            try lp.replica.resolve()
            return true
        } catch let e as LnoteError where e.code == .corrupt {
            try setAsideDamagedPoints(lp, e)
            return false
        }
    }

    /// A page whose deferred points do not decode ([SNAP-38], [LOG-27]): its log is synced
    /// and the page forgotten, to be loaded again with every point decoded at load. That
    /// load finds the damage where an eager load always did and handles it the same way: a
    /// damaged snapshot is quarantined and the page rebuilt from its log ([PKG-42]), a
    /// damaged frame is reported and skipped as undecodable. The error found here is kept in
    /// the handle's recovery reports.
    func setAsideDamagedPoints(_ lp: LoadedPage, _ damage: LnoteError) throws {
        precondition(lockDepth > 0, "setting a page aside needs the document lock")
        try syncNow(.page(lp.id), lp.log)
        var report = RecoveryReport(path: damage.path ?? paths.content(lp.id))
        report.problems.append(damage)
        reports.append(report)
        eagerPages.insert(lp.id)
        snapshotCounts[lp.id] = nil
        if pages[lp.id] === lp {
            pages[lp.id] = nil
            try lp.log.close()
        }
    }
}
