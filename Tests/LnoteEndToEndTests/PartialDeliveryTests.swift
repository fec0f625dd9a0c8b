import Foundation
import Testing
import LnoteModel
import LnoteReplication
import LnoteStore
import LnoteSync
import LnoteServer
import LnoteTestSupport

/// A push that holds a page's operations and not its document's ([SYNC-84]).
@Suite struct PartialDeliveryTests {
    let lnote = Subprocess.product("lnote")

    /// [SYNC-84] [MERGE-40] A peer server given only the page log of a document it does not
    /// hold stores it (200, every operation accepted) in a package whose document log is
    /// empty: `lnote ls` and `show` read that folder without error (an untitled document of no
    /// page), `verify` names only the waiting page's files ([PKG-43]). When the document's
    /// operations arrive in a later sync, the waiting page is placed, the folder equals its
    /// source and verifies clean.
    @Test func pageOperationsBeforeTheirDocumentAreKeptUntilItArrives() async throws {
        let dir = try TempDir()
        let doc = try await Fixture.notebook(at: dir.sub("A"), strokes: 5)
        let page = try await RelayTrustOwnersTests.firstPage(dir.sub("A"))
        #expect(page.log.document == doc && !page.frames.isEmpty)

        let served = try await Notebook.open(at: dir.sub("S"), create: true, options: Fixture.quiet)
        let token = RelayToken.generate()
        var server = try PeerServer(notebook: served, token: token)
        let client = try HTTPClient()
        let r = try await RelayTrustOwnersTests.post(client, server.url, token: token,
                                                     SyncRequest(replica: ReplicaID(0xA11CE), epoch: 0, cursor: 0,
                                                                 push: [LogBatch(log: page.log, frames: page.frames)]))
        #expect(r.status == 200, "\(r.json)")
        #expect(try SyncCodec.decodeResponse(r.body).accepted == UInt64(page.frames.count))
        try client.close()
        try server.close()
        try await served.close()

        // The state the spec describes: a package, its document log empty, the page's log full.
        let paths = PackagePaths(folder: dir.sub("S"), id: doc)
        let docLog = try Data(contentsOf: URL(fileURLWithPath: paths.documentLog))
        #expect(docLog.count == LogHeader.size, "the document log holds \(docLog.count) bytes")
        #expect(FileManager.default.fileExists(atPath: paths.log(page.log.page!)))
        let ls = try await Subprocess.run(lnote, ["ls", dir.sub("S")])
        #expect(ls.status == 0, "\(ls.errText)")
        #expect(ls.outText.contains(doc.description.prefix(8)), "\(ls.outText)")
        let show = try await Subprocess.run(lnote, ["show", dir.sub("S"), doc.description])
        #expect(show.status == 0, "\(show.errText)")
        #expect(show.outText.hasPrefix("(untitled)\n"), "\(show.outText)")
        #expect(show.outText.contains("pages     0") || show.outText.range(of: #"pages\s+0"#, options: .regularExpression) != nil,
                "\(show.outText)")
        let json = try await Subprocess.run(lnote, ["show", dir.sub("S"), doc.description, "--json"])
        #expect(json.status == 0, "\(json.errText)")
        // verify lists the waiting page's files as document-package.md [PKG-43] says (waiting
        // until the `addPage` arrives), reports no problem, and exits 0 ([SYNC-84]).
        let verify = try await Subprocess.run(lnote, ["verify", dir.sub("S"), "--json"])
        let object = try JSONSerialization.jsonObject(with: Data(verify.out)) as? [String: Any]
        let problems = object?["problems"] as? [[String: Any]] ?? []
        let waiting = object?["waiting"] as? [[String: Any]] ?? []
        #expect(verify.status == 0 && problems.isEmpty, "\(verify.outText)\(verify.errText)")
        #expect(!waiting.isEmpty && waiting.allSatisfy { $0["kind"] as? String == "orphanPageFile" },
                "\(verify.outText)\(verify.errText)")
        let text = try await Subprocess.run(lnote, ["verify", dir.sub("S")])
        #expect(text.status == 0 && text.outText.contains("waiting: orphanPageFile: ")
                    && text.outText.contains("no problems; 1 page file waiting for their document's operations"), "\(text.outText)")

        // The rest comes in a later sync: the page is placed, and the folders agree.
        let again = try await Notebook.open(at: dir.sub("S"), options: Fixture.quiet)
        server = try PeerServer(notebook: again, token: token)
        _ = try await Fixture.sync(dir.sub("A"), server.url, token: token)
        try server.close()
        try await again.close()
        #expect(try await Fixture.canonical(dir.sub("S")) == Fixture.canonical(dir.sub("A")))
        let after = try await Subprocess.run(lnote, ["show", dir.sub("S"), doc.description])
        #expect(after.outText.hasPrefix("fixture\n"), "\(after.outText)")
        let clean = try await Subprocess.run(lnote, ["verify", dir.sub("S")])
        #expect(clean.status == 0, "\(clean.outText)\(clean.errText)")
        ReliabilityReport.record(family: "abuse", detail: "PartialDeliveryTests: a push of page operations before their document's",
                                 cases: 1)
    }
}
