import Dispatch
import Foundation
import LnoteModel
import LnoteServer
import LnoteSync
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A fresh directory under the system temp dir, removed when `body` ends.
func withTempDirectory<T>(_ body: (String) async throws -> T) async throws -> T {
    let dir = FileManager.default.temporaryDirectory
        .appendingPathComponent("lnote-http-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: dir) }
    return try await body(dir)
}

/// The seeded generator the model ships (SplitMix64): one definition for every test.
typealias SeededRNG = SplitMix64

func randomBytes(_ n: Int, _ rng: inout SeededRNG) -> [UInt8] {
    var out = [UInt8](repeating: 0, count: n)
    var i = 0
    while i < n {
        var word = rng.next()
        for _ in 0..<8 where i < n {
            out[i] = UInt8(truncatingIfNeeded: word)
            word >>= 8
            i += 1
        }
    }
    return out
}

/// Runs blocking `body` on its own thread (never on the cooperative pool) and awaits it.
func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread {
            continuation.resume(with: Result { try body() })
        }
        thread.start()
    }
}

/// Waits for `semaphore` without blocking a cooperative thread; false after `seconds`.
func wait(_ semaphore: DispatchSemaphore, seconds: Double = 30) async -> Bool {
    (try? await onThread { semaphore.wait(timeout: .now() + seconds) == .success }) ?? false
}

/// A client with test-friendly timeouts (generous: a failure shows as an error, not a hang).
func makeClient(_ tweak: (inout HTTPClient.Configuration) -> Void = { _ in }) throws -> HTTPClient {
    var config = HTTPClient.Configuration(connectTimeout: .seconds(10), requestTimeout: .seconds(60),
                                          maxConcurrentTransfers: 8)
    tweak(&config)
    return try HTTPClient(configuration: config)
}

/// Echo: the body back, with what the server saw in `X-` headers.
let echoHandler: HTTPServer.Handler = { request in
    var headers: HTTPHeaders = ["Content-Type": "application/octet-stream"]
    headers.add("X-Method", request.method)
    headers.add("X-Path", request.path)
    headers.add("X-Target", request.target)
    headers.add("X-Query-Name", request.queryValue("name") ?? "-")
    headers.add("X-Authorization", request.headers["Authorization"] ?? "-")
    headers.add("X-Custom", request.headers["X-Custom"] ?? "-")
    headers.add("X-Remote", request.remoteAddress)
    headers.add("X-Body-Count", String(request.body.count))
    return HTTPServerResponse(status: 200, headers: headers, body: request.method == "HEAD" ? [] : request.body)
}

// MARK: - Raw sockets (blocking; call through onThread)

enum RawSocket {
    /// A connected TCP socket to 127.0.0.1:`port` with 10 s send/receive timeouts.
    static func connect(port: UInt16) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw LnoteError(.io, "socket", underlying: "errno \(errno)") }
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard rc == 0 else {
            let e = errno
            Glibc.close(fd)
            throw LnoteError(.io, "connect", underlying: "errno \(e)")
        }
        return fd
    }

    static func send(_ fd: Int32, _ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 {
                if errno == EINTR { continue }
                throw LnoteError(.io, "send", underlying: "errno \(errno)")
            }
            offset += n
        }
    }

    /// Reads until the peer closes, an error, or `limit` bytes.
    static func receiveAll(_ fd: Int32, limit: Int = 1 << 20) -> [UInt8] {
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16384)
        while out.count < limit {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            out.append(contentsOf: buffer[..<n])
        }
        return out
    }

    /// Reads until the peer closes: true on end-of-stream or reset, false when the socket's
    /// own 10 s receive timeout fires first.
    static func peerCloses(_ fd: Int32) -> Bool {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n > 0 { continue }
            if n == 0 { return true }
            if errno == EINTR { continue }
            return errno == ECONNRESET
        }
    }

    static func close(_ fd: Int32) { _ = Glibc.close(fd) }
}

/// A bare TCP server on 127.0.0.1 that answers every connection with fixed bytes and
/// closes (used for responses libmicrohttpd would not send, e.g. close-delimited bodies).
final class RawServer: Sendable {
    let port: UInt16
    private let fd: Int32
    private let done = DispatchSemaphore(value: 0)

    init(reply: [UInt8]) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && listen(fd, 16) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard ok else { throw LnoteError(.io, "raw server bind", underlying: "errno \(errno)") }
        self.fd = fd
        self.port = UInt16(bigEndian: address.sin_port)
        let done = self.done
        let thread = Thread {
            while true {
                let client = accept(fd, nil, nil)
                if client < 0 { break }
                // Read the request head, then answer and close.
                var buffer = [UInt8](repeating: 0, count: 65536)
                _ = buffer.withUnsafeMutableBytes { recv(client, $0.baseAddress, $0.count, 0) }
                try? RawSocket.send(client, reply)
                shutdown(client, Int32(SHUT_WR))
                Glibc.close(client)
            }
            done.signal()
        }
        thread.start()
    }

    func stop() {
        shutdown(fd, Int32(SHUT_RDWR))
        Glibc.close(fd)
        done.wait()
    }
}

/// Counts calls across threads.
final class Counter: Sendable {
    private let value = Atomic<Int>(0)
    @discardableResult func increment() -> Int { value.add(1, ordering: .relaxed).newValue }
    var count: Int { value.load(ordering: .relaxed) }
}

/// An echo server whose request bodies are capped at `maxBody` bytes, and the count of the
/// requests its handler saw (an over-limit body never reaches it).
func countingEchoServer(maxBody: Int) throws -> (HTTPServer, Counter) {
    let handled = Counter()
    let server = try HTTPServer(configuration: .init(maxRequestBodyBytes: maxBody)) { request in
        handled.increment()
        return echoHandler(request)
    }
    return (server, handled)
}
