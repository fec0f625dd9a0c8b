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
}
