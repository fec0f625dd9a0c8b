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
/// (KIND: encode, decode, naive-encode, naive-decode; `:2` or `:4` keeps one workload). Instructions per point are the
/// collected total over `points × runs`, both printed.
enum CodecBench {
    struct Workload {
        let name: String
        let strokes: [[StrokePoint]]
        let encoded: [[UInt8]]
        let naive: [[UInt8]]
        let points: Int
        let bytes: Int

        init(_ name: String, _ strokes: [Stroke]) {
            self.name = name
            self.strokes = strokes.map(\.points)
            encoded = self.strokes.map { StrokeCodec.encodedPoints($0) }
            naive = self.strokes.map { Naive.encode($0) }
            points = self.strokes.reduce(0) { $0 + $1.count }
            bytes = encoded.reduce(0) { $0 + $1.count }
        }
    }

    enum Kind: String, CaseIterable {
        case encode, decode, naiveEncode = "naive-encode", naiveDecode = "naive-decode"
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
            for s in w.strokes { sum &+= StrokeCodec.encodedPoints(s).count }
        case .naiveEncode:
            for s in w.strokes { sum &+= Naive.encode(s).count }
        case .decode:
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
            print("| workload | points | bytes/pt | path | naive 16 B/pt ns/pt | lnote ns/pt | lnote / naive | lnote MB/s |")
            print("|---|---|---|---|---|---|---|---|")
            for w in try workloads(options) {
                try check(w)
                let kinds: [Kind] = [.naiveEncode, .encode, .naiveDecode, .decode]
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
                let perPoint = Double(w.bytes) / Double(w.points)
                for (path, naive, lnote) in [("encode", ns[0], ns[1]), ("decode", ns[2], ns[3])] {
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
