import Dispatch
import Foundation
import LnoteModel
import LnoteServer
import LnoteSync
import Synchronization
import Testing

@Suite("HTTP failures, limits and retries")
struct HTTPFailureTests {
    @Test("a body over the server's cap gets 413 and the server keeps serving")
    func requestBodyCap() async throws {
        let (server, handled) = try countingEchoServer(maxBody: 1024)
        defer { server.stop() }
        let client = try makeClient()
        defer { try? client.close() }
        let exact = try await client.send(.post(server.baseURL + "/ok", body: [UInt8](repeating: 1, count: 1024)))
        #expect(exact.status == 200)
        #expect(exact.body.count == 1024)
        let over = try await client.send(.post(server.baseURL + "/big", body: [UInt8](repeating: 2, count: 64 * 1024)))
        #expect(over.status == 413)
        // Over the limit by less than the drain allowance (the limit again, at least 1 MiB):
        // the server reads and drops the body before answering, so the client always gets
        // the 413, never a reset, however the sending and the answer interleave.
        for i in 0..<10 {
            let drained = try await client.send(.post(server.baseURL + "/drained", body: [UInt8](repeating: 4, count: 1000 * 1024)))
            #expect(drained.status == 413, "attempt \(i)")
        }
        // 5 MB against a 1 KB limit: the server answers 413 early and stops reading. The
        // answer usually reaches the client; when the server closes while the client is
        // still sending, the client sees a send error instead. Either way nothing is handled.
        do {
            let huge = try await client.send(.post(server.baseURL + "/huge", body: [UInt8](repeating: 2, count: 5 << 20)))
            #expect(huge.status == 413)
        } catch let e as LnoteError {
            #expect(e.underlying?.hasPrefix("CURLE_SEND_ERROR") == true || e.underlying?.hasPrefix("CURLE_RECV_ERROR") == true, "\(e)")
        }
        #expect(handled.count == 1) // the handler never saw the oversized requests
        let after = try await client.send(.post(server.baseURL + "/after", body: [3]))
        #expect(after.status == 200)
        #expect(after.body == [3])
    }

    @Test("a body with Content-Length over the cap is read to its end before the 413, so the client gets it")
    func overLimitBodyIsDrainedBeforeTheAnswer() async throws {
        let (server, handled) = try countingEchoServer(maxBody: 1000)
        defer { server.stop() }
        let port = server.port
        let (early, reply) = try await onThread { () -> ([UInt8], [UInt8]) in
            let fd = try RawSocket.connect(port: port)
            defer { RawSocket.close(fd) }
            try RawSocket.send(fd, Array("POST /big HTTP/1.1\r\nHost: x\r\nContent-Length: 4096\r\n\r\n".utf8)
                                   + [UInt8](repeating: 67, count: 100))
            // Nothing is answered while the body is still coming (before, the 413 was sent
            // at once and the connection closed under a client still sending).
            var short = timeval(tv_sec: 0, tv_usec: 300_000)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &short, socklen_t(MemoryLayout<timeval>.size))
            var buffer = [UInt8](repeating: 0, count: 512)
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            let early = n > 0 ? Array(buffer[..<n]) : []
            var long = timeval(tv_sec: 10, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &long, socklen_t(MemoryLayout<timeval>.size))
            try RawSocket.send(fd, [UInt8](repeating: 67, count: 4096 - 100))
            return (early, RawSocket.receiveAll(fd))
        }
        #expect(early.isEmpty, "answered before the body ended: \(String(decoding: early, as: UTF8.self).prefix(100))")
        let text = String(decoding: early + reply, as: UTF8.self)
        #expect(text.hasPrefix("HTTP/1.1 413"), "reply: \(text.prefix(200)) log: \(server.recentLog)")
        // A client that waits for `100 Continue` before sending the body gets the 413 at once
        // instead (and never sends the body).
        let continued = try await onThread { () -> [UInt8] in
            let fd = try RawSocket.connect(port: port)
            defer { RawSocket.close(fd) }
            try RawSocket.send(fd, Array("POST /big HTTP/1.1\r\nHost: x\r\nContent-Length: 4096\r\nExpect: 100-continue\r\n\r\n".utf8))
            return RawSocket.receiveAll(fd)
        }
        let answer = String(decoding: continued, as: UTF8.self)
        #expect(answer.hasPrefix("HTTP/1.1 413"), "reply: \(answer.prefix(200))")
        #expect(handled.count == 0)
    }

    @Test("a chunked body that grows past the cap is refused and the server keeps serving")
    func chunkedBodyCap() async throws {
        let (server, handled) = try countingEchoServer(maxBody: 1000)
        defer { server.stop() }
        let port = server.port
        let reply = try await onThread { () -> [UInt8] in
            let fd = try RawSocket.connect(port: port)
            defer { RawSocket.close(fd) }
            var request = Array("POST /chunked HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n".utf8)
            for _ in 0..<8 { request += Array("200\r\n".utf8) + [UInt8](repeating: 65, count: 0x200) + Array("\r\n".utf8) }
            request += Array("0\r\n\r\n".utf8)
            try? RawSocket.send(fd, request)
            return RawSocket.receiveAll(fd)
        }
        let text = String(decoding: reply, as: UTF8.self)
        #expect(text.hasPrefix("HTTP/1.1 413"), "reply: \(text.prefix(200)) log: \(server.recentLog)")
        #expect(handled.count == 0)
        // A chunked body that goes on past the drain allowance (limit + 1 MiB) is cut off.
        let cutOff = try await onThread { () -> Bool in
            let fd = try RawSocket.connect(port: port)
            defer { RawSocket.close(fd) }
            try RawSocket.send(fd, Array("POST /endless HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n".utf8))
            let chunk = Array("10000\r\n".utf8) + [UInt8](repeating: 66, count: 0x10000) + Array("\r\n".utf8)
            for _ in 0..<64 { // 4 MiB
                do { try RawSocket.send(fd, chunk) } catch { return true } // reset by the server
            }
            return RawSocket.peerCloses(fd)
        }
        #expect(cutOff)
        #expect(handled.count == 0)
        let client = try makeClient()
        defer { try? client.close() }
        let after = try await client.send(.post(server.baseURL + "/after", body: [4]))
        #expect(after.body == [4])
    }

    @Test("a client whose server is gone gets a transient .network error")
    func serverGone() async throws {
        let server = try HTTPServer(handler: echoHandler)
        let url = server.baseURL + "/gone"
        server.stop()
        let client = try makeClient()
        defer { try? client.close() }
        do {
            _ = try await client.send(.get(url))
            Issue.record("request to a stopped server succeeded")
        } catch let e as LnoteError {
            #expect(e.code == .network)
            #expect(e.path == url)
            #expect(e.message.contains(url))
            #expect(e.underlying?.hasPrefix("CURLE_COULDNT_CONNECT (7): ") == true, "\(e)")
            #expect(HTTPClient.isTransient(e))
        }
    }

    @Test("[SYNC-26] sendWithRetry: 503, 503, then 200 succeeds on the third attempt")
    func retryAfter503() async throws {
        let attempts = Counter()
        let server = try HTTPServer { _ in
            attempts.increment() <= 2 ? .text(503, "busy") : .text(200, "done")
        }
        defer { server.stop() }
        let client = try makeClient()
        defer { try? client.close() }
        let seed = UInt64.random(in: 0...UInt64.max)
        var rng = SeededRNG(seed: seed)
        let policy = HTTPClient.RetryPolicy(maxAttempts: 5, initialDelay: .milliseconds(1), maxDelay: .milliseconds(20))
        let r = try await client.sendWithRetry(.get(server.baseURL + "/r"), policy: policy, using: &rng)
        #expect(r.status == 200, "seed \(seed)")
        #expect(r.body == Array("done".utf8))
        #expect(attempts.count == 3)
    }

    @Test("[SYNC-26] sendWithRetry stops at maxAttempts and does not retry permanent answers")
    func retryLimits() async throws {
        let attempts = Counter()
        let server = try HTTPServer { request in
            attempts.increment()
            return request.path == "/missing" ? .text(404, "no") : .text(503, "busy")
        }
        defer { server.stop() }
        let client = try makeClient()
        defer { try? client.close() }
        let policy = HTTPClient.RetryPolicy(maxAttempts: 3, initialDelay: .milliseconds(1), maxDelay: .milliseconds(5))
        let busy = try await client.sendWithRetry(.get(server.baseURL + "/busy"), policy: policy)
        #expect(busy.status == 503)
        #expect(attempts.count == 3)
        let missing = try await client.sendWithRetry(.get(server.baseURL + "/missing"), policy: policy)
        #expect(missing.status == 404)
        #expect(attempts.count == 4)

        // Connection refused is retried, then the last error is thrown with the attempt count.
        let url = server.baseURL
        server.stop()
        do {
            _ = try await client.sendWithRetry(.get(url + "/x"), policy: policy)
            Issue.record("succeeded against a stopped server")
        } catch let e as LnoteError {
            #expect(e.code == .network)
            #expect(e.message.hasSuffix("(after 3 attempts)"), "\(e)")
        }
    }

    @Test("[SYNC-26] retry delays grow exponentially, stay under the cap, and follow the seed")
    func retryDelays() {
        let seed = UInt64.random(in: 0...UInt64.max)
        let policy = HTTPClient.RetryPolicy(maxAttempts: 10, initialDelay: .milliseconds(100), multiplier: 2,
                                            maxDelay: .seconds(1), jitter: 0.5)
        var a = SeededRNG(seed: seed)
        var b = SeededRNG(seed: seed)
        for retry in 1...8 {
            let d = policy.delay(beforeRetry: retry, using: &a)
            #expect(d == policy.delay(beforeRetry: retry, using: &b), "seed \(seed)")
            let base = min(Duration.seconds(1), .milliseconds(100) * (1 << (retry - 1)))
            #expect(d <= base, "retry \(retry), seed \(seed)")
            #expect(d >= base / 2, "retry \(retry), seed \(seed)")
        }
        var c = SeededRNG(seed: seed)
        let noJitter = HTTPClient.RetryPolicy(initialDelay: .milliseconds(100), maxDelay: .seconds(1), jitter: 0)
        #expect(noJitter.delay(beforeRetry: 3, using: &c) == .milliseconds(400))
        #expect(noJitter.delay(beforeRetry: 30, using: &c) == .seconds(1))
    }

    @Test("a response over the client's cap aborts with .limitExceeded")
    func responseCap() async throws {
        let server = try HTTPServer { _ in .bytes(200, [UInt8](repeating: 9, count: 100_000)) }
        defer { server.stop() }
        let client = try makeClient { $0.maxResponseBytes = 10_000 }
        defer { try? client.close() }
        do {
            _ = try await client.send(.get(server.baseURL + "/big"))
            Issue.record("oversized response accepted")
        } catch let e as LnoteError {
            #expect(e.code == .limitExceeded)
            #expect(e.message.contains("10000 bytes"), "\(e)")
            #expect(!HTTPClient.isTransient(e))
        }
        // Same cap, body of unknown length (close-delimited): enforced by the write callback.
        let raw = try RawServer(reply: Array("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n".utf8)
                                    + [UInt8](repeating: 8, count: 100_000))
        defer { raw.stop() }
        do {
            _ = try await client.send(.get("http://127.0.0.1:\(raw.port)/stream"))
            Issue.record("oversized close-delimited response accepted")
        } catch let e as LnoteError {
            #expect(e.code == .limitExceeded, "\(e)")
            #expect(e.underlying?.hasPrefix("CURLE_WRITE_ERROR") == true, "\(e)")
        }
        // Under the cap, the close-delimited body arrives whole.
        let small = try RawServer(reply: Array("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n".utf8)
                                      + [UInt8](repeating: 8, count: 5_000))
        defer { small.stop() }
        let ok = try await client.send(.get("http://127.0.0.1:\(small.port)/stream"))
        #expect(ok.body.count == 5_000)
    }

    @Test("a hung server makes the client time out with CURLE_OPERATION_TIMEDOUT")
    func hungServer() async throws {
        let release = DispatchSemaphore(value: 0)
        let server = try HTTPServer { _ in
            _ = release.wait(timeout: .now() + 60)
            return .text(200, "late")
        }
        defer { server.stop() }
        defer { release.signal() }
        let client = try makeClient { $0.requestTimeout = .seconds(1) }
        defer { try? client.close() }
        do {
            _ = try await client.send(.get(server.baseURL + "/hang"))
            Issue.record("hung request returned")
        } catch let e as LnoteError {
            #expect(e.code == .network)
            #expect(e.underlying?.hasPrefix("CURLE_OPERATION_TIMEDOUT (28)") == true, "\(e)")
            #expect(HTTPClient.isTransient(e))
        }
        release.signal()
    }

    @Test("cancelling the task aborts a transfer with CancellationError")
    func cancellation() async throws {
        let entered = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let server = try HTTPServer { _ in
            entered.signal()
            _ = release.wait(timeout: .now() + 60)
            return .text(200, "late")
        }
        defer { server.stop() }
        defer { release.signal() }
        let client = try makeClient()
        defer { try? client.close() }
        let base = server.baseURL
        let task = Task { try await client.send(.get(base + "/hang")) }
        #expect(await wait(entered))
        task.cancel()
        await #expect(throws: CancellationError.self) { _ = try await task.value }
        release.signal()
    }

    @Test("malformed requests are refused before any transfer")
    func invalidRequests() async throws {
        let client = try makeClient()
        defer { try? client.close() }
        await #expect(throws: LnoteError(.invalidArgument)) {
            _ = try await client.send(HTTPRequest(method: "GE T", url: "http://127.0.0.1:1/"))
        }
        await #expect(throws: LnoteError(.invalidArgument)) { _ = try await client.send(.get("file:///etc/passwd")) }
        await #expect(throws: LnoteError(.invalidArgument)) { _ = try await client.send(.get("http://127.0.0.1:1/a b")) }
        await #expect(throws: LnoteError(.invalidArgument)) {
            _ = try await client.send(.get("http://127.0.0.1:1/", headers: ["X": "a\r\nInjected: 1"]))
        }
        try client.close()
        #expect(client.isClosed)
        await #expect(throws: LnoteError(.invalidState)) { _ = try await client.send(.get("http://127.0.0.1:1/")) }
    }

    @Test("stopping twice is harmless; per-request state is released, aborted requests included")
    func stopTwiceAndRelease() async throws {
        let server = try HTTPServer(handler: echoHandler)
        let port = server.port
        // A request cut off inside its body, and one cut off inside its headers.
        try await onThread {
            let a = try RawSocket.connect(port: port)
            try RawSocket.send(a, Array("POST /cut HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nabc".utf8))
            RawSocket.close(a)
            let b = try RawSocket.connect(port: port)
            try RawSocket.send(b, Array("GET /half HTTP/1.1\r\nHost: x\r\nX-Partial: ".utf8))
            RawSocket.close(b)
        }
        let client = try makeClient()
        defer { try? client.close() }
        #expect(try await client.send(.get(server.baseURL + "/ok")).status == 200)
        #expect(server.isRunning)
        server.stop()
        #expect(!server.isRunning)
        #expect(server.activeRequestCount == 0)
        server.stop()
        try server.close()
        await #expect(throws: LnoteError(.network)) { _ = try await client.send(.get(server.baseURL + "/ok")) }
    }

    @Test("garbage and silent connections do not stop the server from serving others")
    func rawSocketAbuse() async throws {
        let server = try HTTPServer(configuration: .init(connectionTimeoutSeconds: 30), handler: echoHandler)
        defer { server.stop() }
        let port = server.port
        // Garbage: the server answers 400 or closes, but does not crash or hang.
        let garbageReply = try await onThread { () -> [UInt8] in
            let fd = try RawSocket.connect(port: port)
            defer { RawSocket.close(fd) }
            try RawSocket.send(fd, Array("\u{1}\u{2}GARBAGE \0\0 nonsense\r\n\r\n".utf8))
            return RawSocket.receiveAll(fd)
        }
        let text = String(decoding: garbageReply, as: UTF8.self)
        #expect(garbageReply.isEmpty || text.hasPrefix("HTTP/1.1 400") || text.hasPrefix("HTTP/1.0 400"),
                "reply: \(text.prefix(100))")
        // Silent: connections that never send a byte stay open while others are served.
        let silent = try await onThread { try (0..<3).map { _ in try RawSocket.connect(port: port) } }
        defer { silent.forEach(RawSocket.close) }
        let client = try makeClient()
        defer { try? client.close() }
        for i in 0..<5 {
            let r = try await client.send(.post(server.baseURL + "/still-serving", body: [UInt8(i)]))
            #expect(r.body == [UInt8(i)])
        }
    }

    @Test("connections over the per-IP limit are closed at once; the server recovers")
    func perIPLimit() async throws {
        let server = try HTTPServer(configuration: .init(perIPConnectionLimit: 2), handler: echoHandler)
        defer { server.stop() }
        let port = server.port
        let held = try await onThread { try (0..<2).map { _ in try RawSocket.connect(port: port) } }
        // Give libmicrohttpd's listener a moment to accept the two held connections: the
        // limit counts accepted connections, and a loaded machine may not have accepted
        // them yet (this waits for readiness; nothing is asserted about time).
        try await Task.sleep(for: .milliseconds(500))
        let thirdClosed = try await onThread { () -> Bool in
            let fd = try RawSocket.connect(port: port)
            defer { RawSocket.close(fd) }
            return RawSocket.peerCloses(fd)
        }
        #expect(thirdClosed)
        held.forEach(RawSocket.close)
        let client = try makeClient()
        defer { try? client.close() }
        // The held connections are released asynchronously by the server (their threads see
        // the close, then the listener's cleanup gives their per-IP slots back): retry until
        // then. Up to 300 attempts, at most 100 ms apart, is about 20 s: a hang guard, not a
        // deadline (20 attempts, about 1.5 s, could run out on a loaded machine).
        let policy = HTTPClient.RetryPolicy(maxAttempts: 300, initialDelay: .milliseconds(20), maxDelay: .milliseconds(100))
        let r = try await client.sendWithRetry(.post(server.baseURL + "/x", body: [1]), policy: policy)
        #expect(r.body == [1])
    }

    @Test("the server's connection timeout closes idle connections")
    func connectionTimeout() async throws {
        let server = try HTTPServer(configuration: .init(connectionTimeoutSeconds: 1), handler: echoHandler)
        defer { server.stop() }
        let port = server.port
        // The socket's own receive timeout is 10 s; the server closes first (recv returns 0).
        let closedByServer = try await onThread { () -> Bool in
            let fd = try RawSocket.connect(port: port)
            defer { RawSocket.close(fd) }
            return RawSocket.peerCloses(fd)
        }
        #expect(closedByServer)
    }
}
