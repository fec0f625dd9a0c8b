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

    /// [XCH-3] [XCH-6] A resolution channel property for unitless channels (1000 per inch: 1000
    /// is 72 pt), seconds for T (0.5025 ⊗ 1000 is 502.49999999999994: 502 ms),
    /// loose traces before a page group going to the first page, nested groups, a canvas.
    @Test func resolutionPagesAndSeconds() throws {
        let text = """
        <ink xmlns="http://www.w3.org/2003/InkML">
          <definitions><context xml:id="c"><inkSource>
            <traceFormat><channel name="X"/><channel name="Y"/><channel name="T" units="s"/></traceFormat>
            <channelProperties><channelProperty channel="X" name="resolution" value="1000" units="1/in"/>
              <channelProperty channel="Y" name="resolution" value="10" units="1/pt"/></channelProperties>
          </inkSource></context></definitions>
          <trace contextRef="#c">1000 15 0.5, 500 25 0.5025</trace>
          <traceGroup><annotation type="page">one</annotation><annotation type="canvas">100 50.05</annotation>
            <traceGroup><trace contextRef="#c">1000 10 0</trace></traceGroup></traceGroup>
          <traceGroup><annotation type="page">two</annotation></traceGroup>
        </ink>
        """
        let ink = try InkMLReader.read(Array(text.utf8), path: "r.inkml")
        #expect(describe(ink) == """
        page 1 given -
        stroke pen #000000ff 20 [[720, 15, 500, 10, 0], [360, 25, 500, 10, 2]]
        page 2 new 1000x501
        stroke pen #000000ff 20 [[720, 10, 500, 10, 0]]
        page 3 new -

        """)
    }

    /// [XCH-5] A trace's context is its own contextRef's, else that of the nearest enclosing
    /// traceGroup with a contextRef, else the current one; its trace format gives the
    /// channels, its brush the ink unless the trace or a group names one.
    @Test func traceGroupContext() throws {
        let text = """
        <ink xmlns="http://www.w3.org/2003/InkML">
          <definitions>
            <brush xml:id="red"><brushProperty name="color" value="#ff0000"/></brush>
            <brush xml:id="blue"><brushProperty name="color" value="#0000ff"/></brush>
            <context xml:id="f" brushRef="#red"><traceFormat><channel name="X"/><channel name="Y"/>
              <channel name="F" max="2"/></traceFormat></context>
            <context xml:id="t"><traceFormat><channel name="X"/><channel name="Y"/><channel name="T"/></traceFormat></context>
          </definitions>
          <traceGroup contextRef="#f">
            <trace>1 2 1</trace>
            <traceGroup brushRef="#blue"><trace>3 4 2</trace></traceGroup>
            <traceGroup><trace contextRef="#t">5 6 0, 7 8 4</trace></traceGroup>
          </traceGroup>
          <trace>9 10</trace>
        </ink>
        """
        let ink = try InkMLReader.read(Array(text.utf8), path: "g.inkml")
        #expect(describe(ink) == """
        page 1 given -
        stroke pen #ff0000ff 20 [[10, 20, 500, 10, 0]]
        stroke pen #0000ffff 20 [[30, 40, 1000, 15, 0]]
        stroke pen #000000ff 20 [[50, 60, 500, 10, 0], [70, 80, 500, 10, 4]]
        stroke pen #000000ff 20 [[90, 100, 500, 10, 0]]

        """)
        do {
            _ = try InkMLReader.read(Array("<ink><traceGroup contextRef=\"#nope\"><trace>1 2</trace></traceGroup></ink>".utf8), path: "n.inkml")
            Issue.record("a traceGroup contextRef naming no context was accepted")
        } catch let e as LnoteError {
            #expect(e.code == .invalidArgument && e.message.contains("names no context"), "\(e)")
        }
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

    /// [XCH-2] A CDATA section is character data: points in one, or split across one and the
    /// text around it, are all read, in InkML and in .xopp.
    @Test func cdataIsCharacterData() throws {
        let inkml = try InkMLReader.read(Array("<ink><trace>1 2<![CDATA[, 3 4]]>, 5 6</trace><trace><![CDATA[7 8, 9 10]]></trace></ink>".utf8))
        #expect(inkml.pages.flatMap(\.strokes).map(\.points.count) == [3, 2])
        #expect(inkml.pages.flatMap(\.strokes).first?.points.map(\.x) == [10, 30, 50])
        let xopp = try XoppReader.read(Array(("<xournal><page width=\"100\" height=\"100\"><layer>"
            + "<stroke width=\"1\" color=\"black\">1 1 <![CDATA[2 2]]> 3 3</stroke>"
            + "<stroke width=\"1\" color=\"black\"><![CDATA[4 4 5 5]]></stroke></layer></page></xournal>").utf8))
        #expect(xopp.pages.flatMap(\.strokes).map(\.points.count) == [3, 2])
        #expect(xopp.pages.flatMap(\.strokes).first?.points.map(\.y) == [10, 20, 30])
    }
}
