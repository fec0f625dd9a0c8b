import Foundation
import Synchronization
import LnoteModel
import LnoteStore
import LnoteSync

extension CommandTable {
    static let sync = Command(
        name: "sync",
        synopsis: "lnote sync [FOLDER] [REMOTE] [--token T] [--init] [--ca-file PEM] [--progress] [--watch [--wait SECONDS] [--interval SECONDS]]",
        summary: "Sync a notebook folder with a server (http/https URL) or another folder",
        details: """
        REMOTE is a notebook URL printed by `lnote serve` or `lnote relay notebook create --url`
        (http(s)://HOST:PORT/v1/notebooks/UUID), the path of another notebook folder (a
        mounted drive: no server involved), or the name of a remote saved with `lnote remote
        add` (a name wins over a folder of the same name: write ./NAME for the folder).
        Without REMOTE, the folder's default saved remote; without FOLDER, the current
        directory (`lnote sync` alone: this folder with its default remote). With one
        argument: a URL or the name of a remote saved in the current folder is REMOTE,
        anything else is FOLDER. The token comes from --token; else, for a saved remote, the
        one saved with it ($LNOTE_TOKEN is not sent to a saved remote's server); else, for a
        URL, $LNOTE_TOKEN, or the token saved with a remote of that URL.
        --init creates FOLDER (and REMOTE, when it is a folder) as a new notebook folder when
        it does not exist or is empty, and says so: a first sync onto a new machine or an
        empty drive. Without it, a missing folder is an error that suggests it.
        Only the operations the other side lacks cross; assets travel before the operations
        that reference them. A sync interrupted at any point is completed by the next one.
        Also printed, one line each: forks (one operation id with two contents) and their
        repairs, operations kept in .lnote/quarantine/, new replica ids, and operations the
        logs lost that no peer has sent back yet. Exit status 3 when something needs a
        person: a fork of another replica, an own operation not made again, an operation
        quarantined (unless the log already holds it, or a valid operation in place of
        damaged bytes), or a page whose history could not be fetched.
        --adopt ID  ID is one of this folder's former replica ids (a fork report says so):
                 the operations it holds under ID were made here (the folder was moved, or
                 restored from a backup and then moved, not copied). Forks of ID are then
                 repaired as this folder's own: its versions are made again under its
                 current id, and the remote's are kept under ID, by this sync (or, if it is
                 stopped, the next one that finishes).

        --watch keeps the folder in step until SIGINT or SIGTERM (exit status 0): local
        changes are pushed as soon as they are written (inotify; a poll every 0.5 s where
        inotify is missing), and a server's changes arrive through a request it holds until
        it has something (a long poll of --wait seconds, default 50; servers hold at most
        60); another folder, or a server without long polls, is synced every --interval
        seconds (default 30). It prints a line when it starts and a timestamped line for
        each round that moved something. Failures waiting can fix (no connection, a timeout,
        a server error, the folder open in another process) are retried with a backoff of
        1 s doubling to 60 s; the others (401 or 403: a token refused; 404; 400; the local
        folder missing) stop it with exit status 1.

        The summary counts the operations received and, for a first sync from a relay, those
        the pages installed from its checkpoints hold (a checkpoint brings a page's state, not
        its operations), and the documents that received something.
        While it runs, a progress line on stderr shows the bytes of each answer as they arrive,
        then the documents as they are installed and stored: when stderr is a terminal (not
        with --json or -q), or with --progress (one line per step and per tenth of it when
        stderr is not a terminal; never with -q). $LNOTE_SYNC_MAX_RATE (bytes per second) caps
        how fast answers are received: a trial of a slow link (a request still times out
        after 300 s, so an answer larger than 300 × the rate fails and is retried).

        --json prints the summary as one JSON object on stdout (with --watch, one line of JSON
        per round that moved something): {"remote", "ops_sent", "ops_accepted",
        "ops_received", "ops_applied", "ops_from_checkpoints", "documents_received",
        "assets_sent", "assets_received", "bytes_sent", "bytes_received", "round_trips",
        "pages_from_checkpoints", "ops_healed", "forks", "quarantined", "needs_attention"}
        (counts are integers; needs_attention is true when the exit status is 3).
        """,
        options: ["token", "ca-file", "interval", "wait", "adopt"],
        flags: ["watch", "quiet", "init", "json", "progress"],
        run: { args, console in
            try args.expect(0, max: 2, "[FOLDER] [REMOTE]")
            var adopt: ReplicaID?
            if let text = args.option("adopt") {
                guard let id = ReplicaID(hex: text), id.rawValue != 0 else {
                    throw Arguments.UsageError(message: "--adopt takes a replica id, 16 hex digits (got \"\(text)\")")
                }
                adopt = id
            }
            let target = try await SyncTarget.resolve(args.positionals, initializing: args.flag("init"), console: console)
            let folder = target.folder, remoteSpec = target.location
            if let adopt {
                // Written before the sync, so that a sync stopped half-way resumes the repair.
                try await withNotebook(folder, console: console) { nb in
                    if try await nb.adoptFormerReplica(adopt) {
                        console.err("lnote sync: forks of \(adopt) are taken as this folder's own: this sync repairs those it finds")
                    }
                }
            }
            let token = target.token(option: args.option("token"), environment: ProcessInfo.processInfo.environment["LNOTE_TOKEN"])
            let quiet = args.flag("quiet")
            guard args.flag("watch") else {
                // Progress on a terminal unless the output is for a script; --progress asks for it anywhere.
                let line: SyncProgressLine? = quiet ? nil
                    : console.isTerminal && (args.flag("progress") || !args.flag("json")) ? SyncProgressLine(console: console, mode: .terminal)
                    : args.flag("progress") ? SyncProgressLine(console: console, mode: .lines) : nil
                let report: SyncReport
                do {
                    report = try await SyncRunner.syncOnce(folder: folder, remote: remoteSpec, token: token,
                                                           caFile: args.option("ca-file"), console: console, progress: line)
                } catch {
                    line?.end()
                    throw error
                }
                if args.flag("json") {
                    console.raw(SyncRunner.json(report, remote: remoteSpec).text(.compact) + "\n")
                } else if !quiet {
                    console.out(SyncRunner.describe(report, remote: remoteSpec))
                }
                // What needs a person is printed even with --quiet (on stderr).
                for line in SyncRunner.trust(report) { console.err("lnote sync: \(line)") }
                return report.needsAttention ? Exit.attention : Exit.ok
            }
            let interval = try args.double("interval") ?? 30
            guard interval > 0 else { throw Arguments.UsageError(message: "--interval must be positive") }
            let wait = try args.int("wait") ?? 50
            guard (1...3600).contains(wait) else { throw Arguments.UsageError(message: "--wait must be 1...3600 seconds") }
            return try await SyncRunner.watch(folder: folder, remote: remoteSpec, token: token, caFile: args.option("ca-file"),
                                              options: SyncWatcher.Options(wait: UInt32(wait),
                                                                           interval: .milliseconds(Int64(interval * 1000))),
                                              console: console, quiet: quiet, json: args.flag("json"))
        })
}

/// One sync of a folder with a URL or another folder, opening both only for the sync
/// (so other lnote commands can use the folder in between watch rounds).
enum SyncRunner {
    static func isURL(_ s: String) -> Bool { s.hasPrefix("http://") || s.hasPrefix("https://") }

    /// - Parameters:
    ///   - http: the remote to use for a URL (a watch keeps one); nil: one made for this sync.
    ///   - pushOnly: with nothing to push, do not reach the remote (`SyncSession.pullWithoutPush`).
    ///   - progress: where the sync's progress is drawn; nil: nowhere.
    static func syncOnce(folder: String, remote spec: String, token: String?, caFile: String?,
                         console: Console, progress line: SyncProgressLine?, http: HTTPRemote? = nil,
                         pushOnly: Bool = false) async throws -> SyncReport {
        try requireNotebook(folder)
        let notebook = try await openWaiting(folder)
        if let recovery = notebook.replicaFileRecovery { console.err("lnote: note: \(recovery)") }
        if let change = notebook.replicaChange { console.err("lnote: note: this folder was copied or moved: \(change)") }
        do {
            let report: SyncReport
            var progress: (@Sendable (SyncProgress) -> Void)?
            if let line { progress = { @Sendable p in line.tell(p) } }
            if isURL(spec) {
                let remote = try http ?? makeRemote(spec, token: token, caFile: caFile)
                defer { if http == nil { try? remote.close() } }
                var session = SyncSession(notebook: notebook, remote: remote)
                session.pullWithoutPush = !pushOnly
                report = try await session.run(progress: progress)
            } else {
                try requireNotebook(spec)
                let other = try await openWaiting(spec)
                do {
                    let remote = LocalRemote(key: other.path, endpoint: NotebookEndpoint(notebook: other),
                                             cursorsOutliveProcess: false)
                    var session = SyncSession(notebook: notebook, remote: remote)
                    // A folder on read-only media (a backup): pulled from, nothing sent.
                    let readOnly = mayNotBeWritten(other.path)
                    session.sendsNothing = readOnly != nil
                    report = try await session.run(progress: progress)
                    if let readOnly {
                        console.err("lnote sync: \(spec) may not be written (\(readOnly)): what it holds that \(folder) lacked was "
                                    + "received; \(report.notSent == 0 ? "it lacks nothing" : "\(count(report.notSent, "operation")) it lacks were not sent")")
                    }
                    for (id, e) in await other.refusedDocuments.sorted(by: { $0.key.description < $1.key.description }) {
                        console.err("lnote sync: skipped document \(id): \(e)")  // [PKG-22]
                    }
                    try await other.close()
                } catch let e as LnoteError where e.isReadOnly && (e.path?.hasPrefix(other.path + "/") ?? false) {
                    // The other folder may not be written although it did not look so (a
                    // file without write permission in a writable folder): nothing was sent.
                    try? await other.close()
                    let reason = e.errnoCode.map { String(cString: strerror($0)) } ?? e.message
                    throw LnoteError(.io, "\(spec) may not be written (\(reason)): nothing was sent to it (what this sync "
                                     + "received from it before is stored here). Copy that folder to a writable place and "
                                     + "sync with the copy", path: e.path)
                } catch {
                    try? await other.close()
                    throw error
                }
            }
            // [PKG-22] Documents left out of the sync, on either side, and why.
            for (id, e) in await notebook.refusedDocuments.sorted(by: { $0.key.description < $1.key.description }) {
                console.err("lnote sync: skipped document \(id): \(e)")
            }
            // Ids minted while the sync opened documents ([PKG-56]) are reported with the sync's.
            var out = report
            out.formerReplicas = notebook.previousReplicas
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

    /// Why a folder may not be written (a read-only mount, no write permission), or nil.
    static func mayNotBeWritten(_ path: String) -> String? {
        var fs = statvfs()
        if statvfs(path, &fs) == 0, fs.f_flag & UInt(ST_RDONLY) != 0 { return String(cString: strerror(EROFS)) }
        if access(path, W_OK) != 0, errno == EACCES || errno == EROFS || errno == EPERM { return String(cString: strerror(errno)) }
        return nil
    }

    static func makeRemote(_ spec: String, token: String?, caFile: String?) throws -> HTTPRemote {
        guard let token, !token.isEmpty else {
            throw CLIError("a token is needed for \(spec): pass --token or set LNOTE_TOKEN", code: Exit.usage)
        }
        var options = HTTPRemote.Options(token: token, caFile: caFile)
        options.retry.maxAttempts = 3
        if let text = ProcessInfo.processInfo.environment["LNOTE_SYNC_MAX_RATE"] {
            guard let rate = Int(text), rate > 0 else {
                throw CLIError("LNOTE_SYNC_MAX_RATE must be a whole number of bytes per second (got \"\(text)\")", code: Exit.usage)
            }
            options.maxReceiveBytesPerSecond = rate
        }
        return try HTTPRemote(url: spec, options: options)
    }

    /// Opens a notebook folder, waiting (up to 10 s) while another process has it open: a
    /// watch shares the folder with the commands run beside it, which hold it briefly.
    static func openWaiting(_ folder: String) async throws -> Notebook {
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(10)
        while true {
            do {
                return try await Notebook.open(at: folder)
            } catch let e as LnoteError where e.code == .invalidState && clock.now < deadline {
                try await Task.sleep(for: .milliseconds(5))
            }
        }
    }

    // MARK: - Watching

    /// `lnote sync --watch`: runs a `SyncWatcher` until SIGINT or SIGTERM (exit 0) or a
    /// failure waiting cannot fix (exit 1), printing a line when it starts, a timestamped
    /// line for each round that moved something, and each failure.
    static func watch(folder: String, remote spec: String, token: String?, caFile: String?,
                      options: SyncWatcher.Options, console: Console, quiet: Bool, json: Bool = false) async throws -> Int32 {
        try requireNotebook(folder)
        if !isURL(spec) { try requireNotebook(spec) }
        let signals = Signals.trap()
        let http = isURL(spec) ? try makeRemote(spec, token: token, caFile: caFile) : nil
        defer { try? http?.close() }
        let target = WatchTarget(folder: folder, spec: spec, token: token, caFile: caFile, http: http, console: console)
        let watcher = SyncWatcher(target: target, local: .folders(http == nil ? [folder, spec] : [folder]), options: options)
        // Told once: standard output could not be written (a full disk). The syncs go on (what
        // they keep equal matters more than their lines); standard error says the lines are lost.
        let toldLostOutput = Mutex(false)
        let task = Task {
            await watcher.run { event in
                defer {
                    if let reason = StandardOutput.shared.failure, !toldLostOutput.withLock({ told in defer { told = true }; return told }) {
                        console.err("\(timestamp()) lnote sync: standard output could not be written (\(reason)): "
                                    + "the lines of later rounds are lost; syncing goes on")
                    }
                }
                switch event {
                case .started(let local, let longPolls):
                    let remote = longPolls ? "its changes by long polls of \(options.wait) s"
                                           : "synced every \(options.interval)"
                    console.out("\(timestamp()) watching \(folder) with \(spec): local changes by \(local), \(remote); "
                                + "SIGINT or SIGTERM stops")
                case .synced(let r, let cause):
                    // Watching prints only the rounds that moved something.
                    if json, r.opsSent + r.opsReceived + r.assetsSent + r.assetsReceived > 0 {
                        var o = SyncRunner.json(r, remote: spec)
                        if case .object(var m) = o {
                            m["time"] = .string(timestamp())
                            m["cause"] = .string(cause.rawValue)
                            o = .object(m)
                        }
                        console.raw(o.text(.compact) + "\n")
                    } else if !quiet, r.opsSent + r.opsReceived + r.assetsSent + r.assetsReceived > 0 {
                        console.out("\(timestamp()) \(describe(r, remote: spec)) (\(cause.rawValue))")
                    }
                    for line in trust(r) { console.err("lnote sync: \(line)") }
                case .failed(let e, let wait):
                    console.err("\(timestamp()) lnote sync: \(describeForPeople(e)); retrying in \(wait)")
                case .stopped(let e):
                    console.err("\(timestamp()) lnote sync: \(describeForPeople(e)); stopping: waiting cannot fix this")
                case .longPollsUnavailable(let e):
                    console.err("\(timestamp()) lnote sync: the remote holds no long polls (\(e.message)); "
                                + "syncing every \(options.interval)")
                }
            }
        }
        let received = Mutex<Int32?>(nil)
        Task {
            let s = await signals.wait()
            received.withLock { $0 = s }
            task.cancel()
        }
        let failure = await task.value
        if let signal = received.withLock({ $0 }) {
            console.err("lnote sync: stopped (\(signal == SIGINT ? "SIGINT" : "SIGTERM"))")
            return Exit.ok
        }
        return failure == nil ? Exit.ok : Exit.failure
    }

    /// `2026-12-01T16:53:07.123Z`.
    static func timestamp(_ date: Date = Date()) -> String {
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return f.string(from: date)
    }

    /// What `lnote sync --watch` watches: each call opens the folder for its own duration
    /// (so other lnote commands can use it in between), the HTTP remote is kept.
    struct WatchTarget: SyncWatchTarget {
        let folder: String
        let spec: String
        let token: String?
        let caFile: String?
        let http: HTTPRemote?
        let console: Console

        var supportsLongPolls: Bool { http != nil }

        /// A folder that vanished stops the watch: waiting cannot bring it back.
        private func requireFolders() throws {
            do {
                try requireNotebook(folder)
                if http == nil { try requireNotebook(spec) }
            } catch let e as LnoteError {
                throw SyncWatcher.Stop(e)
            }
        }

        func sync(pushOnly: Bool) async throws -> SyncReport {
            try requireFolders()
            return try await syncOnce(folder: folder, remote: spec, token: token, caFile: caFile, console: console,
                                      progress: nil, http: http, pushOnly: pushOnly)
        }

        private func withSession<T: Sendable>(_ body: (SyncSession) async throws -> T) async throws -> T {
            try requireFolders()
            guard let http else { throw LnoteError(.invalidState, "no long polls with a folder") }
            let notebook = try await openWaiting(folder)
            do {
                let value = try await body(SyncSession(notebook: notebook, remote: http))
                try await notebook.close()
                return value
            } catch {
                try? await notebook.close()
                throw error
            }
        }

        func longPollRequest(wait: UInt32) async throws -> SyncRequest? {
            try await withSession { try await $0.longPollRequest(wait: wait) }
        }

        func send(_ request: SyncRequest) async throws -> SyncResponse {
            guard let http else { throw LnoteError(.invalidState, "no long polls with a folder") }
            return try await http.sync(request)
        }

        func absorb(_ answer: SyncResponse, for request: SyncRequest) async throws -> SyncReport {
            try await withSession { try await $0.absorbLongPoll(answer, for: request) }
        }
    }

    /// The lines of §6 a sync found ([SYNC-56]): forks, repairs, quarantined operations, new
    /// replica ids, rebuilt checkpoints, missing operations.
    static func trust(_ r: SyncReport) -> [String] {
        var out: [String] = []
        for f in r.forks {
            guard !f.own, r.formerReplicas.contains(f.id.replica) else {
                out.append(f.description)
                continue
            }
            // [SYNC-54] This folder wrote under that id before a move or copy minted it a new one.
            out.append(f.description + "; \(f.id.replica) is a former id of this folder: if this folder made that operation "
                       + "(it was moved, not copied), sync again with --adopt \(f.id.replica) to repair it")
        }
        for p in r.repairs { out.append(p.description) }
        for q in r.quarantined {
            out.append("quarantined \(q.operation?.description ?? "an unreadable operation") of log \(q.logDescription): \(q.reason)"
                       + (q.needsAttention ? "" : " (resolved: held where it belongs)"))
        }
        for c in r.replicaChanges { out.append("new \(c)") }
        for w in r.withheldReplicas {
            out.append("operations of replica \(w) not pushed: another device owns that replica; they reach the remote from it")
        }
        for l in r.checkpointsRebuilt { out.append("page \(l) did not match its checkpoint: rebuilt from operations") }
        for l in r.checkpointsRefused { out.append("checkpoint refused by the remote, the sync goes on: \(l)") }
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

    /// The summary line: `synced with URL: sent 0 operations (0 new there), received 7,979
    /// operations (7,979 new here) and 14,738 from checkpoints of 180 pages, in 200 documents, …`.
    static func describe(_ r: SyncReport, remote: String) -> String {
        let g = SyncProgressLine.grouped
        var s = "synced with \(remote): sent \(count(r.opsSent, "operation")) (\(g(r.opsAccepted)) new there), "
        s += "received \(count(r.opsReceived, "operation")) (\(g(r.opsApplied)) new here)"
        // Pages installed whole from a checkpoint bring their state without their operations.
        if r.checkpointsInstalled > 0 {
            s += " and \(g(r.opsFromCheckpoints)) from checkpoints of \(count(r.checkpointsInstalled, "page"))"
        }
        if r.documentsReceived > 0 { s += ", in \(count(r.documentsReceived, "document"))" }
        if r.assetsSent + r.assetsReceived > 0 { s += ", assets ↑\(g(r.assetsSent)) ↓\(g(r.assetsReceived))" }
        if r.bytesSent + r.bytesReceived > 0 { s += ", \(g(r.bytesSent)) bytes ↑ \(g(r.bytesReceived)) bytes ↓" }
        s += ", \(count(r.roundTrips, "round trip"))"
        if r.opsHealed > 0 { s += ", \(count(r.opsHealed, "lost operation")) restored" }
        if !r.forks.isEmpty { s += ", \(count(r.forks.count, "fork"))" }
        return s
    }

    /// "1 operation", "7,979 operations".
    static func count(_ n: Int, _ noun: String) -> String { "\(SyncProgressLine.grouped(n)) \(noun)\(n == 1 ? "" : "s")" }

    /// The summary `--json` prints (the fields `lnote sync --help` lists).
    static func json(_ r: SyncReport, remote: String) -> CanonicalJSON {
        .object([
            "remote": .string(remote),
            "ops_sent": .int(Int64(r.opsSent)), "ops_accepted": .int(Int64(r.opsAccepted)),
            "ops_received": .int(Int64(r.opsReceived)), "ops_applied": .int(Int64(r.opsApplied)),
            "ops_from_checkpoints": .int(Int64(r.opsFromCheckpoints)), "documents_received": .int(Int64(r.documentsReceived)),
            "assets_sent": .int(Int64(r.assetsSent)), "assets_received": .int(Int64(r.assetsReceived)),
            "bytes_sent": .int(Int64(r.bytesSent)), "bytes_received": .int(Int64(r.bytesReceived)),
            "round_trips": .int(Int64(r.roundTrips)), "pages_from_checkpoints": .int(Int64(r.checkpointsInstalled)),
            "ops_healed": .int(Int64(r.opsHealed)), "forks": .int(Int64(r.forks.count)),
            "quarantined": .int(Int64(r.quarantined.count)), "needs_attention": .bool(r.needsAttention),
        ])
    }
}
