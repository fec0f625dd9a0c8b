// Two machines, one notebook, edited offline on both, reconciled through a relay.
//
// Run: swift run two-machines [--keep DIR]
//
// 1. A relay (SQLite + libmicrohttpd) starts on 127.0.0.1.
// 2. Machine A creates a notebook with two pages of generated handwriting and syncs.
// 3. Machine B syncs and receives it.
// 4. Both edit offline, with conflicts: A moves a stroke that B erases; both move another
//    stroke; both retitle the document; each adds ink on its own page.
// 5. A, B, A sync. Both sides print their listing, their canonical JSON (identical), and
//    the conflict report.
import Foundation
import LnoteModel
import LnoteReplication
import LnoteStore
import LnoteSync
import LnoteServer

@main
struct TwoMachines {
    static func main() async {
        do {
            try await run()
        } catch {
            FileHandle.standardError.write(Data("two-machines: \(error)\n".utf8))
            exit(1)
        }
    }

    static func say(_ s: String) { print(s) }

    static func run() async throws {
        let args = CommandLine.arguments
        let keep = args.firstIndex(of: "--keep").flatMap { $0 + 1 < args.count ? args[$0 + 1] : nil }
        let root = keep.map { URL(fileURLWithPath: $0) }
            ?? FileManager.default.temporaryDirectory.appendingPathComponent("lnote-two-machines-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        defer { if keep == nil { try? FileManager.default.removeItem(at: root) } }

        // 1. The relay.
        let store = try RelayStore(path: root.appendingPathComponent("relay.sqlite").path)
        let notebookID = try store.createNotebook()
        let token = try store.createToken(notebook: notebookID, label: "demo")
        let relay = try RelayServer(store: store)
        defer { try? relay.close(); try? store.close() }
        let url = relay.url(notebook: notebookID)
        say("relay listening: \(url)")

        func sync(_ nb: Notebook, _ who: String) async throws {
            let remote = try HTTPRemote(url: url, options: .init(token: token))
            defer { try? remote.close() }
            let r = try await SyncSession(notebook: nb, remote: remote).run()
            say("  \(who) synced: sent \(r.opsSent) ops, received \(r.opsReceived) ops, \(r.assetsSent + r.assetsReceived) assets, "
                + "\(r.bytesSent + r.bytesReceived) bytes, \(r.roundTrips) round trip(s)")
        }

        var options = StoreOptions()
        options.autosave = false
        let a = try await Notebook.open(at: root.appendingPathComponent("machine-A").path, create: true, options: options)
        let b = try await Notebook.open(at: root.appendingPathComponent("machine-B").path, create: true, options: options)
        say("machine A: replica \(a.replica)")
        say("machine B: replica \(b.replica)")

        // 2. A writes a notebook.
        say("\nA writes two pages of handwriting, then syncs")
        let docA = try await a.createDocument(title: "Lecture notes")
        let page1 = await docA.pageList[0].id
        let page2 = try await docA.addPage()
        var gen = HandwritingGenerator(seed: 2026)
        let strokes1 = try await docA.addStrokes(gen.strokes(40), to: page1)
        _ = try await docA.addStrokes(gen.strokes(25), to: page2)
        try await sync(a, "A")

        // 3. B receives it.
        say("\nB syncs and receives it")
        try await sync(b, "B")
        let docB = try await b.openDocument(docA.id)

        // 4. Offline edits on both, with conflicts.
        say("\nboth edit offline:")
        let target = strokes1[3], contested = strokes1[7]
        try await docA.move([target], dx: 120, dy: 0, on: page1)
        say("  A moves stroke \(target) right by 12 pt")
        try await docB.erase([target], on: page1)
        say("  B erases stroke \(target)")
        try await docA.move([contested], dx: 50, dy: 50, on: page1)
        try await docB.move([contested], dx: -30, dy: 0, on: page1)
        say("  A and B both move stroke \(contested)")
        try await docA.setTitle("Lecture notes (A's copy)")
        try await docB.setTitle("Lecture notes — week 1")
        say("  A and B both retitle the document")
        _ = try await docA.addStrokes(gen.strokes(5), to: page1)
        _ = try await docB.addStrokes(gen.strokes(6), to: page2)
        let first = try await docB.elements(page1).first!.id
        try await docB.eraseRange(first, [PointRange(0, 5)], on: page1)
        say("  A adds 5 strokes on page 1; B adds 6 on page 2 and erases the first points of a stroke")

        // 5. Reconcile.
        say("\nreconcile: A, B, A sync")
        try await sync(a, "A")
        try await sync(b, "B")
        try await sync(a, "A")

        for (name, nb, doc) in [("A", a, docA), ("B", b, docB)] {
            try await doc.flush()
            say("\nmachine \(name) library:")
            for s in try await nb.list() {
                say("  \(s.id)  \"\(s.title)\"  \(s.pageCount) pages  \(s.elementCount) elements")
            }
        }
        let jsonA = try await canonical(docA), jsonB = try await canonical(docB)
        say("\ncanonical JSON: A \(jsonA.utf8.count) bytes, B \(jsonB.utf8.count) bytes, sha256 A \(hexString(SHA256.hash(Array(jsonA.utf8))).prefix(16)), B \(hexString(SHA256.hash(Array(jsonB.utf8))).prefix(16))")
        say("identical: \(jsonA == jsonB ? "yes" : "NO")")
        if let keep { say("canonical JSON written to \(keep)/A.json and \(keep)/B.json") }
        if keep != nil {
            try Data(jsonA.utf8).write(to: root.appendingPathComponent("A.json"))
            try Data(jsonB.utf8).write(to: root.appendingPathComponent("B.json"))
        }

        say("\nconflicts (the same on both sides):")
        let conflicts = try await allConflicts(docA)
        let conflictsB = try await allConflicts(docB)
        for c in conflicts { say("  \(c)") }
        say("conflict reports identical: \(conflicts == conflictsB ? "yes" : "NO")")
        let title = await docA.title
        say("title after merge: \"\(title)\"")

        try await a.close()
        try await b.close()
        guard jsonA == jsonB, conflicts == conflictsB else { throw LnoteError(.invalidState, "the replicas did not converge") }
    }

    static func canonical(_ d: Document) async throws -> String {
        let state = await d.state
        var pages: [PageID: PageState] = [:]
        for p in state.pages { pages[p.id] = try await d.pageState(p.id) }
        return state.canonicalJSON(pages: pages)
    }

    static func allConflicts(_ d: Document) async throws -> [Conflict] {
        let state = await d.state
        var out: [Conflict] = []
        for p in state.pages { out += try await d.conflicts(page: p.id) }
        return await d.conflicts() + out
    }
}
