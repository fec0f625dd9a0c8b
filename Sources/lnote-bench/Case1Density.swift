import Foundation
import LnoteModel
import LnoteReplication

extension Bench {
    /// 1. Density: bytes per point of a page snapshot and of journal frames, against the
    /// naive 16 B/point encoding and zlib of it.
    func caseDensity() throws {
        let count = options.size(2000, quick: 300)
        var pages: [(label: String, strokes: [Stroke])] = []
        pages.append(("generated page, \(formatCount(count)) strokes", HandwritingGenerator.strokes(seed: source.seed &+ 1, count: count)))
        if let real = source.realStrokes {
            pages.append(("real strokes (\(formatCount(real.count)) from the file)", real))
        }
        for (label, strokes) in pages {
            let d = try density(strokes)
            let lossless = d.roundTrips
            results.rows.append(Row(1, "snapshot, \(label)", measured: d.snapshotPerPoint, unit: .bytesPerPoint,
                                    baselineName: "naive 16 B/pt", baseline: 16,
                                    target: .condition("≤ 3 B/pt, lossless at 0.1 pt", d.snapshotPerPoint <= 3 && lossless),
                                    note: "\(formatCount(d.points)) points, \(formatCount(d.snapshotBytes)) snapshot bytes; "
                                        + (lossless ? "decoded snapshot equals the page (every quantized point, 0.1 pt / 0.001 pressure / 1 ms steps)"
                                                    : "DECODED SNAPSHOT DIFFERS FROM THE PAGE")))
            results.rows.append(Row(1, "snapshot vs zlib, \(label)", measured: d.snapshotPerPoint, unit: .bytesPerPoint,
                                    baselineName: "zlib -6 of naive", baseline: d.zlibPerPoint, target: .report))
            results.rows.append(Row(1, "journal frames, \(label)", measured: d.framesPerPoint, unit: .bytesPerPoint,
                                    baselineName: "naive 16 B/pt", baseline: 16, target: .report,
                                    note: "one add-stroke frame per stroke: \(formatCount(d.frameBytes)) bytes, "
                                        + String(format: "%.0f", Double(d.frameBytes - d.pointStreamBytes) / Double(strokes.count))
                                        + " B of frame header, ids, clock and style per stroke"))
            results.rows.append(Row(1, "journal frames vs zlib, \(label)", measured: d.framesPerPoint, unit: .bytesPerPoint,
                                    baselineName: "zlib -6 of naive", baseline: d.zlibPerPoint, target: .report))
        }
    }

    struct Density {
        var points: Int
        var snapshotBytes: Int
        var frameBytes: Int
        var pointStreamBytes: Int
        var zlibBytes: Int
        var roundTrips: Bool
        var snapshotPerPoint: Double { Double(snapshotBytes) / Double(points) }
        var framesPerPoint: Double { Double(frameBytes) / Double(points) }
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
        return Density(points: state.pointCount, snapshotBytes: snapshot.count,
                       frameBytes: ops.reduce(0) { $0 + OperationCodec.encode($1).count },
                       pointStreamBytes: strokes.reduce(0) { $0 + StrokeCodec.encodedPoints($1.points).count },
                       zlibBytes: try Naive.zlibSize(naive), roundTrips: roundTrips)
    }
}
