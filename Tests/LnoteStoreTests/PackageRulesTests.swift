import Foundation
import Testing
import LnoteModel
import LnoteReplication
@testable import LnoteStore

@Suite("Package rules: manifest cache, dirty pages, assets, library, replica identity")
struct PackageRulesTests {
    @Test("[PKG-10] document.json and manifest.json are canonical: sorted keys, stable bytes")
    func canonicalJSON() async throws {
        let dir = try TempDir("pkg")
        defer { dir.remove() }
        let nb = try await openNotebook(dir.path)
        let d = try await nb.createDocument(title: "Canon \"quoted\" / slash")
        let paths = d.paths
        try await d.flush()
        let doc1 = fileBytes(paths.document)!, man1 = fileBytes(paths.manifest)!
        try await nb.close()
        let text = String(decoding: doc1, as: UTF8.self)
        #expect(text.contains("\"title\" : {") && text.hasSuffix("}\n"))
        #expect(String(decoding: man1, as: UTF8.self).contains("Canon \\\"quoted\\\" / slash"))
        // Re-encoding the decoded value gives the same bytes.
        let (f, _, _) = try DocumentFile.decode(doc1, path: paths.document)
        #expect(try StoreJSON.encode(f) == doc1)
        // Reopening and saving without edits rewrites nothing.
        let rec = SyscallRecorder()
        let nb2 = try await openNotebook(dir.path, io: Syscalls(recorder: rec))
        let d2 = try await nb2.openDocument(d.id)
        try await d2.flush()
        try await nb2.close()
        #expect(rec.all.filter { $0.kind == .write && !$0.path.hasSuffix("/lock") }.isEmpty)
        #expect(fileBytes(paths.document) == doc1 && fileBytes(paths.manifest) == man1)
    }

    @Test("[PKG-13] a missing or stale manifest is rebuilt on open and by reconcile, never by list")
    func manifestCache() async throws {
        let dir = try TempDir("pkg")
        defer { dir.remove() }
        let nb = try await openNotebook(dir.path)
        let d = try await nb.createDocument(title: "M")
        let paths = d.paths
        try await nb.close()
        let good = fileBytes(paths.manifest)!
        // Missing: list says so; reconcile rebuilds the same bytes.
        try FileManager.default.removeItem(atPath: paths.manifest)
        let nb2 = try await openNotebook(dir.path)
        #expect(try await nb2.list().map(\.manifest) == [.missing])
        #expect(fileBytes(paths.manifest) == nil, "list never writes")
        #expect(try await nb2.reconcile() == [d.id])
        #expect(fileBytes(paths.manifest) == good)
        // Stale: a manifest derived from another document.json is detected and rebuilt.
        var stale = try ManifestFile.decode(good, path: "")
        stale.title = "Old title"
        stale.source = "sha256:" + String(repeating: "0", count: 64)
        try writeFile(paths.manifest, try StoreJSON.encode(stale))
        #expect(try await nb2.list().first?.title == "Old title", "list trusts the cache")
        #expect(try Notebook.manifestIsCurrent(paths, io: .live) == false)
        #expect(try await nb2.reconcile() == [d.id])
        #expect(fileBytes(paths.manifest) == good)
        #expect(try await nb2.reconcile().isEmpty, "nothing left to rebuild")
        // Unreadable: listed as such; opening the document rebuilds it.
        try writeFile(paths.manifest, Array("{not json".utf8))
        guard case .unreadable = try await nb2.list().first?.manifest else {
            Issue.record("expected unreadable")
            return
        }
        let opened = try await nb2.openDocument(d.id)
        #expect(fileBytes(paths.manifest) == good)
        try await opened.close()
        try await nb2.close()
    }

    @Test("[PKG-62] list reads manifest.json only")
    func listReadsManifestsOnly() async throws {
        let dir = try TempDir("pkg")
        defer { dir.remove() }
        let nb = try await openNotebook(dir.path)
        var ids: [DocumentID] = []
        for i in 0..<3 {
            let d = try await nb.createDocument(title: "Doc \(i)")
            try await d.addStroke(stroke(), to: await d.pageList[0].id)
            ids.append(d.id)
            try await d.close()
        }
        try await nb.close()
        // document.json unreadable by permissions (and counted through the seam).
        for id in ids { chmod(PackagePaths(folder: dir.path, id: id).document, 0) }
        defer { for id in ids { chmod(PackagePaths(folder: dir.path, id: id).document, 0o644) } }
        let rec = SyscallRecorder()
        let nb2 = try await openNotebook(dir.path, io: Syscalls(recorder: rec))
        rec.reset()
        let list = try await nb2.list()
        #expect(Set(list.map(\.id)) == Set(ids))
        #expect(list.allSatisfy { $0.elementCount == 1 && $0.pageCount == 1 && $0.manifest == .valid })
        let opened = rec.pathsOpened
        #expect(opened.count == 3 && opened.allSatisfy { $0.hasSuffix("/manifest.json") }, "\(opened)")
        // The lock-free form gives the same answer while the notebook is open.
        #expect(try Notebook.list(at: dir.path) == list)
        try await nb2.close()
    }

    /// [PKG-16] Editing one page and flushing writes the same files, and the same bytes, in
    /// a 200-page document as in a 2-page one: that page's log, snapshot and thumbnail, and
    /// manifest.json (whose counts have more digits); document.json not at all. Nothing
    /// of another page is opened: the manifest's counts of other pages were read at open.
    @Test("[PKG-16] only dirty pages are rewritten: 200 pages cost what 2 pages cost")
    func dirtyPagesOnly() async throws {
        struct Save {
            /// Per written file (temporary names normalized): bytes written, in order.
            var writes: [(name: String, bytes: Int)]
            var opened: [String]
            var manifest: ManifestFile
            var manifestSize: Int
        }
        func save(pages: Int) async throws -> Save {
            let dir = try TempDir("dirty")
            defer { dir.remove() }
            let nb = try await openNotebook(dir.path, io: fastIO)
            let d = try await nb.createDocument(title: "Big")
            for _ in 1..<pages { try await d.addPage() }
            for p in await d.pageList { try await d.addStroke(stroke(), to: p.id) }
            let target = await d.pageList[pages / 2].id
            try await nb.close()
            let rec = SyscallRecorder()
            let nb2 = try await openNotebook(dir.path, io: Syscalls(recorder: rec, performsSync: false))
            let d2 = try await nb2.openDocument(d.id)
            rec.reset()
            try await d2.addStroke(stroke(9), to: target)
            try await d2.flush()
            // The page's picture is drawn after the save, in the background ([PKG-103]).
            await d2.thumbnailsSettled()
            let events = rec.all
            try await nb2.close()
            func normalized(_ path: String) -> String {
                var name = String(path.dropFirst(d.paths.root.count))
                    .replacingOccurrences(of: target.description, with: "PAGE")
                    .replacingOccurrences(of: #"\.tmp-[0-9a-f]{16}"#, with: ".tmp", options: .regularExpression)
                name = name.replacingOccurrences(of: #"[0-9A-F]{8}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{12}"#,
                                                 with: "OTHER", options: .regularExpression)
                return name
            }
            let manifestBytes = try #require(fileBytes(d.paths.manifest))
            // The edit's line in the undo journal ([PKG-100]) is the replica's, not the save's.
            let saving = events.filter { !$0.path.contains("/.lnote/undo/") }
            return Save(writes: saving.filter { $0.kind == .write }.map { (normalized($0.path), $0.byteCount) },
                        opened: saving.filter { $0.kind == .open }.map { normalized($0.path) },
                        manifest: try ManifestFile.decode(manifestBytes, path: ""), manifestSize: manifestBytes.count)
        }
        let small = try await save(pages: 2)
        let big = try await save(pages: 200)
        // The same files, in the same order; the page's thumbnail ([PKG-17]) is drawn after the
        // save's last write ([PKG-103]); document.json is not rewritten by a page-only save.
        #expect(small.writes.map(\.name) == big.writes.map(\.name))
        #expect(small.writes.map(\.name) == ["/pages/PAGE.log", "/pages/.PAGE.content.tmp", "/.manifest.json.tmp",
                                              "/thumbnails/.PAGE.jpg.tmp"])
        #expect(!big.writes.contains { $0.name.contains("document.json") })
        // The same bytes, apart from the page's own snapshot and thumbnail, and the manifest's
        // counts, which are longer numbers in the 200-page document (2 → 200 pages).
        let pageOwn: Set<String> = ["/pages/.PAGE.content.tmp", "/thumbnails/.PAGE.jpg.tmp"]
        for (s, b) in zip(small.writes, big.writes) where !pageOwn.contains(s.name) && s.name != "/.manifest.json.tmp" {
            #expect(s.bytes == b.bytes, "\(s.name)")
        }
        let manifestWrites = (small.writes.last { $0.name == "/.manifest.json.tmp" }, big.writes.last { $0.name == "/.manifest.json.tmp" })
        #expect(manifestWrites.0?.bytes == small.manifestSize && manifestWrites.1?.bytes == big.manifestSize)
        #expect(small.manifest.pageCount == 2 && small.manifest.elementCount == 3)
        #expect(big.manifest.pageCount == 200 && big.manifest.elementCount == 201)
        var bigWithSmallCounts = big.manifest
        bigWithSmallCounts.pageCount = small.manifest.pageCount
        bigWithSmallCounts.elementCount = small.manifest.elementCount
        #expect(try StoreJSON.encode(bigWithSmallCounts).count == small.manifestSize, "only the counts' digits differ")
        // Only the edited page's files and the package's own files are opened.
        #expect(small.opened == big.opened)
        #expect(!big.opened.contains { $0.contains("OTHER") }, "\(big.opened)")
    }

    @Test("[PKG-14] an image's asset is durable before the operation that references it")
    func assetBeforeReference() async throws {
        let dir = try TempDir("asset")
        defer { dir.remove() }
        let rec = SyscallRecorder()
        let nb = try await openNotebook(dir.path, io: Syscalls(recorder: rec))
        let d = try await nb.createDocument(title: "I")
        let p = await d.pageList[0].id
        rec.reset()
        let bytes: [UInt8] = Array(repeating: 7, count: 1000)
        let e = try await d.addImage(bytes, frame: QRect(x: 0, y: 0, width: 100, height: 100), to: p)
        let events = rec.all
        let asset = AssetID.of(bytes)
        let assetSynced = try #require(events.lastIndex { $0.kind == .fsync && $0.path.hasSuffix("/assets") },
                                       "the assets directory is synced after the rename")
        let renamed = try #require(events.firstIndex { $0.kind == .rename && $0.path.hasSuffix(asset.description) })
        let logWrite = try #require(events.firstIndex { $0.kind == .write && $0.path.hasSuffix(".log") })
        #expect(renamed < assetSynced && assetSynced < logWrite)
        #expect(fileBytes(d.paths.asset(asset)) == bytes)
        #expect(try await d.elements(p).last?.id == e)
        try await nb.close()
    }

    @Test("[PKG-15] orphan assets are removed on close; referenced ones (even by erased images in the log) stay")
    func orphanAssets() async throws {
        let dir = try TempDir("orphan")
        defer { dir.remove() }
        let nb = try await openNotebook(dir.path)
        let d = try await nb.createDocument(title: "O")
        let p = await d.pageList[0].id
        let kept = try await d.addImage([1, 2, 3], frame: QRect(x: 0, y: 0, width: 1, height: 1), to: p)
        let erased = try await d.addImage([4, 5, 6], frame: QRect(x: 0, y: 0, width: 1, height: 1), to: p)
        try await d.erase([erased], on: p)
        _ = kept
        // An asset written by an add that never happened (a crash between the two writes).
        let orphan = try await d.storeAsset([9, 9, 9])
        let paths = d.paths
        try await d.close()
        #expect(fileBytes(paths.asset(orphan)) == nil)
        #expect(fileBytes(paths.asset(AssetID.of([1, 2, 3]))) != nil)
        #expect(fileBytes(paths.asset(AssetID.of([4, 5, 6]))) != nil, "the log still references it for peers")
        // Even when document.json's cached asset sets are lost, close confirms from the logs.
        let d2 = try await nb.openDocument(paths.id)
        let stray = try await d2.storeAsset([7, 7])
        try await d2.close()
        var f = try DocumentFile.decode(fileBytes(paths.document)!, path: "").0
        for i in f.pages.indices { f.pages[i].assets = [] }
        try writeFile(paths.document, try StoreJSON.encode(f))
        let d3 = try await nb.openDocument(paths.id)
        try await d3.close()
        #expect(fileBytes(paths.asset(AssetID.of([1, 2, 3]))) != nil)
        #expect(fileBytes(paths.asset(AssetID.of([4, 5, 6]))) != nil)
        #expect(fileBytes(paths.asset(stray)) == nil)
        // A page whose snapshot does not decode may reference anything: nothing is removed
        // while it is damaged, and the orphan goes once it is whole again.
        let content = paths.content(p)
        let good = try #require(fileBytes(content))
        var damaged = good
        damaged[damaged.count / 2] ^= 0xFF
        try writeFile(content, damaged)
        let d4 = try await nb.openDocument(paths.id)
        let unsure = try await d4.storeAsset([8, 8])
        try await d4.close()
        #expect(fileBytes(paths.asset(unsure)) != nil, "removed while a page's snapshot was unreadable")
        try writeFile(content, good)
        let d5 = try await nb.openDocument(paths.id)
        try await d5.close()
        #expect(fileBytes(paths.asset(unsure)) == nil)
        try await nb.close()
    }

    @Test("[PKG-60] a copied folder gets a new replica id and keeps the old one as previous")
    func copiedFolder() async throws {
        let dir = try TempDir("copy")
        defer { dir.remove() }
        let src = dir.sub("a")
        let nb = try await openNotebook(src)
        let original = nb.replica
        #expect(nb.replicaChange == nil)
        let d = try await nb.createDocument(title: "X")
        try await d.addStroke(stroke(), to: await d.pageList[0].id)
        try await nb.close()
        // Same folder: same id.
        let again = try await openNotebook(src)
        #expect(again.replica == original && again.replicaChange == nil)
        try await again.close()
        // A copy elsewhere: new id, old one kept, and the copy writes under the new id.
        try FileManager.default.copyItem(atPath: src, toPath: dir.sub("b"))
        let copy = try await openNotebook(dir.sub("b"))
        #expect(copy.replica != original)
        #expect(copy.replicaChange?.old == original && copy.replicaChange?.new == copy.replica)
        #expect(copy.previousReplicas == [original])
        let cd = try await copy.openDocument(d.id)
        let p = await cd.pageList[0].id
        let e = try await cd.addStroke(stroke(), to: p)
        #expect(e.replica == copy.replica)
        try await copy.close()
        let reopened = try await openNotebook(dir.sub("b"))
        #expect(reopened.replica == copy.replica && reopened.replicaChange == nil)
        try await reopened.close()
        // Another machine (same path): new id too.
        let otherMachine = dir.sub("machine-id")
        try writeFile(otherMachine, Array("0123456789abcdef0123456789abcdef\n".utf8))
        let moved = try await openNotebook(src, machineID: otherMachine)
        #expect(moved.replica != original && moved.replicaChange?.reason.contains("machine") == true)
        try await moved.close()
    }

    @Test("[PKG-61] any number of notebooks open one folder at once, and hold no lock while open")
    func lock() async throws {
        let dir = try TempDir("lock")
        defer { dir.remove() }
        let nbs = [try await openNotebook(dir.path), try await openNotebook(dir.path), try await openNotebook(dir.path)]
        let d = try await nbs[0].createDocument(title: "Shared")
        let docs = [d, try await nbs[1].openDocument(d.id), try await nbs[2].openDocument(d.id)]
        let p = try #require(await d.pageList.first?.id)
        for (i, doc) in docs.enumerated() { try await doc.addStroke(stroke(3, x: Int32(i * 100)), to: p) }
        // Between writes, nobody holds the notebook's or the document's lock.
        for path in [dir.sub(".lnote/lock"), d.paths.lock] {
            let held = try #require(try FileLock(path: path, io: .live, timeout: .zero).tryAcquire(), "\(path) is held")
            held.release()
        }
        for doc in docs { #expect(try await doc.elements(p).count == 3) }
        for nb in nbs { try await nb.close() }
    }

    @Test("delete is a soft deleteDocument operation; restore brings the document back")
    func softDelete() async throws {
        let dir = try TempDir("del")
        defer { dir.remove() }
        let nb = try await openNotebook(dir.path)
        let d = try await nb.createDocument(title: "Gone")
        let id = d.id
        try await d.close()
        try await nb.deleteDocument(id)
        #expect(try await nb.list().isEmpty)
        #expect(try await nb.list(includeDeleted: true).map(\.deleted) == [true])
        let ops = try await nb.openDocument(id).operations(notCoveredBy: VectorClock())
        #expect(ops.last?.body == .deleteDocument)
        try await nb.restoreDocument(id)
        #expect(try await nb.list().map(\.id) == [id])
        try await nb.close()
    }

    @Test("[PKG-2] a crash while creating a document leaves no document or a complete one")
    func atomicCreate() async throws {
        var step = 0
        while true {
            let dir = try TempDir("create")
            defer { dir.remove() }
            let nb0 = try await openNotebook(dir.path)
            try await nb0.close()
            let crash = ArmedCrash(at: step)
            let nb = try await openNotebook(dir.path, io: Syscalls(faults: crash.plan))
            crash.arm()
            var created: DocumentID?
            do { created = try await nb.createDocument(title: "New").id } catch {}
            try? await nb.close()
            let nb2 = try await openNotebook(dir.path)
            let list = try await nb2.list()
            #expect(list.count <= 1, "step \(step)")
            if let only = list.first {
                #expect(only.manifest == .valid && only.title == "New", "step \(step)")
                _ = try await nb2.openDocument(only.id)
            }
            if created != nil { #expect(list.count == 1, "step \(step)") }
            #expect(listNames(dir.path).allSatisfy { !DurableFile.isTemporaryName($0) }, "open removes staged packages")
            try await nb2.close()
            if !crash.crashed { break }
            step += 1
        }
        #expect(step > 10)
    }
}
