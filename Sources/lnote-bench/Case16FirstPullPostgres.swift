#if canImport(Glibc)
import Glibc
#endif
import Foundation
import LnoteModel
import LnoteRelayPostgres
import LnoteServer
import LnoteStore
import LnoteSync

extension Bench {
    /// 16. A newcomer's first pull of a 200-document notebook (case 12's) from an `lnote relay`
    /// on PostgreSQL, against the same from an `lnote relay` on SQLite (issue 17: ≤ 1.5 ×).
    ///
    /// Both relays are real processes (release build) on loopback, each holding the same
    /// notebook, pushed to it once by case 12's folder; PostgreSQL is a throwaway cluster
    /// started by the bench (fsync on; see BenchPostgres). Timed side by side, interleaved,
    /// each run into a fresh folder: the empty folder created, one `SyncSession` through
    /// `HTTPRemote`, the folder closed (as case 12's first pull).
    func caseFirstPullPostgres() async throws {
        guard let lnote = Self.lnoteBinary() else {
            throw LnoteError(.notFound, "no lnote binary next to lnote-bench: build it first (swift build -c release --product lnote)")
        }
        let documents = options.size(200, quick: 40)
        let dir = try ws.directory("case16")
        let pg = try await BenchPostgres.start(statements: true)
        var relays: [BenchRelay] = []
        do {
            try await firstPulls(lnote: lnote, documents: documents, dir: dir, pg: pg, relays: &relays)
        } catch {
            for r in relays { r.stop() }
            await pg.remove()
            throw error
        }
        for r in relays { r.stop() }
        await pg.remove()
    }

    private func firstPulls(lnote: String, documents: Int, dir: String, pg: BenchPostgres, relays: inout [BenchRelay]) async throws {
        let built = try await firstSyncNotebook(name: "case16", documents: documents)
        var storeOptions = StoreOptions()
        storeOptions.autosave = false

        // Two tokens per relay: the author's (who pushes the notebook once) and the newcomers'.
        let sqlitePath = dir + "/relay.sqlite"
        let sq = try BenchRelay.makeNotebook(try RelayStore(path: sqlitePath), devices: ["author", nil])
        let url = try pg.createDatabase("bench_pull")
        let pq = try BenchRelay.makeNotebook(try RelayStore(database: try RelayPostgresDatabase(url: url, poolSize: 1)),
                                             devices: ["author", nil])
        let sqliteRelay = try await BenchRelay.start(lnote, store: ["--db", sqlitePath], dir: dir, name: "sqlite")
        relays.append(sqliteRelay)
        let pgRelay = try await BenchRelay.start(lnote, store: ["--postgres", url, "--pool-size", "8"], dir: dir, name: "postgres")
        relays.append(pgRelay)
        let sqliteURL = sqliteRelay.baseURLs[0] + "/v1/notebooks/\(sq.notebook)"
        let pgURL = pgRelay.baseURLs[0] + "/v1/notebooks/\(pq.notebook)"

        let author = try await Notebook.open(at: built.path, options: storeOptions)
        let clocks: [NotebookLogClock] = try await author.logClocks()
        let expected = clocks.reduce(0) { $0 + $1.clock.entries.reduce(0) { $0 + Int($1.counter) } }
        for (u, token) in [(sqliteURL, sq.tokens[0]), (pgURL, pq.tokens[0])] {
            let remote = try HTTPRemote(url: u, options: .init(token: token))
            let r = try await SyncSession(notebook: author, remote: remote).run()
            try remote.close()
            guard r.opsAccepted == expected else {
                throw LnoteError(.invalidState, "case 16: the relay at \(u) accepted \(r.opsAccepted) of \(expected) operations")
            }
        }
        try await author.close()

        var run = 0
        var target = ""
        var received: [String: [Int]] = [:]
        /// Per pull: CPU seconds of this process (the client), of the relay and of PostgreSQL; round trips.
        var cpu: [String: [(client: Double, relay: Double, database: Double, roundTrips: Int)]] = [:]
        func pull(_ name: String, _ u: String, _ token: String, _ relay: BenchRelay) -> Variant {
            Variant(name: name, setup: {
                run += 1
                target = self.ws.path("case16/\(name)-\(run)")
            }, body: {
                let c0 = ProcStat.selfCPU(), r0 = relay.cpuSeconds(), d0 = pg.cpuSeconds()
                let nb = try await Notebook.open(at: target, create: true, options: storeOptions)
                let remote = try HTTPRemote(url: u, options: .init(token: token))
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
                received[name, default: []].append(r.opsApplied)
                cpu[name, default: []].append((ProcStat.selfCPU() - c0, relay.cpuSeconds() - r0, pg.cpuSeconds() - d0,
                                               r.roundTrips))
            })
        }
        let t = try await measure([pull("sqlite", sqliteURL, sq.tokens[1], sqliteRelay), pull("postgres", pgURL, pq.tokens[1], pgRelay)],
                                  runs: options.size(min(options.runs, 5), quick: 1))
        func check(_ name: String) -> String {
            let counts = received[name] ?? []
            return counts.allSatisfy { $0 == expected } ? "" : "; NOT EVERY RUN RECEIVED ALL \(expected) OPERATIONS: \(counts)"
        }
        func split(_ name: String) -> String {
            let xs = Array((cpu[name] ?? []).dropFirst())  // the warm-up run left out
            func med(_ f: ((client: Double, relay: Double, database: Double, roundTrips: Int)) -> Double) -> Double {
                Timing.median(xs.map(f))
            }
            return String(format: "%@: CPU per pull: client %.2f s, relay %.2f s, PostgreSQL %.2f s; %d round trips",
                          name as NSString, med(\.client), med(\.relay), med(\.database), Int(med { Double($0.roundTrips) }))
        }
        // What PostgreSQL ran for one pull: one more, untimed, with pg_stat_statements reset before it.
        var statements = ""
        do {
            try pg.resetStatements(url)
            let extra = pull("postgres", pgURL, pq.tokens[1], pgRelay)
            try await extra.setup()
            try await extra.body()
            cpu["postgres"]?.removeLast()  // not one of the timed runs
            statements = try pg.statementSummary(url)
        } catch {
            statements = "not read: \(error)"
        }
        let size = "\(documents) documents, \(formatCount(built.value)) strokes, \(formatCount(expected)) operations"
        results.rows.append(Row(16, "first pull from an lnote relay on PostgreSQL, \(size)", measured: t[1].median, unit: .seconds,
                                baselineName: "the same from an lnote relay on SQLite", baseline: t[0].median,
                                target: .ratioAtMost(1.5),
                                note: "both relays real processes on loopback (release), PostgreSQL a throwaway cluster with fsync on, "
                                    + "pool 8; each run a fresh folder, one SyncSession through HTTPRemote, closed; median of "
                                    + "\(t[1].runs.count) interleaved runs; " + split("postgres") + "; " + split("sqlite")
                                    + " (PostgreSQL's CPU there: the idle cluster); what PostgreSQL ran for one more, untimed pull "
                                    + "(pg_stat_statements, preloaded in this case's cluster only): " + statements
                                    + check("sqlite") + check("postgres"),
                                measuredRuns: t[1].runs, baselineRuns: t[0].runs))
    }
}
