import Foundation
import Testing
import CLnoteZlib
import LnoteTestSupport
import LnoteModel

/// `lnote import` of InkML, .xopp and JSON lines by page (Protocol/interchange.md,
/// import-jsonl.md [IMP-10]) and `lnote export --inkml`, through the binary.
@Suite("Import: interchange formats")
struct InterchangeCLITests {
    /// `show`'s page rows: (position label, id, canvas text, element count text).
    func pages(_ sb: Sandbox, _ d: String) async throws -> [(id: String, canvas: String, elements: String)] {
        try await sb.ok("show", "nb", d).split(separator: "\n").compactMap { line in
            let cols = line.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
            guard cols.first?.hasPrefix("#") == true, cols.count >= 7 else { return nil }
            return (cols[1], "\(cols[2]) x \(cols[4])", cols[6])
        }
    }

    func points(_ sb: Sandbox, _ d: String, _ page: String) async throws -> [[[Int]]] {
        let page = try #require(try parseJSON(try await sb.ok("show", "nb", d, page, "--json", "--points")) as? [String: Any])
        let elements = try #require(page["elements"] as? [[String: Any]])
        return elements.map { $0["points"] as? [[Int]] ?? [] }
    }

    /// [XCH-9] [XCH-10] A document exported as InkML and imported into another gives the same
    /// points on the same pages (sizes included).
    @Test func exportThenImportInkML() async throws {
        let seed = testSeed()
        var rng = SplitMix64(seed: seed)
        let sb = try Sandbox("inkml-round-trip")
        defer { sb.remove() }
        try await sb.ok("init", "nb")
        let d = try await sb.ok("new", "nb")
        try sb.write("a.jsonl", strokeLines(count: 6, rng: &rng))
        try sb.write("b.jsonl", strokeLines(count: 3, rng: &rng))
        try await sb.ok("import", "nb", d, "#1", "a.jsonl")
        try await sb.ok("page", "add", "nb", d, "--width", "300", "--height", "420.5")
        try await sb.ok("import", "nb", d, "#2", "b.jsonl", "--tool", "highlighter", "--color", "#ff000080", "--width", "7.5")
        let out = try await sb.ok("export", "nb", d, "--inkml", "out.inkml")
        #expect(out.contains("2 pages, 9 strokes"), "\(out)")
        let d2 = try await sb.ok("new", "nb")
        let r = try await sb.run("import", "nb", d2, "#1", "out.inkml", "--json")
        #expect(r.code == 0, "\(r) (seed \(seed))")
        let summary = try #require(try parseJSON(r.out) as? [String: Any])
        #expect(summary["strokes"] as? Int == 9)
        let before = try await pages(sb, d), after = try await pages(sb, d2)
        #expect(after.count == 2 && after[1].canvas == before[1].canvas, "\(after) (seed \(seed))")
        for p in ["#1", "#2"] {
            #expect(try await points(sb, d2, p) == (try await points(sb, d, p)), "page \(p) (seed \(seed))")
        }
        let shown = try await sb.ok("show", "nb", d2, "#2", "--json")
        #expect(shown.contains("highlighter") && shown.contains("75"), "\(shown)")
    }

    /// [XCH-8] [XCH-11] A .xopp document: its first page on PAGE (grown to hold ink past
    /// its edge), its second a new page of the file's size; text and images counted.
    @Test func xoppPagesAndCanvas() async throws {
        let sb = try Sandbox("xopp")
        defer { sb.remove() }
        try await sb.ok("init", "nb")
        let d = try await sb.ok("new", "nb")
        let xml = """
        <?xml version="1.0" standalone="no"?>
        <xournal creator="xournalpp 1.2.3" fileversion="4">
        <page width="595.27559055" height="841.88976378"><background type="solid" color="#ffffffff" style="lined"/>
        <layer><stroke tool="pen" color="#3333ccff" width="2 1 2">10 10 700 20</stroke><text font="Sans" size="12" x="1" y="1" color="#000000ff">x</text></layer></page>
        <page width="300" height="200"><layer><stroke tool="highlighter" color="#ffff0080" width="8">10 10 20 20</stroke><image left="0" top="0" right="1" bottom="1">AA</image></layer></page>
        </xournal>
        """
        try Data(try gzipped(Array(xml.utf8))).write(to: URL(fileURLWithPath: sb.sub("n.xopp")))
        let r = try await sb.run("import", "nb", d, "#1", "n.xopp", "--json")
        #expect(r.code == 0, "\(r)")
        let summary = try #require(try parseJSON(r.out) as? [String: Any])
        #expect(summary["strokes"] as? Int == 2 && summary["points"] as? Int == 4)
        #expect((summary["skipped"] as? [String: Int]) == ["image": 1, "text": 1])
        let ps = try #require(summary["pages"] as? [[String: Any]])
        #expect(ps.map { $0["created"] as? Bool } == [false, true] && ps.map { $0["grown"] as? Bool } == [true, false])
        // 700 pt + radius 1 pt (width 2 pt: radius 10 tenths) is the new width.
        #expect((ps[0]["canvas"] as? [String: Int]) == ["width": 7010, "height": 8419], "\(ps)")
        #expect(r.err.contains("grew to 701 x 841.9 pt") && r.err.contains("skipped 1 image, 1 text"), "\(r.err)")
        let rows = try await pages(sb, d)
        #expect(rows.map(\.canvas) == ["701 x 841.9", "300 x 200"] && rows.map(\.elements) == ["1", "1"], "\(rows)")
    }

    /// [IMP-10] JSON lines from a pipe, by "page": positions past the end add pages, lines
    /// without the key and without PAGE go to one new page.
    @Test func jsonLinesByPageFromStandardInput() async throws {
        let sb = try Sandbox("jsonl-pages")
        defer { sb.remove() }
        try await sb.ok("init", "nb")
        let d = try await sb.ok("new", "nb")
        try await sb.ok("page", "add", "nb", d, "--width", "100", "--height", "50")
        try sb.write("p.jsonl", """
        {"points": [[1, 1]], "page": 1}
        {"points": [[2, 2]]}
        {"points": [[3, 3]], "page": 4}
        {"points": [[4, 4]], "page": 1}

        """)
        let r = try await Subprocess.run("/bin/sh", ["-c", "cat p.jsonl | '\(lnoteBinary)' import nb \(d) - --json"], directory: sb.path)
        #expect(r.code == 0, "\(r.outText) \(r.errText)")
        let rows = try await pages(sb, d)
        // Pages 1 and 2 existed; position 4 added pages 3 and 4 (the size of the last, 100 x 50); the unkeyed line a fifth.
        #expect(rows.map(\.elements) == ["2", "0", "0", "1", "1"], "\(rows)")
        #expect(rows.dropFirst().allSatisfy { $0.canvas == "100 x 50" }, "\(rows)")
        // A page id not in the document imports nothing, creates nothing.
        try sb.write("q.jsonl", "{\"points\": [[1, 1]], \"page\": 9}\n{\"points\": [[1, 1]], \"page\": \"9A9E0000-0000-4000-8000-000000000002\"}\n")
        let bad = try await sb.run("import", "nb", d, "q.jsonl")
        #expect(bad.code == 1 && bad.err.contains("not a live page"), "\(bad)")
        #expect(try await pages(sb, d).count == 5)
    }

    /// `lnote page add` without a size takes the last page's.
    @Test func newPagesTakeTheLastPageSize() async throws {
        let sb = try Sandbox("page-size")
        defer { sb.remove() }
        try await sb.ok("init", "nb")
        let d = try await sb.ok("new", "nb")
        try await sb.ok("page", "add", "nb", d, "--width", "420", "--height", "297")
        try await sb.ok("page", "add", "nb", d)
        try await sb.ok("page", "add", "nb", d, "--height", "100")
        try await sb.ok("page", "add", "nb", d, "--first")
        let rows = try await pages(sb, d)
        #expect(rows.map(\.canvas) == ["420 x 100", "595.3 x 841.9", "420 x 297", "420 x 297", "420 x 100"], "\(rows)")
    }

    /// [XCH-1] [XCH-2] Hostile inputs: exit 1, the file and offset named, the notebook unchanged.
    @Test func hostileInputsImportNothing() async throws {
        let sb = try Sandbox("interchange-hostile")
        defer { sb.remove() }
        try await sb.ok("init", "nb")
        let d = try await sb.ok("new", "nb")
        let before = try await sb.ok("show", "nb", d, "--json", "--points")
        let head = "<ink><traceFormat><channel name=\"X\"/><channel name=\"Y\"/></traceFormat><trace>1 2, 3 4</trace>"
        let cases: [(String, String, String)] = [
            ("a.inkml", head + "<trace>1 2, 3 nan</trace></ink>", "not a number"),
            ("b.inkml", head + "<trace>1 2</trce></ink>", "malformed XML"),
            ("c.xml", "<!DOCTYPE ink [<!ENTITY a \"b\">]>" + head + "</ink>", "document type"),
            ("d.xopp", "<xournal><page width=\"10\" height=\"10\"><layer><stroke tool=\"pen\" width=\"1\">1 2 3</stroke></layer></page></xournal>", "pairs"),
            ("e.inkml", head + "<trace>1e7 2, 1e400 3</trace></ink>", "not a number"),
        ]
        for (name, text, what) in cases {
            try sb.write(name, text)
            let r = try await sb.run("import", "nb", d, name)
            #expect(r.code == 1 && r.out.isEmpty && r.err.contains(name) && r.err.contains(what) && r.err.contains("offset"), "\(r)")
        }
        let r = try await sb.run("import", "nb", d, "x.txt")
        #expect(r.code == 2 && r.err.contains("--format"), "\(r)")
        #expect(try await sb.ok("show", "nb", d, "--json", "--points") == before)
    }

    /// A deleted PAGE is refused (its canvas is not the one a live page would give), and an
    /// id that is not a live page names its line and offset.
    @Test func deletedPageAndUnknownIdsAreRefused() async throws {
        let sb = try Sandbox("import-deleted")
        defer { sb.remove() }
        try await sb.ok("init", "nb")
        let d = try await sb.ok("new", "nb")
        try await sb.ok("page", "add", "nb", d, "--width", "100", "--height", "50")
        try await sb.ok("page", "add", "nb", d, "--width", "900", "--height", "900")
        let rows = try await pages(sb, d)
        try await sb.ok("page", "remove", "nb", d, rows[1].id)
        try sb.write("a.jsonl", "{\"points\": [[1, 1]]}\n")
        let before = try await sb.ok("show", "nb", d, "--json", "--points")
        let r = try await sb.run("import", "nb", d, rows[1].id, "a.jsonl")
        #expect(r.code == 1 && r.err.contains("deleted"), "\(r)")
        #expect(try await sb.ok("show", "nb", d, "--json", "--points") == before)
        // The same id as a line's "page": the line and its offset are named.
        try sb.write("b.jsonl", "{\"points\": [[1, 1]]}\n{\"points\": [[1, 1]], \"page\": \"\(rows[1].id)\"}\n")
        let b = try await sb.run("import", "nb", d, "#1", "b.jsonl")
        #expect(b.code == 1 && b.err.contains("line 2") && b.err.contains("offset 21"), "\(b)")
        // An InkML file with no traces adds nothing, not even a page.
        try sb.write("e.inkml", "<ink><traceFormat><channel name=\"X\"/><channel name=\"Y\"/></traceFormat></ink>")
        let e = try await sb.run("import", "nb", d, "e.inkml")
        #expect(e.code == 0 && e.err.contains("nothing added") && !e.err.contains("added page"), "\(e)")
        #expect(try await sb.ok("show", "nb", d, "--json", "--points") == before)
    }

    /// A file that cannot be read says why, in the system's words; a damaged one is not sent
    /// to `lnote verify` (which checks the notebook, not the file given).
    @Test func unreadableAndDamagedImportFiles() async throws {
        let sb = try Sandbox("import-unreadable")
        defer { sb.remove() }
        try await sb.ok("init", "nb")
        let d = try await sb.ok("new", "nb")
        for name in ["missing.inkml", "missing.xopp", "missing.jsonl"] {
            let r = try await sb.run("import", "nb", d, name)
            #expect(r.code == 1 && r.err.contains(name) && r.err.contains("No such file or directory"), "\(r)")
        }
        // A gzip stream cut short and one with a flipped byte.
        let good = try gzipped(Array("<xournal><page width=\"100\" height=\"100\"><layer><stroke tool=\"pen\" color=\"#000000ff\" width=\"1\">1 2 3 4</stroke></layer></page></xournal>".utf8))
        try Data(good.prefix(good.count / 2)).write(to: URL(fileURLWithPath: sb.sub("cut.xopp")))
        var flipped = good
        flipped[good.count / 2] ^= 0xFF
        try Data(flipped).write(to: URL(fileURLWithPath: sb.sub("flipped.xopp")))
        for name in ["cut.xopp", "flipped.xopp"] {
            let r = try await sb.run("import", "nb", d, name)
            #expect(r.code == 1 && r.err.contains(name) && r.err.contains("intact copy") && !r.err.contains("lnote verify"), "\(r)")
        }
    }

    /// [XCH-1] A write that fails after others: what the import wrote is taken back (strokes
    /// erased, canvases set back, created pages deleted), and the error is reported.
    @Test func failedWriteTakesBackTheImport() async throws {
        let sb = try Sandbox("import-rollback")
        defer { sb.remove() }
        try await sb.ok("init", "nb")
        let d = try await sb.ok("new", "nb")
        let victim = try await sb.ok("page", "add", "nb", d, "--width", "100", "--height", "50")
        try sb.write("one.jsonl", "{\"points\": [[1, 1], [2, 2]]}\n")
        try await sb.ok("import", "nb", d, "#2", "one.jsonl")
        // Page 2's log made unwritable (a directory where the file was): its write fails after
        // page 1 grew (x 700 pt is past A4) and got a stroke, and after position 3 added a page.
        let logs = sb.files(under: "nb", endingWith: "/pages/\(victim).log")
        try #require(logs.count == 1, "\(logs)")
        try FileManager.default.moveItem(atPath: logs[0], toPath: sb.sub("saved.log"))
        try FileManager.default.createDirectory(atPath: logs[0], withIntermediateDirectories: false)
        try sb.write("p.jsonl", """
        {"points": [[700, 400]], "page": 1}
        {"points": [[3, 3]], "page": 3}
        {"points": [[4, 4]], "page": 2}

        """)
        let r = try await sb.run("import", "nb", d, "p.jsonl")
        #expect(r.code == 1 && r.out.isEmpty && r.err.contains(victim) && !r.err.contains("could not take back"), "\(r)")
        // It says what was taken back: never that nothing changed.
        #expect(r.err.contains("taken back (1 strokes erased, 1 canvases set back, 1 new pages deleted)")
                && !r.err.contains("nothing already stored"), "\(r)")
        try FileManager.default.removeItem(atPath: logs[0])
        try FileManager.default.moveItem(atPath: sb.sub("saved.log"), toPath: logs[0])
        // Page 1 as it was (A4, no element), page 2 as it was, the page made for position 3 deleted.
        let rows = try await pages(sb, d)
        #expect(rows.map(\.canvas) == ["595.3 x 841.9", "100 x 50"] && rows.map(\.elements) == ["0", "1"], "\(rows)")
        let shown = try await sb.ok("show", "nb", d)
        #expect(shown.contains("1 deleted"), "\(shown)")
        let after = try #require(try parseJSON(try await sb.ok("show", "nb", d, "#1", "--json", "--points")) as? [String: Any])
        #expect((after["elements"] as? [Any])?.isEmpty == true, "\(after)")
    }

    func gzipped(_ input: [UInt8]) throws -> [UInt8] {
        var stream = z_stream()
        guard deflateInit2_(&stream, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY, ZLIB_VERSION,
                            Int32(MemoryLayout<z_stream>.size)) == Z_OK else { throw LnoteError(.io, "deflateInit2") }
        defer { deflateEnd(&stream) }
        var out = [UInt8](repeating: 0, count: Int(deflateBound(&stream, UInt(input.count))) + 64)
        let n: Int = try input.withUnsafeBufferPointer { inp in
            try out.withUnsafeMutableBufferPointer { o in
                stream.next_in = UnsafeMutablePointer(mutating: inp.baseAddress)
                stream.avail_in = UInt32(inp.count)
                stream.next_out = o.baseAddress
                stream.avail_out = UInt32(o.count)
                guard deflate(&stream, Z_FINISH) == Z_STREAM_END else { throw LnoteError(.io, "deflate") }
                return o.count - Int(stream.avail_out)
            }
        }
        return Array(out[0..<n])
    }
}
