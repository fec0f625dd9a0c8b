import Foundation
import Testing
import LnoteModel
@testable import LnoteInterchange

/// Protocol/interchange.md's worked examples, read out of the spec: each input gives
/// exactly the quantized points the spec lists.
@Suite("Interchange: the spec's vectors")
struct InterchangeVectorTests {
    /// [XCH-3] [XCH-4] [XCH-5] [XCH-6] The InkML example: millimetres, difference prefixes,
    /// a force channel with a maximum, unknown values, a brush.
    @Test func inkmlExample() throws {
        let input = try specVector("inkml-example", in: "interchange.md")
        let expected = try specVector("inkml-points", in: "interchange.md")
        let ink = try InkMLReader.read(Array(input.utf8), path: "example.inkml")
        #expect(describe(ink) == expected)
    }

    /// [XCH-7] [XCH-8] The .xopp example, gzip-compressed as Xournal++ writes it, and as plain XML.
    @Test func xoppExample() throws {
        let input = try specVector("xopp-example", in: "interchange.md")
        let expected = try specVector("xopp-points", in: "interchange.md")
        let gz = try gzip(Array(input.utf8))
        #expect(Gzip.isGzip(gz))
        #expect(describe(try XoppReader.read(gz, path: "example.xopp")) == expected)
        #expect(describe(try XoppReader.read(Array(input.utf8), path: "example.xopp")) == expected)
    }

    /// [IMP-10] JSON lines split by "page": positions and ids, lines without the key to the
    /// page the command names, pages in the order their first line comes.
    @Test func jsonLinesPages() throws {
        let input = try specVector("import-pages", in: "import-jsonl.md")
        let dir = try TempDir()
        defer { dir.remove() }
        let path = try dir.file("p.jsonl", Array(input.utf8))
        let ink = try JSONLinesReader.read(contentsOf: path)
        #expect(ink.pages.map(\.target) == [.given, .position(3), .id(PageID("9A9E0000-0000-4000-8000-000000000002")!), .position(1)])
        #expect(ink.pages.map(\.strokes.count) == [2, 1, 1, 1])
        // [IMP-10] What "page" may not be: a fraction, an exponent, 0, a negative number, a
        // position past the limit, a string that is not a page id.
        for bad in ["1.0", "1e1", "0", "-1", "10001", "\"p1\"", "\"9A9E0000\""] {
            let p = try dir.file("bad.jsonl", Array("{\"points\": [[0, 0]]}\n{\"points\": [[0, 0]], \"page\": \(bad)}\n".utf8))
            #expect(throws: LnoteError(.invalidArgument), "\(bad)") { try JSONLinesReader.read(contentsOf: p) }
            do { _ = try JSONLinesReader.read(contentsOf: p) } catch let e as LnoteError {
                #expect(e.index == 2 && e.offset == 21 && e.path == p && e.message.hasPrefix("line 2: \"page\""), "\(bad): \(e)")
            }
        }
    }
}
