import Foundation
import Testing
import LnoteModel
import LnoteTestSupport

/// [PKG-22] [PKG-66] [PKG-23] [PKG-24] What a user sees: a folder holding symlinks or FIFOs,
/// a damaged or missing `.lnote/replica.json`, a full disk.
@Suite("CLI: hostile folders, damaged replica.json, full disk", .serialized)
struct HostileFolderCLITests {
    static let secret = "PRIVATE-KEY-0123456789-do-not-leak"

    /// Paths of regular files under `dir` holding `needle`.
    static func holders(_ needle: String, under dir: String) -> [String] {
        var out: [String] = []
        let e = FileManager.default.enumerator(atPath: dir)
        while let name = e?.nextObject() as? String {
            var st = stat()
            let p = dir + "/" + name
            guard lstat(p, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG,
                  let d = FileManager.default.contents(atPath: p) else { continue }
            if d.range(of: Data(needle.utf8)) != nil { out.append(p) }
        }
        return out
    }

    @Test("[PKG-22] sync, show and verify with a page log that is a symlink or a FIFO: refused by name, nothing copied")
    func symlinkedLog() async throws {
        var cases = 0, leaked = 0
        for kind in ["symlink", "FIFO"] {
            let sb = try Sandbox("hostile")
            defer { sb.remove() }
            var rng = SplitMix64(seed: 7)
            try sb.write("s.jsonl", strokeLines(count: 3, rng: &rng))
            try sb.write("private.key", Self.secret)
            try await sb.ok("init", "A")
            try await sb.ok("init", "B")
            let bad = try await sb.ok("new", "B", "--title", "bad")
            try await sb.ok("import", "B", bad, "#1", "s.jsonl")
            let good = try await sb.ok("new", "B", "--title", "good")
            try await sb.ok("import", "B", good, "#1", "s.jsonl")
            let log = try #require(sb.files(under: "B/\(bad).lnote/pages", endingWith: ".log").first)
            try FileManager.default.removeItem(atPath: log)
            if kind == "symlink" {
                #expect(symlink(sb.sub("private.key"), log) == 0)
            } else {
                #expect(mkfifo(log, 0o644) == 0)
            }
            let what = "not a regular file (\(kind))"

            let show = try await sb.run("show", "B", bad, "--json")
            #expect(show.code != 0 && show.err.contains(what) && show.err.contains(URL(fileURLWithPath: log).lastPathComponent), "\(show)")
            let verify = try await sb.run("verify", "B")
            #expect(verify.code == 1 && verify.out.contains(what), "\(verify)")
            // The refused document is skipped by name; the healthy one still reaches A.
            let sync = try await sb.run("sync", "A", "B")
            #expect(sync.code == 0 && sync.err.contains("skipped document \(bad)") && sync.err.contains(what), "\(sync)")
            let ls = try await sb.ok("ls", "A")
            #expect(ls.contains("good") && !ls.contains("bad"), "\(ls)")
            let found = Self.holders(Self.secret, under: sb.sub("A")) + Self.holders(Self.secret, under: sb.sub("B"))
            #expect(found.isEmpty, "\(kind): the private file was copied: \(found)")
            if !found.isEmpty { leaked += 1 }
            #expect(sb.files(under: "B", endingWith: ".corrupt-1").isEmpty)
            cases += 1
        }
        ReliabilityReport.record(family: "files", detail: "HostileFolderCLITests.symlinkedLog (show, verify, sync × symlink, FIFO)",
                                 cases: cases, lost: leaked)
    }

    @Test("[PKG-66] every command works with a damaged replica.json and says a new id was minted")
    func damagedReplicaFile() async throws {
        let damages: [(String, String)] = [
            ("truncated", "{\"format\": 1, \"replica\": \"00ab"), ("empty", ""), ("not JSON", "hello"),
            ("wrong types", "{\"format\": \"1\", \"replica\": 5, \"fingerprint\": [], \"previous\": {}}"),
            ("id 0", "{\"format\": 1, \"replica\": \"0000000000000000\", \"fingerprint\": {\"device\": 1, \"inode\": 2, \"path\": \"/x\"}, \"previous\": []}"),
            ("huge numbers", "{\"format\": 1, \"replica\": \"00000000000000ab\", \"fingerprint\": {\"device\": 1e300, \"inode\": 123456789012345678901234567890, \"path\": \"/x\"}, \"previous\": []}"),
            ("bad fingerprint", "{\"format\": 1, \"replica\": \"00000000000000ab\", \"fingerprint\": {\"device\": \"a\", \"path\": 3}, \"previous\": []}"),
        ]
        var cases = 0, failed = 0
        for (name, text) in damages {
            let sb = try Sandbox("replica")
            defer { sb.remove() }
            let old = try await sb.ok("init", "nb")
            let doc = try await sb.ok("new", "nb", "--title", "kept")
            try sb.write("nb/.lnote/replica.json", text)
            // `ls` reads manifests only ([PKG-62]): it neither needs nor repairs replica.json.
            let listed = try await sb.run("ls", "nb")
            #expect(listed.code == 0 && listed.out.contains("kept"), "\(name): \(listed)")
            let ls = try await sb.run("show", "nb", doc)
            #expect(ls.code == 0 && ls.out.contains("kept"), "\(name): \(ls)")
            #expect(ls.err.contains("replica.json was damaged") && ls.err.contains("replica.json.corrupt-1")
                    && ls.err.contains("new replica id"), "\(name): \(ls)")
            #expect(!ls.err.contains(old))
            // The next commands see a valid file: no note, and edits work.
            let title = try await sb.run("title", "nb", doc, "again")
            #expect(title.code == 0 && !title.err.contains("replica.json"), "\(name): \(title)")
            let verify = try await sb.run("verify", "nb")
            #expect(verify.code == 0, "\(name): \(verify)")
            if ls.code != 0 || title.code != 0 || verify.code != 0 { failed += 1 }
            cases += 1
        }
        ReliabilityReport.record(family: "files", detail: "HostileFolderCLITests.damagedReplicaFile (7 damages through lnote)",
                                 cases: cases, corrupted: failed)
    }

    @Test("[PKG-60] [PKG-66] a missing replica.json: a new id and a note; no .lnote: not a notebook folder")
    func missingReplicaFile() async throws {
        let sb = try Sandbox("replica-missing")
        defer { sb.remove() }
        try await sb.ok("init", "nb")
        try await sb.ok("new", "nb", "--title", "kept")
        try FileManager.default.removeItem(atPath: sb.sub("nb/.lnote/replica.json"))
        let doc = try #require(sb.files(under: "nb", endingWith: "manifest.json").first.map {
            URL(fileURLWithPath: $0).deletingLastPathComponent().deletingPathExtension().lastPathComponent })
        let ls = try await sb.run("show", "nb", doc)
        #expect(ls.code == 0 && ls.out.contains("kept") && ls.err.contains("replica.json was missing"), "\(ls)")
        #expect(FileManager.default.fileExists(atPath: sb.sub("nb/.lnote/replica.json")))
        try FileManager.default.createDirectory(atPath: sb.sub("plain"), withIntermediateDirectories: false)
        // A notebook named through a symlink is still one: only links inside it are refused.
        #expect(symlink(sb.sub("nb"), sb.sub("link")) == 0)
        for args in [["ls", "link"], ["verify", "link"], ["show", "link", doc]] {
            let r = try await sb.run(args)
            #expect(r.code == 0 && !r.err.contains("symlink"), "\(r)")
        }
        let plain = try await sb.run("ls", "plain")
        #expect(plain.code != 0 && plain.err.contains("not a notebook folder"), "\(plain)")
        #expect(!FileManager.default.fileExists(atPath: sb.sub("plain/.lnote")), "a refused folder is not made a notebook")
    }

    @Test("[PKG-23] [PKG-24] on a full disk (tmpfs): import reports success once durable; show, log, ls, verify, conflicts, export work")
    func fullDisk() async throws {
        let sb = try Sandbox("fulldisk")
        defer { sb.remove() }
        let mnt = sb.sub("mnt")
        try FileManager.default.createDirectory(atPath: mnt, withIntermediateDirectories: false)
        let mount = try await Subprocess.run("/bin/mount", ["-t", "tmpfs", "-o", "size=2m", "tmpfs", mnt], directory: sb.path)
        try #require(mount.code == 0, "cannot mount a tmpfs (these tests need root): \(mount.errText)")
        defer { _ = try? Process.run(URL(fileURLWithPath: "/bin/umount"), arguments: [mnt]).waitUntilExit() }
        var rng = SplitMix64(seed: 11)
        try sb.write("s.jsonl", strokeLines(count: 30, rng: &rng))
        try await sb.ok("init", "mnt/nb")
        let doc = try await sb.ok("new", "mnt/nb", "--title", "full")
        try await sb.ok("import", "mnt/nb", doc, "#1", "s.jsonl")
        // Fill the disk, then leave a little room: the log append fits, the snapshot does not.
        let filler = mnt + "/filler"
        FileManager.default.createFile(atPath: filler, contents: nil)
        let h = try FileHandle(forWritingTo: URL(fileURLWithPath: filler))
        for size in [65536, 4096, 512, 1] {
            while (try? h.write(contentsOf: Data(count: size))) != nil {}
        }
        try h.close()
        var cases = 0
        for room in [0, 16384] {
            let size = (try FileManager.default.attributesOfItem(atPath: filler)[.size] as! NSNumber).intValue
            truncate(filler, off_t(max(0, size - room)))
            let before = try await sb.ok("show", "mnt/nb", doc, "--json")
            let imp = try await sb.run("import", "mnt/nb", doc, "#1", "s.jsonl")
            let after = try await sb.ok("show", "mnt/nb", doc, "--json")
            if imp.code == 0 {
                #expect(after != before, "room \(room): import said done but nothing changed: \(imp)")
            } else {
                #expect(after == before, "room \(room): import failed but changed the page: \(imp)")
                #expect(imp.err.contains("No space left on device"), "\(imp)")
            }
            cases += 1
        }
        let h2 = try FileHandle(forWritingAtPath: filler)!
        try h2.seekToEnd()
        for size in [65536, 4096, 512, 1] { while (try? h2.write(contentsOf: Data(count: size))) != nil {} }
        try h2.close()
        for args in [["show", "mnt/nb", doc, "--json"], ["log", "mnt/nb", doc, "#1"], ["ls", "mnt/nb"], ["verify", "mnt/nb"],
                     ["conflicts", "mnt/nb"], ["export", "mnt/nb", "--sqlite", sb.sub("out.sqlite")]] {
            let r = try await sb.run(args)
            #expect(r.code == 0, "\(r)")
            cases += 1
        }
        ReliabilityReport.record(family: "full disk", detail: "HostileFolderCLITests.fullDisk (import with 0/16 KiB left; 6 read-only commands)",
                                 cases: cases)
    }
}
