import Foundation
import Testing
import LnoteModel

/// `lnote undo`, `redo`, `revert` and `restore-element` (merge-semantics.md [MERGE-70] –
/// [MERGE-76]), through the real binary.
@Suite struct UndoCommandTests {
    /// One stroke of `n` points as a JSON line (Protocol/import-jsonl.md), `k` shifting it.
    static func stroke(_ k: Int, points n: Int = 6) -> String {
        let pts = (0..<n).map { i in "[\(20 + 10 * i + k), \(40 + 7 * k + i), \(1000 * k + 5 * i), 0.5]" }
        return "{\"points\": [\(pts.joined(separator: ", "))]}"
    }

    /// A notebook `nb` with one document of two pages; `one.jsonl` holds one stroke,
    /// `three.jsonl` three.
    static func setUp(_ sb: Sandbox) async throws -> String {
        try sb.write("one.jsonl", stroke(0) + "\n")
        try sb.write("three.jsonl", (1...3).map { stroke($0) }.joined(separator: "\n") + "\n")
        try await sb.ok("init", "nb")
        return try await sb.ok("new", "nb", "--title", "Undo", "--pages", "2")
    }

    static func page(_ sb: Sandbox, _ doc: String, _ page: String, at: String? = nil,
                     sourceLocation: SourceLocation = #_sourceLocation) async throws -> [String: Any] {
        let text = if let at {
            try await sb.ok("show", "nb", doc, page, "--at", at, "--json", sourceLocation: sourceLocation)
        } else {
            try await sb.ok("show", "nb", doc, page, "--json", sourceLocation: sourceLocation)
        }
        return try parseJSON(text) as! [String: Any]
    }

    static func ids(_ state: [String: Any]) -> [String] { elements(state).map { $0["id"] as! String } }

    /// What a page shows of its elements: ids, transforms, z keys and visible points, not
    /// who wrote them when.
    static func drawn(_ state: [String: Any]) throws -> [String] {
        try elements(state).map { e in
            try canon(["id": e["id"]!, "transform": e["transform"]!, "z": e["z"]!, "visible": e["visible"] ?? NSNull()])
        }
    }

    static func element(_ state: [String: Any], _ id: String) -> [String: Any]? {
        elements(state).first { $0["id"] as? String == id }
    }

    @Test("[MERGE-73] undo of an add erases the stroke; redo brings it back")
    func addUndoRedo() async throws {
        let sb = try Sandbox("undo-add")
        defer { sb.remove() }
        let d = try await Self.setUp(sb)
        let id = try await sb.ok("import", "nb", d, "#1", "one.jsonl")
        #expect(Self.ids(try await Self.page(sb, d, "#1")) == [id])

        let undo = try await sb.ok("undo", "nb", d)
        #expect(undo == "undid \"add\" on page #1: erased 1 element", "\(undo)")
        #expect(Self.ids(try await Self.page(sb, d, "#1")).isEmpty)

        let redo = try parseJSON(try await sb.ok("redo", "nb", d, "--json")) as! [String: Any]
        #expect(redo["redone"] as? Bool == true && redo["label"] as? String == "add", "\(redo)")
        let ops = redo["operations"] as! [[String: Any]]
        #expect(ops.count == 1 && ops[0]["kind"] as? String == "restore" && ops[0]["elements"] as? [String] == [id], "\(redo)")
        #expect(redo["canUndo"] as? Bool == true && redo["canRedo"] as? Bool == false, "\(redo)")
        #expect(Self.ids(try await Self.page(sb, d, "#1")) == [id])

        // Nothing left to redo: exit 0 and says so.
        let again = try await sb.run("redo", "nb", d)
        #expect(again.code == 0 && again.out == "nothing to redo\n", "\(again)")
    }

    @Test("[MERGE-73] undo of an erase restores the element; the text says what it did")
    func eraseUndo() async throws {
        let sb = try Sandbox("undo-erase")
        defer { sb.remove() }
        let d = try await Self.setUp(sb)
        let ids = try await sb.ok("import", "nb", d, "#2", "three.jsonl").split(separator: "\n").map(String.init)
        try await sb.ok("erase", "nb", d, "#2", ids[1])
        let before = try await Self.page(sb, d, "#2")
        #expect(Self.ids(before) == [ids[0], ids[2]])

        let undo = try await sb.ok("undo", "nb", d, "#2")
        #expect(undo == "undid \"erase\" on page #2: restored 1 element", "\(undo)")
        #expect(Self.ids(try await Self.page(sb, d, "#2")) == ids)
        // Then the import: three strokes erased in one step.
        let undo2 = try await sb.ok("undo", "nb", d)
        #expect(undo2 == "undid \"add 3 strokes\" on page #2: erased 3 elements", "\(undo2)")
        #expect(Self.ids(try await Self.page(sb, d, "#2")).isEmpty)
    }

    @Test("[MERGE-73] an import that writes to two pages is one step: one undo erases both, one redo brings both back")
    func importOnTwoPagesIsOneStep() async throws {
        let sb = try Sandbox("undo-import-two-pages")
        defer { sb.remove() }
        let d = try await Self.setUp(sb)
        try sb.write("two.jsonl", Self.stroke(1) + "\n" + Self.stroke(2).replacingOccurrences(of: "{", with: "{\"page\": 2, ") + "\n")
        func counts() async throws -> [Int] {
            [Self.ids(try await Self.page(sb, d, "#1")).count, Self.ids(try await Self.page(sb, d, "#2")).count]
        }
        let ids = try await sb.ok("import", "nb", d, "#1", "two.jsonl").split(separator: "\n").map(String.init)
        #expect(ids.count == 2)
        #expect(try await counts() == [1, 1])

        // Named by either page, the step takes back both strokes.
        let undo = try parseJSON(try await sb.ok("undo", "nb", d, "#1", "--json")) as! [String: Any]
        #expect(undo["undone"] as? Bool == true && undo["label"] as? String == "add 2 strokes", "\(undo)")
        #expect(try await counts() == [0, 0])
        let redo = try parseJSON(try await sb.ok("redo", "nb", d, "#2", "--json")) as! [String: Any]
        #expect(redo["redone"] as? Bool == true && redo["canRedo"] as? Bool == false, "\(redo)")
        #expect(try await counts() == [1, 1])
        let again = try await sb.run("undo", "nb", d, "#2")
        #expect(again.code == 0 && again.out.hasPrefix("undid"), "\(again)")
        #expect(try await counts() == [0, 0])
        let empty = try await sb.run("undo", "nb", d)
        #expect(empty.code == 0 && empty.out == "nothing to undo\n", "one step in all: \(empty)")
    }

    @Test("an edit naming an erased element says it is erased (and how to bring it back), not that it is unknown")
    func editOfAnErasedElement() async throws {
        let sb = try Sandbox("undo-erased-named")
        defer { sb.remove() }
        let d = try await Self.setUp(sb)
        let id = try await sb.ok("import", "nb", d, "#1", "one.jsonl")
        try await sb.ok("erase", "nb", d, "#1", id)
        let again = try await sb.run("erase", "nb", d, "#1", String(id.prefix(6)))
        #expect(again.code == 1 && again.err.contains("element \(id) on page") && again.err.contains("is erased")
                    && again.err.contains("restore-element"), "\(again)")
        let unknown = try await sb.run("erase", "nb", d, "#1", "ffffffff.9")
        #expect(unknown.code == 1 && unknown.err.contains("no element \"ffffffff.9\""), "\(unknown)")
    }

    @Test("undo and redo with nothing to do: exit 0, a message, and {\"undone\": false}")
    func nothingToUndo() async throws {
        let sb = try Sandbox("undo-nothing")
        defer { sb.remove() }
        let d = try await Self.setUp(sb)
        let r = try await sb.run("undo", "nb", d)
        #expect(r.code == 0 && r.out == "nothing to undo\n" && r.err.isEmpty, "\(r)")
        let onPage = try await sb.run("undo", "nb", d, "#2")
        #expect(onPage.code == 0 && onPage.out == "nothing to undo on page #2\n", "\(onPage)")
        let json = try parseJSON(try await sb.ok("undo", "nb", d, "--json")) as! [String: Any]
        #expect(json["undone"] as? Bool == false && json["operations"] == nil && json["canUndo"] as? Bool == false, "\(json)")
        let redo = try parseJSON(try await sb.ok("redo", "nb", d, "#1", "--json")) as! [String: Any]
        #expect(redo["redone"] as? Bool == false, "\(redo)")
        // Usage and unknown names.
        #expect(try await sb.run("undo", "nb").code == 2)
        let unknown = try await sb.run("undo", "nb", d, "#7")
        #expect(unknown.code == 1 && unknown.err.contains("no page #7"), "\(unknown)")
    }

    @Test("undo of PAGE takes back that page's latest step and leaves another page's later step")
    func undoOnePage() async throws {
        let sb = try Sandbox("undo-page")
        defer { sb.remove() }
        let d = try await Self.setUp(sb)
        let first = try await sb.ok("import", "nb", d, "#1", "one.jsonl")
        let second = try await sb.ok("import", "nb", d, "#2", "one.jsonl")

        let json = try parseJSON(try await sb.ok("undo", "nb", d, "#1", "--json")) as! [String: Any]
        #expect(json["undone"] as? Bool == true, "\(json)")
        let ops = json["operations"] as! [[String: Any]]
        let p1 = try await Self.page(sb, d, "#1")
        #expect(ops.count == 1 && ops[0]["page"] as? String == p1["page"] as? String && ops[0]["kind"] as? String == "erase"
                && ops[0]["elements"] as? [String] == [first], "\(json)")
        #expect(Self.ids(p1).isEmpty)
        #expect(Self.ids(try await Self.page(sb, d, "#2")) == [second], "page #2's later step must stay")
        // Without PAGE, the latest step left: page #2's.
        #expect(try await sb.ok("undo", "nb", d) == "undid \"add\" on page #2: erased 1 element")
        #expect(Self.ids(try await Self.page(sb, d, "#2")).isEmpty)
        // Redo on page #1 brings back page #1's stroke only.
        #expect(try await sb.ok("redo", "nb", d, "#1") == "redid \"add\" on page #1: restored 1 element")
        #expect(Self.ids(try await Self.page(sb, d, "#1")) == [first])
        #expect(Self.ids(try await Self.page(sb, d, "#2")).isEmpty)
    }

    @Test("[MERGE-74] undo is this folder's own, and skips what others overwrote")
    func undoIsPerReplica() async throws {
        let sb = try Sandbox("undo-replica")
        defer { sb.remove() }
        let d = try await Self.setUp(sb)
        let id = try await sb.ok("import", "nb", d, "#1", "one.jsonl")
        try await sb.ok("move", "nb", d, "#1", id, "--dx", "5")
        try await sb.ok("init", "other")
        try await sb.ok("sync", "other", "nb")
        // The other folder has nothing of its own to undo.
        #expect(try await sb.ok("undo", "other", d) == "nothing to undo")
        try await sb.ok("move", "other", d, "#1", id, "--dx", "7")
        try await sb.ok("sync", "nb", "other")
        // nb's move was overwritten by other's: skipped; its add is taken back.
        #expect(try await sb.ok("undo", "nb", d) == "undid \"add\" on page #1: erased 1 element")
        #expect(Self.ids(try await Self.page(sb, d, "#1")).isEmpty)
        #expect(try await sb.ok("undo", "nb", d) == "nothing to undo")
    }

    @Test("[MERGE-70] restore-element brings back an erased stroke; a live one, or an unknown id, is exit 1")
    func restoreElement() async throws {
        let sb = try Sandbox("restore-element")
        defer { sb.remove() }
        let d = try await Self.setUp(sb)
        let ids = try await sb.ok("import", "nb", d, "#1", "three.jsonl").split(separator: "\n").map(String.init)
        let before = try await Self.page(sb, d, "#1")
        try await sb.ok("erase", "nb", d, "#1", ids[0], ids[2])
        #expect(Self.ids(try await Self.page(sb, d, "#1")) == [ids[1]])

        #expect(try await sb.ok("restore-element", "nb", d, "#1", ids[0]) == "restored element \(ids[0]) on page #1")
        // By .counter, as erase takes it; and --json.
        let counter = "." + ids[2].split(separator: ".")[1]
        let json = try parseJSON(try await sb.ok("restore-element", "nb", d, "#1", counter, "--json")) as! [String: Any]
        #expect(json["element"] as? String == ids[2] && json["restored"] as? String == "element", "\(json)")
        // Back as they were, where they were.
        #expect(try Self.drawn(try await Self.page(sb, d, "#1")) == Self.drawn(before))

        let live = try await sb.run("restore-element", "nb", d, "#1", ids[1])
        #expect(live.code == 1 && live.err.contains("not erased") && live.err.contains(ids[1]), "\(live)")
        let unknown = try await sb.run("restore-element", "nb", d, "#1", "00000000000000ee.9")
        #expect(unknown.code == 1 && unknown.err.contains("no element"), "\(unknown)")
        #expect(try await sb.run("restore-element", "nb", d, "#1").code == 2)

        // A restore is a step: undo erases it again.
        #expect(try await sb.ok("undo", "nb", d) == "undid \"restore\" on page #1: erased 1 element")
        #expect(Self.ids(try await Self.page(sb, d, "#1")) == [ids[0], ids[1]])
    }

    @Test("[MERGE-71] restore-element --range brings back erased points of a live stroke")
    func restoreRange() async throws {
        let sb = try Sandbox("restore-range")
        defer { sb.remove() }
        let d = try await Self.setUp(sb)
        let id = try await sb.ok("import", "nb", d, "#1", "one.jsonl")
        try await sb.ok("erase-range", "nb", d, "#1", id, "1", "5")
        #expect(Self.element(try await Self.page(sb, d, "#1"), id)?["visible"] as? [[Int]] == [[0, 1], [5, 6]])

        let r = try await sb.ok("restore-element", "nb", d, "#1", id, "--range", "2-3", "--range=4-6")
        #expect(r == "restored 2 points of \(id) on page #1: [2, 3) [4, 5)", "\(r)")
        #expect(Self.element(try await Self.page(sb, d, "#1"), id)?["visible"] as? [[Int]] == [[0, 1], [2, 3], [4, 6]])

        let json = try parseJSON(try await sb.ok("restore-element", "nb", d, "#1", id, "--range", "0-4", "--json")) as! [String: Any]
        #expect(json["restored"] as? String == "points" && json["points"] as? Int == 2
                && json["ranges"] as? [[Int]] == [[1, 2], [3, 4]], "\(json)")
        #expect(Self.element(try await Self.page(sb, d, "#1"), id)?["visible"] as? [[Int]] == [[0, 6]])

        // Nothing erased there: exit 1, nothing written.
        let none = try await sb.run("restore-element", "nb", d, "#1", id, "--range", "0-2")
        #expect(none.code == 1 && none.err.contains("not erased"), "\(none)")
        // Outside the stroke: the library refuses.
        let outside = try await sb.run("restore-element", "nb", d, "#1", id, "--range", "3-60")
        #expect(outside.code == 1 && outside.err.contains("outside stroke"), "\(outside)")
        for bad in ["3-1", "2", "a-b", "-3"] {
            let u = try await sb.run("restore-element", "nb", d, "#1", id, "--range=\(bad)")
            #expect(u.code == 2 && u.err.contains("FROM"), "\(bad): \(u)")
        }
        // Undo takes the last range restore back.
        #expect(try await sb.ok("undo", "nb", d) == "undid \"restoreRange\" on page #1: erased 2 points of \(id)")
        #expect(Self.element(try await Self.page(sb, d, "#1"), id)?["visible"] as? [[Int]] == [[0, 1], [2, 3], [4, 6]])
    }

    @Test("[MERGE-76] revert --to a step makes the page as show --at that step shows it")
    func revertToStep() async throws {
        let sb = try Sandbox("revert")
        defer { sb.remove() }
        let d = try await Self.setUp(sb)
        let ids = try await sb.ok("import", "nb", d, "#1", "three.jsonl").split(separator: "\n").map(String.init)
        let steps = try parseJSON(try await sb.ok("history", "nb", d, "#1", "--json")) as! [[String: Any]]
        let imported = try #require(steps.last?["id"] as? String)
        try await sb.ok("erase", "nb", d, "#1", ids[0])
        try await sb.ok("move", "nb", d, "#1", ids[1], "--dx", "3", "--dy=-2")
        try await sb.ok("erase-range", "nb", d, "#1", ids[2], "2", "4")
        try await sb.ok("back", "nb", d, "#1", ids[2])
        try await sb.ok("import", "nb", d, "#1", "one.jsonl")
        let then = try await Self.page(sb, d, "#1", at: imported)
        #expect(try Self.drawn(try await Self.page(sb, d, "#1")) != Self.drawn(then))

        let r = try await sb.ok("revert", "nb", d, "#1", "--to", imported)
        #expect(r == "wrote 5 operations on page #1: erased 1 element, restored 1 element, restored 2 points of \(ids[2]), "
                + "moved 1 element, reordered 1 element", "\(r)")
        #expect(try Self.drawn(try await Self.page(sb, d, "#1")) == Self.drawn(then))
        // Again: nothing to write.
        let again = try await sb.run("revert", "nb", d, "#1", "--to", imported)
        #expect(again.code == 0 && again.out.contains("already as it was"), "\(again)")
        let json = try parseJSON(try await sb.ok("revert", "nb", d, "#1", "--to", imported, "--json")) as! [String: Any]
        #expect((json["operations"] as? [Any])?.isEmpty == true, "\(json)")
        // A revert is one step: undo takes all of it back.
        let undo = try await sb.ok("undo", "nb", d, "#1")
        #expect(undo.hasPrefix("undid \"revert\" on page #1: "), "\(undo)")
        #expect(Self.ids(try await Self.page(sb, d, "#1")).count == 3)

        // A time before everything: the page empty; --json lists the erase.
        let out = try parseJSON(try await sb.ok("revert", "nb", d, "#1", "--to", "@0", "--json")) as! [String: Any]
        let ops = out["operations"] as! [[String: Any]]
        #expect(ops.count == 1 && ops[0]["kind"] as? String == "erase" && (ops[0]["elements"] as? [String])?.count == 3, "\(out)")
        #expect(Self.ids(try await Self.page(sb, d, "#1")).isEmpty)
    }

    @Test("revert: a WHEN that is not a moment is exit 2 listing the forms; one the log lacks is exit 1")
    func revertBadMoments() async throws {
        let sb = try Sandbox("revert-bad")
        defer { sb.remove() }
        let d = try await Self.setUp(sb)
        try await sb.ok("import", "nb", d, "#1", "one.jsonl")
        for bad in ["yesterday", "a1", ""] {
            let r = try await sb.run("revert", "nb", d, "#1", "--to", bad)
            #expect(r.code == 2 && r.err.contains("a1.17") && r.err.contains("@MS"), "\(r)")
        }
        // A clock entry with counter 0: said why ([SHR-5]), not only which forms there are.
        let zero = try await sb.run("revert", "nb", d, "#1", "--to", "{a1:0, b2:3}")
        #expect(zero.code == 2 && zero.err.contains("the clock entry a1:0 has counter 0: leave that replica out"), "\(zero)")
        let missing = try await sb.run("revert", "nb", d, "#1")
        #expect(missing.code == 2 && missing.err.contains("--to"), "\(missing)")
        let noPage = try await sb.run("revert", "nb", d, "--to", "@0")
        #expect(noPage.code == 2, "\(noPage)")
        let unknown = try await sb.run("revert", "nb", d, "#1", "--to", "ee.1")
        #expect(unknown.code == 1 && unknown.err.contains("operation 00000000000000ee.1 is not in this log"), "\(unknown)")
    }

    @Test func helpListsTheCommands() async throws {
        let sb = try Sandbox("undo-help")
        defer { sb.remove() }
        let help = try await sb.ok("--help")
        for name in ["undo", "redo", "revert", "restore-element"] { #expect(help.contains("\n  \(name) "), "\(name)") }
        let undo = try await sb.ok("undo", "--help")
        #expect(undo.contains("nothing to undo") && undo.contains("exits 0") && undo.contains("\"undone\": false"), "\(undo)")
    }
}
