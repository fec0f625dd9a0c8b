import LnoteModel
import LnoteReplication

extension LogScanner {
    /// How `scanListing` of a log tail differs from `scan` of the same bytes, or nil when it
    /// does not ([LOG-28], [LOG-27]): the oracle that the `log` fuzz target and `PlainRunTests`
    /// hold the listing scan to, on any bytes (a restored backup's log is read this way).
    ///
    /// They agree when the listing's run and rest are the scan's frames in order, with the
    /// same damage, torn tail, anchors and end; when its run holds the adds that
    /// `Document.plainAdds` reads from the scan's leading frames (up to the first damage),
    /// field for field; and when each add's points, decoded from the tail's one source, are
    /// those its frame's own source gives, or fail there with the same error code and offset.
    package static func listingDisagreement(_ tail: [UInt8], base: UInt64, anchor: LogAnchor?, path: String) -> String? {
        let plain = scan(tail, base: base, anchor: anchor)
        let listed = scanListing(tail, base: base, anchor: anchor, path: path, expecting: 16)
        let run = listed.leading
        guard listed.frameCount == plain.frames.count else {
            return "\(listed.frameCount) frames listed, \(plain.frames.count) scanned"
        }
        guard run.loggedFrames(0..<run.count) + listed.frames == plain.frames else { return "the frames differ" }
        guard listed.damage == plain.damage else { return "the damage differs: \(listed.damage) against \(plain.damage)" }
        guard listed.tornTail == plain.tornTail, listed.tornTailReason == plain.tornTailReason,
              listed.tailIsCompleteBadFrame == plain.tailIsCompleteBadFrame else { return "the torn tail differs" }
        guard listed.goodEnd == plain.goodEnd, listed.anchorEnds == plain.anchorEnds else { return "the end or the anchors differ" }
        let leading = Array(plain.frames.prefix(plain.damage.first?.frameIndex ?? plain.frames.count))
        let expected = Document.plainAdds(leading, path: path)
        guard run.count == expected.count else { return "a run of \(run.count) adds, \(expected.count) plain adds in the frames" }
        for (a, b) in zip(run.adds, expected) {
            guard a.id == b.id, a.wallTime == b.wallTime, a.stroke.style == b.stroke.style,
                  a.stroke.pointCount == b.stroke.pointCount else { return "add \(b.id) differs" }
            // One add at a time: which of several damaged strokes a resolve names first is
            // not what is compared.
            var fromTail = [ElementRecord(plainAdd: a.id, wallTime: a.wallTime, stroke: a.stroke, z: a.z)]
            var fromFrame = [ElementRecord(plainAdd: b.id, wallTime: b.wallTime, stroke: b.stroke, z: b.z)]
            switch (Result { try DeferredPoints.resolve(&fromTail) }, Result { try DeferredPoints.resolve(&fromFrame) }) {
            case (.success, .success):
                guard fromTail == fromFrame else { return "add \(b.id): its points differ" }
            case (.failure(let x as LnoteError), .failure(let y as LnoteError)):
                guard x.code == y.code, x.offset == y.offset, x.path == y.path else {
                    return "add \(b.id): \(x) from the tail, \(y) from its frame"
                }
            case (let x, let y):
                return "add \(b.id): \(x) from the tail, \(y) from its frame"
            }
        }
        return nil
    }
}
