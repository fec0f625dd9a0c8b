import Foundation
import Testing
import LnoteModel
import LnoteTestSupport
@testable import LnoteStore

/// [PKG-104] A file whose length claims more than any read may take (a sparse file of a
/// terabyte from another folder or a backup) is refused by name before memory is taken for
/// it: the process lives on, and the file is left as it is.
@Suite("Files whose size no read trusts")
struct HostileSizeTests {
    static let terabyte: off_t = 1 << 40

    enum Victim: String, CaseIterable, CustomStringConvertible {
        case documentJSON, snapshot, pageLog, undoJournal
        var description: String { rawValue }
    }

    @Test("[PKG-104] a terabyte-long sparse document.json, page snapshot, page log or undo journal: limitExceeded naming it, left unchanged")
    func sparseFilesAreRefused() async throws {
        for victim in Victim.allCases {
            let dir = try TempDir("hostile-size")
            defer { dir.remove() }
            let nbPath = dir.sub("nb")
            var nb = try await openNotebook(nbPath)
            let d = try await nb.createDocument(title: "T")
            let p = try #require(await d.pageList.first?.id)
            for i in 0..<3 { try await d.addStroke(stroke(4, x: Int32(i * 10)), to: p) }
            try await d.compact(page: p)
            try await d.addStroke(stroke(4, x: 40), to: p)
            try await d.close()
            let undoDirectory = nb.identity.undoDirectory
            try await nb.close()
            let paths = PackagePaths(folder: try Syscalls.live.realpath(nbPath), id: d.id)
            let path = switch victim {
            case .documentJSON: paths.document
            case .snapshot: paths.content(p)
            case .pageLog: paths.log(p)
            case .undoJournal: undoDirectory + "/\(d.id).jsonl"
            }
            #expect(FileManager.default.fileExists(atPath: path), "\(victim): \(path)")
            #expect(truncate(path, Self.terabyte) == 0, "\(victim): the file system takes no sparse file here")

            // Every use of the document: refused with limitExceeded naming the file, or done
            // without that file (nothing else is an acceptable outcome).
            var refusals: [LnoteError] = []
            nb = try await openNotebook(nbPath)
            do {
                let doc = try await nb.openDocument(d.id)
                do { _ = try await doc.pageState(p) } catch let e as LnoteError { refusals.append(e) }
                do { _ = try await doc.undo() } catch let e as LnoteError { refusals.append(e) }
                try? await doc.close()
            } catch let e as LnoteError { refusals.append(e) }
            try? await nb.close()
            #expect(!refusals.isEmpty, "\(victim): a terabyte-long file was used")
            for e in refusals {
                #expect(e.code == .limitExceeded && e.path == path, "\(victim): \(e)")
            }
            var st = stat()
            #expect(stat(path, &st) == 0 && st.st_size == Self.terabyte, "\(victim): the file was changed")
        }
    }

    /// Room an open reserves before the tail's CRCs are checked comes from the frames'
    /// lengths and type bytes alone: a damaged or hostile tail of 9-byte "adds" (length 1,
    /// any CRC, type `addStroke3`) must not buy a record's room for each.
    @Test("a log tail of 100,000 bogus 9-byte add frames: the open reserves room for at most maxReservedFromTail of them, and finds no frame")
    func bogusAddFramesReserveLittle() async throws {
        let dir = try TempDir("hostile-tail")
        defer { dir.remove() }
        let nb = try await openNotebook(dir.sub("nb"))
        let d = try await nb.createDocument(title: "T")
        let p = try #require(await d.pageList.first?.id)
        for i in 0..<3 { try await d.addStroke(stroke(4, x: Int32(i * 10)), to: p) }
        try await d.compact(page: p)
        try await d.close()
        let paths = PackagePaths(folder: try Syscalls.live.realpath(dir.sub("nb")), id: d.id)
        try await nb.close()
        let snapshot = Array(try Data(contentsOf: URL(fileURLWithPath: paths.content(p))))
        let bogus: [UInt8] = [1, 0, 0, 0, 0xde, 0xad, 0xbe, 0xef, 0x0a]
        let frames = 100_000
        let tail = Array([[UInt8]](repeating: bogus, count: frames).joined())
        #expect(Document.framesAndAdds(tail) == (frames, frames))

        let decoded = Document.decode(snapshot: snapshot, path: paths.content(p), tail: tail, from: 40, anchor: nil,
                                      logPath: paths.log(p), deferringPoints: true)
        let contents = try #require(decoded.snapshot)
        #expect(contents.state.elements.count == 3)
        // Room for the snapshot's records, its usual spare and at most the bound: not 100,000.
        #expect(contents.state.elements.capacity < frames / 2, "room for \(contents.state.elements.capacity) records")
        #expect(decoded.scan.frames.isEmpty && decoded.scan.frames.capacity < frames / 2)
        #expect(decoded.scan.tornTail != nil || !decoded.scan.damage.isEmpty)
    }
}
