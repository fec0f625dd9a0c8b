import Dispatch
import Foundation
import LnoteModel
import LnoteReplication
@testable import LnoteServer
import LnoteStore
import LnoteSync
import LnoteTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The servers' abuse limits (sync-protocol.md §2.1, [SYNC-76]..[SYNC-82]), each finding of
/// issue 14 reproduced against a real relay and a real peer server on loopback: attackers on
/// raw sockets, and meanwhile a legitimate libcurl client whose sync must succeed. Memory is
/// measured by the server's own counter of body bytes in flight (the process's RSS is shared
/// by every test). Limits and deadlines are small here so that the suite stays short.
@Suite(.serialized) struct AbuseTests {
    enum Kind: String, CaseIterable, Sendable { case relay, peer }

    /// A running server of `kind` with one notebook, the token that opens it, and a way to sync
    /// a fresh folder with it as a legitimate client would.
    final class Target: @unchecked Sendable {
        let kind: Kind
        let dir: String
        let http: HTTPServer
        let url: String
        let token: String
        let notebookID: UUID
        private let closeAll: () throws -> Void
        private let clients = Atomic<Int>(0)

        init(_ kind: Kind, configuration: HTTPServer.Configuration) async throws {
            self.kind = kind
            dir = FileManager.default.temporaryDirectory.appendingPathComponent("lnote-abuse-\(UUID().uuidString)").path
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            switch kind {
            case .relay:
                let store = try RelayStore(path: dir + "/relay.sqlite")
                let nb = try store.createNotebook()
                token = try store.createToken(notebook: nb, label: "legit", device: "legit")
                let server = try RelayServer(store: store, configuration: configuration)
                http = server.http
                url = server.url(notebook: nb)
                notebookID = nb.uuid
                closeAll = { try server.close(); try store.close() }
                relayStore = store
            case .peer:
                var options = StoreOptions()
                options.autosave = false
                let made = try await Notebook.open(at: dir + "/served", create: true, options: options)
                let doc = try await made.createDocument(title: "served")
                let page = await doc.pageList[0].id
                var generator = HandwritingGenerator(seed: 14)
                _ = try await doc.addStrokes(generator.strokes(8), to: page)
                try await made.close()
                let served = try await Notebook.open(at: dir + "/served", options: options)
                token = RelayToken.generate()
                let server = try PeerServer(notebook: served, token: token, configuration: configuration)
                http = server.http
                url = server.url
                notebookID = server.notebookID
                closeAll = { try server.close() }
                closeServed = served
            }
        }

        private var closeServed: Notebook?
        /// The relay's store (relay targets only).
        private(set) var relayStore: RelayStore?

        /// The notebook's sync path, for raw requests.
        var syncPath: String { "/v1/notebooks/\(notebookID.uuidString)/sync" }

        /// A legitimate client: a new folder with one stroke, synced through libcurl.
        func legitimateSync() async throws -> SyncReport {
            let n = clients.add(1, ordering: .relaxed).newValue
            var options = StoreOptions()
            options.autosave = false
            let nb = try await Notebook.open(at: dir + "/client-\(n)", create: true, options: options)
            let doc = try await nb.createDocument(title: "client \(n)")
            var generator = HandwritingGenerator(seed: UInt64(n))
            _ = try await doc.addStrokes(generator.strokes(2), to: await doc.pageList[0].id)
            var o = HTTPRemote.Options(token: token)
            o.requestTimeout = .seconds(30)
            o.retry.maxAttempts = 6
            let remote = try HTTPRemote(url: url, options: o)
            defer { try? remote.close() }
            do {
                let r = try await SyncSession(notebook: nb, remote: remote).run()
                try await nb.close()
                return r
            } catch {
                try? await nb.close()
                throw error
            }
        }

        func close() async throws {
            try closeAll()
            if let closeServed { try await closeServed.close() }
            try? FileManager.default.removeItem(atPath: dir)
        }
    }

    /// Small limits so that every deadline passes within a second or two.
    static func configuration(_ tweak: (inout HTTPServer.Configuration) -> Void = { _ in }) -> HTTPServer.Configuration {
        var c = HTTPServer.Configuration(connectionLimit: 64, perIPConnectionLimit: 0, maxRequestBodyBytes: 2 << 20)
        c.headerTimeout = .seconds(1)
        c.bodyGrace = .milliseconds(500)
        c.bodyMinimumBytesPerSecond = 4096
        c.reservedConnections = 16
        c.bodyMemoryBudget = 4 << 20
        tweak(&c)
        return c
    }

    static func withTarget<T>(_ kind: Kind, _ configuration: HTTPServer.Configuration = configuration(),
                              _ body: (Target) async throws -> T) async throws -> T {
        let target = try await Target(kind, configuration: configuration)
        do {
            let result = try await body(target)
            try await target.close()
            return result
        } catch {
            try? await target.close()
            throw error
        }
    }

    /// A request head as raw bytes.
    static func head(_ method: String, _ path: String, token: String?, extra: [String] = []) -> [UInt8] {
        var lines = ["\(method) \(path) HTTP/1.1", "Host: 127.0.0.1", "Lnote-Protocol: 1"]
        if let token { lines.append("Authorization: Bearer \(token)") }
        lines += extra
        return Array((lines.joined(separator: "\r\n") + "\r\n\r\n").utf8)
    }

    /// The status of a raw answer (0: none), and its body.
    static func parse(_ bytes: [UInt8]) -> (status: Int, body: String) {
        let text = String(decoding: bytes, as: UTF8.self)
        let status = text.split(separator: " ", maxSplits: 2).dropFirst().first.flatMap { Int($0) } ?? 0
        let body = text.range(of: "\r\n\r\n").map { String(text[$0.upperBound...]) } ?? ""
        return (status, body)
    }

    /// Runs `body` on `n` threads at once and returns their results in order.
    static func onThreads<T: Sendable>(_ n: Int, _ body: @escaping @Sendable (Int) -> T) async -> [T] {
        await withTaskGroup(of: (Int, T).self) { group in
            for i in 0..<n {
                group.addTask { (i, (try? await onThread { body(i) })!) }
            }
            var out: [(Int, T)] = []
            for await r in group { out.append(r) }
            return out.sorted { $0.0 < $1.0 }.map(\.1)
        }
    }

    static func seconds(_ d: Duration) -> Double { Double(d.components.seconds) + Double(d.components.attoseconds) * 1e-18 }

    /// Whether the peer has closed `fd` (reads what is there without waiting).
    static func closedByPeer(_ fd: Int32) -> Bool {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if n > 0 { continue }
            if n == 0 { return true }
            if errno == EINTR { continue }
            return errno != EAGAIN && errno != EWOULDBLOCK
        }
    }

    // MARK: - Finding 1: bodies without a token

    /// [SYNC-78] Thirty connections announce bodies near or over the limit without a token (or
    /// with a wrong one, or for another notebook): each is answered from its headers — before it sent
    /// a byte of body — and nothing of them is taken from the body budget, while a legitimate
    /// client syncs.
    @Test("[SYNC-78] no body is read without a token: 401/403/404 from the headers, budget untouched",
          arguments: Kind.allCases)
    func bodiesWithoutATokenAreNeverRead(kind: Kind) async throws {
        try await Self.withTarget(kind) { t in
            let port = t.http.port
            let announced = (2 << 20) - 1
            let other = UUID().uuidString
            let attackers = 30
            let legit = Task { try await t.legitimateSync() }
            let answers = await Self.onThreads(attackers) { i -> (Int, String) in
                guard let fd = try? RawSocket.connect(port: port) else { return (-1, "") }
                defer { RawSocket.close(fd) }
                let (path, token): (String, String?) = switch i % 3 {
                case 0: (t.syncPath, nil)
                case 1: (t.syncPath, "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")
                default: ("/v1/notebooks/\(other)/sync", t.token)
                }
                // Headers only: the answer must come without a byte of the body.
                // Some announce more than the body limit: still 401, never a 413 after reading it.
                let length = i % 2 == 0 ? announced : 3 << 20
                try? RawSocket.send(fd, Self.head("POST", path, token: token,
                                                  extra: ["Content-Type: application/octet-stream",
                                                          "Content-Length: \(length)"]))
                let r = Self.parse(RawSocket.receiveAll(fd))
                return (r.status, r.body)
            }
            let report = try await legit.value
            #expect(report.roundTrips >= 1)
            for (i, a) in answers.enumerated() {
                let expected = switch (kind, i % 3) {
                case (_, 0), (_, 1): 401
                case (.relay, _): 403 // a relay token opens one notebook ([SYNC-25])
                case (.peer, _): 404  // the peer serves one notebook id ([SYNC-11])
                }
                #expect(a.0 == expected, "attacker \(i) on the \(kind): \(a.0) \(a.1)")
                #expect(!a.1.contains(t.dir), "an error body names a server path: \(a.1)")
            }
            print("AbuseTests.bodiesWithoutATokenAreNeverRead (\(kind)): peak body bytes in flight "
                  + "\(t.http.peakBodyBytesInFlight) with \(attackers) attackers announcing ~2-3 MiB each")
            // Only the legitimate client's small bodies were ever taken from the budget.
            #expect(t.http.peakBodyBytesInFlight < 256 << 10, "peak \(t.http.peakBodyBytesInFlight)")
            #expect(await Self.eventually { t.http.bodyBytesInFlight == 0 })
            ReliabilityReport.record(family: "abuse", detail: "AbuseTests.bodiesWithoutATokenAreNeverRead (\(kind))",
                                     cases: attackers + 1,
                                     hung: answers.filter { $0.0 <= 0 }.count)
        }
    }

    // MARK: - Finding 1: the server-wide budget

    /// [SYNC-79] [SYNC-77] Six clients with a valid token announce 1.5 MiB bodies against a
    /// 4 MiB budget and send nothing: two are admitted (3 MiB taken), four are answered 503
    /// `unavailable` with `Retry-After` at once; a legitimate client syncs in the 1 MiB left;
    /// the two admitted ones are closed when their body falls behind the minimum rate, and the
    /// budget is given back.
    @Test("[SYNC-79] [SYNC-77] bodies in flight fit in the budget; past it 503 with Retry-After; stalled bodies are cut",
          arguments: Kind.allCases)
    func bodyBudget(kind: Kind) async throws {
        let config = Self.configuration { $0.bodyGrace = .seconds(3) }
        try await Self.withTarget(kind, config) { t in
            let port = t.http.port
            let announced = 3 << 19
            let fds = try (0..<6).map { _ in try RawSocket.connect(port: port) }
            defer { fds.forEach(RawSocket.close) }
            for fd in fds {
                try RawSocket.send(fd, Self.head("POST", t.syncPath, token: t.token,
                                                 extra: ["Content-Type: application/octet-stream",
                                                         "Content-Length: \(announced)"]))
            }
            // The refused ones are answered and closed at once; the admitted ones wait for a body.
            #expect(await Self.eventually { t.http.guardCounts.overBudget == 4 })
            #expect(t.http.bodyBytesInFlight == 2 * announced)
            let report = try await t.legitimateSync()
            #expect(report.roundTrips >= 1)
            let answers = await Self.onThreads(fds.count) { i in Self.parse(RawSocket.receiveAll(fds[i])) }
            let refused = answers.filter { $0.status == 503 }
            let cut = answers.filter { $0.status == 0 }
            #expect(refused.count == 4 && cut.count == 2, "\(answers.map(\.status))")
            for r in refused {
                #expect(r.body.contains("\"unavailable\""), "\(r.body)")
            }
            #expect(t.http.peakBodyBytesInFlight <= config.bodyMemoryBudget)
            #expect(t.http.guardCounts.timedOut >= 2)
            #expect(await Self.eventually { t.http.bodyBytesInFlight == 0 })
            ReliabilityReport.record(family: "abuse", detail: "AbuseTests.bodyBudget (\(kind))", cases: 7,
                                     hung: answers.count - refused.count - cut.count)
        }
    }

    /// [SYNC-79] The 503 carries `Retry-After` and closes the connection (checked on the raw
    /// answer's head).
    @Test("[SYNC-79] the over-budget answer is 503 unavailable, Retry-After: 1, Connection: close; a chunked body past it is cut")
    func overBudgetAnswerHead() async throws {
        try await Self.withTarget(.relay, Self.configuration { $0.bodyMemoryBudget = 2 << 20 }) { t in
            let first = try RawSocket.connect(port: t.http.port)
            defer { RawSocket.close(first) }
            try RawSocket.send(first, Self.head("POST", t.syncPath, token: t.token, extra: ["Content-Length: \(2 << 20)"]))
            #expect(await Self.eventually { t.http.bodyBytesInFlight == 2 << 20 })
            let answer = try await onThread { () -> String in
                let fd = try RawSocket.connect(port: t.http.port)
                defer { RawSocket.close(fd) }
                try RawSocket.send(fd, Self.head("POST", t.syncPath, token: t.token, extra: ["Content-Length: 10"]))
                return String(decoding: RawSocket.receiveAll(fd), as: UTF8.self)
            }
            #expect(answer.hasPrefix("HTTP/1.1 503"), "\(answer)")
            #expect(answer.lowercased().contains("retry-after: 1"))
            #expect(answer.lowercased().contains("connection: close"))
            #expect(answer.lowercased().components(separatedBy: "connection:").count == 2, "one Connection header: \(answer)")
            // A chunked body has no length to take at admission: it takes from the budget as it
            // grows, and with the budget full its connection is closed without an answer.
            let chunked = try await onThread { () -> [UInt8] in
                let fd = try RawSocket.connect(port: t.http.port)
                defer { RawSocket.close(fd) }
                try RawSocket.send(fd, Self.head("POST", t.syncPath, token: t.token, extra: ["Transfer-Encoding: chunked"]))
                let chunk = [UInt8](repeating: 0x41, count: 4096)
                try? RawSocket.send(fd, Array("1000\r\n".utf8) + chunk + Array("\r\n".utf8))
                return RawSocket.receiveAll(fd)
            }
            #expect(chunked.isEmpty, "\(String(decoding: chunked, as: UTF8.self))")
            #expect(t.http.guardCounts.overBudget == 2)
            #expect(t.http.peakBodyBytesInFlight <= 2 << 20)
            ReliabilityReport.record(family: "abuse", detail: "AbuseTests.overBudgetAnswerHead", cases: 2)
        }
    }

    // MARK: - Finding 2: slowloris

    /// [SYNC-76] [SYNC-77] [SYNC-78] A hundred connections trickle a request line a byte every
    /// 200 ms (and reconnect when closed), one admitted request trickles its body: the
    /// trickling headers are closed at their deadline or to make room, the trickling body
    /// when it falls behind the rate, at most `connectionLimit - reservedConnections`
    /// connections ever wait for headers, and the legitimate client's sync succeeds meanwhile.
    @Test("[SYNC-76] [SYNC-77] [SYNC-78] slowloris: headers and bodies have deadlines, connections are kept for clients",
          arguments: Kind.allCases)
    func slowloris(kind: Kind) async throws {
        let config = Self.configuration()
        try await Self.withTarget(kind, config) { t in
            let port = t.http.port
            let stop = Flag(), reconnects = Counter(), waitingMax = Maximum()
            let attack = Task {
                await Self.onThreads(100) { _ in
                    let line = Array("POST \(t.syncPath) HTTP/1.1\r\nHost: x\r\n".utf8)
                    while !stop.isSet {
                        guard let fd = try? RawSocket.connect(port: port) else { usleep(50_000); continue }
                        var i = 0
                        while !stop.isSet, !Self.closedByPeer(fd) {
                            _ = line[i % line.count...i % line.count].withUnsafeBytes {
                                Glibc.send(fd, $0.baseAddress, 1, Int32(MSG_NOSIGNAL))
                            }
                            i += 1
                            usleep(200_000)
                        }
                        RawSocket.close(fd)
                        reconnects.increment()
                    }
                    return 0
                }
            }
            let sampler = Task {
                while !stop.isSet {
                    waitingMax.observe(t.http.connectionsAwaitingHeaders)
                    try? await Task.sleep(for: .milliseconds(20))
                }
            }
            // Let the attack fill the server first.
            try await Task.sleep(for: .milliseconds(1500))
            // One admitted body trickles at 5 bytes a second: closed after the grace.
            let trickle = Task {
                try await onThread { () -> Bool in
                    let fd = try RawSocket.connect(port: port)
                    defer { RawSocket.close(fd) }
                    try RawSocket.send(fd, Self.head("POST", t.syncPath, token: t.token, extra: ["Content-Length: 1000"]))
                    for _ in 0..<100 {
                        usleep(200_000)
                        if Self.closedByPeer(fd) { return true }
                        _ = Glibc.send(fd, [0x4c], 1, Int32(MSG_NOSIGNAL))
                    }
                    return false
                }
            }
            let clock = ContinuousClock()
            let started = clock.now
            let report = try await t.legitimateSync()
            let took = clock.now - started
            let trickleClosed = try await trickle.value
            stop.set()
            _ = await attack.value
            _ = await sampler.value
            #expect(report.roundTrips >= 1)
            print("AbuseTests.slowloris (\(kind)): legitimate sync in \(took) under attack; \(t.http.guardCounts), "
                  + "at most \(waitingMax.value) waiting for headers, \(reconnects.count) attacker reconnects")
            // Generous: the point is that it finishes while the attack goes on.
            #expect(took < .seconds(20), "legitimate sync took \(took) under attack")
            #expect(trickleClosed, "a body trickling below the minimum rate was not closed")
            let counts = t.http.guardCounts
            #expect(counts.timedOut > 0 && counts.evicted > 0, "\(counts)")
            #expect(waitingMax.value <= Int(config.connectionLimit - config.reservedConnections))
            #expect(await Self.eventually { t.http.connectionsAwaitingHeaders == 0 })
            ReliabilityReport.record(family: "abuse", detail: "AbuseTests.slowloris (\(kind)): 100 trickling connections, "
                                         + "\(reconnects.count) reconnects",
                                     cases: 3, hung: (took < .seconds(20) ? 0 : 1) + (trickleClosed ? 0 : 1))
        }
    }

    /// [SYNC-76] Ten connections (fewer than may wait) trickle a request line a byte every
    /// 200 ms, which keeps resetting the 30 s idle timeout: each is closed at the 1 s header
    /// deadline, without an answer, and not before it.
    @Test("[SYNC-76] headers trickled past the deadline are closed although every byte resets the idle timeout",
          arguments: Kind.allCases)
    func headerDeadline(kind: Kind) async throws {
        try await Self.withTarget(kind) { t in
            let port = t.http.port
            let lived = await Self.onThreads(10) { _ -> Double? in
                guard let fd = try? RawSocket.connect(port: port) else { return nil }
                defer { RawSocket.close(fd) }
                let clock = ContinuousClock()
                let started = clock.now
                let line = Array("GET /v1/hello HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ".utf8) + [UInt8](repeating: 0x61, count: 200)
                for b in line {
                    if Self.closedByPeer(fd) { return Self.seconds(clock.now - started) }
                    _ = Glibc.send(fd, [b], 1, Int32(MSG_NOSIGNAL))
                    usleep(200_000)
                }
                return nil
            }
            for l in lived {
                let l = try #require(l, "a trickling connection was never closed")
                #expect(l >= 0.9 && l < 10, "closed after \(l) s")
            }
            #expect(t.http.guardCounts.timedOut >= 10)
            let report = try await t.legitimateSync()
            #expect(report.roundTrips >= 1)
            ReliabilityReport.record(family: "abuse", detail: "AbuseTests.headerDeadline (\(kind))", cases: lived.count + 1,
                                     hung: lived.filter { $0 == nil }.count)
        }
    }

    /// [SYNC-78] Admitted requests hold a third of the connections (bodies not sent yet, under a
    /// long grace) and forty trickling connections try to take the rest, with a header deadline
    /// longer than the test: each new connection that brings the server to its limit closes the
    /// one that has waited longest, so the legitimate client still connects and syncs.
    @Test("[SYNC-78] at the connection limit, the connection waiting longest for headers makes room",
          arguments: Kind.allCases)
    func roomAtTheLimit(kind: Kind) async throws {
        let config = Self.configuration {
            $0.connectionLimit = 32
            $0.reservedConnections = 8
            $0.headerTimeout = .seconds(60)
            $0.bodyGrace = .seconds(60)
        }
        try await Self.withTarget(kind, config) { t in
            let port = t.http.port
            let held = try (0..<12).map { _ in try RawSocket.connect(port: port) }
            defer { held.forEach(RawSocket.close) }
            for fd in held {
                try RawSocket.send(fd, Self.head("POST", t.syncPath, token: t.token, extra: ["Content-Length: 100"]))
            }
            #expect(await Self.eventually { t.http.bodyBytesInFlight == 1200 })
            let stop = Flag()
            let attack = Task {
                await Self.onThreads(40) { _ in
                    while !stop.isSet {
                        guard let fd = try? RawSocket.connect(port: port) else { usleep(50_000); continue }
                        while !stop.isSet, !Self.closedByPeer(fd) {
                            _ = Glibc.send(fd, [0x50], 1, Int32(MSG_NOSIGNAL))
                            usleep(200_000)
                        }
                        RawSocket.close(fd)
                    }
                    return 0
                }
            }
            try await Task.sleep(for: .seconds(1))
            let clock = ContinuousClock()
            let started = clock.now
            let report = try await t.legitimateSync()
            let took = clock.now - started
            stop.set()
            _ = await attack.value
            #expect(report.roundTrips >= 1)
            #expect(took < .seconds(20), "legitimate sync took \(took) with the server full")
            #expect(t.http.guardCounts.evicted > 0)
            // The admitted requests were never the ones closed.
            #expect(held.allSatisfy { !Self.closedByPeer($0) })
            ReliabilityReport.record(family: "abuse", detail: "AbuseTests.roomAtTheLimit (\(kind))", cases: 1,
                                     hung: took < .seconds(20) ? 0 : 1)
        }
    }

    // MARK: - Finding 3: 400 vs 413

    /// [SYNC-24] A count the bytes left cannot hold is malformed (400 `bad_request`); only a
    /// count over a protocol limit with the bytes present is 413 `too_large`: decoded, and
    /// over HTTP against both servers.
    @Test("[SYNC-24] a count that cannot fit is 400, a count over a limit is 413", arguments: Kind.allCases)
    func malformedIsNotTooLarge(kind: Kind) async throws {
        let log = LogRef(document: DocumentID(UUID()), page: nil)
        func request(_ n: Int) -> [UInt8] {
            let entries = (1...n).map { LogDigests.Entry(replica: ReplicaID(UInt64($0)), counter: 1, digest: [UInt8](repeating: 7, count: 16)) }
            return SyncCodec.encode(SyncRequest(replica: ReplicaID(0xA1), epoch: 0, cursor: 0,
                                                digests: [LogDigests(log: log, entries: entries)], push: []))
        }
        let over = request(OpValidator.maxClockEntries + 1)
        // Cut inside the entries: the count (4097) no longer fits in the bytes left.
        let cut = Array(over.prefix(over.count - 25 * 200))
        #expect(throws: LnoteError(.limitExceeded)) { try SyncCodec.decodeRequest(over, path: "body") }
        do {
            _ = try SyncCodec.decodeRequest(cut, path: "body")
            Issue.record("a cut body decoded")
        } catch let e as LnoteError {
            #expect(e.code == .corrupt || e.code == .truncated, "\(e)")
            #expect(e.offset != nil)
        }
        // A frame count far beyond the bytes (the finding's "frame count 1 exceeds the limit 0").
        var w = [UInt8](SyncCodec.encode(SyncRequest(replica: ReplicaID(0xA1), epoch: 0, cursor: 0, push: [])))
        w.removeLast() // the push's log count 0
        w += [1] + [UInt8](repeating: 0, count: 17) + [1] // one log, its ref, frame count 1, nothing after
        #expect(throws: LnoteError(.corrupt)) { try SyncCodec.decodeRequest(w, path: "body") }

        try await Self.withTarget(kind) { t in
            let client = try makeClient()
            defer { try? client.close() }
            func post(_ body: [UInt8]) async throws -> (Int, String) {
                let r = try await client.send(HTTPRequest(method: "POST", url: t.http.baseURL + t.syncPath,
                                                          headers: ["Authorization": "Bearer \(t.token)", "Lnote-Protocol": "1",
                                                                    "Content-Type": "application/octet-stream"],
                                                          body: body))
                return (r.status, String(decoding: r.body, as: UTF8.self))
            }
            let a = try await post(over), b = try await post(cut), c = try await post(w)
            #expect(a.0 == 413 && a.1.contains("too_large"), "\(a)")
            #expect(b.0 == 400 && b.1.contains("bad_request"), "\(b)")
            #expect(c.0 == 400 && c.1.contains("bad_request"), "\(c)")
            ReliabilityReport.record(family: "abuse", detail: "AbuseTests.malformedIsNotTooLarge (\(kind))", cases: 3)
        }
    }

    // MARK: - Finding 4: one body length

    /// [SYNC-80] Two Content-Length values that differ, a list of them, Content-Length with
    /// Transfer-Encoding: 400 before the body, connection closed (those lnote refuses itself in
    /// the protocol's JSON); the same value twice is one length.
    @Test("[SYNC-80] conflicting Content-Length, or Content-Length with Transfer-Encoding, is 400",
          arguments: Kind.allCases)
    func conflictingLengths(kind: Kind) async throws {
        try await Self.withTarget(kind) { t in
            // ours: refused by lnote, in the protocol's JSON; else by libmicrohttpd (a value that
            // is not one decimal number), whose page is not JSON.
            let cases: [(extra: [String], ours: Bool)] = [
                (["Content-Length: 5", "Content-Length: 6"], true),
                (["Content-Length: 5", "Transfer-Encoding: chunked"], true),
                (["Content-Length: 5, 6"], false),
                (["Content-Length: +5"], false),
            ]
            for (extra, ours) in cases {
                let answer = try await onThread { () -> [UInt8] in
                    let fd = try RawSocket.connect(port: t.http.port)
                    defer { RawSocket.close(fd) }
                    try RawSocket.send(fd, Self.head("POST", t.syncPath, token: t.token, extra: extra) + Array("hello".utf8))
                    return RawSocket.receiveAll(fd)
                }
                let text = String(decoding: answer, as: UTF8.self)
                #expect(Self.parse(answer).status == 400, "\(extra): \(text)")
                if ours {
                    // One answer, JSON, and the connection closed.
                    #expect(text.components(separatedBy: "HTTP/1.1 ").count == 2, "\(extra): \(text)")
                    #expect(text.contains("\"error\":\"bad_request\"") && text.lowercased().contains("content-type: application/json")
                            && text.lowercased().contains("connection: close"), "\(extra): \(text)")
                }
            }
            // The same length twice is one length: the request goes through (400 for its
            // 5-byte body, which is not a sync request, from the handler).
            let same = try await onThread { () -> String in
                let fd = try RawSocket.connect(port: t.http.port)
                defer { RawSocket.close(fd) }
                try RawSocket.send(fd, Self.head("POST", t.syncPath, token: t.token,
                                                 extra: ["Content-Length: 5", "Content-Length: 5", "Connection: close"])
                                       + Array("hello".utf8))
                return String(decoding: RawSocket.receiveAll(fd), as: UTF8.self)
            }
            #expect(same.hasPrefix("HTTP/1.1 400") && same.contains("bad_request"), "\(same)")
            let report = try await t.legitimateSync()
            #expect(report.roundTrips >= 1)
            ReliabilityReport.record(family: "abuse", detail: "AbuseTests.conflictingLengths (\(kind))", cases: cases.count + 1)
        }
    }

    // MARK: - Finding 5: no paths in 500 bodies

    /// [SYNC-81] An error about a server file (any path but a request's labels) is a 500 whose body names no
    /// path and gives an incident id; the details are in the log under that id.
    @Test("[SYNC-81] a 500 says what failed in general terms, with an incident id; the path goes to the log")
    func failuresNameNoPaths() async throws {
        let e = LnoteError(.corrupt, "CRC mismatch", path: "/srv/lnote/notebook/abc.lnote/pages/1.log", offset: 40)
        let r = SyncHTTPService.response(for: e)
        let body = String(decoding: r.body, as: UTF8.self)
        #expect(r.status == 500 && body.contains("server_error") && !body.contains("/srv"), "\(body)")
        let incident = try #require((try JSONSerialization.jsonObject(with: Data(r.body)) as? [String: Any])?["incident"] as? String)
        #expect(incident.count == 16 && r.logEntry?.contains(incident) == true && r.logEntry?.contains("/srv/lnote") == true)
        // A client's malformed body keeps its offsets and names no server path either.
        let bad = SyncHTTPService.response(for: LnoteError(.corrupt, "bad magic", path: "request body", offset: 0))
        #expect(bad.status == 400 && bad.logEntry == nil)
        // What a request carries, by its labels: the client's (400). Damage in the server's own
        // storage named as the operator gave it (a relay started with `--db relay.sqlite`, a
        // folder served as `lnote serve nb`) or by the relay's label for a stored row: 500.
        for label in ["push", "hashRanges", "sync", "snapshot", "checkpoints/ABC", "checkpoint of ABC", "documents/D/assets/A"] {
            let r = SyncHTTPService.response(for: LnoteError(.corrupt, "bad", path: label, offset: 3))
            #expect(r.status == 400 && r.logEntry == nil, "\(label)")
        }
        for own in ["relay.sqlite", "stored frame", "nb/ABC.lnote/pages/1.log", "../relay.sqlite"] {
            let r = SyncHTTPService.response(for: LnoteError(.corrupt, "stored operation 1: CRC mismatch", path: own, offset: 0))
            let text = String(decoding: r.body, as: UTF8.self)
            #expect(r.status == 500 && !text.contains(own) && r.logEntry?.contains(own) == true, "\(own): \(text)")
        }
        // Something missing that the server names by its own file: 404, the message alone.
        let missing = SyncHTTPService.response(for: LnoteError(.notFound, "no asset", path: "/srv/relay.sqlite"))
        #expect(missing.status == 404 && !String(decoding: missing.body, as: UTF8.self).contains("/srv"))

        // A relay whose store fails under it: real 500s, their bodies without the relay's path,
        // the log with the incident; and every other error body of both servers without one.
        var bodies: [String] = []
        for kind in Kind.allCases {
            try await Self.withTarget(kind) { t in
                let client = try makeClient()
                defer { try? client.close() }
                let nb = "/v1/notebooks/\(t.notebookID.uuidString)"
                let asset = String(repeating: "a", count: 64)
                func get(_ method: String, _ path: String, _ token: String?, _ body: [UInt8] = []) async throws -> String {
                    var headers: HTTPHeaders = ["Lnote-Protocol": "1"]
                    if let token { headers.add("Authorization", "Bearer \(token)") }
                    let r = try await client.send(HTTPRequest(method: method, url: t.http.baseURL + path, headers: headers, body: body))
                    return "\(r.status) " + String(decoding: r.body, as: UTF8.self)
                }
                var mine = [
                    try await get("GET", nb + "/documents/\(UUID().uuidString)/assets/\(asset)", t.token),
                    try await get("POST", nb + "/sync", t.token, [1, 2, 3]),
                    try await get("POST", nb + "/sync", nil),
                    try await get("GET", "/v1/nothing/here", t.token),
                    try await get("PUT", nb + "/documents/\(UUID().uuidString)/assets/\(asset)", t.token, [1]),
                ]
                let logged = Mutex<[String]>([])
                t.http.setLogHandler { line in logged.withLock { $0.append(line) } }
                if kind == .relay, let store = t.relayStore {
                    try store.close()
                    mine.append(try await get("POST", nb + "/sync", t.token, SyncCodec.encode(SyncRequest(replica: ReplicaID(0xA1), epoch: 0, cursor: 0))))
                    mine.append(try await get("GET", nb + "/checkpoints", t.token))
                    #expect(mine.filter { $0.hasPrefix("500") }.count == 2, "\(mine)")
                }
                for b in mine {
                    #expect(!b.contains(t.dir) && !b.contains("/tmp/"), "\(kind): \(b)")
                }
                for b in mine where b.hasPrefix("500") {
                    let id = try #require(b.range(of: "\"incident\":\"").map { String(b[$0.upperBound...].prefix(16)) })
                    #expect(t.http.recentLog.contains { $0.contains(id) }, "incident \(id) not in the log")
                    #expect(logged.withLock { $0.contains { $0.contains(id) } }, "incident \(id) not given to the log handler")
                }
                bodies += mine
            }
        }
        ReliabilityReport.record(family: "abuse", detail: "AbuseTests.failuresNameNoPaths", cases: bodies.count + 2)
    }

    // MARK: - Finding 6: assets/missing

    /// [SYNC-82] 4,096 ids are answered, 4,097 are 413, a body announced over 1 MiB is 413 from
    /// its headers; the client splits a longer list into requests the server takes.
    @Test("[SYNC-82] assets/missing takes at most 4,096 ids and 1 MiB; the client sends longer lists in parts",
          arguments: Kind.allCases)
    func missingAssetsIsBounded(kind: Kind) async throws {
        try await Self.withTarget(kind) { t in
            var rng = SplitMix64(seed: 82)
            func ids(_ n: Int) -> [AssetID] { (0..<n).map { _ in AssetID(hex: randomBytes(32, &rng).map { String(format: "%02x", $0) }.joined())! } }
            let doc = DocumentID(UUID())
            let url = t.http.baseURL + "/v1/notebooks/\(t.notebookID.uuidString)/documents/\(doc)/assets/missing"
            let client = try makeClient()
            defer { try? client.close() }
            func post(_ list: [AssetID]) async throws -> Int {
                let body = try JSONSerialization.data(withJSONObject: list.map(\.description))
                return try await client.send(HTTPRequest(method: "POST", url: url,
                                                         headers: ["Authorization": "Bearer \(t.token)", "Lnote-Protocol": "1",
                                                                   "Content-Type": "application/json"],
                                                         body: [UInt8](body))).status
            }
            let clock = ContinuousClock()
            let full = ids(SyncCodec.maxMissingAssets)
            let started = clock.now
            #expect(try await post(full) == 200)
            print("AbuseTests.missingAssetsIsBounded (\(kind)): \(full.count) ids answered in \(clock.now - started)")
            #expect(try await post(ids(SyncCodec.maxMissingAssets + 1)) == 413)
            let announced = try await onThread { () -> Int in
                let fd = try RawSocket.connect(port: t.http.port)
                defer { RawSocket.close(fd) }
                try RawSocket.send(fd, Self.head("POST", "/v1/notebooks/\(t.notebookID.uuidString)/documents/\(doc)/assets/missing",
                                                 token: t.token, extra: ["Content-Length: \((1 << 20) + 1)"]))
                return Self.parse(RawSocket.receiveAll(fd)).status
            }
            #expect(announced == 413)
            let remote = try HTTPRemote(url: t.url, options: .init(token: t.token))
            defer { try? remote.close() }
            let many = ids(10_000)
            #expect(try await remote.missingAssets(many, document: doc).count == many.count)
            ReliabilityReport.record(family: "abuse", detail: "AbuseTests.missingAssetsIsBounded (\(kind))", cases: 4)
        }
    }

    /// Polls `condition` for up to 10 s.
    static func eventually(_ condition: () -> Bool) async -> Bool {
        for _ in 0..<500 {
            if condition() { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return condition()
    }
}

/// A flag set once across threads.
final class Flag: Sendable {
    private let value = Atomic<Bool>(false)
    func set() { value.store(true, ordering: .relaxed) }
    var isSet: Bool { value.load(ordering: .relaxed) }
}

/// The greatest value observed across threads.
final class Maximum: Sendable {
    private let stored = Atomic<Int>(0)
    func observe(_ v: Int) { stored.max(v, ordering: .relaxed) }
    var value: Int { stored.load(ordering: .relaxed) }
}
