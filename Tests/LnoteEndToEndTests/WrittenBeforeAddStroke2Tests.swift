import Foundation
import Testing
import LnoteModel
import LnoteReplication
import LnoteStore
import LnoteSync
import LnoteTestSupport

/// A notebook folder written by lnote before `addStroke2` (operation-log.md [LOG-22],
/// [LOG-24], [LOG-29]): its page logs hold `addStroke` (0x06) frames. Today's lnote opens it
/// and shows each page exactly as the lnote that wrote it showed it (`lnote show --json
/// --points`, kept beside the folder), with its snapshots or from its logs alone; syncs it
/// into an empty folder with one hash per operation; and writes new strokes beside the old
/// frames as `addStroke2`. The folder is `Fixtures/written-before-addstroke2` (see its README).
@Suite struct WrittenBeforeAddStroke2Tests {
    typealias T = TrustSyncTests
    static let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Fixtures/written-before-addstroke2")
    static let document = "94647C3F-DC0E-4315-89CB-DFC9B3A1D6D6"
    static let pages = ["0E1B74C4-1F3A-42C3-A3D9-BE8F96B372A1", "472F58E2-7757-4851-AE4F-4130F775162D"]

    /// The types of the frames of a page log, in file order.
    static func frameTypes(_ folder: String, _ page: String) throws -> [UInt8] {
        let path = "\(folder)/\(document).lnote/pages/\(page).log"
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        return try Frame.decodeAll(Array(bytes[LogHeader.size...]), base: LogHeader.size, path: path).map(\.type)
    }

    /// Each page's JSON with its points, as `lnote show PAGE --json --points` prints it.
    static func shown(_ folder: String) async throws -> [String] {
        let nb = try await T.open(folder)
        let d = try await nb.openDocument(try #require(DocumentID(document)))
        var out: [String] = []
        for p in pages {
            let state = try await d.pageState(try #require(PageID(p)))
            out.append(state.canonicalJSON(style: .pretty, includePoints: true))
        }
        try await nb.close()
        return out
    }

    @Test("[LOG-22] [LOG-24] [LOG-29] a notebook written before addStroke2 opens as it was shown, syncs, and takes new strokes",
          arguments: [false, true])
    func opensShowsAndSyncs(logsAlone: Bool) async throws {
        let dir = try TempDir()
        let (a, b) = (dir.sub("A"), dir.sub("B"))
        try FileManager.default.copyItem(atPath: Self.fixture.appendingPathComponent("nb").path, toPath: a)
        let expected = try ["0E1B74C4", "472F58E2"].map {
            try String(contentsOf: Self.fixture.appendingPathComponent("show-\($0).json"), encoding: .utf8)
        }
        // The logs hold addStroke frames only, for the strokes (and the erase, eraseRange
        // and move of the first page).
        let before = try Self.pages.map { try Self.frameTypes(a, $0) }
        #expect(before[0] == Array(repeating: 0x06, count: 12) + [0x02, 0x03, 0x04], "\(before[0])")
        #expect(before[1] == Array(repeating: 0x06, count: 8), "\(before[1])")
        if logsAlone {
            // No snapshot: every addStroke frame is replayed ([PKG-42] rebuilds the page).
            for p in Self.pages { try FileManager.default.removeItem(atPath: "\(a)/\(Self.document).lnote/pages/\(p).content") }
        }
        let shown = try await Self.shown(a)
        for i in 0..<2 {
            #expect(shown[i].trimmingCharacters(in: .newlines) == expected[i].trimmingCharacters(in: .newlines),
                    "page \(Self.pages[i]) (logs alone: \(logsAlone))")
        }
        let verified = try T.verify(a)
        #expect(verified.problems.isEmpty, "\(verified.problems)")

        // Into an empty folder: the same pages, one content hash per operation.
        let first = try await T.folderSync(a, b)
        #expect(first.forks.isEmpty && !first.needsAttention && first.opsAccepted + first.opsApplied > 0, "\(first)")
        #expect(try await Self.shown(b) == shown)
        #expect(try await Fixture.canonical(a) == Fixture.canonical(b))
        #expect(try await T.operationSets(a) == T.operationSets(b))

        // B received the operations and wrote them as addStroke2; the chain digests taken from
        // the frames (0x06 on A, 0x09 on B) agree ([SYNC-52]).
        #expect(try Self.frameTypes(b, Self.pages[1]) == Array(repeating: 0x09, count: 8))
        #expect(try await AddStrokeFormSyncTests.digests(a) == AddStrokeFormSyncTests.digests(b))

        // New strokes on the old page: written as addStroke2 after its addStroke frames. The
        // log of both forms replays, from its snapshot's tail or alone, to the same page.
        let nb = try await T.open(a)
        let d = try await nb.openDocument(try #require(DocumentID(Self.document)))
        let page = try #require(PageID(Self.pages[0]))
        _ = try await d.addStrokes(HandwritingGenerator.strokes(seed: 0x29, count: 3), to: page)
        let edited = try await d.pageState(page).canonicalJSON(style: .pretty, includePoints: true)
        try await nb.close()
        #expect(try Self.frameTypes(a, Self.pages[0]) == before[0] + [0x09, 0x09, 0x09])
        #expect(try await Self.shown(a)[0] == edited, "reopened")
        try? FileManager.default.removeItem(atPath: "\(a)/\(Self.document).lnote/pages/\(Self.pages[0]).content")
        #expect(try await Self.shown(a)[0] == edited, "the log of both forms replayed alone")

        let second = try await T.folderSync(a, b)
        #expect(second.forks.isEmpty && !second.needsAttention && second.opsAccepted + second.opsApplied >= 3, "\(second)")
        let third = try await T.folderSync(b, a)
        #expect(third.forks.isEmpty && !third.needsAttention && third.opsApplied == 0 && third.opsAccepted == 0, "\(third)")
        #expect(try await Self.shown(b)[0] == edited)
        #expect(try await Fixture.canonical(a) == Fixture.canonical(b))
        #expect(try await T.operationSets(a) == T.operationSets(b))
        #expect(try await AddStrokeFormSyncTests.digests(a) == AddStrokeFormSyncTests.digests(b))
        #expect(try T.verify(a).problems.isEmpty && T.verify(b).problems.isEmpty)
    }
}
