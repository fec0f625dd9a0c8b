import Foundation
import Synchronization
import Testing
import LnoteModel
import LnoteReplication
import LnoteServer
@testable import LnoteSync
import LnoteTestSupport

/// Long polls against a real relay on 127.0.0.1 (libmicrohttpd, epoll, suspend/resume) through
/// the real libcurl client: held until another client pushes, answered empty after their
/// wait, hundreds held while other requests are served, answered 503 when the relay stops.
@Suite struct RelayLongPollTests {
    /// A relay server in a temp directory with one notebook, and a token per device.
    struct Served: @unchecked Sendable {
        let store: RelayStore
        let server: RelayServer
        let notebook: NotebookID
        var url: String { server.url(notebook: notebook) }
        func token(_ device: String) throws -> String { try store.createToken(notebook: notebook, label: device, device: device) }
    }

    static func withServer<T>(_ backend: RelayBackendKind = .sqlite,
                              configuration: HTTPServer.Configuration = .init(connectionLimit: 1024, perIPConnectionLimit: 0),
                              _ body: (Served) async throws -> T) async throws -> T {
        try await withRelay(backend) { store, nb, _ in
            let server = try RelayServer(store: store, configuration: configuration)
            defer { try? server.close() }
            return try await body(Served(store: store, server: server, notebook: nb))
        }
    }

    static func remote(_ url: String, _ token: String, attempts: Int = 1) throws -> HTTPRemote {
        var o = HTTPRemote.Options(token: token)
        o.retry.maxAttempts = attempts
        return try HTTPRemote(url: url, options: o)
    }

    /// Waits until `condition` holds (bounded).
    static func seconds(_ d: Duration) -> Double { Double(d.components.seconds) + Double(d.components.attoseconds) * 1e-18 }

    /// [SYNC-70] [SYNC-71] [SYNC-72] A long poll is held while nothing is new; another
    /// client's push answers it at once (well inside the 150 ms of the latency budget) with
    /// that operation; with nothing new it is answered after its N seconds, empty, at the
    /// same cursor; the client's own push does not end its wait (its operation comes when the
    /// wait ends); a push and a wait in one request store the push at once, then wait.
    @Test("[SYNC-70] [SYNC-71] [SYNC-72] answered when another client pushes, empty after N s; own pushes do not wake it", arguments: RelayBackends.all)
    func answeredOnPushAndAfterWait(backend: RelayBackendKind) async throws {
        var seed = UInt64.random(in: 0...UInt64.max)
        if let s = ProcessInfo.processInfo.environment["LNOTE_SEED"].flatMap(UInt64.init) { seed = s }
        print("RelayLongPollTests.answeredOnPushAndAfterWait: LNOTE_SEED=\(seed)")
        var rng = SeededRNG(seed: seed)
        try await Self.withServer(backend) { s in
            let a = TestNotebook(replica: ReplicaID(0xA1)), b = TestNotebook(replica: ReplicaID(0xB2))
            let ra = try Self.remote(s.url, try s.token("a")), rb = try Self.remote(s.url, try s.token("b"))
            defer { try? ra.close(); try? rb.close() }
            let doc = try a.createDocument("live")
            let page = LogRef(document: doc, page: try a.addPage(doc))
            try a.addStroke(page, randomStroke(&rng))
            let sa = SyncSession(notebook: a, remote: ra), sb = SyncSession(notebook: b, remote: rb)
            _ = try await sa.run()
            _ = try await sb.run()
            #expect(b.view == a.view)

            // Nothing new: answered after its N seconds, empty, at the same cursor.
            let clock = ContinuousClock()
            let q1 = try #require(try await sb.longPollRequest(wait: 1))
            let start1 = clock.now
            let empty = try await rb.sync(q1)
            let waited = Self.seconds(clock.now - start1)
            print("empty long poll of 1 s answered after \(waited) s")
            #expect(waited >= 0.95 && waited < 3, "held \(waited) s")
            #expect(empty.pull.isEmpty && empty.cursor == q1.cursor && empty.epoch == q1.epoch && !empty.resync)

            // Another client pushes: answered at once, with its operation.
            let q2 = try #require(try await sb.longPollRequest(wait: 30))
            let poll = Task { () -> (SyncResponse, ContinuousClock.Instant) in
                let r = try await rb.sync(q2)
                return (r, ContinuousClock.now)
            }
            #expect(await eventually { s.server.longPolls.waiting == 1 }, "the poll is held")
            let stroke = try a.addStroke(page, randomStroke(&rng))
            _ = try await sa.run()
            let pushed = clock.now
            let (answer, answeredAt) = try await poll.value
            let latency = Self.seconds(answeredAt - pushed)
            print("long poll answered \(Int(latency * 1000)) ms after the push was acknowledged")
            #expect(latency < 0.5, "answered \(latency) s after the push (budget: p50 150 ms, p99 500 ms)")
            #expect(answer.pull.flatMap(\.frames).count == 1)
            _ = try await sb.absorbLongPoll(answer, for: q2)
            #expect(b.live(page).contains(stroke))
            #expect(b.view == a.view)

            // Its own push does not end its wait; the operation comes when the wait ends.
            let q3 = try #require(try await sb.longPollRequest(wait: 2))
            let start3 = clock.now
            let own = Task { try await rb.sync(q3) }
            #expect(await eventually { s.server.longPolls.waiting == 1 })
            let mine = try b.addStroke(page, randomStroke(&rng))
            _ = try await sb.run()
            try await Task.sleep(for: .milliseconds(300))
            #expect(await eventually { s.server.longPolls.waiting == 1 }, "b's own push woke b's long poll")
            let ownAnswer = try await own.value
            #expect(Self.seconds(clock.now - start3) >= 1.9)
            #expect(try ownAnswer.pull.flatMap { try $0.ops() }.map(\.id.replica) == [ReplicaID(0xB2)])
            _ = try await sb.absorbLongPoll(ownAnswer, for: q3)
            #expect(b.live(page).contains(mine))

            // A push and a wait in one request: the push is stored at once (a third client
            // pulls it while the request is held), then the request waits for what it lacks.
            _ = try await sa.run()
            let extra = try a.addStroke(page, randomStroke(&rng))
            let qa = try #require(try await sa.longPollRequest(wait: 30))
            var withPush = qa
            withPush.push = [LogBatch(log: page, frames: try await a.frames(in: page, notCoveredBy: b.state.withLock { $0.pages[page]!.clock }))]
            #expect(withPush.push[0].frames.count == 1)
            let held = Task { try await ra.sync(withPush) }
            #expect(await eventually { s.server.longPolls.waiting == 1 })
            let c = TestNotebook(replica: ReplicaID(0xC3))
            let rc = try Self.remote(s.url, try s.token("c"))
            defer { try? rc.close() }
            _ = try await SyncSession(notebook: c, remote: rc).run()
            #expect(c.live(page).contains(extra), "the push of the held request is stored at once")
            // A change notice (PostgreSQL: the NOTIFY of the held request's own push) makes the
            // request look again: it may be between two waits for a moment, never answered.
            #expect(await eventually { s.server.longPolls.waiting == 1 }, "still held: nothing a1 lacks yet")
            let fromB = try b.addStroke(page, randomStroke(&rng))
            _ = try await sb.run()
            let released = try await held.value
            #expect(released.accepted == 1, "the first handling's count")
            #expect(try released.pull.flatMap { try $0.ops() }.map(\.body.name).count >= 1)
            _ = try await sa.absorbLongPoll(released, for: qa)
            #expect(a.live(page).contains(fromB))
        }
    }

    /// [SYNC-72] Resetting the notebook's epoch answers the requests held for it (`resync`).
    @Test("[SYNC-72] an epoch reset answers held long polls with resync", arguments: RelayBackends.all)
    func epochResetWakes(backend: RelayBackendKind) async throws {
        try await Self.withServer(backend) { s in
            let b = TestNotebook(replica: ReplicaID(0xB2))
            let rb = try Self.remote(s.url, try s.token("b"))
            defer { try? rb.close() }
            let sb = SyncSession(notebook: b, remote: rb)
            _ = try await sb.run()
            let q = try #require(try await sb.longPollRequest(wait: 30))
            let poll = Task { try await rb.sync(q) }
            #expect(await eventually { s.server.longPolls.waiting == 1 })
            try s.store.resetEpoch(notebook: s.notebook)
            let answer = try await poll.value
            #expect(answer.resync)
            _ = try await sb.absorbLongPoll(answer, for: q)
            #expect(try await sb.longPollRequest(wait: 30) == nil, "the next sync compares clocks")
        }
    }

    /// [SYNC-73] 200 long polls held at once by one relay: each holds a connection and no
    /// thread (the relay's process gains no thread per held request), other requests are
    /// answered promptly meanwhile, and one push answers all 200.
    @Test("[SYNC-73] 200 long polls held while other requests are served promptly")
    func manyHeldWhileOthersAreServed() async throws {
        let n = 200
        try await Self.withServer { s in
            // A token holds at most 16 long polls ([SYNC-73]): the watchers are 13 devices.
            let tokens = try (0..<13).map { try s.token("watchers \($0)") }
            let a = TestNotebook(replica: ReplicaID(0xA1))
            let ra = try Self.remote(s.url, try s.token("a"))
            defer { try? ra.close() }
            let doc = try a.createDocument("many")
            let page = LogRef(document: doc, page: try a.addPage(doc))
            var rng = SeededRNG(seed: 200)
            try a.addStroke(page, randomStroke(&rng))
            let sa = SyncSession(notebook: a, remote: ra)
            _ = try await sa.run()
            let (epoch, cursor) = try await { () -> (UInt64, UInt64) in
                let q = try #require(try await sa.longPollRequest(wait: 1))
                return (q.epoch, q.cursor)
            }()

            let threadsBefore = Self.threadCount()
            // One libcurl client with a transfer thread per watcher: the watchers are ours.
            let client = try HTTPClient(configuration: .init(maxConcurrentTransfers: n))
            defer { try? client.close() }
            let polls = (0..<n).map { i in
                Task { () -> SyncResponse in
                    let q = SyncRequest(replica: ReplicaID(UInt64(0x1000 + i)), epoch: epoch, cursor: cursor, wait: 30)
                    let r = try await client.send(HTTPRequest(method: "POST", url: s.url + "/sync",
                                                              headers: ["Lnote-Protocol": "1", "Authorization": "Bearer \(tokens[i % tokens.count])"],
                                                              body: SyncCodec.encode(q), timeout: .seconds(60), lowSpeedTime: .seconds(60)))
                    guard r.status == 200 else { throw LnoteError(.network, "status \(r.status)") }
                    return try SyncCodec.decodeResponse(r.body)
                }
            }
            let allHeld = await eventually(30) { s.server.longPolls.waiting == n }
            #expect(allHeld, "\(s.server.longPolls.waiting) of \(n) held")
            #expect(s.server.http.suspendedRequestCount >= n)
            // The relay holds them without a thread each: the process gained the client's
            // transfer threads (n) and not another n for the server.
            let gained = Self.threadCount() - threadsBefore
            print("threads gained while \(n) long polls are held: \(gained) (the client's \(n) transfer threads included)")
            #expect(gained < n + 50, "the server holds a thread per held request")

            // Other requests meanwhile (from another client: this one's threads are all
            // taken by the long polls): a hello, a first sync, answered promptly.
            let otherClient = try HTTPClient()
            defer { try? otherClient.close() }
            let clock = ContinuousClock()
            let t0 = clock.now
            let hello = try await otherClient.send(.get(s.server.http.baseURL + "/v1/hello"))
            let helloTime = Self.seconds(clock.now - t0)
            #expect(hello.status == 200)
            let other = TestNotebook(replica: ReplicaID(0xD4))
            let rd = try Self.remote(s.url, try s.token("d"))
            defer { try? rd.close() }
            let t1 = clock.now
            _ = try await SyncSession(notebook: other, remote: rd).run()
            let syncTime = Self.seconds(clock.now - t1)
            print("while \(n) long polls are held: hello \(Int(helloTime * 1000)) ms, a first sync \(Int(syncTime * 1000)) ms")
            #expect(helloTime < 0.5 && syncTime < 2)
            #expect(s.server.longPolls.waiting == n, "the other client pulled nothing new: still held")

            // One push answers them all, with its operation.
            let stroke = try a.addStroke(page, randomStroke(&rng))
            let t2 = clock.now
            _ = try await sa.run()
            var answered = 0
            for p in polls {
                let r = try await p.value
                if try r.pull.flatMap({ try $0.ops() }).contains(where: { op in
                    if case .add = op.body { return op.id.replica == ReplicaID(0xA1) && op.id.counter > 0 } else { return false }
                }) { answered += 1 }
            }
            print("\(n) long polls answered \(Int(Self.seconds(clock.now - t2) * 1000)) ms after one push")
            #expect(answered == n)
            #expect(await eventually { s.server.http.suspendedRequestCount == 0 })
            _ = stroke
        }
    }

    /// [SYNC-73] One token holds at most 16 long polls: a token holder that opens more (to
    /// fill the relay's connections and lock honest devices out) gets its oldest answered at
    /// once, empty, as when its wait runs out; another device's poll is held as usual.
    /// (Before: 4,200 polls of one token filled the relay's 4,096 connections, and an honest
    /// sync waited 49 s.)
    @Test("[SYNC-73] one token holds at most 16 long polls: its oldest is answered at once, others' are not")
    func oneTokenHoldsAtMostSixteen() async throws {
        let n = 24, cap = RelayServer.maxLongPollsPerToken
        try await Self.withServer { s in
            let greedy = try s.token("greedy")
            let a = TestNotebook(replica: ReplicaID(0xA1))
            let ra = try Self.remote(s.url, try s.token("a"))
            defer { try? ra.close() }
            let doc = try a.createDocument("capped")
            let page = LogRef(document: doc, page: try a.addPage(doc))
            var rng = SeededRNG(seed: 16)
            let sa = SyncSession(notebook: a, remote: ra)
            _ = try await sa.run()
            let q = try #require(try await sa.longPollRequest(wait: 30))
            let client = try HTTPClient(configuration: .init(maxConcurrentTransfers: n + 1))
            defer { try? client.close() }
            let clock = ContinuousClock()
            func poll(_ token: String, _ replica: UInt64) -> Task<(Int, Double), Error> {
                let start = clock.now
                return Task {
                    let body = SyncCodec.encode(SyncRequest(replica: ReplicaID(replica), epoch: q.epoch, cursor: q.cursor, wait: 30))
                    let r = try await client.send(HTTPRequest(method: "POST", url: s.url + "/sync",
                                                              headers: ["Lnote-Protocol": "1", "Authorization": "Bearer \(token)"],
                                                              body: body, timeout: .seconds(60), lowSpeedTime: .seconds(60)))
                    return (r.status, Self.seconds(clock.now - start))
                }
            }
            var greedyPolls: [Task<(Int, Double), Error>] = []
            for i in 0..<n {
                greedyPolls.append(poll(greedy, 0x3000 + UInt64(i)))
                if i < cap {
                    // One at a time, so which is oldest is known.
                    #expect(await eventually(10) { s.server.longPolls.waiting == i + 1 })
                } else {
                    // Past the cap, each new one releases the oldest held: answered at once
                    // (200, empty), long before its 30 s.
                    let (status, waited) = try await greedyPolls[i - cap].value
                    #expect(status == 200 && waited < 10, "poll \(i - cap): \(status) after \(waited) s")
                    #expect(await eventually(10) { s.server.longPolls.waiting == cap })
                }
            }
            #expect(s.server.longPolls.waiting == cap, "\(s.server.longPolls.waiting) held")
            // Another device's poll is held beside them.
            let honest = poll(try s.token("honest"), 0x4000)
            #expect(await eventually(10) { s.server.longPolls.waiting == cap + 1 })
            // A push answers every held one.
            _ = try a.addStroke(page, randomStroke(&rng))
            _ = try await sa.run()
            #expect(try await honest.value.0 == 200)
            for p in greedyPolls.suffix(cap) { #expect(try await p.value.0 == 200) }
        }
    }

    /// [SYNC-74] [SYNC-26] A long poll held while the relay shuts down is answered 503
    /// `unavailable` with `Retry-After` (a clean answer, not a reset); a client that retries
    /// reaches the relay once it is back (on the same port) and gets its answer there.
    @Test("[SYNC-74] [SYNC-26] a long poll held at shutdown gets 503 unavailable; the client retries and succeeds")
    func shutdownAnswers503AndTheClientRetries() async throws {
        try await withRelay { store, nb, _ in
            let config = HTTPServer.Configuration(connectionLimit: 64, perIPConnectionLimit: 0)
            var server = try RelayServer(store: store, configuration: config)
            let port = server.http.port
            let url = server.url(notebook: nb)
            let tokenA = try store.createToken(notebook: nb, label: "a", device: "a")
            let tokenB = try store.createToken(notebook: nb, label: "b", device: "b")
            let a = TestNotebook(replica: ReplicaID(0xA1)), b = TestNotebook(replica: ReplicaID(0xB2))
            let doc = try a.createDocument("restart")
            let page = LogRef(document: doc, page: try a.addPage(doc))
            var rng = SeededRNG(seed: 74)
            try a.addStroke(page, randomStroke(&rng))
            let ra = try Self.remote(url, tokenA, attempts: 3)
            defer { try? ra.close() }
            _ = try await SyncSession(notebook: a, remote: ra).run()
            let rb = try Self.remote(url, tokenB)
            defer { try? rb.close() }
            let sb = SyncSession(notebook: b, remote: rb)
            _ = try await sb.run()
            let q = try #require(try await sb.longPollRequest(wait: 30))

            // 1. The raw answer: 503, the JSON code, Retry-After, within a moment of close().
            let client = try HTTPClient(configuration: .init(bearerToken: tokenB))
            defer { try? client.close() }
            let raw = Task {
                try await client.send(HTTPRequest(method: "POST", url: url + "/sync", headers: ["Lnote-Protocol": "1"],
                                                  body: SyncCodec.encode(q), lowSpeedTime: .seconds(60)))
            }
            #expect(await eventually { server.longPolls.waiting == 1 })
            let clock = ContinuousClock()
            let t0 = clock.now
            try server.close()
            let closeTime = Self.seconds(clock.now - t0)
            let r = try await raw.value
            #expect(r.status == 503)
            #expect(r.headers["Retry-After"] == "1")
            let body = try JSONSerialization.jsonObject(with: Data(r.body)) as? [String: Any]
            #expect(body?["error"] as? String == "unavailable")
            print("relay closed in \(Int(closeTime * 1000)) ms with a long poll held")
            #expect(closeTime < 2, "close waited for the held request")
            let e = HTTPRemote.error(from: HTTPResponse(status: r.status, headers: r.headers, body: r.body), method: "POST", url: url)
            #expect(e.code == .network && HTTPClient.isTransient(status: r.status))

            // 2. A client that retries: its long poll is answered 503, it retries while the
            // relay is gone, and reaches the relay back on the same port.
            server = try RelayServer(store: store, configuration: config.with(port: port))
            var policy = HTTPClient.RetryPolicy(maxAttempts: 40, initialDelay: .milliseconds(50), maxDelay: .milliseconds(200))
            policy.jitter = 0
            var o = HTTPRemote.Options(token: tokenB)
            o.retry = policy
            let retrying = try HTTPRemote(url: url, options: o)
            defer { try? retrying.close() }
            let held = Task { try await retrying.sync(q) }
            #expect(await eventually { server.longPolls.waiting == 1 })
            try server.close()
            try await Task.sleep(for: .milliseconds(300))
            server = try RelayServer(store: store, configuration: config.with(port: port))
            defer { try? server.close() }
            #expect(await eventually { server.longPolls.waiting == 1 }, "the retried long poll is held by the new relay")
            let stroke = try a.addStroke(page, randomStroke(&rng))
            _ = try await SyncSession(notebook: a, remote: ra).run()
            let answer = try await held.value
            _ = try await sb.absorbLongPoll(answer, for: q)
            #expect(b.live(page).contains(stroke))
        }
    }

    /// Threads of this process now (`/proc/self/status`).
    static func threadCount() -> Int {
        let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("Threads:") } ?? ""
        return Int(line.dropFirst("Threads:".count).trimmingCharacters(in: .whitespaces)) ?? 0
    }
}

extension HTTPServer.Configuration {
    func with(port: UInt16) -> Self {
        var c = self
        c.port = port
        return c
    }
}
