import Foundation
import Testing
import LnoteModel
@testable import LnoteStore
import LnoteSync
import LnoteServer

/// A peer folder on read-only media (a backup on a read-only mount), driven through the
/// syscall seam (the tests run as root, whom permissions do not stop).
@Suite struct ReadOnlyPeerTests {
    /// Every file of a folder, by relative path.
    static func tree(_ root: String) -> [String: Data] {
        var out: [String: Data] = [:]
        let e = FileManager.default.enumerator(atPath: root)
        while let rel = e?.nextObject() as? String {
            var isDir: ObjCBool = false
            if FileManager.default.fileExists(atPath: root + "/" + rel, isDirectory: &isDir), !isDir.boolValue {
                out[rel] = FileManager.default.contents(atPath: root + "/" + rel)
            }
        }
        return out
    }

    @Test("[PKG-24] a folder sync pulls what a read-only peer folder holds; the push into it is refused and changes nothing there")
    func pullFromReadOnlyFolder() async throws {
        let dir = try TempDir()
        let a = dir.sub("A"), b = dir.sub("B")
        let docID = try await Fixture.notebook(at: b, strokes: 12, pages: 2)
        // A gets B's notebook; then each side makes strokes the other lacks.
        let nbA = try await Notebook.open(at: a, create: true, options: Fixture.quiet)
        let nbB = try await Notebook.open(at: b, options: Fixture.quiet)
        _ = try await SyncSession(notebook: nbA, remote: LocalRemote(key: b, endpoint: NotebookEndpoint(notebook: nbB),
                                                                    cursorsOutliveProcess: false)).run()
        var gen = HandwritingGenerator(seed: 11)
        let inB = try await nbB.openDocument(docID)
        let page = await inB.pageList[0].id
        let fromB = try await inB.addStrokes(gen.strokes(3), to: page)
        let fromA = try await nbA.openDocument(docID).addStrokes(gen.strokes(2), to: page)
        try await nbB.close()
        try await nbA.close()
        let before = Self.tree(b)

        let syncA = try await Notebook.open(at: a, options: Fixture.quiet)
        let readOnlyB = try await Notebook(path: b, create: false, options: Fixture.quiet, io: Syscalls(faults: .readOnlyMedia()))
        do {
            _ = try await SyncSession(notebook: syncA, remote: LocalRemote(key: b, endpoint: NotebookEndpoint(notebook: readOnlyB),
                                                                         cursorsOutliveProcess: false)).run()
            Issue.record("the push into a read-only folder succeeded")
        } catch let e as LnoteError {
            #expect(e.isReadOnly, "\(e)")
            #expect(e.path?.hasPrefix(b + "/") == true, "\(e)")
        }
        try await readOnlyB.close()
        try await syncA.close()

        // A holds B's new strokes and its own; B did not change by one byte.
        let reopened = try await Notebook.open(at: a, options: Fixture.quiet)
        let have = Set(try await reopened.openDocument(docID).elementIDs(page))
        try await reopened.close()
        #expect(Set(fromB).isSubset(of: have), "B's strokes were not received")
        #expect(Set(fromA).isSubset(of: have))
        #expect(Self.tree(b) == before)
        #expect(try Verify.run(folder: a).problems.isEmpty)

        // Pull only (what `lnote sync` does with a folder it sees on read-only media): no
        // error, nothing sent, the operations it lacks counted.
        let again = try await Notebook.open(at: a, options: Fixture.quiet)
        let readOnlyAgain = try await Notebook(path: b, create: false, options: Fixture.quiet, io: Syscalls(faults: .readOnlyMedia()))
        var pullOnly = SyncSession(notebook: again, remote: LocalRemote(key: b, endpoint: NotebookEndpoint(notebook: readOnlyAgain),
                                                                       cursorsOutliveProcess: false))
        pullOnly.sendsNothing = true
        let r = try await pullOnly.run()
        try await readOnlyAgain.close()
        try await again.close()
        #expect(r.opsSent == 0 && r.notSent == fromA.count, "\(r)")
        #expect(Self.tree(b) == before)
    }
}
