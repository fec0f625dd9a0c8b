import Foundation
import Synchronization
import LnoteModel
import LnoteStore
import LnoteSync

extension CommandTable {
    static let sync = Command(
        name: "sync",
        synopsis: "lnote sync FOLDER REMOTE [--token T] [--ca-file PEM] [--watch [--interval SECONDS]]",
        summary: "Sync a notebook folder with a server (http/https URL) or another folder",
        details: """
        REMOTE is a notebook URL printed by `lnote serve` or `lnote relay notebook create`
        (http(s)://HOST:PORT/v1/notebooks/UUID), or the path of another notebook folder (a
        mounted drive: no server involved). The token comes from --token or $LNOTE_TOKEN.
        Only the operations the other side lacks cross; assets travel before the operations
        that reference them. A sync interrupted at any point is completed by the next one.
        --watch keeps syncing when the folder changes and every --interval seconds (default
        30), backing off while the remote is unreachable; stop it with Ctrl-C.
        Also printed, one line each: forks (one operation id with two contents) and their
        repairs, operations kept in .lnote/quarantine/, new replica ids, and operations the
        logs lost that no peer has sent back yet. Exit status 3 when something needs a
        person: a fork of another replica, an own operation not made again, an operation
        quarantined, or a page whose history could not be fetched.
        """,
        options: ["token", "ca-file", "interval"],
        flags: ["watch", "quiet"],
        run: { args, console in
            try args.expect(2, "FOLDER REMOTE")
            let folder = args.positionals[0], remoteSpec = args.positionals[1]
            let token = args.option("token") ?? ProcessInfo.processInfo.environment["LNOTE_TOKEN"]
            let quiet = args.flag("quiet")
            let once: @Sendable () async throws -> SyncReport = {
                try await SyncRunner.syncOnce(folder: folder, remote: remoteSpec, token: token,
                                              caFile: args.option("ca-file"), console: console, quiet: quiet)
            }
            guard args.flag("watch") else {
                let report = try await once()
                if !quiet { console.out(SyncRunner.describe(report, remote: remoteSpec)) }
                // What needs a person is printed even with --quiet (on stderr).
                for line in SyncRunner.trust(report) { console.err("lnote sync: \(line)") }
                return report.needsAttention ? Exit.attention : Exit.ok
            }
            let interval = try args.double("interval") ?? 30
            guard interval > 0 else { throw Arguments.UsageError(message: "--interval must be positive") }
            let watcher = SyncWatcher(interval: .milliseconds(Int64(interval * 1000)),
                                      fingerprint: { SyncWatcher.folderFingerprint(folder) }, sync: once)
            let signals = Signals.trap()
            let task = Task {
                await watcher.run { event in
                    switch event {
                    case .synced(let r):
                        // Watching prints only the syncs that moved something.
                        if !quiet, r.opsSent + r.opsReceived + r.assetsSent + r.assetsReceived > 0 {
                            console.out(SyncRunner.describe(r, remote: remoteSpec))
                        }
                        for line in SyncRunner.trust(r) { console.err("lnote sync: \(line)") }
                    case .failed(let e, let wait):
                        console.err("lnote sync: \(e.description); retrying in \(wait)")
                    }
                }
            }
            let signal = await signals.wait()
            task.cancel()
            _ = await task.value
            console.err("lnote sync: stopped (\(signal == SIGINT ? "SIGINT" : "SIGTERM"))")
            return Exit.ok
        })
}

/// One sync of a folder with a URL or another folder, opening both only for the sync
/// (so other lnote commands can use the folder in between watch rounds).
enum SyncRunner {
    static func isURL(_ s: String) -> Bool { s.hasPrefix("http://") || s.hasPrefix("https://") }

    static func syncOnce(folder: String, remote spec: String, token: String?, caFile: String?,
                         console: Console, quiet: Bool) async throws -> SyncReport {
        try requireNotebook(folder)
        let notebook = try await Notebook.open(at: folder)
        if let change = notebook.replicaChange { console.err("lnote: note: this folder was copied or moved: \(change)") }
        do {
            let report: SyncReport
            let progress: @Sendable (SyncProgress) -> Void = { p in
                guard !quiet else { return }
                if p.phase == .done { console.endProgress(); return }
                console.progress("sync: \(p.phase.rawValue) — ops ↑\(p.opsSent) ↓\(p.opsReceived), bytes ↑\(p.bytesSent) ↓\(p.bytesReceived)")
            }
            if isURL(spec) {
                guard let token, !token.isEmpty else {
                    throw CLIError("a token is needed for \(spec): pass --token or set LNOTE_TOKEN", code: Exit.usage)
                }
                var options = HTTPRemote.Options(token: token, caFile: caFile)
                options.retry.maxAttempts = 3
                let remote = try HTTPRemote(url: spec, options: options)
                defer { try? remote.close() }
                report = try await SyncSession(notebook: notebook, remote: remote).run(progress: progress)
            } else {
                try requireNotebook(spec)
                let other = try await Notebook.open(at: spec)
                do {
                    let remote = LocalRemote(key: other.path, endpoint: NotebookEndpoint(notebook: other),
                                             cursorsOutliveProcess: false)
                    report = try await SyncSession(notebook: notebook, remote: remote).run(progress: progress)
                    try await other.close()
                } catch {
                    try? await other.close()
                    throw error
                }
            }
            // Ids minted while the sync opened documents ([PKG-56]) are reported with the sync's.
            var out = report
            for c in notebook.replicaChanges.dropFirst(notebook.replicaChange == nil ? 0 : 1) where !out.replicaChanges.contains(c) {
                out.replicaChanges.append(c)
            }
            try await notebook.close()
            return out
        } catch {
            try? await notebook.close()
            throw error
        }
    }

    /// The lines of §6 a sync found ([SYNC-56]): forks, repairs, quarantined operations, new
    /// replica ids, rebuilt checkpoints, missing operations.
    static func trust(_ r: SyncReport) -> [String] {
        var out: [String] = []
        for f in r.forks { out.append(f.description) }
        for p in r.repairs { out.append(p.description) }
        for q in r.quarantined {
            out.append("quarantined \(q.operation?.description ?? "an unreadable operation") of log \(q.logDescription): \(q.reason)")
        }
        for c in r.replicaChanges { out.append("new \(c)") }
        for w in r.withheldReplicas {
            out.append("operations of replica \(w) not pushed: another device owns that replica; they reach the remote from it")
        }
        for l in r.checkpointsRebuilt { out.append("page \(l) did not match its checkpoint: rebuilt from operations") }
        for f in r.checkpointFailures { out.append("a page's history could not be fetched: \(f)") }
        for m in r.missingOperations {
            let log = m.page.map { "\(m.document)/\($0)" } ?? "\(m.document)"
            out.append("log \(log) still lacks \(m.missing.count) operation\(m.missing.count == 1 ? "" : "s") its state holds "
                + "(lost to damage; no peer sent them yet): \(m.missing)")
        }
        if r.repairs.contains(where: { $0.pending > 0 }) {
            out.append("own operations wait in .lnote/quarantine/ to be made again: nothing was lost; lnote verify lists them")
        }
        return out
    }

    static func describe(_ r: SyncReport, remote: String) -> String {
        var s = "synced with \(remote): sent \(r.opsSent) ops (\(r.opsAccepted) new there), "
        s += "received \(r.opsReceived) ops (\(r.opsApplied) new here)"
        if r.assetsSent + r.assetsReceived > 0 { s += ", assets ↑\(r.assetsSent) ↓\(r.assetsReceived)" }
        if r.bytesSent + r.bytesReceived > 0 { s += ", \(r.bytesSent) bytes ↑ \(r.bytesReceived) bytes ↓" }
        s += ", \(r.roundTrips) round trip\(r.roundTrips == 1 ? "" : "s")"
        if r.opsHealed > 0 { s += ", \(r.opsHealed) lost op\(r.opsHealed == 1 ? "" : "s") restored" }
        if !r.forks.isEmpty { s += ", \(r.forks.count) fork\(r.forks.count == 1 ? "" : "s")" }
        return s
    }
}
