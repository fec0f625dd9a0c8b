import LnoteModel
import LnoteReplication

extension Document {
    /// A page as it was at a moment of its history (`pageState(_:at:)`, [MERGE-80] –
    /// [MERGE-82]), with the page's current canvas and the assets its live images show then
    /// (those the package holds; a missing one is absent and drawn as the placeholder).
    /// Writes nothing.
    /// - Throws: what `pageState(_:at:)` throws; `notFound` when the document has no such
    ///   page; what reading an asset throws (a missing asset is not an error).
    public func renderable(_ pid: PageID, at point: HistoryPoint) async throws -> RenderablePage {
        try checkUsable()
        guard let record = doc.page(pid) else {
            throw LnoteError(.notFound, "no page \(pid) in document \(id)", path: paths.root)
        }
        let state = try await pageState(pid, at: point)
        var assets: [AssetID: [UInt8]] = [:]
        for case .image(let img) in state.elements.map(\.content) where assets[img.asset] == nil {
            guard let bytes = try Document.drawableAsset(paths.asset(img.asset), io: io) else { continue }
            assets[img.asset] = bytes
        }
        return RenderablePage(state: state, canvas: record.canvas.value, assets: assets)
    }

    /// The clock the winning delete of a deleted page had seen of its log ([MERGE-63]), nil
    /// for a page not deleted (or deleted before that clock was kept).
    public func deletedSeen(_ pid: PageID) throws -> VectorClock? {
        try checkUsable()
        try refreshDocument()
        guard let p = doc.state.pages.first(where: { $0.id == pid }), p.deleted.value else { return nil }
        return p.deletedSeen
    }
}
