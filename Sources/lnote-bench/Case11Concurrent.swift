import Foundation
import LnoteModel
import LnoteReplication
import LnoteStore

extension Bench {
    /// 11. Concurrent appends: two processes of the same replica (the same notebook folder)
    /// each append 1,000 strokes, one durable append at a time, to the same page at once;
    /// against one process appending all 2,000 alone. Checked after each concurrent run:
    /// every stroke is present exactly once, the log is valid, and the replica's counters
    /// in the page log are 1, 2, … 2,000 in log order ([LOG-2]: no counter allocated twice).
    func caseConcurrent() async throws {
        let total = options.size(2000, quick: 400)
        let runs = min(options.runs, options.quick ? 2 : 5)
        let dir = try ws.directory("case11")
        let exe = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        // A template notebook with one empty page, copied for every run.
        let template = dir + "/template"
        var storeOptions = StoreOptions()
        storeOptions.autosave = false
        let nb = try await Notebook.open(at: template, create: true, options: storeOptions)
        let doc = try await nb.createDocument(title: "case 11")
        let page = await doc.pageList[0].id
        let docID = doc.id
        try await nb.close()

        var n = 0
        func fresh() throws -> String {
            n += 1
            let path = dir + "/run-\(n)"
            try FileManager.default.copyItem(atPath: template, toPath: path)
            return path
        }
        func spawn(_ folder: String, writer: Int, count: Int) throws -> Process {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: exe)
            p.arguments = ["--child", "append", folder, docID.description, page.description, String(writer), String(count)]
            p.standardOutput = FileHandle.nullDevice
            let err = Pipe()
            p.standardError = err
            try p.run()
            return p
        }
        func wait(_ ps: [Process]) async throws {
            for p in ps {
                while p.isRunning { try await Task.sleep(for: .milliseconds(1)) }
                guard p.terminationStatus == 0 else {
                    let e = (p.standardError as? Pipe)?.fileHandleForReading.readDataToEndOfFile() ?? Data()
                    throw LnoteError(.io, "append child failed (status \(p.terminationStatus)): "
                                     + String(decoding: e.prefix(2000), as: UTF8.self))
                }
            }
        }
        var checked: [String] = []
        var folder = ""
        let alone = Variant(name: "one process, \(formatCount(total)) appends", setup: { folder = try fresh() }, body: {
            try await wait([try spawn(folder, writer: 0, count: total)])
        })
        let together = Variant(name: "two processes, \(formatCount(total / 2)) appends each", setup: { folder = try fresh() }, body: {
            let a = try spawn(folder, writer: 1, count: total / 2)
            let b = try spawn(folder, writer: 2, count: total / 2)
            try await wait([a, b])
            checked.append(folder)
        })
        let t = try await measure([alone, together], runs: runs)
        var failures: [String] = []
        for f in checked {
            if let problem = try await Bench.checkConcurrentRun(folder: f, document: docID, page: page, perWriter: total / 2) {
                failures.append(problem)
            }
        }
        let ok = failures.isEmpty
        results.rows.append(Row(11, "two processes of one replica appending \(formatCount(total / 2)) strokes each to one page at once",
                                measured: t[1].median, unit: .seconds,
                                baselineName: "one process appending \(formatCount(total)) alone", baseline: t[0].median,
                                target: .ratioAtMost(2),
                                note: "each stroke one durable append (`addStroke`: document lock, catch-up with the other "
                                    + "process's frames, write, fdatasync); processes started by `lnote-bench --child append`, "
                                    + "their start-up inside the time; median of \(runs) interleaved runs",
                                measuredRuns: t[1].runs, baselineRuns: t[0].runs))
        results.rows.append(Row(11, "after each concurrent run: all \(formatCount(total)) strokes present exactly once, "
                                + "the log valid, counters 1…\(formatCount(total)) in log order",
                                measured: Double(checked.count - failures.count), unit: .count,
                                baselineName: "runs checked", baseline: Double(checked.count),
                                target: .condition("every run", ok),
                                note: ok ? "checked by reading the page and scanning its log (Verify: no problem in the folder)"
                                    : failures.joined(separator: "; ")))
    }

    /// What is wrong with a folder after a concurrent run, or nil.
    static func checkConcurrentRun(folder: String, document: DocumentID, page: PageID, perWriter: Int) async throws -> String? {
        let report = try Verify.run(folder: folder)
        if !report.problems.isEmpty { return "\(folder): verify: \(report.problems.map(\.description).joined(separator: ", "))" }
        var o = StoreOptions()
        o.autosave = false
        let nb = try await Notebook.open(at: folder, options: o)
        do {
            let problem = try await checkConcurrentPage(nb, folder: folder, document: document, page: page, perWriter: perWriter)
            try await nb.close()
            return problem
        } catch {
            try? await nb.close()
            throw error
        }
    }

    private static func checkConcurrentPage(_ nb: Notebook, folder: String, document: DocumentID, page: PageID,
                                            perWriter: Int) async throws -> String? {
        let d = try await nb.openDocument(document)
        let elements = try await d.elements(page)
        var markers: [Int: Int] = [:]
        for e in elements {
            guard case .stroke(let s) = e.content, let first = s.points.first else { return "\(folder): a non-stroke element" }
            markers[Int(first.x), default: 0] += 1
        }
        let expected = Set((1...2).flatMap { w in (0..<perWriter).map { ConcurrentAppendChild.marker(writer: w, index: $0) } })
        if elements.count != 2 * perWriter || Set(markers.keys) != expected || markers.values.contains(where: { $0 != 1 }) {
            return "\(folder): \(elements.count) elements, \(markers.count) distinct strokes (expected \(2 * perWriter) exactly once)"
        }
        let ops = try await d.operations(page: page, notCoveredBy: VectorClock())
        let counters = ops.map(\.id.counter)
        if counters != Array(1...UInt64(2 * perWriter)) || Set(ops.map(\.id.replica)).count != 1 {
            return "\(folder): counters in log order are not 1…\(2 * perWriter) of one replica"
        }
        return nil
    }
}

/// `lnote-bench --child append FOLDER DOCUMENT PAGE WRITER COUNT`: appends COUNT strokes to
/// the page, one `addStroke` (one durable append) at a time; writer W's stroke i starts at
/// x = `marker(W, i)`.
enum ConcurrentAppendChild {
    static func marker(writer: Int, index: Int) -> Int { writer * 100_000 + index }

    static func stroke(writer: Int, index: Int) -> Stroke {
        let x0 = Int32(marker(writer: writer, index: index))
        return Stroke(points: (0..<24).map { (k: Int) -> StrokePoint in
            let x: Int32 = x0 + Int32(k * 7)
            let y: Int32 = 1_000 + Int32(k * k % 97)
            return StrokePoint(x: x, y: y, pressure: UInt16(400 + k * 10), t: UInt32(k * 8))
        })
    }

    static func run(_ args: [String]) async -> Int32 {
        do {
            guard args.count == 6, args[0] == "append", let doc = DocumentID(args[2]), let page = PageID(args[3]),
                  let writer = Int(args[4]), let count = Int(args[5]) else {
                throw LnoteError(.invalidArgument, "usage: --child append FOLDER DOCUMENT PAGE WRITER COUNT")
            }
            var o = StoreOptions()
            o.autosave = false
            let nb = try await Notebook.open(at: args[1], options: o)
            let d = try await nb.openDocument(doc)
            for i in 0..<count { try await d.addStroke(stroke(writer: writer, index: i), to: page) }
            try await nb.close()
            return 0
        } catch {
            FileHandle.standardError.write(Data("lnote-bench child: \(error)\n".utf8))
            return 1
        }
    }
}
