import Foundation
import Testing
import LnoteModel
import LnoteReplication
import LnoteTestSupport

/// [SNAP-30] The tiny page of `Protocol/page-snapshot.md` §4.7 comes from real operations:
/// the six frames of the spec's `tiny-page-ops` block, made here through the merge's own
/// API by two replicas, are the bytes the codec writes in hash form (the form lnote wrote
/// before `addStroke`, which readers keep accepting: operation-log.md [LOG-22]; today's
/// writer writes the two stroke adds as `addStroke3`); applying them, decoded from the
/// spec, to an empty page gives exactly the spec's snapshot (`tiny-page`) and canonical
/// JSON (`tiny-page-json`). `LNOTE_RECORD_GOLDEN=1` prints the three blocks instead of
/// comparing, after an intended change.
@Suite struct TinyPageVectorTests {
    static let a = ReplicaID(0xA1), b = ReplicaID(0xB2)
    static let page = PageID(UUID(uuidString: "00112233-4455-6677-8899-AABBCCDDEEFF")!)
    static let t0: Int64 = 1_700_000_000_000
    static let incarnation: UInt64 = 0x0123_4567_89AB_CDEF

    /// The operations, in the order replica a1's log holds them after both synced.
    static func operations() throws -> [Op] {
        var pa = PageReplica(page: page), pb = PageReplica(page: page)
        let points = [StrokePoint(x: 1000, y: 2000, pressure: 500, radius: 10, t: 0),
                      StrokePoint(x: 1012, y: 2003, pressure: 520, radius: 10, t: 4),
                      StrokePoint(x: 1025, y: 2005, pressure: 540, radius: 11, t: 8)]
        let pen = InkStyle(tool: .pen, color: .black, width: 20)
        // a1 draws S and b2 places image I, concurrently: both on layer 1.
        let s = try pa.add(.stroke(Stroke(style: pen, points: points)), by: a, wallTime: t0)
        let i = try pb.add(.image(ImageElement(asset: AssetID.of(Array("lnote".utf8)),
                                               frame: QRect(x: 500, y: 600, width: 2000, height: 1500))),
                           by: b, wallTime: t0 + 1000)
        try pa.receive([i]); try pb.receive([s])
        // a1 moves the image; b2, concurrently, draws T just below the image: between two
        // keys that tie, so T's key goes one step deeper ([MERGE-13]).
        let move = try pa.move([i.id], dx: 30, dy: -40, by: a, wallTime: t0 + 2000)
        let t = try pb.add(.stroke(Stroke(style: pen, points: [StrokePoint(x: 1100, y: 2100, pressure: 500, radius: 10, t: 0),
                                                               StrokePoint(x: 1150, y: 2120, pressure: 600, radius: 12, t: 8)])),
                           by: b, wallTime: t0 + 3000, below: i.id)
        // a1 erases S while b2, concurrently, erases its first point: erase wins ([MERGE-21]).
        let erase = try pa.make(.erase([s.id]), by: a, wallTime: t0 + 4000)
        let partial = try pb.make(.eraseRange(s.id, [PointRange(0, 1)]), by: b, wallTime: t0 + 5000)
        return [s, i, move, t, erase, partial]
    }

    @Test("[SNAP-30] [LOG-22] the tiny page is what its operations give, byte for byte")
    func tinyPageFromOperations() throws {
        let ops = try Self.operations()
        let frames = ops.flatMap { OperationCodec.encode($0, form: .hash) }
        var replica = PageReplica(page: Self.page)
        try replica.receive(ops)
        // The snapshot covers a log holding the six frames after its 40-byte header.
        // 4.7 shows version 1 (still readable, [SNAP-7]); 4.8 the same page as versions 2, 3
        // and 4 ([SNAP-37], [SNAP-42], [SNAP-43]), and says what version 5 changes.
        let snapshot = PageSnapshot.encode(replica.state, coveredLogOffset: UInt64(40 + frames.count),
                                           logIncarnation: Self.incarnation, version: 1)
        let snapshotV2 = PageSnapshot.encode(replica.state, coveredLogOffset: UInt64(40 + frames.count),
                                             logIncarnation: Self.incarnation, version: 2)
        let snapshotV3 = PageSnapshot.encode(replica.state, coveredLogOffset: UInt64(40 + frames.count),
                                             logIncarnation: Self.incarnation, version: 3)
        let snapshotV4 = PageSnapshot.encode(replica.state, coveredLogOffset: UInt64(40 + frames.count),
                                             logIncarnation: Self.incarnation, version: 4)
        // [SNAP-45] Two elements, no element index: version 5 (what lnote writes) is version 4
        // with another version field and CRC (4.8).
        let snapshotV5 = PageSnapshot.encode(replica.state, coveredLogOffset: UInt64(40 + frames.count),
                                             logIncarnation: Self.incarnation)
        var v4AsV5 = snapshotV4
        v4AsV5[8] = 5
        let crc = CRC32C.checksum(v4AsV5, 0..<(v4AsV5.count - 4))
        withUnsafeBytes(of: crc.littleEndian) { for i in 0..<4 { v4AsV5[v4AsV5.count - 4 + i] = $0[i] } }
        #expect(snapshotV5 == v4AsV5 && snapshotV5[8] == 5)
        let json = replica.state.canonicalJSON()
        if ProcessInfo.processInfo.environment["LNOTE_RECORD_GOLDEN"] == "1" {
            print("tiny-page-ops:\n\(SpecVectors.hexDump(frames))\n")
            for op in ops { print("  \(OperationCodec.encode(op, form: .hash).count) bytes: \(op)") }
            print("tiny-page:\n\(SpecVectors.hexDump(snapshot))\n\ntiny-page-v2:\n\(SpecVectors.hexDump(snapshotV2))\n\ntiny-page-v3:\n\(SpecVectors.hexDump(snapshotV3))\n\ntiny-page-v4:\n\(SpecVectors.hexDump(snapshotV4))\n\ntiny-page-json:\n\(json)")
            return
        }
        let specFrames = try SpecVectors.bytes("tiny-page-ops", in: "page-snapshot.md")
        #expect(specFrames == frames, "the spec's frames differ; actual:\n\(SpecVectors.hexDump(frames))")
        // The spec's frames, decoded and applied to an empty page, in one batch and one by one.
        let decoded = try Frame.decodeAll(specFrames).map { try OperationCodec.decode($0) }
        #expect(decoded == ops)
        var fromSpec = PageReplica(page: Self.page)
        try fromSpec.receive(decoded.reversed())
        #expect(fromSpec.state == replica.state)
        #expect(try SpecVectors.bytes("tiny-page", in: "page-snapshot.md") == snapshot,
                "the spec's snapshot differs; actual:\n\(SpecVectors.hexDump(snapshot))")
        #expect(try SpecVectors.bytes("tiny-page-v2", in: "page-snapshot.md") == snapshotV2,
                "the spec's version-2 snapshot differs; actual:\n\(SpecVectors.hexDump(snapshotV2))")
        #expect(try SpecVectors.bytes("tiny-page-v3", in: "page-snapshot.md") == snapshotV3,
                "the spec's version-3 snapshot differs; actual:\n\(SpecVectors.hexDump(snapshotV3))")
        #expect(try SpecVectors.bytes("tiny-page-v4", in: "page-snapshot.md") == snapshotV4,
                "the spec's version-4 snapshot differs; actual:\n\(SpecVectors.hexDump(snapshotV4))")
        #expect(try SpecVectors.text("tiny-page-json", in: "page-snapshot.md") == json,
                "the spec's JSON differs; actual:\n\(json)")
        // What the vector shows: T between S and the image, S erased with a conflict.
        let state = replica.state
        #expect(state.elements.map(\.id) == [ops[3].id, ops[1].id])
        #expect(state.tombstones.map(\.id) == [ops[0].id])
        #expect(state.conflicts.map(\.kind) == [.erase])
    }
}
