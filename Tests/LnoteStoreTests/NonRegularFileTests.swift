import Foundation
import Testing
import LnoteModel
import LnoteTestSupport
@testable import LnoteStore

/// [PKG-22] Symlinks, FIFOs and directories where a notebook expects a regular file: never
/// followed, opened for reading (a FIFO would block) or copied into the notebook.
@Suite("Non-regular files inside a notebook")
struct NonRegularFileTests {
    static let secret: [UInt8] = Array("PRIVATE-KEY-0123456789-do-not-leak".utf8)

    /// What can stand at a file's name instead of the file.
    enum Intruder: String, CaseIterable, CustomStringConvertible {
        case symlink, danglingSymlink, fifo, directory
        var description: String { rawValue }
        var kindName: String {
            switch self {
            case .symlink, .danglingSymlink: "symlink"
            case .fifo: "FIFO"
            case .directory: "directory"
            }
        }

        /// Replaces the file at `path` by the intruder (`target`: a private file elsewhere).
        func install(at path: String, target: String) throws {
            try? FileManager.default.removeItem(atPath: path)
            switch self {
            case .symlink: #expect(Glibc.symlink(target, path) == 0)
            case .danglingSymlink: #expect(Glibc.symlink(target + ".absent", path) == 0)
            case .fifo: #expect(mkfifo(path, 0o644) == 0)
            case .directory: try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
            }
        }
    }

    /// A notebook with one document whose first page has a log and a snapshot.
    func sample(_ dir: TempDir) async throws -> (DocumentID, PageID, PackagePaths) {
        let nb = try await openNotebook(dir.sub("nb"))
        let d = try await nb.createDocument(title: "T")
        let p = try #require(await d.pageList.first?.id)
        for i in 0..<3 { try await d.addStroke(stroke(4, x: Int32(i * 10)), to: p) }
        try await d.close()
        try await nb.close()
        return (d.id, p, PackagePaths(folder: try Syscalls.live.realpath(dir.sub("nb")), id: d.id))
    }

    /// Every regular file under `dir` (not following links), and whether any holds `needle`.
    static func notebookHolds(_ needle: [UInt8], under dir: String) -> [String] {
        var found: [String] = []
        let e = FileManager.default.enumerator(atPath: dir)
        while let name = e?.nextObject() as? String {
            let p = dir + "/" + name
            var st = stat()
            guard lstat(p, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG, let bytes = fileBytes(p) else { continue }
            if bytes.count >= needle.count,
               (0...(bytes.count - needle.count)).contains(where: { bytes[$0..<($0 + needle.count)].elementsEqual(needle) }) {
                found.append(p)
            }
        }
        return found
    }

    @Test("[PKG-22] a page log or snapshot that is a symlink, FIFO or directory is refused, never copied; verify names it")
    func pageFiles() async throws {
        var cases = 0, leaked = 0
        for intruder in Intruder.allCases {
            for which in ["log", "content"] {
                let dir = try TempDir("nonreg")
                defer { dir.remove() }
                let (docID, p, paths) = try await sample(dir)
                let target = dir.sub("private.key")
                try writeFile(target, Self.secret)
                let victim = which == "log" ? paths.log(p) : paths.content(p)
                try intruder.install(at: victim, target: target)

                // Reading the page: refused with `corrupt` naming the path, or (a snapshot
                // only) rebuilt from the log without ever opening the intruder.
                let nb = try await openNotebook(dir.sub("nb"))
                var refused: LnoteError?
                do {
                    let d = try await nb.openDocument(docID)
                    do {
                        let state = try await d.pageState(p)
                        #expect(which == "content" && state.elements.count == 3, "\(intruder) \(which)")
                    } catch let e as LnoteError { refused = e }
                    try? await d.close()
                } catch let e as LnoteError { refused = e }
                try? await nb.close()
                if let refused {
                    #expect(refused.code == .corrupt, "\(intruder) \(which): \(refused)")
                    #expect(refused.path == victim, "\(intruder) \(which): \(refused)")
                    #expect(refused.message.contains("not a regular file (\(intruder.kindName))"), "\(refused)")
                } else {
                    #expect(which == "content", "\(intruder) \(which): a log intruder must be refused")
                }
                // Nothing of the private file came in; the intruder is still there, as it was.
                let holders = Self.notebookHolds(Self.secret, under: dir.sub("nb"))
                #expect(holders.isEmpty, "\(intruder) \(which): \(holders)")
                if !holders.isEmpty { leaked += 1 }
                #expect(fileBytes(target) == Self.secret)

                // verify reports it by name and kind, and does not block on a FIFO.
                let report = try Verify.run(folder: paths.root.components(separatedBy: "/\(docID)").first!)
                let named = report.problems.filter { $0.kind == .notRegularFile && $0.path == victim }
                #expect(named.count == 1, "\(intruder) \(which): \(report.problems)")
                #expect(named.first?.message == "not a regular file (\(intruder.kindName))")
                cases += 1
            }
        }
        ReliabilityReport.record(family: "files", detail: "NonRegularFileTests.pageFiles (symlink, dangling, FIFO, directory × log, snapshot)",
                                 cases: cases, lost: leaked)
    }

    @Test("[PKG-22] pages/ or the package itself as a symlink to a directory elsewhere is not listed through")
    func directories() async throws {
        let dir = try TempDir("nonreg-dir")
        defer { dir.remove() }
        let (docID, _, paths) = try await sample(dir)
        // pages/ moved away and replaced by a link to it: verify refuses to follow it.
        try FileManager.default.moveItem(atPath: paths.pages, toPath: dir.sub("elsewhere"))
        #expect(symlink(dir.sub("elsewhere"), paths.pages) == 0)
        let folder = try Syscalls.live.realpath(dir.sub("nb"))
        let report = try Verify.run(folder: folder)
        #expect(report.problems.contains { $0.kind == .notRegularFile && $0.path == paths.pages
                && $0.message == "not a directory (symlink)" }, "\(report.problems)")
        #expect(throws: LnoteError(.corrupt)) { _ = try Syscalls.live.listDirectory(paths.pages) }
        // The seam's own refusal says which path and what it is.
        do {
            _ = try Syscalls.live.listDirectory(paths.pages)
        } catch let e as LnoteError {
            #expect(e.path == paths.pages && e.message == "not a directory (symlink)", "\(e)")
        }
        // Opening the document does not go through it either (O_NOFOLLOW guards only the
        // last name of a path: the directories are checked on their own).
        let nb = try await openNotebook(folder)
        do {
            let d = try await nb.openDocument(docID)
            try? await d.close()
            Issue.record("a package whose pages/ is a symlink was opened")
        } catch let e as LnoteError {
            #expect(e.code == .corrupt && e.path == paths.pages && e.message == "not a directory (symlink)", "\(e)")
        }
        // The package itself as a symlink to a package elsewhere.
        try FileManager.default.removeItem(atPath: paths.pages)
        try FileManager.default.moveItem(atPath: dir.sub("elsewhere"), toPath: paths.pages)
        try FileManager.default.moveItem(atPath: paths.root, toPath: dir.sub("package-elsewhere"))
        #expect(symlink(dir.sub("package-elsewhere"), paths.root) == 0)
        do {
            let d = try await nb.openDocument(docID)
            try? await d.close()
            Issue.record("a package that is a symlink was opened")
        } catch let e as LnoteError {
            #expect(e.code == .corrupt && e.path == paths.root && e.message == "not a directory (symlink)", "\(e)")
        }
        try await nb.close()
        let report2 = try Verify.run(folder: folder)
        #expect(report2.problems.contains { $0.kind == .notRegularFile && $0.path == paths.root }, "\(report2.problems)")
        ReliabilityReport.record(family: "files", detail: "NonRegularFileTests.directories (pages/, the package as symlinks; open and verify)",
                                 cases: 4)
    }

    @Test("[PKG-22] the seam opens no FIFO for reading or writing, and follows no symlink")
    func seam() throws {
        let dir = try TempDir("nonreg-seam")
        defer { dir.remove() }
        #expect(mkfifo(dir.sub("fifo"), 0o644) == 0)
        try writeFile(dir.sub("real"), Self.secret)
        #expect(symlink(dir.sub("real"), dir.sub("link")) == 0)
        for (name, flags) in [("fifo", O_RDONLY), ("fifo", O_WRONLY), ("fifo", O_RDWR), ("link", O_RDONLY), ("link", O_RDWR)] {
            do {
                let fd = try Syscalls.live.open(dir.sub(name), flags)
                try fd.close()
                Issue.record("\(name) \(flags) opened")
            } catch let e as LnoteError {
                #expect(e.code == .corrupt && e.path == dir.sub(name), "\(name): \(e)")
                #expect(e.message.hasPrefix("not a regular file ("), "\(e)")
            }
        }
        // A durable replace over a dangling link replaces the link itself: nothing is
        // written where it pointed.
        #expect(symlink(dir.sub("target-absent"), dir.sub("dangling")) == 0)
        try DurableFile.replace(dir.sub("dangling"), with: [1], io: .live)
        #expect(Syscalls.live.fileType(atPath: dir.sub("dangling")) == "regular file")
        #expect(try DurableFile.read(dir.sub("dangling"), io: .live) == [1])
        #expect(!FileManager.default.fileExists(atPath: dir.sub("target-absent")))
        ReliabilityReport.record(family: "files", detail: "NonRegularFileTests.seam (FIFO r/w/rw, symlink r/rw, dangling)", cases: 6)
    }
}
