import Dispatch
import Foundation
import LnoteModel
import LnoteServer
import LnoteSync
import Synchronization
import Testing

/// Whether the loopback interface has ::1 (Linux lists it in /proc/net/if_inet6).
let hasIPv6Loopback: Bool = {
    guard let text = try? String(contentsOfFile: "/proc/net/if_inet6", encoding: .utf8) else { return false }
    return text.contains("00000000000000000000000000000001")
}()

@Suite("HTTP client and server round trips")
struct HTTPRoundTripTests {
    @Test("GET and POST carry binary bodies of 0 bytes, 1 byte and 5 MB both ways")
    func binaryBodies() async throws {
        let server = try HTTPServer(handler: echoHandler)
        defer { server.stop() }
        let client = try makeClient()
        defer { try? client.close() }
        let seed = UInt64.random(in: 0...UInt64.max)
        var rng = SeededRNG(seed: seed)
        for size in [0, 1, 5 << 20] {
            let body = randomBytes(size, &rng)
            let post = try await client.send(.post(server.baseURL + "/upload/x?name=a%20b&flag", body: body,
                                                   headers: ["X-Custom": "v1"]))
            #expect(post.status == 200)
            #expect(post.headers["X-Method"] == "POST")
            #expect(post.headers["X-Path"] == "/upload/x")
            #expect(post.headers["X-Target"] == "/upload/x?name=a%20b&flag")
            #expect(post.headers["X-Query-Name"] == "a b")
            #expect(post.headers["X-Custom"] == "v1")
            #expect(post.headers["X-Remote"] == "127.0.0.1")
            #expect(post.headers["X-Body-Count"] == String(size))
            #expect(post.body == body, "POST \(size) bytes, seed \(seed)")

            // GET with a body is unusual but legal; the server must read it.
            let get = try await client.send(HTTPRequest(method: "GET", url: server.baseURL + "/g", body: body))
            #expect(get.headers["X-Method"] == "GET")
            #expect(get.body == body, "GET \(size) bytes, seed \(seed)")
        }
        for method in ["PUT", "DELETE", "PATCH"] {
            let r = try await client.send(HTTPRequest(method: method, url: server.baseURL + "/m", body: [1, 2, 3]))
            #expect(r.headers["X-Method"] == method)
            #expect(r.body == [1, 2, 3])
        }
        let head = try await client.send(HTTPRequest(method: "HEAD", url: server.baseURL + "/h"))
        #expect(head.status == 200)
        #expect(head.headers["X-Method"] == "HEAD")
        #expect(head.body.isEmpty)
    }

    @Test("bearer token: per request, or from the configuration")
    func bearerToken() async throws {
        let server = try HTTPServer(handler: echoHandler)
        defer { server.stop() }
        let client = try makeClient { $0.bearerToken = "config-token" }
        defer { try? client.close() }
        let a = try await client.send(.get(server.baseURL + "/a"))
        #expect(a.headers["X-Authorization"] == "Bearer config-token")
        let b = try await client.send(HTTPRequest.get(server.baseURL + "/b").withBearerToken("request-token"))
        #expect(b.headers["X-Authorization"] == "Bearer request-token")
    }

    @Test("50 concurrent requests are all answered with their own bodies")
    func concurrentRequests() async throws {
        let server = try HTTPServer(handler: echoHandler)
        defer { server.stop() }
        let client = try makeClient()
        defer { try? client.close() }
        let base = server.baseURL
        let results = try await withThrowingTaskGroup(of: (Int, HTTPResponse).self) { group in
            for i in 0..<50 {
                group.addTask {
                    let body = Array("request \(i)".utf8) + [UInt8](repeating: UInt8(i), count: i * 1000)
                    return (i, try await client.send(.post(base + "/c/\(i)", body: body)))
                }
            }
            var out: [Int: HTTPResponse] = [:]
            for try await (i, r) in group { out[i] = r }
            return out
        }
        #expect(results.count == 50)
        for (i, r) in results {
            #expect(r.status == 200)
            #expect(r.headers["X-Path"] == "/c/\(i)")
            #expect(r.body == Array("request \(i)".utf8) + [UInt8](repeating: UInt8(i), count: i * 1000))
        }
    }

    @Test("a slow handler does not block a fast request")
    func slowHandlerDoesNotBlock() async throws {
        let slowEntered = DispatchSemaphore(value: 0)
        let releaseSlow = DispatchSemaphore(value: 0)
        let server = try HTTPServer { request in
            if request.path == "/slow" {
                slowEntered.signal()
                _ = releaseSlow.wait(timeout: .now() + 60)
                return .text(200, "slow")
            }
            return .text(200, "fast")
        }
        defer { server.stop() }
        defer { releaseSlow.signal() }
        let client = try makeClient()
        defer { try? client.close() }
        let base = server.baseURL
        let slow = Task { try await client.send(.get(base + "/slow")) }
        #expect(await wait(slowEntered))
        // The slow handler is now blocked: the fast request must still be answered.
        let fast = try await client.send(.get(base + "/fast"))
        #expect(fast.body == Array("fast".utf8))
        releaseSlow.signal()
        let slowResponse = try await slow.value
        #expect(slowResponse.body == Array("slow".utf8))
    }

    @Test("the same holds with a thread pool of 2 when the slow and fast land on different threads")
    func threadPool() async throws {
        let server = try HTTPServer(configuration: .init(threading: .pool(2)), handler: echoHandler)
        defer { server.stop() }
        let client = try makeClient()
        defer { try? client.close() }
        let base = server.baseURL
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<20 {
                group.addTask {
                    let r = try await client.send(.post(base + "/p", body: [UInt8(i)]))
                    #expect(r.body == [UInt8(i)])
                }
            }
            try await group.waitForAll()
        }
    }

    @Test("progress reports the bytes sent and received")
    func progress() async throws {
        let server = try HTTPServer(handler: echoHandler)
        defer { server.stop() }
        let client = try makeClient()
        defer { try? client.close() }
        let last = Mutex(HTTPProgress())
        let calls = Counter()
        let body = [UInt8](repeating: 7, count: 1 << 20)
        let r = try await client.send(.post(server.baseURL + "/p", body: body)) { p in
            calls.increment()
            last.withLock { $0 = p }
        }
        #expect(r.body.count == body.count)
        #expect(calls.count > 0)
        let final = last.withLock { $0 }
        #expect(final.uploaded == Int64(body.count))
        #expect(final.downloaded == Int64(body.count))
        #expect(final.downloadTotal == Int64(body.count))
    }

    @Test("an IPv6 server on ::1 answers",
          .enabled(if: hasIPv6Loopback, "skipped: no IPv6 loopback (::1) on this machine"))
    func ipv6() async throws {
        let server = try HTTPServer(configuration: .init(bindAddress: "::1"), handler: echoHandler)
        defer { server.stop() }
        #expect(server.baseURL.hasPrefix("http://[::1]:"))
        let client = try makeClient()
        defer { try? client.close() }
        let r = try await client.send(.post(server.baseURL + "/six", body: [6]))
        #expect(r.body == [6])
        #expect(r.headers["X-Remote"] == "::1")
    }

    @Test("an invalid response from the handler becomes a 500")
    func invalidHandlerResponse() async throws {
        let server = try HTTPServer { request in
            request.path == "/bad-status"
                ? HTTPServerResponse(status: 42)
                : HTTPServerResponse(status: 200, headers: ["X-Evil": "a\r\nInjected: yes"])
        }
        defer { server.stop() }
        let client = try makeClient()
        defer { try? client.close() }
        let a = try await client.send(.get(server.baseURL + "/bad-status"))
        #expect(a.status == 500)
        let b = try await client.send(.get(server.baseURL + "/bad-header"))
        #expect(b.status == 500)
        #expect(b.headers["Injected"] == nil)
    }
}
