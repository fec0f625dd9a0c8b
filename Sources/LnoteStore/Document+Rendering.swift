import LnoteModel

/// What drawing one page takes: its current state, its canvas, and the bytes of the image
/// assets it shows (those present in the package).
public struct RenderablePage: Sendable {
    public var state: PageState
    public var canvas: CanvasSize
    /// The assets of the page's live images that the package holds; a missing one is absent
    /// (a renderer draws its placeholder).
    public var assets: [AssetID: [UInt8]]

    /// The asset lookup a renderer takes.
    public func asset(_ id: AssetID) -> [UInt8]? { assets[id] }
}

extension Document {
    /// A page as it is now (deleted pages included), with its canvas and the assets its live
    /// images show. A page with no files yet is empty (nothing is created). Writes nothing.
    /// - Throws: `notFound` when the document has no such page; what reading the page or an
    ///   asset throws (a missing asset is not an error).
    public func renderable(_ pid: PageID) throws -> RenderablePage {
        try checkUsable()
        guard let record = doc.page(pid) else {
            throw LnoteError(.notFound, "no page \(pid) in document \(id)", path: paths.root)
        }
        let hasContent = try pages[pid] != nil || pageHasFiles(pid)
        let state = hasContent ? try pageState(pid) : PageState(page: pid)
        var assets: [AssetID: [UInt8]] = [:]
        for case .image(let img) in state.elements.map(\.content) where assets[img.asset] == nil {
            guard try hasAsset(img.asset) else { continue }
            assets[img.asset] = try assetBytes(img.asset)
        }
        return RenderablePage(state: state, canvas: record.canvas.value, assets: assets)
    }
}
