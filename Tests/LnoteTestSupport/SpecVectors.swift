import Foundation

/// Test vectors read straight out of `Protocol/`, so that the spec and the code cannot drift:
/// a fenced block that follows `<!-- vector: NAME -->` in a spec file.
public enum SpecVectors {
    /// The package's root directory (this file is `Tests/LnoteTestSupport/SpecVectors.swift`).
    public static let packageRoot: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    public struct Missing: Error, CustomStringConvertible {
        public var description: String
    }

    /// The text of the fenced block after `<!-- vector: NAME -->` in `Protocol/<file>`.
    public static func text(_ name: String, in file: String) throws -> String {
        let url = packageRoot.appendingPathComponent("Protocol/\(file)")
        let text = try String(contentsOf: url, encoding: .utf8)
        guard let marker = text.range(of: "<!-- vector: \(name) -->"),
              let open = text.range(of: "```", range: marker.upperBound..<text.endIndex),
              let lineEnd = text.range(of: "\n", range: open.upperBound..<text.endIndex),
              let close = text.range(of: "```", range: lineEnd.upperBound..<text.endIndex) else {
            throw Missing(description: "vector \(name) is not in Protocol/\(file)")
        }
        return String(text[lineEnd.upperBound..<close.lowerBound])
    }

    /// The bytes of a hex vector (see `parseHex`).
    public static func bytes(_ name: String, in file: String) throws -> [UInt8] {
        guard let b = parseHex(try text(name, in: file)) else {
            throw Missing(description: "vector \(name) in Protocol/\(file) is not hex")
        }
        return b
    }

    /// Parses hex digits, ignoring whitespace, `0000:`-style offset prefixes on each line and
    /// everything after two spaces following the digits (a comment: `28000000 04   length`).
    public static func parseHex(_ text: String) -> [UInt8]? {
        var out: [UInt8] = []
        for rawLine in text.split(separator: "\n") {
            var line = Substring(rawLine)
            if let colon = line.firstIndex(of: ":"), line[..<colon].allSatisfy(\.isHexDigit) {
                line = line[line.index(after: colon)...]
            }
            line = line.drop { $0 == " " }
            if let comment = line.range(of: "   ") { line = line[..<comment.lowerBound] }
            var digits: [UInt8] = []
            for c in line.utf8 where c != 0x20 && c != 0x09 && c != 0x0D { digits.append(c) }
            guard digits.count % 2 == 0 else { return nil }
            var i = 0
            while i < digits.count {
                guard let b = UInt8(String(decoding: digits[i..<i + 2], as: UTF8.self), radix: 16) else { return nil }
                out.append(b)
                i += 2
            }
        }
        return out
    }

    /// 16 bytes per line, each line prefixed by its offset (`0010: …`).
    public static func hexDump(_ bytes: [UInt8]) -> String {
        var lines: [String] = []
        var at = 0
        while at < bytes.count {
            let chunk = bytes[at..<min(at + 16, bytes.count)]
            let off = String(at, radix: 16)
            lines.append(String(repeating: "0", count: max(0, 4 - off.count)) + off + ": "
                + chunk.map { b in (b < 16 ? "0" : "") + String(b, radix: 16) }.joined(separator: " "))
            at += 16
        }
        return lines.joined(separator: "\n")
    }
}
