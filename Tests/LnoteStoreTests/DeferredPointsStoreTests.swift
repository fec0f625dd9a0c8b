import Foundation
import Testing
import LnoteModel
import LnoteReplication
@testable import LnoteStore

/// Points deferred to their first use ([SNAP-38], [LOG-27], [PKG-42]): `addStroke` frames
/// decoded with their points deferred, a `PageReplica` built on a deferred state, and pages
/// of a store opened without their points decoded.
@Suite("Deferred points (frames, replica, store)")
struct DeferredPointsStoreTests {
    // MARK: - Helpers

    /// Realistic strokes: the pen profile, and smooth cursive.
    static func penStrokes(_ n: Int, seed: UInt64) -> [Stroke] {
        var options = HandwritingGenerator.Options()
        options.profile = .pen
        var g = HandwritingGenerator(seed: seed, options: options)
        var smooth = HandwritingGenerator(seed: seed ^ 0xABCD)
        var out: [Stroke] = []
        while out.count < n {
            let s = out.count % 3 == 2 ? smooth.nextStroke() : g.nextStroke()
            if ContentBounds.problem(.stroke(s)) == nil { out.append(s) }
        }
        return out
    }

    static func flip(_ b: inout [UInt8], _ at: Int, _ bit: Int) { b[at] ^= UInt8(1) << UInt8(bit) }

    /// The content of an op with its points resolved.
    static func resolvedOp(_ op: Op) throws -> Op {
        guard case .add(let c, let z) = op.body else { return op }
        var o = op
        o.body = .add(try c.resolved(), z: z)
        return o
    }

    static func le32(_ v: UInt32) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: v >> (8 * UInt32($0))) } }

    /// Recomputes a snapshot's CRC32C trailer.
    static func resealSnapshot(_ b: [UInt8]) -> [UInt8] {
        var b = b
        let crc = CRC32C.checksum(b, 0..<(b.count - 4))
        b.replaceSubrange((b.count - 4)..<b.count, with: le32(crc))
        return b
    }

    /// Where the elements section's body is in a snapshot file.
    static func elementsBody(_ b: [UInt8]) -> Range<Int>? {
        var at = PageSnapshot.headerSize
        while at + 6 <= b.count - 4 {
            let tag = UInt16(b[at]) | UInt16(b[at + 1]) << 8
            let len = Int(UInt32(b[at + 2]) | UInt32(b[at + 3]) << 8 | UInt32(b[at + 4]) << 16 | UInt32(b[at + 5]) << 24)
            if tag == PageSnapshot.Section.elements.rawValue { return (at + 6)..<(at + 6 + len) }
            at += 6 + len
        }
        return nil
    }

    /// The frames of a log file after its header: (frame, offset of its header).
    static func frames(_ log: [UInt8]) -> [LoggedFrame] {
        LogScanner.scanFile(log).frames
    }

    /// `frame` as `log` writes it: in log form when its anchor names the author ([LOG-33]).
    static func written(_ frame: Frame, in log: [UInt8]) -> [UInt8] {
        let anchor = (try? LogHeader.decode(log))?.anchor(in: Array(log[LogHeader.size...]))
        return anchor?.logForm(frame.encoded) ?? frame.encoded
    }

    /// The page an eager read of the files gives: the snapshot decoded whole, then the log
    /// from the offset it covers, every frame decoded whole.
    static func eagerPage(content: String, log: String) throws -> PageState {
        let s = try PageSnapshot.decode(fileBytes(content)!, path: content)
        var r = PageReplica(state: s.state)
        // A frame that does not decode is skipped (reported as undecodable at load, [PKG-42]).
        let ops = frames(fileBytes(log)!).filter { $0.offset >= s.coveredLogOffset }.compactMap {
            try? OperationCodec.decode($0.frame, base: $0.payloadBase, path: log)
        }
        _ = try r.receive(ops)
        return r.state
    }

    // MARK: - 3. Frames

    @Test("[LOG-27] addStroke3, addStroke2 and addStroke frames decoded with deferred points, resolved, equal the eager decode; damage is never missed")
    func framesDeferredEqualEager() throws {
        let seed = testSeed()
        var g = SeededRNG(seed: seed)
        let page = PageID(UUID())
        var replica = PageReplica(page: page)
        let me = ReplicaID(0xB0B0_0001)
        var ops: [Op] = []
        for s in Self.penStrokes(120, seed: seed) { ops.append(try replica.add(.stroke(s), by: me, wallTime: 1_700_000_000_000 + Int64(ops.count))) }
        var foundOnResolve = 0, bothFailed = 0, bothOK = 0, cases = 0
        for (i, op) in ops.enumerated() {
            // The frames in turn in the written form and the two lnote wrote before it
            // ([LOG-32], [LOG-29], [LOG-24]).
            let forms: [(OperationCodec.Form, OperationCodec.Kind)] = [(.written, .addStroke3), (.writtenV2, .addStroke2),
                                                                      (.writtenV1, .addStroke)]
            let frame = OperationCodec.frame(op, form: forms[i % 3].0)
            #expect(frame.type == forms[i % 3].1.rawValue, "seed \(seed) op \(i)")
            let base = 1000 + i
            let eager = try OperationCodec.decode(frame, base: base, path: "/l")
            let lazy = try OperationCodec.decode(frame, base: base, path: "/l", deferringPoints: true)
            guard case .add(let c, _) = lazy.body else { Issue.record("seed \(seed) op \(i): not an add"); continue }
            #expect(!c.isResolved, "seed \(seed) op \(i)")
            if case .add(let oc, _) = op.body { #expect(c.pointCount == oc.pointCount, "seed \(seed) op \(i)") }
            #expect(try Self.resolvedOp(lazy) == eager, "seed \(seed) op \(i)")
            #expect(eager == op, "seed \(seed) op \(i)")
            // Damage in the point bits (the stream is the payload's last field).
            for k in 0..<24 {
                var p = frame.payload
                let tail = max(1, p.count / 3)
                var at = p.count - 1 - Int(g.next() % UInt64(tail))
                if k < 12 {
                    Self.flip(&p, at, Int(g.next() % 8))
                } else {
                    // A whole byte anywhere in the second half (the style, the counts, the bits).
                    at = p.count / 2 + Int(g.next() % UInt64(max(1, p.count - p.count / 2)))
                    p[at] ^= UInt8(1 + g.next() % 255)
                }
                let damaged = Frame(type: frame.type, payload: p)
                cases += 1
                let ctx = "seed \(seed) op \(i) \(k < 12 ? "bit flipped" : "byte changed") at payload byte \(at) of \(p.count)"
                var eagerError: LnoteError?
                var eagerOp: Op?
                do { eagerOp = try OperationCodec.decode(damaged, base: base, path: "/l") } catch let e as LnoteError { eagerError = e }
                let deferred: Op
                do { deferred = try OperationCodec.decode(damaged, base: base, path: "/l", deferringPoints: true) } catch let e as LnoteError {
                    #expect(eagerError != nil, "\(ctx): deferred decode failed (\(e)), eager succeeded")
                    // [LOG-27] Refused with the eager decode's error, whatever stopped the deferred one.
                    if let eagerError {
                        #expect("\(e.code) \(e.message) \(e.offset.map(String.init) ?? "-")"
                                    == "\(eagerError.code) \(eagerError.message) \(eagerError.offset.map(String.init) ?? "-")", "\(ctx)")
                    }
                    bothFailed += 1
                    continue
                }
                do {
                    let r = try Self.resolvedOp(deferred)
                    if let eagerError {
                        Issue.record("\(ctx): eager fails (\(eagerError)) but deferred decode and resolve succeed")
                    } else {
                        #expect(r == eagerOp, "\(ctx)")
                        bothOK += 1
                    }
                } catch let e as LnoteError {
                    foundOnResolve += 1
                    #expect(eagerError != nil, "\(ctx): resolve fails (\(e)) where eager succeeded")
                    #expect(e.code == .corrupt && e.path == "/l", "\(ctx): \(e)")
                    // From the frame's payload on: [PT2-8] reports a code that starts in the zeros read
                    // past the `L` bytes where it starts, so past the payload's end for some damage.
                    #expect(e.offset.map { $0 >= base } == true, "\(ctx): \(e)")
                    if let eagerError { #expect(e.offset == eagerError.offset, "\(ctx): eager \(eagerError) vs deferred \(e)") }
                    do { _ = try Self.resolvedOp(deferred); Issue.record("\(ctx): second resolve succeeded") } catch let again as LnoteError {
                        #expect(again.offset == e.offset && again.message == e.message, "\(ctx)")
                    }
                }
            }
        }
        #expect(cases > 2000)
        #expect(foundOnResolve > 50, "seed \(seed): \(foundOnResolve) found on resolve, \(bothFailed) both failed, \(bothOK) both ok")
    }

    // MARK: - 4. PageReplica on a deferred state

    @Test("[SNAP-38] [MERGE-20] a replica on a deferred state merges without points and resolves to the eager replica's state")
    func replicaOnDeferredState() throws {
        let seed = testSeed()
        var g = SeededRNG(seed: seed)
        let page = PageID(UUID())
        var author = PageReplica(page: page)
        let a = ReplicaID(0xA1), b = ReplicaID(0xB2)
        let strokes = Self.penStrokes(150, seed: seed)
        var ids: [ElementID] = []
        for (i, s) in strokes.enumerated() { ids.append(try author.add(.stroke(s), by: a, wallTime: Int64(i)).id) }
        let bytes = PageSnapshot.encode(author.state, coveredLogOffset: 0, logIncarnation: 0)
        let eagerState = try PageSnapshot.decode(bytes).state
        let lazyState = try PageSnapshot.decode(bytes, path: "/p.content", deferringPoints: true).state
        #expect(!lazyState.isResolved)
        var eager = PageReplica(state: eagerState)
        var lazy = PageReplica(state: lazyState)
        #expect(!lazy.isResolved && eager.isResolved, "seed \(seed)")
        #expect(lazy.elementIDs == eager.elementIDs && lazy.elementCount == strokes.count, "seed \(seed)")
        // An element resolved alone, before any edit.
        let probe = ids[Int(g.next() % UInt64(ids.count))]
        #expect(try lazy.resolvedElement(probe) == eager.element(probe), "seed \(seed)")
        #expect(!lazy.isResolved, "seed \(seed): resolving one element resolves the replica")

        var live = ids
        for step in 0..<300 {
            let ctx = "seed \(seed) step \(step)"
            guard !live.isEmpty else { break }
            let id = live[Int(g.next() % UInt64(live.count))]
            let count = strokes[ids.firstIndex(of: id)!].points.count
            let by = g.next() % 2 == 0 ? a : b
            let op: Op
            switch g.next() % 6 {
            case 0, 1:
                // A partial erase up to the stroke's last point, made on the deferred replica.
                let from = UInt32(g.next() % UInt64(count))
                let to = from + 1 + UInt32(g.next() % UInt64(count - Int(from)))
                op = try lazy.make(.eraseRange(id, [PointRange(from, to)]), by: by, wallTime: Int64(step))
                // One past the end is refused on both alike.
                #expect(throws: LnoteError.self, "\(ctx): a range past the \(count) points") {
                    var copy = lazy
                    _ = try copy.make(.eraseRange(id, [PointRange(0, UInt32(count) + 1)]), by: by, wallTime: 0)
                }
            case 2, 3:
                op = try lazy.move([id], dx: Int32(g.next() % 50) - 25, dy: Int32(g.next() % 50) - 25, by: by, wallTime: Int64(step))
            case 4:
                op = try lazy.bringToFront([id], by: by, wallTime: Int64(step))
            default:
                op = try lazy.make(.erase([id]), by: by, wallTime: Int64(step))
                live.removeAll { $0 == id }
            }
            _ = try eager.receive([op])
            #expect(lazy.elementIDs == eager.elementIDs, "\(ctx)")
            #expect(lazy.elements.map(\.visibleRanges) == eager.elements.map(\.visibleRanges), "\(ctx)")
        }
        // Operations from elsewhere too, received by the deferred replica.
        var other = PageReplica(state: eagerState)
        for id in live.shuffled(using: &g).prefix(10) {
            let n = strokes[ids.firstIndex(of: id)!].points.count
            let op = try other.make(.eraseRange(id, [PointRange(0, UInt32(n))]), by: ReplicaID(0xC3), wallTime: 0)
            _ = try lazy.receive([op]); _ = try eager.receive([op])
        }
        #expect(!lazy.isResolved, "seed \(seed)")
        try lazy.resolve()
        #expect(lazy.isResolved, "seed \(seed)")
        #expect(lazy.state == eager.state, "seed \(seed)")
        #expect(PageSnapshot.encode(lazy.state, coveredLogOffset: 1, logIncarnation: 2)
                == PageSnapshot.encode(eager.state, coveredLogOffset: 1, logIncarnation: 2), "seed \(seed)")
    }

    // MARK: - Store

    /// A document whose page holds `first` strokes in its snapshot and `strokes.count − first`
    /// in its log tail (an older snapshot put back after close), closed.
    struct Sample {
        var id: DocumentID
        var paths: PackagePaths
        var page: PageID
        var strokes: [Stroke]
        var ids: [ElementID]
        var state: PageState
        var older: [UInt8]
    }

    static func sample(_ dir: TempDir, seed: UInt64, count: Int = 230, first: Int = 170, keepTail: Bool = true) async throws -> Sample {
        let nb = try await openNotebook(dir.path)
        let d = try await nb.createDocument(title: "D")
        let p = await d.pageList[0].id
        let strokes = penStrokes(count, seed: seed)
        var ids = try await d.addStrokes(Array(strokes[..<first]), to: p)
        try await d.flush()
        let older = fileBytes(d.paths.content(p))!
        if first < count { ids += try await d.addStrokes(Array(strokes[first...]), to: p) }
        let state = try await d.pageState(p)
        try await nb.close()
        if keepTail { try writeFile(d.paths.content(p), older) }
        return Sample(id: d.id, paths: d.paths, page: p, strokes: strokes, ids: ids, state: state, older: older)
    }

    // MARK: 5.

    @Test("[SNAP-38] [PKG-42] a big page opens without its points; ids, elements and page state agree")
    func bigPageOpensDeferred() async throws {
        let seed = testSeed()
        let dir = try TempDir("defer")
        defer { dir.remove() }
        let s = try await Self.sample(dir, seed: seed)
        let p = s.page
        let expectedFromFiles = try Self.eagerPage(content: s.paths.content(p), log: s.paths.log(p))
        #expect(expectedFromFiles == s.state, "seed \(seed)")
        #expect(expectedFromFiles.elements.count > 200, "seed \(seed)")

        let nb = try await openNotebook(dir.path)
        let d = try await nb.openDocument(s.id)
        let ids = try await d.elementIDs(p)
        #expect(ids == s.state.elements.map(\.id), "seed \(seed)")
        // Single elements (their chunk), in a random order, before the whole page.
        var g = SeededRNG(seed: seed)
        for id in ids.shuffled(using: &g).prefix(40) {
            let e = try await d.element(id, on: p)
            #expect(e == s.state.elements.first { $0.id == id }, "seed \(seed) element \(id)")
            #expect(e?.content.isResolved == true, "seed \(seed) element \(id)")
        }
        #expect(try await d.element(ElementID(replica: ReplicaID(0xDEAD), counter: 1), on: p) == nil)
        let elements = try await d.elements(p)
        #expect(elements.map(\.id) == ids, "seed \(seed)")
        #expect(elements.allSatisfy { $0.content.isResolved }, "seed \(seed)")
        for e in elements { #expect(try await d.element(e.id, on: p) == e, "seed \(seed) element \(e.id)") }
        let state = try await d.pageState(p)
        #expect(state.isResolved, "seed \(seed)")
        #expect(state == expectedFromFiles, "seed \(seed)")
        let reps = await d.recoveryReports
        #expect(reps.isEmpty, "seed \(seed): \(reps)")
        try await nb.close()
        // The snapshot written at close holds the points.
        let written = try PageSnapshot.decode(fileBytes(s.paths.content(p))!)
        #expect(written.state == state, "seed \(seed)")
    }

    // MARK: 6.

    /// Flips bits in the elements section of a snapshot, resealed, until the eager read fails
    /// and the deferred read does not: damage only the points' decode finds.
    static func damagePoints(_ b: [UInt8], _ g: inout SeededRNG) throws -> [UInt8]? {
        guard let body = elementsBody(b) else { return nil }
        for _ in 0..<500 {
            var c = b
            let at = body.lowerBound + body.count / 4 + Int(g.next() % UInt64(body.count / 2))
            flip(&c, at, Int(g.next() % 8))
            c = resealSnapshot(c)
            guard (try? PageSnapshot.decode(c)) == nil, (try? PageSnapshot.decode(c, deferringPoints: true)) != nil else { continue }
            return c
        }
        return nil
    }

    @Test("[SNAP-38] [PKG-42] damaged snapshot points found at first use: quarantined, page rebuilt from its log",
          arguments: ["elements", "element", "pageState", "flush"])
    func damagedSnapshotPoints(firstUse: String) async throws {
        let seed = testSeed()
        var g = SeededRNG(seed: seed)
        let dir = try TempDir("defer")
        defer { dir.remove() }
        let s = try await Self.sample(dir, seed: seed, count: 200, first: 200, keepTail: false)
        let p = s.page, content = s.paths.content(p)
        let good = fileBytes(content)!
        #expect(try PageSnapshot.decode(good).state == s.state, "seed \(seed)")
        guard let bad = try Self.damagePoints(good, &g) else {
            Issue.record("seed \(seed): no bit found whose damage only the points' decode finds")
            return
        }
        try writeFile(content, bad)

        let nb = try await openNotebook(dir.path)
        let d = try await nb.openDocument(s.id)
        let ids = try await d.elementIDs(p)
        #expect(ids == s.state.elements.map(\.id), "seed \(seed) \(firstUse)")
        switch firstUse {
        case "elements":
            #expect(try await d.elements(p) == s.state.elements, "seed \(seed) \(firstUse)")
        case "element":
            for id in s.ids {
                #expect(try await d.element(id, on: p) == s.state.elements.first { $0.id == id }, "seed \(seed) \(firstUse) \(id)")
            }
        case "pageState":
            #expect(try await d.pageState(p) == s.state, "seed \(seed) \(firstUse)")
        default:
            // An edit then a flush: the snapshot write resolves first.
            let extra = try await d.addStroke(Self.penStrokes(1, seed: seed ^ 7)[0], to: p)
            try await d.flush()
            let after = try await d.elements(p)
            #expect(after.map(\.id) == s.state.elements.map(\.id) + [extra], "seed \(seed) \(firstUse)")
            #expect(Array(after.dropLast()) == s.state.elements, "seed \(seed) \(firstUse)")
        }
        #expect(fileBytes(content + ".corrupt-1") == bad, "seed \(seed) \(firstUse): quarantined copy")
        let reports = await d.recoveryReports
        #expect(reports.contains { $0.path == content }, "seed \(seed) \(firstUse): \(reports)")
        #expect(reports.contains { $0.quarantinedCopy == content + ".corrupt-1" }, "seed \(seed) \(firstUse): \(reports)")
        #expect(try await d.elements(p).prefix(s.state.elements.count) == s.state.elements[...], "seed \(seed) \(firstUse)")
        let final = try await d.pageState(p)
        try await nb.close()
        let rewritten = fileBytes(content)
        #expect(rewritten != nil && rewritten != bad, "seed \(seed) \(firstUse)")
        if let rewritten { #expect((try? PageSnapshot.decode(rewritten).state) == final, "seed \(seed) \(firstUse)") }
        let nb2 = try await openNotebook(dir.path)
        let d2 = try await nb2.openDocument(s.id)
        #expect(try await d2.pageState(p) == final, "seed \(seed) \(firstUse)")
        let reps2 = await d2.recoveryReports
        #expect(reps2.isEmpty, "seed \(seed) \(firstUse): \(reps2)")
        try await nb2.close()
    }

    // MARK: 7.

    @Test("[LOG-27] [PKG-42] a log frame whose points are damaged under a good CRC: its stroke absent, the rest kept; an edit made first is not built on it",
          arguments: ["last", "any", "edit first", "eager open"])
    func damagedLogFramePoints(which: String) async throws {
        let seed = testSeed()
        var g = SeededRNG(seed: seed)
        let dir = try TempDir("defer")
        defer { dir.remove() }
        let s = try await Self.sample(dir, seed: seed)
        let p = s.page, logPath = s.paths.log(p)
        let covered = Int(try PageSnapshot.decode(s.older).coveredLogOffset)
        var log = fileBytes(logPath)!
        let tail = Self.frames(log).filter { $0.offset >= UInt64(covered) && OperationCodec.isCompactStroke($0.frame.type) }
        #expect(tail.count == s.strokes.count - 170, "seed \(seed)")
        var victim: ElementID?
        search: for _ in 0..<50 {
            let chosen = which == "any" ? tail[Int(g.next() % UInt64(tail.count))] : tail[tail.count - 1]
            let (frame, at) = (chosen.frame, Int(chosen.offset))
            for _ in 0..<40 {
                var payload = frame.payload
                let i = payload.count - 1 - Int(g.next() % UInt64(max(1, payload.count / 3)))
                Self.flip(&payload, i, Int(g.next() % 8))
                let damaged = Frame(type: frame.type, payload: payload)
                guard (try? OperationCodec.decode(damaged)) == nil,
                      (try? OperationCodec.decode(damaged, deferringPoints: true)) != nil else { continue }
                let encoded = Self.written(damaged, in: log)
                #expect(encoded.count == chosen.size, "seed \(seed)")
                log.replaceSubrange(at..<(at + encoded.count), with: encoded)
                victim = OperationCodec.id(of: frame)
                break search
            }
        }
        guard let victim else { Issue.record("seed \(seed): no damage found that only the points' decode finds"); return }
        try writeFile(logPath, log)
        guard case .frame = Frame.scan(log, at: LogHeader.size) else { Issue.record("seed \(seed)"); return }

        let nb = try await openNotebook(dir.path)
        let d = try await nb.openDocument(s.id)
        if which != "eager open" {
            let ids = try await d.elementIDs(p)
            #expect(ids.contains(victim), "seed \(seed): the deferred load does not know yet")
        }
        // An edit made before anything drew the page must not be built on the damaged frame
        // (its context would cover an operation the page then drops: it would wait forever).
        var added: [ElementID] = []
        if which == "edit first" { added = [try await d.addStroke(s.strokes[0], to: p)] }
        let elements = try await d.elements(p)
        // What an eager load gives: the frame skipped, and the later operations of its author
        // (whose context covers it) pending.
        let eager = s.state.elements.filter { $0.id.replica != victim.replica || $0.id.counter < victim.counter }
        let expected = eager + elements.filter { added.contains($0.id) }
        #expect(elements.map(\.id) == eager.map(\.id) + added, "seed \(seed): victim \(victim), added \(added)")
        if which == "edit first" {
            // Not built on the dropped frame: the edit does not wait for it, and its stroke is
            // drawn. [PKG-56] The dropped frame is this replica's own: the edit is made under a
            // new replica id, never under the dropped operation's (a peer holding it would take
            // the edit for a duplicate).
            #expect(elements.last?.content.stroke?.points == s.strokes[0].points, "seed \(seed)")
            #expect(added[0].replica != victim.replica, "seed \(seed): the edit took id \(added[0]) of replica \(victim.replica)")
        }
        // The victim is this folder's own operation and the state does not count it: a new
        // replica id was minted, once.
        let minted = await d.recoveryReports.compactMap(\.mintedReplica)
        #expect(minted.count == 1 && minted.first?.old == victim.replica, "seed \(seed) \(which): \(minted)")
        if added.isEmpty {
            #expect(try Self.eagerPage(content: s.paths.content(p), log: logPath).elements == expected, "seed \(seed) \(which)")
        }
        if which == "last" || which == "eager open" { #expect(expected.count == s.state.elements.count - 1, "seed \(seed)") }
        #expect(elements.map(\.id) == expected.map(\.id), "seed \(seed): victim \(victim)")
        #expect(elements == expected, "seed \(seed): victim \(victim)")
        let reports = await d.recoveryReports
        #expect(reports.contains { $0.path == logPath }, "seed \(seed): \(reports)")
        #expect(try await d.element(victim, on: p) == nil, "seed \(seed)")
        try await nb.close()
        // Reopened: the same page, whatever is first asked.
        let nb2 = try await openNotebook(dir.path)
        let d2 = try await nb2.openDocument(s.id)
        #expect(try await d2.element(victim, on: p) == nil, "seed \(seed)")
        #expect(try await d2.elements(p) == expected, "seed \(seed)")
        // The id was minted once: the damaged frame, still in the log, is no longer this
        // replica's.
        #expect(await d2.recoveryReports.allSatisfy { $0.mintedReplica == nil }, "seed \(seed) \(which): minted again")
        try await nb2.close()
    }

    // MARK: 8.

    @Test("[SNAP-38] edits on a page whose points were never decoded are kept")
    func editsWithoutDecoding() async throws {
        let seed = testSeed()
        var g = SeededRNG(seed: seed)
        let dir = try TempDir("defer")
        defer { dir.remove() }
        let s = try await Self.sample(dir, seed: seed)
        let p = s.page
        let nb = try await openNotebook(dir.path)
        let d = try await nb.openDocument(s.id)
        let ids = try await d.elementIDs(p)
        #expect(ids == s.ids, "seed \(seed)")
        var expected = Dictionary(uniqueKeysWithValues: s.state.elements.map { ($0.id, $0) })
        var order = ids
        let shuffled = ids.shuffled(using: &g)
        let moved = Array(shuffled[0..<30]), erased = Array(shuffled[30..<50]), partial = Array(shuffled[50..<90])
        try await d.move(moved, dx: 37, dy: -12, on: p)
        for id in moved { expected[id]!.transform.value = try expected[id]!.transform.value.translated(by: 37, -12) }
        try await d.erase(erased, on: p)
        for id in erased { expected[id] = nil }
        order.removeAll { erased.contains($0) }
        for id in partial {
            let n = s.strokes[s.ids.firstIndex(of: id)!].points.count
            // Past the end: refused, nothing written.
            await #expect(throws: LnoteError.self, "seed \(seed) \(id) of \(n) points") {
                try await d.eraseRange(id, [PointRange(UInt32(n - 1), UInt32(n + 1))], on: p)
            }
            let from = UInt32(g.next() % UInt64(n))
            let to = g.next() % 2 == 0 ? UInt32(n) : from + 1 + UInt32(g.next() % UInt64(n - Int(from)))
            try await d.eraseRange(id, [PointRange(from, to)], on: p)
            expected[id]!.erased = (expected[id]!.erased + [PointRange(from, to)]).normalizedUnion()
        }
        #expect(try await d.elementIDs(p) == order, "seed \(seed)")
        try await nb.close()

        let nb2 = try await openNotebook(dir.path)
        let d2 = try await nb2.openDocument(s.id)
        let got = try await d2.elements(p)
        #expect(got.map(\.id) == order, "seed \(seed)")
        for e in got {
            let want = expected[e.id]!
            #expect(e.content == want.content, "seed \(seed) \(e.id): points")
            #expect(e.transform.value == want.transform.value, "seed \(seed) \(e.id): transform")
            #expect(e.erased == want.erased, "seed \(seed) \(e.id): erased")
        }
        let reps2 = await d2.recoveryReports
        #expect(reps2.isEmpty, "seed \(seed): \(reps2)")
        try await nb2.close()
    }
    // MARK: 9. Strokes deferred in the log tail of a page whose snapshot had none deferred

    /// A replayed add whose points are damaged must be found by `resolve()` even when nothing
    /// live refers to it any more: erased by a later frame of the same tail, or still waiting
    /// in the causal buffer. Its id is in the clock (or the buffer) until then; an eager load
    /// would have dropped it. Waiting operations come out of `resolve()` with their points.
    @Test("[LOG-27] damaged points of a replayed add that was erased or is still waiting are found by resolve()")
    func damagedDeferredAddErasedOrWaiting() throws {
        let seed = testSeed()
        var g = SeededRNG(seed: seed)
        let page = PageID(UUID())
        let me = ReplicaID(0xB0B0_0002), other = ReplicaID(0xC0C0_0003)
        var author = PageReplica(page: page)
        let strokes = Self.penStrokes(40, seed: seed)
        var ops: [Op] = []
        for s in strokes.prefix(20) { ops.append(try author.add(.stroke(s), by: me, wallTime: 1)) }
        // A damaged copy of op 10: eager decode fails, deferred decode succeeds.
        let frame = OperationCodec.frame(ops[10])
        var damaged: Op?
        for _ in 0..<400 where damaged == nil {
            var payload = frame.payload
            let i = payload.count - 1 - Int(g.next() % UInt64(max(1, payload.count / 3)))
            Self.flip(&payload, i, Int(g.next() % 8))
            let f = Frame(type: frame.type, payload: payload)
            if (try? OperationCodec.decode(f)) == nil, let d = try? OperationCodec.decode(f, deferringPoints: true) { damaged = d }
        }
        guard let damaged else { Issue.record("seed \(seed): no damage found only in the points"); return }
        let erase = try author.make(.erase([ops[10].id]), by: me, wallTime: 2)
        func deferred(_ op: Op) throws -> Op { try OperationCodec.decode(OperationCodec.frame(op), deferringPoints: true) }
        var replayed = try ops.map(deferred)
        replayed[10] = damaged

        // Erased by a later frame of the tail: nothing live refers to it.
        var r = PageReplica(page: page)
        try r.receive(replayed + [erase], allowingDeferred: true)
        #expect(r.element(ops[10].id) == nil && r.clock.covers(ops[10].id), "seed \(seed)")
        #expect(!r.isResolved, "seed \(seed)")
        #expect(throws: LnoteError.self, "seed \(seed): the erased add's points are checked") { try r.resolve() }
        #expect(!r.isResolved, "seed \(seed): nothing changed")

        // Waiting for an operation that has not arrived (another replica's, in its context).
        var third = author
        let theirs = try third.add(.stroke(strokes[30]), by: other, wallTime: 3)
        let after = try third.add(.stroke(strokes[31]), by: me, wallTime: 4)
        var w = PageReplica(page: page)
        try w.receive(try ops.map(deferred) + [try deferred(after)], allowingDeferred: true)
        #expect(w.pending.map(\.id) == [after.id], "seed \(seed)")
        try w.resolve()
        #expect(w.pending.allSatisfy { op in if case .add(let c, _) = op.body { c.isResolved } else { true } }, "seed \(seed)")
        try w.receive([erase, theirs])
        #expect(w.isResolved && w.state == third.state, "seed \(seed)")
        var wd = PageReplica(page: page)
        var badAfter = try deferred(after)
        badAfter.body = damaged.body
        try wd.receive(try ops.map(deferred) + [badAfter], allowingDeferred: true)
        #expect(throws: LnoteError.self, "seed \(seed): a waiting add's points are checked") { try wd.resolve() }

        // Outside replay, deferred points are refused at the door.
        var strict = PageReplica(page: page)
        #expect(throws: LnoteError.self, "seed \(seed)") { try strict.receive([damaged]) }
        #expect(strict.clock.total == 0, "seed \(seed)")
    }

    /// A stroke with its points deferred, handed to an edit (from a public decode or from a
    /// replica's elements before resolving), is refused as an argument: it would otherwise
    /// reach the frame encoder without its points.
    @Test("[LOG-27] [LOG-23] an edit given a stroke whose points are deferred is refused, not written")
    func deferredStrokeAsAnEditArgument() async throws {
        let seed = testSeed()
        let strokes = Self.penStrokes(80, seed: seed)
        var author = PageReplica(page: PageID(UUID()))
        for s in strokes { _ = try author.add(.stroke(s), by: ReplicaID(0xA11CE), wallTime: 1) }
        let bytes = PageSnapshot.encode(author.state, coveredLogOffset: 40, logIncarnation: 1)
        let deferred = try PageSnapshot.decode(bytes, deferringPoints: true).state.elements[5].content.stroke!
        #expect(!deferred.isResolved, "seed \(seed)")
        var r = PageReplica(page: PageID(UUID()))
        #expect(throws: LnoteError.self) { _ = try r.add(.stroke(deferred), by: ReplicaID(0xB0B), wallTime: 1) }
        #expect(r.elementCount == 0 && r.clock.total == 0, "seed \(seed): nothing applied")
        // Through a document: refused, the document still usable, the resolved stroke accepted.
        let dir = try TempDir("defer")
        defer { dir.remove() }
        let nb = try await openNotebook(dir.path)
        let d = try await nb.createDocument(title: "D")
        let p = await d.pageList[0].id
        await #expect(throws: LnoteError.self) { _ = try await d.addStroke(deferred, to: p) }
        let id = try await d.addStroke(try deferred.resolved(), to: p)
        #expect(try await d.elements(p).map(\.id) == [id], "seed \(seed)")
        #expect(try await d.elements(p)[0].content.stroke?.points == strokes[5].points, "seed \(seed)")
        // Points given to a deferred stroke replace the deferred ones.
        var given = deferred
        given.points = strokes[6].points
        #expect(given.isResolved && given.pointCount == strokes[6].points.count, "seed \(seed)")
        try await nb.close()
    }

    @Test("[LOG-27] a replica whose state had nothing deferred receives deferred strokes: it is not resolved until resolve()")
    func replicaReceivingDeferredOps() throws {
        let seed = testSeed()
        let page = PageID(UUID())
        var author = PageReplica(page: page)
        let strokes = Self.penStrokes(20, seed: seed)
        var ops: [Op] = []
        for (i, s) in strokes.enumerated() { ops.append(try author.add(.stroke(s), by: ReplicaID(0xA1), wallTime: Int64(i))) }
        let deferred = try ops.map { try OperationCodec.decode(OperationCodec.frame($0), deferringPoints: true) }
        var r = PageReplica(page: page)
        #expect(r.isResolved)
        #expect(throws: LnoteError.self, "seed \(seed): outside replay, refused") { _ = try r.receive(deferred) }
        _ = try r.receive(deferred, allowingDeferred: true)
        #expect(!r.isResolved, "seed \(seed): a replica holding deferred strokes says it is resolved")
        try r.resolve()
        #expect(r.state == author.state, "seed \(seed)")
        #expect(r.state.isResolved, "seed \(seed)")
    }

    @Test("[LOG-27] [PKG-42] a page whose strokes are all in its log (no snapshot, or a version-1 one) opens with its points",
          arguments: ["no snapshot", "v1 snapshot", "empty snapshot"])
    func logOnlyStrokes(kind: String) async throws {
        let seed = testSeed()
        let dir = try TempDir("defer")
        defer { dir.remove() }
        let nb = try await openNotebook(dir.path)
        let d = try await nb.createDocument(title: "L")
        let p = await d.pageList[0].id
        let strokes = Self.penStrokes(90, seed: seed)
        var emptySnapshot: [UInt8]?
        if kind == "empty snapshot" {
            // A snapshot of an empty page that covers the log so far (a stroke added and erased).
            let id = try await d.addStroke(strokes[0], to: p)
            try await d.erase([id], on: p)
            try await d.flush()
            emptySnapshot = fileBytes(d.paths.content(p))
        }
        var older: [UInt8]?
        if kind == "v1 snapshot" {
            _ = try await d.addStrokes(Array(strokes[..<30]), to: p)
            try await d.flush()
            let c = try PageSnapshot.decode(fileBytes(d.paths.content(p))!)
            older = PageSnapshot.encode(c.state, coveredLogOffset: c.coveredLogOffset, logIncarnation: c.logIncarnation, version: 1)
            _ = try await d.addStrokes(Array(strokes[30...]), to: p)
        } else {
            _ = try await d.addStrokes(strokes, to: p)
        }
        let state = try await d.pageState(p)
        try await nb.close()
        let content = d.paths.content(p)
        switch kind {
        case "no snapshot": try FileManager.default.removeItem(atPath: content)
        case "v1 snapshot": try writeFile(content, older!)
        default: try writeFile(content, emptySnapshot!)
        }
        let nb2 = try await openNotebook(dir.path)
        let d2 = try await nb2.openDocument(d.id)
        let ids = try await d2.elementIDs(p)
        #expect(ids == state.elements.map(\.id), "seed \(seed) \(kind)")
        let elements = try await d2.elements(p)
        #expect(elements.allSatisfy { $0.content.isResolved }, "seed \(seed) \(kind): strokes without their points")
        #expect(elements == state.elements, "seed \(seed) \(kind)")
        #expect(try await d2.pageState(p) == state, "seed \(seed) \(kind)")
        if let last = ids.last { #expect(try await d2.element(last, on: p) == state.elements.last, "seed \(seed) \(kind)") }
        // The snapshot written at close holds the points.
        try await d2.compact(page: p)
        try await nb2.close()
        #expect((try? PageSnapshot.decode(fileBytes(content)!).state) == state, "seed \(seed) \(kind)")
    }
    // MARK: 10. Edits that trigger a snapshot write on a page whose snapshot points are damaged

    @Test("[SNAP-38] [PKG-41] [PKG-42] edits on a page with damaged deferred points, compacted or evicted at once, are kept",
          arguments: ["compact", "evict"])
    func editsCompactingDamagedPage(how: String) async throws {
        let seed = testSeed()
        var g = SeededRNG(seed: seed)
        let dir = try TempDir("defer")
        defer { dir.remove() }
        let s = try await Self.sample(dir, seed: seed, count: 200, first: 200, keepTail: false)
        let p = s.page, content = s.paths.content(p)
        guard let bad = try Self.damagePoints(fileBytes(content)!, &g) else {
            Issue.record("seed \(seed): no bit found whose damage only the points' decode finds")
            return
        }
        try writeFile(content, bad)
        let options = testOptions {
            if how == "compact" { $0.compactAfterFrames = 1 } else { $0.maxLoadedPages = 1 }
        }
        let nb = try await openNotebook(dir.path, options: options)
        let d = try await nb.openDocument(s.id)
        let other = try await d.addPage()
        var expected = s.state.elements
        let extra = Self.penStrokes(3, seed: seed ^ 99)
        var added: [ElementID] = []
        for (i, st) in extra.enumerated() {
            // No read of the page first: the edit is made on the deferred page.
            let id = try await d.addStroke(st, to: p)
            added.append(id)
            if how == "evict" { _ = try await d.addStroke(st, to: other) }
            try await d.move([s.ids[i]], dx: 5, dy: 5, on: p)
        }
        for i in 0..<extra.count { expected[i].transform.value = .translation(5, 5) }
        let got = try await d.elements(p)
        #expect(got.map(\.id) == expected.map(\.id) + added, "seed \(seed) \(how)")
        #expect(Array(got.prefix(expected.count)).map(\.content) == expected.map(\.content), "seed \(seed) \(how)")
        #expect(got.prefix(expected.count).map(\.transform.value) == expected.map(\.transform.value), "seed \(seed) \(how)")
        #expect(got.suffix(added.count).map(\.content) == extra.map { ElementContent.stroke($0) }, "seed \(seed) \(how)")
        let final = try await d.pageState(p)
        try await nb.close()
        let nb2 = try await openNotebook(dir.path)
        let d2 = try await nb2.openDocument(s.id)
        #expect(try await d2.pageState(p) == final, "seed \(seed) \(how)")
        try await nb2.close()
    }

    // MARK: - [PKG-56] Own frames this version cannot apply

    /// A frame of a type no version knows (a newer lnote's, [LOG-25]) naming `id`.
    static func unknownTypeFrame(_ id: OpID) -> Frame {
        var payload = (0..<8).map { UInt8(truncatingIfNeeded: id.replica.rawValue >> (8 * UInt64($0))) }
        var c = id.counter
        while c >= 0x80 { payload.append(UInt8(c & 0x7F) | 0x80); c >>= 7 }
        payload.append(UInt8(c))
        payload += [0x01, 0x00, 0x00, 0x2A]  // the rest of a header this reader never gets to
        return Frame(type: 0x3F, payload: payload)
    }

    @Test("[PKG-56] [LOG-25] an own frame of a type this version does not know: the next edit takes a new replica id, once")
    func unknownTypeOwnFrame() async throws {
        let seed = testSeed()
        let dir = try TempDir("defer")
        defer { dir.remove() }
        let s = try await Self.sample(dir, seed: seed)
        let p = s.page, logPath = s.paths.log(p)
        var log = fileBytes(logPath)!
        let lf = Self.frames(log).last!
        let victim = OperationCodec.id(of: lf.frame)!
        let newer = Self.unknownTypeFrame(victim).encoded
        log.replaceSubrange(Int(lf.offset)..<Int(lf.end), with: newer)
        try writeFile(logPath, log)

        let nb = try await openNotebook(dir.path)
        let d = try await nb.openDocument(s.id)
        #expect(try await d.elementIDs(p) == Array(s.ids.dropLast()), "seed \(seed)")
        let added = try await d.addStroke(s.strokes[0], to: p)
        #expect(added.replica != victim.replica, "seed \(seed): the edit took \(added), the frame names \(victim)")
        let minted = await d.recoveryReports.compactMap(\.mintedReplica)
        #expect(minted.count == 1 && minted.first?.old == victim.replica, "seed \(seed): \(minted)")
        try await nb.close()
        let nb2 = try await openNotebook(dir.path)
        let d2 = try await nb2.openDocument(s.id)
        #expect(try await d2.elementIDs(p) == Array(s.ids.dropLast()) + [added], "seed \(seed)")
        #expect(await d2.recoveryReports.allSatisfy { $0.mintedReplica == nil }, "seed \(seed): minted again")
        try await nb2.close()
    }

    @Test("[PKG-56] another process appends an own frame this version cannot apply: the next edit takes a new replica id")
    func otherProcessAppendsUnknownOwnFrame() async throws {
        let seed = testSeed()
        let dir = try TempDir("defer")
        defer { dir.remove() }
        let s = try await Self.sample(dir, seed: seed)
        let p = s.page, logPath = s.paths.log(p)
        let nb = try await openNotebook(dir.path)
        let d = try await nb.openDocument(s.id)
        #expect(try await d.elementIDs(p) == s.ids, "seed \(seed)")
        let author = d.replica
        let next = OpID(replica: author, counter: s.ids.filter { $0.replica == author }.map(\.counter).max()! + 1)
        // What a newer lnote sharing this folder (same replica id) appends.
        let h = try #require(FileHandle(forWritingAtPath: logPath))
        try h.seekToEnd()
        try h.write(contentsOf: Self.unknownTypeFrame(next).encoded)
        try h.close()
        let added = try await d.addStroke(s.strokes[0], to: p)
        #expect(added != next && added.replica != author, "seed \(seed): the edit took \(added), the appended frame names \(next)")
        let minted = await d.recoveryReports.compactMap(\.mintedReplica)
        #expect(minted.count == 1 && minted.first?.old == author, "seed \(seed): \(minted)")
        try await nb.close()
    }

    // MARK: - The open reads the log tail first and decodes both side by side

    /// How many of this process's descriptors are open on `path`.
    static func descriptors(to path: String) -> Int {
        let target = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
        let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return fds.filter { (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\($0)")) == target }.count
    }

    @Test("[PKG-42] [SNAP-29] tails shorter and longer than the side-by-side decode open as the files say",
          arguments: [0, 63, 64, 150])
    func tailLengthsOpenAlike(tail: Int) async throws {
        let seed = testSeed() ^ UInt64(tail)
        let dir = try TempDir("defer")
        defer { dir.remove() }
        let s = try await Self.sample(dir, seed: seed, count: 120 + tail, first: 120)
        let p = s.page
        let expected = try Self.eagerPage(content: s.paths.content(p), log: s.paths.log(p))
        #expect(expected == s.state, "seed \(seed) tail \(tail)")
        let nb = try await openNotebook(dir.path)
        let d = try await nb.openDocument(s.id)
        #expect(try await d.elementIDs(p) == s.ids, "seed \(seed) tail \(tail)")
        // Opened by the lock-free path, which alone defers points (the repair path, taken when
        // it gives up, reads them all): the page's points are not decoded yet.
        #expect(await d.pointsDeferred(p) == true, "seed \(seed) tail \(tail): not the lock-free open")
        #expect(try await d.pageState(p) == expected, "seed \(seed) tail \(tail)")
        let reps = await d.recoveryReports
        #expect(reps.isEmpty, "seed \(seed) tail \(tail): \(reps)")
        // Strokes drawn after the open go on top, after the tail's.
        let more = try await d.addStrokes(Self.penStrokes(5, seed: seed ^ 0x77), to: p)
        #expect(try await d.elementIDs(p) == s.ids + more, "seed \(seed) tail \(tail)")
        try await nb.close()
    }

    @Test("[SNAP-29] [PKG-47] a snapshot whose covered offset is wrong or damaged: the open does not trust the header it read first",
          arguments: ["beyond the log, resealed", "inside a frame, resealed", "flipped, CRC left", "body damaged, CRC left"])
    func coverageReadFirstIsChecked(how: String) async throws {
        let seed = testSeed()
        let dir = try TempDir("defer")
        defer { dir.remove() }
        let s = try await Self.sample(dir, seed: seed, count: 200, first: 120)
        let p = s.page
        var b = s.older
        let logSize = UInt64(fileBytes(s.paths.log(p))!.count)
        func setCovered(_ v: UInt64) { for i in 0..<8 { b[36 + i] = UInt8(truncatingIfNeeded: v >> (8 * UInt64(i))) } }
        switch how {
        case "beyond the log, resealed": setCovered(logSize + 1000); b = Self.resealSnapshot(b)
        case "inside a frame, resealed": setCovered(logSize - 3); b = Self.resealSnapshot(b)
        case "flipped, CRC left": b[40] ^= 0x10
        default:
            // The header's offset is right: the log is opened and read from it, then the
            // snapshot fails its CRC.
            b[b.count / 2] ^= 0x20
        }
        try writeFile(s.paths.content(p), b)
        let nb = try await openNotebook(dir.path)
        let d = try await nb.openDocument(s.id)
        // Every stroke is in the log: whatever the snapshot says, the page holds them all.
        #expect(Set(try await d.elementIDs(p)) == Set(s.ids), "seed \(seed) \(how)")
        // The log opened before the snapshot was found bad is closed: only the loaded page's
        // descriptor is left.
        #expect(Self.descriptors(to: s.paths.log(p)) == 1, "seed \(seed) \(how)")
        #expect(try await d.pageState(p).elements.map(\.id).sorted() == s.state.elements.map(\.id).sorted(), "seed \(seed) \(how)")
        try await nb.close()
    }
}

extension Document {
    /// Whether a loaded page's points are still deferred (nil when it is not loaded).
    func pointsDeferred(_ pid: PageID) -> Bool? { pages[pid].map { !$0.replica.isResolved } }
}
