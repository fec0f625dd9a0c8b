import Foundation
import Testing
import LnoteModel
@testable import LnoteStore

/// A notebook folder on read-only media (a backup on a read-only mount, or without write
/// permission): its lock files open read-only for `flock` (which needs no write access), and
/// a lock file that cannot be made is no reason to refuse a reader. Driven through the
/// syscall seam: the tests run as root, for whom permissions do not refuse a write.
@Suite struct ReadOnlyFolderTests {
    /// [PKG-80] [PKG-83] The lock file exists but may not be opened for writing (EROFS): it
    /// is opened read-only and locked; a second holder waits as usual.
    @Test(arguments: [EROFS, EACCES])
    func lockFileOpensReadOnly(_ code: Int32) throws {
        let dir = try TempDir("rolock")
        defer { dir.remove() }
        try FileManager.default.createDirectory(atPath: dir.sub(".lnote"), withIntermediateDirectories: true)
        #expect(FileManager.default.createFile(atPath: dir.sub(".lnote/lock"), contents: nil))
        let io = Syscalls(faults: .failing(.open, nth: 0, pathContains: ".lnote/lock", with: .fail(errno: code)))
        let lock = FileLock.notebook(dir.path, io: io, timeout: .milliseconds(50))
        let held = try lock.acquire()
        // Held: another holder (its own descriptor) does not get it.
        let other = try FileLock.notebook(dir.path, io: .live, timeout: .milliseconds(50)).tryAcquire()
        #expect(other == nil)
        other?.release()
        held.release()
        let again = try #require(try FileLock.notebook(dir.path, io: .live, timeout: .milliseconds(50)).tryAcquire())
        again.release()
    }

    /// [PKG-21] Opening cleans temporary files only when it can take the lock at once; on
    /// read-only media, where no lock file can be made, `tryAcquire` answers nil (nothing is
    /// cleaned) instead of failing the open.
    @Test func lockFileThatCannotBeMadeIsNoLock() throws {
        let dir = try TempDir("rolock")
        defer { dir.remove() }
        try FileManager.default.createDirectory(atPath: dir.sub(".lnote"), withIntermediateDirectories: true)
        let io = Syscalls(faults: FaultPlan { e in e.kind == .open && e.path.hasSuffix(".lnote/lock") ? .fail(errno: EROFS) : nil })
        let none = try FileLock.notebook(dir.path, io: io, timeout: .milliseconds(50)).tryAcquire()
        #expect(none == nil)
        none?.release()
        // A writer still fails, with the reason.
        #expect(throws: LnoteError.self) { try FileLock.notebook(dir.path, io: io, timeout: .milliseconds(50)).acquire() }
    }

    /// An edit of a read-only folder is refused with the system's reason.
    static func expectEditRefused(_ d: Document, _ page: PageID, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        do {
            _ = try await d.addStroke(stroke(2), to: page)
            Issue.record("an edit of a read-only folder was accepted", sourceLocation: sourceLocation)
        } catch let e as LnoteError {
            #expect(e.isReadOnly, "\(e)", sourceLocation: sourceLocation)
        }
    }

    /// Every file of a folder, by relative path (test side: plain Foundation).
    static func tree(_ root: String) -> [String: [UInt8]] {
        var out: [String: [UInt8]] = [:]
        let e = FileManager.default.enumerator(atPath: root)
        while let rel = e?.nextObject() as? String {
            var isDir: ObjCBool = false
            if FileManager.default.fileExists(atPath: root + "/" + rel, isDirectory: &isDir), !isDir.boolValue {
                out[rel] = fileBytes(root + "/" + rel) ?? []
            }
        }
        return out
    }

    /// A folder with one document: a compacted page with a log tail, a page never compacted
    /// (log only) whose log ends in a torn append, and a title.
    static func makeFolder(_ path: String) async throws -> (DocumentID, [PageID], [ElementID]) {
        let nb = try await openNotebook(path)
        let d = try await nb.createDocument(title: "backup")
        let first = await d.pageList[0].id
        let second = try await d.addPage()
        var ids = try await d.addStrokes((0..<6).map { stroke(4 + $0, x: Int32($0) * 50) }, to: first)
        try await d.compact(page: first)
        ids += try await d.addStrokes([stroke(7, x: 900)], to: first)
        ids += try await d.addStrokes([stroke(3, x: 5), stroke(9, x: 60)], to: second)
        let id = d.id
        try await nb.close()
        // An append cut short by a crash: a reader that may not cut it reads the frames before it.
        let log = path + "/\(id).lnote/pages/\(second).log"
        try writeFile(log, (fileBytes(log) ?? []) + [0x30, 0, 0, 0, 7, 7])
        return (id, [first, second], ids)
    }

    /// [PKG-24] [PKG-38] A damaged page log on read-only media: the salvage is not written
    /// (no rewrite, no `.corrupt-N` copy, whether the folder or only the file refuses
    /// writing); the valid frames are read, the damaged one is reported, an edit is refused
    /// with the reason, and not one byte of the folder changes.
    @Test(arguments: [EROFS, EACCES])
    func damagedLogOnReadOnlyMediaIsReadNotSalvaged(_ code: Int32) async throws {
        let dir = try TempDir("rodamage")
        defer { dir.remove() }
        let (docID, pages, ids) = try await Self.makeFolder(dir.path)
        // Flip a byte inside the second page's first frame (its second frame still follows),
        // and take its snapshot away, so that the whole log is read.
        try FileManager.default.removeItem(atPath: dir.path + "/\(docID).lnote/pages/\(pages[1]).content")
        let log = dir.path + "/\(docID).lnote/pages/\(pages[1]).log"
        var bytes = try #require(fileBytes(log))
        bytes[Int(try #require(LogScanner.scanFile(bytes).frames.first).offset) + 12] ^= 0xFF  // past the anchor and its copy
        try writeFile(log, bytes)
        let before = Self.tree(dir.path)
        let nb = try await openNotebook(dir.path, io: Syscalls(faults: .readOnlyMedia(code)))
        let d = try await nb.openDocument(docID)
        // The frame after the damage is read; its operation (the author's next) waits for the
        // damaged one's ([MERGE-40]): nothing to list, and no error.
        let listed = try await d.elementIDs(pages[1])
        #expect(listed == [], "\(listed) of \(ids)")
        #expect(try await d.elementIDs(pages[0]) == Array(ids[0..<7]))
        try await Self.expectEditRefused(d, pages[1])
        try await nb.close()
        #expect(Self.tree(dir.path) == before)
    }

    /// [PKG-24] A notebook on read-only media (a backup on a read-only mount): opening it,
    /// its document and both pages (a log opened read-only, its torn tail left as it is)
    /// shows every element; an edit is refused with the system's reason before anything is
    /// written; closing writes nothing; not one byte of the folder changes.
    @Test(arguments: [EROFS, EACCES])
    func readOnlyFolderIsReadAndNeverWritten(_ code: Int32) async throws {
        let dir = try TempDir("roread")
        defer { dir.remove() }
        let (docID, pages, ids) = try await Self.makeFolder(dir.path)
        let before = Self.tree(dir.path)
        let nb = try await openNotebook(dir.path, io: Syscalls(faults: .readOnlyMedia(code)))
        #expect(try await nb.list().map(\.id) == [docID])
        let d = try await nb.openDocument(docID)
        #expect(try await d.elementIDs(pages[0]) == Array(ids[0..<7]))
        #expect(try await d.elementIDs(pages[1]) == Array(ids[7...]))
        // Points decoded, not only listed.
        let points = try await d.elements(pages[1]).compactMap { $0.content.stroke?.points.count }
        #expect(points == [3, 9])
        #expect(try await d.allConflicts().isEmpty)
        try await Self.expectEditRefused(d, pages[0])
        try await nb.close()
        let after = Self.tree(dir.path)
        #expect(after == before, "changed: \(Set(after.keys).symmetricDifference(before.keys).sorted()) or contents")
    }
}

