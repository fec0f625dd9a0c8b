import CLnoteXML2
import Foundation
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
        guard let handle = FileHandle(forReadingAtPath: path) else { throw StrokeImport.openFailure(path) }
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

    /// libxml2 initialized once, before any thread parses (its documented requirement).
    private static let parserReady: Void = xmlInitParser()

    /// Runs libxml2's SAX parser over the bytes ([XCH-2]): well-formed XML 1.0 or nothing (no
    /// recovery: content after the root element is refused), text nodes of any length up to
    /// the size limit (`XML_PARSE_HUGE`: a trace of a million points is more than libxml2's
    /// default 10 MB), no network, no entity substitution. A document the parser refuses becomes
    /// `invalidArgument` with libxml2's message and the byte offset of the fault; an error the
    /// handler stored stops the parsing and is thrown.
    func parse(_ handler: XMLHandler) throws {
        XMLInput.parserReady
        handler.input = self
        var sax = xmlSAXHandler()
        sax.initialized = UInt32(XML_SAX2_MAGIC)
        // Names as written, prefixes included: no namespace processing (the SAX2 callbacks
        // give prefix and local name apart; they are joined again).
        sax.startElementNs = { ctx, local, prefix, _, _, _, count, _, attributes in
            guard let ctx, let local else { return }
            XMLHandler.of(ctx).didStart(local, prefix, Int(count), attributes)
        }
        sax.endElementNs = { ctx, local, prefix, _ in
            guard let ctx, let local else { return }
            XMLHandler.of(ctx).didEnd(local, prefix)
        }
        sax.characters = { ctx, text, count in
            guard let ctx, let text, count > 0 else { return }
            XMLHandler.of(ctx).didFind(UnsafeBufferPointer(start: text, count: Int(count)))
        }
        sax.ignorableWhitespace = sax.characters
        // A CDATA section is character data like any other.
        sax.cdataBlock = sax.characters
        // The byte search refuses declarations first; these refuse whatever bytes spelled them.
        sax.internalSubset = { ctx, _, _, _ in
            guard let ctx else { return }
            XMLHandler.of(ctx).fail("a document type declaration is not accepted")
        }
        sax.externalSubset = sax.internalSubset
        sax.entityDecl = { ctx, _, _, _, _, _ in
            guard let ctx else { return }
            XMLHandler.of(ctx).fail("an entity declaration is not accepted")
        }
        sax.serror = { ctx, error in
            guard let ctx, let error else { return }
            XMLHandler.of(ctx).noteError(error.pointee)
        }
        guard let context = xmlCreatePushParserCtxt(&sax, Unmanaged.passUnretained(handler).toOpaque(), nil, 0, nil) else {
            throw LnoteError(.io, "cannot start the XML parser", path: path)
        }
        defer { xmlFreeParserCtxt(context) }
        _ = xmlCtxtUseOptions(context, Int32(bitPattern: XML_PARSE_HUGE.rawValue | XML_PARSE_NONET.rawValue))
        handler.context = context
        defer { handler.context = nil }
        let status = bytes.withUnsafeBufferPointer { b in
            b.withMemoryRebound(to: CChar.self) { c in xmlParseChunk(context, c.baseAddress, Int32(c.count), 1) }
        }
        if let e = handler.failure { throw e }
        if let e = handler.parseError {
            // A text cut off inside an element: libxml2 reports it at its last byte with words
            // that say the opposite ("Extra content at the end of the document").
            if handler.depth > 0, e.offset >= bytes.count - 1 {
                throw LnoteError(.invalidArgument, "malformed XML: the text ends inside an element (cut off?)",
                                 path: path, offset: bytes.count)
            }
            throw LnoteError(.invalidArgument, "malformed XML at line \(e.line), column \(e.column): \(e.message)",
                             path: path, offset: e.offset)
        }
        guard status == 0, context.pointee.wellFormed != 0, handler.depth == 0 else {
            throw LnoteError(.invalidArgument, "malformed XML: the text ends inside an element", path: path, offset: bytes.count)
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

/// The base of this module's XML readers, driven by libxml2's SAX callbacks: the position of
/// the parser as a byte offset, and one stored failure that stops the parsing.
class XMLHandler {
    var input: XMLInput!
    /// The libxml2 parser while it runs.
    var context: xmlParserCtxtPtr?
    var failure: LnoteError?
    /// The first error libxml2 reported (the document is not well-formed).
    var parseError: (line: Int, column: Int, message: String, offset: Int)?

    /// The handler a callback's context pointer is.
    static func of(_ ctx: UnsafeMutableRawPointer) -> XMLHandler {
        Unmanaged<XMLHandler>.fromOpaque(ctx).takeUnretainedValue()
    }

    /// The parser's current position as a byte offset in the text.
    var here: Int {
        guard let c = context else { return 0 }
        return max(0, min(input.bytes.count, Int(xmlByteConsumed(c))))
    }

    /// Stores the first failure and stops the parser.
    func fail(_ e: LnoteError) {
        if failure == nil { failure = e }
        if let c = context { xmlStopParser(c) }
    }

    func fail(_ message: String, code: LnoteError.Code = .invalidArgument, at offset: Int? = nil) {
        fail(LnoteError(code, message, path: input.path, offset: offset ?? here))
    }

    /// Keeps the first error (not warning) libxml2 reports, where the parser stands. Namespace
    /// errors (a prefix never declared) are not faults here: names are read as written.
    fileprivate func noteError(_ e: xmlError) {
        guard parseError == nil, e.level.rawValue >= XML_ERR_ERROR.rawValue,
              e.domain != Int32(XML_FROM_NAMESPACE.rawValue) else { return }
        var message = e.message.map { String(cString: $0) } ?? "error \(e.code)"
        while message.last?.isWhitespace == true { message.removeLast() }
        parseError = (Int(e.line), Int(e.int2), message, here)
    }

    /// Elements open: a document that ends with some open is refused.
    var depth = 0

    /// The offset of the first byte after the start tag being reported: the parser stands at
    /// the tag's closing `>` (or `/>`).
    var contentStart: Int {
        var i = max(0, here - 1)
        let b = input.bytes
        while i < b.count && b[i] != UInt8(ascii: ">") { i += 1 }
        return min(i + 1, b.count)
    }

    /// The offset of the `<` of the start tag being reported (the parser stands at its end;
    /// an attribute value holds no `<`).
    var tagStart: Int {
        let b = input.bytes
        var i = min(here, b.count - 1)
        while i > 0 && b[i] != UInt8(ascii: "<") { i -= 1 }
        return max(0, i)
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

    /// A qualified name as written: `prefix:local`, or `local`.
    private static func name(_ local: UnsafePointer<xmlChar>, _ prefix: UnsafePointer<xmlChar>?) -> String {
        guard let prefix else { return String(cString: local) }
        return String(cString: prefix) + ":" + String(cString: local)
    }

    /// `attributes`: `count` groups of five pointers (local name, prefix, URI, value, end of
    /// the value). libxml2 refuses an attribute given twice.
    fileprivate func didStart(_ local: UnsafePointer<xmlChar>, _ prefix: UnsafePointer<xmlChar>?, _ count: Int,
                              _ attributes: UnsafeMutablePointer<UnsafePointer<xmlChar>?>?) {
        guard failure == nil else { return }
        depth += 1
        var a: [String: String] = [:]
        if let attributes {
            for i in 0..<count {
                let g = attributes + 5 * i
                guard let name = g[0] else { continue }
                var value = ""
                if let from = g[3], let to = g[4], to >= from {
                    value = String(decoding: UnsafeBufferPointer(start: from, count: to - from), as: UTF8.self)
                }
                a[XMLHandler.name(name, g[1])] = value
            }
        }
        start(XMLHandler.name(local, prefix), a)
    }

    fileprivate func didEnd(_ local: UnsafePointer<xmlChar>, _ prefix: UnsafePointer<xmlChar>?) {
        guard failure == nil else { return }
        depth -= 1
        end(XMLHandler.name(local, prefix))
    }

    /// Character data, CDATA sections included ([XCH-2]); the text was checked as UTF-8.
    fileprivate func didFind(_ text: UnsafeBufferPointer<xmlChar>) {
        guard failure == nil else { return }
        characters(String(decoding: text, as: UTF8.self))
    }
}
