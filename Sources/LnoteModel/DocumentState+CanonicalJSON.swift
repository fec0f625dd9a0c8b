extension DocumentState {
    /// A whole document as canonical JSON: its replicated metadata (title, deletion, pages
    /// in order with their canvas and deletion, clocks) and each page's canonical form
    /// (`PageState.canonicalJSONValue`). Nothing replica-local (file offsets, log
    /// incarnations, paths) appears, so replicas that applied the same operations print
    /// byte-identical text.
    ///
    /// - Parameter pages: the states of the document's pages; a page missing from it is
    ///   printed as empty (no operations received yet).
    public func canonicalJSON(pages: [PageID: PageState], style: CanonicalJSON.Style = .pretty,
                              includePoints: Bool = true) -> String {
        canonicalJSONValue(pages: pages, includePoints: includePoints).text(style)
    }

    public func canonicalJSONValue(pages states: [PageID: PageState], includePoints: Bool = true) -> CanonicalJSON {
        func register<V>(_ r: LWWRegister<V>, _ value: CanonicalJSON) -> CanonicalJSON {
            ["value": value, "frontier": .array(r.frontier.map(\.json))]
        }
        return .object([
            "document": .string(id.description),
            "title": register(title, .string(title.value)),
            "deleted": register(deleted, .bool(deleted.value)),
            "created": .int(created),
            "modified": .int(modified),
            "clock": clock.json,
            "maxLamport": .uint(maxLamport),
            "pages": .array(pages.map { p in
                .object([
                    "id": .string(p.id.description),
                    "added": p.added.json,
                    "created": .int(p.created),
                    "position": register(p.position, .string(p.position.value.description)),
                    "canvas": register(p.canvas, ["width": .int(Int64(p.canvas.value.width)), "height": .int(Int64(p.canvas.value.height))]),
                    "deleted": register(p.deleted, .bool(p.deleted.value)),
                    "deletedSeen": p.deletedSeen.map(\.json) ?? .null,
                    "content": (states[p.id] ?? PageState(page: p.id)).canonicalJSONValue(includePoints: includePoints),
                ])
            }),
            "contexts": .object(Dictionary(contexts.map { ($0.replica.description, $0.clock.json) }, uniquingKeysWith: { $1 })),
        ])
    }
}
