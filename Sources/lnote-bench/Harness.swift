import Foundation

/// One thing to time: an untimed `setup` before each run, then the timed `body`.
struct Variant {
    let name: String
    var setup: () async throws -> Void = {}
    let body: () async throws -> Void
}

/// The timed runs of one variant.
struct Timing: Sendable {
    var name: String
    var runs: [Double]
    /// CPU time of the whole process (every thread) over each timed run: what the work
    /// costs whatever the scheduler did meanwhile, and what parallel halves add up to.
    var cpu: [Double] = []
    var median: Double { Self.median(runs) }
    var cpuMedian: Double { Self.median(cpu) }

    static func median(_ xs: [Double]) -> Double {
        guard !xs.isEmpty else { return .nan }
        let s = xs.sorted()
        return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
    }
}

/// Times variants against each other on a shared, noisy machine.
///
/// Runs are interleaved (A B C, B C A, C A B, …: the order rotates each round so that no
/// variant always runs right after another's cache or fsync traffic), one warm-up round is
/// discarded, and each variant's figure is the median of its `runs` timed runs. Comparisons
/// are ratios of medians taken in the same interleaved loop.
@MainActor
func measure(_ variants: [Variant], runs: Int, warmup: Int = 1) async throws -> [Timing] {
    var out = variants.map { Timing(name: $0.name, runs: []) }
    let clock = ContinuousClock()
    for round in 0..<(warmup + runs) {
        for k in 0..<variants.count {
            let i = (k + round) % variants.count
            try await variants[i].setup()
            let cpuStart = processCPUTime()
            let start = clock.now
            try await variants[i].body()
            let elapsed = clock.now - start
            let cpu = processCPUTime() - cpuStart
            if round >= warmup {
                out[i].runs.append(seconds(elapsed))
                out[i].cpu.append(cpu)
            }
        }
    }
    return out
}

/// Seconds of CPU the process has used, all threads together (`CLOCK_PROCESS_CPUTIME_ID`).
func processCPUTime() -> Double {
    var t = timespec()
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t)
    return Double(t.tv_sec) + Double(t.tv_nsec) * 1e-9
}

func seconds(_ d: Duration) -> Double {
    let (s, a) = d.components
    return Double(s) + Double(a) * 1e-18
}

/// Prints progress to standard error (the table goes to standard output).
func progress(_ s: String) {
    FileHandle.standardError.write(Data(("lnote-bench: " + s + "\n").utf8))
}

#if DEBUG
let isDebugBuild = true
#else
let isDebugBuild = false
#endif
