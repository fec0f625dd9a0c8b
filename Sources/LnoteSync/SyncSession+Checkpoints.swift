import LnoteModel
import LnoteReplication

/// What a client remembers about the checkpoints of one remote: the clock of the last
/// checkpoint it uploaded (or installed) per page log, and whether the remote keeps none.
/// Kept beside the sync state under the key `<remote key>#checkpoints`.
///
/// Layout: magic `LNCU`, version 1, u8 flags (bit 0: the remote keeps no checkpoints),
/// `Clocks` (§3), CRC-32C (u32) of every byte before it. A damaged file reads as fresh: the
/// worst outcome is one checkpoint uploaded again, which the relay treats as a no-op.
struct CheckpointState: Equatable {
    var unsupported = false
    var uploaded: [LogRef: VectorClock] = [:]

    static let magic: [UInt8] = Array("LNCU".utf8)

    static func key(_ remoteKey: String) -> String { remoteKey + "#checkpoints" }

    func encoded() -> [UInt8] {
        var w = ByteWriter()
        w.append(Self.magic)
        w.u8(1)
        w.u8(unsupported ? 1 : 0)
        SyncCodec.encode(uploaded.keys.sorted().map { LogClock(log: $0, clock: uploaded[$0]!) }, into: &w)
        w.u32(CRC32C.checksum(w.bytes))
        return w.bytes
    }

    static func decode(_ bytes: [UInt8]) -> CheckpointState {
        guard bytes.count > 10 else { return CheckpointState() }
        let body = Array(bytes[..<(bytes.count - 4)])
        var tail = ByteReader(Array(bytes[(bytes.count - 4)...]))
        guard let crc = try? tail.u32(), crc == CRC32C.checksum(body) else { return CheckpointState() }
        var r = ByteReader(body)
        guard (try? r.bytes(4)) == magic, (try? r.u8()) == 1, let flags = try? r.u8(), flags & ~1 == 0,
              let clocks = try? SyncCodec.decodeClocks(&r), r.isAtEnd else { return CheckpointState() }
        return CheckpointState(unsupported: flags & 1 != 0,
                               uploaded: Dictionary(clocks.map { ($0.log, $0.clock) }, uniquingKeysWith: { $0.merged($1) }))
    }
}

/// Checkpoints (`Protocol/sync-protocol.md` §5): a newcomer installs those the remote's clocks
/// cover, after its first exchange and before storing its pull, and checks them after the
/// sync ([SYNC-59]); every client uploads one per page log that grew by `checkpointInterval`.
extension SyncSession {
    /// On first contact, when the local storage holds no document, fetches the remote's
    /// checkpoints: the page ones whose snapshot decodes, names its page and has the
    /// checkpoint's clock. Nothing is installed yet: the first exchange offers their clocks
    /// in `have`, so that only the tail is pulled, and `installCovered` installs those the
    /// remote's clocks cover. Others count as rejected (`checkpointsRejected`), and their
    /// pages come as operations, which is always correct. Document-log checkpoints are not
    /// used (the document log is small).
    func checkpointCandidates(_ report: inout SyncReport, _ tell: Tell) async throws -> [DocumentID: [PageState]]? {
        guard checkpointInterval >= 0, try await notebook.holdsNoDocuments() else { return nil }
        tell(.fetchingCheckpoints, report)
        let list = try await remote.checkpoints()
        guard !list.isEmpty else { return nil }
        var byDocument: [DocumentID: [PageState]] = [:]
        // A page named twice keeps its first (searched by set: a list of a document's pages
        // searched for each made a list of many pages quadratic).
        var taken = Set<LogRef>()
        for c in list {
            guard let page = c.log.page else { continue }
            guard !taken.contains(c.log), let s = try? PageSnapshot.decode(c.snapshot, path: "checkpoint of \(c.log)"),
                  s.state.page == page, s.state.clock == c.clock else {
                report.checkpointsRejected += 1
                continue
            }
            taken.insert(c.log)
            byDocument[c.log.document, default: []].append(s.state)
        }
        return byDocument.isEmpty ? nil : byDocument
    }

    /// [SYNC-59] Installs the candidate checkpoints whose clock the remote's clock of that log
    /// (`theirs`, the first exchange's `clocks`) covers, with the assets they reference; the
    /// others are rejected, and a second clock comparison then fetches their pages' whole
    /// history (the first pull was computed from their checkpoint clocks).
    func installCovered(_ theirs: [LogRef: VectorClock], _ run: inout SyncRun, _ report: inout SyncReport,
                        _ tell: Tell) async throws {
        guard let candidates = run.candidates else { return }
        run.candidates = nil
        var installed = CheckpointState.decode(try await notebook.loadRemoteState(key: CheckpointState.key(remote.key)) ?? [])
        tell.documents(.installingCheckpoints, 0, of: candidates.count, report)
        for (k, (doc, states)) in candidates.sorted(by: { $0.key < $1.key }).enumerated() {
            defer { tell.documents(.installingCheckpoints, k + 1, of: candidates.count, report) }
            var accepted: [PageState] = []
            for s in states {
                if theirs[LogRef(document: doc, page: s.page)]?.covers(s.clock) == true {
                    accepted.append(s)
                } else {
                    report.checkpointsRejected += 1
                    run.needsComparison = true
                }
            }
            guard !accepted.isEmpty else { continue }
            var assets: [[UInt8]] = []
            let referenced = Set(accepted.flatMap(\.imageAssets))
            for asset in referenced.sorted() {
                report.assetRequests += 1
                let bytes = try await remote.getAsset(asset, document: doc)
                guard AssetID.of(bytes) == asset else {
                    throw LnoteError(.corrupt, "asset \(asset) from \(remote.key) does not match its hash")
                }
                assets.append(bytes)
                report.assetsReceived += 1
            }
            try await notebook.installCheckpoint(document: doc, pages: accepted, assets: assets)
            report.checkpointsInstalled += accepted.count
            run.documentsReceived.insert(doc)
            for s in accepted {
                let log = LogRef(document: doc, page: s.page)
                installed.uploaded[log] = s.clock
                run.installed.append(log)
                let covered = Int(clamping: s.clock.total)
                run.installedOperations[log] = covered
                report.opsFromCheckpoints += covered
            }
        }
        // What was installed counts as uploaded: this client re-uploads a page only once it
        // has grown by the interval past it.
        try await notebook.saveRemoteState(installed.encoded(), key: CheckpointState.key(remote.key))
    }

    /// [SYNC-59] After the sync, each page installed by this run must hold what its checkpoint
    /// and the operations received give; one that does not gives up its checkpoint and is
    /// rebuilt from operations (the caller compares clocks again to fetch its history).
    /// - Returns: true when a page was given up.
    func checkInstalledPages(_ run: inout SyncRun, _ report: inout SyncReport) async throws -> Bool {
        var rebuilt = false
        for log in run.installed {
            guard let ok = try await notebook.installedPageMatches(log), !ok else { continue }
            try await notebook.dropCheckpoint(log)
            report.checkpointsRebuilt.append(log)
            // Its history now comes as operations, counted as received.
            report.opsFromCheckpoints -= run.installedOperations[log] ?? 0
            rebuilt = true
        }
        run.installed = []
        return rebuilt
    }

    /// After a successful sync, uploads a checkpoint for each page log whose clock covers
    /// `checkpointInterval` more operations than the last checkpoint this client uploaded
    /// for it, and which the remote is known to hold entirely.
    ///
    /// A remote that keeps no checkpoints (404, a folder) is remembered as such until the
    /// next first contact; a checkpoint the remote finds too large is skipped until the page
    /// grows again. Other failures throw (the sync itself is already saved).
    func uploadCheckpoints(_ state: RemoteState, firstContact: Bool, _ report: inout SyncReport) async throws {
        guard checkpointInterval > 0 else { return }
        let key = CheckpointState.key(remote.key)
        let saved = CheckpointState.decode(try await notebook.loadRemoteState(key: key) ?? [])
        var up = saved
        if firstContact { up.unsupported = false }
        guard !up.unsupported else { return }
        for lc in try await notebook.logClocks() where lc.log.page != nil {
            let last = up.uploaded[lc.log] ?? VectorClock()
            guard lc.clock.total >= last.total &+ UInt64(checkpointInterval),
                  state.known[lc.log]?.covers(lc.clock) == true,
                  let s = try await notebook.checkpointState(of: lc.log), !s.clock.isEmpty,
                  // A state holding operations its log lost ([PKG-51]) is not one the remote's
                  // operations give: no checkpoint of it ([SYNC-59]).
                  state.known[lc.log]?.covers(s.clock) == true else { continue }
            // A checkpoint is replica-independent: no log offset, no incarnation.
            let c = Checkpoint(log: lc.log, clock: s.clock,
                               snapshot: PageSnapshot.encode(s, coveredLogOffset: 0, logIncarnation: 0))
            do {
                try await remote.putCheckpoint(c)
                report.checkpointsSent += 1
            } catch let e as LnoteError where e.code == .notFound {
                up.unsupported = true
                break
            } catch let e as LnoteError where e.code == .limitExceeded {
                // Too large for this remote: wait until the page grows by the interval again.
            } catch let e as LnoteError where e.code == .invalidArgument {
                // Refused as not the state the remote's operations give ([SYNC-59]): reported,
                // and offered again once the page grows by the interval. A checkpoint only
                // spares newcomers a replay; its refusal does not stop the sync.
                report.checkpointsRefused.append("\(lc.log): \(e.message)")
            }
            up.uploaded[lc.log] = s.clock
        }
        if up != saved { try await notebook.saveRemoteState(up.encoded(), key: key) }
    }
}
