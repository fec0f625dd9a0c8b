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
