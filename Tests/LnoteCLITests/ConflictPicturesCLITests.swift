import Foundation
import LnoteModel
import LnoteRender
import LnoteReplication
import LnoteStore
import Testing

/// `lnote conflicts --render DIR` (merge-semantics.md [MERGE-55] – [MERGE-58]): two
/// notebook folders edit one page concurrently and sync; the pictures are read back and
/// looked at pixel by pixel.
///
/// Every page is 400 × 300 pt drawn with `--size 400`: one pixel per point.
@Suite struct ConflictPicturesCLITests {
    /// A picture read back.
    struct Picture {
        let image: Thumbnail
        init(_ path: String) throws {
            let bytes = try #require(FileManager.default.contents(atPath: path).map { Array($0) }, "no \(path)")
            image = try Thumbnail(decoding: bytes, name: path)
        }
        static func isHighlight(_ p: RGBA) -> Bool { p.r > 180 && p.g < 90 && p.b > 120 }
        static func isInk(_ p: RGBA) -> Bool { Int(p.r) + Int(p.g) + Int(p.b) < 200 }

        /// The pixels passing `test`.
        func pixels(_ test: (RGBA) -> Bool) -> [(x: Int, y: Int)] {
            var out: [(Int, Int)] = []
            for y in 0..<image.height { for x in 0..<image.width where test(image.pixel(x, y)) { out.append((x, y)) } }
            return out
        }

        /// The bounding box of the pixels passing `test`, nil when none does.
        func box(_ test: (RGBA) -> Bool) -> (x0: Int, y0: Int, x1: Int, y1: Int)? {
            let p = pixels(test)
            guard !p.isEmpty else { return nil }
            return (p.map(\.x).min()!, p.map(\.y).min()!, p.map(\.x).max()!, p.map(\.y).max()!)
        }
    }

    /// Folder `a` with one 400 × 300 pt document holding `strokes` (JSON lines), folder `b`
    /// made from it by a first sync. Returns the document and the strokes' ids.
    func twoFolders(_ sb: Sandbox, strokes: String, color: String? = nil, more: String? = nil, moreColor: String? = nil)
        async throws -> (doc: String, ids: [String]) {
        try await sb.ok("init", "a")
        let doc = try await sb.ok("new", "a", "--width", "400", "--height", "300")
        var ids: [String] = []
        for (i, (text, c)) in [(strokes, color), (more, moreColor)].enumerated() {
            guard let text else { continue }
            try sb.write("s\(i).jsonl", text)
            let r = try await sb.run(["import", "a", doc, "#1", "s\(i).jsonl", "--width", "4"] + (c.map { ["--color", $0] } ?? []))
            try #require(r.code == 0, "\(r)")
            ids += r.lines
        }
        try await sb.ok("sync", "a", sb.sub("b"), "--init")
        return (doc, ids)
    }

    /// The replica that made the last operation of `folder`'s first page.
    func lastReplica(_ sb: Sandbox, _ folder: String, _ doc: String) async throws -> String {
        let log = try parseJSON(try await sb.ok("log", folder, doc, "#1", "--json")) as! [[String: Any]]
        let id = try #require(log.last?["id"] as? String)
        return String(id.split(separator: ".")[0])
    }

    func index(_ sb: Sandbox, _ dir: String) throws -> [String: Any] {
        let data = try #require(FileManager.default.contents(atPath: sb.sub(dir + "/index.json")))
        return try JSONSerialization.jsonObject(with: data) as! [String: Any]
    }

    /// A horizontal line from (x0, y) to (x1, y) in points, a point every point.
    static func line(_ x0: Int, _ x1: Int, y: Int) -> String {
        let pts = stride(from: x0, through: x1, by: 1).map { "[\($0), \(y)]" }.joined(separator: ", ")
        return "{\"points\": [\(pts)]}\n"
    }

    /// Every highlight pixel lies around `ink` (within the margin and the outline's width),
    /// and there is some on each of its four sides.
    func expectOutlined(_ pic: Picture, around ink: (x0: Int, y0: Int, x1: Int, y1: Int), _ what: String,
                        sourceLocation: SourceLocation = #_sourceLocation) {
        let reach = Int(PageRenderer.highlightMargin + PageRenderer.highlightWidth) + 3
        let hl = pic.pixels(Picture.isHighlight)
        let stray = hl.filter { $0.x < ink.x0 - reach || $0.x > ink.x1 + reach || $0.y < ink.y0 - reach || $0.y > ink.y1 + reach }
        #expect(!hl.isEmpty && stray.isEmpty, "\(what): \(hl.count) highlight pixels, \(stray.count) away from the element \(ink), e.g. \(stray.prefix(3))",
                sourceLocation: sourceLocation)
        #expect(hl.contains { $0.x < ink.x0 } && hl.contains { $0.x > ink.x1 } && hl.contains { $0.y < ink.y0 } && hl.contains { $0.y > ink.y1 },
                "\(what): the outline does not go around \(ink)", sourceLocation: sourceLocation)
    }

    @Test("[MERGE-55] [MERGE-56] concurrent moves: the merged page outlines the element where the winner put it, each side shows it where its replica did")
    func concurrentMoves() async throws {
        let sb = try Sandbox("conflictpic-moves")
        defer { sb.remove() }
        let (doc, ids) = try await twoFolders(sb, strokes: Self.line(50, 100, y: 50))
        try await sb.ok("move", "a", doc, "#1", ids[0], "--dx", "200", "--dy", "0")
        try await sb.ok("move", "b", doc, "#1", ids[0], "--dx", "0", "--dy", "150")
        let ra = try await lastReplica(sb, "a", doc), rb = try await lastReplica(sb, "b", doc)
        try await sb.ok("sync", "a", sb.sub("b"))

        let out = try await sb.ok("conflicts", "a", "--render", "pics", "--size", "400")
        #expect(out.contains("1 conflict, merged and 2 sides"), "\(out)")
        let idx = try index(sb, "pics")
        let pages = idx["pages"] as! [[String: Any]]
        try #require(pages.count == 1, "\(idx)")
        let page = pages[0]["page"] as! String
        #expect(pages[0]["highlighted"] as? [String] == [ids[0]] && pages[0]["number"] as? Int == 1)
        let sides = pages[0]["sides"] as! [[String: Any]]
        #expect(sides.compactMap { $0["replica"] as? String } == [ra, rb].sorted(), "\(sides)")
        #expect(Set(idx["files"] as! [String]) == Set(["\(doc)/\(page).png", "\(doc)/\(page)-merged.png",
                                                       "\(doc)/\(page)-side-\(ra).png", "\(doc)/\(page)-side-\(rb).png"]))

        // Each side: the ink where that replica put it (1 px per pt; the line is 4 pt wide), outlined.
        let sideA = try Picture(sb.sub("pics/\(doc)/\(page)-side-\(ra).png"))
        let inkA = try #require(sideA.box(Picture.isInk))
        #expect(abs(inkA.x0 - 248) <= 2 && abs(inkA.x1 - 302) <= 2 && abs(inkA.y0 - 48) <= 2 && abs(inkA.y1 - 52) <= 2, "\(inkA)")
        expectOutlined(sideA, around: inkA, "side \(ra)")
        let sideB = try Picture(sb.sub("pics/\(doc)/\(page)-side-\(rb).png"))
        let inkB = try #require(sideB.box(Picture.isInk))
        #expect(abs(inkB.x0 - 48) <= 2 && abs(inkB.x1 - 102) <= 2 && abs(inkB.y0 - 198) <= 2 && abs(inkB.y1 - 202) <= 2, "\(inkB)")
        expectOutlined(sideB, around: inkB, "side \(rb)")

        // Merged: the ink is where the winner's side has it, and outlined there only.
        let merged = try Picture(sb.sub("pics/\(doc)/\(page)-merged.png"))
        #expect(merged.image.width == 400 && merged.image.height == 300)
        let ink = try #require(merged.box(Picture.isInk))
        let winner = ((pages[0]["conflicts"] as! [[String: Any]])[0]["winner"] as! String).split(separator: ".")[0]
        #expect(ink == (winner == ra ? inkA : inkB), "merged ink \(ink), winner \(winner)")
        expectOutlined(merged, around: ink, "merged")
        // The combined picture holds the three, merged first.
        let combined = try Picture(sb.sub("pics/\(doc)/\(page).png"))
        #expect(combined.image.width > 3 * 400 && combined.image.height > 300)
        // [MERGE-58] No text: outside the three panels (12 px apart and around) only the
        // background and the panels' one-pixel gray frames.
        let c = combined.image
        var other = 0
        for y in 0..<c.height {
            for x in 0..<c.width {
                let k = (x - 12) / 412, inPanel = x >= 12 && k < 3 && (x - 12) % 412 < 400 && y >= 12 && y < 312
                let p = c.pixel(x, y)
                if !inPanel && !(p.r == 0xF2 && p.g == 0xF2 && p.b == 0xF2) && !(p.r == 0x99 && p.g == 0x99 && p.b == 0x99) { other += 1 }
            }
        }
        #expect(c.height == 300 + 2 * 12 && other == 0, "\(other) pixels outside the panels are neither background nor frame (\(c.width) x \(c.height))")
    }

    @Test("[MERGE-55] an erase against a move: the merged page shows the erased ink faint and dashed-outlined, the mover's side shows it moved")
    func eraseAgainstMove() async throws {
        let sb = try Sandbox("conflictpic-erase")
        defer { sb.remove() }
        let (doc, ids) = try await twoFolders(sb, strokes: Self.line(50, 100, y: 50) + Self.line(300, 350, y: 250))
        try await sb.ok("erase", "a", doc, "#1", ids[0])
        try await sb.ok("move", "b", doc, "#1", ids[0], "--dx", "0", "--dy", "100")
        let ra = try await lastReplica(sb, "a", doc), rb = try await lastReplica(sb, "b", doc)
        try await sb.ok("sync", "a", sb.sub("b"))

        try await sb.ok("conflicts", "a", "--render", "pics", "--size", "400")
        let pages = try index(sb, "pics")["pages"] as! [[String: Any]]
        try #require(pages.count == 1)
        let page = pages[0]["page"] as! String
        #expect((pages[0]["conflicts"] as! [[String: Any]]).map { $0["kind"] as? String } == ["erase"])

        // Merged: only the other stroke is ink; the erased one is outlined, not drawn dark.
        let merged = try Picture(sb.sub("pics/\(doc)/\(page)-merged.png"))
        let ink = try #require(merged.box(Picture.isInk))
        #expect(ink.x0 >= 296 && ink.y0 >= 246, "erased ink still drawn: \(ink)")
        let hl = try #require(merged.box(Picture.isHighlight))
        #expect(hl.x1 < 200 && hl.y1 < 200, "outline \(hl) should surround the erased stroke, not the live one")
        // The eraser's side: the stroke gone from where it was, its outline dashed there.
        let sideA = try Picture(sb.sub("pics/\(doc)/\(page)-side-\(ra).png"))
        #expect(sideA.box(Picture.isInk).map { $0.x0 >= 296 } == true)
        let hlA = try #require(sideA.box(Picture.isHighlight))
        #expect(hlA.y0 > 30 && hlA.y1 < 70 && hlA.x0 > 30 && hlA.x1 < 120, "\(hlA)")
        // The mover's side: the stroke moved down by 100 pt, outlined.
        let sideB = try Picture(sb.sub("pics/\(doc)/\(page)-side-\(rb).png"))
        let inkB = sideB.pixels(Picture.isInk).filter { $0.x < 200 }
        #expect(!inkB.isEmpty && inkB.allSatisfy { abs($0.y - 150) <= 3 }, "\(inkB.prefix(3))")
        let hlB = try #require(sideB.box(Picture.isHighlight))
        #expect(hlB.y0 > 130 && hlB.y1 < 170, "\(hlB)")
    }

    @Test("[MERGE-56] concurrent reorders: each side shows the stacking its replica chose; [MERGE-55] both folders write the same bytes")
    func concurrentReordersAreDeterministic() async throws {
        let sb = try Sandbox("conflictpic-reorder")
        defer { sb.remove() }
        // A red line and a blue one crossing at (100, 100); the blue one on top.
        let blue = (0..<101).map { "[100, \(50 + $0)]" }.joined(separator: ", ")
        let (doc, ids) = try await twoFolders(sb, strokes: Self.line(50, 150, y: 100), color: "#ff0000",
                                              more: "{\"points\": [\(blue)]}\n", moreColor: "#0000ff")
        try #require(ids.count == 2)
        try await sb.ok("front", "a", doc, "#1", ids[0])
        try await sb.ok("back", "b", doc, "#1", ids[0])
        let ra = try await lastReplica(sb, "a", doc), rb = try await lastReplica(sb, "b", doc)
        try await sb.ok("sync", "a", sb.sub("b"))
        try await sb.ok("sync", "b", sb.sub("a"))

        try await sb.ok("conflicts", "a", "--render", "pa", "--size", "400")
        try await sb.ok("conflicts", "b", "--render", "pb", "--size", "400")
        let ia = try index(sb, "pa"), ib = try index(sb, "pb")
        let pages = ia["pages"] as! [[String: Any]]
        try #require(pages.count == 1, "\(ia)")
        #expect((pages[0]["conflicts"] as! [[String: Any]]).map { $0["kind"] as? String } == ["reorder"])
        let page = pages[0]["page"] as! String
        let crossingA = try Picture(sb.sub("pa/\(doc)/\(page)-side-\(ra).png")).image.pixel(100, 100)
        let crossingB = try Picture(sb.sub("pa/\(doc)/\(page)-side-\(rb).png")).image.pixel(100, 100)
        #expect(crossingA.r > 150 && crossingA.b < 100, "the side that brought red to the front: \(crossingA)")
        #expect(crossingB.b > 150 && crossingB.r < 100, "the side that sent red to the back: \(crossingB)")

        // Same operations, same files, byte for byte.
        let files = ia["files"] as! [String]
        #expect(files == ib["files"] as! [String] && files.count == 4)
        for f in files + ["index.json"] {
            let x = FileManager.default.contents(atPath: sb.sub("pa/" + f)), y = FileManager.default.contents(atPath: sb.sub("pb/" + f))
            #expect(x != nil && x == y, "\(f) differs between the two folders")
        }
    }

    @Test("[MERGE-58] no conflicts: no pictures and an index saying so; a later run removes the pictures of an earlier one and nothing else (whatever the old index says); DIR a file is refused")
    func noConflictsAndReruns() async throws {
        let sb = try Sandbox("conflictpic-none")
        defer { sb.remove() }
        let (doc, ids) = try await twoFolders(sb, strokes: Self.line(50, 100, y: 50))
        let none = try await sb.ok("conflicts", "a", "--render", "pics")
        #expect(none.contains("no conflicts to picture"), "\(none)")
        let empty = try index(sb, "pics")
        #expect((empty["pages"] as! [Any]).isEmpty && (empty["files"] as! [Any]).isEmpty)
        #expect(try FileManager.default.contentsOfDirectory(atPath: sb.sub("pics")) == ["index.json"])
        let json = try parseJSON(try await sb.ok("conflicts", "a", "--render", "pics", "--json")) as! [String: Any]
        #expect((json["pages"] as! [Any]).isEmpty)

        try await sb.ok("move", "a", doc, "#1", ids[0], "--dx", "10", "--dy", "0")
        try await sb.ok("move", "b", doc, "#1", ids[0], "--dx", "-10", "--dy", "0")
        try await sb.ok("sync", "a", sb.sub("b"))
        try await sb.ok("conflicts", "a", "--render", "pics")
        try sb.write("pics/mine.txt", "keep me")
        let first = try index(sb, "pics")["files"] as! [String]
        #expect(first.count == 4)
        // A move that saw both supersedes them: the conflict is gone, and so are its pictures.
        try await sb.ok("move", "a", doc, "#1", ids[0], "--dx", "5", "--dy", "0")
        try await sb.ok("conflicts", "a", "--render", "pics")
        for f in first { #expect(!FileManager.default.fileExists(atPath: sb.sub("pics/" + f)), "\(f) left behind") }
        #expect(FileManager.default.fileExists(atPath: sb.sub("pics/mine.txt")))
        #expect((try index(sb, "pics")["pages"] as! [Any]).isEmpty)

        // An index written by someone else never makes it remove anything but its own pictures.
        try sb.write("outside.png", "not mine to remove")
        try sb.write("pics/index.json", "{\"files\": [\"../outside.png\", \"mine.txt\", \"\(doc)/../../outside.png\", 7]}")
        try await sb.ok("conflicts", "a", "--render", "pics")
        #expect(FileManager.default.fileExists(atPath: sb.sub("outside.png")) && FileManager.default.fileExists(atPath: sb.sub("pics/mine.txt")))
        try sb.write("pics/index.json", "not JSON")
        try await sb.ok("conflicts", "a", "--render", "pics")
        #expect((try index(sb, "pics")["pages"] as! [Any]).isEmpty)

        try sb.write("plain", "x")
        let refused = try await sb.run("conflicts", "a", "--render", "plain")
        #expect(refused.code != 0 && refused.err.contains("not a directory"), "\(refused)")
        let usage = try await sb.run("conflicts", "a", "--size", "100")
        #expect(usage.code == 2, "\(usage)")
    }

    @Test("[MERGE-57] a page deleted while edited elsewhere: pictured with the delete's view and the edit's")
    func pageDeletedWhileEdited() async throws {
        let sb = try Sandbox("conflictpic-delete")
        defer { sb.remove() }
        let (doc, _) = try await twoFolders(sb, strokes: Self.line(50, 100, y: 50))
        try await sb.ok("page", "add", "a", doc)
        try await sb.ok("sync", "a", sb.sub("b"))
        try await sb.ok("page", "remove", "a", doc, "#1")
        try sb.write("t.jsonl", Self.line(200, 250, y: 200))
        let added = try await sb.ok("import", "b", doc, "#1", "t.jsonl", "--width", "4")
        let rb = try await lastReplica(sb, "b", doc)
        try await sb.ok("sync", "a", sb.sub("b"))

        try await sb.ok("conflicts", "a", "--render", "pics", "--size", "400")
        let pages = try index(sb, "pics")["pages"] as! [[String: Any]]
        try #require(pages.count == 1)
        #expect(pages[0]["deleted"] as? Bool == true && pages[0]["number"] == nil)
        #expect(pages[0]["highlighted"] as? [String] == [added])
        let sides = pages[0]["sides"] as! [[String: Any]]
        #expect(sides.map { $0["view"] as? String } == ["delete", "operation"] && sides[1]["replica"] as? String == rb, "\(sides)")
        let page = pages[0]["page"] as! String
        // The delete's author had not seen the new stroke; the merged page keeps it, outlined.
        let deleteView = try Picture(sb.sub("pics/" + (sides[0]["file"] as! String)))
        #expect(deleteView.box(Picture.isInk).map { $0.x1 < 150 } == true)
        let merged = try Picture(sb.sub("pics/\(doc)/\(page)-merged.png"))
        let hl = try #require(merged.box(Picture.isHighlight))
        #expect(hl.x0 > 180 && hl.y0 > 180, "\(hl)")
    }

    /// Two runs' worth of pictures: a move conflict rendered into `pics`, then superseded by
    /// a move that saw both (so a later run removes its pictures). Returns the document and
    /// the first run's files.
    func renderedThenSuperseded(_ sb: Sandbox) async throws -> (doc: String, files: [String]) {
        let (doc, ids) = try await twoFolders(sb, strokes: Self.line(50, 100, y: 50))
        try await sb.ok("move", "a", doc, "#1", ids[0], "--dx", "10", "--dy", "0")
        try await sb.ok("move", "b", doc, "#1", ids[0], "--dx", "-10", "--dy", "0")
        try await sb.ok("sync", "a", sb.sub("b"))
        try await sb.ok("conflicts", "a", "--render", "pics", "--size", "64")
        let files = try index(sb, "pics")["files"] as! [String]
        try #require(files.count == 4)
        try await sb.ok("move", "a", doc, "#1", ids[0], "--dx", "5", "--dy", "0")
        return (doc, files)
    }

    @Test("[MERGE-58] a document folder in DIR that is a symlink is refused: nothing is written or removed through it")
    func symlinkedDocumentFolderIsRefused() async throws {
        let sb = try Sandbox("conflictpic-symlink")
        defer { sb.remove() }
        let (doc, files) = try await renderedThenSuperseded(sb)
        // The document's folder moved elsewhere, a symlink to it in its place.
        try FileManager.default.moveItem(atPath: sb.sub("pics/\(doc)"), toPath: sb.sub("elsewhere"))
        try FileManager.default.createSymbolicLink(atPath: sb.sub("pics/\(doc)"), withDestinationPath: sb.sub("elsewhere"))
        let before = try FileManager.default.contentsOfDirectory(atPath: sb.sub("elsewhere")).sorted()
        #expect(before.count == 4)
        let r = try await sb.run("conflicts", "a", "--render", "pics")
        #expect(r.code == 1 && r.err.contains("symlink"), "\(r)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: sb.sub("elsewhere")).sorted() == before, "a file removed through the symlink")
        for f in files { #expect(FileManager.default.fileExists(atPath: sb.sub("elsewhere/" + f.split(separator: "/")[1]))) }
        // A document folder that is a file is refused too.
        try FileManager.default.removeItem(atPath: sb.sub("pics/\(doc)"))
        try sb.write("pics/\(doc)", "a file")
        let file = try await sb.run("conflicts", "a", "--render", "pics")
        #expect(file.code == 1 && file.err.contains("not a directory"), "\(file)")
    }

    @Test("[MERGE-58] a symlinked document folder is not written through while the conflict is still there")
    func symlinkedDocumentFolderIsNotWrittenThrough() async throws {
        let sb = try Sandbox("conflictpic-symlink-write")
        defer { sb.remove() }
        let (doc, ids) = try await twoFolders(sb, strokes: Self.line(50, 100, y: 50))
        try await sb.ok("move", "a", doc, "#1", ids[0], "--dx", "10", "--dy", "0")
        try await sb.ok("move", "b", doc, "#1", ids[0], "--dx", "-10", "--dy", "0")
        try await sb.ok("sync", "a", sb.sub("b"))
        try FileManager.default.createDirectory(atPath: sb.sub("pics"), withIntermediateDirectories: false)
        try FileManager.default.createDirectory(atPath: sb.sub("elsewhere"), withIntermediateDirectories: false)
        try FileManager.default.createSymbolicLink(atPath: sb.sub("pics/\(doc)"), withDestinationPath: sb.sub("elsewhere"))
        let r = try await sb.run("conflicts", "a", "--render", "pics", "--size", "64")
        #expect(r.code == 1 && r.err.contains("symlink"), "\(r)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: sb.sub("elsewhere")).isEmpty)
    }

    @Test("[MERGE-58] a listed name that is now a directory is left alone, with its contents")
    func listedDirectoryIsNotRemoved() async throws {
        let sb = try Sandbox("conflictpic-listed-dir")
        defer { sb.remove() }
        let (doc, files) = try await renderedThenSuperseded(sb)
        let merged = try #require(files.first { $0.hasSuffix("-merged.png") })
        try FileManager.default.removeItem(atPath: sb.sub("pics/" + merged))
        try FileManager.default.createDirectory(atPath: sb.sub("pics/" + merged), withIntermediateDirectories: false)
        try sb.write("pics/\(merged)/inside.txt", "keep me")
        try await sb.ok("conflicts", "a", "--render", "pics")
        #expect(FileManager.default.fileExists(atPath: sb.sub("pics/\(merged)/inside.txt")), "a directory listed in the old index was removed")
        for f in files where f != merged { #expect(!FileManager.default.fileExists(atPath: sb.sub("pics/" + f)), "\(f) left behind") }
        _ = doc
    }

    @Test("[MERGE-57] [MERGE-82] a replica that got the page from a checkpoint the delete's clock does not cover: pictured, the unseen edits' reason fixed text without local paths")
    func deletedPageOnCheckpointReplica() async throws {
        let sb = try Sandbox("conflictpic-checkpoint")
        defer { sb.remove() }
        let (doc, _) = try await twoFolders(sb, strokes: Self.line(50, 100, y: 50))
        try await sb.ok("page", "add", "a", doc)
        try await sb.ok("sync", "a", sb.sub("c"), "--init")
        try await sb.ok("page", "remove", "c", doc, "#1")
        try sb.write("t.jsonl", Self.line(200, 250, y: 200))
        try await sb.ok("import", "a", doc, "#1", "t.jsonl", "--width", "4")
        try await sb.ok("init", "r")

        // Replica r: the page installed from a's checkpoint (above the delete's clock), then
        // every operation of a and c received.
        let id = try #require(DocumentID(doc))
        let a = try await Notebook.open(at: sb.sub("a"))
        let c = try await Notebook.open(at: sb.sub("c"))
        let r = try await Notebook.open(at: sb.sub("r"))
        do {
            let da = try await a.openDocument(id), dc = try await c.openDocument(id)
            let pid = await da.pageList[0].id
            try await r.installCheckpoint(document: id, pages: [try await da.pageState(pid)], assets: [])
            let dr = try await r.openDocument(id)
            _ = try await dr.receive(try await da.operations(notCoveredBy: VectorClock()))
            _ = try await dr.receive(try await dc.operations(notCoveredBy: VectorClock()))
        } catch {
            try? await a.close(); try? await c.close(); try? await r.close()
            throw error
        }
        try await a.close(); try await c.close(); try await r.close()

        let out = try await sb.ok("conflicts", "r", "--render", "pics", "--size", "64")
        let text = try #require(FileManager.default.contents(atPath: sb.sub("pics/index.json")).map { String(decoding: $0, as: UTF8.self) })
        let pages = try index(sb, "pics")["pages"] as! [[String: Any]]
        try #require(pages.count == 1, "\(out)\n\(text)")
        #expect(pages[0]["deleted"] as? Bool == true)
        #expect((pages[0]["unseen_reason"] as? String)?.contains("checkpoint") == true, "\(text)")
        let sides = pages[0]["sides"] as! [[String: Any]]
        #expect(sides.map { $0["view"] as? String } == ["delete"] && (sides[0]["reason"] as? String)?.contains("checkpoint") == true, "\(sides)")
        #expect(!text.contains(sb.path) && !text.contains("/"+"tmp"), "a local path in the index: \(text)")
    }

    @Test("[MERGE-58] only names exactly as the command writes them are removed: a lowercase UUID, a short or signed replica id in an old index remove nothing")
    func onlyExactPictureNamesAreRemoved() async throws {
        let sb = try Sandbox("conflictpic-names")
        defer { sb.remove() }
        let (doc, files) = try await renderedThenSuperseded(sb)
        let page = String(files[0].split(separator: "/")[1].prefix(36))
        let lowDoc = doc.lowercased(), lowPage = page.lowercased()
        let odd = ["\(lowDoc)/\(page).png", "\(doc)/\(lowPage)-merged.png", "\(doc)/\(page)-side-1f.png",
                   "\(doc)/\(page)-side-+000000000000001f.png", "\(doc)/\(page)-delete-000000000000001F.png"]
        try FileManager.default.createDirectory(atPath: sb.sub("pics/\(lowDoc)"), withIntermediateDirectories: true)
        for f in odd { try sb.write("pics/" + f, "not a picture of this command") }
        let list = (files + odd).map { "\"\($0)\"" }.joined(separator: ", ")
        try sb.write("pics/index.json", "{\"files\": [\(list)]}")
        try await sb.ok("conflicts", "a", "--render", "pics")
        for f in odd { #expect(FileManager.default.fileExists(atPath: sb.sub("pics/" + f)), "\(f) removed") }
        for f in files { #expect(!FileManager.default.fileExists(atPath: sb.sub("pics/" + f)), "\(f) left behind") }
    }

    @Test("[MERGE-58] a run that fails after its provisional index leaves every file it wrote listed, and the next run removes them")
    func provisionalIndexListsPlannedFiles() async throws {
        let sb = try Sandbox("conflictpic-provisional")
        defer { sb.remove() }
        let (doc, ids) = try await twoFolders(sb, strokes: Self.line(50, 100, y: 50))
        try await sb.ok("move", "a", doc, "#1", ids[0], "--dx", "10", "--dy", "0")
        try await sb.ok("move", "b", doc, "#1", ids[0], "--dx", "-10", "--dy", "0")
        try await sb.ok("sync", "a", sb.sub("b"))
        // The run fails on the combined picture's name (a directory stands there), after the
        // merged picture and the sides are written.
        try await sb.ok("conflicts", "a", "--render", "probe", "--size", "64")
        let planned = try index(sb, "probe")["files"] as! [String]
        let combined = try #require(planned.first { $0.split(separator: "/")[1].count == 40 }, "\(planned)")
        try FileManager.default.createDirectory(atPath: sb.sub("pics/" + combined), withIntermediateDirectories: true)
        let failed = try await sb.run("conflicts", "a", "--render", "pics", "--size", "64")
        #expect(failed.code != 0, "\(failed)")
        let listed = Set(try index(sb, "pics")["files"] as! [String])
        for f in planned where f != combined { #expect(FileManager.default.fileExists(atPath: sb.sub("pics/" + f)) && listed.contains(f), "\(f) written but not listed") }
        // The conflict superseded and the obstacle gone: the next run removes what the failed one wrote.
        try FileManager.default.removeItem(atPath: sb.sub("pics/" + combined))
        try await sb.ok("move", "a", doc, "#1", ids[0], "--dx", "5", "--dy", "0")
        try await sb.ok("conflicts", "a", "--render", "pics")
        for f in planned { #expect(!FileManager.default.fileExists(atPath: sb.sub("pics/" + f)), "\(f) left behind") }
    }
}
