import Foundation
import CLnoteZlib
import LnoteSQLite
import LnoteModel

/// What a figure measures.
enum Unit: String, Codable, Sendable {
    case seconds, bytes, bytesPerPoint, count, opsPerSecond, nanosecondsPerPoint

    func format(_ v: Double) -> String {
        switch self {
        case .seconds: formatSeconds(v)
        case .bytes: formatBytes(v)
        case .bytesPerPoint: String(format: "%.2f B/pt", v)
        case .count: v == v.rounded() ? String(Int(v)) : String(format: "%.1f", v)
        case .opsPerSecond: formatCount(Int(v.rounded())) + " ops/s"
        case .nanosecondsPerPoint: String(format: "%.1f ns/pt", v)
        }
    }
}

/// A target from the issue, checked on one row.
enum Target: Sendable {
    /// `measured / baseline ≤ x`.
    case ratioAtMost(Double)
    /// `measured ≤ x` (in the row's unit).
    case valueAtMost(Double, String)
    /// A condition computed by the case, with its wording.
    case condition(String, Bool)
    /// No target: the figure is reported.
    case report

    var text: String {
        switch self {
        case .ratioAtMost(let x): "ratio ≤ \(formatRatio(x))"
        case .valueAtMost(_, let s): s
        case .condition(let s, _): s
        case .report: "report"
        }
    }
}

/// One line of the table (and one object of the JSON).
struct Row: Codable, Sendable {
    var caseNumber: Int
    /// What is measured, e.g. "journal append, 100 × 3,400 pts".
    var title: String
    var measured: Double
    var unit: Unit
    var baselineName: String
    var baseline: Double?
    /// measured ÷ baseline.
    var ratio: Double?
    var target: String
    /// nil: nothing to check (the figure is reported).
    var holds: Bool?
    var note: String?
    /// The timed runs (seconds), when the figure is a median of runs.
    var measuredRuns: [Double]?
    var baselineRuns: [Double]?

    init(_ caseNumber: Int, _ title: String, measured: Double, unit: Unit, baselineName: String, baseline: Double?,
         target: Target, note: String? = nil, measuredRuns: [Double]? = nil, baselineRuns: [Double]? = nil) {
        self.caseNumber = caseNumber
        self.title = title
        self.measured = measured
        self.unit = unit
        self.baselineName = baselineName
        self.baseline = baseline
        self.ratio = baseline.flatMap { $0 > 0 ? measured / $0 : nil }
        self.target = target.text
        switch target {
        case .ratioAtMost(let x): holds = ratio.map { $0 <= x }
        case .valueAtMost(let x, _): holds = measured <= x
        case .condition(_, let ok): holds = ok
        case .report: holds = nil
        }
        self.note = note
        self.measuredRuns = measuredRuns
        self.baselineRuns = baselineRuns
    }
}

/// A case that could not run (with why), so that the table says so rather than hiding it.
struct Skipped: Codable, Sendable {
    var caseNumber: Int
    var reason: String
}

/// Where and how the figures were taken.
struct MachineInfo: Codable, Sendable {
    var date: String
    var command: String
    var processors: Int
    var cpu: String
    var kernel: String
    var memory: String
    var filesystem: String
    /// Median fdatasync of a 300-byte append in the work directory, seconds.
    var fdatasync: Double = 0
    var loadAverageBefore: String
    var loadAverageAfter: String
    var build: String
    var libraries: String
    var runs: Int
    var quick: Bool
    var seed: UInt64
    var strokes: String

    static func collect(options: BenchOptions, workDir: String) -> MachineInfo {
        let cpuinfo = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
        let model = cpuinfo.split(separator: "\n").first { $0.hasPrefix("model name") }
            .map { $0.split(separator: ":", maxSplits: 1).last.map { $0.trimmingCharacters(in: .whitespaces) } ?? "" } ?? "unknown"
        let mem = ((try? String(contentsOfFile: "/proc/meminfo", encoding: .utf8)) ?? "").split(separator: "\n")
            .first { $0.hasPrefix("MemTotal") }.map { String($0.dropFirst("MemTotal:".count)).trimmingCharacters(in: .whitespaces) } ?? "unknown"
        var u = utsname()
        uname(&u)
        func field<T>(_ t: T) -> String {
            withUnsafeBytes(of: t) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        }
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime]
        return MachineInfo(
            date: f.string(from: Date()),
            command: CommandLine.arguments.joined(separator: " "),
            processors: ProcessInfo.processInfo.activeProcessorCount,
            cpu: model,
            kernel: "\(field(u.sysname)) \(field(u.release)) \(field(u.machine))",
            memory: mem,
            filesystem: filesystemDescription(workDir),
            loadAverageBefore: loadAverage(),
            loadAverageAfter: "",
            build: isDebugBuild ? "debug (figures are not representative: use -c release)" : "release",
            libraries: "SQLite \(SQLiteDatabase.libraryVersion), zlib \(String(cString: zlibVersion())); CRC-32C: "
                + (CRC32C.usesHardware ? "the processor's CRC32 instruction" : "table (no CRC32 instruction)"),
            runs: options.runs,
            quick: options.quick,
            seed: options.seed,
            strokes: options.strokesPath ?? "generated (HandwritingGenerator: smooth, 240 Hz, 20-400 points per stroke; "
                + "and pen, 60-240 Hz on a digitizer grid, median ~15 points per stroke, ~40 % of strokes without time or pressure)")
    }

    static func loadAverage() -> String {
        ((try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8)) ?? "")
            .split(separator: " ").prefix(3).joined(separator: " ")
    }

    /// The device and filesystem type holding `path`, from /proc/self/mounts (longest mount prefix).
    static func filesystemDescription(_ path: String) -> String {
        let mounts = ((try? String(contentsOfFile: "/proc/self/mounts", encoding: .utf8)) ?? "").split(separator: "\n")
        var best: (len: Int, text: String) = (-1, "unknown")
        for m in mounts {
            let f = m.split(separator: " ")
            guard f.count >= 3 else { continue }
            let point = String(f[1])
            let prefix = point == "/" ? "/" : point + "/"
            if (path == point || path.hasPrefix(prefix)) && point.count > best.len {
                best = (point.count, "\(f[2]) on \(f[0]) (mounted at \(point))")
            }
        }
        return best.text
    }
}

/// Everything one run produced.
struct Results: Codable, Sendable {
    var machine: MachineInfo
    var rows: [Row] = []
    var skipped: [Skipped] = []
    var notes: [String] = []
}

// MARK: - Formatting

func formatSeconds(_ s: Double) -> String {
    if s >= 1 { return String(format: "%.2f s", s) }
    if s >= 1e-3 { return String(format: s >= 0.1 ? "%.0f ms" : s >= 0.01 ? "%.1f ms" : "%.2f ms", s * 1e3) }
    return String(format: s >= 1e-4 ? "%.0f µs" : "%.1f µs", s * 1e6)
}

func formatBytes(_ b: Double) -> String {
    if b >= 10 * 1024 * 1024 { return String(format: "%.1f MiB", b / 1048576) }
    if b >= 10 * 1024 { return String(format: "%.1f KiB", b / 1024) }
    return "\(Int(b.rounded())) B"
}

func formatRatio(_ r: Double) -> String {
    if r == 0 { return "0" }
    if r >= 100 { return String(format: "%.0f", r) }
    if r >= 10 { return String(format: "%.1f", r) }
    if r >= 0.1 { return String(format: "%.2f", r) }
    if r >= 0.001 { return String(format: "%.4f", r) }
    return String(format: "%.2e", r)
}

func formatCount(_ n: Int) -> String {
    let s = String(n)
    var out = ""
    for (i, c) in s.reversed().enumerated() {
        if i > 0 && i % 3 == 0 { out.append(",") }
        out.append(c)
    }
    return String(out.reversed())
}

extension Results {
    /// The table as Markdown (printed, and pasted into BENCHMARKS.md).
    func markdownTable() -> String {
        var lines = ["| case | measure | measured | baseline (same run) | ratio | target | holds |",
                     "|---|---|---|---|---|---|---|"]
        for r in rows {
            let baseline = r.baseline.map { "\(r.baselineName): \(r.unit.format($0))" } ?? r.baselineName
            let holds = r.holds.map { $0 ? "yes" : "**no**" } ?? "n/a"
            lines.append("| \(r.caseNumber) | \(r.title) | \(r.unit.format(r.measured)) | \(baseline) | "
                + "\(r.ratio.map(formatRatio) ?? "—") | \(r.target) | \(holds) |")
        }
        for s in skipped {
            lines.append("| \(s.caseNumber) | skipped: \(s.reason) | — | — | — | — | **no** |")
        }
        return lines.joined(separator: "\n")
    }

    func noteLines() -> [String] {
        var out: [String] = []
        for r in rows where r.note != nil { out.append("- (\(r.caseNumber)) \(r.title): \(r.note!)") }
        for n in notes { out.append("- \(n)") }
        return out
    }

    func machineLines() -> [String] {
        let m = machine
        return ["- date: \(m.date)",
                "- command: `\(m.command)`",
                "- build: \(m.build); \(m.runs) timed runs per figure after 1 warm-up (median)\(m.quick ? "; --quick" : "")",
                "- libraries: \(m.libraries)",
                "- CPU: \(m.cpu), \(m.processors) processors (nproc); memory \(m.memory)",
                "- kernel: \(m.kernel)",
                "- work directory filesystem: \(m.filesystem); fdatasync of a 300 B append: \(formatSeconds(m.fdatasync)) (median of 50)",
                "- load average (1, 5, 15 min) before: \(m.loadAverageBefore); after: \(m.loadAverageAfter)",
                "- strokes: \(m.strokes); seed \(m.seed)"]
    }

    func writeJSON(to path: String) throws {
        let e = JSONEncoder()
        e.outputFormatting = [.prettyPrinted, .sortedKeys]
        e.nonConformingFloatEncodingStrategy = .convertToString(positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        let data = try e.encode(self)
        try data.write(to: URL(fileURLWithPath: path))
    }
}
