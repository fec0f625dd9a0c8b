/// One SQLite value: what a column holds or a parameter binds.
///
/// `blob([])` is an empty blob, distinct from `null`.
public enum SQLiteValue: Sendable, Hashable, CustomStringConvertible {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob([UInt8])

    public var description: String {
        switch self {
        case .null: return "NULL"
        case .integer(let v): return String(v)
        case .real(let v): return String(v)
        case .text(let s): return "'\(s)'"
        case .blob(let b): return "x'\(b.map { byteHex($0) }.joined())'"
        }
    }

    /// The integer, or nil when the value is not `.integer`.
    public var int64: Int64? { if case .integer(let v) = self { return v }; return nil }
    /// The real (integers widen), or nil.
    public var double: Double? {
        switch self {
        case .real(let v): return v
        case .integer(let v): return Double(v)
        default: return nil
        }
    }
    /// The text, or nil when the value is not `.text`.
    public var string: String? { if case .text(let s) = self { return s }; return nil }
    /// The blob bytes, or nil when the value is not `.blob`.
    public var bytes: [UInt8]? { if case .blob(let b) = self { return b }; return nil }
    public var isNull: Bool { self == .null }
}

private func byteHex(_ b: UInt8) -> String {
    let digits: [Character] = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "A", "B", "C", "D", "E", "F"]
    return String([digits[Int(b >> 4)], digits[Int(b & 0xF)]])
}

extension SQLiteValue: ExpressibleByNilLiteral, ExpressibleByIntegerLiteral,
                       ExpressibleByFloatLiteral, ExpressibleByStringLiteral {
    public init(nilLiteral: ()) { self = .null }
    public init(integerLiteral value: Int64) { self = .integer(value) }
    public init(floatLiteral value: Double) { self = .real(value) }
    public init(stringLiteral value: String) { self = .text(value) }
}
