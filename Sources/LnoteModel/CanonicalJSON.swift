/// A JSON value with a single, fixed printed form: equal values print byte-identical text.
///
/// The rules (also in `Protocol/page-snapshot.md`, "Canonical JSON", [JSON-1] … [JSON-6]):
///
/// - Numbers are integers only (`Int64` or `UInt64`), printed in decimal with a leading `-`
///   for negatives and no `+`, leading zeros, fraction or exponent.
/// - Object members are sorted by the UTF-8 bytes of their keys (unsigned, lexicographic;
///   no Unicode normalization). Keys are unique.
/// - Strings are UTF-8 and escape exactly: `"` → `\"`, `\` → `\\`, U+0008 → `\b`,
///   U+000C → `\f`, U+000A → `\n`, U+000D → `\r`, U+0009 → `\t`, other code points below
///   U+0020 → `\u00XX` with lowercase hex. Everything else (including `/`, U+007F and all
///   non-ASCII) is written as its UTF-8 bytes.
/// - `.compact`: no whitespace at all. `.pretty`: see `Style.pretty`.
///
/// Caveat: Swift compares `String`s by canonical equivalence, so `"é"` (U+00E9) and
/// `"e\u{301}"` are equal values (and equal dictionary keys) that print different bytes.
/// Page JSON contains only ASCII strings; normalize user text first if that matters.
public enum CanonicalJSON: Hashable, Sendable {
    case null
    case bool(Bool)
    case int(Int64)
    case uint(UInt64)
    case string(String)
    case array([CanonicalJSON])
    /// Members; the printed order is by key bytes whatever the order here. Duplicate keys
    /// keep the last value.
    case object([String: CanonicalJSON])

    public enum Style: Sendable, Hashable {
        /// No insignificant whitespace: `{"a":[1,2],"b":"x"}`.
        case compact
        /// One fixed indented form. A container holding no container prints on one line,
        /// members separated by `, ` and keys followed by `: ` (`[1, 2, 3]`, `{"x": 1, "y": 2}`);
        /// any other container puts each member on its own line, indented two spaces per
        /// level, with the closing bracket on its own line at the container's indentation.
        /// Empty containers print `[]` and `{}`. The text ends with one `\n`.
        case pretty
    }

    /// The UTF-8 text of this value in `style`.
    public func bytes(_ style: Style = .compact) -> [UInt8] {
        var out: [UInt8] = []
        write(into: &out, style: style, indent: 0)
        if style == .pretty { out.append(0x0A) }
        return out
    }

    /// The text of this value in `style`.
    public func text(_ style: Style = .compact) -> String {
        String(decoding: bytes(style), as: UTF8.self)
    }

    var isContainer: Bool {
        switch self {
        case .array, .object: true
        default: false
        }
    }

    /// Members in printing order: sorted by the UTF-8 bytes of the key.
    static func sortedMembers(_ members: [String: CanonicalJSON]) -> [(key: [UInt8], value: CanonicalJSON)] {
        members.map { (key: Array($0.key.utf8), value: $0.value) }
            .sorted { $0.key.lexicographicallyPrecedes($1.key) }
    }

    func write(into out: inout [UInt8], style: Style, indent: Int) {
        switch self {
        case .null: out.append(contentsOf: Array("null".utf8))
        case .bool(let b): out.append(contentsOf: Array((b ? "true" : "false").utf8))
        case .int(let v): out.append(contentsOf: Array(String(v).utf8))
        case .uint(let v): out.append(contentsOf: Array(String(v).utf8))
        case .string(let s): CanonicalJSON.writeString(Array(s.utf8), into: &out)
        case .array(let items):
            writeContainer(open: 0x5B, close: 0x5D, count: items.count, style: style, indent: indent,
                           nested: items.contains { $0.isContainer }, into: &out) { i, out, inner in
                items[i].write(into: &out, style: style, indent: inner)
            }
        case .object(let members):
            let sorted = CanonicalJSON.sortedMembers(members)
            writeContainer(open: 0x7B, close: 0x7D, count: sorted.count, style: style, indent: indent,
                           nested: sorted.contains { $0.value.isContainer }, into: &out) { i, out, inner in
                CanonicalJSON.writeString(sorted[i].key, into: &out)
                out.append(0x3A)
                if style == .pretty { out.append(0x20) }
                sorted[i].value.write(into: &out, style: style, indent: inner)
            }
        }
    }

    private func writeContainer(open: UInt8, close: UInt8, count: Int, style: Style, indent: Int, nested: Bool,
                                into out: inout [UInt8], member: (Int, inout [UInt8], Int) -> Void) {
        out.append(open)
        defer { out.append(close) }
        guard count > 0 else { return }
        switch style {
        case .compact:
            for i in 0..<count {
                if i > 0 { out.append(0x2C) }
                member(i, &out, indent)
            }
        case .pretty where !nested:
            for i in 0..<count {
                if i > 0 { out.append(0x2C); out.append(0x20) }
                member(i, &out, indent)
            }
        case .pretty:
            let inner = indent + 2
            for i in 0..<count {
                if i > 0 { out.append(0x2C) }
                out.append(0x0A)
                out.append(contentsOf: repeatElement(0x20, count: inner))
                member(i, &out, inner)
            }
            out.append(0x0A)
            out.append(contentsOf: repeatElement(0x20, count: indent))
        }
    }

    package static func writeString(_ utf8: [UInt8], into out: inout [UInt8]) {
        writeString(bytes: utf8, into: &out)
    }

    /// `writeString` of a string's UTF-8, read in place.
    package static func writeString(_ s: String, into out: inout [UInt8]) {
        writeString(bytes: s.utf8, into: &out)
    }

    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    private static func writeString(bytes utf8: some Sequence<UInt8>, into out: inout [UInt8]) {
        let hex = hexDigits
        out.append(0x22)
        for b in utf8 {
            switch b {
            case 0x22: out.append(0x5C); out.append(0x22)
            case 0x5C: out.append(0x5C); out.append(0x5C)
            case 0x08: out.append(0x5C); out.append(UInt8(ascii: "b"))
            case 0x0C: out.append(0x5C); out.append(UInt8(ascii: "f"))
            case 0x0A: out.append(0x5C); out.append(UInt8(ascii: "n"))
            case 0x0D: out.append(0x5C); out.append(UInt8(ascii: "r"))
            case 0x09: out.append(0x5C); out.append(UInt8(ascii: "t"))
            case 0..<0x20:
                out.append(contentsOf: Array("\\u00".utf8))
                out.append(hex[Int(b >> 4)])
                out.append(hex[Int(b & 15)])
            default: out.append(b)
            }
        }
        out.append(0x22)
    }
}

extension CanonicalJSON: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral {
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int64) { self = .int(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: CanonicalJSON...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, CanonicalJSON)...) {
        var d: [String: CanonicalJSON] = [:]
        for (k, v) in elements { d[k] = v }
        self = .object(d)
    }
    public init(nilLiteral: ()) { self = .null }
}
