import LnoteModel
import LnoteRender

// Thumbnails ([PKG-17]): `thumbnails/<page>.png`, derived from the page snapshot and
// rewritten with it. They are a convenience for a library view (the first live page's
// thumbnail doubles as the document's cover), never a source of truth.

extension Document {
    /// Longest side of a stored thumbnail, in pixels.
    public static let thumbnailSide = 256

    /// Where a page's thumbnail lives.
    public nonisolated func thumbnailPath(_ pid: PageID) -> String {
        "\(paths.thumbnails)/\(pid).png"
    }

    /// Writes `thumbnails/<page>.png` from `state`, durably (temp file, fsync, rename).
    ///
    /// Called after a page snapshot is written. A thumbnail is derived: failing to write one
    /// must never fail the save, so this swallows every error (the next snapshot of the page
    /// writes it again, and a missing or stale thumbnail is not a problem `Verify` reports).
    func writeThumbnailAfterSnapshot(_ state: PageState) {
        let canvas = doc.page(state.page)?.canvas.value ?? .a4
        let png = ThumbnailRenderer.render(state, canvas: canvas, maxSide: Document.thumbnailSide).png()
        do {
            try DurableFile.replace(thumbnailPath(state.page), with: png, io: io)
        } catch {
            // Derived data: skipped on purpose (see above).
        }
    }
}

extension Document {
    /// A page's thumbnail as a library shows it ([PKG-17], [PKG-97]): the stored
    /// `thumbnails/<page>.png` when there is one, else the page rendered now from its current
    /// state and stored (by durable replace, best-effort: a failure to store it still returns
    /// the picture). A page installed by a first sync has none until it is asked for here or
    /// its next snapshot is written: absent means "not rendered yet", never an empty page.
    /// - Throws: `notFound` when the document has no such page; what reading the page throws.
    public func thumbnail(page pid: PageID) throws -> [UInt8] {
        try checkUsable()
        if let stored = try? DurableFile.readIfExists(thumbnailPath(pid), io: io), !stored.isEmpty { return stored }
        let png = try renderThumbnail(pid).png()
        do {
            // Under the document lock, as every write in the package ([PKG-92]).
            try locked { try DurableFile.replace(thumbnailPath(pid), with: png, io: io) }
        } catch {
            // Derived data ([PKG-17]): the picture is returned all the same.
        }
        return png
    }
}

extension Document {
    /// Renders a page's current state (deleted pages included) as a thumbnail whose longer
    /// side is `maxSide` pixels, in the page's canvas aspect ratio. Writes nothing.
    /// - Throws: `notFound` when the document has no such page.
    public func renderThumbnail(_ pid: PageID, maxSide: Int = Document.thumbnailSide) throws -> Thumbnail {
        try checkUsable()
        guard let record = doc.page(pid) else {
            throw LnoteError(.notFound, "no page \(pid) in document \(id)", path: paths.root)
        }
        // A page with no files yet is empty: render it without creating its files.
        let hasContent = try pages[pid] != nil || pageHasFiles(pid)
        let state = hasContent ? try pageState(pid) : PageState(page: pid)
        return ThumbnailRenderer.render(state, canvas: record.canvas.value, maxSide: maxSide)
    }
}
