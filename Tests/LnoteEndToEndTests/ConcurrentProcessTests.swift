import Foundation
import Synchronization
import Testing
import LnoteModel
import LnoteReplication
import LnoteStore
import LnoteTestSupport

/// Several `lnote` processes on one notebook folder at once (document-package.md §10).
@Suite struct ConcurrentProcessTests {
    let lnote = Subprocess.product("lnote")

    func run(_ args: String...) async throws -> Subprocess.Result {
        let r = try await Subprocess.run(lnote, args)
        #expect(r.status == 0, "lnote \(args.joined(separator: " ")): \(r.errText)")
        return r
    }

    /// One stroke per line whose first x says which writer wrote it, and its number.
    static func strokes(writer: Int, from: Int, count: Int) -> String {
        (from..<(from + count)).map { i in
            let x = Double(writer * 10_000 + i)
            return "{\"points\": [[\(x), 10], [\(x + 1), 12], [\(x + 2), 15]]}"
        }.joined(separator: "\n") + "\n"
    }

    @Test("[PKG-84] [PKG-85] [PKG-87] two processes import into one page while a third shows it in a loop: never an error, always a prefix of the final state")
    func twoWritersAndAReader() async throws {
        let seed = UInt64.random(in: 0...UInt64.max)
        var rng = SplitMix64(seed: seed)
        let dir = try TempDir()
        let folder = dir.sub("nb")
        _ = try await run("init", folder)
        let doc = try await run("new", folder, "--title", "Race").outText.trimmingCharacters(in: .whitespacesAndNewlines)
        // Each writer runs `lnote import` again and again, batches of 1 to 4 strokes.
        var plans: [[(file: String, count: Int)]] = [[], []]
        for w in 0..<2 {
            var i = 0
            for b in 0..<12 {
                let n = rng.int(in: 1...4)
                let file = dir.sub("w\(w)-\(b).jsonl")
                try Data(Self.strokes(writer: w + 1, from: i, count: n).utf8).write(to: URL(fileURLWithPath: file))
                plans[w].append((file, n))
                i += n
            }
        }
        final class Shared: Sendable {
            let writing = Mutex(2)
            let failures = Mutex<[String]>([])
            let shows = Mutex<[String]>([])
        }
        let shared = Shared(), lnote = self.lnote
        try await withThrowingTaskGroup(of: Void.self) { group in
            for w in 0..<2 {
                let plan = plans[w]
                group.addTask {
                    for (file, _) in plan {
                        let r = try await Subprocess.run(lnote, ["import", folder, doc, "#1", file])
                        if r.status != 0 { shared.failures.withLock { $0.append("import: \(r.code) \(r.errText)") } }
                    }
                    shared.writing.withLock { $0 -= 1 }
                }
            }
            group.addTask {
                while shared.writing.withLock({ $0 }) > 0 {
                    let r = try await Subprocess.run(lnote, ["show", folder, doc, "#1", "--json", "--points"])
                    if r.status != 0 {
                        shared.failures.withLock { $0.append("show: \(r.code) \(r.errText)") }
                    } else {
                        shared.shows.withLock { $0.append(r.outText) }
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(shared.failures.withLock { $0 }.isEmpty, "seed \(seed): \(shared.failures.withLock { $0 })")
        let final = try await run("show", folder, doc, "#1", "--json", "--points").outText
        let finalElements = try Self.elements(final)
        let total = plans.flatMap { $0 }.reduce(0) { $0 + $1.count }
        #expect(finalElements.count == total, "seed \(seed)")
        // Every writer's strokes exactly once; one replica, counters 1…total.
        let ids = finalElements.map(\.id)
        #expect(Set(ids).count == total)
        #expect(Set(ids.map { $0.split(separator: ".")[0] }).count == 1)
        #expect(Set(ids.map { UInt64($0.split(separator: ".")[1])! }) == Set(1...UInt64(total)))
        let byID = Dictionary(uniqueKeysWithValues: finalElements.map { ($0.id, $0.json) })
        // Each state shown is a prefix of the final one: the elements of counters 1…k, each
        // as it is in the end.
        let seen = shared.shows.withLock { $0 }
        #expect(!seen.isEmpty)
        for text in seen {
            let els = try Self.elements(text)
            let counters = els.map { UInt64($0.id.split(separator: ".")[1])! }
            #expect(Set(counters) == Set(counters.isEmpty ? [] : Array(1...UInt64(counters.count))),
                    "seed \(seed): a state that is not a prefix: counters \(counters.sorted())")
            for e in els { #expect(byID[e.id] == e.json, "seed \(seed): element \(e.id) differs from the final state") }
        }
        let verify = try await Subprocess.run(lnote, ["verify", folder])
        #expect(verify.status == 0, "\(verify.outText) \(verify.errText)")
    }

    /// The elements of `lnote show … PAGE --json`: each one's id and canonical JSON text.
    static func elements(_ json: String) throws -> [(id: String, json: String)] {
        let object = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any]
        let list = object?["elements"] as? [[String: Any]] ?? []
        return try list.map { e in
            (e["id"] as? String ?? "?", String(decoding: try JSONSerialization.data(withJSONObject: e, options: [.sortedKeys]), as: UTF8.self))
        }
    }

    @Test("[PKG-80] [PKG-81] a process killed with SIGKILL while holding a document lock blocks nobody: the waiting append takes the lock and succeeds")
    func killedHolder() async throws {
        let dir = try TempDir()
        let folder = dir.sub("nb")
        _ = try await run("init", folder)
        let doc = try await run("new", folder, "--title", "Killed").outText.trimmingCharacters(in: .whitespacesAndNewlines)
        let file = dir.sub("one.jsonl")
        try Data(Self.strokes(writer: 1, from: 0, count: 1).utf8).write(to: URL(fileURLWithPath: file))
        let lockPath = "\(folder)/\(doc).lnote/lock"
        // A process holds the document lock (flock(1), as any other implementation may);
        // `--close` keeps the lock out of its child, so that killing flock kills the holder.
        // The child's sleep writes nowhere: holding the output pipes, it kept `holder.wait()`
        // waiting for their end a whole minute after flock was killed.
        let holder = try Subprocess.start("/usr/bin/flock", ["--exclusive", "--close", lockPath, "/bin/sh", "-c",
                                                             "echo held; exec sleep 60 >/dev/null 2>&1 </dev/null"])
        #expect(await holder.waitForOutput("held"))
        let importing = try Subprocess.start(lnote, ["import", folder, doc, "#1", file])
        try await Task.sleep(for: .milliseconds(300))
        #expect(importing.process.isRunning, "the import went through while the lock was held")
        let killed = ContinuousClock.now
        holder.kill(SIGKILL)
        let r = await importing.wait()
        let took = ContinuousClock.now - killed
        // It succeeded: it took the lock the kernel released at the kill, within its 10 s
        // lockTimeout ([PKG-81]); how soon is a figure, not a test.
        #expect(r.status == 0, "\(r.errText)")
        print("the append finished \(took) after the holder died")
        _ = await holder.wait()

        // An lnote writer killed at a random moment of a big import (most of which it spends
        // holding the lock): the next import succeeds (the lock is free, the torn tail cut).
        let seed = UInt64.random(in: 0...UInt64.max)
        var rng = SplitMix64(seed: seed)
        let big = dir.sub("big.jsonl")
        try Data(Self.strokes(writer: 2, from: 0, count: 20_000).utf8).write(to: URL(fileURLWithPath: big))
        for round in 0..<3 {
            let writer = try Subprocess.start(lnote, ["import", folder, doc, "#1", big])
            try await Task.sleep(for: .milliseconds(Int64(rng.int(in: 50...600))))
            writer.kill(SIGKILL)
            _ = await writer.wait()
            let start = ContinuousClock.now
            let next = try await Subprocess.run(lnote, ["import", folder, doc, "#1", file])
            #expect(next.status == 0, "seed \(seed) round \(round): \(next.errText)")
            print("round \(round): the next import took \(ContinuousClock.now - start)")
        }
        let verify = try await Subprocess.run(lnote, ["verify", folder])
        #expect(verify.status == 0, "seed \(seed): \(verify.outText) \(verify.errText)")
    }

    @Test("[PKG-61] import and show in other processes while this process holds the folder and a document open, and `lnote watch` runs")
    func besideAnOpenNotebook() async throws {
        let dir = try TempDir()
        let folder = dir.sub("nb")
        var o = StoreOptions()
        o.autosave = false
        let nb = try await Notebook.open(at: folder, create: true, options: o)
        let d = try await nb.createDocument(title: "Open here")
        let p = try #require(await d.pageList.first?.id)
        try await d.addStroke(Stroke(points: [StrokePoint(x: 0, y: 0), StrokePoint(x: 10, y: 10)]), to: p)
        let watch = try Subprocess.start(lnote, ["watch", folder, d.id.description, "--json"])
        // Once the watcher prints a change made here, it is watching.
        var live = false
        for i in 0..<40 where !live {
            try await d.setTitle("ping \(i)")
            live = await watch.waitForOutput("ping \(i)", seconds: 0.5)
        }
        #expect(live, "watch printed: \(watch.outputSoFar)")
        let file = dir.sub("s.jsonl")
        try Data(Self.strokes(writer: 3, from: 0, count: 2).utf8).write(to: URL(fileURLWithPath: file))
        let imported = try await run("import", folder, d.id.description, "#1", file).outText
            .split(separator: "\n").map(String.init)
        #expect(imported.count == 2)
        let shown = try await run("show", folder, d.id.description, "#1", "--json").outText
        #expect(try Self.elements(shown).count == 3)
        // This process sees them at its next read.
        #expect(try await d.elements(p).count == 3)
        // And so does `lnote watch`, as other processes' changes.
        for id in imported { #expect(await watch.waitForOutput(id, seconds: 10), "watch printed: \(watch.outputSoFar)") }
        try await d.setTitle("Renamed here")
        #expect(await watch.waitForOutput("Renamed here", seconds: 10), "watch printed: \(watch.outputSoFar)")
        watch.kill(SIGTERM)
        let w = await watch.wait()
        #expect(w.status == 0, "\(w.errText)")
        let lines = w.outText.split(separator: "\n")
        let added = lines.filter { $0.contains("\"elementsAdded\"") }
        #expect(!added.isEmpty && added.allSatisfy { $0.contains("\"otherProcess\"") }, "\(w.outText)")
        #expect(lines.contains { $0.contains("\"documentRetitled\"") && $0.contains("\"otherProcess\"") })
        try await nb.close()
    }

    @Test("[PKG-61] [SYNC-72] lnote serve keeps serving while import and show run on its folder; the imports reach a syncing client, and one watching")
    func serveBesideImportAndShow() async throws {
        let dir = try TempDir()
        let folder = dir.sub("served"), client = dir.sub("client")
        _ = try await run("init", folder)
        _ = try await run("init", client)
        let doc = try await run("new", folder, "--title", "Served").outText.trimmingCharacters(in: .whitespacesAndNewlines)
        let serve = try Subprocess.start(lnote, ["serve", folder, "--port", "0"])
        defer { serve.kill(SIGKILL) }
        #expect(await serve.waitForOutput("token: "), "\(serve.outputSoFar)")
        let printed = serve.outputSoFar.split(separator: "\n")
        let url = try #require(printed.first { $0.hasPrefix("url: ") }.map { String($0.dropFirst(5)) })
        let token = try #require(printed.first { $0.hasPrefix("token: ") }.map { String($0.dropFirst(7)) })
        // Imports and shows on the served folder, from other processes, while it serves.
        var imported: [String] = []
        for round in 0..<3 {
            let file = dir.sub("r\(round).jsonl")
            try Data(Self.strokes(writer: 5, from: round * 2, count: 2).utf8).write(to: URL(fileURLWithPath: file))
            imported += try await run("import", folder, doc, "#1", file).outText.split(separator: "\n").map(String.init)
            let shown = try Self.elements(try await run("show", folder, doc, "#1", "--json").outText)
            #expect(shown.map(\.id) == imported)
        }
        _ = try await run("sync", client, url, "--token", token)
        let served = try await run("show", folder, doc, "#1", "--json", "--points").outText
        #expect(try await run("show", client, doc, "#1", "--json", "--points").outText == served)
        // A client watching (a long poll held at the server): an import on the served folder
        // reaches it without anything else asking.
        let watch = try Subprocess.start(lnote, ["sync", client, url, "--token", token, "--watch"])
        // (Its first round moves nothing, so prints nothing; an import before its long poll is
        // held is in that poll's answer all the same: the poll carries the last cursor.)
        #expect(await watch.waitForOutput(" watching "), "\(watch.outputSoFar)")
        let file = dir.sub("late.jsonl")
        try Data(Self.strokes(writer: 6, from: 0, count: 1).utf8).write(to: URL(fileURLWithPath: file))
        let late = try await run("import", folder, doc, "#1", file).outText.trimmingCharacters(in: .whitespacesAndNewlines)
        var arrived = false
        for _ in 0..<100 where !arrived {
            try await Task.sleep(for: .milliseconds(100))
            arrived = try Self.elements(try await run("show", client, doc, "#1", "--json").outText).contains { $0.id == late }
        }
        #expect(arrived, "watch printed: \(watch.outputSoFar)")
        watch.kill(SIGTERM)
        #expect(await watch.wait().status == 0)
        serve.kill(SIGTERM)
        let s = await serve.wait()
        #expect(s.status == 0, "\(s.errText)")
    }
}
