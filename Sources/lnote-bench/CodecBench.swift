import Foundation
import LnoteModel

/// `lnote-bench --codec`: the point codec alone (no I/O), on the strokes of case 2
/// (100 × 3,400 points) and the two pages of case 4 (2,000 strokes of smooth ink, 20-400
/// points each, and 2,000 of pen ink, median about 15 points), `StrokeCodec`
/// side by side with the naive 16 B/point encoding of cases 2 and 4's SQLite baselines
/// (`Naive`: four little-endian Float32 per point) in one interleaved loop: median ns/point
/// and MB/s of the encoded bytes. (Codec work compares instruction counts of two builds
/// under callgrind with `--codec-loop`, which do not depend on the machine's load.)
///
/// `lnote-bench --codec-loop KIND` runs one codec path `--runs` times over both workloads
/// without timing, for instruction counts under valgrind:
///
///     valgrind --tool=callgrind --toggle-collect='*CodecBench*pass*' lnote-bench --codec-loop encode:2 --runs 3
///
/// (KIND: encode, decode (point stream version 2), encode-v1, decode-v1, naive-encode, naive-decode; `:2` or `:4` keeps one workload). Instructions per point are the
/// collected total over `points × runs`, both printed.
enum CodecBench {
    struct Workload {
        let name: String
        let strokes: [[StrokePoint]]
        /// The ink width of each stroke (the version-2 stream derives radii from it).
        let widths: [Int32]
        /// Version 1 (section 3): one stream per stroke.
        let encoded: [[UInt8]]
        /// Version 2 (section 3a): the strokes one after the other, the context starting
        /// afresh every 64 strokes as in a snapshot's chunks.
        let encodedV2: [UInt8]
        let naive: [[UInt8]]
        let points: Int
        let bytes: Int

        init(_ name: String, _ strokes: [Stroke]) {
            self.name = name
            self.strokes = strokes.map(\.points)
            widths = strokes.map(\.style.width)
            encoded = self.strokes.map { StrokeCodec.encodedPoints($0) }
            encodedV2 = CodecBench.encodeV2(self.strokes, widths)
            naive = self.strokes.map { Naive.encode($0) }
            points = self.strokes.reduce(0) { $0 + $1.count }
            bytes = encodedV2.count
        }
        var bytesV1: Int { encoded.reduce(0) { $0 + $1.count } }
    }

    /// Points of every stroke in stream version 2, in chunks of 64 strokes.
    static func encodeV2(_ strokes: [[StrokePoint]], _ widths: [Int32]) -> [UInt8] {
        var w = ByteWriter(capacity: strokes.reduce(0) { $0 + $1.count } * 2)
        var context = StrokeCodecV2.Context.chunkWithPredictors
        for (i, s) in strokes.enumerated() {
            if i % 64 == 0 { context = StrokeCodecV2.Context.chunkWithPredictors }
            StrokeCodecV2.encodePoints(s, width: widths[i], context: &context, into: &w)
        }
        return w.bytes
    }

    static func decodeV2(_ w: Workload) throws -> Int {
        var r = ByteReader(w.encodedV2)
        var context = StrokeCodecV2.Context.chunkWithPredictors
        var sum = 0
        for i in w.widths.indices {
            if i % 64 == 0 { context = StrokeCodecV2.Context.chunkWithPredictors }
            sum &+= try StrokeCodecV2.decodePoints(&r, width: w.widths[i], context: &context).count
        }
        return sum
    }

    enum Kind: String, CaseIterable {
        case encode, decode, encodeV1 = "encode-v1", decodeV1 = "decode-v1", naiveEncode = "naive-encode",
             naiveDecode = "naive-decode"
    }

    /// The workloads of cases 2 and 4 (`only`: just one of them).
    static func workloads(_ options: BenchOptions, only: Int? = nil) throws -> [Workload] {
        let source = try StrokeSource(seed: options.seed, strokesPath: options.strokesPath)
        var out: [Workload] = []
        if only != 4 { out.append(Workload("case 2: 100 × 3,400 pts", source.generated(100, points: 3400, stream: 2))) }
        if only != 2 {
            out.append(Workload("case 4, \(InkProfile.smooth.label(source)): 2,000 strokes", source.handwriting(2000, stream: 4)))
            out.append(Workload("case 4, \(InkProfile.pen.label(source)): 2,000 strokes", source.pen(2000, stream: 4)))
        }
        return out
    }

    /// One pass of `kind` over `w`; returns a checksum so that nothing is optimized away.
    @inline(never)
    static func pass(_ kind: Kind, _ w: Workload) throws -> Int {
        var sum = 0
        switch kind {
        case .encode:
            sum &+= encodeV2(w.strokes, w.widths).count
        case .decode:
            sum &+= try decodeV2(w)
        case .encodeV1:
            for s in w.strokes { sum &+= StrokeCodec.encodedPoints(s).count }
        case .naiveEncode:
            for s in w.strokes { sum &+= Naive.encode(s).count }
        case .decodeV1:
            for b in w.encoded {
                var r = ByteReader(b)
                sum &+= try StrokeCodec.decodePoints(&r).count
            }
        case .naiveDecode:
            for b in w.naive { sum &+= Naive.decode(b).count }
        }
        return sum
    }

    /// The codec must give back every stroke before anything is timed.
    static func check(_ w: Workload) throws {
        var r2 = ByteReader(w.encodedV2)
        var context = StrokeCodecV2.Context.chunkWithPredictors
        for (i, s) in w.strokes.enumerated() {
            if i % 64 == 0 { context = StrokeCodecV2.Context.chunkWithPredictors }
            guard try StrokeCodecV2.decodePoints(&r2, width: w.widths[i], context: &context) == s else {
                throw LnoteError(.invalidState, "\(w.name): the version-2 codec does not give back stroke \(i)")
            }
        }
        for (s, b) in zip(w.strokes, w.encoded) {
            var r = ByteReader(b)
            guard try StrokeCodec.decodePoints(&r) == s else {
                throw LnoteError(.invalidState, "\(w.name): the codec does not give back a stroke of \(s.count) points")
            }
        }
    }

    static func run(_ options: BenchOptions) -> Int32 {
        if isDebugBuild { progress("warning: debug build; measure with -c release") }
        do {
            let runs = options.runs
            print("Point codec, median of \(runs) interleaved runs (ns per point; MB/s of encoded bytes)")
            print("Point stream version 2 with grids and predictors (format-4 snapshots); v1 rows: section 3's stream (operation frames, version-1 snapshots)")
            print("| workload | points | bytes/pt | path | naive 16 B/pt ns/pt | lnote ns/pt | lnote / naive | lnote MB/s |")
            print("|---|---|---|---|---|---|---|---|")
            for w in try workloads(options) {
                try check(w)
                let kinds: [Kind] = [.naiveEncode, .encode, .naiveDecode, .decode, .encodeV1, .decodeV1]
                var times = [[Double]](repeating: [], count: kinds.count)
                let clock = ContinuousClock()
                var checksum = 0
                for round in 0..<(runs + 1) {
                    for j in 0..<kinds.count {
                        let i = (j + round) % kinds.count
                        let start = clock.now
                        checksum &+= try pass(kinds[i], w)
                        let t = seconds(clock.now - start)
                        if round > 0 { times[i].append(t) }
                    }
                }
                let ns = times.map { Timing.median($0) * 1e9 / Double(w.points) }
                let perPointV2 = Double(w.bytes) / Double(w.points), perPointV1 = Double(w.bytesV1) / Double(w.points)
                for (path, naive, lnote, perPoint) in [("encode", ns[0], ns[1], perPointV2), ("decode", ns[2], ns[3], perPointV2),
                                                       ("encode v1", ns[0], ns[4], perPointV1), ("decode v1", ns[2], ns[5], perPointV1)] {
                    let mbs = perPoint / lnote * 1e3
                    print("| \(w.name) | \(w.points) | \(String(format: "%.3f", perPoint)) | \(path) | "
                          + "\(String(format: "%.2f", naive)) | \(String(format: "%.2f", lnote)) | "
                          + "\(String(format: "%.2f", lnote / naive)) | \(String(format: "%.0f", mbs)) |")
                }
                if checksum == 42 { print("") }
            }
            return 0
        } catch {
            progress("\(error)")
            return 1
        }
    }

    /// `spec` is `KIND` or `KIND:2` / `KIND:4` (one workload only).
    static func loop(_ spec: String, _ options: BenchOptions) -> Int32 {
        let parts = spec.split(separator: ":").map(String.init)
        let only = parts.count == 2 ? Int(parts[1]) : nil
        guard let kind = Kind(rawValue: parts[0]), parts.count == 1 || only == 2 || only == 4 else {
            progress("--codec-loop takes KIND or KIND:2 or KIND:4, KIND one of: \(Kind.allCases.map(\.rawValue).joined(separator: ", "))")
            return 2
        }
        do {
            for w in try workloads(options, only: only) {
                var checksum = 0
                for _ in 0..<options.runs { checksum &+= try pass(kind, w) }
                print("\(w.name): \(kind.rawValue) \(options.runs) × \(w.points) points = \(options.runs * w.points) (checksum \(checksum))")
            }
            return 0
        } catch {
            progress("\(error)")
            return 1
        }
    }
}
