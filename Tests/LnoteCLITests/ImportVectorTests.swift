import Foundation
import Testing
import LnoteTestSupport
import LnoteModel

/// `Protocol/import-jsonl.md` §4, read straight out of the spec: the JSON lines and the
/// points they must give, through the library and through `lnote import`.
@Suite("Import: the spec's vector")
struct ImportVectorTests {
    /// The expected points of the vector: one stroke per line, `[x, y, pressure, radius, t]`.
    func expectedStrokes() throws -> [[[Int]]] {
        let text = try SpecVectors.text("import-points", in: "import-jsonl.md")
        return try text.split(separator: "\n").map { line in
            try #require(try parseJSON(String(line)) as? [[Int]], "not an array of points: \(line)")
        }
    }

    func rows(_ s: Stroke) -> [[Int]] {
        s.points.map { [Int($0.x), Int($0.y), Int($0.pressure), Int($0.radius), Int($0.t)] }
    }

    /// [IMP-3] [IMP-4] [IMP-5] [IMP-6] [IMP-1] The vector's lines give exactly the vector's
    /// points, whether read by `StrokeImport` or imported by the command and printed back by
    /// `lnote show --json --points`.
    @Test func specVector() async throws {
        let input = try SpecVectors.text("import-lines", in: "import-jsonl.md")
        let expected = try expectedStrokes()
        #expect(expected.count == 5)
        let sb = try Sandbox("import-vector")
        defer { sb.remove() }
        try sb.write("v.jsonl", input)

        let strokes = try StrokeImport.strokes(contentsOf: sb.sub("v.jsonl"))
        #expect(strokes.map(rows) == expected)
        #expect(strokes.allSatisfy { $0.style == InkStyle(tool: .pen, color: .black, width: 20) })
        let lines = try StrokeImport.parse(Array(input.utf8))
        #expect(lines.map(\.lineNumber) == [1, 2, 4, 5, 6])
        #expect(lines.map(\.page) == [nil, "7", nil, nil, nil])

        try await sb.ok("init", "nb")
        let d = try await sb.ok("new", "nb")
        let ids = try await sb.ok("import", "nb", d, "#1", "v.jsonl").split(separator: "\n").map(String.init)
        #expect(ids.count == 5)
        // [IMP-10] The second line's "page": 7 sends it to the 7th page, added with the pages
        // before it; the others go to the page named (#1). Ids: #1's strokes first, then #7's.
        func elements(_ page: String) async throws -> [[String: Any]] {
            let shown = try #require(try parseJSON(try await sb.ok("show", "nb", d, page, "--json", "--points")) as? [String: Any])
            return try #require(shown["elements"] as? [[String: Any]])
        }
        let first = try await elements("#1"), seventh = try await elements("#7")
        // Each import lands on top of the ones before: bottom to top is file order.
        #expect(first.map { $0["id"] as? String } == ids.prefix(4).map { $0 })
        #expect(seventh.map { $0["id"] as? String } == [ids[4]])
        #expect(first.map { $0["points"] as? [[Int]] ?? [] } == [expected[0]] + expected[2...])
        #expect(seventh.map { $0["points"] as? [[Int]] ?? [] } == [expected[1]])
        #expect((first + seventh).allSatisfy { ($0["style"] as? [String: Any])?["width"] as? Int == 20 })
    }

    /// [IMP-7] [IMP-3] [IMP-4] Values the quantizer refuses (a coordinate beyond ±10,000,000 pt,
    /// a stroke longer than 24 h, the limit of [LOG-23]) reject the whole file: exit 1, the line, the point
    /// and the file named, the line's byte offset in the error, nothing added.
    @Test func rejectedValuesImportNothing() async throws {
        let seed = testSeed()
        var rng = SplitMix64(seed: seed)
        let sb = try Sandbox("import-reject")
        defer { sb.remove() }
        try await sb.ok("init", "nb")
        let d = try await sb.ok("new", "nb")
        let good = strokeLines(count: 2, rng: &rng)
        let before = try await sb.ok("show", "nb", d, "--json", "--points")
        let cases = [("{\"points\": [[0, 0], [10000000.05, 1]]}", "point 1", "out of range"),
                     ("{\"points\": [[0, 0, 5, 0.5], [0, 0, 4294967301, 0.5]]}", "point 1", "longer than 86400000 ms"),
                     // [IMP-4] 24 h and 1 ms, the first duration beyond what operations carry ([LOG-23]).
                     ("{\"points\": [[0, 0, 5, 0.5], [1, 1], [0, 0, 86400006, 0.5]]}", "point 2", "lasts 86400001 ms, longer than 86400000 ms"),
                     ("{\"points\": [[0, 0, -9e15]]}", "point 0", "out of range")]
        for (i, (bad, point, what)) in cases.enumerated() {
            let text = good + "\n" + bad + "\n" + good
            try sb.write("bad\(i).jsonl", text)
            do {
                _ = try StrokeImport.strokes(contentsOf: sb.sub("bad\(i).jsonl"))
                Issue.record("case \(i) accepted (seed \(seed))")
            } catch let e as LnoteError {
                #expect(e.code == .invalidArgument && e.index == 4 && e.offset == good.utf8.count + 1, "case \(i): \(e) (seed \(seed))")
                #expect(e.message.hasPrefix("line 4: \(point): ") && e.message.contains(what), "case \(i): \(e)")
            }
            let r = try await sb.run("import", "nb", d, "#1", "bad\(i).jsonl")
            #expect(r.code == 1 && r.out.isEmpty, "\(r)")
            #expect(r.err.contains("line 4") && r.err.contains(point) && r.err.contains("bad\(i).jsonl"), "\(r)")
        }
        #expect(try await sb.ok("show", "nb", d, "--json", "--points") == before, "a rejected file added something (seed \(seed))")
        // An empty file adds nothing and says so.
        try sb.write("empty.jsonl", "\n \n")
        let r = try await sb.run("import", "nb", d, "#1", "empty.jsonl")
        #expect(r.code == 0 && r.out.isEmpty && r.err.contains("nothing added"), "\(r)")
    }
}
