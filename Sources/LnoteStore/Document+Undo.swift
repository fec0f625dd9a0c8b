import Foundation
import LnoteModel
import LnoteReplication

/// Undo, redo, restores and revert (merge-semantics.md [MERGE-70] … [MERGE-76]): every one is
/// new operations, made and merged like any edit; the undo history is this replica's own,
/// kept beside the notebook's metadata ([PKG-100]).
extension Document {
    // MARK: - Groups

    /// Opens an undo group: every edit made through this handle until the matching
    /// `endUndoGroup()` is one undo step (one app action: a selection erased, moved or
    /// imported). Groups nest: only the outermost end closes the step.
    public func beginUndoGroup(_ label: String = "edit") {
        if var g = undoGroup {
            g.depth += 1
            undoGroup = g
        } else {
            undoGroup = (label, 1, [])
        }
    }

    /// Closes the group `beginUndoGroup` opened, recording its edits as one step.
    /// - Throws: `invalidState` when no group is open.
    public func endUndoGroup() throws {
        guard var g = undoGroup else { throw LnoteError(.invalidState, "no undo group is open on document \(id)") }
        g.depth -= 1
        if g.depth > 0 {
            undoGroup = g
            return
        }
        undoGroup = nil
        recordStep(g.label, g.entries, change: .do)
    }

    /// Runs `body` as one undo step (`beginUndoGroup` … `endUndoGroup`, also when it throws:
    /// what it made before the error stays one step). The group belongs to the handle: edits
    /// made through it by any task while `body` runs join the step.
    public func undoGroup<T: Sendable>(_ label: String, _ body: @Sendable () async throws -> T) async throws -> T {
        beginUndoGroup(label)
        do {
            let value = try await body()
            try endUndoGroup()
            return value
        } catch {
            try? endUndoGroup()
            throw error
        }
    }

    // MARK: - Undo and redo

    /// True when `undo()` would change something: some step of this replica's undo stack
    /// still has an effect to take back ([MERGE-74]).
    public var canUndo: Bool { get throws { try firstLiveStep(undoing: true) != nil } }

    /// True when `redo()` would change something.
    public var canRedo: Bool { get throws { try firstLiveStep(undoing: false) != nil } }

    /// Takes back this replica's latest step that others' edits have not overwritten
    /// entirely ([MERGE-74]): new operations (erases, restores, moves, reorders), appended
    /// and merged like any edit. Steps overwritten entirely are dropped on the way. Returns
    /// the step taken back (its entries: what the new operations did and what redoes them),
    /// or nil when there is nothing to undo.
    @discardableResult
    public func undo() async throws -> UndoStep? { try await unwind(undoing: true, page: nil) }

    /// `undo()` of the latest step of this replica that changed page `page` (and whatever
    /// else that step changed): steps of other pages stay where they are on the stack.
    @discardableResult
    public func undo(page: PageID) async throws -> UndoStep? { try await unwind(undoing: true, page: page) }

    /// Does again the step the latest `undo()` took back (what of it others have not
    /// overwritten since). nil when there is nothing to redo. A new edit clears what can be redone.
    @discardableResult
    public func redo() async throws -> UndoStep? { try await unwind(undoing: false, page: nil) }

    /// `redo()` of the latest undone step that changed page `page`.
    @discardableResult
    public func redo(page: PageID) async throws -> UndoStep? { try await unwind(undoing: false, page: page) }

    func unwind(undoing: Bool, page filter: PageID?) async throws -> UndoStep? {
        try checkUsable()
        guard undoGroup == nil else {
            throw LnoteError(.invalidState, "an undo group is open on document \(id): end it before \(undoing ? "undo" : "redo")")
        }
        // Each round drops a step or returns: at most every step of the stack, and one more.
        for _ in 0...(UndoJournal.maxSteps + 1) {
            // The top step, or with a page the top step that changed it.
            guard let step = try topStep(undoing: undoing, page: filter) else { return nil }
            // Entries are taken back last first; consecutive entries of one page in one append.
            var made: [UndoEntry] = []
            var runs: [(page: PageID, entries: [UndoEntry])] = []
            for e in step.entries.reversed() {
                if runs.last?.page == e.page { runs[runs.count - 1].entries.append(e) } else { runs.append((e.page, [e])) }
            }
            for run in runs {
                // A page deleted since, or never here: what the step did there is gone with it.
                guard let record = doc.page(run.page), !record.deleted.value else { continue }
                var pageMade: [UndoEntry] = []
                _ = try await commitLocal(page: run.page) { r, author, t in
                    pageMade = []
                    var ops: [Op] = []
                    for e in run.entries {
                        guard let body = Undo.remaining(e, on: r) else { continue }
                        // An entry the page refuses (validation checks before applying: nothing
                        // is changed) is left out, so that one bad entry cannot block undo for good.
                        guard let op = try? Undo.make(body, on: &r, page: run.page, by: author, wallTime: t, into: &pageMade)
                        else { continue }
                        ops.append(op)
                    }
                    return ops
                }
                made += pageMade
            }
            // Edits made while the operations were appended (this handle's other tasks, another
            // process) may have pushed steps, or taken this one off: it is found again in the
            // journal as the line is written.
            let stackName = undoing ? "undo" : "redo"
            func at(_ j: UndoJournal) -> Int? {
                let stack = undoing ? j.undo : j.redo
                return stack.lastIndex(of: step).map { stack.count - 1 - $0 }
            }
            if made.isEmpty {
                // [MERGE-74] Overwritten entirely by others' edits: dropped, and the next one tried
                // (unless another process took it off meanwhile). A drop that cannot be written
                // would find the same step again: that is an error.
                let dropped = appendUndoJournal(reading: true) { j in
                    at(j).map { UndoJournal.Line(change: .drop, step: nil, stack: stackName, at: $0) }
                }
                if dropped == false { throw LnoteError(.io, "cannot write the undo journal", path: undoJournalPath) }
                continue
            }
            let done = UndoStep(label: step.label, wallTime: self.now(), entries: made)
            appendUndoJournal(reading: true) { j in
                if let i = at(j) { return UndoJournal.Line(change: undoing ? .undo : .redo, step: done, at: i) }
                // Taken off by another process meanwhile: this step is still what redoes ours.
                return UndoJournal.Line(change: .keep, step: done, stack: undoing ? "redo" : "undo")
            }
            return done
        }
        return nil
    }

    /// The top step of a stack, or with a page the top step that changed it. (The journal
    /// copy ends here, so that the append that follows changes the cached stacks in place.)
    private func topStep(undoing: Bool, page filter: PageID?) throws -> UndoStep? {
        let journal = try readUndoJournal()
        let stack = undoing ? journal.undo : journal.redo
        return stack.last { s in filter.map { p in s.entries.contains { $0.page == p } } ?? true }
    }

    /// The top step of a stack that still has something to do, or nil.
    func firstLiveStep(undoing: Bool) throws -> UndoStep? {
        try checkUsable()
        let journal = try readUndoJournal()
        for step in (undoing ? journal.undo : journal.redo).reversed() {
            for e in step.entries {
                guard let record = doc.page(e.page), !record.deleted.value else { continue }
                if Undo.remaining(e, on: try loadedPage(e.page).replica) != nil { return step }
            }
        }
        return nil
    }

    // MARK: - Restores and revert

    /// Brings back elements erased whole ([MERGE-70]): one operation, one undo step.
    /// - Throws: `invalidArgument` for an element that is live or was never erased here,
    ///   `notFound` for one whose content this replica does not hold ([MERGE-30]).
    public func restore(_ ids: [ElementID], on pid: PageID) async throws {
        _ = try await commitRecorded(page: pid, label: "restore") { r, me, t, entries in
            [try Undo.make(.restore(ids), on: &r, page: pid, by: me, wallTime: t, into: &entries)]
        }
    }

    /// Brings back erased point ranges of a stroke ([MERGE-71]): one operation, one undo step.
    public func restoreRange(_ element: ElementID, _ ranges: [PointRange], on pid: PageID) async throws {
        _ = try await commitRecorded(page: pid, label: "restoreRange") { r, me, t, entries in
            [try Undo.make(.restoreRange(element, ranges), on: &r, page: pid, by: me, wallTime: t, into: &entries)]
        }
    }

    /// Makes the page as it was at `point` ([MERGE-76]): ordinary erases, restores, range
    /// erases and restores, moves and reorders, appended together as one undo step and merged
    /// like any edit. Returns them (none when the page already is as it was).
    /// - Throws: what `pageState(_:at:)` throws for a moment the log cannot rebuild.
    @discardableResult
    public func revert(page pid: PageID, to point: HistoryPoint) async throws -> [Op] {
        // Which elements, ranges, transforms and z keys: no point is needed.
        let target = try await pageState(pid, at: point, deferringPoints: true)
        return try await commitRecorded(page: pid, label: "revert") { r, me, t, entries in
            try Undo.revert(r, to: target).map { try Undo.make($0, on: &r, page: pid, by: me, wallTime: t, into: &entries) }
        }
    }

    // MARK: - Recording


    /// `commitLocal`, recording the entries `build` notes as one undo step (or into the open
    /// group) once the operations are durable.
    func commitRecorded(page pid: PageID, label: String, assets: [[UInt8]] = [],
                        _ build: (inout PageReplica, ReplicaID, Int64, inout [UndoEntry]) throws -> [Op]) async throws -> [Op] {
        var entries: [UndoEntry] = []
        let ops = try await commitLocal(page: pid, assets: assets) { r, me, t in
            entries = []
            return try build(&r, me, t, &entries)
        }
        if !entries.isEmpty {
            if var g = undoGroup {
                g.entries += entries
                undoGroup = g
            } else {
                recordStep(label, entries, change: .do)
            }
        }
        return ops
    }

    func recordStep(_ label: String, _ entries: [UndoEntry], change: UndoJournal.Change) {
        guard !entries.isEmpty else { return }
        appendUndoJournal(.init(change: change, step: UndoStep(label: label, wallTime: now(), entries: entries)))
    }

    // MARK: - The journal ([PKG-100])


    /// `.lnote/undo/<document-uuid>.jsonl` beside the notebook's replica file.
    var undoJournalPath: String { identity.undoDirectory + "/\(id).jsonl" }

    /// The undo journal open for reading and appending, with what `fstat` says of it now; nil
    /// when there is none and `create` is false. Opened again when the file held is no longer
    /// the one at the path (another process rewrote it: its link count is then 0), so that
    /// checking it costs an `fstat`, not a path lookup.
    func undoJournalFile(create: Bool) throws -> (fd: FileDescriptor, stat: FileStat)? {
        if let fd = undoFile {
            let st = try io.fstat(fd)
            if st.links > 0 { return (fd, st) }
            undoFile = nil
            try? fd.close()
        }
        let path = undoJournalPath
        let fd: FileDescriptor
        if create {
            do {
                fd = try io.open(path, O_RDWR | O_APPEND | O_CREAT, mode: 0o600)
            } catch {
                // The first line of this notebook's undo history: its folder is made.
                try io.mkdir((path as NSString).deletingLastPathComponent, existingOK: true)
                fd = try io.open(path, O_RDWR | O_APPEND | O_CREAT, mode: 0o600)
            }
        } else {
            guard try io.stat(path) != nil else { return nil }
            fd = try io.open(path, O_RDWR | O_APPEND)
        }
        undoFile = fd
        return (fd, try io.fstat(fd))
    }

    func readUndoJournal() throws -> UndoJournal {
        guard let (fd, st) = try undoJournalFile(create: false) else {
            undoCache = nil
            return UndoJournal()
        }
        if let c = undoCache, c.replica == replica, c.size == st.size, c.inode == st.inode { return c.journal }
        let bytes = try io.pread(fd, count: Int(st.size), at: 0)
        let j = UndoJournal.read(bytes, replica: replica)
        noteUndoFloor(UInt64(bytes.count), inode: st.inode)
        // Not kept when the file ends in a cut line: the next append must see it to begin a new line.
        undoCache = bytes.last.map { $0 == UInt8(ascii: "\n") } ?? true
            ? UndoCache(replica: replica, size: UInt64(bytes.count), inode: st.inode, journal: j) : nil
        return j
    }

    /// The rewrite floor of a journal read whole: its size when this handle first reads that
    /// file (a new inode: another process rewrote it), not at every read, or appends that
    /// keep making the cache stale would keep raising it and the journal would never be
    /// rewritten.
    private func noteUndoFloor(_ size: UInt64, inode: UInt64) {
        guard inode != undoFloorInode else { return }
        undoFloor = size
        undoFloorInode = inode
    }

    /// Appends a journal line (no `fsync`: [PKG-100]); rewrites a journal grown past its
    /// bound with only the current stacks. Best effort: the operations are durable already,
    /// and a journal that cannot be written only costs the undo of those steps.
    @discardableResult
    func appendUndoJournal(_ line: UndoJournal.Line) -> Bool {
        appendUndoJournal(reading: false) { _ in line } ?? true
    }

    /// Appends the line `make` gives for the journal as it is when the line is written: the
    /// stacks this handle holds when no other process appended since, else (`reading`) the
    /// file read again through the descriptor the line is written with. nil: `make` gave no
    /// line; false: the line could not be written.
    func appendUndoJournal(reading: Bool, _ make: (UndoJournal) -> UndoJournal.Line?) -> Bool? {
        // Taken out while it changes, so that its stacks are changed in place, not copied.
        var cached = undoCache
        undoCache = nil
        var size: UInt64 = 0
        do {
            guard let (fd, before) = try undoJournalFile(create: true) else { return false }
            var current: UndoCache? = nil
            // A line cut by a crash has no newline: the next one starts on a line of its own.
            var cut = false
            if let c = cached, c.replica == replica, c.size == before.size, c.inode == before.inode {
                current = c
                cached = nil
            } else if reading {
                let bytes = try io.pread(fd, count: Int(before.size), at: 0)
                cut = bytes.last.map { $0 != UInt8(ascii: "\n") } ?? false
                current = UndoCache(replica: replica, size: before.size, inode: before.inode,
                                    journal: UndoJournal.read(bytes, replica: replica))
                noteUndoFloor(before.size, inode: before.inode)
            } else if before.size > 0 {
                cut = try io.pread(fd, count: 1, at: before.size - 1) != [UInt8(ascii: "\n")]
            }
            guard let line = make(current?.journal ?? UndoJournal()) else {
                undoCache = current
                return nil
            }
            let bytes = (cut ? [UInt8(ascii: "\n")] : []) + UndoJournal.encode(line, replica: replica)
            try io.write(fd, bytes)
            size = before.size + UInt64(bytes.count)
            // The cache follows its own append when it was up to date before it.
            if var c = current {
                current = nil
                c.journal.apply(line)
                c.size = size
                undoCache = c
            }
        } catch {
            // Best effort, as said.
            return false
        }
        // Rewritten past the bound, and once it doubled since the last rewrite: a step of many
        // entries (an import) would otherwise be rewritten at every append. The line is
        // written: a rewrite that fails leaves a longer journal, nothing worse.
        guard size > UInt64(UndoJournal.rewriteBytes), size > 2 * undoFloor else { return true }
        let path = undoJournalPath
        do {
            // The cached stacks only when the file is exactly what they were made from: another
            // process's line may have landed between the `fstat` and the write.
            let actual = try undoJournalFile(create: false)?.stat
            let current = undoCache.flatMap { c in
                c.replica == replica && c.size == actual?.size && c.inode == actual?.inode ? c.journal : nil
            }
            undoCache = nil
            let kept = try current ?? UndoJournal.read(DurableFile.read(path, io: io), replica: replica)
            try DurableFile.replace(path, with: kept.lines(replica: replica), io: io)
            if let (_, st) = try undoJournalFile(create: false) {
                undoCache = UndoCache(replica: replica, size: st.size, inode: st.inode, journal: kept)
                undoFloor = st.size
                undoFloorInode = st.inode
            }
        } catch {
            undoCache = nil
            // Best effort, as said.
        }
        return true
    }
}
