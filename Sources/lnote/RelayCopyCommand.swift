import Foundation
import LnoteModel
import LnoteRelayPostgres
import LnoteServer

extension CommandTable {
    static let relayCopy = Command(
        name: "relay copy",
        synopsis: "lnote relay copy --from (FILE.sqlite | postgresql://…) --to (postgresql://… | FILE.sqlite) [--json]",
        summary: "Copy a relay's whole data into an empty database (SQLite to PostgreSQL, or back), then verify it",
        details: """
        A location starting with postgresql:// or postgres:// is a PostgreSQL database (a
        password is better kept in PGPASSWORD or ~/.pgpass; it is never printed); anything
        else is an SQLite file. The source must hold a relay store (a missing file, an empty
        or foreign database is refused) and no relay may be serving it: stop the relays
        first (one seen in the last 60 s by `lnote relay stats` blocks the copy), or pushes
        made after the copy read the source would be lost. The source is opened as a relay
        opens it (an older schema is upgraded first).

        The target must be empty (a new file, or a new PostgreSQL database; `lnote relay
        migrate` on it first is fine): one holding any notebook, token or operation is
        refused and left untouched. Everything is copied: notebooks with their epochs,
        tokens (only their hashes exist), operations with their change sequences, assets,
        checkpoints, device owners, chains. The source is read in one snapshot, in batches
        of 512 rows, and written in one transaction: a copy that fails leaves the target
        empty, so run it again (nothing to resume). The target's change sequence continues
        after the greatest the source ever issued: clients that synced with the old relay
        continue with the new one from where they were, without downloading anything again
        (a copy is not a restore: no epoch changes; Protocol/sync-protocol.md [SYNC-58]).

        Then both sides are counted: rows per table, and per notebook its operations, last
        sequence, epoch and a SHA-256 over their (sequence, log, id, content hash). The
        counts are printed; when anything differs the command says what and exits 1.

        --json   one object: source, target (locations, without passwords), verified
                 (bool), sourceIssued and targetIssued (change sequences), batches,
                 batchRows, milliseconds, tables: [{table, source, target}], notebooks: [{id,
                 operations, cursor, epoch, sourceChecksum, targetChecksum (hex; null when
                 missing), matches}], differences: [text], sourceEpochsReset (text or null).
        """,
        options: ["from", "to"],
        flags: ["json"],
        run: { args, console in
            try args.expect(0, "no positional arguments")
            guard let from = args.option("from"), let to = args.option("to") else {
                throw Arguments.UsageError(message: "--from SOURCE and --to TARGET are required "
                                           + "(an SQLite file or a postgresql:// URL each)")
            }
            let started = ContinuousClock.now
            let source = try RelayCopy.openSource(try relayCopyDatabase(from, source: true))
            defer { try? source.close() }
            let targetIsNewFile = !isPostgresLocation(to) && !FileManager.default.fileExists(atPath: to)
            let report: RelayCopyReport
            do {
                let target = try RelayStore(database: try relayCopyDatabase(to, source: false))
                do {
                    report = try RelayCopy.copy(from: source, to: target) { table, rows in
                        console.progress("copying \(table): \(rows) rows")
                    }
                    console.endProgress()
                } catch {
                    console.endProgress()
                    try? target.close()
                    throw error
                }
                try target.close()
            } catch {
                // A target file this command made and could not fill is removed again.
                if targetIsNewFile {
                    for suffix in ["", "-wal", "-shm", ".hwm", ".hwm.lock"] { try? FileManager.default.removeItem(atPath: to + suffix) }
                }
                throw error
            }
            let elapsed = ContinuousClock.now - started
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
            if args.flag("json") {
                console.raw(relayCopyJSON(report, seconds: seconds).text(.pretty))
            } else {
                printRelayCopy(report, seconds: seconds, console)
            }
            if !report.verified {
                console.err("lnote relay copy: verification failed, the target differs from the source: "
                            + report.differences.joined(separator: "; "))
                return Exit.failure
            }
            return Exit.ok
        })

    /// Whether a `--from`/`--to` names a PostgreSQL database.
    static func isPostgresLocation(_ s: String) -> Bool { s.hasPrefix("postgresql://") || s.hasPrefix("postgres://") }

    /// The database a `--from`/`--to` names: a source SQLite file must exist.
    static func relayCopyDatabase(_ location: String, source: Bool) throws -> any RelayDatabase {
        if isPostgresLocation(location) { return try RelayPostgresDatabase(url: location, poolSize: 1) }
        return source ? try RelayCopy.sqliteSource(path: location) : try RelaySQLiteDatabase(path: location)
    }

    static func printRelayCopy(_ r: RelayCopyReport, seconds: Double, _ console: Console) {
        console.out("copied \(r.source) to \(r.target) in one transaction (\(r.batches) batches of up to \(r.batchRows) rows, "
                    + String(format: "%.1f s)", seconds))
        if let sign = r.sourceEpochsReset {
            console.out("note: opening the source found \(sign); its notebooks got new epochs before the copy, "
                        + "so clients compare clocks once")
        }
        var rows: [[String]] = [["TABLE", "SOURCE", "TARGET", ""]]
        for t in r.tables { rows.append([t.table, String(t.source), String(t.target), t.matches ? "ok" : "DIFFERS"]) }
        for line in table(rightAligned(rows, columns: [1, 2])) { console.out(line.trimmingTrailingSpaces) }
        var nbs: [[String]] = [["NOTEBOOK", "OPERATIONS", "LAST-SEQ", "CHECKSUM", ""]]
        for n in r.notebooks {
            nbs.append([n.notebook.description, String(n.source.operations), String(n.source.cursor),
                        String(hexString(n.source.checksum).prefix(16)), n.matches ? "ok" : "DIFFERS"])
        }
        if !r.notebooks.isEmpty {
            for line in table(rightAligned(nbs, columns: [1, 2])) { console.out(line.trimmingTrailingSpaces) }
        }
        if r.verified {
            console.out("verified: every count and checksum is equal; the target's change sequence continues after \(r.sourceIssued)")
        }
    }

    static func relayCopyJSON(_ r: RelayCopyReport, seconds: Double) -> CanonicalJSON {
        .object([
            "source": .string(r.source),
            "target": .string(r.target),
            "verified": .bool(r.verified),
            "sourceIssued": .int(r.sourceIssued),
            "targetIssued": .int(r.targetIssued),
            "batches": .int(Int64(r.batches)),
            "batchRows": .int(Int64(r.batchRows)),
            "milliseconds": .int(Int64((seconds * 1000).rounded())),
            "tables": .array(r.tables.map { .object(["table": .string($0.table), "source": .int($0.source), "target": .int($0.target)]) }),
            "notebooks": .array(r.notebooks.map { n in
                .object(["id": .string(n.notebook.description), "operations": .int(n.source.operations),
                         "cursor": .int(n.source.cursor), "epoch": .uint(n.source.epoch),
                         "sourceChecksum": .string(hexString(n.source.checksum)),
                         "targetChecksum": n.target.map { .string(hexString($0.checksum)) } ?? .null,
                         "matches": .bool(n.matches)])
            }),
            "differences": .array(r.differences.map { .string($0) }),
            "sourceEpochsReset": r.sourceEpochsReset.map { .string($0.description) } ?? .null,
        ])
    }
}
