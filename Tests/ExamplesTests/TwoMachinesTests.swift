import Foundation
import Testing

/// Runs the built example program like a user would, and checks what it prints.
enum BuiltProgram {
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The binary in the build folder this test was built into.
    static func url(_ name: String) -> URL? {
        var dir = Bundle.main.bundleURL
        for _ in 0..<4 {
            let candidate = dir.appendingPathComponent(name)
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
            dir = dir.deletingLastPathComponent()
        }
        let fallback = packageRoot.appendingPathComponent(".build/debug/\(name)")
        return FileManager.default.isExecutableFile(atPath: fallback.path) ? fallback : nil
    }

    static func run(_ name: String, _ args: [String] = []) throws -> (status: Int32, out: String, err: String) {
        guard let url = url(name) else { throw CocoaError(.fileNoSuchFile) }
        let p = Process()
        p.executableURL = url
        p.arguments = args
        let out = Pipe(), err = Pipe()
        p.standardOutput = out
        p.standardError = err
        try p.run()
        let o = out.fileHandleForReading.readDataToEndOfFile()
        let e = err.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return (p.terminationStatus, String(decoding: o, as: UTF8.self), String(decoding: e, as: UTF8.self))
    }
}

@Suite struct ExamplesTests {
    @Test func twoMachinesConvergeAndReportConflicts() throws {
        let r = try BuiltProgram.run("two-machines")
        #expect(r.status == 0, "stderr: \(r.err)")
        #expect(r.out.contains("identical: yes"))
        #expect(r.out.contains("conflict reports identical: yes"))
        // The scripted edits make exactly one erase, one move and one title conflict.
        #expect(r.out.contains("  erase page"))
        #expect(r.out.contains("  move page"))
        #expect(r.out.contains("  title:"))
        // Both libraries list the merged document with the same counts.
        let listings = r.out.components(separatedBy: "library:\n").dropFirst().map { $0.components(separatedBy: "\n").first ?? "" }
        #expect(listings.count == 2 && listings[0] == listings[1], "\(listings)")
        // After first contact, each sync is a single exchange.
        #expect(r.out.contains("1 round trip(s)"))
    }
}
