/// Every failure in lnote: a code to match on, a message, and the context that lets a
/// person find the problem (file, byte offset, record index, underlying cause).
///
/// Equality compares the code alone, so tests can write `#expect(throws: LnoteError(.truncated))`.
public struct LnoteError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Code: String, Sendable, Equatable, CaseIterable {
        /// Input ended inside a structure (a torn tail, a cut file).
        case truncated
        /// Bytes that cannot be what they claim: bad magic, CRC mismatch, out-of-range value.
        case corrupt
        /// A format version this build does not read.
        case unsupportedVersion
        /// A request or input that is well-formed bytes but not acceptable (bad argument, bad id).
        case invalidArgument
        /// Something named does not exist.
        case notFound
        /// Something that must be unique already exists.
        case alreadyExists
        /// A name matched more than one thing.
        case ambiguous
        /// A system call failed (errno in `underlying`).
        case io
        /// A limit was exceeded (size, count).
        case limitExceeded
        /// The state does not allow the operation (closed handle, deleted page, ...).
        case invalidState
        /// SQLite reported an error.
        case database
        /// A network or HTTP failure.
        case network
        /// Authentication or authorization failed.
        case unauthorized
        /// The other side speaks a protocol we do not.
        case protocolMismatch
    }

    public var code: Code
    public var message: String
    /// The file, URL or request the error is about.
    public var path: String?
    /// For binary data: the byte offset where the problem was found.
    public var offset: Int?
    /// For record streams: the index of the record (frame, line, element).
    public var index: Int?
    /// The underlying cause: `errno 28 (No space left on device)`, `SQLITE_BUSY`, `CURLE_...`.
    public var underlying: String?
    /// Where it was thrown, `File.swift:123`.
    public var location: String

    public init(_ code: Code, _ message: String = "", path: String? = nil, offset: Int? = nil,
                index: Int? = nil, underlying: String? = nil,
                file: StaticString = #fileID, line: UInt = #line) {
        self.code = code
        self.message = message
        self.path = path
        self.offset = offset
        self.index = index
        self.underlying = underlying
        self.location = "\(file):\(line)"
    }

    /// A copy naming `path` (kept when already set) and shifting `offset` by `base`.
    public func at(path: String? = nil, offsetBase base: Int = 0) -> LnoteError {
        var e = self
        if e.path == nil { e.path = path }
        if let o = e.offset { e.offset = o + base }
        return e
    }

    /// `corrupt: CRC mismatch in pages/3F2A….log at offset 8192 (frame 41) [errno 5]`
    public var description: String {
        var s = "\(code.rawValue)"
        if !message.isEmpty { s += ": \(message)" }
        if let path { s += " in \(path)" }
        if let offset { s += " at offset \(offset)" }
        if let index { s += " (record \(index))" }
        if let underlying { s += " [\(underlying)]" }
        return s
    }

    public static func == (l: LnoteError, r: LnoteError) -> Bool { l.code == r.code }
}
