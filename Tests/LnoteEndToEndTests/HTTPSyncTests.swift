import Foundation
import Testing
import LnoteModel
import LnoteReplication
import LnoteStore
import LnoteSync
import LnoteServer
import LnoteTestSupport

/// Sync over real HTTP on loopback: servers started here, the real libcurl client.
@Suite struct HTTPSyncTests {
    /// [SYNC-1] [SYNC-4] Two folders converge through a relay, every log of the notebook
    /// (each document's log and each page's); after first contact each sync is one exchange
    /// and carries only the missing operations.
    @Test func twoFoldersConvergeThroughARelay() async throws {
        let dir = try TempDir()
        let relay = try LocalRelay(dir: dir)
        defer { relay.close() }
        _ = try await Fixture.notebook(at: dir.sub("A"), strokes: 30, pages: 2)
        try await Fixture.sync(dir.sub("A"), relay.url, token: relay.token)
        try await Fixture.sync(dir.sub("B"), relay.url, token: relay.token)
        #expect(try await Fixture.canonical(dir.sub("A")) == Fixture.canonical(dir.sub("B")))

        // One more stroke at A: the next sync is one exchange, about the stroke's size.
        let nb = try await Notebook.open(at: dir.sub("A"), options: Fixture.quiet)
        let d = try await nb.openDocument(try await nb.documentIDs()[0])
        let stroke = HandwritingGenerator.strokes(seed: 99, count: 1)[0]
        let pid = await d.pageList[0].id
        let eid = try await d.addStroke(stroke, to: pid)
        let op = try await d.operations(page: pid, notCoveredBy: VectorClock()).first { $0.id == eid }!
        try await nb.close()
        let r = try await Fixture.sync(dir.sub("A"), relay.url, token: relay.token)
        #expect(r.roundTrips == 1)
        #expect(r.opsSent == 1)
        let payload = OperationCodec.frame(op).encodedSize
        #expect(r.bytesSent < payload + 1024, "sent \(r.bytesSent) bytes for a \(payload)-byte operation")
        try await Fixture.sync(dir.sub("B"), relay.url, token: relay.token)
        #expect(try await Fixture.canonical(dir.sub("A")) == Fixture.canonical(dir.sub("B")))
    }

    /// A folder synced straight from another machine's `lnote serve` (the peer server).
    @Test func peerServerServesAFolder() async throws {
        let dir = try TempDir()
        _ = try await Fixture.notebook(at: dir.sub("A"), strokes: 12)
        let served = try await Notebook.open(at: dir.sub("A"), options: Fixture.quiet)
        let server = try PeerServer(notebook: served, token: Fixture.peerToken)
        try await Fixture.sync(dir.sub("B"), server.url, token: Fixture.peerToken)
        await #expect(throws: LnoteError(.unauthorized)) {
            try await Fixture.sync(dir.sub("C"), server.url, token: "wrong")
        }
        try server.close()
        try await served.close()
        #expect(try await Fixture.canonical(dir.sub("A")) == Fixture.canonical(dir.sub("B")))
    }

    /// [SYNC-20] [SYNC-25] Missing, wrong, or another notebook's token: 401/403, nothing read
    /// or written (every request carries its bearer token and protocol header).
    @Test func authFailuresTouchNothing() async throws {
        let dir = try TempDir()
        let relay = try LocalRelay(dir: dir)
        defer { relay.close() }
        let other = try relay.store.createNotebook()
        let otherToken = try relay.store.createToken(notebook: other, label: "other")
        let client = try HTTPClient()
        defer { try? client.close() }
        let op = Op(id: OpID(replica: ReplicaID(1), counter: 1), lamport: 1, context: VectorClock(), wallTime: 0,
                    body: .createDocument(title: "x"))
        let body = SyncCodec.encode(SyncRequest(replica: ReplicaID(1), epoch: 0, cursor: 0,
                                                push: [LogBatch(log: LogRef(document: DocumentID()), ops: [op])]))
        for (token, status) in [(nil, 401), ("0123", 401), (String(repeating: "a", count: 64), 401), (otherToken, 403)] as [(String?, Int)] {
            var req = HTTPRequest.post(relay.url + "/sync", body: body)
            if let token { req.setBearerToken(token) }
            let r = try await client.send(req)
            #expect(r.status == status, "token \(token ?? "none")")
            #expect(String(decoding: r.body, as: UTF8.self).contains("\"error\""))
        }
        #expect(try relay.store.info(notebook: relay.notebook).operations == 0)
        #expect(try relay.store.info(notebook: other).operations == 0)
        // The right token works.
        var ok = HTTPRequest.post(relay.url + "/sync", body: body)
        ok.setBearerToken(relay.token)
        #expect(try await client.send(ok).status == 200)
        #expect(try relay.store.info(notebook: relay.notebook).operations == 1)
    }

    /// [SYNC-21] [SYNC-22] [SYNC-23] [SYNC-24] [SYNC-30] Bad input gets a clear HTTP error
    /// (a newer body version or protocol header: 426), nothing is written, and the server
    /// keeps serving.
    @Test func badInputIsRejectedAndTheServerKeepsServing() async throws {
        let dir = try TempDir()
        var config = HTTPServer.Configuration()
        config.maxRequestBodyBytes = 1 << 20
        let relay = try LocalRelay(dir: dir, configuration: config)
        defer { relay.close() }
        let client = try HTTPClient()
        defer { try? client.close() }
        func send(_ method: String, _ path: String, _ body: [UInt8] = [], headers: HTTPHeaders = [:]) async throws -> (Int, String) {
            var r = HTTPRequest(method: method, url: relay.server.http.baseURL + path, headers: headers, body: body)
            r.setBearerToken(relay.token)
            let resp = try await client.send(r)
            return (resp.status, String(decoding: resp.body, as: UTF8.self))
        }
        let base = "/v1/notebooks/\(relay.notebook.uuid.uuidString)"
        let docID = DocumentID()
        let create = Op(id: OpID(replica: ReplicaID(1), counter: 1), lamport: 1, context: VectorClock(), wallTime: 0,
                        body: .createDocument(title: "x"))
        let good = SyncCodec.encode(SyncRequest(replica: ReplicaID(1), epoch: 0, cursor: 0,
                                                push: [LogBatch(log: LogRef(document: docID), ops: [create])]))
        var rng = TestRNG(seed: 11)
        let garbage = (0..<500).map { _ in UInt8.random(in: 0...255, using: &rng) }
        var badCRC = good
        badCRC[badCRC.count - 3] ^= 0x10
        var newer = good
        newer[4] = 2
        let wrongLog = SyncCodec.encode(SyncRequest(replica: ReplicaID(1), epoch: 0, cursor: 0,
                                                    push: [LogBatch(log: LogRef(document: docID, page: PageID()), ops: [create])]))
        let image = Op(id: OpID(replica: ReplicaID(1), counter: 1), lamport: 1, context: VectorClock(), wallTime: 0,
                       body: .add(.image(ImageElement(asset: AssetID.of([9]), frame: QRect(x: 0, y: 0, width: 1, height: 1))), z: ZKey(layer: 1)))
        let missingAsset = SyncCodec.encode(SyncRequest(replica: ReplicaID(1), epoch: 0, cursor: 0,
                                                        push: [LogBatch(log: LogRef(document: docID, page: PageID()), ops: [image])]))
        let cases: [(String, String, [UInt8], HTTPHeaders, Int, String)] = [
            ("garbage body", base + "/sync", garbage, [:], 400, "bad_request"),
            ("empty body", base + "/sync", [], [:], 400, "bad_request"),
            ("CRC flipped", base + "/sync", badCRC, [:], 400, "offset"),
            ("newer body version", base + "/sync", newer, [:], 426, "unsupported_version"),
            ("newer protocol header", base + "/sync", good, ["Lnote-Protocol": "2"], 426, "unsupported_version"),
            ("operation in the wrong log", base + "/sync", wrongLog, [:], 400, "does not belong"),
            ("asset not uploaded", base + "/sync", missingAsset, [:], 409, "asset_missing"),
            ("too large", base + "/sync", [UInt8](repeating: 7, count: 2 << 20), [:], 413, ""),
            ("notebook id with dots", "/v1/notebooks/%2E%2E/%2E%2E/etc/sync", good, [:], 400, "bad_request"),
            ("asset id with a separator", base + "/documents/\(docID)/assets/..%2F..%2Fsecret", [], [:], 400, "bad_request"),
            ("document id not a UUID", base + "/documents/x/assets/" + String(repeating: "a", count: 64), [], [:], 400, "bad_request"),
            ("asset bytes not matching", base + "/documents/\(docID)/assets/\(AssetID.of([1]))", [2], [:], 400, "bad_request"),
            ("unknown route", base + "/nothing", [], [:], 404, "not_found"),
            // libmicrohttpd's decoded path ends at a NUL: the rest must not go unseen.
            ("NUL in the path", base + "/sync%00junk", good, [:], 400, "%00"),
            ("NUL after a route", base + "/view%00anything", [], [:], 400, "%00"),
        ]
        for (name, path, body, headers, status, mention) in cases {
            let method = path.contains("/assets/") && !body.isEmpty ? "PUT" : (path.contains("/assets/") ? "GET" : "POST")
            let s: Int, text: String
            do {
                (s, text) = try await send(method, path, body, headers: headers)
            } catch let e as LnoteError where status == 413 {
                // The server answers 413 from the Content-Length and closes the connection
                // without reading the body (HTTPFailureTests.requestBodyCap): a client still
                // sending its 2 MiB may see the reset before the answer (here 1 request in 800
                // from a fresh client, 0 in 1,500 from a warm one). Either way nothing is
                // stored, which is checked below.
                #expect(e.underlying?.hasPrefix("CURLE_SEND_ERROR") == true || e.underlying?.hasPrefix("CURLE_RECV_ERROR") == true,
                        "\(name): \(e)")
                continue
            }
            #expect(s == status, "\(name): \(s) \(text)")
            if !mention.isEmpty { #expect(text.contains(mention), "\(name): \(text)") }
        }
        #expect(try relay.store.info(notebook: relay.notebook).operations == 0)
        #expect(try relay.store.info(notebook: relay.notebook).assets == 0)
        let (s, _) = try await send("POST", base + "/sync", good)
        #expect(s == 200)
        #expect(try relay.store.info(notebook: relay.notebook).operations == 1)
    }

    /// A connection that sends half a request and stalls does not stop others being served;
    /// the server drops it after its connection timeout.
    @Test func aStalledConnectionDoesNotBlockOthers() async throws {
        let dir = try TempDir()
        var config = HTTPServer.Configuration()
        config.connectionTimeoutSeconds = 2
        let relay = try LocalRelay(dir: dir, configuration: config)
        defer { relay.close() }
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #expect(fd >= 0)
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = relay.server.http.port.bigEndian
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        #expect(connected == 0)
        let partial = Array("POST /v1/notebooks/\(relay.notebook.uuid.uuidString)/sync HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\nLNSQ".utf8)
        _ = partial.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        _ = try await Fixture.notebook(at: dir.sub("A"), strokes: 5)
        let r = try await Fixture.sync(dir.sub("A"), relay.url, token: relay.token)
        #expect(r.opsAccepted > 0)
        // The stalled connection is closed by the server: read returns 0 (EOF) or an error.
        var buf = [UInt8](repeating: 0, count: 512)
        var tv = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        let n = read(fd, &buf, buf.count)
        #expect(n <= 0 || String(decoding: buf[..<n], as: UTF8.self).contains("HTTP/1.1"), "the stalled connection got \(n) bytes")
    }

    /// Pushing the same operations twice stores them once.
    @Test func duplicatePushesAreStoredOnce() async throws {
        let dir = try TempDir()
        let relay = try LocalRelay(dir: dir)
        defer { relay.close() }
        let docID = DocumentID()
        var d = DocumentReplica(id: docID)
        let ops = [try d.make(.createDocument(title: "x"), by: ReplicaID(3), wallTime: 0),
                   try d.make(.setTitle("y"), by: ReplicaID(3), wallTime: 1)]
        let remote = try HTTPRemote(url: relay.url, options: .init(token: relay.token))
        defer { try? remote.close() }
        let q = SyncRequest(replica: ReplicaID(3), epoch: 0, cursor: 0, push: [LogBatch(log: LogRef(document: docID), ops: ops)])
        #expect(try await remote.sync(q).accepted == 2)
        #expect(try await remote.sync(q).accepted == 0)
        #expect(try relay.store.info(notebook: relay.notebook).operations == 2)
    }

    /// HTTPS: a client trusting the relay's CA syncs; one that does not, fails and writes nothing.
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl"), "openssl CLI missing"))
    func tlsWithACustomCA() async throws {
        let dir = try TempDir()
        let made = try await Subprocess.run("/usr/bin/openssl", [
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", dir.sub("key.pem"), "-out", dir.sub("cert.pem"), "-days", "2", "-subj", "/CN=localhost",
            "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"])
        #expect(made.status == 0, "\(made.errText)")
        var config = HTTPServer.Configuration()
        config.tls = .init(certificatePath: dir.sub("cert.pem"), keyPath: dir.sub("key.pem"))
        let relay = try LocalRelay(dir: dir, configuration: config)
        defer { relay.close() }
        #expect(relay.url.hasPrefix("https://"))
        _ = try await Fixture.notebook(at: dir.sub("A"), strokes: 4)
        await #expect(throws: LnoteError.self) { try await Fixture.sync(dir.sub("A"), relay.url, token: relay.token) }
        #expect(try relay.store.info(notebook: relay.notebook).operations == 0)
        try await Fixture.sync(dir.sub("A"), relay.url, token: relay.token, caFile: dir.sub("cert.pem"))
        try await Fixture.sync(dir.sub("B"), relay.url, token: relay.token, caFile: dir.sub("cert.pem"))
        #expect(try await Fixture.canonical(dir.sub("A")) == Fixture.canonical(dir.sub("B")))
    }
}
