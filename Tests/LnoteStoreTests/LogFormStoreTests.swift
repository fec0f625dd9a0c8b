import Foundation
import Testing
import LnoteTestSupport
import LnoteModel
import LnoteReplication
@testable import LnoteStore

/// [PKG-110]–[PKG-112], [LOG-33]: page logs anchored to their writer, whose strokes they hold
/// in log form; what reads them, what travels, and what damage does.
@Suite("Page logs with an anchor: strokes in log form")
struct LogFormStoreTests {
    /// The frame types at the frame boundaries of a log file, as written (not expanded).
    static func writtenTypes(_ bytes: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        var at = LogHeader.size
        while bytes.count - at >= Frame.headerSize + 1 {
            let length = Int(UInt32(bytes[at]) | UInt32(bytes[at + 1]) << 8 | UInt32(bytes[at + 2]) << 16 | UInt32(bytes[at + 3]) << 24)
            out.append(bytes[at + Frame.headerSize])
            at += Frame.headerSize + length
        }
        return out
    }

    static func strokes(_ n: Int, _ rng: inout SeededRNG) -> [Stroke] {
        (0..<n).map { _ in stroke(Int.random(in: 2...40, using: &rng), x: Int32.random(in: 0...5000, using: &rng)) }
    }

    @Test("[PKG-110] [LOG-33] strokes drawn here: a version-2 log that starts with this replica's anchor, its strokes in log form; reopened, compacted, synced both ways, every state and operation the same")
    func drawnHere() async throws {
        let seed = testSeed()
        var rng = SeededRNG(seed: seed)
        let dir = try TempDir("logform")
        defer { dir.remove() }
        let a = try await openNotebook(dir.sub("a"))
        let b = try await openNotebook(dir.sub("b"))
        let da = try await a.createDocument(title: "Anchored")
        let p = await da.pageList[0].id
        for s in Self.strokes(6, &rng) { _ = try await da.addStroke(s, to: p) }
        try await da.addStrokes(Self.strokes(5, &rng), to: p)
        let before = try await da.pageState(p)
        let path = PackagePaths(folder: try Syscalls.live.realpath(dir.sub("a")), id: da.id).log(p)
        let bytes = try #require(fileBytes(path))
        let header = try LogHeader.decode(bytes)
        #expect(header.version == 2, "seed \(seed)")
        let anchor = try #require(header.anchor(in: Array(bytes[LogHeader.size...])))
        #expect(anchor.writer == da.replica.rawValue)
        // The anchor, the copy this opening wrote before its first stroke ([PKG-111]), the strokes.
        #expect(Self.writtenTypes(bytes) == [LogAnchor.type, LogAnchor.type] + Array(repeating: LogAnchor.logFormAddStroke3, count: 11),
                "seed \(seed)")
        // Read back, every frame is the addStroke3 frame of its operation, with its file extent.
        let scan = LogScanner.scanFile(bytes)
        #expect(scan.frames.count == 11 && scan.damage.isEmpty && scan.tornTail == nil)
        #expect(scan.frames.allSatisfy { $0.frame.type == 0x0A })
        #expect(scan.frames.last?.end == UInt64(bytes.count))
        let ops = try scan.frames.map { try OperationCodec.decode($0.frame, base: $0.payloadBase) }
        // Every byte of an expanded payload past its wall time is where `payloadBase` says it
        // is in the file (error offsets in it name the byte in the log).
        for lf in scan.frames {
            let header = 8 + 1 + (lf.frame.payload.count - (lf.size - 9))  // replica, counter, and what the header gained
            for k in stride(from: lf.frame.payload.count - 1, through: max(0, header), by: -7) {
                #expect(bytes[lf.payloadBase + k] == lf.frame.payload[k], "seed \(seed): byte \(k) of the frame at \(lf.offset)")
            }
        }
        #expect(ops.allSatisfy { $0.id.replica == da.replica && $0.wallTime == 1_700_000_000_000 })

        // Reopened, eagerly and from a snapshot with a tail.
        try await da.close()
        var d = try await a.openDocument(da.id)
        #expect(try await d.pageState(p) == before, "seed \(seed)")
        try await d.compact(page: p)
        for s in Self.strokes(4, &rng) { _ = try await d.addStroke(s, to: p) }
        let after = try await d.pageState(p)
        try await d.close()
        d = try await a.openDocument(da.id)
        #expect(try await d.pageState(p) == after, "seed \(seed)")
        #expect(await d.recoveryReports.allSatisfy(\.isClean))

        // What travels is standard frames: another folder gets the same operations.
        try await pushAll(from: a, to: b)
        let db = try await b.openDocument(da.id)
        #expect(try await db.pageState(p) == after, "seed \(seed)")
        for s in Self.strokes(3, &rng) { _ = try await db.addStroke(s, to: p) }
        try await pushAll(from: b, to: a)
        try await pushAll(from: a, to: b)
        #expect(try await db.pageState(p) == (try await d.pageState(p)), "seed \(seed)")
        let theirs = try await db.operations(page: p, notCoveredBy: VectorClock())
        let mine = try await d.operations(page: p, notCoveredBy: VectorClock())
        #expect(Set(theirs.map { ContentHash.of($0) }) == Set(mine.map { ContentHash.of($0) }))
        #expect(mine.count == 18)
        // B's strokes are in A's log as B wrote them: standard frames, A's anchor naming A.
        let types = Self.writtenTypes(try #require(fileBytes(path)))
        #expect(types.filter { $0 == 0x0A }.count == 3 && types.filter { $0 == LogAnchor.logFormAddStroke3 }.count == 15,
                "seed \(seed): \(types)")
        try await d.close()
        try await db.close()
        try await a.close()
        try await b.close()
    }

    /// A folder with one page of `n` strokes drawn here, closed: the log's path and the
    /// page's state.
    static func drawnPage(_ dir: TempDir, _ n: Int) async throws -> (Notebook, DocumentID, PageID, String, PageState) {
        var rng = SeededRNG(seed: 0x1A6)
        let nb = try await openNotebook(dir.sub("nb"))
        let d = try await nb.createDocument(title: "D")
        let p = await d.pageList[0].id
        for s in strokes(n, &rng) { _ = try await d.addStroke(s, to: p) }
        let state = try await d.pageState(p)
        try await d.close()
        let paths = PackagePaths(folder: try Syscalls.live.realpath(dir.sub("nb")), id: d.id)
        // No snapshot: an open replays the whole log, and meets any damage in it.
        try FileManager.default.removeItem(atPath: paths.content(p))
        return (nb, d.id, p, paths.log(p), state)
    }

    /// What a salvage rewrote: the log's header version and its frame types as written.
    static func salvaged(_ path: String) throws -> (version: UInt16, types: [UInt8]) {
        let rewritten = try #require(fileBytes(path))
        return (try LogHeader.decode(rewritten).version, writtenTypes(rewritten))
    }

    /// The offsets of a log file's frames as written.
    static func frameOffsets(_ bytes: [UInt8]) -> [Int] {
        var out: [Int] = []
        var at = LogHeader.size
        while bytes.count - at >= Frame.headerSize + 1 {
            out.append(at)
            at += Frame.headerSize + Int(UInt32(bytes[at]) | UInt32(bytes[at + 1]) << 8 | UInt32(bytes[at + 2]) << 16)
        }
        return out
    }

    @Test("[PKG-112] a damaged log-form frame is dropped alone: the salvage keeps the anchor and every other frame as it was")
    func oneFrameDamaged() async throws {
        let dir = try TempDir("logform")
        defer { dir.remove() }
        let (nb, id, p, path, state) = try await Self.drawnPage(dir, 6)
        var bytes = try #require(fileBytes(path))
        let offsets = Self.frameOffsets(bytes)
        #expect(offsets.count == 8)  // the anchor, its copy, six strokes
        bytes[offsets[4] + 12] ^= 0x10  // inside the third stroke's frame
        try writeFile(path, bytes)
        let d = try await nb.openDocument(id)
        // The strokes before it; those after it wait for it (each add's context covers its
        // author's earlier operations, [LOG-3]): a sync with a peer that holds it brings it back.
        let elements = try await d.elements(p)
        #expect(elements.map(\.id) == Array(state.elements.map(\.id).prefix(2)))
        let report = try #require(await d.recoveryReports.first { $0.path.hasSuffix(".log") && !$0.problems.isEmpty })
        #expect(report.problems.first?.offset == offsets[4])
        #expect(try Self.salvaged(path) == (2, [LogAnchor.type] + Array(repeating: LogAnchor.logFormAddStroke3, count: 5)))
        let rewritten = try #require(fileBytes(path))
        #expect(Array(rewritten[LogHeader.size..<offsets[1]]) == Array(bytes[LogHeader.size..<offsets[1]]), "the same anchor")
        try await d.close()
        try await nb.close()
    }

    @Test("[PKG-112] the anchor and its copy damaged: the log-form frames are damage, never given to any replica; standard frames are kept")
    func anchorDamaged() async throws {
        let dir = try TempDir("logform")
        defer { dir.remove() }
        let (nb, id, p, path, _) = try await Self.drawnPage(dir, 4)
        // A stroke of another replica that saw none of them, received: a standard frame after
        // the log-form ones.
        let other = ReplicaID(0x0DD)
        var page = PageReplica(page: p)
        let d0 = try await nb.openDocument(id)
        let foreign = try page.add(.stroke(stroke(7, x: 900)), by: other, wallTime: 5)
        try await d0.receive([foreign], page: p)
        try await d0.close()
        try FileManager.default.removeItem(atPath: path.replacingOccurrences(of: ".log", with: ".content"))
        var bytes = try #require(fileBytes(path))
        let f = LogAnchor.logFormAddStroke3
        #expect(Self.writtenTypes(bytes) == [LogAnchor.type, LogAnchor.type, f, f, f, f, 0x0A])
        let copy = Self.frameOffsets(bytes)[1]
        bytes[LogHeader.size + 12] ^= 0x01  // the anchor's writer
        bytes[copy + 12] ^= 0x01  // and its copy's
        try writeFile(path, bytes)
        let d = try await nb.openDocument(id)
        let elements = try await d.elements(p)
        #expect(elements.map(\.id) == [foreign.id], "only the standard frame is kept: \(elements.map(\.id))")
        #expect(await d.recoveryReports.contains { !$0.problems.isEmpty })
        #expect(FileManager.default.fileExists(atPath: path + ".corrupt-1"))
        // The rewritten log has no anchor: version 1, standard frames.
        #expect(try Self.salvaged(path) == (1, [0x0A]))
        try await d.close()
        try await nb.close()
    }

    @Test("[PKG-111] [PKG-112] each opening writes a copy of the anchor; with the anchor and the first copy damaged, the salvage reads every log-form frame with the second")
    func anchorDamagedCopyKept() async throws {
        let dir = try TempDir("logform")
        defer { dir.remove() }
        let (nb, id, p, path, _) = try await Self.drawnPage(dir, 3)
        let d0 = try await nb.openDocument(id)
        _ = try await d0.addStroke(stroke(4, x: 100), to: p)
        _ = try await d0.addStroke(stroke(6, x: 200), to: p)
        let state = try await d0.pageState(p)
        try await d0.close()
        try FileManager.default.removeItem(atPath: path.replacingOccurrences(of: ".log", with: ".content"))
        var bytes = try #require(fileBytes(path))
        let f = LogAnchor.logFormAddStroke3
        #expect(Self.writtenTypes(bytes) == [LogAnchor.type, LogAnchor.type, f, f, f, LogAnchor.type, f, f])
        bytes[LogHeader.size + 12] ^= 0x01  // the anchor's writer, at offset 40
        bytes[Self.frameOffsets(bytes)[1] + 12] ^= 0x01  // and the first opening's copy
        try writeFile(path, bytes)
        let d = try await nb.openDocument(id)
        #expect(try await d.pageState(p).elements.map(\.id) == state.elements.map(\.id))
        #expect(await d.recoveryReports.contains { !$0.problems.isEmpty })
        #expect(try Self.salvaged(path) == (2, [LogAnchor.type, f, f, f, f, f]))
        try await d.close()
        try await nb.close()
    }

    @Test("[PKG-112] the anchor's length field and its copy damaged in a log of log-form frames alone: damage, salvaged with every byte kept, never cut as a torn tail")
    func anchorLengthDamaged() async throws {
        let dir = try TempDir("logform")
        defer { dir.remove() }
        let (nb, id, p, path, _) = try await Self.drawnPage(dir, 4)
        var bytes = try #require(fileBytes(path))
        bytes[Self.frameOffsets(bytes)[1] + 12] ^= 0x01  // the copy's writer
        bytes[LogHeader.size + 3] ^= 0x01  // the anchor's length: past the end of the file
        try writeFile(path, bytes)
        let verified = try Verify.run(folder: try Syscalls.live.realpath(dir.sub("nb")))
        #expect(verified.problems(.tornTail).isEmpty, "\(verified.problems)")
        #expect(verified.problems(.corruptFrame).contains { $0.path == path && $0.offset == LogHeader.size }, "\(verified.problems)")
        let d = try await nb.openDocument(id)
        #expect(try await d.elements(p).isEmpty)
        let report = try #require(await d.recoveryReports.first { $0.path == path })
        #expect(report.problems.first?.offset == LogHeader.size && report.tornTail == nil, "\(report)")
        #expect(fileBytes(path + ".corrupt-1") == bytes, "every byte kept")
        #expect(try Self.salvaged(path) == (1, []))
        try await d.close()
        try await nb.close()
    }

    @Test("[PKG-112] a damaged header over a valid anchor: the salvage reads the log-form frames with the anchor at offset 40")
    func headerDamaged() async throws {
        let dir = try TempDir("logform")
        defer { dir.remove() }
        let (nb, id, p, path, state) = try await Self.drawnPage(dir, 5)
        var bytes = try #require(fileBytes(path))
        bytes[20] ^= 0x40  // the owner, under the header's CRC
        try writeFile(path, bytes)
        let d = try await nb.openDocument(id)
        #expect(try await d.pageState(p).elements.map(\.id) == state.elements.map(\.id))
        #expect(await d.recoveryReports.contains { !$0.problems.isEmpty })
        #expect(try Self.salvaged(path) == (2, [LogAnchor.type] + Array(repeating: LogAnchor.logFormAddStroke3, count: 5)))
        try await d.close()
        try await nb.close()
    }

    @Test("[PKG-111] a document pulled whole: each page log is anchored to the replica that drew most of it, whose strokes are in log form; the pulling folder's own strokes are standard frames")
    func pulledWhole() async throws {
        let seed = testSeed()
        var rng = SeededRNG(seed: seed)
        let dir = try TempDir("logform")
        defer { dir.remove() }
        let a = try await openNotebook(dir.sub("a"))
        let d = try await a.createDocument(title: "t")
        let p = await d.pageList[0].id
        try await d.addStrokes(Self.strokes(7, &rng), to: p)
        // Two strokes of another replica, so that the writer is chosen by count.
        var page = PageReplica(page: p)
        _ = try page.receive(try await d.operations(page: p, notCoveredBy: VectorClock()))
        let other = try (0..<2).map { _ in try page.add(.stroke(stroke(3)), by: ReplicaID(0x1), wallTime: 7) }
        try await d.receive(other, page: p)
        let received = ReceivedDocument(id: d.id, documentOps: try await d.operations(notCoveredBy: VectorClock()),
                                        pages: [p: try await d.operations(page: p, notCoveredBy: VectorClock())])
        let b = try await openNotebook(dir.sub("b"))
        #expect(try await b.createReceived([received]) == [d.id: received.operationCount])
        let path = PackagePaths(folder: try Syscalls.live.realpath(dir.sub("b")), id: d.id).log(p)
        let bytes = try #require(fileBytes(path))
        let log = try LogFileContents(bytes)
        #expect(log.header.version == 2 && log.anchor?.writer == d.replica.rawValue, "seed \(seed)")
        let types = Self.writtenTypes(bytes)
        #expect(types.filter { $0 == LogAnchor.logFormAddStroke3 }.count == 7 && types.filter { $0 == 0x0A }.count == 2,
                "seed \(seed): \(types)")
        let db = try await b.openDocument(d.id)
        #expect(try await db.pageState(p) == (try await d.pageState(p)), "seed \(seed)")
        _ = try await db.addStroke(stroke(5), to: p)
        try await db.close()
        #expect(Self.writtenTypes(try #require(fileBytes(path))).last == 0x0A, "B is not the writer: a standard frame")
        try await d.close()
        try await a.close()
        try await b.close()
    }

    @Test("[PKG-110] a version-1 log, as lnote wrote before anchors, stays version 1 and is appended standard frames")
    func versionOneStays() async throws {
        let dir = try TempDir("logform")
        defer { dir.remove() }
        let (nb, id, p, path, _) = try await Self.drawnPage(dir, 3)
        // The same operations in a version-1 log (header rewritten, frames standard).
        let scan = LogScanner.scanFile(try #require(fileBytes(path)))
        let old = LogHeader(kind: .page, owner: p.uuid)
        try writeFile(path, logBytes(old, scan.frames.map(\.frame)))
        let d = try await nb.openDocument(id)
        #expect(try await d.elements(p).count == 3)
        _ = try await d.addStroke(stroke(4), to: p)
        try await d.close()
        let bytes = try #require(fileBytes(path))
        #expect(try LogHeader.decode(bytes) == old)
        #expect(Self.writtenTypes(bytes) == [0x0A, 0x0A, 0x0A, 0x0A])
        try await nb.close()
    }
}
