import Foundation
import LnoteModel
import LnoteRender

/// What a stored thumbnail depicts ([PKG-103]): the SHA-256 of the page's id, its canvas and
/// the clock of the page state drawn. A thumbnail is fresh when the stamp in its `COM`
/// segment equals the stamp of the page's current state; stale otherwise, and so is a
/// picture without a stamp (an old `.png`, a JPEG written by something else).
///
/// The merge is deterministic and a page's log has no gaps per replica, so two states of a
/// page with one clock are the same state: the clock names the picture's content without
/// hashing the elements (cheap to compute at every save).
public struct ThumbnailStamp: Hashable, Sendable, CustomStringConvertible {
    /// 32 bytes.
    public let digest: [UInt8]

    /// The `COM` payload's first bytes: `lnote-thumbnail 2 ` (the stamp's format, 2). Format 1
    /// was written before pictures were drawn by cairo with their images: such a stamp is not
    /// read, so those pictures are stale and drawn again.
    public static let prefix = Array("lnote-thumbnail 2 ".utf8)
    /// The `COM` payload's size: the prefix and 64 lowercase hex digits.
    public static let commentSize = 18 + 64

    /// The stamp of `clock`'s state of page `page` drawn on `canvas` ([PKG-103]): SHA-256 of
    /// the page UUID's 16 bytes, the canvas width and height (int32 big-endian each), the
    /// number n of clock entries (uint32 big-endian) and n × (replica uint64 big-endian,
    /// counter uint64 big-endian), ascending by replica id as unsigned 64-bit, zero counters left out.
    public init(page: PageID, clock: VectorClock, canvas: CanvasSize) {
        digest = SHA256.hash(ThumbnailStamp.input(page: page, clock: clock, canvas: canvas))
    }

    init(digest: [UInt8]) {
        self.digest = digest
    }

    /// The bytes hashed (see `init(page:clock:canvas:)`).
    static func input(page: PageID, clock: VectorClock, canvas: CanvasSize) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(28 + 16 * clock.entries.count)
        withUnsafeBytes(of: page.uuid.uuid) { out += $0 }
        func be<T: FixedWidthInteger>(_ v: T) { withUnsafeBytes(of: v.bigEndian) { out += $0 } }
        be(canvas.width)
        be(canvas.height)
        be(UInt32(clock.entries.count))
        for e in clock.entries {
            be(e.replica.rawValue)
            be(e.counter)
        }
        return out
    }

    /// The `COM` payload holding this stamp.
    public var comment: [UInt8] { ThumbnailStamp.prefix + Array(hexString(digest).utf8) }

    /// The stamp a `COM` payload holds, or nil when it is not one (another prefix or
    /// format, a size other than 82 bytes, a digit that is not lowercase hex).
    public init?(comment: [UInt8]) {
        guard comment.count == ThumbnailStamp.commentSize, comment.starts(with: ThumbnailStamp.prefix) else { return nil }
        var d: [UInt8] = []
        d.reserveCapacity(32)
        var i = ThumbnailStamp.prefix.count
        func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case 0x30...0x39: c - 0x30
            case 0x61...0x66: c - 0x61 + 10
            default: nil
            }
        }
        while i < comment.count {
            guard let hi = nibble(comment[i]), let lo = nibble(comment[i + 1]) else { return nil }
            d.append(hi << 4 | lo)
            i += 2
        }
        digest = d
    }

    /// The stamp of a stored thumbnail: the first `COM` segment of its header that holds one.
    /// nil when it has none, or the bytes are not a JPEG header (a `.png`, damage).
    /// The walk stops at that segment: `bytes` may be a prefix of the file
    /// (`stampPrefixSize`), and no other payload is copied.
    public static func read(fromJPEG bytes: [UInt8]) -> ThumbnailStamp? {
        var stamp: ThumbnailStamp?
        _ = try? JPEGEncoder.firstComment(in: bytes) { c in
            guard c.count == commentSize else { return false }
            stamp = ThumbnailStamp(comment: Array(c))
            return stamp != nil
        }
        return stamp
    }

    /// How much of a stored thumbnail is read to find its stamp: lnote's sits about 20 bytes
    /// in; a stamp further than this is not looked for (the picture is then stale).
    public static let stampPrefixSize = 64 << 10
    /// The largest stored thumbnail handed to a caller: a larger file (a hostile or damaged
    /// folder) is treated as missing and drawn again, never read whole.
    public static let maxStoredSize = 16 << 20

    public var description: String { hexString(digest) }
}
