#if canImport(Glibc)
import Glibc
#endif
import Foundation
import LnoteModel
import LnoteStore
import LnoteSync
import LnoteTestSupport

/// One run of the load: setup, the edit phase with kills, convergence, then the checks.
struct LoadRun {
    let options: LoadOptions
    let lnote: String
    let dir: String

    /// What the run found; `failed` is true when anything here is not zero or empty.
    struct Outcome {
        var lost: UInt64 = 0
        var lostAtKills: UInt64 = 0
        var killsWithLoss = 0
        var unexpected: UInt64 = 0
        var divergent = 0
        var corrupted: [String] = []
        var crashes: [String] = []
        var hung: [String] = []
        var problems: [String] = []
        /// What was lost, where (the counts are in `lost` and `lostAtKills`).
        var losses: [String] = []
        var kills = 0
        var databaseRestarts = 0
        var made: UInt64 = 0
        var acked: UInt64 = 0
        var relayOps = 0
        var passes = 0
        /// What each convergence pass moved, all clients together.
        var passMoves: [String] = []

        var failed: Bool {
            lost + lostAtKills + unexpected > 0 || divergent > 0 || !corrupted.isEmpty || !crashes.isEmpty
                || !hung.isEmpty || !problems.isEmpty
        }
    }

    func run() async throws -> (Outcome, LoadLedger) {
        let K = options.clients, R = options.relays
        var rng = SplitMix64(seed: options.seed)
        // The database: an SQLite file in the run's directory, or a throwaway PostgreSQL
        // cluster (stopped and removed when this process exits, also when it dies).
        let database: LoadDatabase
        let cluster: PostgresCluster?
        if options.postgres {
            let c = try await PostgresCluster.shared()
            cluster = c
            database = .postgres(url: c.url)
            _ = try await Tool.output(lnote, ["relay", "migrate", "--postgres", c.url])
        } else {
            cluster = nil
            database = .sqlite(path: dir + "/relay.sqlite")
        }
        let store = database.relayArguments
        let notebook = try await Tool.output(lnote, ["relay", "notebook", "create"] + store)
        var tokens: [String] = []
        for i in 0..<K {
            tokens.append(try await Tool.output(lnote, ["relay", "token", "create"] + store + ["--notebook", notebook,
                                                        "--device", "client-\(i)"]))
        }
        let relays = (0..<R).map { RelayProcess(lnote: lnote, store: store, dir: dir, name: R == 1 ? "relay" : "relay-\($0)") }
        let ledger = LoadLedger(clients: K, relays: R)
        var outcome = Outcome()
        defer { for r in relays { r.kill(SIGKILL) } }
        for (i, relay) in relays.enumerated() {
            try await relay.start()
            ledger.relayServing(i)
        }
        let urls = relays.map { $0.baseURL + "/v1/notebooks/" + notebook }

        var clients: [LoadClient] = []
        for i in 0..<K {
            clients.append(try await LoadClient(index: i, folder: dir + "/client-\(i)", urls: urls, token: tokens[i],
                                                seed: rng.next()))
        }
        let start = ContinuousClock.now
        let end = start + .seconds(options.seconds)
        // Kill moments spread over the edit phase (5 %…90 % of it), each followed by a downtime;
        // with several relays, each kill hits one of them (one at a time). The database restart,
        // if any, somewhere in the middle (30 %…70 %), with a downtime of its own.
        let span = Double(options.seconds)
        let killTimes = (0..<options.kills).map { _ in rng.double(0.05 * span, 0.9 * span) }.sorted()
        let downtimes = (0..<options.kills).map { _ in rng.int(in: 20...1500) }
        let victims = (0..<options.kills).map { _ in R == 1 ? 0 : rng.int(in: 0...(R - 1)) }
        var events: [(at: Double, event: FaultEvent)] = (0..<options.kills).map {
            (killTimes[$0], .kill(relay: victims[$0], downtime: downtimes[$0]))
        }
        if options.dbRestart {
            events.append((rng.double(0.3 * span, 0.7 * span), .databaseRestart(downtime: rng.int(in: 200...1500))))
            events.sort { $0.at < $1.at }
        }
        let injectLoss = options.injectLoss

        let killer = Task { () -> Faults in
            var f = Faults()
            var next = 0
            loop: while ContinuousClock.now < end || next < events.count {
                for (i, relay) in relays.enumerated() where !relay.isRunning {
                    // Not a kill of ours: the relay ended by itself.
                    f.crashes.append("\(relay.name) ended by itself (\(relay.ending ?? "?")): \(relay.tail())")
                    ledger.relayKilled(i)
                    do { try await relay.start(); ledger.relayServing(i) } catch {
                        f.problems.append("\(relay.name) could not be restarted after it ended: \(error)")
                        break loop
                    }
                }
                // --inject-loss needs an acknowledged operation to delete: its first kill waits for one.
                let waitForAck = injectLoss && f.kills == 0 && ledger.ackedUnion.count == 0
                guard next < events.count, !waitForAck,
                      ContinuousClock.now >= start + .milliseconds(Int64(events[next].at * 1000)) else {
                    try? await Task.sleep(for: .milliseconds(20))
                    continue
                }
                // Everything acknowledged before the fault must be in the database after it.
                let acked = ledger.ackedUnion
                switch events[next].event {
                case .kill(let i, let downtime):
                    let relay = relays[i]
                    relay.kill(SIGKILL)
                    ledger.relayKilled(i)
                    guard await relay.waitForExit() else {
                        f.problems.append("\(relay.name) did not end 30 s after SIGKILL")
                        break loop
                    }
                    f.kills += 1
                    let what = "kill \(f.kills) (\(relay.name))"
                    if injectLoss && f.kills == 1 {
                        do {
                            if let (log, op) = try database.deleteOne(of: acked) {
                                FileHandle.standardOutput.write(Data("lnote-load: --inject-loss: deleted acknowledged operation \(op) of \(log) from the relay's database\n".utf8))
                            }
                        } catch {
                            f.problems.append("--inject-loss failed: \(error)")
                        }
                    }
                    f.check(acked, database, what)
                    try? await Task.sleep(for: .milliseconds(downtime))
                    do { try await relay.start(); ledger.relayServing(i) } catch {
                        f.problems.append("\(relay.name) could not be restarted after \(what): \(error)")
                        break loop
                    }
                case .databaseRestart(let downtime):
                    guard let cluster else { break }  // --db-restart needs --postgres
                    // As `pg_ctl restart -m fast`, with a pause between the stop and the start
                    // so that rounds meet a database that is away.
                    ledger.databaseStopped()
                    do {
                        try await cluster.stop()
                        try? await Task.sleep(for: .milliseconds(downtime))
                        try await cluster.start()
                    } catch {
                        f.problems.append("PostgreSQL could not be restarted: \(error)")
                        break loop
                    }
                    ledger.databaseServing()
                    f.databaseRestarts += 1
                    let what = "database restart \(f.databaseRestarts)"
                    f.check(acked, database, what)
                }
                next += 1
            }
            return f
        }

        // The edit phase: each client edits, pauses, syncs, until the end.
        await withTaskGroup(of: Void.self) { group in
            for c in clients {
                group.addTask {
                    while ContinuousClock.now < end {
                        do {
                            for _ in 0..<c.editsPerRound() { try await c.edit() }
                            ledger.recordMade(try await c.ownOperations(), client: c.index)
                        } catch {
                            ledger.recordEditFailure("client \(c.index): \(error)")
                            return
                        }
                        try? await c.pause(10...300)
                        await Self.round(c, relay: c.pickRelay(), ledger)
                    }
                }
            }
        }
        let k = await killer.value
        outcome.kills = k.kills
        outcome.databaseRestarts = k.databaseRestarts
        outcome.lostAtKills = k.lostAtKills
        outcome.killsWithLoss = k.checksWithLoss
        outcome.crashes += k.crashes
        outcome.problems += k.problems
        outcome.losses += k.losses
        outcome.problems += ledger.state.withLock { $0.editFailures }
        if let cluster, !cluster.isRunning {
            do { try await cluster.start(); ledger.databaseServing() } catch { outcome.problems.append("PostgreSQL did not restart: \(error)") }
        }
        for (i, relay) in relays.enumerated() where !relay.isRunning {
            do { try await relay.start(); ledger.relayServing(i) } catch { outcome.problems.append("\(relay.name) did not restart: \(error)") }
        }

        // Convergence: the relays are up for good; every client syncs (each round through a
        // relay chosen at random) until a whole pass moves nothing.
        var settled = false
        for pass in 1...12 where !settled && relays.allSatisfy(\.isRunning) {
            outcome.passes = pass
            var moved = false
            var sent = 0, accepted = 0, received = 0, assets = 0, checkpoints = 0, failed = 0
            for c in clients {
                var report: SyncReport?
                for attempt in 1...3 where report == nil {
                    report = await Self.round(c, relay: c.pickRelay(), ledger)
                    if report == nil && attempt < 3 { try? await Task.sleep(for: .milliseconds(200)) }
                }
                if let report, LoadClient.moved(report) { moved = true }
                if let r = report {
                    sent += r.opsSent; accepted += r.opsAccepted
                    received += r.opsReceived
                    assets += r.assetsSent + r.assetsReceived
                    checkpoints += r.checkpointsInstalled
                } else {
                    failed += 1
                }
            }
            outcome.passMoves.append("pass \(pass): ops sent \(sent) (accepted \(accepted)), received \(received), assets \(assets), "
                                     + "checkpoints installed \(checkpoints), clients failed \(failed)")
            settled = !moved
        }
        if !settled { outcome.hung.append("clients still moved operations after \(outcome.passes) passes of syncs") }

        // The checks.
        var made = OpSet(), acked = OpSet()
        var canonical: [String] = []
        for c in clients {
            let own = try await c.ownOperations()
            let recorded = ledger.state.withLock { $0.made[c.index] }
            if own != recorded {
                outcome.problems.append("client \(c.index): its logs hold own operations \(own.count), its edits made \(recorded.count)")
            }
            made.merge(own)
            acked.merge(ledger.state.withLock { $0.acked[c.index] })
        }
        outcome.made = made.count
        outcome.acked = acked.count
        for c in clients {
            let held = OpSet(try await c.notebook.logClocks())
            let lost = acked.missing(from: held)
            if lost > 0 {
                outcome.lost += lost
                outcome.losses.append("client \(c.index) lacks \(lost) acknowledged operations: \(acked.describeMissing(from: held))")
            }
            let extra = held.missing(from: made)
            if extra > 0 {
                outcome.unexpected += extra
                outcome.problems.append("client \(c.index) holds \(extra) operations no client made: \(held.describeMissing(from: made))")
            }
            let missing = try await c.notebook.missingOperations()
            if !missing.isEmpty { outcome.corrupted.append("client \(c.index): \(missing.count) logs lack operations their state holds") }
            let verify = try await c.notebook.verify()
            if !verify.isClean { outcome.corrupted.append("client \(c.index): verify: \(verify.problems.prefix(3).map(\.description))") }
            canonical.append(try await Self.canonicalJSON(c.notebook))
        }
        for (i, text) in canonical.enumerated() where text != canonical[0] {
            outcome.divergent += 1
            outcome.problems.append("client \(i)'s canonical JSON differs from client 0's (\(text.utf8.count) vs \(canonical[0].utf8.count) bytes)")
        }
        for c in clients { try await c.close() }

        // The relays: stopped cleanly (SIGTERM, exit 0), then the database read.
        for relay in relays { relay.kill(SIGTERM) }
        for relay in relays {
            if !(await relay.waitForExit()) {
                outcome.hung.append("\(relay.name) did not stop within 30 s of SIGTERM")
                relay.kill(SIGKILL)
                _ = await relay.waitForExit()
            } else if relay.ending != "exit 0" {
                outcome.crashes.append("\(relay.name) ended with \(relay.ending ?? "?") on SIGTERM: \(relay.tail())")
            }
        }
        let contents = try database.contents()
        outcome.relayOps = contents.rows
        let relayLost = acked.missing(from: contents.held)
        if relayLost > 0 {
            outcome.lost += relayLost
            outcome.losses.append("the relay lacks \(relayLost) acknowledged operations: \(acked.describeMissing(from: contents.held))")
        }
        let relayExtra = contents.unexpected(given: made)
        if relayExtra > 0 {
            outcome.unexpected += UInt64(relayExtra)
            outcome.problems.append("the relay holds \(relayExtra) operations no client made")
        }
        // Everything made reached the relay once the clients settled (not only what was acknowledged).
        let notRelayed = made.missing(from: contents.held)
        if notRelayed > 0 {
            outcome.problems.append("\(notRelayed) operations made never reached the relay: \(made.describeMissing(from: contents.held))")
        }
        let s = ledger.state.withLock { $0 }
        outcome.problems += s.failuresWhileUp.prefix(5).map { "a sync failed while the relay was up: \($0)" }
        if s.failuresWhileUp.count > 5 { outcome.problems.append("… \(s.failuresWhileUp.count - 5) more sync failures while up") }
        outcome.corrupted += s.anomalies
        if s.slowRounds > 0 { outcome.hung.append("\(s.slowRounds) sync rounds took longer than \(LoadLedger.roundBound)") }
        return (outcome, ledger)
    }

    /// One sync round through relay process `relay`, recorded in the ledger; the client's own
    /// operations before it are what it pushes. Returns the sync's report, nil when the round failed.
    @discardableResult
    static func round(_ c: LoadClient, relay: Int, _ ledger: LoadLedger) async -> SyncReport? {
        let before = ledger.serving(relay)
        let t0 = ContinuousClock.now
        do {
            let pushed = try await c.ownOperations()
            let r = try await c.sync(through: relay)
            ledger.recordRound(client: c.index, relay: relay, started: before, duration: ContinuousClock.now - t0,
                               .ok(pushed: pushed, anomaly: LoadClient.anomaly(r), sent: r.opsSent, accepted: r.opsAccepted))
            return r
        } catch {
            ledger.recordRound(client: c.index, relay: relay, started: before, duration: ContinuousClock.now - t0,
                               .failed("relay \(relay): \(error)"))
            return nil
        }
    }

    /// The canonical JSON of every document (as `lnote show --json` prints one), in id order.
    static func canonicalJSON(_ nb: Notebook) async throws -> String {
        var out = ""
        for id in try await nb.documentIDs() {
            let d = try await nb.openDocument(id)
            var states: [PageID: PageState] = [:]
            for p in await d.state.pages { states[p.id] = try await d.pageState(p.id) }
            out += await d.state.canonicalJSON(pages: states, style: .compact) + "\n"
        }
        return out
    }
}

/// A fault the run injects at a moment of its edit phase.
enum FaultEvent {
    /// SIGKILL relay process `relay`, check the database, restart it after `downtime` ms.
    case kill(relay: Int, downtime: Int)
    /// Stop PostgreSQL (fast), start it again after `downtime` ms, check the database.
    case databaseRestart(downtime: Int)
}

/// What the fault controller saw.
struct Faults {
    var kills = 0
    var databaseRestarts = 0
    var lostAtKills: UInt64 = 0
    var checksWithLoss = 0
    var crashes: [String] = []
    var problems: [String] = []
    var losses: [String] = []

    /// After a fault: everything `acked` before it must be in the database.
    mutating func check(_ acked: OpSet, _ database: LoadDatabase, _ what: String) {
        do {
            let held = try database.contents().held
            let lost = acked.missing(from: held)
            if lost > 0 {
                lostAtKills += lost
                checksWithLoss += 1
                losses.append("\(what): the relay's database lacks \(lost) acknowledged operations: "
                              + acked.describeMissing(from: held))
            }
        } catch {
            problems.append("\(what): the relay's database could not be read: \(error)")
        }
    }
}

/// Running `lnote` subcommands to completion (setup only).
enum Tool {
    static func output(_ lnote: String, _ arguments: [String]) async throws -> String {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: lnote)
        p.arguments = arguments
        let out = Pipe(), err = Pipe()
        p.standardOutput = out
        p.standardError = err
        p.standardInput = FileHandle.nullDevice
        try p.run()
        // Small outputs: reading to the end returns when the child closes its end.
        let o = out.fileHandleForReading.readDataToEndOfFile()
        let e = err.fileHandleForReading.readDataToEndOfFile()
        while p.isRunning { try await Task.sleep(for: .milliseconds(5)) }
        guard p.terminationReason == .exit, p.terminationStatus == 0 else {
            throw LnoteError(.invalidState, "lnote \(arguments.prefix(3).joined(separator: " ")) failed: "
                             + String(decoding: e, as: UTF8.self))
        }
        return String(decoding: o, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
