import Foundation
import Testing
import LnoteModel
import LnoteTestSupport

/// Issue 18: `lnote verify --repair` rebuilds what the folder's own files can rebuild and
/// says what it did; what it cannot (nothing here) is left listed.
@Suite("verify --repair")
struct RepairCommandTests {
    @Test("[issue 18] a torn log tail, a lost manifest, missing thumbnails and a temporary file: repaired, said, and the page unchanged (seeded)")
    func repairs() async throws {
        let seed = testSeed()
        var rng = SplitMix64(seed: seed)
        let sb = try Sandbox("repair")
        defer { sb.remove() }
        try await sb.ok("init", "nb")
        let doc = try await sb.ok("new", "nb", "--pages", "2")
        try sb.write("s.jsonl", strokeLines(count: 3 + Int(rng.next() % 5), rng: &rng))
        try await sb.ok("import", "nb", doc, "p1", sb.sub("s.jsonl"))
        let before = try await sb.ok("show", "nb", doc, "p1", "--json", "--points")
        #expect(try await sb.run("verify", "nb").code == 0)

        let package = sb.sub("nb/\(doc).lnote")
        let logs = sb.files(under: "nb/\(doc).lnote/pages", endingWith: ".log")
        let log = try #require(logs.first)
        // Damage, each kind in a seeded order of application.
        var damage: [() throws -> Void] = [
            { // an interrupted append: a frame header promising more bytes than follow
                let h = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
                try h.seekToEnd()
                try h.write(contentsOf: Data([0x40, 0, 0, 0] + (0..<(1 + Int(rng.next() % 30))).map { _ in UInt8(truncatingIfNeeded: rng.next()) }))
                try h.close()
            },
            { try FileManager.default.removeItem(atPath: package + "/manifest.json") },
            { for t in sb.files(under: "nb/\(doc).lnote/thumbnails", endingWith: ".jpg") { try FileManager.default.removeItem(atPath: t) } },
            { try Data("x".utf8).write(to: URL(fileURLWithPath: package + "/.document.json.tmp-0123456789abcdef")) },
        ]
        damage.shuffle(using: &rng)
        for d in damage { try d() }
        let found = try await sb.run("verify", "nb")
        #expect(found.code == 1 && found.out.contains("tornTail") && found.out.contains("manifest"), "seed \(seed): \(found)")

        let repaired = try await sb.run("verify", "nb", "--repair")
        #expect(repaired.code == 0 && repaired.out.contains("no problems"), "seed \(seed): \(repaired)")
        #expect(repaired.out.contains("repaired:") && repaired.out.contains("torn tail") && repaired.out.contains("thumbnail"),
                "seed \(seed): \(repaired)")
        #expect(try await sb.run("verify", "nb").code == 0, "seed \(seed)")
        #expect(try await sb.ok("show", "nb", doc, "p1", "--json", "--points") == before, "seed \(seed)")
        #expect(!sb.files(under: "nb/\(doc).lnote/thumbnails", endingWith: ".jpg").isEmpty)
        #expect(sb.files(under: "nb/\(doc).lnote/thumbnails", endingWith: ".png").isEmpty)

        // A clean folder: nothing to do, said so; --json lists what was done.
        let clean = try await sb.run("verify", "nb", "--repair")
        #expect(clean.code == 0 && clean.out.contains("repaired: nothing needed it"), "\(clean)")
        let json = try parseJSON(try await sb.ok("verify", "nb", "--repair", "--json")) as? [String: Any]
        #expect(json?["repaired"] as? [String] == [] && json?["clean"] as? Bool == true, "\(String(describing: json))")
    }
}
