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
    }

    /// Conflicts no picture shows, with the reason.
    struct Unpictured {
        var document: DocumentID
        var conflict: Conflict
        var reason: String
    }

    /// The conflict kinds about a page's elements ([MERGE-55]).
    static let elementKinds: Set<Conflict.Kind> = [.move, .reorder, .erase]

    /// The pages of one document to picture, in document order, and its conflicts that no
    /// picture shows. `conflicts` is `allConflicts()`; `live` the live pages in order.
    static func plans(_ d: Document, conflicts: [Conflict], live: [PageID])
        async throws -> (plans: [PagePlan], unpictured: [Unpictured]) {
        var plans: [PagePlan] = []
        var unpictured: [Unpictured] = []
        for c in conflicts where !elementKinds.contains(c.kind) && c.kind != .pageDelete {
            unpictured.append(Unpictured(document: d.id, conflict: c, reason: c.kind == .title
                ? "a document-level conflict: no page shows it"
                : "a conflict about the page itself, not its elements: no element to outline"))
        }
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
            // [MERGE-57] A page deleted while edited: the delete's view, and the edits it had not seen.
            if let deletion {
                let applied = try await d.clock(page: pid)
                if let seen = try await d.deletedSeen(pid) {
                    var side = Side(view: .delete, replica: deletion.winner.id.replica, operation: deletion.winner.id,
                                    moment: seen.description)
                    do {
                        let before = try await d.renderable(pid, at: .clock(seen))
                        side.page = before
                        for e in changedElements(before.state, merged.state) where !highlighted.contains(e) { highlighted.append(e) }
                    } catch let e as LnoteError {
                        side.reason = e.description
                    }
                    sides.append(side)
                    for op in try await d.operations(page: pid, notCoveredBy: seen) where applied.covers(op.id) { note(op.id) }
                }
            }
            for (replica, op) in latest.sorted(by: { $0.key < $1.key }) {
                var side = Side(view: .operation, replica: replica, operation: op, moment: "")
                do {
                    let p = try await d.renderable(pid, at: .operation(op))
                    side.page = p
                    side.moment = p.state.clock.description
                } catch let e as LnoteError {
                    side.reason = e.description
                }
                sides.append(side)
            }
            let all = own + (deletion.map { [$0] } ?? [])
            plans.append(PagePlan(document: d.id, page: pid, number: live.firstIndex(of: pid).map { $0 + 1 }, conflicts: all,
                                  highlighted: highlighted, merged: merged, sides: sides))
        }
        return (plans, unpictured)
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

    /// Draws every plan and writes its files into `dir` (created if missing), then
    /// `dir/index.json`, then removes the files a previous run's index listed that this run
    /// did not write ([MERGE-58]). Returns the index.
    static func write(_ plans: [PagePlan], unpictured: [Unpictured], to dir: String, size: Int,
                      devices: [ReplicaID: String]) throws -> CanonicalJSON {
        try checkTarget(dir)
        let previous = previousFiles(dir)
        try OutputFile.makeDirectory(dir)
        var written: [String] = []
        func put(_ name: String, _ bytes: [UInt8]) throws {
            let path = (dir as NSString).appendingPathComponent(name)
            do { try OutputFile.replace(path, with: bytes) } catch var e as LnoteError {
                e.message = "cannot write \(path): \(e.message)"
                throw e
            }
            written.append(name)
        }
        var pages: [CanonicalJSON] = []
        for p in plans {
            try OutputFile.makeDirectory((dir as NSString).appendingPathComponent(p.document.description))
            let drawn = p.sides.filter { $0.page != nil }
            var panels = [PageRenderer.HighlightedPage(label: "merged (as it is now)", state: p.merged.state,
                                                       canvas: p.merged.canvas, assets: p.merged.assets, highlighted: p.highlighted)]
            for s in drawn {
                panels.append(PageRenderer.HighlightedPage(label: s.label, state: s.page!.state, canvas: p.merged.canvas,
                                                           assets: s.page!.assets, highlighted: p.highlighted))
            }
            let pictures = try PageRenderer.highlightedPictures(panels, maxSide: size)
            let mergedName = file(p.document, p.page, "-merged")
            try put(mergedName, pictures.panels[0])
            var sides: [CanonicalJSON] = []
            var k = 1
            for s in p.sides {
                var o: [String: CanonicalJSON] = [
                    "view": .string(s.view.rawValue), "replica": .string(s.replica.description),
                    "operation": .string(s.operation.description),
                ]
                if !s.moment.isEmpty { o["moment"] = .string(s.moment) }
                if let name = devices[s.replica] { o["device"] = .string(name) }
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
            let combinedName = file(p.document, p.page, "")
            try put(combinedName, pictures.combined)
            var o: [String: CanonicalJSON] = [
                "document": .string(p.document.description), "page": .string(p.page.description),
                "deleted": .bool(p.number == nil),
                "conflicts": .array(p.conflicts.map(\.json)),
                "highlighted": .array(p.highlighted.map { .string($0.description) }),
                "merged": .string(mergedName), "combined": .string(combinedName), "sides": .array(sides),
            ]
            if let n = p.number { o["number"] = .int(Int64(n)) }
            pages.append(.object(o))
        }
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
        try put("index.json", Array(index.text(.pretty).utf8) + [0x0A])
        // Only files this command writes, named as it names them, are ever removed.
        let now = Set(written)
        for name in previous where !now.contains(name) {
            try? FileManager.default.removeItem(atPath: (dir as NSString).appendingPathComponent(name))
        }
        return index
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
    /// `DOC/PAGE-delete-R.png` (DOC and PAGE UUIDs, R a replica id in hex).
    static func isPictureName(_ name: String) -> Bool {
        let parts = name.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, DocumentID(String(parts[0])) != nil, parts[1].hasSuffix(".png") else { return false }
        let base = parts[1].dropLast(4)
        guard base.count >= 36, PageID(String(base.prefix(36))) != nil else { return false }
        let rest = base.dropFirst(36)
        if rest.isEmpty || rest == "-merged" { return true }
        for prefix in ["-side-", "-delete-"] where rest.hasPrefix(prefix) {
            return ReplicaID(hex: String(rest.dropFirst(prefix.count))) != nil
        }
        return false
    }
}
