import Foundation

/// One row of RELIABILITY.md's evidence: a family of fault, abuse or convergence cases a test
/// tried, and how many of them ended badly. Tests call `ReliabilityReport.record` once per
/// family they exercise; when `LNOTE_REPORT_DIR` is set (scripts/reliability.sh and CI set
/// it), each call appends one JSON line to `$LNOTE_REPORT_DIR/rows.jsonl`, and the script sums
/// the lines per family. Without the variable it does nothing. The counts must come from what
/// the test checked: a case counted as fine is one whose outcome the test asserted.
public enum ReliabilityReport {
    /// - Parameters:
    ///   - family: the row, e.g. "every-byte cuts", "bit flips", "syscall faults", "sigkill rounds",
    ///     "convergence seeds", "abuse", "load with restarts".
    ///   - detail: which test, for the report's footnotes.
    ///   - cases: cases tried.
    ///   - lost: cases where acknowledged data was missing afterwards.
    ///   - corrupted: cases where a file or state could not be explained by the operations given.
    ///   - crashed: cases where a process crashed (a signal, a trap).
    ///   - hung: cases that did not finish within their bound.
    public static func record(family: String, detail: String, cases: Int, lost: Int = 0, corrupted: Int = 0,
                              crashed: Int = 0, hung: Int = 0) {
        guard let dir = ProcessInfo.processInfo.environment["LNOTE_REPORT_DIR"], !dir.isEmpty else { return }
        let row: [String: Any] = ["family": family, "detail": detail, "cases": cases, "lost": lost,
                                  "corrupted": corrupted, "crashed": crashed, "hung": hung]
        guard var line = try? JSONSerialization.data(withJSONObject: row, options: [.sortedKeys]) else { return }
        line.append(0x0A)
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let path = dir + "/rows.jsonl"
        // O_APPEND: lines from concurrent tests and processes never interleave (each is one write).
        let fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        guard fd >= 0 else { return }
        defer { close(fd) }
        _ = line.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    }
}
