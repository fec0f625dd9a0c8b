import Foundation
import Testing
import LnoteModel
@testable import LnoteInterchange

/// A seed from LNOTE_SEED or a random one (printed in failure messages).
func testSeed() -> UInt64 {
    if let s = ProcessInfo.processInfo.environment["LNOTE_SEED"], let v = UInt64(s) { return v }
    return UInt64.random(in: 0...UInt64.max)
}

/// The text of the fenced block after `<!-- vector: NAME -->` in `Protocol/<file>`.
func specVector(_ name: String, in file: String) throws -> String {
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    let text = try String(contentsOf: root.appendingPathComponent("Protocol/\(file)"), encoding: .utf8)
    guard let marker = text.range(of: "<!-- vector: \(name) -->"),
          let open = text.range(of: "```", range: marker.upperBound..<text.endIndex),
          let lineEnd = text.range(of: "\n", range: open.upperBound..<text.endIndex),
          let close = text.range(of: "```", range: lineEnd.upperBound..<text.endIndex) else {
        throw LnoteError(.notFound, "vector \(name) is not in Protocol/\(file)")
    }
    return String(text[lineEnd.upperBound..<close.lowerBound])
}

/// What a reader gave, as the text of interchange.md's vectors: a `page` line per page
/// (target, canvas in tenths), a `stroke` line per stroke (tool, color, width in tenths,
/// points as `[x, y, pressure, radius, t]`), a `skipped` line per kind.
func describe(_ ink: ImportedInk) -> String {
    var out = ""
    for (i, p) in ink.pages.enumerated() {
        let canvas = p.canvas.map { "\($0.width)x\($0.height)" } ?? "-"
        out += "page \(i + 1) \(p.target) \(canvas)\n"
        for s in p.strokes {
            let pts = s.points.map { "[\($0.x), \($0.y), \($0.pressure), \($0.radius), \($0.t)]" }.joined(separator: ", ")
            out += "stroke \(s.style.tool) \(s.style.color) \(s.style.width) [\(pts)]\n"
        }
    }
    for (k, v) in ink.skipped.sorted(by: { $0.key < $1.key }) { out += "skipped \(k) \(v)\n" }
    return out
}

/// gzip of `bytes` through zlib's deflate (level 9), as Xournal++ writes .xopp files.
func gzip(_ bytes: [UInt8]) throws -> [UInt8] {
    try GzipForTests.deflate(bytes)
}

/// A fresh temporary directory, removed by `remove()`.
struct TempDir {
    let path: String
    init() throws {
        var template = Array((NSTemporaryDirectory() + "lnote-interchange-XXXXXX").utf8CString)
        guard let p = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else { throw LnoteError(.io, "mkdtemp") }
        path = String(cString: p)
    }
    func file(_ name: String, _ bytes: [UInt8]) throws -> String {
        let p = path + "/" + name
        try Data(bytes).write(to: URL(fileURLWithPath: p))
        return p
    }
    func remove() { try? FileManager.default.removeItem(atPath: path) }
}
