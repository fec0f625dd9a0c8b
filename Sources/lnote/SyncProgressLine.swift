import Foundation
import Synchronization
import LnoteSync

/// The progress of `lnote sync` on stderr: bytes as an answer arrives (libcurl's transfer
/// progress), then documents as they are installed from checkpoints or stored.
///
/// On a terminal, one line redrawn at most 10 times a second (and at each change of step).
/// Elsewhere (`--progress` with stderr not a terminal: a log, a test), one line per step and
/// per tenth of a step (bytes of an answer whose length is known, else every MiB; documents),
/// so a log shows it moving without a line per callback.
final class SyncProgressLine: Sendable {
    enum Mode: Sendable { case terminal, lines }

    private struct State {
        var lastText = ""
        var lastStep = ""
        var lastMark = -1
        var lastDraw: ContinuousClock.Instant?
        var ended = false
    }

    let mode: Mode
    let console: Console
    private let state = Mutex(State())

    init(console: Console, mode: Mode) {
        self.console = console
        self.mode = mode
    }

    /// Told by the sync session, from its task or the transfer's thread.
    func tell(_ p: SyncProgress) {
        if p.phase == .done {
            end()
            return
        }
        let (step, text, mark, complete) = Self.describe(p)
        state.withLock { s in
            guard !s.ended, text != s.lastText else { return }
            let now = ContinuousClock.now
            switch mode {
            case .terminal:
                let due = s.lastDraw.map { now - $0 >= .milliseconds(100) } ?? true
                guard step != s.lastStep || complete || due else { return }
                console.progress(text)
            case .lines:
                guard step != s.lastStep || mark != s.lastMark else { return }
                console.err(text)
            }
            s.lastText = text
            s.lastStep = step
            s.lastMark = mark
            s.lastDraw = now
        }
    }

    /// Clears the terminal's line (the summary follows on stdout).
    func end() {
        state.withLock { s in
            guard !s.ended else { return }
            s.ended = true
            if mode == .terminal { console.endProgress() }
        }
    }

    /// The line for `p`: its step (a change of step always prints), its text, which tenth
    /// (or MiB) of the step it is at, and whether the step is complete.
    static func describe(_ p: SyncProgress) -> (step: String, text: String, mark: Int, complete: Bool) {
        let traffic = "↑ \(grouped(p.bytesSent)) ↓ \(grouped(p.bytesReceived)) bytes"
        if p.receiving > 0 || p.receivingTotal > 0 {
            let of = p.receivingTotal > 0 ? " of \(grouped(p.receivingTotal))" : ""
            let mark = p.receivingTotal > 0 ? p.receiving * 10 / p.receivingTotal : p.receiving >> 20
            return ("\(p.phase.rawValue) receiving", "sync: receiving \(grouped(p.receiving))\(of) bytes (\(traffic))",
                    mark, p.receivingTotal > 0 && p.receiving >= p.receivingTotal)
        }
        if p.documentsTotal > 0 {
            let verb = p.phase == .installingCheckpoints ? "installing from checkpoints" : "storing"
            var text = "sync: \(verb) \(grouped(p.documentsDone)) of \(SyncRunner.count(p.documentsTotal, "document"))"
            if p.phase == .installingCheckpoints {
                text += " (\(grouped(p.opsFromCheckpoints)) operations)"
            } else {
                text += " (\(SyncRunner.count(p.opsReceived, "operation")) received)"
            }
            return (p.phase.rawValue, text, p.documentsDone * 10 / p.documentsTotal, p.documentsDone >= p.documentsTotal)
        }
        let words: String
        switch p.phase {
        case .comparing: words = "comparing"
        case .fetchingCheckpoints: words = "fetching checkpoints"
        case .installingCheckpoints: words = "installing from checkpoints"
        case .uploadingAssets: words = "sending images"
        case .exchanging: words = "exchanging operations"
        case .downloadingAssets: words = "fetching images"
        case .applying: words = "storing"
        case .done: words = "done"
        }
        return (p.phase.rawValue, "sync: \(words) (\(traffic))", 0, false)
    }

    /// `7979` as `7,979`.
    static func grouped(_ n: Int) -> String {
        let digits = String(n.magnitude)
        var out = ""
        for (i, c) in digits.enumerated() {
            if i > 0 && (digits.count - i) % 3 == 0 { out.append(",") }
            out.append(c)
        }
        return (n < 0 ? "-" : "") + out
    }
}
