import Foundation
import Testing
import LnoteModel
import LnoteStore
import LnoteSync
import LnoteServer
import LnoteTestSupport

/// A peer server keeps the documents its last requests touched open between requests
/// (`WarmDocuments`): at most its limit, given back when idle, and never a stale view of a
/// document another process edits meanwhile.
@Suite struct PeerServerWarmDocumentsTests {
    /// Three documents served with room for two: a first pull touches all three and two stay
    /// open; a push keeps its document open; after the idle time none is. Every client ends
    /// with the served notebook's documents and strokes.
    @Test func touchedDocumentsStayOpenUpToTheLimitAndCloseWhenIdle() async throws {
        let dir = try TempDir()
        let served = try await Notebook.open(at: dir.sub("served"), create: true, options: Fixture.quiet)
        var gen = HandwritingGenerator(seed: 0x3A2)
        var docs: [DocumentID] = []
        for i in 0..<3 {
            let d = try await served.createDocument(title: "d\(i)")
            _ = try await d.addStrokes(gen.strokes(3), to: await d.pageList[0].id)
            docs.append(d.id)
            try await d.close()
        }
        let token = RelayToken.generate()
        let server = try PeerServer(notebook: served, token: token, warmDocuments: 2, warmIdle: .milliseconds(300))
        _ = try await Fixture.sync(dir.sub("A"), server.url, token: token)
        #expect(await server.warmDocumentCount == 2, "three touched, room for two")

        // A stroke pushed to the first document: its document is held (the least recently
        // used other one is given back).
        let a = try await Notebook.open(at: dir.sub("A"), options: Fixture.quiet)
        let da = try await a.openDocument(docs[0])
        _ = try await da.addStroke(gen.strokes(1)[0], to: await da.pageList[0].id)
        try await da.close()
        try await a.close()
        _ = try await Fixture.sync(dir.sub("A"), server.url, token: token)
        #expect(await server.warmDocumentCount == 2)

        // Idle: given back.
        let deadline = ContinuousClock.now + .seconds(10)
        while await server.warmDocumentCount > 0, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        #expect(await server.warmDocumentCount == 0, "idle documents are given back")

        _ = try await Fixture.sync(dir.sub("B"), server.url, token: token)
        try server.close()
        let servedCounts = try await Self.strokeCounts(served, docs)
        try await served.close()
        #expect(servedCounts == [4, 3, 3])
        for client in ["A", "B"] {
            let nb = try await Notebook.open(at: dir.sub(client), options: Fixture.quiet)
            #expect(try await Self.strokeCounts(nb, docs) == servedCounts, "client \(client)")
            try await nb.close()
        }
        #expect(try Verify.run(folder: dir.sub("served")).isClean)
    }

    /// A document the server holds open is edited by another process (another notebook
    /// handle on the served folder, as the app would): the next client sync gets the edit,
    /// and the client's push reaches the app.
    @Test func anEditByAnotherProcessOfAWarmDocumentIsServed() async throws {
        let dir = try TempDir()
        let doc = try await Fixture.notebook(at: dir.sub("served"), strokes: 2)
        let served = try await Notebook.open(at: dir.sub("served"), options: Fixture.quiet)
        let token = RelayToken.generate()
        let server = try PeerServer(notebook: served, token: token, warmIdle: .seconds(60))
        _ = try await Fixture.sync(dir.sub("A"), server.url, token: token)
        #expect(await server.warmDocumentCount == 1)

        var gen = HandwritingGenerator(seed: 0x3A3)
        for round in 0..<3 {
            // The app, in "another process", draws; then the client draws and syncs.
            let app = try await Notebook.open(at: dir.sub("served"), options: Fixture.quiet)
            let d = try await app.openDocument(doc)
            _ = try await d.addStroke(gen.strokes(1)[0], to: await d.pageList[0].id)
            try await d.close()
            try await app.close()
            let a = try await Notebook.open(at: dir.sub("A"), options: Fixture.quiet)
            let da = try await a.openDocument(doc)
            _ = try await da.addStroke(gen.strokes(1)[0], to: await da.pageList[0].id)
            try await da.close()
            try await a.close()
            let report = try await Fixture.sync(dir.sub("A"), server.url, token: token)
            #expect(report.opsReceived >= 1, "round \(round): the app's stroke comes back")
            #expect(await server.warmDocumentCount == 1)
        }
        try server.close()
        try await served.close()
        let app = try await Notebook.open(at: dir.sub("served"), options: Fixture.quiet)
        let client = try await Notebook.open(at: dir.sub("A"), options: Fixture.quiet)
        let expected = try await Self.strokeCounts(app, [doc])
        #expect(expected == [2 + 3 + 3])
        #expect(try await Self.strokeCounts(client, [doc]) == expected)
        try await app.close()
        try await client.close()
    }

    static func strokeCounts(_ nb: Notebook, _ docs: [DocumentID]) async throws -> [Int] {
        var out: [Int] = []
        for id in docs {
            let d = try await nb.openDocument(id)
            out.append(try await d.elements(await d.pageList[0].id).count)
            try await d.close()
        }
        return out
    }
}
