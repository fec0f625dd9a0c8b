// HTTPClient: HTTP and HTTPS requests over libcurl's easy interface.
//
// Threading model: `curl_easy_perform` blocks, so it never runs on Swift concurrency's
// cooperative pool. The client owns a small pool of dedicated threads (at most
// `Configuration.maxConcurrentTransfers`, started on demand); each thread owns one curl easy
// handle, reused across transfers so kept-alive connections, TLS sessions and DNS answers
// carry over. `send` queues a transfer and suspends on a checked continuation that the
// worker thread resumes exactly once (`HTTPClient+Threads.swift` is the one bridge).
// Requests beyond the pool size wait in a FIFO queue. libcurl's callbacks (body, headers,
// progress) run on the worker thread; they reach the transfer's state through the `void *`
// userdata (an `Unmanaged` reference retained for the duration of the transfer), never
// through captures. The progress closure is therefore called on a worker thread and must be
// quick and thread-safe. Cancelling the calling task aborts the transfer at the next
// progress tick and throws `CancellationError`.
import CLnoteCurl
import LnoteModel

/// An HTTP client over libcurl: `send` one request, get one response.
///
/// A response with any status is returned (a 503 does not throw); failures to get a
/// response throw `LnoteError(.network)` whose message names the method and URL and whose
/// `underlying` reads `CURLE_xxx (n): <curl_easy_strerror>`. A response larger than
/// `Configuration.maxResponseBytes` aborts the transfer with `LnoteError(.limitExceeded)`.
/// `HTTPClient.isTransient(_:)` tells which errors are worth retrying, and
/// `sendWithRetry` retries them with exponential backoff (`HTTPClient+Retry.swift`).
public final class HTTPClient: Sendable {
    /// Timeouts, limits and TLS settings shared by every request of a client.
    public struct Configuration: Sendable, Hashable {
        /// Time allowed to establish the TCP (and TLS) connection.
        public var connectTimeout: Duration = .seconds(10)
        /// Time allowed for a whole transfer; nil for no limit (then rely on the low-speed
        /// limit). A request's own `timeout` overrides it.
        public var requestTimeout: Duration? = .seconds(300)
        /// Abort when fewer than this many bytes per second move for `lowSpeedTime`. 256 B/s
        /// (2 kbit/s, below any usable link): a remote that trickles an answer a few bytes a
        /// second is cut off after `lowSpeedTime`, not after the whole `requestTimeout`.
        /// With `maxReceiveBytesPerSecond`, at most a quarter of that rate.
        public var lowSpeedLimitBytesPerSecond: Int = 256
        /// nil disables the low-speed check. Whole seconds (rounded up).
        public var lowSpeedTime: Duration? = .seconds(60)
        /// Largest response body accepted; the transfer is aborted past it.
        public var maxResponseBytes: Int = 256 << 20
        /// A PEM bundle of CA certificates to trust instead of the system's
        /// (`CURLOPT_CAINFO`). Peer and host verification stay on in every case.
        public var caFile: String? = nil
        /// Sent as `Authorization: Bearer <token>` unless a request sets `Authorization`.
        public var bearerToken: String? = nil
        public var userAgent: String = "lnote"
        /// Number of worker threads, hence of transfers in flight at once (at least 1).
        public var maxConcurrentTransfers: Int = 4
        /// Follow 3xx redirects (to http and https only), at most 5.
        public var followRedirects: Bool = false
        /// A proxy URL (`http://host:port`). nil means no proxy at all: the `http_proxy` /
        /// `https_proxy` environment variables are ignored, so behaviour does not depend on
        /// the environment.
        public var proxy: String? = nil
        /// Receive at most this many bytes per second (`CURLOPT_MAX_RECV_SPEED_LARGE`): a
        /// slow link, for a trial or a metered connection. nil: as fast as the link goes.
        public var maxReceiveBytesPerSecond: Int? = nil

        public init(connectTimeout: Duration = .seconds(10), requestTimeout: Duration? = .seconds(300),
                    lowSpeedLimitBytesPerSecond: Int = 256, lowSpeedTime: Duration? = .seconds(60),
                    maxResponseBytes: Int = 256 << 20, caFile: String? = nil, bearerToken: String? = nil,
                    userAgent: String = "lnote", maxConcurrentTransfers: Int = 4, followRedirects: Bool = false,
                    proxy: String? = nil) {
            self.connectTimeout = connectTimeout
            self.requestTimeout = requestTimeout
            self.lowSpeedLimitBytesPerSecond = lowSpeedLimitBytesPerSecond
            self.lowSpeedTime = lowSpeedTime
            self.maxResponseBytes = maxResponseBytes
            self.caFile = caFile
            self.bearerToken = bearerToken
            self.userAgent = userAgent
            self.maxConcurrentTransfers = maxConcurrentTransfers
            self.followRedirects = followRedirects
            self.proxy = proxy
        }
    }

    public let configuration: Configuration
    let pool: TransferThreadPool

    /// Creates a client; no thread or handle exists until the first request.
    /// - Throws: `LnoteError(.network)` when `curl_global_init` failed.
    public init(configuration: Configuration = Configuration()) throws {
        try CurlGlobal.ensureInitialized()
        self.configuration = configuration
        self.pool = TransferThreadPool(maxThreads: max(1, configuration.maxConcurrentTransfers))
    }

    deinit { pool.close() }

    /// Sends `request` and returns the response, whatever its status.
    ///
    /// - Parameters:
    ///   - request: method, absolute http(s) URL, headers, body.
    ///   - progress: called on a worker thread whenever the byte counts change.
    /// - Throws: `.invalidArgument` for a malformed request (bad method, URL scheme, header
    ///   with CR/LF); `.network` when no response arrived (connect failure, timeout, TLS
    ///   verification, reset); `.limitExceeded` past `maxResponseBytes`; `.invalidState`
    ///   after `close()`; `CancellationError` when the task was cancelled.
    public func send(_ request: HTTPRequest,
                     progress: (@Sendable (HTTPProgress) -> Void)? = nil) async throws -> HTTPResponse {
        try Self.validate(request)
        let transfer = Transfer(request: request, configuration: configuration, progress: progress)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<HTTPResponse, any Error>) in
                transfer.start(continuation, on: pool)
            }
        } onCancel: {
            transfer.cancel()
        }
    }

    /// Refuses new requests; transfers already queued or in flight finish, then each worker
    /// thread releases its curl handle and exits. Calling it again does nothing.
    public func close() throws {
        pool.close()
    }

    /// Whether `close()` has been called.
    public var isClosed: Bool { pool.isClosed }

    static func validate(_ request: HTTPRequest) throws {
        guard !request.method.isEmpty, request.method.utf8.allSatisfy(isTokenByte) else {
            throw LnoteError(.invalidArgument, "invalid HTTP method \"\(request.method)\"", path: request.url)
        }
        let lower = request.url.lowercased()
        guard lower.hasPrefix("http://") || lower.hasPrefix("https://") else {
            throw LnoteError(.invalidArgument, "URL must be absolute http:// or https://", path: request.url)
        }
        guard !request.url.utf8.contains(where: { $0 <= 32 || $0 == 127 }) else {
            throw LnoteError(.invalidArgument, "URL contains a space or control character", path: request.url)
        }
        try request.headers.validate(context: request.url)
    }
}

/// `curl_global_init`, exactly once per process, before any handle exists.
enum CurlGlobal {
    /// Swift runs a static initializer once, thread-safely (swift_once).
    private static let initCode: UInt32 = curl_global_init(clnote_curl_global_all()).rawValue

    static func ensureInitialized() throws {
        let code = initCode
        guard code == CURLE_OK.rawValue else {
            throw LnoteError(.network, "curl_global_init failed",
                             underlying: CurlCode.describe(CURLcode(rawValue: code)))
        }
    }

    /// The libcurl version string, e.g. `libcurl/7.88.1 OpenSSL/3.0.11 ...`.
    static var version: String { String(cString: curl_version()) }
}
