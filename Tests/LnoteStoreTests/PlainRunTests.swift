import Foundation
import Testing
import LnoteTestSupport
import LnoteModel
import LnoteReplication
@testable import LnoteStore

/// [LOG-28] [LOG-33] A listing open reads its tail's leading plain adds where they lie
/// (`LogScanner.scanListing`): the same frames, damage, anchors and end as the scan every
/// other reader makes, the same adds as those read from the scan's frames, and the same
/// errors at the same offsets when their points are decoded.
@Suite("A listing open's tail: plain adds read where they lie")
struct PlainRunTests {
    /// A page log as lnote writes it: this replica's strokes in log form over several
    /// openings (each writes a copy of the anchor), another replica's plain adds as standard
    /// frames (one delivered before the add it follows), moves and erases, and an image.
    static func writtenLog(_ dir: TempDir, seed: UInt64) async throws -> (log: [UInt8], path: String) {
        var g = SeededRNG(seed: seed)
        let strokes = DeferredPointsStoreTests.penStrokes(60, seed: seed)
        var next = 0
        func some() -> [Stroke] {
            let n = Int.random(in: 1...6, using: &g)
            defer { next += n }
            return (0..<n).map { strokes[(next + $0) % strokes.count] }
        }
        let other = ReplicaID(0x5151_0000 + (seed & 0xFFFF))
        var theirs: PageReplica?
        var held: Op?
        var docID: DocumentID?, page: PageID?, path = ""
        for opening in 0..<3 {
            let nb = try await openNotebook(dir.path)
            let d = docID == nil ? try await nb.createDocument(title: "run \(seed)") : try await nb.openDocument(docID!)
            let first = await d.pageList[0].id
            let p = page ?? first
            (docID, page, path) = (d.id, p, d.paths.log(p))
            if theirs == nil { theirs = PageReplica(page: p) }
            for step in 0..<Int.random(in: 4...9, using: &g) {
                let wall = 1_700_000_000_000 + Int64(opening * 100 + step)
                switch Int.random(in: 0..<10, using: &g) {
                case 0..<5: _ = try await d.addStrokes(some(), to: p)
                case 5, 6:
                    // Another replica's stroke: a plain add in its own standard frame. Now and
                    // then one is held back and delivered after the next (it then waits).
                    let op = try theirs!.add(.stroke(some()[0]), by: other, wallTime: wall)
                    if held == nil && Bool.random(using: &g) { held = op } else {
                        _ = try await d.receive([op] + (held.map { [$0] } ?? []), page: p)
                        held = nil
                    }
                case 7:
                    let ids = try await d.elementIDs(p)
                    if let id = ids.randomElement(using: &g) { try await d.move([id], dx: 4, dy: -3, on: p) }
                case 8:
                    let ids = try await d.elementIDs(p)
                    if let id = ids.randomElement(using: &g) { try await d.erase([id], on: p) }
                default:
                    _ = try await d.addImage(randomBytes(40, &g), frame: QRect(x: 1, y: 2, width: 30, height: 40), to: p)
                }
            }
            try await nb.close()
        }
        return (try #require(fileBytes(path)), path)
    }

    /// The frame boundaries of `log`'s bytes after its header, as a scan finds them.
    static func starts(_ log: [UInt8]) -> [Int] {
        let scan = LogScanner.scanFile(log)
        return [LogHeader.size] + scan.anchorEnds.map { Int($0) } + scan.frames.map { Int($0.offset) }
    }

    /// `scanListing` and `scan` of the same bytes: the listing's run and rest are the scan's
    /// frames, in order; its adds are those `OperationCodec.plainAddStroke` reads from them.
    static func expectSame(_ tail: [UInt8], base: UInt64, anchor: LogAnchor?, path: String, _ what: String) {
        let plain = LogScanner.scan(tail, base: base, anchor: anchor)
        let listed = LogScanner.scanListing(tail, base: base, anchor: anchor, path: path, expecting: 16)
        let run = listed.leading
        #expect(LogScanner.listingDisagreement(tail, base: base, anchor: anchor, path: path) == nil, "\(what)")
        #expect(listed.frameCount == plain.frames.count, "\(what)")
        #expect(run.loggedFrames(0..<run.count) + listed.frames == plain.frames, "\(what)")
        #expect(listed.damage == plain.damage, "\(what)")
        #expect(listed.tornTail == plain.tornTail && listed.tornTailReason == plain.tornTailReason
                && listed.tailIsCompleteBadFrame == plain.tailIsCompleteBadFrame, "\(what)")
        #expect(listed.goodEnd == plain.goodEnd && listed.anchorEnds == plain.anchorEnds, "\(what)")
        // The run: as long as the scan's leading plain adds (up to damage), the same adds.
        let expected = Document.plainAdds(Array(plain.frames.prefix(plain.damage.first?.frameIndex ?? plain.frames.count)), path: path)
        #expect(run.count == expected.count, "\(what): run \(run.count), plain adds \(expected.count)")
        for (a, b) in zip(run.adds, expected) {
            #expect(a.id == b.id && a.wallTime == b.wallTime && a.stroke.style == b.stroke.style
                    && a.stroke.pointCount == b.stroke.pointCount, "\(what): \(a.id)")
        }
        // Every boundary the scan names, the listing names.
        for f in plain.frames { #expect(listed.isBoundary(f.offset) && listed.isBoundary(f.end), "\(what): \(f.offset)") }
        // Their points, decoded from the tail's one source, are those of the frames' own.
        if let source = run.source {
            #expect(throws: Never.self, "\(what)") { try DeferredPoints.check([source]) }
            var records = run.adds.map { ElementRecord(plainAdd: $0.id, wallTime: $0.wallTime, stroke: $0.stroke, z: $0.z) }
            var own = expected.map { ElementRecord(plainAdd: $0.id, wallTime: $0.wallTime, stroke: $0.stroke, z: $0.z) }
            if (try? DeferredPoints.resolve(&records)) != nil, (try? DeferredPoints.resolve(&own)) != nil {
                #expect(records == own, "\(what)")
            } else {
                Issue.record("\(what): points did not decode")
            }
        }
    }

    @Test("[LOG-28] [LOG-33] from every frame boundary of written logs, clean and with random damage: the listing scan finds what the scan finds", arguments: [1, 2, 3, 4] as [UInt64])
    func sameAsScan(seed: UInt64) async throws {
        let seed = testSeed() &+ seed
        var g = SeededRNG(seed: seed ^ 0x9E37)
        let dir = try TempDir("plainrun")
        defer { dir.remove() }
        let (log, path) = try await Self.writtenLog(dir, seed: seed)
        let anchor = try LogHeader.decode(log).anchor(in: Array(log[LogHeader.size...]))
        #expect(anchor != nil, "seed \(seed)")
        var runs = 0
        for start in Self.starts(log) {
            let tail = Array(log[start...])
            Self.expectSame(tail, base: UInt64(start), anchor: anchor, path: path, "seed \(seed) from \(start)")
            runs += LogScanner.scanListing(tail, base: UInt64(start), anchor: anchor, path: path).leading.count
            // The same bytes damaged: a byte flipped, or cut short.
            for _ in 0..<3 where tail.count > 1 {
                var bad = tail
                let i = Int.random(in: 0..<bad.count, using: &g)
                if Bool.random(using: &g) { bad[i] ^= UInt8.random(in: 1...255, using: &g) } else { bad = Array(bad[..<i]) }
                Self.expectSame(bad, base: UInt64(start), anchor: anchor, path: path, "seed \(seed) from \(start), byte \(i) damaged")
            }
            // Without the anchor, log-form frames are no frames ([LOG-33]).
            Self.expectSame(tail, base: UInt64(start), anchor: nil, path: path, "seed \(seed) from \(start), no anchor")
        }
        #expect(runs > 0, "seed \(seed): no plain adds found")
    }

    /// A log tail of this replica's strokes in log form, and one frame more: `frame` as the
    /// log writes it (log form when its author is the anchor's writer).
    static func tailWith(_ frame: (ReplicaID, UInt64) -> Frame, _ dir: TempDir) async throws
        -> (tail: [UInt8], base: UInt64, anchor: LogAnchor, path: String, added: LoggedFrame) {
        let nb = try await openNotebook(dir.path)
        let d = try await nb.createDocument(title: "points")
        let p = await d.pageList[0].id
        _ = try await d.addStrokes(DeferredPointsStoreTests.penStrokes(12, seed: 7), to: p)
        let path = d.paths.log(p), me = d.replica
        try await nb.close()
        var log = try #require(fileBytes(path))
        let scan = LogScanner.scanFile(log)
        let counter = try #require(scan.frames.last.flatMap { OperationCodec.headerID(of: $0.frame) }).counter
        let added = frame(me, counter + 1)
        log += DeferredPointsStoreTests.written(added, in: log)
        let anchor = try #require(try LogHeader.decode(log).anchor(in: Array(log[LogHeader.size...])))
        let start = Int(try #require(scan.frames.first).offset)
        let last = try #require(LogScanner.scanFile(log).frames.last)
        #expect(last.frame == added)
        return (Array(log[start...]), UInt64(start), anchor, path, last)
    }

    /// The error of `check`ing `source`, else nil.
    static func failure(_ source: DeferredPoints) -> LnoteError? {
        do { try DeferredPoints.check([source]); return nil } catch let e as LnoteError { return e } catch { return nil }
    }

    @Test("[LOG-23] [LOG-27] [LOG-33] a tail stroke whose points break [LOG-23], or whose point bits are damaged under a good CRC: decoded from the tail's source, the error and offset of its frame's own source, at the offset the eager decode names")
    func pointErrors() async throws {
        let seed = testSeed()
        var g = SeededRNG(seed: seed)
        // [LOG-23]: a radius above 100,000; the stream encodes it.
        var wide = DeferredPointsStoreTests.penStrokes(1, seed: seed)[0]
        let k = Int.random(in: 0..<wide.points.count, using: &g)
        var points = wide.points
        points[k].radius = ContentBounds.maxRadius + 1 + Int32.random(in: 0...999, using: &g)
        wide = Stroke(style: wide.style, points: points)
        var kinds: [(String, (ReplicaID, UInt64) -> Frame)] = [("[LOG-23]", { replica, counter in
            OperationCodec.frame(Op(id: OpID(replica: replica, counter: counter), lamport: counter, context: VectorClock(),
                                    wallTime: 1_700_000_000_000, body: .add(.stroke(wide), z: OperationCodec.impliedZ(lamport: counter))),
                                 form: .written)
        })]
        // Damaged bits: the last byte of a good stroke's stream flipped (the CRC is the log's).
        let good = DeferredPointsStoreTests.penStrokes(3, seed: seed)[2]
        for flip in [UInt8(0x01), 0x80, 0xFF] {
            kinds.append(("bits ^ \(flip)", { replica, counter in
                var f = OperationCodec.frame(Op(id: OpID(replica: replica, counter: counter), lamport: counter, context: VectorClock(),
                                                wallTime: 1_700_000_000_000,
                                                body: .add(.stroke(good), z: OperationCodec.impliedZ(lamport: counter))),
                                             form: .written)
                f.payload[f.payload.count - 1] ^= flip
                return f
            }))
        }
        var refused = 0
        for (what, make) in kinds {
            let dir = try TempDir("plainrun-points")
            defer { dir.remove() }
            let (tail, base, anchor, path, added) = try await Self.tailWith(make, dir)
            let listed = LogScanner.scanListing(tail, base: base, anchor: anchor, path: path)
            // The eager decode of the frame: its error, if any.
            var eager: LnoteError?
            do { _ = try OperationCodec.decode(added.frame, base: added.payloadBase, path: path) } catch let e as LnoteError { eager = e }
            guard listed.leading.count == 13 else {
                // Not read as a plain add (its count or width refused): the scan's frame, as before.
                #expect(listed.frames.last == added, "seed \(seed) \(what)")
                continue
            }
            let own = try #require(OperationCodec.plainAddStroke(added.frame, base: added.payloadBase, path: path), "seed \(seed) \(what)")
            let fromTail = Self.failure(try #require(listed.leading.source))
            let fromFrame = Self.failure(try #require(own.stroke.deferred?.source))
            #expect(fromTail?.message == fromFrame?.message && fromTail?.offset == fromFrame?.offset
                    && fromTail?.code == fromFrame?.code && (fromTail == nil || fromTail?.path == path), "seed \(seed) \(what): \(String(describing: fromTail)) vs \(String(describing: fromFrame))")
            #expect((fromTail == nil) == (eager == nil), "seed \(seed) \(what): eager \(String(describing: eager))")
            if let fromTail, let eager {
                refused += 1
                #expect(fromTail.offset == eager.offset, "seed \(seed) \(what): \(fromTail) vs eager \(eager)")
            }
        }
        #expect(refused >= 1, "seed \(seed): no point stream was refused")
    }
}
