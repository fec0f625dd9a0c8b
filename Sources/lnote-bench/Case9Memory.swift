import Foundation
import LnoteModel
import LnoteStore

extension Bench {
    /// 9. Peak memory of opening the 2,000-stroke page (case 4's), in a child process: the
    /// growth of peak RSS (VmHWM, reset just before the open) over the RSS before it,
    /// against the decoded points' own size.
    func caseMemory() async throws {
        let f = try await openPageFixture()
        let exe = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        var growth: [Double] = []
        var last: ChildReport? = nil
        for _ in 0..<max(options.runs, 3) {
            try f.restore()
            let r = try runChild(exe, ["--child", "open-page", f.notebookPath, f.document.description, f.page.description,
                                       f.warmDocument.description, f.warmPage.description])
            guard r.resetPeak else { throw LnoteError(.invalidState, "cannot reset VmHWM (/proc/self/clear_refs)") }
            growth.append(Double(r.hwm - r.rssBefore))
            last = r
        }
        try f.restore()
        guard let last, last.points == f.pointCount else {
            throw LnoteError(.invalidState, "the child opened \(last?.points ?? 0) points; expected \(f.pointCount)")
        }
        let stride = MemoryLayout<StrokePoint>.stride
        let own = Double(f.pointCount * stride)
        results.rows.append(Row(9, "peak RSS growth, opening the \(formatCount(f.strokes.count))-stroke page", measured: Timing.median(growth),
                                unit: .bytes, baselineName: "points × \(stride) B (StrokePoint stride)", baseline: own,
                                target: .ratioAtMost(2),
                                note: "child process: VmHWM reset (clear_refs 5) after the document is open and a small page was "
                                    + "opened to page in the code, then the page is loaded; growth = VmHWM − VmRSS before; "
                                    + "\(formatCount(f.pointCount)) points; RSS still held after the open: "
                                    + formatBytes(Double(last.rssAfter - last.rssBefore)),
                                measuredRuns: growth))
    }

    struct ChildReport: Codable {
        var rssBefore: Int
        var hwm: Int
        var rssAfter: Int
        var points: Int
        var elements: Int
        var resetPeak: Bool
    }

    func runChild(_ exe: String, _ args: [String]) throws -> ChildReport {
        let data = try Bench.run(exe, args, what: "child \(args.prefix(2).joined(separator: " "))")
        return try JSONDecoder().decode(ChildReport.self, from: data)
    }
}

/// The child side of `--child`: runs one measurement and prints it as JSON.
enum Child {
    static func run(_ args: [String]) async -> Int32 {
        do {
            guard args.first == "open-page", args.count == 6,
                  let doc = DocumentID(args[2]), let page = PageID(args[3]),
                  let warmDoc = DocumentID(args[4]), let warmPage = PageID(args[5]) else {
                throw LnoteError(.invalidArgument, "usage: --child open-page NOTEBOOK DOCUMENT PAGE WARM-DOCUMENT WARM-PAGE")
            }
            var o = StoreOptions()
            o.autosave = false
            o.compactAfterBytes = .max
            o.compactAfterFrames = .max
            let notebook = try await Notebook.open(at: args[1], options: o)
            let warm = try await notebook.openDocument(warmDoc)
            _ = try await warm.elements(warmPage)
            let d = try await notebook.openDocument(doc)
            let reset = Memory.resetPeak()
            let before = Memory.status()
            let elements = try await d.elements(page)
            let after = Memory.status()
            let points = elements.reduce(0) { $0 + $1.content.pointCount }
            let report = Bench.ChildReport(rssBefore: before.rss, hwm: after.hwm, rssAfter: after.rss, points: points,
                                           elements: elements.count, resetPeak: reset)
            withExtendedLifetime(elements) {}
            let data = try JSONEncoder().encode(report)
            FileHandle.standardOutput.write(data)
            // Exit without closing: closing would snapshot the replayed page (the parent
            // restores the pristine files anyway).
            return 0
        } catch {
            FileHandle.standardError.write(Data("lnote-bench child: \(error)\n".utf8))
            return 1
        }
    }
}
