import Foundation
import Testing
import LnoteModel
import LnoteReplication
import LnoteStore
import LnoteSync
import LnoteTestSupport

/// Notebook folders written by older lnotes, kept as they wrote them (operation-log.md
/// [LOG-22], [LOG-24], [LOG-29], [LOG-32]; page-snapshot.md [SNAP-7], [SNAP-42], [SNAP-43]):
/// - `written-before-addstroke2`: page logs of `addStroke` (0x06) frames, format-2 snapshots;
/// - `written-before-addstroke3`: page logs of `addStroke2` (0x09) frames, format-2 snapshots,
///   ink on digitizer grids;
/// - `written-before-snapshot4`: page logs of `addStroke3` (0x0A) frames, format-3 snapshots
///   (records without the *next id* flag), ink on digitizer grids.
/// Today's lnote opens each and shows each page exactly as the lnote that wrote it showed it
/// (`lnote show --json --points`, kept beside the folder), with its snapshots or from its logs
/// alone; syncs it into an empty folder with one hash per operation; and writes new strokes
/// beside the old frames as `addStroke3`. The folders are under `Fixtures/` (see their READMEs).
@Suite struct WrittenByOlderLnoteTests {
    typealias T = TrustSyncTests

    /// One kept folder: its document, its pages of strokes, and the frame types of their logs.
    struct Folder: Sendable, CustomTestStringConvertible {
        let name: String
        let document: String
        let pages: [String]
        let framesBefore: [[UInt8]]
        /// The format of the folder's snapshots.
        let snapshotsBefore: UInt8
        var fixture: URL {
            URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures/\(name)")
        }
        var testDescription: String { name }
    }

    static let folders = [
        Folder(name: "written-before-addstroke2", document: "94647C3F-DC0E-4315-89CB-DFC9B3A1D6D6",
               pages: ["0E1B74C4-1F3A-42C3-A3D9-BE8F96B372A1", "472F58E2-7757-4851-AE4F-4130F775162D"],
               framesBefore: [Array(repeating: 0x06, count: 12) + [0x02, 0x03, 0x04], Array(repeating: 0x06, count: 8)],
               snapshotsBefore: 2),
        Folder(name: "written-before-addstroke3", document: "BD1A5124-9285-4B57-AB1D-596C37344A30",
               pages: ["C480B3AE-FFE0-444A-BBA8-F2B541DD776A", "DD7FED74-9293-459F-8A16-BE511D40E909"],
               framesBefore: [Array(repeating: 0x09, count: 12) + [0x02, 0x03, 0x04], Array(repeating: 0x09, count: 8)],
               snapshotsBefore: 2),
        Folder(name: "written-before-snapshot4", document: "D042BD83-FEAA-47AD-9666-E2E28D97757F",
               pages: ["82BE3317-3926-469B-8C1D-8569351E8D26", "E393275D-26C0-40E6-BE91-18E61F0F4A97"],
               framesBefore: [Array(repeating: 0x0A, count: 12) + [0x02, 0x03, 0x04], Array(repeating: 0x0A, count: 8)],
               snapshotsBefore: 3),
    ]

    /// The types of the frames of a page log, in file order.
    static func frameTypes(_ folder: String, _ f: Folder, _ page: String) throws -> [UInt8] {
        let path = "\(folder)/\(f.document).lnote/pages/\(page).log"
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        return try LogFileContents(bytes, path: path).frames.map(\.frame.type)
    }

    /// The format version of a page's snapshot.
    static func snapshotVersion(_ folder: String, _ f: Folder, _ page: String) throws -> UInt8 {
        try [UInt8](Data(contentsOf: URL(fileURLWithPath: "\(folder)/\(f.document).lnote/pages/\(page).content")))[8]
    }

    /// Each page's JSON with its points, as `lnote show PAGE --json --points` prints it.
    static func shown(_ folder: String, _ f: Folder) async throws -> [String] {
        let nb = try await T.open(folder)
        let d = try await nb.openDocument(try #require(DocumentID(f.document)))
        var out: [String] = []
        for p in f.pages {
            let state = try await d.pageState(try #require(PageID(p)))
            out.append(state.canonicalJSON(style: .pretty, includePoints: true))
        }
        try await nb.close()
        return out
    }

    @Test("[LOG-22] [LOG-24] [LOG-29] [LOG-32] [SNAP-42] [SNAP-43] a notebook written by an older lnote opens as it was shown, syncs, and takes new strokes",
          arguments: folders, [false, true])
    func opensShowsAndSyncs(folder f: Folder, logsAlone: Bool) async throws {
        let dir = try TempDir()
        let (a, b) = (dir.sub("A"), dir.sub("B"))
        try FileManager.default.copyItem(atPath: f.fixture.appendingPathComponent("nb").path, toPath: a)
        let expected = try f.pages.map {
            try String(contentsOf: f.fixture.appendingPathComponent("show-\($0.prefix(8)).json"), encoding: .utf8)
        }
        // The logs hold the compact frames of their time only, for the strokes (and the erase,
        // eraseRange and move of the first page); the snapshots are of an older format.
        let before = try f.pages.map { try Self.frameTypes(a, f, $0) }
        #expect(before == f.framesBefore, "\(before)")
        #expect(try f.pages.map { try Self.snapshotVersion(a, f, $0) } == [f.snapshotsBefore, f.snapshotsBefore])
        if logsAlone {
            // No snapshot: every frame is replayed ([PKG-42] rebuilds the page).
            for p in f.pages { try FileManager.default.removeItem(atPath: "\(a)/\(f.document).lnote/pages/\(p).content") }
        }
        let shown = try await Self.shown(a, f)
        for i in 0..<2 {
            #expect(shown[i].trimmingCharacters(in: .newlines) == expected[i].trimmingCharacters(in: .newlines),
                    "\(f.name): page \(f.pages[i]) (logs alone: \(logsAlone))")
        }
        let verified = try T.verify(a)
        #expect(verified.problems.isEmpty, "\(verified.problems)")

        // Into an empty folder: the same pages, one content hash per operation.
        let first = try await T.folderSync(a, b)
        #expect(first.forks.isEmpty && !first.needsAttention && first.opsAccepted + first.opsApplied > 0, "\(first)")
        #expect(try await Self.shown(b, f) == shown)
        #expect(try await Fixture.canonical(a) == Fixture.canonical(b))
        #expect(try await T.operationSets(a) == T.operationSets(b))

        // B received the operations and wrote them as addStroke3; the chain digests taken from
        // the frames (the type of their time on A, 0x0A on B) agree ([SYNC-52]).
        #expect(try Self.frameTypes(b, f, f.pages[1]) == Array(repeating: 0x0A, count: 8))
        #expect(try await AddStrokeFormSyncTests.digests(a) == AddStrokeFormSyncTests.digests(b))

        // New strokes on the old page: written as addStroke3 after its addStroke frames. The
        // log of both forms replays, from its snapshot's tail or alone, to the same page.
        let nb = try await T.open(a)
        let d = try await nb.openDocument(try #require(DocumentID(f.document)))
        let page = try #require(PageID(f.pages[0]))
        _ = try await d.addStrokes(HandwritingGenerator.strokes(seed: 0x29, count: 3), to: page)
        let edited = try await d.pageState(page).canonicalJSON(style: .pretty, includePoints: true)
        // Compacted, the page's snapshot is written again, in today's format.
        if !logsAlone { try await d.compact(page: page) }
        try await nb.close()
        #expect(try Self.frameTypes(a, f, f.pages[0]) == before[0] + [0x0A, 0x0A, 0x0A])
        if !logsAlone {
            #expect(try Self.snapshotVersion(a, f, f.pages[0]) == UInt8(PageSnapshot.version), "the page compacted is today's format")
        }
        #expect(try await Self.shown(a, f)[0] == edited, "reopened")
        try? FileManager.default.removeItem(atPath: "\(a)/\(f.document).lnote/pages/\(f.pages[0]).content")
        #expect(try await Self.shown(a, f)[0] == edited, "the log of both forms replayed alone")

        let second = try await T.folderSync(a, b)
        #expect(second.forks.isEmpty && !second.needsAttention && second.opsAccepted + second.opsApplied >= 3, "\(second)")
        let third = try await T.folderSync(b, a)
        #expect(third.forks.isEmpty && !third.needsAttention && third.opsApplied == 0 && third.opsAccepted == 0, "\(third)")
        #expect(try await Self.shown(b, f)[0] == edited)
        #expect(try await Fixture.canonical(a) == Fixture.canonical(b))
        #expect(try await T.operationSets(a) == T.operationSets(b))
        #expect(try await AddStrokeFormSyncTests.digests(a) == AddStrokeFormSyncTests.digests(b))
        #expect(try T.verify(a).problems.isEmpty && T.verify(b).problems.isEmpty)
    }
}
