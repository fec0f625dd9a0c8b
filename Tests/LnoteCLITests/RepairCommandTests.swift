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

    /// [PKG-38] Damage before what a page's snapshot (or document.json) covers is never read by
    /// an open, which replays from there: `--repair` scans every log whole and salvages it (the
    /// damaged file kept aside), so that no `corruptFrame` is left; what the damaged frames held
    /// stays in the snapshots and is listed as missing from the logs until a peer sends it back
    /// ([PKG-51]). The pages show what they showed.
    @Test("[PKG-38] damage before a snapshot's offset is salvaged by --repair (seeded)")
    func damageBeforeTheSnapshot() async throws {
        let seed = testSeed()
        var rng = SplitMix64(seed: seed)
        let sb = try Sandbox("repair-covered")
        defer { sb.remove() }
        try await sb.ok("init", "nb")
        let doc = try await sb.ok("new", "nb")
        try sb.write("s.jsonl", strokeLines(count: 4 + Int(rng.next() % 5), rng: &rng))
        try await sb.ok("import", "nb", doc, "#1", sb.sub("s.jsonl"))
        try await sb.ok("compact", "nb", doc)
        let before = try await sb.ok("show", "nb", doc, "#1", "--json", "--points")
        #expect(try await sb.run("verify", "nb").code == 0)

        let package = sb.sub("nb/\(doc).lnote")
        let pageLog = try #require(sb.files(under: "nb/\(doc).lnote/pages", endingWith: ".log").first)
        // A payload byte of a frame that is not the last: damage, with valid frames after it.
        for path in [pageLog, package + "/document.log"] {
            var bytes = [UInt8](try #require(FileManager.default.contents(atPath: path)))
            func length(_ at: Int) -> Int {
                Int(UInt32(bytes[at]) | UInt32(bytes[at + 1]) << 8 | UInt32(bytes[at + 2]) << 16 | UInt32(bytes[at + 3]) << 24)
            }
            // The first operation: after the page log's anchor and its copies (document-package.md
            // [PKG-110], [PKG-111]).
            var first = 40
            while bytes[first + 8] == 0x30 { first += 8 + length(first) }
            let length = length(first)
            #expect(first + 8 + length < bytes.count, "seed \(seed): the first frame is not the last")
            bytes[first + 9 + Int(rng.below(UInt64(length - 1)))] ^= 0x20
            try Data(bytes).write(to: URL(fileURLWithPath: path))
        }
        let found = try await sb.run("verify", "nb")
        #expect(found.code == 1 && found.out.components(separatedBy: "corruptFrame").count == 3, "seed \(seed): \(found)")
        // An open reads from the snapshots' offsets: it does not see the damage.
        #expect(try await sb.ok("show", "nb", doc, "#1", "--json", "--points") == before, "seed \(seed)")
        #expect(try await sb.run("verify", "nb").out.components(separatedBy: "corruptFrame").count == 3, "seed \(seed)")

        let repaired = try await sb.run("verify", "nb", "--repair")
        #expect(repaired.out.contains("document.log salvaged") && repaired.out.contains("log salvaged (damage before what its snapshot covers)"),
                "seed \(seed): \(repaired)")
        #expect(!repaired.out.contains("corruptFrame"), "seed \(seed): \(repaired)")
        #expect(sb.files(under: "nb/\(doc).lnote", endingWith: ".corrupt-1").count == 2, "seed \(seed): the damaged files kept aside")
        let after = try await sb.run("verify", "nb")
        #expect(!after.out.contains("corruptFrame") && after.out.contains("missingOperations"), "seed \(seed): \(after)")
        #expect(try await sb.ok("show", "nb", doc, "#1", "--json", "--points") == before, "seed \(seed)")
        let again = try await sb.run("verify", "nb", "--repair")
        #expect(!again.out.contains("salvaged"), "seed \(seed): a salvaged log is not salvaged again: \(again)")
    }
}
