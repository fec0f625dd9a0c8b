/// Text that another machine chose and that lnote prints (titles, device names): one rule
/// for what may be printed on one line of a terminal or a log, applied wherever such text
/// arrives (operation-log.md [LOG-23], sync-protocol.md [SYNC-57]).
public enum PrintableText {
    /// The first character that would break a line or reach a terminal as a command: C0
    /// controls (tab and newline included), DEL, C1 controls, U+2028 and U+2029.
    public static func controlCharacter(in text: String) -> Unicode.Scalar? {
        text.unicodeScalars.first { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) || $0.value == 0x2028 || $0.value == 0x2029 }
    }

    /// What makes `text` unfit to print as `what`: more than `maxBytes` bytes of UTF-8, or a
    /// control character; nil when it is fit.
    public static func problem(_ text: String, maxBytes: Int, what: String) -> String? {
        guard text.utf8.count <= maxBytes else { return "\(what) of \(text.utf8.count) bytes (at most \(maxBytes))" }
        if let u = controlCharacter(in: text) {
            return "\(what) with the control character U+\(String(u.value, radix: 16, uppercase: true))"
        }
        return nil
    }

    /// [SYNC-57] What makes `name` unfit to name a device: 1 to 128 bytes, printable, no
    /// space at either end; nil when it is fit.
    public static func deviceNameProblem(_ name: String) -> String? {
        guard !name.isEmpty else { return "an empty device name" }
        if let p = problem(name, maxBytes: 128, what: "a device name") { return p }
        guard name.first?.isWhitespace == false, name.last?.isWhitespace == false else {
            return "a device name that starts or ends with a space"
        }
        return nil
    }
}

extension PrintableText {
    /// True for the characters `escaped` writes as escapes: C0 controls, DEL, C1 controls,
    /// U+2028 and U+2029 (they break lines or reach a terminal as commands), and the
    /// bidirectional formatting characters U+061C, U+200E, U+200F, U+202A…U+202E and
    /// U+2066…U+2069 (they reorder what a terminal shows after them, so a line can show text
    /// in another order than it holds).
    public static func needsEscape(_ u: Unicode.Scalar) -> Bool {
        switch u.value {
        case 0..<0x20, 0x7F...0x9F, 0x2028, 0x2029, 0x061C, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069: true
        default: false
        }
    }

    /// `text` made safe to print on one line of a terminal or a log, whoever chose it: each
    /// character `needsEscape` names is written as `\n`, `\r` or `\t` for those three, else
    /// as `\u{XX}` (its code point in upper-case hex, as in Swift source). Everything else,
    /// backslashes included, is kept as is, so ordinary text reads unchanged; text that holds
    /// no such character is returned as it was.
    public static func escaped(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: needsEscape) else { return text }
        var out = String.UnicodeScalarView()
        for u in text.unicodeScalars {
            guard needsEscape(u) else {
                out.append(u)
                continue
            }
            let s: String = switch u {
            case "\n": "\\n"
            case "\r": "\\r"
            case "\t": "\\t"
            default: "\\u{\(String(u.value, radix: 16, uppercase: true))}"
            }
            out.append(contentsOf: s.unicodeScalars)
        }
        return String(out)
    }
}
