import Foundation
import Synchronization
import Testing
import LnoteTestSupport
import LnoteModel
@testable import LnoteStore

/// Frames with recognizable payloads: the first 4 bytes are the index.
func testFrames(_ n: Int, _ rng: inout SeededRNG, maxExtra: Int = 6) -> [Frame] {
    (0..<n).map { i in
        var p: [UInt8] = [UInt8(i & 0xff), UInt8((i >> 8) & 0xff), UInt8((i >> 16) & 0xff), UInt8(i >> 24)]
        p += randomBytes(Int.random(in: 0...maxExtra, using: &rng), &rng)
        return Frame(type: 0x01, payload: p)
    }
}

/// A log file's bytes: header then frames.
func logBytes(_ header: LogHeader, _ frames: [Frame]) -> [UInt8] {
    var w = ByteWriter()
    w.append(header.encoded)
    for f in frames { f.encode(into: &w) }
    return w.bytes
}

@Suite("Append-only log: header, appends, replay, recovery")
struct PageLogTests {
    let owner = UUID()

    @Test("[PKG-30] header layout: magic, version, kind, owner, incarnation, CRC")
    func headerLayout() throws {
        let u = UUID(uuidString: "00112233-4455-6677-8899-AABBCCDDEEFF")!
        let h = LogHeader(kind: .page, owner: u, incarnation: 0x0102030405060708)
        let b = h.encoded
        #expect(b.count == 40)
        // The test vector of Protocol/document-package.md [PKG-30].
        #expect(hexString(b) == "4c4e4f54454c4f47" + "0100" + "01" + "00"
                + "00112233445566778899aabbccddeeff" + "0807060504030201" + "13f643cd")
        #expect(try LogHeader.decode(b) == h)
        // Version 2 ([PKG-110]) is read; a newer version is refused, not rewritten.
        var two = LogHeader(kind: .page, owner: u, incarnation: 0x0102030405060708, version: 2)
        #expect(try LogHeader.decode(two.encoded) == two)
        two.version = 1
        #expect(two == h)
        var v2 = b
        v2[8] = 3
        let crc = v2.withUnsafeBytes { CRC32C.update(0, UnsafeRawBufferPointer(rebasing: $0[0..<36])) }
        v2[36] = UInt8(crc & 0xff); v2[37] = UInt8((crc >> 8) & 0xff); v2[38] = UInt8((crc >> 16) & 0xff); v2[39] = UInt8(crc >> 24)
        #expect(throws: LnoteError(.unsupportedVersion)) { try LogHeader.decode(v2) }
    }

    /// [LOG-26] A frame longer than readers accept would read back as damage and hide every
    /// frame after it: the log refuses it before writing anything, and keeps what it held.
    @Test("[LOG-26] a frame longer than 16 MiB is refused before anything is written")
    func oversizedFrameIsRefused() throws {
        let dir = try TempDir("log")
        defer { dir.remove() }
        let path = dir.sub("p.log")
        let (log, _) = try PageLog.open(path: path, kind: .page, owner: owner, create: true, io: .live)
        var rng = SeededRNG(seed: 26)
        try log.append(testFrames(2, &rng))
        let before = try #require(fileBytes(path))
        let fits = Frame(type: 0x01, payload: [UInt8](repeating: 7, count: Frame.maxLength - 1))
        let tooLong = Frame(type: 0x01, payload: [UInt8](repeating: 7, count: Frame.maxLength))
        #expect(throws: LnoteError(.limitExceeded)) { _ = try log.write(encoded: [testFrames(1, &rng)[0].encoded, tooLong.encoded]) }
        #expect(fileBytes(path) == before, "nothing of the refused batch is written")
        // The largest frame a reader accepts is written and read back.
        try log.append([fits])
        try log.close()
        let (again, replay) = try PageLog.open(path: path, kind: .page, owner: owner, create: false, io: .live)
        #expect(replay.report.isClean)
        #expect(replay.frames.last?.frame == fits)
        #expect(replay.frames.count == 3)
        try again.close()
    }

    @Test("[PKG-34] append is durable when it returns: write then fdatasync")
    func appendSyncs() throws {
        let dir = try TempDir("log")
        defer { dir.remove() }
        let rec = SyscallRecorder()
        let io = Syscalls(recorder: rec)
        let (log, replay) = try PageLog.open(path: dir.sub("p.log"), kind: .page, owner: owner, create: true, io: io)
        #expect(replay.frames.isEmpty && replay.report.isClean)
        rec.reset()
        var rng = SeededRNG(seed: 1)
        try log.append(testFrames(3, &rng))
        #expect(rec.all.map(\.kind) == [.write, .fdatasync])
        try log.close()
    }

    @Test("[PKG-37] a log cut at every byte offset replays exactly the whole frames before the cut, and appends after it")
    func truncateEverywhere() async throws {
        let seed = testSeed()
        var rng = SeededRNG(seed: seed)
        let frames = testFrames(1000, &rng, maxExtra: 4)
        let header = LogHeader(kind: .page, owner: owner)
        let fullBytes = logBytes(header, frames)
        var ends: [Int] = [LogHeader.size]  // ends[i]: end of the first i frames
        for f in frames { ends.append(ends.last! + f.encodedSize) }
        let boundaries = Dictionary(uniqueKeysWithValues: ends.enumerated().map { ($1, $0) })
        let frameEnds = ends
        let cuts = Array(LogHeader.size...fullBytes.count)
        let owner = self.owner
        // Two workers (two cores); each cut gets its own file. Each counts its cuts, those that
        // lost a whole frame and those replayed wrongly otherwise (RELIABILITY.md).
        let tally = try await withThrowingTaskGroup(of: (cases: Int, lost: Int, corrupted: Int).self) { group in
            for worker in 0..<2 {
                group.addTask {
                    let dir = try TempDir("cut")
                    defer { dir.remove() }
                    let path = dir.sub("p.log")
                    var cases = 0, lost = 0, corrupted = 0
                    for cut in cuts where cut % 2 == worker {
                        let complete = frameEnds.lastIndex { $0 <= cut }!
                        // Replay from a snapshot-like offset up to 20 frames back (how a page
                        // opens), and from the header for every 16th cut and near both ends.
                        let full = cut % 16 == 0 || complete < 3 || complete > frames.count - 3
                        let first = full ? 0 : max(0, complete - 20)
                        try writeFile(path, Array(fullBytes[0..<cut]))
                        let (log, replay) = try PageLog.open(path: path, kind: .page, owner: owner, from: UInt64(frameEnds[first]),
                                                             incarnation: header.incarnation, create: false, io: fastIO)
                        let ok = replay.frames.map(\.frame) == Array(frames[first..<complete])
                            && replay.start == UInt64(frameEnds[first])
                        #expect(ok, "cut \(cut) seed \(seed)")
                        #expect(replay.report.problems.isEmpty, "cut \(cut) seed \(seed)")
                        let tornAsExpected = (replay.report.tornTail != nil) == (boundaries[cut] == nil)
                        #expect(tornAsExpected, "cut \(cut)")
                        let extra = Frame(type: 9, payload: [0xEE, UInt8(cut & 0xff)])
                        try log.append([extra])
                        try log.close()
                        let (again, replay2) = try PageLog.open(path: path, kind: .page, owner: owner, from: UInt64(frameEnds[first]),
                                                                incarnation: header.incarnation, create: false, io: fastIO)
                        #expect(replay2.report.isClean, "cut \(cut)")
                        let appended = replay2.frames.map(\.frame) == Array(frames[first..<complete]) + [extra]
                        #expect(appended, "cut \(cut) seed \(seed)")
                        try again.close()
                        cases += 1
                        if !ok || !appended { lost += 1 } else if !replay.report.problems.isEmpty || !tornAsExpected || !replay2.report.isClean {
                            corrupted += 1
                        }
                        if !ok { break }
                    }
                    return (cases, lost, corrupted)
                }
            }
            var sum = (cases: 0, lost: 0, corrupted: 0)
            for try await t in group { sum = (sum.cases + t.cases, sum.lost + t.lost, sum.corrupted + t.corrupted) }
            return sum
        }
        ReliabilityReport.record(family: "every-byte cuts", detail: "page log cut at every byte, reopened and appended (PageLogTests)",
                                 cases: tally.cases, lost: tally.lost, corrupted: tally.corrupted)
    }

    /// [PKG-37][PKG-38] Flip every bit of a sample of frames (length, CRC, type, payload):
    /// every flip is detected, the damaged frame is never returned, every other frame is,
    /// the damaged file is preserved as a quarantined copy, and the rewritten log is clean.
    @Test("[PKG-38] every flipped bit is detected; frames after the damage are salvaged")
    func bitFlips() throws {
        let seed = testSeed()
        var rng = SeededRNG(seed: seed)
        let frames = testFrames(40, &rng, maxExtra: 24)
        let header = LogHeader(kind: .page, owner: owner, incarnation: 77)
        let full = logBytes(header, frames)
        var offsets: [Int] = []
        var at = LogHeader.size
        for f in frames {
            offsets.append(at)
            at += f.encodedSize
        }
        let dir = try TempDir("flip")
        defer { dir.remove() }
        let path = dir.sub("p.log")
        var cases = 0, lost = 0, corrupted = 0
        var sample = [0, 1, frames.count / 2, frames.count - 2, frames.count - 1]
        while sample.count < 10 { sample.append(Int.random(in: 0..<frames.count, using: &rng)) }
        for victim in Set(sample).sorted() {
            for bit in 0..<(frames[victim].encodedSize * 8) {
                var bytes = full
                bytes[offsets[victim] + bit / 8] ^= 1 << (bit % 8)
                try writeFile(path, bytes)
                let (log, replay) = try PageLog.open(path: path, kind: .page, owner: owner, from: 40, incarnation: 77,
                                                     create: false, io: fastIO)
                let got = replay.frames.map(\.frame)
                var expected = frames
                expected.remove(at: victim)
                let context = "frame \(victim) bit \(bit) seed \(seed)"
                #expect(got == expected, "\(context)")
                let r = replay.report
                if victim == frames.count - 1 && r.problems.isEmpty {
                    // The last frame with a length pointing past the end is indistinguishable
                    // from an interrupted append: reported as a torn tail, never applied.
                    #expect(r.tornTail?.offset == UInt64(offsets[victim]), "\(context)")
                } else {
                    #expect(r.problems.count == 1, "\(context)")
                    #expect(r.problems.first?.offset == offsets[victim], "\(context)")
                    #expect(r.problems.first?.index == victim, "\(context)")
                    #expect(r.problems.first?.path == path)
                    if let q = r.quarantinedCopy { #expect(fileBytes(q) == bytes, "\(context)") } else { Issue.record("no quarantine \(context)") }
                    #expect(r.newIncarnation != nil && r.newIncarnation != 77)
                    #expect(replay.fromBeginning)
                }
                try log.close()
                let (again, clean) = try PageLog.open(path: path, kind: .page, owner: owner, create: false, io: fastIO)
                let reopened = clean.report.isClean && clean.frames.map(\.frame) == expected
                #expect(reopened, "\(context)")
                try again.close()
                for n in listNames(dir.path) where n != "p.log" { try FileManager.default.removeItem(atPath: dir.sub(n)) }
                cases += 1
                if !expected.allSatisfy(got.contains) { lost += 1 } else if got != expected || !reopened { corrupted += 1 }
            }
        }
        ReliabilityReport.record(family: "bit flips", detail: "page log, every bit of 10 frames flipped (PageLogTests)",
                                 cases: cases, lost: lost, corrupted: corrupted)
    }

    /// A damaged range crafted so that most of its positions announce a long frame that fits
    /// (a hostile backup or folder): trying each position with a whole CRC costs about 100,000
    /// bytes of CRC a byte (36 s here); the open salvages every valid frame around it for tens
    /// of bytes a byte ([PKG-37], `FrameSearch`).
    @Test("[PKG-37] [PKG-38] 2 MiB of damage whose positions announce long frames: every valid frame before and after it is kept")
    func craftedDamageIsSearchedQuickly() throws {
        var rng = SeededRNG(seed: 0xDA3A6E)
        let frames = testFrames(20, &rng, maxExtra: 3000)
        let header = LogHeader(kind: .page, owner: owner, incarnation: 9)
        var bytes = logBytes(header, Array(frames[..<10]))
        let damageAt = bytes.count
        while bytes.count < damageAt + (2 << 20) { bytes += [0, 0, 8, 0, 0, 8, 0, 0] }
        let damageEnd = bytes.count
        for f in frames[10...] { bytes += f.encoded }
        let dir = try TempDir("crafted-damage")
        defer { dir.remove() }
        let path = dir.sub("p.log")
        try writeFile(path, bytes)
        let (log, replay) = try PageLog.open(path: path, kind: .page, owner: owner, create: false, io: fastIO)
        defer { try? log.close() }
        #expect(replay.frames.map(\.frame) == frames)
        let problems = replay.report.problems
        #expect(problems.count == 1 && problems.first?.offset == damageAt && problems.first?.index == 10, "\(problems)")
        #expect(replay.report.droppedBytes == damageEnd - damageAt && replay.report.salvagedFrames == frames.count)
        // The scan's search cost: tens of bytes of CRC a byte of damage, not a whole CRC per
        // position (which costs about 100,000 bytes a byte here).
        let scan = LogScanner.scanFile(bytes)
        #expect(scan.frames.map(\.frame) == frames && scan.damage.count == 1)
        #expect(scan.searchBytesHashed <= 200 * (damageEnd - damageAt), "\(scan.searchBytesHashed) bytes of CRC")
    }

    @Test("[PKG-38] a damaged header is reported and the frames behind it are salvaged")
    func headerFlips() throws {
        var rng = SeededRNG(seed: 5)
        let frames = testFrames(10, &rng)
        let full = logBytes(LogHeader(kind: .page, owner: owner), frames)
        let dir = try TempDir("hdr")
        defer { dir.remove() }
        let path = dir.sub("p.log")
        for bit in 0..<(LogHeader.size * 8) {
            var bytes = full
            bytes[bit / 8] ^= 1 << (bit % 8)
            try writeFile(path, bytes)
            let (log, replay) = try PageLog.open(path: path, kind: .page, owner: owner, create: false, io: fastIO)
            #expect(replay.frames.map(\.frame) == frames, "bit \(bit)")
            #expect(replay.report.problems.count == 1, "bit \(bit): \(replay.report)")
            #expect(replay.report.quarantinedCopy != nil)
            try log.close()
            for n in listNames(dir.path) where n != "p.log" { try FileManager.default.removeItem(atPath: dir.sub(n)) }
        }
    }

    /// [PKG-38] [PKG-112] The bytes a salvage drops are counted once each: under a damaged
    /// header, what lies before the first frame kept overlaps a damaged range or a bad frame
    /// at the end, which were counted twice (a count above the file's size could follow).
    @Test("[PKG-38] a salvage under a damaged header counts each dropped byte once, the anchor it keeps not among them")
    func droppedBytesCountedOnce() throws {
        var rng = SeededRNG(seed: 38)
        let frames = testFrames(3, &rng)
        let anchor = LogAnchor(writer: 0xB0, baseWallTime: 1_700_000_000_000).frame
        var header = LogHeader(kind: .page, owner: owner, incarnation: 7, version: 2).encoded
        header[20] ^= 0x40  // under the header's CRC
        var bad = frames[0].encoded
        bad[bad.count - 1] ^= 0x01  // a complete frame whose CRC fails
        let dir = try TempDir("dropped")
        defer { dir.remove() }
        let path = dir.sub("p.log")
        // (bytes, frames kept, bytes dropped): all but the anchor kept at 40.
        let cases: [([UInt8], Int, Int)] = [
            (header + anchor + bad, 0, LogHeader.size + bad.count),
            (header + anchor + Array(repeating: 0xEE, count: 10) + anchor + frames[1].encoded, 1, LogHeader.size + 10 + anchor.count),
            (header + anchor + frames[1].encoded + Array(repeating: 0xEE, count: 10) + frames[2].encoded + bad, 2,
             LogHeader.size + 10 + bad.count),
        ]
        for (i, (bytes, kept, dropped)) in cases.enumerated() {
            try writeFile(path, bytes)
            let (log, replay) = try PageLog.open(path: path, kind: .page, owner: owner, create: false, io: fastIO)
            #expect(replay.frames.count == kept, "case \(i): \(replay.report)")
            #expect(replay.report.droppedBytes == dropped, "case \(i): \(replay.report.droppedBytes) dropped, expected \(dropped)")
            #expect(replay.report.droppedBytes <= bytes.count - anchor.count, "case \(i)")
            try log.close()
            for n in listNames(dir.path) where n != "p.log" { try FileManager.default.removeItem(atPath: dir.sub(n)) }
        }
    }

    @Test("a log naming another page is refused, not rewritten")
    func wrongOwner() throws {
        let dir = try TempDir("own")
        defer { dir.remove() }
        let path = dir.sub("p.log")
        try writeFile(path, logBytes(LogHeader(kind: .page, owner: UUID()), []))
        let before = fileBytes(path)
        #expect(throws: LnoteError(.corrupt)) {
            _ = try PageLog.open(path: path, kind: .page, owner: owner, create: false, io: fastIO)
        }
        #expect(fileBytes(path) == before)
    }

    @Test("[PKG-34] a failed append leaves no partial frame; the next append works")
    func failedAppend() throws {
        let dir = try TempDir("fail")
        defer { dir.remove() }
        let path = dir.sub("p.log")
        var rng = SeededRNG(seed: 9)
        let frames = testFrames(5, &rng, maxExtra: 100)
        for (name, plan) in [
            ("ENOSPC after a short write", FaultPlan.failing(.write, nth: 1, with: .fail(errno: ENOSPC))),
            ("EIO", FaultPlan.failing(.write, with: .fail(errno: EIO))),
        ] {
            try? FileManager.default.removeItem(atPath: path)
            let (log0, _) = try PageLog.open(path: path, kind: .page, owner: owner, create: true, io: .live)
            try log0.append([frames[0]])
            try log0.close()
            // The first write call transfers 7 bytes, the second fails.
            let shortFirst = FaultPlan { e in
                if e.kind == .write && e.path == path {
                    return plan.decide(e) ?? .short(7)
                }
                return nil
            }
            let io = Syscalls(faults: shortFirst)
            let (log, _) = try PageLog.open(path: path, kind: .page, owner: owner, create: false, io: io)
            #expect(throws: LnoteError(.io), "\(name)") { try log.append([frames[1]]) }
            #expect(fileBytes(path)?.count == 40 + frames[0].encodedSize, "\(name): truncated back")
            try log.append([frames[2]])
            try log.close()
            let (again, replay) = try PageLog.open(path: path, kind: .page, owner: owner, create: false, io: .live)
            #expect(replay.report.isClean, "\(name)")
            #expect(replay.frames.map(\.frame) == [frames[0], frames[2]], "\(name)")
            try again.close()
        }
    }

    @Test("[PKG-36] a failed fdatasync poisons the log until it is reopened")
    func failedSync() throws {
        let dir = try TempDir("sync")
        defer { dir.remove() }
        let path = dir.sub("p.log")
        let io = Syscalls(faults: .failing(.fdatasync, with: .fail(errno: EIO)))
        let (log, _) = try PageLog.open(path: path, kind: .page, owner: owner, create: true, io: io)
        #expect(throws: LnoteError(.io)) { try log.append([Frame(type: 1, payload: [1])]) }
        #expect(throws: LnoteError(.invalidState)) { try log.append([Frame(type: 1, payload: [2])]) }
        try log.close()
        let (again, replay) = try PageLog.open(path: path, kind: .page, owner: owner, create: false, io: .live)
        // What the failed sync covered may or may not be on disk after a power loss; here the
        // page cache still has it.
        #expect(replay.frames.count <= 1)
        try again.close()
    }

    /// [PKG-36] After a failed fdatasync the writer cuts exactly its own unsynced frames:
    /// frames another process wrote before them (read by catchUp) stay, the log is usable
    /// again, and a reopening reads it without the cut frames.
    @Test("[PKG-36] a failed fdatasync cuts this process's unsynced frames, never another's before them")
    func failedSyncCutsOwnFrames() throws {
        let dir = try TempDir("sync-cut")
        defer { dir.remove() }
        let path = dir.sub("p.log")
        var rng = SeededRNG(seed: 36)
        let frames = testFrames(6, &rng)
        let armed = Mutex(false)
        // Fails the armed process's first fdatasync only.
        let plan = FaultPlan { e in
            guard e.kind == .fdatasync else { return nil }
            return armed.withLock { a in defer { a = false }; return a } ? .fail(errno: ENOSPC) : nil
        }
        let (mine, _) = try PageLog.open(path: path, kind: .page, owner: owner, create: true, io: Syscalls(faults: plan))
        try mine.append([frames[0]])                      // synced: stays
        let (other, _) = try PageLog.open(path: path, kind: .page, owner: owner, create: false, io: .live)
        try other.write([frames[1]])                     // another process's, not synced
        guard case .grew = try mine.catchUp(underLock: true) else { Issue.record("no growth seen"); return }
        let othersEnd = mine.end
        try mine.write([frames[2], frames[3]])            // ours, in two calls (one group)
        try mine.write([frames[4]])
        armed.withLock { $0 = true }
        #expect(throws: LnoteError(.io)) { try mine.sync() }
        #expect(mine.cutAfterFailedSync() == .cut(frames: 3, offset: othersEnd, durable: true))
        #expect(fileBytes(path)?.count == Int(othersEnd), "cut back to the end of the other process's frame")
        #expect(mine.poisoned == nil)
        try mine.append([frames[5]])                      // usable again
        try mine.close()
        try other.close()
        let (again, replay) = try PageLog.open(path: path, kind: .page, owner: owner, create: false, io: .live)
        #expect(replay.report.isClean)
        #expect(replay.frames.map(\.frame) == [frames[0], frames[1], frames[5]])
        try again.close()
    }

    /// [PKG-36] A failed fdatasync whose frames another process appended after (a group
    /// commit's window): nothing is cut, the log stays refused.
    @Test("[PKG-36] frames another process appended after ours: a failed sync cuts nothing")
    func failedSyncKeepsInterleavedFrames() throws {
        let dir = try TempDir("sync-keep")
        defer { dir.remove() }
        let path = dir.sub("p.log")
        var rng = SeededRNG(seed: 37)
        let frames = testFrames(4, &rng)
        let (mine, _) = try PageLog.open(path: path, kind: .page, owner: owner, create: true,
                                          io: Syscalls(faults: .failing(.fdatasync, with: .fail(errno: EIO))))
        try mine.write([frames[0]])                      // ours, waiting for a group commit
        let (other, _) = try PageLog.open(path: path, kind: .page, owner: owner, create: false, io: .live)
        try other.append([frames[1]])                    // another process appends after it
        let size = fileBytes(path)?.count
        // Not read yet by this process: the cut finds the other process's frame past its end.
        #expect(throws: LnoteError(.io)) { try mine.sync() }
        guard case .kept = mine.cutAfterFailedSync() else { Issue.record("cut another process's frame"); return }
        #expect(fileBytes(path)?.count == size)
        #expect(throws: LnoteError(.invalidState)) { try mine.write([frames[2]]) }
        try? mine.close()
        // Read by catchUp before the sync: the same.
        let (mine2, _) = try PageLog.open(path: path, kind: .page, owner: owner, create: false,
                                           io: Syscalls(faults: .failing(.fdatasync, nth: 0, with: .fail(errno: EIO))))
        try mine2.write([frames[2]])
        _ = try other.catchUp(underLock: true)           // as a writer does under the lock
        try other.append([frames[3]])
        _ = try mine2.catchUp(underLock: true)
        #expect(throws: LnoteError(.io)) { try mine2.sync() }
        guard case .kept = mine2.cutAfterFailedSync() else { Issue.record("cut another process's frame"); return }
        try? mine2.close()
        try other.close()
        let (again, replay) = try PageLog.open(path: path, kind: .page, owner: owner, create: false, io: .live)
        #expect(replay.frames.map(\.frame) == frames)
        try again.close()
    }

    @Test("readFrames returns frames from an offset; damage there is reported with offset and index, then recovered")
    func readFromOffset() throws {
        let dir = try TempDir("read")
        defer { dir.remove() }
        let path = dir.sub("p.log")
        var rng = SeededRNG(seed: 3)
        let frames = testFrames(20, &rng)
        let (log, _) = try PageLog.open(path: path, kind: .page, owner: owner, create: true, io: .live)
        try log.append(Array(frames[0..<10]))
        let mid = log.end
        try log.append(Array(frames[10...]))
        #expect(try log.readFrames(from: mid).map(\.frame) == Array(frames[10...]))
        #expect(try log.readFrames(from: 40).map(\.frame) == frames)
        // Damage frame 3 behind the log's back.
        var bytes = fileBytes(path)!
        let third = 40 + frames[0..<3].reduce(0) { $0 + $1.encodedSize }
        bytes[third + 9] ^= 0x10
        let fd = try Syscalls.live.open(path, O_WRONLY)
        try Syscalls.live.pwrite(fd, [bytes[third + 9]], at: UInt64(third + 9))
        try fd.close()
        do {
            _ = try log.readFrames(from: 40)
            Issue.record("expected corrupt")
        } catch let e as LnoteError {
            #expect(e.code == .corrupt && e.offset == third && e.index == 3 && e.path == path)
        }
        let replay = try log.recover()
        #expect(replay.frames.count == 19 && replay.report.problems.count == 1)
        #expect(try log.readFrames(from: 40).count == 19)
        try log.append([frames[3]])
        try log.close()
    }
}
