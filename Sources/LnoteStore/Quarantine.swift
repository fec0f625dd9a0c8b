import Foundation
import LnoteModel
import LnoteReplication

/// One operation kept out of a notebook's logs, in `.lnote/quarantine/` ([PKG-48]): an
/// operation a pull brought that this replica cannot accept (sync-protocol.md [SYNC-60]),
/// this replica's own version of an operation whose id another copy of the folder used
/// too ([SYNC-54]), or another replica's version of an operation this replica holds with
/// other content (a fork, [SYNC-51]; this replica keeps its own).
public struct QuarantineEntry: Sendable, Hashable {
    public enum Kind: String, Sendable, Codable, CaseIterable {
        /// A received operation that does not decode, belongs to the other kind of log, or that
        /// the validator or the merge engine refuses ([SYNC-60]). Not applied.
        case invalid
        /// This replica's own version of a forked operation, removed from its log with every
        /// later operation of that replica in the log ([SYNC-54]); `remadeAs` is set once it
        /// was made again under a new replica id.
        case ownFork
        /// Another replica's operation that this replica holds under the same id with other
        /// content ([SYNC-51]): both sides keep theirs until its author repairs it. `frame`
        /// is the remote's version when it was received, absent when the fork was found by
        /// comparing hashes only.
        case fork
    }

    public var kind: Kind
    /// When it was quarantined (ms since 1970).
    public var time: Int64
    /// The remote it came from or forked with (a URL, a folder path, `replica <hex>`).
    public var remote: String
    public var document: DocumentID
    /// nil: the document log.
    public var page: PageID?
    /// The operation's id, when its frame holds a readable one.
    public var operation: OpID?
    /// Why, for a person.
    public var reason: String
    /// The frame's bytes as received or as the log held them (length, CRC, type, payload:
    /// operation-log.md [LOG-10]), except that a received stroke's add may be kept in its
    /// written form, `addStroke3` (the same operation, the same content hash: [LOG-22]);
    /// nil when not known.
    public var frame: [UInt8]?
    /// The content hash ([SYNC-50]) of the operation this entry is about: 32 bytes, or its
    /// first 16 when only those are known (a fork found by comparing hashes, [SYNC-53]).
    public var hash: [UInt8]?
    /// For a fork: the content hash of the other version (the one the log keeps for `fork`,
    /// the remote's for `ownFork`), when known; 32 or 16 bytes as `hash`.
    public var otherHash: [UInt8]?
    /// For `ownFork`: the operations that made it again under a new replica id.
    public var remadeAs: [OpID]?
    /// For `fork`: when (ms since 1970) a later clock comparison with the same remote found
    /// no fork any more (its author repaired it, [SYNC-54]). For `invalid`: when a sync found
    /// nothing left to do about it (`Notebook.resolveRefusalsNowHeld`).
    public var resolved: Int64?

    public init(kind: Kind, time: Int64, remote: String, document: DocumentID, page: PageID?, operation: OpID?,
                reason: String, frame: [UInt8]? = nil, hash: [UInt8]? = nil, otherHash: [UInt8]? = nil,
                remadeAs: [OpID]? = nil, resolved: Int64? = nil) {
        self.kind = kind
        self.time = time
        self.remote = remote
        self.document = document
        self.page = page
        self.operation = operation
        self.reason = reason
        self.frame = frame
        self.hash = hash
        self.otherHash = otherHash
        self.remadeAs = remadeAs
        self.resolved = resolved
    }

    /// The file name ([PKG-48]): `<kind>-<DOCUMENT>-<PAGE or "document">-<operation or
    /// "unknown">-<16 hex>.json`, the hex being the first 8 bytes of `hash`, else of the
    /// SHA-256 of `frame`, else zeros. The same entry always gets the same name, so
    /// quarantining it twice keeps one file.
    public var fileName: String {
        let tag = hash ?? frame.map(SHA256.hash) ?? [UInt8](repeating: 0, count: 8)
        return "\(kind.rawValue)-\(document.uuid.uuidString)-\(page?.uuid.uuidString ?? "document")-"
            + "\(operation?.description ?? "unknown")-\(hexString(tag.prefix(8))).json"
    }

    /// A `fork` pushed to this folder (`remote` is `replica <hex>`: it serves the folder; or
    /// `a peer`: another folder's sync pushed into it): it kept its own version, stored
    /// nothing of the pushed one, and told the pusher, whose sync reports the fork until its
    /// author repairs it ([SYNC-51]). Nothing here can resolve it, and nothing here needs
    /// to: listed, not a problem (else any token holder could make this folder's verify fail
    /// for ever with one push).
    public var wasPushedHere: Bool { kind == .fork && (remote.hasPrefix(Self.pushingReplicaPrefix) || remote == Self.pushingPeer) }

    /// The `remote` of an entry a client of this folder's server pushed: `replica <hex>`.
    public static func pushingReplica(_ r: ReplicaID) -> String { pushingReplicaPrefix + r.description }
    static let pushingReplicaPrefix = "replica "
    /// The `remote` of an entry another folder's sync pushed into this one.
    public static let pushingPeer = "a peer"

    /// True when a person (or the re-authoring step) still has to act on it.
    public var needsAttention: Bool {
        switch kind {
        case .invalid: resolved == nil
        case .ownFork: remadeAs == nil
        case .fork: resolved == nil && !wasPushedHere
        }
    }

    public var logDescription: String { page.map { "\(document)/\($0)" } ?? "\(document)" }
}

/// The quarantine folder's files ([PKG-48]): one JSON file per operation, written by durable
/// replace ([PKG-20]) in the same encoding as the other JSON files ([PKG-10]).
enum Quarantine {
    struct File: Codable, Equatable {
        var format: Int
        var kind: QuarantineEntry.Kind
        var time: Int64
        var remote: String
        var document: String
        var page: String?
        var operation: String?
        var reason: String
        var frame: String?
        var hash: String?
        var otherHash: String?
        var remadeAs: [String]?
        var resolved: Int64? = nil
    }

    static func folder(_ notebook: String) -> String { DurableFile.join(notebook, ".lnote/quarantine") }

    static func encode(_ e: QuarantineEntry) throws -> [UInt8] {
        try StoreJSON.encode(File(format: 1, kind: e.kind, time: e.time, remote: e.remote, document: e.document.description,
                                  page: e.page?.description, operation: e.operation?.description, reason: e.reason,
                                  frame: e.frame.map(hexString), hash: e.hash.map(hexString),
                                  otherHash: e.otherHash.map(hexString), remadeAs: e.remadeAs?.map(\.description),
                                  resolved: e.resolved))
    }

    static func decode(_ bytes: [UInt8], path: String) throws -> QuarantineEntry {
        let f = try StoreJSON.decode(File.self, bytes, path: path)
        func bad(_ what: String) -> LnoteError { LnoteError(.corrupt, "quarantine entry: bad \(what)", path: path) }
        guard f.format == 1 else {
            throw LnoteError(f.format > 1 ? .unsupportedVersion : .corrupt, "quarantine entry format \(f.format)", path: path)
        }
        guard let doc = DocumentID(f.document) else { throw bad("document") }
        var page: PageID?
        if let p = f.page { guard let id = PageID(p) else { throw bad("page") }; page = id }
        var op: OpID?
        if let o = f.operation { guard let id = OpID(parsing: o) else { throw bad("operation") }; op = id }
        func hexBytes(_ s: String?, _ what: String, length: Int? = nil) throws -> [UInt8]? {
            guard let s else { return nil }
            guard let b = Hex.decode(s), length.map({ b.count == $0 || b.count == 16 }) ?? true else { throw bad(what) }
            return b
        }
        var remade: [OpID]?
        if let r = f.remadeAs {
            remade = try r.map { guard let id = OpID(parsing: $0) else { throw bad("remadeAs") }; return id }
        }
        return QuarantineEntry(kind: f.kind, time: f.time, remote: f.remote, document: doc, page: page, operation: op,
                               reason: f.reason, frame: try hexBytes(f.frame, "frame"), hash: try hexBytes(f.hash, "hash", length: 32),
                               otherHash: try hexBytes(f.otherHash, "otherHash", length: 32), remadeAs: remade,
                               resolved: f.kind == .ownFork ? nil : f.resolved)
    }

    /// Writes an entry durably unless a file of that name exists, under the notebook lock
    /// ([PKG-83]). Returns its path and whether it was new.
    @discardableResult
    static func write(_ e: QuarantineEntry, notebook: String, io: Syscalls, lock: FileLock,
                      replace: Bool = false) throws -> (path: String, new: Bool) {
        try lock.withLock { try writeLocked(e, notebook: notebook, io: io, replace: replace) }
    }

    private static func writeLocked(_ e: QuarantineEntry, notebook: String, io: Syscalls, replace: Bool) throws -> (path: String, new: Bool) {
        let dir = folder(notebook)
        if try io.stat(dir) == nil {
            try io.mkdir(dir, existingOK: true)
            try DurableFile.syncDirectory(DurableFile.join(notebook, ".lnote"), io: io)
        }
        let path = DurableFile.join(dir, e.fileName)
        if !replace, try io.stat(path) != nil {
            // A fork found again after it was marked resolved: it needs a person again.
            guard e.kind == .fork, e.resolved == nil, let held = try? decode(try DurableFile.read(path, io: io), path: path),
                  held.resolved != nil else { return (path, false) }
        }
        try DurableFile.replace(path, with: try encode(e), io: io)
        return (path, true)
    }

    /// Every entry, sorted by time then name; files that do not decode are returned apart
    /// (with their error), never skipped silently.
    static func list(notebook: String, io: Syscalls) throws -> (entries: [(path: String, entry: QuarantineEntry)], damaged: [LnoteError]) {
        let dir = folder(notebook)
        guard try io.stat(dir)?.isDirectory == true else { return ([], []) }
        var out: [(String, QuarantineEntry)] = []
        var damaged: [LnoteError] = []
        for name in try io.listDirectory(dir).sorted() where !DurableFile.isTemporaryName(name) && name.hasSuffix(".json") {
            let p = DurableFile.join(dir, name)
            do {
                out.append((p, try decode(try DurableFile.read(p, io: io), path: p)))
            } catch let e as LnoteError where e.code != .io {
                damaged.append(e)
            }
        }
        return (out.sorted { ($0.1.time, $0.0) < ($1.1.time, $1.0) }, damaged)
    }
}

/// Lowercase hex to bytes.
enum Hex {
    static func decode(_ s: String) -> [UInt8]? {
        let u = Array(s.utf8)
        guard u.count % 2 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(u.count / 2)
        var i = 0
        while i < u.count {
            guard let hi = nibble(u[i]), let lo = nibble(u[i + 1]) else { return nil }
            out.append(hi << 4 | lo)
            i += 2
        }
        return out
    }

    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case 0x30...0x39: c - 0x30
        case 0x61...0x66: c - 0x61 + 10
        default: nil
        }
    }
}

extension Notebook {
    /// Keeps an operation out of the logs ([PKG-48]). An entry already there (same file
    /// name) is left as it is. Returns the entry's path.
    @discardableResult
    public func quarantine(_ entry: QuarantineEntry) throws -> String {
        try Quarantine.write(entry, notebook: path, io: io, lock: notebookLock).path
    }

    /// Records that a quarantined own operation was made again under a new id ([SYNC-54]).
    public func markRemade(_ entry: QuarantineEntry, as ids: [OpID]) throws {
        var e = entry
        e.remadeAs = ids
        try Quarantine.write(e, notebook: path, io: io, lock: notebookLock, replace: true)
    }

    /// Marks the `fork` entries found with `remote` resolved ([SYNC-54]): a clock comparison
    /// with it found no fork any more (the author repaired it). Returns how many.
    @discardableResult
    public func resolveForks(remote: String) throws -> Int {
        try checkOpen()
        let (entries, _) = try Quarantine.list(notebook: path, io: io)
        let now = options.now()
        var n = 0
        for (_, entry) in entries where entry.kind == .fork && entry.remote == remote && entry.resolved == nil {
            var e = entry
            e.resolved = now
            try Quarantine.write(e, notebook: path, io: io, lock: notebookLock, replace: true)
            n += 1
        }
        return n
    }

    /// Marks resolved the `invalid` entries that nothing is left to do about ([PKG-48]), and
    /// returns every `invalid` entry marked so (now or before):
    /// - bytes that are no valid operation (they do not decode, or the validator refuses
    ///   them): once their log holds a valid operation under their id, they can never be
    ///   applied there, and the operations that waited for that id are applied;
    /// - a valid operation refused for another reason (an asset that could not be had, the
    ///   wrong kind of log): once the log where it belongs holds that same operation (the
    ///   same content hash). Another operation under its id there is a fork, not a fix; a
    ///   page operation sent in a document log has no log to look in, and stays.
    /// Without this, one damaged answer (a faulty proxy, a relay of an older version) would
    /// make `verify` fail for ever.
    @discardableResult
    public func resolveRefusalsNowHeld() async throws -> [QuarantineEntry] {
        try checkOpen()
        let (entries, _) = try Quarantine.list(notebook: path, io: io)
        // Where each unresolved entry's operation belongs, and what that log holds under its
        // id: each log read once for all its entries, one log at a time (reading the whole
        // log for each entry made every sync pay entries × log: 18 s for 800 entries).
        var homes: [Int: (id: OpID, document: DocumentID, page: PageID?, hash: [UInt8]?)] = [:]
        for (i, (_, entry)) in entries.enumerated() where entry.kind == .invalid && entry.resolved == nil {
            if let id = entry.operation, let home = Self.home(of: entry) { homes[i] = (id, home.document, home.page, home.hash) }
        }
        // A log that cannot be read fails its entries where they come in the list, as reading
        // it for each did (the entries before them are still resolved and written).
        var held: [Int: Result<[UInt8]?, any Error>] = [:]
        var table: (document: DocumentID, page: PageID?, hashes: Result<ContentHashTable, any Error>)?
        for i in homes.keys.sorted(by: { (homes[$0]!.document, homes[$0]!.page?.description ?? "", $0) < (homes[$1]!.document, homes[$1]!.page?.description ?? "", $1) }) {
            let h = homes[i]!
            if table == nil || table!.document != h.document || table!.page != h.page {
                table = nil  // one log's table at a time
                do {
                    table = (h.document, h.page, .success(try await contentHashTable(document: h.document, page: h.page)))
                } catch {
                    table = (h.document, h.page, .failure(error))
                }
            }
            held[i] = table!.hashes.map { $0.hashes(replica: h.id.replica, from: h.id.counter, to: h.id.counter).first }
        }
        var out: [QuarantineEntry] = []
        for (i, (_, entry)) in entries.enumerated() where entry.kind == .invalid {
            if entry.resolved != nil {
                out.append(entry)
                continue
            }
            guard let home = homes[i], let held = try held[i]?.get(),
                  home.hash.map({ Array($0.prefix(16)) == Array(held.prefix(16)) }) ?? true else { continue }
            var e = entry
            e.resolved = options.now()
            try Quarantine.write(e, notebook: path, io: io, lock: notebookLock, replace: true)
            out.append(e)
        }
        return out
    }

    /// Where a refused operation belongs, and the content hash it must be held with there (nil:
    /// any valid operation under its id, for bytes that are none).
    private static func home(of e: QuarantineEntry) -> (document: DocumentID, page: PageID?, hash: [UInt8]?)? {
        guard let bytes = e.frame, let frame = try? Frame.decodeAll(bytes), frame.count == 1 else {
            // Not even a frame: the log it came in is all there is.
            return e.frame == nil ? nil : (e.document, e.page, nil)
        }
        guard let op = try? OperationCodec.decode(frame[0]) else { return (e.document, e.page, nil) }
        let hash = ContentHash.of(frame[0], decoded: op)
        if op.body.isPageOperation == (e.page != nil) { return (e.document, e.page, hash) }
        // A document operation sent in a page log belongs in the document log; a page
        // operation sent in the document log names no page.
        return op.body.isPageOperation ? nil : (e.document, nil, hash)
    }

    /// Every entry of the quarantine, oldest first.
    /// - Throws: `corrupt` naming the first entry that does not decode.
    public func quarantinedOperations() throws -> [QuarantineEntry] {
        let (entries, damaged) = try Quarantine.list(notebook: path, io: io)
        if let e = damaged.first { throw e }
        return entries.map(\.entry)
    }
}
