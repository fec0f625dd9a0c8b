import Foundation
import Testing
import LnoteTestSupport

/// `lnote watch`: other processes' changes, printed as they happen.
@Suite struct WatchCommandTests {
    @Test("[PKG-95] lnote watch prints documents created and retitled by other processes, one JSON object per line")
    func notebookWatch() async throws {
        let sb = try Sandbox("watch")
        defer { sb.remove() }
        try await sb.ok("init", "nb")
        let first = try await sb.ok("new", "nb", "--title", "First")
        let watch = try Subprocess.start(lnoteBinary, ["watch", "nb", "--json"], directory: sb.path)
        // Watching once a retitle made by another process shows up.
        var live = false
        for i in 0..<40 where !live {
            try await sb.ok("title", "nb", first, "ping \(i)")
            live = await watch.waitForOutput("ping \(i)", seconds: 0.5)
        }
        #expect(live, "\(watch.outputSoFar)")
        // A right-to-left override in a title: JSON holds it as it is (the text form escapes it).
        let second = try await sb.ok("new", "nb", "--title", "Second \u{202E}fdp.exe")
        #expect(await watch.waitForOutput(second, seconds: 10), "\(watch.outputSoFar)")
        try await sb.ok("rm", "nb", second)
        #expect(await watch.waitForOutput("documentDeleted", seconds: 10), "\(watch.outputSoFar)")
        watch.kill(SIGINT)
        let r = await watch.wait()
        #expect(r.status == 0, "\(r.errText)")
        #expect(r.errText.contains("watching") && r.errText.contains("stopped (SIGINT)"), "\(r.errText)")
        var created = false
        for line in r.outText.split(separator: "\n") {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "\(line)")
            #expect(object["kind"] is String && object["origin"] as? String == "otherProcess", "\(line)")
            if object["kind"] as? String == "documentCreated", object["document"] as? String == second {
                created = object["title"] as? String == "Second \u{202E}fdp.exe"
            }
        }
        #expect(created, "\(r.outText)")
    }

    @Test("lnote watch stops with exit 1 at the first line it cannot write (a full disk) rather than drop every later one")
    func watchStopsWhenItsOutputIsLost() async throws {
        let sb = try Sandbox("watchfull")
        defer { sb.remove() }
        try await sb.ok("init", "nb")
        let doc = try await sb.ok("new", "nb", "--title", "Doc")
        let watch = try Subprocess.start("/bin/sh", ["-c", "exec \"$0\" watch nb > /dev/full", lnoteBinary], directory: sb.path)
        let deadline = Task {
            try await Task.sleep(for: .seconds(30))
            watch.kill(SIGKILL)
        }
        // Changes until one reaches the watch (it may start watching after the first few).
        for i in 0..<40 where watch.process.isRunning {
            try await sb.ok("title", "nb", doc, "ping \(i)")
            try await Task.sleep(for: .milliseconds(250))
        }
        let r = await watch.wait()
        deadline.cancel()
        #expect(r.status == 1, "exit \(r.code): \(r.errText)")
        #expect(r.errText.contains("standard output could not be written (No space left on device); it stopped"), "\(r.errText)")
        #expect(!r.errText.contains("stopped (SIG"), "\(r.errText)")
    }

    @Test("lnote watch DOC prints element changes in plain lines; a folder that is not a notebook is refused")
    func documentWatchAndErrors() async throws {
        let sb = try Sandbox("watchdoc")
        defer { sb.remove() }
        try await sb.ok("init", "nb")
        let doc = try await sb.ok("new", "nb", "--title", "Doc")
        try sb.write("s.jsonl", "{\"points\": [[0, 0], [5, 5], [9, 3]]}\n")
        let watch = try Subprocess.start(lnoteBinary, ["watch", "nb", doc], directory: sb.path)
        var live = false
        for i in 0..<40 where !live {
            try await sb.ok("title", "nb", doc, "ping \(i)")
            live = await watch.waitForOutput("ping \(i)", seconds: 0.5)
        }
        #expect(live, "\(watch.outputSoFar)")
        let id = try await sb.ok("import", "nb", doc, "#1", "s.jsonl")
        #expect(await watch.waitForOutput("elementsAdded otherProcess", seconds: 10), "\(watch.outputSoFar)")
        #expect(await watch.waitForOutput(id, seconds: 10))
        watch.kill(SIGTERM)
        let r = await watch.wait()
        #expect(r.status == 0, "\(r.errText)")
        let bad = try await sb.run("watch", sb.path)
        #expect(bad.code == 1 && bad.err.contains("not a notebook folder"), "\(bad)")
        let usage = try await sb.run("watch")
        #expect(usage.code == 2)
    }
}
