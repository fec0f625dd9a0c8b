import Foundation
import Testing
import LnoteModel
import LnoteReplication
@testable import LnoteStore

/// Records a listing open leaves unparsed ([SNAP-46]) that turn out not to decode: a snapshot
/// damaged under a good CRC in a record the open did not read. Listing the page shows what
/// the id table says; every other use reads the records first, finds the damage, and handles
/// it as an eager open does ([PKG-42]): the snapshot quarantined, the page rebuilt from its
/// log. Nothing traps, nothing is lost.
@Suite("Unparsed snapshot records that do not decode")
struct UnparsedRecordsStoreTests {
    typealias D = DeferredPointsStoreTests

    /// The snapshot with the first record of its second chunk made unreadable (flag bit 7,
    /// which no record may set, [SNAP-34]), resealed: an eager read refuses it at that byte; a
    /// listing read does not parse that chunk.
    static func damageSecondChunk(_ b: [UInt8]) throws -> (bytes: [UInt8], at: Int) {
        let sections = PageSnapshotSections(b)
        let elements = try #require(sections.body(0x0002))
        let index = try #require(sections.body(0x0005))
        // Stride (1 byte), m (1 byte), then the first delta: where record 64 starts.
        var r = ByteReader(b, range: (index.lowerBound + 2)..<index.upperBound)
        let at = elements.lowerBound + Int(try r.varint())
        var c = b
        c[at] |= 0x80
        return (D.resealSnapshot(c), at)
    }

    @Test("[SNAP-46] [PKG-42] unparsed records that do not decode: listed, then any other use quarantines the snapshot and rebuilds the page from its log",
          arguments: ["elements", "element", "pageState", "add", "erase", "clock", "flush", "otherProcess", "tailErase",
                      "salvage", "deletePageClock"])
    func damagedUnparsedRecords(firstUse: String) async throws {
        let seed = testSeed()
        let dir = try TempDir("unparsed")
        defer { dir.remove() }
        let s = try await D.sample(dir, seed: seed, count: 230, first: 170, keepTail: true)
        let p = s.page, content = s.paths.content(p)
        let good = fileBytes(content)!
        #expect(good[8] == 5)
        let (bad, at) = try Self.damageSecondChunk(good)
        var eager: LnoteError?
        do { _ = try PageSnapshot.decode(bad, deferringPoints: true) } catch let e as LnoteError { eager = e }
        #expect(eager?.code == .corrupt && eager?.offset == at, "seed \(seed): \(String(describing: eager))")
        #expect(try PageSnapshot.decode(bad, deferringPoints: true, leavingRecordsUnbuilt: true).unbuilt != nil)
        try writeFile(content, bad)
        var expectedIDs = s.ids
        /// Appends an operation of another replica to the log, as another process would.
        func append(_ op: Op) throws {
            let logPath = s.paths.log(p)
            let log = fileBytes(logPath)!
            let h = try #require(FileHandle(forWritingAtPath: logPath))
            try h.seekToEnd()
            try h.write(contentsOf: D.written(OperationCodec.frame(op, form: .written), in: log))
            try h.close()
        }
        var theirs = PageReplica(state: s.state)
        if firstUse == "salvage" {
            // A frame the snapshot covers, damaged (its CRC no longer matches): the listing open
            // reads only the tail; serving the log reads it whole and salvages it ([PKG-38]).
            let logPath = s.paths.log(p)
            var log = fileBytes(logPath)!
            let f = D.frames(log)[20]
            log[Int(f.offset) + f.size - 1] ^= 0x5A
            try writeFile(logPath, log)
        }
        if firstUse == "tailErase" {
            // The tail ends with an erase: replaying it needs the records, read at the open.
            try append(try theirs.make(.erase([s.ids[100]]), by: ReplicaID(0x4242_4242), wallTime: 1_700_000_000_000))
            expectedIDs.remove(at: 100)
        }

        // The same files, for an eager open to compare with.
        let twin = try TempDir("unparsed-eager")
        defer { twin.remove() }
        try FileManager.default.removeItem(atPath: twin.path)
        try FileManager.default.copyItem(atPath: dir.path, toPath: twin.path)

        let nb = try await openNotebook(dir.path)
        let d = try await nb.openDocument(s.id)
        let before = Document.listingOpenStats.withLock { $0.unbuilt }
        // Listed from the id table and the tail: what the files say, no error yet.
        #expect(try await d.elementIDs(p) == expectedIDs, "seed \(seed) \(firstUse)")
        if firstUse != "tailErase" {
            #expect(Document.listingOpenStats.withLock { $0.unbuilt } > before, "seed \(seed): the records were parsed at the open")
        }
        switch firstUse {
        case "elements":
            #expect(try await d.elements(p) == s.state.elements, "seed \(seed) \(firstUse)")
        case "element":
            for id in s.ids.prefix(80) {
                #expect(try await d.element(id, on: p) == s.state.elements.first { $0.id == id }, "seed \(seed) \(firstUse) \(id)")
            }
        case "pageState":
            #expect(try await d.pageState(p) == s.state, "seed \(seed) \(firstUse)")
        case "add":
            expectedIDs.append(try await d.addStroke(s.strokes[0], to: p))
        case "erase":
            try await d.erase([s.ids[70]], on: p)
            expectedIDs.remove(at: 70)
        case "clock":
            // A peer asks for the clock (listing-level), then for operations (served from the log).
            #expect(try await d.logClock(page: p) == s.state.clock, "seed \(seed) \(firstUse)")
            let ops = try await d.operations(page: p, notCoveredBy: VectorClock())
            #expect(ops.count == s.ids.count, "seed \(seed) \(firstUse)")
            _ = try await d.elements(p)
        case "flush":
            try await d.flush()
            _ = try await d.elements(p)
        case "salvage":
            // Nothing is applied onto records that do not decode: no operation of the log is
            // reported refused, and the page is loaded again from its files at its next use.
            let ops = try await d.operations(page: p, notCoveredBy: VectorClock())
            let refused = await d.recoveryReports.flatMap(\.undecodableOperations)
            #expect(refused.isEmpty, "seed \(seed) \(firstUse): \(refused.count) operations reported refused")
            // What an eager open of the same files shows.
            let eagerNB = try await openNotebook(twin.path)
            let eagerDoc = try await eagerNB.openDocument(s.id)
            expectedIDs = try await eagerDoc.pageState(p).elements.map(\.id)
            try await eagerNB.close()
            // (The salvaged log serves every operation it still holds, those that now wait for
            // the lost one included: the page shows those before it.)
            #expect(Set(expectedIDs).isSubset(of: ops.map(\.id)) && ops.count == s.ids.count - 1,
                    "seed \(seed) \(firstUse): \(ops.count) operations served for \(expectedIDs.count) elements")
        case "deletePageClock":
            // The clock a page deletion carries ([MERGE-63]), asked of a listed page: in a wide
            // log it names the top and bottom records, so they are read first.
            #expect(try await d.clockSeen(page: p, by: d.replica) == s.state.clock, "seed \(seed) \(firstUse)")
            _ = try await d.elements(p)
        case "otherProcess":
            // Another process (another replica) appends a stroke to the log, without touching
            // the snapshot; this handle catches up, which reads the records first.
            let op = try theirs.add(.stroke(s.strokes[1]), by: ReplicaID(0x4242_4242), wallTime: 1_700_000_000_000)
            try append(op)
            expectedIDs.append(op.id)
            #expect(try await d.elementIDs(p) == expectedIDs, "seed \(seed) \(firstUse)")
        default:
            break
        }
        #expect(try await d.elementIDs(p) == expectedIDs, "seed \(seed) \(firstUse)")
        let shown = try await d.elements(p)
        #expect(shown.map(\.id) == expectedIDs, "seed \(seed) \(firstUse)")
        #expect(Array(shown.filter { s.ids.contains($0.id) }) == s.state.elements.filter { expectedIDs.contains($0.id) },
                "seed \(seed) \(firstUse)")
        let quarantined = fileBytes(content + ".corrupt-1")
        #expect(quarantined == bad, "seed \(seed) \(firstUse): the damaged snapshot was not quarantined")
        let reports = await d.recoveryReports
        #expect(reports.contains { $0.quarantinedCopy == content + ".corrupt-1" }, "seed \(seed) \(firstUse): \(reports)")
        let final = try await d.pageState(p)
        try await nb.close()
        // Written again whole, and read back the same by a fresh handle, without a report.
        let rewritten = try #require(fileBytes(content), "seed \(seed) \(firstUse)")
        #expect(rewritten != bad && (try? PageSnapshot.decode(rewritten).state) == final, "seed \(seed) \(firstUse)")
        let nb3 = try await openNotebook(dir.path)
        let d3 = try await nb3.openDocument(s.id)
        #expect(try await d3.elementIDs(p) == expectedIDs, "seed \(seed) \(firstUse)")
        #expect(try await d3.pageState(p) == final, "seed \(seed) \(firstUse)")
        #expect(await d3.recoveryReports.isEmpty, "seed \(seed) \(firstUse)")
        try await nb3.close()
    }
}

extension UnparsedRecordsStoreTests {
    /// [SNAP-7] [SNAP-45] A big page whose snapshot an lnote of version 4 wrote (an element
    /// index without an id table): listed (read as usual: its records are parsed), shown and
    /// synced as before; its next snapshot is version 5, listed without parsing its records.
    @Test("[SNAP-7] [SNAP-45] a version-4 snapshot of a big page opens as before and is rewritten as version 5")
    func versionFourBigPage() async throws {
        let seed = testSeed()
        let dir = try TempDir("unparsed")
        defer { dir.remove() }
        let s = try await D.sample(dir, seed: seed, count: 230, first: 170, keepTail: true)
        let p = s.page, content = s.paths.content(p)
        let v5 = try PageSnapshot.decode(fileBytes(content)!)
        let v4 = PageSnapshot.encode(v5.state, coveredLogOffset: v5.coveredLogOffset, logIncarnation: v5.logIncarnation, version: 4)
        #expect(v4[8] == 4)
        try writeFile(content, v4)
        let nb = try await openNotebook(dir.path)
        let d = try await nb.openDocument(s.id)
        let before = Document.listingOpenStats.withLock { $0.unbuilt }
        #expect(try await d.elementIDs(p) == s.ids, "seed \(seed)")
        #expect(Document.listingOpenStats.withLock { $0.unbuilt } == before, "seed \(seed): a version-4 snapshot has no id table")
        #expect(try await d.pageState(p) == s.state, "seed \(seed)")
        #expect(await d.recoveryReports.isEmpty, "seed \(seed)")
        try await d.compact(page: p)
        try await nb.close()
        let rewritten = try #require(fileBytes(content))
        #expect(rewritten[8] == 5 && (try? PageSnapshot.decode(rewritten).state) == s.state, "seed \(seed)")
        let nb2 = try await openNotebook(dir.path)
        let d2 = try await nb2.openDocument(s.id)
        #expect(try await d2.elementIDs(p) == s.ids, "seed \(seed)")
        #expect(Document.listingOpenStats.withLock { $0.unbuilt } > before, "seed \(seed): the version-5 snapshot was parsed at the open")
        #expect(try await d2.pageState(p) == s.state, "seed \(seed)")
        try await nb2.close()
    }
}

/// The sections of a snapshot file, by tag.
struct PageSnapshotSections {
    var bodies: [UInt16: Range<Int>] = [:]
    init(_ b: [UInt8]) {
        var at = PageSnapshot.headerSize
        while at + 6 <= b.count - 4 {
            let tag = UInt16(b[at]) | UInt16(b[at + 1]) << 8
            let size = Int(b[at + 2]) | Int(b[at + 3]) << 8 | Int(b[at + 4]) << 16 | Int(b[at + 5]) << 24
            bodies[tag] = (at + 6)..<(at + 6 + size)
            at += 6 + size
        }
    }
    func body(_ tag: UInt16) -> Range<Int>? { bodies[tag] }
}
