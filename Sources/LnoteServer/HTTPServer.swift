// HTTPServer: an HTTP/1.1 (optionally HTTPS) server over libmicrohttpd.
//
// Threading model: libmicrohttpd owns every thread. Two kinds of handlers:
//
// - A blocking handler (`init(configuration:handler:)`) runs on libmicrohttpd's threads. By
//   default each connection gets its own thread (MHD_USE_THREAD_PER_CONNECTION), so a slow
//   handler delays only its own client; `Threading.pool(n)` uses n polling threads instead,
//   where one slow handler stalls the other connections of its thread. The handler may block
//   (on disk or a lock) but must not call back into Swift concurrency and wait on it (no
//   semaphore-on-async bridge there: the cooperative pool is small).
// - An async handler (`init(configuration:asyncHandler:)`) holds no thread while it waits:
//   libmicrohttpd polls every connection with epoll from one internal thread (n with
//   `.pool(n)`), and a request whose body is complete is suspended
//   (MHD_suspend_connection, which needs MHD_ALLOW_SUSPEND_RESUME) while its handler runs
//   in a task of its own; the task hands the answer over and resumes the connection
//   (MHD_resume_connection, thread-safe through the daemon's inter-thread channel), and
//   libmicrohttpd's thread queues it. A thousand requests held for seconds (long polls,
//   sync-protocol.md [SYNC-73]) cost a suspended connection and a suspended task each.
//
// Abuse limits (`HTTPServer+Guard.swift`, sync-protocol.md [SYNC-76]..[SYNC-80]): headers
// within `headerTimeout` of the connection's opening or its previous request's end; bodies
// at `bodyMinimumBytesPerSecond` after `bodyGrace`; at most `connectionLimit -
// reservedConnections` connections waiting for their headers; the bodies of all requests in
// flight within `bodyMemoryBudget`; an async server's `Admission` hook answers from the
// headers before any byte of the body is read.
//
// Either handler must be thread-safe: several requests run at once. The handler sees a
// request only once its whole body has arrived; bodies are accumulated across
// libmicrohttpd's access-handler calls in a per-request object created by the URI-log
// callback and released in the NOTIFY_COMPLETED callback, which also runs for aborted
// requests. C callbacks reach the server's state through their `void *` arguments
// (`Unmanaged`), never through captures.
//
// `stop()` (or `close()`) shuts the daemon down exactly once. With a blocking handler it
// waits for handlers still running, so a handler blocked forever makes `stop()` block
// forever. With an async handler it stops accepting, answers requests completed from then
// on 503, gives running handlers `Configuration.shutdownGrace` to answer, answers those
// still running 503 itself (libmicrohttpd must not stop with suspended connections), lets
// the answers go out, then stops the daemon.
import CLnoteMicroHTTPD
import Foundation
import LnoteModel
import LnoteSync
import Synchronization

/// An HTTP server: binds at `init`, answers every request with the handler, stops at `stop()`.
public final class HTTPServer: Sendable {
    /// How requests are spread over threads.
    public enum Threading: Sendable, Hashable {
        /// One thread per connection (bounded by `connectionLimit`).
        case threadPerConnection
        /// A fixed number of polling threads shared by all connections.
        case pool(Int)
    }

    /// PEM files for HTTPS.
    public struct TLS: Sendable, Hashable {
        public var certificatePath: String
        public var keyPath: String
        public init(certificatePath: String, keyPath: String) {
            self.certificatePath = certificatePath
            self.keyPath = keyPath
        }
    }

    public struct Configuration: Sendable, Hashable {
        /// An IPv4 or IPv6 literal: `127.0.0.1` (default), `::1`, `0.0.0.0`, `::`.
        public var bindAddress: String = "127.0.0.1"
        /// 0 picks a free port; read it back from `HTTPServer.port`.
        public var port: UInt16 = 0
        /// Serve HTTPS with this certificate and key.
        public var tls: TLS? = nil
        /// Idle connections are closed after this many seconds (0 = never).
        public var connectionTimeoutSeconds: UInt32 = 30
        /// Most connections at once (hence threads, per connection threading).
        public var connectionLimit: UInt32 = 128
        /// Most connections at once from one IP address (0 = no limit).
        public var perIPConnectionLimit: UInt32 = 32
        /// Largest request body. A larger one is answered 413 once the request is admitted
        /// (an `Admission` refusal comes first, its body unread): read and dropped first when
        /// it exceeds the limit by at most the limit again (at least 1 MiB), so that the client
        /// gets the answer; answered at once, and the connection closed, beyond that.
        public var maxRequestBodyBytes: Int = 64 << 20
        /// With a blocking handler: a thread per connection, or a pool. With an async handler,
        /// `.threadPerConnection` means one epoll polling thread and `.pool(n)` n of them:
        /// no connection ever holds a thread.
        public var threading: Threading = .threadPerConnection
        /// Async handlers only: how long `stop()` lets running handlers answer before it
        /// answers them 503 itself.
        public var shutdownGrace: Duration = .seconds(2)
        /// Async handlers only: the answer to requests held or running when `stop()` ends
        /// them, and to requests that arrive on open connections meanwhile (a 503; the sync
        /// servers give the protocol's JSON error, sync-protocol.md [SYNC-74]).
        public var shutdownResponse: HTTPServerResponse = HTTPServer.shuttingDown
        /// [SYNC-76] A request's headers must all arrive within this time of the connection's
        /// opening (or of the end of its previous request); the connection is closed otherwise.
        public var headerTimeout: Duration = .seconds(10)
        /// [SYNC-77] A body must arrive at `bodyMinimumBytesPerSecond` on average, counted
        /// from the end of its headers once this grace has passed; the connection is closed
        /// otherwise.
        public var bodyGrace: Duration = .seconds(10)
        public var bodyMinimumBytesPerSecond: Int = 1024
        /// [SYNC-78] Connections kept for requests past their headers (at most a quarter of
        /// `connectionLimit`): the others at most may wait for their headers, and a new one
        /// beyond that closes the one that has waited longest. A new connection that brings
        /// the server to `connectionLimit` also closes the one that has waited longest, so that
        /// the next can be accepted.
        public var reservedConnections: UInt32 = 32
        /// [SYNC-79] The bodies of all requests in flight together (announced lengths,
        /// reserved before the body is read): a request whose body does not fit is answered
        /// `overloadedResponse` at once. Raised to `maxRequestBodyBytes` when below it.
        public var bodyMemoryBudget: Int = 256 << 20
        /// The answer to a request whose body does not fit in `bodyMemoryBudget` (a 503 with
        /// `Retry-After`; the sync servers give the protocol's JSON error).
        public var overloadedResponse: HTTPServerResponse = HTTPServer.overloaded
        /// The answer to a request whose body exceeds `maxRequestBodyBytes` (a 413); nil: a
        /// plain-text one. The sync servers give the protocol's JSON error.
        public var tooLargeResponse: HTTPServerResponse? = nil
        /// The answer to a request whose body length is told two ways ([SYNC-80]: conflicting
        /// `Content-Length` values, or `Content-Length` with `Transfer-Encoding`), a 400; nil: a
        /// plain-text one naming the reason. The sync servers give the protocol's JSON error.
        /// The reason goes to the server's log either way. (A `Content-Length` that is not a
        /// number is refused by libmicrohttpd itself, before any handler: see
        /// sync-protocol.md [SYNC-80].)
        public var badFramingResponse: HTTPServerResponse? = nil

        public init(bindAddress: String = "127.0.0.1", port: UInt16 = 0, tls: TLS? = nil,
                    connectionTimeoutSeconds: UInt32 = 30, connectionLimit: UInt32 = 128,
                    perIPConnectionLimit: UInt32 = 32, maxRequestBodyBytes: Int = 64 << 20,
                    threading: Threading = .threadPerConnection, shutdownGrace: Duration = .seconds(2)) {
            self.bindAddress = bindAddress
            self.port = port
            self.tls = tls
            self.connectionTimeoutSeconds = connectionTimeoutSeconds
            self.connectionLimit = connectionLimit
            self.perIPConnectionLimit = perIPConnectionLimit
            self.maxRequestBodyBytes = maxRequestBodyBytes
            self.threading = threading
            self.shutdownGrace = shutdownGrace
        }
    }

    /// Answers one request; runs on a libmicrohttpd thread (see the threading model above).
    public typealias Handler = @Sendable (HTTPServerRequest) -> HTTPServerResponse
    /// Decides from a request's line and headers (its `body` is empty) whether its body is
    /// read: nil lets it in, a response refuses it (sent at once; the connection is closed).
    /// Runs in a task of its own while the connection is suspended ([SYNC-78]).
    public typealias Admission = @Sendable (HTTPServerRequest) async -> HTTPServerResponse?
    /// Answers one request in a task of its own while its connection is suspended: it may
    /// wait as long as it likes without holding a thread (a long poll).
    public typealias AsyncHandler = @Sendable (HTTPServerRequest) async -> HTTPServerResponse

    /// The default answer to a request completed while the server stops, or held when it
    /// stopped (`Configuration.shutdownResponse`).
    public static let shuttingDown = HTTPServerResponse(status: 503, headers: ["Content-Type": "text/plain; charset=utf-8",
                                                                         "Retry-After": "1"],
                                                 body: Array("server is shutting down\n".utf8))

    /// The default answer to a request whose body does not fit in the body budget.
    public static let overloaded = HTTPServerResponse(status: 503, headers: ["Content-Type": "text/plain; charset=utf-8",
                                                                       "Retry-After": "1"],
                                               body: Array("server busy: too many request bodies in flight\n".utf8))

    public let configuration: Configuration
    /// The port actually bound.
    public let port: UInt16
    private let context: ServerContext
    private let daemon: Mutex<DaemonPointer?>

    /// Starts serving.
    ///
    /// - Throws: `.invalidArgument` for a bind address that is not an IP literal or a bad
    ///   limit; `.io`/`.notFound` when a TLS file cannot be read; `.network` when the daemon
    ///   cannot start (port in use, bad TLS material), with libmicrohttpd's reason.
    public convenience init(configuration: Configuration = Configuration(), handler: @escaping Handler) throws {
        try self.init(configuration: configuration, answering: .blocking(handler))
    }

    /// Starts serving with an async handler: requests are suspended while it runs, so
    /// requests it holds (long polls) hold no thread (see the threading model above).
    ///
    /// - Throws: as `init(configuration:handler:)`.
    /// - Parameter admission: answers from the headers, before any byte of the body is read
    ///   (a token check); nil reads every body.
    /// - Throws: as `init(configuration:handler:)`.
    public convenience init(configuration: Configuration = Configuration(), admission: Admission? = nil,
                            asyncHandler: @escaping AsyncHandler) throws {
        try self.init(configuration: configuration, answering: .suspending(asyncHandler), admission: admission)
    }

    private init(configuration: Configuration, answering: ServerContext.Answering, admission: Admission? = nil) throws {
        self.configuration = configuration
        guard configuration.maxRequestBodyBytes >= 0 else {
            throw LnoteError(.invalidArgument, "maxRequestBodyBytes must not be negative")
        }
        guard configuration.headerTimeout > .zero, configuration.bodyGrace >= .zero,
              configuration.bodyMinimumBytesPerSecond >= 0 else {
            throw LnoteError(.invalidArgument, "headerTimeout must be positive, bodyGrace and "
                                + "bodyMinimumBytesPerSecond not negative")
        }
        if case .pool(let n) = configuration.threading, n < 1 || n > 1024 {
            throw LnoteError(.invalidArgument, "thread pool size \(n) out of range 1...1024")
        }
        var certificate: String? = nil
        var key: String? = nil
        if let tls = configuration.tls {
            certificate = try Self.readPEM(tls.certificatePath, what: "certificate")
            key = try Self.readPEM(tls.keyPath, what: "key")
        }
        let total = Int(configuration.connectionLimit)
        let limits = ConnectionGuard.Limits(
            headerTimeout: configuration.headerTimeout, bodyGrace: configuration.bodyGrace,
            bodyMinimumBytesPerSecond: configuration.bodyMinimumBytesPerSecond,
            maxAwaitingHeaders: max(1, total - min(Int(configuration.reservedConnections), total / 4)),
            connectionLimit: total,
            bodyBudget: max(configuration.bodyMemoryBudget, configuration.maxRequestBodyBytes))
        let context = ServerContext(answering: answering, admission: admission, maxBody: configuration.maxRequestBodyBytes,
                                    shutdownResponse: configuration.shutdownResponse,
                                    overloadedResponse: configuration.overloadedResponse,
                                    tooLargeResponse: configuration.tooLargeResponse,
                                    badFramingResponse: configuration.badFramingResponse, limits: limits,
                                    certificate: certificate, key: key)
        self.context = context
        let started = try Self.start(configuration, context)
        context.guardian.startWatchdog()
        self.daemon = Mutex(started.daemon)
        self.port = started.port
    }

    deinit { stop() }

    /// `http://127.0.0.1:<port>` (or `https://`, `[::1]` for IPv6).
    public var baseURL: String {
        let scheme = configuration.tls == nil ? "http" : "https"
        var host = configuration.bindAddress
        if host == "0.0.0.0" { host = "127.0.0.1" }
        if host == "::" { host = "::1" }
        if host.contains(":") { host = "[\(host)]" }
        return "\(scheme)://\(host):\(port)"
    }

    /// Whether the daemon is still running.
    public var isRunning: Bool { daemon.withLock { $0 != nil } }

    /// Per-request states alive now (requests being read or handled). Returns to 0 once
    /// every connection has finished, aborted ones included.
    public var activeRequestCount: Int { context.liveRequests.load(ordering: .relaxed) }

    /// Requests an async handler holds or has just answered (until the answer is sent): long
    /// polls being held, for the most part.
    public var suspendedRequestCount: Int { context.suspended.withLock { $0.count } }

    /// Bytes of the body budget held now by requests in flight ([SYNC-79]): their announced
    /// lengths (chunked bodies: what they have grown to), from admission until completion.
    public var bodyBytesInFlight: Int { context.guardian.bodyBytesInFlight }

    /// The most `bodyBytesInFlight` has been since the server started.
    public var peakBodyBytesInFlight: Int { context.guardian.peakBodyBytesInFlight }

    /// Connections waiting for a request's headers now ([SYNC-78]).
    public var connectionsAwaitingHeaders: Int { context.guardian.awaitingHeaders }

    /// What the abuse limits did since the server started: connections closed for a missed
    /// deadline or a slow body ([SYNC-76], [SYNC-77]), connections closed to make room while
    /// waiting for their headers ([SYNC-78]), requests refused for the body budget ([SYNC-79]).
    public var guardCounts: (timedOut: Int, evicted: Int, overBudget: Int) {
        (context.guardian.timedOut.load(ordering: .relaxed), context.guardian.evicted.load(ordering: .relaxed),
         context.guardian.overBudget.load(ordering: .relaxed))
    }

    /// The last messages of the server's log, oldest first: libmicrohttpd's (client errors, TLS
    /// failures), the abuse limits', and the details of failures answered 500 (`logEntry`).
    public var recentLog: [String] { context.log.withLock { $0 } }

    /// Adds `message` to the server's log (`recentLog`, the log handler): what the service
    /// above the HTTP layer has to tell the operator.
    func log(_ message: String) { context.record(message) }

    /// Gives every message of the server's log to `handler` as well, as it is logged (on the
    /// thread that logs it: keep it short): how a process puts incidents ([SYNC-81]) on its
    /// stderr. nil stops.
    public func setLogHandler(_ handler: (@Sendable (String) -> Void)?) {
        context.logHandler.withLock { $0 = handler }
    }

    /// Stops accepting, closes connections and waits for running handlers (async handlers:
    /// at most `shutdownGrace`, then they are answered 503). Idempotent.
    public func stop() {
        let d = daemon.withLock { d -> DaemonPointer? in
            defer { d = nil }
            return d
        }
        guard let d else { return }
        context.stopping.store(true, ordering: .relaxed)
        context.guardian.stop()
        var listening: Int32 = -1
        if case .suspending = context.answering {
            // No new connection; requests on open ones are answered 503 from now on.
            listening = MHD_quiesce_daemon(d.pointer)
            let clock = ContinuousClock()
            let graceEnds = clock.now + configuration.shutdownGrace
            // Requests being handled, and those whose headers or body are still arriving (they
            // are answered 503 once in, [SYNC-74]), within the grace. An idle kept-alive
            // connection holds no request: it is closed with the daemon.
            func underWay() -> Bool { context.suspended.withLock({ !$0.isEmpty }) || context.liveRequests.load(ordering: .relaxed) > 0 }
            while underWay() && clock.now < graceEnds { usleep(2_000) }
            // libmicrohttpd must not stop with a suspended connection: answer the rest here
            // (outside the registry's lock: `finish` takes the connection's, then the daemon's).
            for pending in context.suspended.withLock({ Array($0.values) }) { pending.finish(configuration.shutdownResponse) }
            // Let the answers go out before the connections are closed.
            let drainEnds = clock.now + .seconds(1)
            while underWay() && clock.now < drainEnds { usleep(2_000) }
        }
        MHD_stop_daemon(d.pointer)
        // A quiesced daemon leaves its listening socket to us.
        if listening >= 0 { Glibc.close(listening) }
        // Every request's completion callback has run: drop the callbacks' reference.
        d.context.release()
    }

    /// `stop()`, for symmetry with the other resource owners.
    public func close() throws { stop() }

    // MARK: - Start

    private static func readPEM(_ path: String, what: String) throws -> String {
        guard FileManager.default.fileExists(atPath: path) else {
            throw LnoteError(.notFound, "TLS \(what) file not found", path: path)
        }
        guard let data = FileManager.default.contents(atPath: path),
              let text = String(data: data, encoding: .utf8), text.contains("-----BEGIN") else {
            throw LnoteError(.io, "cannot read a PEM TLS \(what)", path: path)
        }
        return text
    }

    private static func start(_ config: Configuration, _ context: ServerContext) throws -> (daemon: DaemonPointer, port: UInt16) {
        var flags = UInt32(MHD_USE_ERROR_LOG.rawValue) // routed to our logger, never printed
        switch (context.answering, config.threading) {
        case (.blocking, .threadPerConnection):
            flags |= UInt32(MHD_USE_THREAD_PER_CONNECTION.rawValue) | UInt32(MHD_USE_INTERNAL_POLLING_THREAD.rawValue)
                | UInt32(MHD_USE_POLL.rawValue)
        case (.blocking, .pool):
            flags |= UInt32(MHD_USE_INTERNAL_POLLING_THREAD.rawValue) | UInt32(MHD_USE_AUTO.rawValue)
        case (.suspending, _):
            // Suspend/resume is not for thread-per-connection: epoll, one thread per pool slot.
            flags |= UInt32(MHD_USE_INTERNAL_POLLING_THREAD.rawValue) | UInt32(MHD_ALLOW_SUSPEND_RESUME.rawValue)
            #if os(Linux)
            flags |= UInt32(MHD_USE_EPOLL.rawValue)
            #else
            flags |= UInt32(MHD_USE_AUTO.rawValue)
            #endif
        }
        flags |= UInt32(MHD_USE_ITC.rawValue)
        if config.tls != nil { flags |= UInt32(MHD_USE_TLS.rawValue) }

        var address4 = sockaddr_in()
        var address6 = sockaddr_in6()
        let isIPv6: Bool
        if clnote_mhd_sockaddr_in(&address4, config.bindAddress, config.port) == 0 {
            isIPv6 = false
        } else if clnote_mhd_sockaddr_in6(&address6, config.bindAddress, config.port) == 0 {
            isIPv6 = true
            flags |= UInt32(MHD_USE_IPv6.rawValue)
        } else {
            throw LnoteError(.invalidArgument, "bind address must be an IPv4 or IPv6 literal, got \"\(config.bindAddress)\"")
        }

        let unmanaged = Unmanaged.passRetained(context)
        let cls = unmanaged.toOpaque()
        let pointer: OpaquePointer? = withUnsafeMutableBytes(of: &address4) { a4 in
            withUnsafeMutableBytes(of: &address6) { a6 in
                var options: [MHD_OptionItem] = []
                func add(_ o: MHD_OPTION, _ value: Int, _ ptr: UnsafeMutableRawPointer? = nil) {
                    options.append(MHD_OptionItem(option: o, value: value, ptr_value: ptr))
                }
                add(.SOCK_ADDR, 0, isIPv6 ? a6.baseAddress : a4.baseAddress)
                add(.CONNECTION_TIMEOUT, Int(config.connectionTimeoutSeconds))
                add(.CONNECTION_LIMIT, Int(config.connectionLimit))
                add(.PER_IP_CONNECTION_LIMIT, Int(config.perIPConnectionLimit))
                if case .pool(let n) = config.threading { add(.THREAD_POOL_SIZE, n) }
                if let key = context.key, let certificate = context.certificate {
                    add(.HTTPS_MEM_KEY, 0, UnsafeMutableRawPointer(key))
                    add(.HTTPS_MEM_CERT, 0, UnsafeMutableRawPointer(certificate))
                }
                add(.END, 0)
                return options.withUnsafeBufferPointer { items in
                    clnote_mhd_start_daemon(flags, 0, accessHandlerCallback, cls,
                                            requestCompletedCallback, cls,
                                            uriLogCallback, cls,
                                            logCallback, cls,
                                            connectionNotifyCallback, cls,
                                            items.baseAddress)
                }
            }
        }
        guard let pointer else {
            let err = errno
            // libmicrohttpd names port 0 when it was given the address to bind (the port is in
            // the address): say what failed without its misleading port.
            let reason = context.log.withLock { $0.last }.map {
                $0.replacingOccurrences(of: "Failed to bind to port 0: ", with: "cannot bind: ")
            }
            context.guardian.stop()
            unmanaged.release()
            throw LnoteError(.network, "cannot start HTTP server on \(config.bindAddress):\(config.port)"
                                + (reason.map { ": \($0)" } ?? ""),
                             underlying: "errno \(err) (\(String(cString: strerror(err))))")
        }
        let port = clnote_mhd_bind_port(pointer)
        return (DaemonPointer(pointer: pointer, context: unmanaged), port == 0 ? config.port : port)
    }
}

/// The running daemon and the retained context its callbacks use.
struct DaemonPointer: @unchecked Sendable {
    let pointer: OpaquePointer
    let context: Unmanaged<ServerContext>
}
