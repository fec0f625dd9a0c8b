import Foundation
import LnoteModel
import LnoteReplication
import LnoteServer
import LnoteStore
import LnoteSync

extension Bench {
    /// 12. First sync: a new machine pulls a 200-document notebook, against copying the folder.
    ///
    /// The served notebook has documents of varied size (2 to 60 generated strokes, a quarter
    /// of them with a second page). Timed side by side, each run into a fresh folder:
    /// - a first pull from `lnote serve`'s `PeerServer` on loopback through `HTTPRemote`
    ///   (libcurl): the empty folder is created, synced and closed;
    /// - `lnote sync FOLDER OTHER` with OTHER empty (a push into a folder: the receiving side
    ///   is the one a server runs for a push), both folders opened and closed;
    /// - `FileManager.copyItem` of the served folder (no fsync: what `cp -R` does).
    /// The fsync count is `SyncCallCount` (every `fsync`/`fdatasync` of the process, serving
    /// side included) over one run.
    func caseFirstSync() async throws {
        let documents = options.size(200, quick: 40)
        let built = try await firstSyncNotebook(name: "case12", documents: documents)
        let served = built.path
        let opsBytes = try Self.logBytes(served)
        var storeOptions = StoreOptions()
        storeOptions.autosave = false
        let servedNotebook = try await Notebook.open(at: served, options: storeOptions)
        let token = RelayToken.generate()
        let server = try PeerServer(notebook: servedNotebook, token: token)
        defer { try? server.close() }
        let expected: [NotebookLogClock] = try await servedNotebook.logClocks()
        let expectedOps = expected.reduce(0) { $0 + $1.clock.entries.reduce(0) { $0 + Int($1.counter) } }

        var run = 0
        var target = ""
        var fsyncs: [String: [Int]] = [:]
        var received: [String: [Int]] = [:]
        func fresh(_ kind: String) -> String {
            run += 1
            return ws.path("case12/\(kind)-\(run)")
        }
        func counted(_ name: String, _ body: () async throws -> Int) async throws {
            let before = SyncCallCount.value
            let ops = try await body()
            fsyncs[name, default: []].append(SyncCallCount.value - before)
            received[name, default: []].append(ops)
        }
        let pull = Variant(name: "first pull", setup: { target = fresh("pull") }, body: {
            try await counted("first pull") {
                let nb = try await Notebook.open(at: target, create: true, options: storeOptions)
                let remote = try HTTPRemote(url: server.url, options: .init(token: token))
                let r: SyncReport
                do {
                    r = try await SyncSession(notebook: nb, remote: remote).run()
                } catch {
                    try? remote.close()
                    try? await nb.close()
                    throw error
                }
                try remote.close()
                try await nb.close()
                return r.opsApplied
            }
        })
        let folders = Variant(name: "folder to folder", setup: { target = fresh("folder") }, body: {
            try await counted("folder to folder") {
                let from = try await Notebook.open(at: served, options: storeOptions)
                let to = try await Notebook.open(at: target, create: true, options: storeOptions)
                let remote = LocalRemote(key: to.path, endpoint: NotebookEndpoint(notebook: to), cursorsOutliveProcess: false)
                let r = try await SyncSession(notebook: from, remote: remote).run()
                try await to.close()
                try await from.close()
                return r.opsAccepted
            }
        })
        let copy = Variant(name: "copy", setup: { target = fresh("copy") }, body: {
            try FileManager.default.copyItem(atPath: served, toPath: target)
        })
        let t = try await measure([pull, folders, copy], runs: options.size(min(options.runs, 5), quick: 1))
        try await servedNotebook.close()

        // Every run's copy must hold what is served: checked on the last one of each kind.
        func check(_ name: String) -> String {
            let counts = received[name] ?? []
            return counts.allSatisfy { $0 == expectedOps } ? "" : "; NOT EVERY RUN RECEIVED ALL \(expectedOps) OPERATIONS: \(counts)"
        }
        let size = "\(documents) documents, \(formatCount(built.value)) strokes, \(formatBytes(Double(opsBytes))) of logs"
        let median = { (xs: [Int]?) in Int(Timing.median((xs ?? []).map(Double.init))) }
        results.rows.append(Row(12, "first pull from lnote serve, \(size)", measured: t[0].median, unit: .seconds,
                                baselineName: "copying the folder", baseline: t[2].median, target: .valueAtMost(1.0, "≤ 1.0 s"),
                                note: "fsync+fdatasync calls per pull (both sides): \(median(fsyncs["first pull"]))"
                                    + check("first pull"),
                                measuredRuns: t[0].runs, baselineRuns: t[2].runs))
        results.rows.append(Row(12, "first sync folder → empty folder, \(documents) documents", measured: t[1].median,
                                unit: .seconds, baselineName: "copying the folder", baseline: t[2].median,
                                target: .valueAtMost(1.0, "≤ 1.0 s"),
                                note: "fsync+fdatasync calls per sync: \(median(fsyncs["folder to folder"]))"
                                    + check("folder to folder"),
                                measuredRuns: t[1].runs, baselineRuns: t[2].runs))
        results.rows.append(Row(12, "first pull: fsync+fdatasync calls", measured: Double(median(fsyncs["first pull"])),
                                unit: .count, baselineName: "—", baseline: nil, target: .report,
                                note: "SyncCallCount over one pull, the serving side's included; the copy makes none"))
    }

    /// Case 12's served notebook (also case 16's): `documents` documents of 2 to 60 generated
    /// strokes, a quarter of them with a second page; the folder's path and its stroke count.
    func firstSyncNotebook(name: String, documents: Int) async throws -> (path: String, value: Int) {
        try await Fixtures.notebookFolder(ws, name: name) { notebook in
            var strokes = 0
            for i in 0..<documents {
                let d = try await notebook.createDocument(title: "document \(i + 1)")
                let p = await d.pageList[0].id
                let n = 2 + (i * 7919) % 59
                try await d.addStrokes(self.source.handwriting(n, stream: 12_000 + UInt64(i)), to: p)
                strokes += n
                if i % 4 == 0 {
                    let p2 = try await d.addPage()
                    try await d.addStrokes(self.source.handwriting(n / 2 + 1, stream: 13_000 + UInt64(i)), to: p2)
                    strokes += n / 2 + 1
                }
                try await d.close()
            }
            return strokes
        }
    }

    /// Bytes of every log file (`document.log`, `pages/*.log`) under a notebook folder.
    static func logBytes(_ folder: String) throws -> Int {
        var total = 0
        let e = FileManager.default.enumerator(atPath: folder)
        while let name = e?.nextObject() as? String {
            guard name.hasSuffix(".log") else { continue }
            total += try Files.size(folder + "/" + name)
        }
        return total
    }
}
