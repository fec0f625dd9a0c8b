// lnote-crashtest: a writer for crash tests. It edits a notebook through the public
// LnoteStore API and prints one line on stdout after each call returns (so after the edit
// is durable); the test kills it with SIGKILL at a random instant, reopens the notebook and
// checks that every printed edit is there and nothing is damaged.
//
//   lnote-crashtest <notebook-folder> <seed>
//   lnote-crashtest --thumbnails <notebook-folder> <delay-ms>
//
// The second form ([PKG-103]) adds a stroke to each page of the folder's first document (two
// pages, made on the first run), flushes, prints `S <page>` per page and `saved`, then waits
// for ever: its background thumbnails start `delay-ms` after the save, so a kill right after
// `saved` lands between the save and the pictures.
//
// Lines: `A <page> <element>` (stroke added), `E <page> <element>` (erased),
//        `X <page> <element>` (about to erase: printed before the call),
//        `P <page>` (page added), `T <title>` (title set).
#if canImport(Glibc)
import Glibc
#endif
import Foundation
import LnoteModel
import LnoteReplication
import LnoteStore

/// The seeded generator the model ships (SplitMix64): one definition for every test.
typealias SplitMix = SplitMix64

/// Unbuffered: each line leaves the process before the next edit starts.
func say(_ line: String) {
    let bytes = Array((line + "\n").utf8)
    var done = 0
    while done < bytes.count {
        let n = bytes.withUnsafeBytes { write(1, $0.baseAddress! + done, bytes.count - done) }
        if n < 0 { if errno == EINTR { continue }; exit(3) }
        done += n
    }
}

func run() async throws {
    let args = CommandLine.arguments
    guard args.count >= 3, let seed = UInt64(args[2]) else {
        FileHandle.standardError.write("usage: lnote-crashtest <folder> <seed>\n".data(using: .utf8)!)
        exit(2)
    }
    var rng = SplitMix(seed: seed)
    var options = StoreOptions()
    options.autosaveDelay = .milliseconds(Int.random(in: 1...10, using: &rng))
    options.compactAfterFrames = Int.random(in: 3...20, using: &rng)
    if Bool.random(using: &rng) { options.groupCommit = GroupCommit(maxDelay: .milliseconds(2), maxFrames: 4) }
    let nb = try await Notebook.open(at: args[1], create: true, options: options)
    let doc: Document
    if let first = try await nb.list(includeDeleted: true).first {
        doc = try await nb.openDocument(first.id)
    } else {
        doc = try await nb.createDocument(title: "crash")
    }
    var pages = await doc.pageList.map(\.id)
    if pages.isEmpty {
        let p = try await doc.addPage()
        say("P \(p)")
        pages = [p]
    }
    var mine: [(PageID, ElementID)] = []
    for i in 0..<1_000_000 {
        let roll = Int.random(in: 0..<100, using: &rng)
        if roll < 3 {
            let p = try await doc.addPage()
            pages.append(p)
            say("P \(p)")
        } else if roll < 5 {
            let t = "title \(seed) \(i)"
            try await doc.setTitle(t)
            say("T \(t)")
        } else if roll < 15, !mine.isEmpty {
            let (p, e) = mine.remove(at: Int.random(in: 0..<mine.count, using: &rng))
            say("X \(p) \(e)")  // intent: if killed now, the erase may or may not be durable
            try await doc.erase([e], on: p)
            say("E \(p) \(e)")
        } else if roll < 20 {
            // Several strokes at once: one append, one sync.
            let p = pages.randomElement(using: &rng)!
            let n = Int.random(in: 2...6, using: &rng)
            var strokes: [Stroke] = []
            for k in 0..<n {
                var points: [StrokePoint] = []
                for j in 0..<(k + 2) { points.append(StrokePoint(x: Int32(j * 10), y: Int32(i % 1000), t: UInt32(j))) }
                strokes.append(Stroke(points: points))
            }
            for e in try await doc.addStrokes(strokes, to: p) {
                mine.append((p, e))
                say("A \(p) \(e)")
            }
        } else {
            let p = pages.randomElement(using: &rng)!
            let n = Int.random(in: 1...40, using: &rng)
            var points: [StrokePoint] = []
            for k in 0..<n {
                points.append(StrokePoint(x: Int32(k * 3), y: Int32(i % 5000), pressure: UInt16(k % 1000), t: UInt32(k * 4)))
            }
            let s = Stroke(points: points)
            let e = try await doc.addStroke(s, to: p)
            mine.append((p, e))
            say("A \(p) \(e)")
        }
    }
    try await nb.close()
}

/// `--thumbnails`: see the header.
func runThumbnails(_ folder: String, delayMS: Int) async throws {
    var options = StoreOptions()
    options.autosave = false
    options.thumbnailDelay = .milliseconds(delayMS)
    let nb = try await Notebook.open(at: folder, create: true, options: options)
    let doc: Document
    if let first = try await nb.list(includeDeleted: true).first {
        doc = try await nb.openDocument(first.id)
    } else {
        doc = try await nb.createDocument(title: "thumbnails")
        _ = try await doc.addPage()
    }
    let pages = await doc.pageList.map(\.id)
    let round = try await doc.elements(pages[0]).count
    for (k, p) in pages.enumerated() {
        let points = (0..<12).map { StrokePoint(x: Int32(400 + 300 * $0), y: Int32(600 + 500 * (round % 12) + 40 * k), radius: 50) }
        _ = try await doc.addStroke(Stroke(points: points), to: p)
    }
    try await doc.flush()
    for p in pages { say("S \(p)") }
    say("saved")
    while true { try await Task.sleep(for: .seconds(3600)) }
}

do {
    let args = CommandLine.arguments
    if args.count == 4, args[1] == "--thumbnails", let delay = Int(args[3]) {
        try await runThumbnails(args[2], delayMS: delay)
    } else {
        try await run()
    }
} catch {
    FileHandle.standardError.write("lnote-crashtest: \(error)\n".data(using: .utf8)!)
    exit(1)
}
