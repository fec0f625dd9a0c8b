import Foundation
import Testing
import LnoteModel
import LnoteReplication
@testable import LnoteStore

/// `.lnote/clocks.cache` read from `Protocol/document-package.md` [PKG-64] alone: magic,
/// version, entries, CRC.
struct ClockCacheFile {
    struct Entry: Equatable {
        var document: UUID
        var page: UUID?
        var identity: [UInt64]
        var clock: [(ReplicaID, UInt64)]
        /// nil: not computed; else (replica, counter, 16-byte digest) per replica.
        var digests: [(ReplicaID, UInt64, [UInt8])]?
        static func == (a: Entry, b: Entry) -> Bool {
            a.document == b.document && a.page == b.page && a.identity == b.identity
                && a.clock.map(\.0) == b.clock.map(\.0) && a.clock.map(\.1) == b.clock.map(\.1)
                && a.digests?.map(\.0) == b.digests?.map(\.0) && a.digests?.map(\.2) == b.digests?.map(\.2)
        }
    }
    var entries: [Entry] = []

    struct Bad: Error { var why: String }

    init(_ b: [UInt8]) throws {
        var at = 0
        func need(_ n: Int) throws { guard b.count - 4 - at >= n else { throw Bad(why: "short at \(at)") } }
        func u8() throws -> UInt8 { try need(1); defer { at += 1 }; return b[at] }
        func u64() throws -> UInt64 {
            try need(8)
            defer { at += 8 }
            return (0..<8).reduce(UInt64(0)) { $0 | UInt64(b[at + $1]) << (8 * UInt64($1)) }
        }
        func varint() throws -> UInt64 {
            var v: UInt64 = 0, shift: UInt64 = 0
            while true {
                let x = try u8()
                v |= UInt64(x & 0x7f) << shift
                if x & 0x80 == 0 { return v }
                shift += 7
                guard shift < 64 else { throw Bad(why: "varint") }
            }
        }
        func uuid() throws -> UUID {
            try need(16)
            defer { at += 16 }
            return UUID(uuid: (b[at], b[at + 1], b[at + 2], b[at + 3], b[at + 4], b[at + 5], b[at + 6], b[at + 7],
                               b[at + 8], b[at + 9], b[at + 10], b[at + 11], b[at + 12], b[at + 13], b[at + 14], b[at + 15]))
        }
        guard b.count >= 9 else { throw Bad(why: "too short") }
        let crc = UInt32(b[b.count - 4]) | UInt32(b[b.count - 3]) << 8 | UInt32(b[b.count - 2]) << 16 | UInt32(b[b.count - 1]) << 24
        guard crc == CRC32C.checksum(Array(b.dropLast(4))) else { throw Bad(why: "crc") }
        guard Array(b[0..<4]) == Array("LNCC".utf8) else { throw Bad(why: "magic") }
        at = 4
        guard try u8() == 2 else { throw Bad(why: "version") }
        let n = try varint()
        for _ in 0..<n {
            let d = try uuid()
            let kind = try u8()
            guard kind <= 1 else { throw Bad(why: "kind") }
            let page = kind == 1 ? try uuid() : nil
            let k = try varint()
            var identity: [UInt64] = []
            for _ in 0..<k { identity.append(try u64()) }
            var clock: [(ReplicaID, UInt64)] = []
            for _ in 0..<(try varint()) { clock.append((ReplicaID(try u64()), try varint())) }
            var digests: [(ReplicaID, UInt64, [UInt8])]?
            switch try u8() {
            case 0: break
            case 1:
                var list: [(ReplicaID, UInt64, [UInt8])] = []
                for _ in 0..<(try varint()) {
                    let r = ReplicaID(try u64()), c = try varint()
                    try need(16)
                    list.append((r, c, Array(b[at..<at + 16])))
                    at += 16
                }
                digests = list
            default: throw Bad(why: "digest flag")
            }
            entries.append(Entry(document: d, page: page, identity: identity, clock: clock, digests: digests))
        }
        guard at == b.count - 4 else { throw Bad(why: "trailing bytes") }
    }
}

@Suite("The notebook folder's layout and its metadata files")
struct PackageLayoutTests {
    static let uuid = "[0-9A-F]{8}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{12}"
    static let hex64 = "[0-9a-f]{64}"
    /// [PKG-1]'s names (directories included), as regular expressions on paths relative to
    /// the notebook folder.
    static let layout: [String] = [
        #"\.lnote"#, #"\.lnote/replica\.json"#, #"\.lnote/lock"#, #"\.lnote/clocks\.cache"#,
        #"\.lnote/remotes"#, #"\.lnote/remotes/"# + hex64,
        #"\.lnote/incoming"#, #"\.lnote/incoming/"# + uuid + #"\."# + hex64,
        #"\.lnote/undo"#, #"\.lnote/undo/"# + uuid + #"\.jsonl"#,
        uuid + #"\.lnote"#,
        uuid + #"\.lnote/(manifest\.json|document\.json|document\.log|lock|pages|assets|thumbnails)"#,
        uuid + #"\.lnote/pages/"# + uuid + #"\.(content|log|base)"#,
        uuid + #"\.lnote/assets/"# + hex64,
        uuid + #"\.lnote/thumbnails/"# + uuid + #"\.(jpg|png)"#,
    ]

    /// Every path under `root`, relative to it.
    func walk(_ root: String) -> [String] {
        (FileManager.default.enumerator(atPath: root)?.allObjects as? [String] ?? []).sorted()
    }

    /// [PKG-1] A notebook that went through every kind of write (pages, an image, a deleted
    /// page, thumbnails, per-remote bookkeeping, the clock cache) holds only names of the
    /// layout, and each name the layout lists for what it holds.
    @Test("[PKG-1] every file the store writes has its place in the layout")
    func everyFileHasItsPlace() async throws {
        let dir = try TempDir("layout")
        defer { dir.remove() }
        let nb = try await openNotebook(dir.path)
        let d = try await nb.createDocument(title: "Layout")
        let p0 = await d.pageList[0].id
        let p1 = try await d.addPage()
        let gone = try await d.addPage()
        for p in [p0, p1, gone] { try await d.addStroke(stroke(), to: p) }
        let image: [UInt8] = [0x89, 0x50, 0x4e, 0x47]
        _ = try await d.addImage(image, frame: QRect(x: 0, y: 0, width: 10, height: 10), to: p1)
        try await d.deletePage(gone)
        let key = "https://relay.example/v1/notebooks/1"
        try await nb.saveRemoteState([1, 2, 3], key: key)
        let other = try await nb.createDocument(title: "Empty", firstPage: nil)
        try await nb.close()
        let nb2 = try await openNotebook(dir.path)
        _ = try await nb2.logClocks()
        try await nb2.close()

        let patterns = try Self.layout.map { try Regex("^" + $0 + "$") }
        let paths = walk(dir.path)
        for path in paths {
            #expect(patterns.contains { path.wholeMatch(of: $0) != nil }, "\(path) is not in the layout")
        }
        let pkg = "\(d.id).lnote"
        var expected = [".lnote/replica.json", ".lnote/lock", ".lnote/clocks.cache", ".lnote/remotes/\(AssetID.of(Array(key.utf8)))",
                        "\(pkg)/manifest.json", "\(pkg)/document.json", "\(pkg)/document.log",
                        "\(pkg)/assets/\(AssetID.of(image))", "\(pkg)/lock", "\(other.id).lnote/document.log",
                        "\(other.id).lnote/lock"]
        for p in [p0, p1, gone] { expected += ["\(pkg)/pages/\(p).content", "\(pkg)/pages/\(p).log"] }
        for p in [p0, p1] { expected.append("\(pkg)/thumbnails/\(p).jpg") }
        for e in expected { #expect(paths.contains(e), "\(e) is missing: \(paths)") }
        #expect(!paths.contains { $0.hasSuffix(".base") }, "a .base file only comes with a checkpoint")
        #expect(try Verify.run(folder: dir.path).isClean)
    }

    /// [PKG-63] Per-remote bookkeeping lives in `.lnote/remotes/<SHA-256 of the key's UTF-8
    /// bytes>`, written by durable replace (a temporary file renamed over the name, then the
    /// directory synced), one file per remote.
    @Test("[PKG-63] per-remote bookkeeping is one durably replaced file per remote, named by the key's SHA-256")
    func remoteBookkeeping() async throws {
        let dir = try TempDir("layout")
        defer { dir.remove() }
        let rec = SyscallRecorder()
        let nb = try await openNotebook(dir.path, io: Syscalls(recorder: rec))
        let keys = ["/media/usb/Notes", "http://127.0.0.1:8080/v1/notebooks/ABC", "clé ✓"]
        for (i, k) in keys.enumerated() { try await nb.saveRemoteState(Array(repeating: UInt8(i), count: i + 1), key: k) }
        let remotes = dir.sub(".lnote/remotes")
        #expect(listNames(remotes) == keys.map { AssetID.of(Array($0.utf8)).description }.sorted())
        rec.reset()
        try await nb.saveRemoteState([9, 9], key: keys[1])
        let target = remotes + "/" + AssetID.of(Array(keys[1].utf8)).description
        let events = rec.all
        let rename = try #require(events.firstIndex { $0.kind == .rename && $0.path == target })
        #expect(events[..<rename].contains { $0.kind == .fsync }, "the temporary file is synced before the rename")
        #expect(events[(rename + 1)...].contains { $0.kind == .fsync }, "the directory is synced after it")
        #expect(fileBytes(target) == [9, 9] && listNames(remotes).count == 3)
        #expect(try await nb.loadRemoteState(key: keys[1]) == [9, 9])
        #expect(try await nb.loadRemoteState(key: "never synced") == nil)
        try await nb.close()
    }

    /// [PKG-11] The text forms in document.json: replica ids and 64-bit values as 16
    /// lowercase hex digits, OpRefs as `<replica>.<counter>@<lamport>`, clocks as objects of
    /// positive counters, z keys in their text form, registers as `{"value", "frontier"}`.
    /// A value that does not parse makes the file corrupt: it is quarantined on open and the
    /// document rebuilt from its log ([PKG-40]).
    @Test("[PKG-11] document.json's text forms; a value that does not parse makes the file corrupt")
    func textForms() async throws {
        let dir = try TempDir("layout")
        defer { dir.remove() }
        let nb = try await openNotebook(dir.path)
        let d = try await nb.createDocument(title: "T")
        let p1 = try await d.addPage()
        try await d.setTitle("U")
        try await d.movePage(p1, to: .first)
        try await d.flush()
        let paths = d.paths, state = await d.state, me = nb.replica
        try await nb.close()
        let original = fileBytes(paths.document)!
        let json = try #require(try JSONSerialization.jsonObject(with: Data(original)) as? [String: Any])
        func matches(_ s: Any?, _ pattern: String) -> Bool {
            guard let s = s as? String, let r = try? Regex("^" + pattern + "$") else { return false }
            return s.wholeMatch(of: r) != nil
        }
        let replica = "[0-9a-f]{16}", opref = "[0-9a-f]{16}\\.[1-9][0-9]*@[1-9][0-9]*"
        let zkey = "-?[0-9]+(/([0-9a-f][0-9a-f])*:[0-9a-f]{16}\\.[1-9][0-9]*)*(\\.([0-9a-f][0-9a-f])+)?"
        let clock = try #require(json["clock"] as? [String: Int])
        #expect(clock == [me.description: 5] && clock.keys.allSatisfy { matches($0, replica) })
        let log = try #require(json["log"] as? [String: Any])
        let incarnation = try LogHeader.decode(fileBytes(paths.documentLog)!).incarnation
        #expect(matches(log["incarnation"], "[0-9a-f]{16}") && log["incarnation"] as? String == JSONText.u64(incarnation))
        let title = try #require(json["title"] as? [String: Any])
        #expect(title["value"] as? String == "U" && (title["frontier"] as? [String])?.count == 1)
        #expect((title["frontier"] as? [String])?.allSatisfy { matches($0, opref) } == true)
        let pages = try #require(json["pages"] as? [[String: Any]])
        #expect(pages.count == 2)
        for page in pages {
            #expect(matches(page["added"], opref), "\(page)")
            let position = try #require(page["position"] as? [String: Any])
            #expect(matches(position["value"], zkey), "\(position)")
            #expect((position["frontier"] as? [String])?.allSatisfy { matches($0, opref) } == true)
        }
        #expect(pages.first?["id"] as? String == p1.description, "the moved page is first")
        #expect(((pages.first?["position"] as? [String: Any])?["frontier"] as? [String])?.count == 1)

        func damaged(_ change: (inout [String: Any]) -> Void) throws -> [UInt8] {
            var j = json
            change(&j)
            return Array(try JSONSerialization.data(withJSONObject: j))
        }
        let cases: [(String, [UInt8])] = [
            ("a zero counter in the clock", try damaged { $0["clock"] = [me.description: 0] }),
            ("a replica that is not 16 hex digits", try damaged { $0["clock"] = ["a1": 5] }),
            ("a bad OpRef", try damaged { j in
                var ps = j["pages"] as! [[String: Any]]
                ps[0]["added"] = "00000000000000a1.1"
                j["pages"] = ps
            }),
            ("an OpRef with a zero counter", try damaged { $0["title"] = ["value": "U", "frontier": ["00000000000000a1.0@1"]] }),
            ("an invalid z key", try damaged { j in
                var ps = j["pages"] as! [[String: Any]]
                ps[1]["position"] = ["value": "1.8000", "frontier": []]
                j["pages"] = ps
            }),
            ("an incarnation of 3 digits", try damaged { $0["log"] = ["incarnation": "abc", "offset": log["offset"]!] }),
        ]
        for (what, bytes) in cases {
            try writeFile(paths.document, bytes)
            let nb = try await openNotebook(dir.path)
            let d = try await nb.openDocument(paths.id)
            #expect(await d.recoveryReports.contains { $0.path == paths.document && $0.quarantinedCopy != nil }, "\(what)")
            #expect(await d.state == state, "\(what): rebuilt from the log")
            try await nb.close()
            for name in listNames(paths.root) where name.hasPrefix("document.json.corrupt-") {
                try FileManager.default.removeItem(atPath: paths.root + "/" + name)
            }
        }
    }

    /// A closed notebook of two documents (three pages with strokes).
    func twoDocuments(_ dir: TempDir) async throws -> [DocumentID] {
        let nb = try await openNotebook(dir.path)
        let a = try await nb.createDocument(title: "A")
        let a0 = await a.pageList[0].id
        let a1 = try await a.addPage()
        try await a.addStroke(stroke(), to: a0)
        try await a.addStroke(stroke(4), to: a1)
        let b = try await nb.createDocument(title: "B")
        try await b.addStroke(stroke(), to: await b.pageList[0].id)
        try await nb.close()
        return [a.id, b.id]
    }

    /// [PKG-64] `.lnote/clocks.cache` as the spec describes it: every log's clock with the
    /// identity (size, modification time, inode) of the two files it was computed from,
    /// checked by an independent reader; a sync that finds every identity unchanged opens
    /// no package file; a change to any of those files, or a damaged or missing cache,
    /// makes the clocks be computed from the files again, and the cache is rewritten.
    @Test("[PKG-64] the clock cache: its format, used only when every file is unchanged, ignored when damaged")
    func clockCache() async throws {
        let dir = try TempDir("layout")
        defer { dir.remove() }
        let docs = try await twoDocuments(dir)
        let cachePath = dir.sub(".lnote/clocks.cache")
        #expect(fileBytes(cachePath) == nil, "written by sync's clock computation only")
        let rec = SyscallRecorder()
        let nb = try await openNotebook(dir.path, io: Syscalls(recorder: rec))
        let clocks = try await nb.logClocks()
        let file = try ClockCacheFile(try #require(fileBytes(cachePath)))
        // One entry per log, sorted by document then page, the document log first.
        let keys = file.entries.map { ($0.document.uuidString, $0.page?.uuidString ?? "") }
        #expect(keys.map { $0.0 + "/" + $0.1 } == keys.map { $0.0 + "/" + $0.1 }.sorted())
        #expect(file.entries.count == clocks.count && clocks.count == 5)
        for c in clocks {
            let e = try #require(file.entries.first { $0.document == c.document.uuid && $0.page == c.page?.uuid })
            #expect(e.clock.map(\.0) == c.clock.entries.map(\.replica) && e.clock.map(\.1) == c.clock.entries.map(\.counter))
            let paths = PackagePaths(folder: nb.path, id: c.document)
            let files = c.page.map { [paths.log($0), paths.content($0), paths.missing($0)] }
                ?? [paths.documentLog, paths.document, paths.documentMissing]
            var identity: [UInt64] = []
            for f in files {
                // A missing file (no `.missing`: nothing lost) is four zeros.
                guard let st = try Syscalls.live.stat(f) else { identity += [0, 0, 0, 0]; continue }
                identity += [st.size, UInt64(bitPattern: st.modifiedSeconds), UInt64(bitPattern: st.modifiedNanoseconds), st.inode]
            }
            #expect(e.digests == nil, "logClocks computes no digests")
            #expect(e.identity == identity, "\(files)")
        }
        // Nothing changed: no package file is opened.
        rec.reset()
        #expect(try await nb.logClocks() == clocks)
        #expect(!rec.pathsOpened.contains { $0.contains(".lnote/") && !$0.contains("/.lnote/") }, "\(rec.pathsOpened)")
        // A page edited: its document is opened again, the new clock is served and cached.
        let d = try await nb.openDocument(docs[1])
        let bp = await d.pageList[0].id
        try await d.addStroke(stroke(2), to: bp)
        try await d.close()
        let after = try await nb.logClocks()
        #expect(after.first { $0.page == bp }?.clock[nb.replica] == 2)
        #expect(try ClockCacheFile(fileBytes(cachePath)!).entries.first { $0.page == bp.uuid }?.clock.first?.1 == 2)
        try await nb.close()
        // A damaged, cut, foreign or missing cache is ignored, and rewritten.
        let good = fileBytes(cachePath)!
        var flipped = good
        flipped[good.count / 2] ^= 0x10
        for bad in [flipped, Array(good.prefix(good.count - 3)), Array("not a cache".utf8), [], nil] as [[UInt8]?] {
            if let bad { try writeFile(cachePath, bad) } else { try FileManager.default.removeItem(atPath: cachePath) }
            let nb = try await openNotebook(dir.path)
            #expect(try await nb.logClocks() == after)
            try await nb.close()
            #expect(try ClockCacheFile(fileBytes(cachePath)!).entries.count == 5)
        }
    }
}
