import Foundation
import LnoteModel
import LnoteReplication
import LnoteServer
import LnoteSync
import Testing
import LnoteTestSupport
import Synchronization

@Suite("Checkpoints")
struct CheckpointTests {
    static func random(_ rng: inout SeededRNG) -> Checkpoint {
        let log = Bool.random(using: &rng) ? LogRef(document: DocumentID()) : LogRef(document: DocumentID(), page: PageID())
        let clock = VectorClock((0..<Int.random(in: 0...4, using: &rng)).map { _ in
            (ReplicaID(UInt64.random(in: 1...UInt64.max, using: &rng)), UInt64.random(in: 1...1_000_000, using: &rng))
        })
        let n = [0, 1, 5, 200, 3000].randomElement(using: &rng)!
        return Checkpoint(log: log, clock: clock, snapshot: randomBytes(n, &rng))
    }

    @Test("codec round-trips; every truncation and every bit flip is rejected", arguments: 1...8)
    func codec(seed: UInt64) throws {
        var rng = SeededRNG(seed: seed)
        var c = Self.random(&rng)
        if c.snapshot.count > 300 { c.snapshot = Array(c.snapshot.prefix(300)) } // keep the flip loop small
        let bytes = c.encoded()
        #expect(Array(bytes.prefix(5)) == Array("LNCP".utf8) + [1])
        #expect(try Checkpoint.decode(bytes) == c, "seed \(seed)")
        for n in 0..<bytes.count {
            #expect(throws: LnoteError.self, "seed \(seed): prefix of \(n) bytes accepted") {
                _ = try Checkpoint.decode(Array(bytes.prefix(n)))
            }
        }
        for i in 0..<bytes.count {
            for bit in 0..<8 {
                var b = bytes
                b[i] ^= 1 << bit
                #expect(throws: LnoteError.self, "seed \(seed): flip of bit \(bit) at \(i) accepted") {
                    _ = try Checkpoint.decode(b)
                }
            }
        }
        #expect(throws: LnoteError(.corrupt)) { _ = try Checkpoint.decode(bytes + [0]) }
    }

    @Test("a newer version is refused as such; errors carry offsets")
    func versionAndOffsets() throws {
        var rng = SeededRNG(seed: 1)
        var bytes = Self.random(&rng).encoded()
        bytes[4] = 2
        #expect(throws: LnoteError(.unsupportedVersion)) { _ = try Checkpoint.decode(bytes) }
        var good = Self.random(&rng).encoded()
        good[good.count - 1] ^= 0xFF
        do {
            _ = try Checkpoint.decode(good, path: "cp.bin")
            Issue.record("bad CRC accepted")
        } catch let e as LnoteError {
            #expect(e.code == .corrupt && e.offset == good.count - 4 && e.path == "cp.bin")
        }
    }

    @Test("checkpoint lists round-trip and reject truncation", arguments: 1...4)
    func list(seed: UInt64) throws {
        var rng = SeededRNG(seed: seed)
        let list = (0..<Int.random(in: 0...4, using: &rng)).map { _ in Self.random(&rng) }
        let bytes = Checkpoint.encodeList(list)
        #expect(try Checkpoint.decodeList(bytes) == list)
        for n in 0..<bytes.count {
            #expect(throws: LnoteError.self, "seed \(seed): prefix of \(n) bytes accepted") {
                _ = try Checkpoint.decodeList(Array(bytes.prefix(n)))
            }
        }
        #expect(throws: LnoteError.self) { _ = try Checkpoint.decodeList(bytes + [0]) }
    }

    @Test("[SYNC-59] [SNAP-44] a held checkpoint written before range restores were kept: a client's next one, which keeps its restores, is checked again from the empty page and kept; a claim with an invented erase taken back whole is refused", arguments: RelayBackends.all)
    func oldFormBase(backend: RelayBackendKind) async throws {
        try await withRelay(backend) { store, nb, database in
            let a = ReplicaID(1), b = ReplicaID(2)
            let log = LogRef(document: DocumentID(), page: PageID())
            var ra = PageReplica(page: log.page!)
            let add = try ra.add(.stroke(Stroke(points: (0..<10).map { StrokePoint(x: Int32($0) * 10, y: 0) })), by: a, wallTime: 1)
            let erase = try ra.make(.eraseRange(add.id, [PointRange(0, 10)]), by: a, wallTime: 2)
            var rb = PageReplica(page: log.page!)
            try rb.receive([add, erase])
            let restore = try rb.make(.restoreRange(add.id, [PointRange(2, 4)]), by: b, wallTime: 3)
            try ra.receive([restore])
            let more = try ra.add(.stroke(Stroke(points: [StrokePoint(x: 0, y: 5), StrokePoint(x: 9, y: 5)])), by: a, wallTime: 4)
            let all = [add, erase, restore, more]
            _ = try store.sync(SyncRequest(replica: a, epoch: 0, cursor: 0, push: [LogBatch(log: log, ops: all)]), notebook: nb)
            // C1, as lnote wrote it before: the erase's remainder, no restore.
            var old = try replayedState([add, erase, restore], page: log.page!)
            #expect(!old.elements[0].rangeRestores.isEmpty)
            old.elements[0].rangeErasures = old.elements[0].keptRangeErasures
            old.elements[0].rangeRestores = []
            let c1 = Checkpoint(log: log, clock: old.clock, snapshot: PageSnapshot.encode(old, coveredLogOffset: 0, logIncarnation: 0))
            #expect(try store.putCheckpoint(notebook: nb, checkpoint: c1), "the old form is the same state")
            // C2 covers C1 and keeps the restore: replayed from C1 it differs, from the empty page it is the state.
            let c2 = try checkpoint(log, all, at: ra.clock)
            #expect(try store.putCheckpoint(notebook: nb, checkpoint: c2))
            #expect(try store.checkpoints(notebook: nb) == [c2])
            // A claim adding a partial erase taken back whole (by an operation the relay holds,
            // under another meaning) is not the operations' state, from any base.
            var forged = ra.state
            let fake = RangeErasure(ref: more.ref, ranges: [PointRange(6, 7)])
            forged.elements = forged.elements.map { e in
                guard e.id == add.id else { return e }
                var e = e
                e.rangeErasures.append(fake)
                e.rangeErasures.sort { $0.ref < $1.ref }
                return e
            }
            let c3 = Checkpoint(log: log, clock: forged.clock, snapshot: PageSnapshot.encode(forged, coveredLogOffset: 0, logIncarnation: 0))
            #expect(throws: ServerRefusal.self) { try store.putCheckpoint(notebook: nb, checkpoint: c3) }
            #expect(try store.checkpoints(notebook: nb) == [c2])
        }
    }

    /// A remote that refuses every checkpoint as a relay refuses one that is not the state of
    /// its operations (`bad_checkpoint`, an `invalidArgument` to the client).
    final class RefusingRemote: SyncRemote {
        let inner: LocalRemote
        let offered = Mutex(0)
        var key: String { inner.key }
        init(endpoint: any SyncEndpoint) { inner = LocalRemote(key: "relay", endpoint: endpoint) }
        func sync(_ request: SyncRequest) async throws -> SyncResponse { try await inner.sync(request) }
        func missingAssets(_ ids: [AssetID], document: DocumentID) async throws -> [AssetID] {
            try await inner.missingAssets(ids, document: document)
        }
        func putAsset(_ bytes: [UInt8], id: AssetID, document: DocumentID) async throws {
            try await inner.putAsset(bytes, id: id, document: document)
        }
        func getAsset(_ id: AssetID, document: DocumentID) async throws -> [UInt8] { try await inner.getAsset(id, document: document) }
        func checkpoints() async throws -> [Checkpoint] { try await inner.checkpoints() }
        func putCheckpoint(_ checkpoint: Checkpoint) async throws {
            offered.withLock { $0 += 1 }
            throw LnoteError(.invalidArgument, "checkpoint of log \(checkpoint.log) refused: its state is not the state the relay's operations give")
        }
        var traffic: (sent: Int, received: Int) { (0, 0) }
    }

    @Test("[SYNC-59] a checkpoint the relay refuses is reported and the sync goes on: its operations are pushed, and the next sync does not offer it again before the page grows")
    func refusedCheckpointDoesNotStopTheSync() async throws {
        try await withRelay { store, nb, _ in
            var rng = SeededRNG(seed: 59)
            let a = TestNotebook(replica: ReplicaID(0xA1), offersCheckpoints: true)
            let doc = try a.createDocument("refused")
            let page = LogRef(document: doc, page: try a.addPage(doc))
            for _ in 0..<3 { _ = try a.addStroke(page, randomStroke(&rng)) }
            let remote = RefusingRemote(endpoint: try store.endpoint(notebook: nb))
            func sync() async throws -> SyncReport {
                var session = SyncSession(notebook: a, remote: remote)
                session.checkpointInterval = 1
                return try await session.run()
            }
            // The first sync pushes; a checkpoint is offered once the remote is known to hold the page.
            var refused: [String] = []
            for _ in 0..<2 { refused += try await sync().checkpointsRefused }
            #expect(refused.count == 1 && refused[0].contains("\(page)"), "\(refused)")
            #expect(remote.offered.withLock { $0 } == 1)
            #expect(try RelayCounts.read(store).ops == 5, "the sync went on: the document's two operations and the page's three pushed")
            // Offered again only once the page has grown by the interval.
            #expect(try await sync().checkpointsRefused.isEmpty && remote.offered.withLock { $0 } == 1)
            _ = try a.addStroke(page, randomStroke(&rng))
            refused = []
            for _ in 0..<2 { refused += try await sync().checkpointsRefused }
            #expect(refused.count == 1 && remote.offered.withLock { $0 } == 2, "\(refused)")
        }
    }

    @Test("the relay keeps the newest checkpoint per log; concurrent clocks: the greater total", arguments: RelayBackends.all)
    func replacement(backend: RelayBackendKind) async throws {
        try await withRelay(backend) { store, nb, database in
            // Two replicas draw on one page without seeing each other: a1…a5 and b1…b4.
            var rng = SeededRNG(seed: 3)
            let a = ReplicaID(1), b = ReplicaID(2)
            let log = LogRef(document: DocumentID(), page: PageID())
            var ra = PageReplica(page: log.page!), rb = PageReplica(page: log.page!)
            let opsA = try (0..<5).map { i in try ra.add(.stroke(randomStroke(&rng)), by: a, wallTime: 10 + Int64(i)) }
            let opsB = try (0..<4).map { i in try rb.add(.stroke(randomStroke(&rng)), by: b, wallTime: 20 + Int64(i)) }
            let all = opsA + opsB
            _ = try store.sync(SyncRequest(replica: a, epoch: 0, cursor: 0, push: [LogBatch(log: log, ops: all)]), notebook: nb)
            func cp(_ entries: [(ReplicaID, UInt64)]) throws -> Checkpoint { try checkpoint(log, all, at: VectorClock(entries)) }

            #expect(try store.putCheckpoint(notebook: nb, checkpoint: cp([(a, 2)])))
            #expect(try store.putCheckpoint(notebook: nb, checkpoint: cp([(a, 3)])))
            #expect(try store.putCheckpoint(notebook: nb, checkpoint: cp([(a, 2)])) == false, "older")
            #expect(try store.checkpoints(notebook: nb) == [try cp([(a, 3)])])
            #expect(try store.putCheckpoint(notebook: nb, checkpoint: cp([(a, 3)])), "an equal clock replaces: idempotent")
            #expect(try store.checkpoints(notebook: nb) == [try cp([(a, 3)])])
            // Concurrent: {a:3} (total 3) against {a:1, b:4} (total 5).
            #expect(try store.putCheckpoint(notebook: nb, checkpoint: cp([(a, 1), (b, 4)])))
            #expect(try store.putCheckpoint(notebook: nb, checkpoint: cp([(a, 3)])) == false)
            #expect(try store.checkpoints(notebook: nb) == [try cp([(a, 1), (b, 4)])])
            // Covering the held one: checked from the held one's state (a1 b1…b4 → a1…a5 b1…b4).
            #expect(try store.putCheckpoint(notebook: nb, checkpoint: cp([(a, 5), (b, 4)])))
            // Concurrent, equal totals: the same winner whatever the order of arrival.
            let x = try cp([(a, 5), (b, 1)]), y = try cp([(a, 2), (b, 4)])
            var winners: [Checkpoint] = []
            for order in [[x, y], [y, x]] {
                let n = try store.createNotebook()
                _ = try store.sync(SyncRequest(replica: a, epoch: 0, cursor: 0, push: [LogBatch(log: log, ops: all)]), notebook: n)
                for c in order { try store.putCheckpoint(notebook: n, checkpoint: c) }
                winners += try store.checkpoints(notebook: n)
            }
            #expect(winners.count == 2 && winners[0] == winners[1])
            // One per log, sorted by log; an empty page's checkpoint is valid; endpoints see the same.
            let other = LogRef(document: DocumentID(), page: PageID())
            try store.putCheckpoint(notebook: nb, checkpoint: checkpoint(other, [], at: VectorClock()))
            let held = try store.checkpoints(notebook: nb)
            #expect(held.map(\.log) == [log, other].sorted())
            #expect(try await store.endpoint(notebook: nb).checkpoints() == held)
            #expect(try Checkpoint.decodeList(Checkpoint.encodeList(held)) == held)
            #expect(try RelayCounts.read(store).checkpoints == 4)
        }
    }

    @Test("[SYNC-24] [SYNC-40] a relay refuses as too large (413) a checkpoint of over 8 MiB, of snapshot format 1, or whose page holds more than 4,194,304 points: checking it replays every point decoded; the operations stay held")
    func budget() async throws {
        try await withRelay { store, nb, _ in
            let a = ReplicaID(1)
            let log = LogRef(document: DocumentID(), page: PageID())
            var r = PageReplica(page: log.page!)
            // Four strokes of the most points a stroke may have (256 KiB each encoded,
            // 20 MiB each decoded), and one more point than the budget with a fifth.
            func zigzag(_ i: Int) -> StrokePoint {
                let x = Int32(truncatingIfNeeded: 100 + i % 1_000), y = Int32(truncatingIfNeeded: 100 + (i / 1_000) % 16)
                return StrokePoint(x: x, y: y)
            }
            let long = Stroke(points: (0..<Stroke.maxPoints).map(zigzag))
            var ops = try (0..<4).map { i in try r.add(.stroke(long), by: a, wallTime: Int64(i)) }
            ops.append(try r.add(.stroke(Stroke(points: [StrokePoint(x: 10, y: 10)])), by: a, wallTime: 9))
            #expect(RelayStore.maxCheckpointPoints == 4 * Stroke.maxPoints)
            let pushed = try store.sync(SyncRequest(replica: a, epoch: 0, cursor: 0, push: [LogBatch(log: log, ops: ops)]), notebook: nb)
            #expect(pushed.accepted == 5)
            let over = Checkpoint(log: log, clock: r.clock, snapshot: PageSnapshot.encode(r.state, coveredLogOffset: 0, logIncarnation: 0))
            #expect(over.snapshot.count < RelayStore.maxCheckpointBytes)
            #expect(throws: LnoteError(.limitExceeded)) { try store.putCheckpoint(notebook: nb, checkpoint: over) }
            let big = Checkpoint(log: log, clock: r.clock, snapshot: [UInt8](repeating: 0, count: RelayStore.maxCheckpointBytes + 1))
            #expect(throws: LnoteError(.limitExceeded)) { try store.putCheckpoint(notebook: nb, checkpoint: big) }
            #expect(try store.checkpoints(notebook: nb).isEmpty)
            // The operations stay held: another device pulls all five.
            let pulled = try store.sync(SyncRequest(replica: ReplicaID(2), epoch: pushed.epoch, cursor: 0, push: []), notebook: nb)
            #expect(pulled.pull.reduce(0) { $0 + $1.frames.count } == 5)
            // A page within the budget still gets its checkpoint.
            let small = LogRef(document: log.document, page: PageID())
            var rs = PageReplica(page: small.page!)
            let few = try (0..<3).map { i in try rs.add(.stroke(Stroke(points: [StrokePoint(x: 10 + Int32(i), y: 10)])), by: a, wallTime: Int64(i)) }
            _ = try store.sync(SyncRequest(replica: a, epoch: 0, cursor: 0, push: [LogBatch(log: small, ops: few)]), notebook: nb)
            // In snapshot formats 2 to 4 only: format 1's points cannot be counted without decoding them.
            let v1 = Checkpoint(log: small, clock: rs.clock, snapshot: PageSnapshot.encode(rs.state, coveredLogOffset: 0, logIncarnation: 0, version: 1))
            #expect(throws: LnoteError(.limitExceeded)) { try store.putCheckpoint(notebook: nb, checkpoint: v1) }
            // A format newer than the relay reads is skipped the same way (413), not refused as
            // bad (400, which would fail the client's sync, [SYNC-40]).
            var newer = PageSnapshot.encode(rs.state, coveredLogOffset: 0, logIncarnation: 0)
            newer[8] = UInt8(PageSnapshot.version + 1)
            let crc = CRC32C.checksum(newer, 0..<(newer.count - 4)).littleEndian
            withUnsafeBytes(of: crc) { for i in 0..<4 { newer[newer.count - 4 + i] = $0[i] } }
            #expect(throws: LnoteError(.limitExceeded)) {
                try store.putCheckpoint(notebook: nb, checkpoint: Checkpoint(log: small, clock: rs.clock, snapshot: newer))
            }
            // Formats 2 and 3, what lnote wrote before formats 3 and 4, are checked and kept.
            for version: UInt16 in [2, 3] {
                let older = Checkpoint(log: small, clock: rs.clock,
                                       snapshot: PageSnapshot.encode(rs.state, coveredLogOffset: 0, logIncarnation: 0, version: version))
                #expect(try store.putCheckpoint(notebook: nb, checkpoint: older), "format \(version)")
            }
            #expect(try store.putCheckpoint(notebook: nb, checkpoint: try checkpoint(small, few, at: rs.clock)))
        }
    }
}
