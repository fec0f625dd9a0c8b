import Foundation
import Testing
import LnoteModel
import LnoteReplication
@testable import LnoteScenario

/// Undo, redo, restores and revert in scenarios: the steps and the `history` expectation
/// parse with paths and report what differs, and the memory transport's undo (pure
/// `Undo` functions over in-memory stacks) makes exactly what the store's `Document.undo()`
/// makes, on random schedules.
@Suite struct UndoScenarioTests {
    /// The undo scenarios ship with the rest (each runs on every transport in `ScenarioTests`).
    @Test func undoScenariosShip() throws {
        var undo = 0, revert = 0, restore = 0, group = 0, history = 0
        for file in ScenarioFiles.all {
            let text = try String(contentsOf: file, encoding: .utf8)
            if text.contains("\"op\": \"undo\"") || text.contains("\"op\": \"redo\"") { undo += 1 }
            if text.contains("\"op\": \"revert\"") { revert += 1 }
            if text.contains("\"op\": \"restore\"") || text.contains("\"op\": \"restoreRange\"") { restore += 1 }
            if text.contains("\"op\": \"group\"") { group += 1 }
            if text.contains("\"history\"") { history += 1 }
        }
        #expect(undo >= 15 && revert >= 3 && restore >= 3 && group >= 1 && history >= 15,
                "undo \(undo), revert \(revert), restore \(restore), group \(group), history \(history)")
    }

    @Test(arguments: [
        (#"{"name": "x", "replicas": ["A"], "steps": [{"at": "A", "op": "revert", "page": "p", "to": "yesterday"}]}"#, "$.steps[0].to"),
        (#"{"name": "x", "replicas": ["A"], "steps": [{"at": "A", "op": "revert", "page": "p"}]}"#, "$.steps[0].to"),
        (#"{"name": "x", "replicas": ["A"], "steps": [{"at": "A", "op": "undo", "makes": -1}]}"#, "$.steps[0].makes"),
        (#"{"name": "x", "replicas": ["A"], "steps": [{"at": "A", "op": "redo", "page": 3}]}"#, "$.steps[0].page"),
        (#"{"name": "x", "replicas": ["A"], "steps": [{"at": "A", "op": "undo", "ids": ["s"]}]}"#, "unknown key \"ids\""),
        (#"{"name": "x", "replicas": ["A"], "steps": [{"at": "A", "op": "restore", "page": "p", "ids": []}]}"#, "$.steps[0].ids"),
        (#"{"name": "x", "replicas": ["A"], "steps": [{"at": "A", "op": "restoreRange", "page": "p", "id": "s", "from": 3, "to": 3}]}"#, "$.steps[0]"),
        (#"{"name": "x", "replicas": ["A"], "steps": [{"at": "A", "op": "group", "edits": []}]}"#, "$.steps[0].edits"),
        (#"{"name": "x", "replicas": ["A"], "steps": [{"at": "A", "op": "group", "edits": [{"op": "title", "text": "t"}]}]}"#, "$.steps[0].edits[0].op"),
        (#"{"name": "x", "replicas": ["A"], "steps": [{"at": "A", "op": "group", "edits": [{"op": "undo"}]}]}"#, "$.steps[0].edits[0].op"),
        (#"{"name": "x", "replicas": ["A"], "steps": [{"at": "A", "op": "group", "edits": [{"at": "A", "op": "erase", "page": "p", "ids": ["s"]}]}]}"#, "$.steps[0].edits[0]: unknown key \"at\""),
        (#"{"name": "x", "replicas": ["A"], "steps": [{"at": "A", "op": "group", "edits": [{"op": "add", "page": "p", "id": "s", "points": [[1]]}]}]}"#, "$.steps[0].edits[0].points[0]"),
        (#"{"name": "x", "replicas": ["A"], "expect": {"history": {"p": ["scribble"]}}}"#, "$.expect.history.p[0]"),
        (#"{"name": "x", "replicas": ["A"], "expect": {"history": {"p": [{"kind": "add", "by": "Z"}]}}}"#, "$.expect.history.p[0].by"),
        (#"{"name": "x", "replicas": ["A"], "expect": {"history": {"p": {"count": 1, "kinds": {"add": -1}}}}}"#, "$.expect.history.p.kinds.add"),
        (#"{"name": "x", "replicas": ["A"], "expect": {"at": {"A": {"history": {"p": 3}}}}}"#, "$.expect.at.A.history.p"),
    ])
    func malformedUndoStepsAreRejectedWithAPath(_ json: String, _ mention: String) {
        do {
            _ = try Scenario.parse(Data(json.utf8))
            Issue.record("accepted: \(json)")
        } catch let e as ScenarioError {
            #expect(e.description.contains(mention), "\(e)")
        } catch {
            Issue.record("wrong error type: \(error)")
        }
    }

    @Test func revertToNamesAnElementOrAMoment() throws {
        let json = #"""
        {"name": "x", "replicas": ["A"], "pages": ["p"], "steps": [
          {"at": "A", "op": "add", "page": "p", "id": "s1", "points": [[0, 0], [1, 1]]},
          {"at": "A", "op": "revert", "page": "p", "to": "s1"},
          {"at": "A", "op": "revert", "page": "p", "to": "1.1"},
          {"at": "A", "op": "revert", "page": "p", "to": "{1:1}"},
          {"at": "A", "op": "revert", "page": "p", "to": "2026-01-01T00:00:03Z", "makes": 0},
          {"at": "A", "op": "revert", "page": "p", "to": "@1767225603000"}]}
        """#
        let s = try Scenario.parse(Data(json.utf8))
        let moments = s.steps.compactMap { step -> Scenario.Moment? in
            if case .edit(_, .revert(_, let to, _), _) = step { return to }
            return nil
        }
        #expect(moments == [.element("s1"), .point(.operation(OpID(replica: ReplicaID(1), counter: 1))),
                            .point(.clock(VectorClock(parsing: "{1:1}")!)), .point(.wallTime(1_767_225_603_000)),
                            .point(.wallTime(1_767_225_603_000))])
    }

    @Test(arguments: ["memory", "folder"])
    func unmetUndoExpectationsAreReported(_ transport: String) async throws {
        let json = #"""
        {"name": "wrong undo", "replicas": ["A", "B"], "pages": ["p1"],
         "steps": [{"at": "A", "op": "add", "page": "p1", "id": "s1", "points": [[0, 0], [1, 1]]},
                   {"at": "A", "op": "undo", "makes": 2},
                   {"at": "A", "op": "redo", "makes": 0},
                   {"sync": ["A", "B"]}],
         "expect": {"converged": true, "ids": {"p1": ["s1"]},
                    "history": {"p1": ["add", {"kind": "erase", "by": "B"}, "restore"]},
                    "at": {"B": {"history": {"p1": {"count": 4, "kinds": {"restore": 2}}}}}}}
        """#
        let t = try ScenarioTransports.make(transport)
        let result = try await ScenarioRunner(transport: t).run(try Scenario.parse(Data(json.utf8)))
        try await t.close()
        let text = result.failures.joined(separator: "\n")
        #expect(text.contains("$.steps[1]: A's undo made 1 operations, expected 2"), "\(text)")
        #expect(text.contains("$.steps[2]: A's redo made 1 operations, expected 0"), "\(text)")
        #expect(text.contains("A: page p1 history step 1 is erase by A s1, expected erase by B"), "\(text)")
        #expect(text.contains("B: page p1 history has 3 steps, expected 4"), "\(text)")
        #expect(text.contains("has 1 restore steps, expected 2"), "\(text)")
        #expect(!text.contains("holds"), "the ids check holds: \(text)")
    }

    /// Random schedules of edits, undos, redos, restores, reverts, groups, deliveries, page
    /// deletes and restarts on three replicas: the memory transport (pure `Undo` functions)
    /// and the folder transport (the store's `Document.undo()` …) end in the same states.
    /// `LNOTE_UNDO_SEEDS=N` runs N schedules instead of 12 (150 pass).
    @Test func memoryUndoMatchesTheStoreOnRandomSchedules() async throws {
        var compared = 0
        let seeds = UInt64(ProcessInfo.processInfo.environment["LNOTE_UNDO_SEEDS"].flatMap { UInt64($0) } ?? 12)
        for seed in UInt64(1)...seeds {
            let scenario = try await RandomUndoSchedule.make(seed: seed, steps: 36)
            let memory = try await ScenarioRunner(transport: MemoryTransport()).run(scenario)
            let folders = try FolderTransport()
            let folder = try await ScenarioRunner(transport: folders).run(scenario)
            try await folders.close()
            #expect(memory.passed, "seed \(seed) memory: \(memory.failures)")
            #expect(folder.passed, "seed \(seed) folder: \(folder.failures)")
            for r in scenario.replicas {
                let m = memory.views[r]!, f = folder.views[r]!
                #expect(m.document == f.document, "seed \(seed) \(r): document differs")
                // A page with no operations is absent from one view and empty in the other.
                for p in Set(m.pages.keys).union(f.pages.keys).sorted() {
                    let mp = m.pages[p] ?? PageState(page: p), fp = f.pages[p] ?? PageState(page: p)
                    #expect(mp == fp, "seed \(seed) \(r) page \(p): memory \(RandomUndoSchedule.text(mp)) vs folder \(RandomUndoSchedule.text(fp))\n\(RandomUndoSchedule.text(scenario))")
                }
                #expect(m.conflicts == f.conflicts, "seed \(seed) \(r): conflicts differ")
            }
            compared += 1
        }
        #expect(compared == Int(seeds))
    }
}

/// Builds random valid schedules step by step: a candidate step is kept when the memory
/// transport can run the schedule with it (an edit of an element the replica does not see
/// live is not a step a user could make).
enum RandomUndoSchedule {
    static let replicas = ["A", "B", "C"]

    static func make(seed: UInt64, steps count: Int) async throws -> Scenario {
        var rng = SplitMix64(seed: seed &* 0x9E37_79B9_7F4A_7C15 &+ 7)
        var scenario = Scenario(name: "random undo schedule \(seed)", replicas: replicas, pages: ["p1", "p2"], steps: [],
                                expect: Scenario.Expectation())
        var elements: [(name: String, page: String)] = []
        var next = 1
        var tries = 0
        func pick<T>(_ a: [T], _ rng: inout SplitMix64) -> T { a[Int(rng.below(UInt64(a.count)))] }
        func points(_ n: Int, _ rng: inout SplitMix64) -> [Scenario.Point] {
            let y = Double(rng.below(200))
            return (0..<n).map { Scenario.Point(x: Double($0 * 10), y: y, pressure: nil, t: nil) }
        }
        func range(_ rng: inout SplitMix64) -> (Int, Int) {
            let from = Int(rng.below(5))
            return (from, from + 1 + Int(rng.below(3)))
        }
        while scenario.steps.count < count && tries < count * 12 {
            tries += 1
            let i = scenario.steps.count
            let at = pick(replicas, &rng)
            let el = elements.isEmpty ? nil : pick(elements, &rng)
            var added: (String, String)? = nil
            let step: Scenario.Step
            switch rng.below(100) {
            case 0..<18:
                let page = rng.below(4) == 0 ? "p2" : "p1"
                let name = "s\(next)"
                added = (name, page)
                step = .edit(at: at, .add(page: page, id: name, points: points(6, &rng), below: nil, above: nil), index: i)
            case 18..<26:
                guard let el else { continue }
                step = .edit(at: at, .erase(page: el.page, ids: [el.name]), index: i)
            case 26..<32:
                guard let el else { continue }
                let (f, t) = range(&rng)
                step = .edit(at: at, .eraseRange(page: el.page, id: el.name, from: f, to: t), index: i)
            case 32..<38:
                guard let el else { continue }
                step = .edit(at: at, .move(page: el.page, ids: [el.name], dx: Double(rng.below(20)), dy: Double(rng.below(20))), index: i)
            case 38..<41:
                guard let el else { continue }
                step = .edit(at: at, rng.below(2) == 0 ? .toFront(page: el.page, ids: [el.name]) : .toBack(page: el.page, ids: [el.name]), index: i)
            case 41..<44:
                guard let el else { continue }
                step = .edit(at: at, .restore(page: el.page, ids: [el.name]), index: i)
            case 44..<47:
                guard let el else { continue }
                let (f, t) = range(&rng)
                step = .edit(at: at, .restoreRange(page: el.page, id: el.name, from: f, to: t), index: i)
            case 47..<60:
                step = .edit(at: at, .undo(page: rng.below(4) == 0 ? pick(["p1", "p2"], &rng) : nil, makes: nil), index: i)
            case 60..<66:
                step = .edit(at: at, .redo(page: rng.below(4) == 0 ? pick(["p1", "p2"], &rng) : nil, makes: nil), index: i)
            case 66..<70:
                guard let el else { continue }
                // A moment: just after an element's add, or a time some steps ago.
                let to: Scenario.Moment = rng.below(2) == 0
                    ? .element(el.name)
                    : .point(.wallTime(Wall().now + 1000 * Int64(2 + rng.below(UInt64(i + 2)))))
                step = .edit(at: at, .revert(page: el.page, to: to, makes: nil), index: i)
            case 70..<73:
                let name = "s\(next)"
                added = (name, "p1")
                var edits: [Scenario.Edit] = [.add(page: "p1", id: name, points: points(4, &rng), below: nil, above: nil)]
                if let el, el.page == "p1" { edits.append(.erase(page: "p1", ids: [el.name])) }
                step = .edit(at: at, .group(edits), index: i)
            case 73..<75:
                step = .edit(at: at, rng.below(2) == 0 ? .deletePage(page: "p2") : .restorePage(page: "p2"), index: i)
            case 75..<77:
                step = .restart(at, index: i)
            case 77..<88:
                let other = pick(replicas.filter { $0 != at }, &rng)
                step = .send(from: at, to: other, order: pick([.asHeld, .reversed, .shuffled], &rng), duplicate: rng.below(4) == 0,
                             only: nil, index: i)
            default:
                let others = replicas.filter { $0 != at }
                step = .sync([at, pick(others, &rng)], index: i)
            }
            var trial = scenario
            trial.steps.append(step)
            do {
                _ = try await ScenarioRunner(transport: MemoryTransport()).run(trial)
            } catch is ScenarioError {
                continue
            }
            scenario = trial
            if let added {
                elements.append(added)
                next += 1
            }
        }
        scenario.steps.append(.sync(replicas, index: scenario.steps.count))
        scenario.expect.converged = true
        return scenario
    }

    /// A page, short: its clock and each live element.
    static func text(_ p: PageState) -> String {
        "clock \(p.clock) live [" + p.elements.map { e in
            "\(e.id) erased \(e.erased) at \(e.transform.value) z \(e.z.value)"
        }.joined(separator: ", ") + "] erased \(p.tombstones.filter(\.isErased).map(\.id))"
    }

    /// The schedule, one step a line, for a failure message.
    static func text(_ s: Scenario) -> String {
        s.steps.map { step -> String in
            switch step {
            case .edit(let at, .add(let p, let id, let pts, _, _), let i): "\(i) \(at): add \(id) on \(p) (\(pts.count) points)"
            case .edit(let at, .group(let edits), let i):
                "\(i) \(at): group " + edits.map { e in
                    if case .add(let p, let id, let pts, _, _) = e { return "add \(id) on \(p) (\(pts.count) points)" }
                    return "\(e)"
                }.joined(separator: ", ")
            case .edit(let at, let e, let i): "\(i) \(at): \(e)"
            case .sync(let rs, let i): "\(i) sync \(rs)"
            case .send(let a, let b, let o, let d, _, let i): "\(i) send \(a)→\(b) \(o)\(d ? " twice" : "")"
            case .restart(let r, let i): "\(i) restart \(r)"
            }
        }.joined(separator: "\n")
    }
}
