import LnoteModel
import LnoteReplication

/// A page of an open document: a small handle whose calls go to the document.
///
/// Every edit is durable in the page's log when the call returns ([PKG-34]).
public struct Page: Sendable {
    public let document: Document
    public let id: PageID

    /// The materialized state: live elements bottom to top, tombstones, clock.
    public func state() async throws -> PageState { try await document.pageState(id) }
    /// Live elements, bottom to top.
    public func elements() async throws -> [ElementRecord] { try await document.elements(id) }
    /// The ids of the live elements, bottom to top, without a point decoded ([SNAP-38]).
    public func elementIDs() async throws -> [ElementID] { try await document.elementIDs(id) }
    /// One live element with its points (its chunk of the snapshot decoded); nil when not live.
    public func element(_ element: ElementID) async throws -> ElementRecord? { try await document.element(element, on: id) }

    @discardableResult
    public func addStroke(_ stroke: Stroke) async throws -> ElementID { try await document.addStroke(stroke, to: id) }
    @discardableResult
    public func addStrokes(_ strokes: [Stroke]) async throws -> [ElementID] { try await document.addStrokes(strokes, to: id) }
    /// Writes the asset first ([PKG-14]), then adds the image on top.
    @discardableResult
    public func addImage(_ bytes: [UInt8], frame: QRect, rotation: Int32 = 0) async throws -> ElementID {
        try await document.addImage(bytes, frame: frame, rotation: rotation, to: id)
    }
    public func erase(_ ids: [ElementID]) async throws { try await document.erase(ids, on: id) }
    public func eraseRange(_ element: ElementID, _ ranges: [PointRange]) async throws {
        try await document.eraseRange(element, ranges, on: id)
    }
    public func move(_ ids: [ElementID], dx: Int32, dy: Int32) async throws { try await document.move(ids, dx: dx, dy: dy, on: id) }
    public func bringToFront(_ ids: [ElementID]) async throws { try await document.bringToFront(ids, on: id) }
    public func sendToBack(_ ids: [ElementID]) async throws { try await document.sendToBack(ids, on: id) }
    public func reorder(_ zs: [ElementZ]) async throws { try await document.reorder(zs, on: id) }
    public func conflicts() async throws -> [Conflict] { try await document.conflicts(page: id) }
    /// Writes the page's snapshot if it changed and releases its log.
    public func close() async throws { try await document.closePage(id) }
}

extension Document {
    /// Opens a page ([PKG-42]): reads its one snapshot and replays its log tail now, so that
    /// damage to their structure and CRCs is found and reported here (see
    /// `recoveryReports`); the points are checked when first used ([SNAP-38], [LOG-27]).
    public func openPage(_ pid: PageID) throws -> Page {
        try checkUsable()
        _ = try loadedPageDeferred(pid)
        return Page(document: self, id: pid)
    }
}
