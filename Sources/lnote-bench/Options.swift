import Foundation
import LnoteModel

struct HelpRequested: Error {}

/// The benchmark's command line.
///
///     lnote-bench [--quick] [--runs N] [--only N[,M…]] [--json FILE] [--strokes FILE.jsonl] [--seed N]
///     lnote-bench --codec [--runs N] [--seed N]
///     lnote-bench --codec-loop KIND[:2|:4] [--runs N]
///     lnote-bench --child open-page NOTEBOOK DOCUMENT PAGE WARM-DOCUMENT WARM-PAGE   (internal)
struct BenchOptions: Sendable {
    /// Fewer runs and smaller setups: a smoke test that finishes in well under a minute.
    var quick = false
    /// Timed runs per measurement (after one warm-up run); the median is reported.
    var runs = 9
    var only: Set<Int>? = nil
    var jsonPath: String? = nil
    var strokesPath: String? = nil
    var seed: UInt64 = 0x1A0E_2024
    /// `--child …`: the arguments after `--child`.
    var child: [String]? = nil
    /// `--codec`: time the point codec alone (see CodecBench.swift).
    var codec = false
    /// `--codec-loop KIND[:CASE]`: run one codec path untimed, for valgrind.
    var codecLoop: String? = nil
    /// `--open-loop PROFILE`: open case 4's page (or `erased`: case 13's) untimed, for perf.
    var openLoop: String? = nil

    static let usage = """
        usage: lnote-bench [--quick] [--runs N] [--only N[,M...]] [--json FILE] [--strokes FILE.jsonl] [--seed N]

          --quick            fewer runs and smaller sizes (a smoke test, under a minute)
          --runs N           timed runs per measurement after one warm-up (default 9; 3 with --quick)
          --only N[,M...]    run only these cases (1-18)
          --json FILE        also write the figures as JSON to FILE
          --strokes FILE     real strokes, one per line, as lnote import reads them (import-jsonl.md):
                             {"points": [[x, y, t_ms, pressure], ...]}, t and pressure optional;
                             an optional "page" key groups the lines into pages
          --seed N           seed of the handwriting generator (default \(0x1A0E_2024))

        lnote-bench --codec [--runs N]      the point codec alone against the naive 16 B/point encoding, ns/point
                                            on the strokes of cases 2 and 4, both inks (default 21 runs)
        lnote-bench --codec-loop KIND[:2|:4] [--runs N]
                                            run one codec path N times untimed, for valgrind; KIND is
                                            encode, decode, naive-encode or naive-decode
                                            (valgrind --tool=callgrind --toggle-collect='*CodecBench*pass*')
        lnote-bench --open-loop smooth|pen|erased [--runs N]
                                            open case 4's page (erased: case 13's) N times (default 200),
                                            for a profiler:
                                            perf record -g lnote-bench --open-loop pen
                                            (LNOTE_OPEN_ALL=1: with every point decoded)
        """

    static func parse(_ args: [String]) throws -> BenchOptions {
        var o = BenchOptions()
        var runsGiven = false
        var i = 0
        func value(_ name: String) throws -> String {
            i += 1
            guard i < args.count else { throw LnoteError(.invalidArgument, "\(name) needs a value") }
            return args[i]
        }
        while i < args.count {
            let a = args[i]
            switch a {
            case "--quick": o.quick = true
            case "--runs":
                guard let n = Int(try value(a)), n >= 1 else { throw LnoteError(.invalidArgument, "--runs takes a positive integer") }
                o.runs = n
                runsGiven = true
            case "--only":
                let list = try value(a).split(separator: ",").map { Int($0.trimmingCharacters(in: .whitespaces)) }
                guard !list.isEmpty, list.allSatisfy({ $0 != nil && (1...18).contains($0!) }) else {
                    throw LnoteError(.invalidArgument, "--only takes case numbers 1 to 18, comma separated")
                }
                o.only = Set(list.map { $0! })
            case "--json": o.jsonPath = try value(a)
            case "--strokes": o.strokesPath = try value(a)
            case "--seed":
                guard let n = UInt64(try value(a)) else { throw LnoteError(.invalidArgument, "--seed takes an unsigned integer") }
                o.seed = n
            case "--codec": o.codec = true
            case "--codec-loop": o.codecLoop = try value(a)
            case "--open-loop": o.openLoop = try value(a)
            case "--child":
                o.child = Array(args[(i + 1)...])
                return o
            case "-h", "--help":
                throw HelpRequested()
            default:
                throw LnoteError(.invalidArgument, "unknown argument \(a)")
            }
            i += 1
        }
        // A figures file that cannot be written is said before the runs, not after them.
        if let path = o.jsonPath {
            let dir = (path as NSString).deletingLastPathComponent
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: dir.isEmpty ? "." : dir, isDirectory: &isDirectory),
                  isDirectory.boolValue else {
                throw LnoteError(.notFound, "--json: the directory \(dir.isEmpty ? "." : dir) does not exist", path: path)
            }
        }
        if o.quick && !runsGiven { o.runs = 3 }
        if o.codec && !runsGiven { o.runs = 21 }
        if o.openLoop != nil && !runsGiven { o.runs = 200 }
        return o
    }

    func runs(_ n: Int) -> Bool { only?.contains(n) ?? true }

    /// `full` normally, `quick` with `--quick`.
    func size<T>(_ full: T, quick q: T) -> T { quick ? q : full }
}
