import Foundation
import Synchronization
import Testing
import LnoteModel
import LnoteTestSupport
@testable import LnoteStore

/// A tmpfs of `size` mounted on a fresh directory, unmounted by `remove()` (root only: a test
/// that cannot mount fails and says why, it does not skip).
struct SmallDisk {
    let dir: TempDir
    var path: String { dir.path }

    init(_ label: String, size: String = "2m") throws {
        dir = try TempDir(label)
        let r = try Self.sh("/bin/mount", ["-t", "tmpfs", "-o", "size=\(size)", "tmpfs", dir.path])
        guard r == 0 else {
            dir.remove()
            throw LnoteError(.invalidState, "cannot mount a tmpfs (mount exited \(r); these tests need root): no full disk to test on",
                             path: dir.path)
        }
    }

    func grow(_ size: String = "40m") throws {
        #expect(try Self.sh("/bin/mount", ["-o", "remount,size=\(size)", path]) == 0)
    }

    func remove() {
        _ = try? Self.sh("/bin/umount", [path])
        dir.remove()
    }

    /// Fills the disk with `filler` until a write fails with ENOSPC; returns its size.
    @discardableResult
    func fill() -> Int {
        let fd = open(path + "/filler", O_WRONLY | O_CREAT | O_APPEND, 0o644)
        defer { close(fd) }
        var total = 0
        for chunk in [1 << 16, 4096, 512, 1] {
            let buf = [UInt8](repeating: 0xAB, count: chunk)
            while true {
                let n = buf.withUnsafeBytes { write(fd, $0.baseAddress, chunk) }
                if n <= 0 { break }
                total += n
            }
        }
        return total
    }

    /// Frees `bytes` of the filler.
    func free(_ bytes: Int) {
        var st = stat()
        guard stat(path + "/filler", &st) == 0 else { return }
        _ = truncate(path + "/filler", max(0, st.st_size - off_t(bytes)))
    }

    static func sh(_ tool: String, _ args: [String]) throws -> Int32 {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: tool)
        p.arguments = args
        try p.run()
        p.waitUntilExit()
        return p.terminationStatus
    }
}

/// Every regular file under `dir` with its bytes (no link followed).
func treeSnapshot(_ dir: String) -> [String: [UInt8]] {
    var out: [String: [UInt8]] = [:]
    let e = FileManager.default.enumerator(atPath: dir)
    while let name = e?.nextObject() as? String {
        var st = stat()
        guard lstat(dir + "/" + name, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { continue }
        out[name] = fileBytes(dir + "/" + name)
    }
    return out
}

/// A fault that fires once, when armed.
final class OneFault: Sendable {
    private let armed = Mutex(false)
    func arm() { armed.withLock { $0 = true } }
    /// True once after `arm()`.
    func take() -> Bool { armed.withLock { a in defer { a = false }; return a } }
}

/// ENOSPC at the `at`-th mutating call (a temporary file's creation included), remembering
/// which call it was.
final class ENOSPCAt: Sendable {
    let at: Int
    private let seen = Mutex(0)
    private let failed = Mutex("")
    init(_ at: Int) { self.at = at }
    var failedCall: String { failed.withLock { $0 } }
    /// Whether the run reached the failing call.
    var triggered: Bool { seen.withLock { $0 } > at }
    var plan: FaultPlan {
        FaultPlan { [self] e in
            guard e.kind.mutates || (e.kind == .open && e.path.contains(".tmp-")) else { return nil }
            let i = seen.withLock { s -> Int in
                defer { s += 1 }
                return s
            }
            if i == at { failed.withLock { $0 = e.description } }
            return i == at ? .fail(errno: ENOSPC) : nil
        }
    }
}

@Suite("Full disk: durable edits are successes, reads never write", .serialized)
struct FullDiskTests {
    /// [PKG-23] ENOSPC at each mutating call of "add strokes, then close" (the CLI's import):
    /// an addition reported done is there exactly once after reopening; one reported failed
    /// is not there, so a retry never duplicates strokes.
    @Test("[PKG-23] ENOSPC at every write of an import: success iff the strokes are durable, never twice")
    func importFaults() async throws {
        var step = 0, cases = 0, lost = 0, duplicated = 0
        while step < 400 {
            let dir = try TempDir("enospc")
            defer { dir.remove() }
            let nb0 = try await openNotebook(dir.path)
            let d0 = try await nb0.createDocument(title: "T")
            let p = try #require(await d0.pageList.first?.id)
            try await d0.addStrokes([stroke(3)], to: p)
            try await d0.close()
            try await nb0.close()

            let enospc = ENOSPCAt(step)
            let plan = enospc.plan
            let io = Syscalls(faults: plan)
            let batch = [stroke(4, x: 100), stroke(5, x: 200)]
            var reported = false
            do {
                let nb = try await openNotebook(dir.path, io: io)
                do {
                    let d = try await nb.openDocument(d0.id)
                    do {
                        _ = try await d.addStrokes(batch, to: p)
                        try await d.close()
                        reported = true
                    } catch {
                        try? await d.close()
                    }
                } catch {}
                try? await nb.close()
            } catch {}
            let triggered = enospc.triggered

            // Reopen with a healthy disk: count the batch's strokes.
            func count() async throws -> Int {
                let nb = try await openNotebook(dir.path)
                let d = try await nb.openDocument(d0.id)
                let n = try await d.elements(p).count - 1
                try await d.close()
                try await nb.close()
                return n
            }
            let n = try await count()
            if reported {
                #expect(n == 2, "step \(step): reported done, \(n) of 2 strokes after reopening")
                if n != 2 { lost += 1 }
            } else {
                #expect(n == 0 || n == 2, "step \(step): half an import")
                if n == 2 {
                    // [PKG-23] [PKG-36] Reported failed means not stored, a failed fdatasync of
                    // the log included (its frames are cut): a retry never duplicates.
                    duplicated += 1
                    Issue.record("step \(step): ENOSPC at \(enospc.failedCall) was reported as a failure, but the strokes are durable")
                }
            }
            #expect(try Verify.run(folder: dir.path).problems.filter { $0.kind != .orphanAsset && $0.kind != .tornTail }.isEmpty,
                    "step \(step)")
            cases += 1
            if !triggered { break }
            step += 1
        }
        #expect(step > 10, "the import made \(step) mutating calls")
        #expect(duplicated == 0, "\(duplicated) steps reported failure with the strokes durable")
        ReliabilityReport.record(family: "full disk", detail: "FullDiskTests.importFaults (ENOSPC at each mutating call of import + close)",
                                 cases: cases, lost: lost, corrupted: duplicated)
    }

    /// [PKG-23] ENOSPC at each mutating call of a sync's receipt (`pushAll`: frames in,
    /// `Notebook.receive`, close): a receipt whose operations are durable in the log is
    /// reported done; a retry after a failure converges with every stroke once.
    @Test("[PKG-23] ENOSPC at every write of a sync's receipt: durable means done, a retry converges once")
    func receiveFaults() async throws {
        var step = 0, cases = 0, bad = 0
        while step < 400 {
            let dir = try TempDir("enospc-sync")
            defer { dir.remove() }
            let a = try await openNotebook(dir.sub("a"))
            let da = try await a.createDocument(title: "S")
            let p = try #require(await da.pageList.first?.id)
            try await da.addStrokes([stroke(3)], to: p)
            let b0 = try await openNotebook(dir.sub("b"))
            try await pushAll(from: a, to: b0)
            try await b0.close()
            try await da.addStrokes([stroke(4, x: 50), stroke(5, x: 90)], to: p)

            let enospc = ENOSPCAt(step)
            let plan = enospc.plan
            var reported = false
            do {
                let b = try await openNotebook(dir.sub("b"), io: Syscalls(faults: plan))
                do {
                    try await pushAll(from: a, to: b)
                    try await b.close()
                    reported = true
                } catch { try? await b.close() }
            } catch {}
            let triggered = enospc.triggered
            let call = enospc.failedCall

            let b = try await openNotebook(dir.sub("b"))
            let db = try await b.openDocument(da.id)
            let n = try await db.elements(p).count
            try await db.close()
            if reported {
                #expect(n == 3, "step \(step) (\(call)): reported done, \(n) of 3 strokes")
                if n != 3 { bad += 1 }
            } else if n == 3 && !call.contains("/.lnote/") {
                // Durable in the log but reported failed (a cache write after it failed).
                // Bookkeeping in .lnote/ (clock cache, remotes) may fail a sync after the
                // receipt: harmless, the next sync sends nothing twice.
                Issue.record("step \(step): ENOSPC at \(call) failed a receipt that was durable")
                bad += 1
            }
            try await pushAll(from: a, to: b)  // the retry
            let db2 = try await b.openDocument(da.id)
            #expect(try await db2.elements(p).count == 3, "step \(step): after the retry")
            try await db2.close()
            try await b.close()
            try await a.close()
            #expect(try Verify.run(folder: dir.sub("b")).problems.filter { $0.kind != .orphanAsset && $0.kind != .tornTail }.isEmpty,
                    "step \(step)")
            cases += 1
            if !triggered { break }
            step += 1
        }
        #expect(step > 5, "the receipt made \(step) mutating calls")
        ReliabilityReport.record(family: "full disk", detail: "FullDiskTests.receiveFaults (ENOSPC at each mutating call of a receipt + close)",
                                 cases: cases, corrupted: bad)
    }

    /// [PKG-23] [PKG-24] On a really full tmpfs: opening, reading, listing, verifying and
    /// closing a notebook whose caches are stale (no manifest, no page snapshot, no
    /// thumbnail) all work and change no file; once space is back, the next open writes them.
    @Test("[PKG-24] read-only work on a full disk (tmpfs) writes nothing and fails nothing")
    func readsOnFullDisk() async throws {
        let disk = try SmallDisk("fulldisk-read")
        defer { disk.remove() }
        let folder = disk.path + "/nb"
        let nb0 = try await openNotebook(folder)
        let d0 = try await nb0.createDocument(title: "full")
        let p = try #require(await d0.pageList.first?.id)
        for i in 0..<5 { try await d0.addStroke(stroke(6, x: Int32(i * 10)), to: p) }
        try await d0.close()
        try await nb0.close()
        let paths = PackagePaths(folder: try Syscalls.live.realpath(folder), id: d0.id)
        // Stale caches: every opening wants to write these.
        try FileManager.default.removeItem(atPath: paths.manifest)
        try FileManager.default.removeItem(atPath: paths.content(p))
        for t in listNames(paths.root + "/thumbnails") { try FileManager.default.removeItem(atPath: paths.root + "/thumbnails/" + t) }
        disk.fill()
        let before = treeSnapshot(folder)

        var cases = 0
        let nb = try await Notebook.open(at: folder, options: testOptions())
        let listed = try await nb.list()
        #expect(listed.count == 1); cases += 1
        let d = try await nb.openDocument(d0.id)
        #expect(try await d.elements(p).count == 5); cases += 1
        #expect(await d.title == "full")
        try await d.close(); cases += 1
        let deferred = await d.deferredSaveFailure
        #expect(deferred?.isDiskFull == true, "\(String(describing: deferred))")
        let report = try Verify.run(folder: folder); cases += 1
        #expect(report.problems.contains { $0.kind == .missingFile && $0.path == paths.manifest })
        _ = try await nb.logClocks(); cases += 1
        try await nb.close()
        #expect(treeSnapshot(folder) == before, "a read on a full disk changed files")
        #expect(!listNames(paths.pages).contains { $0.contains(".tmp-") })

        // Space again: the deferred writes happen at the next opening.
        try disk.grow()
        try FileManager.default.removeItem(atPath: disk.path + "/filler")
        let nb2 = try await Notebook.open(at: folder, options: testOptions())
        let d2 = try await nb2.openDocument(d0.id)
        #expect(try await d2.elements(p).count == 5)
        try await d2.close()
        #expect(await d2.deferredSaveFailure == nil)
        try await nb2.close()
        #expect(fileBytes(paths.manifest) != nil && fileBytes(paths.content(p)) != nil)
        #expect(try Verify.run(folder: folder).problems.filter { $0.kind != .orphanAsset }.isEmpty)
        ReliabilityReport.record(family: "full disk", detail: "FullDiskTests.readsOnFullDisk (open, list, read, close, verify, clocks on a full tmpfs)",
                                 cases: cases)
    }

    /// [PKG-24] [PKG-60] [PKG-66] A folder that must mint a replica id (copied to another
    /// machine; its replica.json damaged) opens and reads on a full disk; the new id is
    /// written before the first operation made under it, and an edit fails while it cannot be.
    @Test("[PKG-24] minting a replica id on a full disk: reads work, the first write waits for the file")
    func mintOnFullDisk() async throws {
        let elsewhere = try TempDir("machine")
        defer { elsewhere.remove() }
        try writeFile(elsewhere.sub("machine-id"), Array("another-machine\n".utf8))
        var cases = 0
        for damage in ["other machine", "damaged replica.json"] {
            let disk = try SmallDisk("fulldisk-mint")
            defer { disk.remove() }
            let folder = disk.path + "/nb"
            let nb0 = try await openNotebook(folder)
            let d0 = try await nb0.createDocument(title: "moved")
            let p = try #require(await d0.pageList.first?.id)
            try await d0.addStroke(stroke(4), to: p)
            try await d0.close()
            try await nb0.close()
            let file = folder + "/.lnote/replica.json"
            if damage == "damaged replica.json" { try writeFile(file, Array("{\"format\": 1, \"rep".utf8)) }
            disk.fill()
            let onDisk = fileBytes(file)

            let nb = try await openNotebook(folder, machineID: damage == "other machine" ? elsewhere.sub("machine-id") : "/etc/machine-id")
            #expect(nb.replica != nb0.replica, "\(damage)")
            #expect(nb.replicaChange != nil || nb.replicaFileRecovery != nil, "\(damage)")
            let d = try await nb.openDocument(d0.id)
            #expect(try await d.elements(p).count == 1, "\(damage)")
            // No room for replica.json: the edit fails before anything is made under the id.
            await #expect(throws: LnoteError(.io)) { _ = try await d.addStroke(stroke(5, x: 40), to: p) }
            #expect(fileBytes(file) == (damage == "other machine" ? onDisk : nil), "\(damage): replica.json as it was")
            // Room again: the first edit writes replica.json, then stamps with its id.
            try disk.grow()
            let e = try await d.addStroke(stroke(5, x: 40), to: p)
            #expect(e.replica == nb.replica, "\(damage)")
            try await d.close()
            try await nb.close()
            let written = try StoreJSON.decode(Notebook.ReplicaFile.self, try #require(fileBytes(file)), path: file)
            #expect(written.replica == nb.replica.description, "\(damage)")
            let nb2 = try await openNotebook(folder, machineID: damage == "other machine" ? elsewhere.sub("machine-id") : "/etc/machine-id")
            #expect(nb2.replica == nb.replica && nb2.replicaChange == nil && nb2.replicaFileRecovery == nil, "\(damage)")
            let d2 = try await nb2.openDocument(d0.id)
            #expect(try await d2.elements(p).count == 2, "\(damage)")
            try await d2.close()
            try await nb2.close()
            cases += 1
        }
        ReliabilityReport.record(family: "full disk", detail: "FullDiskTests.mintOnFullDisk (copied folder, damaged replica.json on a full tmpfs)",
                                 cases: cases)
    }

    /// [PKG-23] Imports on a real full disk with a little room left: each is reported done
    /// exactly when its strokes are durable, and a retry of a failed one adds them once.
    @Test("[PKG-23] imports on a nearly full tmpfs: done means there once; a retry never duplicates")
    func importsOnFullDisk() async throws {
        var cases = 0, bad = 0
        for room in [0, 512, 4096, 8192, 16384, 65536] {
            let disk = try SmallDisk("fulldisk-import")
            defer { disk.remove() }
            let folder = disk.path + "/nb"
            let nb0 = try await openNotebook(folder)
            let d0 = try await nb0.createDocument(title: "T")
            let p = try #require(await d0.pageList.first?.id)
            try await d0.addStroke(stroke(3), to: p)
            try await d0.close()
            try await nb0.close()
            disk.fill()
            disk.free(room)
            let batch = (0..<20).map { stroke(8, x: Int32($0)) }
            var done = false
            do {
                let nb = try await Notebook.open(at: folder, options: testOptions())
                do {
                    let d = try await nb.openDocument(d0.id)
                    do {
                        _ = try await d.addStrokes(batch, to: p)
                        try await d.close()
                        done = true
                    } catch { try? await d.close() }
                } catch {}
                try? await nb.close()
            } catch {}
            try disk.grow()
            try FileManager.default.removeItem(atPath: disk.path + "/filler")
            let nb = try await Notebook.open(at: folder, options: testOptions())
            let d = try await nb.openDocument(d0.id)
            var n = try await d.elements(p).count - 1
            if !done {
                #expect(n == 0, "room \(room): reported failed, \(n) strokes durable")
                _ = try await d.addStrokes(batch, to: p)  // the user's retry
                n = try await d.elements(p).count - 1
            }
            #expect(n == 20, "room \(room): \(n) strokes after import (done: \(done))")
            if n != 20 { bad += 1 }
            try await d.close()
            try await nb.close()
            cases += 1
        }
        ReliabilityReport.record(family: "full disk", detail: "FullDiskTests.importsOnFullDisk (tmpfs, 0 B to 64 KiB left)",
                                 cases: cases, corrupted: bad)
    }

    /// Fails the first `fdatasync` of a page log (`.log` under `pages/`) once armed.
    static func failingPageLogSync(_ once: OneFault, errno e: Int32 = ENOSPC) -> FaultPlan {
        FaultPlan { ev in
            guard ev.kind == .fdatasync, ev.path.contains("/pages/"), ev.path.hasSuffix(".log") else { return nil }
            return once.take() ? .fail(errno: e) : nil
        }
    }

    /// [PKG-36] [PKG-23] A failed fdatasync of the page log during an import: the error says the
    /// frames were cut, the handle no longer shows them, a reopening does not find them, and the
    /// user's retry of the same import (new operation ids) leaves exactly one copy.
    @Test("[PKG-36] a failed log fdatasync cuts the import's frames: a retry stores them once")
    func failedLogSyncRetryOnce() async throws {
        var cases = 0, bad = 0
        for errno in [ENOSPC, EIO] {
            let dir = try TempDir("fdatasync-cut")
            defer { dir.remove() }
            let nb0 = try await openNotebook(dir.path)
            let d0 = try await nb0.createDocument(title: "T")
            let p = try #require(await d0.pageList.first?.id)
            try await d0.addStrokes([stroke(3)], to: p)
            try await d0.close()
            try await nb0.close()
            let logPath = d0.paths.log(p)
            let sizeBefore = fileBytes(logPath)?.count

            let once = OneFault()
            let nb = try await openNotebook(dir.path, io: Syscalls(faults: Self.failingPageLogSync(once, errno: errno)))
            let d = try await nb.openDocument(d0.id)
            let batch = (0..<4).map { stroke(6, x: Int32($0 * 40)) }
            once.arm()
            do {
                _ = try await d.addStrokes(batch, to: p)
                Issue.record("errno \(errno): the import succeeded although its fdatasync failed")
            } catch let e as LnoteError {
                #expect(e.code == .io && e.underlying?.contains("errno \(errno)") == true, "\(e)")
                #expect(e.message.contains("4 frames") && e.message.contains("cut") && e.message.contains("not stored"), "\(e)")
                #expect(e.path == logPath, "\(e)")
            }
            #expect(fileBytes(logPath)?.count == sizeBefore, "errno \(errno): the log is back to its size before the import")
            #expect(try await d.elements(p).count == 1, "errno \(errno): the handle forgot the cut strokes")
            // A second process opening now reads the log without them.
            let other = try await openNotebook(dir.path)
            let od = try await other.openDocument(d0.id)
            #expect(try await od.elements(p).count == 1)
            try await od.close()
            try await other.close()
            // The user's retry, in the same process (the disk healthy again): stored once.
            _ = try await d.addStrokes(batch, to: p)
            #expect(try await d.elements(p).count == 5)
            try await d.close()
            try await nb.close()

            let nb2 = try await openNotebook(dir.path)
            let d2 = try await nb2.openDocument(d0.id)
            let n = try await d2.elements(p).count
            #expect(n == 5, "errno \(errno): \(n - 1) strokes after the retry, expected 4 (one copy)")
            if n != 5 { bad += 1 }
            try await d2.close()
            try await nb2.close()
            #expect(try Verify.run(folder: dir.path).problems.filter { $0.kind != .orphanAsset }.isEmpty)
            cases += 1
        }
        ReliabilityReport.record(family: "full disk", detail: "FullDiskTests.failedLogSyncRetryOnce (failed page-log fdatasync, ENOSPC and EIO, then a retry)",
                                 cases: cases, corrupted: bad)
    }

    /// [PKG-36] A failed fdatasync of `document.log`: the operation is cut, the handle reads the
    /// document again (the title it did not store is not shown) and stays usable.
    @Test("[PKG-36] a failed document.log fdatasync cuts the operation; the handle stays usable")
    func failedDocumentLogSync() async throws {
        let dir = try TempDir("fdatasync-doc")
        defer { dir.remove() }
        let once = OneFault()
        let plan = FaultPlan { ev in
            ev.kind == .fdatasync && ev.path.hasSuffix("/document.log") && once.take() ? .fail(errno: ENOSPC) : nil
        }
        let nb = try await openNotebook(dir.path, io: Syscalls(faults: plan))
        let d = try await nb.createDocument(title: "before")
        let size = fileBytes(d.paths.documentLog)?.count
        once.arm()
        do {
            try await d.setTitle("not stored")
            Issue.record("setTitle succeeded although its fdatasync failed")
        } catch let e as LnoteError {
            #expect(e.code == .io && e.message.contains("the 1 frame written since the last good sync was cut"), "\(e)")
        }
        #expect(fileBytes(d.paths.documentLog)?.count == size)
        #expect(await d.title == "before")
        try await d.setTitle("after")
        #expect(await d.title == "after")
        try await d.close()
        try await nb.close()
        let nb2 = try await openNotebook(dir.path)
        let d2 = try await nb2.openDocument(d.id)
        #expect(await d2.title == "after")
        try await d2.close()
        try await nb2.close()
    }

    /// [PKG-24] [PKG-38] A page log damaged in the middle, opened on a full disk (every write
    /// and temporary file fails with ENOSPC, the quarantine copy `.corrupt-1` included): reads
    /// show the frames a salvage would keep, the report says the salvage is pending, a write is
    /// refused with a clear error, and no file changes. Once space is back, the next write of
    /// the same handle makes the salvage first and succeeds.
    @Test("[PKG-24] [PKG-38] a damaged log on a full disk: reads work, nothing changes, the salvage waits for space")
    func damagedLogOnFullDisk() async throws {
        var cases = 0, bad = 0
        let top = try TempDir("fulldisk-salvage")
        defer { top.remove() }
        let dir = top.sub("nb")
        let (doc, p, paths, bytes, frames) = try await damagedLog(in: dir, pointsPerStroke: 4)
        let before = treeSnapshot(dir)
        // The oracle: what a salvage on a healthy disk keeps (a copy of the folder, which
        // opens under a replica id of its own).
        try FileManager.default.copyItem(atPath: dir, toPath: top.sub("oracle"))
        let nbO = try await openNotebook(top.sub("oracle"))
        let dO = try await nbO.openDocument(doc)
        let expected = try await dO.elements(p).map(\.id)
        #expect(expected.count == 2, "frames 3 and 4 wait for the damaged frame 2")
        #expect(await dO.recoveryReports.contains { $0.newIncarnation != nil && $0.salvagedFrames == 4 })
        try await dO.close()
        try await nbO.close()

        let full = Mutex(true)
        let plan = FaultPlan { ev in
            guard full.withLock({ $0 }) else { return nil }
            return ev.kind == .write || (ev.kind == .open && ev.path.contains(".tmp-")) ? .fail(errno: ENOSPC) : nil
        }
        let nb = try await openNotebook(dir, io: Syscalls(faults: plan))
        let d = try await nb.openDocument(doc)
        // What `lnote show` reads: what the salvage keeps.
        #expect(try await d.elements(p).map(\.id) == expected)
        let pending = await d.recoveryReports.first { $0.salvagePending != nil }
        #expect(pending?.salvagedFrames == 4 && pending?.quarantinedCopy == nil && pending?.problems.first?.offset == Int(frames[2].offset),
                "\(String(describing: pending))")
        #expect(pending?.description.contains("salvage pending") == true)
        // What `lnote log` reads: every frame of the log, from memory.
        #expect(try await d.operations(page: p, notCoveredBy: VectorClock()).count == 4)
        do {
            _ = try await d.addStroke(stroke(4, x: 500), to: p)
            Issue.record("a write to a log whose salvage is pending succeeded")
            bad += 1
        } catch let e as LnoteError {
            #expect(e.code == .io && e.message.contains("salvage could not be written") && e.path == paths.log(p), "\(e)")
        }
        #expect(try await d.elements(p).map(\.id) == expected)
        #expect(treeSnapshot(dir) == before, "a file changed while the disk was full")
        cases += 1

        // Space is back: the same handle's next write salvages first, then appends.
        full.withLock { $0 = false }
        _ = try await d.addStroke(stroke(4, x: 600), to: p)
        #expect(try await d.elements(p).count == expected.count + 1)
        #expect(fileBytes(paths.log(p) + ".corrupt-1") == bytes, "the damaged log preserved as it was")
        let salvaged = await d.recoveryReports.last { $0.newIncarnation != nil }
        #expect(salvaged?.salvagedFrames == 4 && salvaged?.quarantinedCopy == paths.log(p) + ".corrupt-1")
        try await d.close()
        try await nb.close()
        let nb2 = try await openNotebook(dir)
        let d2 = try await nb2.openDocument(doc)
        let n = try await d2.elements(p).count
        #expect(n == expected.count + 1)
        #expect(await d2.recoveryReports.allSatisfy { !$0.hasDamage }, "the salvaged log reopens without damage")
        if n != expected.count + 1 { bad += 1 }
        try await d2.close()
        try await nb2.close()

        // Closing while the disk is still full leaves every file as it was too.
        try FileManager.default.removeItem(atPath: paths.log(p) + ".corrupt-1")
        try FileManager.default.removeItem(atPath: paths.content(p))  // of the salvaged incarnation
        try DurableFile.replace(paths.log(p), with: bytes, io: .live)
        let again = treeSnapshot(dir)
        full.withLock { $0 = true }
        let nb3 = try await openNotebook(dir, io: Syscalls(faults: plan))
        let d3 = try await nb3.openDocument(doc)
        #expect(try await d3.elements(p).map(\.id) == expected)
        try? await d3.close()
        try? await nb3.close()
        #expect(treeSnapshot(dir) == again, "closing on a full disk changed a file")
        cases += 1
        ReliabilityReport.record(family: "full disk", detail: "FullDiskTests.damagedLogOnFullDisk (a damaged page log opened, read, written and closed on a full disk, then space back)",
                                 cases: cases, corrupted: bad)
    }

    /// A notebook at `folder` with one document of five strokes on its first page, whose page
    /// has no snapshot (opening replays the whole log and meets the damage) and whose log has
    /// a byte of frame 2's payload flipped (its CRC fails). Returns the document, the page,
    /// the package's paths, the damaged log's bytes and its frames as written.
    private func damagedLog(in folder: String, pointsPerStroke: Int) async throws
        -> (doc: DocumentID, page: PageID, paths: PackagePaths, log: [UInt8], frames: [LoggedFrame]) {
        let nb0 = try await openNotebook(folder)
        let d0 = try await nb0.createDocument(title: "D")
        let p = try #require(await d0.pageList.first?.id)
        for i in 0..<5 { try await d0.addStroke(stroke(pointsPerStroke, x: Int32(i * 30)), to: p) }
        try await d0.close()
        try await nb0.close()
        let paths = PackagePaths(folder: try Syscalls.live.realpath(folder), id: d0.id)
        try FileManager.default.removeItem(atPath: paths.content(p))
        var bytes = try #require(fileBytes(paths.log(p)))
        let frames = LogScanner.scanFile(bytes).frames
        #expect(frames.count == 5)
        bytes[Int(frames[2].offset) + Frame.headerSize + 3] ^= 0x40  // frame 2's payload: its CRC fails
        try DurableFile.replace(paths.log(p), with: bytes, io: .live)
        return (d0.id, p, paths, bytes, frames)
    }

    /// [PKG-24] [PKG-38] The same on a really full tmpfs: the damaged log's salvage cannot be
    /// written, reads work and change nothing; once space is back a write salvages first.
    @Test("[PKG-24] a damaged log on a full tmpfs: reads work and change nothing; a write after space is back salvages")
    func damagedLogOnFullTmpfs() async throws {
        let disk = try SmallDisk("fulldisk-salvage-tmpfs")
        defer { disk.remove() }
        let folder = disk.path + "/nb"
        let (doc, p, paths, bytes, _) = try await damagedLog(in: folder, pointsPerStroke: 40)
        disk.fill()
        let before = treeSnapshot(folder)
        let nb = try await Notebook.open(at: folder, options: testOptions())
        let d = try await nb.openDocument(doc)
        #expect(try await d.elements(p).count == 2, "frames 0 and 1 (3 and 4 wait for the damaged 2)")
        #expect(await d.recoveryReports.contains { $0.salvagePending?.errnoCode == ENOSPC && $0.salvagedFrames == 4 })
        await #expect(throws: LnoteError(.io)) { _ = try await d.addStroke(stroke(4), to: p) }
        #expect(treeSnapshot(folder) == before, "a file changed on the full disk")
        try disk.grow()
        try FileManager.default.removeItem(atPath: disk.path + "/filler")
        _ = try await d.addStroke(stroke(4, x: 700), to: p)
        #expect(try await d.elements(p).count == 3)
        #expect(fileBytes(paths.log(p) + ".corrupt-1") == bytes)
        try await d.close()
        try await nb.close()
        ReliabilityReport.record(family: "full disk", detail: "FullDiskTests.damagedLogOnFullTmpfs (a damaged page log read on a full tmpfs, then space back)",
                                 cases: 1)
    }

    /// [PKG-35] [PKG-36] Group commit: two concurrent appends share one fdatasync, which fails:
    /// both fail, both are cut, a retry of each stores it once.
    @Test("[PKG-35] [PKG-36] a failed group-commit fdatasync fails and cuts every append it covered")
    func failedGroupCommitSync() async throws {
        var cases = 0, bad = 0
        let dir = try TempDir("fdatasync-gc")
        defer { dir.remove() }
        let once = OneFault()
        let rec = SyscallRecorder()
        // A window long enough that both appends are written before it closes, even on a
        // loaded machine (the test asserts outcomes, not times).
        let options = testOptions { $0.groupCommit = GroupCommit(maxDelay: .seconds(2), maxFrames: 1000) }
        let nb = try await openNotebook(dir.path, io: Syscalls(faults: Self.failingPageLogSync(once), recorder: rec), options: options)
        let d = try await nb.createDocument(title: "G")
        let p = try #require(await d.pageList.first?.id)
        try await d.addStroke(stroke(3), to: p)
        let logPath = d.paths.log(p)
        let sizeBefore = fileBytes(logPath)?.count
        once.arm()
        rec.reset()
        let outcomes = await withTaskGroup(of: Result<ElementID, Error>.self) { g in
            for i in 0..<2 {
                g.addTask {
                    do { return .success(try await d.addStroke(stroke(4, x: Int32(100 * (i + 1))), to: p)) } catch { return .failure(error) }
                }
            }
            var out: [Result<ElementID, Error>] = []
            for await r in g { out.append(r) }
            return out
        }
        let syncs = rec.all.filter { $0.kind == .fdatasync && $0.path == logPath }.count
        let writes = rec.all.filter { $0.kind == .write && $0.path == logPath }.count
        #expect(writes == 2, "both appends written before the shared sync")
        for r in outcomes {
            if case .failure(let err) = r, let e = err as? LnoteError {
                #expect(e.code == .io && e.message.contains("2 frames") && e.message.contains("cut"), "\(e)")
            } else {
                Issue.record("an append covered by the failed fdatasync succeeded: \(r)")
                bad += 1
            }
        }
        #expect(syncs == 2, "the failed shared fdatasync and the cut's: \(syncs)")
        #expect(fileBytes(logPath)?.count == sizeBefore, "both appends cut")
        #expect(try await d.elements(p).count == 1)
        // Each user retries: one copy each.
        for i in 0..<2 { _ = try await d.addStroke(stroke(4, x: Int32(100 * (i + 1))), to: p) }
        try await d.close()
        try await nb.close()
        let nb2 = try await openNotebook(dir.path)
        let d2 = try await nb2.openDocument(d.id)
        let n = try await d2.elements(p).count
        #expect(n == 3, "\(n - 1) strokes after the retries, expected 2")
        if n != 3 { bad += 1 }
        try await d2.close()
        try await nb2.close()
        cases += 1
        ReliabilityReport.record(family: "full disk", detail: "FullDiskTests.failedGroupCommitSync (two appends, one failed shared fdatasync, retries)",
                                 cases: cases, corrupted: bad)
    }
}
