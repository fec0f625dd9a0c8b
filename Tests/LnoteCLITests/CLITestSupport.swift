import Foundation
import Testing
import LnoteTestSupport
import LnoteModel

/// The `lnote` executable built beside the test bundle (the test target depends on it, so
/// `swift test` builds it first).
let lnoteBinary: String = {
    var candidates: [URL] = []
    if let exe = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
        var dir = URL(fileURLWithPath: exe).deletingLastPathComponent()
        for _ in 0..<4 {
            candidates.append(dir.appendingPathComponent("lnote"))
            dir = dir.deletingLastPathComponent()
        }
    }
    candidates.append(Bundle.main.bundleURL.appendingPathComponent("lnote"))
    candidates.append(Bundle.main.bundleURL.deletingLastPathComponent().appendingPathComponent("lnote"))
    // Tests/LnoteCLITests/<file> → package root → .build/debug/lnote
    candidates.append(URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent(".build/debug/lnote"))
    for c in candidates where FileManager.default.isExecutableFile(atPath: c.path) {
        var isDir: ObjCBool = false
        if FileManager.default.fileExists(atPath: c.path, isDirectory: &isDir), !isDir.boolValue { return c.path }
    }
    return "lnote-binary-not-found"
}()

/// What one run of the binary did.
struct Run: CustomStringConvertible {
    var args: [String]
    var code: Int32
    var out: String
    var err: String
    var lines: [String] { out.split(separator: "\n", omittingEmptySubsequences: true).map(String.init) }
    var description: String { "lnote \(args.joined(separator: " ")) → \(code)\nstdout: \(out)\nstderr: \(err)" }
}

/// A fresh directory per test, removed by `remove()`, in which `lnote` runs.
struct Sandbox {
    let path: String

    /// - Parameter parent: where the directory is made (default: the temporary directory).
    init(_ label: String, parent: String? = nil) throws {
        let parent = parent.map { $0.hasSuffix("/") ? $0 : $0 + "/" } ?? NSTemporaryDirectory()
        var template = Array((parent + "lnote-cli-\(label)-XXXXXX").utf8CString)
        guard let p = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw LnoteError(.io, "mkdtemp failed")
        }
        path = String(cString: p)
    }

    func remove() { try? FileManager.default.removeItem(atPath: path) }
    func sub(_ name: String) -> String { path + "/" + name }

    /// Runs `lnote args…` with this directory as the working directory. Output goes through
    /// files (no pipe can fill up and block the child).
    @discardableResult
    func run(_ args: String...) async throws -> Run { try await run(args) }

    /// Runs the binary without blocking a Swift cooperative thread while it works
    /// (LnoteTestSupport.Subprocess): CLI tests run in parallel with everything else.
    @discardableResult
    func run(_ args: [String]) async throws -> Run {
        let r = try await Subprocess.run(lnoteBinary, args, directory: path)
        return Run(args: args, code: r.code, out: r.outText, err: r.errText)
    }

    /// Runs and requires exit 0; returns stdout trimmed of the final newline.
    @discardableResult
    func ok(_ args: String..., sourceLocation: SourceLocation = #_sourceLocation) async throws -> String {
        let r = try await run(args)
        guard r.code == 0 else {
            Issue.record("expected exit 0: \(r)", sourceLocation: sourceLocation)
            throw LnoteError(.invalidState, "lnote \(args.joined(separator: " ")) failed")
        }
        return r.out.hasSuffix("\n") ? String(r.out.dropLast()) : r.out
    }

    func write(_ name: String, _ text: String) throws {
        try Data(text.utf8).write(to: URL(fileURLWithPath: sub(name)))
    }

    /// Files under `dir` (recursively) whose name ends with `suffix`, sorted.
    func files(under dir: String, endingWith suffix: String) -> [String] {
        let root = sub(dir)
        guard let e = FileManager.default.enumerator(atPath: root) else { return [] }
        return e.compactMap { $0 as? String }.filter { $0.hasSuffix(suffix) }.map { root + "/" + $0 }.sorted()
    }
}

/// A seed from LNOTE_SEED or a random one (printed in failure messages).
func testSeed() -> UInt64 {
    if let s = ProcessInfo.processInfo.environment["LNOTE_SEED"], let v = UInt64(s) { return v }
    return UInt64.random(in: 0...UInt64.max)
}

/// `count` strokes as JSON lines (Protocol/import-jsonl.md), 3 to 40 points each, with
/// fractional coordinates, times and pressures (some left out or null).
func strokeLines(count: Int, rng: inout SplitMix64) -> String {
    var lines: [String] = []
    for _ in 0..<count {
        let n = rng.int(in: 3...40)
        var x = rng.double(20, 500), y = rng.double(20, 800), t = rng.double(0, 1e6)
        var pts: [String] = []
        for k in 0..<n {
            x += rng.double(-3, 3)
            y += rng.double(-3, 3)
            t += rng.double(2, 6)
            let pressure = rng.unit()
            switch k % 4 {
            case 0: pts.append("[\(x), \(y)]")
            case 1: pts.append("[\(x), \(y), null, \(pressure)]")
            default: pts.append("[\(x), \(y), \(t), \(pressure)]")
            }
        }
        lines.append("{\"points\": [\(pts.joined(separator: ", "))]}")
    }
    return lines.joined(separator: "\n") + "\n"
}

/// Parses JSON text (test side: Foundation).
func parseJSON(_ text: String) throws -> Any {
    try JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])
}

/// A parsed JSON value printed with sorted keys, for comparing values.
func canon(_ value: Any) throws -> String {
    String(decoding: try JSONSerialization.data(withJSONObject: value, options: [.sortedKeys, .fragmentsAllowed]), as: UTF8.self)
}
