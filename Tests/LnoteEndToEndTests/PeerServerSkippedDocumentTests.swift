import Foundation
import Synchronization
import Testing
import LnoteModel
import LnoteStore
import LnoteSync
import LnoteServer
import LnoteTestSupport

/// A served folder holding a hostile document: the peer server leaves it out ([PKG-22]) and
/// tells its operator, on the server's log, once ([SYNC-83]).
@Suite struct PeerServerSkippedDocumentTests {
    /// [SYNC-83] [PKG-22] One of two documents has a page log that is a symlink to a private
    /// file. Three clients sync (one of them twice): the log handler gets exactly one line,
    /// naming that document and why; the other document reaches every client, the hostile one
    /// none, and no client sees the private bytes.
    @Test func aSkippedDocumentIsLoggedOnceAndTheRestSyncs() async throws {
        let dir = try TempDir()
        let good = try await Fixture.notebook(at: dir.sub("served"), strokes: 4)
        let hostile: DocumentID
        let page: PageID
        do {
            let nb = try await Notebook.open(at: dir.sub("served"), options: Fixture.quiet)
            let d = try await nb.createDocument(title: "hostile")
            page = await d.pageList[0].id
            var gen = HandwritingGenerator(seed: 83)
            _ = try await d.addStrokes(gen.strokes(3), to: page)
            hostile = d.id
            try await nb.close()
        }
        let log = PackagePaths(folder: dir.sub("served"), id: hostile).log(page)
        let secret = dir.sub("private.txt")
        try Data("private bytes\n".utf8).write(to: URL(fileURLWithPath: secret))
        try FileManager.default.removeItem(atPath: log)
        try FileManager.default.createSymbolicLink(atPath: log, withDestinationPath: secret)

        let served = try await Notebook.open(at: dir.sub("served"))
        let token = RelayToken.generate()
        let server = try PeerServer(notebook: served, token: token)
        let lines = Mutex<[String]>([])
        server.http.setLogHandler { line in lines.withLock { $0.append(line) } }
        for client in ["A", "B", "A", "C"] {
            _ = try await Fixture.sync(dir.sub(client), server.url, token: token)
        }
        try server.close()
        try await served.close()

        let logged = lines.withLock { $0 }
        let skipped = logged.filter { $0.contains("skipped document") }
        #expect(skipped.count == 1, "\(logged)")
        let line = try #require(skipped.first, "\(logged)")
        #expect(line.hasPrefix("skipped document \(hostile): "), "\(line)")
        #expect(line.contains(log), "the line names the linked file: \(line)")
        #expect(!logged.contains { $0.contains(good.description) }, "\(logged)")
        for client in ["A", "B", "C"] {
            let nb = try await Notebook.open(at: dir.sub(client), options: Fixture.quiet)
            let ids = try await nb.documentIDs()
            try await nb.close()
            #expect(ids == [good], "client \(client) holds \(ids)")
            let files = FileManager.default.enumerator(atPath: dir.sub(client))?.compactMap { $0 as? String } ?? []
            for f in files {
                let bytes = (try? Data(contentsOf: URL(fileURLWithPath: dir.sub(client) + "/" + f))) ?? Data()
                #expect(bytes.range(of: Data("private bytes".utf8)) == nil, "\(client)/\(f) holds the private file's bytes")
            }
        }
        ReliabilityReport.record(family: "abuse", detail: "PeerServerSkippedDocumentTests: a served document with a linked page log, 4 syncs",
                                 cases: 4)
    }
}
