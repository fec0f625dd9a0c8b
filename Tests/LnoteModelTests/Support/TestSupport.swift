import Foundation
import Testing
import LnoteModel

/// Seeds for a property test: `count` seeds derived from `base`, or the single seed in
/// `LNOTE_SEED` (decimal or 0x-hex) to replay a failure. Soak runs (`LNOTE_SOAK=1`) use
/// `soakFactor` times as many.
func testSeeds(_ base: UInt64, count: Int, soakFactor: Int = 20) -> [UInt64] {
    let env = ProcessInfo.processInfo.environment
    if let s = env["LNOTE_SEED"] {
        let v = s.hasPrefix("0x") ? UInt64(s.dropFirst(2), radix: 16) : UInt64(s)
        if let v { return [v] }
    }
    let n = env["LNOTE_SOAK"] == "1" ? count * soakFactor : count
    var g = SplitMix64(seed: base)
    return (0..<n).map { _ in g.next() }
}

/// True when `expectDecodeFailure` found what it wanted: an error of one of `codes` with an
/// offset. Tests count the cases where it did not for RELIABILITY.md (`ReliabilityReport`).
func isExpectedFailure(_ e: LnoteError?, _ codes: Set<LnoteError.Code>) -> Bool {
    guard let e else { return false }
    return codes.contains(e.code) && e.offset != nil
}

var isSoak: Bool { ProcessInfo.processInfo.environment["LNOTE_SOAK"] == "1" }

/// Runs `body`, which must throw an `LnoteError` whose code is in `codes` and which
/// carries a byte offset. Records an issue naming `context` (the seed, the case) otherwise.
@discardableResult
func expectDecodeFailure(_ codes: Set<LnoteError.Code>, _ context: @autoclosure () -> String,
                         sourceLocation: SourceLocation = #_sourceLocation,
                         _ body: () throws -> Void) -> LnoteError? {
    do {
        try body()
        Issue.record("expected \(codes) but decoding succeeded: \(context())", sourceLocation: sourceLocation)
        return nil
    } catch let e as LnoteError {
        if !codes.contains(e.code) {
            Issue.record("expected \(codes), got \(e): \(context())", sourceLocation: sourceLocation)
        }
        if e.offset == nil {
            Issue.record("error without an offset: \(e): \(context())", sourceLocation: sourceLocation)
        }
        return e
    } catch {
        Issue.record("unexpected error type \(error): \(context())", sourceLocation: sourceLocation)
        return nil
    }
}

/// Parses hex digits, ignoring whitespace and `0000:`-style offset prefixes on each line.
func parseHexDump(_ text: String) -> [UInt8]? {
    var out: [UInt8] = []
    for rawLine in text.split(separator: "\n") {
        var line = Substring(rawLine)
        if let colon = line.firstIndex(of: ":") { line = line[line.index(after: colon)...] }
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

/// A hex dump with 16 bytes per line, each line prefixed by its offset (`0010: …`).
func hexDump(_ bytes: [UInt8]) -> String {
    var lines: [String] = []
    var at = 0
    while at < bytes.count {
        let chunk = bytes[at..<min(at + 16, bytes.count)]
        let off = String(at, radix: 16)
        lines.append(String(repeating: "0", count: max(0, 4 - off.count)) + off + ": "
            + chunk.map { hexString([$0]) }.joined(separator: " "))
        at += 16
    }
    return lines.joined(separator: "\n")
}

/// The package's root directory (this file is `Tests/LnoteModelTests/Support/TestSupport.swift`).
let packageRoot: URL = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

let fixturesDirectory = packageRoot.appendingPathComponent("Tests/LnoteModelTests/Fixtures")

/// `VectorClock` from literal pairs (the generic initializer does not infer literal types).
func vc(_ pairs: (ReplicaID, UInt64)...) -> VectorClock { VectorClock(pairs) }
