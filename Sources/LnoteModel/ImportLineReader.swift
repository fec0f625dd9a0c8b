/// The bytes of an import file, read forward: all in memory, or a chunk at a time from a
/// source, each byte with its offset in the file.
struct ImportByteStream {
    private var chunk: [UInt8]
    private var i = 0
    /// Offset in the file of `chunk[0]`.
    private var base = 0
    private var refill: (() throws -> [UInt8]?)?
    /// Where `mark()` was called in `chunk`, and the bytes since then in chunks already gone.
    private var markAt: Int?
    private var carried: [UInt8] = []

    init(bytes: [UInt8]) {
        chunk = bytes
        refill = nil
    }

    /// `refill` gives the next chunk, nil at the end of the file (then it is not called again).
    init(refill: @escaping () throws -> [UInt8]?) {
        chunk = []
        self.refill = refill
    }

    /// Offset in the file of the next byte.
    var offset: Int { base + i }

    /// The next byte, nil at the end of the file.
    @inline(__always)
    mutating func peek() throws -> UInt8? {
        if i < chunk.count { return chunk[i] }
        return try load()
    }

    @inline(__always)
    mutating func advance() { i += 1 }

    private mutating func load() throws -> UInt8? {
        while i >= chunk.count {
            guard let next = try refill?() else {
                refill = nil
                return nil
            }
            if let m = markAt {
                carried += chunk[m...]
                markAt = 0
            }
            base += chunk.count
            chunk = next
            i = 0
        }
        return chunk[i]
    }

    /// Starts keeping the bytes read from here on, for `marked()` (a number's text).
    mutating func mark() {
        markAt = i
        carried.removeAll(keepingCapacity: true)
    }

    /// The bytes read since `mark()`, as text. Without a copy when they are in one chunk (a
    /// short string is then stored inline: no allocation per number).
    mutating func marked() -> String {
        defer { markAt = nil }
        guard let m = markAt else { return "" }
        if carried.isEmpty { return String(decoding: chunk[m..<i], as: UTF8.self) }
        return String(decoding: carried + chunk[m..<i], as: UTF8.self)
    }

    /// Skips `prefix` when the bytes start with it (the caller is at the file's start).
    mutating func skip(prefix: [UInt8]) throws {
        // The prefix may straddle chunks: gather enough bytes first.
        while chunk.count - i < prefix.count, let refill, let next = try refill() { chunk += next }
        if chunk.count - i >= prefix.count, chunk[i..<(i + prefix.count)].elementsEqual(prefix) { i += prefix.count }
    }
}

/// Reads the lines of an import file one at a time, with a strict RFC 8259 parser
/// ([IMP-1], [IMP-2], [IMP-8]) that builds only what the import keeps: each point becomes an
/// `InputSample` as it is read, every other value is checked and dropped.
///
/// It reads the grammar exactly (no comments, no trailing commas, no leading zeros, no `NaN`
/// or `Infinity`), strings are checked as UTF-8 as they are read, numbers are converted to
/// the nearest binary64 value. A line's error stops the reading at the byte that caused it.
struct ImportLineReader {
    private var s: ImportByteStream
    private let path: String?
    private var lineNumber = 0
    private var lineStart = 0
    private var started = false

    init(_ stream: ImportByteStream, path: String?) {
        self.s = stream
        self.path = path
    }

    /// What is wrong with a line: its JSON (at a file offset), or what it holds.
    private enum Problem: Error {
        case json(String, at: Int)
        case line(String)
    }

    private static let coordinateNames = ["x", "y", "t", "pressure"]
    private static let pointsKey = Array("points".utf8), pageKey = Array("page".utf8)

    /// The next non-blank line, nil at the end of the file.
    mutating func next() throws -> StrokeImport.Line? {
        if !started {
            started = true
            // A UTF-8 byte order mark at the start of the file is skipped (offsets stay file offsets).
            try s.skip(prefix: [0xEF, 0xBB, 0xBF])
        }
        while try s.peek() != nil {
            lineNumber += 1
            lineStart = s.offset
            try skipWhitespace()
            guard let c = try s.peek() else { return nil }
            if c == 0x0A {  // blank
                s.advance()
                continue
            }
            do {
                return try line()
            } catch let p as Problem {
                let message: String
                switch p {
                case .json(let m, let at): message = "not valid JSON: \(m) at byte \(at - lineStart + 1) of the line"
                case .line(let m): message = m
                }
                throw LnoteError(.invalidArgument, "line \(lineNumber): \(message)", path: path, offset: lineStart, index: lineNumber)
            }
        }
        return nil
    }

    // MARK: - A line

    private mutating func line() throws -> StrokeImport.Line {
        guard try s.peek() == UInt8(ascii: "{") else {
            try skipValue(depth: 0)
            try endOfLine()
            throw Problem.line("expected an object")
        }
        s.advance()
        var samples: [InputSample]?
        var page: (String, StrokeImport.PageKind)?
        try skipWhitespace()
        if try s.peek() == UInt8(ascii: "}") {
            s.advance()
        } else {
            members: while true {
                try skipWhitespace()
                guard try s.peek() == UInt8(ascii: "\"") else { throw Problem.json("expected a key", at: s.offset) }
                let key = try string(keep: 8)
                try skipWhitespace()
                guard try s.peek() == UInt8(ascii: ":") else { throw Problem.json("expected ':'", at: s.offset) }
                s.advance()
                try skipWhitespace()
                switch key {
                case Self.pointsKey:
                    guard samples == nil else { throw Problem.line("\"points\" appears twice") }
                    samples = try points()
                case Self.pageKey:
                    guard page == nil else { throw Problem.line("\"page\" appears twice") }
                    page = try pageValue()
                default:
                    try skipValue(depth: 1)
                }
                try skipWhitespace()
                switch try s.peek() {
                case nil, 0x0A?: throw Problem.json("unexpected end of line", at: s.offset)
                case UInt8(ascii: ",")?: s.advance()
                case UInt8(ascii: "}")?: s.advance(); break members
                default: throw Problem.json("expected ',' or '}'", at: s.offset)
                }
            }
        }
        try endOfLine()
        guard let samples else { throw Problem.line("missing \"points\" array") }
        return StrokeImport.Line(samples: samples, page: page?.0, lineNumber: lineNumber, offset: lineStart, pageKind: page?.1)
    }

    /// Nothing but whitespace up to the end of the line, which is consumed.
    private mutating func endOfLine() throws {
        try skipWhitespace()
        switch try s.peek() {
        case nil: return
        case 0x0A?: s.advance()
        default: throw Problem.json("unexpected characters after the value", at: s.offset)
        }
    }

    /// `"points"`: an array of 1 to `Stroke.maxPoints` points; the point after the last one
    /// allowed stops the reading ([IMP-9]).
    private mutating func points() throws -> [InputSample] {
        guard try s.peek() == UInt8(ascii: "[") else {
            try skipValue(depth: 1)
            throw Problem.line("missing \"points\" array")
        }
        s.advance()
        try skipWhitespace()
        if try s.peek() == UInt8(ascii: "]") { throw Problem.line("\"points\" is empty") }
        var out: [InputSample] = []
        while true {
            try skipWhitespace()
            guard out.count < Stroke.maxPoints else {
                throw Problem.line("more than \(Stroke.maxPoints) points: point \(out.count) starts at byte \(s.offset) of the file")
            }
            out.append(try point(out.count))
            try skipWhitespace()
            switch try s.peek() {
            case nil, 0x0A?: throw Problem.json("unexpected end of line", at: s.offset)
            case UInt8(ascii: ",")?: s.advance()
            case UInt8(ascii: "]")?: s.advance(); return out
            default: throw Problem.json("expected ',' or ']'", at: s.offset)
            }
        }
    }

    /// Point `k`: `[x, y]`, `[x, y, t]` or `[x, y, t, pressure]`, t and pressure nullable.
    private mutating func point(_ k: Int) throws -> InputSample {
        let shape = "point \(k) must be [x, y], [x, y, t] or [x, y, t, pressure]"
        guard try s.peek() == UInt8(ascii: "[") else {
            try skipValue(depth: 2)
            throw Problem.line(shape)
        }
        s.advance()
        var v: (Double?, Double?, Double?, Double?) = (nil, nil, nil, nil)
        var n = 0
        try skipWhitespace()
        if try s.peek() == UInt8(ascii: "]") { throw Problem.line(shape) }
        while true {
            guard n < 4 else { throw Problem.line(shape) }
            try skipWhitespace()
            let what = Self.coordinateNames[n]
            let value: Double?
            switch try s.peek() {
            case UInt8(ascii: "-")?, (UInt8(ascii: "0")...UInt8(ascii: "9"))?:
                value = try number().value
            case UInt8(ascii: "n")?:
                try literal("null")
                guard n >= 2 else { throw Problem.line("point \(k): \(what) cannot be null") }
                value = nil
            default:
                try skipValue(depth: 3)
                throw Problem.line("point \(k): \(what) is not a number")
            }
            switch n {
            case 0: v.0 = value
            case 1: v.1 = value
            case 2: v.2 = value
            default: v.3 = value
            }
            n += 1
            try skipWhitespace()
            switch try s.peek() {
            case nil, 0x0A?: throw Problem.json("unexpected end of line", at: s.offset)
            case UInt8(ascii: ",")?: s.advance()
            case UInt8(ascii: "]")?: s.advance()
                guard n >= 2, let x = v.0, let y = v.1 else { throw Problem.line(shape) }
                if let p = v.3, !(0...1).contains(p) { throw Problem.line("point \(k): pressure \(p) is outside 0...1") }
                return InputSample(x: x, y: y, t: v.2, pressure: v.3)
            default: throw Problem.json("expected ',' or ']'", at: s.offset)
            }
        }
    }

    /// `"page"`: a string, or a number's text exactly as written, with its JSON type.
    private mutating func pageValue() throws -> (String, StrokeImport.PageKind) {
        switch try s.peek() {
        case UInt8(ascii: "\"")?:
            return (String(decoding: try string(keep: .max), as: UTF8.self), .string)
        case UInt8(ascii: "-")?, (UInt8(ascii: "0")...UInt8(ascii: "9"))?:
            return (try number().text, .number)
        default:
            try skipValue(depth: 1)
            throw Problem.line("\"page\" must be a string or a number")
        }
    }

    // MARK: - JSON

    /// Spaces, tabs and `\r` (a line feed ends the line).
    @inline(__always)
    private mutating func skipWhitespace() throws {
        while let c = try s.peek(), c == 0x20 || c == 0x09 || c == 0x0D { s.advance() }
    }

    /// Checks one value at nesting `depth` (0 for the line's value) and drops it.
    private mutating func skipValue(depth: Int) throws {
        try skipWhitespace()
        switch try s.peek() {
        case nil, 0x0A?:
            throw Problem.json("unexpected end of line", at: s.offset)
        case UInt8(ascii: "{")?:
            guard depth < StrokeImport.maxDepth else { throw Problem.json("nested too deeply", at: s.offset) }
            s.advance()
            try skipWhitespace()
            if try s.peek() == UInt8(ascii: "}") { s.advance(); return }
            while true {
                try skipWhitespace()
                guard try s.peek() == UInt8(ascii: "\"") else { throw Problem.json("expected a key", at: s.offset) }
                _ = try string(keep: 0)
                try skipWhitespace()
                guard try s.peek() == UInt8(ascii: ":") else { throw Problem.json("expected ':'", at: s.offset) }
                s.advance()
                try skipValue(depth: depth + 1)
                try skipWhitespace()
                switch try s.peek() {
                case nil, 0x0A?: throw Problem.json("unexpected end of line", at: s.offset)
                case UInt8(ascii: ",")?: s.advance()
                case UInt8(ascii: "}")?: s.advance(); return
                default: throw Problem.json("expected ',' or '}'", at: s.offset)
                }
            }
        case UInt8(ascii: "[")?:
            guard depth < StrokeImport.maxDepth else { throw Problem.json("nested too deeply", at: s.offset) }
            s.advance()
            try skipWhitespace()
            if try s.peek() == UInt8(ascii: "]") { s.advance(); return }
            while true {
                try skipValue(depth: depth + 1)
                try skipWhitespace()
                switch try s.peek() {
                case nil, 0x0A?: throw Problem.json("unexpected end of line", at: s.offset)
                case UInt8(ascii: ",")?: s.advance()
                case UInt8(ascii: "]")?: s.advance(); return
                default: throw Problem.json("expected ',' or ']'", at: s.offset)
                }
            }
        case UInt8(ascii: "\"")?:
            _ = try string(keep: 0)
        case UInt8(ascii: "t")?:
            try literal("true")
        case UInt8(ascii: "f")?:
            try literal("false")
        case UInt8(ascii: "n")?:
            try literal("null")
        case UInt8(ascii: "-")?, (UInt8(ascii: "0")...UInt8(ascii: "9"))?:
            _ = try number()
        default:
            throw Problem.json("unexpected character", at: s.offset)
        }
    }

    private mutating func literal(_ word: StaticString) throws {
        let start = s.offset
        let expected = UnsafeBufferPointer(start: word.utf8Start, count: word.utf8CodeUnitCount)
        for b in expected {
            guard try s.peek() == b else { throw Problem.json("unexpected character", at: start) }
            s.advance()
        }
    }

    private mutating func isDigit() throws -> Bool {
        guard let c = try s.peek() else { return false }
        return c >= 0x30 && c <= 0x39
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`, to the nearest binary64
    /// (ties to even); a magnitude too large for binary64 is refused, a tiny one is 0.
    private mutating func number() throws -> (value: Double, text: String) {
        let start = s.offset
        s.mark()
        func take() { s.advance() }
        if try s.peek() == UInt8(ascii: "-") { take() }
        guard try isDigit() else { throw Problem.json("expected a digit", at: s.offset) }
        if try s.peek() == UInt8(ascii: "0") {
            take()
            if try isDigit() { throw Problem.json("number with a leading zero", at: start) }
        } else {
            while try isDigit() { take() }
        }
        if try s.peek() == UInt8(ascii: ".") {
            take()
            guard try isDigit() else { throw Problem.json("expected a digit after '.'", at: s.offset) }
            while try isDigit() { take() }
        }
        if let c = try s.peek(), c == UInt8(ascii: "e") || c == UInt8(ascii: "E") {
            take()
            if let c = try s.peek(), c == UInt8(ascii: "+") || c == UInt8(ascii: "-") { take() }
            guard try isDigit() else { throw Problem.json("expected a digit in the exponent", at: s.offset) }
            while try isDigit() { take() }
        }
        let text = s.marked()
        guard let v = Double(text), v.isFinite else {
            throw Problem.json("number \(text) is too large", at: start)
        }
        return (v, text)
    }

    private mutating func hex4() throws -> UInt32 {
        var v: UInt32 = 0
        for _ in 0..<4 {
            guard let c = try s.peek(), c != 0x0A else { throw Problem.json("short \\u escape", at: s.offset) }
            let d: UInt32
            switch c {
            case 0x30...0x39: d = UInt32(c - 0x30)
            case 0x41...0x46: d = UInt32(c - 0x41 + 10)
            case 0x61...0x66: d = UInt32(c - 0x61 + 10)
            default: throw Problem.json("bad \\u escape", at: s.offset)
            }
            v = v << 4 | d
            s.advance()
        }
        return v
    }

    /// A string, its escapes resolved; its UTF-8 is returned when it has at most `keep` bytes
    /// (a longer one returns a longer prefix, not the string), the rest only checked: UTF-8 (RFC 3629: no overlong
    /// forms, no surrogates, nothing above U+10FFFF), no raw control character, paired
    /// surrogate escapes.
    private mutating func string(keep: Int) throws -> [UInt8] {
        let open = s.offset
        s.advance()  // "
        var out: [UInt8] = []
        // At most `keep + 1` bytes are kept: enough to tell a longer string from one of `keep`.
        func append(_ b: UInt8) { if out.count <= keep { out.append(b) } }
        // UTF-8 being checked: continuation bytes still expected, and the range of the next.
        var pending = 0
        var low: UInt8 = 0x80, high: UInt8 = 0xBF
        let invalid = Problem.json("string is not valid UTF-8", at: open)
        while true {
            guard let c = try s.peek(), c != 0x0A else { throw Problem.json("unterminated string", at: open) }
            if pending > 0 {
                guard c >= low && c <= high else { throw invalid }
                pending -= 1
                (low, high) = (0x80, 0xBF)
                append(c)
                s.advance()
                continue
            }
            if c == UInt8(ascii: "\"") {
                s.advance()
                return out
            }
            if c < 0x20 { throw Problem.json("control character in a string", at: s.offset) }
            if c >= 0x80 {
                switch c {
                case 0xC2...0xDF: pending = 1
                case 0xE0: (pending, low) = (2, 0xA0)
                case 0xE1...0xEC, 0xEE...0xEF: pending = 2
                case 0xED: (pending, high) = (2, 0x9F)
                case 0xF0: (pending, low) = (3, 0x90)
                case 0xF1...0xF3: pending = 3
                case 0xF4: (pending, high) = (3, 0x8F)
                default: throw invalid
                }
                append(c)
                s.advance()
                continue
            }
            if c != UInt8(ascii: "\\") {
                append(c)
                s.advance()
                continue
            }
            let at = s.offset
            s.advance()
            guard let e = try s.peek(), e != 0x0A else { throw Problem.json("unterminated string", at: open) }
            s.advance()
            switch e {
            case UInt8(ascii: "\""): append(0x22)
            case UInt8(ascii: "\\"): append(0x5C)
            case UInt8(ascii: "/"): append(0x2F)
            case UInt8(ascii: "b"): append(0x08)
            case UInt8(ascii: "f"): append(0x0C)
            case UInt8(ascii: "n"): append(0x0A)
            case UInt8(ascii: "r"): append(0x0D)
            case UInt8(ascii: "t"): append(0x09)
            case UInt8(ascii: "u"):
                var scalar = try hex4()
                if (0xD800...0xDBFF).contains(scalar) {
                    guard try s.peek() == UInt8(ascii: "\\") else { throw Problem.json("unpaired surrogate", at: at) }
                    s.advance()
                    guard try s.peek() == UInt8(ascii: "u") else { throw Problem.json("unpaired surrogate", at: at) }
                    s.advance()
                    let lowHalf = try hex4()
                    guard (0xDC00...0xDFFF).contains(lowHalf) else { throw Problem.json("unpaired surrogate", at: at) }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (lowHalf - 0xDC00)
                } else if (0xDC00...0xDFFF).contains(scalar) {
                    throw Problem.json("unpaired surrogate", at: at)
                }
                for b in String(Character(Unicode.Scalar(scalar)!)).utf8 { append(b) }
            default:
                throw Problem.json("bad escape", at: at)
            }
        }
    }
}
