import Foundation
import Testing
import LnoteModel
import LnoteReplication
import LnoteStore
import LnoteSync
import LnoteTestSupport
@testable import LnoteFuzzing

/// Every input kept in `Fuzz/` — the seed corpus of each target and every crash a fuzzer
/// found (`scripts/fuzz.sh`) — goes through its target on each test run: a crash found once is
/// a regression test from then on. The targets check the decoders' properties (canonical
/// re-encoding, [LOG-22], [SNAP-2]) and the merge's ([MERGE-1]); a failure traps the process.
@Suite struct FuzzCorpusTests {
    static let root = SpecVectors.packageRoot.appendingPathComponent("Fuzz")

    static func inputs(_ kind: String, _ target: String) -> [URL] {
        let dir = root.appendingPathComponent(kind).appendingPathComponent(target)
        let names = (try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? []
        return names.filter { !$0.hasPrefix(".") }.sorted().map { dir.appendingPathComponent($0) }
    }

    @Test("[LOG-22] [SNAP-2] [MERGE-1] the fuzzing corpus and every crash found replay without a fault",
          arguments: FuzzTargets.names)
    func replay(_ target: String) throws {
        let seeds = Self.inputs("corpus", target)
        #expect(!seeds.isEmpty, "no seed for \(target) in Fuzz/corpus/\(target)")
        let crashes = Self.inputs("crashes", target)
        for url in seeds + crashes {
            FuzzTargets.run(target, Array(try Data(contentsOf: url)))
        }
        ReliabilityReport.record(family: "fuzz", detail: "\(target): seed corpus and kept crashes replayed (\(crashes.count) crashes)",
                                 cases: seeds.count + crashes.count)
    }

    /// The seeds are worth fuzzing from: each decodes (the mutations start from valid inputs).
    @Test("the seeds decode")
    func seedsDecode() throws {
        func bytes(_ t: String) throws -> [[UInt8]] { try Self.inputs("corpus", t).map { Array(try Data(contentsOf: $0)) } }
        for b in try bytes("frame") { #expect(try Frame.decodeAll(b).allSatisfy { (try? OperationCodec.decode($0)) != nil }) }
        for b in try bytes("op") + bytes("merge-ops") {
            #expect(!FuzzTargets.chunks(b).isEmpty && FuzzTargets.chunks(b).allSatisfy { (try? OperationCodec.decode($0)) != nil })
        }
        for b in try bytes("snapshot") { _ = try PageSnapshot.decode(FuzzTargets.resealed(b)) }
        for b in try bytes("checkpoint") { _ = try Checkpoint.decode(b) }
        for b in try bytes("sync-request") { _ = try SyncCodec.decodeRequest(b) }
        for b in try bytes("sync-response") { _ = try SyncCodec.decodeResponse(b) }
        for b in try bytes("import") { #expect(!(try StrokeImport.parse(b)).isEmpty) }
        // The JSON files: each seed is accepted by the store's own checks and survives them.
        for (target, kind) in FuzzTargets.jsonTargets {
            let seeds = try bytes(target)
            #expect(!seeds.isEmpty, "no seed for \(target)")
            for b in seeds { #expect(try NotebookJSONFiles.roundTripProblem(kind, b) == nil, "\(target)") }
        }
        // devices.json: a name the store believes is in the seed (a damaged cache reads as empty).
        for b in try bytes("devices-json") { #expect(NotebookJSONFiles.deviceNames(b).count == 1) }
        for b in try bytes("merge") { #expect(MergeScript.run(b) == nil) }
    }

    /// [MERGE-1] The structure-aware merge input makes what it is meant to: valid operations of
    /// every kind by three replicas, some concurrent (made without seeing the others'); random
    /// scripts (seeded) converge too.
    @Test("[MERGE-1] merge scripts make concurrent operations of every kind that converge")
    func mergeScripts() throws {
        // The seeds in Fuzz/corpus/merge, together.
        var ops: [Op] = []
        for url in Self.inputs("corpus", "merge") {
            var script = MergeScript(Array(try Data(contentsOf: url)))
            let made = script.operations().ops
            ops += made
            // Concurrent: some operation's context leaves out an earlier one of another replica.
            let concurrent = made.enumerated().contains { i, op in
                made[..<i].contains { $0.id.replica != op.id.replica && !op.context.covers($0.id) }
            }
            #expect(concurrent, "\(url.lastPathComponent)")
        }
        let kinds = Set(ops.map(\.body.name))
        #expect(kinds == ["add", "move", "erase", "eraseRange", "reorder"], "\(kinds)")
        #expect(Set(ops.map(\.id.replica)) == Set(MergeScript.replicas))
        var cases = 0
        // LNOTE_SEED replays one seed; otherwise 200 derived from a fixed base.
        let seeds: [UInt64] = ProcessInfo.processInfo.environment["LNOTE_SEED"].flatMap { UInt64($0) }.map { [$0] } ?? {
            var g = SplitMix64(seed: 0x14F_0001)
            return (0..<200).map { _ in g.next() }
        }()
        for seed in seeds {
            var g = SplitMix64(seed: seed)
            let bytes = (0..<g.int(in: 16...1500)).map { _ in UInt8(truncatingIfNeeded: g.next()) }
            var s = MergeScript(bytes)
            cases += s.operations().ops.isEmpty ? 0 : 1
            let problem = MergeScript.run(bytes)
            #expect(problem == nil, "seed \(seed): \(problem ?? "")")
        }
        #expect(cases > seeds.count * 3 / 4)
        ReliabilityReport.record(family: "convergence seeds", detail: "merge scripts: 3 replicas, random edits and partial syncs, two delivery orders",
                                 cases: cases, lost: 0, corrupted: 0, crashed: 0, hung: 0)
    }

    /// [LOG-22] The two non-canonical forms a fuzzer found accepted: a varint with a zero
    /// continuation byte, and a translation written as a matrix.
    @Test("[LOG-22] an operation's bytes are its only encoding")
    func nonCanonicalOperationsAreRefused() throws {
        let img = Op(id: OpID(replica: ReplicaID(0xB2), counter: 1), lamport: 1, context: VectorClock(), wallTime: 0,
                     body: .add(.image(ImageElement(asset: AssetID.of([1]), frame: QRect(x: 1, y: 2, width: 28, height: 28))), z: ZKey(layer: 1)))
        var f = OperationCodec.frame(img)
        #expect(f.payload.suffix(2) == [0x38, 0x00])  // height 28 (zigzag 56), rotation 0
        f.payload.removeLast(2)
        f.payload += [0xB8, 0x00, 0x00]  // height as a two-byte varint
        #expect(throws: LnoteError(.corrupt)) { try OperationCodec.decode(f) }
        let mv = Op(id: OpID(replica: ReplicaID(0xB2), counter: 2), lamport: 2, context: VectorClock([(ReplicaID(0xB2), UInt64(1))]),
                    wallTime: 0, body: .move([ElementTransform(img.id, .translation(5, 5))]))
        var m = OperationCodec.frame(mv)
        let kindAt = m.payload.count - 3  // kind 0, tx, ty
        #expect(m.payload[kindAt] == 0)
        m.payload = Array(m.payload[..<kindAt]) + [1, 0x80, 0x80, 0x08, 0, 0, 0x80, 0x80, 0x08, 0x0A, 0x0A]
        #expect(throws: LnoteError(.corrupt)) { try OperationCodec.decode(m) }
    }
}
