import CLnoteSyscalls
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
    /// Writes bytes to stdout as they are: whole lines of printable ASCII only (`PointText`).
    func rawBytes(_ b: [UInt8]) { stdout.write(bytes: b) }
    /// Writes out what stdout holds.
    func flush() { stdout.flush() }
    /// True when stderr is a terminal (progress lines are drawn only then).
    var isTerminal: Bool { isatty(2) == 1 }
    /// Rewrites the current terminal line (progress).
    /// Cut to the terminal's width (one column spare): a line that wrapped would leave its
    /// first part behind at every redraw, since `\r` only returns to the last row.
    func progress(_ s: String) {
        guard isTerminal else { return }
        toStderr("\r\u{1B}[K\(Self.fitted(PrintableText.escaped(s), columns: Int(lnote_terminal_columns(2))))")
    }
    /// `s` in at most `columns - 1` characters, its end replaced by "…" when cut; as it is
    /// when the width is unknown (0). Every character the progress line uses is one column wide.
    static func fitted(_ s: String, columns: Int) -> String {
        guard columns > 1, s.count > columns - 1 else { return s }
        return columns > 2 ? String(s.prefix(columns - 2)) + "…" : String(s.prefix(1))
    }
    func endProgress() {
        guard isTerminal else { return }
        toStderr("\r\u{1B}[K")
    }
    /// Stderr is not buffered; stdout's lines made before go out first.
    private func toStderr(_ s: String) {
        stdout.flush()
        // A message that cannot be written (stderr on a full disk) is dropped: nowhere to say so.
        _ = StandardOutput.writeAll(Array(s.utf8), to: STDERR_FILENO)
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

    /// The help text, every line at most 80 columns: the synopsis wrapped keeping each
    /// bracketed group whole, the details reflowed (`Command.reflow`).
    var help: String {
        var lines = Command.wrap("usage: \(synopsis)", hang: 7, groups: true) + [""] + Command.wrap(summary)
        if !details.isEmpty { lines += [""] + Command.reflow(details) }
        return lines.joined(separator: "\n") + "\n"
    }

    /// Text as lines of at most `width` columns. A paragraph is a run of lines at one
    /// indentation: a line joins the one before unless that one ends a sentence or a list
    /// item (`.`, `:`). An option's description (`--name  text`, or `--name VALUE text` whose
    /// next line is indented under the text) is a paragraph whose lines hang under its
    /// text. A line indented deeper than its paragraph (a table, an example) is kept as
    /// written, wrapped only when too long.
    static func reflow(_ text: String, width: Int = 80) -> [String] {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        func indentOf(_ l: String) -> Int { l.prefix { $0 == " " }.count }
        var out: [String] = []
        var paragraph: [String] = []
        var lead = 0, hang = 0
        func flush() {
            guard !paragraph.isEmpty else { return }
            // An option's name column is kept as written; the rest is wrapped under it.
            let head = hang > lead ? String(paragraph[0].prefix(hang - lead)) : ""
            paragraph[0] = String(paragraph[0].dropFirst(head.count))
            var wrapped = wrap(String(repeating: " ", count: lead + head.count) + paragraph.joined(separator: " "),
                               width: width, hang: hang)
            wrapped[0] = String(repeating: " ", count: lead) + head + wrapped[0].dropFirst(lead + head.count)
            out += wrapped
            paragraph = []
        }
        for (k, line) in lines.enumerated() {
            let indent = indentOf(line)
            let body = line.dropFirst(indent)
            if body.isEmpty { flush(); out.append(""); continue }
            let next = k + 1 < lines.count ? lines[k + 1] : ""
            let nextIndent = next.allSatisfy { $0 == " " } ? -1 : indentOf(next)
            // Where an option's text starts: after two spaces, or where its next line starts.
            var textColumn: Int?
            if body.hasPrefix("-") {
                if let gap = body.range(of: "  "), body.distance(from: body.startIndex, to: gap.lowerBound) < 28 {
                    let chars = Array(body)
                    var i = body.distance(from: body.startIndex, to: gap.lowerBound)
                    while i < chars.count && chars[i] == " " { i += 1 }
                    textColumn = indent + i
                } else if nextIndent > indent, nextIndent - indent < 28 {
                    textColumn = nextIndent
                }
            }
            let previous = paragraph.last ?? ""
            let ended = previous.hasSuffix(".") || previous.hasSuffix(":")
            if textColumn == nil, !paragraph.isEmpty, !ended, indent == hang {
                paragraph.append(String(body))
            } else if textColumn == nil, indent > (paragraph.isEmpty ? lead : hang), !out.isEmpty || !paragraph.isEmpty {
                // Deeper than the text around it: kept as written.
                flush()
                out += wrap(line, width: width)
            } else {
                flush()
                lead = indent
                hang = textColumn ?? indent
                paragraph = [String(body)]
            }
        }
        flush()
        while out.last == "" { out.removeLast() }
        return out
    }

    /// `line` in lines of at most `width` columns, broken at spaces; continuation lines
    /// indented by `hang` (default: the line's own indentation). A word longer than the
    /// width stays whole. With `groups`, spaces inside `[…]`, `(…)` and `{…}` do not break.
    static func wrap(_ line: String, width: Int = 80, hang: Int? = nil, groups: Bool = false) -> [String] {
        let chars = Array(line)
        let lead = chars.prefix { $0 == " " }.count
        guard chars.count > width else { return [line] }
        var words: [String] = []
        var current = ""
        var depth = 0
        for c in chars.dropFirst(lead) {
            if groups { if "[({".contains(c) { depth += 1 } else if "])}".contains(c) { depth = max(0, depth - 1) } }
            if c == " " && depth == 0 {
                if !current.isEmpty { words.append(current) }
                current = ""
            } else {
                current.append(c)
            }
        }
        if !current.isEmpty { words.append(current) }
        let indent = String(repeating: " ", count: hang ?? lead)
        var out: [String] = []
        var row = String(repeating: " ", count: lead)
        var rowHasWord = false
        for w in words {
            if rowHasWord && row.count + 1 + w.count > width {
                out.append(row)
                row = indent
                rowHasWord = false
            }
            row += (rowHasWord ? " " : "") + w
            rowHasWord = true
        }
        out.append(row)
        return out
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
