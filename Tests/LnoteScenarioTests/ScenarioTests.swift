import Foundation
import Testing
import LnoteTestSupport
import LnoteModel
@testable import LnoteScenario

/// The scenario files shipped in Tests/Scenarios, run through every transport.
enum ScenarioFiles {
    static let directory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Scenarios")

    static var all: [URL] {
        ((try? FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)) ?? [])
            .filter { $0.pathExtension == "json" }
            .sorted { $0.lastPathComponent < $1.lastPathComponent }
    }

    static var names: [String] { all.map(\.lastPathComponent) }
}

@Suite struct ScenarioTests {
    @Test func atLeastThirtyScenariosShip() {
        #expect(ScenarioFiles.all.count >= 30)
    }

    @Test(arguments: ScenarioFiles.names)
    func memory(_ file: String) async throws {
        let scenario = try Scenario.load(contentsOf: ScenarioFiles.directory.appendingPathComponent(file))
        let result = try await ScenarioRunner(transport: MemoryTransport()).run(scenario)
        #expect(result.passed, "\(file): \(result.failures.joined(separator: "\n"))")
        ReliabilityReport.record(family: "convergence seeds", detail: "scenarios over the memory transport (ScenarioTests)",
                                 cases: 1, corrupted: result.passed ? 0 : 1)
    }

    @Test(arguments: ScenarioFiles.names)
    func folder(_ file: String) async throws {
        let scenario = try Scenario.load(contentsOf: ScenarioFiles.directory.appendingPathComponent(file))
        let transport = try FolderTransport()
        let result = try await ScenarioRunner(transport: transport).run(scenario)
        try await transport.close()
        #expect(result.passed, "\(file): \(result.failures.joined(separator: "\n"))")
        ReliabilityReport.record(family: "convergence seeds", detail: "scenarios over the folder transport (ScenarioTests)",
                                 cases: 1, corrupted: result.passed ? 0 : 1)
    }

    @Test(arguments: ScenarioFiles.names)
    func http(_ file: String) async throws {
        let scenario = try Scenario.load(contentsOf: ScenarioFiles.directory.appendingPathComponent(file))
        let transport = try HTTPTransport()
        let result = try await ScenarioRunner(transport: transport).run(scenario)
        try await transport.close()
        #expect(result.passed, "\(file): \(result.failures.joined(separator: "\n"))")
        ReliabilityReport.record(family: "convergence seeds", detail: "scenarios over the HTTP transport (ScenarioTests)",
                                 cases: 1, corrupted: result.passed ? 0 : 1)
    }

    /// Shuffled deliveries use a seed: every seed must give the expected outcome.
    @Test func shuffledScenariosHoldForManySeeds() async throws {
        var cases = 0, failed = 0
        for file in ScenarioFiles.names where (try? String(contentsOf: ScenarioFiles.directory.appendingPathComponent(file), encoding: .utf8))?.contains("shuffled") == true {
            let scenario = try Scenario.load(contentsOf: ScenarioFiles.directory.appendingPathComponent(file))
            for seed in UInt64(1)...20 {
                let result = try await ScenarioRunner(transport: MemoryTransport(), seed: seed).run(scenario)
                #expect(result.passed, "\(file) seed \(seed): \(result.failures.joined(separator: "\n"))")
                cases += 1
                if !result.passed { failed += 1 }
            }
        }
        ReliabilityReport.record(family: "convergence seeds", detail: "shuffled scenarios, 20 seeds each, memory transport (ScenarioTests)",
                                 cases: cases, corrupted: failed)
    }

    @Test func wrongExpectationsAreReported() async throws {
        let json = """
        {"name": "wrong", "replicas": ["A", "B"], "pages": ["p1"],
         "steps": [{"at": "A", "op": "add", "page": "p1", "id": "s1", "points": [[0,0],[1,1]]}],
         "expect": {"converged": true, "pages": {"p1": [{"id": "s1", "dx": 3}]}, "title": "nope", "conflicts": 2}}
        """
        let result = try await ScenarioRunner(transport: MemoryTransport()).run(try Scenario.parse(Data(json.utf8)))
        #expect(!result.passed)
        let text = result.failures.joined(separator: "\n")
        #expect(text.contains("not converged"))
        #expect(text.contains("title"))
        #expect(text.contains("conflicts"))
    }

    @Test(arguments: [
        ("{", "not valid JSON"),
        ("[]", "expected an object"),
        (#"{"name": "x", "replicas": []}"#, "$.replicas"),
        (#"{"name": "x", "replicas": ["A"], "steps": [{"at": "Z", "op": "add"}]}"#, "$.steps[0].at"),
        (#"{"name": "x", "replicas": ["A"], "steps": [{"at": "A", "op": "fly"}]}"#, "$.steps[0].op"),
        (#"{"name": "x", "replicas": ["A"], "steps": [{"at": "A", "op": "add", "page": "p", "id": "s", "points": [[1]]}]}"#, "$.steps[0].points[0]"),
        (#"{"name": "x", "replicas": ["A", "B"], "steps": [{"send": "A", "to": "B", "order": "sideways"}]}"#, "$.steps[0].order"),
        (#"{"name": "x", "replicas": ["A"], "expect": {"conflicts": true}}"#, "$.expect.conflicts"),
        (#"{"name": "x", "replicas": ["A"], "bogus": 1}"#, "unknown key"),
    ])
    func malformedScenariosAreRejectedWithAPath(_ json: String, _ mention: String) {
        do {
            _ = try Scenario.parse(Data(json.utf8))
            Issue.record("accepted: \(json)")
        } catch let e as ScenarioError {
            #expect(e.description.contains(mention), "\(e)")
        } catch {
            Issue.record("wrong error type: \(error)")
        }
    }

    @Test func unknownNamesInStepsAreScenarioErrors() async throws {
        let json = #"{"name": "x", "replicas": ["A"], "pages": ["p1"], "steps": [{"at": "A", "op": "erase", "page": "p1", "ids": ["ghost"]}]}"#
        await #expect(throws: ScenarioError.self) {
            _ = try await ScenarioRunner(transport: MemoryTransport()).run(try Scenario.parse(Data(json.utf8)))
        }
    }
}
