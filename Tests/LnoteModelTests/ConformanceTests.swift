import Foundation
import Testing

/// Every requirement id defined in `Protocol/` is named by a test (in its name, a comment or
/// a scenario), as the README promises: a rule nobody checks is a rule that drifts.
@Suite struct ConformanceTests {
    /// The repository's root, from this file's path (`Tests/LnoteModelTests/…`).
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path

    static func files(under dir: String, suffix: String) -> [String] {
        let base = root + "/" + dir
        let all = FileManager.default.enumerator(atPath: base)?.compactMap { $0 as? String } ?? []
        return all.filter { $0.hasSuffix(suffix) }.map { base + "/" + $0 }
    }

    /// `[ABC-12]` references in a text.
    static func ids(in text: String) -> Set<String> {
        Set(text.matches(of: /\[([A-Z]+-[0-9]+)\]/).map { String($0.output.1) })
    }

    @Test("every requirement id in Protocol/ is named by a test, except the rationale [LOG-12]")
    func everyRequirementIsTested() throws {
        var defined = Set<String>()
        for f in Self.files(under: "Protocol", suffix: ".md") { defined.formUnion(Self.ids(in: try String(contentsOfFile: f, encoding: .utf8))) }
        #expect(defined.count > 200, "the specs were found under \(Self.root)/Protocol")
        var named = Set<String>()
        let me = URL(fileURLWithPath: #filePath).standardizedFileURL.path
        for f in Self.files(under: "Tests", suffix: ".swift") + Self.files(under: "Tests", suffix: ".json")
        where URL(fileURLWithPath: f).standardizedFileURL.path != me {
            named.formUnion(Self.ids(in: try String(contentsOfFile: f, encoding: .utf8)))
        }
        // This file is left out: it names ids only to say which may go untested.
        let untested = defined.subtracting(named).sorted()
        #expect(untested == ["LOG-12"], "requirement ids no test names: \(untested)")
    }
}
