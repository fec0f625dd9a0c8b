import Foundation
import Testing
import LnoteModel
import LnoteStore
import LnoteTestSupport

/// Issue 18: a first HTTP sync shows its progress (bytes as the answer arrives, then
/// documents as they are stored), and its summary counts what came from checkpoints.
@Suite("Progress and summary of a first sync")
struct SyncProgressCLITests {
    /// A folder of `documents` documents with generated strokes (a quarter with a second
    /// page; with `longPage`, the first document's page gets that many strokes more); its
    /// operation count (every log's clock total).
    static func notebook(at path: String, documents: Int, longPage: Int = 0, seed: UInt64) async throws -> Int {
        var o = StoreOptions()
        o.autosave = false
        let nb = try await Notebook.open(at: path, create: true, options: o)
        var gen = HandwritingGenerator(seed: seed)
        for i in 0..<documents {
            let d = try await nb.createDocument(title: "document \(i + 1)")
            let p = await d.pageList[0].id
            _ = try await d.addStrokes(gen.strokes(2 + (i * 7) % 11 + (i == 0 ? longPage : 0)), to: p)
            if i % 4 == 0 { _ = try await d.addStrokes(gen.strokes(3), to: try await d.addPage()) }
            try await d.close()
        }
        let total = try await nb.logClocksAndDigests().reduce(0) { $0 + Int($1.clock.total) }
        try await nb.close()
        return total
    }

    /// `1,234` → 1234.
    static func number(_ s: Substring) -> Int? { Int(s.replacingOccurrences(of: ",", with: "")) }

    /// The numbers of `line` that follow `word ` (e.g. "receiving 1,234 of 5,678": 1234, 5678).
    static func numbers(after word: String, in line: String) -> [Int] {
        guard let r = line.range(of: word + " ") else { return [] }
        return line[r.upperBound...].split(separator: " ").prefix(3).compactMap(number)
    }

    /// tmpfs when there is one: building the served notebook pays no fsync (on a disk shared
    /// with other work, a third of a minute for 120 documents).
    static var scratch: String? {
        let mounts = (try? String(contentsOfFile: "/proc/mounts", encoding: .utf8)) ?? ""
        let tmpfs = mounts.split(separator: "\n").contains { $0.hasPrefix("tmpfs /dev/shm tmpfs ") || $0.hasPrefix("shm /dev/shm tmpfs ") }
        return tmpfs && access("/dev/shm", W_OK) == 0 ? "/dev/shm" : nil
    }

    /// `lnote serve FOLDER` started, with the URL and token it prints.
    static func serve(_ folder: String) async throws -> (Subprocess.Child, url: String, token: String) {
        let serve = try Subprocess.start(lnoteBinary, ["serve", folder])
        #expect(await serve.waitForOutput("token: "))
        try await Task.sleep(for: .milliseconds(50))
        let lines = serve.outputSoFar.split(separator: "\n")
        let url = lines.first { $0.hasPrefix("url: ") }.map { String($0.dropFirst(5)) } ?? ""
        let token = lines.first { $0.hasPrefix("token: ") }.map { String($0.dropFirst(7)) } ?? ""
        return (serve, url, token)
    }

    @Test("[issue 18] a first sync from `lnote serve` with --progress: growing byte counts, every document stored, the summary's figures")
    func firstSyncFromPeer() async throws {
        let seed = testSeed()
        let sb = try Sandbox("progress", parent: Self.scratch)
        defer { sb.remove() }
        let documents = 100
        let total = try await Self.notebook(at: sb.sub("served"), documents: documents, seed: seed)
        let (serve, url, token) = try await Self.serve(sb.sub("served"))
        defer { serve.kill(SIGTERM) }

        // A slow link (1 MB/s): on loopback libcurl would read the whole answer at once.
        let run = try await Subprocess.run(lnoteBinary, ["sync", sb.sub("new"), url, "--token", token, "--init", "--progress", "--json"],
                                           environment: ["LNOTE_SYNC_MAX_RATE": "1000000"], directory: sb.path)
        let r = Run(args: ["sync"], code: run.code, out: run.outText, err: run.errText)
        #expect(r.code == 0, "seed \(seed): \(r)")
        let progress = r.err.split(separator: "\n").map(String.init).filter { $0.hasPrefix("sync: ") }
        // Bytes: the answer's lines, each naming more bytes than the one before, the last all of them.
        let receiving = progress.filter { $0.hasPrefix("sync: receiving ") }.map { Self.numbers(after: "receiving", in: $0) }
        let biggest = receiving.max { ($0.last ?? 0) < ($1.last ?? 0) }?.last ?? 0
        let answer = receiving.filter { $0.count == 2 && $0[1] == biggest }.map { $0[0] }
        #expect(answer.count >= 3, "seed \(seed): several lines while the largest answer (\(biggest) bytes) arrived: \(progress)")
        #expect(answer == answer.sorted() && Set(answer).count == answer.count && answer.last == biggest,
                "seed \(seed): growing to the whole answer: \(answer)")
        #expect(biggest > 100_000, "seed \(seed): \(biggest) bytes")
        // Documents: counted up to every one of them.
        let stored = progress.filter { $0.hasPrefix("sync: storing ") }.map { Self.numbers(after: "storing", in: $0) }
        #expect(stored.last == [documents, documents], "seed \(seed): \(progress)")
        #expect(stored.map { $0.first ?? -1 } == stored.map { $0.first ?? -1 }.sorted() && stored.count >= 3, "seed \(seed): \(stored)")
        // The summary's figures are the notebook's; stdout holds the JSON alone.
        let o = try parseJSON(r.out) as? [String: Any]
        #expect(o?["ops_received"] as? Int == total && o?["ops_applied"] as? Int == total
                && o?["documents_received"] as? Int == documents && o?["ops_from_checkpoints"] as? Int == 0,
                "seed \(seed): \(total) operations: \(r.out)")

        // Text: the summary in words; no progress line without --progress off a terminal, nor with -q.
        let again = try await sb.run("sync", sb.sub("new"), url, "--token", token)
        #expect(again.code == 0 && !again.err.contains("sync: ")
                && again.out.contains("received 0 operations (0 new here), ") && again.out.hasSuffix(", 1 round trip\n"),
                "\(again)")
        let quiet = try await sb.run("sync", sb.sub("new"), url, "--token", token, "--progress", "-q")
        #expect(quiet.code == 0 && quiet.out.isEmpty && !quiet.err.contains("sync: "), "\(quiet)")
        serve.kill(SIGTERM)
        _ = await serve.wait()
    }

    @Test("[issue 18] on a terminal 40 columns wide the progress line is redrawn in at most 39, its end cut with …")
    func progressFitsTheTerminal() async throws {
        let seed = testSeed()
        let sb = try Sandbox("progress-tty", parent: Self.scratch)
        defer { sb.remove() }
        _ = try await Self.notebook(at: sb.sub("served"), documents: 30, seed: seed)
        let (serve, url, token) = try await Self.serve(sb.sub("served"))
        defer { serve.kill(SIGTERM) }
        // A real terminal: script(1) runs the sync on a pseudo-terminal set to 40 columns.
        let command = "stty cols 40 rows 20; exec \(lnoteBinary) sync \(sb.sub("new")) \(url) --token \(token) --init"
        let run = try await Subprocess.run("/usr/bin/script", ["-qfec", command, "/dev/null"],
                                           environment: ["LNOTE_SYNC_MAX_RATE": "300000"], directory: sb.path)
        #expect(run.code == 0, "seed \(seed): \(run.outText) \(run.errText)")
        // Each redraw is "\r ESC[K text"; the text runs to the next "\r" or newline.
        let draws = run.outText.components(separatedBy: "\r\u{1B}[K").dropFirst()
            .map { $0.prefix { $0 != "\r" && $0 != "\n" } }.filter { $0.hasPrefix("sync: ") }  // not the summary after the last clear
        #expect(draws.count >= 2, "seed \(seed): \(run.outText.debugDescription)")
        #expect(draws.allSatisfy { $0.count <= 39 }, "seed \(seed): \(draws)")
        #expect(draws.contains { $0.hasPrefix("sync: receiving ") && $0.hasSuffix("…") }, "seed \(seed): \(draws)")
        serve.kill(SIGTERM)
        _ = await serve.wait()
    }

    @Test("[issue 18] a newcomer's first sync from a relay counts the operations its checkpoints hold, and installs with progress")
    func firstSyncFromCheckpoints() async throws {
        let seed = testSeed()
        let sb = try Sandbox("progress-relay", parent: Self.scratch)
        defer { sb.remove() }
        // One page past the checkpoint interval (256 operations): the pusher uploads its checkpoint.
        let documents = 12
        let total = try await Self.notebook(at: sb.sub("laptop"), documents: documents, longPage: 300, seed: seed)
        let db = sb.sub("relay.sqlite")
        let id = try await sb.ok("relay", "notebook", "create", "--db", db)
        let token = try await sb.ok("relay", "token", "create", "--db", db, "--notebook", id, "--device", "laptop")
        let relay = try Subprocess.start(lnoteBinary, ["relay", "--db", db])
        defer { relay.kill(SIGTERM) }
        #expect(await relay.waitForOutput("url: "))
        try await Task.sleep(for: .milliseconds(50))
        let base = relay.outputSoFar.split(separator: "\n").first { $0.hasPrefix("url: ") }.map { String($0.dropFirst(5)) } ?? ""
        let url = "\(base)/v1/notebooks/\(id)"
        let push = try await sb.run("sync", sb.sub("laptop"), url, "--token", token, "--json")
        let pushed = try parseJSON(push.out) as? [String: Any]
        #expect(push.code == 0 && pushed?["ops_sent"] as? Int == total, "seed \(seed): \(push)")

        let desk = try await sb.run("sync", sb.sub("desk"), url, "--token", token, "--init", "--progress")
        #expect(desk.code == 0, "seed \(seed): \(desk)")
        let summary = desk.out
        guard let r = summary.range(of: "received "), let c = summary.range(of: " from checkpoints") else {
            Issue.record("seed \(seed): no checkpoint figures: \(desk)")
            return
        }
        // "received 31 operations (31 new here) and 300 from checkpoints of 1 page, in 12 documents"
        let words = summary[r.upperBound..<c.lowerBound].split(separator: " ")
        let received = Self.number(words[0]) ?? -1, fromCheckpoints = Self.number(words.last!) ?? -1
        #expect(fromCheckpoints >= 256 && received + fromCheckpoints == total, "seed \(seed): \(total) operations: \(summary)")
        #expect(summary.contains("of 1 page, in \(documents) documents"), "seed \(seed): \(summary)")
        let installing = desk.err.split(separator: "\n").filter { $0.hasPrefix("sync: installing from checkpoints ") }
        #expect(installing.last.map { Self.numbers(after: "checkpoints", in: String($0)) } == [1, 1], "seed \(seed): \(desk.err)")
        relay.kill(SIGTERM)
        _ = await relay.wait()
    }

    static func grouped(_ n: Int) -> String {
        let digits = String(n)
        return digits.enumerated().map { i, c in (i > 0 && (digits.count - i) % 3 == 0 ? "," : "") + String(c) }.joined()
    }
}
