import Foundation
import LnoteModel
import LnoteReplication
import LnoteServer
import LnoteStore
import LnoteSync

extension Bench {
    /// 7. Sync: 10 new strokes into a 200-document notebook over HTTP on loopback.
    ///
    /// A relay (SQLite store, libmicrohttpd) on 127.0.0.1; the notebook folder syncs with it
    /// through `HTTPRemote` (libcurl) once (first contact), then each run adds 10 strokes to
    /// one page and syncs again. The bytes are `SyncReport.bytesSent + bytesReceived`, which
    /// `HTTPRemote` counts from the start lines, headers and bodies of each request and
    /// response as HTTP/1.1 writes them (an estimate: TCP/IP framing is not counted, and
    /// headers curl adds are counted at their usual size).
    func caseSync() async throws {
        let documents = options.size(200, quick: 40)
        let strokesPerDocument = options.size(5, quick: 3)
        let built = try await Fixtures.notebookFolder(ws, name: "case7") { notebook in
            var first: (DocumentID, PageID)? = nil
            for i in 0..<documents {
                let d = try await notebook.createDocument(title: "document \(i + 1)")
                let p = await d.pageList[0].id
                try await d.addStrokes(self.source.handwriting(strokesPerDocument, stream: 700 + UInt64(i)), to: p)
                try await d.close()
                if first == nil { first = (d.id, p) }
            }
            return first!
        }
        let (docID, page) = built.value
        let relayStore = try RelayStore(path: ws.path("case7/relay.sqlite"))
        let relay = try RelayServer(store: relayStore)
        var remote: HTTPRemote? = nil
        var notebook: Notebook? = nil
        defer {
            try? remote?.close()
            try? relay.close()
            try? relayStore.close()
        }
        let relayNotebook = try relayStore.createNotebook()
        let token = try relayStore.createToken(notebook: relayNotebook, label: "bench")
        remote = try HTTPRemote(url: relay.url(notebook: relayNotebook), options: .init(token: token))
        var storeOptions = StoreOptions()
        storeOptions.autosave = false
        notebook = try await Notebook.open(at: built.path, options: storeOptions)
        let nb = notebook!
        let clock = ContinuousClock()
        let firstStart = clock.now
        let first = try await SyncSession(notebook: nb, remote: remote!).run()
        let firstTime = seconds(clock.now - firstStart)

        let doc = try await nb.openDocument(docID)
        var reports: [SyncReport] = []
        var payloads: [Int] = []
        var batch = 0
        var payload = 0
        let sync = Variant(name: "sync", setup: {
            let before = try await doc.clock(page: page)
            try await doc.addStrokes(self.source.handwriting(10, stream: 7000 + UInt64(batch) * 10), to: page)
            batch += 1
            payload = try await doc.frames(page: page, notCoveredBy: before).reduce(0) { $0 + $1.encodedSize }
        }, body: {
            let r = try await SyncSession(notebook: nb, remote: remote!).run()
            reports.append(r)
            payloads.append(payload)
        })
        // The local part every sync starts with: the clock of every log in the folder.
        let clocks = Variant(name: "log clocks", body: { let c: [NotebookLogClock] = try await nb.logClocks(); precondition(!c.isEmpty) })
        let t = try await measure([sync, clocks], runs: options.runs)
        try await nb.close()
        notebook = nil
        // The warm-up run is in `reports` too: every run is checked against the target.
        let accepted = reports.allSatisfy { $0.opsAccepted == 10 && $0.opsSent == 10 }
        let wire = reports.map { $0.bytesSent + $0.bytesReceived }
        let fits = zip(wire, payloads).allSatisfy { Double($0) <= 1.05 * Double($1) + 2048 }
        let medianWire = Timing.median(wire.map(Double.init)), medianPayload = Timing.median(payloads.map(Double.init))
        let trips = reports.map(\.roundTrips).max() ?? 0
        let requests = reports.map { $0.roundTrips + $0.assetRequests }.max() ?? 0
        results.rows.append(Row(7, "sync 10 strokes, \(documents)-document notebook: bytes on the wire", measured: medianWire,
                                unit: .bytes, baselineName: "the 10 strokes' frames", baseline: medianPayload,
                                target: .condition("≤ 1.05 × payload + 2 KB (every run)", fits && accepted),
                                note: "bytes = SyncReport.bytesSent + bytesReceived, HTTPRemote's count of HTTP/1.1 start lines, headers "
                                    + "and bodies (not TCP/IP); per run (sent+received / payload): "
                                    + zip(reports, payloads).map { "\($0.bytesSent)+\($0.bytesReceived)/\($1)" }.joined(separator: ", ")
                                    + (accepted ? "" : "; THE RELAY DID NOT ACCEPT EXACTLY 10 OPERATIONS PER SYNC")))
        results.rows.append(Row(7, "sync 10 strokes: HTTP round trips", measured: Double(requests), unit: .count,
                                baselineName: "—", baseline: nil, target: .valueAtMost(2, "≤ 2"),
                                note: "the most HTTP requests of one sync over the runs: SyncReport.roundTrips (sync exchanges, "
                                    + "at most \(trips)) + assetRequests (at most \(reports.map(\.assetRequests).max() ?? 0))"))
        results.rows.append(Row(7, "sync 10 strokes: time", measured: t[0].median, unit: .seconds,
                                baselineName: "first contact", baseline: firstTime, target: .report,
                                note: "first contact sent \(formatCount(first.opsSent)) operations in \(first.roundTrips) round trips, "
                                    + "\(formatBytes(Double(first.bytesSent + first.bytesReceived))) on the wire",
                                measuredRuns: t[0].runs))
        results.rows.append(Row(7, "of which: Notebook.logClocks(), \(documents) documents", measured: t[1].median, unit: .seconds,
                                baselineName: "sync", baseline: t[0].median, target: .report,
                                note: "a sync starts by reading the clock of every log of the folder (each document opened and closed)",
                                measuredRuns: t[1].runs, baselineRuns: t[0].runs))
    }
}
