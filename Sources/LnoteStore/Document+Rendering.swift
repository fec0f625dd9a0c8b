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
            guard let bytes = try Document.drawableAsset(paths.asset(img.asset), io: io) else { continue }
            assets[img.asset] = bytes
        }
        return RenderablePage(state: state, canvas: record.canvas.value, assets: assets)
    }
}

extension Document {
    /// The largest asset file a picture reads (64 MiB): beyond it, the image is drawn as the
    /// renderer's placeholder, as an undecodable one is. A file's size is read before its
    /// bytes: a sparse file claiming a terabyte (a damaged or hostile folder) must not be
    /// allocated, on the renderer's thread or anywhere else.
    public static let maxDrawnAssetBytes: UInt64 = 64 << 20

    /// The bytes of an asset file for drawing, or nil when it is absent or larger than
    /// `maxDrawnAssetBytes` (both drawn as the placeholder).
    /// - Throws: what reading it throws (EIO, EMFILE, ...: a later try may succeed).
    static func drawableAsset(_ path: String, io: Syscalls) throws -> [UInt8]? {
        guard let st = try io.stat(path) else { return nil }
        // (Not a regular file: the read below fails, as an unreadable asset.)
        if st.isRegular && st.size > maxDrawnAssetBytes { return nil }
        return try DurableFile.readIfExists(path, io: io)
    }
}
