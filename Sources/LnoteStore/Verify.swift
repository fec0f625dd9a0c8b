import Foundation
import LnoteModel
import LnoteReplication

/// One thing `verify` found.
public struct VerifyProblem: Sendable, Hashable, CustomStringConvertible {
    public enum Kind: String, Sendable, CaseIterable {
        /// A file that does not decode (JSON, snapshot, log header).
        case undecodable
        /// A log frame that fails its length or CRC check, followed by valid frames.
        case corruptFrame
        /// Bytes after the last valid frame of a log (an interrupted append; repaired on open).
        case tornTail
        /// A valid frame whose operation does not decode, or belongs to the other kind of log.
        case malformedOperation
        /// A required file is missing (document.json and document.log both, or the manifest).
        case missingFile
        /// An image element or add operation names an asset that is not in assets/.
        case missingAsset
        /// An asset file whose bytes do not hash to its name.
        case assetMismatch
        /// An asset no page references (removed when the document is closed).
        case orphanAsset
        /// A file in pages/ for a page the document does not have (yet): listed in
        /// `VerifyReport.waiting`, not in `problems` ([SYNC-84]).
        case orphanPageFile
        /// A temporary file left by an interrupted write (removed on open).
        case temporaryFile
        /// A damaged file preserved by recovery (`.corrupt-<n>`): information for a person.
        case quarantinedFile
        /// manifest.json is not what document.json and the page snapshots call for (rebuilt by
        /// reconcile/open, [PKG-13]).
        case staleManifest
        /// A snapshot (a page's `.content` or `document.json`) names another incarnation of its
        /// log: the whole log is replayed onto it ([PKG-33]); information, nothing is lost.
        case snapshotMismatch
        /// A snapshot names its log's incarnation but covers an offset that is not a frame
        /// boundary of it (past its end, inside a frame): the log was cut or replaced after the
        /// snapshot was written and may lack operations the snapshot holds. Opening sets the
        /// snapshot aside (quarantine) and rebuilds from the log ([PKG-47]).
        case unpairedSnapshot
        /// A file the format does not define.
        case unknownFile
        /// A name in the notebook that holds a symlink, FIFO, socket, device, or a directory
        /// where a file is expected (or the reverse): never opened, followed or copied
        /// ([PKG-22]).
        case notRegularFile
        /// A log file is missing while its snapshot exists (`pages/<page>.log` beside its
        /// `.content`, or `document.log` beside `document.json`): the snapshot's operations
        /// cannot be served to peers until they are received again ([PKG-55]).
        case missingLog
        /// Operations a snapshot holds that its log lacks (lost to damage or with a deleted
        /// log): listed exactly, per replica; sync fetches them from a peer that holds them
        /// ([PKG-51], [PKG-54]).
        case missingOperations
        /// An operation in `.lnote/quarantine/` that needs a person: refused when received
        /// ([SYNC-60]), or this replica's own version of a forked operation not made again
        /// ([SYNC-54]) ([PKG-48]).
        case quarantinedOperation
        /// A fork this replica knows of: another replica's operation it holds under the same
        /// id with other content ([SYNC-51]), kept in the quarantine ([PKG-48]).
        case knownFork
        /// Two frames of one log that hold one operation id with different content: a fork
        /// inside the log, which no door lets in ([MERGE-41]); the merge keeps the first.
        case forkedFrame
        /// A file that cannot be read (permission denied, an I/O error, or more bytes than
        /// lnote reads at once, [PKG-104]): its content is not checked; the rest of the
        /// notebook is.
        case unreadable
    }

    public var kind: Kind
    public var path: String
    public var offset: Int?
    /// The index of the frame in a log.
    public var index: Int?
    /// In a snapshot (or checkpoint base) that does not decode, the index of the record that
    /// does not: an element record, a tombstone or a replica's context, as `message` says.
    public var record: Int?
    public var message: String

    public init(_ kind: Kind, _ path: String, _ message: String, offset: Int? = nil, index: Int? = nil, record: Int? = nil) {
        self.kind = kind
        self.path = path
        self.message = message
        self.offset = offset
        self.index = index
        self.record = record
    }

    public var description: String {
        var s = "\(kind.rawValue): \(path)"
        if let offset { s += " at offset \(offset)" }
        if let index { s += " (frame \(index))" }
        if let record { s += " (record \(record))" }
        if !message.isEmpty { s += ": \(message)" }
        return s
    }
}

/// What `verify` checked and found.
public struct VerifyReport: Sendable {
    public var problems: [VerifyProblem] = []
    public var documents = 0
    public var files = 0
    /// Temporary files removed before checking (`Notebook.verify(removeTemporaryFiles:)`).
    public var removedTemporaryFiles: [String] = []
    /// Every entry of the quarantine ([PKG-48]), those already resolved included (own
    /// operations made again); those that need a person are also in `problems`.
    public var quarantine: [QuarantineEntry] = []
    /// Page files whose page the document does not have (`orphanPageFile`): operations that
    /// came before their document's `addPage` ([SYNC-84], [PKG-43]) and wait for it. Intact
    /// and kept, not damage: listed, and not in `problems` (a peer that never sends the
    /// document would otherwise make every replica's verify fail for ever).
    public var waiting: [VerifyProblem] = []
    public var isClean: Bool { problems.isEmpty }
    public func problems(_ kind: VerifyProblem.Kind) -> [VerifyProblem] { problems.filter { $0.kind == kind } }
}

/// Checks a notebook folder without changing it ([PKG-70]) — it needs no lock and may run
/// while another process has the folder open: every file decodes (manifests,
/// document.json, snapshots, logs frame by frame), references resolve (assets of image
/// elements and add operations exist and match their hash), nothing is orphaned (assets,
/// page files, temporary files) and manifests are derived from the document.json on disk.
public enum Verify {
    ///
    /// Each package is checked holding its document lock ([PKG-82]), so an append or a save
    /// another process is making is never seen half done; a package whose lock file does not
    /// exist yet is checked without it (nothing written under the lock since it was created).
    /// Waiting for a lock lasts at most `lockTimeout`.
    public static func run(folder: String, lockTimeout: Duration = .seconds(10)) throws -> VerifyReport {
        // The folder a user names may be reached through a symlink; inside it none is
        // followed ([PKG-22]).
        let resolved = Syscalls.live.fileType(atPath: folder) == "symlink" ? (try? Syscalls.live.realpath(folder)) ?? folder : folder
        return try run(folder: resolved, io: .live, lockTimeout: lockTimeout)
    }

    static func run(folder: String, io: Syscalls, lockTimeout: Duration = .seconds(10)) throws -> VerifyReport {
        var report = VerifyReport()
        guard let st = try io.stat(folder), st.isDirectory else {
            throw LnoteError(.notFound, "no notebook folder", path: folder)
        }
        let meta = DurableFile.join(folder, ".lnote")
        if let kind = io.fileType(atPath: meta), kind != "directory" {
            report.problems.append(.init(.notRegularFile, meta, "not a directory (\(kind))"))
        } else if try io.stat(meta) != nil {
            for name in try io.listDirectory(meta) where DurableFile.isTemporaryName(name) {
                report.problems.append(.init(.temporaryFile, DurableFile.join(meta, name), "left by an interrupted write"))
            }
            let (entries, damaged) = try Quarantine.list(notebook: folder, io: io)
            for e in damaged {
                report.problems.append(.init(.undecodable, e.path ?? Quarantine.folder(folder), e.message))
            }
            // This folder's ids, now and before ([PKG-48]): a fork of one of them pushed here
            // is this folder's to repair (it reused its own ids), so it counts.
            var own = Set<ReplicaID>()
            let rp = DurableFile.join(meta, "replica.json")
            if let bytes = try readFile(rp, io: io, into: &report) {
                report.files += 1
                do { _ = try StoreJSON.decode(Notebook.ReplicaFile.self, bytes, path: rp) } catch let e as LnoteError {
                    report.problems.append(.init(.undecodable, rp, e.message))
                }
                if let v = try? Notebook.ReplicaFile.decodeValidated(bytes, path: rp) { own = Set([v.replica] + v.previous) }
            }
            for (p, e) in entries {
                report.files += 1
                report.quarantine.append(e)
                let ownPushedHere = e.wasPushedHere && e.resolved == nil && e.operation.map { own.contains($0.replica) } == true
                guard e.needsAttention || ownPushedHere else { continue }
                var what = "\(e.operation?.description ?? "an unreadable operation") in log \(e.logDescription) from \(e.remote): \(e.reason)"
                if let h = e.hash { what += " (content hash \(hexString(h.prefix(8)))…" + (e.otherHash.map { ", the other \(hexString($0.prefix(8)))…" } ?? "") + ")" }
                report.problems.append(.init(e.kind == .fork ? .knownFork : .quarantinedOperation, p, what))
            }
        }
        for name in try io.listDirectory(folder) {
            let p = DurableFile.join(folder, name)
            if DurableFile.isTemporaryName(name) {
                report.problems.append(.init(.temporaryFile, p, "left by an interrupted write"))
            } else if let id = PackagePaths.documentID(fromName: name) {
                report.documents += 1
                if let kind = io.fileType(atPath: p), kind != "directory" {
                    report.problems.append(.init(.notRegularFile, p, "not a directory (\(kind))"))
                    continue
                }
                let paths = PackagePaths(folder: folder, id: id)
                let held = try FileLock.document(paths, io: io, timeout: lockTimeout).acquire(create: false)
                defer { held?.release() }
                try checkPackage(paths, io: io, into: &report)
            }
        }
        return report
    }

    static func checkPackage(_ paths: PackagePaths, io: Syscalls, into report: inout VerifyReport) throws {
        var pageIDs = Set<PageID>()
        var docCoverage: (offset: UInt64, incarnation: UInt64)?
        var docState: DocumentState?
        let docBytes = try readFile(paths.document, io: io, into: &report)
        if let docBytes {
            report.files += 1
            do {
                let (f, s, _) = try DocumentFile.decode(docBytes, path: paths.document)
                pageIDs.formUnion(s.pages.map(\.id))
                docCoverage = (f.log.offset, f.incarnation)
                docState = s
                if s.id != paths.id { report.problems.append(.init(.undecodable, paths.document, "names document \(s.id)")) }
            } catch let e as LnoteError {
                report.problems.append(.init(.undecodable, paths.document, e.message))
            }
        }
        // Manifest.
        if let m = try readFile(paths.manifest, io: io, into: &report) {
            report.files += 1
            do {
                let manifest = try ManifestFile.decode(m, path: paths.manifest)
                if manifest.id != paths.id.description {
                    report.problems.append(.init(.undecodable, paths.manifest, "names document \(manifest.id)"))
                } else if let docBytes, manifest.source != ManifestFile.fingerprint(docBytes) {
                    report.problems.append(.init(.staleManifest, paths.manifest, "derived from another document.json"))
                } else if let docBytes, let docState {
                    // (Its own element count where a page's snapshot is in a newer format,
                    // [PKG-13] 5; the page's snapshot is reported with its own problem.)
                    let expected = try ManifestFile.expected(paths: paths, documentBytes: docBytes, state: docState,
                                                             previous: manifest, io: io)
                    if try StoreJSON.encode(expected) != m {
                        let message: String
                        if expected == manifest {
                            message = "not in the canonical form of [PKG-10]"
                        } else if expected.pageCount == manifest.pageCount && expected.elementCount == manifest.elementCount
                                    && expected.modified == manifest.modified {
                            // Same counts, another value: name the fields that differ.
                            let fields = [("title", expected.title != manifest.title), ("created", expected.created != manifest.created),
                                          ("coverPage", expected.coverPage != manifest.coverPage),
                                          ("deleted", expected.deleted != manifest.deleted), ("format", expected.format != manifest.format)]
                                .filter(\.1).map(\.0)
                            message = "its \(fields.isEmpty ? "values" : fields.joined(separator: ", ")) "
                                + "differ from what document.json and the page snapshots give"
                        } else {
                            message = "says \(manifest.pageCount) pages, \(manifest.elementCount) elements, modified \(manifest.modified); "
                                + "the page snapshots say \(expected.pageCount), \(expected.elementCount), \(expected.modified)"
                        }
                        report.problems.append(.init(.staleManifest, paths.manifest, message))
                    }
                }
            } catch let e as LnoteError {
                report.problems.append(.init(.undecodable, paths.manifest, e.message))
            }
        } else if io.fileType(atPath: paths.manifest) == nil {
            report.problems.append(.init(.missingFile, paths.manifest, "no manifest (rebuilt by reconcile or open)"))
        }
        // Document log.
        var referenced = Set<AssetID>()
        if let log = try readFile(paths.documentLog, io: io, into: &report) {
            report.files += 1
            if docBytes == nil && io.fileType(atPath: paths.document) == nil {
                // [PKG-70] A required file, like manifest.json: both are rebuilt, from the log.
                report.problems.append(.init(.missingFile, paths.document, "no document.json (rebuilt from document.log by open)"))
            }
            let (ops, facts) = checkLog(log, path: paths.documentLog, kind: .document, owner: paths.id.uuid, into: &report)
            if let c = docCoverage, let facts,
               let problem = facts.check(offset: c.offset, incarnation: c.incarnation, snapshot: paths.document, what: "the document") {
                report.problems.append(problem)
            }
            if let docState, let facts { reportMissing(docState.clock, held: facts.held, base: nil, log: paths.documentLog, into: &report) }
            for op in ops { if case .addPage(let p, _, _) = op.body { pageIDs.insert(p) } }
        } else if io.fileType(atPath: paths.documentLog) != nil {
            // Not a regular file: reported by readFile.
        } else if docBytes == nil {
            report.problems.append(.init(.missingFile, paths.root, "neither document.json nor document.log"))
        } else {
            // [PKG-55] document.json without its log: nothing it holds can be served to a peer.
            report.problems.append(.init(.missingLog, paths.documentLog, "document.log is missing while document.json exists"))
            if let docState { reportMissing(docState.clock, held: [:], base: nil, log: paths.documentLog, into: &report) }
        }
        if let bytes = try readFile(paths.documentMissing, io: io, into: &report) {
            report.files += 1
            do { _ = try OpRanges.decode(bytes, path: paths.documentMissing) } catch let e as LnoteError {
                report.problems.append(.init(.undecodable, paths.documentMissing, e.message, offset: e.offset))
            }
        }
        // Pages: logs first, so that each snapshot can be checked against its log.
        var logs: [PageID: LogFacts] = [:]
        var bases: [PageID: VectorClock] = [:]
        var snapshots: [(PageID, String)] = []
        // Page logs that could not be read (reported `unreadable`): what they hold is not
        // known, so their snapshots' operations are not reported missing.
        var unreadLogs = Set<PageID>()
        // Past snapshots sort before their page's log (`<page>.<N>.past` < `<page>.log`): they
        // are checked against it as soon as it is read, and its operations are not kept.
        var pasts: [PageID: [(String, PageSnapshot.Contents)]] = [:]
        if try directoryExists(paths.pages, io: io, into: &report) {
            for name in try io.listDirectory(paths.pages).sorted() {
                let p = DurableFile.join(paths.pages, name)
                if let kind = io.fileType(atPath: p), kind != "regular file" {
                    report.problems.append(.init(.notRegularFile, p, "not a regular file (\(kind))"))
                    continue
                }
                if DurableFile.isTemporaryName(name) {
                    report.problems.append(.init(.temporaryFile, p, "left by an interrupted write"))
                    continue
                }
                if name.contains(".corrupt-") {
                    report.problems.append(.init(.quarantinedFile, p, "damaged copy kept by recovery"))
                    continue
                }
                if name.hasSuffix(PackagePaths.baseSuffix), let pid = PageID(String(name.dropLast(PackagePaths.baseSuffix.count))) {
                    report.files += 1  // a checkpoint base ([PKG-46]): its clock counts as held
                    do {
                        bases[pid] = try PageBase.decode(try DurableFile.read(p, io: io), page: pid, path: p, state: false).clock
                    } catch let e as LnoteError {
                        // Damaged: never skipped silently ([PKG-42]), the page cannot be served from it.
                        report.problems.append(.init(.undecodable, p, e.message, offset: e.offset, record: e.index))
                    }
                    continue
                }
                if name.hasSuffix(PackagePaths.missingSuffix), PageID(String(name.dropLast(PackagePaths.missingSuffix.count))) != nil {
                    report.files += 1  // what the page's log lacks ([PKG-51]); recomputed below from the files themselves
                    do { _ = try OpRanges.decode(try DurableFile.read(p, io: io), path: p) } catch let e as LnoteError {
                        report.problems.append(.init(.undecodable, p, e.message, offset: e.offset))
                    }
                    continue
                }
                if let (pid, total) = PackagePaths.pastName(name) {
                    report.files += 1  // a past snapshot ([PKG-98]): derived, checked like any snapshot
                    if !pageIDs.contains(pid) {
                        report.waiting.append(.init(.orphanPageFile, p, "page \(pid) is not in the document (yet)"))
                    }
                    do {
                        let s = try PageSnapshot.decode(try DurableFile.read(p, io: io), path: p)
                        if s.state.page != pid {
                            report.problems.append(.init(.undecodable, p, "names page \(s.state.page)"))
                        } else if s.state.clock.total != total {
                            report.problems.append(.init(.undecodable, p, "covers \(s.state.clock.total) operations, not \(total) as its name says"))
                        } else {
                            pasts[pid, default: []].append((p, s))
                        }
                    } catch let e as LnoteError {
                        report.problems.append(.init(.undecodable, p, e.message, offset: e.offset, record: e.index))
                    }
                    continue
                }
                let isContent = name.hasSuffix(".content"), isLog = name.hasSuffix(".log")
                guard isContent || isLog, let pid = PageID(String(name.dropLast(isContent ? 8 : 4))) else {
                    report.problems.append(.init(.unknownFile, p, "not a page file"))
                    continue
                }
                if !pageIDs.contains(pid) {
                    report.waiting.append(.init(.orphanPageFile, p, "page \(pid) is not in the document (yet)"))
                }
                report.files += 1
                if isContent {
                    snapshots.append((pid, p))
                    continue
                }
                guard let bytes = try readFile(p, io: io, into: &report) else {
                    unreadLogs.insert(pid)
                    continue
                }
                let (ops, facts) = checkLog(bytes, path: p, kind: .page, owner: pid.uuid, into: &report)
                logs[pid] = facts
                for op in ops { if case .add(.image(let i), _) = op.body { referenced.insert(i.asset) } }
                if let kept = pasts[pid], let facts {
                    checkPasts(kept, of: pid, ops: ops, incarnation: facts.incarnation, paths: paths, io: io, into: &report)
                }
            }
        }
        for (pid, p) in snapshots {
            guard let bytes = try readFile(p, io: io, into: &report) else { continue }
            do {
                let s = try PageSnapshot.decode(bytes, path: p)
                if s.state.page != pid { report.problems.append(.init(.undecodable, p, "names page \(s.state.page)")) }
                referenced.formUnion(s.state.imageAssets)
                if let facts = logs[pid], let problem = facts.check(offset: s.coveredLogOffset, incarnation: s.logIncarnation,
                                                                     snapshot: p, what: "the page") {
                    report.problems.append(problem)
                }
                if logs[pid] == nil, try io.stat(paths.log(pid)) == nil {
                    // [PKG-55] A snapshot without its log: its operations cannot be served.
                    report.problems.append(.init(.missingLog, paths.log(pid), "the page's log is missing while its snapshot exists"))
                }
                if !unreadLogs.contains(pid) {
                    reportMissing(s.state.clock, held: logs[pid]?.held ?? [:], base: bases[pid], log: paths.log(pid), into: &report)
                }
            } catch let e as LnoteError {
                report.problems.append(.init(.undecodable, p, e.message, offset: e.offset, record: e.index))
            }
        }
        // Assets.
        var present = Set<AssetID>()
        if try directoryExists(paths.assets, io: io, into: &report) {
            for name in try io.listDirectory(paths.assets) {
                let p = DurableFile.join(paths.assets, name)
                if let kind = io.fileType(atPath: p), kind != "regular file" {
                    report.problems.append(.init(.notRegularFile, p, "not a regular file (\(kind))"))
                    continue
                }
                if DurableFile.isTemporaryName(name) {
                    report.problems.append(.init(.temporaryFile, p, "left by an interrupted write"))
                    continue
                }
                guard let a = AssetID(hex: name) else {
                    report.problems.append(.init(.unknownFile, p, "not a content address"))
                    continue
                }
                report.files += 1
                present.insert(a)
                guard let bytes = try readFile(p, io: io, into: &report) else { continue }
                if AssetID.of(bytes) != a {
                    report.problems.append(.init(.assetMismatch, p, "bytes do not hash to the file name"))
                }
                if !referenced.contains(a) {
                    report.problems.append(.init(.orphanAsset, p, "no page references it"))
                }
            }
        }
        for a in referenced.subtracting(present).sorted() {
            report.problems.append(.init(.missingAsset, paths.asset(a), "referenced by an image but not stored"))
        }
        // [PKG-1] What else the package's top and its thumbnails hold: temporary files,
        // quarantined copies, and names the layout does not have.
        if try directoryExists(paths.thumbnails, io: io, into: &report) {
            for name in try io.listDirectory(paths.thumbnails).sorted() {
                let known = [".jpg", ".png"].contains { name.hasSuffix($0) && PageID(String(name.dropLast(4))) != nil }
                reportStray(name, in: paths.thumbnails, known: known, what: "not a page picture", io: io, into: &report)
            }
        }
        for name in try io.listDirectory(paths.root).sorted() {
            reportStray(name, in: paths.root, known: Self.packageNames.contains(name), what: "not a package file", io: io, into: &report)
        }
    }

    /// The names the top of a package holds ([PKG-1]).
    static let packageNames: Set<String> = ["lock", "manifest.json", "document.json", "document.log",
                                            "document" + PackagePaths.missingSuffix, "pages", "assets", "thumbnails"]

    /// Reports `name` in `dir` when it is a temporary file, a quarantined copy, or (not
    /// `known`) a name the layout does not have ([PKG-1], [PKG-70]).
    static func reportStray(_ name: String, in dir: String, known: Bool, what: String, io: Syscalls,
                            into report: inout VerifyReport) {
        let p = DurableFile.join(dir, name)
        if DurableFile.isTemporaryName(name) {
            report.problems.append(.init(.temporaryFile, p, "left by an interrupted write"))
        } else if name.contains(".corrupt-") {
            report.problems.append(.init(.quarantinedFile, p, "damaged copy kept by recovery"))
        } else if !known {
            report.problems.append(.init(.unknownFile, p, what))
        }
    }

    /// The bytes of a file of the notebook, nil when it does not exist. A name that holds a
    /// symlink, FIFO, socket, device or directory is reported (`notRegularFile`, [PKG-22])
    /// and nil returned: it is never opened (a FIFO would block) nor followed.
    static func readFile(_ path: String, io: Syscalls, into report: inout VerifyReport) throws -> [UInt8]? {
        if let kind = io.fileType(atPath: path), kind != "regular file" {
            report.problems.append(.init(.notRegularFile, path, "not a regular file (\(kind))"))
            return nil
        }
        do {
            return try DurableFile.readIfExists(path, io: io)
        } catch let e as LnoteError where e.code == .corrupt && e.path == path {
            // Replaced by a symlink or a FIFO since the lstat: the seam refused it.
            report.problems.append(.init(.notRegularFile, path, e.message))
            return nil
        } catch let e as LnoteError where (e.code == .io || e.code == .limitExceeded) && (e.path == nil || e.path == path) {
            // One file that cannot be read stops nothing else ([PKG-70]): reported, and the
            // rest of the notebook is checked.
            report.problems.append(.init(.unreadable, path, e.forReport))
            return nil
        }
    }

    /// True when `path` is a directory (not a symlink to one); a name that holds anything
    /// else is reported (`notRegularFile`, [PKG-22]).
    static func directoryExists(_ path: String, io: Syscalls, into report: inout VerifyReport) throws -> Bool {
        guard let kind = io.fileType(atPath: path) else { return false }
        guard kind == "directory" else {
            report.problems.append(.init(.notRegularFile, path, "not a directory (\(kind))"))
            return false
        }
        return true
    }

    /// [PKG-51] Reports the operations a snapshot holds (`clock`) that its log does not
    /// (`held`, plus a checkpoint base), exactly, per replica.
    static func reportMissing(_ clock: VectorClock, held: [ReplicaID: Set<UInt64>], base: VectorClock?, log: String,
                              into report: inout VerifyReport) {
        let missing = OpRanges(clock: clock, held: held, base: base)
        guard !missing.isEmpty else { return }
        report.problems.append(.init(.missingOperations, log, "\(missing.count) operation\(missing.count == 1 ? "" : "s") its "
            + "snapshot holds \(missing.count == 1 ? "is" : "are") not in the log: \(missing) (sync fetches them from a peer that holds them)"))
    }

    /// [PKG-98] Each past snapshot of the log's incarnation must be the state its log gives at
    /// its clock (onto the checkpoint base, if any). One replay serves them all: their
    /// clocks, in one incarnation, follow each other. One whose operations the log does not
    /// all hold cannot be judged and is not reported.
    static func checkPasts(_ kept: [(String, PageSnapshot.Contents)], of pid: PageID, ops: [Op], incarnation: UInt64,
                           paths: PackagePaths, io: Syscalls, into report: inout VerifyReport) {
        let base = (try? DurableFile.readIfExists(paths.base(pid), io: io)).flatMap { $0 }
            .flatMap { try? PageBase.decode($0, page: pid, path: paths.base(pid), state: true).state }
        let baseClock = base?.clock ?? VectorClock()
        var replica = base.map { PageReplica(state: $0) } ?? PageReplica(page: pid)
        // A copy from before restores ([PKG-99]) lacks what restores need by design: never used, not compared.
        for (p, s) in kept.sorted(by: { $0.1.state.clock.total < $1.1.state.clock.total })
        where s.logIncarnation == incarnation && !s.lacksEraseHistory {
            let clock = s.state.clock
            guard clock.covers(baseClock), (try? History.check(clock, ops: ops, base: base?.clock)) != nil else { continue }
            // Everything its clock covers is held: the replica must reach exactly that clock.
            // `checkLog` decoded each operation through the validator, so the batch is not
            // refused; later copies of an id are duplicates, as when the page is loaded.
            _ = try? replica.receive(ops.filter { clock.covers($0.id) && !replica.clock.covers($0.id) && !baseClock.covers($0.id) })
            if replica.clock != clock {
                report.problems.append(.init(.undecodable, p, "its clock \(clock) is not a state its log gives (the log reaches \(replica.clock))"))
                // Start the next ones from scratch: this replay went past or stopped short.
                replica = base.map { PageReplica(state: $0) } ?? PageReplica(page: pid)
            } else if !PageSnapshot.sameState(replica.state, as: s.state, anyForm: true) {
                report.problems.append(.init(.undecodable, p, "is not the state its log gives at \(clock)"))
            }
        }
    }

    /// What a snapshot's coverage is checked against: a log's incarnation and where its
    /// frames end.
    struct LogFacts {
        var incarnation: UInt64
        var size: UInt64
        /// Frame boundaries: the header's end, and where every valid frame starts and ends
        /// (a damaged frame ends where the next valid one starts).
        var frameEnds: Set<UInt64>
        /// The counters of each replica that the log's valid frames hold.
        var held: [ReplicaID: Set<UInt64>] = [:]

        /// The problem with a snapshot that covers `offset` of log `incarnation`, if any.
        func check(offset: UInt64, incarnation inc: UInt64, snapshot: String, what: String) -> VerifyProblem? {
            if inc != incarnation {
                return VerifyProblem(.snapshotMismatch, snapshot, "covers log incarnation \(JSONText.u64(inc)), its log is "
                    + "incarnation \(JSONText.u64(incarnation)): the whole log is replayed onto it")
            }
            if !frameEnds.contains(offset) {
                let whereItIs = offset > size ? "past the end of its log (\(size) bytes)" : "inside a frame of its log"
                return VerifyProblem(.unpairedSnapshot, snapshot, "covers offset \(offset), \(whereItIs): the log was cut or "
                    + "replaced after it was written; opening sets it aside and rebuilds \(what) from the log",
                    offset: offset > size ? nil : Int(offset))
            }
            return nil
        }
    }

    /// Checks a log file frame by frame; returns its decodable operations and, when its
    /// header decodes, what a snapshot's coverage is checked against.
    static func checkLog(_ bytes: [UInt8], path: String, kind: LogKind, owner: UUID,
                         into report: inout VerifyReport) -> ([Op], LogFacts?) {
        let header: LogHeader
        do {
            header = try LogHeader.decode(bytes, path: path)
        } catch let e as LnoteError {
            report.problems.append(.init(.undecodable, path, "log header: \(e.message)", offset: e.offset))
            return ([], nil)
        } catch {
            return ([], nil)
        }
        if header.kind != kind || header.owner != owner {
            report.problems.append(.init(.undecodable, path, "log header names \(header.kind) \(header.owner.uuidString)", offset: 10))
        }
        let rest = Array(bytes[LogHeader.size...])
        let anchor = header.anchor(in: rest)
        let scan = LogScanner.scan(rest, base: UInt64(LogHeader.size), anchor: anchor)
        // The anchor's end is a boundary too ([PKG-110]: a snapshot of a log holding no
        // operation yet covers it).
        let anchorEnd = UInt64(LogHeader.size + (anchor?.frame.count ?? 0))
        let facts = LogFacts(incarnation: header.incarnation, size: UInt64(bytes.count),
                             frameEnds: Set([UInt64(LogHeader.size), anchorEnd] + scan.anchorEnds
                                            + scan.frames.flatMap { [$0.offset, $0.end] }),
                             held: Document.heldCounters(scan.frames))
        // [PKG-112] A version-2 page log whose anchor is damaged: what follows is damage.
        let anchorLost = anchor == nil && header.version >= 2 && kind == .page && bytes.count > LogHeader.size
        if anchorLost && scan.damage.first?.range.lowerBound != UInt64(LogHeader.size)
            && scan.tornTail?.lowerBound != UInt64(LogHeader.size) {
            report.problems.append(.init(.corruptFrame, path, PageLog.damagedAnchor(path: path).message, offset: LogHeader.size,
                                         index: 0))
        }
        for d in scan.damage {
            report.problems.append(.init(.corruptFrame, path, d.reason, offset: Int(d.range.lowerBound), index: d.frameIndex))
        }
        if let t = scan.tornTail {
            report.problems.append(.init(scan.tailIsCompleteBadFrame || anchorLost ? .corruptFrame : .tornTail, path,
                                         "\(t.upperBound - t.lowerBound) bytes after the last valid frame",
                                         offset: Int(t.lowerBound), index: scan.frames.count))
        }
        var ops: [Op] = []
        // [MERGE-41] Each id's first frame and its content hash: a later frame with the same
        // id and other content is a fork inside the log (a copy of the same one is harmless).
        var first: [OpID: (index: Int, hash: [UInt8])] = [:]
        for (i, f) in scan.frames.enumerated() {
            do {
                let op = try OperationCodec.decode(f.frame, base: f.payloadBase, path: path)
                if op.body.isPageOperation != (kind == .page) {
                    report.problems.append(.init(.malformedOperation, path, "\(op.body.name) in a \(kind) log", offset: Int(f.offset), index: i))
                } else {
                    let hash = ContentHash.of(f.frame, decoded: op)
                    if let earlier = first[op.id] {
                        if earlier.hash != hash {
                            report.problems.append(.init(.forkedFrame, path, "operation \(op.id) is also in frame \(earlier.index) "
                                                         + "with other content (the merge keeps that one)", offset: Int(f.offset), index: i))
                        }
                    } else {
                        first[op.id] = (i, hash)
                    }
                    ops.append(op)
                }
            } catch let e as LnoteError {
                report.problems.append(.init(.malformedOperation, path, e.message, offset: Int(f.offset), index: i))
            } catch {}
        }
        return (ops, facts)
    }
}

private extension LnoteError {
    /// The message with the system's reason, for a problem's text.
    var forReport: String {
        guard let underlying, !underlying.isEmpty, !message.contains(underlying) else { return message }
        return message + ": " + underlying
    }
}
