import Foundation
import Testing
import LnoteModel
import LnoteReplication
@testable import LnoteStore

/// [PKG-34] A batch of 16,384 points or more is encoded and written in pieces, the disk asked
/// to start writing each piece but the last, and synced once; if any piece fails, none of
/// the batch is left in the log.
@Suite("Big appends: pieces, writeback hints, one sync, all or nothing")
struct BigAppendTests {
    func strokes(_ count: Int, points: Int, _ g: inout SplitMix64) -> [Stroke] {
        var out: [Stroke] = []
        for i in 0..<count {
            var pts: [StrokePoint] = []
            for j in 0..<points {
                let y = Int32(j * 2) + Int32(g.next() % 9)
                pts.append(StrokePoint(x: Int32(i * 7 + j), y: y, pressure: UInt16(300 + j % 500), radius: 10, t: UInt32(j * 4)))
            }
            out.append(Stroke(points: pts))
        }
        return out
    }

    /// Pieces cover the batch in order, each but the last holds at least its share of the
    /// points, and a small batch is one serial piece.
    @Test func piecesCoverTheBatch() throws {
        let seed = UInt64.random(in: 0...UInt64.max)
        var g = SplitMix64(seed: seed)
        var replica = PageReplica(page: PageID())
        for round in 0..<40 {
            let n = 1 + Int(g.next() % 60)
            let ops = try (0..<n).map { i in
                let points = Int(g.next() % 4000) + 1
                return try replica.add(.stroke(Stroke(points: (0..<points).map { StrokePoint(x: Int32($0), y: Int32(i)) })),
                                       by: ReplicaID(1), wallTime: 0)
            }
            let points = ops.map { $0.addedContent?.pointCount ?? 0 }
            let total = points.reduce(0, +)
            let (pieces, parallel) = Document.appendPieces(ops)
            #expect(parallel == (total >= 16_384), "seed \(seed) round \(round)")
            #expect(pieces.first?.lowerBound == 0 && pieces.last?.upperBound == n, "seed \(seed) round \(round)")
            for (a, b) in zip(pieces, pieces.dropFirst()) { #expect(a.upperBound == b.lowerBound, "seed \(seed) round \(round)") }
            if total < 16_384 { #expect(pieces.count == 1, "seed \(seed) round \(round)") }
            for piece in pieces.dropLast() {
                #expect(points[piece].reduce(0, +) >= max(32_768, total / 4), "seed \(seed) round \(round)")
            }
            #expect(pieces.count <= 4, "seed \(seed) round \(round)")
        }
    }

    /// 100 strokes of 1,000 points: four pieces, three writeback hints on the log, one
    /// fdatasync; the reopened page holds them all.
    @Test func bigBatchInPieces() async throws {
        var g = SplitMix64(seed: 0xB16)
        let dir = try TempDir("big")
        defer { dir.remove() }
        let recorder = SyscallRecorder()
        let nb = try await openNotebook(dir.path, io: Syscalls(recorder: recorder))
        let d = try await nb.createDocument(title: "big")
        let p = await d.pageList[0].id
        _ = try await d.elements(p)
        recorder.reset()
        try await d.addStrokes(strokes(100, points: 1000, &g), to: p)
        let onLog = recorder.all.filter { $0.path == d.paths.log(p) }
        #expect(onLog.filter { $0.kind == .write }.count == 4)
        #expect(onLog.filter { $0.kind == .startWriteback }.count == 3)
        #expect(onLog.filter { $0.kind == .fdatasync }.count == 1)
        let state = try await d.pageState(p)
        try await nb.close()
        let nb2 = try await openNotebook(dir.path)
        #expect(try await nb2.openDocument(d.id).pageState(p) == state)
        try await nb2.close()
    }

    /// A notebook in `dir` holding one document, closed again after `prepare` ran on the
    /// document and its first page: the document's id and paths, and that page.
    func closedDocument(in dir: TempDir, prepare: (Document, PageID) async throws -> Void = { _, _ in })
        async throws -> (DocumentID, PackagePaths, PageID) {
        let nb = try await openNotebook(dir.path)
        let d = try await nb.createDocument(title: "big")
        let p = await d.pageList[0].id
        try await prepare(d, p)
        try await nb.close()
        return (d.id, d.paths, p)
    }

    /// A write of any piece failing (ENOSPC), or a writeback hint failing (EIO): the call
    /// throws, the log is cut back to where the batch began, the page shows none of it, and
    /// the log takes appends again.
    @Test(arguments: [(SyscallKind.write, 0), (.write, 1), (.write, 3), (.startWriteback, 0), (.startWriteback, 2)])
    func failedPieceLeavesNothing(_ kind: SyscallKind, _ nth: Int) async throws {
        var g = SplitMix64(seed: 0xB17)
        let dir = try TempDir("big")
        defer { dir.remove() }
        var before: PageState?
        let (id, paths, p) = try await closedDocument(in: dir) { d, p in
            try await d.addStroke(stroke(), to: p)
            before = try await d.pageState(p)
        }
        let stateBefore = try #require(before)
        let sizeBefore = try #require(fileBytes(paths.log(p))).count

        let errno = kind == .write ? ENOSPC : EIO
        let plan = FaultPlan.failing(kind, nth: nth, pathContains: paths.log(p), with: .fail(errno: errno))
        let nb = try await openNotebook(dir.path, io: Syscalls(faults: plan))
        let d = try await nb.openDocument(id)
        _ = try await d.elements(p)
        await #expect(throws: LnoteError(.io), "\(kind) #\(nth)") {
            try await d.addStrokes(strokes(100, points: 1000, &g), to: p)
        }
        #expect(fileBytes(paths.log(p))?.count == sizeBefore, "\(kind) #\(nth): the batch was cut off")
        #expect(try await d.pageState(p) == stateBefore, "\(kind) #\(nth): reloaded from disk")
        try await d.addStroke(stroke(9), to: p)
        try await nb.close()
        let (log, replay) = try PageLog.open(path: paths.log(p), kind: .page, owner: p.uuid, create: false, io: .live)
        #expect(replay.report.isClean, "\(kind) #\(nth)")
        #expect(replay.frames.count == 2, "\(kind) #\(nth): the first stroke and the one after the failure")
        try log.close()
    }

    /// [PKG-34] A kernel or file system that refuses the writeback hint (ENOSYS, EINVAL,
    /// EOPNOTSUPP, ESPIPE) does not fail the append, whether the refusal is real or
    /// injected: every hint refused, the batch is still written whole and made durable.
    @Test(arguments: [ENOSYS, EINVAL, EOPNOTSUPP, ESPIPE])
    func refusedHintsAreNotErrors(_ errno: Int32) async throws {
        var g = SplitMix64(seed: 0xB18)
        let dir = try TempDir("big")
        defer { dir.remove() }
        let (id, paths, p) = try await closedDocument(in: dir)

        let recorder = SyscallRecorder()
        let plan = FaultPlan { event in
            event.kind == .startWriteback && event.path == paths.log(p) ? .fail(errno: errno) : nil
        }
        let nb = try await openNotebook(dir.path, io: Syscalls(faults: plan, recorder: recorder))
        let d = try await nb.openDocument(id)
        _ = try await d.elements(p)
        let batch = strokes(100, points: 1000, &g)
        recorder.reset()
        try await d.addStrokes(batch, to: p)
        let events = recorder.all.filter { $0.path == paths.log(p) }
        #expect(events.filter { $0.kind == .startWriteback }.count == 3, "errno \(errno)")
        #expect(events.last?.kind == .fdatasync, "errno \(errno): the batch is made durable")
        try await nb.close()
        let (log, replay) = try PageLog.open(path: paths.log(p), kind: .page, owner: p.uuid, create: false, io: .live)
        #expect(replay.report.isClean)
        #expect(replay.frames.count == batch.count, "errno \(errno)")
        try log.close()
    }
}
