import Foundation
import Testing
import LnoteModel
import LnoteReplication
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
        for url in seeds + Self.inputs("crashes", target) {
            FuzzTargets.run(target, Array(try Data(contentsOf: url)))
        }
    }

    /// The seeds are worth fuzzing from: each decodes (the mutations start from valid inputs).
    @Test("the seeds decode")
    func seedsDecode() throws {
        func bytes(_ t: String) throws -> [[UInt8]] { try Self.inputs("corpus", t).map { Array(try Data(contentsOf: $0)) } }
        for b in try bytes("frame") { #expect(try Frame.decodeAll(b).allSatisfy { (try? OperationCodec.decode($0)) != nil }) }
        for b in try bytes("op") + bytes("merge") {
            #expect(!FuzzTargets.chunks(b).isEmpty && FuzzTargets.chunks(b).allSatisfy { (try? OperationCodec.decode($0)) != nil })
        }
        for b in try bytes("snapshot") { _ = try PageSnapshot.decode(FuzzTargets.resealed(b)) }
        for b in try bytes("checkpoint") { _ = try Checkpoint.decode(b) }
        for b in try bytes("sync-request") { _ = try SyncCodec.decodeRequest(b) }
        for b in try bytes("sync-response") { _ = try SyncCodec.decodeResponse(b) }
        for b in try bytes("import") { #expect(!(try StrokeImport.parse(b)).isEmpty) }
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
