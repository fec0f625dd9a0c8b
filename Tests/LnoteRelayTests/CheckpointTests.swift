import Foundation
import LnoteModel
import LnoteServer
import LnoteSync
import Testing

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

    @Test("the relay keeps the newest checkpoint per log; concurrent clocks: the greater total")
    func replacement() async throws {
        try await withRelay { store, nb, path in
            let a = ReplicaID(1), b = ReplicaID(2)
            let log = LogRef(document: DocumentID(), page: PageID())
            func cp(_ entries: [(ReplicaID, UInt64)], _ tag: UInt8) -> Checkpoint {
                Checkpoint(log: log, clock: VectorClock(entries), snapshot: [tag])
            }
            #expect(try store.putCheckpoint(notebook: nb, checkpoint: cp([(a, 2)], 1)))
            #expect(try store.putCheckpoint(notebook: nb, checkpoint: cp([(a, 3)], 2)))
            #expect(try store.putCheckpoint(notebook: nb, checkpoint: cp([(a, 2)], 3)) == false, "older")
            #expect(try store.checkpoints(notebook: nb) == [cp([(a, 3)], 2)])
            #expect(try store.putCheckpoint(notebook: nb, checkpoint: cp([(a, 3)], 4)), "equal clock replaces")
            #expect(try store.checkpoints(notebook: nb) == [cp([(a, 3)], 4)])
            // Concurrent: {a:3} (total 3) against {a:1, b:4} (total 5).
            #expect(try store.putCheckpoint(notebook: nb, checkpoint: cp([(a, 1), (b, 4)], 5)))
            #expect(try store.putCheckpoint(notebook: nb, checkpoint: cp([(a, 3)], 6)) == false)
            #expect(try store.checkpoints(notebook: nb) == [cp([(a, 1), (b, 4)], 5)])
            // Concurrent, equal totals: the same winner whatever the order of arrival.
            let x = cp([(a, 5), (b, 1)], 7), y = cp([(a, 2), (b, 4)], 8)
            let other = LogRef(document: DocumentID())
            var winners: [Checkpoint] = []
            for order in [[x, y], [y, x]] {
                let n = try store.createNotebook()
                for c in order { try store.putCheckpoint(notebook: n, checkpoint: c) }
                winners += try store.checkpoints(notebook: n)
            }
            #expect(winners.count == 2 && winners[0] == winners[1])
            // One per log, sorted by log; endpoints see the same.
            try store.putCheckpoint(notebook: nb, checkpoint: Checkpoint(log: other, clock: VectorClock(), snapshot: []))
            let all = try store.checkpoints(notebook: nb)
            #expect(all.map(\.log) == [log, other].sorted())
            #expect(try await store.endpoint(notebook: nb).checkpoints() == all)
            #expect(try Checkpoint.decodeList(Checkpoint.encodeList(all)) == all)
            #expect(try RelayCounts.read(path).checkpoints == 4)
        }
    }
}
