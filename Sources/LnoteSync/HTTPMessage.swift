import LnoteModel

/// One header line: a name and its value.
public struct HTTPHeaderField: Sendable, Hashable {
    public var name: String
    public var value: String
    public init(name: String, value: String) {
        self.name = name
        self.value = value
    }
}

/// An ordered list of header fields with case-insensitive lookup by name.
///
/// Shared by the client (`HTTPRequest`, `HTTPResponse`) and the server module.
public struct HTTPHeaders: Sendable, Hashable, Sequence, ExpressibleByDictionaryLiteral {
    public private(set) var fields: [HTTPHeaderField]

    public init(_ fields: [HTTPHeaderField] = []) { self.fields = fields }

    public init(dictionaryLiteral elements: (String, String)...) {
        fields = elements.map { HTTPHeaderField(name: $0.0, value: $0.1) }
    }

    /// The first value for `name` (case-insensitive), or nil.
    public subscript(name: String) -> String? {
        let key = name.lowercased()
        return fields.first { $0.name.lowercased() == key }?.value
    }

    /// Every value for `name`, in order.
    public func values(for name: String) -> [String] {
        let key = name.lowercased()
        return fields.filter { $0.name.lowercased() == key }.map(\.value)
    }

    public func contains(_ name: String) -> Bool { self[name] != nil }

    /// Appends a field, keeping existing ones with the same name.
    public mutating func add(_ name: String, _ value: String) {
        fields.append(HTTPHeaderField(name: name, value: value))
    }

    /// Replaces every field named `name` with one field.
    public mutating func set(_ name: String, _ value: String) {
        remove(name)
        add(name, value)
    }

    public mutating func remove(_ name: String) {
        let key = name.lowercased()
        fields.removeAll { $0.name.lowercased() == key }
    }

    public var count: Int { fields.count }
    public var isEmpty: Bool { fields.isEmpty }
    public func makeIterator() -> IndexingIterator<[HTTPHeaderField]> { fields.makeIterator() }

    /// Throws `.invalidArgument` when a name is not an RFC 9110 token or a value holds CR, LF
    /// or NUL (which would let a caller inject header lines).
    public func validate(context: String? = nil) throws {
        for f in fields {
            guard !f.name.isEmpty, f.name.utf8.allSatisfy(isTokenByte) else {
                throw LnoteError(.invalidArgument, "invalid header name \"\(f.name)\"", path: context)
            }
            guard !f.value.utf8.contains(where: { $0 == 13 || $0 == 10 || $0 == 0 }) else {
                throw LnoteError(.invalidArgument, "header \(f.name) has a CR, LF or NUL in its value", path: context)
            }
        }
    }
}

/// Whether `b` may appear in an HTTP token (method, header name): RFC 9110 section 5.6.2.
func isTokenByte(_ b: UInt8) -> Bool {
    switch b {
    case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
         UInt8(ascii: "0")...UInt8(ascii: "9"):
        return true
    default:
        return "!#$%&'*+-.^_`|~".utf8.contains(b)
    }
}

/// What the client sends.
public struct HTTPRequest: Sendable, Hashable {
    /// `GET`, `POST`, `PUT`, `DELETE`, `HEAD`, ... (any RFC 9110 token).
    public var method: String
    /// An absolute `http://` or `https://` URL.
    public var url: String
    public var headers: HTTPHeaders
    public var body: [UInt8]
    /// Overrides the client's total transfer timeout for this request.
    public var timeout: Duration?
    /// Overrides the client's low-speed window (`Configuration.lowSpeedTime`) for this
    /// request: a long poll ([SYNC-70]) receives nothing for as long as the server holds it.
    public var lowSpeedTime: Duration?

    public init(method: String = "GET", url: String, headers: HTTPHeaders = [:], body: [UInt8] = [],
                timeout: Duration? = nil, lowSpeedTime: Duration? = nil) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeout = timeout
        self.lowSpeedTime = lowSpeedTime
    }

    public static func get(_ url: String, headers: HTTPHeaders = [:]) -> HTTPRequest {
        HTTPRequest(method: "GET", url: url, headers: headers)
    }

    public static func post(_ url: String, body: [UInt8], headers: HTTPHeaders = [:]) -> HTTPRequest {
        HTTPRequest(method: "POST", url: url, headers: headers, body: body)
    }

    /// Sets `Authorization: Bearer <token>`.
    public mutating func setBearerToken(_ token: String) {
        headers.set("Authorization", "Bearer \(token)")
    }

    /// A copy with `Authorization: Bearer <token>`.
    public func withBearerToken(_ token: String) -> HTTPRequest {
        var r = self
        r.setBearerToken(token)
        return r
    }
}

/// What the client received. Any status is a response (a 404 or 503 does not throw).
public struct HTTPResponse: Sendable, Hashable {
    public var status: Int
    /// The headers of the final response (those of interim 1xx responses are dropped).
    public var headers: HTTPHeaders
    public var body: [UInt8]

    public init(status: Int, headers: HTTPHeaders = [:], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// 200...299.
    public var isSuccess: Bool { (200..<300).contains(status) }
}

/// Bytes moved so far in one transfer; totals are 0 while unknown.
public struct HTTPProgress: Sendable, Hashable {
    public var uploaded: Int64
    public var uploadTotal: Int64
    public var downloaded: Int64
    public var downloadTotal: Int64

    public init(uploaded: Int64 = 0, uploadTotal: Int64 = 0, downloaded: Int64 = 0, downloadTotal: Int64 = 0) {
        self.uploaded = uploaded
        self.uploadTotal = uploadTotal
        self.downloaded = downloaded
        self.downloadTotal = downloadTotal
    }
}
