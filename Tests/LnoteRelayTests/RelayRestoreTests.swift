import Foundation
import LnoteModel
import LnoteReplication
import LnoteSQLite
import LnoteServer
import LnoteSync
import Testing
import LnoteTestSupport

/// `Protocol/sync-protocol.md` §6 at the relay store, around its file: the high-water mark
/// and restores ([SYNC-58]), the quarantine ([SYNC-60]), and files of schema version 1.
@Suite("Relay restores, quarantine, upgrade")
struct RelayRestoreTests {
    /// The mark file as the relay documents it: `LNHW`, version 1, flags (bit 0: open), 2
    /// zero bytes, the mark (u64 little-endian), CRC-32C of the 16 bytes before it.
    static func markBytes(_ value: UInt64, open: Bool) -> [UInt8] {
        let head = Array("LNHW".utf8) + [1, open ? 1 : 0, 0, 0] + (0..<8).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) }
        let crc = CRC32C.checksum(head)
        return head + (0..<4).map { UInt8(truncatingIfNeeded: crc >> (8 * $0)) }
    }

    /// The mark's value and flag, when the file is a valid mark.
    static func mark(_ path: String) -> (value: UInt64, open: Bool)? {
        guard let d = FileManager.default.contents(atPath: RelayStore.markPath(for: path)), d.count == 20 else { return nil }
        let bytes = [UInt8](d)
        var v: UInt64 = 0
        for i in 0..<8 { v |= UInt64(bytes[8 + i]) << (8 * i) }
        let open = bytes[5] == 1
        return bytes == markBytes(v, open: open) ? (v, open) : nil
    }

    /// The exact mark a closed store leaves.
    static func markValue(_ path: String) -> UInt64? {
        guard let m = mark(path), !m.open else { return nil }
        return m.value
    }

    static let reservation: UInt64 = 1 << 16

    /// Pushes `n` new synthetic operations of replica `replica` into a page log.
    @discardableResult
    static func push(_ store: RelayStore, _ nb: NotebookID, _ log: LogRef, replica: UInt64, counters: ClosedRange<UInt64>) throws -> SyncResponse {
        try store.sync(SyncRequest(replica: ReplicaID(replica), epoch: 0, cursor: 0,
                                   push: [LogBatch(log: log, ops: counters.map { syntheticOp(replica: replica, counter: $0, page: true) })]),
                       notebook: nb)
    }

    /// Copies the closed database `from` over `to` (removing `to`'s WAL files).
    static func copyDatabase(_ from: String, _ to: String) throws {
        let fm = FileManager.default
        for suffix in ["", "-wal", "-shm"] where fm.fileExists(atPath: to + suffix) { try fm.removeItem(atPath: to + suffix) }
        try fm.copyItem(atPath: from, toPath: to)
        #expect(!fm.fileExists(atPath: from + "-wal"), "the copy is complete: no WAL left beside it")
    }

    @Test("[SYNC-58] the high-water mark holds every sequence an answer carries: reserved while open, exact once closed")
    func markFollowsSequences() async throws {
        try await withTempDirectory { dir in
            let path = dir + "/relay.sqlite"
            var store = try RelayStore(path: path)
            #expect(store.opened.upgradedFrom == 0 && store.opened.epochsReset == nil)
            #expect(FileManager.default.contents(atPath: RelayStore.markPath(for: path)).map { [UInt8]($0) }
                    == Self.markBytes(Self.reservation, open: true))
            let n1 = try store.createNotebook(), n2 = try store.createNotebook()
            let log = LogRef(document: DocumentID(), page: PageID())
            var rng = SeededRNG(seed: 58)
            for i in 0..<20 {
                let nb = Bool.random(using: &rng) ? n1 : n2
                let r = try Self.push(store, nb, log, replica: UInt64(i + 1), counters: 1...UInt64.random(in: 1...5, using: &rng))
                #expect(Self.mark(path)?.value ?? 0 >= r.cursor, "answer cursor \(r.cursor) above the mark")
                #expect(Self.mark(path)?.open == true)
            }
            // A second store beside the first: it does not judge the mark, and closing it
            // leaves the reservation; the last to close writes the exact sequence.
            let beside = try RelayStore(path: path)
            #expect(beside.opened.epochsReset == nil)
            try beside.close()
            #expect(Self.mark(path)?.open == true)
            try store.close()
            let maxSeq = try RelayCounts.read(path).maxSeq
            #expect(Self.markValue(path) == UInt64(maxSeq))
            store = try RelayStore(path: path)
            #expect(store.opened.epochsReset == nil, "closed cleanly, not restored")
            try store.close()
            // No temporary file is left beside it.
            let names = try FileManager.default.contentsOfDirectory(atPath: dir)
            #expect(!names.contains { $0.contains(".hwm.tmp") }, "\(names)")
        }
    }

    @Test("[SYNC-58] a relay that was not closed (its mark still a reservation): new epochs, sequences resume above the reservation")
    func notClosed() async throws {
        try await withTempDirectory { dir in
            let path = dir + "/relay.sqlite", mark = RelayStore.markPath(for: path)
            var store = try RelayStore(path: path)
            let nb = try store.createNotebook()
            let log = LogRef(document: DocumentID(), page: PageID())
            try Self.push(store, nb, log, replica: 1, counters: 1...3)
            let epoch = try store.info(notebook: nb).epoch
            // What a killed relay leaves: the mark it reserved, flagged open.
            let left = try Data(contentsOf: URL(fileURLWithPath: mark))
            try store.close()
            try left.write(to: URL(fileURLWithPath: mark))
            store = try RelayStore(path: path)
            defer { try? store.close() }
            #expect(store.opened.epochsReset == .notClosed(sequence: 3, mark: Self.reservation))
            #expect(try store.info(notebook: nb).epoch != epoch)
            #expect(try Self.push(store, nb, log, replica: 2, counters: 1...1).cursor == Self.reservation + 1)
        }
    }

    // MARK: -

    @Test("[SYNC-58] a database restored from an older copy: new epochs for every notebook at opening, sequences never issued twice, and only once")
    func restoredCopy() async throws {
        try await withTempDirectory { dir in
            let path = dir + "/relay.sqlite", copy = dir + "/backup.sqlite"
            let log = LogRef(document: DocumentID(), page: PageID())
            var store = try RelayStore(path: path)
            let n1 = try store.createNotebook(), n2 = try store.createNotebook()
            try Self.push(store, n1, log, replica: 1, counters: 1...5)
            try store.close()
            try Self.copyDatabase(path, copy)
            store = try RelayStore(path: path)
            #expect(store.opened.epochsReset == nil, "reopening a database that is not restored changes nothing")
            let epochs = [try store.info(notebook: n1).epoch, try store.info(notebook: n2).epoch]
            let r = try Self.push(store, n2, log, replica: 2, counters: 1...7)
            #expect(r.cursor == 12)
            try store.close()
            #expect(Self.markValue(path) == 12)

            try Self.copyDatabase(copy, path) // the restore
            store = try RelayStore(path: path)
            #expect(store.opened.epochsReset == .belowMark(sequence: 5, mark: 12))
            let after = [try store.info(notebook: n1), try store.info(notebook: n2)]
            #expect(zip(after.map(\.epoch), epochs).allSatisfy { $0 != $1 }, "every notebook, a new epoch")
            #expect(after.map(\.operations) == [5, 0])
            // A client of the old epoch is told to compare clocks.
            let steady = try store.sync(SyncRequest(replica: ReplicaID(2), epoch: epochs[1], cursor: 7), notebook: n2)
            #expect(steady.resync)
            // Sequences 6…12 were handed out before the restore: never again.
            let next = try Self.push(store, n2, log, replica: 3, counters: 1...1)
            #expect(next.cursor == 13)
            try store.close()
            #expect(Self.markValue(path) == 13)
            store = try RelayStore(path: path)
            defer { try? store.close() }
            #expect(store.opened.epochsReset == nil, "detected once")
            #expect([try store.info(notebook: n1).epoch, try store.info(notebook: n2).epoch] == after.map(\.epoch))
        }
    }

    @Test("[SYNC-58] a store holding operations without a readable mark resets its epochs; an empty one does not")
    func missingOrDamagedMark() async throws {
        try await withTempDirectory { dir in
            let path = dir + "/relay.sqlite", mark = RelayStore.markPath(for: path)
            var store = try RelayStore(path: path)
            let nb = try store.createNotebook()
            try store.close()
            try FileManager.default.removeItem(atPath: mark)
            store = try RelayStore(path: path)
            #expect(store.opened.epochsReset == nil, "no operation was ever issued")
            #expect(Self.mark(path)?.value == Self.reservation)
            _ = try store.sync(SyncRequest(replica: ReplicaID(1), epoch: 0, cursor: 0,
                                           push: [LogBatch(log: LogRef(document: DocumentID(), page: PageID()),
                                                           ops: [syntheticOp(replica: 1, counter: 1, page: true)])]), notebook: nb)
            var epoch = try store.info(notebook: nb).epoch
            try store.close()

            try FileManager.default.removeItem(atPath: mark)
            store = try RelayStore(path: path)
            #expect(store.opened.epochsReset == .markMissing(sequence: 1))
            #expect(try store.info(notebook: nb).epoch != epoch)
            epoch = try store.info(notebook: nb).epoch
            try store.close()
            #expect(Self.markValue(path) == 1)

            var damaged = Self.markBytes(1, open: false)
            damaged[9] ^= 0x40 // the CRC no longer matches
            var newer = Self.markBytes(1, open: false)
            newer[4] = 2
            var flags = Self.markBytes(1, open: false)
            flags[5] = 2
            let exact = Self.markBytes(1, open: false)
            for garbage in [[], Array("12\n".utf8), damaged, newer, flags, exact + [0], Array(exact.prefix(19))] {
                try Data(garbage).write(to: URL(fileURLWithPath: mark))
                store = try RelayStore(path: path)
                guard case .markUnreadable(sequence: 1, _) = store.opened.epochsReset else {
                    Issue.record("\(garbage): \(String(describing: store.opened.epochsReset))")
                    try store.close()
                    continue
                }
                #expect(try store.info(notebook: nb).epoch != epoch)
                epoch = try store.info(notebook: nb).epoch
                try store.close()
                #expect(Self.markValue(path) == 1, "rewritten")
            }
        }
    }

    @Test("[SYNC-58] epochs reset by hand: one notebook, or all", arguments: RelayBackends.all)
    func resetByHand(backend: RelayBackendKind) async throws {
        try await withRelay(backend) { store, nb, _ in
            let other = try store.createNotebook()
            let e1 = try store.info(notebook: nb).epoch, e2 = try store.info(notebook: other).epoch
            let new = try store.resetEpoch(notebook: nb)
            #expect(new != e1)
            #expect(try store.info(notebook: nb).epoch == new)
            #expect(try store.info(notebook: other).epoch == e2)
            let all = try store.resetEpochs()
            #expect(all.map(\.notebook) == [nb, other].sorted())
            #expect(all.map(\.epoch) == [try store.info(notebook: all[0].notebook).epoch, try store.info(notebook: all[1].notebook).epoch])
            #expect(!all.map(\.epoch).contains(new) && !all.map(\.epoch).contains(e2))
            #expect(throws: LnoteError(.notFound)) { try store.resetEpoch(notebook: NotebookID()) }
        }
    }

    /// A frame whose CRC is right and whose operation the validator refuses: its Lamport
    /// timestamp (the byte after the replica and a one-byte counter) is changed.
    /// `op` as an older relay stored it (an `add`, the form with a Lamport timestamp at
    /// payload byte 9), its timestamp replaced.
    static func badFrame(_ op: Op, lamport: UInt8) -> [UInt8] {
        var payload = OperationCodec.frame(op, form: .hash).payload
        payload[9] = lamport
        return Frame(type: OperationCodec.frame(op, form: .hash).type, payload: payload).encoded
    }

    /// Stores a row straight into the file, as an older relay could have.
    static func insertRaw(_ path: String, notebook: NotebookID, log: LogRef, id: OpID, frame: [UInt8]) throws {
        let db = try SQLiteDatabase(path: path)
        defer { try? db.close() }
        let nb = try db.query("SELECT nb FROM notebooks WHERE id = ?1", [.text(notebook.description)])[0][0]
        try db.execute("INSERT INTO ops (nb, document, page, replica, counter, frame, hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                       [nb, .blob(log.document.uuid.bytes), .blob(log.page?.uuid.bytes ?? []),
                        .integer(Int64(bitPattern: id.replica.rawValue)), .integer(Int64(id.counter)), .blob(frame),
                        .blob(SHA256.hash(frame))])
    }

    @Test("[SYNC-60] operations the validator refuses are listed with the rule they break, and dropped by id")
    func quarantine() async throws {
        try await withTempDirectory { dir in
            let path = dir + "/relay.sqlite"
            var store = try RelayStore(path: path)
            let nb = try store.createNotebook(), other = try store.createNotebook()
            let log = LogRef(document: DocumentID(), page: PageID())
            // a1 and a3 valid, a2 stored with a wrong Lamport timestamp, b1 not a frame at all.
            var pa = PageReplica(page: log.page!)
            var rng = SeededRNG(seed: 60)
            let ops = try (0..<3).map { _ in try pa.add(.stroke(randomStroke(&rng)), by: ReplicaID(0xA1), wallTime: 1) }
            _ = try store.sync(SyncRequest(replica: ReplicaID(0xA1), epoch: 0, cursor: 0,
                                           push: [LogBatch(log: log, ops: [ops[0]])]), notebook: nb)
            try store.putCheckpoint(notebook: nb, checkpoint: checkpoint(log, ops, at: VectorClock([(ReplicaID(0xA1), UInt64(1))])))
            try store.close()
            try Self.insertRaw(path, notebook: nb, log: log, id: ops[1].id, frame: Self.badFrame(ops[1], lamport: 7))
            try Self.insertRaw(path, notebook: other, log: log, id: ops[1].id, frame: Self.badFrame(ops[1], lamport: 9))
            try Self.insertRaw(path, notebook: nb, log: log, id: OpID(replica: ReplicaID(0xB2), counter: 1), frame: [1, 2, 3])
            do { // An older relay's checkpoint in `other` that covers its a2.
                let db = try SQLiteDatabase(path: path)
                defer { try? db.close() }
                var w = ByteWriter()
                ElementCodec.encode(VectorClock([(ReplicaID(0xA1), UInt64(2))]), into: &w)
                try db.execute("""
                    INSERT INTO checkpoints (nb, document, page, clock, snapshot, uploaded)
                    SELECT nb, ?2, ?3, ?4, x'00', 0 FROM notebooks WHERE id = ?1
                    """, [.text(other.description), .blob(log.document.uuid.bytes), .blob(log.page!.uuid.bytes), .blob(w.bytes)])
            }
            store = try RelayStore(path: path)
            defer { try? store.close() }
            _ = try store.sync(SyncRequest(replica: ReplicaID(0xA1), epoch: 0, cursor: 0,
                                           push: [LogBatch(log: log, ops: [ops[2]])]), notebook: nb)

            let listed = try store.quarantine()
            #expect(listed.map(\.id) == [ops[1].id, ops[1].id, OpID(replica: ReplicaID(0xB2), counter: 1)])
            #expect(listed.map(\.notebook) == [nb, other, nb])
            #expect(listed.allSatisfy { $0.log == log })
            #expect(listed[0].reason.contains("[LOG-4]") && listed[0].reason.contains(ops[1].id.description), "\(listed[0])")
            #expect(listed[2].reason.contains("not a valid frame"), "\(listed[2])")

            // Valid, unknown and ambiguous ids are refused; nothing is deleted.
            let before = try RelayCounts.read(path)
            #expect(throws: LnoteError(.invalidArgument)) { try store.dropQuarantined([ops[0].id]) }
            #expect(throws: LnoteError(.notFound)) { try store.dropQuarantined([OpID(replica: ReplicaID(0xC3), counter: 1)]) }
            #expect(throws: LnoteError(.ambiguous)) { try store.dropQuarantined([OpID(replica: ReplicaID(0xB2), counter: 1), ops[1].id]) }
            #expect(throws: LnoteError(.notFound)) {
                try store.dropQuarantined([ops[1].id], notebook: nb, log: LogRef(document: log.document))
            }
            #expect(try RelayCounts.read(path) == before)

            let dropped = try store.dropQuarantined([ops[1].id, OpID(replica: ReplicaID(0xB2), counter: 1)], notebook: nb, log: log)
            #expect(dropped == [listed[0], listed[2]])
            #expect(try store.quarantine() == [listed[1]])
            #expect(try RelayCounts.read(path).ops == before.ops - 2)
            // The chain of a1 stops at the hole a2 left; the checkpoint at {a1: 1} stays.
            let digests = try store.sync(SyncRequest(replica: ReplicaID(1), epoch: 0, cursor: 0, have: [], digests: []), notebook: nb).digests
            #expect(digests?.first?.entries.map(\.counter) == [1])
            #expect(try store.checkpoints(notebook: nb).count == 1)
            #expect(try store.checkpoints(notebook: other).count == 1)
            #expect(try store.dropQuarantined([ops[1].id]).map(\.notebook) == [other])
            #expect(try store.checkpoints(notebook: other).isEmpty, "its checkpoint included it")
            #expect(try store.quarantine().isEmpty)
        }
    }

    /// The schema of version 1 files, as lnote wrote them before §6 (a fixture: the store
    /// itself upgrades from its own copy).
    static let schemaV1 = """
        CREATE TABLE notebooks (nb INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, epoch INTEGER NOT NULL, created INTEGER NOT NULL);
        CREATE TABLE tokens (digest BLOB NOT NULL UNIQUE, nb INTEGER NOT NULL REFERENCES notebooks(nb), label TEXT NOT NULL,
                             created INTEGER NOT NULL);
        CREATE INDEX tokens_by_notebook ON tokens(nb);
        CREATE TABLE ops (seq INTEGER PRIMARY KEY AUTOINCREMENT, nb INTEGER NOT NULL REFERENCES notebooks(nb),
                          document BLOB NOT NULL, page BLOB NOT NULL, replica INTEGER NOT NULL, counter INTEGER NOT NULL,
                          frame BLOB NOT NULL, UNIQUE (nb, document, page, replica, counter));
        CREATE INDEX ops_by_seq ON ops(nb, seq);
        CREATE TABLE assets (nb INTEGER NOT NULL REFERENCES notebooks(nb), id TEXT NOT NULL, bytes BLOB NOT NULL, UNIQUE (nb, id));
        CREATE TABLE checkpoints (nb INTEGER NOT NULL REFERENCES notebooks(nb), document BLOB NOT NULL, page BLOB NOT NULL,
                                  clock BLOB NOT NULL, snapshot BLOB NOT NULL, uploaded INTEGER NOT NULL,
                                  UNIQUE (nb, document, page));
        PRAGMA application_id = 1280201305;
        PRAGMA user_version = 1;
        """

    @Test("[SYNC-50] [SYNC-52] [SYNC-57] [SYNC-58] [SYNC-59] a version 1 file is upgraded: content hashes, chains, unnamed devices, checked checkpoints, new epochs")
    func upgradeFromVersion1() async throws {
        try await withTempDirectory { dir in
            let path = dir + "/relay.sqlite"
            let nbID = NotebookID(), token = RelayToken.generate()
            let a = ReplicaID(0xA1)
            let good = LogRef(document: DocumentID(), page: PageID()), forged = LogRef(document: good.document, page: PageID())
            var pa = PageReplica(page: good.page!)
            var rng = SeededRNG(seed: 2)
            let ops = try (0..<4).map { _ in try pa.add(.stroke(randomStroke(&rng)), by: a, wallTime: 1) }
            do {
                let db = try SQLiteDatabase(path: path)
                defer { try? db.close() }
                try db.execute(Self.schemaV1)
                try db.execute("INSERT INTO notebooks (nb, id, epoch, created) VALUES (1, ?1, 42, 0)", [.text(nbID.description)])
                try db.execute("INSERT INTO tokens (digest, nb, label, created) VALUES (?1, 1, 'old', 0)", [.blob(RelayToken.digest(token))])
                for (i, op) in ops.enumerated() where i != 2 { // a3 missing: a gap
                    try db.execute("INSERT INTO ops (nb, document, page, replica, counter, frame) VALUES (1, ?1, ?2, ?3, ?4, ?5)",
                                   [.blob(good.document.uuid.bytes), .blob(good.page!.uuid.bytes), .integer(Int64(a.rawValue)),
                                    .integer(Int64(op.id.counter)), .blob(OperationCodec.frame(op).encoded)])
                }
                var w = ByteWriter()
                let cpGood = try checkpoint(good, ops, at: VectorClock([(a, UInt64(2))]))
                ElementCodec.encode(cpGood.clock, into: &w)
                try db.execute("INSERT INTO checkpoints VALUES (1, ?1, ?2, ?3, ?4, 0)",
                               [.blob(good.document.uuid.bytes), .blob(good.page!.uuid.bytes), .blob(w.bytes), .blob(cpGood.snapshot)])
                try db.execute("INSERT INTO checkpoints VALUES (1, ?1, ?2, ?3, ?4, 0)",
                               [.blob(forged.document.uuid.bytes), .blob(forged.page!.uuid.bytes), .blob(w.bytes), .blob([1, 2, 3])])
            }
            let store = try RelayStore(path: path)
            defer { try? store.close() }
            #expect(store.opened.upgradedFrom == 1)
            #expect(store.opened.checkpointsDropped == 1)
            #expect(store.opened.epochsReset == .markMissing(sequence: 3))
            #expect(try store.info(notebook: nbID).epoch != 42)
            #expect(try store.checkpoints(notebook: nbID).map(\.log) == [good])
            #expect(try store.access(token: token, notebook: nbID) ==
                    Access(.ok, device: "token-" + String(hexString(RelayToken.digest(token)).prefix(8))))
            // Hashes were filled: a fork of an old operation is found.
            var other = PageReplica(page: good.page!)
            let fork = try other.add(.stroke(randomStroke(&rng)), by: a, wallTime: 9)
            let r = try store.sync(SyncRequest(replica: a, epoch: 0, cursor: 0, have: [], digests: [],
                                               push: [LogBatch(log: good, ops: [fork])]), notebook: nbID)
            #expect(r.forks.map(\.id) == [ops[0].id])
            // Chains were built: up to the gap, then past it once a3 arrives.
            #expect(r.digests?.first?.entries.map(\.counter) == [2])
            let r2 = try store.sync(SyncRequest(replica: a, epoch: 0, cursor: 0, have: [], digests: [],
                                                push: [LogBatch(log: good, ops: [ops[2]])]), notebook: nbID)
            #expect(r2.digests?.first?.entries.map(\.counter) == [4])
            #expect(r2.digests?.first?.entries.first?.digest == RelayTrustTests.chain(ops.map(RelayTrustTests.contentHash)))
            let raw = try SQLiteDatabase(path: path, options: .init(create: false, readOnly: true))
            defer { try? raw.close() }
            #expect(try raw.query("PRAGMA user_version").first?.first?.int64 == RelayStore.schemaVersion)
        }
    }
}
