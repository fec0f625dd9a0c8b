import Foundation
import Testing
import LnoteModel
import LnoteReplication
@testable import LnoteStore

/// What the logs hold, lost operations, forks, the quarantine (document-package.md §9).
@Suite("Trust in the store: lost operations, forks, the quarantine")
struct TrustStoreTests {
    struct Sample {
        var id: DocumentID
        var paths: PackagePaths
        var page: PageID
        var replica: ReplicaID
        /// Every operation of the page log and of the document log, in log order.
        var pageOps: [Op]
        var docOps: [Op]
        var state: PageState
    }

    /// A closed notebook with one document whose first page holds `n` strokes of this
    /// folder, flushed (the snapshot covers the whole log).
    func sample(_ dir: TempDir, strokes n: Int) async throws -> Sample {
        let nb = try await openNotebook(dir.path)
        let d = try await nb.createDocument(title: "T")
        let p = await d.pageList[0].id
        for i in 0..<n { try await d.addStroke(stroke(3 + i, x: Int32(10 * i)), to: p) }
        try await d.flush()
        let s = Sample(id: d.id, paths: d.paths, page: p, replica: nb.replica,
                       pageOps: try await d.operations(page: p, notCoveredBy: VectorClock()),
                       docOps: try await d.operations(notCoveredBy: VectorClock()), state: try await d.pageState(p))
        try await nb.close()
        return s
    }

    func vc(_ r: ReplicaID, _ c: UInt64) -> VectorClock { VectorClock([(r, c)]) }

    /// The offset of frame `i` (0-based) of a log.
    func frameStart(_ log: [UInt8], _ i: Int) -> Int {
        frameEnds(log)[i]
    }

    // MARK: - [LOG-23] in files a backup or another folder may hold

    /// document.json and manifest.json hold only what operations carried, so a value no
    /// operation could carry ([LOG-23]: a title with a control character, a canvas beyond the
    /// coordinate limit; a clock beyond 2^62 operations) makes the file corrupt, even though
    /// it parses: document.json is quarantined and rebuilt from the log, and `list` shows
    /// the manifest as unreadable instead of printing the title (a terminal escape).
    @Test("[LOG-23] [PKG-11] document.json and manifest.json refuse values no operation carried")
    func filesHoldOnlyWhatOperationsCarried() async throws {
        let dir = try TempDir("trust")
        defer { dir.remove() }
        let s = try await sample(dir, strokes: 2)
        let original = fileBytes(s.paths.document)!
        let json = try #require(try JSONSerialization.jsonObject(with: Data(original)) as? [String: Any])
        let title = try #require(json["title"] as? [String: Any])
        func damaged(_ change: (inout [String: Any]) -> Void) throws -> [UInt8] {
            var j = json
            change(&j)
            return Array(try JSONSerialization.data(withJSONObject: j))
        }
        let cases: [(String, [UInt8])] = [
            ("a title with a terminal escape", try damaged { $0["title"] = ["value": "T\u{1B}[2J", "frontier": title["frontier"]!] }),
            ("a title with a line separator", try damaged { $0["title"] = ["value": "T\u{2028}x", "frontier": title["frontier"]!] }),
            ("a title of 5,000 bytes", try damaged { $0["title"] = ["value": String(repeating: "t", count: 5000), "frontier": title["frontier"]!] }),
            ("a canvas beyond the coordinate limit", try damaged { j in
                var ps = j["pages"] as! [[String: Any]]
                ps[0]["canvas"] = ["value": ["width": Int(Int32.max), "height": 100], "frontier": []]
                j["pages"] = ps
            }),
            ("a clock beyond 2^62 operations", try damaged { $0["clock"] = [s.replica.description: (1 << 62) + 1] }),
        ]
        let before = try await openNotebook(dir.path)
        let expected = await (try before.openDocument(s.id)).state
        try await before.close()
        for (what, bytes) in cases {
            #expect(throws: LnoteError.self, "\(what)") { _ = try DocumentFile.decode(bytes, path: "document.json") }
            try writeFile(s.paths.document, bytes)
            let nb = try await openNotebook(dir.path)
            let d = try await nb.openDocument(s.id)
            #expect(await d.recoveryReports.contains { $0.path == s.paths.document && $0.quarantinedCopy != nil }, "\(what)")
            #expect(await d.state == expected, "\(what): rebuilt from the log")
            try await nb.close()
            for name in listNames(s.paths.root) where name.hasPrefix("document.json.corrupt-") {
                try FileManager.default.removeItem(atPath: s.paths.root + "/" + name)
            }
        }
        // The manifest: list shows it unreadable; opening the document rebuilds it.
        let good = fileBytes(s.paths.manifest)!
        var m = try ManifestFile.decode(good, path: "")
        m.title = "T\u{1B}]0;owned\u{07}"
        try writeFile(s.paths.manifest, try StoreJSON.encode(m))
        let listed = try Notebook.list(at: dir.path)
        guard case .unreadable(let why) = listed.first?.manifest else {
            Issue.record("expected unreadable, got \(String(describing: listed.first))")
            return
        }
        #expect(why.contains("U+1B") && listed.first?.title.contains("\u{1B}") != true, "\(why)")
        let nb = try await openNotebook(dir.path)
        _ = try await nb.openDocument(s.id)
        #expect(fileBytes(s.paths.manifest) == good)
        try await nb.close()
    }

    /// [PKG-51] The missing operations of a clock that claims far more than the log holds
    /// (a snapshot from a backup or another folder may): the gaps, computed from what is
    /// held (counting 2^40 counters one by one would take hours).
    @Test("[PKG-51] missing ranges come from the held counters, not from counting up to the clock")
    func missingRangesOfAHugeClock() {
        let r = ReplicaID(0xa1), top = UInt64(1) << 40
        let m = OpRanges(clock: VectorClock([(r, top)]), held: [r: [1, 2, 5, top]], base: nil)
        #expect(m.ranges[r] == [3...4, 6...(top - 1)])
        #expect(m.count == Int(top) - 4)
        #expect(OpRanges(clock: VectorClock([(r, top)]), held: [:], base: VectorClock([(r, top - 2)])).ranges[r] == [(top - 1)...top])
        #expect(OpRanges(clock: VectorClock([(r, UInt64(3))]), held: [r: [1, 2, 3, 9]], base: nil).isEmpty)
    }

    /// [SYNC-57] [PKG-65] devices.json is a cache another folder or a backup may have
    /// written: names that could not name a device (a terminal escape, a line separator, 129
    /// bytes, a space at an end) are not believed, the others are.
    @Test("[SYNC-57] [PKG-65] device names read from devices.json are only printable ones")
    func deviceNamesArePrintable() async throws {
        let dir = try TempDir("devices")
        defer { dir.remove() }
        let nb = try await openNotebook(dir.path)
        let good = ReplicaID(0xa1)
        let bad = ["\u{1B}]0;owned\u{07}", "lap\u{2028}top", String(repeating: "x", count: 129), " padded", ""]
        var entries = [["replica": good.description, "device": "laptop"]]
        for (i, name) in bad.enumerated() { entries.append(["replica": ReplicaID(0xb0 + UInt64(i)).description, "device": name]) }
        let json = try JSONSerialization.data(withJSONObject: ["format": 1, "devices": entries])
        try writeFile(dir.path + "/.lnote/devices.json", Array(json))
        #expect(try await nb.deviceNames() == [good: "laptop"])
        for name in bad { #expect(PrintableText.deviceNameProblem(name) != nil, "\(name.debugDescription)") }
        #expect(PrintableText.deviceNameProblem("Anne's tablet ✍︎") == nil)
        try await nb.close()
    }

    // MARK: - [PKG-49] [PKG-51] [PKG-54]

    /// A damaged frame in the middle of a page log: the salvage drops it, the snapshot keeps
    /// its operation. The clock offered is what the log holds, the missing operation is
    /// recorded exactly, and receiving it again appends it without applying it twice.
    /// (Before: the clock offered was the state's, so a peer never sent the operation back,
    /// and receipt dropped it as held.)
    @Test("[PKG-49] [PKG-51] [PKG-54] a salvaged log offers what it holds and gets the lost operation back")
    func salvagedLogOffersWhatItHolds() async throws {
        let dir = try TempDir("trust")
        defer { dir.remove() }
        let s = try await sample(dir, strokes: 6)
        var log = fileBytes(s.paths.log(s.page))!
        let third = frameStart(log, 2)
        log[third + 14] ^= 0x40
        try writeFile(s.paths.log(s.page), log)
        let me = s.replica
        // verify, before anything opens the folder, names exactly what the log lacks.
        let before = try Verify.run(folder: dir.path)
        #expect(before.problems(.missingOperations).map(\.path) == [s.paths.log(s.page)])
        #expect(before.problems(.missingOperations).first?.message.contains(": \(me).3 (") == true,
                "\(before.problems(.missingOperations))")

        let nb = try await openNotebook(dir.path)
        // A clock comparison reads every log whole (for its digests): the damage behind the
        // snapshot's offset is found and salvaged before the clock is offered.
        let compared = try await nb.logClocksAndDigests().first { $0.page == s.page }
        #expect(compared?.clock == vc(me, 2) && compared?.digests?.first?.counter == 2)
        let d = try await nb.openDocument(s.id)
        #expect(try await d.pageState(s.page) == s.state, "the state keeps the lost operation")
        #expect(try await d.clock(page: s.page)[me] == 6)
        #expect(try await d.logClock(page: s.page) == vc(me, 2))
        #expect(try await d.missingOperations(page: s.page).sorted.map(\.counters) == [3...3])
        #expect(try await nb.logClocks().first { $0.page == s.page }?.clock == vc(me, 2))
        #expect(fileBytes(s.paths.missing(s.page)) != nil)
        #expect(nb.replica == me, "the state still counts its own operation: no new id [PKG-56]")
        // The log serves only what it holds.
        #expect(try await d.operations(page: s.page, notCoveredBy: VectorClock()).map(\.id.counter) == [1, 2, 4, 5, 6])
        try await d.close()
        // Closing wrote a snapshot paired with the new incarnation: the missing file keeps the truth.
        let d2 = try await nb.openDocument(s.id)
        #expect(try await d2.logClock(page: s.page) == vc(me, 2))
        let out = try await d2.receive(s.pageOps, page: s.page)
        #expect(out.healed == [OpID(replica: me, counter: 3)] && out.appended == 1 && out.applied.isEmpty && out.forks.isEmpty)
        #expect(try await d2.pageState(s.page) == s.state)
        #expect(try await d2.logClock(page: s.page) == vc(me, 6))
        #expect(try await d2.missingOperations(page: s.page).isEmpty)
        #expect(fileBytes(s.paths.missing(s.page)) == nil)
        // Received again: a plain duplicate now.
        let again = try await d2.receive(s.pageOps, page: s.page)
        #expect(again.appended == 0 && again.healed.isEmpty && again.forks.isEmpty)
        try await nb.close()
        let after = try Verify.run(folder: dir.path)
        #expect(after.problems(.missingOperations).isEmpty && after.problems(.corruptFrame).isEmpty, "\(after.problems)")
        let nb3 = try await openNotebook(dir.path)
        let d3 = try await nb3.openDocument(s.id)
        #expect(try await d3.operations(page: s.page, notCoveredBy: VectorClock()).count == 6)
        #expect(try await d3.pageState(s.page) == s.state)
        try await nb3.close()
    }

    /// [PKG-51] The missing-operations file as the spec describes it, read by an independent
    /// reader; a damaged or stale file is recomputed from the log on opening.
    @Test("[PKG-51] the missing-operations file: its layout, and a damaged or stale one is recomputed")
    func missingFileLayout() async throws {
        let dir = try TempDir("trust")
        defer { dir.remove() }
        let s = try await sample(dir, strokes: 8)
        var log = fileBytes(s.paths.log(s.page))!
        for at in [frameStart(log, 2), frameStart(log, 5)] { log[at + 14] ^= 0x40 }
        try writeFile(s.paths.log(s.page), log)
        let nb = try await openNotebook(dir.path)
        // Serving the page reads its log whole: the salvage records what it lost.
        _ = try await nb.openDocument(s.id).operations(page: s.page, notCoveredBy: VectorClock())
        try await nb.close()
        let file = try #require(fileBytes(s.paths.missing(s.page)))
        // magic, version, 2 ranges (me, 3, 1) (me, 6, 1), CRC.
        var expected: [UInt8] = Array("LNMO".utf8) + [1, 2]
        for first: UInt8 in [3, 6] {
            expected += (0..<8).map { UInt8(truncatingIfNeeded: s.replica.rawValue >> (8 * UInt64($0))) } + [first, 1]
        }
        let crc = CRC32C.checksum(expected)
        expected += (0..<4).map { UInt8(truncatingIfNeeded: crc >> (8 * UInt32($0))) }
        #expect(file == expected)
        // Damaged: recomputed, rewritten.
        var bad = file
        bad[7] ^= 1
        try writeFile(s.paths.missing(s.page), bad)
        #expect(try Verify.run(folder: dir.path).problems(.undecodable).map(\.path) == [s.paths.missing(s.page)])
        let nb2 = try await openNotebook(dir.path)
        #expect(try await nb2.openDocument(s.id).missingOperations(page: s.page).count == 2)
        try await nb2.close()
        #expect(fileBytes(s.paths.missing(s.page)) == file)
        // Stale (says more than is missing: a crash after an append, [PKG-54]): recomputed.
        var stale = OpRanges()
        stale = OpRanges(clock: vc(s.replica, 8), held: [s.replica: [1, 2]], base: nil)
        try writeFile(s.paths.missing(s.page), stale.encoded())
        let nb3 = try await openNotebook(dir.path)
        #expect(try await nb3.openDocument(s.id).logClock(page: s.page) == vc(s.replica, 2))
        try await nb3.close()
        #expect(fileBytes(s.paths.missing(s.page)) == file)
    }

    // MARK: - [PKG-55]

    /// A deleted page log and a deleted document.log: verify reports both files and every
    /// operation their snapshots hold; opening keeps the state, offers empty clocks, and
    /// receiving the operations again refills the logs.
    @Test("[PKG-55] [PKG-51] [PKG-54] a deleted log is reported by verify and refilled by receipt")
    func deletedLogIsReportedAndRefilled() async throws {
        let dir = try TempDir("trust")
        defer { dir.remove() }
        let s = try await sample(dir, strokes: 4)
        try FileManager.default.removeItem(atPath: s.paths.log(s.page))
        try FileManager.default.removeItem(atPath: s.paths.documentLog)
        let r = try Verify.run(folder: dir.path)
        #expect(Set(r.problems(.missingLog).map(\.path)) == [s.paths.log(s.page), s.paths.documentLog])
        let missing = Dictionary(r.problems(.missingOperations).map { ($0.path, $0.message) }, uniquingKeysWith: { a, _ in a })
        #expect(missing[s.paths.log(s.page)]?.hasPrefix("4 operations") == true, "\(missing)")
        #expect(missing[s.paths.documentLog]?.contains("\(s.replica).1…2") == true, "\(missing)")

        let nb = try await openNotebook(dir.path)
        let d = try await nb.openDocument(s.id)
        #expect(try await d.pageState(s.page) == s.state)
        #expect(try await d.logClock().isEmpty)
        #expect(try await d.logClock(page: s.page).isEmpty)
        #expect(try await d.missingOperations().count == 2)
        #expect(try await d.missingOperations(page: s.page).count == 4)
        let clocks = try await nb.logClocks()
        #expect(clocks.map(\.clock) == [VectorClock()], "the document log offers nothing; the page is not listed")
        #expect(try await nb.missingOperations().map(\.missing.count).sorted() == [2, 4])
        #expect(try await d.receive(s.docOps).healed.count == 2)
        #expect(try await d.receive(s.pageOps, page: s.page).healed.count == 4)
        #expect(try await d.logClock(page: s.page) == vc(s.replica, 4))
        try await nb.close()
        let after = try Verify.run(folder: dir.path)
        #expect(after.isClean, "\(after.problems)")
    }

    // MARK: - [PKG-56]

    /// A snapshot set aside ([PKG-47]) that held this replica's own operations, and own
    /// operations waiting for one the damage took: the folder mints a new id before the next
    /// edit, which then cannot reuse a lost id.
    @Test("[PKG-56] [PKG-60] own operations lost from a log make the folder mint a new replica id")
    func lostOwnOperationsMintANewID() async throws {
        let dir = try TempDir("trust")
        defer { dir.remove() }
        let s = try await sample(dir, strokes: 4)
        let log = fileBytes(s.paths.log(s.page))!
        try writeFile(s.paths.log(s.page), Array(log.prefix(frameStart(log, 2))))
        let nb = try await openNotebook(dir.path)
        let d = try await nb.openDocument(s.id)
        #expect(try await d.elements(s.page).count == 2)
        let report = try #require(await d.recoveryReports.first { $0.path == s.paths.content(s.page) })
        #expect(report.lostOwnOperations == 2)
        let change = try #require(report.mintedReplica)
        #expect(change.old == s.replica && change.new == nb.replica && nb.replica != s.replica)
        #expect(nb.replicaChanges == [change] && nb.previousReplicas == [s.replica])
        let e = try await d.addStroke(stroke(), to: s.page)
        #expect(e == OpID(replica: nb.replica, counter: 1), "not \(s.replica).3")
        try await nb.close()
        let file = try JSONSerialization.jsonObject(with: Data(fileBytes(dir.sub(".lnote/replica.json"))!)) as! [String: Any]
        #expect(file["replica"] as? String == change.new.description)
        #expect(file["previous"] as? [String] == [s.replica.description])
        let reopened = try await openNotebook(dir.path)
        #expect(reopened.replica == change.new && reopened.replicaChange == nil)
        try await reopened.close()

        // Own operations waiting for a lost own one (no snapshot, a damaged frame).
        let dir2 = try TempDir("trust")
        defer { dir2.remove() }
        let t = try await sample(dir2, strokes: 4)
        var log2 = fileBytes(t.paths.log(t.page))!
        log2[frameStart(log2, 1) + 14] ^= 0x40
        try writeFile(t.paths.log(t.page), log2)
        try FileManager.default.removeItem(atPath: t.paths.content(t.page))
        let nb2 = try await openNotebook(dir2.path)
        let d2 = try await nb2.openDocument(t.id)
        #expect(try await d2.elements(t.page).count == 1)
        #expect(nb2.replica != t.replica)
        #expect(await d2.recoveryReports.contains { $0.mintedReplica?.old == t.replica })
        try await nb2.close()
    }

    /// [PKG-60] A new id minted while documents are open: their next operations carry it;
    /// replica.json keeps the old one in `previous` and the folder's fingerprint.
    @Test("[PKG-60] remintReplica: open documents stamp the new id; replica.json records the old")
    func remintWhileDocumentsAreOpen() async throws {
        let dir = try TempDir("trust")
        defer { dir.remove() }
        let nb = try await openNotebook(dir.path)
        let old = nb.replica
        let d = try await nb.createDocument(title: "R")
        let p = await d.pageList[0].id
        #expect(try await d.addStroke(stroke(), to: p).replica == old)
        let change = try await nb.remintReplica(reason: "test")
        #expect(change.old == old && change.new == nb.replica && d.replica == change.new)
        #expect(try await d.addStroke(stroke(), to: p) == OpID(replica: change.new, counter: 1))
        try await d.setTitle("R2")
        #expect(await d.state.title.frontier.last?.id.replica == change.new)
        try await nb.close()
        let again = try await openNotebook(dir.path)
        #expect(again.replica == change.new && again.replicaChange == nil && again.previousReplicas == [old])
        try await again.close()
    }

    // MARK: - [PKG-58]

    /// A stroke made by `replica` as operation `counter` of the page after `before`.
    func forged(_ before: [Op], page: PageID, replica: ReplicaID, points: Int, x: Int32) throws -> Op {
        var r = PageReplica(page: page)
        _ = try r.receive(before)
        return try r.add(.stroke(stroke(points, x: x)), by: replica, wallTime: 1_700_000_000_500)
    }

    /// An operation whose id the log holds with other content is a fork: not stored, the rest
    /// of the call is, and the caller is told both hashes; identical duplicates are dropped;
    /// two versions of one id in one call are a fork too. A server-side receipt keeps the
    /// received version in the quarantine, and verify lists it.
    /// A document this folder does not have yet arrives with two versions of one operation
    /// id: its package is created with one of them; the other is a fork, reported (and
    /// quarantined), never stored beside it.
    @Test("[PKG-58] [PKG-45] a new document whose operations hold one id twice stores it once and reports the fork")
    func forkInANewDocument() async throws {
        let dir = try TempDir("trust")
        defer { dir.remove() }
        let far = ReplicaID(0xF4), docID = DocumentID()
        var r = DocumentReplica(id: docID)
        let create = try r.make(.createDocument(title: "Far"), by: far, wallTime: 1)
        let title = try r.make(.setTitle("one"), by: far, wallTime: 2)
        var other = title
        other.body = .setTitle("two")
        let nb = try await openNotebook(dir.path)
        let out = try await nb.receive([create, title, other], document: docID, page: nil, remote: "replica 00000000000000f4")
        #expect(out.forks.map(\.id) == [title.id], "\(out)")
        let d = try await nb.openDocument(docID)
        #expect(try await d.operations(notCoveredBy: VectorClock()).map(ContentHash.of) == [create, title].map(ContentHash.of))
        #expect(await d.title == "one")
        try await nb.close()
        // Pushed here: listed, not a problem ([PKG-48]): only the pusher's side can repair it.
        let v = try Verify.run(folder: dir.path)
        #expect(v.problems(.knownFork).isEmpty && v.isClean, "\(v.problems)")
        #expect(v.quarantine.count == 1 && v.quarantine.allSatisfy { $0.wasPushedHere && !$0.needsAttention })
    }

    @Test("[PKG-58] [SYNC-51] a duplicate id with other content is a fork: reported, not stored, the rest stored")
    func forkAtReceipt() async throws {
        let dir = try TempDir("trust")
        defer { dir.remove() }
        let s = try await sample(dir, strokes: 3)
        let other = try forged(Array(s.pageOps.prefix(1)), page: s.page, replica: s.replica, points: 9, x: 900)
        #expect(other.id == s.pageOps[1].id && ContentHash.of(other) != ContentHash.of(s.pageOps[1]))
        let stranger = try forged(s.pageOps, page: s.page, replica: ReplicaID(0xB2), points: 4, x: 70)
        let nb = try await openNotebook(dir.path)
        let d = try await nb.openDocument(s.id)
        let out = try await d.receive([other, stranger, s.pageOps[2]], page: s.page)
        #expect(out.forks.map(\.id) == [other.id])
        #expect(out.forks.first?.held == ContentHash.of(s.pageOps[1]) && out.forks.first?.received == ContentHash.of(other))
        #expect(out.forks.first?.frame == OperationCodec.frame(other))
        #expect(out.appended == 1 && out.applied.map(\.id) == [stranger.id])
        #expect(try await d.operations(page: s.page, notCoveredBy: VectorClock()).map(ContentHash.of)
                == (s.pageOps + [stranger]).map(ContentHash.of), "the log keeps its own version")
        // Two versions of one new id in one call: the first is stored, the second is a fork.
        let b2a = try forged(s.pageOps + [stranger], page: s.page, replica: ReplicaID(0xB2), points: 3, x: 1)
        let b2b = try forged(s.pageOps + [stranger], page: s.page, replica: ReplicaID(0xB2), points: 3, x: 2)
        let pair = try await d.receive([b2a, b2b], page: s.page)
        #expect(pair.appended == 1 && pair.forks.map(\.id) == [b2a.id] && pair.forks.first?.held == ContentHash.of(b2a))
        // Through the notebook with a remote: the received version goes to the quarantine.
        let doc = try await nb.receive([other], document: s.id, page: s.page, remote: "replica 00000000000000b2")
        #expect(doc.forks.count == 1)
        // And a fork of another replica (b2's first operation, other content).
        let stranger2 = try forged(s.pageOps, page: s.page, replica: ReplicaID(0xB2), points: 5, x: 33)
        #expect(stranger2.id == stranger.id)
        #expect(try await nb.receive([stranger2], document: s.id, page: s.page, remote: "replica 00000000000000b2").forks.count == 1)
        try await nb.close()
        // [PKG-48] Forks pushed here (by a client of this folder's server) are kept in the
        // quarantine. One of another replica is listed, not a problem: this folder kept its
        // version, and only the pusher's side can repair it (before, one such push made verify
        // fail for ever). One of this folder's own id is its to repair: a problem.
        let r = try Verify.run(folder: dir.path)
        let fork = try #require(r.problems(.knownFork).first)
        #expect(r.problems(.knownFork).count == 1 && fork.message.contains(other.id.description)
                    && fork.message.contains("replica 00000000000000b2"), "\(r.problems)")
        let entry = try #require(r.quarantine.first { $0.operation == other.id })
        #expect(entry.kind == .fork && entry.frame == OperationCodec.frame(other).encoded && entry.otherHash == ContentHash.of(s.pageOps[1]))
        #expect(entry.remote == "replica 00000000000000b2" && entry.wasPushedHere)
        let foreign = try #require(r.quarantine.first { $0.operation == stranger.id })
        #expect(foreign.wasPushedHere && !foreign.needsAttention)
        #expect(!r.problems.contains { $0.message.contains(stranger.id.description) }, "\(r.problems)")
    }

    /// [PKG-58] Duplicates stay cheap: the first duplicate a loaded page receives reads its log
    /// once (for the offsets); later ones read one frame each.
    @Test("[PKG-58] the duplicate check reads a page's whole log once, then one frame per duplicate")
    func duplicatesReadTheLogOnce() async throws {
        let dir = try TempDir("trust")
        defer { dir.remove() }
        let s = try await sample(dir, strokes: 20)
        let rec = SyscallRecorder()
        let nb = try await openNotebook(dir.path, io: Syscalls(recorder: rec))
        let d = try await nb.openDocument(s.id)
        _ = try await d.pageState(s.page)
        let logSize = fileBytes(s.paths.log(s.page))!.count
        rec.reset()
        for round in 0..<3 {
            let out = try await d.receive(Array(s.pageOps[(round * 5)..<(round * 5 + 5)]), page: s.page)
            #expect(out.appended == 0 && out.forks.isEmpty)
        }
        let reads = rec.all.filter { $0.kind == .read && $0.path == s.paths.log(s.page) }
        #expect(reads.filter { $0.byteCount >= logSize - LogHeader.size }.count == 1, "\(reads)")
        #expect(reads.filter { $0.byteCount < 200 }.count == 2 * 15, "a length and a frame per duplicate: \(reads)")
        try await nb.close()
    }

    // MARK: - [PKG-57]

    /// [PKG-57] [SYNC-54] This folder's own versions of forked operations leave the log for
    /// the quarantine, with every later operation of that replica there; the state is
    /// rebuilt; the other side's versions come in; `remake` makes the removed ones again
    /// under the new id, and the quarantine records it.
    @Test("[PKG-57] [SYNC-54] a fork repair moves own versions out, takes the other side's, and remakes them")
    func forkRepairMovesOwnVersionsOut() async throws {
        let dir = try TempDir("trust")
        defer { dir.remove() }
        let s = try await sample(dir, strokes: 4)
        let x = s.replica
        let theirs3 = try forged(Array(s.pageOps.prefix(2)), page: s.page, replica: x, points: 11, x: 300)
        let theirs4 = try forged(Array(s.pageOps.prefix(2)) + [theirs3], page: s.page, replica: x, points: 12, x: 400)
        // The document log too: the other copy set another title as x.3.
        var dr = DocumentReplica(id: s.id)
        _ = try dr.receive(s.docOps)
        let theirTitle = try dr.make(.setTitle("theirs"), by: x, wallTime: 1_700_000_000_900)
        let nb = try await openNotebook(dir.path)
        let d = try await nb.openDocument(s.id)
        try await d.setTitle("mine")
        let mineTitle = try await d.operations(notCoveredBy: VectorClock()).last!
        #expect(mineTitle.id == theirTitle.id)
        let repair = try await nb.repairOwnFork([
            OwnFork(document: s.id, page: s.page, replica: x, from: 3, otherVersions: [theirs3, theirs4]),
            OwnFork(document: s.id, page: nil, replica: x, from: 3, otherHashes: [3: ContentHash.of(theirTitle)]),
        ], remote: "elsewhere")
        let minted = try #require(repair.minted)
        #expect(minted.old == x && nb.replica == minted.new)
        let pageRemoval = try #require(repair.removals.first { $0.page == s.page })
        #expect(pageRemoval.removed.map(\.id) == s.pageOps.suffix(2).map(\.id))
        #expect(pageRemoval.remake.map(\.id) == pageRemoval.removed.map(\.id))
        #expect(repair.received == 2)
        var expected = PageReplica(page: s.page)
        _ = try expected.receive(Array(s.pageOps.prefix(2)) + [theirs3, theirs4])
        #expect(try await d.pageState(s.page) == expected.state)
        #expect(try await d.operations(page: s.page, notCoveredBy: VectorClock()).map(ContentHash.of)
                == (Array(s.pageOps.prefix(2)) + [theirs3, theirs4]).map(ContentHash.of))
        #expect(fileBytes(s.paths.content(s.page)) == nil, "the snapshot that held the removed operations is gone")
        let docRemoval = try #require(repair.removals.first { $0.page == nil })
        #expect(docRemoval.removed.map(\.id) == [mineTitle.id])
        #expect(await d.title == "T", "the title operation is out; the other side's comes by sync")
        // Quarantine: the removed frames, exactly as the log held them.
        let entries = try await nb.quarantinedOperations()
        #expect(entries.count == 3 && entries.allSatisfy { $0.kind == .ownFork && $0.remadeAs == nil })
        #expect(Set(entries.compactMap(\.frame)) == Set((s.pageOps.suffix(2) + [mineTitle]).map { OperationCodec.frame($0).encoded }))
        #expect(entries.first { $0.page == nil && $0.operation == mineTitle.id }?.otherHash == ContentHash.of(theirTitle))
        // The other side's title arrives; then both removals are made again under the new id.
        _ = try await d.receive([theirTitle])
        for r in repair.removals {
            let done = try await nb.remake(r, with: Notebook.defaultReauthor)
            #expect(done.made.count == r.remake.count && done.made.allSatisfy { $0.new.replica == minted.new })
        }
        let elements = try await d.elements(s.page)
        #expect(elements.count == 6)
        #expect(elements.filter { $0.id.replica == minted.new }.map { $0.content.pointCount } == [5, 6])
        #expect(await d.title == "mine")
        #expect(try await nb.quarantinedOperations().allSatisfy { $0.remadeAs?.count == 1 })
        try await nb.close()
        let r = try Verify.run(folder: dir.path)
        #expect(r.problems(.quarantinedOperation).isEmpty && r.quarantine.count == 3, "\(r.problems)")
        // Reopened from the files: the same content.
        let nb2 = try await openNotebook(dir.path)
        let d2 = try await nb2.openDocument(s.id)
        #expect(try await d2.elements(s.page) == elements)
        try await nb2.close()
    }

    /// [PKG-57] A crash at any step of a fork repair leaves either the old log (the state
    /// rebuilt from it, forks included) or the repaired one; never a snapshot holding what the
    /// log lost, and never a state the log does not give.
    @Test("[PKG-57] a crash at every step of a fork repair reopens to the old or the repaired page")
    func forkRepairSurvivesACrashAnywhere() async throws {
        let dir = try TempDir("trust")
        defer { dir.remove() }
        let s = try await sample(dir, strokes: 3)
        let theirs = try forged(Array(s.pageOps.prefix(1)), page: s.page, replica: s.replica, points: 9, x: 77)
        var old = PageReplica(page: s.page)
        _ = try old.receive(s.pageOps)
        var repaired = PageReplica(page: s.page)
        _ = try repaired.receive([s.pageOps[0], theirs])
        var removedOnly = PageReplica(page: s.page)
        _ = try removedOnly.receive([s.pageOps[0]])
        let fm = FileManager.default
        var crashes = 0
        for n in 0..<60 {
            let copy = dir.sub("crash-\(n)")
            try fm.createDirectory(atPath: copy, withIntermediateDirectories: false)
            for name in try fm.contentsOfDirectory(atPath: dir.path) where !name.hasPrefix("crash-") {
                try fm.copyItem(atPath: dir.sub(name), toPath: copy + "/" + name)
            }
            // The copy keeps the original's id, as a restored folder does: the repair mints.
            try adoptIdentity(copy, replica: s.replica)
            let plan = FaultPlan.crashing(atMutation: n)
            var nb: Notebook?
            var finished = false
            do {
                nb = try await openNotebook(copy, io: Syscalls(faults: plan))
                _ = try await nb!.repairOwnFork([OwnFork(document: s.id, page: s.page, replica: s.replica, from: 2,
                                                         otherVersions: [theirs])], remote: "r")
                try await nb!.close()
                finished = true
            } catch {
                try? await nb?.close()
            }
            if plan.hasCrashed { crashes += 1 }
            let again = try await openNotebook(copy)
            let d = try await again.openDocument(s.id)
            let state = try await d.pageState(s.page)
            var fromLog = PageReplica(page: s.page)
            _ = try fromLog.receive(try await d.operations(page: s.page, notCoveredBy: VectorClock()))
            #expect(state == fromLog.state, "crash at mutation \(n): the state is what the log gives")
            #expect(state == old.state || state == removedOnly.state || state == repaired.state,
                    "crash at mutation \(n): neither old, nor repaired, nor between (removed, the other side's not received yet)")
            try await again.close()
            try fm.removeItem(atPath: copy)
            if finished && !plan.hasCrashed { break }
        }
        #expect(crashes > 5)
    }

    // MARK: - [PKG-48]

    /// [PKG-48] Quarantine entries as the spec lays them out, read by JSONSerialization; the
    /// same entry twice is one file; verify lists them all and flags those needing a person.
    @Test("[PKG-48] the quarantine: one JSON file per operation, named by what it holds; verify lists it")
    func quarantineLayout() async throws {
        let dir = try TempDir("trust")
        defer { dir.remove() }
        let s = try await sample(dir, strokes: 2)
        let nb = try await openNotebook(dir.path)
        let frame = OperationCodec.frame(s.pageOps[1])
        let invalid = QuarantineEntry(kind: .invalid, time: 1_700_000_000_000, remote: "https://relay.example/v1/notebooks/x",
                                      document: s.id, page: s.page, operation: s.pageOps[1].id, reason: "refused: test",
                                      frame: frame.encoded, hash: ContentHash.of(frame))
        let path = try await nb.quarantine(invalid)
        #expect(try await nb.quarantine(invalid) == path)
        let name = "invalid-\(s.id.uuid.uuidString)-\(s.page.uuid.uuidString)-\(s.pageOps[1].id)-\(hexString(ContentHash.of(frame).prefix(8))).json"
        #expect(path == dir.sub(".lnote/quarantine/" + name))
        let unknown = QuarantineEntry(kind: .invalid, time: 1, remote: "r", document: s.id, page: nil, operation: nil,
                                      reason: "does not decode", frame: [1, 2, 3])
        #expect(try await nb.quarantine(unknown).hasSuffix("-document-unknown-\(hexString(SHA256.hash([1, 2, 3]).prefix(8))).json"))
        var own = QuarantineEntry(kind: .ownFork, time: 2, remote: "r", document: s.id, page: s.page, operation: s.pageOps[0].id,
                                  reason: "forked", frame: OperationCodec.frame(s.pageOps[0]).encoded,
                                  hash: ContentHash.of(s.pageOps[0]), otherHash: Array(repeating: 7, count: 16))
        _ = try await nb.quarantine(own)
        own.remadeAs = [OpID(replica: ReplicaID(9), counter: 1)]
        try await nb.markRemade(own, as: own.remadeAs!)
        #expect(try await nb.quarantinedOperations().count == 3)
        try await nb.close()
        let json = try JSONSerialization.jsonObject(with: Data(fileBytes(path)!)) as! [String: Any]
        #expect(json["format"] as? Int == 1 && json["kind"] as? String == "invalid" && json["time"] as? Int == 1_700_000_000_000)
        #expect(json["document"] as? String == s.id.description && json["page"] as? String == s.page.description)
        #expect(json["operation"] as? String == s.pageOps[1].id.description && json["reason"] as? String == "refused: test")
        #expect(json["frame"] as? String == hexString(frame.encoded) && json["hash"] as? String == hexString(ContentHash.of(frame)))
        #expect(json["remote"] as? String == "https://relay.example/v1/notebooks/x" && json["remadeAs"] == nil)
        #expect(fileBytes(path)!.last == 0x0A && String(decoding: fileBytes(path)!, as: UTF8.self).contains("\"kind\" : \"invalid\""))
        let r = try Verify.run(folder: dir.path)
        #expect(r.quarantine.count == 3)
        #expect(r.problems(.quarantinedOperation).count == 2, "the remade own operation is listed, not a problem")
        #expect(r.quarantine.contains { $0.kind == .ownFork && $0.remadeAs == own.remadeAs && $0.otherHash?.count == 16 })
        try writeFile(dir.sub(".lnote/quarantine/broken.json"), Array("{".utf8))
        #expect(try Verify.run(folder: dir.path).problems(.undecodable).map(\.path) == [dir.sub(".lnote/quarantine/broken.json")])
    }

    // MARK: - [PKG-64] with digests

    /// [PKG-64] [SYNC-52] Chain digests are what the spec computes (checked here with SHA-256
    /// over the frames), cached with the clocks, and a cache hit opens no package file.
    @Test("[PKG-64] [SYNC-52] chain digests: computed from the frames, cached beside the clocks")
    func digestsAreCached() async throws {
        let dir = try TempDir("trust")
        defer { dir.remove() }
        let s = try await sample(dir, strokes: 5)
        let rec = SyscallRecorder()
        let nb = try await openNotebook(dir.path, io: Syscalls(recorder: rec))
        let all = try await nb.logClocksAndDigests()
        let page = try #require(all.first { $0.page == s.page })
        var d = [UInt8](repeating: 0, count: 16)
        for op in s.pageOps {
            let frame = OperationCodec.frame(op, form: .hash)  // [SYNC-50] hash form
            let content = SHA256.hash([frame.type] + frame.payload)
            d = Array(SHA256.hash(d + Array(content.prefix(16))).prefix(16))
        }
        #expect(page.digests == [ChainDigest(replica: s.replica, counter: 5, digest: d)])
        rec.reset()
        #expect(try await nb.logClocksAndDigests() == all)
        #expect(!rec.pathsOpened.contains { $0.contains(".lnote/") && !$0.contains("/.lnote/") }, "\(rec.pathsOpened)")
        // Clocks alone keep the digests cached.
        _ = try await nb.logClocks()
        rec.reset()
        #expect(try await nb.logClocksAndDigests() == all)
        #expect(!rec.pathsOpened.contains { $0.hasSuffix(".log") })
        try await nb.close()
    }

    /// Rewrites a folder's replica.json so that it keeps `replica` where it is now (as a
    /// folder restored in place, or copied with its replica file, does).
    func adoptIdentity(_ folder: String, replica: ReplicaID) throws {
        let abs = try Syscalls.live.realpath(folder)
        let here = try Notebook.fingerprint(folder: abs, machineIDPath: "/etc/machine-id", io: .live)
        let file = Notebook.ReplicaFile(format: 1, replica: replica.description, fingerprint: here, previous: [])
        try writeFile(abs + "/.lnote/replica.json", try StoreJSON.encode(file))
    }
}
