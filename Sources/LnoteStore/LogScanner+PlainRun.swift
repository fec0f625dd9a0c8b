import LnoteModel
import LnoteReplication

/// The plain adds at the start of a log tail, read where they lie in the tail's bytes
/// ([LOG-28]): no frame is copied out or expanded, and their points are deferred to one
/// source for the whole tail ([LOG-27]). What a listing open applies straight from the bytes.
struct PlainRun: Sendable {
    /// The adds, in file order.
    var adds: [PlainAddStroke] = []
    /// Each add's frame: its file offset and its size in the file (header included).
    var spans: [(offset: UInt64, size: Int)] = []
    /// The tail's bytes (shared with `source`, not copied) and the file offset of byte 0.
    var bytes: [UInt8] = []
    var base: UInt64 = 0
    /// The anchor the tail was read under ([PKG-110]).
    var anchor: LogAnchor?
    /// Where the adds' points are; nil when there are none.
    var source: DeferredPoints?

    var count: Int { spans.count }

    /// The frames of adds `range` as a scan lists them (`LogScanner.loggedFrame`): for those
    /// a replica did not apply from the bytes, which a replay then decodes as operations.
    func loggedFrames(_ range: Range<Int>) -> [LoggedFrame] {
        range.map { i in
            let at = Int(spans[i].offset - base)
            return LogScanner.loggedFrame(bytes, at..<(at + spans[i].size), type: bytes[at + Frame.headerSize],
                                          offset: spans[i].offset, anchor: anchor)
        }
    }
}

extension LogScanner {
    /// `scan` as a listing open needs it ([LOG-28]): first the run of plain adds at the start
    /// of `bytes` (valid frames, each an `addStroke` that `OperationCodec.plainAddStroke`
    /// accepts, or a log-form frame read under `anchor` as the `addStroke3` it stands for;
    /// the anchor and its copies passed over as `scan` passes over them), read where they lie
    /// into `leading`; then `scan` from the first frame that is not one, whose `frames` hold
    /// the rest. What it finds is what `scan` finds, frame for frame: `frameCount` frames in
    /// file order, the same damage (indexes counted from the tail's first frame), the same
    /// torn tail, anchors and end.
    /// `expecting` and `adds`: how many frames, and how many that say they add, the caller
    /// counted from their lengths and types (room reserved: for the adds once the first is read).
    static func scanListing(_ bytes: [UInt8], base: UInt64, anchor: LogAnchor?, path: String?, expecting: Int = 0,
                            adds: Int = 0) -> LogScan {
        var run = PlainRun()
        let chain = anchor?.chainSeed
        let source = DeferredPoints(tail: bytes, base: Int(base), path: path)
        var streams: [DeferredPoints.FrameStream] = []
        var anchorEnds: [UInt64] = []
        var pos = 0
        while case .valid(let r) = Frame.check(bytes, at: pos, chain: chain) {
            let type = bytes[pos + Frame.headerSize]
            if isAnchor(bytes, r, type: type, anchor) {
                anchorEnds.append(base + UInt64(r.upperBound))
            } else {
                if streams.isEmpty {
                    run.adds.reserveCapacity(adds)
                    run.spans.reserveCapacity(adds)
                    streams.reserveCapacity(adds)
                }
                guard OperationCodec.plainAddStroke(bytes, payload: (pos + Frame.headerSize + 1)..<r.upperBound, type: type,
                                                    anchor: anchor, base: Int(base), path: path, tail: source,
                                                    into: &run.adds, streams: &streams)
                else { break }
                run.spans.append((base + UInt64(pos), r.count))
            }
            pos = r.upperBound
        }
        var out = scan(bytes, base: base, anchor: anchor, expecting: max(0, expecting - run.count), from: pos)
        out.anchorEnds = anchorEnds + out.anchorEnds
        for i in out.damage.indices { out.damage[i].frameIndex += run.count }
        if !run.adds.isEmpty {
            // Room for adds counted past the run is not kept while the page stays listed.
            source.setStreams(streams.capacity > streams.count * 2 ? Array(streams[...]) : streams)
            run.bytes = bytes
            run.base = base
            run.anchor = anchor
            run.source = source
        }
        out.leading = run
        return out
    }
}
