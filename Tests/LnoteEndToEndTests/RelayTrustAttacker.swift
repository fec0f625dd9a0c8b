import Foundation

/// Bodies built as an attacker would build them: byte by byte from `Protocol/`
/// (operation-log.md §2–§3, page-snapshot.md §2, sync-protocol.md §3), with a CRC-32C of
/// its own, never through lnote's encoders. Each builder says which table it follows.
enum Attacker {
    /// CRC-32C (Castagnoli): reflected polynomial 0x82F63B78, init and final XOR 0xFFFFFFFF
    /// (operation-log.md §2). Bit by bit: slow and obviously right.
    static func crc32c(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for b in bytes {
            crc ^= UInt32(b)
            for _ in 0..<8 { crc = crc & 1 != 0 ? (crc >> 1) ^ 0x82F6_3B78 : crc >> 1 }
        }
        return crc ^ 0xFFFF_FFFF
    }

    /// Unsigned LEB128.
    static func varint(_ v: UInt64) -> [UInt8] {
        var v = v, out: [UInt8] = []
        while v >= 0x80 {
            out.append(UInt8(v & 0x7F) | 0x80)
            v >>= 7
        }
        return out + [UInt8(v)]
    }

    /// Zigzag, then LEB128.
    static func svarint(_ v: Int64) -> [UInt8] { varint(UInt64(bitPattern: (v << 1) ^ (v >> 63))) }

    static func u32(_ v: UInt32) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: v >> (8 * $0)) } }
    static func u64(_ v: UInt64) -> [UInt8] { (0..<8).map { UInt8(truncatingIfNeeded: v >> (8 * $0)) } }

    /// UUID bytes in RFC 4122 order.
    static func bytes(_ u: UUID) -> [UInt8] { withUnsafeBytes(of: u.uuid) { Array($0) } }

    /// A frame: u32 length (type + payload), u32 CRC-32C of the length field then type and
    /// payload, type, payload (operation-log.md §2, [LOG-10]).
    static func frame(type: UInt8, payload: [UInt8]) -> [UInt8] {
        let length = u32(UInt32(1 + payload.count))
        return length + u32(crc32c(length + [type] + payload)) + [type] + payload
    }

    /// The payload header (operation-log.md §3): replica u64, counter, Lamport timestamp,
    /// wall time, context without the author (`VectorClock`, page-snapshot.md §2.3).
    static func header(replica: UInt64, counter: UInt64, lamport: UInt64, wall: Int64 = 1_700_000_000_000,
                       context: [(UInt64, UInt64)] = []) -> [UInt8] {
        var out = u64(replica) + varint(counter) + varint(lamport) + svarint(wall) + varint(UInt64(context.count))
        for (r, c) in context { out += u64(r) + varint(c) }
        return out
    }

    /// A z key with no path (page-snapshot.md §2.4): the layer, `k` = 0, an empty fraction.
    static func zkey(layer: Int64) -> [UInt8] { svarint(layer) + [0, 0] }

    /// Stroke content (page-snapshot.md §2.7, §3.1): kind 1, pen, black, width 2 pt, one point.
    static func stroke(x: Int64, y: Int64) -> [UInt8] {
        [1, 0] + u32(0x0000_00FF) + svarint(20) + varint(1) + svarint(x) + svarint(y) + varint(500) + svarint(10) + varint(0)
    }

    /// `add` (0x01) of a one-point stroke at z `layer`.
    static func add(replica: UInt64, counter: UInt64, lamport: UInt64, layer: Int64, context: [(UInt64, UInt64)] = []) -> [UInt8] {
        frame(type: 0x01, payload: header(replica: replica, counter: counter, lamport: lamport, context: context)
                + zkey(layer: layer) + stroke(x: Int64(counter) * 100, y: 200))
    }

    /// `createDocument` (0x20).
    static func createDocument(replica: UInt64, counter: UInt64, lamport: UInt64, title: String) -> [UInt8] {
        frame(type: 0x20, payload: header(replica: replica, counter: counter, lamport: lamport)
                + varint(UInt64(title.utf8.count)) + Array(title.utf8))
    }

    /// `addPage` (0x22): page UUID, position, A4 canvas.
    static func addPage(replica: UInt64, counter: UInt64, lamport: UInt64, page: UUID, layer: Int64) -> [UInt8] {
        frame(type: 0x22, payload: header(replica: replica, counter: counter, lamport: lamport)
                + bytes(page) + zkey(layer: layer) + svarint(5953) + svarint(8419))
    }

    /// One log's frames in a push: the document, and the page (nil: the document log).
    struct Batch {
        var document: UUID
        var page: UUID?
        var frames: [[UInt8]]
    }

    /// A `SyncRequest` (sync-protocol.md §3) with no `have`: magic, version, replica,
    /// epoch, cursor, flags 0, then `Batches`. Returns the body and, per batch, the body
    /// offset of each frame.
    static func request(replica: UInt64, epoch: UInt64 = 0, cursor: UInt64 = 0,
                        push: [Batch]) -> (body: [UInt8], offsets: [[Int]]) {
        var body = Array("LNSQ".utf8) + [1] + u64(replica) + u64(epoch) + u64(cursor) + [0] + varint(UInt64(push.count))
        var offsets: [[Int]] = []
        for b in push {
            body += bytes(b.document) + (b.page.map { [1] + bytes($0) } ?? [0])
            let all = b.frames.flatMap { $0 }
            body += varint(UInt64(b.frames.count)) + varint(UInt64(all.count))
            var at = body.count, mine: [Int] = []
            for f in b.frames {
                mine.append(at)
                at += f.count
            }
            offsets.append(mine)
            body += all
        }
        return (body, offsets)
    }

    /// Replica ids print as 16 hex digits, operation ids as `<replica>.<counter>` ([SHR-3]).
    static func opID(_ replica: UInt64, _ counter: UInt64) -> String {
        let hex = String(replica, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex + ".\(counter)"
    }
}
