import Foundation
import Synchronization
import LnoteModel

/// A remote reached over HTTP(S): a peer server (`lnote serve`) or a relay (`lnote relay`).
///
/// `url` is the notebook URL, `BASE/v1/notebooks/{uuid}`. Every request carries the bearer
/// token and the protocol version; transient failures are retried with backoff
/// ([SYNC-26]), which is safe because every request can be repeated ([SYNC-7]).
public final class HTTPRemote: SyncRemote {
    public let url: String
    public let key: String
    private let client: HTTPClient
    private let token: String
    private let retry: HTTPClient.RetryPolicy
    private let requestTimeout: Duration
    private let counters = Mutex<(sent: Int, received: Int)>((0, 0))
    private let progressHandler: (@Sendable (HTTPProgress) -> Void)?
    private let transferObserver = Mutex<(@Sendable (TransferProgress) -> Void)?>(nil)

    public struct Options: Sendable {
        public var token: String
        public var caFile: String?
        public var connectTimeout: Duration = .seconds(10)
        public var requestTimeout: Duration = .seconds(300)
        public var retry = HTTPClient.RetryPolicy()
        /// `HTTPClient.Configuration.maxReceiveBytesPerSecond`.
        public var maxReceiveBytesPerSecond: Int?
        public init(token: String, caFile: String? = nil) {
            self.token = token
            self.caFile = caFile
        }
    }

    /// - Throws: `.invalidArgument` when `url` is not an http(s) notebook URL.
    public init(url: String, options: Options, progress: (@Sendable (HTTPProgress) -> Void)? = nil) throws {
        var u = url
        while u.hasSuffix("/") { u.removeLast() }
        guard u.hasPrefix("http://") || u.hasPrefix("https://"),
              let range = u.range(of: "/v1/notebooks/"), UUID(uuidString: String(u[range.upperBound...])) != nil else {
            throw LnoteError(.invalidArgument, "not a notebook URL (expected http(s)://HOST:PORT/v1/notebooks/UUID): \(url)")
        }
        self.url = u
        self.key = u
        self.token = options.token
        self.retry = options.retry
        self.requestTimeout = options.requestTimeout
        self.progressHandler = progress
        var config = HTTPClient.Configuration()
        config.connectTimeout = options.connectTimeout
        config.requestTimeout = options.requestTimeout
        config.caFile = options.caFile
        config.maxReceiveBytesPerSecond = options.maxReceiveBytesPerSecond
        config.bearerToken = options.token
        config.userAgent = "lnote/\(SyncCodec.version)"
        client = try HTTPClient(configuration: config)
    }

    public var traffic: (sent: Int, received: Int) { counters.withLock { $0 } }

    /// Peer servers and relays hold long polls ([SYNC-70]); one that does not know `wait`
    /// (an older server) answers it 400, and a watcher then falls back on an interval.
    public var supportsLongPolls: Bool { true }

    public func close() throws { try client.close() }

    public func observeTransfers(_ observer: (@Sendable (TransferProgress) -> Void)?) {
        transferObserver.withLock { $0 = observer }
    }

    /// What libcurl's transfer-progress callback (`CURLOPT_XFERINFOFUNCTION`, through
    /// `HTTPClient.send`) is told for one call: the `progress` given at `init`, and the
    /// observer with the remote's running totals (`base`: the totals when the call began;
    /// a retry starts its counts again from there).
    private func transferProgress(base: (sent: Int, received: Int)) -> @Sendable (HTTPProgress) -> Void {
        { [self] p in
            progressHandler?(p)
            guard let observer = transferObserver.withLock({ $0 }) else { return }
            observer(TransferProgress(sent: base.sent + Int(clamping: p.uploaded), received: base.received + Int(clamping: p.downloaded),
                                      receiving: Int(clamping: p.downloaded), receivingTotal: Int(clamping: max(0, p.downloadTotal))))
        }
    }

    /// Sends with retries; counts the bytes of request and response (start line, headers,
    /// body, as HTTP/1.1 writes them); turns error statuses into typed errors.
    ///
    /// - Parameter holds: how long the server may hold the request before it answers (a long
    ///   poll, [SYNC-70]): the transfer's timeout and low-speed window then exceed it.
    private func call(_ method: String, _ path: String, body: [UInt8] = [], contentType: String? = nil,
                      holds: Duration? = nil) async throws -> HTTPResponse {
        var headers: HTTPHeaders = ["Lnote-Protocol": "1"]
        if let contentType { headers.set("Content-Type", contentType) }
        var request = HTTPRequest(method: method, url: url + path, headers: headers, body: body)
        if let holds {
            request.timeout = max(requestTimeout, holds + .seconds(60))
            request.lowSpeedTime = holds + .seconds(30)
        }
        let response = try await client.sendWithRetry(request, policy: retry,
                                                      progress: transferProgress(base: counters.withLock { $0 }))
        let sent = Self.wireSize(startLine: "\(method) \(path) HTTP/1.1", headers: headers, body: body.count,
                                 extra: ["Host", "Authorization: Bearer " + token, "User-Agent", "Accept", "Content-Length"])
        let received = Self.wireSize(startLine: "HTTP/1.1 \(response.status)", headers: response.headers, body: response.body.count, extra: [])
        counters.withLock { $0.sent += sent; $0.received += received }
        guard response.isSuccess else {
            let e = Self.error(from: response, method: method, url: url + path)
            if response.status == 403, let o = try? JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any],
               let hex = o["replica"] as? String, hex.count == 16, let replica = ReplicaID(hex: hex) {
                throw OwnerRefusal(replica: replica, device: o["device"] as? String ?? "", error: e)
            }
            throw e
        }
        return response
    }

    static func wireSize(startLine: String, headers: HTTPHeaders, body: Int, extra: [String]) -> Int {
        var n = startLine.utf8.count + 2
        for h in headers { n += h.name.utf8.count + 2 + h.value.utf8.count + 2 }
        for e in extra { n += max(e.utf8.count, 24) + 2 }
        return n + 2 + body
    }

    /// Maps an error status and its JSON body ([SYNC-22]) to an LnoteError.
    ///
    /// A known error code decides the LnoteError code (`SyncErrorCode.clientCode`: an
    /// `asset_missing` 409 is `notFound`, a `history_not_held` 409 is `invalidState`, as
    /// the same refusals are from a folder); a body that is not a known error (a proxy's
    /// page) falls back on the status. The message names the request, the status and the
    /// error code; `underlying` is `HTTP <status>` or `HTTP <status> <code>`.
    static func error(from r: HTTPResponse, method: String, url: String) -> LnoteError {
        var message = String(decoding: r.body.prefix(1000), as: UTF8.self)
        if [301, 302, 303, 307, 308].contains(r.status) {
            // Not followed ([SYNC-23]: a remote's URL is where it answers); said plainly.
            let to = r.headers["Location"].map { " to \($0)" } ?? ""
            message = "the server redirects\(to); lnote does not follow redirects: use the URL the server answers at"
        } else if message.allSatisfy({ $0.isWhitespace }) {
            message = "(no message)"
        }
        var wire: SyncErrorCode?
        if let o = try? JSONSerialization.jsonObject(with: Data(r.body)) as? [String: Any] {
            if let m = o["message"] as? String { message = m }
            // Only a code that goes with the status is believed.
            if let c = (o["error"] as? String).flatMap(SyncErrorCode.init(rawValue:)), c.status == r.status { wire = c }
        }
        let code: LnoteError.Code
        switch (wire, r.status) {
        case (let c?, _): code = c.clientCode
        case (nil, 401), (nil, 403): code = .unauthorized
        case (nil, 404): code = .notFound
        case (nil, 409): code = .invalidState
        case (nil, 413): code = .limitExceeded
        case (nil, 426): code = .protocolMismatch
        case (nil, 400..<500): code = .invalidArgument
        default: code = .network
        }
        let status = wire.map { "HTTP \(r.status) \($0.rawValue)" } ?? "HTTP \(r.status)"
        return LnoteError(code, "\(method) \(url): \(status): \(message)", path: url, underlying: status)
    }

    /// One exchange; a request with `wait` is a long poll ([SYNC-70]), which the server may
    /// hold that long before answering.
    public func sync(_ request: SyncRequest) async throws -> SyncResponse {
        let r = try await call("POST", "/sync", body: SyncCodec.encode(request), contentType: "application/octet-stream",
                               holds: request.wait.map { .seconds(Int64($0)) })
        return try SyncCodec.decodeResponse(r.body, path: url + "/sync")
    }

    public func missingAssets(_ ids: [AssetID], document: DocumentID) async throws -> [AssetID] {
        // [SYNC-82] A server takes at most `maxMissingAssets` ids per request.
        guard ids.count <= SyncCodec.maxMissingAssets else {
            var missing: [AssetID] = []
            for start in stride(from: 0, to: ids.count, by: SyncCodec.maxMissingAssets) {
                let batch = Array(ids[start..<min(start + SyncCodec.maxMissingAssets, ids.count)])
                missing += try await missingAssets(batch, document: document)
            }
            return missing
        }
        let body = try JSONSerialization.data(withJSONObject: ids.map(\.description))
        let r = try await call("POST", "/documents/\(document)/assets/missing", body: [UInt8](body), contentType: "application/json")
        guard let list = try? JSONSerialization.jsonObject(with: Data(r.body)) as? [String] else {
            throw LnoteError(.corrupt, "missing-assets answer is not a JSON array of strings", path: url)
        }
        return try list.map { s in
            guard let id = AssetID(hex: s) else { throw LnoteError(.corrupt, "bad asset id \"\(s)\" in answer", path: url) }
            return id
        }
    }

    public func putAsset(_ bytes: [UInt8], id: AssetID, document: DocumentID) async throws {
        _ = try await call("PUT", "/documents/\(document)/assets/\(id)", body: bytes, contentType: "application/octet-stream")
    }

    public func getAsset(_ id: AssetID, document: DocumentID) async throws -> [UInt8] {
        try await call("GET", "/documents/\(document)/assets/\(id)").body
    }

    /// `GET …/checkpoints`; a server that keeps none (a peer: 404) gives [].
    public func checkpoints() async throws -> [Checkpoint] {
        do {
            let r = try await call("GET", "/checkpoints")
            return try Checkpoint.decodeList(r.body, path: url + "/checkpoints")
        } catch let e as LnoteError where e.code == .notFound {
            return []
        }
    }

    /// `GET …/devices` ([SYNC-57]): the owner device of each replica id; empty from a server
    /// that has no such route (a peer).
    public func devices() async throws -> [ReplicaID: String] {
        let r: HTTPResponse
        do {
            r = try await call("GET", "/devices")
        } catch let e as LnoteError where e.code == .notFound || e.code == .invalidArgument {
            return [:]
        }
        guard let list = try? JSONSerialization.jsonObject(with: Data(r.body)) as? [[String: Any]] else {
            throw LnoteError(.corrupt, "GET \(url)/devices: not a JSON array of {replica, device}", path: url + "/devices")
        }
        var out: [ReplicaID: String] = [:]
        for o in list {
            guard let hex = o["replica"] as? String, hex.count == 16, let replica = ReplicaID(hex: hex),
                  let device = o["device"] as? String, PrintableText.deviceNameProblem(device) == nil else { continue }
            out[replica] = device
        }
        return out
    }

    /// `PUT …/documents/{doc}/checkpoints/{log}`: {log} is the document id for its
    /// document log, else the page id.
    public func putCheckpoint(_ checkpoint: Checkpoint) async throws {
        let log = checkpoint.log.page?.description ?? checkpoint.log.document.description
        _ = try await call("PUT", "/documents/\(checkpoint.log.document)/checkpoints/\(log)", body: checkpoint.encoded(),
                           contentType: "application/octet-stream")
    }
}
