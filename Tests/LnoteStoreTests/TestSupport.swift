import Foundation
import Testing
import LnoteModel
@testable import LnoteStore

/// A fresh directory under the system temp dir, removed by `remove()`.
struct TempDir {
    let path: String
    init(_ label: String = "t") throws {
        var template = Array((NSTemporaryDirectory() + "lnote-\(label)-XXXXXX").utf8CString)
        guard let p = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw LnoteError(.io, "mkdtemp failed")
        }
        path = String(cString: p)
    }
    func remove() { try? FileManager.default.removeItem(atPath: path) }
    func sub(_ name: String) -> String { path + "/" + name }
}

/// The seeded generator the model ships (SplitMix64): one definition for every test.
typealias SeededRNG = SplitMix64

/// A seed from LNOTE_SEED or a random one.
func testSeed() -> UInt64 {
    if let s = ProcessInfo.processInfo.environment["LNOTE_SEED"], let v = UInt64(s) { return v }
    return UInt64.random(in: 0...UInt64.max)
}

func randomBytes(_ n: Int, _ rng: inout SeededRNG) -> [UInt8] {
    (0..<n).map { _ in UInt8.random(in: 0...255, using: &rng) }
}

/// Reads a whole file (test side: plain Foundation, not the seam).
func fileBytes(_ path: String) -> [UInt8]? {
    FileManager.default.contents(atPath: path).map { Array($0) }
}

func writeFile(_ path: String, _ bytes: [UInt8]) throws {
    try Data(bytes).write(to: URL(fileURLWithPath: path))
}

func listNames(_ dir: String) -> [String] {
    ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).sorted()
}

/// A seam that does not fsync: for tests that check logic over thousands of files and
/// never durability.
let fastIO = Syscalls(performsSync: false)

/// A stroke of `n` points starting at (x, 0).
func stroke(_ n: Int = 5, x: Int32 = 0) -> Stroke {
    Stroke(points: (0..<n).map { StrokePoint(x: x + Int32($0) * 10, y: Int32($0) * 7, t: UInt32($0) * 8) })
}

/// Options for tests: no background autosave (tests flush explicitly), a fixed clock.
func testOptions(_ tweak: (inout StoreOptions) -> Void = { _ in }) -> StoreOptions {
    var o = StoreOptions()
    o.autosave = false
    o.now = { 1_700_000_000_000 }
    tweak(&o)
    return o
}

/// Opens a notebook through a given seam (tests).
func openNotebook(_ path: String, io: Syscalls = .live, options: StoreOptions = testOptions(),
                  machineID: String = "/etc/machine-id") async throws -> Notebook {
    try await Notebook(path: path, create: true, options: options, io: io, machineIDPath: machineID)
}
