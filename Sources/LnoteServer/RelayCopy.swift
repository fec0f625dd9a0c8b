import Foundation
import LnoteModel

/// What `RelayCopy` needs of a backend beyond `RelayDatabase`: the parts of a copy that SQL
/// cannot say the same way on SQLite and PostgreSQL.
public protocol RelayCopyBackend: RelayDatabase {
    /// "sqlite" or "postgresql", for reports.
    var backendName: String { get }
    /// The schema version the database holds, read without creating or changing anything;
    /// nil when it holds no relay store (empty, or other data).
    func storedRelaySchemaVersion() throws -> Int64?
    /// The greatest change sequence the database ever issued: at least the greatest held
    /// (SQLite: its AUTOINCREMENT counter; PostgreSQL: `relay_counters`), so that a copy
    /// continues after sequences that were handed out and then deleted.
    func issuedSequence(_ tx: any RelayTransaction) throws -> Int64
    /// Whether another relay store of this machine has the database open now (SQLite: the
    /// high-water mark's lock); false when the backend cannot tell.
    var openedByOtherStores: Bool { get }
}

/// One table's rows on both sides of a copy.
public struct RelayCopyTableCount: Sendable, Equatable {
    public var table: String
    public var source: Int64
    public var target: Int64
    public var matches: Bool { source == target }
}

/// One notebook's operations on both sides: count, greatest sequence, epoch, and a
/// SHA-256 over every operation's (sequence, log, id, content hash) in sequence order.
public struct RelayCopyNotebookCheck: Sendable, Equatable {
    public struct Side: Sendable, Equatable {
        public var operations: Int64
        public var cursor: Int64
        public var epoch: UInt64
        public var checksum: [UInt8]
        /// The notebook's name (`notebooks.name`).
        public var name: String = ""
    }
    public var notebook: NotebookID
    public var source: Side
    /// nil when the target lacks the notebook.
    public var target: Side?
    public var matches: Bool { source == target }
}

/// What `RelayCopy.copy` did and found.
public struct RelayCopyReport: Sendable, Equatable {
    public var source: String
    public var target: String
    /// Rows per table, in copy order.
    public var tables: [RelayCopyTableCount] = []
    /// Per notebook, sorted by id.
    public var notebooks: [RelayCopyNotebookCheck] = []
    /// The greatest change sequence the source ever issued; the target issues above it.
    public var sourceIssued: Int64 = 0
    /// The same read from the target after the copy (at least `sourceIssued`).
    public var targetIssued: Int64 = 0
    /// Rows read and written per batch.
    public var batchRows = 0
    public var batches = 0
    /// Set when opening the source found it may have been restored (or not closed) and gave
    /// every notebook a new epoch before it was copied ([SYNC-58]).
    public var sourceEpochsReset: RelayStore.RestoreSign?
    /// Every count and checksum equal, and the target's sequence not below the source's.
    public var verified: Bool {
        tables.allSatisfy(\.matches) && notebooks.allSatisfy(\.matches) && targetIssued >= sourceIssued
    }
    /// What differs, in words (empty when verified).
    public var differences: [String] {
        var out: [String] = []
        for t in tables where !t.matches { out.append("\(t.table): \(t.source) rows in the source, \(t.target) in the target") }
        for n in notebooks where !n.matches {
            guard let t = n.target else { out.append("notebook \(n.notebook) is missing from the target"); continue }
            out.append("notebook \(n.notebook): source \(n.source.operations) operations up to sequence \(n.source.cursor), "
                       + "checksum \(hexString(n.source.checksum).prefix(16)); target \(t.operations) up to \(t.cursor), "
                       + "checksum \(hexString(t.checksum).prefix(16))" + (n.source.epoch != t.epoch ? "; epochs differ" : "")
                       + (n.source.name != t.name ? "; names differ" : ""))
        }
        if targetIssued < sourceIssued {
            out.append("the target's change sequence \(targetIssued) is below the source's \(sourceIssued)")
        }
        return out
    }
}

/// Moves a relay's whole data from one database to another, empty one (`lnote relay copy`),
/// between any two backends (SQLite to PostgreSQL, PostgreSQL to SQLite, …), then verifies.
///
/// **What is copied**: every table of `RelayStore.Tables` that holds the relay's data —
/// notebooks (ids, epochs and names), tokens (their hashes, devices, expiry, in creation order),
/// operations with their change sequences, content hashes and frames as received, assets,
/// checkpoints, owners, chains. `relay_presence` is not: it describes running processes.
/// The internal notebook key (`nb`) is given anew by the target and mapped.
///
/// **How**: the source is read in one read transaction (one consistent state), in batches
/// of `batchRows` rows in key order, and written in **one target write transaction**: a
/// copy that fails (or is interrupted) leaves the target as empty as it was, and is simply
/// run again; there is nothing to resume. The target must be empty (no notebook, token,
/// operation, asset, checkpoint, owner or chain), checked inside that transaction.
///
/// **Sequences and epochs** ([SYNC-58]): operations keep their sequences and notebooks
/// their epochs, and the target's sequence counter is raised to the greatest sequence the
/// source ever issued, so the next push gets a greater one. A client that synced with the
/// source therefore continues with the target from its cursor, without a clock comparison
/// and without downloading anything again: a copy is not a restore. That holds only if
/// nothing was written to the source after the copy read it: so the copy refuses a source
/// that a running relay serves (a presence row younger than 60 s, or for SQLite another
/// store holding the file). Opening the source runs the relay's own checks first: a source
/// SQLite file found below its high-water mark (or not closed cleanly) gets new epochs
/// there, and the copy carries them, so clients compare clocks once (`sourceEpochsReset`).
///
/// **Verification**, after the commit, in new read transactions on both sides: rows per
/// table, and per notebook the operations' count, greatest sequence, epoch and a SHA-256
/// over their (sequence, document, page, replica, counter, content hash) in sequence order,
/// and its name.
public enum RelayCopy {
    /// The tables copied, in order (a table after those it refers to).
    public static let tables = ["notebooks", "tokens", "ops", "assets", "checkpoints", "owners", "chains"]

    /// The copy's source in the SQLite file at `path`, which must exist: a missing file is
    /// refused (`.notFound`), never created.
    /// - Throws: `.notFound`; what `RelaySQLiteDatabase.init` throws (`.database` for a file
    ///   that is not a database).
    public static func sqliteSource(path: String) throws -> RelaySQLiteDatabase {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw LnoteError(.notFound, "the copy's source does not exist (no relay database at this path)", path: path)
        }
        guard !isDirectory.boolValue else {
            throw LnoteError(.invalidArgument, "the copy's source is a directory, not a relay database", path: path)
        }
        let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
        guard size > 0 else {
            throw LnoteError(.notFound, "the copy's source is an empty file, not a relay database", path: path)
        }
        do {
            return try RelaySQLiteDatabase(path: path)
        } catch let e as LnoteError where e.code == .database {
            throw LnoteError(.database, "cannot read the copy's source (not an SQLite database, or damaged): \(e.message)",
                             path: path, underlying: e.underlying)
        }
    }

    /// Opens `database` as the copy's source: it must already hold a relay store (checked
    /// before anything is created); the store is then opened as a relay opens it (an older
    /// schema upgraded, [SYNC-58]'s checks run).
    /// - Throws: `.notFound` for a database that holds no relay store; what
    ///   `RelayStore.init(database:)` throws. The database is closed on failure.
    public static func openSource(_ database: any RelayDatabase) throws -> RelayStore {
        if let b = database as? any RelayCopyBackend {
            let version: Int64?
            do { version = try b.storedRelaySchemaVersion() } catch let e as LnoteError where e.code == .database {
                try? database.close()
                throw LnoteError(.database, "cannot read the copy's source (not a database this backend reads, damaged, or "
                                 + "unreachable): \(e.message)", path: e.path ?? database.location, underlying: e.underlying)
            } catch {
                try? database.close()
                throw error
            }
            guard version != nil else {
                try? database.close()
                throw LnoteError(.notFound, "the copy's source holds no relay store (an empty database, or other data): "
                                 + "nothing to copy; check the source's location", path: database.location)
            }
        }
        return try RelayStore(database: database)
    }

    /// Copies everything `source` holds into `target` (which must be empty), then verifies.
    ///
    /// - Parameters:
    ///   - batchRows: rows read from the source per batch (at least 1).
    ///   - progress: told the table and rows copied so far after each batch.
    /// - Returns: the report; `verified` says whether the counts and checksums agree (the
    ///   caller decides what a mismatch means; `lnote relay copy` exits 1).
    /// - Throws: `.invalidArgument` when both are one database, when a running relay serves
    ///   the source, or for a backend without `RelayCopyBackend`; `.alreadyExists` when the
    ///   target holds relay data (nothing is written then); `.database` for storage failures
    ///   (the target is left as it was: one transaction).
    public static func copy(from source: RelayStore, to target: RelayStore, batchRows: Int = 512,
                            progress: (@Sendable (String, Int64) -> Void)? = nil) throws -> RelayCopyReport {
        guard batchRows >= 1 else { throw LnoteError(.invalidArgument, "batch rows must be at least 1", path: source.path) }
        guard let from = source.database as? any RelayCopyBackend, let to = target.database as? any RelayCopyBackend else {
            throw LnoteError(.invalidArgument, "this backend cannot be copied (no RelayCopyBackend)", path: source.path)
        }
        guard source.database !== target.database, source.path != target.path else {
            throw LnoteError(.invalidArgument, "the copy's source and target are the same database", path: source.path)
        }
        if from.openedByOtherStores {
            throw LnoteError(.invalidArgument, "the copy's source is open in another relay process (a running `lnote relay`?): "
                             + "stop it first, or writes made after the copy would be lost", path: source.path)
        }
        let serving = try source.stats()
        if serving.relayProcesses > 0 {
            let where_ = serving.processes.map { "\($0.host):\($0.port) pid \($0.pid)" }.joined(separator: ", ")
            throw LnoteError(.invalidArgument, "\(serving.relayProcesses) relay process(es) serve the copy's source (seen in the "
                             + "last \(serving.windowSeconds) s: \(where_)): stop them first, or writes made after the copy "
                             + "would be lost (a relay that crashed stops counting \(serving.windowSeconds) s after its last "
                             + "heartbeat)", path: source.path)
        }
        var report = RelayCopyReport(source: source.path, target: target.path)
        report.batchRows = batchRows
        report.sourceEpochsReset = source.opened.epochsReset

        // `.allocating`: the copy raises the target's sequence counter (allocateSequences).
        let (issued, batches) = try target.database.transaction(.allocating) { ttx in
            try checkEmpty(ttx, target.path)
            return try source.database.transaction(.read) { stx -> (Int64, Int) in
                let issued = try from.issuedSequence(stx)
                if issued > 0 { _ = try target.database.allocateSequences(Int(issued), ttx) }
                let batches = try copyRows(stx, ttx, tokenOrder: source.database.tokenInsertionOrder, batchRows: batchRows,
                                           progress: progress)
                return (issued, batches)
            }
        }
        if issued > 0 { try target.database.issued(through: issued) }
        report.sourceIssued = issued
        report.batches = batches

        // Verification, from what each side committed.
        let (sourceCounts, sourceNotebooks) = try source.database.transaction(.read) { try census($0) }
        let (targetCounts, targetNotebooks) = try target.database.transaction(.read) { try census($0) }
        report.targetIssued = try target.database.transaction(.read) { try to.issuedSequence($0) }
        report.tables = tables.map { RelayCopyTableCount(table: $0, source: sourceCounts[$0] ?? 0, target: targetCounts[$0] ?? 0) }
        report.notebooks = sourceNotebooks.keys.sorted().map {
            RelayCopyNotebookCheck(notebook: $0, source: sourceNotebooks[$0]!, target: targetNotebooks[$0])
        }
        for extra in targetNotebooks.keys where sourceNotebooks[extra] == nil {
            report.tables.append(RelayCopyTableCount(table: "notebook \(extra) (only in the target)", source: 0, target: 1))
        }
        return report
    }

    /// Throws `.alreadyExists` naming what the target holds, unless it holds nothing.
    static func checkEmpty(_ tx: any RelayTransaction, _ location: String) throws {
        var held: [String] = []
        for table in tables {
            let n = try tx.query("SELECT count(*) FROM \(table)").first?.first?.int64 ?? 0
            if n > 0 { held.append("\(n) \(table)") }
        }
        guard held.isEmpty else {
            throw LnoteError(.alreadyExists, "the copy's target is not empty (it holds \(held.joined(separator: ", "))); a copy "
                             + "goes only into an empty database: create a new one (a new file, or CREATE DATABASE), or "
                             + "empty this one yourself if its data is not needed", path: location)
        }
    }

    /// Copies every table from `stx` to `ttx`; returns the number of batches.
    private static func copyRows(_ stx: any RelayTransaction, _ ttx: any RelayTransaction, tokenOrder: String, batchRows: Int,
                                 progress: (@Sendable (String, Int64) -> Void)?) throws -> Int {
        var batches = 0
        // notebooks: the target gives its own key; the source's is mapped to it.
        var nbMap: [Int64: Int64] = [:]
        let insertNotebook = try ttx.prepare("INSERT INTO notebooks (id, epoch, created, name) VALUES (?1, ?2, ?3, ?4)")
        let targetKey = try ttx.prepare("SELECT nb FROM notebooks WHERE id = ?1")
        try paged(stx, "SELECT nb, id, epoch, created, name FROM notebooks WHERE nb > ?1 ORDER BY nb LIMIT ?2",
                  table: "notebooks", batchRows: batchRows, &batches, progress) { r in
            try insertNotebook.run([r[1], r[2], r[3], r[4]])
            guard let old = r[0].int64, let new = try targetKey.first([r[1]])?.first?.int64 else {
                throw LnoteError(.corrupt, "a notebook row of the copy's source has no key or id: \(r[1])")
            }
            nbMap[old] = new
        }
        func nb(_ v: RelayValue) throws -> RelayValue {
            guard let old = v.int64, let new = nbMap[old] else {
                throw LnoteError(.corrupt, "a row of the copy's source names notebook key \(v), which no notebook has")
            }
            return .integer(new)
        }
        // tokens: no key of their own worth keeping; copied in listing order, so the target's
        // insertion order (its tie-break) is the source's. One query: tokens are few.
        let insertToken = try ttx.prepare(
            "INSERT INTO tokens (digest, nb, label, created, device, expires) VALUES (?1, ?2, ?3, ?4, ?5, ?6)")
        var tokens: Int64 = 0
        try stx.prepare("SELECT digest, nb, label, created, device, expires FROM tokens ORDER BY created, \(tokenOrder)")
            .forEach([]) { r in
                try insertToken.run([r[0], try nb(r[1]), r[2], r[3], r[4], r[5]])
                tokens += 1
                if tokens % Int64(batchRows) == 0 { batches += 1; progress?("tokens", tokens) }
                return true
            }
        batches += 1
        progress?("tokens", tokens)
        // ops: keyed by their sequence, kept.
        let insertOp = try ttx.prepare("""
            INSERT INTO ops (seq, nb, document, page, replica, counter, frame, hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
            """)
        try paged(stx, "SELECT seq, nb, document, page, replica, counter, frame, hash FROM ops WHERE seq > ?1 ORDER BY seq LIMIT ?2",
                  table: "ops", batchRows: batchRows, &batches, progress) { r in
            try insertOp.run([r[0], try nb(r[1]), r[2], r[3], r[4], r[5], r[6], r[7]])
        }
        // The rest per notebook, in their key order.
        let perNotebook: [(table: String, select: String, insert: String)] = [
            ("assets", "SELECT nb, id, bytes FROM assets WHERE nb = ?1 ORDER BY id",
             "INSERT INTO assets (nb, id, bytes) VALUES (?1, ?2, ?3)"),
            ("checkpoints", "SELECT nb, document, page, clock, snapshot, uploaded FROM checkpoints WHERE nb = ?1 ORDER BY document, page",
             "INSERT INTO checkpoints (nb, document, page, clock, snapshot, uploaded) VALUES (?1, ?2, ?3, ?4, ?5, ?6)"),
            ("owners", "SELECT nb, replica, device, since FROM owners WHERE nb = ?1 ORDER BY replica",
             "INSERT INTO owners (nb, replica, device, since) VALUES (?1, ?2, ?3, ?4)"),
            ("chains", "SELECT nb, document, page, replica, head, digest FROM chains WHERE nb = ?1 ORDER BY document, page, replica",
             "INSERT INTO chains (nb, document, page, replica, head, digest) VALUES (?1, ?2, ?3, ?4, ?5, ?6)"),
        ]
        for t in perNotebook {
            let insert = try ttx.prepare(t.insert)
            let select = try stx.prepare(t.select)
            var rows: Int64 = 0
            for old in nbMap.keys.sorted() {
                try select.forEach([.integer(old)]) { r in
                    var values = r
                    values[0] = try nb(r[0])
                    try insert.run(values)
                    rows += 1
                    if rows % Int64(batchRows) == 0 { batches += 1; progress?(t.table, rows) }
                    return true
                }
            }
            batches += 1
            progress?(t.table, rows)
        }
        return batches
    }

    /// Reads `select` (`WHERE key > ?1 ORDER BY key LIMIT ?2`, the key first) a batch at a
    /// time, giving each row to `body`.
    private static func paged(_ stx: any RelayTransaction, _ select: String, table: String, batchRows: Int, _ batches: inout Int,
                              _ progress: (@Sendable (String, Int64) -> Void)?, _ body: ([RelayValue]) throws -> Void) throws {
        let statement = try stx.prepare(select)
        var after: Int64 = Int64.min
        var rows: Int64 = 0
        while true {
            let batch = try statement.rows([.integer(after), .integer(Int64(batchRows))])
            for r in batch { try body(r) }
            rows += Int64(batch.count)
            batches += 1
            progress?(table, rows)
            guard batch.count == batchRows, let last = batch.last?[0].int64 else { return }
            after = last
        }
    }

    /// Rows per table, and per notebook (by id) its operations' count, cursor, epoch and
    /// checksum.
    static func census(_ tx: any RelayTransaction) throws -> ([String: Int64], [NotebookID: RelayCopyNotebookCheck.Side]) {
        var counts: [String: Int64] = [:]
        for table in tables { counts[table] = try tx.query("SELECT count(*) FROM \(table)").first?.first?.int64 ?? 0 }
        var notebooks: [NotebookID: RelayCopyNotebookCheck.Side] = [:]
        let ops = try tx.prepare("SELECT seq, document, page, replica, counter, hash FROM ops WHERE nb = ?1 ORDER BY seq")
        for r in try tx.query("SELECT nb, id, epoch, name FROM notebooks") {
            guard let nb = r[0].int64, let id = r[1].string.flatMap(NotebookID.init), let epoch = r[2].int64,
                  let name = r[3].string else {
                throw LnoteError(.corrupt, "malformed notebook row: \(r)")
            }
            var hasher = SHA256()
            var count: Int64 = 0, cursor: Int64 = 0
            try ops.forEach([.integer(nb)]) { o in
                var w = ByteWriter()
                for (i, v) in o.enumerated() {
                    switch v {
                    case .integer(let x): w.u64(UInt64(bitPattern: x))
                    case .blob(let b): w.u32(UInt32(b.count)); w.append(b)
                    default: throw LnoteError(.corrupt, "malformed operation row (column \(i)): \(v)")
                    }
                }
                hasher.update(w.bytes)
                count += 1
                cursor = o[0].int64 ?? cursor
                return true
            }
            notebooks[id] = .init(operations: count, cursor: cursor, epoch: UInt64(bitPattern: epoch), checksum: hasher.finalize(),
                                  name: name)
        }
        return (counts, notebooks)
    }
}
