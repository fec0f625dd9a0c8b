import Foundation
import LnoteModel
import LnoteSync
import LnoteServer

/// Relay commands of `Protocol/sync-protocol.md` §6: owners, epochs, quarantine.
extension CommandTable {
    static func notebookOption(_ args: Arguments, required: Bool) throws -> NotebookID? {
        guard let nb = args.option("notebook") else {
            if required { throw Arguments.UsageError(message: "--notebook UUID is required") }
            return nil
        }
        guard let id = NotebookID(nb) else { throw Arguments.UsageError(message: "--notebook needs a UUID, got \"\(nb)\"") }
        return id
    }

    static let relayDevices = Command(
        name: "relay devices",
        synopsis: "lnote relay devices \(relayDatabaseSynopsis) --notebook ID",
        summary: "List which device owns each replica id of a notebook",
        details: """
        A replica id is owned by the first device that pushed its own work under it ([SYNC-57]);
        the same list is served at GET …/devices.
        """,
        options: relayDatabaseOptions.union(["notebook"]),
        run: { args, console in
            try args.expect(0, "no positional arguments")
            let id = try notebookOption(args, required: true)!
            let (store, _) = try openRelayStore(args)
            defer { try? store.close() }
            for o in try store.owners(notebook: id) {
                console.out("\(o.replica)  \(o.device)  \(utcDate(milliseconds: o.since))")
            }
            return Exit.ok
        })

    static let relayEpochReset = Command(
        name: "relay epoch reset",
        synopsis: "lnote relay epoch reset \(relayDatabaseSynopsis) [--notebook ID]",
        summary: "Give one notebook (or every notebook) a new epoch, so clients compare clocks",
        details: """
        Clients then exchange clocks at their next sync and push again whatever the relay lacks
        ([SYNC-58]). The relay does this by itself when it opens a database restored from an
        older copy (its change sequence below the high-water mark FILE.sqlite.hwm); run it by
        hand after anything else that may have lost operations. Prints each notebook and its
        new epoch.
        """,
        options: relayDatabaseOptions.union(["notebook"]),
        run: { args, console in
            try args.expect(0, "no positional arguments")
            let (store, _) = try openRelayStore(args)
            defer { try? store.close() }
            if let sign = store.opened.epochsReset { console.err("lnote relay epoch reset: opening: \(sign)") }
            let reset: [(notebook: NotebookID, epoch: UInt64)]
            if let id = try notebookOption(args, required: false) {
                reset = [(id, try store.resetEpoch(notebook: id))]
            } else {
                reset = try store.resetEpochs()
            }
            for r in reset { console.out("\(r.notebook)  epoch \(String(r.epoch, radix: 16))") }
            return Exit.ok
        })

    static let relayQuarantineList = Command(
        name: "relay quarantine list",
        synopsis: "lnote relay quarantine list \(relayDatabaseSynopsis)",
        summary: "List the operations a relay holds that the validator refuses",
        details: """
        One line each: notebook, log (DOC or DOC/PAGE), operation id, and the rule it breaks or
        why it does not decode ([SYNC-60]). A relay of an older version may have stored them;
        clients refuse them. Remove them with `lnote relay quarantine drop`.
        """,
        options: relayDatabaseOptions,
        run: { args, console in
            try args.expect(0, "no positional arguments")
            let (store, _) = try openRelayStore(args)
            defer { try? store.close() }
            for q in try store.quarantine() { console.out(q.description) }
            return Exit.ok
        })

    static let relayQuarantineDrop = Command(
        name: "relay quarantine drop",
        synopsis: "lnote relay quarantine drop \(relayDatabaseSynopsis) [--notebook ID] [--log DOC[/PAGE]] OPID...",
        summary: "Delete operations the validator refuses, by id (16 hex digits, '.', counter)",
        details: """
        Each id must name one operation `relay quarantine list` shows (valid operations are
        never dropped); give --notebook and --log when the id is refused in several logs.
        Nothing is deleted unless every id is found. Prints what was deleted.
        """,
        options: relayDatabaseOptions.union(["notebook", "log"]),
        run: { args, console in
            guard !args.positionals.isEmpty else { throw Arguments.UsageError(message: "expected OPID...") }
            let ids = try args.positionals.map { s -> OpID in
                guard let id = OpID(parsing: s) else {
                    throw Arguments.UsageError(message: "\"\(s)\" is not an operation id (16 hex digits, '.', counter)")
                }
                return id
            }
            let notebook = try notebookOption(args, required: false)
            var log: LogRef?
            if let text = args.option("log") {
                let parts = text.split(separator: "/", omittingEmptySubsequences: false)
                guard (1...2).contains(parts.count), let d = UUID(uuidString: String(parts[0])) else {
                    throw Arguments.UsageError(message: "--log needs DOC or DOC/PAGE (UUIDs), got \"\(text)\"")
                }
                var page: PageID?
                if parts.count == 2 {
                    guard let p = UUID(uuidString: String(parts[1])) else {
                        throw Arguments.UsageError(message: "--log needs DOC or DOC/PAGE (UUIDs), got \"\(text)\"")
                    }
                    page = PageID(p)
                }
                log = LogRef(document: DocumentID(d), page: page)
            }
            let (store, _) = try openRelayStore(args)
            defer { try? store.close() }
            for q in try store.dropQuarantined(ids, notebook: notebook, log: log) { console.out("dropped \(q.description)") }
            return Exit.ok
        })
}
