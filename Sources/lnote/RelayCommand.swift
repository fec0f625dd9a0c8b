import Foundation
import LnoteModel
import LnoteSync
import LnoteServer

extension CommandTable {
    static let relay = Command(
        name: "relay",
        synopsis: "lnote relay --db FILE.sqlite [--port N] [--bind ADDR] [--tls-cert PEM --tls-key PEM] [--url-host HOST]",
        summary: "Run the store-and-forward sync server for many notebooks (SQLite)",
        details: """
        Keeps operations, assets and checkpoints in FILE.sqlite (WAL). Notebooks and their
        tokens are made with `lnote relay notebook create` and `lnote relay token create`.
        Binds to 127.0.0.1 unless --bind says otherwise. Stops cleanly on SIGINT/SIGTERM.
        """,
        options: serverOptions.union(["db"]),
        run: { args, console in
            try args.expect(0, "no positional arguments")
            guard let db = args.option("db") else { throw Arguments.UsageError(message: "--db FILE is required") }
            let signals = Signals.trap()
            let store = try RelayStore(path: db)
            let server: RelayServer
            do { server = try RelayServer(store: store, configuration: try serverConfiguration(args)) } catch {
                try? store.close()
                throw error
            }
            console.out("url: \(server.http.baseURL)")
            console.err("lnote relay: serving \(db); notebook URLs are \(server.http.baseURL)/v1/notebooks/<id>; Ctrl-C stops")
            let signal = await signals.wait()
            try server.close()
            try store.close()
            console.err("lnote relay: stopped (\(signal == SIGINT ? "SIGINT" : "SIGTERM"))")
            return Exit.ok
        })

    static let relayNotebookCreate = Command(
        name: "relay notebook create",
        synopsis: "lnote relay notebook create --db FILE.sqlite",
        summary: "Create a notebook on a relay; prints its id",
        options: ["db"],
        run: { args, console in
            try args.expect(0, "no positional arguments")
            guard let db = args.option("db") else { throw Arguments.UsageError(message: "--db FILE is required") }
            let store = try RelayStore(path: db)
            defer { try? store.close() }
            console.out(try store.createNotebook().description)
            return Exit.ok
        })

    static let relayNotebookList = Command(
        name: "relay notebook list",
        synopsis: "lnote relay notebook list --db FILE.sqlite",
        summary: "List a relay's notebooks with their operation, asset and token counts",
        options: ["db"],
        run: { args, console in
            guard let db = args.option("db") else { throw Arguments.UsageError(message: "--db FILE is required") }
            let store = try RelayStore(path: db)
            defer { try? store.close() }
            for n in try store.notebooks() {
                console.out("\(n.id)  ops \(n.operations)  assets \(n.assets)  tokens \(n.tokens)  cursor \(n.cursor)")
            }
            return Exit.ok
        })

    static let relayTokenCreate = Command(
        name: "relay token create",
        synopsis: "lnote relay token create --db FILE.sqlite --notebook ID [--label TEXT]",
        summary: "Create a bearer token for one notebook; prints the token (only its hash is stored)",
        options: ["db", "notebook", "label"],
        run: { args, console in
            try args.expect(0, "no positional arguments")
            guard let db = args.option("db") else { throw Arguments.UsageError(message: "--db FILE is required") }
            guard let nb = args.option("notebook"), let id = NotebookID(nb) else {
                throw Arguments.UsageError(message: "--notebook UUID is required")
            }
            let store = try RelayStore(path: db)
            defer { try? store.close() }
            console.out(try store.createToken(notebook: id, label: args.option("label") ?? ""))
            return Exit.ok
        })

    static let relayTokenList = Command(
        name: "relay token list",
        synopsis: "lnote relay token list --db FILE.sqlite --notebook ID",
        summary: "List a notebook's tokens (ids and labels, never the tokens)",
        options: ["db", "notebook"],
        run: { args, console in
            guard let db = args.option("db") else { throw Arguments.UsageError(message: "--db FILE is required") }
            guard let nb = args.option("notebook"), let id = NotebookID(nb) else {
                throw Arguments.UsageError(message: "--notebook UUID is required")
            }
            let store = try RelayStore(path: db)
            defer { try? store.close() }
            for t in try store.listTokens(notebook: id) { console.out("\(t.id)  \(t.label)") }
            return Exit.ok
        })

    static let relayTokenRevoke = Command(
        name: "relay token revoke",
        synopsis: "lnote relay token revoke --db FILE.sqlite --notebook ID TOKEN-ID",
        summary: "Revoke a token by the id `relay token list` prints",
        options: ["db", "notebook"],
        run: { args, console in
            try args.expect(1, "TOKEN-ID")
            guard let db = args.option("db") else { throw Arguments.UsageError(message: "--db FILE is required") }
            guard let nb = args.option("notebook"), let id = NotebookID(nb) else {
                throw Arguments.UsageError(message: "--notebook UUID is required")
            }
            let store = try RelayStore(path: db)
            defer { try? store.close() }
            try store.revokeToken(notebook: id, id: args.positionals[0])
            return Exit.ok
        })
}
