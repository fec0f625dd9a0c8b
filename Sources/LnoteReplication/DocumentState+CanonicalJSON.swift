import LnoteModel

extension DocumentState {
    /// A whole document as canonical JSON ([JSON-11]): its replicated metadata, every page
    /// in document order (deleted ones included) with its state ([JSON-10]), and every
    /// conflict the document and its pages hold, derived from those states ([MERGE-51]).
    /// Nothing local to a replica (file offsets, log incarnations, paths) appears, so
    /// replicas that applied the same operations print byte-identical text. `lnote show DOC
    /// --json` prints it.
    ///
    /// - Parameter pages: the states of the document's pages; a page missing from it is
    ///   printed as an empty page (no operation received yet).
    public func canonicalJSON(pages: [PageID: PageState], style: CanonicalJSON.Style = .pretty,
                              includePoints: Bool = true) -> String {
        canonicalJSONValue(pages: pages, includePoints: includePoints).text(style)
    }

    /// The JSON value behind `canonicalJSON(pages:style:includePoints:)`.
    public func canonicalJSONValue(pages states: [PageID: PageState], includePoints: Bool = true) -> CanonicalJSON {
        func state(_ p: PageID) -> PageState { states[p] ?? PageState(page: p) }
        var conflicts = self.conflicts(pageClocks: Dictionary(uniqueKeysWithValues: pages.map { ($0.id, state($0.id).clock) }))
        for p in pages { conflicts += state(p.id).conflicts }
        var live = 0
        return [
            "document": .string(id.description),
            "title": .string(title.value),
            "titleFrontier": title.frontierJSON,
            "deleted": .bool(deleted.value),
            "deletedFrontier": deleted.frontierJSON,
            "created": .int(created),
            "modified": .int(modified),
            "clock": clock.json,
            "maxLamport": .uint(maxLamport),
            "pages": .array(pages.map { p in
                var o: [String: CanonicalJSON] = [
                    "page": .string(p.id.description),
                    "adds": .array(p.adds.map(\.json)),
                    "created": .int(p.created),
                    "position": .string(p.position.value.description),
                    "positionFrontier": p.position.frontierJSON,
                    "canvas": ["width": .int(Int64(p.canvas.value.width)), "height": .int(Int64(p.canvas.value.height))],
                    "canvasFrontier": p.canvas.frontierJSON,
                    "deleted": .bool(p.deleted.value),
                    "deletedFrontier": p.deleted.frontierJSON,
                    "state": state(p.id).canonicalJSONValue(includePoints: includePoints),
                ]
                if p.deleted.value {
                    if let seen = p.deletedSeen { o["deletedSeen"] = seen.json }
                } else {
                    live += 1
                    o["index"] = .int(Int64(live))
                }
                return .object(o)
            }),
            "conflicts": .array(conflicts.map(\.json)),
        ]
    }
}

extension LWWRegister {
    /// The register's frontier as an array of OpRef strings, ascending.
    public var frontierJSON: CanonicalJSON { .array(frontier.map(\.json)) }
}

extension Conflict {
    /// `{"kind", "page"?, "element"?, "ops", "winner"}` ([JSON-11]): `page` and `element`
    /// are present when the conflict is about one.
    public var json: CanonicalJSON {
        var o: [String: CanonicalJSON] = [
            "kind": .string(kind.rawValue),
            "ops": .array(ops.map(\.json)),
            "winner": winner.json,
        ]
        if let page { o["page"] = .string(page.description) }
        if let element { o["element"] = .string(element.description) }
        return .object(o)
    }
}
