import CLnoteSQLite
import LnoteModel

extension SQLiteDatabase {
    /// A compiled SQL statement: bind parameters, step through rows, read columns.
    ///
    /// Parameter indexes start at 1 (SQLite's convention), column indexes at 0. Text and
    /// blobs are copied into SQLite when bound (`SQLITE_TRANSIENT`), so the Swift values
    /// need not outlive the call. A statement is finalized by `finalize()`, by its
    /// `deinit`, or by its database's `close()`; afterwards every call throws
    /// `.invalidState`. Not `Sendable`: use it where it was prepared.
    public final class Statement {
        public let database: SQLiteDatabase
        /// The SQL text this statement was compiled from.
        public let sql: String
        private let handle: StatementHandle

        init(database: SQLiteDatabase, handle: StatementHandle, sql: String) {
            self.database = database
            self.handle = handle
            self.sql = sql
        }

        deinit { finalize() }

        /// Releases the compiled statement. Idempotent.
        public func finalize() {
            database.lock.lock()
            defer { database.lock.unlock() }
            if let p = handle.pointer { sqlite3_finalize(p) }
            handle.pointer = nil
            database.forget(handle)
        }

        // MARK: Binding

        /// Binds `value` to the 1-based parameter `index`.
        public func bind(_ value: SQLiteValue, at index: Int) throws {
            try withStatement { stmt in
                guard let i = Int32(exactly: index), i >= 1, i <= sqlite3_bind_parameter_count(stmt) else {
                    throw LnoteError(.invalidArgument,
                                     "parameter index \(index) out of range 1...\(sqlite3_bind_parameter_count(stmt)) in: \(SQLiteDatabase.excerpt(sql))",
                                     path: database.path, index: index)
                }
                let rc: Int32
                switch value {
                case .null:
                    rc = sqlite3_bind_null(stmt, i)
                case .integer(let v):
                    rc = sqlite3_bind_int64(stmt, i, v)
                case .real(let v):
                    rc = sqlite3_bind_double(stmt, i, v)
                case .text(let s):
                    var utf8 = Array(s.utf8)
                    if utf8.isEmpty { utf8 = [0] } // a valid pointer for an empty string
                    let count = UInt64(s.utf8.count)
                    rc = utf8.withUnsafeBufferPointer { buf in
                        buf.baseAddress!.withMemoryRebound(to: CChar.self, capacity: buf.count) { p in
                            sqlite3_bind_text64(stmt, i, p, count, clnote_sqlite_transient(), UInt8(SQLITE_UTF8))
                        }
                    }
                case .blob(let bytes):
                    if bytes.isEmpty {
                        // bind_blob with a NULL pointer would bind SQL NULL, not an empty blob.
                        rc = sqlite3_bind_zeroblob(stmt, i, 0)
                    } else {
                        rc = bytes.withUnsafeBytes { raw in
                            sqlite3_bind_blob64(stmt, i, raw.baseAddress, UInt64(raw.count), clnote_sqlite_transient())
                        }
                    }
                }
                if rc != SQLITE_OK {
                    throw database.error(rc, db: sqlite3_db_handle(stmt), "bind parameter \(index) failed in: \(SQLiteDatabase.excerpt(sql))")
                }
            }
        }

        /// Binds `values` to parameters 1, 2, ... after clearing previous bindings.
        /// The count must equal the statement's parameter count.
        public func bind(_ values: [SQLiteValue]) throws {
            try withStatement { stmt in
                let expected = Int(sqlite3_bind_parameter_count(stmt))
                guard values.count == expected else {
                    throw LnoteError(.invalidArgument,
                                     "\(values.count) values bound to \(expected) parameters in: \(SQLiteDatabase.excerpt(sql))",
                                     path: database.path)
                }
                sqlite3_clear_bindings(stmt)
                for (n, v) in values.enumerated() { try bind(v, at: n + 1) }
            }
        }

        /// Binds `value` to the named parameter (`:name`, `@name` or `$name`, prefix included).
        public func bind(_ value: SQLiteValue, named name: String) throws {
            let index = try withStatement { stmt in Int(sqlite3_bind_parameter_index(stmt, name)) }
            guard index > 0 else {
                throw LnoteError(.invalidArgument, "no parameter named \(name) in: \(SQLiteDatabase.excerpt(sql))",
                                 path: database.path)
            }
            try bind(value, at: index)
        }

        public func bind(_ value: Int64, at index: Int) throws { try bind(.integer(value), at: index) }
        public func bind(_ value: Int, at index: Int) throws { try bind(.integer(Int64(value)), at: index) }
        public func bind(_ value: Double, at index: Int) throws { try bind(.real(value), at: index) }
        public func bind(_ value: String, at index: Int) throws { try bind(.text(value), at: index) }
        public func bind(_ value: [UInt8], at index: Int) throws { try bind(.blob(value), at: index) }
        public func bindNull(at index: Int) throws { try bind(.null, at: index) }

        /// Sets every parameter back to NULL.
        public func clearBindings() throws {
            try withStatement { stmt in _ = sqlite3_clear_bindings(stmt) }
        }

        // MARK: Stepping

        /// Advances to the next row: `true` when a row is available, `false` when done.
        public func step() throws -> Bool {
            try withStatement { stmt in
                let rc = sqlite3_step(stmt)
                switch rc {
                case SQLITE_ROW: return true
                case SQLITE_DONE: return false
                default:
                    // Reset so the statement can be reused; the error is read before that.
                    let e = database.error(rc, db: sqlite3_db_handle(stmt), "step failed: \(SQLiteDatabase.excerpt(sql))")
                    sqlite3_reset(stmt)
                    throw e
                }
            }
        }

        /// Rewinds the statement so it can run again; bindings are kept.
        public func reset() throws {
            try withStatement { stmt in
                // sqlite3_reset repeats the last step's error; that error was already thrown.
                _ = sqlite3_reset(stmt)
            }
        }

        /// Resets, then steps until done, discarding rows.
        public func run() throws {
            try reset()
            while try step() {}
        }

        /// Resets, binds `values`, then steps until done.
        public func run(_ values: [SQLiteValue]) throws {
            try reset()
            try bind(values)
            while try step() {}
        }

        /// Resets, then collects every row.
        public func allRows() throws -> [[SQLiteValue]] {
            try reset()
            var rows: [[SQLiteValue]] = []
            while try step() { rows.append(try row()) }
            return rows
        }

        // MARK: Columns

        /// Number of columns in a result row.
        public var columnCount: Int {
            (try? withStatement { stmt in Int(sqlite3_column_count(stmt)) }) ?? 0
        }

        /// The name of column `index`.
        public func columnName(at index: Int) throws -> String {
            try withColumn(index) { stmt, i in
                sqlite3_column_name(stmt, i).map { String(cString: $0) } ?? ""
            }
        }

        /// Whether column `index` of the current row is NULL.
        public func isNull(at index: Int) throws -> Bool {
            try withColumn(index) { stmt, i in sqlite3_column_type(stmt, i) == SQLITE_NULL }
        }

        /// Column `index` as an integer (SQLite's conversion: NULL is 0, text is parsed).
        public func int64(at index: Int) throws -> Int64 {
            try withColumn(index) { stmt, i in sqlite3_column_int64(stmt, i) }
        }

        /// Column `index` as a real (NULL is 0.0).
        public func double(at index: Int) throws -> Double {
            try withColumn(index) { stmt, i in sqlite3_column_double(stmt, i) }
        }

        /// Column `index` as text, or nil when NULL.
        public func string(at index: Int) throws -> String? {
            try withColumn(index) { stmt, i in
                guard sqlite3_column_type(stmt, i) != SQLITE_NULL else { return nil }
                guard let p = sqlite3_column_text(stmt, i) else { return "" }
                let n = Int(sqlite3_column_bytes(stmt, i))
                return String(decoding: UnsafeBufferPointer(start: p, count: n), as: UTF8.self)
            }
        }

        /// Column `index` as bytes, or nil when NULL (an empty blob is `[]`).
        public func blob(at index: Int) throws -> [UInt8]? {
            try withColumn(index) { stmt, i in
                guard sqlite3_column_type(stmt, i) != SQLITE_NULL else { return nil }
                guard let p = sqlite3_column_blob(stmt, i) else { return [] }
                let n = Int(sqlite3_column_bytes(stmt, i))
                return Array(UnsafeRawBufferPointer(start: p, count: n))
            }
        }

        /// Column `index` with its storage class.
        public func value(at index: Int) throws -> SQLiteValue {
            try withColumn(index) { stmt, i in
                switch sqlite3_column_type(stmt, i) {
                case SQLITE_INTEGER: return .integer(sqlite3_column_int64(stmt, i))
                case SQLITE_FLOAT: return .real(sqlite3_column_double(stmt, i))
                case SQLITE_TEXT:
                    guard let p = sqlite3_column_text(stmt, i) else { return .text("") }
                    let n = Int(sqlite3_column_bytes(stmt, i))
                    return .text(String(decoding: UnsafeBufferPointer(start: p, count: n), as: UTF8.self))
                case SQLITE_BLOB:
                    guard let p = sqlite3_column_blob(stmt, i) else { return .blob([]) }
                    let n = Int(sqlite3_column_bytes(stmt, i))
                    return .blob(Array(UnsafeRawBufferPointer(start: p, count: n)))
                default: return .null
                }
            }
        }

        /// Every column of the current row.
        public func row() throws -> [SQLiteValue] {
            let n = columnCount
            var values: [SQLiteValue] = []
            values.reserveCapacity(n)
            for i in 0..<n { values.append(try value(at: i)) }
            return values
        }

        // MARK: Internal

        private func withStatement<T>(_ body: (OpaquePointer) throws -> T) throws -> T {
            database.lock.lock()
            defer { database.lock.unlock() }
            guard let p = handle.pointer else {
                throw LnoteError(.invalidState, "statement is finalized (or its database closed): \(SQLiteDatabase.excerpt(sql))",
                                 path: database.path)
            }
            return try body(p)
        }

        private func withColumn<T>(_ index: Int, _ body: (OpaquePointer, Int32) throws -> T) throws -> T {
            try withStatement { stmt in
                let count = sqlite3_column_count(stmt)
                guard let i = Int32(exactly: index), i >= 0, i < count else {
                    throw LnoteError(.invalidArgument, "column index \(index) out of range 0..<\(count) in: \(SQLiteDatabase.excerpt(sql))",
                                     path: database.path, index: index)
                }
                return try body(stmt, i)
            }
        }
    }
}
