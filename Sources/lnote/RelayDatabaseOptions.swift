import Foundation
import LnoteModel
import LnoteRelayPostgres
import LnoteServer

/// Where the relay commands keep their data: `--db FILE.sqlite` (SQLite, the default
/// backend) or `--postgres URL` (PostgreSQL, issue 17; several relay processes may share
/// one database), with `--pool-size N` connections for the latter.
extension CommandTable {
    /// The options every relay command that opens the store takes.
    static let relayDatabaseOptions: Set<String> = ["db", "postgres", "pool-size"]

    /// How the commands' help names the choice.
    static let relayDatabaseSynopsis = "(--db FILE.sqlite | --postgres URL [--pool-size N])"

    /// The store the options name, opened (schema created or upgraded), and where it is
    /// (the file, or the URL without its password). On PostgreSQL the store holds no LISTEN
    /// connection until something observes its changes (`RelayStore.observeChanges`, which
    /// only `lnote relay`'s server does): the admin commands use the pool alone.
    /// - Parameters:
    ///   - defaultPoolSize: PostgreSQL connections when `--pool-size` is not given.
    ///   - creating: whether a `--db` file that does not exist is made (the relay, `relay
    ///     migrate`, `relay notebook create`); the other commands read a relay, and a
    ///     mistyped path must not become a new, empty relay database.
    static func openRelayStore(_ args: Arguments, defaultPoolSize: Int = 2,
                               creating: Bool = false) throws -> (store: RelayStore, location: String) {
        let db = args.option("db"), url = args.option("postgres")
        switch (db, url) {
        case (let db?, nil):
            if args.option("pool-size") != nil {
                throw Arguments.UsageError(message: "--pool-size is for --postgres; an SQLite relay has one connection")
            }
            if !creating, !FileManager.default.fileExists(atPath: db) {
                throw CLIError("no relay database at \(db): check the path (lnote relay notebook create --db \(db), "
                               + "or lnote relay migrate --db \(db), makes a new one)")
            }
            return (try RelayStore(path: db), db)
        case (nil, let url?):
            let size = try args.int("pool-size") ?? defaultPoolSize
            guard (1...1000).contains(size) else {
                throw Arguments.UsageError(message: "--pool-size needs a whole number from 1 to 1000, got \(size)")
            }
            let database = try RelayPostgresDatabase(url: url, poolSize: size)
            return (try RelayStore(database: database), database.location)
        case (_?, _?):
            throw Arguments.UsageError(message: "give --db FILE.sqlite or --postgres URL, not both")
        case (nil, nil):
            throw Arguments.UsageError(message: "--db FILE.sqlite or --postgres URL is required")
        }
    }

    static let relayMigrate = Command(
        name: "relay migrate",
        synopsis: "lnote relay migrate \(relayDatabaseSynopsis)",
        summary: "Create or upgrade a relay's database schema, and say what was done",
        details: """
        Creates the relay's tables in an empty database (an SQLite file that does not exist
        yet, or a PostgreSQL database without tables), upgrades an older schema to this
        build's version, or says that it is current. A newer schema, or a database holding
        other tables, is refused and left as it is. `lnote relay` does the same when it
        starts; run this first to do it (and see it done) before any relay serves. With
        PostgreSQL, relays starting at once take turns: the schema is created once.
        """,
        options: relayDatabaseOptions,
        run: { args, console in
            try args.expect(0, "no positional arguments")
            let (store, location) = try openRelayStore(args, defaultPoolSize: 1, creating: true)
            defer { try? store.close() }
            let version = RelayStore.schemaVersion
            switch store.opened.upgradedFrom {
            case nil: console.out("\(location): schema version \(version) is current; nothing to do")
            case 0?: console.out("\(location): created the relay schema, version \(version)")
            case let from?:
                console.out("\(location): upgraded the relay schema from version \(from) to \(version)"
                            + (store.opened.checkpointsDropped > 0
                               ? "; dropped \(store.opened.checkpointsDropped) checkpoints the operations do not give" : ""))
            }
            if let sign = store.opened.epochsReset {
                console.out("\(location): \(sign); every notebook has a new epoch")
            }
            return Exit.ok
        })
}
