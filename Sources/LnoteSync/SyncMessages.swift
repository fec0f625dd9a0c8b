import Foundation
import LnoteModel
import LnoteReplication

/// Names one operation log in a notebook: a document's log or one of its pages' logs.
public struct LogRef: Hashable, Sendable, Comparable, CustomStringConvertible {
    public var document: DocumentID
    /// nil: the document log.
    public var page: PageID?
    public init(document: DocumentID, page: PageID? = nil) {
        self.document = document
        self.page = page
    }
    public static func < (l: LogRef, r: LogRef) -> Bool {
        if l.document != r.document { return l.document < r.document }
        switch (l.page, r.page) {
        case (nil, nil): return false
        case (nil, _): return true
        case (_, nil): return false
        case (let a?, let b?): return a < b
        }
    }
    public var description: String { page.map { "\(document)/\($0)" } ?? "\(document)" }
}

/// Operations of one log, as frames (the journal's encoding, CRC-checked on receipt).
public struct LogBatch: Sendable, Equatable {
    public var log: LogRef
    public var frames: [Frame]
    public init(log: LogRef, frames: [Frame]) {
        self.log = log
        self.frames = frames
    }
    public init(log: LogRef, ops: [Op]) {
        self.init(log: log, frames: ops.map(OperationCodec.frame))
    }
    /// Decodes every frame; errors name the log and the frame index.
    public func ops(path: String? = nil) throws -> [Op] {
        try frames.indices.map { try op(at: $0, path: path) }
    }
    /// Decodes frame `i`; errors name the log and the frame index.
    public func op(at i: Int, path: String? = nil) throws -> Op {
        do { return try OperationCodec.decode(frames[i], path: path) } catch var e as LnoteError {
            e.index = i
            e.message += " (log \(log))"
            throw e
        }
    }
    public var encodedSize: Int { frames.reduce(0) { $0 + $1.encodedSize } }
}

/// A log and the clock one side holds of it.
public struct LogClock: Sendable, Equatable {
    public var log: LogRef
    public var clock: VectorClock
    public init(log: LogRef, clock: VectorClock) {
        self.log = log
        self.clock = clock
    }
}

/// The chain digests ([SYNC-52]) one side holds of one log: for each replica, the counter
/// its chain reaches and the chain's value there.
public struct LogDigests: Sendable, Equatable {
    /// A replica's counter and chain value there (the store's type: one definition).
    public typealias Entry = ChainDigest
    public var log: LogRef
    /// Sorted by replica.
    public var entries: [Entry]
    public init(log: LogRef, entries: [Entry]) {
        self.log = log
        self.entries = entries
    }
}

/// A range of one replica's counters in one log ([SYNC-53]): asked for, or answered with
/// the content hashes of the operations held there.
public struct HashRange: Sendable, Equatable {
    public var log: LogRef
    public var replica: ReplicaID
    /// The first counter.
    public var from: UInt64
    /// Asking: the last counter wanted. Answering: see `hashes`.
    public var to: UInt64
    /// Answering: the first 16 bytes of the content hash of each operation `from`, `from + 1`,
    /// … that the server holds, stopping at the first it lacks (or at `to`).
    public var hashes: [[UInt8]]
    public init(log: LogRef, replica: ReplicaID, from: UInt64, to: UInt64, hashes: [[UInt8]] = []) {
        self.log = log
        self.replica = replica
        self.from = from
        self.to = to
        self.hashes = hashes
    }
}

/// A pushed operation whose id the server holds with other content ([SYNC-51]): not stored.
public struct ForkReport: Sendable, Equatable, Hashable {
    public var log: LogRef
    public var id: OpID
    /// The content hash of the operation the server holds under that id (32 bytes).
    public var held: [UInt8]
    public init(log: LogRef, id: OpID, held: [UInt8]) {
        self.log = log
        self.id = id
        self.held = held
    }
}

/// Body of `POST /v1/notebooks/{notebook}/sync` (specified in `Protocol/sync-protocol.md`).
public struct SyncRequest: Sendable, Equatable {
    /// The client's replica id.
    public var replica: ReplicaID
    /// The server epoch the cursor belongs to (0: none).
    public var epoch: UInt64
    /// The server's change cursor from the last sync in that epoch (0: from the start).
    public var cursor: UInt64
    /// When present, the client's clocks of every log it holds; the server then answers with
    /// what those clocks lack (instead of what changed since the cursor) and adds its own clocks.
    public var have: [LogClock]?
    /// With `have`: the client's chain digests of its logs ([SYNC-52]).
    public var digests: [LogDigests]?
    /// Ranges whose content hashes the client asks for ([SYNC-53]).
    public var hashRanges: [HashRange]?
    /// A long poll ([SYNC-70]): the most seconds the server may hold the request while it
    /// has nothing the client lacks (`SyncCodec.waitRange`; servers cap it, lnote's at 60).
    public var wait: UInt32?
    /// Operations the client believes the server lacks.
    public var push: [LogBatch]
    /// Not on the wire: the ids a held request pushed, when a server answers it again after
    /// a change ([SYNC-71]). Its push was stored by the first answer; an answer again leaves
    /// these out of its pull as it would its own push's, without checking and storing the
    /// push anew at each wake (8,000 pushed duplicates cost 86 ms on SQLite, 0.95 s on
    /// PostgreSQL, under the relay's lock, each time the notebook changed).
    public var pushedEarlier: [LogRef: Set<OpID>] = [:]

    /// The ids of `push`'s operations by log (each frame's header: `push` was checked by then).
    public var pushedIDs: [LogRef: Set<OpID>] {
        var out: [LogRef: Set<OpID>] = [:]
        for batch in push where !batch.frames.isEmpty {
            out[batch.log, default: []].formUnion(batch.frames.compactMap { OperationCodec.id(of: $0) })
        }
        return out
    }

    public init(replica: ReplicaID, epoch: UInt64, cursor: UInt64, have: [LogClock]? = nil,
                digests: [LogDigests]? = nil, hashRanges: [HashRange]? = nil, wait: UInt32? = nil,
                push: [LogBatch] = []) {
        self.replica = replica
        self.epoch = epoch
        self.cursor = cursor
        self.have = have
        self.digests = digests
        self.hashRanges = hashRanges
        self.wait = wait
        self.push = push
    }
}

/// Body of the answer to a sync request.
public struct SyncResponse: Sendable, Equatable {
    public var epoch: UInt64
    /// The cursor to send next time.
    public var cursor: UInt64
    /// How many pushed operations were new to the server.
    public var accepted: UInt64
    /// Operations the client lacks.
    public var pull: [LogBatch]
    /// The server's clocks of every log it holds: present when the request carried `have`.
    public var clocks: [LogClock]?
    /// The request's epoch was not the server's (it restarted or lost its change history):
    /// the push was applied but nothing was pulled; the client must send `have` next.
    public var resync: Bool
    /// The server's chain digests of its logs: when the request carried `digests` ([SYNC-52]).
    public var digests: [LogDigests]?
    /// Pushed operations the server holds under the same id with other content ([SYNC-51]).
    public var forks: [ForkReport]
    /// The content hashes asked for by the request's `hashRanges` ([SYNC-53]).
    public var hashes: [HashRange]?

    public init(epoch: UInt64, cursor: UInt64, accepted: UInt64, pull: [LogBatch], clocks: [LogClock]? = nil,
                resync: Bool = false, digests: [LogDigests]? = nil, forks: [ForkReport] = [], hashes: [HashRange]? = nil) {
        self.epoch = epoch
        self.cursor = cursor
        self.accepted = accepted
        self.pull = pull
        self.clocks = clocks
        self.resync = resync
        self.digests = digests
        self.forks = forks
        self.hashes = hashes
    }
}

/// The binary encodings of sync bodies.
public enum SyncCodec {
    public static let requestMagic: [UInt8] = Array("LNSQ".utf8)
    public static let responseMagic: [UInt8] = Array("LNSR".utf8)
    public static let version: UInt8 = 1
    /// Largest body either side accepts by default.
    public static let maxBodySize = 64 << 20
    /// The `wait` a request may carry, in seconds ([SYNC-70]): anything else makes the body
    /// invalid. A server holds a request at most its own cap (lnote's: `maxWait`).
    public static let waitRange: ClosedRange<UInt32> = 1...3600
    /// How long lnote's servers hold a request at most, whatever its `wait` ([SYNC-70]).
    public static let maxWait: UInt32 = 60
    /// Most logs in one body, most frames in one log batch.
    public static let maxLogs = 1 << 20
    public static let maxFramesPerLog = 1 << 22
    /// [SYNC-82] Most asset ids in one `assets/missing` request, and the most bytes of its body.
    public static let maxMissingAssets = 4096
    public static let maxMissingAssetsBody = 1 << 20

    static func encode(_ log: LogRef, into w: inout ByteWriter) {
        w.append(log.document.uuid.bytes)
        if let p = log.page {
            w.u8(1)
            w.append(p.uuid.bytes)
        } else {
            w.u8(0)
        }
    }

    static func decodeLog(_ r: inout ByteReader) throws -> LogRef {
        let d = DocumentID(UUID(bytes: try r.bytes(16, "document id"))!)
        let at = r.offset
        switch try r.u8("log kind") {
        case 0: return LogRef(document: d)
        case 1: return LogRef(document: d, page: PageID(UUID(bytes: try r.bytes(16, "page id"))!))
        case let k: throw r.error(.corrupt, "unknown log kind \(k)", at: at)
        }
    }

    static func encode(_ batches: [LogBatch], into w: inout ByteWriter) {
        w.varint(UInt64(batches.count))
        for b in batches {
            encode(b.log, into: &w)
            var inner = ByteWriter(capacity: b.encodedSize)
            for f in b.frames { f.encode(into: &inner) }
            w.varint(UInt64(b.frames.count))
            w.lengthPrefixed(inner.bytes)
        }
    }

    static func decodeBatches(_ r: inout ByteReader) throws -> [LogBatch] {
        let n = try r.count("log count", max: maxLogs, minSize: 19)
        var out: [LogBatch] = []
        out.reserveCapacity(n)
        for _ in 0..<n {
            let log = try decodeLog(&r)
            let countAt = r.offset
            let count = try r.count("frame count", max: maxFramesPerLog, minSize: 9)
            let len = try r.count("frames length", minSize: 1)
            let base = r.offset
            let bytes = try r.bytes(len, "frames")
            let frames = try Frame.decodeAll(bytes, base: base, path: r.path)
            guard frames.count == count else {
                throw r.error(.corrupt, "log \(log) announces \(count) frames, holds \(frames.count)", at: countAt)
            }
            out.append(LogBatch(log: log, frames: frames))
        }
        return out
    }

    static func encode(_ clocks: [LogClock], into w: inout ByteWriter) {
        w.varint(UInt64(clocks.count))
        for c in clocks {
            encode(c.log, into: &w)
            ElementCodec.encode(c.clock, into: &w)
        }
    }

    static func decodeClocks(_ r: inout ByteReader) throws -> [LogClock] {
        let n = try r.count("clock count", max: maxLogs, minSize: 18)
        var out: [LogClock] = []
        out.reserveCapacity(n)
        for _ in 0..<n {
            let log = try decodeLog(&r)
            out.append(LogClock(log: log, clock: try ElementCodec.decodeClock(&r)))
        }
        return out
    }

    /// Most ranges or fork reports in one body.
    public static let maxRanges = 1 << 16

    static func encode(_ digests: [LogDigests], into w: inout ByteWriter) {
        w.varint(UInt64(digests.count))
        for d in digests {
            encode(d.log, into: &w)
            w.varint(UInt64(d.entries.count))
            for e in d.entries {
                w.u64(e.replica.rawValue)
                w.varint(e.counter)
                w.append(e.digest)
            }
        }
    }

    static func decodeDigests(_ r: inout ByteReader) throws -> [LogDigests] {
        let n = try r.count("digest log count", max: maxLogs, minSize: 18)
        var out: [LogDigests] = []
        out.reserveCapacity(n)
        for _ in 0..<n {
            let log = try decodeLog(&r)
            let m = try r.count("digest count", max: OpValidator.maxClockEntries, minSize: 25)
            var entries: [LogDigests.Entry] = []
            entries.reserveCapacity(m)
            for _ in 0..<m {
                let at = r.offset
                let replica = try r.u64("digest replica")
                guard replica != 0, entries.last.map({ $0.replica.rawValue < replica }) ?? true else {
                    throw r.error(.corrupt, "digest entries not strictly increasing by replica, or zero", at: at)
                }
                let counterAt = r.offset
                let counter = try r.varint("digest counter")
                guard counter != 0 else { throw r.error(.corrupt, "zero counter in a digest entry", at: counterAt) }
                entries.append(LogDigests.Entry(replica: ReplicaID(replica), counter: counter, digest: try r.bytes(16, "digest")))
            }
            out.append(LogDigests(log: log, entries: entries))
        }
        return out
    }

    static func encodeRanges(_ ranges: [HashRange], withHashes: Bool, into w: inout ByteWriter) {
        w.varint(UInt64(ranges.count))
        for h in ranges {
            encode(h.log, into: &w)
            w.u64(h.replica.rawValue)
            w.varint(h.from)
            if withHashes {
                w.varint(UInt64(h.hashes.count))
                for x in h.hashes { w.append(x) }
            } else {
                w.varint(h.to)
            }
        }
    }

    static func decodeRanges(_ r: inout ByteReader, withHashes: Bool) throws -> [HashRange] {
        let n = try r.count("range count", max: maxRanges, minSize: 27)  // LogRef 17, replica 8, two varints
        var out: [HashRange] = []
        out.reserveCapacity(n)
        for _ in 0..<n {
            let log = try decodeLog(&r)
            let at = r.offset
            let replica = try r.u64("range replica")
            guard replica != 0 else { throw r.error(.corrupt, "zero replica in a range", at: at) }
            let fromAt = r.offset
            let from = try r.varint("range start")
            guard from != 0 else { throw r.error(.corrupt, "zero counter in a range", at: fromAt) }
            if withHashes {
                let count = try r.count("hash count", minSize: 16)
                var hashes: [[UInt8]] = []
                hashes.reserveCapacity(count)
                for _ in 0..<count { hashes.append(try r.bytes(16, "content hash")) }
                // The last counter answered: from + count - 1, which must exist (none: from - 1).
                guard case (let to, false) = count == 0 ? (from - 1, false) : from.addingReportingOverflow(UInt64(count - 1)) else {
                    throw r.error(.corrupt, "\(count) hashes from counter \(from) pass the last counter", at: fromAt)
                }
                out.append(HashRange(log: log, replica: ReplicaID(replica), from: from, to: to, hashes: hashes))
            } else {
                let toAt = r.offset
                let to = try r.varint("range end")
                guard to >= from else { throw r.error(.corrupt, "range end \(to) below its start \(from)", at: toAt) }
                out.append(HashRange(log: log, replica: ReplicaID(replica), from: from, to: to))
            }
        }
        return out
    }

    static func encode(_ forks: [ForkReport], into w: inout ByteWriter) {
        w.varint(UInt64(forks.count))
        for f in forks {
            encode(f.log, into: &w)
            ElementCodec.encode(f.id, into: &w)
            w.append(f.held)
        }
    }

    static func decodeForks(_ r: inout ByteReader) throws -> [ForkReport] {
        let n = try r.count("fork count", max: maxRanges, minSize: 58)  // LogRef 17, OpID 8 + 1, hash 32
        var out: [ForkReport] = []
        out.reserveCapacity(n)
        for _ in 0..<n {
            let log = try decodeLog(&r)
            let id = try ElementCodec.decodeOpID(&r)
            out.append(ForkReport(log: log, id: id, held: try r.bytes(32, "content hash")))
        }
        return out
    }

    static func header(_ r: inout ByteReader, magic: [UInt8], what: String) throws {
        let m = try r.bytes(4, "\(what) magic")
        guard m == magic else { throw r.error(.corrupt, "not a \(what) (bad magic)", at: r.base) }
        let at = r.offset
        let v = try r.u8("version")
        guard v == version else {
            throw LnoteError(.unsupportedVersion, "\(what) version \(v); this build speaks \(version)", path: r.path, offset: at)
        }
    }

    public static func encode(_ q: SyncRequest) -> [UInt8] {
        var w = ByteWriter(capacity: 64)
        w.append(requestMagic)
        w.u8(version)
        w.u64(q.replica.rawValue)
        w.u64(q.epoch)
        w.u64(q.cursor)
        w.u8((q.have == nil ? 0 : 1) | (q.digests == nil ? 0 : 2) | (q.hashRanges == nil ? 0 : 4) | (q.wait == nil ? 0 : 8))
        if let have = q.have { encode(have, into: &w) }
        if let d = q.digests { encode(d, into: &w) }
        if let h = q.hashRanges { encodeRanges(h, withHashes: false, into: &w) }
        if let wait = q.wait { w.varint(UInt64(wait)) }
        encode(q.push, into: &w)
        return w.bytes
    }

    public static func decodeRequest(_ bytes: [UInt8], path: String? = nil) throws -> SyncRequest {
        var r = ByteReader(bytes, path: path)
        try header(&r, magic: requestMagic, what: "sync request")
        let replica = try r.u64("replica")
        guard replica != 0 else { throw r.error(.corrupt, "zero replica id", at: r.offset - 8) }
        let epoch = try r.u64("epoch"), cursor = try r.u64("cursor")
        let flagsAt = r.offset
        let flags = try r.u8("flags")
        guard flags & ~15 == 0 else { throw r.error(.corrupt, "unknown flags \(flags)", at: flagsAt) }
        let have = flags & 1 != 0 ? try decodeClocks(&r) : nil
        let digests = flags & 2 != 0 ? try decodeDigests(&r) : nil
        let ranges = flags & 4 != 0 ? try decodeRanges(&r, withHashes: false) : nil
        var wait: UInt32?
        if flags & 8 != 0 {
            // [SYNC-70] One varint of seconds, within `waitRange`.
            let at = r.offset
            let n = try r.varint("wait")
            guard n >= UInt64(waitRange.lowerBound), n <= UInt64(waitRange.upperBound) else {
                throw r.error(.corrupt, "wait of \(n) seconds (\(waitRange.lowerBound)...\(waitRange.upperBound) allowed)", at: at)
            }
            wait = UInt32(n)
        }
        let push = try decodeBatches(&r)
        try r.expectEnd("sync request")
        return SyncRequest(replica: ReplicaID(replica), epoch: epoch, cursor: cursor, have: have, digests: digests,
                           hashRanges: ranges, wait: wait, push: push)
    }

    public static func encode(_ s: SyncResponse) -> [UInt8] {
        var w = ByteWriter(capacity: 64)
        w.append(responseMagic)
        w.u8(version)
        w.u64(s.epoch)
        w.u64(s.cursor)
        w.varint(s.accepted)
        w.u8((s.clocks == nil ? 0 : 1) | (s.resync ? 2 : 0) | (s.digests == nil ? 0 : 4) | (s.forks.isEmpty ? 0 : 8)
             | (s.hashes == nil ? 0 : 16))
        if let c = s.clocks { encode(c, into: &w) }
        if let d = s.digests { encode(d, into: &w) }
        if !s.forks.isEmpty { encode(s.forks, into: &w) }
        if let h = s.hashes { encodeRanges(h, withHashes: true, into: &w) }
        encode(s.pull, into: &w)
        return w.bytes
    }

    public static func decodeResponse(_ bytes: [UInt8], path: String? = nil) throws -> SyncResponse {
        var r = ByteReader(bytes, path: path)
        try header(&r, magic: responseMagic, what: "sync response")
        let epoch = try r.u64("epoch"), cursor = try r.u64("cursor")
        let accepted = try r.varint("accepted")
        let flagsAt = r.offset
        let flags = try r.u8("flags")
        guard flags & ~31 == 0 else { throw r.error(.corrupt, "unknown flags \(flags)", at: flagsAt) }
        let clocks = flags & 1 != 0 ? try decodeClocks(&r) : nil
        let digests = flags & 4 != 0 ? try decodeDigests(&r) : nil
        let forks = flags & 8 != 0 ? try decodeForks(&r) : []
        let hashes = flags & 16 != 0 ? try decodeRanges(&r, withHashes: true) : nil
        let pull = try decodeBatches(&r)
        try r.expectEnd("sync response")
        return SyncResponse(epoch: epoch, cursor: cursor, accepted: accepted, pull: pull, clocks: clocks,
                            resync: flags & 2 != 0, digests: digests, forks: forks, hashes: hashes)
    }
}
