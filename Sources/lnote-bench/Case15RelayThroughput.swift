#if canImport(Glibc)
import Glibc
#endif
import Foundation
import LnoteModel
import LnoteServer
import LnoteStore
import LnoteSync

extension Bench {
    /// 15. Relay throughput (issue 17): pushes accepted per second with 32 concurrent clients,
    /// each push one real sync of one new stroke through `HTTPRemote` (libcurl) on loopback.
    ///
    /// Relays, each a real `lnote relay` process (release build beside this program):
    /// - one on SQLite (`--db`, the file on the workspace's disk);
    /// - one on PostgreSQL (`--postgres`, `--pool-size 8`, the default);
    /// - three on one PostgreSQL database, the clients spread over them (client i → relay i mod 3);
    /// and, to show where the time goes, measured in the same interleaved loop:
    /// - the same two single relays with their database on tmpfs (/dev/shm: fsync costs
    ///   nothing): the difference is what the durable commit costs;
    /// - the same two single relays answering syncs with nothing to push (32 clients × the
    ///   same count): HTTP, authentication, the sync codec and one read of the clocks, no write.
    /// And per push, from outside: CPU seconds of this process (the clients), of the relay
    /// processes (`/proc/PID/stat`) and of PostgreSQL (the postmaster and its children).
    ///
    /// The clients run in this process, 32 tasks, each its own notebook folder and its own
    /// notebook on the relay (a relay serving many people's notebooks; no client receives the
    /// others' strokes), the folders on tmpfs when there is one, so that the client's own
    /// fdatasync does not stand in for the relay's; their CPU is measured and reported, so
    /// that the reader sees how much of the two cores they took (in child processes they
    /// would take the same cores, plus 32 Swift runtimes).
    /// PostgreSQL: a throwaway cluster started by the bench (initdb, Unix socket, fsync on).
    func caseRelayThroughput() async throws {
        guard let lnote = Self.lnoteBinary() else {
            throw LnoteError(.notFound, "no lnote binary next to lnote-bench: build it first (swift build -c release --product lnote)")
        }
        let clientCount = 32
        let pushesEach = options.size(8, quick: 2)
        let runs = min(options.runs, options.quick ? 1 : 9)
        let dir = try ws.directory("case15")
        let clientRoot = (ws.scratch ?? ws.root) + "/case15-clients"
        try FileManager.default.createDirectory(atPath: clientRoot, withIntermediateDirectories: true)
        let tmpfs = ws.scratch
        progress("case 15: starting PostgreSQL (disk\(tmpfs != nil ? " and tmpfs" : ""))")
        let pg = try await BenchPostgres.start()
        var pgTmpfs: BenchPostgres?
        var relays: [BenchRelay] = []
        var clients: [[PushClient]] = []
        do {
            if tmpfs != nil { pgTmpfs = try await BenchPostgres.start(parent: "/dev/shm") }
            try await run(lnote: lnote, dir: dir, clientRoot: clientRoot, tmpfs: tmpfs, pg: pg, pgTmpfs: pgTmpfs,
                          clientCount: clientCount, pushesEach: pushesEach, runs: runs, relays: &relays, clients: &clients)
        } catch {
            for cs in clients { for c in cs { await c.close() } }
            for r in relays { r.stop() }
            await pg.remove()
            await pgTmpfs?.remove()
            throw error
        }
        for cs in clients { for c in cs { await c.close() } }
        for r in relays { r.stop() }
        await pg.remove()
        await pgTmpfs?.remove()
    }

    /// What one configuration's timed runs used, per run.
    private struct Sample {
        var wall: Double
        var client: Double
        var relay: Double
        var database: Double
    }

    private func run(lnote: String, dir: String, clientRoot: String, tmpfs: String?, pg: BenchPostgres, pgTmpfs: BenchPostgres?,
                     clientCount: Int, pushesEach: Int, runs: Int, relays: inout [BenchRelay], clients: inout [[PushClient]]) async throws {
        // The relays and their notebooks (made in this process before any relay serves).
        struct Setup { var name: String; var relay: BenchRelay; var pg: BenchPostgres?; var url: String?; var clients: [PushClient] }
        var setups: [Setup] = []
        func add(_ name: String, store: [String], processes: Int, notebooks: [(notebook: NotebookID, token: String)],
                 database: BenchPostgres?, url: String? = nil) async throws {
            let relay = try await BenchRelay.start(lnote, store: store, count: processes, dir: dir, name: name)
            relays.append(relay)
            var cs: [PushClient] = []
            for i in 0..<clientCount {
                let url = relay.baseURLs[i % processes] + "/v1/notebooks/\(notebooks[i].notebook)"
                let strokes = source.handwriting(pushesEach * (runs + 1) + 1, stream: 15_000 + UInt64(setups.count * 100 + i))
                cs.append(try await PushClient(folder: clientRoot + "/\(name)-\(i)", url: url, token: notebooks[i].token,
                                               strokes: strokes))
            }
            clients.append(cs)
            setups.append(Setup(name: name, relay: relay, pg: database, url: url, clients: cs))
        }
        let sqlitePath = dir + "/relay.sqlite"
        try await add("sqlite", store: ["--db", sqlitePath], processes: 1,
                      notebooks: try BenchRelay.makeNotebooks(try RelayStore(path: sqlitePath), count: clientCount), database: nil)
        let one = try pg.createDatabase("bench_one"), three = try pg.createDatabase("bench_three")
        try await add("postgres", store: ["--postgres", one, "--pool-size", "8"], processes: 1,
                      notebooks: try BenchRelay.makeNotebooks(postgres: one, count: clientCount), database: pg, url: one)
        try await add("postgres-3", store: ["--postgres", three, "--pool-size", "8"], processes: 3,
                      notebooks: try BenchRelay.makeNotebooks(postgres: three, count: clientCount), database: pg, url: three)
        if let tmpfs, let pgTmpfs {
            let path = tmpfs + "/case15-relay.sqlite"
            try await add("sqlite-tmpfs", store: ["--db", path], processes: 1,
                          notebooks: try BenchRelay.makeNotebooks(try RelayStore(path: path), count: clientCount), database: nil)
            let url = try pgTmpfs.createDatabase("bench_tmpfs")
            try await add("postgres-tmpfs", store: ["--postgres", url, "--pool-size", "8"], processes: 1,
                          notebooks: try BenchRelay.makeNotebooks(postgres: url, count: clientCount), database: pgTmpfs, url: url)
        }

        // The variants: pushes on every setup, and syncs with nothing to push on the two
        // single relays on disk.
        var samples: [String: [Sample]] = [:]
        var variants: [Variant] = []
        func variant(_ key: String, _ s: Setup, idle: Bool) -> Variant {
            Variant(name: key, body: {
                let c0 = ProcStat.selfCPU(), r0 = s.relay.cpuSeconds(), d0 = s.pg?.cpuSeconds() ?? 0
                let t0 = ContinuousClock.now
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for c in s.clients {
                        group.addTask {
                            for _ in 0..<pushesEach {
                                if idle { try await c.sync() } else { try await c.push() }
                            }
                        }
                    }
                    try await group.waitForAll()
                }
                let wall = seconds(ContinuousClock.now - t0)
                samples[key, default: []].append(Sample(wall: wall, client: ProcStat.selfCPU() - c0, relay: s.relay.cpuSeconds() - r0,
                                                        database: (s.pg?.cpuSeconds() ?? 0) - d0))
            })
        }
        for s in setups { variants.append(variant(s.name, s, idle: false)) }
        variants.append(variant("sqlite idle", setups[0], idle: true))
        variants.append(variant("postgres idle", setups[1], idle: true))
        let t = try await measure(variants, runs: runs)

        // What PostgreSQL's backends wait on: one more round of pushes per PostgreSQL setup,
        // untimed, with pg_stat_activity sampled every 10 ms (the sampling's own queries stay
        // out of the timed runs).
        var waits: [String: String] = [:]
        for s in setups {
            guard let url = s.url else { continue }
            let sampler = WaitSampler(url: url)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for c in s.clients { group.addTask { for _ in 0..<pushesEach { try await c.push() } } }
                try await group.waitForAll()
            }
            waits[s.name] = "; PostgreSQL's client backends during an extra untimed round (pg_stat_activity every 10 ms): "
                + sampler.stop()
        }

        // Checks: every push accepted exactly one operation.
        let pushesPerRun = clientCount * pushesEach
        var problems: [String] = []
        for s in setups {
            let accepted = s.clients.reduce(0) { $0 + $1.accepted }
            // The warm-up round's and the sampled round's included; the clients' first syncs are not counted.
            let pushes = pushesPerRun * (runs + 1 + (s.url == nil ? 0 : 1))
            if accepted != pushes { problems.append("\(s.name): \(accepted) operations accepted for \(pushes) pushes") }
        }
        let roundTrips = setups[0].clients.flatMap(\.roundTrips).sorted()
        let rtMedian = roundTrips.isEmpty ? 0 : roundTrips[roundTrips.count / 2]

        func timing(_ key: String) -> Timing { t.first { $0.name == key }! }
        func rate(_ key: String) -> Double { Double(pushesPerRun) / timing(key).median }
        /// Per push, milliseconds: medians over the timed runs (the warm-up round dropped).
        func split(_ key: String) -> String {
            let xs = Array((samples[key] ?? []).dropFirst())
            func med(_ f: (Sample) -> Double) -> Double { Timing.median(xs.map(f)) * 1000 / Double(pushesPerRun) }
            let wall = med(\.wall), client = med(\.client), relay = med(\.relay), db = med(\.database)
            let busy = (client + relay + db) / (wall * 2) * 100
            return String(format: "per sync, CPU: clients %.2f ms, relay %.2f ms, PostgreSQL %.2f ms (sum %.2f ms); "
                          + "wall time per sync %.2f ms (1 / throughput, 32 in flight); the two cores %.0f%% busy with these", client, relay, db,
                          client + relay + db, wall, busy)
        }
        let what = "\(clientCount) clients × \(pushesEach) syncs of one new stroke each"
        let check = problems.isEmpty ? "" : "; NOT EVERY PUSH ACCEPTED: " + problems.joined(separator: "; ")
        results.rows.append(Row(15, "pushes accepted per second, one relay on SQLite, \(what)", measured: rate("sqlite"),
                                unit: .opsPerSecond, baselineName: "—", baseline: nil, target: .report,
                                note: split("sqlite") + "; \(rtMedian) round trip(s) per sync (median)" + check,
                                measuredRuns: timing("sqlite").runs))
        results.rows.append(Row(15, "pushes accepted per second, one relay on PostgreSQL (pool 8)", measured: rate("postgres"),
                                unit: .opsPerSecond, baselineName: "one relay on SQLite", baseline: rate("sqlite"), target: .report,
                                note: split("postgres") + (waits["postgres"] ?? ""), measuredRuns: timing("postgres").runs, baselineRuns: timing("sqlite").runs))
        results.rows.append(Row(15, "pushes accepted per second, three relays on one PostgreSQL database (clients spread)",
                                measured: rate("postgres-3"), unit: .opsPerSecond, baselineName: "one relay on PostgreSQL",
                                baseline: rate("postgres"), target: .report,
                                note: split("postgres-3") + "; the issue does not expect ≥ 2× on 2 cores" + (waits["postgres-3"] ?? ""),
                                measuredRuns: timing("postgres-3").runs, baselineRuns: timing("postgres").runs))
        if setups.count == 5 {
            results.rows.append(Row(15, "where the time goes: one relay on SQLite, database on tmpfs (fsync free)",
                                    measured: rate("sqlite-tmpfs"), unit: .opsPerSecond, baselineName: "database on disk",
                                    baseline: rate("sqlite"), target: .report, note: split("sqlite-tmpfs"),
                                    measuredRuns: timing("sqlite-tmpfs").runs, baselineRuns: timing("sqlite").runs))
            results.rows.append(Row(15, "where the time goes: one relay on PostgreSQL, cluster on tmpfs (fsync free)",
                                    measured: rate("postgres-tmpfs"), unit: .opsPerSecond, baselineName: "cluster on disk",
                                    baseline: rate("postgres"), target: .report, note: split("postgres-tmpfs") + (waits["postgres-tmpfs"] ?? ""),
                                    measuredRuns: timing("postgres-tmpfs").runs, baselineRuns: timing("postgres").runs))
        }
        results.rows.append(Row(15, "where the time goes: syncs with nothing to push per second, one relay on SQLite",
                                measured: rate("sqlite idle"), unit: .opsPerSecond, baselineName: "pushes",
                                baseline: rate("sqlite"), target: .report,
                                note: "HTTP, token check, sync codec, one read of the clocks; no write. " + split("sqlite idle"),
                                measuredRuns: timing("sqlite idle").runs, baselineRuns: timing("sqlite").runs))
        results.rows.append(Row(15, "where the time goes: syncs with nothing to push per second, one relay on PostgreSQL",
                                measured: rate("postgres idle"), unit: .opsPerSecond, baselineName: "pushes",
                                baseline: rate("postgres"), target: .report, note: split("postgres idle"),
                                measuredRuns: timing("postgres idle").runs, baselineRuns: timing("postgres").runs))
    }
}
