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
        // [XCH-2] No document type declaration: its entities could expand a small file into
        // gigabytes (and external ones read other files). Neither InkML nor Xournal++ writes one.
        if let at = XMLInput.find(Array("<!DOCTYPE".utf8), in: bytes) ?? XMLInput.find(Array("<!ENTITY".utf8), in: bytes) {
            throw LnoteError(.invalidArgument, "a document type declaration is not accepted", path: path, offset: at)
        }
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
}
