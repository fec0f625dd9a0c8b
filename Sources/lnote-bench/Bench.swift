import Foundation
import LnoteModel

/// One benchmark run: the options, the workspace, the stroke source and the figures so far.
@MainActor
final class Bench {
    let options: BenchOptions
    let ws: Workspace
    let source: StrokeSource
    var results: Results
    /// Built by the first of cases 4 and 9 that needs each (case 9 opens the smooth one).
    var fixtures: [InkProfile: OpenPageFixture] = [:]

    static let titles = [
        1: "density", 2: "SQLite case", 3: "append to a big page", 4: "open a page", 5: "save one page",
        6: "merge", 7: "sync over HTTP", 8: "library listing", 9: "peak memory of opening a page",
        10: "live sync: long polls and watchers", 11: "concurrent appends from two processes",
        12: "first sync of a new folder", 13: "time travel: a page as of the middle of its history",
        14: "undo and redo of one step", 15: "relay throughput: SQLite, PostgreSQL, three relays on PostgreSQL",
        16: "first pull of a 200-document notebook from a relay on PostgreSQL",
        17: "pages drawn by cairo: thumbnails, PDF export",
        18: "thumbnails off the save path",
    ]

    init(_ options: BenchOptions) throws {
        self.options = options
        source = try StrokeSource(seed: options.seed, strokesPath: options.strokesPath)
        ws = try Workspace()
        results = Results(machine: MachineInfo.collect(options: options, workDir: ws.root))
        results.machine.fdatasync = (try? Files.fdatasyncProbe(in: ws.root)) ?? .nan
    }

    func runCase(_ n: Int) async throws {
        switch n {
        case 1: try await caseDensity()
        case 2: try await caseSQLite()
        case 3: try await caseAppend()
        case 4: try await caseOpenPage()
        case 5: try await caseSave()
        case 6: try await caseMerge()
        case 7: try await caseSync()
        case 8: try await caseListing()
        case 9: try await caseMemory()
        case 10: try await caseLive()
        case 11: try await caseConcurrent()
        case 12: try await caseFirstSync()
        case 13: try await caseTimeTravel()
        case 14: try await caseUndo()
        case 15: try await caseRelayThroughput()
        case 16: try await caseFirstPullPostgres()
        case 17: try await caseRender()
        case 18: try await caseThumbnails()
        default: break
        }
    }

    /// Runs the selected cases, prints the table, writes the JSON. Returns the exit status:
    /// 0 even when targets do not hold (that is a finding, shown in the table), 1 when a
    /// case failed to run or the JSON could not be written.
    func run() async -> Int32 {
        defer { ws.remove() }
        let clock = ContinuousClock()
        let start = clock.now
        if isDebugBuild { progress("warning: debug build; run `swift run -c release lnote-bench` for real figures") }
        if source.realStrokes != nil, let p = options.strokesPath {
            results.notes.append("real strokes from \(p): \(formatCount(source.realStrokes!.count)) strokes on "
                                 + "\(source.realPages!.count) pages; cases 2 (3,400-point strokes), 3 (the added 160-point stroke), "
                                 + "6 (the added short strokes) and the density row of generated strokes use the generator")
        }
        var failed = false
        for n in Bench.titles.keys.sorted() where options.runs(n) {
            progress("case \(n): \(Bench.titles[n]!)…")
            let caseStart = clock.now
            do {
                try await runCase(n)
                progress(String(format: "case \(n) done in %.1f s", seconds(clock.now - caseStart)))
            } catch {
                failed = true
                progress("case \(n) failed: \(error)")
                results.skipped.append(Skipped(caseNumber: n, reason: "failed: \(error)"))
            }
        }
        results.machine.loadAverageAfter = MachineInfo.loadAverage()
        results.notes.append(String(format: "total wall time %.0f s", seconds(clock.now - start)))

        print(results.markdownTable())
        print("")
        for l in results.noteLines() { print(l) }
        print("")
        for l in results.machineLines() { print(l) }
        let holding = results.rows.compactMap(\.holds)
        print("\ntargets: \(holding.filter { $0 }.count) hold, \(holding.filter { !$0 }.count + results.skipped.count) do not"
              + (options.quick ? " (--quick: smaller sizes than the targets are set for, a smoke test only)" : ""))
        if let path = options.jsonPath {
            do { try results.writeJSON(to: path) } catch {
                progress("cannot write \(path): \(error)")
                failed = true
            }
        }
        return failed ? 1 : 0
    }
}
