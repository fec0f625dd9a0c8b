import Foundation
import Testing
import LnoteModel
import LnoteReplication
@testable import LnoteStore

@Suite("verify: every kind of problem is found, with path and offset")
struct VerifyTests {
    /// A notebook with one document of two pages (strokes, an image), closed.
    func sample(_ dir: TempDir) async throws -> (PackagePaths, PageID, PageID) {
        let nb = try await openNotebook(dir.path)
        let d = try await nb.createDocument(title: "V")
        let p0 = await d.pageList[0].id
        let p1 = try await d.addPage()
        for i in 0..<5 { try await d.addStroke(stroke(4, x: Int32(i)), to: p0) }
        _ = try await d.addImage([5, 6, 7], frame: QRect(x: 0, y: 0, width: 1, height: 1), to: p1)
        try await d.addStroke(stroke(), to: p1)
        let paths = d.paths
        try await nb.close()
        return (paths, p0, p1)
    }

    @Test("[PKG-70] a healthy notebook verifies clean")
    func clean() async throws {
        let dir = try TempDir("ver")
        defer { dir.remove() }
        _ = try await sample(dir)
        let r = try Verify.run(folder: dir.path)
        #expect(r.isClean, "\(r.problems)")
        #expect(r.documents == 1 && r.files >= 7)
    }

    /// [PKG-70] [PKG-104] A file verify cannot read (here a sparse page log of 3 TB, more
    /// than one read may take) is reported as `unreadable` with the reason, and the rest of
    /// the notebook is still checked (before: verify stopped there, and the problems of every
    /// other document went unreported).
    @Test("[PKG-70] an unreadable file is reported and verify goes on")
    func unreadableFileDoesNotStopVerify() async throws {
        let dir = try TempDir("ver")
        defer { dir.remove() }
        let (paths, p0, _) = try await sample(dir)
        let nb = try await openNotebook(dir.path)
        let other = try await nb.createDocument(title: "W")
        try await other.addStroke(stroke(), to: await other.pageList[0].id)
        let otherPaths = other.paths
        try await nb.close()
        let huge: UInt64 = 3 << 40
        #expect(truncate(paths.log(p0), off_t(huge)) == 0)
        try writeFile(otherPaths.pages + "/.x.content.tmp-0123456789abcdef", [1])
        let r = try Verify.run(folder: dir.path)
        let unreadable = try #require(r.problems(.unreadable).first, "\(r.problems)")
        #expect(unreadable.path == paths.log(p0) && unreadable.message.contains("\(huge) bytes"), "\(unreadable)")
        #expect(r.problems(.temporaryFile).map(\.path) == [otherPaths.pages + "/.x.content.tmp-0123456789abcdef"], "\(r.problems)")
        #expect(r.documents == 2 && !r.isClean)
        // What the unreadable log holds is not known: nothing is called missing from it.
        #expect(r.problems(.missingOperations).isEmpty, "\(r.problems)")
    }

    @Test("[PKG-1] [PKG-70] the package top and thumbnails/: quarantined copies, unknown names, a missing document.json")
    func topOfThePackage() async throws {
        let dir = try TempDir("ver")
        defer { dir.remove() }
        let (paths, p0, _) = try await sample(dir)
        // What lnote's own recovery leaves at the top, and names the layout does not have.
        try writeFile(paths.document + ".corrupt-1", [1])
        try writeFile(paths.documentLog + ".corrupt-2", [1])
        try writeFile(paths.root + "/notes.txt", [1])
        try FileManager.default.createDirectory(atPath: paths.thumbnails, withIntermediateDirectories: true)
        try writeFile(paths.thumbnails + "/notes.txt", [1])
        try writeFile(paths.thumbnail(p0) + ".corrupt-1", [1])
        try writeFile(paths.legacyThumbnail(p0), [1])  // an old picture: a name the layout has
        let r = try Verify.run(folder: dir.path)
        #expect(Set(r.problems(.quarantinedFile).map(\.path))
                == [paths.document + ".corrupt-1", paths.documentLog + ".corrupt-2", paths.thumbnail(p0) + ".corrupt-1"])
        #expect(Set(r.problems(.unknownFile).map(\.path)) == [paths.root + "/notes.txt", paths.thumbnails + "/notes.txt"])
        #expect(r.problems.count == 5, "\(r.problems)")
        // document.json is required like the manifest: both are rebuilt (from the log) by open.
        try FileManager.default.removeItem(atPath: paths.document)
        let r2 = try Verify.run(folder: dir.path)
        #expect(r2.problems(.missingFile).map(\.path) == [paths.document])
        let nb = try await openNotebook(dir.path)
        _ = try await nb.openDocument(paths.id)
        try await nb.close()
        #expect(try Verify.run(folder: dir.path).problems(.missingFile).isEmpty)
    }

    @Test("[PKG-70] [MERGE-41] two frames of one log with one id and different content: forkedFrame at the later one")
    func forkInsideALog() async throws {
        let dir = try TempDir("ver")
        defer { dir.remove() }
        let (paths, p0, _) = try await sample(dir)
        let log = fileBytes(paths.log(p0))!
        let frames = try LogFileContents(log).frames.map(\.frame)
        let op = try OperationCodec.decode(frames[1])
        // The same operation again (a harmless duplicate), then its id with other content.
        var forged = op
        forged.wallTime += 1
        let duplicate = OperationCodec.encode(op), fork = OperationCodec.encode(forged)
        try writeFile(paths.log(p0), log + duplicate + fork)
        let r = try Verify.run(folder: dir.path)
        #expect(r.problems.map(\.kind) == [.forkedFrame], "\(r.problems)")
        let p = try #require(r.problems.first)
        #expect(p.path == paths.log(p0) && p.offset == log.count + duplicate.count && p.index == frames.count + 1)
        #expect(p.message.contains("\(op.id)") && p.message.contains("frame 1"))
    }

    @Test("[PKG-70] each kind of damage is reported")
    func everyKind() async throws {
        let dir = try TempDir("ver")
        defer { dir.remove() }
        let (paths, p0, p1) = try await sample(dir)
        // corruptFrame: flip a payload byte of the 2nd frame of p0's log.
        var log = fileBytes(paths.log(p0))!
        let second = Int(try LogFileContents(log).frames[1].offset)  // after the anchor, [PKG-110]
        log[second + 12] ^= 0x55
        try writeFile(paths.log(p0), log)
        // tornTail: half a frame at the end of p1's log.
        try writeFile(paths.log(p1), fileBytes(paths.log(p1))! + [9, 0, 0, 0, 1, 2])
        // undecodable: a snapshot cut short.
        let content = fileBytes(paths.content(p1))!
        try writeFile(paths.content(p1), Array(content.prefix(content.count / 2)))
        // staleManifest.
        var m = try ManifestFile.decode(fileBytes(paths.manifest)!, path: "")
        m.source = "sha256:" + String(repeating: "1", count: 64)
        try writeFile(paths.manifest, try StoreJSON.encode(m))
        // orphanAsset, assetMismatch, missingAsset.
        let orphan = AssetID.of([1])
        try writeFile(paths.asset(orphan), [1])
        let image = AssetID.of([5, 6, 7])
        try writeFile(paths.asset(image), [0])  // now mismatched
        try FileManager.default.moveItem(atPath: paths.asset(image), toPath: paths.asset(AssetID.of([8])))
        // orphanPageFile, temporaryFile, unknownFile, quarantinedFile.
        let stranger = PageID()
        try writeFile(paths.log(stranger), LogHeader(kind: .page, owner: stranger.uuid).encoded)
        try writeFile(paths.pages + "/.x.content.tmp-0123456789abcdef", [1])
        try writeFile(paths.pages + "/notes.txt", [1])
        try writeFile(paths.log(p0) + ".corrupt-1", [1])
        try writeFile(dir.sub(".y.tmp-0000000000000000"), [])
        // malformedOperation: a valid frame with an unknown type appended to the document log.
        var w = ByteWriter()
        Frame(type: 0x7f, payload: [1, 2, 3]).encode(into: &w)
        try writeFile(paths.documentLog, fileBytes(paths.documentLog)! + w.bytes)

        let r = try Verify.run(folder: dir.path)
        let kinds = Set(r.problems.map(\.kind))
        // missingLog, quarantinedOperation and knownFork: TrustStoreTests (a deleted log, the
        // quarantine of a sync); notRegularFile: NonRegularFileTests.
        for k in VerifyProblem.Kind.allCases
        where ![.missingFile, .snapshotMismatch, .unpairedSnapshot, .missingLog, .quarantinedOperation, .knownFork,
                .notRegularFile, .forkedFrame, .unreadable, .orphanPageFile].contains(k) {
            #expect(kinds.contains(k), "\(k) not reported: \(r.problems)")
        }
        let frame = try #require(r.problems(.corruptFrame).first)
        #expect(frame.path == paths.log(p0) && frame.offset == second && frame.index == 1)
        let torn = try #require(r.problems(.tornTail).first)
        #expect(torn.path == paths.log(p1) && torn.offset == (fileBytes(paths.log(p1))!.count - 6))
        #expect(r.problems(.missingAsset).first?.path == paths.asset(image))
        #expect(r.problems(.orphanAsset).map(\.path).contains(paths.asset(orphan)))
        // [SYNC-84] A page file of a page the document lacks waits for it: listed, not a problem.
        #expect(r.problems(.orphanPageFile).isEmpty)
        #expect(r.waiting.map(\.kind) == [.orphanPageFile] && r.waiting.map(\.path) == [paths.log(stranger)])
        #expect(r.problems(.malformedOperation).first?.path == paths.documentLog)
        // [PKG-51] The damaged frame of p0's log held its 2nd operation, which the snapshot holds.
        let missing = try #require(r.problems(.missingOperations).first)
        #expect(missing.path == paths.log(p0) && missing.message.hasPrefix("1 operation ")
                    && missing.message.hasSuffix(".2 (sync fetches them from a peer that holds them)"), "\(missing)")
        for p in r.problems { #expect(!p.description.isEmpty) }

        // missingFile and snapshotMismatch (unpairedSnapshot: SnapshotPairingTests).
        try FileManager.default.removeItem(atPath: paths.manifest)
        let fresh = LogHeader(kind: .page, owner: p1.uuid)
        try writeFile(paths.log(p1), fresh.encoded)
        try writeFile(paths.content(p1), content)
        let r2 = try Verify.run(folder: dir.path)
        #expect(r2.problems(.missingFile).map(\.path) == [paths.manifest])
        #expect(r2.problems(.snapshotMismatch).map(\.path) == [paths.content(p1)])
    }

    /// A snapshot whose CRC holds but one of whose element records does not decode (here: a
    /// resealed mutation of the elements section) is reported with the record's index and the
    /// byte offset, the same ones the decoder gives (and `show` prints).
    @Test("[PKG-70] a damaged snapshot record is reported with its index and offset")
    func snapshotRecordIndex() async throws {
        let seed = testSeed()
        var rng = SplitMix64(seed: seed)
        let dir = try TempDir("ver")
        defer { dir.remove() }
        let (paths, p0, _) = try await sample(dir)
        let content = try #require(fileBytes(paths.content(p0)))
        let body = try #require(DeferredPointsStoreTests.elementsBody(content))
        var found: LnoteError?
        for _ in 0..<10_000 where found == nil {
            var b = content
            b[body.lowerBound + Int(rng.below(UInt64(body.count)))] ^= UInt8(1 << rng.below(8))
            b = DeferredPointsStoreTests.resealSnapshot(b)
            do {
                _ = try PageSnapshot.decode(b, path: paths.content(p0))
            } catch let e as LnoteError where e.index != nil {
                try writeFile(paths.content(p0), b)
                found = e
            } catch {}
        }
        let e = try #require(found, "no mutation of a record failed in a record (seed \(seed))")
        let r = try Verify.run(folder: dir.path)
        let problem = try #require(r.problems.first { $0.path == paths.content(p0) }, "seed \(seed): \(r.problems)")
        #expect(problem.kind == .undecodable && problem.record == e.index && problem.offset == e.offset
                    && problem.index == nil, "seed \(seed): \(problem) vs \(e)")
        #expect(problem.description.contains("(record \(e.index!))"), "seed \(seed)")
    }

    @Test("verify never changes the folder")
    func readOnly() async throws {
        let dir = try TempDir("ver")
        defer { dir.remove() }
        let (paths, p0, _) = try await sample(dir)
        try writeFile(paths.log(p0), fileBytes(paths.log(p0))! + [1, 2, 3])
        try writeFile(paths.pages + "/.a.tmp-0000000000000000", [1])
        let rec = SyscallRecorder()
        _ = try Verify.run(folder: dir.path, io: Syscalls(recorder: rec))
        #expect(rec.all.filter { $0.kind.mutates }.isEmpty)
    }

    @Test("[PKG-21] Notebook.verify can remove temporary files of documents that are not open")
    func removesTemporaries() async throws {
        let dir = try TempDir("ver")
        defer { dir.remove() }
        let (paths, _, _) = try await sample(dir)
        let temp = paths.pages + "/.p.content.tmp-0123456789abcdef"
        try writeFile(temp, [1, 2])
        let nb = try await openNotebook(dir.path)
        #expect(try await nb.verify().problems(.temporaryFile).map(\.path) == [temp])
        let r = try await nb.verify(removeTemporaryFiles: true)
        #expect(r.removedTemporaryFiles == [temp] && r.isClean)
        #expect(fileBytes(temp) == nil)
        try await nb.close()
    }
}
