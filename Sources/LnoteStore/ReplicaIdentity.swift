import Foundation
import Synchronization
import LnoteModel

/// The replica id a notebook folder writes under, shared by the notebook and by every
/// document it opened, so that a new id minted while documents are open stamps their next
/// operations ([PKG-60]).
///
/// An id is replaced ("minted") when opening finds the folder moved or copied, when sync
/// finds that another copy wrote under it (restored in place, sync-protocol.md [SYNC-55]; a
/// fork of its own operations, [SYNC-54]) or when a snapshot set aside held operations of
/// this replica that its log lost ([PKG-56]): in each case operations made under the old id
/// could reuse ids other replicas already hold. `replica.json` is rewritten durably before
/// the new id is used for anything.
public final class ReplicaIdentity: Sendable {
    struct State {
        var current: ReplicaID
        var previous: [ReplicaID]
        var changes: [ReplicaChange]
    }

    /// `.lnote/replica.json`.
    let file: String
    /// `.lnote/undo`: the undo journals of this replica's documents ([PKG-100]).
    let undoDirectory: String
    let fingerprint: Notebook.ReplicaFile.Fingerprint
    let io: Syscalls
    /// The notebook lock ([PKG-83]), held while replica.json is read for a change and written.
    let lock: FileLock
    private let state: Mutex<State>
    /// The identity (inode, size, modification time) of the replica.json this object last
    /// read or wrote: another one means another process minted an id ([PKG-89]).
    private let seen: Mutex<[UInt64]>
    /// A minted replica.json that opening could not write (a full disk, [PKG-24]): written
    /// by `writable()` before the id stamps anything.
    private let unsaved: Mutex<[UInt8]?>

    init(file: String, fingerprint: Notebook.ReplicaFile.Fingerprint, current: ReplicaID, previous: [ReplicaID],
         change: ReplicaChange?, unsaved: [UInt8]? = nil, io: Syscalls, lock: FileLock) {
        self.unsaved = Mutex(unsaved)
        self.file = file
        self.undoDirectory = (file as NSString).deletingLastPathComponent + "/undo"
        self.fingerprint = fingerprint
        self.io = io
        self.lock = lock
        state = Mutex(State(current: current, previous: previous, changes: change.map { [$0] } ?? []))
        seen = Mutex(ReplicaIdentity.identity(of: file, io: io))
    }

    static func identity(of file: String, io: Syscalls) -> [UInt64] {
        guard let st = try? io.stat(file) else { return [] }
        return [st.inode, st.size, UInt64(bitPattern: st.modifiedSeconds), UInt64(bitPattern: st.modifiedNanoseconds)]
    }

    /// Adopts the id in replica.json when another process of this folder minted one since
    /// this object last looked ([PKG-89]): one `stat` when nothing changed. A writer calls it
    /// under the document lock, before it allocates an operation id, so that no process
    /// stamps operations with an id another process gave up.
    func refreshIfChanged() throws {
        let now = ReplicaIdentity.identity(of: file, io: io)
        guard now != seen.withLock({ $0 }) else { return }
        try adoptFile()
    }

    /// Reads replica.json and takes its id as the current one (recording the change) when it
    /// differs. Returns the file's id.
    @discardableResult
    private func adoptFile() throws -> ReplicaID {
        let ident = ReplicaIdentity.identity(of: file, io: io)
        let bytes = try DurableFile.read(file, io: io)
        let v = try Notebook.ReplicaFile.decodeValidated(bytes, path: file)
        let (id, previous) = (v.replica, v.previous)
        if unsaved.withLock({ $0 }) != nil && id != state.withLock({ $0.current }) {
            unsaved.withLock { $0 = nil }  // another process minted and wrote one: ours was never used
        }
        state.withLock { s in
            if s.current != id {
                s.changes.append(ReplicaChange(old: s.current, new: id, reason: "another process of this folder minted it"))
                s.current = id
            }
            s.previous = previous
        }
        seen.withLock { $0 = ident }
        return id
    }

    /// The id to stamp a new operation with. When opening minted an id it could not write
    /// (a full disk), replica.json is written first, under the notebook lock: no operation
    /// is made under an id the folder's file does not hold ([PKG-24], [PKG-60]).
    ///
    /// - Throws: `io` when replica.json still cannot be written; nothing is made then.
    func writable() throws -> ReplicaID {
        guard unsaved.withLock({ $0 }) != nil else { return current }
        try lock.withLock {
            guard let bytes = unsaved.withLock({ $0 }) else { return }
            try DurableFile.replace(file, with: bytes, io: io)
            unsaved.withLock { $0 = nil }
            seen.withLock { $0 = ReplicaIdentity.identity(of: file, io: io) }
        }
        return current
    }

    /// The ids whose fork repair a sync began and did not finish ([SYNC-54], `remint`), as
    /// replica.json holds them now.
    func unfinishedRepairs() throws -> [ReplicaID] { try fileRepairing() }

    /// Takes `ids` out of replica.json's `repairing` (their repair finished), under the
    /// notebook lock, by durable replace; nothing is written when none of them is listed.
    func finishRepairs(_ ids: Set<ReplicaID>) throws {
        try lock.withLock {
            let bytes = try DurableFile.read(file, io: io)
            var v = try Notebook.ReplicaFile.decodeValidated(bytes, path: file)
            let left = v.repairing.filter { !ids.contains($0) }
            guard left.count != v.repairing.count else { return }
            v.file.repairing = left.isEmpty ? nil : left.map(\.description)
            try DurableFile.replace(file, with: try StoreJSON.encode(v.file), io: io)
            seen.withLock { $0 = ReplicaIdentity.identity(of: file, io: io) }
        }
    }

    /// Lists `id`, one of this folder's former ids, in replica.json's `repairing` ([SYNC-54]):
    /// a person says the operations this folder holds under it were made here (the folder
    /// was moved, or restored and moved, not copied), so the next sync handles the forks
    /// of `id` it finds as this folder's own (its versions made again under the current id,
    /// the remote's kept). False when it was listed already.
    ///
    /// - Throws: `invalidArgument` when `id` is not one of `previous`; `io` when replica.json
    ///   cannot be written (nothing changes then).
    func markRepairing(_ id: ReplicaID) throws -> Bool {
        _ = try writable()
        return try lock.withLock {
            let bytes = try DurableFile.read(file, io: io)
            var v = try Notebook.ReplicaFile.decodeValidated(bytes, path: file)
            guard v.previous.contains(id), id != v.replica else {
                let former = v.previous.isEmpty ? "it has none" : "they are " + v.previous.map(\.description).joined(separator: ", ")
                throw LnoteError(.invalidArgument, "\(id) is not one of this folder's former replica ids (\(former))", path: file)
            }
            guard !v.repairing.contains(id) else { return false }
            v.file.repairing = (v.repairing + [id]).map(\.description)
            try DurableFile.replace(file, with: try StoreJSON.encode(v.file), io: io)
            seen.withLock { $0 = ReplicaIdentity.identity(of: file, io: io) }
            return true
        }
    }

    private func fileRepairing() throws -> [ReplicaID] {
        guard let bytes = try DurableFile.readIfExists(file, io: io) else { return [] }
        return try Notebook.ReplicaFile.decodeValidated(bytes, path: file).repairing
    }

    /// The id this folder writes under now.
    public var current: ReplicaID { state.withLock { $0.current } }
    /// Ids this folder wrote under before, oldest first.
    public var previous: [ReplicaID] { state.withLock { $0.previous } }
    /// Every id change since the notebook was opened (the one opening made included), in order.
    public var changes: [ReplicaChange] { state.withLock { $0.changes } }

    /// Replaces the current id by a new random one: the old id is appended to `previous` and
    /// `replica.json` rewritten by durable replace ([PKG-20]) before the new id is returned
    /// or used. The file keeps the folder's fingerprint.
    ///
    /// - Parameter reason: why, for the report (`ReplicaChange.reason`).
    /// - Throws: `io` when `replica.json` cannot be written; the id is then unchanged.
    ///
    /// Under the notebook lock, the file is read first: when another process of the folder
    /// already replaced the id this object holds, that id is adopted instead of minting
    /// another ([PKG-89]): it is just as new.
    ///
    /// With `repairingFork`, the old id is also listed in the file's `repairing`: its fork
    /// repair ([SYNC-54]) is under way, and a sync stopped before it finished resumes it
    /// (`unfinishedRepairs`) until `finishRepairs` takes it out.
    @discardableResult
    func remint(reason: String, repairingFork: Bool = false) throws -> ReplicaChange {
        try lock.withLock {
            let given = current
            if (try? adoptFile()) != nil, current != given {
                let change = ReplicaChange(old: given, new: current, reason: reason + " (another process of this folder had minted it)")
                state.withLock { s in s.changes[s.changes.count - 1] = change }
                return change
            }
            var repairing = (try? fileRepairing()) ?? []
            return try state.withLock { s in
                var fresh = ReplicaID.random()
                while fresh == s.current || s.previous.contains(fresh) { fresh = ReplicaID.random() }
                let previous = s.previous + [s.current]
                if repairingFork && !repairing.contains(s.current) { repairing.append(s.current) }
                var out = Notebook.ReplicaFile(format: 1, replica: fresh.description, fingerprint: fingerprint,
                                               previous: previous.map(\.description))
                out.repairing = repairing.isEmpty ? nil : repairing.map(\.description)
                try DurableFile.replace(file, with: try StoreJSON.encode(out), io: io)
                unsaved.withLock { $0 = nil }
                seen.withLock { $0 = ReplicaIdentity.identity(of: file, io: io) }
                let change = ReplicaChange(old: s.current, new: fresh, reason: reason)
                s.current = fresh
                s.previous = previous
                s.changes.append(change)
                return change
            }
        }
    }
}
