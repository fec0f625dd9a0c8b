import Foundation

/// Reads strokes from JSON lines: one stroke per line,
/// `{"points": [[x, y, t_ms, pressure], ...]}` (see `Protocol/import-jsonl.md`).
///
/// Bad input is rejected whole with an error naming the file, the line (as `index`, 1-based)
/// and the byte offset of that line; nothing is imported from a file with a bad line.
///
/// The lines are read by a small strict JSON parser of its own ([IMP-1]) rather than
/// Foundation's `JSONSerialization`, whose Linux implementation turns many numbers with 17
/// significant digits (what most programs print for a `Double`) into a `Decimal` and then
/// into a `Double` one unit in the last place off: the same file would quantize differently
/// on Linux and macOS, and differently from any correctly rounded reader. Here every number
/// is the nearest binary64 to its decimal text (`Double.init(_: Substring)`, correctly
/// rounded).
public enum StrokeImport {
    /// One parsed line: its samples and the optional keys the importer understands.
    public struct Line: Sendable, Equatable {
        public var samples: [InputSample]
        /// `"page"`, when present (used by the benchmark's real-stroke files): a string, or a
        /// number's text exactly as written.
        public var page: String?
        public var lineNumber: Int
        /// Byte offset of the line's first byte in the file.
        public var offset: Int = 0
    }

    /// Largest import file accepted (a notebook page of strokes is a few MB).
    public static let maxBytes = 256 << 20

    /// Deepest nesting of arrays and objects accepted in a line (a stroke needs 3).
    public static let maxDepth = 64

    public static func parse(_ data: [UInt8], path: String? = nil) throws -> [Line] {
        guard data.count <= maxBytes else {
            throw LnoteError(.limitExceeded, "import file is \(data.count) bytes; the limit is \(maxBytes)", path: path)
        }
        var out: [Line] = []
        // A UTF-8 byte order mark at the start of the file is skipped (offsets stay file offsets).
        var lineStart = data.starts(with: [0xEF, 0xBB, 0xBF]) ? 3 : 0
        var lineNumber = 0
        while lineStart < data.count {
            lineNumber += 1
            let end = data[lineStart...].firstIndex(of: UInt8(ascii: "\n")) ?? data.count
            defer { lineStart = end + 1 }
            if data[lineStart..<end].allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) { continue }
            func fail(_ m: String) -> LnoteError {
                LnoteError(.invalidArgument, "line \(lineNumber): \(m)", path: path, offset: lineStart, index: lineNumber)
            }
            var parser = JSONLineParser(bytes: data, start: lineStart, end: end)
            let top: JSONLineParser.Value
            do { top = try parser.document() } catch let e as JSONLineParser.Failure {
                throw fail("not valid JSON: \(e.message) at byte \(e.offset - lineStart + 1) of the line")
            }
            guard case .object(let members) = top else { throw fail("expected an object") }
            var pointsValue: JSONLineParser.Value?
            var pageValue: JSONLineParser.Value?
            for (key, value) in members {
                switch key {
                case "points":
                    guard pointsValue == nil else { throw fail("\"points\" appears twice") }
                    pointsValue = value
                case "page":
                    guard pageValue == nil else { throw fail("\"page\" appears twice") }
                    pageValue = value
                default:
                    continue
                }
            }
            guard case .array(let pts)? = pointsValue else { throw fail("missing \"points\" array") }
            guard !pts.isEmpty else { throw fail("\"points\" is empty") }
            guard pts.count <= Stroke.maxPoints else { throw fail("more than \(Stroke.maxPoints) points") }
            var samples: [InputSample] = []
            samples.reserveCapacity(pts.count)
            for (k, p) in pts.enumerated() {
                guard case .array(let a) = p, (2...4).contains(a.count) else {
                    throw fail("point \(k) must be [x, y], [x, y, t] or [x, y, t, pressure]")
                }
                func num(_ i: Int, _ what: String, nullable: Bool) throws -> Double? {
                    guard i < a.count else { return nil }
                    switch a[i] {
                    case .null:
                        guard nullable else { throw fail("point \(k): \(what) cannot be null") }
                        return nil
                    case .number(let v, _):
                        return v
                    default:
                        throw fail("point \(k): \(what) is not a number")
                    }
                }
                let x = try num(0, "x", nullable: false)!, y = try num(1, "y", nullable: false)!
                let t = try num(2, "t", nullable: true)
                let pr = try num(3, "pressure", nullable: true)
                if let pr, !(0...1).contains(pr) { throw fail("point \(k): pressure \(pr) is outside 0...1") }
                samples.append(InputSample(x: x, y: y, t: t, pressure: pr))
            }
            var page: String? = nil
            switch pageValue {
            case nil: break
            case .string(let s)?: page = s
            case .number(_, let text)?: page = String(decoding: data[text], as: UTF8.self)
            default: throw fail("\"page\" must be a string or a number")
            }
            out.append(Line(samples: samples, page: page, lineNumber: lineNumber, offset: lineStart))
        }
        return out
    }

    /// Reads a file and builds quantized strokes with `style`.
    public static func strokes(contentsOf path: String, style: InkStyle = InkStyle()) throws -> [Stroke] {
        let data: Data
        do { data = try Data(contentsOf: URL(fileURLWithPath: path)) } catch {
            throw LnoteError(.notFound, "cannot read import file", path: path, underlying: "\(error.localizedDescription)")
        }
        return try parse([UInt8](data), path: path).map { line in
            do { return try Stroke(samples: line.samples, style: style) } catch var e as LnoteError {
                e.path = path
                e.index = line.lineNumber
                e.offset = line.offset
                e.message = "line \(line.lineNumber): \(e.message)"
                throw e
            }
        }
    }
}

/// A strict RFC 8259 parser for one line of an import file: the grammar exactly (no
/// comments, no trailing commas, no leading zeros, no `NaN` or `Infinity`), strings checked
/// as UTF-8 with their escapes resolved, numbers converted to the nearest binary64 value.
struct JSONLineParser {
    enum Value {
        case null
        case bool(Bool)
        /// The value, and the range of its text in the parsed bytes.
        case number(Double, Range<Int>)
        case string(String)
        case array([Value])
        /// Members in the order written (duplicates kept).
        case object([(String, Value)])
    }

    struct Failure: Error {
        var message: String
        /// Absolute offset in the bytes.
        var offset: Int
    }

    let bytes: [UInt8]
    var i: Int
    let end: Int

    init(bytes: [UInt8], start: Int, end: Int) {
        self.bytes = bytes
        self.i = start
        self.end = end
    }

    /// One value and nothing after it but whitespace.
    mutating func document() throws -> Value {
        let v = try value(depth: 0)
        skipWhitespace()
        guard i == end else { throw Failure(message: "unexpected characters after the value", offset: i) }
        return v
    }

    private mutating func skipWhitespace() {
        while i < end, bytes[i] == 0x20 || bytes[i] == 0x09 || bytes[i] == 0x0D || bytes[i] == 0x0A { i += 1 }
    }

    private mutating func value(depth: Int) throws -> Value {
        skipWhitespace()
        guard i < end else { throw Failure(message: "unexpected end of line", offset: i) }
        switch bytes[i] {
        case UInt8(ascii: "{"):
            guard depth < StrokeImport.maxDepth else { throw Failure(message: "nested too deeply", offset: i) }
            return try object(depth: depth + 1)
        case UInt8(ascii: "["):
            guard depth < StrokeImport.maxDepth else { throw Failure(message: "nested too deeply", offset: i) }
            return try array(depth: depth + 1)
        case UInt8(ascii: "\""):
            return .string(try string())
        case UInt8(ascii: "t"):
            try literal("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try literal("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try literal("null")
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return try number()
        default:
            throw Failure(message: "unexpected character", offset: i)
        }
    }

    private mutating func literal(_ word: StaticString) throws {
        let n = word.utf8CodeUnitCount
        let expected = UnsafeBufferPointer(start: word.utf8Start, count: n)
        guard end - i >= n, bytes[i..<(i + n)].elementsEqual(expected) else {
            throw Failure(message: "unexpected character", offset: i)
        }
        i += n
    }

    private mutating func object(depth: Int) throws -> Value {
        i += 1  // {
        var members: [(String, Value)] = []
        skipWhitespace()
        if i < end, bytes[i] == UInt8(ascii: "}") {
            i += 1
            return .object(members)
        }
        while true {
            skipWhitespace()
            guard i < end, bytes[i] == UInt8(ascii: "\"") else { throw Failure(message: "expected a key", offset: i) }
            let key = try string()
            skipWhitespace()
            guard i < end, bytes[i] == UInt8(ascii: ":") else { throw Failure(message: "expected ':'", offset: i) }
            i += 1
            members.append((key, try value(depth: depth)))
            skipWhitespace()
            guard i < end else { throw Failure(message: "unexpected end of line", offset: i) }
            if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
            if bytes[i] == UInt8(ascii: "}") { i += 1; return .object(members) }
            throw Failure(message: "expected ',' or '}'", offset: i)
        }
    }

    private mutating func array(depth: Int) throws -> Value {
        i += 1  // [
        var items: [Value] = []
        skipWhitespace()
        if i < end, bytes[i] == UInt8(ascii: "]") {
            i += 1
            return .array(items)
        }
        while true {
            items.append(try value(depth: depth))
            skipWhitespace()
            guard i < end else { throw Failure(message: "unexpected end of line", offset: i) }
            if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
            if bytes[i] == UInt8(ascii: "]") { i += 1; return .array(items) }
            throw Failure(message: "expected ',' or ']'", offset: i)
        }
    }

    private func isDigit(_ at: Int) -> Bool { at < end && bytes[at] >= 0x30 && bytes[at] <= 0x39 }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`, to the nearest binary64
    /// (ties to even); a magnitude too large for binary64 is refused, a tiny one is 0.
    private mutating func number() throws -> Value {
        let start = i
        if bytes[i] == UInt8(ascii: "-") { i += 1 }
        guard isDigit(i) else { throw Failure(message: "expected a digit", offset: i) }
        if bytes[i] == UInt8(ascii: "0") {
            i += 1
            if isDigit(i) { throw Failure(message: "number with a leading zero", offset: start) }
        } else {
            while isDigit(i) { i += 1 }
        }
        if i < end, bytes[i] == UInt8(ascii: ".") {
            i += 1
            guard isDigit(i) else { throw Failure(message: "expected a digit after '.'", offset: i) }
            while isDigit(i) { i += 1 }
        }
        if i < end, bytes[i] == UInt8(ascii: "e") || bytes[i] == UInt8(ascii: "E") {
            i += 1
            if i < end, bytes[i] == UInt8(ascii: "+") || bytes[i] == UInt8(ascii: "-") { i += 1 }
            guard isDigit(i) else { throw Failure(message: "expected a digit in the exponent", offset: i) }
            while isDigit(i) { i += 1 }
        }
        let text = String(decoding: bytes[start..<i], as: UTF8.self)
        guard let v = Double(text), v.isFinite else {
            throw Failure(message: "number \(text) is too large", offset: start)
        }
        return .number(v, start..<i)
    }

    private mutating func hex4() throws -> UInt32 {
        guard end - i >= 4 else { throw Failure(message: "short \\u escape", offset: i) }
        var v: UInt32 = 0
        for _ in 0..<4 {
            let c = bytes[i]
            let d: UInt32
            switch c {
            case 0x30...0x39: d = UInt32(c - 0x30)
            case 0x41...0x46: d = UInt32(c - 0x41 + 10)
            case 0x61...0x66: d = UInt32(c - 0x61 + 10)
            default: throw Failure(message: "bad \\u escape", offset: i)
            }
            v = v << 4 | d
            i += 1
        }
        return v
    }

    private mutating func string() throws -> String {
        let open = i
        i += 1  // "
        var raw: [UInt8] = []
        while true {
            guard i < end else { throw Failure(message: "unterminated string", offset: open) }
            let c = bytes[i]
            if c == UInt8(ascii: "\"") {
                i += 1
                break
            }
            if c < 0x20 { throw Failure(message: "control character in a string", offset: i) }
            if c != UInt8(ascii: "\\") {
                raw.append(c)
                i += 1
                continue
            }
            let at = i
            i += 1
            guard i < end else { throw Failure(message: "unterminated string", offset: open) }
            let e = bytes[i]
            i += 1
            switch e {
            case UInt8(ascii: "\""): raw.append(0x22)
            case UInt8(ascii: "\\"): raw.append(0x5C)
            case UInt8(ascii: "/"): raw.append(0x2F)
            case UInt8(ascii: "b"): raw.append(0x08)
            case UInt8(ascii: "f"): raw.append(0x0C)
            case UInt8(ascii: "n"): raw.append(0x0A)
            case UInt8(ascii: "r"): raw.append(0x0D)
            case UInt8(ascii: "t"): raw.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = try hex4()
                if (0xD800...0xDBFF).contains(scalar) {
                    guard end - i >= 2, bytes[i] == UInt8(ascii: "\\"), bytes[i + 1] == UInt8(ascii: "u") else {
                        throw Failure(message: "unpaired surrogate", offset: at)
                    }
                    i += 2
                    let low = try hex4()
                    guard (0xDC00...0xDFFF).contains(low) else { throw Failure(message: "unpaired surrogate", offset: at) }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                } else if (0xDC00...0xDFFF).contains(scalar) {
                    throw Failure(message: "unpaired surrogate", offset: at)
                }
                raw.append(contentsOf: Array(String(Character(Unicode.Scalar(scalar)!)).utf8))
            default:
                throw Failure(message: "bad escape", offset: at)
            }
        }
        guard let s = String(validating: raw, as: UTF8.self) else {
            throw Failure(message: "string is not valid UTF-8", offset: open)
        }
        return s
    }
}
