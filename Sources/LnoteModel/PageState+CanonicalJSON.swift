extension PageState {
    /// The page as a person's tool prints it: a canonical JSON document ([JSON-10]).
    ///
    /// Elements are listed bottom to top; each shows its id, kind, style and quantized
    /// points `[x, y, pressure, radius, t]`, the visible and erased point ranges, the
    /// transform, the z key, and the replication metadata that conflict reports use
    /// (Lamport timestamp, wall time, the frontiers of its registers, whether they are
    /// conflicted). Tombstones and replica contexts follow. The state is put in canonical
    /// order first (`PageSnapshot.canonicalized`), so two equal states print byte-identical
    /// text. The layout is given in `Protocol/page-snapshot.md` ("Canonical page JSON").
    ///
    /// - Parameters:
    ///   - style: `.pretty` (one fixed indented form) or `.compact`.
    ///   - includePoints: when false, strokes show `pointCount` instead of `points`.
    public func canonicalJSON(style: CanonicalJSON.Style = .pretty, includePoints: Bool = true) -> String {
        canonicalJSONValue(includePoints: includePoints).text(style)
    }

    /// The JSON value behind `canonicalJSON(style:includePoints:)`.
    public func canonicalJSONValue(includePoints: Bool = true) -> CanonicalJSON {
        let s = PageSnapshot.canonicalized(self)
        return .object([
            "page": .string(s.page.description),
            "clock": s.clock.json,
            "maxLamport": .uint(s.maxLamport),
            "modified": .int(s.modified),
            "elementCount": .int(Int64(s.elements.count)),
            "pointCount": .int(Int64(s.pointCount)),
            "elements": .array(s.elements.map { $0.json(includePoints: includePoints) }),
            "tombstones": .array(s.tombstones.map { $0.json(includePoints: includePoints) }),
            "contexts": .object(Dictionary(s.contexts.map { ($0.replica.description, $0.json) }, uniquingKeysWith: { $1 })),
        ])
    }
}

extension VectorClock {
    /// `{"<replica hex>": counter, …}`
    public var json: CanonicalJSON {
        .object(Dictionary(entries.map { ($0.replica.description, CanonicalJSON.uint($0.counter)) }, uniquingKeysWith: { $1 }))
    }
}

extension OpRef {
    /// `"<replica hex>.<counter>@<lamport>"`
    public var json: CanonicalJSON { .string(description) }
}

extension Transform {
    public var json: CanonicalJSON {
        ["a": .int(Int64(a)), "b": .int(Int64(b)), "c": .int(Int64(c)), "d": .int(Int64(d)),
         "tx": .int(Int64(tx)), "ty": .int(Int64(ty))]
    }
}

extension QRect {
    public var json: CanonicalJSON {
        ["x": .int(Int64(x)), "y": .int(Int64(y)), "width": .int(Int64(width)), "height": .int(Int64(height))]
    }
}

extension Array where Element == PointRange {
    /// `[[from, to], …]`
    var json: CanonicalJSON { .array(map { [.uint(UInt64($0.from)), .uint(UInt64($0.to))] }) }
}

extension ElementRecord {
    func json(includePoints: Bool) -> CanonicalJSON {
        var o: [String: CanonicalJSON] = [
            "id": .string(id.description),
            "lamport": .uint(lamport),
            "wallTime": .int(wallTime),
            "transform": transform.value.json,
            "transformFrontier": .array(transform.frontier.map(\.json)),
            "z": .string(z.value.description),
            "zFrontier": .array(z.frontier.map(\.json)),
            "erased": erased.json,
            "editFrontier": .array(frontier.map(\.json)),
        ]
        var conflicts: [CanonicalJSON] = []
        if transform.isConflicted { conflicts.append("transform") }
        if z.isConflicted { conflicts.append("z") }
        o["conflicts"] = .array(conflicts)
        // [MERGE-71] Each partial erase with what of it still holds; one taken back whole is
        // left out.
        let kept = keptRangeErasures
        if !kept.isEmpty { o["partialErases"] = .array(kept.map { ["ref": $0.ref.json, "ranges": $0.ranges.json] }) }
        switch content {
        case .stroke(let s):
            o["kind"] = "stroke"
            o["style"] = ["tool": .string(s.style.tool.description), "color": .string(s.style.color.description),
                          "width": .int(Int64(s.style.width))]
            o["pointCount"] = .int(Int64(s.points.count))
            o["visible"] = visibleRanges.json
            if includePoints {
                o["points"] = .array(s.points.map {
                    [.int(Int64($0.x)), .int(Int64($0.y)), .int(Int64($0.pressure)), .int(Int64($0.radius)), .uint(UInt64($0.t))]
                })
            }
        case .image(let i):
            o["kind"] = "image"
            o["asset"] = .string(i.asset.description)
            o["frame"] = i.frame.json
            o["rotation"] = .int(Int64(i.rotation))
        }
        return .object(o)
    }
}

extension Tombstone {
    func json(includePoints: Bool) -> CanonicalJSON {
        var o: [String: CanonicalJSON] = [
            "id": .string(id.description),
            "erasures": .array(erasures.map { e in
                var x: [String: CanonicalJSON] = ["ref": e.ref.json, "clock": e.clock.json]
                if !e.cancelledBy.isEmpty { x["restoredBy"] = .array(e.cancelledBy.map { .string($0.description) }) }
                return .object(x)
            }),
            "editFrontier": .array(frontier.map(\.json)),
            "concurrent": .array(concurrent.map(\.json)),
        ]
        if let record { o["record"] = record.json(includePoints: includePoints) }
        return .object(o)
    }
}

extension ReplicaContext {
    /// `{"clock": clock, "lamports": [[from, offset], …]}`
    public var json: CanonicalJSON {
        ["clock": clock.json, "lamports": .array(lamports.map { [.uint($0.from), .uint($0.offset)] })]
    }
}
