import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
import LnoteModel

/// The bytes of an XML input (InkML, or a .xopp file once inflated) and what every XML
/// reader of this module shares: the size limit, the refusal of document type declarations,
/// byte offsets from the parser's line and column, strict numbers.
struct XMLInput {
    let bytes: [UInt8]
    let path: String?

    /// Largest XML text read (the import limit of JSON lines, import-jsonl.md [IMP-1]).
    static let maxBytes = StrokeImport.maxBytes

    init(bytes: [UInt8], path: String?) throws {
        guard bytes.count <= XMLInput.maxBytes else {
            throw LnoteError(.limitExceeded, "XML text is \(bytes.count) bytes; the limit is \(XMLInput.maxBytes)", path: path)
        }
        try XMLInput.checkEncoding(bytes, path: path)
        // [XCH-2] No document type declaration: its entities could expand a small file into
        // gigabytes (and external ones read other files). Neither InkML nor Xournal++ writes one.
        // (The byte search holds because the text is UTF-8; the delegate refuses declarations too.)
        if let at = XMLInput.find(Array("<!DOCTYPE".utf8), in: bytes) ?? XMLInput.find(Array("<!ENTITY".utf8), in: bytes) {
            throw LnoteError(.invalidArgument, "a document type declaration is not accepted", path: path, offset: at)
        }
        self.bytes = bytes
        self.path = path
    }

    /// [XCH-2] UTF-8 (or ASCII) only: the refusal of `<!DOCTYPE` is a search for UTF-8 bytes, and
    /// libxml2 would decode UTF-16, UTF-32 or EBCDIC into the same declarations. Refused: a byte
    /// order mark other than `ef bb bf`, a first byte (after it) other than `<` or white space,
    /// any NUL byte, an XML declaration's `encoding` other than UTF-8 or ASCII.
    static func checkEncoding(_ bytes: [UInt8], path: String?) throws {
        func refuse(_ m: String, at offset: Int) -> LnoteError {
            LnoteError(.invalidArgument, "not UTF-8 XML: \(m)", path: path, offset: offset)
        }
        let start = bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? 3 : 0
        if start < bytes.count {
            let b = bytes[start]
            guard b == UInt8(ascii: "<") || b == 0x20 || b == 0x09 || b == 0x0A || b == 0x0D else {
                throw refuse("the text must start with '<' or white space (after an optional UTF-8 byte order mark), not byte 0x\(String(b, radix: 16))", at: start)
            }
        }
        if let nul = bytes.firstIndex(of: 0) { throw refuse("a NUL byte (UTF-16 or UTF-32 text?)", at: nul) }
        // Every byte, comments and CDATA sections included: Foundation's parser turns what it
        // reports into Strings, and traps on bytes that are not UTF-8 in some of them.
        if let bad = firstInvalidUTF8(bytes) {
            throw refuse("byte 0x\(String(bytes[bad], radix: 16)) does not start a well-formed UTF-8 sequence", at: bad)
        }
        // The XML declaration, when the text starts with one: `<?xml ... ?>`.
        let decl = Array("<?xml".utf8)
        guard bytes.count >= start + decl.count, bytes[start..<(start + decl.count)].elementsEqual(decl) else { return }
        var end = start + decl.count
        while end < bytes.count, bytes[end] != UInt8(ascii: ">") { end += 1 }
        let head = Array(bytes[start..<end])
        guard let at = find(Array("encoding".utf8), in: head) else { return }
        var i = at + 8
        while i < head.count, head[i] == 0x20 || head[i] == 0x09 || head[i] == 0x0A || head[i] == 0x0D || head[i] == UInt8(ascii: "=") { i += 1 }
        guard i < head.count, head[i] == UInt8(ascii: "\"") || head[i] == UInt8(ascii: "'") else {
            throw refuse("the encoding declaration has no quoted name", at: start + at)
        }
        let quote = head[i]
        var j = i + 1
        while j < head.count, head[j] != quote { j += 1 }
        let name = String(decoding: head[(i + 1)..<j], as: UTF8.self).lowercased()
        guard ["utf-8", "utf8", "us-ascii", "ascii"].contains(name) else {
            throw refuse("encoding \"\(name.prefix(40))\" (only UTF-8 and ASCII are read)", at: start + i + 1)
        }
    }

    /// The offset of the first byte that does not begin a well-formed UTF-8 sequence
    /// (Unicode's table 3-7: no overlong forms, no surrogates, nothing past U+10FFFF), or nil.
    static func firstInvalidUTF8(_ bytes: [UInt8]) -> Int? {
        // Byte by byte (a String built to validate would copy up to 256 MiB).
        var i = 0
        while i < bytes.count {
            let b = bytes[i]
            if b < 0x80 { i += 1; continue }
            let (n, lo, hi): (Int, UInt8, UInt8)
            switch b {
            case 0xC2...0xDF: (n, lo, hi) = (1, 0x80, 0xBF)
            case 0xE0: (n, lo, hi) = (2, 0xA0, 0xBF)
            case 0xE1...0xEC, 0xEE...0xEF: (n, lo, hi) = (2, 0x80, 0xBF)
            case 0xED: (n, lo, hi) = (2, 0x80, 0x9F)
            case 0xF0: (n, lo, hi) = (3, 0x90, 0xBF)
            case 0xF1...0xF3: (n, lo, hi) = (3, 0x80, 0xBF)
            case 0xF4: (n, lo, hi) = (3, 0x80, 0x8F)
            default: return i
            }
            guard i + n < bytes.count, (lo...hi).contains(bytes[i + 1]) else { return i }
            var k = 2
            while k <= n {
                guard (0x80...0xBF).contains(bytes[i + k]) else { return i }
                k += 1
            }
            i += n + 1
        }
        return nil
    }

    /// The bytes without the checks of `init(bytes:path:)`: for the tests of the delegate's
    /// own refusal of declarations, which those checks otherwise reach first.
    init(unchecked bytes: [UInt8], path: String?) {
        self.bytes = bytes
        self.path = path
    }

    /// Reads a whole file, refusing one over `limit` bytes before reading it (and not reading
    /// more than `limit + 1` bytes of one that grows).
    static func read(_ path: String, limit: Int) throws -> [UInt8] {
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw LnoteError(.notFound, "cannot read import file", path: path)
        }
        defer { try? handle.close() }
        if let size = try? handle.seekToEnd() {
            guard size <= UInt64(limit) else {
                throw LnoteError(.limitExceeded, "import file is \(size) bytes; the limit is \(limit)", path: path)
            }
            try? handle.seek(toOffset: 0)
        }
        var out: [UInt8] = []
        while true {
            let data: Data?
            do { data = try handle.read(upToCount: 1 << 20) } catch {
                throw LnoteError(.io, "cannot read import file", path: path, offset: out.count, underlying: "\(error.localizedDescription)")
            }
            guard let data, !data.isEmpty else { break }
            out += data
            guard out.count <= limit else {
                throw LnoteError(.limitExceeded, "import file is more than \(limit) bytes", path: path)
            }
        }
        return out
    }

    static func find(_ needle: [UInt8], in hay: [UInt8]) -> Int? {
        guard hay.count >= needle.count, let first = needle.first else { return nil }
        var i = 0
        let end = hay.count - needle.count
        while i <= end {
            if hay[i] == first && hay[i..<(i + needle.count)].elementsEqual(needle) { return i }
            i += 1
        }
        return nil
    }

    /// The byte offset of a 1-based line and column as the parser reports them (libxml2
    /// counts columns in bytes); clamped to the text.
    func offset(line: Int, column: Int) -> Int {
        var l = 1, i = 0
        while l < line, i < bytes.count {
            if bytes[i] == 0x0A { l += 1 }
            i += 1
        }
        return min(bytes.count, i + max(0, column - 1))
    }

    /// Runs `parser` over the bytes: a document the parser refuses becomes `invalidArgument`
    /// with the offset of the fault; an error the handler stored stops the parsing and is thrown.
    func parse(_ handler: XMLHandler) throws {
        let parser = XMLParser(data: Data(bytes))
        parser.shouldResolveExternalEntities = false
        parser.shouldProcessNamespaces = false
        parser.delegate = handler
        handler.input = self
        handler.parser = parser
        let ok = parser.parse()
        if let e = handler.failure { throw e }
        guard ok, handler.depth == 0 else {
            let at = offset(line: parser.lineNumber, column: parser.columnNumber)
            let what = !ok ? parser.parserError.map { "\($0.localizedDescription)" } ?? "unknown error"
                : "the text ends inside an element"
            throw LnoteError(.invalidArgument, "malformed XML at line \(parser.lineNumber), column \(parser.columnNumber): \(what)",
                             path: path, offset: at)
        }
    }

    /// A decimal number as XML formats write it: `[+-]? digits [. digits] [e [+-] digits]`
    /// (digits on either side of the point); `nan`, `inf`, hex and anything else are refused,
    /// as is a value that rounds to an infinity.
    static func number(_ text: Substring) -> Double? {
        var digits = 0
        let u = text.utf8
        var j = u.startIndex
        if j < u.endIndex, u[j] == UInt8(ascii: "-") || u[j] == UInt8(ascii: "+") { j = u.index(after: j) }
        while j < u.endIndex, (0x30...0x39).contains(u[j]) { j = u.index(after: j); digits += 1 }
        if j < u.endIndex, u[j] == UInt8(ascii: ".") {
            j = u.index(after: j)
            while j < u.endIndex, (0x30...0x39).contains(u[j]) { j = u.index(after: j); digits += 1 }
        }
        guard digits > 0 else { return nil }
        if j < u.endIndex, u[j] == UInt8(ascii: "e") || u[j] == UInt8(ascii: "E") {
            j = u.index(after: j)
            if j < u.endIndex, u[j] == UInt8(ascii: "-") || u[j] == UInt8(ascii: "+") { j = u.index(after: j) }
            var e = 0
            while j < u.endIndex, (0x30...0x39).contains(u[j]) { j = u.index(after: j); e += 1 }
            guard e > 0 else { return nil }
        }
        guard j == u.endIndex else { return nil }
        var s = String(text)
        if s.hasPrefix("+") { s.removeFirst() }
        if s.hasPrefix(".") { s = "0" + s } else if s.hasPrefix("-.") { s = "-0" + s.dropFirst() }
        if s.hasSuffix(".") { s += "0" }
        guard let v = Double(s), v.isFinite else { return nil }
        return v
    }
}

/// The delegate base of this module's XML readers: the position of the parser as a byte
/// offset, and one stored failure that stops the parsing.
class XMLHandler: NSObject, XMLParserDelegate {
    var input: XMLInput!
    weak var parser: XMLParser?
    var failure: LnoteError?

    /// The start of the last line `here` found, to scan forward from (the parser's
    /// position only moves forward): offsets cost what the text costs, once.
    private var knownLine = 1, knownLineStart = 0

    /// The parser's current position as a byte offset.
    var here: Int {
        guard let p = parser else { return 0 }
        let line = p.lineNumber, column = p.columnNumber
        if line < knownLine { (knownLine, knownLineStart) = (1, 0) }
        let b = input.bytes
        var i = knownLineStart
        while knownLine < line, i < b.count {
            if b[i] == 0x0A { knownLine += 1; knownLineStart = i + 1 }
            i += 1
        }
        return min(b.count, knownLineStart + max(0, column - 1))
    }

    /// Stores the first failure and stops the parser.
    func fail(_ e: LnoteError) {
        if failure == nil { failure = e }
        parser?.abortParsing()
    }

    func fail(_ message: String, code: LnoteError.Code = .invalidArgument, at offset: Int? = nil) {
        fail(LnoteError(code, message, path: input.path, offset: offset ?? here))
    }

    // The parser's callbacks, implemented here (a subclass's own implementation of a
    // protocol requirement the base class took from the protocol's extension would never be
    // called on Linux): subclasses override these three.
    /// Elements open: a document that ends with some open is refused (libxml2, through
    /// XMLParser, reports no error for it).
    var depth = 0

    /// The offset of the first byte after the start tag being reported: the parser's
    /// position is at or just before the tag's closing `>`.
    var contentStart: Int {
        var i = max(0, here - 1)
        let b = input.bytes
        while i < b.count && b[i] != UInt8(ascii: ">") { i += 1 }
        return min(i + 1, b.count)
    }

    /// What the import has read so far, against its budget ([XCH-12]).
    var budget = ImportBudget()

    /// Counts a stroke whose text starts at `offset`; false (and the parsing stopped) when
    /// it passes the import's budget.
    func count(_ stroke: Stroke, what: String, at offset: Int) -> Bool {
        guard let problem = budget.add(pointCount: stroke.points.count) else { return true }
        fail("\(what): \(problem)", code: .limitExceeded, at: offset)
        return false
    }

    /// Refuses the page that would pass [XCH-12]'s page limit, at `offset`.
    func checkPageCount(_ pages: Int, at offset: Int) -> Bool {
        guard pages >= ImportBudget.maxPages else { return true }
        fail("page \(pages + 1): more than \(ImportBudget.maxPages) pages in one import", code: .limitExceeded, at: offset)
        return false
    }

    /// The offset of attribute `name` of the start tag just reported (the parser stands at its
    /// end): the first byte of `name=` after the tag's `<`, else the tag's end.
    func attributeOffset(_ name: String) -> Int {
        let b = input.bytes
        let end = min(contentStart, b.count)
        var open = max(0, end - 1)
        while open > 0, b[open] != UInt8(ascii: "<") { open -= 1 }
        let needle = Array(name.utf8)
        var i = open
        while i + needle.count < end {
            if (b[i] == 0x20 || b[i] == 0x09 || b[i] == 0x0A || b[i] == 0x0D), b[(i + 1)..<(i + 1 + needle.count)].elementsEqual(needle) {
                var j = i + 1 + needle.count
                while j < end, b[j] == 0x20 || b[j] == 0x09 || b[j] == 0x0A || b[j] == 0x0D { j += 1 }
                if j < end, b[j] == UInt8(ascii: "=") { return i + 1 }
            }
            i += 1
        }
        return end
    }

    func start(_ name: String, _ attributes: [String: String]) {}
    func end(_ name: String) {}
    func characters(_ s: String) {}

    func parser(_ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?, qualifiedName qName: String?,
                attributes attributeDict: [String: String] = [:]) {
        guard failure == nil else { return }
        depth += 1
        start(elementName, attributeDict)
    }

    func parser(_ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?, qualifiedName qName: String?) {
        guard failure == nil else { return }
        depth -= 1
        end(elementName)
    }

    func parser(_ parser: XMLParser, foundCharacters string: String) {
        guard failure == nil else { return }
        characters(string)
    }

    /// A CDATA section is character data like any other ([XCH-2]).
    func parser(_ parser: XMLParser, foundCDATA CDATABlock: Data) {
        guard failure == nil else { return }
        guard let text = String(data: CDATABlock, encoding: .utf8) else {
            fail("a CDATA section that is not UTF-8")
            return
        }
        characters(text)
    }

    // [XCH-2] Declarations refused whatever bytes spelled them (the byte search is the first
    // line; this is the second): libxml2 would otherwise substitute internal entities.
    func parser(_ parser: XMLParser, foundInternalEntityDeclarationWithName name: String, value: String?) {
        fail("an entity declaration is not accepted")
    }

    func parser(_ parser: XMLParser, foundExternalEntityDeclarationWithName name: String, publicID: String?, systemID: String?) {
        fail("an entity declaration is not accepted")
    }

    func parser(_ parser: XMLParser, foundUnparsedEntityDeclarationWithName name: String, publicID: String?, systemID: String?,
                notationName: String?) {
        fail("an entity declaration is not accepted")
    }

    func parser(_ parser: XMLParser, foundElementDeclarationWithName elementName: String, model: String) {
        fail("a document type declaration is not accepted")
    }

    func parser(_ parser: XMLParser, foundAttributeDeclarationWithName attributeName: String, forElement elementName: String,
                type: String?, defaultValue: String?) {
        fail("a document type declaration is not accepted")
    }

    func parser(_ parser: XMLParser, foundNotationDeclarationWithName name: String, publicID: String?, systemID: String?) {
        fail("a document type declaration is not accepted")
    }

    func parser(_ parser: XMLParser, resolveExternalEntityName name: String, systemID: String?) -> Data? {
        fail("an external entity is not accepted")
        return nil
    }
}
