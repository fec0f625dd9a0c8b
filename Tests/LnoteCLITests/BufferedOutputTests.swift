import Foundation
import Testing
import LnoteModel
import LnoteStore
import LnoteTestSupport

/// `lnote`'s standard output is buffered (one `write(2)` per 64 KiB, flushed at exit and before
/// anything goes to stderr): output many times the buffer's size comes out whole and in order.
@Suite struct BufferedOutputTests {
    /// A page of `strokes` generated strokes, made through the library; its document id, page
    /// id and state.
    static func page(_ sb: Sandbox, strokes: Int, seed: UInt64) async throws -> (doc: String, page: String, state: PageState) {
        var o = StoreOptions()
        o.autosave = false
        let nb = try await Notebook.open(at: sb.sub("nb"), create: true, options: o)
        let d = try await nb.createDocument(title: "many points")
        let p = await d.pageList[0].id
        var gen = HandwritingGenerator(seed: seed)
        _ = try await d.addStrokes(gen.strokes(strokes), to: p)
        let state = try await d.pageState(p)
        try await nb.close()
        return (d.id.description, p.description, state)
    }

    @Test func showPointsOfALargePagePrintsEveryPointOnceInOrder() async throws {
        let seed = UInt64.random(in: 0...UInt64(UInt32.max))
        let sb = try Sandbox("buffered")
        defer { sb.remove() }
        let (doc, page, state) = try await Self.page(sb, strokes: 400, seed: seed)
        let r = try await sb.run("show", "nb", doc, page, "--points")
        #expect(r.code == 0, "\(r) (seed \(seed))")
        #expect(r.out.utf8.count > 4 * 64 * 1024, "the output spans several buffers (seed \(seed))")
        #expect(r.out.hasSuffix("\n"), "the last line is written whole at exit (seed \(seed))")
        // Every point line, in element order: the same count, and each stroke's points in order
        // (their times never go back within a stroke).
        let pointLines = r.lines.filter { $0.hasPrefix("    ") }
        let expected = state.elements.reduce(0) { n, e in
            if case .stroke(let s) = e.content { return n + s.points.count }
            return n
        }
        #expect(pointLines.count == expected, "\(pointLines.count) point lines for \(expected) points (seed \(seed))")
        #expect(pointLines.allSatisfy { $0.split(separator: " ").count == 5 }, "a point line was cut (seed \(seed))")
        // Each line says what the point is: x, y, radius in points (one decimal at most), the
        // pressure as Swift prints it, the time in ms.
        func pt(_ q: Int32) -> String {
            let a = abs(Int64(q))
            return (q < 0 ? "-" : "") + String(a / 10) + (a % 10 == 0 ? "" : "." + String(a % 10))
        }
        let described = state.elements.flatMap { e -> [String] in
            guard case .stroke(let s) = e.content else { return [] }
            return s.points.map { "    \(pt($0.x)) \(pt($0.y)) \(Double($0.pressure) / 1000) \(pt($0.radius)) \($0.t)" }
        }
        #expect(pointLines == described, "seed \(seed)")
        // Two runs print the same bytes.
        let again = try await sb.run("show", "nb", doc, page, "--points")
        #expect(again.out == r.out, "seed \(seed)")
    }

    /// Standard output that cannot be written (a full disk: /dev/full) ends the command with
    /// exit 1 and a message on stderr, not a trap; what the command did stays done, once.
    @Test func unwritableStandardOutputIsAFailureNotACrash() async throws {
        let sb = try Sandbox("fulloutput")
        defer { sb.remove() }
        try await sb.ok("init", "nb")
        let doc = try await sb.ok("new", "nb")
        try sb.write("one.jsonl", "{\"points\": [[1, 1, 0, 0.5], [3, 3, 8, 0.5]]}\n")
        for args in [["ls", "nb"], ["import", "nb", doc, "p1", "one.jsonl"], ["verify", "nb"]] {
            let r = try await Subprocess.run("/bin/sh", ["-c", "exec \"$0\" \"$@\" > /dev/full", lnoteBinary] + args, directory: sb.path)
            #expect(r.code == 1, "\(args): exit \(r.code), stderr \(r.errText)")
            #expect(r.errText.contains("standard output could not be written (No space left on device)"), "\(args): \(r.errText)")
            #expect(!r.errText.contains("Fatal error"), "\(args): \(r.errText)")
        }
        // The import was made once (its ids were what could not be printed).
        let shown = try await sb.ok("show", "nb", doc, "p1", "--json")
        #expect(shown.components(separatedBy: "\"id\"").count - 1 == 1, "\(shown)")
    }
}
