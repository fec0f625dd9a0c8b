import Foundation
import LnoteModel
import LnoteReplication
import LnoteRender
import LnoteStore

/// `lnote conflicts FOLDER [DOC] --render DIR`: pictures of the pages with conflicts
/// (merge-semantics.md [MERGE-55] – [MERGE-58]).
enum ConflictPictures {
    /// One panel beside the merged picture: the page as one replica saw it.
    struct Side {
        enum View: String { case operation, delete }
        var view: View
        var replica: ReplicaID
        /// The operation whose moment it is (for a delete's view, the delete).
        var operation: OpID
        /// The moment's clock, as printed in the index.
        var moment: String
        var page: RenderablePage?
        /// Why the side could not be drawn (a moment this replica cannot rebuild, [MERGE-82]).
        var reason: String?

        /// The side's file name, after the page's id.
        var suffix: String { "-\(view == .operation ? "side" : "delete")-\(replica)" }
        var label: String {
            view == .operation ? "replica \(replica) after \(operation)" : "deleted by \(replica) (\(operation)): what it saw"
        }
    }

    /// One page to picture.
    struct PagePlan {
        var document: DocumentID
        var page: PageID
        /// Its position among the live pages (1-based), nil for a deleted page.
        var number: Int?
        var conflicts: [Conflict]
        var highlighted: [ElementID]
        var merged: RenderablePage
        var sides: [Side]
        /// [MERGE-57] Why the edits a delete had not seen could not be listed (so they give no sides).
        var unseenReason: String?
    }

    /// Conflicts no picture shows, with the reason.
    struct Unpictured {
        var document: DocumentID
        var conflict: Conflict
        var reason: String
    }

    /// The most operation sides drawn for one page ([MERGE-56]); the rest are listed with
    /// the reason "too many sides".
    static let maxSides = 32

    /// The conflict kinds about a page's elements ([MERGE-55]).
    static let elementKinds: Set<Conflict.Kind> = [.move, .reorder, .erase]

    /// True when `plans` pictures some page of a document with these conflicts: one about a
    /// page's elements, or a page deleted while edited, on one of `pages` (`allPageIDs`).
    static func hasPictures(_ conflicts: [Conflict], pages: [PageID]) -> Bool {
        conflicts.contains { c in
            guard let p = c.page, elementKinds.contains(c.kind) || c.kind == .pageDelete else { return false }
            return pages.contains(p)
        }
    }

    /// A document's conflicts that no picture shows, with the reason.
    static func unpictured(_ doc: DocumentID, _ conflicts: [Conflict]) -> [Unpictured] {
        conflicts.filter { !elementKinds.contains($0.kind) && $0.kind != .pageDelete }.map { c in
            Unpictured(document: doc, conflict: c, reason: c.kind == .title
                ? "a document-level conflict: no page shows it"
                : "a conflict about the page itself, not its elements: no element to outline")
        }
    }

    /// The pages of one document to picture, in document order, each handed to `each` as soon
    /// as it is planned (its pages rebuilt: one page's in memory at a time). `conflicts` is
    /// `allConflicts()`; `live` the live pages in order.
    static func plans(_ d: Document, conflicts: [Conflict], live: [PageID], each: (PagePlan) throws -> Void) async throws {
        for pid in await d.allPageIDs {
            let own = conflicts.filter { $0.page == pid && elementKinds.contains($0.kind) }
            let deletion = conflicts.first { $0.page == pid && $0.kind == .pageDelete }
            guard !own.isEmpty || deletion != nil else { continue }
            let merged = try await d.renderable(pid)
            // [MERGE-56] The concurrent operations, each replica's greatest.
            var latest: [ReplicaID: OpID] = [:]
            func note(_ id: OpID) {
                if let have = latest[id.replica], have.counter >= id.counter { return }
                latest[id.replica] = id
            }
            for c in own { for r in c.ops { note(r.id) } }
            var highlighted: [ElementID] = []
            for c in own { if let e = c.element, !highlighted.contains(e) { highlighted.append(e) } }
            var sides: [Side] = []
            var unseenReason: String?
            // [MERGE-57] A page deleted while edited: the delete's view, and the edits it had not seen.
            if let deletion {
                let applied = try await d.clock(page: pid)
                if let seen = try await d.deletedSeen(pid) {
                    var side = Side(view: .delete, replica: deletion.winner.id.replica, operation: deletion.winner.id,
                                    moment: seen.description)
                    do {
                        let before = try await d.renderable(pid, at: .clock(seen))
                        side.page = before
                        side.moment = before.state.clock.description
                        for e in changedElements(before.state, merged.state) where !highlighted.contains(e) { highlighted.append(e) }
                    } catch let e as LnoteError {
                        side.reason = reason(e)
                    }
                    sides.append(side)
                    // A page installed from a checkpoint the delete's clock does not cover holds
                    // no log below its base ([MERGE-82]): the unseen edits cannot be listed.
                    do {
                        for op in try await d.operations(page: pid, notCoveredBy: seen) where applied.covers(op.id) { note(op.id) }
                    } catch let e as LnoteError {
                        unseenReason = reason(e, unseen: true)
                    }
                }
            }
            for (k, (replica, op)) in latest.sorted(by: { $0.key < $1.key }).enumerated() {
                var side = Side(view: .operation, replica: replica, operation: op, moment: "")
                // [MERGE-56] At most `maxSides` sides are drawn: an author can put many replica
                // ids on one page, and each side is a rebuild of the page.
                guard k < maxSides else {
                    side.reason = "too many sides"
                    sides.append(side)
                    continue
                }
                do {
                    let p = try await d.renderable(pid, at: .operation(op))
                    side.page = p
                    side.moment = p.state.clock.description
                } catch let e as LnoteError {
                    side.reason = reason(e)
                }
                sides.append(side)
            }
            let all = own + (deletion.map { [$0] } ?? [])
            try each(PagePlan(document: d.id, page: pid, number: live.firstIndex(of: pid).map { $0 + 1 }, conflicts: all,
                              highlighted: highlighted, merged: merged, sides: sides, unseenReason: unseenReason))
        }
    }

    /// The line printed for a page pictured: where its pictures are, the sides not drawn and
    /// why, and the device names this folder knows for the replicas (printed, never in the
    /// index, [MERGE-58]).
    static func summary(_ p: PagePlan, in dir: String, devices: [ReplicaID: String]) -> String {
        let drawn = p.sides.filter { $0.page != nil }.count
        let at = p.number.map { "#\($0)" } ?? "(deleted)"
        var line = "\(p.document) page \(at) \(p.page): \(p.conflicts.count) conflict\(p.conflicts.count == 1 ? "" : "s"), "
            + "merged and \(drawn) side\(drawn == 1 ? "" : "s") in "
            + (dir as NSString).appendingPathComponent(file(p.document, p.page, ""))
        for s in p.sides where s.page == nil { line += "; \(s.label) not drawn: \(s.reason ?? "")" }
        let named = p.sides.compactMap { s in devices[s.replica].map { "\(s.replica) is \($0)" } }
        if !named.isEmpty { line += " (" + named.joined(separator: ", ") + ")" }
        if let r = p.unseenReason { line += "; \(r)" }
        return line
    }

    /// The index's reason for a moment (or, with `unseen`, the edits a delete had not seen)
    /// this replica cannot rebuild: a fixed text per error code, never a local path or
    /// message, so that replicas holding the same operations write the same index ([MERGE-56]).
    static func reason(_ e: LnoteError, unseen: Bool = false) -> String {
        let what = unseen ? "the edits the delete had not seen cannot be listed" : "this moment cannot be rebuilt here"
        switch e.code {
        case .invalidState: return what + ": it lies before the page's checkpoint base"
        case .notFound: return what + ": an operation it needs is not in the page's log"
        case .corrupt, .truncated: return what + ": the page's log is damaged"
        default: return what + " (\(e.code))"
        }
    }

    /// [MERGE-57] The elements whose record differs between two states of a page: live in one
    /// and not the other, or moved, reordered or partly erased between them; by id.
    static func changedElements(_ a: PageState, _ b: PageState) -> [ElementID] {
        func key(_ s: PageState) -> [ElementID: (Transform, ZKey, [PointRange])] {
            var m: [ElementID: (Transform, ZKey, [PointRange])] = [:]
            for e in s.elements { m[e.id] = (e.transform.value, e.z.value, e.erased) }
            return m
        }
        let ka = key(a), kb = key(b)
        var out: [ElementID] = []
        for id in Set(ka.keys).union(kb.keys).sorted() {
            guard let x = ka[id], let y = kb[id] else { out.append(id); continue }
            if x.0 != y.0 || x.1 != y.1 || x.2 != y.2 { out.append(id) }
        }
        return out
    }

    /// Refuses a DIR that exists and is not a directory (before any work is done).
    static func checkTarget(_ dir: String) throws {
        var isDir: ObjCBool = false
        if FileManager.default.fileExists(atPath: dir, isDirectory: &isDir), !isDir.boolValue {
            throw CLIError("cannot write conflict pictures to \(dir): it is a file, not a directory")
        }
    }

    /// A file of a run, relative to DIR.
    static func file(_ doc: DocumentID, _ page: PageID, _ suffix: String) -> String { "\(doc)/\(page)\(suffix).png" }

    /// Writes the pictures into `dir` page by page ([MERGE-58]): made with every document
    /// folder it will write into checked (before anything is written or removed), `add` draws
    /// and writes one page's files, `finish` writes `dir/index.json` and removes the files the
    /// previous run's index listed that this run did not write. Before each page's files, the
    /// index is rewritten as a provisional one listing the previous run's files and every file
    /// written or about to be: a run that fails halfway leaves nothing a later run cannot find
    /// and remove. Only one page's pictures are in memory at a time.
    final class Writer {
        let dir: String
        let size: Int
        let previous: [String]
        private(set) var written: [String] = []
        private var pages: [CanonicalJSON] = []
        private var indexPath: String { (dir as NSString).appendingPathComponent("index.json") }

        /// - Parameter documents: the documents that will have pictures (`hasPictures`).
        init(dir: String, size: Int, documents: [DocumentID]) throws {
            self.dir = dir
            self.size = size
            try checkTarget(dir)
            previous = previousFiles(dir)
            // Nothing under DIR is followed through a symlink ([MERGE-58]): every document
            // folder this run writes into or removes from must be a real directory (or missing).
            var docs = Set(documents.map(\.description))
            for name in previous { docs.insert(String(name.split(separator: "/")[0])) }
            for doc in docs.sorted() {
                let path = (dir as NSString).appendingPathComponent(doc)
                if let kind = OutputFile.fileType(atPath: path), kind != "directory" {
                    throw CLIError("cannot write conflict pictures to \(dir): \(path) is a \(kind), not a directory")
                }
            }
            try OutputFile.makeDirectory(dir)
            try provisional([])
        }

        /// The provisional index: the previous run's files, those written, and `next`.
        private func provisional(_ next: [String]) throws {
            let files = Set(previous).union(written).union(next)
            let index = CanonicalJSON.object([
                "pages": .array([]), "not_pictured": .array([]),
                "files": .array(files.sorted().map { .string($0) }),
            ])
            do { try OutputFile.replace(indexPath, with: Array(index.text(.pretty).utf8) + [0x0A]) } catch var e as LnoteError {
                e.message = "cannot write \(indexPath): \(e.message)"
                throw e
            }
        }

        private func put(_ name: String, _ bytes: [UInt8]) throws {
            let path = (dir as NSString).appendingPathComponent(name)
            do { try OutputFile.replace(path, with: bytes) } catch var e as LnoteError {
                e.message = "cannot write \(path): \(e.message)"
                throw e
            }
            written.append(name)
        }

        /// Draws one page's pictures and writes them (pages in the index's order).
        func add(_ p: PagePlan) throws {
            let mergedName = file(p.document, p.page, "-merged"), combinedName = file(p.document, p.page, "")
            try provisional([mergedName, combinedName] + p.sides.filter { $0.page != nil }.map { file(p.document, p.page, $0.suffix) })
            try OutputFile.makeOwnDirectory((dir as NSString).appendingPathComponent(p.document.description))
            let drawn = p.sides.filter { $0.page != nil }
            var panels = [PageRenderer.HighlightedPage(label: "merged (as it is now)", state: p.merged.state,
                                                       canvas: p.merged.canvas, assets: p.merged.assets, highlighted: p.highlighted)]
            for s in drawn {
                panels.append(PageRenderer.HighlightedPage(label: s.label, state: s.page!.state, canvas: p.merged.canvas,
                                                           assets: s.page!.assets, highlighted: p.highlighted))
            }
            let pictures = try PageRenderer.highlightedPictures(panels, maxSide: size)
            try put(mergedName, pictures.panels[0])
            var sides: [CanonicalJSON] = []
            var k = 1
            for s in p.sides {
                var o: [String: CanonicalJSON] = [
                    "view": .string(s.view.rawValue), "replica": .string(s.replica.description),
                    "operation": .string(s.operation.description),
                ]
                if !s.moment.isEmpty { o["moment"] = .string(s.moment) }
                if s.page != nil {
                    let name = file(p.document, p.page, s.suffix)
                    try put(name, pictures.panels[k])
                    k += 1
                    o["file"] = .string(name)
                } else {
                    o["reason"] = .string(s.reason ?? "not drawn")
                }
                sides.append(.object(o))
            }
            try put(combinedName, pictures.combined)
            var o: [String: CanonicalJSON] = [
                "document": .string(p.document.description), "page": .string(p.page.description),
                "deleted": .bool(p.number == nil),
                "conflicts": .array(p.conflicts.map(\.json)),
                "highlighted": .array(p.highlighted.map { .string($0.description) }),
                "merged": .string(mergedName), "combined": .string(combinedName), "sides": .array(sides),
            ]
            if let n = p.number { o["number"] = .int(Int64(n)) }
            if let r = p.unseenReason { o["unseen_reason"] = .string(r) }
            pages.append(.object(o))
        }

        /// Writes `dir/index.json`, then removes the previous run's files this one did not
        /// write. Returns the index.
        func finish(unpictured: [Unpictured]) throws -> CanonicalJSON {
            let index = CanonicalJSON.object([
                "pages": .array(pages),
                "not_pictured": .array(unpictured.map { u in
                    guard case .object(var o) = u.conflict.json else { return u.conflict.json }
                    o["document"] = .string(u.document.description)
                    o["reason"] = .string(u.reason)
                    return .object(o)
                }),
                "files": .array(written.sorted().map { .string($0) }),
            ])
            do { try OutputFile.replace(indexPath, with: Array(index.text(.pretty).utf8) + [0x0A]) } catch var e as LnoteError {
                e.message = "cannot write \(indexPath): \(e.message)"
                throw e
            }
            // Only files this command writes, named as it names them, are ever removed: regular
            // files only, each relative to its document folder opened without following a symlink.
            let now = Set(written)
            for name in previous where !now.contains(name) {
                let parts = name.split(separator: "/").map(String.init)
                let docDir = (dir as NSString).appendingPathComponent(parts[0])
                guard OutputFile.fileType(atPath: docDir) != nil else { continue }
                _ = try OutputFile.removeRegularFile(parts[1], in: docDir)
            }
            return index
        }
    }

    /// The picture files a previous run's `index.json` in `dir` lists ([MERGE-58]), those
    /// named as this command names them (DOC/PAGE[-merged|-side-R|-delete-R].png) and no
    /// other: the index is a file anyone could have written. An index that is missing, too
    /// large (over 16 MiB) or not such JSON lists nothing.
    static func previousFiles(_ dir: String) -> [String] {
        let path = (dir as NSString).appendingPathComponent("index.json")
        guard let attrs = try? FileManager.default.attributesOfItem(atPath: path),
              (attrs[.size] as? NSNumber)?.intValue ?? Int.max <= 16 << 20,
              let data = FileManager.default.contents(atPath: path),
              let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
              let files = object["files"] as? [Any] else { return [] }
        return files.compactMap { $0 as? String }.filter(isPictureName)
    }

    /// True for `DOC/PAGE.png`, `DOC/PAGE-merged.png`, `DOC/PAGE-side-R.png` and
    /// `DOC/PAGE-delete-R.png` exactly as this command writes them: DOC and PAGE uppercase
    /// UUIDs, R a replica id in 16 lowercase hex digits (each part must print back as itself).
    static func isPictureName(_ name: String) -> Bool {
        let parts = name.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 2, DocumentID(parts[0])?.description == parts[0], parts[1].hasSuffix(".png") else { return false }
        let base = parts[1].dropLast(4)
        let page = String(base.prefix(36))
        guard PageID(page)?.description == page else { return false }
        let rest = base.dropFirst(36)
        if rest.isEmpty || rest == "-merged" { return true }
        for prefix in ["-side-", "-delete-"] where rest.hasPrefix(prefix) {
            let r = String(rest.dropFirst(prefix.count))
            return ReplicaID(hex: r)?.description == r
        }
        return false
    }
}
