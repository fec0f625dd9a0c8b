import LnoteSync

/// One `name=value` pair of a URL query, percent-decoded.
public struct HTTPQueryItem: Sendable, Hashable {
    public var name: String
    /// nil for a bare `?flag`.
    public var value: String?
    public init(name: String, value: String?) {
        self.name = name
        self.value = value
    }
}

/// A request as the handler sees it: fully read, body included.
public struct HTTPServerRequest: Sendable, Hashable {
    public var method: String
    /// The path, percent-decoded by libmicrohttpd (`/a%20b` becomes `/a b`).
    public var path: String
    /// The request target exactly as sent (`/a%20b?x=1`).
    public var target: String
    /// The raw text after `?` (empty when none).
    public var query: String
    /// The query's pairs, percent-decoded, in order.
    public var queryItems: [HTTPQueryItem]
    /// `HTTP/1.1`, `HTTP/1.0`.
    public var version: String
    public var headers: HTTPHeaders
    public var body: [UInt8]
    /// The peer's IP address as text (`127.0.0.1`, `::1`); empty when unknown.
    public var remoteAddress: String
    public var remotePort: UInt16

    public init(method: String, path: String, target: String? = nil, query: String = "",
                queryItems: [HTTPQueryItem] = [], version: String = "HTTP/1.1", headers: HTTPHeaders = [:],
                body: [UInt8] = [], remoteAddress: String = "", remotePort: UInt16 = 0) {
        self.method = method
        self.path = path
        self.target = target ?? (query.isEmpty ? path : path + "?" + query)
        self.query = query
        self.queryItems = queryItems
        self.version = version
        self.headers = headers
        self.body = body
        self.remoteAddress = remoteAddress
        self.remotePort = remotePort
    }

    /// The first value of query parameter `name`.
    public func queryValue(_ name: String) -> String? {
        queryItems.first { $0.name == name }?.value
    }
}

/// What the handler answers.
public struct HTTPServerResponse: Sendable, Hashable {
    /// 100...999; anything else is sent as 500.
    public var status: Int
    /// Sent as given; `Content-Length` is set by the server.
    public var headers: HTTPHeaders
    public var body: [UInt8]
    /// Written to the server's log (`HTTPServer.recentLog`) when the response is queued, never
    /// sent: the details of a failure that the client must not see (paths, errno; [SYNC-81]).
    public var logEntry: String?

    public init(status: Int, headers: HTTPHeaders = [:], body: [UInt8] = [], logEntry: String? = nil) {
        self.status = status
        self.headers = headers
        self.body = body
        self.logEntry = logEntry
    }

    /// A `text/plain; charset=utf-8` response.
    public static func text(_ status: Int, _ text: String) -> HTTPServerResponse {
        HTTPServerResponse(status: status, headers: ["Content-Type": "text/plain; charset=utf-8"],
                           body: Array(text.utf8))
    }

    /// An `application/octet-stream` response.
    public static func bytes(_ status: Int, _ body: [UInt8]) -> HTTPServerResponse {
        HTTPServerResponse(status: status, headers: ["Content-Type": "application/octet-stream"], body: body)
    }
}
