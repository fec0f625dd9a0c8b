// HTTPServer: an HTTP/1.1 (optionally HTTPS) server over libmicrohttpd.
//
// Threading model: libmicrohttpd owns every thread. By default each connection gets its
// own thread (MHD_USE_THREAD_PER_CONNECTION), so a slow handler delays only its own
// client; `Threading.pool(n)` uses n polling threads instead, where one slow handler stalls
// the other connections of its thread. The handler is synchronous and runs on those
// threads: it may block (on disk or a lock) but must not call back into Swift concurrency
// and wait on it (no semaphore-on-async bridge there: the cooperative pool is small). It
// must be thread-safe: several requests run at once. The handler sees a request only once
// its whole body has arrived; bodies are accumulated across libmicrohttpd's access-handler
// calls in a per-request object created by the URI-log callback and released in the
// NOTIFY_COMPLETED callback, which also runs for aborted requests. C callbacks reach the
// server's state through their `void *` arguments (`Unmanaged`), never through captures.
// `stop()` (or `close()`) shuts the daemon down exactly once and waits for handlers still
// running, so a handler blocked forever makes `stop()` block forever.
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
        /// Largest request body. A larger one is answered 413: read and dropped first when it
        /// exceeds the limit by at most the limit again (at least 1 MiB), so that the client
        /// gets the answer; answered at once, and the connection closed, beyond that.
        public var maxRequestBodyBytes: Int = 64 << 20
        public var threading: Threading = .threadPerConnection

        public init(bindAddress: String = "127.0.0.1", port: UInt16 = 0, tls: TLS? = nil,
                    connectionTimeoutSeconds: UInt32 = 30, connectionLimit: UInt32 = 128,
                    perIPConnectionLimit: UInt32 = 32, maxRequestBodyBytes: Int = 64 << 20,
                    threading: Threading = .threadPerConnection) {
            self.bindAddress = bindAddress
            self.port = port
            self.tls = tls
            self.connectionTimeoutSeconds = connectionTimeoutSeconds
            self.connectionLimit = connectionLimit
            self.perIPConnectionLimit = perIPConnectionLimit
            self.maxRequestBodyBytes = maxRequestBodyBytes
            self.threading = threading
        }
    }

    /// Answers one request; runs on a libmicrohttpd thread (see the threading model above).
    public typealias Handler = @Sendable (HTTPServerRequest) -> HTTPServerResponse

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
    public init(configuration: Configuration = Configuration(), handler: @escaping Handler) throws {
        self.configuration = configuration
        guard configuration.maxRequestBodyBytes >= 0 else {
            throw LnoteError(.invalidArgument, "maxRequestBodyBytes must not be negative")
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
        let context = ServerContext(handler: handler, maxBody: configuration.maxRequestBodyBytes,
                                    certificate: certificate, key: key)
        self.context = context
        let started = try Self.start(configuration, context)
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

    /// The last messages libmicrohttpd logged (client errors, TLS failures), oldest first.
    public var recentLog: [String] { context.log.withLock { $0 } }

    /// Stops accepting, closes connections and waits for running handlers. Idempotent.
    public func stop() {
        let d = daemon.withLock { d -> DaemonPointer? in
            defer { d = nil }
            return d
        }
        guard let d else { return }
        MHD_stop_daemon(d.pointer)
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
        switch config.threading {
        case .threadPerConnection:
            flags |= UInt32(MHD_USE_THREAD_PER_CONNECTION.rawValue) | UInt32(MHD_USE_INTERNAL_POLLING_THREAD.rawValue)
                | UInt32(MHD_USE_POLL.rawValue)
        case .pool:
            flags |= UInt32(MHD_USE_INTERNAL_POLLING_THREAD.rawValue) | UInt32(MHD_USE_AUTO.rawValue)
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
                                            items.baseAddress)
                }
            }
        }
        guard let pointer else {
            let err = errno
            let reason = context.log.withLock { $0.last }
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
