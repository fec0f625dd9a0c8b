import Foundation
import Testing
import LnoteTestSupport
import LnoteModel
@testable import LnoteStore

@Suite("Syscall seam and durable replace")
struct DurableFileTests {
    /// The calls a clean durable replace makes, in order.
    func cleanRun(_ dir: TempDir) throws -> [SyscallEvent] {
        let rec = SyscallRecorder()
        let io = Syscalls(recorder: rec)
        try DurableFile.replace(dir.sub("probe"), with: Array(repeating: 7, count: 100), io: io)
        return rec.all
    }

    @Test("[PKG-20] a clean replace is temp, write, fsync, close, rename, directory fsync")
    func cleanSequence() throws {
        let dir = try TempDir("dur")
        defer { dir.remove() }
        let kinds = try cleanRun(dir).map(\.kind)
        #expect(kinds == [.open, .write, .fsync, .close, .rename, .open, .fsync, .close])
        #expect(fileBytes(dir.sub("probe")) == Array(repeating: 7, count: 100))
        #expect(listNames(dir.path) == ["probe"])
    }

    /// [PKG-20][PKG-21] Every call of a replace, failed with every kind of fault: the old
    /// content stays (or the new one once the rename happened), and no temp file is left
    /// (after a simulated crash one may be left, which readers ignore and cleanup removes).
    @Test("[PKG-20][PKG-21] faults at every step keep the old content")
    func faultsAtEveryStep() throws {
        let dir = try TempDir("dur")
        defer { dir.remove() }
        let steps = try cleanRun(dir).count
        let old: [UInt8] = Array("old content".utf8)
        let new: [UInt8] = Array(repeating: 0xAB, count: 10_000)
        let faults: [(String, Fault)] = [
            ("ENOSPC", .fail(errno: ENOSPC)), ("EIO", .fail(errno: EIO)),
            ("short", .short(3)), ("EINTR", .fail(errno: EINTR)), ("crash", .crash(afterBytes: 5)),
        ]
        var cases = 0, lost = 0, corrupted = 0
        for step in 0..<steps {
            for (name, fault) in faults {
                let target = dir.sub("file")
                try writeFile(target, old)
                let plan = FaultPlan { $0.sequence == step ? fault : nil }
                let rec = SyscallRecorder()
                let io = Syscalls(faults: plan, recorder: rec)
                var failed = false
                var clear = true
                do {
                    try DurableFile.replace(target, with: new, io: io)
                } catch let e as LnoteError {
                    failed = true
                    clear = e.code == .io
                    #expect(e.code == .io, "step \(step) \(name): \(e)")
                    if name != "crash" { #expect(e.underlying?.hasPrefix("errno ") == true, "\(e)") }
                }
                let renamed = rec.all.contains { $0.kind == .rename && $0.sequence < step }
                    || (name != "crash" && !failed)
                let now = fileBytes(target)
                let expected: [UInt8]
                switch name {
                case "short", "EINTR":
                    // Retried or looped: the replace succeeds.
                    #expect(!failed, "step \(step) \(name)")
                    #expect(now == new)
                    expected = new
                default:
                    if renamed { #expect(now == new, "step \(step) \(name)") } else { #expect(now == old, "step \(step) \(name)") }
                    expected = renamed ? new : old
                }
                cases += 1
                if now != expected { now == old || now == new ? (lost += 1) : (corrupted += 1) }
                let temps = listNames(dir.path).filter(DurableFile.isTemporaryName)
                if name == "crash" {
                    // A crashed process cannot clean up; the next open does.
                    try DurableFile.removeTemporaryFiles(in: dir.path, io: .live)
                } else {
                    #expect(temps.isEmpty, "step \(step) \(name): temp files left \(temps)")
                    if !temps.isEmpty { clear = false }
                }
                #expect(listNames(dir.path) == ["file", "probe"], "step \(step) \(name)")
                if now == expected && (!clear || listNames(dir.path) != ["file", "probe"]) { corrupted += 1 }
            }
        }
        ReliabilityReport.record(family: "syscall faults",
                                 detail: "durable replace: ENOSPC, EIO, short write, EINTR, crash at each of its \(steps) calls (DurableFileTests)",
                                 cases: cases, lost: lost, corrupted: corrupted)
    }

    @Test("errors carry path and errno text")
    func errorContext() throws {
        let dir = try TempDir("dur")
        defer { dir.remove() }
        let io = Syscalls(faults: .failing(.write, with: .fail(errno: ENOSPC)))
        do {
            try DurableFile.replace(dir.sub("x.json"), with: [1, 2, 3], io: io)
            Issue.record("expected ENOSPC")
        } catch let e as LnoteError {
            #expect(e.code == .io)
            #expect(e.underlying == "errno 28 (No space left on device)")
            #expect(e.path?.contains(".x.json.tmp-") == true)
        }
        #expect(throws: LnoteError(.io)) { try DurableFile.read(dir.sub("missing"), io: .live) }
        #expect(try DurableFile.readIfExists(dir.sub("missing"), io: .live) == nil)
    }

    @Test("a file descriptor is released once; a second close throws")
    func closeOnce() throws {
        let dir = try TempDir("dur")
        defer { dir.remove() }
        let fd = try Syscalls.live.open(dir.sub("f"), O_CREAT | O_RDWR)
        try fd.close()
        #expect(throws: LnoteError(.invalidState)) { try fd.close() }
    }

    @Test("short writes are looped until every byte is written")
    func shortWritesLoop() throws {
        let dir = try TempDir("dur")
        defer { dir.remove() }
        let io = Syscalls(faults: FaultPlan { $0.kind == .write ? .short(1) : nil })
        let bytes = Array(0..<200).map { UInt8($0) }
        try DurableFile.replace(dir.sub("f"), with: bytes, io: io)
        #expect(fileBytes(dir.sub("f")) == bytes)
    }
}
