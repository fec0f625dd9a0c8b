import CLnotePQ

/// The rows of one successful statement, every field in binary format.
///
/// A `PGResult` owns its `PGresult *` (freed by `deinit`) and does not depend on the
/// connection: it stays readable after the connection is closed. It is immutable, so it
/// can be read from any thread. Getters check the row and column, the field's type and
/// its length, and throw `PGError` instead of trapping on data that is not what they
/// expect.
public final class PGResult: @unchecked Sendable {
    let handle: OpaquePointer

    /// Takes ownership of a result whose status is `PGRES_TUPLES_OK` or `PGRES_COMMAND_OK`.
    init(handle: OpaquePointer) { self.handle = handle }

    deinit { PQclear(handle) }

    /// The number of rows returned.
    public var rowCount: Int { Int(PQntuples(handle)) }
    public var columnCount: Int { Int(PQnfields(handle)) }

    /// Rows inserted, updated or deleted (from the command tag), 0 when it names none.
    public var affectedRows: Int {
        guard let p = PQcmdTuples(handle) else { return 0 }
        return Int(String(cString: p)) ?? 0
    }

    /// The command tag: `INSERT 0 1`, `SELECT 3`, `COMMIT`, ...
    public var commandTag: String { PQcmdStatus(handle).map { String(cString: $0) } ?? "" }

    public func columnName(_ column: Int) throws -> String {
        try checkColumn(column)
        return PQfname(handle, Int32(column)).map { String(cString: $0) } ?? ""
    }

    public func columnType(_ column: Int) throws -> PGType {
        try checkColumn(column)
        return PGType(rawValue: PQftype(handle, Int32(column)))
    }

    public func isNull(_ row: Int, _ column: Int) throws -> Bool {
        try checkCell(row, column)
        return PQgetisnull(handle, Int32(row), Int32(column)) == 1
    }

    /// An int2, int4, int8 (or oid) field, widened.
    public func int64(_ row: Int, _ column: Int) throws -> Int64 {
        try field(row, column) { try PGBinary.int64($0, type: $1) }
    }

    /// An int4 field.
    public func int32(_ row: Int, _ column: Int) throws -> Int32 {
        try field(row, column) { bytes, type in
            guard type == .int4 else { throw PGError(.typeMismatch, "field is \(type), not int4") }
            return try PGBinary.integer(bytes, as: Int32.self, type: type)
        }
    }

    public func bool(_ row: Int, _ column: Int) throws -> Bool {
        try field(row, column) { try PGBinary.bool($0, type: $1) }
    }

    /// A text, varchar, bpchar or name field.
    public func string(_ row: Int, _ column: Int) throws -> String {
        try field(row, column) { try PGBinary.string($0, type: $1) }
    }

    /// A bytea field's bytes.
    public func bytes(_ row: Int, _ column: Int) throws -> [UInt8] {
        try field(row, column) { try PGBinary.bytes($0, type: $1) }
    }

    /// Any field of a type listed in `PGValue`, `.null` for NULL.
    public func value(_ row: Int, _ column: Int) throws -> PGValue {
        if try isNull(row, column) { return .null }
        return try field(row, column) { try PGBinary.value($0, type: $1) }
    }

    /// Every row as values (for small results and tests).
    public func rows() throws -> [[PGValue]] {
        try (0..<rowCount).map { r in try (0..<columnCount).map { c in try value(r, c) } }
    }

    // MARK: - Internal

    /// Runs `decode` over the non-NULL binary field at (`row`, `column`), exactly
    /// `PQgetlength` bytes long.
    private func field<T>(_ row: Int, _ column: Int,
                          _ decode: (UnsafeRawBufferPointer, PGType) throws -> T) throws -> T {
        try checkCell(row, column)
        let r = Int32(row), c = Int32(column)
        let type = PGType(rawValue: PQftype(handle, c))
        guard PQgetisnull(handle, r, c) == 0 else {
            throw PGError(.typeMismatch, "field (\(row), \(column)) of type \(type) is NULL")
        }
        guard PQfformat(handle, c) == 1 else {
            throw PGError(.decoding, "column \(column) is in text format; this wrapper reads binary only")
        }
        let length = Int(PQgetlength(handle, r, c))
        guard length >= 0, let base = PQgetvalue(handle, r, c) else {
            throw PGError(.decoding, "field (\(row), \(column)) has no value")
        }
        do {
            return try decode(UnsafeRawBufferPointer(start: UnsafeRawPointer(base), count: length), type)
        } catch var e as PGError {
            e.context = "field (\(row), \(column))"
            throw e
        }
    }

    private func checkColumn(_ column: Int) throws {
        guard column >= 0 && column < columnCount else {
            throw PGError(.invalidArgument, "column \(column) out of range (result has \(columnCount) columns)")
        }
    }

    private func checkCell(_ row: Int, _ column: Int) throws {
        guard row >= 0 && row < rowCount else {
            throw PGError(.invalidArgument, "row \(row) out of range (result has \(rowCount) rows)")
        }
        try checkColumn(column)
    }
}
