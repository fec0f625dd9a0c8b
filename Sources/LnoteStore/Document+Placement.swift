import LnoteModel
import LnoteReplication

/// Edits with an explicit place: what a canvas offers as "paste above this", and what
/// replays of recorded sessions (scenarios) need to reproduce ids.
extension Document {
    /// Adds a stroke just above or just below another element (on top when both are nil).
    @discardableResult
    public func addStroke(_ stroke: Stroke, to pid: PageID, above: ElementID?, below: ElementID?) async throws -> ElementID {
        try await commitRecorded(page: pid, label: "add") { r, me, t, entries in
            let op = try r.add(.stroke(stroke), by: me, wallTime: t, above: above, below: below)
            entries = [UndoEntry(page: pid, op: op.id, inverse: .erase([op.id]))]
            return [op]
        }[0].id
    }

    /// Adds an empty page with a given id (ids are random otherwise).
    public func addPage(id pid: PageID, _ placement: PagePlacement, canvas: CanvasSize = .a4) async throws {
        _ = try await commitDocument(.addPage(pid, position: try position(placement), canvas: canvas))
    }
}
