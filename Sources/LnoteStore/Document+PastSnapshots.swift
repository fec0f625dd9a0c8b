import Foundation
import LnoteModel
import LnoteReplication

/// Past snapshots ([PKG-98]): copies of some of a page's earlier snapshots, kept so that
/// time travel (merge-semantics.md §6) starts from a state near the moment asked for instead
/// of replaying the log from its start. Derived data, like thumbnails: never synced, never
/// the source of truth, removable at any time.
extension PackagePaths {
    public static let pastSuffix = ".past"

    /// `pages/<page>.<total>.past`: a page snapshot whose state's clock covers `total`
    /// operations.
    public func past(_ p: PageID, total: UInt64) -> String { "\(pages)/\(p).\(total)\(PackagePaths.pastSuffix)" }

    /// The page and operation total a past snapshot's file name holds (the total in decimal,
    /// without leading zeros), or nil for any other name.
    public static func pastName(_ name: String) -> (page: PageID, total: UInt64)? {
        guard name.hasSuffix(pastSuffix) else { return nil }
        let stem = name.dropLast(pastSuffix.count)
        guard let dot = stem.lastIndex(of: "."), let page = PageID(String(stem[..<dot])) else { return nil }
        let digits = stem[stem.index(after: dot)...]
        guard let total = UInt64(digits), String(total) == digits else { return nil }
        return (page, total)
    }
}

extension Document {
    /// [PKG-98] A snapshot is kept as a past snapshot when it covers at least this many more
    /// operations than the newest one kept.
    static let pastSpacing: UInt64 = 1024
    /// [PKG-98] At most this many past snapshots per page.
    static let pastKept = 8

    /// The incarnation of a page's log: past snapshots of another one are not used.
    func logIncarnation(_ pid: PageID) throws -> UInt64 {
        try locked { try loadedPageDeferred(pid).log.incarnation }
    }

    /// The totals of a page's past snapshots on disk, ascending.
    func pastTotals(_ pid: PageID) throws -> [UInt64] {
        try io.listDirectory(paths.pages).compactMap { name -> UInt64? in
            guard !DurableFile.isTemporaryName(name), let (p, t) = PackagePaths.pastName(name), p == pid else { return nil }
            return t
        }.sorted()
    }

    /// [PKG-98] After `bytes`, a snapshot whose state covers `total` operations, was written
    /// for a log of `incarnation`: keeps a copy when it is at least `pastSpacing` operations
    /// past the newest one kept, then, over `pastKept`, removes the one whose going leaves the
    /// smallest gap between its neighbours (never the oldest or the newest; the lowest total
    /// on a tie), so the spacing grows with age. Past snapshots that cannot be of this log
    /// as it is (a total above `total`, or the newest naming another incarnation: the log was
    /// replaced since) are removed first. Best effort, like a thumbnail: derived data never
    /// makes a save fail (only a simulated crash goes through).
    func keepPast(_ pid: PageID, total: UInt64, incarnation: UInt64, bytes: [UInt8]) throws {
        // Below the spacing there is nothing to keep, and nothing read (a package being
        // created writes its first snapshots before its directory has its final name).
        guard total >= Document.pastSpacing else { return }
        do {
            var totals = try pastTotals(pid)
            let stale = totals.contains { $0 > total }
                || totals.last.map { pastIncarnation(pid, total: $0) != incarnation } ?? false
            if stale {
                try removePasts(pid)
                totals = []
            }
            if let last = totals.last, total <= last || total - last < Document.pastSpacing { return }
            try DurableFile.replace(paths.past(pid, total: total), with: bytes, io: io)
            totals.append(total)
            guard totals.count > Document.pastKept else { return }
            while totals.count > Document.pastKept {
                var drop = 1
                for i in 1..<(totals.count - 1) where totals[i + 1] - totals[i - 1] < totals[drop + 1] - totals[drop - 1] { drop = i }
                try io.unlink(paths.past(pid, total: totals[drop]), missingOK: true)
                totals.remove(at: drop)
            }
            try DurableFile.syncDirectory(paths.pages, io: io)
        } catch where io.faults?.hasCrashed != true {
            return
        }
    }

    /// The log incarnation a past snapshot's header names (unchecked; nil when unreadable).
    private func pastIncarnation(_ pid: PageID, total: UInt64) -> UInt64? {
        guard let fd = try? io.open(paths.past(pid, total: total), O_RDONLY) else { return nil }
        defer { try? fd.close() }
        guard let head = try? io.pread(fd, count: PageSnapshot.headerSize, at: 0) else { return nil }
        return PageSnapshot.peekCoverage(head)?.incarnation
    }

    /// Removes every past snapshot of a page ([PKG-98]): its log was replaced, or the state
    /// they were taken from was refused (a checkpoint that did not check, [SYNC-59]).
    func removePasts(_ pid: PageID) throws {
        let totals = try pastTotals(pid)
        guard !totals.isEmpty else { return }
        for t in totals { try io.unlink(paths.past(pid, total: t), missingOK: true) }
        try DurableFile.syncDirectory(paths.pages, io: io)
    }

    /// The latest past snapshot a moment can start from ([MERGE-82], [PKG-98]): of this page,
    /// of the log's current incarnation, its clock covered by `cut` (and covering `base`, a
    /// checkpoint base, when there is one). Read through the one snapshot decoder, with every
    /// point (reading them deferred and checking them after measured slower) unless the
    /// moment is asked for with its points deferred; one that does not decode, or does not
    /// fit, is passed over (`verify` reports it).
    func pastStart(_ pid: PageID, cut: VectorClock, incarnation: UInt64, base: VectorClock?,
                   deferringPoints: Bool = false) throws -> PageState? {
        let limit = cut.total
        for total in try pastTotals(pid).reversed() where total <= limit {
            let path = paths.past(pid, total: total)
            // Room for the adds above it (at most every operation between it and the moment).
            let room = Int(min(limit - total, 1 << 16))
            guard let bytes = try DurableFile.readIfExists(path, io: io),
                  let s = try? PageSnapshot.decode(bytes, path: path, deferringPoints: deferringPoints, reserving: room)
            else { continue }
            guard s.state.page == pid, s.logIncarnation == incarnation, s.state.clock.total == total, !s.lacksEraseHistory,
                  cut.covers(s.state.clock), base.map({ s.state.clock.covers($0) }) ?? true else { continue }
            return s.state
        }
        return nil
    }
}
