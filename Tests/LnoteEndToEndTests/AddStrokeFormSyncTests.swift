import Foundation
import Testing
import LnoteModel
import LnoteReplication
import LnoteStore
import LnoteSync
import LnoteServer
import LnoteTestSupport

/// The forms of a stroke add across folders and peers (operation-log.md [LOG-22], [LOG-24],
/// [LOG-29]; sync-protocol.md [SYNC-50] … [SYNC-54]): a folder whose logs an lnote before
/// `addStroke` wrote (every stroke an `add`, 0x01), or one before `addStroke2` (0x06), opens,
/// serves and receives today's `addStroke3` frames; the same operation held in two forms is
/// never a fork, and a true fork in the compact form still is.
@Suite struct AddStrokeFormSyncTests {
    typealias T = TrustSyncTests

    /// Rewrites every page log of `folder`'s first document with each frame in `form` (hash:
    /// as an lnote before `addStroke` would have written it; writtenV1: before `addStroke2`),
    /// and removes the page snapshots so that the logs are replayed whole. Returns how many
    /// frames changed type.
    @discardableResult
    static func rewriteInHashForm(_ folder: String, form: OperationCodec.Form = .hash) async throws -> Int {
        let (doc, _) = try await T.firstPage(folder)
        let nb = try await T.open(folder)
        let pages = try await nb.openDocument(doc).pageLogs()
        try await nb.close()
        let paths = PackagePaths(folder: folder, id: doc)
        var changed = 0
        for p in pages {
            let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: paths.log(p))))
            // As that lnote wrote it: a version-1 header, no anchor ([PKG-110]), standard frames.
            let log = try LogFileContents(bytes, path: paths.log(p))
            var old = log.header
            old.version = 1
            var out = old.encoded
            for f in log.frames.map(\.frame) {
                let op = try OperationCodec.decode(f)
                let encoded = OperationCodec.encode(op, form: form)
                if encoded[8] != f.type { changed += 1 }
                out += encoded
            }
            try Data(out).write(to: URL(fileURLWithPath: paths.log(p)))
            if FileManager.default.fileExists(atPath: paths.content(p)) { try FileManager.default.removeItem(atPath: paths.content(p)) }
        }
        return changed
    }

    /// The frame types of the first page's log, in file order.
    static func frameTypes(_ folder: String) async throws -> [UInt8] {
        let (doc, pid) = try await T.firstPage(folder)
        let path = PackagePaths(folder: folder, id: doc).log(pid)
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        return try LogFileContents(bytes).frames.map(\.frame.type)
    }

    static func digests(_ folder: String) async throws -> [NotebookLogClock] {
        let nb = try await T.open(folder)
        let d: [NotebookLogClock] = try await nb.logClocksAndDigests()
        try await nb.close()
        return d
    }

    /// [SYNC-50] [SYNC-51] [SYNC-52] [LOG-22] A folder and its copy hold the same operations,
    /// one in the old form (`add`) and one in today's (`addStroke`): equal hashes, equal
    /// digests, and a sync finds no fork and moves nothing. Today's strokes then reach the
    /// old-form log; and a true fork made in the compact form is found and repaired.
    @Test func sameOperationInTwoFormsIsNoFork() async throws {
        let dir = try TempDir()
        let (a, a2, a3) = (dir.sub("A"), dir.sub("A2"), dir.sub("A3"))
        _ = try await Fixture.notebook(at: a, strokes: 6, seed: 81)
        let x = try await T.replica(a)
        try FileManager.default.copyItem(atPath: a, toPath: a2)
        try T.adoptReplica(a2, x)
        try FileManager.default.copyItem(atPath: a, toPath: a3)
        try T.adoptReplica(a3, x)
        #expect(try await Self.rewriteInHashForm(a) == 6)
        #expect(try await Self.rewriteInHashForm(a3, form: .writtenV1) == 6)
        #expect(try await Self.frameTypes(a) == Array(repeating: 0x01, count: 6))
        #expect(try await Self.frameTypes(a2) == Array(repeating: 0x0A, count: 6))
        #expect(try await Self.frameTypes(a3) == Array(repeating: 0x06, count: 6))
        #expect(try await Fixture.canonical(a) == Fixture.canonical(a2), "the old-form log replays to the same page")
        #expect(try await Fixture.canonical(a3) == Fixture.canonical(a2), "the addStroke log replays to the same page")
        #expect(try await T.operationSets(a) == T.operationSets(a2), "one hash per operation, whatever its form")
        #expect(try await T.operationSets(a3) == T.operationSets(a2), "one hash per operation, whatever its form")
        #expect(try await Self.digests(a) == Self.digests(a2), "[SYNC-52] equal chain digests")
        #expect(try await Self.digests(a3) == Self.digests(a2), "[SYNC-52] equal chain digests")
        let v1 = try await T.folderSync(a3, a)
        #expect(v1.forks.isEmpty && v1.repairs.isEmpty && !v1.needsAttention && v1.opsApplied == 0 && v1.opsAccepted == 0, "\(v1)")

        let same = try await T.folderSync(a2, a)
        #expect(same.forks.isEmpty && same.repairs.isEmpty && !same.needsAttention, "\(same.forks)")
        #expect(same.opsApplied == 0 && same.opsAccepted == 0)
        #expect(try await T.replica(a2) == x, "no repair, no new replica id")

        // Today's strokes pushed into the old-form log: a log of both forms.
        try await T.addStrokes(a2, 3, seed: 82)
        let push = try await T.folderSync(a2, a)
        #expect(push.forks.isEmpty && !push.needsAttention && push.opsAccepted == 3, "\(push)")
        #expect(try await Self.frameTypes(a) == Array(repeating: 0x01, count: 6) + Array(repeating: 0x0A, count: 3))
        #expect(try await Fixture.canonical(a) == Fixture.canonical(a2))
        #expect(try await Self.digests(a) == Self.digests(a2))

        // A true fork, both sides in the compact form: x.10 with two contents.
        try await T.addStrokes(a, 1, seed: 83)
        try await T.addStrokes(a2, 1, seed: 84)
        let fork = try await T.folderSync(a2, a)
        #expect(fork.forks.map(\.id) == [OpID(replica: x, counter: 10)] && fork.forks.allSatisfy { $0.own }, "\(fork.forks)")
        #expect(fork.repairs.map(\.remade) == [1] && !fork.needsAttention, "\(fork.repairs)")
        #expect(try await Fixture.canonical(a) == Fixture.canonical(a2))
        #expect(try await T.operationSets(a) == T.operationSets(a2))
    }

    /// [SYNC-50] [LOG-22] Over a real peer server: a server whose log is all old-form frames
    /// serves them to a new folder, which then pushes today's strokes back; both converge,
    /// with equal digests, and a second sync moves nothing.
    @Test func oldFormServerAndNewPushes() async throws {
        let dir = try TempDir()
        let (s, c) = (dir.sub("S"), dir.sub("C"))
        _ = try await Fixture.notebook(at: s, strokes: 5, seed: 91)
        #expect(try await Self.rewriteInHashForm(s) == 5)
        let nbS = try await T.open(s)
        let server = try PeerServer(notebook: nbS, token: Fixture.peerToken)
        let first = try await Fixture.sync(c, server.url, token: Fixture.peerToken)
        #expect(first.forks.isEmpty && !first.needsAttention && first.opsApplied >= 5, "\(first)")
        try await T.addStrokes(c, 4, seed: 92)
        let second = try await Fixture.sync(c, server.url, token: Fixture.peerToken)
        #expect(second.forks.isEmpty && !second.needsAttention && second.opsAccepted == 4, "\(second)")
        let third = try await Fixture.sync(c, server.url, token: Fixture.peerToken)
        #expect(third.forks.isEmpty && third.opsApplied == 0 && third.opsAccepted == 0, "\(third)")
        try server.close()
        try await nbS.close()
        #expect(try await Fixture.canonical(c) == Fixture.canonical(s))
        #expect(try await T.operationSets(c) == T.operationSets(s))
        #expect(try await Self.digests(c) == Self.digests(s))
        #expect(try await Self.frameTypes(s) == Array(repeating: 0x01, count: 5) + Array(repeating: 0x0A, count: 4))
    }

    /// [SYNC-50] [LOG-22] A peer does not send a client back what the client just pushed,
    /// whatever form the client pushed it in: the receiving folder writes each stroke as
    /// `addStroke`, so operations pushed as `add` must be recognized by id, not by bytes.
    @Test func pushedOldFormIsNotSentBack() async throws {
        let dir = try TempDir()
        let (s, c) = (dir.sub("S"), dir.sub("C"))
        _ = try await Fixture.notebook(at: s, strokes: 2, seed: 101)
        _ = try await T.folderSync(s, c)
        let added = try await T.addStrokes(c, 3, seed: 102)
        #expect(try await Self.rewriteInHashForm(c) == 5)
        let (doc, pid) = try await T.firstPage(c)
        let path = PackagePaths(folder: c, id: doc).log(pid)
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        let pushed = try LogFileContents(bytes).frames.map(\.frame).filter {
            OperationCodec.id(of: $0).map(added.contains) ?? false
        }
        #expect(pushed.count == 3 && pushed.allSatisfy { $0.type == OperationCodec.Kind.add.rawValue })

        let nbS = try await T.open(s)
        let server = NotebookEndpoint(notebook: nbS)
        let client = try await T.replica(c)
        let hello = try await server.sync(SyncRequest(replica: client, epoch: 0, cursor: 0, have: []))
        let log = LogRef(document: doc, page: pid)
        let answer = try await server.sync(SyncRequest(replica: client, epoch: hello.epoch, cursor: hello.cursor,
                                                       push: [LogBatch(log: log, frames: pushed)]))
        try await nbS.close()
        #expect(answer.accepted == 3 && answer.forks.isEmpty)
        let back = answer.pull.flatMap(\.frames).compactMap(OperationCodec.id(of:))
        #expect(back.filter(added.contains).isEmpty, "sent back: \(back)")
        #expect(try await Self.frameTypes(s).suffix(3) == [0x0A, 0x0A, 0x0A], "the receiver writes the compact form")
    }
}
