import Foundation
import LnoteModel
import LnoteScenario

extension CommandTable {
    static let replay = Command(
        name: "replay",
        synopsis: "lnote replay FILE.json... [--transport memory|folder|http] [--seed N]",
        summary: "Run conflict scenarios with real replicas and check their expectations",
        details: """
        Exit status: 0 when every expectation holds, 1 with the differences when one does not,
        2 when a scenario file is malformed (the message names the JSON path) or --transport is
        unknown; a scenario file that does not exist is a failure (1), not malformed.
        The format is specified in Protocol/scenarios.md. --seed sets the order of "shuffled"
        deliveries (default 1).
        """,
        options: ["transport", "seed"],
        run: { args, console in
            guard !args.positionals.isEmpty else { throw Arguments.UsageError(message: "expected FILE.json") }
            let name = args.option("transport") ?? "memory"
            guard ScenarioTransports.names.contains(name) else {
                throw Arguments.UsageError(message: "unknown --transport \"\(name)\" (one of: \(ScenarioTransports.names.joined(separator: ", ")))")
            }
            let seed = UInt64(bitPattern: Int64(try args.int("seed") ?? 1))
            var worst = Exit.ok
            for file in args.positionals {
                let scenario: Scenario
                guard FileManager.default.fileExists(atPath: file) else {
                    console.err("lnote replay: no scenario file \(file)")
                    worst = max(worst, Exit.failure)
                    continue
                }
                do { scenario = try Scenario.load(contentsOf: URL(fileURLWithPath: file)) } catch let e as ScenarioError {
                    console.err("lnote replay: malformed scenario: \(e)")
                    worst = max(worst, Exit.usage)
                    continue
                }
                let transport = try ScenarioTransports.make(name)
                let result: ScenarioResult
                do {
                    result = try await ScenarioRunner(transport: transport, seed: seed).run(scenario)
                    try await transport.close()
                } catch let e as ScenarioError {
                    try? await transport.close()
                    console.err("lnote replay: malformed scenario: \(file): \(e)")
                    worst = max(worst, Exit.usage)
                    continue
                }
                if result.passed {
                    console.out("PASS \(scenario.name) [\(result.transport)]")
                } else {
                    console.out("FAIL \(scenario.name) [\(result.transport)]")
                    for f in result.failures { console.out("  \(f)") }
                    worst = max(worst, Exit.failure)
                }
            }
            return worst
        })
}
