import Foundation
import LnoteModel

/// Where a command writes: results on stdout, diagnostics on stderr.
///
/// Every human-readable line goes through `PrintableText.escaped`: titles, device names,
/// server messages and paths may come from another machine, and a control character in
/// them (an escape sequence, a newline, a bidi override) would reach the terminal as a
/// command or fake a line. `out` and `err` write exactly one line each: a newline in `s` is
/// printed as `\n`. Text of the program's own with several lines (help) goes through
/// `outLines`/`errLines`. `raw` is for JSON, whose encoder escapes control characters.
struct Console: Sendable {
    /// Standard output's buffer (`StandardOutput`): flushed before anything goes to stderr
    /// and when the command ends.
    var stdout: StandardOutput { .shared }
    /// One line on stdout, every control character in it escaped.
    func out(_ s: String) { stdout.write(PrintableText.escaped(s) + "\n") }
    /// One line on stderr, every control character in it escaped.
    func err(_ s: String) { toStderr(PrintableText.escaped(s) + "\n") }
    /// Lines of the program's own text (help, usage) on stdout: split at its newlines, each
    /// line escaped like `out`.
    func outLines(_ s: String) { stdout.write(Self.lines(s) + "\n") }
    /// `outLines` on stderr.
    func errLines(_ s: String) { toStderr(Self.lines(s) + "\n") }
    static func lines(_ s: String) -> String {
        s.split(separator: "\n", omittingEmptySubsequences: false).map { PrintableText.escaped(String($0)) }.joined(separator: "\n")
    }
    /// Writes `s` to stdout as is: JSON only (canonical JSON already ends with its newline).
    func raw(_ s: String) { stdout.write(s) }
    /// Writes out what stdout holds.
    func flush() { stdout.flush() }
    /// True when stderr is a terminal (progress lines are drawn only then).
    var isTerminal: Bool { isatty(2) == 1 }
    /// Rewrites the current terminal line (progress).
    func progress(_ s: String) {
        guard isTerminal else { return }
        toStderr("\r\u{1B}[K\(PrintableText.escaped(s))")
    }
    func endProgress() {
        guard isTerminal else { return }
        toStderr("\r\u{1B}[K")
    }
    /// Stderr is not buffered; stdout's lines made before go out first.
    private func toStderr(_ s: String) {
        stdout.flush()
        FileHandle.standardError.write(Data(s.utf8))
    }
}

/// One CLI command: its synopsis, its help, the options it accepts, and what it does.
/// Commands only parse, call the library, and print.
struct Command: Sendable {
    var name: String
    var synopsis: String
    var summary: String
    var details: String = ""
    var options: Set<String> = []
    var flags: Set<String> = []
    var run: @Sendable (Arguments, Console) async throws -> Int32

    var help: String {
        var s = "usage: \(synopsis)\n\n\(summary)\n"
        if !details.isEmpty { s += "\n\(details)\n" }
        return s
    }
}

/// Exit codes: 0 success, 1 failure (including a malformed import file), 2 bad usage
/// (and, for `replay`, a malformed scenario file).
enum Exit {
    static let ok: Int32 = 0
    static let failure: Int32 = 1
    static let usage: Int32 = 2
    /// Done, but something needs a person: a fork, an operation quarantined ([SYNC-56]).
    static let attention: Int32 = 3
}

/// A failure the command explains itself (already specific), printed as one line.
struct CLIError: Error, CustomStringConvertible {
    var description: String
    var code: Int32 = Exit.failure
    init(_ d: String, code: Int32 = Exit.failure) {
        description = d
        self.code = code
    }
}
