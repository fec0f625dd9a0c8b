import Foundation
import Testing
import LnoteModel
import LnoteReplication
@testable import LnoteStore

/// `count` seeds derived from `base` (the same every run), or the one in `LNOTE_SEED` to
/// replay a failure; tests print the seed with every failed expectation.
func seededRuns(_ base: UInt64, count: Int) -> [UInt64] {
    if let s = ProcessInfo.processInfo.environment["LNOTE_SEED"], let v = UInt64(s) { return [v] }
    var g = SplitMix64(seed: base)
    return (0..<count).map { _ in g.next() }
}

/// Page operations of several replicas, made the way apps make them (`PageReplica`), with
/// random exchanges between the replicas so that later operations depend on earlier ones.
struct PageOpScript {
    var ops: [Op] = []

    init(page p: PageID, replicas: [ReplicaID], steps: Int, rng: inout SplitMix64) throws {
        var reps = replicas.map { _ in PageReplica(page: p) }
        var wall: Int64 = 1_700_000_000_000
        for _ in 0..<steps {
            let k = rng.int(in: 0...(reps.count - 1))
            let me = replicas[k]
            let live = reps[k].elements.map(\.id)
            wall += Int64(rng.int(in: 1...1000))
            let op: Op?
            switch rng.int(in: 0...9) {
            case _ where live.isEmpty, 0...3:
                let n = rng.int(in: 2...6)
                let points = (0..<n).map { StrokePoint(x: Int32(rng.int(in: 0...2000)), y: Int32(rng.int(in: 0...2000)), t: UInt32($0 * 4)) }
                op = try reps[k].add(.stroke(Stroke(points: points)), by: me, wallTime: wall)
            case 4:
                op = try reps[k].move([live[rng.int(in: 0...(live.count - 1))]], dx: Int32(rng.int(in: -50...50)),
                                      dy: Int32(rng.int(in: -50...50)), by: me, wallTime: wall)
            case 5:
                op = try reps[k].bringToFront([live[rng.int(in: 0...(live.count - 1))]], by: me, wallTime: wall)
            case 6:
                op = try reps[k].sendToBack([live[rng.int(in: 0...(live.count - 1))]], by: me, wallTime: wall)
            case 7:
                op = try reps[k].make(.erase([live[rng.int(in: 0...(live.count - 1))]]), by: me, wallTime: wall)
            case 8:
                op = try reps[k].make(.eraseRange(live[rng.int(in: 0...(live.count - 1))], [PointRange(0, 1)]), by: me, wallTime: wall)
            default:
                // k sends everything it holds to another replica.
                let j = rng.int(in: 0...(reps.count - 1))
                _ = try reps[j].receive(ops.filter { reps[k].contains($0.id) && !reps[j].contains($0.id) })
                op = nil
            }
            if let op { ops.append(op) }
        }
    }
}

/// The rules of `Protocol/operation-log.md` as the store keeps them on disk.
@Suite("Operation log rules, with real files")
struct OperationLogRulesTests {
    /// [LOG-11] [LOG-10] A frame whose length field claims more bytes than are present —
    /// anything up to the 16 MiB limit — is read as cut off (`truncated` at the frame, a
    /// torn tail at the end of a log), whatever it claims; one beyond the limit is `corrupt`.
    /// (That nothing is allocated for the claimed length first is not observable from here:
    /// see the Conformance section of operation-log.md.)
    @Test("[LOG-11] a claimed frame length is checked against the bytes present")
    func claimedLengthsAreCheckedFirst() throws {
        var w = ByteWriter()
        Frame(type: 1, payload: [1, 2, 3]).encode(into: &w)
        let valid = w.bytes
        let lengths: [UInt32] = [5, 100, 65_536, 1 << 20, (1 << 24) - 1, 1 << 24]
        for length in lengths {
            for present in [9, 12, 40] {
                var b = [UInt8](repeating: 0xAB, count: present)
                withUnsafeBytes(of: length.littleEndian) { for i in 0..<4 { b[i] = $0[i] } }
                guard Int(length) + 8 > present else { continue }
                #expect(Frame.scan(b, at: 0) == .truncated(at: 0), "length \(length), \(present) bytes")
                #expect(throws: LnoteError(.truncated)) { try Frame.decodeAll(valid + b) }
                let scan = LogScanner.scan(valid + b, base: 40, anchor: nil)
                #expect(scan.frames.count == 1 && scan.tornTail?.lowerBound == UInt64(40 + valid.count), "length \(length)")
            }
        }
        var over = [UInt8](repeating: 0, count: 64)
        let tooLong: UInt32 = (1 << 24) + 1
        withUnsafeBytes(of: tooLong.littleEndian) { for i in 0..<4 { over[i] = $0[i] } }
        if case .corrupt = Frame.scan(over, at: 0) {} else { Issue.record("a length above 16 MiB is not corrupt") }
    }

    /// [LOG-2] A replica's counters in one log start at 1 and have no gaps, across reopening
    /// and with other replicas' operations in the same log: the n-th operation it made in a
    /// log has counter n, in the order of the log.
    @Test("[LOG-2] this replica's counters in each log are 1, 2, 3, … in log order")
    func countersWithoutGaps() async throws {
        let dir = try TempDir("log-rules")
        defer { dir.remove() }
        var rng = SplitMix64(seed: 0x1062)
        var id: DocumentID?
        var page: PageID?
        var me = ReplicaID(1)
        for round in 0..<3 {
            let nb = try await openNotebook(dir.path)
            me = nb.replica
            let d: Document
            if let id { d = try await nb.openDocument(id) } else { d = try await nb.createDocument(title: "L") }
            id = d.id
            let p = await d.pageList[0].id
            page = p
            var ids: [ElementID] = []
            for i in 0..<4 { ids.append(try await d.addStroke(stroke(3, x: Int32(i)), to: p)) }
            try await d.move([ids[0]], dx: 5, dy: 5, on: p)
            try await d.eraseRange(ids[1], [PointRange(0, 1)], on: p)
            try await d.setTitle("round \(round)")
            // Another replica's operation lands in the same log.
            let held = try await d.pageState(p)
            var other = PageReplica(state: held)
            let b = try other.add(.stroke(stroke(2)), by: ReplicaID(0xB2 + UInt64(round)), wallTime: Int64(rng.int(in: 0...1000)))
            _ = try await d.receive([b], page: p)
            try await nb.close()
        }
        let nb = try await openNotebook(dir.path)
        let d = try await nb.openDocument(id!)
        for log in [nil, page] as [PageID?] {
            let mine = try await d.operations(page: log, notCoveredBy: VectorClock()).filter { $0.id.replica == me }
            #expect(mine.count >= 3 && mine.map(\.id.counter) == Array(1...UInt64(mine.count)),
                    "log \(log.map(\.description) ?? "document")")
        }
        try await nb.close()
    }

    /// [LOG-1] [PKG-31] Every log is its header then frames from offset 40 with no gap up to
    /// the end of the file; a page log holds only page operations and the document log only
    /// document operations. An operation of the other kind is refused on receipt, and one
    /// written into a log anyway is reported as malformed and never applied.
    @Test("[LOG-1] [PKG-31] frames follow the header with no gap; each log holds only its kind of operation")
    func framesAndKinds() async throws {
        let dir = try TempDir("log-rules")
        defer { dir.remove() }
        let nb = try await openNotebook(dir.path)
        let d = try await nb.createDocument(title: "K")
        let p0 = await d.pageList[0].id
        let p1 = try await d.addPage()
        for p in [p0, p1] { for i in 0..<3 { try await d.addStroke(stroke(3, x: Int32(i)), to: p) } }
        _ = try await d.addImage([1, 2, 3], frame: QRect(x: 0, y: 0, width: 10, height: 10), to: p1)
        try await d.setTitle("K2")
        let docOps = try await d.operations(notCoveredBy: VectorClock())
        let pageOps = try await d.operations(page: p0, notCoveredBy: VectorClock())
        await #expect(throws: LnoteError(.invalidArgument)) { try await d.receive(docOps, page: p0) }
        await #expect(throws: LnoteError(.invalidArgument)) { try await d.receive(pageOps, page: nil) }
        let paths = d.paths
        try await nb.close()
        for (path, pageLog) in [(paths.documentLog, false), (paths.log(p0), true), (paths.log(p1), true)] {
            let bytes = fileBytes(path)!
            let scan = LogScanner.scanFile(bytes)
            #expect(scan.damage.isEmpty && scan.tornTail == nil, "\(path)")
            // Right after the header, or after a page log's anchor and the copy of it its first
            // opening wrote ([PKG-110], [PKG-111]).
            let anchor = try LogFileContents(bytes).anchor
            #expect((anchor != nil) == pageLog, "\(path)")
            #expect(scan.frames.first?.offset == UInt64(40 + 2 * (anchor?.frame.count ?? 0)), "\(path)")
            #expect(zip(scan.frames, scan.frames.dropFirst()).allSatisfy { $0.end == $1.offset }, "\(path)")
            #expect(scan.frames.last?.end == UInt64(bytes.count), "\(path)")
            for f in scan.frames {
                #expect(try OperationCodec.decode(f.frame).body.isPageOperation == pageLog, "\(path) at \(f.offset)")
            }
        }
        // A document operation written into a page log: reported, not applied, kept.
        var w = ByteWriter()
        OperationCodec.frame(docOps.last!).encode(into: &w)
        let before = fileBytes(paths.log(p0))!
        try writeFile(paths.log(p0), before + w.bytes)
        try FileManager.default.removeItem(atPath: paths.content(p0))
        #expect(try Verify.run(folder: dir.path).problems(.malformedOperation).map(\.offset) == [before.count])
        let nb2 = try await openNotebook(dir.path)
        let d2 = try await nb2.openDocument(d.id)
        #expect(try await d2.elements(p0).count == 3)
        let r = try #require(await d2.recoveryReports.first { $0.path == paths.log(p0) })
        #expect(r.undecodable.map(\.offset) == [before.count] && r.quarantinedCopy == nil)
        try await nb2.close()
        #expect(fileBytes(paths.log(p0))?.count == before.count + w.count)
    }

    /// [LOG-6] Wall times never decide a merge: the same operations with other wall times
    /// (skewed, reversed, negative) give the same page once the wall-time fields themselves
    /// (each element's `wallTime`, the page's `modified`) are set aside.
    @Test("[LOG-6] the merge is the same whatever the operations' wall times")
    func wallTimesDecideNothing() throws {
        for seed in seededRuns(0x1066, count: 60) {
            var rng = SplitMix64(seed: seed)
            let p = PageID()
            let ops = try PageOpScript(page: p, replicas: [ReplicaID(1), ReplicaID(2), ReplicaID(3)], steps: 40, rng: &rng).ops
            let skewed = ops.map { op -> Op in
                var o = op
                o.wallTime = rng.chance(0.5) ? -op.wallTime : Int64(rng.int(in: -1_000_000...1_000_000))
                return o
            }
            func merged(_ ops: [Op]) throws -> PageState {
                var r = PageReplica(page: p)
                _ = try r.receive(ops)
                var s = r.state
                s.modified = 0
                for i in s.elements.indices { s.elements[i].wallTime = 0 }
                // Kept records of erased elements carry their add's wall time too (informational).
                for i in s.tombstones.indices { s.tombstones[i].record?.wallTime = 0 }
                return s
            }
            #expect(try merged(ops) == merged(skewed), "seed \(seed)")
            #expect(try merged(ops) == merged(skewed.reversed()), "seed \(seed): reversed delivery")
        }
        // Document log: concurrent titles; the winner is the greater Lamport timestamp, then
        // replica id, whatever the wall times say.
        for (wa, wb) in [(Int64(1), Int64(2)), (2, 1), (-5, 9_000_000_000_000)] {
            var a = DocumentReplica(id: DocumentID())
            _ = try a.make(.createDocument(title: "T"), by: ReplicaID(0xA), wallTime: 0)
            var b = a
            let ta = try a.make(.setTitle("A"), by: ReplicaID(0xA), wallTime: wa)
            let tb = try b.make(.setTitle("B"), by: ReplicaID(0xB), wallTime: wb)
            _ = try a.receive([tb])
            _ = try b.receive([ta])
            #expect(a.state.title.value == "B" && b.state.title.value == "B", "wall times \(wa), \(wb)")
        }
    }

    /// [LOG-31] A log holds operations in the order they arrived (any order that respects
    /// what arrived when, waiting ones included); reopening replays it through the same
    /// causal buffer, so after every batch, closed and reopened (sometimes compacted), the
    /// page equals a replica in memory that received the same batches. [LOG-30] Each batch
    /// also brings again operations already received (applied or still waiting): they are
    /// recognised by id, not appended, and change nothing.
    @Test("[LOG-31] [LOG-30] a log written in any arrival order replays to the state it had; duplicates change nothing")
    func anyArrivalOrderReplays() async throws {
        for seed in seededRuns(0x1031, count: 6) {
            var rng = SplitMix64(seed: seed)
            let dir = try TempDir("log-rules")
            defer { dir.remove() }
            var nb = try await openNotebook(dir.path)
            var d = try await nb.createDocument(title: "O")
            let id = d.id
            let p = await d.pageList[0].id
            var ops = try PageOpScript(page: p, replicas: [ReplicaID(0xA1), ReplicaID(0xB2), ReplicaID(0xC3)], steps: 60,
                                       rng: &rng).ops
            for i in stride(from: ops.count - 1, to: 0, by: -1) { ops.swapAt(i, rng.int(in: 0...i)) }
            var memory = PageReplica(page: p)
            var at = 0
            while at < ops.count {
                let batch = Array(ops[at..<min(ops.count, at + rng.int(in: 1...12))])
                let again = at == 0 ? [] : (0..<rng.int(in: 0...4)).map { _ in ops[rng.int(in: 0...(at - 1))] }
                at += batch.count
                let out = try await d.receive(batch + again, page: p)
                #expect(out.appended == batch.count, "seed \(seed): duplicates appended")
                _ = try memory.receive(batch)
                if rng.chance(0.3) { try await d.compact(page: p) }
                try await nb.close()
                nb = try await openNotebook(dir.path)
                d = try await nb.openDocument(id)
                #expect(try await d.pageState(p) == memory.state, "seed \(seed), after \(at) of \(ops.count)")
            }
            #expect(memory.pending.isEmpty, "seed \(seed): every operation applies in the end")
            let logged = try await d.operations(page: p, notCoveredBy: VectorClock())
            #expect(logged.count == ops.count && Set(logged.map(\.id)).count == ops.count, "seed \(seed)")
            try await nb.close()
        }
    }
}
