import Foundation
import Testing
import LnoteModel
@testable import LnoteInterchange

/// [XCH-12] [IMP-11] What one import may hold (pages, strokes, points), [XCH-2] UTF-8 only,
/// and errors at the byte of the fault.
@Suite("Interchange: import limits and offsets")
struct ImportLimitTests {
    func error(_ body: () throws -> Any, sourceLocation: SourceLocation = #_sourceLocation) -> LnoteError? {
        do {
            _ = try body()
            Issue.record("accepted", sourceLocation: sourceLocation)
            return nil
        } catch let e as LnoteError {
            return e
        } catch {
            Issue.record("untyped error \(error)", sourceLocation: sourceLocation)
            return nil
        }
    }

    func offset(of needle: String, in text: String, occurrence: Int = 1) -> Int {
        let hay = Array(text.utf8), n = Array(needle.utf8)
        var seen = 0
        for i in 0...(hay.count - n.count) where hay[i..<(i + n.count)].elementsEqual(n) {
            seen += 1
            if seen == occurrence { return i }
        }
        return -1
    }

    /// [XCH-6] [XCH-8] 10,000 pages are read; the 10,001st is refused at its element.
    @Test func pagesPerImport() throws {
        let page = "<page width=\"1\" height=\"1\"></page>"
        let ok = "<xournal>" + String(repeating: page, count: ImportBudget.maxPages) + "</xournal>"
        #expect(try XoppReader.read(Array(ok.utf8)).pages.count == ImportBudget.maxPages)
        let bad = "<xournal>" + String(repeating: page, count: ImportBudget.maxPages + 1) + "</xournal>"
        let e = try #require(error { try XoppReader.read(Array(bad.utf8), path: "p.xopp") })
        let at = offset(of: "<page", in: bad, occurrence: ImportBudget.maxPages + 1)
        #expect(e.code == .limitExceeded && e.path == "p.xopp" && e.message.contains("10001"), "\(e)")
        #expect(e.offset == at, "\(e) (page at \(at))")

        let group = "<traceGroup><annotation type=\"page\">p</annotation></traceGroup>"
        let ink = "<ink>" + String(repeating: group, count: ImportBudget.maxPages + 1) + "</ink>"
        let f = try #require(error { try InkMLReader.read(Array(ink.utf8), path: "p.inkml") })
        let gat = offset(of: "<traceGroup", in: ink, occurrence: ImportBudget.maxPages + 1)
        #expect(f.code == .limitExceeded && f.path == "p.inkml", "\(f)")
        #expect(f.offset == gat, "\(f) (group at \(gat))")
    }

    /// [XCH-12] [IMP-11] The stroke and point budget, at the stroke (or line) that passes it.
    @Test func strokeAndPointBudget() throws {
        let head = "<ink><traceFormat><channel name=\"X\"/><channel name=\"Y\"/></traceFormat>"
        let ink = head + "<trace>1 2, 3 4</trace><trace>1 2, 3 4</trace><trace>5 6, 7 8</trace></ink>"
        let third = offset(of: "5 6", in: ink)
        let e = try #require(error { try InkMLReader.read(Array(ink.utf8), path: "b.inkml", budget: ImportBudget(strokeLimit: 2)) })
        #expect(e.code == .limitExceeded && e.offset == third && e.message.contains("more than 2 strokes"), "\(e)")
        let p = try #require(error { try InkMLReader.read(Array(ink.utf8), path: "b.inkml", budget: ImportBudget(pointLimit: 5)) })
        #expect(p.code == .limitExceeded && p.offset == third && p.message.contains("more than 5 points"), "\(p)")
        #expect(try InkMLReader.read(Array(ink.utf8), budget: ImportBudget(strokeLimit: 3, pointLimit: 6)).strokeCount == 3)

        let xopp = "<xournal><page width=\"9\" height=\"9\"><layer><stroke width=\"1\">1 2</stroke><stroke width=\"1\">3 4</stroke></layer></page></xournal>"
        let x = try #require(error { try XoppReader.read(Array(xopp.utf8), path: "b.xopp", budget: ImportBudget(strokeLimit: 1)) })
        #expect(x.code == .limitExceeded && x.offset == offset(of: "3 4", in: xopp), "\(x)")

        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("lnote-budget-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("b.jsonl").path
        let lines = "{\"points\": [[1, 2]]}\n{\"points\": [[1, 2], [3, 4]]}\n{\"points\": [[5, 6]]}\n"
        try Data(lines.utf8).write(to: URL(fileURLWithPath: file))
        let j = try #require(error { try JSONLinesReader.read(contentsOf: file, budget: ImportBudget(pointLimit: 3)) })
        #expect(j.code == .limitExceeded && j.index == 3 && j.offset == offset(of: "{", in: lines, occurrence: 3), "\(j)")
        #expect(try JSONLinesReader.read(contentsOf: file, budget: ImportBudget(strokeLimit: 3, pointLimit: 4)).strokeCount == 3)
    }

    /// [XCH-2] UTF-16 (with a document type declaration that a UTF-8 byte search cannot
    /// see), UTF-32, EBCDIC, NUL bytes and other declared encodings are refused.
    @Test func onlyUTF8() throws {
        let dtd = "<?xml version=\"1.0\" encoding=\"UTF-16\"?><!DOCTYPE ink [<!ENTITY a \"aaaa\">]><ink><trace>&a;</trace></ink>"
        let utf16le: [UInt8] = [0xFF, 0xFE] + dtd.utf16.flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] }
        let utf16be: [UInt8] = dtd.utf16.flatMap { [UInt8($0 >> 8), UInt8($0 & 0xFF)] }
        for (name, bytes) in [("utf-16le", utf16le), ("utf-16be", utf16be), ("ebcdic", [0x4C, 0x6F, 0xA7, 0x94, 0x40] as [UInt8])] {
            let e = try #require(error { try InkMLReader.read(bytes, path: "u.inkml") }, "\(name)")
            #expect(e.code == .invalidArgument && e.message.contains("not UTF-8") && e.offset != nil, "\(name): \(e)")
        }
        let latin = "<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?><ink/>"
        let l = try #require(error { try InkMLReader.read(Array(latin.utf8), path: "l.inkml") })
        #expect(l.code == .invalidArgument && l.offset == offset(of: "ISO", in: latin), "\(l)")
        let nul = "<ink>\u{0}</ink>"
        #expect(error { try InkMLReader.read(Array(nul.utf8)) }?.offset == 5)
        let fine = "\u{FEFF}<?xml version='1.0' encoding='utf-8'?><ink><trace>1 2</trace></ink>"
        #expect(try InkMLReader.read(Array(fine.utf8)).strokeCount == 1)
    }

    /// [XCH-2] The second line of defence: the delegate refuses a declaration the byte
    /// search did not see (driven here without the byte checks). Foundation on Linux tells
    /// the delegate of element, attribute-list, notation and unparsed-entity declarations, not
    /// of internal entities: the UTF-8 rule is what makes the byte search hold.
    @Test func delegateRefusesDeclarations() throws {
        let text = "<!DOCTYPE ink [<!ELEMENT ink ANY><!ENTITY a \"aaaa\">]><ink><trace>&a;</trace></ink>"
        let input = XMLInput(unchecked: Array(text.utf8), path: "d.inkml")
        let handler = InkMLHandler(style: InkStyle())
        let e = try #require(error { try input.parse(handler) })
        #expect(e.code == .invalidArgument && e.message.contains("declaration"), "\(e)")
    }

    /// Quantization faults at the point's byte; widths over 10,000 pt at the attribute.
    @Test func faultOffsets() throws {
        let head = "<ink><traceFormat><channel name=\"X\"/><channel name=\"Y\"/></traceFormat>"
        let ink = head + "<trace>1 2, 3 4, 10000000.05 5</trace></ink>"
        let e = try #require(error { try InkMLReader.read(Array(ink.utf8), path: "q.inkml") })
        #expect(e.message.contains("out of range") && e.offset == offset(of: "10000000.05", in: ink), "\(e)")
        let xopp = "<xournal><page width=\"9\" height=\"9\"><layer><stroke width=\"1\">1 2 3 4 5 20000000</stroke></layer></page></xournal>"
        let x = try #require(error { try XoppReader.read(Array(xopp.utf8), path: "q.xopp") })
        #expect(x.message.contains("out of range") && x.offset == offset(of: "5 2000", in: xopp), "\(x)")

        let wide = "<xournal><page width=\"9\" height=\"9\"><layer><stroke tool=\"pen\" width=\"10000.1\">1 2</stroke></layer></page></xournal>"
        let w = try #require(error { try XoppReader.read(Array(wide.utf8), path: "w.xopp") })
        #expect(w.code == .invalidArgument && w.offset == offset(of: "width=\"10000.1", in: wide) && w.message.contains("10000 pt"), "\(w)")
        #expect(try XoppReader.read(Array(wide.replacingOccurrences(of: "10000.1", with: "10000").utf8)).strokeCount == 1)
        let brush = "<ink><brush xml:id=\"b\"><brushProperty name=\"width\" value=\"354\" units=\"cm\"/></brush><trace brushRef=\"#b\">1 2</trace></ink>"
        let b = try #require(error { try InkMLReader.read(Array(brush.utf8), path: "w.inkml") })
        #expect(b.code == .invalidArgument && b.offset == offset(of: "value=\"354", in: brush), "\(b)")
    }

    /// [IMP-10] A string is a page id, never a position: `"3"` is refused at its line.
    @Test func pageStringIsNotAPosition() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("lnote-pagekind-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("p.jsonl").path
        let lines = "{\"points\": [[1, 2]], \"page\": 3}\n{\"points\": [[1, 2]], \"page\": \"3\"}\n"
        try Data(lines.utf8).write(to: URL(fileURLWithPath: file))
        let e = try #require(error { try JSONLinesReader.read(contentsOf: file) })
        #expect(e.code == .invalidArgument && e.index == 2 && e.offset == offset(of: "{", in: lines, occurrence: 2), "\(e)")
        try Data(lines.prefix(while: { $0 != "\n" }).utf8).write(to: URL(fileURLWithPath: file))
        #expect(try JSONLinesReader.read(contentsOf: file).pages.map(\.target) == [.position(3)])
    }
}
