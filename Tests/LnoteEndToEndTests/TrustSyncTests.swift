import Foundation
import Testing
import LnoteModel
import LnoteReplication
import LnoteStore
import LnoteSync
import LnoteServer
import LnoteTestSupport

/// Trust, end to end (sync-protocol.md §6 client side; document-package.md §9): every way a
/// replica id gets reused ends in a fork that is found and repaired, or reported when it is
/// another replica's; damaged and deleted logs get their operations back from a peer.
@Suite struct TrustSyncTests {
    // MARK: - Helpers

    static func open(_ path: String, replica: ReplicaID? = nil) async throws -> Notebook {
        var o = Fixture.quiet
        o.newReplicaID = replica
        return try await Notebook.open(at: path, create: true, options: o)
    }

    /// `lnote sync FROM TO` in this process.
    @discardableResult
    static func folderSync(_ from: String, _ to: String, reauthor: ReauthorHook? = Notebook.defaultReauthor) async throws -> SyncReport {
        let a = try await open(from)
        let b = try await open(to)
        do {
            var session = SyncSession(notebook: a, remote: LocalRemote(key: to, endpoint: NotebookEndpoint(notebook: b),
                                                                       cursorsOutliveProcess: false))
            session.reauthor = reauthor
            let r = try await session.run()
            try await a.close()
            try await b.close()
            return r
        } catch {
            try? await a.close()
            try? await b.close()
            throw error
        }
    }

    /// The folder's first document and its first page.
    static func firstPage(_ path: String) async throws -> (DocumentID, PageID) {
        let nb = try await open(path)
        let doc = try await nb.documentIDs()[0]
        let pid = try await nb.openDocument(doc).pageList[0].id
        try await nb.close()
        return (doc, pid)
    }

    /// Adds strokes to the first page; returns their ids.
    @discardableResult
    static func addStrokes(_ path: String, _ n: Int, seed: UInt64) async throws -> [OpID] {
        let nb = try await open(path)
        let d = try await nb.openDocument(try await nb.documentIDs()[0])
        let ids = try await d.addStrokes(HandwritingGenerator.strokes(seed: seed, count: n), to: await d.pageList[0].id)
        try await nb.close()
        return ids
    }

    /// Every log's operations, by log, as (id, content hash), sorted: what two converged
    /// replicas hold identically.
    static func operationSets(_ path: String) async throws -> [String: [String]] {
        let nb = try await open(path)
        var out: [String: [String]] = [:]
        for doc in try await nb.documentIDs() {
            let d = try await nb.openDocument(doc)
            out["\(doc)"] = try await d.operations(notCoveredBy: VectorClock()).map { "\($0.id)#\(hexString(ContentHash.of($0)))" }.sorted()
            for p in try await d.pageLogs() {
                out["\(doc)/\(p)"] = try await d.operations(page: p, notCoveredBy: VectorClock())
                    .map { "\($0.id)#\(hexString(ContentHash.of($0)))" }.sorted()
            }
        }
        try await nb.close()
        return out
    }

    static func clocks(_ path: String) async throws -> [LogClock] {
        let nb = try await open(path)
        let c: [LogClock] = try await nb.logClocks()
        try await nb.close()
        return c
    }

    /// Copies a folder's content into `to` (created if needed), keeping `to` itself: a restore
    /// in place from a backup.
    static func restore(_ backup: String, into to: String) throws {
        let fm = FileManager.default
        for name in try fm.contentsOfDirectory(atPath: to) { try fm.removeItem(atPath: to + "/" + name) }
        for name in try fm.contentsOfDirectory(atPath: backup) { try fm.copyItem(atPath: backup + "/" + name, toPath: to + "/" + name) }
    }

    /// Writes `.lnote/replica.json` so that `folder` keeps `replica` where it is: a copy
    /// whose replica file was carried along and matches its new place ([PKG-60] cannot tell).
    static func adoptReplica(_ folder: String, _ replica: ReplicaID) throws {
        let path = URL(fileURLWithPath: folder).resolvingSymlinksInPath().path
        var st = stat()
        guard stat(path, &st) == 0 else { throw LnoteError(.io, "stat failed", path: path) }
        var fingerprint: [String: Any] = ["device": UInt64(st.st_dev), "inode": UInt64(st.st_ino), "path": path]
        if let m = try? String(contentsOfFile: "/etc/machine-id", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines),
           !m.isEmpty { fingerprint["machine"] = m }
        let json: [String: Any] = ["format": 1, "replica": replica.description, "fingerprint": fingerprint, "previous": [String]()]
        try JSONSerialization.data(withJSONObject: json).write(to: URL(fileURLWithPath: path + "/.lnote/replica.json"))
    }

    /// Writes `.lnote/replica.json` as a sync killed right after it minted a new id for a
    /// fork repair leaves it: `replica` current, `former` in `previous` and in `repairing`
    /// (without `repairing`: as a move of the folder leaves it).
    static func stoppedRepair(_ folder: String, replica: ReplicaID, former: ReplicaID, repairing: Bool = true) throws {
        try adoptReplica(folder, replica)
        let file = URL(fileURLWithPath: folder).resolvingSymlinksInPath().path + "/.lnote/replica.json"
        var json = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: file))) as? [String: Any])
        json["previous"] = [former.description]
        if repairing { json["repairing"] = [former.description] }
        try JSONSerialization.data(withJSONObject: json).write(to: URL(fileURLWithPath: file))
    }

    /// A folder restored in place, in `dir`: A (6 strokes, replica `x`) synced with B, backed
    /// up, 2 more strokes synced, then the backup restored into A (same directory, same id).
    /// Returns A, B and x.
    static func restoredInPlace(_ dir: TempDir, seed: UInt64) async throws -> (a: String, b: String, x: ReplicaID) {
        let (a, b, backup) = (dir.sub("A"), dir.sub("B"), dir.sub("backup"))
        _ = try await Fixture.notebook(at: a, strokes: 6, seed: seed)
        let x = try await Self.replica(a)
        try await Self.folderSync(a, b)
        try FileManager.default.copyItem(atPath: a, toPath: backup)
        try await Self.addStrokes(a, 2, seed: seed + 1)
        try await Self.folderSync(a, b)
        try Self.restore(backup, into: a)
        return (a, b, x)
    }

    /// A hidden fork of another replica behind equal clocks, in `dir`: A (replica `x`, 3
    /// strokes) synced with B; A2, A's copy under the same id; A and A2 each add a stroke
    /// (both x.4, different content); B syncs with A. Returns A2, B and x.
    static func hiddenFork(_ dir: TempDir, seed: UInt64) async throws -> (a2: String, b: String, x: ReplicaID) {
        let (a, a2, b) = (dir.sub("A"), dir.sub("A2"), dir.sub("B"))
        _ = try await Fixture.notebook(at: a, strokes: 3, seed: seed)
        let x = try await Self.replica(a)
        try await Self.folderSync(b, a)
        try FileManager.default.copyItem(atPath: a, toPath: a2)
        try Self.adoptReplica(a2, x)
        try await Self.addStrokes(a, 1, seed: seed + 1)
        try await Self.addStrokes(a2, 1, seed: seed + 2)
        try await Self.folderSync(b, a)
        return (a2, b, x)
    }

    static func replica(_ path: String) async throws -> ReplicaID {
        let nb = try await open(path)
        let r = nb.replica
        try await nb.close()
        return r
    }

    static func verify(_ path: String) throws -> VerifyReport { try Verify.run(folder: path) }

    // MARK: - Forks: every way an id gets reused

    /// [SYNC-55] [SYNC-54] [SYNC-52] [SYNC-53] A folder restored from a backup into the same
    /// directory keeps its replica id (its fingerprint matches); its new stroke takes an id
    /// the other side already holds with other content. The sync sees the remote holding
    /// more of its own operations (restored in place: a new id before anything else), pulls
    /// them, finds by digests and hashes which operation forked, moves its version out to the
    /// quarantine, takes the remote's, and makes its stroke again under the new id.
    /// (Before: the stroke was pushed nowhere and silently kept, and the remote's operation
    /// of that id never reached this folder: the two folders never converged.)
    @Test func restoredInPlaceForks() async throws {
        let dir = try TempDir()
        let (a, b, x) = try await Self.restoredInPlace(dir, seed: 41)
        #expect(try await Self.replica(a) == x, "restored in place: same directory, same fingerprint, same id")
        let reused = try await Self.addStrokes(a, 1, seed: 43)
        #expect(reused == [OpID(replica: x, counter: 7)], "the id B already holds with other content")

        let r = try await Self.folderSync(a, b)
        let y = try await Self.replica(a)
        #expect(y != x)
        #expect(r.replicaChanges.map(\.old) == [x] && r.replicaChanges.map(\.new) == [y])
        #expect(r.forks.map(\.id) == [OpID(replica: x, counter: 7)] && r.forks.allSatisfy { $0.own && $0.source == .digests })
        let repair = try #require(r.repairs.first)
        #expect(r.repairs.count == 1 && repair.replica == x && repair.newReplica == y)
        #expect(repair.removed == [OpID(replica: x, counter: 7), OpID(replica: x, counter: 8)])
        #expect(repair.toRemake == 1 && repair.remade == 1 && repair.pending == 0, "\(repair)")
        #expect(!r.needsAttention)
        #expect(try await Fixture.canonical(a) == Fixture.canonical(b))
        #expect(try await Self.operationSets(a) == Self.operationSets(b))
        let (doc, pid) = try await Self.firstPage(a)
        let nb = try await Self.open(a)
        let els = try await nb.openDocument(doc).elements(pid)
        #expect(els.count == 9 && els.filter { $0.id.replica == y }.count == 1)
        try await nb.close()
        let v = try Self.verify(a)
        #expect(v.quarantine.count == 2 && v.quarantine.allSatisfy { $0.kind == .ownFork && $0.remadeAs != nil })
        #expect(v.problems(.quarantinedOperation).isEmpty && v.problems(.knownFork).isEmpty, "\(v.problems)")
        // Settled: the next sync finds nothing.
        let again = try await Self.folderSync(a, b)
        #expect(again.forks.isEmpty && again.repairs.isEmpty && again.opsSent == 0 && again.opsReceived == 0)
    }

    /// [SYNC-54] A sync stopped (killed) during a fork repair, after it wrote the new replica
    /// id and before it took the forked operations out of the logs: the next sync still
    /// treats the former id as this folder's own (replica.json lists it in `repairing`),
    /// finds the fork again, repairs it, and the two folders converge; the mark is then gone.
    /// (Before: the former id was "another replica's", both versions were kept, and every
    /// sync reported the fork and exited 3: the folders never converged.)
    @Test func forkRepairStoppedAfterTheMintIsResumed() async throws {
        let dir = try TempDir()
        let (a, b, x) = try await Self.restoredInPlace(dir, seed: 51)
        let reused = try await Self.addStrokes(a, 1, seed: 53)
        #expect(reused == [OpID(replica: x, counter: 7)])
        // What the killed sync left: a new id written, nothing else done.
        let y0 = ReplicaID(0x5eed_0000_0000_0051)
        try Self.stoppedRepair(a, replica: y0, former: x)
        #expect(try await Self.replica(a) == y0)

        let r = try await Self.folderSync(a, b)
        #expect(r.forks.contains { $0.id == OpID(replica: x, counter: 7) && $0.own }, "\(r.forks)")
        let repair = try #require(r.repairs.first { $0.replica == x })
        #expect(repair.toRemake == 1 && repair.remade == 1 && repair.pending == 0, "\(repair)")
        #expect(r.replicaChanges.isEmpty, "the id minted before the stop is kept: \(r.replicaChanges)")
        #expect(!r.needsAttention)
        #expect(try await Fixture.canonical(a) == Fixture.canonical(b))
        #expect(try await Self.operationSets(a) == Self.operationSets(b))
        let file = try String(contentsOfFile: a + "/.lnote/replica.json", encoding: .utf8)
        #expect(!file.contains("repairing"), "\(file)")
        let v = try Self.verify(a)
        #expect(v.problems(.knownFork).isEmpty && v.problems(.quarantinedOperation).isEmpty, "\(v.problems)")
        let again = try await Self.folderSync(a, b)
        #expect(again.forks.isEmpty && again.repairs.isEmpty && again.opsSent == 0 && again.opsReceived == 0)
    }

    /// [SYNC-54] A folder restored from a backup, edited (its stroke takes an id the other
    /// side holds with other content), then moved before its sync: the move gave it a new id,
    /// and the forked one is only a *former* id, another replica's by default (a copy cannot
    /// be told from a move). The sync reports the fork and keeps both (exit 3). Once the
    /// person declares the former id this folder's own (`adoptFormerReplica`, `sync --adopt`),
    /// the next sync repairs it as its own: the stroke is made again under the current id,
    /// the remote's version is taken, and the folders converge. (Before: nothing could repair
    /// it, and every sync reported the fork for ever.)
    @Test func forkUnderAFormerIdIsRepairedOnceAdopted() async throws {
        let dir = try TempDir()
        let (a, b, x) = try await Self.restoredInPlace(dir, seed: 71)
        let reused = try await Self.addStrokes(a, 1, seed: 73)
        #expect(reused == [OpID(replica: x, counter: 7)])
        // The move: a new id, the old one in `previous` only.
        let y = ReplicaID(0x5eed_0000_0000_0071)
        try Self.stoppedRepair(a, replica: y, former: x, repairing: false)
        let file = URL(fileURLWithPath: a).resolvingSymlinksInPath().path + "/.lnote/replica.json"

        let lnote = Subprocess.product("lnote")
        let first = try await Self.folderSync(a, b)
        #expect(first.forks.contains { $0.id.replica == x && !$0.own }, "\(first.forks)")
        #expect(first.needsAttention && first.repairs.isEmpty)
        // The command line names the former id and says how to declare it.
        let told = try await Subprocess.run(lnote, ["sync", a, b])
        #expect(told.code == 3 && told.errText.contains("\(x) is a former id of this folder")
                    && told.errText.contains("--adopt \(x)"), "\(told.errText)")
        let wrong = try await Subprocess.run(lnote, ["sync", a, b, "--adopt", "0000000000001234"])
        #expect(wrong.code == 1 && wrong.errText.contains("is not one of this folder's former replica ids"), "\(wrong.errText)")

        let nb = try await Self.open(a)
        #expect(nb.previousReplicas == [x])
        do {
            _ = try await nb.adoptFormerReplica(ReplicaID(0x1234))
            Issue.record("an id that is not a former one was adopted")
        } catch let e as LnoteError {
            #expect(e.code == .invalidArgument, "\(e)")
        }
        #expect(try await nb.adoptFormerReplica(x))
        #expect(try await !nb.adoptFormerReplica(x), "declared once")
        try await nb.close()

        let r = try await Self.folderSync(a, b)
        #expect(r.forks.contains { $0.id == OpID(replica: x, counter: 7) && $0.own }, "\(r.forks)")
        let repair = try #require(r.repairs.first { $0.replica == x })
        #expect(repair.newReplica == y && repair.toRemake == 1 && repair.remade == 1 && repair.pending == 0, "\(repair)")
        #expect(r.replicaChanges.isEmpty, "the current id is already new: \(r.replicaChanges)")
        #expect(!r.needsAttention)
        #expect(try await Fixture.canonical(a) == Fixture.canonical(b))
        #expect(try await Self.operationSets(a) == Self.operationSets(b))
        let after = try String(contentsOfFile: file, encoding: .utf8)
        #expect(!after.contains("repairing"), "\(after)")
        let v = try Self.verify(a)
        #expect(v.problems(.knownFork).isEmpty && v.problems(.quarantinedOperation).isEmpty, "\(v.problems)")
        let again = try await Self.folderSync(a, b)
        #expect(again.forks.isEmpty && again.repairs.isEmpty && again.opsSent == 0 && again.opsReceived == 0 && !again.needsAttention)
    }

    /// [SYNC-54] A sync stopped after it took the forked operations out of the logs and
    /// before it made them again: the next sync makes them again from the quarantine (the
    /// `ownFork` entries without `remadeAs` of the ids in `repairing`), and the user's stroke
    /// is back, as a new element. (Before: that sync found no fork, said nothing, exited 0,
    /// and the stroke was gone from the page but for its quarantine entry.)
    @Test func forkRepairStoppedBeforeReauthoringIsResumed() async throws {
        let dir = try TempDir()
        let (a, b, x) = try await Self.restoredInPlace(dir, seed: 61)
        _ = try await Self.addStrokes(a, 1, seed: 64)
        // The repair up to its removals (no re-authoring step): the stroke waits in the quarantine.
        let first = try await Self.folderSync(a, b, reauthor: nil)
        let y = try await Self.replica(a)
        #expect(first.repairs.reduce(0) { $0 + $1.pending } == 1, "\(first.repairs)")
        #expect(!(try String(contentsOfFile: a + "/.lnote/replica.json", encoding: .utf8)).contains("repairing"))
        // What a kill before the re-authoring leaves: the former id still listed.
        try Self.stoppedRepair(a, replica: y, former: x)
        let r = try await Self.folderSync(a, b)
        #expect(r.repairs.reduce(0) { $0 + $1.remade } == 1 && r.repairs.allSatisfy { $0.pending == 0 }, "\(r.repairs)")
        #expect(!r.needsAttention)
        #expect(try await Fixture.canonical(a) == Fixture.canonical(b))
        let (doc, pid) = try await Self.firstPage(a)
        let nb = try await Self.open(a)
        let els = try await nb.openDocument(doc).elements(pid)
        #expect(els.count == 9 && els.filter { $0.id.replica == y }.count == 1, "\(els.count)")
        try await nb.close()
        let v = try Self.verify(a)
        #expect(v.problems(.quarantinedOperation).isEmpty, "\(v.problems)")
        #expect(!(try String(contentsOfFile: a + "/.lnote/replica.json", encoding: .utf8)).contains("repairing"))
    }

    /// [SYNC-54] [SYNC-52] [SYNC-53] A folder copied with its replica file to a place whose
    /// fingerprint matches (simulated by writing replica.json): both copies write under one
    /// id. The copy that is ahead computes its chain at the other's counter, sees it differ,
    /// asks the hashes before pushing anything, and repairs: its two strokes are made again
    /// under a new id; the other side never received the forked versions.
    @Test func copiedWithItsReplicaFileForks() async throws {
        let dir = try TempDir()
        let (a, a2) = (dir.sub("A"), dir.sub("A2"))
        _ = try await Fixture.notebook(at: a, strokes: 4, seed: 51)
        let x = try await Self.replica(a)
        try FileManager.default.copyItem(atPath: a, toPath: a2)
        try Self.adoptReplica(a2, x)
        #expect(try await Self.replica(a2) == x)
        try await Self.addStrokes(a, 1, seed: 52)
        try await Self.addStrokes(a2, 2, seed: 53)

        let r = try await Self.folderSync(a2, a)
        let y = try await Self.replica(a2)
        #expect(y != x && r.replicaChanges.map(\.old) == [x])
        #expect(r.forks.map(\.id) == [OpID(replica: x, counter: 5)] && r.forks.allSatisfy { $0.own })
        #expect(r.repairs.map(\.removed) == [[OpID(replica: x, counter: 5), OpID(replica: x, counter: 6)]])
        #expect(r.repairs.map(\.remade) == [2] && !r.needsAttention, "\(r.repairs)")
        #expect(try await Fixture.canonical(a) == Fixture.canonical(a2))
        #expect(try await Self.operationSets(a) == Self.operationSets(a2))
        // A never held A2's versions: its quarantine is empty and its x.5 is its own.
        #expect(try Self.verify(a).quarantine.isEmpty)
        let (doc, pid) = try await Self.firstPage(a)
        let nb = try await Self.open(a)
        let ops = try await nb.openDocument(doc).operations(page: pid, notCoveredBy: VectorClock())
        #expect(ops.filter { $0.id.replica == x }.map(\.id.counter) == [1, 2, 3, 4, 5])
        #expect(ops.filter { $0.id.replica == y }.count == 2)
        try await nb.close()
    }

    /// [SYNC-54] [SYNC-52] [SYNC-53] Impersonation behind equal clocks, over a real peer
    /// server: another folder forced to the server's replica id (`StoreOptions.newReplicaID`)
    /// that got the document as files writes one stroke as the server does: the clocks are
    /// equal, only the digests differ. The client asks the hashes over HTTP, repairs, and
    /// both converge with both strokes. Without digests the two would hold different
    /// operations under one id forever, each believing the other up to date.
    @Test func impersonatorForksBehindEqualClocks() async throws {
        let dir = try TempDir()
        let (s, c) = (dir.sub("S"), dir.sub("C"))
        var rng = TestRNG(seed: 61)
        let x = ReplicaID(UInt64.random(in: 1...UInt64.max, using: &rng))
        print("impersonatorForksBehindEqualClocks: replica \(x) from seed \(rng.seed)")
        let nbS = try await Self.open(s, replica: x)
        let d = try await nbS.createDocument(title: "shared")
        let pid = await d.pageList[0].id
        _ = try await d.addStrokes(HandwritingGenerator.strokes(seed: 62, count: 4), to: pid)
        try await d.close()
        let nbC = try await Self.open(c, replica: x)
        try await nbC.close()
        try FileManager.default.copyItem(atPath: PackagePaths(folder: s, id: d.id).root, toPath: PackagePaths(folder: c, id: d.id).root)
        let ds = try await nbS.openDocument(d.id)
        _ = try await ds.addStroke(HandwritingGenerator.strokes(seed: 63, count: 1)[0], to: pid)
        try await ds.close()
        try await Self.addStrokes(c, 1, seed: 64)
        #expect(try await Self.clocks(c) == (try await nbS.logClocks() as [LogClock]), "equal clocks")

        let server = try PeerServer(notebook: nbS, token: Fixture.peerToken)
        let r = try await Fixture.sync(c, server.url, token: Fixture.peerToken)
        #expect(r.forks.map(\.id) == [OpID(replica: x, counter: 5)] && r.forks.first?.source == .digests && r.forks.first?.own == true)
        #expect(r.replicaChanges.count == 1 && r.repairs.map(\.remade) == [1] && !r.needsAttention, "\(r)")
        try server.close()
        try await nbS.close()
        #expect(try await Fixture.canonical(c) == Fixture.canonical(s))
        #expect(try await Self.operationSets(c) == Self.operationSets(s))
        let nb = try await Self.open(c)
        #expect(nb.replica != x)
        #expect(try await nb.openDocument(d.id).elements(pid).count == 6)
        try await nb.close()
    }

    /// [SYNC-51] [SYNC-52] [SYNC-53] [SYNC-56] A hidden fork of another replica behind equal
    /// clocks: B holds A's x.4, A2 (A's copy, same id) holds its own x.4. Syncing B with A2,
    /// both keep theirs; the fork is reported, kept in B's quarantine, listed by verify, and
    /// `lnote sync` exits 3 saying so.
    @Test func hiddenForkOfAnotherReplicaIsKeptAndReported() async throws {
        let dir = try TempDir()
        let (a2, b, x) = try await Self.hiddenFork(dir, seed: 71)
        let before = try await Self.operationSets(b)

        let lnote = Subprocess.product("lnote")
        let out = try await Subprocess.run(lnote, ["sync", b, a2])
        #expect(out.status == 3, "status \(out.code): \(out.errText)")
        #expect(out.errText.contains("fork of \(x).4") && out.errText.contains("another replica's: both kept"), "\(out.errText)")
        #expect(try await Self.operationSets(b) == before, "B keeps its version")
        let verify = try await Subprocess.run(lnote, ["verify", b])
        #expect(verify.status == 1 && verify.outText.contains("knownFork") && verify.outText.contains("\(x).4"), "\(verify.outText)")
        let entry = try #require(try Self.verify(b).quarantine.first)
        #expect(entry.kind == .fork && entry.operation == OpID(replica: x, counter: 4) && entry.remote.hasSuffix("/A2"))
        #expect(entry.frame == nil && entry.hash?.count == 16 && entry.otherHash?.count == 16, "found by hashes only")
        // A2 keeps its own too.
        let (doc, pid) = try await Self.firstPage(a2)
        let nb = try await Self.open(a2)
        #expect(try await nb.openDocument(doc).elements(pid).count == 4)
        try await nb.close()
    }

    /// [SYNC-54] [SYNC-56] The same hidden fork with a remote whose cursors outlive the
    /// process (a peer server or a relay, here its endpoint kept across syncs): every sync
    /// reports it, not only the first (before: the next syncs went by the cursor, compared
    /// nothing, and said nothing while the folders stayed different), until it is gone.
    @Test func forkOfAnotherReplicaIsReportedOnEverySyncWithACursor() async throws {
        let dir = try TempDir()
        let (a2, b, x) = try await Self.hiddenFork(dir, seed: 81)
        let nbB = try await Self.open(b)
        let nbA2 = try await Self.open(a2)
        let remote = LocalRemote(key: "peer", endpoint: NotebookEndpoint(notebook: nbA2), cursorsOutliveProcess: true)
        for round in 1...3 {
            let r = try await SyncSession(notebook: nbB, remote: remote).run()
            #expect(r.forks.contains { $0.id == OpID(replica: x, counter: 4) && !$0.own }, "round \(round): \(r.forks)")
            #expect(r.needsAttention, "round \(round)")
        }
        try await nbB.close()
        try await nbA2.close()
        #expect(try Self.verify(b).problems(.knownFork).count == 1)
        // Its author repairs it (A2 syncs with B: its own fork, a new id, x.4 taken from B);
        // B's next comparison with A2 finds no fork: the entry is resolved, verify is clean.
        let repaired = try await Self.folderSync(a2, b)
        #expect(repaired.forks.contains { $0.own } && !repaired.replicaChanges.isEmpty, "\(repaired.forks)")
        let nbB2 = try await Self.open(b)
        let nbA3 = try await Self.open(a2)
        let after = try await SyncSession(notebook: nbB2, remote: LocalRemote(key: "peer", endpoint: NotebookEndpoint(notebook: nbA3),
                                                                             cursorsOutliveProcess: true)).run()
        #expect(after.forks.isEmpty && !after.needsAttention, "\(after.forks)")
        try await nbB2.close()
        try await nbA3.close()
        let v = try Self.verify(b)
        #expect(v.problems(.knownFork).isEmpty, "\(v.problems)")
        #expect(v.quarantine.contains { $0.kind == .fork && $0.resolved != nil }, "\(v.quarantine)")
        #expect(try await Fixture.canonical(b) == Fixture.canonical(a2))
    }

    /// [SYNC-51] Over a real peer server in the steady state (a cursor, no clock comparison):
    /// the client pushes another replica's x.4 that it got elsewhere, the server holds its own
    /// x.4: the server stores nothing of it, answers it in `forks` and keeps the pushed version
    /// in its quarantine; the client reports the fork (another replica's) and keeps its own.
    @Test func serverAnswersForksOfThePush() async throws {
        let dir = try TempDir()
        let (s, a, a2) = (dir.sub("S"), dir.sub("A"), dir.sub("A2"))
        _ = try await Fixture.notebook(at: s, strokes: 3, seed: 81)
        let x = try await Self.replica(s)
        try FileManager.default.copyItem(atPath: s, toPath: a2)
        try Self.adoptReplica(a2, x)
        let served = try await Self.open(s)
        let server = try PeerServer(notebook: served, token: Fixture.peerToken)
        try await Fixture.sync(a, server.url, token: Fixture.peerToken)
        let (doc, pid) = try await Self.firstPage(a2)
        let ds = try await served.openDocument(doc)
        let theirs = try await ds.addStroke(HandwritingGenerator.strokes(seed: 82, count: 1)[0], to: pid)
        let mine = try await Self.addStrokes(a2, 1, seed: 83)
        #expect(theirs == mine[0])
        try await Self.folderSync(a, a2)
        let r = try await Fixture.sync(a, server.url, token: Fixture.peerToken)
        #expect(r.roundTrips == 1, "steady state")
        #expect(r.forks.count == 1 && r.forks.first?.id == theirs && r.forks.first?.source == .push && r.forks.first?.own == false)
        #expect(r.opsAccepted == 0 && r.needsAttention)
        let held = try await ds.operations(page: pid, notCoveredBy: VectorClock()).last
        #expect(held?.id == theirs && held.map(ContentHash.of) == r.forks.first?.remoteHash)
        try server.close()
        try await served.close()
        let q = try Self.verify(s).quarantine
        #expect(q.count == 1 && q.first?.kind == .fork && q.first?.operation == theirs && q.first?.remote.hasPrefix("replica ") == true)
        #expect(try Self.verify(a).problems(.knownFork).count == 1)
    }

    /// [SYNC-54] Without a re-authoring step the forked own operations stay in the quarantine:
    /// the report says how many, and needs a person.
    @Test func withoutReauthoringOwnVersionsWaitInTheQuarantine() async throws {
        let dir = try TempDir()
        let (a, a2) = (dir.sub("A"), dir.sub("A2"))
        _ = try await Fixture.notebook(at: a, strokes: 2, seed: 91)
        let x = try await Self.replica(a)
        try FileManager.default.copyItem(atPath: a, toPath: a2)
        try Self.adoptReplica(a2, x)
        try await Self.addStrokes(a, 1, seed: 92)
        try await Self.addStrokes(a2, 1, seed: 93)
        let r = try await Self.folderSync(a2, a, reauthor: nil)
        #expect(r.repairs.map(\.pending) == [1] && r.repairs.map(\.remade) == [0] && r.needsAttention)
        #expect(try await Fixture.canonical(a) == Fixture.canonical(a2), "the remote's version is in; the own one waits")
        let v = try Self.verify(a2)
        #expect(v.problems(.quarantinedOperation).count == 1 && v.quarantine.first?.operation == OpID(replica: x, counter: 3))
    }

    // MARK: - Lost history heals

    /// [PKG-49] [PKG-51] [PKG-54] Bytes flipped at random offsets in the middle of the page
    /// logs of a folder whose snapshots keep everything: a sync with a healthy peer server
    /// gives back every lost operation. Checked against the peer: clocks, operation sets (ids
    /// and content hashes) and canonical JSON; the damaged folder verifies without missing
    /// operations. (Before: the folder offered its snapshots' clocks, so the peer never sent
    /// the lost operations, and a newcomer pulling from the damaged folder waited for ever.)
    @Test func damageAtRandomOffsetsHealsFromAPeer() async throws {
        let seed = UInt64(ProcessInfo.processInfo.environment["LNOTE_SEED"].flatMap(UInt64.init) ?? UInt64.random(in: 0...UInt64.max))
        print("damageAtRandomOffsetsHealsFromAPeer: LNOTE_SEED=\(seed)")
        var rng = TestRNG(seed: seed)
        let dir = try TempDir()
        let (a, b, c) = (dir.sub("A"), dir.sub("B"), dir.sub("C"))
        let doc = try await Fixture.notebook(at: a, strokes: 60, pages: 4, seed: seed)
        try await Self.folderSync(b, a)
        // B writes too, so that the damaged logs hold two replicas' operations.
        let nbB = try await Self.open(b)
        let dB = try await nbB.openDocument(doc)
        for p in await dB.pageList.map(\.id) {
            _ = try await dB.addStrokes(HandwritingGenerator.strokes(seed: seed &+ 1, count: 5), to: p)
        }
        try await nbB.close()
        try await Self.folderSync(a, b)
        #expect(try await Self.operationSets(a) == Self.operationSets(b))

        let paths = PackagePaths(folder: a, id: doc)
        let logs = try FileManager.default.contentsOfDirectory(atPath: paths.pages).filter { $0.hasSuffix(".log") }.sorted()
        var flipped = 0
        for name in logs where Bool.random(using: &rng) || flipped == 0 {
            let path = paths.pages + "/" + name
            var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
            // Inside operation frames: damage to the anchor that a copy of it repairs loses
            // nothing (document-package.md [PKG-112]), and this test is about lost operations.
            let frames = try LogFileContents(bytes).frames
            for _ in 0..<Int.random(in: 1...3, using: &rng) {
                let f = frames[Int.random(in: 0..<frames.count, using: &rng)]
                let at = Int.random(in: Int(f.offset)..<Int(f.end), using: &rng)
                bytes[at] ^= UInt8(1 << Int.random(in: 0..<8, using: &rng))
            }
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            flipped += 1
        }
        let damaged = try Self.verify(a)
        #expect(!(damaged.problems(.corruptFrame) + damaged.problems(.tornTail)).isEmpty && !damaged.problems(.missingOperations).isEmpty,
                "seed \(seed): \(damaged.problems)")

        let served = try await Self.open(b)
        let server = try PeerServer(notebook: served, token: Fixture.peerToken)
        let r = try await Fixture.sync(a, server.url, token: Fixture.peerToken)
        #expect(r.opsHealed > 0 && r.missingOperations.isEmpty && r.forks.isEmpty, "seed \(seed): \(r)")
        // A newcomer pulling from the healed folder gets everything.
        try await Self.folderSync(c, a)
        try server.close()
        try await served.close()
        #expect(try await Self.clocks(a) == Self.clocks(b), "seed \(seed)")
        #expect(try await Self.operationSets(a) == Self.operationSets(b), "seed \(seed)")
        #expect(try await Fixture.canonical(a) == Fixture.canonical(b), "seed \(seed)")
        #expect(try await Fixture.canonical(c) == Fixture.canonical(b), "seed \(seed)")
        let healed = try Self.verify(a)
        #expect(healed.problems.allSatisfy { $0.kind == .quarantinedFile }, "seed \(seed): \(healed.problems)")
    }

    /// [PKG-55] [PKG-54] A deleted page log is reported by verify (the file and exactly the
    /// operations its snapshot holds); a folder sync with a peer that holds them refills it.
    @Test func deletedLogIsReportedThenRefilledBySync() async throws {
        let dir = try TempDir()
        let (a, b) = (dir.sub("A"), dir.sub("B"))
        let doc = try await Fixture.notebook(at: a, strokes: 12, pages: 2, seed: 101)
        try await Self.folderSync(b, a)
        let (_, pid) = try await Self.firstPage(a)
        let log = PackagePaths(folder: a, id: doc).log(pid)
        try FileManager.default.removeItem(atPath: log)
        let lnote = Subprocess.product("lnote")
        let out = try await Subprocess.run(lnote, ["verify", a])
        #expect(out.status == 1 && out.outText.contains("missingLog: \(log)") && out.outText.contains("missingOperations: \(log)"),
                "\(out.outText)")
        let r = try await Self.folderSync(a, b)
        #expect(r.opsHealed == 6 && r.missingOperations.isEmpty, "\(r)")
        let after = try Self.verify(a)
        #expect(after.isClean, "\(after.problems)")
        #expect(try await Self.operationSets(a) == Self.operationSets(b))
    }

    /// [PKG-49] [PKG-51] [SYNC-56] Operations lost to damage that no peer holds: the sync with
    /// an empty folder reports exactly which are still missing (`lnote sync` prints them); the
    /// newcomer receives everything the damaged log holds, the operations after the hole
    /// waiting for it, and offers a clock without it, so that any peer holding it sends it.
    @Test func lostOperationsNoPeerHoldsAreReported() async throws {
        let dir = try TempDir()
        let (a, b) = (dir.sub("A"), dir.sub("B"))
        let doc = try await Fixture.notebook(at: a, strokes: 6, seed: 111)
        let x = try await Self.replica(a)
        let (_, pid) = try await Self.firstPage(a)
        let path = PackagePaths(folder: a, id: doc).log(pid)
        var log = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        // Past the anchor and its copy ([PKG-110]) and two operations.
        let at = Int(try LogFileContents(log).frames[2].offset)
        log[at + 20] ^= 0x08  // the third frame: x.3
        try Data(log).write(to: URL(fileURLWithPath: path))

        try await Self.open(b).close()
        let out = try await Subprocess.run(Subprocess.product("lnote"), ["sync", a, b])
        #expect(out.status == 0, "\(out.errText)")
        #expect(out.errText.contains("still lacks 1 operation its state holds") && out.errText.contains(": \(x).3"), "\(out.errText)")
        let r = try await Self.folderSync(a, b)
        #expect(r.missingOperations.map(\.missing.description) == ["\(x).3"] && r.missingOperations.first?.page == pid)
        let nb = try await Self.open(b)
        let d = try await nb.openDocument(doc)
        #expect(try await d.elements(pid).count == 2)
        #expect(try await d.operations(page: pid, notCoveredBy: VectorClock()).map(\.id.counter) == [1, 2, 4, 5, 6])
        #expect(try await d.logClock(page: pid) == VectorClock([(x, UInt64(2))]))
        try await nb.close()
        let v = try Self.verify(a)
        #expect(v.problems(.missingOperations).map(\.message).first?.contains(": \(x).3 (") == true, "\(v.problems)")
    }
}
