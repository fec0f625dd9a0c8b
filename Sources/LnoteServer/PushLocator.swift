import Foundation
import LnoteModel
import LnoteReplication
import LnoteSync

/// Finds, in a sync request body, the pushed operation an endpoint refused, so that the
/// 400 answer names it with its byte offset in the body ([SYNC-30], §6: "naming the
/// operation, the rule and the byte offset").
///
/// Endpoints decode the push from `LogBatch`es, which no longer know where their frames
/// were in the body; an error they throw is relative to the frame. On that error path
/// only, the body is walked again (`Protocol/sync-protocol.md` §3: header, `Clocks`,
/// `Digests`, `HashRanges`, then `Batches`) and each frame decoded with its absolute
/// offset, in order; the first refusal is the answer. The body already decoded once, so
/// the walk cannot fail where the codec did not; if it finds nothing, the endpoint's own
/// error is kept.
enum PushLocator {
    static let path = "request body"

    /// `error`, or the same refusal located in `body`.
    static func locate(_ error: LnoteError, in body: [UInt8]) -> LnoteError {
        (try? firstRefusal(in: body)) ?? error
    }

    /// The first pushed operation that does not decode, breaks the validator, or is not in
    /// its kind of log, as an error naming the log, the frame and its absolute offset; nil
    /// when every one is fine.
    static func firstRefusal(in body: [UInt8]) throws -> LnoteError? {
        var r = ByteReader(body, path: path)
        _ = try r.bytes(4 + 1 + 8 + 8 + 8, "header")
        let flags = try r.u8("flags")
        if flags & 1 != 0 {
            for _ in 0..<(try r.count("clock count", max: r.remaining)) {
                _ = try log(&r)
                _ = try ElementCodec.decodeClock(&r)
            }
        }
        if flags & 2 != 0 {
            for _ in 0..<(try r.count("digest log count", max: r.remaining)) {
                _ = try log(&r)
                for _ in 0..<(try r.count("digest count", max: r.remaining)) {
                    _ = try r.u64("digest replica")
                    _ = try r.varint("digest counter")
                    _ = try r.skip(16, "digest")
                }
            }
        }
        if flags & 4 != 0 {
            for _ in 0..<(try r.count("range count", max: r.remaining)) {
                _ = try log(&r)
                _ = try r.u64("range replica")
                _ = try r.varint("range start")
                _ = try r.varint("range end")
            }
        }
        for _ in 0..<(try r.count("log count", max: r.remaining)) {
            let log = try log(&r)
            _ = try r.varint("frame count")
            let length = try r.count("frames length", max: r.remaining)
            let range = try r.skip(length, "frames")
            let frames = Array(body[range])
            var position = 0
            var index = 0
            while case .frame(let frame, let span) = Frame.scan(frames, at: position) {
                let at = range.lowerBound + position
                do {
                    let op = try OperationCodec.decode(frame, base: at + Frame.headerSize + 1, path: path)
                    guard op.body.isPageOperation == (log.page != nil) else {
                        return LnoteError(.invalidArgument, "\(op.body.name) \(op.id) does not belong in log \(log)",
                                          path: path, offset: at, index: index)
                    }
                } catch var e as LnoteError {
                    e.message += " (log \(log), frame \(index) of its batch, at offset \(at))"
                    e.index = index
                    return e
                }
                position = span.upperBound
                index += 1
            }
        }
        return nil
    }

    private static func log(_ r: inout ByteReader) throws -> LogRef {
        let document = DocumentID(UUID(bytes: try r.bytes(16, "document id"))!)
        switch try r.u8("log kind") {
        case 0: return LogRef(document: document)
        default: return LogRef(document: document, page: PageID(UUID(bytes: try r.bytes(16, "page id"))!))
        }
    }
}
