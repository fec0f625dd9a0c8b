#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Synchronization
import LnoteModel
import LnoteStore
import LnoteSync
import LnoteServer

extension Bench {
    /// 10. Live sync (issue 13, part 4): long polls and `sync --watch`.
    ///
    /// An `lnote relay` process on 127.0.0.1; folders A and B, each watched by an
    /// `lnote sync --watch` process against it, and B shown by `lnote watch B DOC --json`
    /// (the "screen"). Edit-to-screen latency: strokes are added to A one at a time, in this
    /// process, A kept open (`Document.addStroke` returned: encoded, appended, fdatasync'd —
    /// the acknowledgement), until the screen prints the stroke's element id. Idle cost: 1,000
    /// long polls held by raw sockets of this process (each a steady-state `SyncRequest` with
    /// `wait` 50, sent again when answered), then
    /// the CPU time (utime + stime from `/proc/<pid>/stat`) of the relay and of B's idle
    /// watcher over the window (60 s; 10 s with `--quick`), the relay's resident memory
    /// before and with the 1,000, and one sync and one `GET /v1/hello` made meanwhile.
    func caseLive() async throws {
        guard let lnote = Self.lnoteBinary() else {
            throw LnoteError(.notFound, "no lnote binary next to lnote-bench: build it first (swift build -c release --product lnote)")
        }
        let strokes = options.size(200, quick: 30)
        let watchers = 1000
        let window: Duration = options.quick ? .seconds(10) : .seconds(60)
        let dir = try ws.directory("case10")
        let db = dir + "/relay.sqlite"
        var children: [Process] = []
        defer {
            for p in children where p.isRunning { kill(p.processIdentifier, SIGTERM) }
            for p in children { p.waitUntilExit() }
        }

        // The relay and its notebook, one token per device.
        let nb = try Self.output(lnote, ["relay", "notebook", "create", "--db", db])
        let tokenA = try Self.output(lnote, ["relay", "token", "create", "--db", db, "--notebook", nb, "--device", "a"])
        let tokenB = try Self.output(lnote, ["relay", "token", "create", "--db", db, "--notebook", nb, "--device", "b"])
        // The idle watchers below, as devices of their own: one token holds at most
        // `RelayServer.maxLongPollsPerToken` long polls ([SYNC-73]).
        let perToken = RelayServer.maxLongPollsPerToken
        let watcherTokens = try (0..<((watchers + perToken - 1) / perToken)).map { i in
            try Self.output(lnote, ["relay", "token", "create", "--db", db, "--notebook", nb, "--device", "watchers \(i)"])
        }
        let tokenW = watcherTokens[0]
        let relay = try Self.start(lnote, ["relay", "--db", db, "--port", "0", "--max-connections", "4096",
                                           "--max-connections-per-ip", "0"], log: dir + "/relay")
        children.append(relay)
        let base = try await Self.waitForLine(prefix: "url: ", in: dir + "/relay.out")
        let url = base + "/v1/notebooks/" + nb

        // A: one document, one page, a first stroke, synced; B: empty.
        var o = StoreOptions()
        o.autosave = false
        let folderA = dir + "/A", folderB = dir + "/B"
        let nbA = try await Notebook.open(at: folderA, create: true, options: o)
        let docA = try await nbA.createDocument(title: "live")
        let page = await docA.pageList[0].id
        _ = try await docA.addStroke(source.handwriting(1, stream: 10_000)[0], to: page)
        let docID = docA.id
        let remoteA = try HTTPRemote(url: url, options: .init(token: tokenA))
        _ = try await SyncSession(notebook: nbA, remote: remoteA).run()
        try remoteA.close()
        try await nbA.close()
        try await Notebook.open(at: folderB, create: true, options: o).close()

        let watchA = try Self.start(lnote, ["sync", folderA, url, "--token", tokenA, "--watch"], log: dir + "/watch-a")
        let watchB = try Self.start(lnote, ["sync", folderB, url, "--token", tokenB, "--watch"], log: dir + "/watch-b")
        children += [watchA, watchB]
        let logB = "\(folderB)/\(docID).lnote/pages/\(page).log"
        let grew = LogGrowth(path: logB)
        guard try await Self.until(.seconds(30), { grew.size > 0 }) else {
            throw LnoteError(.invalidState, "B's watcher did not bring the document: " + Self.tail(dir + "/watch-b.err"))
        }
        // The screen: `lnote watch B DOC --json`, a process of its own, whose lines are read
        // here as they come (the time a line arrives is the time B's app would redraw).
        let screen = try WatchLines(lnote, ["watch", folderB, docID.description, "--json"], log: dir + "/screen")
        children.append(screen.process)
        guard try await Self.until(.seconds(10), { screen.started }) else {
            throw LnoteError(.invalidState, "lnote watch did not start: " + Self.tail(dir + "/screen.err"))
        }

        // Edit-to-screen latency. A stays open, as an app does: the watchers and the screen
        // share the folders with it.
        let clock = ContinuousClock()
        var latencies: [Double] = []
        let added = source.handwriting(strokes, stream: 10_001)
        let nbA2 = try await Notebook.open(at: folderA, options: o)
        let dA = try await nbA2.openDocument(docID)
        for stroke in added {
            let element = try await dA.addStroke(stroke, to: page)
            let acknowledged = clock.now
            guard try await Self.until(.seconds(10), { screen.seen(element.description) != nil }) else {
                throw LnoteError(.invalidState, "a stroke did not reach B's screen in 10 s: " + Self.tail(dir + "/watch-a.err")
                                 + Self.tail(dir + "/watch-b.err") + Self.tail(dir + "/screen.err"))
            }
            latencies.append(seconds(screen.seen(element.description)! - acknowledged))
            // B's own round after storing (a local change with nothing to push) ends before
            // the next stroke, as it would between a person's strokes.
            try await Task.sleep(for: .milliseconds(20))
        }
        try await nbA2.close()
        let sorted = latencies.sorted()
        let p50 = Self.percentile(sorted, 0.5), p99 = Self.percentile(sorted, 0.99)
        let binary = "\(lnote) (\(Self.buildOf(lnote)))"
        results.rows.append(Row(10, "edit-to-screen latency, \(strokes) strokes, p50", measured: p50, unit: .seconds,
                                baselineName: "—", baseline: nil, target: .valueAtMost(0.150, "≤ 150 ms"),
                                note: "two `lnote sync --watch` processes (A, B) against an `lnote relay` process on loopback; from "
                                    + "the append's acknowledgement on A (Document.addStroke returned, A kept open) to the line of "
                                    + "its element printed by `lnote watch B DOC --json`, a third process; max "
                                    + "\(formatSeconds(sorted.last ?? .nan)); binary \(binary)",
                                measuredRuns: latencies))
        results.rows.append(Row(10, "edit-to-screen latency, \(strokes) strokes, p99", measured: p99, unit: .seconds,
                                baselineName: "—", baseline: nil, target: .valueAtMost(0.500, "≤ 500 ms")))

        // Idle cost: 1,000 held long polls, and the watchers doing nothing.
        let (epoch, cursor) = try await Self.cursor(url: url, token: tokenW)
        let rssBefore = Self.residentBytes(relay.processIdentifier)
        let path = "/v1/notebooks/\(nb)/sync"
        let port = UInt16(base.split(separator: ":").last.flatMap { Int($0) } ?? 0)
        let raw = try RawWatchers(port: port, path: path, tokens: watcherTokens, count: watchers, cursor: cursor) { i, cursor in
            SyncCodec.encode(SyncRequest(replica: ReplicaID(0x5EED_0000 + UInt64(i)), epoch: epoch, cursor: cursor, wait: 50))
        }
        defer { raw.stop() }
        try await Task.sleep(for: .seconds(2))  // all sent and suspended
        let rssHeld = Self.residentBytes(relay.processIdentifier)

        // Served meanwhile: a hello and one sync of a third folder with a new stroke.
        let other = try HTTPClient()
        let h0 = clock.now
        let hello = try await other.send(.get(base + "/v1/hello"))
        let helloTime = seconds(clock.now - h0)
        try other.close()
        let folderC = dir + "/C"
        let nbC = try await Notebook.open(at: folderC, create: true, options: o)
        let remoteC = try HTTPRemote(url: url, options: .init(token: tokenA))
        _ = try await SyncSession(notebook: nbC, remote: remoteC).run()
        let dC = try await nbC.openDocument(docID)
        _ = try await dC.addStroke(source.handwriting(1, stream: 20_000)[0], to: page)
        let s0 = clock.now
        let steady = try await SyncSession(notebook: nbC, remote: remoteC).run()
        let syncTime = seconds(clock.now - s0)
        try remoteC.close()
        try await nbC.close()
        // Its stroke answered the 1,000 and the two watchers: let that settle, then measure.
        try await Task.sleep(for: .seconds(2))
        let answeredBefore = raw.answered

        let relayBefore = try Self.cpuSeconds(relay.processIdentifier)
        let watchBefore = try Self.cpuSeconds(watchB.processIdentifier)
        let watchABefore = try Self.cpuSeconds(watchA.processIdentifier)
        let w0 = clock.now
        try await Task.sleep(for: window)
        let measured = seconds(clock.now - w0)
        let relayCPU = try Self.cpuSeconds(relay.processIdentifier) - relayBefore
        let watchCPU = try Self.cpuSeconds(watchB.processIdentifier) - watchBefore
        let watchACPU = try Self.cpuSeconds(watchA.processIdentifier) - watchABefore
        let expired = raw.answered - answeredBefore
        let (held, reconnects) = (raw.connected, raw.reconnects)
        raw.stop()

        let scale = 60 / measured
        results.rows.append(Row(10, "idle CPU, relay holding \(watchers) long polls, per 60 s", measured: relayCPU * scale, unit: .seconds,
                                baselineName: "—", baseline: nil, target: .valueAtMost(0.5, "≤ 0.5 s"),
                                note: "utime+stime of the relay process over \(String(format: "%.0f", measured)) s"
                                    + (measured < 59 ? " (scaled to 60 s; --quick)" : "") + "; \(held) connections held (raw sockets, "
                                    + "`wait` 50 s: \(expired) answered by their wait in the window and sent again, \(reconnects) reconnects); "
                                    + "resident memory \(formatBytes(Double(rssBefore))) before, \(formatBytes(Double(rssHeld))) holding them "
                                    + "(\(formatBytes(Double(max(0, rssHeld - rssBefore)) / Double(watchers))) each)"))
        results.rows.append(Row(10, "idle CPU, one `lnote sync --watch`, per 60 s", measured: watchCPU * scale, unit: .seconds,
                                baselineName: "—", baseline: nil, target: .valueAtMost(0.5, "≤ 0.5 s"),
                                note: "B's watcher (a long poll held, inotify on its folder) over the same window; A's: "
                                    + String(format: "%.3f s", watchACPU * scale)))
        results.rows.append(Row(10, "one sync while \(watchers) long polls are held", measured: syncTime, unit: .seconds,
                                baselineName: "GET /v1/hello", baseline: helloTime, target: .report,
                                note: "a steady sync of a third folder pushing one stroke (\(steady.roundTrips) round trip), whose push "
                                    + "answers the \(watchers) held long polls and the two watchers' at once; hello answered \(hello.status)"))
    }

    // MARK: - Processes

    /// `lnote` next to this program (the same build).
    static func lnoteBinary() -> String? {
        guard let me = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") else { return nil }
        let candidate = URL(fileURLWithPath: me).deletingLastPathComponent().appendingPathComponent("lnote").path
        return FileManager.default.isExecutableFile(atPath: candidate) ? candidate : nil
    }

    /// "release" or "debug", from the binary's folder.
    static func buildOf(_ path: String) -> String {
        path.contains("/release/") ? "release" : path.contains("/debug/") ? "debug" : "unknown build"
    }

    static func start(_ exe: String, _ args: [String], log: String) throws -> Process {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: exe)
        p.arguments = args
        FileManager.default.createFile(atPath: log + ".out", contents: nil)
        FileManager.default.createFile(atPath: log + ".err", contents: nil)
        p.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: log + ".out"))
        p.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: log + ".err"))
        p.standardInput = FileHandle.nullDevice
        try p.run()
        return p
    }

    /// Runs to completion; its standard output, trimmed.
    static func output(_ exe: String, _ args: [String]) throws -> String {
        let data = try run(exe, args, what: "lnote \(args.prefix(3).joined(separator: " "))")
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Runs a program to completion and returns its standard output; `.io` naming `what`,
    /// with the exit status and the start of its standard error, when it fails.
    static func run(_ exe: String, _ args: [String], what: String) throws -> Data {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: exe)
        p.arguments = args
        let out = Pipe(), err = Pipe()
        p.standardOutput = out
        p.standardError = err
        try p.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        let errData = err.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        guard p.terminationStatus == 0 else {
            throw LnoteError(.io, "\(what) failed (status \(p.terminationStatus)): " + String(decoding: errData.prefix(2000), as: UTF8.self))
        }
        return data
    }

    static func waitForLine(prefix: String, in file: String) async throws -> String {
        for _ in 0..<3000 {
            let text = (try? String(contentsOfFile: file, encoding: .utf8)) ?? ""
            if let line = text.split(separator: "\n").first(where: { $0.hasPrefix(prefix) }) {
                return String(line.dropFirst(prefix.count))
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        throw LnoteError(.invalidState, "no \"\(prefix)\" line in \(file)")
    }

    static func tail(_ file: String) -> String {
        String(((try? String(contentsOfFile: file, encoding: .utf8)) ?? "").suffix(600))
    }

    /// True once `condition` holds (checked every millisecond), false after `limit`.
    static func until(_ limit: Duration, _ condition: () -> Bool) async throws -> Bool {
        let end = ContinuousClock.now + limit
        while ContinuousClock.now < end {
            if condition() { return true }
            try await Task.sleep(for: .milliseconds(1))
        }
        return condition()
    }

    static func percentile(_ sorted: [Double], _ p: Double) -> Double {
        guard !sorted.isEmpty else { return .nan }
        return sorted[min(sorted.count - 1, Int((Double(sorted.count) * p).rounded(.up)) - 1)]
    }

    /// utime + stime of a process, in seconds (`/proc/<pid>/stat`, fields 14 and 15).
    static func cpuSeconds(_ pid: Int32) throws -> Double {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = text.lastIndex(of: ")") else {
            throw LnoteError(.notFound, "no process \(pid)", path: "/proc/\(pid)/stat")
        }
        let fields = text[text.index(after: close)...].split(separator: " ")
        // After the command name: field 3 (state) is fields[0], so 14 and 15 are 11 and 12.
        guard fields.count > 12, let u = Double(fields[11]), let s = Double(fields[12]) else {
            throw LnoteError(.corrupt, "unreadable /proc/\(pid)/stat")
        }
        return (u + s) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// VmRSS of a process, bytes.
    static func residentBytes(_ pid: Int32) -> Int {
        let text = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        let line = text.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
        return (Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0) * 1024
    }

    /// The relay's epoch and cursor now, by one clock comparison of an empty replica.
    static func cursor(url: String, token: String) async throws -> (UInt64, UInt64) {
        let remote = try HTTPRemote(url: url, options: .init(token: token))
        defer { try? remote.close() }
        let a = try await remote.sync(SyncRequest(replica: ReplicaID(0x5EED_FFFF), epoch: 0, cursor: 0, have: []))
        return (a.epoch, a.cursor)
    }
}

/// The size of one file and when it last grew, updated by `check()` (inotify's thread).
final class LogGrowth: Sendable {
    let path: String
    private let state = Mutex<(size: Int, grewAt: ContinuousClock.Instant?)>((0, nil))
    init(path: String) { self.path = path }

    var size: Int {
        check()
        return state.withLock { $0.size }
    }
    var grewAt: ContinuousClock.Instant? { state.withLock { $0.grewAt } }
    func reset() { state.withLock { $0.grewAt = nil } }

    func check() {
        var st = stat()
        guard stat(path, &st) == 0 else { return }
        let now = ContinuousClock.now
        state.withLock { s in
            if Int(st.st_size) > s.size {
                s.size = Int(st.st_size)
                if s.grewAt == nil { s.grewAt = now }
            }
        }
    }
}

/// A child process printing one JSON object per line (`lnote watch … --json`), read as the
/// lines arrive: when each element id was first named, on this process's clock.
final class WatchLines: Sendable {
    let process: Process
    private let errPath: String
    private let state = Mutex<(seen: [String: ContinuousClock.Instant], partial: [UInt8])>(([:], []))

    init(_ exe: String, _ args: [String], log: String) throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: exe)
        p.arguments = args
        let out = Pipe()
        _ = FileManager.default.createFile(atPath: log + ".err", contents: nil)
        p.standardOutput = out
        p.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: log + ".err"))
        p.standardInput = FileHandle.nullDevice
        process = p
        let errPath = log + ".err"
        self.errPath = errPath
        out.fileHandleForReading.readabilityHandler = { [weak self] h in
            let now = ContinuousClock.now
            let data = h.availableData
            if data.isEmpty { h.readabilityHandler = nil; return }
            self?.state.withLock { s in
                s.partial += data
                while let nl = s.partial.firstIndex(of: 10) {
                    let line = Data(s.partial[..<nl])
                    s.partial.removeSubrange(...nl)
                    guard let o = try? JSONSerialization.jsonObject(with: line) as? [String: Any] else { continue }
                    for e in o["elements"] as? [String] ?? [] where s.seen[e] == nil { s.seen[e] = now }
                }
            }
        }
        try p.run()
    }

    /// True once `lnote watch` said it watches (on its standard error).
    var started: Bool {
        (try? String(contentsOfFile: errPath, encoding: .utf8))?.contains("watching") == true
    }

    /// When a line first named `element`, or nil.
    func seen(_ element: String) -> ContinuousClock.Instant? { state.withLock { $0.seen[element] } }
}

/// Long polls held by raw TCP sockets, many per thread: one `poll` loop over all of them
/// sends each its request, reads each answer (headers, then `Content-Length` bytes), and
/// sends the next request from the answer's cursor, as a client does; a closed connection
/// is opened again.
final class RawWatchers: @unchecked Sendable {
    private let port: UInt16
    private let path: String
    /// Watcher `i` sends `tokens[i % tokens.count]`.
    private let tokens: [String]
    private let body: (Int, UInt64) -> [UInt8]
    private var requests: [[UInt8]]
    private var fds: [Int32]
    private var buffers: [[UInt8]]
    private let stopped = Atomic<Bool>(false)
    private let counts = Mutex<(answered: Int, reconnects: Int)>((0, 0))

    var answered: Int { counts.withLock { $0.answered } }
    var reconnects: Int { counts.withLock { $0.reconnects } }
    var connected: Int { requests.count }

    init(port: UInt16, path: String, tokens: [String], count: Int, cursor: UInt64,
         body: @escaping (Int, UInt64) -> [UInt8]) throws {
        self.port = port
        self.path = path
        self.tokens = tokens
        self.body = body
        requests = []
        fds = []
        buffers = Array(repeating: [], count: count)
        requests = (0..<count).map { request($0, cursor: cursor) }
        for i in 0..<count {
            let fd = try Self.connect(port)
            fds.append(fd)
            try Self.sendAll(fd, requests[i])
        }
        let t = Thread { [self] in
            ThreadName.setCurrent("lnote.rawwatch")
            loop()
        }
        t.start()
    }

    /// The HTTP request of watcher `i` from `cursor`.
    private func request(_ i: Int, cursor: UInt64) -> [UInt8] {
        let b = body(i, cursor)
        let head = "POST \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nAuthorization: Bearer \(tokens[i % tokens.count])\r\n"
            + "Lnote-Protocol: 1\r\nContent-Type: application/octet-stream\r\nContent-Length: \(b.count)\r\n\r\n"
        return Array(head.utf8) + b
    }

    func stop() {
        guard !stopped.exchange(true, ordering: .relaxed) else { return }
        // The loop notices within its poll timeout, then closes the sockets.
    }

    private func loop() {
        var chunk = [UInt8](repeating: 0, count: 4096)
        var pfds = fds.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
        while !stopped.load(ordering: .relaxed) {
            let n = poll(&pfds, nfds_t(pfds.count), 200)
            if n <= 0 { continue }
            for i in pfds.indices where pfds[i].revents != 0 {
                let r = read(pfds[i].fd, &chunk, chunk.count)
                if r <= 0 {
                    Glibc.close(pfds[i].fd)
                    buffers[i] = []
                    counts.withLock { $0.reconnects += 1 }
                    if let fd = try? Self.connect(port), (try? Self.sendAll(fd, requests[i])) != nil {
                        pfds[i].fd = fd
                    } else {
                        pfds[i].fd = -1
                    }
                    continue
                }
                buffers[i] += chunk[..<r]
                while let (end, bodyStart) = Self.responseEnd(buffers[i]) {
                    if let answer = try? SyncCodec.decodeResponse(Array(buffers[i][bodyStart..<end])) {
                        requests[i] = request(i, cursor: answer.cursor)
                    }
                    buffers[i].removeFirst(end)
                    counts.withLock { $0.answered += 1 }
                    try? Self.sendAll(pfds[i].fd, requests[i])
                }
            }
        }
        for p in pfds where p.fd >= 0 { Glibc.close(p.fd) }
    }

    /// The length of the first complete response in `b` and where its body starts, or nil.
    static func responseEnd(_ b: [UInt8]) -> (Int, Int)? {
        let separator: [UInt8] = [13, 10, 13, 10]
        guard b.count >= 4, let headEnd = (0...(b.count - 4)).first(where: { b[$0..<($0 + 4)].elementsEqual(separator) }) else {
            return nil
        }
        let head = String(decoding: b[..<headEnd], as: UTF8.self).lowercased()
        let length = head.split(separator: "\r\n").first { $0.hasPrefix("content-length:") }
            .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) } ?? 0
        let total = headEnd + 4 + length
        return b.count >= total ? (total, headEnd + 4) : nil
    }

    static func connect(_ port: UInt16) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw LnoteError(.io, "socket", underlying: "errno \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let r = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard r == 0 else {
            let e = errno
            Glibc.close(fd)
            throw LnoteError(.network, "connect to 127.0.0.1:\(port)", underlying: "errno \(e)")
        }
        return fd
    }

    static func sendAll(_ fd: Int32, _ bytes: [UInt8]) throws {
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw LnoteError(.network, "send", underlying: "errno \(errno)") }
            sent += n
        }
    }
}
