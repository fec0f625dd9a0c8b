import Foundation

// lnote-reliability: writes RELIABILITY.md from the evidence the reliability runs left:
// `rows.jsonl` (one line per `ReliabilityReport.record` call of a test or of lnote-load),
// `commands.tsv` (family, the command that produced its rows) and the fuzzers' run files
// `Fuzz/runs/TARGET.json`. scripts/reliability.sh runs it; see that script for the modes.
// Mode `assembled` is for a report put together with `--render-only DIR` from goal-scale runs
// made one by one (DIR/mode holds "assembled"); DIR/provenance.txt, when present, says which
// runs, and its lines are printed under the header as they are.
//
//   lnote-reliability --rows DIR --fuzz-runs DIR --fuzz-targets "frame op …" --mode MODE
//                     --commit TEXT --out FILE [--since FILE]

struct Arguments {
    var rows = ""
    var fuzzRuns = "Fuzz/runs"
    var fuzzTargets: [String] = []
    var mode = "quick"
    var commit = "unknown"
    var out = "RELIABILITY.md"
    /// Fuzz runs written before this file was are another run's: shown as not run.
    var since: String?

    init(_ a: [String]) throws {
        var i = 0
        while i < a.count {
            guard i + 1 < a.count else { throw Failure("\(a[i]) needs a value") }
            let v = a[i + 1]
            switch a[i] {
            case "--rows": rows = v
            case "--fuzz-runs": fuzzRuns = v
            case "--fuzz-targets": fuzzTargets = v.split(separator: " ").map(String.init)
            case "--mode": mode = v
            case "--commit": commit = v
            case "--out": out = v
            case "--since": since = v
            default: throw Failure("unknown argument \(a[i])")
            }
            i += 2
        }
        guard !rows.isEmpty else { throw Failure("--rows DIR is required") }
    }
}

struct Failure: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}

/// The sum of a family's rows.
struct Tally {
    var cases = 0, lost = 0, corrupted = 0, crashed = 0, hung = 0
    /// detail → cases, in first-seen order.
    var details: [(String, Int)] = []
    var bad: Int { lost + corrupted + crashed + hung }

    mutating func add(_ row: [String: Any]) {
        func n(_ k: String) -> Int { (row[k] as? NSNumber)?.intValue ?? 0 }
        cases += n("cases"); lost += n("lost"); corrupted += n("corrupted"); crashed += n("crashed"); hung += n("hung")
        let d = row["detail"] as? String ?? ""
        if let i = details.firstIndex(where: { $0.0 == d }) { details[i].1 += n("cases") } else { details.append((d, n("cases"))) }
    }
}

/// One row of the table: a family, its goal and how to tell whether the goal was met.
struct Family {
    var name: String
    var what: String
    var goal: String
    var met: (Tally) -> Bool
}

let families: [Family] = [
    Family(name: "every-byte cuts", what: "snapshots, frame streams and page logs cut at every byte",
           goal: "every cut detected, nothing before it lost", met: { $0.cases > 0 && $0.bad == 0 }),
    Family(name: "bit flips", what: "flipped bits and changed bytes in snapshots, frames and logs",
           goal: "every flip detected, nothing else lost", met: { $0.cases > 0 && $0.bad == 0 }),
    Family(name: "syscall faults", what: "ENOSPC/EIO/short write/EINTR/crash at every syscall of save, append, compact",
           goal: "old or new content, never less", met: { $0.cases > 0 && $0.bad == 0 }),
    Family(name: "sigkill rounds", what: "writer, client and relay processes SIGKILLed, then reopened and checked",
           goal: "1,000 kills", met: { $0.cases >= 1000 && $0.bad == 0 }),
    Family(name: "convergence seeds", what: "random and hostile merge schedules; scenarios over memory, folder and HTTP",
           goal: "10,000 seeds", met: { $0.cases >= 10_000 && $0.bad == 0 }),
    Family(name: "abuse", what: "hostile requests to the peer server and the relay",
           goal: "every case refused cleanly", met: { $0.cases > 0 && $0.bad == 0 }),
    Family(name: "files", what: "hostile files in notebook folders",
           goal: "every case refused cleanly", met: { $0.cases > 0 && $0.bad == 0 }),
    Family(name: "full disk", what: "writes on a full file system",
           goal: "nothing stored lost or altered", met: { $0.cases > 0 && $0.bad == 0 }),
    Family(name: "load with restarts", what: "clients syncing with an lnote relay that is SIGKILLed and restarted",
           goal: "32 clients × 60 s", met: { t in
               t.bad == 0 && t.details.contains { d, _ in
                   let parts = d.split(separator: " ")
                   guard parts.count >= 4, let k = Int(parts[0]), parts[1] == "clients", let s = Int(parts[3]) else { return false }
                   return k >= 32 && s >= 60
               }
           }),
]

func number(_ n: Int) -> String {
    let f = NumberFormatter()
    f.numberStyle = .decimal
    f.groupingSeparator = ","
    f.usesGroupingSeparator = true
    return f.string(from: NSNumber(value: n)) ?? String(n)
}

func cell(_ s: String) -> String { s.replacingOccurrences(of: "|", with: "\\|").replacingOccurrences(of: "\n", with: " ") }

do {
    let args = try Arguments(Array(CommandLine.arguments.dropFirst()))
    // Rows.
    var tallies: [String: Tally] = [:]
    var unknown: [String] = []
    let rowsPath = args.rows + "/rows.jsonl"
    let text = (try? String(contentsOfFile: rowsPath, encoding: .utf8)) ?? ""
    for (i, line) in text.split(separator: "\n").enumerated() {
        guard let obj = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
              let family = obj["family"] as? String else {
            throw Failure("\(rowsPath): line \(i + 1) is not a row: \(line.prefix(120))")
        }
        tallies[family, default: Tally()].add(obj)
        if !families.contains(where: { $0.name == family }) && !unknown.contains(family) && family != "fuzz" { unknown.append(family) }
    }
    // Commands.
    var commands: [String: [String]] = [:]
    let cmdText = (try? String(contentsOfFile: args.rows + "/commands.tsv", encoding: .utf8)) ?? ""
    for line in cmdText.split(separator: "\n") {
        let f = line.split(separator: "\t", maxSplits: 1).map(String.init)
        if f.count == 2, !(commands[f[0]] ?? []).contains(f[1]) { commands[f[0], default: []].append(f[1]) }
    }
    // Fuzz runs.
    struct FuzzRun { var target: String; var seconds: Double; var execs: Int; var crashes: Int; var commit: String; var date: String }
    var fuzz: [String: FuzzRun] = [:]
    var stale: [String] = []
    let fm = FileManager.default
    func modified(_ path: String) -> Date? { (try? fm.attributesOfItem(atPath: path))?[.modificationDate] as? Date }
    let since = args.since.flatMap(modified)
    for name in ((try? fm.contentsOfDirectory(atPath: args.fuzzRuns)) ?? []).sorted() where name.hasSuffix(".json") {
        let path = args.fuzzRuns + "/" + name
        if let since, let m = modified(path), m < since {
            stale.append(String(name.dropLast(5)))
            continue
        }
        guard let data = fm.contents(atPath: path),
              let o = try? JSONSerialization.jsonObject(with: data) as? [String: Any], let target = o["target"] as? String else {
            throw Failure("\(path) is not a fuzz run ({\"target\",\"seconds\",\"execs\",\"crashes\",…})")
        }
        fuzz[target] = FuzzRun(target: target, seconds: (o["seconds"] as? NSNumber)?.doubleValue ?? 0,
                               execs: (o["execs"] as? NSNumber)?.intValue ?? 0, crashes: (o["crashes"] as? NSNumber)?.intValue ?? 0,
                               commit: "\(o["commit"] ?? "?")", date: "\(o["date"] ?? "?")")
    }
    let targets = args.fuzzTargets + fuzz.keys.sorted().filter { !args.fuzzTargets.contains($0) }

    let now = ISO8601DateFormatter().string(from: Date())
    let modeText: String
    switch args.mode {
    case "full": modeText = "full (the goal scale, one run of `scripts/reliability.sh`)"
    case "assembled": modeText = "assembled (goal-scale runs made one by one, each named below with its command, rendered with `scripts/reliability.sh --render-only DIR`)"
    default: modeText = "\(args.mode) (a small version of every row: goals are met only by the full run, `scripts/reliability.sh`)"
    }
    let provenanceText = (try? String(contentsOfFile: args.rows + "/provenance.txt", encoding: .utf8)) ?? ""
    let provenance = provenanceText.split(separator: "\n", omittingEmptySubsequences: true)
        .map { "\n- " + $0 }.joined()
    var md = """
        # Reliability

        What the fault, abuse, convergence, fuzzing and load runs tried and how many cases ended badly.
        Generated by `scripts/reliability.sh\(args.mode == "full" ? "" : args.mode == "assembled" ? " --render-only DIR" : " --\(args.mode)")`; do not edit by hand (run the script again).

        - commit: \(args.commit)
        - date: \(now)
        - machine: \(ProcessInfo.processInfo.activeProcessorCount) cores (nproc), \(ProcessInfo.processInfo.operatingSystemVersionString)
        - mode: \(modeText)\(provenance)

        A case is *lost* when acknowledged data was missing afterwards, *corrupted* when a file or state
        could not be explained by the operations given (damage accepted, replicas diverged, something
        no one made), *crashed* when a process died of a signal or a trap, *hung* when it did not finish
        within its bound. The counts come from what each test checked (`ReliabilityReport.record`).

        | Family | Cases tried | Lost | Corrupted | Crashed | Hung | Goal | Goal met |
        |---|---:|---:|---:|---:|---:|---|---|

        """
    for f in families {
        guard let t = tallies[f.name] else {
            md += "| \(f.name) | not run | | | | | \(f.goal) | not run |\n"
            continue
        }
        let met = f.met(t) ? "yes" : (t.bad > 0 ? "**no: \(number(t.bad)) bad cases**" : "no (scale)")
        md += "| \(f.name) | \(number(t.cases)) | \(t.lost) | \(t.corrupted) | \(t.crashed) | \(t.hung) | \(f.goal) | \(met) |\n"
    }
    for name in unknown.sorted() {
        let t = tallies[name]!
        md += "| \(cell(name)) | \(number(t.cases)) | \(t.lost) | \(t.corrupted) | \(t.crashed) | \(t.hung) | — | \(t.bad == 0 ? "none bad" : "**no**") |\n"
    }
    for target in targets {
        guard let r = fuzz[target] else {
            md += "| fuzz: \(cell(target)) | not run | | | | | 10 min | not run |\n"
            continue
        }
        let met = r.crashes > 0 ? "**no: \(r.crashes) crashes**" : (r.seconds >= 600 ? "yes" : "no (\(Int(r.seconds)) s)")
        md += "| fuzz: \(cell(target)) | \(number(r.execs)) execs in \(Int(r.seconds)) s | | | \(r.crashes) | | 10 min | \(met) |\n"
    }
    if let t = tallies["fuzz"] {
        md += "| fuzz (recorded by tests) | \(number(t.cases)) | \(t.lost) | \(t.corrupted) | \(t.crashed) | \(t.hung) | — | \(t.bad == 0 ? "none bad" : "**no**") |\n"
    }

    md += "\n## How each row was produced\n\n"
    for name in families.map(\.name) + unknown.sorted() + (tallies["fuzz"] != nil ? ["fuzz"] : []) {
        let what = families.first { $0.name == name }?.what
        md += "- **\(name)**\(what.map { ": \($0)" } ?? "")\n"
        for c in commands[name] ?? [] { md += "  - command: `\(c)`\n" }
        guard let t = tallies[name] else {
            md += "  - not run: no test recorded this family in this run\n"
            continue
        }
        for (d, n) in t.details.prefix(12) { md += "  - \(number(n)) case\(n == 1 ? "" : "s"): \(cell(d))\n" }
        if t.details.count > 12 { md += "  - … \(t.details.count - 12) more\n" }
    }
    md += "- **fuzz**: libFuzzer with AddressSanitizer, one decoder (or the merge) per target, from `\(args.fuzzRuns)/TARGET.json`\n"
    for c in commands["fuzz"] ?? [] { md += "  - command: `\(c)`\n" }
    for target in targets {
        if let r = fuzz[target] {
            md += "  - \(target): \(Int(r.seconds)) s, \(number(r.execs)) execs, \(r.crashes) crashes (commit \(r.commit), \(r.date))\n"
        } else {
            md += "  - \(target): not run" + (stale.contains(target) ? " in this run (\(args.fuzzRuns)/\(target).json is older)\n"
                                                                 : " (no \(args.fuzzRuns)/\(target).json)\n")
        }
    }
    try md.write(toFile: args.out, atomically: true, encoding: .utf8)
    print("lnote-reliability: wrote \(args.out) (\(tallies.values.reduce(0) { $0 + $1.cases }) cases in \(tallies.count) families, \(fuzz.count) fuzz runs)")
} catch {
    FileHandle.standardError.write(Data("lnote-reliability: \(error)\n".utf8))
    exit(1)
}
