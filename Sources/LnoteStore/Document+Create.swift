import Foundation
import LnoteModel
import LnoteReplication

extension Document {
    /// Creates a package atomically ([PKG-2]): everything is written and synced inside a
    /// temporary directory `.<UUID>.lnote.tmp-<hex>` in the notebook folder, which is then
    /// renamed into place and the folder synced. A crash leaves either no document or a
    /// complete one (plus, at worst, a temporary directory that opening the notebook removes).
    /// `stage`, when given, writes more files into the staged package (its paths) before the
    /// rename, so they appear atomically with it (checkpoint installs use it).
    ///
    /// Several processes ([PKG-90]): the staged directory and its `lock` file are created
    /// under the notebook lock, and the document lock of the staged package is held until the
    /// package is in place, so a process cleaning up staged directories ([PKG-91]) never takes
    /// one in progress for a dead one. When another process created the same package first
    /// (sync receiving the same new document in two processes), the rename fails and this
    /// throws `alreadyExists`, leaving the other package as it is.
    static func createPackage(folder: String, id: DocumentID, ops: [Op], io: Syscalls, notebookLock: FileLock,
                              stage: ((PackagePaths) throws -> Void)? = nil) throws -> PackagePaths {
        let paths = PackagePaths(folder: folder, id: id)
        if try io.stat(paths.root) != nil {
            throw LnoteError(.alreadyExists, "document package exists", path: paths.root)
        }
        var d = DocumentReplica(id: id)
        try d.receive(ops)
        let tmp = DurableFile.join(folder, DurableFile.temporaryName(for: "\(id)\(PackagePaths.suffix)"))
        let staged = PackagePaths(folder: folder, id: id, root: tmp)
        let held = try notebookLock.withLock { () -> FileLock.Held in
            try io.mkdir(tmp)
            do {
                guard let held = try FileLock(path: staged.lock, io: io, timeout: notebookLock.timeout).tryAcquire() else {
                    throw LnoteError(.invalidState, "a new package's lock is held", path: staged.lock)
                }
                return held
            } catch {
                try? io.removeTree(tmp)
                throw error
            }
        }
        defer { held.release() }
        do {
            for dir in [staged.pages, staged.assets, staged.thumbnails] { try io.mkdir(dir) }
            let header = LogHeader(kind: .document, owner: id.uuid)
            var w = ByteWriter()
            w.append(header.encoded)
            var firstPending: Int?
            for op in ops {
                if firstPending == nil && !d.clock.covers(op.id) { firstPending = w.count }
                OperationCodec.frame(op).encode(into: &w)
            }
            try DurableFile.replace(staged.documentLog, with: w.bytes, io: io)
            let file = DocumentFile(state: d.state, coveredOffset: UInt64(firstPending ?? w.count),
                                    incarnation: header.incarnation, assets: [:])
            let docBytes = try StoreJSON.encode(file)
            try DurableFile.replace(staged.document, with: docBytes, io: io)
            try stage?(staged)
            // After the staged snapshots, which the manifest counts ([PKG-13]).
            let manifest = try ManifestFile.expected(paths: staged, documentBytes: docBytes, state: d.state, io: io)
            try DurableFile.replace(staged.manifest, with: try StoreJSON.encode(manifest), io: io)
            try DurableFile.syncDirectory(tmp, io: io)
            try io.rename(tmp, paths.root)
        } catch let e as LnoteError where e.code == .io && (try? io.stat(paths.root)) != nil && (try? io.stat(tmp)) != nil {
            // Another process renamed the same package into place first (ENOTEMPTY, EEXIST).
            try? io.removeTree(tmp)
            throw LnoteError(.alreadyExists, "document package exists (created meanwhile by another process)",
                             path: paths.root, underlying: e.underlying)
        } catch {
            if (try? io.stat(tmp)) != nil { try? io.removeTree(tmp) }
            throw error
        }
        try DurableFile.syncDirectory(folder, io: io)
        return paths
    }

    /// The first operations of a new local document: `createDocument`, then `addPage` for
    /// the first page unless `firstPage` is nil.
    static func initialOperations(id: DocumentID, title: String, firstPage: CanvasSize?, replica: ReplicaID,
                                  now: Int64) throws -> [Op] {
        var d = DocumentReplica(id: id)
        var ops = [try d.make(.createDocument(title: title), by: replica, wallTime: now)]
        if let canvas = firstPage {
            ops.append(try d.make(.addPage(PageID(), position: d.endPosition, canvas: canvas), by: replica, wallTime: now))
        }
        return ops
    }

    /// Marks the document deleted (soft: a `deleteDocument` operation; `restore()` undoes it).
    public func markDeleted() async throws {
        _ = try await commitDocument(.deleteDocument)
        try locked { try saveDocumentFiles() }
    }

    /// Undoes `markDeleted()`.
    public func restore() async throws {
        _ = try await commitDocument(.restoreDocument)
        try locked { try saveDocumentFiles() }
    }
}

extension PackagePaths {
    /// Paths of a package staged under another directory name.
    init(folder: String, id: DocumentID, root: String) {
        self.id = id
        self.root = root
    }
}

/// The logs of a document this folder does not hold yet, as a sync received them: created
/// together with others in one batch (`Notebook.createReceived`, [PKG-96]).
public struct ReceivedDocument: Sendable {
    public var id: DocumentID
    /// The document log's operations.
    public var documentOps: [Op]
    /// Each page log's operations.
    public var pages: [PageID: [Op]]

    public init(id: DocumentID, documentOps: [Op], pages: [PageID: [Op]]) {
        self.id = id
        self.documentOps = documentOps
        self.pages = pages
    }

    /// Operations in all its logs.
    public var operationCount: Int { pages.values.reduce(documentOps.count) { $0 + $1.count } }
}

/// A received document checked and encoded, ready to be staged: every file of its package.
struct PreparedPackage {
    var id: DocumentID
    var operationCount: Int
    var documentLog: [UInt8]
    var documentFile: [UInt8]
    var state: DocumentState
    /// What each log holds and applied: the clocks `Notebook.logClocks` would read back
    /// (nil key: the document log), cached once the package is in place ([PKG-64]).
    var clocks: [PageID?: VectorClock]
    /// The chain digests at those clocks ([SYNC-52]), as `Document.logClockAndDigests` would
    /// compute them from the logs, cached with the clocks: the clock comparison that follows
    /// a push into an empty folder then opens none of the new documents.
    var digests: [PageID?: [ChainDigest]]
    /// Per page: its log, and its snapshot when the document knows the page.
    var pages: [(page: PageID, log: [UInt8], snapshot: [UInt8]?)]
}

extension Document {
    /// Checks a received document's operations with the merge's validator (the document's
    /// and each page's replica, as `receive` does) and encodes its package: `document.log`
    /// and each page log hold exactly the operations received, in the order received;
    /// `document.json` and each known page's snapshot cover their log up to the first
    /// operation still waiting for its dependencies ([PKG-41]). No thumbnail is rendered: a
    /// received page gets one on demand (`thumbnail(page:)`) or with its next snapshot
    /// ([PKG-97]); rendering every page here was a large part of a first sync.
    ///
    /// Returns nil when the document must take the one-log-at-a-time path (`receive`), which
    /// reports and quarantines what it refuses: an operation the validator refuses, an id
    /// twice in a log (a duplicate or a fork, [PKG-58]), or an image (its asset is staged
    /// apart, [SYNC-10], and moved into the package by `receive`).
    static func prepareReceived(_ r: ReceivedDocument) -> PreparedPackage? {
        for ops in [r.documentOps] + Array(r.pages.values) {
            guard Set(ops.lazy.map(\.id)).count == ops.count else { return nil }
            guard !ops.contains(where: { if case .add(.image, _) = $0.body { true } else { false } }) else { return nil }
        }
        guard r.documentOps.allSatisfy({ !$0.body.isPageOperation }),
              r.pages.values.allSatisfy({ $0.allSatisfy(\.body.isPageOperation) }) else { return nil }
        var d = DocumentReplica(id: r.id)
        do { try d.receive(r.documentOps) } catch { return nil }
        let docStart = LogStart(kind: .document, owner: r.id.uuid, anchor: nil)
        let header = docStart.header
        let (log, covered, docHashes) = encodeLog(docStart, r.documentOps, waiting: { !d.clock.covers($0) })
        let file = DocumentFile(state: d.state, coveredOffset: covered, incarnation: header.incarnation, assets: [:])
        guard let docBytes = try? StoreJSON.encode(file) else { return nil }
        var pages: [(PageID, [UInt8], [UInt8]?)] = []
        var clocks: [PageID?: VectorClock] = [nil: d.clock]
        var digests: [PageID?: [ChainDigest]] = [nil: Document.chainDigests(docHashes, at: d.clock)]
        for (pid, ops) in r.pages.sorted(by: { $0.key < $1.key }) {
            var replica = PageReplica(page: pid)
            do { _ = try replica.receive(ops) } catch { return nil }
            clocks[pid] = replica.clock
            let start = LogStart(kind: .page, owner: pid.uuid, anchor: logAnchor(for: ops))
            let header = start.header
            let (log, covered, hashes) = encodeLog(start, ops, waiting: { !replica.clock.covers($0) })
            digests[pid] = Document.chainDigests(hashes, at: replica.clock)
            guard d.state.pages.contains(where: { $0.id == pid }) else {
                pages.append((pid, log, nil))
                continue
            }
            let snapshot = PageSnapshot.encode(replica.state, coveredLogOffset: covered, logIncarnation: header.incarnation)
            pages.append((pid, log, snapshot))
        }
        return PreparedPackage(id: r.id, operationCount: r.operationCount, documentLog: log, documentFile: docBytes,
                               state: d.state, clocks: clocks, digests: digests, pages: pages.map { (page: $0.0, log: $0.1, snapshot: $0.2) })
    }

    /// A log's bytes, header then frames, the offset up to which a snapshot may cover it
    /// (the first frame whose operation is waiting, else the end, [PKG-41]), and the first
    /// 16 bytes of each operation's content hash ([SYNC-50]), as `logHashes` reads them back.
    /// The anchor of a page log written whole from received operations ([PKG-110]): its
    /// writer is the replica that added the most strokes (the smallest id among equals), its
    /// base the wall time of the first of them; nil when no stroke is added.
    static func logAnchor(for ops: [Op]) -> LogAnchor? {
        var strokes: [ReplicaID: Int] = [:]
        var firstWall: [ReplicaID: Int64] = [:]
        for op in ops {
            guard case .add(.stroke, _) = op.body else { continue }
            strokes[op.id.replica, default: 0] += 1
            if firstWall[op.id.replica] == nil { firstWall[op.id.replica] = op.wallTime }
        }
        guard let writer = strokes.max(by: { ($0.value, $1.key) < ($1.value, $0.key) })?.key else { return nil }
        return LogAnchor(writer: writer.rawValue, baseWallTime: firstWall[writer]!)
    }

    private static func encodeLog(_ start: LogStart, _ ops: [Op], waiting: (OpID) -> Bool)
        -> ([UInt8], UInt64, [ReplicaID: [UInt64: [UInt8]]]) {
        var w = ByteWriter()
        w.append(start.bytes)
        var firstWaiting: Int?
        var hashes: [ReplicaID: [UInt64: [UInt8]]] = [:]
        for op in ops {
            if firstWaiting == nil && waiting(op.id) { firstWaiting = w.count }
            let frame = OperationCodec.frame(op)
            let bytes = frame.encoded
            w.append(start.anchor?.logForm(bytes) ?? bytes)
            // The operation is at hand: its hash form is encoded from it, not decoded from the frame.
            hashes[op.id.replica, default: [:]][op.id.counter] = Array(ContentHash.of(frame, decoded: op).prefix(16))
        }
        return (w.bytes, UInt64(firstWaiting ?? w.count), hashes)
    }

    /// Writes a prepared package's files into its staged directory `staged.root` through
    /// `batch` (no file is synced here: `batch.sync()` does), and queues its rename to `final`.
    static func stage(_ p: PreparedPackage, at staged: PackagePaths, final: String, batch: DurableBatch) throws {
        try batch.makeDirectory(staged.pages)
        // Empty (no thumbnail is written on install, [PKG-97]): their entries are made durable
        // by the staged root's sync.
        try batch.io.mkdir(staged.assets)
        try batch.io.mkdir(staged.thumbnails)
        try batch.write(staged.documentLog, p.documentLog)
        for page in p.pages {
            try batch.write(staged.log(page.page), page.log)
            if let s = page.snapshot { try batch.write(staged.content(page.page), s) }
        }
        try batch.write(staged.document, p.documentFile)
        // After the snapshots, which the manifest counts ([PKG-13]).
        let manifest = try ManifestFile.expected(paths: staged, documentBytes: p.documentFile, state: p.state, io: batch.io)
        try batch.write(staged.manifest, try StoreJSON.encode(manifest))
        batch.rename(staged.root, to: final)
    }
}
