import Foundation
import Testing
import LnoteModel
import LnoteStore
import LnoteTestSupport

/// What a push of long strokes costs a real `lnote relay` process in memory: a valid frame of
/// 256 KiB (82 KB in the `add` form) can hold a million points ([LOG-23]), about 20 MiB once decoded.
@Suite struct RelayMemoryCLITests {
    /// VmHWM (peak) and VmRSS of a process, in bytes.
    static func memory(of pid: Int32) throws -> (peak: Int, resident: Int) {
        let text = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        func kB(_ key: String) throws -> Int {
            let line = try #require(text.split(separator: "\n").first { $0.hasPrefix(key + ":") }, "no \(key) in /proc/\(pid)/status")
            return try #require(Int(line.split(separator: " ").dropFirst().first ?? ""), "\(line)") * 1024
        }
        return (try kB("VmHWM"), try kB("VmRSS"))
    }

    @Test("[SYNC-24] a relay checks a push one operation at a time: 4 strokes of 1,048,576 points raise its peak memory by about one stroke's decoded points, not by all of them, and the next device receives them all",
          .enabled(if: FileManager.default.fileExists(atPath: "/proc/self/status"), "reads VmHWM from /proc"))
    func longStrokesPushed() async throws {
        let sb = try Sandbox("relay-long-strokes")
        defer { sb.remove() }
        let strokes = 4
        // A regular zigzag: about 256 KiB a frame, 20 MiB a stroke decoded (20 bytes a point).
        var options = StoreOptions()
        options.autosave = false
        let nb = try await Notebook.open(at: sb.sub("laptop"), create: true, options: options)
        let doc = try await nb.createDocument(title: "long strokes")
        let page = await doc.pageList[0].id
        for k in 0..<strokes {
            let points = (0..<Stroke.maxPoints).map { i in
                StrokePoint(x: Int32(100 + i % 1_000), y: Int32(100 + 20 * k + (i / 1_000) % 16), pressure: 500, radius: 10, t: 0)
            }
            _ = try await doc.addStroke(Stroke(style: InkStyle(), points: points), to: page)
        }
        let docID = doc.id
        try await doc.close()
        try await nb.close()

        let db = sb.sub("relay.sqlite")
        let id = try await sb.ok("relay", "notebook", "create", "--db", db)
        let laptop = try await sb.ok("relay", "token", "create", "--db", db, "--notebook", id, "--device", "laptop")
        let desk = try await sb.ok("relay", "token", "create", "--db", db, "--notebook", id, "--device", "desk")
        let relay = try Subprocess.start(lnoteBinary, ["relay", "--db", db, "--port", "0"])
        // Stopped and reaped before the sandbox goes, whatever happens: a relay still shutting
        // down writes its high-water mark into the directory being removed, which stays behind.
        do {
            #expect(await relay.waitForOutput("url: "))
            #expect(await relay.waitForOutput("\n"))
            let base = relay.outputSoFar.split(separator: "\n").first { $0.hasPrefix("url: ") }.map { String($0.dropFirst(5)) } ?? ""
            let url = "\(base)/v1/notebooks/\(id)"
            let before = try Self.memory(of: relay.pid)

            let push = try await sb.run("sync", sb.sub("laptop"), url, "--token", laptop, "--json")
            #expect(push.code == 0, "\(push)")
            let after = try Self.memory(of: relay.pid)
            let pushed = try #require(try JSONSerialization.jsonObject(with: Data(push.out.utf8)) as? [String: Any])
            #expect((pushed["ops_accepted"] as? Int ?? 0) > strokes && pushed["ops_accepted"] as? Int == pushed["ops_sent"] as? Int,
                    "\(push.out)")
            let stroke = Stroke.maxPoints * MemoryLayout<StrokePoint>.stride
            // One stroke decoded at a time, and what encoding it for its content hash takes: well
            // under three strokes' worth. All four decoded together took more than four.
            #expect(after.peak - before.peak < 3 * stroke,
                    "relay peak grew by \(after.peak - before.peak) bytes for \(strokes) strokes of \(stroke) bytes decoded each")

            // What the relay stored is whole: another device receives every point.
            let pull = try await sb.run("sync", sb.sub("desk"), url, "--token", desk, "--init")
            #expect(pull.code == 0, "\(pull)")
            _ = try await sb.ok("verify", sb.sub("desk"))
            let held = try await sb.ok("show", sb.sub("laptop"), docID.description, page.description, "--json")
            let received = try await sb.ok("show", sb.sub("desk"), docID.description, page.description, "--json")
            #expect(received == held)
            #expect(held.components(separatedBy: "\"pointCount\": \(Stroke.maxPoints),").count - 1 == strokes, "\(held.prefix(2_000))")
        } catch {
            relay.kill(SIGTERM)
            _ = await relay.wait()
            throw error
        }
        relay.kill(SIGTERM)
        _ = await relay.wait()
    }
}
