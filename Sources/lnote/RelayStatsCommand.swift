import Foundation
import LnoteModel
import LnoteRelayPostgres
import LnoteServer

extension CommandTable {
    /// The store of an existing relay database: like `openRelayStore`, but a `--db` file that
    /// does not exist is refused instead of created (a command that only reads must not
    /// leave an empty relay behind a typo).
    static func openExistingRelayStore(_ args: Arguments) throws -> (store: RelayStore, location: String) {
        if let db = args.option("db"), args.option("postgres") == nil, !FileManager.default.fileExists(atPath: db) {
            throw LnoteError(.notFound, "no relay database here (the file does not exist); give the relay's --db FILE.sqlite",
                             path: db)
        }
        return try openRelayStore(args, defaultPoolSize: 1)
    }

    static let relayStats = Command(
        name: "relay stats",
        synopsis: "lnote relay stats \(relayDatabaseSynopsis) [--json]",
        summary: "Count a relay's notebooks, operations, bytes and tokens, and the watchers its running relays hold",
        details: """
        Reads the database in one consistent snapshot (SQLite or PostgreSQL) and prints a
        table: notebooks; operations and the bytes of their frames as received; assets and
        the bytes of their contents; checkpoints and the bytes of their snapshots and clocks;
        tokens (only their hashes are stored). Sums read every row: on a large database
        this takes a while, and it never blocks the relays.

        Connected watchers are the long polls held right now by the relay processes serving
        this database: each `lnote relay` writes its count into the database (when it
        changes, at most once a second, and every 15 s), and deletes its row when it stops
        cleanly. Processes whose last write is older than 60 s are not counted (they died
        or lost the database), and are listed as stale. Times are the database's clock
        (PostgreSQL's server; for SQLite, this host's), so hosts whose clocks differ agree. Then one line per process seen: host, pid, port, long
        polls held, seconds since its last write, start time (UTC), id.

        --json   one object: location (the database, without any password), notebooks,
                 operations, operationBytes (frames), assets, assetBytes (contents),
                 checkpoints, checkpointBytes (snapshots and clocks), tokens, lastSequence
                 (the greatest change sequence held), windowSeconds (60), relayProcesses,
                 longPolls (their sum: the connected watchers), staleProcesses, and
                 processes: [{id, host, pid, port, started, heartbeat (ms since 1970, by
                 the database's clock), longPolls}]. Byte counts are exact, in bytes.
        """,
        options: relayDatabaseOptions,
        flags: ["json"],
        run: { args, console in
            try args.expect(0, "no positional arguments")
            let (store, location) = try openExistingRelayStore(args)
            defer { try? store.close() }
            let s = try store.stats()
            let now = s.now
            if args.flag("json") {
                console.raw(relayStatsJSON(s, location: location).text(.pretty))
                return Exit.ok
            }
            console.out("relay stats of \(location) (schema version \(RelayStore.schemaVersion))")
            let rows: [[String]] = [
                ["WHAT", "COUNT", "BYTES", "BYTES OF"],
                ["notebooks", String(s.notebooks), "", ""],
                ["operations", String(s.operations), String(s.operationBytes), "frames as received"],
                ["assets", String(s.assets), String(s.assetBytes), "contents"],
                ["checkpoints", String(s.checkpoints), String(s.checkpointBytes), "snapshots and clocks"],
                ["tokens", String(s.tokens), "", "(hashes only)"],
            ]
            for line in table(rightAligned(rows, columns: [1, 2])) { console.out(line.trimmingTrailingSpaces) }
            console.out("watchers: \(s.relayProcesses) relay process\(s.relayProcesses == 1 ? "" : "es") seen in the last "
                        + "\(s.windowSeconds) s, \(s.longPolls) long poll\(s.longPolls == 1 ? "" : "s") held"
                        + (s.staleProcesses > 0 ? " (\(s.staleProcesses) stale, not counted)" : ""))
            if !s.processes.isEmpty {
                var procs: [[String]] = [["HOST", "PID", "PORT", "LONG-POLLS", "AGE-S", "STARTED", "ID"]]
                for p in s.processes {
                    procs.append([p.host, String(p.pid), String(p.port), String(p.longPolls),
                                  String(max(0, now - p.heartbeat) / 1000), timestamp(p.started), p.id])
                }
                for line in table(rightAligned(procs, columns: [1, 2, 3, 4])) { console.out(line.trimmingTrailingSpaces) }
            }
            return Exit.ok
        })

    /// `--json` of `relay stats`.
    static func relayStatsJSON(_ s: RelayStats, location: String) -> CanonicalJSON {
        .object([
            "location": .string(location),
            "notebooks": .int(s.notebooks),
            "operations": .int(s.operations),
            "operationBytes": .int(s.operationBytes),
            "assets": .int(s.assets),
            "assetBytes": .int(s.assetBytes),
            "checkpoints": .int(s.checkpoints),
            "checkpointBytes": .int(s.checkpointBytes),
            "tokens": .int(s.tokens),
            "lastSequence": .int(s.lastSequence),
            "windowSeconds": .int(s.windowSeconds),
            "relayProcesses": .int(Int64(s.relayProcesses)),
            "longPolls": .int(s.longPolls),
            "staleProcesses": .int(s.staleProcesses),
            "processes": .array(s.processes.map { p in
                .object(["id": .string(p.id), "host": .string(p.host), "pid": .int(p.pid), "port": .int(p.port),
                         "started": .int(p.started), "heartbeat": .int(p.heartbeat), "longPolls": .int(p.longPolls)])
            }),
        ])
    }

    /// `rows` with the cells of `columns` padded on the left to the column's width (numbers
    /// line up by their last digit); the first row (the header) included.
    static func rightAligned(_ rows: [[String]], columns: Set<Int>) -> [[String]] {
        var widths: [Int: Int] = [:]
        for r in rows { for c in columns where c < r.count { widths[c] = max(widths[c] ?? 0, r[c].count) } }
        return rows.map { r in
            r.enumerated().map { i, cell in
                guard let w = widths[i], cell.count < w else { return cell }
                return String(repeating: " ", count: w - cell.count) + cell
            }
        }
    }
}
