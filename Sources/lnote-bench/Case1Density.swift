import Foundation
import LnoteModel
import LnoteReplication

extension Bench {
    /// 1. Density: bytes per point of a page snapshot, of journal frames and of the point
    /// codec alone, against the naive 16 B/point encoding and zlib of it; and the point
    /// codec's encode and decode time per point against the naive encoding's, timed in the
    /// same interleaved loop. For both ink profiles (smooth and pen), and the file's strokes
    /// with `--strokes`.
    func caseDensity() async throws {
        let count = options.size(2000, quick: 300)
        var pages: [(label: String, strokes: [Stroke])] = []
        pages.append(("smooth ink, \(formatCount(count)) strokes", HandwritingGenerator.strokes(seed: source.seed &+ 1, count: count)))
        pages.append(("pen ink, \(formatCount(count)) strokes", source.pen(count, stream: 1)))
        if let real = source.realStrokes {
            pages.append(("real strokes (\(formatCount(real.count)) from the file)", real))
        }
        for (label, strokes) in pages {
            let d = try density(strokes)
            let lossless = d.roundTrips
            let perStroke = Double(d.snapshotBytes - d.pointStreamBytes) / Double(strokes.count)
            results.rows.append(Row(1, "snapshot, \(label)", measured: d.snapshotPerPoint, unit: .bytesPerPoint,
                                    baselineName: "naive 16 B/pt", baseline: 16,
                                    target: .condition("≤ 3 B/pt, lossless at 0.1 pt", d.snapshotPerPoint <= 3 && lossless),
                                    note: "\(formatCount(d.points)) points in \(formatCount(strokes.count)) strokes "
                                        + "(median \(d.medianPoints) points), \(formatCount(d.snapshotBytes)) snapshot bytes, of which "
                                        + String(format: "%.1f", perStroke) + " B per element besides its point stream "
                                        + "(the strokes added as drawn, one author, 0.9 s apart: lnote import gives a whole file "
                                        + "one wall time, which saves about a byte a stroke); "
                                        + (lossless ? "decoded snapshot equals the page (every quantized point, 0.1 pt / 0.001 pressure / 1 ms steps)"
                                                    : "DECODED SNAPSHOT DIFFERS FROM THE PAGE")))
            results.rows.append(Row(1, "snapshot vs zlib, \(label)", measured: d.snapshotPerPoint, unit: .bytesPerPoint,
                                    baselineName: "zlib -6 of naive", baseline: d.zlibPerPoint, target: .report))
            results.rows.append(Row(1, "journal frames, \(label)", measured: d.framesPerPoint, unit: .bytesPerPoint,
                                    baselineName: "naive 16 B/pt", baseline: 16,
                                    target: .condition("≤ 4 B/pt, lossless (issue 15)", d.framesPerPoint <= 4 && d.framesRoundTrip),
                                    note: "the log's anchor, a copy of it, and one log-form addStroke3 frame (0x8A) per stroke, "
                                        + "as a page log of their author holds them: \(formatCount(d.frameBytes)) bytes, "
                                        + String(format: "%.1f", Double(d.frameBytes - d.framePointBytes) / Double(strokes.count))
                                        + " B of frame header, counter, wall time, clock and style per stroke, "
                                        + String(format: "%.2f", Double(d.framePointBytes) / Double(d.points))
                                        + " B/pt of points (stream v2, standalone context, written parameters, grids); "
                                        + (d.framesRoundTrip ? "every frame decodes to its operation" : "A FRAME DOES NOT DECODE TO ITS OPERATION")))
            results.rows.append(Row(1, "journal frames vs addStroke3 frames, \(label)", measured: d.framesPerPoint, unit: .bytesPerPoint,
                                    baselineName: "addStroke3 frames (0x0A)", baseline: d.wireFramesPerPoint, target: .report,
                                    note: "the same operations as the wire carries them, and as lnote wrote them before log anchors "
                                        + "(each frame naming its replica and its whole wall time): \(formatCount(d.wireFrameBytes)) bytes"))
            results.rows.append(Row(1, "journal frames vs add frames, \(label)", measured: d.framesPerPoint, unit: .bytesPerPoint,
                                    baselineName: "add frames (0x01, hash form)", baseline: d.addFramesPerPoint, target: .report,
                                    note: "the same operations as lnote wrote them before addStroke: \(formatCount(d.addFrameBytes)) bytes"))
            results.rows.append(Row(1, "journal frames vs addStroke frames, \(label)", measured: d.framesPerPoint, unit: .bytesPerPoint,
                                    baselineName: "addStroke frames (0x06)", baseline: d.v1FramesPerPoint, target: .report,
                                    note: "the same operations as lnote wrote them before addStroke2 (adaptive second differences, "
                                        + "colour always written): \(formatCount(d.v1FrameBytes)) bytes"))
            results.rows.append(Row(1, "journal frames vs addStroke2 frames, \(label)", measured: d.framesPerPoint, unit: .bytesPerPoint,
                                    baselineName: "addStroke2 frames (0x09)", baseline: d.v2FramesPerPoint, target: .report,
                                    note: "the same operations as lnote wrote them before addStroke3 (no digitizer grids): "
                                        + "\(formatCount(d.v2FrameBytes)) bytes"))
            results.rows.append(Row(1, "journal frames vs zlib, \(label)", measured: d.framesPerPoint, unit: .bytesPerPoint,
                                    baselineName: "zlib -6 of naive", baseline: d.zlibPerPoint, target: .report))
            results.rows.append(Row(1, "snapshot vs version 1, \(label)", measured: d.snapshotPerPoint, unit: .bytesPerPoint,
                                    baselineName: "snapshot version 1", baseline: d.snapshotV1PerPoint, target: .report,
                                    note: "the same state in format version 1 (still readable): \(formatCount(d.snapshotV1Bytes)) bytes"))
            results.rows.append(Row(1, "snapshot vs version 2, \(label)", measured: d.snapshotPerPoint, unit: .bytesPerPoint,
                                    baselineName: "snapshot version 2", baseline: d.snapshotV2PerPoint, target: .report,
                                    note: "the same state in format version 2 (no digitizer grids; still readable): \(formatCount(d.snapshotV2Bytes)) bytes"))
            results.rows.append(Row(1, "snapshot vs version 3, \(label)", measured: d.snapshotPerPoint, unit: .bytesPerPoint,
                                    baselineName: "snapshot version 3", baseline: d.snapshotV3PerPoint, target: .report,
                                    note: "the same state in format version 3 (no predictors, no next-id flag: second differences for every channel, and every record writes its counter and Lamport; still readable): \(formatCount(d.snapshotV3Bytes)) bytes"))
            results.rows.append(Row(1, "point codec alone, \(label)", measured: d.pointStreamPerPoint, unit: .bytesPerPoint,
                                    baselineName: "point stream v1", baseline: d.pointStreamV1PerPoint, target: .report,
                                    note: "StrokeCodecV2 over the strokes in chunks of 64 (as a snapshot codes them): "
                                        + "\(formatCount(d.pointStreamBytes)) bytes; StrokeCodec (v1, journal frames): \(formatCount(d.pointStreamV1Bytes))"))

            // The point codec's time, against the naive encoding, interleaved. A pass over a
            // 2,000-stroke page takes well under a millisecond: each timed run repeats it.
            // The journal frames' time: encoding every add, and scanning and decoding every
            // frame (CRC, payload, the validator), against the same in the add form.
            let ops = d.ops
            let written = ops.map { OperationCodec.encode($0) }.joined(), added = ops.map { OperationCodec.encode($0, form: .hash) }.joined()
            let writtenBytes = Array(written), addedBytes = Array(added)
            let v2Bytes = Array(ops.map { OperationCodec.encode($0, form: .writtenV2) }.joined())
            let frameRepeats = max(1, 200_000 / max(1, d.points))
            var frameSum = 0
            let ft = try await measure([
                Variant(name: "addStroke3 encode", body: { for _ in 0..<frameRepeats { for op in ops { frameSum &+= OperationCodec.encode(op).count } } }),
                Variant(name: "add encode", body: { for _ in 0..<frameRepeats { for op in ops { frameSum &+= OperationCodec.encode(op, form: .hash).count } } }),
                Variant(name: "addStroke3 decode", body: { for _ in 0..<frameRepeats { frameSum &+= try Self.decodeFrames(writtenBytes) } }),
                Variant(name: "add decode", body: { for _ in 0..<frameRepeats { frameSum &+= try Self.decodeFrames(addedBytes) } }),
                Variant(name: "addStroke3 hash", body: { for _ in 0..<frameRepeats { frameSum &+= try Self.hashFrames(writtenBytes) } }),
                Variant(name: "add hash", body: { for _ in 0..<frameRepeats { frameSum &+= try Self.hashFrames(addedBytes) } }),
                Variant(name: "addStroke2 encode", body: {
                    for _ in 0..<frameRepeats { for op in ops { frameSum &+= OperationCodec.encode(op, form: .writtenV2).count } }
                }),
                Variant(name: "addStroke2 decode", body: { for _ in 0..<frameRepeats { frameSum &+= try Self.decodeFrames(v2Bytes) } }),
            ], runs: options.runs)
            guard frameSum != 0 else { throw LnoteError(.invalidState, "case 1: the frame passes did nothing") }
            let fns = ft.map { $0.median * 1e9 / Double(frameRepeats * d.points) }
            results.rows.append(Row(1, "journal frame encode, \(label)", measured: fns[0], unit: .nanosecondsPerPoint,
                                    baselineName: "add frame encode", baseline: fns[1], target: .report,
                                    note: "OperationCodec.encode of every add of the page (frame, CRC included); each timed run passes over the page \(frameRepeats) time(s)",
                                    measuredRuns: ft[0].runs, baselineRuns: ft[1].runs))
            results.rows.append(Row(1, "journal frame decode, \(label)", measured: fns[2], unit: .nanosecondsPerPoint,
                                    baselineName: "add frame decode", baseline: fns[3], target: .report,
                                    note: "Frame.decodeAll + OperationCodec.decode (CRC, payload, the validator) of every frame",
                                    measuredRuns: ft[2].runs, baselineRuns: ft[3].runs))
            results.rows.append(Row(1, "journal frame encode vs addStroke2, \(label)", measured: fns[0], unit: .nanosecondsPerPoint,
                                    baselineName: "addStroke2 frame encode", baseline: fns[6], target: .report,
                                    note: "the same operations without digitizer grids (0x09): what choosing the grids costs",
                                    measuredRuns: ft[0].runs, baselineRuns: ft[6].runs))
            results.rows.append(Row(1, "journal frame decode vs addStroke2, \(label)", measured: fns[2], unit: .nanosecondsPerPoint,
                                    baselineName: "addStroke2 frame decode", baseline: fns[7], target: .report,
                                    note: "the same operations without digitizer grids (0x09): what checking the grids costs",
                                    measuredRuns: ft[2].runs, baselineRuns: ft[7].runs))
            results.rows.append(Row(1, "journal content hashes, \(label)", measured: fns[4], unit: .nanosecondsPerPoint,
                                    baselineName: "add frame hashes", baseline: fns[5], target: .report,
                                    note: "ContentHash.of every frame of the log (what a log's digests cost, [SYNC-50]): an addStroke is decoded and hashed in its add form",
                                    measuredRuns: ft[4].runs, baselineRuns: ft[5].runs))

            let w = CodecBench.Workload(label, strokes)
            try CodecBench.check(w)
            let repeats = max(1, 400_000 / max(1, w.points))
            var checksum = 0
            let kinds: [CodecBench.Kind] = [.encode, .naiveEncode, .decode, .naiveDecode, .decodeV1]
            let t = try await measure(kinds.map { kind in
                Variant(name: kind.rawValue, body: {
                    for _ in 0..<repeats { checksum &+= try CodecBench.pass(kind, w) }
                })
            }, runs: options.runs)
            let ns = t.map { $0.median * 1e9 / Double(repeats * w.points) }
            guard checksum != 0 else { throw LnoteError(.invalidState, "case 1: the codec passes did nothing") }
            results.rows.append(Row(1, "point codec encode, \(label)", measured: ns[0], unit: .nanosecondsPerPoint,
                                    baselineName: "naive 16 B/pt encode", baseline: ns[1], target: .report,
                                    note: "StrokeCodecV2 over every stroke (chunks of 64); each timed run passes over the page \(repeats) time(s); "
                                        + "naive: four Float32 per point (the SQLite baseline's BLOBs)",
                                    measuredRuns: t[0].runs, baselineRuns: t[1].runs))
            results.rows.append(Row(1, "point codec decode, \(label)", measured: ns[2], unit: .nanosecondsPerPoint,
                                    baselineName: "naive 16 B/pt decode", baseline: ns[3], target: .report,
                                    measuredRuns: t[2].runs, baselineRuns: t[3].runs))
            results.rows.append(Row(1, "point codec decode vs v1, \(label)", measured: ns[2], unit: .nanosecondsPerPoint,
                                    baselineName: "point stream v1 decode", baseline: ns[4],
                                    target: .condition("not slower per point than v1", ns[2] <= ns[4]),
                                    measuredRuns: t[2].runs, baselineRuns: t[4].runs))
        }
    }

    struct Density {
        var points: Int
        var medianPoints: Int
        var snapshotBytes: Int
        var snapshotV1Bytes: Int
        var snapshotV2Bytes: Int
        var snapshotV3Bytes: Int
        var frameBytes: Int
        /// The point streams inside the frames.
        var framePointBytes: Int
        /// The same operations as standard `addStroke3` frames (0x0A), as the wire carries them.
        var wireFrameBytes: Int
        var addFrameBytes: Int
        var v1FrameBytes: Int
        var v2FrameBytes: Int
        var framesRoundTrip: Bool
        var ops: [Op]
        var pointStreamBytes: Int
        var pointStreamV1Bytes: Int
        var zlibBytes: Int
        var roundTrips: Bool
        var snapshotPerPoint: Double { Double(snapshotBytes) / Double(points) }
        var framesPerPoint: Double { Double(frameBytes) / Double(points) }
        var addFramesPerPoint: Double { Double(addFrameBytes) / Double(points) }
        var wireFramesPerPoint: Double { Double(wireFrameBytes) / Double(points) }
        var v1FramesPerPoint: Double { Double(v1FrameBytes) / Double(points) }
        var v2FramesPerPoint: Double { Double(v2FrameBytes) / Double(points) }
        var pointStreamPerPoint: Double { Double(pointStreamBytes) / Double(points) }
        var pointStreamV1PerPoint: Double { Double(pointStreamV1Bytes) / Double(points) }
        var snapshotV1PerPoint: Double { Double(snapshotV1Bytes) / Double(points) }
        var snapshotV2PerPoint: Double { Double(snapshotV2Bytes) / Double(points) }
        var snapshotV3PerPoint: Double { Double(snapshotV3Bytes) / Double(points) }
        var zlibPerPoint: Double { Double(zlibBytes) / Double(points) }
    }

    func density(_ strokes: [Stroke]) throws -> Density {
        var replica = PageReplica(page: PageID())
        let me = ReplicaID(0xB0)
        var ops: [Op] = []
        for (i, s) in strokes.enumerated() {
            ops.append(try replica.add(.stroke(s), by: me, wallTime: 1_700_000_000_000 + Int64(i) * 900))
        }
        let state = replica.state
        let snapshot = PageSnapshot.encode(state, coveredLogOffset: 40, logIncarnation: 1)
        let decoded = try PageSnapshot.decode(snapshot)
        let roundTrips = decoded.state == PageSnapshot.canonicalized(state)
            && decoded.state.elements.map(\.content) == strokes.map { ElementContent.stroke($0) }
        var naive: [UInt8] = []
        naive.reserveCapacity(state.pointCount * Naive.bytesPerPoint)
        for s in strokes { naive += Naive.encode(s.points) }
        let lengths = strokes.map(\.points.count).sorted()
        // As a page log of this replica holds them ([PKG-110], [PKG-111], [LOG-33]): its anchor
        // and the copy the opening that draws them writes, then each stroke's addStroke3 frame
        // in log form.
        let anchor = LogAnchor(writer: me.rawValue, baseWallTime: ops.first?.wallTime ?? 0)
        var frameBytes = 2 * anchor.frame.count, framePointBytes = 0, framesRoundTrip = true, wireBytes = 0
        for (op, s) in zip(ops, strokes) {
            let standard = OperationCodec.encode(op)
            let bytes = anchor.logForm(standard) ?? standard
            frameBytes += bytes.count
            wireBytes += standard.count
            var context = StrokeCodecV2.Context.standaloneWithGrids
            var w = ByteWriter()
            StrokeCodecV2.encodePoints(s.points, width: s.style.width, context: &context, into: &w)
            framePointBytes += w.count
            // Read back as a log reader does: the CRC from the anchor's, then expanded.
            guard case .frame(let f, _) = Frame.scan(bytes, at: 0, chain: anchor.chainSeed),
                  let expanded = f.type == LogAnchor.logFormAddStroke3 ? anchor.expand(f.payload)?.frame : f,
                  expanded.encoded == standard, (try? OperationCodec.decode(expanded)) == op else {
                framesRoundTrip = false
                continue
            }
        }
        return Density(points: state.pointCount, medianPoints: lengths.isEmpty ? 0 : lengths[lengths.count / 2],
                       snapshotBytes: snapshot.count,
                       snapshotV1Bytes: PageSnapshot.encode(state, coveredLogOffset: 40, logIncarnation: 1, version: 1).count,
                       snapshotV2Bytes: PageSnapshot.encode(state, coveredLogOffset: 40, logIncarnation: 1, version: 2).count,
                       snapshotV3Bytes: PageSnapshot.encode(state, coveredLogOffset: 40, logIncarnation: 1, version: 3).count,
                       frameBytes: frameBytes, framePointBytes: framePointBytes, wireFrameBytes: wireBytes,
                       addFrameBytes: ops.reduce(0) { $0 + OperationCodec.encode($1, form: .hash).count },
                       v1FrameBytes: ops.reduce(0) { $0 + OperationCodec.encode($1, form: .writtenV1).count },
                       v2FrameBytes: ops.reduce(0) { $0 + OperationCodec.encode($1, form: .writtenV2).count },
                       framesRoundTrip: framesRoundTrip, ops: ops,
                       pointStreamBytes: CodecBench.encodeV2(strokes.map(\.points), strokes.map(\.style.width)).count,
                       pointStreamV1Bytes: strokes.reduce(0) { $0 + StrokeCodec.encodedPoints($1.points).count },
                       zlibBytes: try Naive.zlibSize(naive), roundTrips: roundTrips)
    }

    /// Decodes every frame of `bytes`; the points decoded.
    static func decodeFrames(_ bytes: [UInt8]) throws -> Int {
        var n = 0
        for f in try Frame.decodeAll(bytes) {
            if case .add(let c, _) = try OperationCodec.decode(f).body { n &+= c.pointCount }
        }
        return n
    }

    /// The content hash of every frame of `bytes` (a byte of each, so that nothing is skipped).
    static func hashFrames(_ bytes: [UInt8]) throws -> Int {
        var n = 0
        for f in try Frame.decodeAll(bytes) { n &+= Int(ContentHash.of(f)[0]) &+ 1 }
        return n
    }
}
