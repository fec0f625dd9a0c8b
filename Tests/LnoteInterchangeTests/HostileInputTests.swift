import Foundation
import Testing
import LnoteModel
@testable import LnoteInterchange

/// [XCH-1] [XCH-2] [XCH-7] Bad input: a typed error naming the file and a byte
/// offset inside it, never a crash; nothing comes back for the caller to store.
@Suite("Interchange: hostile inputs")
struct HostileInputTests {
    static let head = "<ink xmlns=\"http://www.w3.org/2003/InkML\"><traceFormat><channel name=\"X\"/><channel name=\"Y\"/><channel name=\"F\"/></traceFormat>"

    func inkmlError(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) -> LnoteError? {
        do {
            _ = try InkMLReader.read(Array(text.utf8), path: "bad.inkml")
            Issue.record("accepted: \(text.prefix(200))", sourceLocation: sourceLocation)
            return nil
        } catch let e as LnoteError {
            #expect(e.path == "bad.inkml", sourceLocation: sourceLocation)
            #expect(e.offset.map { $0 >= 0 && $0 <= text.utf8.count } == true, "\(e)", sourceLocation: sourceLocation)
            return e
        } catch {
            Issue.record("untyped error \(error)", sourceLocation: sourceLocation)
            return nil
        }
    }

    /// Malformed XML: the parser's fault, at the byte where it is.
    @Test func malformedXML() throws {
        let text = Self.head + "<trace>1 2 0.5</trace>\n<trace>3 4 0.5</trac></ink>"
        let e = try #require(inkmlError(text))
        #expect(e.code == .invalidArgument && e.message.contains("malformed XML at line 2"), "\(e)")
        let line2 = Array(text.utf8).firstIndex(of: 0x0A)! + 1
        #expect(e.offset! > line2 && e.offset! <= text.utf8.count, "\(e)")
        #expect(inkmlError("<ink><trace>1 2")?.code == .invalidArgument)
        // Cut off after a whole element: said as such (libxml2's words say "Extra content").
        for cut in [Self.head + "<trace>1 2 0.5</trace>", Self.head + "<trace>1 2 0.5</trace>\n"] {
            let e = try #require(inkmlError(cut))
            #expect(e.message.contains("ends inside an element") && e.offset == cut.utf8.count, "\(e)")
        }
        #expect(inkmlError("")?.code == .invalidArgument)
        #expect(inkmlError("<notink/>")?.message.contains("no <ink>") == true)
    }

    /// [XCH-2] Well-formed or nothing: what follows the root element (text, a second root), an
    /// undeclared entity and a repeated attribute are refused with libxml2's words, at the
    /// byte where the parser found them (a byte order mark counted); in InkML and in .xopp.
    @Test func onlyOneRootAndNothingAfter() throws {
        let body = Self.head + "<trace>1 2 0.5</trace></ink>"
        for (tail, words) in [("garbage", "Extra content"), ("<ink/>", "Extra content"), ("\n<!-- fine -->\n<x>", "Extra content")] {
            for bom in ["", "\u{FEFF}"] {
                let text = bom + body + tail
                let e = try #require(inkmlError(text), "\(tail)")
                #expect(e.code == .invalidArgument && e.message.contains("malformed XML") && e.message.contains(words), "\(tail): \(e)")
                let tailAt = (bom + body).utf8.count + (tail.hasPrefix("\n") ? "\n<!-- fine -->\n".utf8.count : 0)
                #expect(e.offset == tailAt, "\(tail) (bom \(!bom.isEmpty)): \(e), the extra content at \(tailAt)")
            }
        }
        // Comments, processing instructions and white space after the root are allowed.
        #expect(try InkMLReader.read(Array((body + "\n<!-- c --><?pi x?>  \n").utf8), path: "ok.inkml").pages.count == 1)
        let undeclared = try #require(inkmlError(Self.head + "<trace>1 2 0.5&nope;</trace></ink>"))
        #expect(undeclared.message.contains("nope"), "\(undeclared)")
        let twice = try #require(inkmlError(Self.head + "<trace id=\"a\" id=\"b\">1 2 0.5</trace></ink>"))
        #expect(twice.message.contains("redefined"), "\(twice)")
        let xopp = "<?xml version=\"1.0\"?><xournal><page width=\"612\" height=\"792\"><layer>"
            + "<stroke tool=\"pen\" color=\"#000000ff\" width=\"1\">1 2 3 4</stroke></layer></page></xournal>"
        do {
            _ = try XoppReader.read(Array((xopp + "<xournal/>").utf8), path: "two.xopp")
            Issue.record("a second root accepted in .xopp")
        } catch let e as LnoteError {
            #expect(e.path == "two.xopp" && e.offset == xopp.utf8.count && e.message.contains("Extra content"), "\(e)")
        }
        #expect(try XoppReader.read(Array(xopp.utf8), path: "one.xopp").pages.count == 1)
    }

    /// [XCH-2] Entities: a "billion laughs" document is refused before it is parsed, at the
    /// offset of its declaration.
    @Test func documentTypeRefused() throws {
        var text = "<?xml version=\"1.0\"?>\n<!DOCTYPE ink [<!ENTITY a \"aaaaaaaaaa\">"
        for i in 1..<10 { text += "<!ENTITY \(Character(Unicode.Scalar(97 + i)!)) \"" + String(repeating: "&\(Character(Unicode.Scalar(96 + i)!));", count: 10) + "\">" }
        text += "]>\n<ink><trace>&j;</trace></ink>"
        let e = try #require(inkmlError(text))
        #expect(e.offset == 22 && e.message.contains("document type"), "\(e)")
    }

    /// NaN, infinities, hex floats and numbers beyond binary64 are not numbers; a pressure
    /// outside 0…1 and a difference with nothing before are refused; each at its byte.
    @Test func badValues() throws {
        for bad in ["nan", "inf", "-infinity", "0x1p3", "1e400", "1..2", "--1", "1e", "abc"] {
            let text = Self.head + "<trace>1 2 0.5, 3 \(bad) 0.5</trace></ink>"
            let e = try #require(inkmlError(text), "\(bad)")
            #expect(e.code == .invalidArgument && e.index == 1 && e.message.hasPrefix("trace 1: point 1"), "\(bad): \(e)")
            // The offset is the value's byte: the trace's text starts after "<trace>".
            let valueAt = text.utf8.count - "\(bad) 0.5</trace></ink>".utf8.count
            #expect(e.offset == valueAt, "\(bad): \(e) (value at \(valueAt))")
        }
        #expect(inkmlError(Self.head + "<trace>1 2 1.5</trace></ink>")?.message.contains("pressure") == true)
        #expect(inkmlError(Self.head + "<trace>'1 2 0.5</trace></ink>")?.message.contains("difference") == true)
        #expect(inkmlError(Self.head + "<trace>1 2</trace></ink>")?.message.contains("2 values for 3 channels") == true)
        #expect(inkmlError(Self.head + "<trace>1 2 0.5 4</trace></ink>")?.message.contains("more values") == true)
        #expect(inkmlError(Self.head + "<trace>1e7 2 0.5, 10000000.05 1 0</trace></ink>")?.message.contains("out of range") == true)
        #expect(inkmlError(Self.head + "<trace contextRef=\"#nope\">1 2 0.5</trace></ink>")?.message.contains("names no context") == true)
    }

    /// [XCH-4] Difference prefixes give what explicit values give.
    @Test func differencePrefixes() throws {
        let explicit = Self.head + "<trace>10 20 0.5, 11 19.5 0.6, 12 19 0.7, 12.5 18 0.7</trace></ink>"
        let diffs = Self.head + "<trace>10 20 0.5, '1'-0.5'0.1, \"0\"0\"0, !12.5!18!0.7</trace></ink>"
        let a = try InkMLReader.read(Array(explicit.utf8)), b = try InkMLReader.read(Array(diffs.utf8))
        #expect(a.pages[0].strokes[0].points == b.pages[0].strokes[0].points)
    }

    /// [XCH-7] A gzip bomb: refused once the output passes the limit, before more is held;
    /// a cut or corrupted file is an error at its offset.
    @Test func gzipBombAndDamage() throws {
        let zeros = [UInt8](repeating: 0x20, count: 4 << 20)
        let bomb = try gzip(Array("<xournal><page width=\"1\" height=\"1\"><layer>".utf8) + zeros)
        #expect(bomb.count < 10_000)
        do {
            _ = try XoppReader.read(bomb, path: "bomb.xopp", inflateLimit: 1 << 20)
            Issue.record("bomb accepted")
        } catch let e as LnoteError {
            #expect(e.code == .limitExceeded && e.path == "bomb.xopp" && (e.offset ?? -1) > 0 && e.offset! <= bomb.count, "\(e)")
        }
        let good = try gzip(Array("<xournal><page width=\"10\" height=\"10\"><layer><stroke tool=\"pen\" color=\"black\" width=\"1\">1 2 3 4</stroke></layer></page></xournal>".utf8))
        #expect(try XoppReader.read(good).strokeCount == 1)
        #expect(throws: LnoteError(.truncated)) { try XoppReader.read(Array(good.prefix(good.count / 2)), path: "cut.xopp") }
        var flipped = good
        flipped[12] ^= 0xFF
        // [XCH-7] Data zlib refuses is `corrupt`, at an offset inside the file.
        do {
            _ = try XoppReader.read(flipped, path: "flipped.xopp")
            Issue.record("a damaged gzip stream was accepted")
        } catch let e as LnoteError {
            #expect(e.code == .corrupt && e.path == "flipped.xopp" && e.offset.map { $0 <= flipped.count } == true, "\(e)")
        }
        do {
            _ = try XoppReader.read(Array(good.prefix(good.count / 2)), path: "cut.xopp")
            Issue.record("a cut gzip stream was accepted")
        } catch let e as LnoteError {
            #expect(e.code == .truncated && e.path == "cut.xopp" && e.offset != nil, "\(e)")
        }
    }

    /// .xopp faults: widths that do not match the points, odd coordinates, NaN, a stroke outside a page.
    @Test func xoppFaults() throws {
        func error(_ body: String) -> LnoteError? {
            let text = "<xournal><page width=\"100\" height=\"100\"><layer>\(body)</layer></page></xournal>"
            do { _ = try XoppReader.read(Array(text.utf8), path: "x.xopp"); Issue.record("accepted \(body)"); return nil } catch let e as LnoteError {
                #expect(e.path == "x.xopp" && e.offset != nil, "\(e)")
                return e
            } catch { Issue.record("\(error)"); return nil }
        }
        #expect(error("<stroke tool=\"pen\" color=\"#000000ff\" width=\"1 1 1 1 1\">1 2 3 4</stroke>")?.message.contains("4 point widths for 2 points") == true)
        #expect(error("<stroke tool=\"pen\" color=\"#000000ff\" width=\"1\">1 2 3</stroke>")?.message.contains("x y pairs") == true)
        #expect(error("<stroke tool=\"pen\" color=\"#000000ff\" width=\"1\">1 2 nan 4</stroke>")?.message.contains("not a number") == true)
        #expect(error("<stroke tool=\"pen\" color=\"#000000ff\" width=\"inf\">1 2 3 4</stroke>")?.message.contains("width") == true)
        #expect(error("<stroke tool=\"pen\" color=\"chartreuse\" width=\"1\">1 2 3 4</stroke>")?.message.contains("color") == true)
        #expect(throws: LnoteError(.invalidArgument)) {
            try XoppReader.read(Array("<xournal><stroke tool=\"pen\" width=\"1\">1 2</stroke></xournal>".utf8))
        }
    }

    /// [XCH-2] Bytes that are not UTF-8 anywhere (a comment, before the root, a CDATA
    /// section, a truncated, overlong, surrogate or out-of-range sequence): refused before
    /// parsing at the offset of the first bad byte, in InkML and in .xopp; the parser, which
    /// trapped on some of them inside comments, never sees them. Well-formed multi-byte text in
    /// a comment is read.
    @Test func notUTF8Anywhere() throws {
        let bad: [(String, [UInt8])] = [
            ("0xff in a comment", [0xFF]), ("a truncated sequence", [0xE2, 0x82]), ("an overlong form", [0xC0, 0xAF]),
            ("a surrogate", [0xED, 0xA0, 0x80]), ("past U+10FFFF", [0xF4, 0x90, 0x80, 0x80]), ("a lone continuation byte", [0x80]),
        ]
        for (what, bytes) in bad {
            for (prefix, suffix) in [("<ink><!--", "--><trace>1 2</trace></ink>"), ("<!--", "--><ink><trace>1 2</trace></ink>"),
                                     ("<ink><trace>1 2<![CDATA[", "]]></trace></ink>")] {
                let text = Array(prefix.utf8) + bytes + Array(suffix.utf8)
                do {
                    _ = try InkMLReader.read(text, path: "u.inkml")
                    Issue.record("accepted \(what) after \(prefix)")
                } catch let e as LnoteError {
                    #expect(e.code == .invalidArgument && e.path == "u.inkml" && e.offset == prefix.utf8.count, "\(what) after \(prefix): \(e)")
                    #expect(e.message.contains("UTF-8"), "\(e)")
                }
            }
            let xopp = Array("<xournal><!--".utf8) + bytes + Array("--><page width=\"9\" height=\"9\"><layer/></page></xournal>".utf8)
            #expect(throws: LnoteError(.invalidArgument), "\(what) in a .xopp comment") { try XoppReader.read(xopp, path: "u.xopp") }
        }
        let fine = try InkMLReader.read(Array("<ink><!-- é € 𝄞 --><trace>1 2</trace></ink>".utf8), path: "ok.inkml")
        #expect(fine.pointCount == 1)
        #expect(XMLInput.firstInvalidUTF8(Array("aé€𝄞".utf8) + [0xF0, 0x9D, 0x84]) == 10)
    }

    /// [IMP-7] [IMP-9] A 10 MB line whose fault is at its end: the error names the line, its
    /// offset and the file; nothing is returned.
    @Test func tenMegabyteLine() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let first = "{\"points\": [[0, 0]], \"page\": 2}\n"
        let long = "{\"note\": \"" + String(repeating: "x", count: 10 << 20) + "\", \"points\": [[1, 2, 3, NaN]]}\n"
        let path = try dir.file("long.jsonl", Array((first + long).utf8))
        do {
            _ = try JSONLinesReader.read(contentsOf: path)
            Issue.record("accepted")
        } catch let e as LnoteError {
            #expect(e.code == .invalidArgument && e.index == 2 && e.offset == first.utf8.count && e.path == path, "\(e)")
        }
    }
}
