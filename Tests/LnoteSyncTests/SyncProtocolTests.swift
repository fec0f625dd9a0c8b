import Foundation
import Synchronization
import Testing
import LnoteModel
import LnoteReplication
@testable import LnoteSync
@testable import LnoteScenario
import LnoteTestSupport

/// A remote that runs the endpoint but can fail on the way back, as a cut connection does
/// after the server has already stored the push.
final class FlakyRemote: SyncRemote {
    let inner: LocalRemote
    let failNextAnswer = Mutex(false)
    init(_ inner: LocalRemote) { self.inner = inner }
    var key: String { inner.key }
    var traffic: (sent: Int, received: Int) { (0, 0) }
    func sync(_ request: SyncRequest) async throws -> SyncResponse {
        let answer = try await inner.sync(request)
        if failNextAnswer.withLock({ let f = $0; $0 = false; return f }) {
            throw LnoteError(.network, "connection reset (simulated) after the server answered")
        }
        return answer
    }
    func missingAssets(_ ids: [AssetID], document: DocumentID) async throws -> [AssetID] { try await inner.missingAssets(ids, document: document) }
    func putAsset(_ bytes: [UInt8], id: AssetID, document: DocumentID) async throws { try await inner.putAsset(bytes, id: id, document: document) }
    func getAsset(_ id: AssetID, document: DocumentID) async throws -> [UInt8] { try await inner.getAsset(id, document: document) }
}

@Suite struct SyncProtocolTests {
    let doc = DocumentID(UUID(uuidString: "5CE4A210-0000-4000-8000-000000000001")!)
    let page = PageID(UUID(uuidString: "5CE4A210-0000-4000-8000-000000000100")!)

    func nodes(_ n: Int) async throws -> [MemoryNode] {
        let t = MemoryTransport()
        var out: [MemoryNode] = []
        for i in 0..<n { out.append(try await t.makeNode(replica: ReplicaID(UInt64(i + 1)), label: "\(i)", document: doc) as! MemoryNode) }
        _ = try await out[0].perform(.createDocument(title: "t"), wallTime: 1)
        _ = try await out[0].perform(.addPage(page, after: nil), wallTime: 2)
        return out
    }

    func stroke(_ k: Int) -> Stroke {
        Stroke(points: (0..<8).map { StrokePoint(x: Int32(k * 100 + $0), y: Int32($0 * 3), t: UInt32($0 * 4)) })
    }

    /// [SYNC-4] [SYNC-5] First contact takes two exchanges, the steady state one, and the
    /// steady state carries only the missing operations.
    @Test func firstContactThenSteadyState() async throws {
        let n = try await nodes(2)
        let server = NotebookEndpoint(notebook: n[1])
        let remote = LocalRemote(key: "r", endpoint: server)
        let phases = Mutex<[SyncProgress.Phase]>([])
        let first = try await SyncSession(notebook: n[0], remote: remote).run { p in phases.withLock { $0.append(p.phase) } }
        #expect(phases.withLock { $0.contains(.exchanging) && $0.last == .done })
        #expect(first.roundTrips == 2)
        #expect(first.opsAccepted == 2)
        _ = try await n[0].perform(.add(page, stroke(1), below: nil, above: nil), wallTime: 3)
        let second = try await SyncSession(notebook: n[0], remote: remote).run()
        #expect(second.roundTrips == 1)
        #expect(second.opsSent == 1)
        #expect(second.opsReceived == 0)
        _ = try await n[1].perform(.add(page, stroke(2), below: nil, above: nil), wallTime: 4)
        let third = try await SyncSession(notebook: n[0], remote: remote).run()
        #expect(third.roundTrips == 1)
        #expect(third.opsSent == 0)
        #expect(third.opsReceived == 1)
        let a = try await n[0].view(), b = try await n[1].view()
        #expect(a == b)
    }

    /// [SYNC-4] A push's answer carries what the log gained since the client's cursor less
    /// what it just pushed. When the push is all the log gained, the endpoint sends nothing
    /// and does not read the log back; when the server also wrote to that log meanwhile, its
    /// operation comes back in the same exchange, and nothing pushed does.
    @Test func pushAnswerSkipsOnlyWhatWasPushed() async throws {
        let n = try await nodes(2)
        let remote = LocalRemote(key: "r", endpoint: NotebookEndpoint(notebook: n[1]))
        _ = try await SyncSession(notebook: n[0], remote: remote).run()
        for k in 0..<3 { _ = try await n[0].perform(.add(page, stroke(k), below: nil, above: nil), wallTime: 10 + Int64(k)) }
        let onlyPushed = try await SyncSession(notebook: n[0], remote: remote).run()
        #expect(onlyPushed.roundTrips == 1 && onlyPushed.opsSent == 3 && onlyPushed.opsReceived == 0)
        // Both sides write to the same page log: the server's stroke comes back with the answer.
        for k in 3..<5 { _ = try await n[0].perform(.add(page, stroke(k), below: nil, above: nil), wallTime: 20 + Int64(k)) }
        _ = try await n[1].perform(.add(page, stroke(9), below: nil, above: nil), wallTime: 30)
        let both = try await SyncSession(notebook: n[0], remote: remote).run()
        #expect(both.roundTrips == 1 && both.opsSent == 2 && both.opsReceived == 1)
        #expect(try await n[0].view() == n[1].view())
    }

    /// The endpoint's test for "the log gained only what was pushed", against counting the
    /// ids one by one, on seeded random clocks and pushed sets (ids below the base, inside
    /// the range, above the clock, and ranges missing one id).
    @Test func pushedAllMatchesCountingIds() {
        let seed: UInt64 = 0x5EC4
        var g = SplitMix64(seed: seed)
        for round in 0..<2_000 {
            var base = VectorClock(), clock = VectorClock()
            for r in 1...UInt64(1 + g.next() % 3) {
                let b = g.next() % 4, c = b + g.next() % 4
                if b > 0 { base[ReplicaID(r)] = b }
                if c > 0 { clock[ReplicaID(r)] = c }
            }
            var gained: [OpID] = []
            for (replica, counter) in clock.entries where counter > base[replica] {
                for k in (base[replica] + 1)...counter { gained.append(OpID(replica: replica, counter: k)) }
            }
            var pushed = Set(gained.filter { _ in g.next() % 6 != 0 })
            for _ in 0..<(g.next() % 3) {
                pushed.insert(OpID(replica: ReplicaID(1 + g.next() % 4), counter: 1 + g.next() % 9))
            }
            let expected = !gained.isEmpty && gained.allSatisfy(pushed.contains)
            #expect(NotebookEndpoint.pushedAll(pushed, since: base, upTo: clock) == expected,
                    "seed \(seed) round \(round): base \(base) clock \(clock) pushed \(pushed.sorted { "\($0)" < "\($1)" })")
        }
        #expect(!NotebookEndpoint.pushedAll(nil, since: VectorClock(), upTo: VectorClock()))
    }

    /// [SYNC-6] A server that lost its cursors (new epoch) asks for clocks; sync still converges.
    @Test func restartedServerResynchronizes() async throws {
        let n = try await nodes(2)
        _ = try await SyncSession(notebook: n[0], remote: LocalRemote(key: "r", endpoint: NotebookEndpoint(notebook: n[1]))).run()
        _ = try await n[0].perform(.add(page, stroke(1), below: nil, above: nil), wallTime: 3)
        _ = try await n[1].perform(.add(page, stroke(2), below: nil, above: nil), wallTime: 3)
        let restarted = LocalRemote(key: "r", endpoint: NotebookEndpoint(notebook: n[1]))
        let report = try await SyncSession(notebook: n[0], remote: restarted).run()
        #expect(report.roundTrips == 2)  // steady attempt (resync: its push is kept), clocks
        #expect(try await n[0].view() == n[1].view())
    }

    /// [SYNC-7] A sync cut after the server stored the push is completed by the next one,
    /// and nothing is stored twice.
    @Test func interruptedSyncCompletesNextTime() async throws {
        let n = try await nodes(2)
        let flaky = FlakyRemote(LocalRemote(key: "r", endpoint: NotebookEndpoint(notebook: n[1])))
        _ = try await SyncSession(notebook: n[0], remote: flaky).run()
        for k in 0..<5 { _ = try await n[0].perform(.add(page, stroke(k), below: nil, above: nil), wallTime: 10 + Int64(k)) }
        _ = try await n[1].perform(.add(page, stroke(9), below: nil, above: nil), wallTime: 20)
        flaky.failNextAnswer.withLock { $0 = true }
        await #expect(throws: LnoteError.self) { try await SyncSession(notebook: n[0], remote: flaky).run() }
        let again = try await SyncSession(notebook: n[0], remote: flaky).run()
        #expect(again.opsAccepted == 0)  // the server already had them
        #expect(try await n[0].view() == n[1].view())
        #expect(try await n[1].heldOps().count == n[0].heldOps().count)
    }

    @Test func remoteStateRoundTripsAndDamageMeansStartOver() {
        var s = RemoteState(epoch: 7, cursor: 99)
        s.learn([OpID(replica: ReplicaID(1), counter: 1), OpID(replica: ReplicaID(1), counter: 2)], in: LogRef(document: doc, page: page))
        #expect(RemoteState.decode(s.encoded()) == s)
        var bytes = s.encoded()
        for i in bytes.indices {
            bytes[i] ^= 0x40
            #expect(RemoteState.decode(bytes) == RemoteState(), "byte \(i)")
            bytes[i] ^= 0x40
        }
    }

    /// [SYNC-3] Knowledge advances only over contiguous counters.
    @Test func learnedClocksStayContiguous() {
        var s = RemoteState()
        let log = LogRef(document: doc)
        let r = ReplicaID(3)
        s.learn([1, 2, 4, 5].map { OpID(replica: r, counter: $0) }, in: log)
        #expect(s.known[log]![r] == 2)
        s.learn([OpID(replica: r, counter: 3)], in: log)
        #expect(s.known[log]![r] == 3)  // 4 and 5 were not remembered as held
    }

    /// [SYNC-30] Bodies: round trips; every cut and every flipped bit is rejected or
    /// decodes to a body that re-encodes identically (no silent misreading).
    @Test func bodiesRejectDamage() throws {
        let ops = (1...3).map { k in
            Op(id: OpID(replica: ReplicaID(5), counter: UInt64(k)), lamport: UInt64(k), context: VectorClock([(ReplicaID(5), UInt64(k - 1))]),
               wallTime: 1, body: .add(.stroke(stroke(k)), z: ZKey(layer: Int64(k))))
        }
        let log = LogRef(document: doc, page: page)
        let q = SyncRequest(replica: ReplicaID(5), epoch: 9, cursor: 3, have: [LogClock(log: log, clock: VectorClock([(ReplicaID(5), UInt64(2))]))],
                            push: [LogBatch(log: log, ops: ops)])
        let r = SyncResponse(epoch: 9, cursor: 4, accepted: 3, pull: [LogBatch(log: LogRef(document: doc), ops: [])],
                             clocks: [LogClock(log: log, clock: VectorClock())], resync: true)
        let qb = SyncCodec.encode(q), rb = SyncCodec.encode(r)
        #expect(try SyncCodec.decodeRequest(qb) == q)
        #expect(try SyncCodec.decodeResponse(rb) == r)
        for cut in 0..<qb.count {
            #expect(throws: LnoteError.self) { try SyncCodec.decodeRequest(Array(qb[..<cut])) }
        }
        for cut in 0..<rb.count {
            #expect(throws: LnoteError.self) { try SyncCodec.decodeResponse(Array(rb[..<cut])) }
        }
        for bit in 0..<(qb.count * 8) {
            var d = qb
            d[bit / 8] ^= UInt8(1 << (bit % 8))
            if let decoded = try? SyncCodec.decodeRequest(d) {
                #expect(SyncCodec.encode(decoded) == d, "bit \(bit) decoded to a different body")
            }
        }
        #expect(throws: LnoteError(.unsupportedVersion)) {
            var v = qb
            v[4] = 2
            _ = try SyncCodec.decodeRequest(v)
        }
    }

    /// [SYNC-30] [SYNC-53] Numbers a hostile remote chooses never trap the decoder: hashes
    /// answered from a counter so high that their last would pass 2^64 - 1 make the body
    /// corrupt, at the range's offset.
    @Test func hashRangesPastTheLastCounter() throws {
        let log = LogRef(document: doc, page: page)
        let hash = [UInt8](repeating: 7, count: 16)
        for (from, n, fits) in [(UInt64.max - 1, 2, true), (UInt64.max - 1, 3, false), (UInt64.max, 2, false), (UInt64(1), 0, true)] {
            let body = SyncCodec.encode(SyncResponse(epoch: 1, cursor: 1, accepted: 0, pull: [],
                                                     hashes: [HashRange(log: log, replica: ReplicaID(5), from: from, to: 0,
                                                                        hashes: Array(repeating: hash, count: n))]))
            if fits {
                let decoded = try SyncCodec.decodeResponse(body)
                #expect(decoded.hashes?.first?.to == from &+ UInt64(n) &- 1, "from \(from), \(n) hashes")
            } else {
                let e = try #require(throws: LnoteError.self) { try SyncCodec.decodeResponse(body) }
                #expect(e.code == .corrupt && e.offset != nil && e.message.contains("pass the last counter"), "\(e)")
            }
        }
    }

    /// [SYNC-22] A refused range or digest entry names the field at fault: a range's zero
    /// start at its start, an end below its start at its end, a digest's zero counter at its
    /// counter (not at the entry's replica, before them). Each body ends with the empty push
    /// (one byte), so the fields sit at fixed distances from the end.
    @Test func rangeAndDigestErrorsNameTheFieldAtFault() throws {
        let log = LogRef(document: doc, page: page)
        func offset(of request: SyncRequest) throws -> Int? {
            let e = try #require(throws: LnoteError.self) { try SyncCodec.decodeRequest(SyncCodec.encode(request)) }
            #expect(e.code == .corrupt, "\(e)")
            return e.offset
        }
        // replica (8), from (1), to (1), push (1)
        let zeroStart = SyncRequest(replica: ReplicaID(9), epoch: 1, cursor: 1,
                                    hashRanges: [HashRange(log: log, replica: ReplicaID(5), from: 0, to: 3)])
        #expect(try offset(of: zeroStart) == SyncCodec.encode(zeroStart).count - 3)
        let backwards = SyncRequest(replica: ReplicaID(9), epoch: 1, cursor: 1,
                                    hashRanges: [HashRange(log: log, replica: ReplicaID(5), from: 7, to: 3)])
        #expect(try offset(of: backwards) == SyncCodec.encode(backwards).count - 2)
        let zeroReplica = SyncRequest(replica: ReplicaID(9), epoch: 1, cursor: 1,
                                      hashRanges: [HashRange(log: log, replica: ReplicaID(0), from: 1, to: 3)])
        #expect(try offset(of: zeroReplica) == SyncCodec.encode(zeroReplica).count - 11)
        // replica (8), counter (1), digest (16), push (1)
        let zeroCounter = SyncRequest(replica: ReplicaID(9), epoch: 1, cursor: 1, digests: [
            LogDigests(log: log, entries: [LogDigests.Entry(replica: ReplicaID(5), counter: 0, digest: [UInt8](repeating: 1, count: 16))])])
        #expect(try offset(of: zeroCounter) == SyncCodec.encode(zeroCounter).count - 18)
        let zeroDigestReplica = SyncRequest(replica: ReplicaID(9), epoch: 1, cursor: 1, digests: [
            LogDigests(log: log, entries: [LogDigests.Entry(replica: ReplicaID(0), counter: 4, digest: [UInt8](repeating: 1, count: 16))])])
        #expect(try offset(of: zeroDigestReplica) == SyncCodec.encode(zeroDigestReplica).count - 26)
    }

    /// [SYNC-51] [SYNC-53] Lists of the smallest items our own encoder writes decode again: a
    /// fork report is at least 58 bytes (document log, one-byte counter), an asked hash range
    /// and an answered empty one 27. The decoders' "cannot fit" bounds once said 59 and 28, so a
    /// response with several small forks (found by `fuzz.sh sync-response --ci` on CI), or a
    /// request whose ranges ended the body, was refused as corrupt.
    @Test func smallestForksAndRangesDecode() throws {
        let log = LogRef(document: doc)
        for n in [1, 2, 3, 64] {
            let forks = (1...n).map { ForkReport(log: log, id: OpID(replica: ReplicaID(UInt64($0)), counter: 1),
                                                held: [UInt8](repeating: UInt8($0 % 256), count: 32)) }
            let response = SyncResponse(epoch: 1, cursor: 1, accepted: 0, pull: [], forks: forks,
                                        hashes: (1...n).map { HashRange(log: log, replica: ReplicaID(UInt64($0)), from: 1, to: 0) })
            #expect(try SyncCodec.decodeResponse(SyncCodec.encode(response)) == response, "\(n) forks")
            let ranges = (1...n).map { HashRange(log: log, replica: ReplicaID(UInt64($0)), from: 1, to: 1) }
            let request = SyncRequest(replica: ReplicaID(9), epoch: 1, cursor: 1, hashRanges: ranges)
            #expect(try SyncCodec.decodeRequest(SyncCodec.encode(request)) == request, "\(n) ranges")
        }
        // The input the fuzzer kept: two forks of 58 and 59 bytes that re-encode shorter.
        let kept = SpecVectors.packageRoot.appendingPathComponent("Fuzz/crashes/sync-response/crash-943d5de2a361ee9aa466a48d561209a03429e3c5")
        let decoded = try SyncCodec.decodeResponse(Array(try Data(contentsOf: kept)))
        #expect(decoded.forks.count == 2)
        #expect(try SyncCodec.decodeResponse(SyncCodec.encode(decoded)) == decoded)
    }

    /// [SYNC-8] Assets go up before the operations that reference them and come down
    /// before the pulled operations are stored.
    @Test func assetsTravelBeforeReferences() async throws {
        let n = try await nodes(2)
        let remote = LocalRemote(key: "r", endpoint: NotebookEndpoint(notebook: n[1]))
        _ = try await SyncSession(notebook: n[0], remote: remote).run()
        let bytes = Array("pretend this is a JPEG".utf8)
        let asset = try await n[0].writeAsset(bytes, document: doc)
        let img = ImageElement(asset: asset, frame: QRect(x: 0, y: 0, width: 100, height: 100))
        // Add the image through the page replica the node holds.
        _ = try await n[0].perform(.add(page, stroke(1), below: nil, above: nil), wallTime: 5)
        try await n[0].addImage(img, page: page, wallTime: 6)
        let report = try await SyncSession(notebook: n[0], remote: remote).run()
        #expect(report.assetsSent == 1)
        #expect(try await n[1].hasAsset(asset, document: doc))
        // And down to a third replica that never saw it.
        let n2 = try await MemoryTransport().makeNode(replica: ReplicaID(9), label: "c", document: doc) as! MemoryNode
        let down = try await SyncSession(notebook: n2, remote: LocalRemote(key: "s", endpoint: NotebookEndpoint(notebook: n[1]))).run()
        #expect(down.assetsReceived == 1)
        #expect(try await n2.readAsset(asset, document: doc) == bytes)
        #expect(try await n2.view() == n[1].view())
    }

    /// [SYNC-8] [SYNC-22] The endpoint refuses a push whose image asset was never uploaded
    /// with a `SyncRefusal` naming the asset, the operation and the log (HTTP: 409
    /// `asset_missing`), and stores nothing; a remote reached in-process reports it as the
    /// HTTP client does, `notFound`.
    @Test("[SYNC-8] [SYNC-22] a push naming an asset not uploaded is refused as asset_missing and stores nothing")
    func pushReferencingMissingAssetIsRefused() async throws {
        let n = try await nodes(2)
        let endpoint = NotebookEndpoint(notebook: n[1])
        let asset = try await n[0].writeAsset([1, 2, 3], document: doc)  // held here, never uploaded
        let img = ImageElement(asset: asset, frame: QRect(x: 0, y: 0, width: 1, height: 1))
        try await n[0].addImage(img, page: page, wallTime: 6)
        let log = LogRef(document: doc, page: page)
        let frames = try await n[0].frames(in: log, notCoveredBy: VectorClock())
        let op = try OperationCodec.decode(frames[0])
        let before = try await n[1].heldOps().count
        let request = SyncRequest(replica: ReplicaID(1), epoch: 0, cursor: 0, push: [LogBatch(log: log, frames: frames)])
        do {
            _ = try await endpoint.sync(request)
            Issue.record("accepted")
        } catch let r as SyncRefusal {
            #expect(r.reason == .assetMissing(asset: asset, operation: op.id, log: log))
            #expect(r.reason.code == .assetMissing && r.reason.code.status == 409)
            #expect(r.error.code == .notFound && r.error.message.contains(asset.description), "\(r)")
        }
        await #expect(throws: LnoteError(.notFound)) {
            _ = try await LocalRemote(key: "r", endpoint: endpoint).sync(request)
        }
        #expect(try await n[1].heldOps().count == before)
    }

    /// [SYNC-22] The client reads the error code of a JSON error body: each code gives its
    /// LnoteError code, the same as the refusal gives in-process; a code that does not go
    /// with its status, or a body that is not a known error, leaves the status to decide.
    @Test("[SYNC-22] the client maps each error code, and falls back on the status")
    func clientReadsErrorCodes() throws {
        func answer(_ status: Int, _ body: String) -> LnoteError {
            HTTPRemote.error(from: HTTPResponse(status: status, headers: [:], body: Array(body.utf8)), method: "POST",
                             url: "http://127.0.0.1:1/v1/notebooks/X/sync")
        }
        for code in SyncErrorCode.allCases {
            let e = answer(code.status, "{\"error\": \"\(code.rawValue)\", \"message\": \"m\"}")
            #expect(e.code == code.clientCode, "\(code)")
            #expect(e.underlying == "HTTP \(code.status) \(code.rawValue)", "\(code)")
            #expect(e.message == "POST http://127.0.0.1:1/v1/notebooks/X/sync: HTTP \(code.status) \(code.rawValue): m")
        }
        #expect(SyncErrorCode.assetMissing.clientCode != SyncErrorCode.historyNotHeld.clientCode)
        #expect(Set(SyncErrorCode.allCases.map(\.rawValue)).count == SyncErrorCode.allCases.count)
        // A 409 whose code is unknown, or a known code with another status: the status decides.
        #expect(answer(409, "{\"error\": \"conflict\"}").code == .invalidState)
        #expect(answer(409, "{\"error\": \"not_found\"}").underlying == "HTTP 409")
        #expect(answer(413, "request body exceeds 1048576 bytes\n").code == .limitExceeded)
        #expect(answer(502, "<html>bad gateway</html>").code == .network)
        // A redirect is not followed, and the message says so and where it pointed; an empty
        // body reads "(no message)" rather than nothing; a 304 is not called a redirect.
        let moved = HTTPRemote.error(from: HTTPResponse(status: 307, headers: ["Location": "http://127.0.0.1:2/x"], body: []),
                                     method: "POST", url: "http://127.0.0.1:1/v1/notebooks/X/sync")
        #expect(moved.message.hasSuffix("HTTP 307: the server redirects to http://127.0.0.1:2/x; lnote does not follow redirects: "
                                        + "use the URL the server answers at"), "\(moved.message)")
        #expect(answer(304, "").message.hasSuffix("HTTP 304: (no message)"), "\(answer(304, "").message)")
        #expect(answer(500, " \n").message.hasSuffix("HTTP 500: (no message)"))
    }
}
