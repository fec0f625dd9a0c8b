// PGValue and PGType: the values this wrapper sends and reads, in PostgreSQL's binary
// wire formats (network byte order integers, one byte booleans, raw UTF-8 text and raw
// bytea bytes). Decoding reads only the bytes libpq says the field holds, and checks the
// length of fixed-size types before reading.

/// A PostgreSQL type, by its OID (`pg_type.oid`).
public struct PGType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// Not specified: the server infers the type from the statement (used for NULLs).
    public static let unspecified = PGType(rawValue: 0)
    public static let bool = PGType(rawValue: 16)
    public static let bytea = PGType(rawValue: 17)
    public static let name = PGType(rawValue: 19)
    public static let int8 = PGType(rawValue: 20)
    public static let int2 = PGType(rawValue: 21)
    public static let int4 = PGType(rawValue: 23)
    public static let text = PGType(rawValue: 25)
    public static let oid = PGType(rawValue: 26)
    public static let bpchar = PGType(rawValue: 1042)
    public static let varchar = PGType(rawValue: 1043)

    /// `int8`, `text`, ...; `oid 1184` for types this wrapper does not name.
    public var description: String {
        switch self {
        case .unspecified: "unspecified"
        case .bool: "bool"
        case .bytea: "bytea"
        case .name: "name"
        case .int8: "int8"
        case .int2: "int2"
        case .int4: "int4"
        case .text: "text"
        case .oid: "oid"
        case .bpchar: "bpchar"
        case .varchar: "varchar"
        default: "oid \(rawValue)"
        }
    }

    /// Types whose binary format is the text's UTF-8 bytes.
    var isTextual: Bool { self == .text || self == .varchar || self == .bpchar || self == .name }
}

/// One parameter or field value.
public enum PGValue: Sendable, Equatable, CustomStringConvertible {
    case null
    case int64(Int64)
    case int32(Int32)
    case bool(Bool)
    case text(String)
    case bytea([UInt8])

    /// The type sent with the value: NULL leaves it to the server.
    public var type: PGType {
        switch self {
        case .null: .unspecified
        case .int64: .int8
        case .int32: .int4
        case .bool: .bool
        case .text: .text
        case .bytea: .bytea
        }
    }

    public var description: String {
        switch self {
        case .null: "NULL"
        case .int64(let v): "int8 \(v)"
        case .int32(let v): "int4 \(v)"
        case .bool(let v): "bool \(v)"
        case .text(let s): "text \(s.count > 40 ? String(s.prefix(40)) + "…" : s)"
        case .bytea(let b): "bytea (\(b.count) bytes)"
        }
    }

    /// The binary wire format of this value as `type`, or nil for NULL.
    ///
    /// `type` is the value's own type for unnamed statements; for prepared statements it is
    /// the parameter type the server inferred, so an integer is narrowed (with a range check)
    /// or widened to fit it.
    /// - Throws: `PGError(.invalidArgument)` when the value cannot be sent as `type`.
    func encoded(as type: PGType, parameter index: Int) throws -> [UInt8]? {
        func mismatch() -> PGError {
            PGError(.invalidArgument, "parameter $\(index + 1) is \(type) but the value given is \(self)")
        }
        switch self {
        case .null:
            return nil
        case .int64(let v):
            return try Self.encodeInteger(v, as: type, orThrow: mismatch)
        case .int32(let v):
            return try Self.encodeInteger(Int64(v), as: type, orThrow: mismatch)
        case .bool(let v):
            guard type == .bool else { throw mismatch() }
            return [v ? 1 : 0]
        case .text(let s):
            guard type.isTextual else { throw mismatch() }
            // PostgreSQL text cannot hold NUL: the server would reject it with a less clear message.
            if s.utf8.contains(0) {
                throw PGError(.invalidArgument, "parameter $\(index + 1): text contains a NUL character")
            }
            return Array(s.utf8)
        case .bytea(let b):
            guard type == .bytea else { throw mismatch() }
            return b
        }
    }

    private static func encodeInteger(_ v: Int64, as type: PGType, orThrow mismatch: () -> PGError) throws -> [UInt8] {
        switch type {
        case .int8: return bigEndianBytes(v)
        case .int4:
            guard let n = Int32(exactly: v) else { throw mismatch() }
            return bigEndianBytes(n)
        case .int2:
            guard let n = Int16(exactly: v) else { throw mismatch() }
            return bigEndianBytes(n)
        default: throw mismatch()
        }
    }

    private static func bigEndianBytes<I: FixedWidthInteger>(_ v: I) -> [UInt8] {
        withUnsafeBytes(of: v.bigEndian) { Array($0) }
    }
}

/// Reading binary-format fields. Every function takes exactly the field's bytes (as libpq
/// reports them) and throws `PGError(.decoding)` when their count does not fit the type.
enum PGBinary {
    /// A big-endian signed integer of exactly `I.bitWidth / 8` bytes.
    static func integer<I: FixedWidthInteger>(_ bytes: UnsafeRawBufferPointer, as: I.Type, type: PGType) throws -> I {
        let size = I.bitWidth / 8
        guard bytes.count == size else {
            throw PGError(.decoding, "\(type) field has \(bytes.count) bytes, expected \(size)")
        }
        var v: I = 0
        for b in bytes { v = (v << 8) | I(truncatingIfNeeded: b) }
        return v
    }

    /// Any of int2, int4, int8 widened to `Int64`.
    static func int64(_ bytes: UnsafeRawBufferPointer, type: PGType) throws -> Int64 {
        switch type {
        case .int8: try integer(bytes, as: Int64.self, type: type)
        case .int4: Int64(try integer(bytes, as: Int32.self, type: type))
        case .int2: Int64(try integer(bytes, as: Int16.self, type: type))
        case .oid: Int64(try integer(bytes, as: UInt32.self, type: type))
        default: throw PGError(.typeMismatch, "field is \(type), not an integer")
        }
    }

    static func bool(_ bytes: UnsafeRawBufferPointer, type: PGType) throws -> Bool {
        guard type == .bool else { throw PGError(.typeMismatch, "field is \(type), not bool") }
        guard bytes.count == 1 else {
            throw PGError(.decoding, "bool field has \(bytes.count) bytes, expected 1")
        }
        switch bytes[0] {
        case 0: return false
        case 1: return true
        default: throw PGError(.decoding, "bool field holds \(bytes[0]), expected 0 or 1")
        }
    }

    /// Text types: the bytes must be valid UTF-8 (the connection asks for UTF8 client encoding).
    static func string(_ bytes: UnsafeRawBufferPointer, type: PGType) throws -> String {
        guard type.isTextual else { throw PGError(.typeMismatch, "field is \(type), not text") }
        guard let s = String(validating: bytes, as: UTF8.self) else {
            throw PGError(.decoding, "\(type) field of \(bytes.count) bytes is not valid UTF-8")
        }
        return s
    }

    static func bytes(_ bytes: UnsafeRawBufferPointer, type: PGType) throws -> [UInt8] {
        guard type == .bytea else { throw PGError(.typeMismatch, "field is \(type), not bytea") }
        return Array(bytes)
    }

    /// The field as a `PGValue` (int2 and oid widen to `.int64`, text types become `.text`).
    static func value(_ bytes: UnsafeRawBufferPointer, type: PGType) throws -> PGValue {
        switch type {
        case .int8, .int2, .oid: .int64(try int64(bytes, type: type))
        case .int4: .int32(try integer(bytes, as: Int32.self, type: type))
        case .bool: .bool(try bool(bytes, type: type))
        case .bytea: .bytea(Array(bytes))
        case _ where type.isTextual: .text(try string(bytes, type: type))
        default: throw PGError(.typeMismatch, "field is \(type), which this wrapper does not decode")
        }
    }
}
