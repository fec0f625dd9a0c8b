import Foundation
import Testing
import LnoteModel

/// `lnote history` and `lnote show --at` (merge-semantics.md §6, [MERGE-80] – [MERGE-84]).
@Suite struct HistoryCommandTests {
    @Test("[MERGE-84] history lists each step; show --at gives back the state each left, and now at the last")
    func historyAndShowAt() async throws {
        let seed = testSeed()
        let sb = try Sandbox("history")
        defer { sb.remove() }
        try await writeInputs(sb, seed: seed)
        let b = try await build(sb, "nb")
        let f = b.folder, d = b.doc

        let steps = try parseJSON(try await sb.ok("history", f, d, "#1", "--json")) as! [[String: Any]]
        let text = try await sb.ok("history", f, d, "#1").split(separator: "\n")
        #expect(text.count == steps.count, "seed \(seed)")
        #expect(steps.map { $0["kind"] as! String }.first == "add")
        #expect(steps.contains { $0["kind"] as! String == "erase" } && steps.contains { $0["kind"] as! String == "move" })
        #expect(text.contains { $0.contains("erased 1 element") } && text.contains { $0.contains("moved 2 elements") }, "\(text)")
        var previous = -1
        for (i, step) in steps.enumerated() {
            let id = step["id"] as! String
            let state = try parseJSON(try await sb.ok("show", f, d, "#1", "--at", id, "--json")) as! [String: Any]
            #expect(try canon(state["clock"]!) == canon(step["moment"]!), "seed \(seed): step \(id)")
            // Adds come first in this page's history: each shows one more element than the last.
            if step["kind"] as! String == "add" {
                let n = elements(state).count
                #expect(n == previous + 1 || previous == -1 && n == 1, "seed \(seed): step \(i)")
                previous = n
            }
        }
        // The time each text line shows is exact: as typed to --at, it includes that step.
        for (line, step) in zip(text, steps) {
            let shown = String(line.split(separator: " ").first ?? "")
            #expect(shown.count == 24 && shown.hasSuffix("Z"), "\(line)")
            let moment = try parseJSON(try await sb.ok("show", f, d, "#1", "--at", shown, "--json")) as! [String: Any]
            let clock = try #require(moment["clock"] as? [String: Any], "\(line)")
            let own = step["id"] as! String
            let dot = own.firstIndex(of: ".")!
            let counter = (clock[String(own[..<dot])] as? NSNumber)?.intValue ?? 0
            #expect(counter >= Int(own[own.index(after: dot)...])!, "seed \(seed): --at \(shown) leaves out step \(own)")
        }
        let last = steps.last!["id"] as! String
        #expect(try await sb.ok("show", f, d, "#1", "--at", last, "--json") == sb.ok("show", f, d, "#1", "--json"))
        // A time after everything is now, for a page and for the whole document.
        #expect(try await sb.ok("show", f, d, "--at", "2999-01-01", "--json") == sb.ok("show", f, d, "--json"))
        #expect(try await sb.ok("show", f, d, "#1", "--at", "@0", "--json").contains("\"elements\": []"))
        // Text form names the moment.
        #expect(try await sb.ok("show", f, d, "#1", "--at", last).contains("as of {"))
    }

    @Test("[MERGE-81] moments that are not one: usage errors that say which forms work")
    func badMoments() async throws {
        let sb = try Sandbox("history-bad")
        defer { sb.remove() }
        try await writeInputs(sb, seed: 1)
        let b = try await build(sb, "nb")
        for bad in ["yesterday", "a1", "{a1:0}", ""] {
            let r = try await sb.run("show", b.folder, b.doc, "#1", "--at", bad)
            #expect(r.code == 2, "\(r)")
            #expect(r.err.contains("a1.17") || r.err.contains("needs a value") || r.err.contains("has counter 0"), "\(r)")
        }
        // A clock or an id names one log: the whole document takes a time only.
        let r = try await sb.run("show", b.folder, b.doc, "--at", b.strokes[0])
        #expect(r.code == 2 && r.err.contains("PAGE"), "\(r)")
        // An id this page's log does not hold.
        let missing = try await sb.run("show", b.folder, b.doc, "#1", "--at", "ee.1")
        #expect(missing.code == 1 && missing.err.contains("operation 00000000000000ee.1 is not in this log"), "\(missing)")
    }
}
