#if canImport(Glibc)
import Glibc
#endif
import Foundation
import LnoteModel
import LnoteTestSupport

// lnote-load: K clients sync random edits with one `lnote relay` (or several on one PostgreSQL
// database) that is SIGKILLed and restarted; see `LoadOptions.usage` and scripts/load.sh.

func err(_ s: String) { FileHandle.standardError.write(Data((s + "\n").utf8)) }
/// Standard output unbuffered (`print` holds lines back when the output is a pipe, as in CI).
func say(_ s: String) { FileHandle.standardOutput.write(Data((s + "\n").utf8)) }

let options: LoadOptions
do {
    options = try LoadOptions(Array(CommandLine.arguments.dropFirst()))
} catch let e as LoadOptions.UsageError {
    if e.description.isEmpty {
        say(LoadOptions.usage)
        exit(0)
    }
    err("lnote-load: \(e.description)\n" + LoadOptions.usage)
    exit(2)
}

/// The `lnote` binary: --lnote, or the one built beside this program.
let lnote = options.lnote ?? URL(fileURLWithPath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
                                     ?? CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("lnote").path
guard FileManager.default.isExecutableFile(atPath: lnote) else {
    err("lnote-load: no lnote binary at \(lnote): build it (swift build --product lnote) or pass --lnote PATH")
    exit(2)
}
let dir = FileManager.default.temporaryDirectory.appendingPathComponent("lnote-load-\(options.seed)-\(UUID().uuidString.prefix(8))").path
try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
let rerun = options.rerun
let relaysSaid = options.postgres
    ? "\(options.relays) relay process\(options.relays == 1 ? "" : "es") on one PostgreSQL database\(options.dbRestart ? " (restarted once)" : "")"
    : "one relay on SQLite"
say("lnote-load: seed \(options.seed): \(options.clients) clients, \(options.seconds) s, \(relaysSaid), \(options.kills) kills of a relay; in \(dir)")
say("lnote-load: rerun with: \(rerun)")

// The watchdog: a run that has not finished well after its length is a hang (the process
// ends with status 1 and says so). It is a thread of its own, so a starved pool cannot stop it.
let bound = Double(options.seconds) + 180 + Double(options.clients) * 5 + Double(options.kills) * 20
    + (options.postgres ? 60 : 0) + (options.dbRestart ? 60 : 0)
let watchdog = Thread {
    Thread.sleep(forTimeInterval: bound)
    say("lnote-load: HANG: the run did not finish within \(Int(bound)) s (seed \(options.seed)); files kept in \(dir)")
    ReliabilityReport.record(family: "load with restarts", detail: "\(options.clients) clients × \(options.seconds) s, seed \(options.seed): hung",
                             cases: 1, hung: 1)
    exit(1)
}
watchdog.start()

func percentile(_ sorted: [Double], _ p: Double) -> Double {
    guard !sorted.isEmpty else { return 0 }
    let rank = Int((p / 100 * Double(sorted.count)).rounded(.up))
    return sorted[min(max(rank, 1), sorted.count) - 1]
}
func ms(_ v: Double) -> String { String(format: "%.1f", v) }

let outcome: LoadRun.Outcome
let ledger: LoadLedger
do {
    (outcome, ledger) = try await LoadRun(options: options, lnote: lnote, dir: dir).run()
} catch {
    say("lnote-load: FAILED: the run could not go on: \(error) (seed \(options.seed)); files kept in \(dir)")
    ReliabilityReport.record(family: "load with restarts", detail: "\(options.clients) clients × \(options.seconds) s, seed \(options.seed): \(error)",
                             cases: 1, corrupted: 1)
    exit(1)
}
let s = ledger.state.withLock { $0 }
let lat = s.latencies.sorted()
let latUp = s.latenciesUp.sorted()
func percentiles(_ v: [Double]) -> String {
    "p50 \(ms(percentile(v, 50))) p90 \(ms(percentile(v, 90))) p99 \(ms(percentile(v, 99))) max \(ms(v.last ?? 0))"
}
say("""
    rounds \(s.rounds): \(lat.count) succeeded, \(s.failuresWhileDown) failed while the relay was down or killed (expected), \
    \(s.failuresWhileUp.count) failed while it was up
    kills \(outcome.kills), relay crashes \(outcome.crashes.count), edits \(s.edits), convergence passes \(outcome.passes)\(options.postgres ? """

    PostgreSQL: \(options.relays) relay processes, successful rounds per relay \(s.roundsPerRelay), database restarts \(outcome.databaseRestarts)
    """ : "")
    operations made \(outcome.made), acknowledged \(outcome.acked), on the relay \(outcome.relayOps); \
    pushed \(s.opsSent) in successful rounds, of which the relay already held \(s.opsSent - s.opsAccepted)
    lost \(outcome.lost) (at kills \(outcome.lostAtKills)), unexpected \(outcome.unexpected), divergent clients \(outcome.divergent), \
    corrupted \(outcome.corrupted.count), hung \(outcome.hung.count)
    sync latency ms (successful rounds): \(percentiles(lat))
    sync latency ms (\(latUp.count) successful rounds the relay was up throughout): \(percentiles(latUp))
    """)
// What the convergence passes moved, when it took more than the two passes a quiet run needs.
if outcome.passes > 2 { for line in outcome.passMoves { say("  convergence \(line)") } }
for line in outcome.losses + outcome.problems + outcome.corrupted + outcome.crashes + outcome.hung { say("  - \(line)") }

// One case per kill and database restart (acknowledged operations checked in the database
// after it) and one for the final check (every client and the relay after convergence).
ReliabilityReport.record(
    family: "load with restarts",
    detail: "\(options.clients) clients × \(options.seconds) s"
        + (options.postgres ? ", \(options.relays) relay processes on PostgreSQL" : "")
        + ", \(outcome.kills) kills" + (options.dbRestart ? ", \(outcome.databaseRestarts) database restart" : "")
        + ", \(s.rounds) rounds, seed \(options.seed)",
    cases: outcome.kills + outcome.databaseRestarts + 1,
    lost: outcome.killsWithLoss + (outcome.lost > 0 ? 1 : 0),
    corrupted: (outcome.unexpected > 0 || outcome.divergent > 0 || !outcome.corrupted.isEmpty || !outcome.problems.isEmpty) ? 1 : 0,
    crashed: outcome.crashes.count,
    hung: outcome.hung.isEmpty ? 0 : 1)

if outcome.failed {
    say("lnote-load: FAILED (seed \(options.seed)); rerun with: \(rerun); files kept in \(dir)")
    exit(1)
}
if !options.keep { try? FileManager.default.removeItem(atPath: dir) }
say("lnote-load: OK (seed \(options.seed))")
exit(0)
