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
    let fingerprint: Notebook.ReplicaFile.Fingerprint
    let io: Syscalls
    private let state: Mutex<State>

    init(file: String, fingerprint: Notebook.ReplicaFile.Fingerprint, current: ReplicaID, previous: [ReplicaID],
         change: ReplicaChange?, io: Syscalls) {
        self.file = file
        self.fingerprint = fingerprint
        self.io = io
        state = Mutex(State(current: current, previous: previous, changes: change.map { [$0] } ?? []))
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
    @discardableResult
    func remint(reason: String) throws -> ReplicaChange {
        try state.withLock { s in
            var fresh = ReplicaID.random()
            while fresh == s.current || s.previous.contains(fresh) { fresh = ReplicaID.random() }
            let previous = s.previous + [s.current]
            let out = Notebook.ReplicaFile(format: 1, replica: fresh.description, fingerprint: fingerprint,
                                           previous: previous.map(\.description))
            try DurableFile.replace(file, with: try StoreJSON.encode(out), io: io)
            let change = ReplicaChange(old: s.current, new: fresh, reason: reason)
            s.current = fresh
            s.previous = previous
            s.changes.append(change)
            return change
        }
    }
}
