import Foundation
import LnoteModel
import LnoteSync
import LnoteRelayPostgres
import LnoteServer

extension CommandTable {
    static let relay = Command(
        name: "relay",
        synopsis: "lnote relay \(relayDatabaseSynopsis) [--port N] [--bind ADDR] [--tls-cert PEM --tls-key PEM] [--max-connections N] [--max-connections-per-ip N]",
        summary: "Run the store-and-forward sync server for many notebooks (SQLite or PostgreSQL)",
        details: """
        Keeps operations, assets and checkpoints in FILE.sqlite (WAL). Notebooks and their
        tokens are made with `lnote relay notebook create` and `lnote relay token create`.
        Binds to 127.0.0.1 unless --bind says otherwise. Sync requests may wait for changes
        (long polls of at most 60 s): each is held without a thread, so many devices can
        watch at once; at most --max-connections connections (default 4096) and
        --max-connections-per-ip from one address (default 256; 0: no limit). Stops cleanly
        on SIGINT/SIGTERM: long polls held then are answered 503, which clients retry.

        Beside the database, FILE.sqlite.hwm keeps the greatest change sequence the relay
        issued (and FILE.sqlite.hwm.lock which stores have it open). When the database is
        found below it (restored from a backup) or the relay was not stopped cleanly, every
        notebook gets a new epoch and clients push again what the relay lacks. Restore the
        database alone, never an old .hwm with it.

        With --postgres URL (`postgresql://user@host/db`, or libpq's `key=value` form; a
        password is better kept in PGPASSWORD or ~/.pgpass, and is never printed), the relay
        keeps its data in PostgreSQL instead, with at most --pool-size connections (default
        8) serving requests at once. Several relay processes may share one database, each
        on its own port or host: a change stored through one wakes the long polls held by
        the others (LISTEN/NOTIFY). The schema is created or upgraded when a relay starts
        (`lnote relay migrate` does it on its own). While the database is unreachable,
        requests are answered with errors and the relay keeps running; once it is back,
        requests succeed again.

        Each relay process records in the database that it serves it (host, pid, port) and
        how many long polls it holds, for `lnote relay stats`; it deletes that row when it
        stops cleanly.

        A read-only web view of each notebook (its library, each document's pages as SVG,
        its conflicts), drawn from the operations and checkpoints held, is served behind
        the notebook's tokens: open URL/view/<id>#token=TOKEN in a browser (the fragment is
        never sent; the page sends the token as the bearer token). An answer that would read
        more than 64 MiB of a notebook is refused (413): sync it to a folder and use
        `lnote serve` there.
        """,
        options: serverOptions.union(relayDatabaseOptions),
        run: { args, console in
            try args.expect(0, "no positional arguments")
            let signals = Signals.trap()
            // A relay that cannot start removes the database file it just made (a mistyped
            // path, a busy port): nothing is left behind that looks like a relay.
            let made = args.option("db").map { !FileManager.default.fileExists(atPath: $0) } ?? false
            func removeMade() {
                guard made, let path = args.option("db") else { return }
                for suffix in ["", "-wal", "-shm", ".hwm", ".hwm.lock"] { try? FileManager.default.removeItem(atPath: path + suffix) }
            }
            let (store, db) = try openRelayStore(args, defaultPoolSize: RelayPostgresDatabase.defaultPoolSize, creating: true)
            if let from = store.opened.upgradedFrom, from > 0 {
                console.err("lnote relay: upgraded \(db) from schema version \(from) to \(RelayStore.schemaVersion)"
                            + (store.opened.checkpointsDropped > 0
                               ? "; \(store.opened.checkpointsDropped) checkpoints the operations do not give were dropped" : ""))
            }
            if let sign = store.opened.epochsReset {
                console.err("lnote relay: \(sign); every notebook has a new epoch, so clients compare clocks and push again what was lost")
            }
            returnLargeBuffersToTheSystem()
            let server: RelayServer
            do {
                server = try RelayServer(store: store, configuration: try serverConfiguration(args, connections: (4096, 256)))
            } catch {
                try? store.close()
                removeMade()
                throw error
            }
            ServerLog(console: console, prefix: "lnote relay").attach(to: server.http)
            // `lnote relay stats` counts this process and the long polls it holds.
            let polls = server.longPolls
            let presence = RelayPresence(store: store, port: Int(server.http.port),
                                         log: { console.err("lnote relay: \($0)") }) { polls.waiting }
            console.out("url: \(server.http.baseURL)")
            console.err("lnote relay: serving \(db); notebook URLs are \(server.http.baseURL)/v1/notebooks/<id>, "
                        + "web views \(server.http.baseURL)/view/<id>#token=TOKEN; Ctrl-C stops")
            let signal = await signals.wait()
            // Polls answered first, then this process's presence row deleted, then the store closed.
            let stopped = Result { try server.close() }
            presence.close()
            try store.close()
            try stopped.get()
            console.err("lnote relay: stopped (\(signal == SIGINT ? "SIGINT" : "SIGTERM"))")
            return Exit.ok
        })

    static let relayNotebookCreate = Command(
        name: "relay notebook create",
        synopsis: "lnote relay notebook create \(relayDatabaseSynopsis) [--name NAME] [--url BASE]",
        summary: "Create a notebook on a relay; prints its id, or its URL with --url",
        details: """
        --name NAME  what you call it, shown by `relay notebook list` (printable, at most 200
                     bytes, no space at either end; names need not be unique: commands take
                     the id). `relay notebook rename` changes it.
        --url BASE   the relay's address as clients reach it (http(s)://HOST:PORT, what `lnote
                     relay` prints as url:, with the host other machines use): prints the
                     notebook's URL for `lnote sync` and `lnote remote add` instead of its id.
        """,
        options: relayDatabaseOptions.union(["url", "name"]),
        run: { args, console in
            try args.expect(0, "no positional arguments")
            var base: String?
            if let url = args.option("url") {
                guard SyncRunner.isURL(url), let c = URLComponents(string: url), c.host?.isEmpty == false,
                      c.path.isEmpty || c.path == "/", c.query == nil else {
                    throw Arguments.UsageError(message: "--url needs the relay's address, http(s)://HOST:PORT (got \"\(url)\")")
                }
                base = url.hasSuffix("/") ? String(url.dropLast()) : url
            }
            let name = args.option("name") ?? ""
            if args.option("name") != nil {
                do { try RelayStore.checkNotebookName(name) } catch let e as LnoteError {
                    throw Arguments.UsageError(message: "--name: \(e.message)")
                }
            }
            let (store, _) = try openRelayStore(args, creating: true)
            defer { try? store.close() }
            let id = try store.createNotebook(name: name)
            console.out(base.map { "\($0)/v1/notebooks/\(id)" } ?? id.description)
            return Exit.ok
        })

    static let relayNotebookList = Command(
        name: "relay notebook list",
        synopsis: "lnote relay notebook list \(relayDatabaseSynopsis)",
        summary: "List a relay's notebooks with their names and operation, asset and token counts",
        details: """
        One line per notebook under a header: ID, OPS, ASSETS, CHECKPOINTS, TOKENS, CURSOR (its
        greatest change sequence), NAME ("-" when it has none). Nothing on stdout when there is
        none.
        --json   an array of {"id", "name" ("" when it has none), "epoch", "cursor",
                 "operations", "assets", "checkpoints", "tokens"}
        """,
        options: relayDatabaseOptions,
        flags: ["json"],
        run: { args, console in
            let (store, _) = try openRelayStore(args)
            defer { try? store.close() }
            let list = try store.notebooks()
            if args.flag("json") {
                console.raw(CanonicalJSON.array(list.map { n in
                    .object(["id": .string(n.id.description), "name": .string(n.name), "epoch": .uint(n.epoch), "cursor": .uint(n.cursor),
                             "operations": .int(Int64(n.operations)), "assets": .int(Int64(n.assets)),
                             "checkpoints": .int(Int64(n.checkpoints)), "tokens": .int(Int64(n.tokens))])
                }).text(.pretty))
                return Exit.ok
            }
            guard !list.isEmpty else {
                console.err("lnote relay notebook list: no notebooks yet (lnote relay notebook create makes one)")
                return Exit.ok
            }
            let rows = [["ID", "OPS", "ASSETS", "CHECKPOINTS", "TOKENS", "CURSOR", "NAME"]]
                + list.map { ["\($0.id)", "\($0.operations)", "\($0.assets)", "\($0.checkpoints)", "\($0.tokens)", "\($0.cursor)",
                              $0.name.isEmpty ? "-" : $0.name] }
            for line in table(rows) { console.out(line.trimmingTrailingSpaces) }
            return Exit.ok
        })

    static let relayNotebookRename = Command(
        name: "relay notebook rename",
        synopsis: "lnote relay notebook rename \(relayDatabaseSynopsis) ID NAME",
        summary: "Give a relay's notebook another name (\"\" removes it); its id, URL and tokens stay",
        options: relayDatabaseOptions,
        run: { args, console in
            try args.expect(2, "ID NAME")
            let id = try relayNotebookID(args.positionals[0])
            let name = args.positionals[1]
            if !name.isEmpty {
                do { try RelayStore.checkNotebookName(name) } catch let e as LnoteError {
                    throw Arguments.UsageError(message: "NAME: \(e.message)")
                }
            }
            let (store, _) = try openRelayStore(args)
            defer { try? store.close() }
            try store.renameNotebook(id, to: name)
            return Exit.ok
        })

    static let relayNotebookDelete = Command(
        name: "relay notebook delete",
        synopsis: "lnote relay notebook delete \(relayDatabaseSynopsis) ID [--yes]",
        summary: "Delete a notebook from a relay with everything it holds",
        details: """
        Removes, in one transaction, the notebook's operations, its assets (a notebook shares
        none with another), checkpoints, tokens (its devices are refused from then on),
        replica owners and chains, then the notebook itself; its change sequences are never
        issued again. Long polls a relay holds for it are answered: at once on PostgreSQL, when
        their wait runs out for a running SQLite relay (another process). The folders that synced
        with it keep their copies.
        A notebook that holds operations is deleted only with --yes (without it, the command
        says how many and changes nothing); an empty one is deleted at once. Prints what was
        removed.
        """,
        options: relayDatabaseOptions,
        flags: ["yes"],
        run: { args, console in
            try args.expect(1, "ID")
            let id = try relayNotebookID(args.positionals[0])
            let (store, _) = try openRelayStore(args)
            defer { try? store.close() }
            let d: RelayStore.NotebookDeletion
            do {
                d = try store.deleteNotebook(id, onlyIfEmpty: !args.flag("yes"))
            } catch let e as LnoteError where e.code == .invalidState {
                throw CLIError("\(e.message); nothing was deleted: add --yes to delete it with them")
            }
            let n = d.notebook
            let count = SyncRunner.count
            console.out("deleted notebook \(id)\(n.name.isEmpty ? "" : " (\(n.name))"): \(count(n.operations, "operation")), "
                        + "\(count(n.assets, "asset")), \(count(n.checkpoints, "checkpoint")), \(count(n.tokens, "token"))")
            return Exit.ok
        })

    /// A notebook id given as an argument; a usage error (exit 2) when it is not a UUID.
    static func relayNotebookID(_ text: String) throws -> NotebookID {
        guard let id = NotebookID(text) else {
            throw Arguments.UsageError(message: "\"\(text)\" is not a notebook id (a UUID, as `lnote relay notebook list` prints)")
        }
        return id
    }

    static let relayTokenCreate = Command(
        name: "relay token create",
        synopsis: "lnote relay token create \(relayDatabaseSynopsis) --notebook ID --device NAME [--label TEXT] [--expires DURATION]",
        summary: "Create a bearer token for one device of a notebook; prints the token (only its hash is stored)",
        details: """
        The device owns the replica ids it pushes its own work under: another device's push of
        new operations authored under them is refused (403). Several tokens may name one device
        (a replaced token). Tokens made before devices existed act as the device
        token-<first 8 hex digits of their hash>.

        With --expires (a whole number and a unit: 90m, 12h, 30d, 2w), the token stops working
        that long from now: the relay answers it 401 token_expired. Without it, the token works
        until it is revoked.
        """,
        options: relayDatabaseOptions.union(["notebook", "label", "device", "expires"]),
        run: { args, console in
            try args.expect(0, "no positional arguments")
            guard let nb = args.option("notebook"), let id = NotebookID(nb) else {
                throw Arguments.UsageError(message: "--notebook UUID is required")
            }
            guard let device = args.option("device") else {
                throw Arguments.UsageError(message: "--device NAME is required (the device this token belongs to)")
            }
            try RelayToken.checkDeviceName(device)
            var lifetime: Duration?
            if let text = args.option("expires") {
                guard let d = RelayToken.parseLifetime(text) else {
                    throw Arguments.UsageError(message: "--expires needs a whole number and a unit m, h, d or w (90m, 12h, 30d, 2w), "
                                               + "at most 100 years; got \"\(text)\"")
                }
                lifetime = d
            }
            let (store, _) = try openRelayStore(args)
            defer { try? store.close() }
            console.out(try store.createToken(notebook: id, label: args.option("label") ?? "", device: device, expiresIn: lifetime))
            return Exit.ok
        })

    static let relayTokenList = Command(
        name: "relay token list",
        synopsis: "lnote relay token list \(relayDatabaseSynopsis) --notebook ID",
        summary: "List a notebook's tokens: id, device, creation date, expiry (UTC), label; never the tokens",
        details: """
        One line per token under a header: ID (what `relay token revoke` takes), DEVICE,
        CREATED, EXPIRES ("never", a date, or "expired DATE"), LABEL. Nothing on stdout when
        there is none.
        --json   an array of {"id", "device", "device_named", "created", "expires" (ms since
                 1970, or null), "expired", "label"}
        """,
        options: relayDatabaseOptions.union(["notebook"]),
        flags: ["json"],
        run: { args, console in
            guard let nb = args.option("notebook"), let id = NotebookID(nb) else {
                throw Arguments.UsageError(message: "--notebook UUID is required")
            }
            let (store, _) = try openRelayStore(args)
            defer { try? store.close() }
            let now = Int64((Date().timeIntervalSince1970 * 1000).rounded())
            let tokens = try store.listTokens(notebook: id)
            if args.flag("json") {
                console.raw(CanonicalJSON.array(tokens.map { t in
                    .object(["id": .string(t.id), "device": .string(t.device), "device_named": .bool(t.deviceNamed),
                             "created": .int(t.created), "expires": t.expires.map { .int($0) } ?? .null,
                             "expired": .bool(t.isExpired(at: now)), "label": .string(t.label)])
                }).text(.pretty))
                return Exit.ok
            }
            guard !tokens.isEmpty else {
                console.err("lnote relay token list: no tokens for notebook \(id) (lnote relay token create makes one)")
                return Exit.ok
            }
            var rows = [["ID", "DEVICE", "CREATED", "EXPIRES", "LABEL"]]
            for t in tokens {
                let device = t.deviceNamed ? t.device : "\(t.device) (unnamed)"
                let expiry = t.expires.map { (t.isExpired(at: now) ? "expired " : "") + utcDate(milliseconds: $0) } ?? "never"
                rows.append([t.id, device, utcDate(milliseconds: t.created), expiry, t.label.isEmpty ? "-" : t.label])
            }
            for line in table(rows) { console.out(line.trimmingTrailingSpaces) }
            return Exit.ok
        })

    /// `2026-03-01T12:00:00Z` for milliseconds since 1970.
    static func utcDate(milliseconds: Int64) -> String {
        let f = ISO8601DateFormatter()
        f.timeZone = TimeZone(identifier: "UTC")
        return f.string(from: Date(timeIntervalSince1970: Double(milliseconds) / 1000))
    }

    static let relayTokenRevoke = Command(
        name: "relay token revoke",
        synopsis: "lnote relay token revoke \(relayDatabaseSynopsis) --notebook ID TOKEN-ID",
        summary: "Revoke a token by the id `relay token list` prints",
        options: relayDatabaseOptions.union(["notebook"]),
        run: { args, console in
            try args.expect(1, "TOKEN-ID")
            guard let nb = args.option("notebook"), let id = NotebookID(nb) else {
                throw Arguments.UsageError(message: "--notebook UUID is required")
            }
            let (store, _) = try openRelayStore(args)
            defer { try? store.close() }
            try store.revokeToken(notebook: id, id: args.positionals[0])
            return Exit.ok
        })
}
