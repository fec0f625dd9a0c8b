import Foundation
import Synchronization
import LnoteModel
import LnoteReplication

/// `Notebook.changes`: what changes at the level of documents — documents created, deleted,
/// restored, retitled; pages added, removed, restored, moved, resized — in any process
/// ([PKG-95]). Element changes are told by each `Document.changes`.
///
/// While there are subscribers the notebook follows every document's `document.log`
/// (read-only, never locked: [PKG-85]) and watches the folder and each package (inotify;
/// polling where there is none). Each operation read from a log gives its events, with the
/// origin this process recorded when it wrote the operation (`local`, `merge`), or
/// `otherProcess`; an operation this process is still making durable is read only once it
/// is.
extension Notebook {
    /// What `changes` follows: each document's log as last read.
    struct Following {
        var watcher: FolderWatcher
        var followers: [DocumentID: DocumentFollower]
    }

    /// Subscribes to the notebook's document-level changes from now on (see `Change`, and
    /// `ChangeStream` for the buffering policy). The first subscription reads every
    /// document's `document.json` and log tail once (what later changes are told against).
    /// The stream ends when the notebook closes.
    public var changes: ChangeStream {
        let stream = hub.subscribe(capacity: options.changeBufferCapacity)
        if isOpenFlag { startFollowing() }
        return stream
    }

    private func startFollowing() {
        guard following == nil else { return }
        origins.activate()
        origins.poke.withLock { $0 = { [weak self] doc in self?.watched(nil, document: doc) } }
        var followers: [DocumentID: DocumentFollower] = [:]
        for docID in (try? documentIDs()) ?? [] {
            followers[docID] = DocumentFollower(paths: PackagePaths(folder: path, id: docID), io: io)
        }
        let dirs = [path] + followers.keys.sorted().map { PackagePaths(folder: path, id: $0).root }
        let watcher = FolderWatcher(io: io, directories: dirs, pollInterval: options.pollInterval,
                                    forcePolling: options.forcePolling) { [weak self] changed in
            self?.watched(changed, document: nil)
        }
        following = Following(watcher: watcher, followers: followers)
    }

    /// A document created or written by this process: read its log now.
    func pokeFollowing(_ docID: DocumentID) {
        guard following != nil else { return }
        watched(nil, document: docID)
    }

    nonisolated func watched(_ changed: Set<String>?, document: DocumentID?) {
        let start = pendingWatch.withLock { w -> Bool in
            if let document {
                w.documents.insert(document)
            } else if let changed {
                w.paths?.formUnion(changed)
            } else {
                w.everything = true
            }
            defer { w.scheduled = true }
            return !w.scheduled
        }
        if start { Task { await self.refreshFollowing() } }
    }

    /// Reads what the documents named by the watcher (or all, when it cannot say) gained.
    func refreshFollowing() {
        let (changed, everything, pokes) = pendingWatch.withLock { w -> (Set<String>?, Bool, Set<DocumentID>) in
            defer { w = (false, [], false, []) }
            return (w.paths, w.everything, w.documents)
        }
        guard isOpenFlag, var f = following else { return }
        var targets = pokes
        if everything {
            targets.formUnion((try? documentIDs()) ?? [])
            targets.formUnion(f.followers.keys)
        } else {
            for p in changed ?? [] {
                let (dir, name) = DurableFile.split(p)
                if dir == path {
                    if let id = PackagePaths.documentID(fromName: name) { targets.insert(id) }
                } else if name == "document.log", let id = PackagePaths.documentID(fromName: DurableFile.split(dir).name) {
                    targets.insert(id)
                }
            }
        }
        var events: [Change] = []
        for docID in targets.sorted() {
            let paths = PackagePaths(folder: path, id: docID)
            if let follower = f.followers[docID] {
                guard (try? io.stat(paths.root))?.isDirectory == true else {
                    f.followers[docID] = nil  // removed from the folder by hand
                    continue
                }
                events += follower.refresh(origins: origins)
            } else if (try? io.stat(paths.root))?.isDirectory == true {
                let follower = DocumentFollower(paths: paths, io: io)
                f.followers[docID] = follower
                f.watcher.watch(paths.root)
                let origin = origins.takeCreated(docID) ?? .otherProcess
                events.append(Change(kind: .documentCreated, origin: origin, document: docID,
                                     title: follower.replica.state.title.value))
            }
        }
        following = f
        hub.publish(events)
    }
}

/// One document's `document.log` as `Notebook.changes` last read it: read-only, without the
/// lock ([PKG-85]). No descriptor is kept between reads (a folder may hold thousands of
/// documents): the log is opened for each look, and what was read is remembered by the file's
/// device, inode and the offset just past the last whole frame read.
final class DocumentFollower {
    let paths: PackagePaths
    let io: Syscalls
    private(set) var replica: DocumentReplica
    /// Where reading stopped: the log file and the offset past its last frame read; nil when
    /// the log could not be read (tried again at the next change).
    private var position: (device: UInt64, inode: UInt64, end: UInt64)?

    init(paths: PackagePaths, io: Syscalls) {
        self.paths = paths
        self.io = io
        replica = DocumentReplica(id: paths.id)
        load()
    }

    /// Reads the document as its files hold it now: document.json and the log from the
    /// offset it covers, or the whole log when they do not pair (a reader that repairs
    /// nothing).
    private func load() {
        position = nil
        replica = DocumentReplica(id: paths.id)
        var from: (UInt64, UInt64)?
        if let bytes = try? DurableFile.readIfExists(paths.document, io: io),
           let (f, s, _) = try? DocumentFile.decode(bytes, path: paths.document), s.id == paths.id {
            replica = DocumentReplica(state: s)
            from = (f.log.offset, f.incarnation)
        }
        var opened = (try? PageLog.openForReading(path: paths.documentLog, kind: .document, owner: paths.id.uuid,
                                                  from: from?.0, incarnation: from?.1, io: io)) ?? nil
        if opened == nil, from != nil {
            replica = DocumentReplica(id: paths.id)
            opened = (try? PageLog.openForReading(path: paths.documentLog, kind: .document, owner: paths.id.uuid,
                                                  from: nil, incarnation: nil, io: io)) ?? nil
        }
        guard let (log, replay) = opened else { return }
        defer { try? log.close() }
        guard let st = try? io.stat(paths.documentLog) else { return }
        apply(replay.frames)
        position = (st.device, log.inode, log.end)
    }

    @discardableResult
    private func apply(_ frames: [LoggedFrame]) -> [Op] {
        var report = RecoveryReport(path: paths.documentLog)
        var pending: [OpID: UInt64] = [:]
        var next = replica
        let applied = (try? Document.feed(frames, kind: .document, fromStart: false, path: paths.documentLog,
                                          report: &report, pending: &pending) { try next.receive($0) }) ?? []
        replica = next
        return applied
    }

    /// The events of what the log gained, each with its origin (see `OriginRegistry`).
    func refresh(origins: OriginRegistry) -> [Change] {
        guard let position else {
            load()
            origins.forgetDocument(paths.id)  // absorbed without events: nothing will take them
            return self.position == nil ? [] : [Change(kind: .reloaded, origin: .otherProcess, document: paths.id)]
        }
        guard let fd = try? io.open(paths.documentLog, O_RDONLY) else { return [] }
        defer { try? fd.close() }
        guard let st = try? io.fstat(fd) else { return [] }
        if st.inode != position.inode || st.device != position.device || st.size < position.end {
            // Rewritten (salvage, fork repair) or rolled back: read it again.
            load()
            origins.forgetDocument(paths.id)
            return [Change(kind: .reloaded, origin: .otherProcess, document: paths.id)]
        }
        guard st.size > position.end, let bytes = try? io.pread(fd, count: Int(st.size - position.end), at: position.end) else { return [] }
        let scan = LogScanner.scan(bytes, base: position.end, anchor: nil)  // a document log: none
        // Damage waits for a holder of the lock to salvage it (the log is then replaced).
        guard scan.damage.isEmpty, !scan.tailIsCompleteBadFrame else { return [] }
        var runs: [(Change.Origin, [LoggedFrame])] = []
        for f in scan.frames {
            var origin = Change.Origin.otherProcess
            if let id = OperationCodec.id(of: f.frame) {
                guard let o = origins.take(id, document: paths.id) else { break }  // not durable yet: read it later
                origin = o
            }
            if let last = runs.last, last.0 == origin {
                runs[runs.count - 1].1.append(f)
            } else {
                runs.append((origin, [f]))
            }
        }
        guard let lastFrame = runs.last?.1.last else { return [] }
        self.position = (position.device, position.inode, lastFrame.end)
        var applied: [(Change.Origin, [Op])] = []
        for (origin, frames) in runs { applied.append((origin, apply(frames))) }
        let state = replica.state
        return applied.flatMap { ChangeDerivation.document($0.1, state: state, document: paths.id, origin: $0.0) }
    }
}
