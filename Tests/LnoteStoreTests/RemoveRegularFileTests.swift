import Foundation
import Testing
import LnoteModel
@testable import LnoteStore

/// `OutputFile.removeRegularFile` (what `conflicts --render` removes with, [MERGE-58]) goes
/// through the syscall seam: its `fstatat` and `unlinkat` are recorded, and a fault injected
/// in either is reported as an `io` error naming the entry, with nothing removed.
@Suite struct RemoveRegularFileTests {
    static func folder() throws -> String {
        let dir = NSTemporaryDirectory() + "lnote-remove-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir + "/sub", withIntermediateDirectories: true)
        FileManager.default.createFile(atPath: dir + "/a.png", contents: Data([1, 2, 3]))
        try FileManager.default.createSymbolicLink(atPath: dir + "/link.png", withDestinationPath: dir + "/a.png")
        return dir
    }

    @Test("a regular file is removed; a missing name, a directory and a symlink are left alone; every call through the seam")
    func removes() throws {
        let dir = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let recorder = SyscallRecorder()
        let io = Syscalls(recorder: recorder)
        #expect(try OutputFile.removeRegularFile("link.png", in: dir, io: io) == false)
        #expect(FileManager.default.fileExists(atPath: dir + "/a.png"), "the symlink's target stays")
        #expect(try OutputFile.removeRegularFile("sub", in: dir, io: io) == false)
        #expect(try OutputFile.removeRegularFile("missing.png", in: dir, io: io) == false)
        #expect(try OutputFile.removeRegularFile("a.png", in: dir, io: io) == true)
        #expect(!FileManager.default.fileExists(atPath: dir + "/a.png"))
        #expect(FileManager.default.fileExists(atPath: dir + "/sub"))
        #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: dir + "/link.png")) != nil, "the symlink stays")
        let kinds = recorder.all.filter { $0.path == dir + "/a.png" }.map(\.kind)
        #expect(kinds == [.stat, .unlink], "\(recorder.all)")
        #expect(throws: LnoteError.self) { try OutputFile.removeRegularFile("../x", in: dir, io: io) }
    }

    @Test("a fault in fstatat or unlinkat is an io error naming the entry, and the file stays; an interrupted call is retried",
          arguments: [SyscallKind.stat, .unlink])
    func faults(kind: SyscallKind) throws {
        let dir = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let target = dir + "/a.png"
        let failing = Syscalls(faults: FaultPlan { $0.kind == kind && $0.path == target ? .fail(errno: EIO) : nil })
        do {
            _ = try OutputFile.removeRegularFile("a.png", in: dir, io: failing)
            Issue.record("\(kind): no error")
        } catch let e as LnoteError {
            #expect(e.code == .io && e.path == target, "\(kind): \(e)")
        }
        #expect(FileManager.default.fileExists(atPath: target), "\(kind): the file is still there")
        let interrupted = Syscalls(faults: FaultPlan { $0.kind == kind ? .fail(errno: EINTR) : nil })
        #expect(try OutputFile.removeRegularFile("a.png", in: dir, io: interrupted) == true)
        #expect(!FileManager.default.fileExists(atPath: target))
    }
}
