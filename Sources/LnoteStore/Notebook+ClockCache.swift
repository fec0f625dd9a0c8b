import Foundation
import LnoteModel
import LnoteReplication

/// Remembers each log's clock (what its log holds, [PKG-49]) and, once computed, its chain
/// digests ([SYNC-52]), together with the identity of the files they were computed from (size,
/// modification time, inode of the log, of the snapshot or document.json, and of its
/// missing-operations file), so a sync of a large notebook where few documents changed opens
/// only those documents.
///
/// `.lnote/clocks.cache` is a cache: it is checked (CRC-32C) and ignored when damaged or
/// stale, and rewritten durably after a computation that changed it.
struct ClockCache: Equatable {
    struct Key: Hashable, Comparable {
        var document: DocumentID
        var page: PageID?
        static func < (l: Key, r: Key) -> Bool {
            if l.document != r.document { return l.document < r.document }
            switch (l.page, r.page) {
            case (nil, nil): return false
            case (nil, _): return true
            case (_, nil): return false
            case (let a?, let b?): return a < b
            }
        }
    }
    struct Entry: Equatable {
        var files: [UInt64]
        var clock: VectorClock
        /// The chain digests at `clock`; nil when not computed.
        var digests: [ChainDigest]? = nil
    }
    var entries: [Key: Entry] = [:]

    static let magic: [UInt8] = Array("LNCC".utf8)
    /// 2 since clocks are what the logs hold and digests are kept (a version-1 file, whose
    /// clocks were the applied ones, reads as empty).
    static let version: UInt8 = 2

    func encoded() -> [UInt8] {
        var w = ByteWriter()
        w.append(Self.magic)
        w.u8(Self.version)
        w.varint(UInt64(entries.count))
        for key in entries.keys.sorted() {
            let e = entries[key]!
            w.append(key.document.uuid.bytes)
            if let p = key.page { w.u8(1); w.append(p.uuid.bytes) } else { w.u8(0) }
            w.varint(UInt64(e.files.count))
            for f in e.files { w.u64(f) }
            ElementCodec.encode(e.clock, into: &w)
            if let digests = e.digests {
                w.u8(1)
                w.varint(UInt64(digests.count))
                for d in digests {
                    w.u64(d.replica.rawValue)
                    w.varint(d.counter)
                    w.append(d.digest)
                }
            } else {
                w.u8(0)
            }
        }
        w.u32(CRC32C.checksum(w.bytes))
        return w.bytes
    }

    /// A damaged or foreign file gives an empty cache.
    static func decode(_ bytes: [UInt8]) -> ClockCache {
        guard bytes.count >= 9 else { return ClockCache() }
        var tail = ByteReader(Array(bytes.suffix(4)))
        guard let crc = try? tail.u32(), crc == CRC32C.checksum(bytes, 0..<(bytes.count - 4)) else { return ClockCache() }
        var r = ByteReader(bytes, range: 0..<(bytes.count - 4))
        var cache = ClockCache()
        do {
            guard try r.bytes(4) == magic, try r.u8() == version else { return ClockCache() }
            let n = try r.count("entries", max: r.remaining / 19)
            for _ in 0..<n {
                let d = DocumentID(UUID(bytes: try r.bytes(16))!)
                let page: PageID? = try r.u8() == 1 ? PageID(UUID(bytes: try r.bytes(16))!) : nil
                let k = try r.count("files", max: 16)
                var files: [UInt64] = []
                for _ in 0..<k { files.append(try r.u64()) }
                let clock = try ElementCodec.decodeClock(&r)
                var digests: [ChainDigest]?
                switch try r.u8() {
                case 0: break
                case 1:
                    let m = try r.count("digests", max: r.remaining / 25)
                    var list: [ChainDigest] = []
                    for _ in 0..<m {
                        list.append(ChainDigest(replica: ReplicaID(try r.u64()), counter: try r.varint(), digest: try r.bytes(16)))
                    }
                    digests = list
                default: return ClockCache()
                }
                cache.entries[Key(document: d, page: page)] = Entry(files: files, clock: clock, digests: digests)
            }
            try r.expectEnd("clock cache")
        } catch { return ClockCache() }
        return cache
    }
}

extension Notebook {
    var clockCachePath: String { DurableFile.join(DurableFile.join(path, ".lnote"), "clocks.cache") }

    /// Size, modification time and inode of each file, 0s for a missing one.
    func fileIdentity(_ paths: [String]) throws -> [UInt64] {
        var out: [UInt64] = []
        for p in paths {
            if let st = try io.stat(p) {
                out += [st.size, UInt64(bitPattern: st.modifiedSeconds), UInt64(bitPattern: st.modifiedNanoseconds), st.inode]
            } else {
                out += [0, 0, 0, 0]
            }
        }
        return out
    }

    func loadClockCache() -> ClockCache {
        guard let bytes = try? DurableFile.readIfExists(clockCachePath, io: io) else { return ClockCache() }
        return ClockCache.decode(bytes)
    }

    func saveClockCache(_ cache: ClockCache) {
        // A cache that cannot be written only makes the next sync slower. Under the notebook
        // lock ([PKG-83]); two processes may each write theirs: every entry is checked against
        // the files it was computed from before it is used ([PKG-64]).
        try? notebookLock.withLock { try DurableFile.replace(clockCachePath, with: cache.encoded(), io: io) }
    }
}
