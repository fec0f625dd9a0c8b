import Foundation
import Testing
import LnoteModel
import LnoteReplication
@testable import LnoteStore

/// [PKG-46] Pages installed from a checkpoint: the package, the base file, history held.
@Suite struct CheckpointStoreTests {
    /// A folder with one document whose first page holds strokes and an image.
    static func source(_ path: String) async throws -> (Notebook, Document, PageID, [UInt8]) {
        let nb = try await openNotebook(path)
        let d = try await nb.createDocument(title: "source")
        let pid = await d.pageList[0].id
        let image: [UInt8] = Array(repeating: 0x42, count: 300)
        for i in 0..<6 { try await d.addStroke(stroke(4 + i, x: Int32(i) * 30), to: pid) }
        _ = try await d.addImage(image, frame: QRect(x: 0, y: 0, width: 10, height: 10), to: pid)
        return (nb, d, pid, image)
    }

    @Test func installedPageHasTheStateAndRefusesHistoryItLacks() async throws {
        let dir = try TempDir("ckpt")
        defer { dir.remove() }
        let (a, da, pid, image) = try await Self.source(dir.sub("A"))
        let state = try await da.pageState(pid)
        let b = try await openNotebook(dir.sub("B"))
        #expect(try await b.holdsNoDocuments())

        // Refused before anything is written: a missing asset, two states of one page.
        await #expect(throws: LnoteError(.notFound)) {
            try await b.installCheckpoint(document: da.id, pages: [state], assets: [])
        }
        await #expect(throws: LnoteError(.invalidArgument)) {
            try await b.installCheckpoint(document: da.id, pages: [state, state], assets: [image])
        }
        #expect(try await b.holdsNoDocuments())
        #expect(listNames(dir.sub("B")) == [".lnote"])

        try await b.installCheckpoint(document: da.id, pages: [state], assets: [image, [1, 2, 3]])
        #expect(try await !b.holdsNoDocuments())
        await #expect(throws: LnoteError(.alreadyExists)) {
            try await b.installCheckpoint(document: da.id, pages: [state], assets: [image])
        }
        let paths = PackagePaths(folder: dir.sub("B"), id: da.id)
        #expect(listNames(paths.assets) == [AssetID.of(image).description])
        let db = try await b.openDocument(da.id)
        #expect(try await db.checkpointState(page: pid) == state)
        #expect(try await db.baseClock(page: pid) == state.clock)
        #expect(try await db.clock(page: pid) == state.clock)
        #expect(try await db.operations(page: pid, notCoveredBy: state.clock).isEmpty)

        // The document log arrives as operations; the page is then the document's.
        _ = try await db.receive(try await da.operations(notCoveredBy: VectorClock()))
        #expect(try await db.pageState(pid) == state)

        // [SYNC-43] A peer further behind than the checkpoint gets a clear error, not a tail.
        try await db.addStroke(stroke(3), to: pid)
        for behind in [VectorClock(), VectorClock([(a.replica, UInt64(2))])] {
            do {
                _ = try await db.frames(page: pid, notCoveredBy: behind)
                Issue.record("served a tail from \(behind) with a hole before the checkpoint")
            } catch let e as LnoteError {
                #expect(e.code == .invalidState)
                #expect(e.message.contains("history before checkpoint clock"))
            }
        }
        #expect(try await db.operations(page: pid, notCoveredBy: state.clock).count == 1)

        // Receiving the history again does not fill the hole (operations in the state are
        // skipped, [PKG-43]): still refused, never a silent tail.
        _ = try await db.receive(try await da.operations(page: pid, notCoveredBy: VectorClock()), page: pid)
        await #expect(throws: LnoteError(.invalidState)) { try await db.operations(page: pid, notCoveredBy: VectorClock()) }

        try await b.close()
        try await a.close()
        let report = try await openNotebook(dir.sub("B")).verify()
        #expect(report.problems.isEmpty, "\(report.problems)")
        // [PKG-42] A damaged base is reported by verify, not skipped.
        var base = try #require(fileBytes(paths.base(pid)))
        base[base.count / 2] ^= 0x10
        try writeFile(paths.base(pid), base)
        let damaged = try Verify.run(folder: dir.sub("B"))
        #expect(damaged.problems.contains { $0.kind == .undecodable && $0.path == paths.base(pid) }, "\(damaged.problems)")
    }

    /// The base file: every truncation and every single bit flip is rejected, never read
    /// as a shorter or different clock.
    @Test func baseFileRejectsDamage() async throws {
        let dir = try TempDir("ckpt")
        defer { dir.remove() }
        let (a, da, pid, _) = try await Self.source(dir.sub("A"))
        let state = try await da.pageState(pid)
        try await a.close()
        let bytes = PageBase.encode(state)
        let decoded = try PageBase.decode(bytes, page: pid, path: "base", state: true)
        #expect(decoded.clock == state.clock)
        #expect(decoded.state == state)
        #expect(throws: LnoteError.self) { try PageBase.decode(bytes, page: PageID(), path: "base", state: true) }
        for n in 0..<bytes.count {
            #expect(throws: LnoteError.self, "truncated at \(n)") {
                try PageBase.decode(Array(bytes[..<n]), page: pid, path: "base", state: false)
            }
        }
        for i in 0..<bytes.count {
            for bit in 0..<8 {
                var b = bytes
                b[i] ^= UInt8(1 << bit)
                #expect(throws: LnoteError.self, "bit \(bit) of byte \(i)") {
                    try PageBase.decode(b, page: pid, path: "base", state: true)
                }
            }
        }
    }
}
